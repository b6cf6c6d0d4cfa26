// --input-shape specs: synthesized inputs when no batch file is at hand.
//
// Grammar:   [NAME=]DIMS[:DTYPE][:LOW..HIGH]
//   NAME     a Python identifier: forward's parameter name (keyword input);
//            without it the spec is positional, in the order given.
//   DIMS     positive integers joined by 'x': 4x3x64x64, 2x16, 8
//   DTYPE    float32 (default), float64, float16, bfloat16, int64, int32,
//            int16, int8, uint8, bool (PyTorch aliases float, double, half,
//            long, int, short are accepted too)
//   LOW..HIGH  value range. Floating types: uniform in [LOW, HIGH).
//            Integer types and bool: uniform integers in [LOW, HIGH), like
//            torch.randint (input_ids=2x16:int64:0..1000 for a vocabulary of
//            1000). LOW..LOW (equal bounds) means every element is LOW, for any
//            dtype: attention_mask=2x16:int64:1..1 is all ones.
// Defaults without a range: floating types draw from the standard normal
// distribution (mean 0, std 1); integer types draw from 0..2 (zeros and ones);
// bool draws false/true.
// Examples: 4x3x64x64   x=4x3x64x64:float32:0..1   input_ids=2x16:int64:0..1000
//           attention_mask=2x16:int64:1..1   x=8x16:-1..1 (dtype defaults to float32)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/dtype.h"

namespace nd::formats {

struct InputShapeSpec {
  std::string text;                 ///< the spec as given (for messages)
  std::string name;                 ///< empty: positional
  std::vector<int64_t> dims;
  DType dtype = DType::kFloat32;
  bool has_range = false;           ///< false: the dtype's default distribution
  double low = 0.0;                 ///< range [low, high); low == high: constant
  double high = 0.0;

  /// True when every element is the same value (low == high).
  bool constant() const { return has_range && low == high; }
};

/// Largest number of elements a spec may ask for (2^30, 4 GiB of float32).
inline constexpr int64_t kMaxSpecElements = int64_t{1} << 30;

/// Parses one spec. Throws nd::Error (kind usage, exit 2) naming the spec and
/// what was expected.
InputShapeSpec parse_input_shape_spec(std::string_view spec);

}  // namespace nd::formats
