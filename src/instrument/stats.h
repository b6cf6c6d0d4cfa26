// Per-tensor statistics in one pass over the data.
#pragma once

#include <cstdint>
#include <limits>

#include <ATen/ATen.h>

namespace nd {

/// Largest finite IEEE 754 half-precision value.
inline constexpr double kFp16Max = 65504.0;

/// Summary of one tensor (or of several, merged). min/max/sum/sumsq are over
/// finite elements only; counts cover all elements.
struct TensorStats {
  int64_t numel = 0;
  int64_t nan = 0;
  int64_t inf = 0;
  int64_t beyond_fp16 = 0;  ///< finite elements with abs > 65504
  int64_t zeros = 0;        ///< exact zeros
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double sum = 0.0;
  double sumsq = 0.0;

  void merge(const TensorStats& o);
  int64_t finite() const { return numel - nan - inf; }
  int64_t nonfinite() const { return nan + inf; }
  double absmax() const;
  double mean() const;
  double rms() const;
  double std() const;
  /// L2 norm over finite elements.
  double l2() const;
};

/// Statistics of `t` (any floating dtype, any device). CPU contiguous
/// float32/float64/float16/bfloat16 tensors: one read of the data, parallel
/// across intra-op threads, no copy. Other tensors: ATen reductions (the
/// result is read back to the host, one sync). Integer and bool tensors are
/// measured as their float values (one copy).
TensorStats compute_stats(const at::Tensor& t);

}  // namespace nd
