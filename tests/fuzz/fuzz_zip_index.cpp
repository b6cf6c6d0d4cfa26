// libFuzzer target: the zip central-directory reader (src/formats/zip_index.h)
// that guards LibTorch's zip reader. Any input must give entries or nd::Error.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "formats/zip_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto entries = nd::formats::read_zip_index(data, size, "fuzz.pt");
    (void)entries;
  } catch (const nd::Error&) {
  }
  return 0;
}
