// Synthesized inputs for --input-shape (no batch file at hand).
//
// Values follow the spec (src/formats/input_spec.h): floating types draw from
// the standard normal distribution or uniformly from [LOW, HIGH); integer
// types and bool draw uniform integers from [LOW, HIGH) (default 0..2);
// LOW..LOW fills the tensor with LOW. Draws use a CPU generator seeded by the
// caller, so the same --seed gives the same tensors on every run and machine.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

#include "formats/input_spec.h"

namespace nd {

/// One tensor for `spec`, drawn from `gen` (a CPU generator). Several inputs
/// drawn in turn from one generator are repeatable as a whole.
at::Tensor synthesize_input(const formats::InputShapeSpec& spec, at::Generator& gen);

/// The same with a fresh CPU generator seeded with `seed`.
at::Tensor synthesize_input(const formats::InputShapeSpec& spec, uint64_t seed);

/// A fresh CPU generator seeded with `seed` (for drawing several inputs).
at::Generator make_input_generator(uint64_t seed);

}  // namespace nd
