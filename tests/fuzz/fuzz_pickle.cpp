// libFuzzer target: the restricted pickle VM (src/formats/pickle.h).
// Any input must give a value or nd::Error; anything else (a crash, another
// exception, a leak, a huge allocation) is a bug.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "formats/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nd::formats::PickleValue v = nd::formats::parse_torch_pickle(data, size, "fuzz.pt (data.pkl)");
    (void)v;
  } catch (const nd::Error&) {
  }
  return 0;
}
