#include "model/synth_inputs.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "model/batch_file.h"

namespace nd {

at::Generator make_input_generator(uint64_t seed) {
  return at::detail::createCPUGenerator(seed);
}

at::Tensor synthesize_input(const formats::InputShapeSpec& spec, at::Generator& gen) {
  const at::ScalarType st = *scalar_type_of(spec.dtype);  // specs only name LibTorch 1.13 types
  const at::IntArrayRef sizes(spec.dims);
  if (spec.constant()) {
    return at::full(sizes, spec.low, at::TensorOptions().dtype(st));
  }
  if (formats::dtype_is_integral(spec.dtype)) {
    const auto low = spec.has_range ? static_cast<int64_t>(spec.low) : 0;
    const auto high = spec.has_range ? static_cast<int64_t>(spec.high) : 2;
    return at::randint(low, high, sizes, gen, at::TensorOptions().dtype(at::kLong)).to(st);
  }
  // Draw in float32 (float64 for float64): half-precision CPU kernels are
  // missing in LibTorch 1.13, and the values then match across dtypes.
  const at::ScalarType draw = st == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor t;
  if (spec.has_range) {
    t = at::empty(sizes, at::TensorOptions().dtype(draw));
    t.uniform_(spec.low, spec.high, gen);
  } else {
    t = at::randn(sizes, gen, at::TensorOptions().dtype(draw));
  }
  return st == draw ? t : t.to(st);
}

at::Tensor synthesize_input(const formats::InputShapeSpec& spec, uint64_t seed) {
  at::Generator gen = make_input_generator(seed);
  return synthesize_input(spec, gen);
}

}  // namespace nd
