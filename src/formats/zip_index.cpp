#include "formats/zip_index.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "formats/text.h"

namespace nd::formats {

namespace {

constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr std::size_t kEocdSize = 22;
constexpr std::size_t kMaxComment = 0xFFFF;
constexpr uint64_t kMaxCentralDirectory = 64u << 20;

[[noreturn]] void fail_zip(std::string_view source, const std::string& what) { throw_load_error(error_kind::kInputLoad, source, what); }

std::vector<uint8_t> read_exact(const ReadAt& read, uint64_t offset, std::size_t n,
                                std::string_view source, const char* what) {
  std::vector<uint8_t> buf(n);
  if (n != 0 && read(offset, buf.data(), n) != n) {
    fail_zip(source, std::string("could not read the zip ") + what + " (truncated archive?)");
  }
  return buf;
}

}  // namespace

std::vector<ZipEntry> read_zip_index(const ReadAt& read, uint64_t file_size, std::string_view source) {
  const std::string truncated =
      "is not a complete zip archive (no end-of-central-directory record): the file is truncated or corrupt";
  if (file_size < kEocdSize) fail_zip(source, truncated);

  // The end-of-central-directory record is in the last 22 + 65535 bytes.
  const std::size_t tail_size = static_cast<std::size_t>(std::min<uint64_t>(file_size, kEocdSize + kMaxComment));
  const uint64_t tail_start = file_size - tail_size;
  const std::vector<uint8_t> tail = read_exact(read, tail_start, tail_size, source, "end record");
  std::size_t eocd = std::string::npos;
  for (std::size_t i = tail_size - kEocdSize + 1; i-- > 0;) {
    if (little_endian(&tail[i], 4) == kEocdSig && i + kEocdSize + little_endian(&tail[i + 20], 2) <= tail_size) {
      eocd = i;
      break;
    }
  }
  if (eocd == std::string::npos) fail_zip(source, truncated);
  const uint8_t* e = &tail[eocd];
  const uint64_t eocd_offset = tail_start + eocd;
  uint64_t entries = little_endian(e + 10, 2);
  uint64_t cd_size = little_endian(e + 12, 4);
  uint64_t cd_offset = little_endian(e + 16, 4);

  if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
    // zip64: a locator right before the record points at the zip64 end record.
    if (eocd_offset < 20) fail_zip(source, "zip64 archive without its zip64 locator");
    const auto loc = read_exact(read, eocd_offset - 20, 20, source, "zip64 locator");
    if (little_endian(loc.data(), 4) != kZip64LocatorSig) fail_zip(source, "zip64 archive without its zip64 locator");
    const uint64_t z_offset = little_endian(loc.data() + 8, 8);
    if (z_offset > file_size || file_size - z_offset < 56) fail_zip(source, "zip64 end record lies outside the file");
    const auto z = read_exact(read, z_offset, 56, source, "zip64 end record");
    if (little_endian(z.data(), 4) != kZip64EocdSig) fail_zip(source, "corrupt zip64 end record");
    entries = little_endian(z.data() + 32, 8);
    cd_size = little_endian(z.data() + 40, 8);
    cd_offset = little_endian(z.data() + 48, 8);
  }
  if (cd_offset > file_size || cd_size > file_size - cd_offset) {
    fail_zip(source, "zip central directory lies outside the file (" + std::to_string(file_size) +
                     " bytes): the archive is truncated or corrupt");
  }
  if (cd_size > kMaxCentralDirectory) fail_zip(source, "zip central directory larger than 64 MiB");
  if (entries > cd_size / 46) fail_zip(source, "zip central directory claims more entries than it can hold");

  const auto cd = read_exact(read, cd_offset, static_cast<std::size_t>(cd_size), source, "central directory");
  std::vector<ZipEntry> out;
  out.reserve(static_cast<std::size_t>(entries));
  std::size_t pos = 0;
  for (uint64_t k = 0; k < entries; ++k) {
    if (cd.size() - pos < 46 || little_endian(&cd[pos], 4) != kCentralSig) {
      fail_zip(source, "corrupt zip central directory (entry " + std::to_string(k) + ")");
    }
    const uint8_t* h = &cd[pos];
    ZipEntry z;
    z.method = static_cast<uint16_t>(little_endian(h + 10, 2));
    z.crc32 = static_cast<uint32_t>(little_endian(h + 16, 4));
    z.compressed_size = little_endian(h + 20, 4);
    z.uncompressed_size = little_endian(h + 24, 4);
    const std::size_t name_len = static_cast<std::size_t>(little_endian(h + 28, 2));
    const std::size_t extra_len = static_cast<std::size_t>(little_endian(h + 30, 2));
    const std::size_t comment_len = static_cast<std::size_t>(little_endian(h + 32, 2));
    z.local_header_offset = little_endian(h + 42, 4);
    if (cd.size() - pos - 46 < name_len + extra_len + comment_len) {
      fail_zip(source, "corrupt zip central directory (entry " + std::to_string(k) + " overruns it)");
    }
    z.name.assign(reinterpret_cast<const char*>(h + 46), name_len);
    // zip64 extended information: 64-bit values for the fields saturated above.
    const uint8_t* x = h + 46 + name_len;
    std::size_t xp = 0;
    while (extra_len - xp >= 4) {
      const uint64_t id = little_endian(x + xp, 2);
      const std::size_t len = static_cast<std::size_t>(little_endian(x + xp + 2, 2));
      if (extra_len - xp - 4 < len) break;
      if (id == 0x0001) {
        std::size_t f = 0;
        auto take = [&](uint64_t* field) {
          if (*field != 0xFFFFFFFF) return;
          if (len - f < 8) fail_zip(source, "corrupt zip64 field in entry '" + z.name + "'");
          *field = little_endian(x + xp + 4 + f, 8);
          f += 8;
        };
        take(&z.uncompressed_size);
        take(&z.compressed_size);
        take(&z.local_header_offset);
      }
      xp += 4 + len;
    }
    pos += 46 + name_len + extra_len + comment_len;

    const std::string where = "zip entry '" + z.name + "'";
    if (z.local_header_offset > cd_offset || z.compressed_size > cd_offset - z.local_header_offset) {
      fail_zip(source, where + " lies outside the archive data: the file is truncated or corrupt");
    }
    if (z.method == 0) {
      if (z.uncompressed_size != z.compressed_size) {
        fail_zip(source, where + " is stored but its sizes disagree");
      }
    } else if (z.method == 8) {
      if (z.uncompressed_size / 1032 > z.compressed_size + 1) {
        fail_zip(source, where + " claims an impossible compression ratio");
      }
    } else {
      fail_zip(source, where + " uses zip compression method " + std::to_string(z.method) +
                       " (torch.save writes stored entries)");
    }
    out.push_back(std::move(z));
  }
  return out;
}

std::vector<ZipEntry> read_zip_index(const uint8_t* data, std::size_t size, std::string_view source) {
  ReadAt read = [data, size](uint64_t offset, void* out, std::size_t n) -> std::size_t {
    if (offset > size) return 0;
    const std::size_t k = std::min<std::size_t>(n, size - static_cast<std::size_t>(offset));
    if (k != 0) std::memcpy(out, data + offset, k);
    return k;
  };
  return read_zip_index(read, size, source);
}

uint64_t little_endian(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int k = 0; k < n; ++k) v |= static_cast<uint64_t>(p[k]) << (8 * k);
  return v;
}

}  // namespace nd::formats
