// Per-tensor statistics in one pass over the data.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

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
  int64_t neg_inf = 0;      ///< of `inf`, the -inf elements (an additive mask's or masked_fill's -inf)
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

/// The statistics of `t` as a float64 tensor of kPackedStats values on t's
/// device (nan, nan+inf, beyond_fp16, zeros, min, max, sum, sumsq, -inf;
/// min/max/sum/sumsq over finite elements), computed with ATen reductions and not read back:
/// a caller collects many and reads them once (unpack_stats).
at::Tensor stats_on_device(const at::Tensor& t);
/// How many values stats_on_device packs per tensor.
inline constexpr int64_t kPackedStats = 9;
/// The TensorStats of one row of stats_on_device's values (host memory) for
/// a tensor of `numel` elements.
TensorStats unpack_stats(const double* v, int64_t numel);

/// Softmax statistics of logits along one axis, summed over rows. Logits at
/// or below -1e4 and NaN are treated as masked out (attention masks); a row
/// counts when at least two of its entries are not masked.
struct SoftmaxStats {
  int64_t rows = 0;         ///< rows with >= 2 unmasked logits
  int64_t onehot_rows = 0;  ///< of those, rows whose largest probability is > 0.99
  int64_t row_len_max = 0;  ///< most unmasked logits in one row
  double max_prob_sum = 0;  ///< sum over counted rows of the largest probability
  double entropy_sum = 0;   ///< sum over counted rows of the entropy (nats)
  double logit_absmax = 0;  ///< largest |logit| among finite, unmasked logits (all rows; an additive mask's residue, <= -1e3 and 88 below its row's max, counts as masked)
  /// Of `rows`, rows with a finite unmasked |logit| above kLargeLogit: how
  /// widespread logits as large as attention-logit-growth's threshold are
  /// (a few tail entries of 100k logits are not scaled projections).
  int64_t large_rows = 0;
  /// The |logit| that makes a row count in large_rows: ATTN001's threshold
  /// (logits differing by 30 give probabilities 1e13 apart; Dehghani et al. 2023).
  static constexpr double kLargeLogit = 30.0;
  /// Rows with no unmasked entry (every logit <= -1e4 or -inf).
  int64_t masked_rows = 0;
  /// Of those, rows whose softmax is NaN (every logit -inf, none NaN before:
  /// the NaN is made by the softmax itself). The scaled_dot_product_attention
  /// tap leaves it at 0: the operator (PyTorch >= 2.5 and normdoctor's
  /// fallback) gives zeros for such rows.
  int64_t nan_rows = 0;
  void merge(const SoftmaxStats& o) {
    rows += o.rows;
    onehot_rows += o.onehot_rows;
    large_rows += o.large_rows;
    masked_rows += o.masked_rows;
    nan_rows += o.nan_rows;
    max_prob_sum += o.max_prob_sum;
    entropy_sum += o.entropy_sum;
    row_len_max = std::max(row_len_max, o.row_len_max);
    logit_absmax = std::max(logit_absmax, o.logit_absmax);
  }
};
/// Softmax statistics of `x` along `dim` (already wrapped to [0, x.dim())).
/// CPU float tensors: one parallel sweep over the rows (no probability tensor
/// is materialized; a copy only when `dim` is not the innermost contiguous
/// axis). Other tensors: ATen reductions, read back to the host.
/// `value_masks`: entries at or below -1e4 count as masked (a mask the graph
/// did not show); false when the site's masks were recognized and set to
/// -inf already: then only fill values no computed logit takes count
/// (beyond -1e30, as finfo(float32).min; exactly -1e4, -1e5, -1e6, -1e8,
/// -1e9 or -65504), so that computed logits of -15000 (GPT-2 attention that
/// drifted below its -1e4 mask) are measured, not excluded.
SoftmaxStats softmax_stats(const at::Tensor& x, int64_t dim, bool value_masks = true);

/// Number of finite elements of `x` with |x| > threshold (NaN and +-inf never
/// count: an infinite input is a mask, as in sigmoid(-inf) = 0 for the experts
/// a router did not choose): the saturated inputs of sigmoid (threshold 6)
/// and tanh (threshold 3).
int64_t count_abs_above(const at::Tensor& x, double threshold);

/// Per-example, per-channel mean and biased variance of `x` [N, C, *] over its
/// trailing axes: two float64 CPU tensors [N, C]. CPU contiguous floating
/// tensors: one read (sum and sum of squares per row, in double), no copy.
std::pair<at::Tensor, at::Tensor> channel_moments(const at::Tensor& x);

}  // namespace nd
