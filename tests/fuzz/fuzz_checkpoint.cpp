// libFuzzer target: the checkpoint reader (src/formats/checkpoint.h) on top of
// the restricted pickle VM: where the state_dict and the optimizer state sit
// in a torch.save checkpoint, and Hugging Face shard indexes (JSON). Any input
// must give a value or nd::Error; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "formats/checkpoint.h"
#include "formats/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The same bytes as a shard index and as a checkpoint's data.pkl.
  try {
    (void)nd::formats::parse_shard_index(std::string_view(reinterpret_cast<const char*>(data), size),
                                         "fuzz.index.json");
  } catch (const nd::Error&) {
  }
  try {
    (void)nd::formats::step_from_name(std::string_view(reinterpret_cast<const char*>(data), size < 256 ? size : 256));
    const nd::formats::PickleValue v = nd::formats::parse_torch_pickle(data, size, "fuzz.ckpt (data.pkl)");
    try {
      (void)nd::formats::find_state_dict(v, "fuzz.ckpt");
    } catch (const nd::Error&) {
    }
    (void)nd::formats::find_optimizer_state(v, "fuzz.ckpt");
  } catch (const nd::Error&) {
  }
  return 0;
}
