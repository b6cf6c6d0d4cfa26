// The central directory of a zip archive (torch.save's container), without
// LibTorch. The batch loader checks it before handing the file to LibTorch's
// PyTorchStreamReader: a truncated or hostile archive becomes a clear
// nd::Error instead of a LibTorch exception or a huge allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace nd::formats {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  ///< 0 stored, 8 deflate
  uint32_t crc32 = 0;   ///< CRC-32 of the uncompressed bytes, as the central directory records it
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t local_header_offset = 0;
};

/// Reads up to `n` bytes at `offset` into `out`; returns the count read.
using ReadAt = std::function<std::size_t(uint64_t offset, void* out, std::size_t n)>;

/// Lists the entries of a zip archive of `file_size` bytes. Validates that
/// every entry lies inside the file, that stored entries are not larger than
/// they claim, and that deflated ones expand at most 1032x (deflate's limit).
/// Supports zip64. Throws nd::Error (input_load) naming `source`.
std::vector<ZipEntry> read_zip_index(const ReadAt& read, uint64_t file_size, std::string_view source);

/// The same over a buffer in memory (for tests and fuzzing).
std::vector<ZipEntry> read_zip_index(const uint8_t* data, std::size_t size, std::string_view source);

/// The unsigned little-endian integer of `n` bytes (1..8) at `p`, as zip
/// headers store their fields.
uint64_t little_endian(const uint8_t* p, int n);

}  // namespace nd::formats
