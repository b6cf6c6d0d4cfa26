// A zip of stored entries built in memory, as torch.save and
// torch.export.save write them (without data alignment; crc not filled), or
// of deflated entries (raw deflate with their CRC-32, as a zip tool re-packs
// them): the archives the torch-free readers' unit tests feed them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <zlib.h>

namespace ndtest {

/// Appends the `n` low bytes of `v`, little-endian.
inline void put_le(std::string& s, uint64_t v, int n) {
  for (int k = 0; k < n; ++k) s.push_back(static_cast<char>(v >> (8 * k)));
}

/// `data` as raw deflate (no zlib header), as zip's method 8 stores it.
inline std::string raw_deflate(const std::string& data) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(&out[0]);
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

/// Local headers, central directory and end record for `files` (name, data),
/// stored, or deflated with their CRC-32 when `deflated`.
inline std::string make_zip(const std::vector<std::pair<std::string, std::string>>& files, bool deflated = false) {
  std::string out;
  std::string cd;
  for (const auto& [name, raw] : files) {
    const std::string data = deflated ? raw_deflate(raw) : raw;
    const uint64_t crc = deflated ? crc32(0L, reinterpret_cast<const Bytef*>(raw.data()), static_cast<uInt>(raw.size())) : 0;
    const int method = deflated ? 8 : 0;
    const uint64_t offset = out.size();
    put_le(out, 0x04034b50, 4);
    put_le(out, 20, 2); put_le(out, 0, 2); put_le(out, method, 2);  // version, flags, method
    put_le(out, 0, 4);                                          // time, date
    put_le(out, crc, 4);                                        // crc (stored: not filled)
    put_le(out, data.size(), 4); put_le(out, raw.size(), 4);
    put_le(out, name.size(), 2); put_le(out, 0, 2);
    out += name + data;
    put_le(cd, 0x02014b50, 4);
    put_le(cd, 20, 2); put_le(cd, 20, 2); put_le(cd, 0, 2); put_le(cd, method, 2);
    put_le(cd, 0, 4); put_le(cd, crc, 4);
    put_le(cd, data.size(), 4); put_le(cd, raw.size(), 4);
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
