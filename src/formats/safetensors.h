// The header of a .safetensors file, without LibTorch.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON (an object:
// tensor name -> {"dtype", "shape", "data_offsets": [begin, end]}, plus an
// optional "__metadata__" object of strings), then the data region. Offsets
// are relative to the start of the data region; the tensors must tile it
// exactly (no gaps, no overlaps, nothing after the last one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "formats/dtype.h"

namespace nd::formats {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  ///< byte offset in the data region
  uint64_t end = 0;    ///< one past the last byte
};

struct SafetensorsHeader {
  uint64_t data_start = 0;  ///< file offset of the data region (8 + N)
  std::vector<SafetensorsEntry> tensors;  ///< in the header's order
  std::map<std::string, std::string> metadata;  ///< "__metadata__" (informational)
};

/// Largest header accepted (the safetensors library's own limit).
inline constexpr uint64_t kSafetensorsMaxHeader = 100u << 20;

/// True when `prefix` (the first bytes of a file) looks like safetensors: a
/// plausible header length for `file_size` and a '{' after it.
bool looks_like_safetensors(const uint8_t* prefix, std::size_t prefix_size, uint64_t file_size);

/// Reads the header length from the first 8 bytes and checks it against
/// `file_size`. Throws nd::Error (input_load) naming `source`.
uint64_t safetensors_header_length(const uint8_t* first8, std::size_t size, uint64_t file_size,
                                   std::string_view source);

/// Parses the JSON header (the N bytes after the length) of a file of
/// `file_size` bytes and validates every entry against the data region.
/// Throws nd::Error (input_load) naming `source` and the tensor.
SafetensorsHeader parse_safetensors_header(const uint8_t* json, std::size_t json_size,
                                           uint64_t file_size, std::string_view source);

/// Convenience for a whole file in memory: length, then header.
SafetensorsHeader parse_safetensors(const uint8_t* data, std::size_t size, std::string_view source);

}  // namespace nd::formats
