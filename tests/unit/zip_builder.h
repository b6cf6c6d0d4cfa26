// A zip of stored entries built in memory, as torch.save and
// torch.export.save write them (without data alignment; crc not filled):
// the archives the torch-free readers' unit tests feed them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ndtest {

/// Appends the `n` low bytes of `v`, little-endian.
inline void put_le(std::string& s, uint64_t v, int n) {
  for (int k = 0; k < n; ++k) s.push_back(static_cast<char>(v >> (8 * k)));
}

/// Local headers, central directory and end record for `files` (name, data).
inline std::string make_zip(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  std::string cd;
  for (const auto& [name, data] : files) {
    const uint64_t offset = out.size();
    put_le(out, 0x04034b50, 4);
    put_le(out, 20, 2); put_le(out, 0, 2); put_le(out, 0, 2);  // version, flags, method stored
    put_le(out, 0, 4);                                     // time, date
    put_le(out, 0, 4);                                     // crc (not checked here)
    put_le(out, data.size(), 4); put_le(out, data.size(), 4);
    put_le(out, name.size(), 2); put_le(out, 0, 2);
    out += name + data;
    put_le(cd, 0x02014b50, 4);
    put_le(cd, 20, 2); put_le(cd, 20, 2); put_le(cd, 0, 2); put_le(cd, 0, 2);
    put_le(cd, 0, 4); put_le(cd, 0, 4);
    put_le(cd, data.size(), 4); put_le(cd, data.size(), 4);
    put_le(cd, name.size(), 2); put_le(cd, 0, 2); put_le(cd, 0, 2);
    put_le(cd, 0, 2); put_le(cd, 0, 2); put_le(cd, 0, 4);
    put_le(cd, offset, 4);
    cd += name;
  }
  const uint64_t cd_offset = out.size();
  out += cd;
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 2); put_le(out, 0, 2);
  put_le(out, files.size(), 2); put_le(out, files.size(), 2);
  put_le(out, cd.size(), 4); put_le(out, cd_offset, 4);
  put_le(out, 0, 2);
  return out;
}

}  // namespace ndtest
