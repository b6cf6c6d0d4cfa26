// libFuzzer target: --input-shape spec parsing (src/formats/input_spec.h).
// Any input must give a spec or nd::Error of kind usage.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "formats/input_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto spec = nd::formats::parse_input_shape_spec(
        std::string_view(reinterpret_cast<const char*>(data), size));
    if (spec.dims.empty() || (spec.has_range && spec.low > spec.high)) std::abort();
  } catch (const nd::Error& e) {
    if (e.kind() != nd::error_kind::kUsage) std::abort();
  }
  return 0;
}
