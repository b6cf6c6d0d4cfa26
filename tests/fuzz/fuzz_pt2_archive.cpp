// libFuzzer target: the torch.export .pt2 reader (src/formats/pt2_archive.h):
// zip layout, program JSON, payload configs, and the torch.save records inside
// (sample inputs). Any input must give an archive or nd::Error.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "formats/pt2_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto a = nd::formats::read_pt2_archive(data, size, "fuzz.pt2");
    if (!a.sample_inputs.empty()) {
      auto read = [data, size](uint64_t off, void* out, std::size_t n) -> std::size_t {
        if (off > size) return 0;
        const std::size_t k = n < size - off ? n : static_cast<std::size_t>(size - off);
        for (std::size_t i = 0; i < k; ++i) static_cast<uint8_t*>(out)[i] = data[off + i];
        return k;
      };
      const auto bytes = nd::formats::read_zip_record(read, size, a.entries.at(a.sample_inputs), "fuzz.pt2", 1 << 24);
      (void)nd::formats::parse_torch_save_bytes(bytes.data(), bytes.size(), "fuzz.pt2 (sample inputs)");
    }
  } catch (const nd::Error&) {
  }
  return 0;
}
