// libFuzzer target: safetensors header parsing (src/formats/safetensors.h) on a
// whole file in memory. Any input must give a header or nd::Error.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)nd::formats::looks_like_safetensors(data, size, size);
    const nd::formats::SafetensorsHeader h = nd::formats::parse_safetensors(data, size, "fuzz.safetensors");
    (void)h;
  } catch (const nd::Error&) {
  }
  return 0;
}
