#include "formats/safetensors.h"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/text.h"

namespace nd::formats {

namespace {

[[noreturn]] void fail_safetensors(std::string_view source, const std::string& what) { throw_load_error(error_kind::kInputLoad, source, what); }

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int k = 0; k < 8; ++k) v |= static_cast<uint64_t>(p[k]) << (8 * k);
  return v;
}

// Deepest bracket nesting outside strings; stops counting past `limit`.
std::size_t json_depth(const uint8_t* p, std::size_t n, std::size_t limit) {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t c = p[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::string dtype_list() {
  return "BOOL, U8, I8, I16, I32, I64, F16, BF16, F32, F64";
}

}  // namespace

bool looks_like_safetensors(const uint8_t* prefix, std::size_t prefix_size, uint64_t file_size) {
  if (prefix_size < 9 || file_size < 10) return false;
  const uint64_t n = read_u64_le(prefix);
  if (n < 2 || n > file_size - 8 || n > kSafetensorsMaxHeader) return false;
  return prefix[8] == '{';
}

uint64_t safetensors_header_length(const uint8_t* first8, std::size_t size, uint64_t file_size,
                                   std::string_view source) {
  if (size < 8 || file_size < 8) {
    fail_safetensors(source, "safetensors file is " + std::to_string(file_size) +
                     " bytes, shorter than its 8-byte header length");
  }
  const uint64_t n = read_u64_le(first8);
  if (n > file_size - 8) {
    fail_safetensors(source, "safetensors header length " + std::to_string(n) + " exceeds the file size (" +
                     std::to_string(file_size) + " bytes): truncated or not a safetensors file");
  }
  if (n > kSafetensorsMaxHeader) {
    fail_safetensors(source, "safetensors header length " + std::to_string(n) + " exceeds the 100 MiB limit");
  }
  if (n < 2) fail_safetensors(source, "safetensors header length " + std::to_string(n) + " is too short for JSON");
  return n;
}

SafetensorsHeader parse_safetensors_header(const uint8_t* json, std::size_t json_size,
                                           uint64_t file_size, std::string_view source) {
  SafetensorsHeader out;
  out.data_start = 8 + static_cast<uint64_t>(json_size);
  if (file_size < out.data_start) {
    fail_safetensors(source, "safetensors header runs past the end of the file");
  }
  const uint64_t data_size = file_size - out.data_start;

  constexpr std::size_t kMaxDepth = 16;
  if (json_depth(json, json_size, kMaxDepth) > kMaxDepth) {
    fail_safetensors(source, "safetensors header nests JSON deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(json, json + json_size);
  } catch (const nlohmann::json::exception& e) {
    fail_safetensors(source, std::string("safetensors header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object()) {
    fail_safetensors(source, "safetensors header is a JSON " + std::string(header.type_name()) + ", not an object");
  }

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& entry = it.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) fail_safetensors(source, "safetensors \"__metadata__\" is not an object");
      for (auto m = entry.begin(); m != entry.end(); ++m) {
        if (m.value().is_string()) out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    auto bad = [&](const std::string& what) { fail_safetensors(source, where + ": " + what); };
    if (!entry.is_object()) bad("entry is not an object");
    SafetensorsEntry e;
    e.name = name;

    auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string()) bad("missing \"dtype\" string");
    const auto dtype = dtype_from_safetensors(dt->get<std::string>());
    if (!dtype) {
      bad("unknown dtype \"" + dt->get<std::string>() + "\" (expected one of " + dtype_list() + ")");
    }
    e.dtype = *dtype;

    auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array()) bad("missing \"shape\" array");
    if (shape->size() > 64) bad("shape has more than 64 dimensions");
    uint64_t numel = 1;
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned()) bad("shape holds " + d.dump() + ", not a non-negative integer");
      const auto v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) bad("shape dimension too large");
      e.shape.push_back(static_cast<int64_t>(v));
      if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / v) bad("shape has too many elements");
      numel *= v;
    }

    auto offs = entry.find("data_offsets");
    if (offs == entry.end() || !offs->is_array() || offs->size() != 2 ||
        !(*offs)[0].is_number_unsigned() || !(*offs)[1].is_number_unsigned()) {
      bad("\"data_offsets\" is not [begin, end] with non-negative integers");
    }
    e.begin = (*offs)[0].get<uint64_t>();
    e.end = (*offs)[1].get<uint64_t>();
    if (e.begin > e.end) bad("data_offsets begin " + std::to_string(e.begin) + " > end " + std::to_string(e.end));
    if (e.end > data_size) {
      bad("data_offsets end " + std::to_string(e.end) + " is past the data region (" +
          std::to_string(data_size) + " bytes): the file is truncated");
    }
    const uint64_t item = dtype_itemsize(e.dtype);
    if (numel > std::numeric_limits<uint64_t>::max() / item || numel * item != e.end - e.begin) {
      bad("shape and dtype need " +
          (numel > std::numeric_limits<uint64_t>::max() / item ? std::string("too many")
                                                               : std::to_string(numel * item)) +
          " bytes but data_offsets span " + std::to_string(e.end - e.begin));
    }
    out.tensors.push_back(std::move(e));
  }

  // The tensors must tile the data region: sorted by offset, each starts where
  // the previous one ended, and the last one ends at the end of the file.
  std::vector<const SafetensorsEntry*> order;
  for (const auto& e : out.tensors) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t cursor = 0;
  for (const SafetensorsEntry* e : order) {
    if (e->begin < cursor) {
      fail_safetensors(source, "tensor '" + e->name + "': data_offsets [" + std::to_string(e->begin) + ", " +
                       std::to_string(e->end) + ") overlap the previous tensor (which ends at " +
                       std::to_string(cursor) + ")");
    }
    if (e->begin > cursor) {
      fail_safetensors(source, "tensor '" + e->name + "': data_offsets begin at " + std::to_string(e->begin) +
                       ", leaving a gap after byte " + std::to_string(cursor) + " of the data region");
    }
    cursor = e->end;
  }
  if (cursor != data_size) {
    fail_safetensors(source, "safetensors data region holds " + std::to_string(data_size) +
                     " bytes but the tensors cover " + std::to_string(cursor) +
                     " (trailing bytes or a corrupt header)");
  }
  return out;
}

SafetensorsHeader parse_safetensors(const uint8_t* data, std::size_t size, std::string_view source) {
  const uint64_t n = safetensors_header_length(data, size, size, source);
  return parse_safetensors_header(data + 8, static_cast<std::size_t>(n), size, source);
}

}  // namespace nd::formats
