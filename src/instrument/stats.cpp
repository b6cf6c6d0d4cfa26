#include "instrument/stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/Parallel.h>

namespace nd {

void TensorStats::merge(const TensorStats& o) {
  numel += o.numel;
  nan += o.nan;
  inf += o.inf;
  neg_inf += o.neg_inf;
  beyond_fp16 += o.beyond_fp16;
  zeros += o.zeros;
  min = std::min(min, o.min);
  max = std::max(max, o.max);
  sum += o.sum;
  sumsq += o.sumsq;
}

double TensorStats::absmax() const {
  if (finite() == 0) return 0.0;
  return std::max(std::fabs(min), std::fabs(max));
}
double TensorStats::mean() const { return finite() ? sum / static_cast<double>(finite()) : 0.0; }
double TensorStats::rms() const { return finite() ? std::sqrt(sumsq / static_cast<double>(finite())) : 0.0; }
double TensorStats::std() const {
  if (finite() == 0) return 0.0;
  const double m = mean();
  return std::sqrt(std::max(0.0, sumsq / static_cast<double>(finite()) - m * m));
}
double TensorStats::l2() const { return std::sqrt(sumsq); }

namespace {

// Fast path for one block: assumes every element is finite. Eight
// independent accumulators per quantity (lanes) let the compiler use SIMD
// without reassociating floating-point sums itself; float inside a block of
// 256 elements, double across blocks. The caller redoes the chunk with the
// careful path when the result is not finite (a finite sum of squares proves
// there is no NaN/Inf).
template <typename T>
TensorStats chunk_fast(const T* p, int64_t n) {
  constexpr int kLanes = 8;
  constexpr int64_t kBlock = 256;
  TensorStats s;
  s.numel = n;
  float mn[kLanes], mx[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    mn[l] = std::numeric_limits<float>::infinity();
    mx[l] = -std::numeric_limits<float>::infinity();
  }
  double sum = 0, sumsq = 0;
  int64_t zeros = 0, beyond = 0;
  const float big = static_cast<float>(kFp16Max);
  int64_t b = 0;
  for (; b + kBlock <= n; b += kBlock) {
    float bs[kLanes] = {}, bq[kLanes] = {};
    int32_t bz[kLanes] = {}, bb[kLanes] = {};
    for (int64_t i = b; i < b + kBlock; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const float v = static_cast<float>(p[i + l]);
        bs[l] += v;
        bq[l] += v * v;
        mn[l] = v < mn[l] ? v : mn[l];
        mx[l] = v > mx[l] ? v : mx[l];
        bz[l] += (v == 0.0f);
        bb[l] += (std::fabs(v) > big);
      }
    }
    for (int l = 0; l < kLanes; ++l) {
      sum += bs[l];
      sumsq += bq[l];
      zeros += bz[l];
      beyond += bb[l];
    }
  }
  float rs = 0, rq = 0;
  for (int64_t i = b; i < n; ++i) {  // the tail
    const float v = static_cast<float>(p[i]);
    rs += v;
    rq += v * v;
    mn[0] = v < mn[0] ? v : mn[0];
    mx[0] = v > mx[0] ? v : mx[0];
    zeros += (v == 0.0f);
    beyond += (std::fabs(v) > big);
  }
  sum += rs;
  sumsq += rq;
  float lo = mn[0], hi = mx[0];
  for (int l = 1; l < kLanes; ++l) {
    lo = mn[l] < lo ? mn[l] : lo;
    hi = mx[l] > hi ? mx[l] : hi;
  }
  s.min = lo;
  s.max = hi;
  s.sum = sum;
  s.sumsq = sumsq;
  s.zeros = zeros;
  s.beyond_fp16 = beyond;
  return s;
}

template <typename T>
TensorStats chunk_careful(const T* p, int64_t n) {
  TensorStats s;
  s.numel = n;
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(p[i]);
    if (std::isnan(v)) {
      ++s.nan;
    } else if (std::isinf(v)) {
      ++s.inf;
      s.neg_inf += v < 0;
    } else {
      s.min = std::min(s.min, v);
      s.max = std::max(s.max, v);
      s.sum += v;
      s.sumsq += v * v;
      s.zeros += (v == 0.0);
      s.beyond_fp16 += (std::fabs(v) > kFp16Max);
    }
  }
  return s;
}

template <typename T>
TensorStats cpu_stats(const at::Tensor& t) {
  const T* data = t.data_ptr<T>();
  const int64_t n = t.numel();
  constexpr int64_t kGrain = 1 << 15;
  const int64_t chunks = (n + kGrain - 1) / kGrain;
  std::vector<TensorStats> parts(static_cast<size_t>(chunks));
  at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t b = c * kGrain, len = std::min(n - b, kGrain);
      TensorStats s = chunk_fast(data + b, len);
      if (!std::isfinite(s.sumsq) || !std::isfinite(s.sum) || !std::isfinite(s.min) || !std::isfinite(s.max))
        s = chunk_careful(data + b, len);
      parts[static_cast<size_t>(c)] = s;
    }
  });
  TensorStats out;
  for (const auto& p : parts) out.merge(p);
  return out;
}

}  // namespace

TensorStats compute_stats(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return {};
  if (t.device().is_cpu() && t.is_contiguous() && !t.is_sparse()) {
    switch (t.scalar_type()) {
      case at::kFloat: return cpu_stats<float>(t);
      case at::kDouble: return cpu_stats<double>(t);
      case at::kHalf: return cpu_stats<at::Half>(t);
      case at::kBFloat16: return cpu_stats<at::BFloat16>(t);
      default: break;
    }
  }
  if (t.device().is_cpu() && !t.is_sparse() && t.is_floating_point()) return compute_stats(t.contiguous());
  at::Tensor packed = stats_on_device(t).cpu();
  return unpack_stats(packed.data_ptr<double>(), t.numel());
}

at::Tensor stats_on_device(const at::Tensor& t0) {
  at::Tensor t = t0.is_floating_point() ? t0 : t0.to(at::kFloat);
  if (t.numel() == 0) {
    const double inf = std::numeric_limits<double>::infinity();
    return at::tensor({0.0, 0.0, 0.0, 0.0, inf, -inf, 0.0, 0.0, 0.0}, t.options().dtype(at::kDouble));
  }
  // Reductions accumulate in float64 without a float64 copy of the tensor.
  at::Tensor fin = at::isfinite(t);
  at::Tensor tf = at::where(fin, t, at::zeros({}, t.options()));
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor big = at::full({}, inf, t.options());
  return at::stack({
      at::isnan(t).sum().to(at::kDouble),
      fin.logical_not().sum().to(at::kDouble),
      (tf.abs() > kFp16Max).sum().to(at::kDouble),
      (t == 0).sum().to(at::kDouble),
      at::where(fin, t, big).min().to(at::kDouble),
      at::where(fin, t, -big).max().to(at::kDouble),
      tf.sum(at::kDouble),
      at::linalg_vector_norm(tf, 2, c10::nullopt, false, at::kDouble).square(),
      (t == -inf).sum().to(at::kDouble),
  });
}

TensorStats unpack_stats(const double* v, int64_t numel) {
  TensorStats s;
  s.numel = numel;
  if (numel == 0) return s;
  s.nan = static_cast<int64_t>(v[0]);
  s.inf = static_cast<int64_t>(v[1]) - s.nan;
  s.beyond_fp16 = static_cast<int64_t>(v[2]);
  s.zeros = static_cast<int64_t>(v[3]);
  s.min = v[4];
  s.max = v[5];
  s.sum = v[6];
  s.sumsq = v[7];
  s.neg_inf = static_cast<int64_t>(v[8]);
  return s;
}

namespace {

// Whether `v` counts as masked: at or below -1e4 (`value_masks`), or, when
// the site's recognized masks were already set to -inf, only a fill value
// that no computed logit takes: finfo.min of fp32/fp16 and beyond -1e30, or
// exactly one of the constants models mask with (-1e4, -1e5, -1e6, -1e8,
// -1e9), so that computed logits of -15000 are measured.
inline bool masked_value(float v, bool value_masks) {
  if (value_masks) return v <= -1e4f;
  return v <= -1e30f || v == -1e4f || v == -1e5f || v == -1e6f || v == -1e8f || v == -1e9f || v == -65504.0f;
}

// One row of softmax statistics; `p` holds `n` logits.
// The residue of an additive mask the graph did not show (scores + (1 -
// mask) * -10000: -10000 plus a computed score, so -9999.7 as well as
// -10000.3) lies at or below -1e3 and so far below the row's largest logit
// that its probability is exactly 0 in fp32 (exp(-88) underflows): masked in
// effect. Logits that are all that low together (computed logits of -15000)
// stay measured.
constexpr float kMaskResidue = -1e3f, kUnderflow = 88.0f;

template <typename T>
void softmax_row(const T* p, int64_t n, SoftmaxStats& s, bool value_masks) {
  int64_t valid = 0;
  float m = -std::numeric_limits<float>::infinity();
  bool pos_inf = false;
  double row_absmax = 0;
  float row_max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(p[i]);
    if (!std::isnan(v) && !masked_value(v, value_masks) && v > row_max) row_max = v;
  }
  auto residue = [&](float v) { return v <= kMaskResidue && v < row_max - kUnderflow; };
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(p[i]);
    if (std::isnan(v) || masked_value(v, value_masks) || residue(v)) continue;
    ++valid;
    if (std::isinf(v)) {
      pos_inf = true;
      continue;
    }
    m = v > m ? v : m;
    const double a = std::fabs(static_cast<double>(v));
    s.logit_absmax = a > s.logit_absmax ? a : s.logit_absmax;
    row_absmax = a > row_absmax ? a : row_absmax;
  }
  s.row_len_max = std::max(s.row_len_max, valid);
  if (valid < 2) return;
  ++s.rows;
  s.large_rows += row_absmax > SoftmaxStats::kLargeLogit;
  if (pos_inf) {
    // softmax of +inf is NaN (inf - inf): the largest probability is NaN
    // and the entropy terms are NaN, counted as 0 (as ATen's xlogy/nan_to_num).
    s.max_prob_sum += std::numeric_limits<double>::quiet_NaN();
    return;
  }
  // exp in float (as softmax itself), sums in double.
  double z = 0, ez = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(p[i]);
    if (std::isnan(v) || masked_value(v, value_masks) || residue(v)) continue;
    const float d = v - m;
    const float e = std::exp(d);
    z += e;
    ez += static_cast<double>(e) * d;
  }
  const double pmax = 1.0 / z;
  s.max_prob_sum += pmax;
  s.onehot_rows += pmax > 0.99;
  s.entropy_sum += std::log(z) - ez / z;
}

template <typename T>
SoftmaxStats softmax_cpu(const at::Tensor& x, bool value_masks) {  // x contiguous, softmax over the last axis
  const int64_t n = x.size(-1);
  const int64_t rows = n ? x.numel() / n : 0;
  const T* data = x.data_ptr<T>();
  const int64_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, n));
  const int64_t chunks = (rows + grain - 1) / grain;
  std::vector<SoftmaxStats> parts(static_cast<size_t>(chunks));
  at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      SoftmaxStats& s = parts[static_cast<size_t>(c)];
      for (int64_t r = c * grain, re = std::min(rows, r + grain); r < re; ++r) softmax_row(data + r * n, n, s, value_masks);
    }
  });
  SoftmaxStats out;
  for (const auto& p : parts) {
    out.rows += p.rows;
    out.onehot_rows += p.onehot_rows;
    out.large_rows += p.large_rows;
    out.row_len_max = std::max(out.row_len_max, p.row_len_max);
    out.max_prob_sum += p.max_prob_sum;
    out.entropy_sum += p.entropy_sum;
    out.logit_absmax = std::max(out.logit_absmax, p.logit_absmax);
  }
  return out;
}

SoftmaxStats softmax_aten(const at::Tensor& x, int64_t dim, bool value_masks) {
  SoftmaxStats sm;
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor fill = xf <= -1e30;
  if (value_masks) fill = xf <= -1e4;
  else
    for (float c : {-1e4f, -1e5f, -1e6f, -1e8f, -1e9f, -65504.0f}) fill = fill.logical_or(xf == c);
  at::Tensor masked = fill.logical_or(at::isnan(xf));
  {
    // Additive-mask residue (see softmax_row).
    const at::Tensor row_max = std::get<0>(xf.masked_fill(masked, -std::numeric_limits<float>::infinity()).max(dim, true));
    masked = masked.logical_or((xf <= kMaskResidue).logical_and(xf < row_max - kUnderflow));
  }
  at::Tensor valid = masked.logical_not().sum(dim);
  at::Tensor eligible = valid >= 2;
  at::Tensor logits = xf.masked_fill(masked, -std::numeric_limits<float>::infinity());
  at::Tensor p = at::softmax(logits, dim);
  at::Tensor pmax = std::get<0>(p.max(dim));
  at::Tensor ent = -at::xlogy(p, p).nan_to_num(0).sum(dim);
  at::Tensor finite_logits = xf.masked_fill(masked.logical_or(at::isinf(xf)), 0);
  at::Tensor packed = at::stack({
      eligible.sum().to(at::kDouble),
      (pmax > 0.99).logical_and(eligible).sum().to(at::kDouble),
      pmax.masked_fill(eligible.logical_not(), 0).sum().to(at::kDouble),
      ent.masked_fill(eligible.logical_not(), 0).sum().to(at::kDouble),
      valid.numel() ? valid.max().to(at::kDouble) : at::zeros({}, xf.options().dtype(at::kDouble)),
      finite_logits.abs().max().to(at::kDouble),
      (std::get<0>(finite_logits.abs().max(dim)) > SoftmaxStats::kLargeLogit).logical_and(eligible).sum().to(at::kDouble),
  }).cpu();  // one read-back
  const double* v = packed.data_ptr<double>();
  sm.rows = static_cast<int64_t>(v[0]);
  sm.onehot_rows = static_cast<int64_t>(v[1]);
  sm.max_prob_sum = v[2];
  sm.entropy_sum = v[3];
  sm.row_len_max = static_cast<int64_t>(v[4]);
  sm.logit_absmax = v[5];
  sm.large_rows = static_cast<int64_t>(v[6]);
  return sm;
}

template <typename T>
int64_t count_above_cpu(const at::Tensor& x, float thr) {
  const T* data = x.data_ptr<T>();
  const int64_t n = x.numel();
  constexpr int64_t kGrain = 1 << 15;
  const int64_t chunks = (n + kGrain - 1) / kGrain;
  std::vector<int64_t> parts(static_cast<size_t>(chunks), 0);
  at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      int64_t k = 0;
      for (int64_t i = c * kGrain, e = std::min(n, i + kGrain); i < e; ++i) {
        const float v = std::fabs(static_cast<float>(data[i]));
        k += v > thr && std::isfinite(v);
      }
      parts[static_cast<size_t>(c)] = k;
    }
  });
  int64_t out = 0;
  for (int64_t k : parts) out += k;
  return out;
}

template <typename T>
void moments_cpu(const at::Tensor& x, int64_t rows, int64_t len, double* mean, double* var) {
  const T* data = x.data_ptr<T>();
  const int64_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, len));
  at::parallel_for(0, rows, grain, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const T* p = data + r * len;
      double s = 0, q = 0;
      for (int64_t i = 0; i < len; ++i) {
        const double v = static_cast<double>(static_cast<float>(p[i]));
        s += v;
        q += v * v;
      }
      const double m = len ? s / static_cast<double>(len) : 0.0;
      mean[r] = m;
      // Biased variance; clamped at 0 (rounding can make it slightly negative).
      const double vv = len ? q / static_cast<double>(len) - m * m : 0.0;
      var[r] = std::isnan(vv) ? vv : std::max(0.0, vv);
    }
  });
}

}  // namespace

SoftmaxStats softmax_stats(const at::Tensor& x, int64_t dim, bool value_masks) {
  if (x.numel() == 0 || dim < 0 || dim >= x.dim()) return {};
  if (x.device().is_cpu() && !x.is_sparse()) {
    at::Tensor y = (dim == x.dim() - 1) ? x.contiguous() : x.movedim(dim, -1).contiguous();
    switch (y.scalar_type()) {
      case at::kFloat: return softmax_cpu<float>(y, value_masks);
      case at::kDouble: return softmax_cpu<double>(y, value_masks);
      case at::kHalf: return softmax_cpu<at::Half>(y, value_masks);
      case at::kBFloat16: return softmax_cpu<at::BFloat16>(y, value_masks);
      default: break;
    }
  }
  return softmax_aten(x, dim, value_masks);
}

int64_t count_abs_above(const at::Tensor& x, double threshold) {
  if (x.numel() == 0) return 0;
  if (x.device().is_cpu() && x.is_contiguous() && !x.is_sparse()) {
    const float thr = static_cast<float>(threshold);
    switch (x.scalar_type()) {
      case at::kFloat: return count_above_cpu<float>(x, thr);
      case at::kHalf: return count_above_cpu<at::Half>(x, thr);
      case at::kBFloat16: return count_above_cpu<at::BFloat16>(x, thr);
      default: break;
    }
  }
  return (x.abs() > threshold).logical_and(at::isfinite(x)).sum().item<int64_t>();
}

std::pair<at::Tensor, at::Tensor> channel_moments(const at::Tensor& x) {
  const int64_t n = x.size(0), c = x.size(1);
  if (x.device().is_cpu() && !x.is_sparse() && x.is_contiguous() &&
      (x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16)) {
    const int64_t len = (n * c) != 0 ? x.numel() / (n * c) : 0;
    at::Tensor mean = at::empty({n, c}, at::TensorOptions().dtype(at::kDouble));
    at::Tensor var = at::empty({n, c}, at::TensorOptions().dtype(at::kDouble));
    switch (x.scalar_type()) {
      case at::kFloat: moments_cpu<float>(x, n * c, len, mean.data_ptr<double>(), var.data_ptr<double>()); break;
      case at::kHalf: moments_cpu<at::Half>(x, n * c, len, mean.data_ptr<double>(), var.data_ptr<double>()); break;
      default: moments_cpu<at::BFloat16>(x, n * c, len, mean.data_ptr<double>(), var.data_ptr<double>()); break;
    }
    return {mean, var};
  }
  at::Tensor xv = x.reshape({n, c, -1}).to(at::kDouble);
  return {xv.mean(2).cpu(), xv.var(2, /*unbiased=*/false).cpu()};
}

}  // namespace nd
