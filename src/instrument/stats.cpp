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

// Fast path for one block: assumes every element is finite. Accumulates in
// float inside the block (256 elements) and in double across blocks. The
// caller redoes the chunk with the careful path when the result is not
// finite (a finite sum of squares proves there is no NaN/Inf).
template <typename T>
TensorStats chunk_fast(const T* p, int64_t n) {
  TensorStats s;
  s.numel = n;
  float mn = std::numeric_limits<float>::infinity(), mx = -mn;
  double sum = 0, sumsq = 0;
  int64_t zeros = 0, beyond = 0;
  constexpr int64_t kBlock = 256;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    float bs = 0, bq = 0;
    int32_t bz = 0, bb = 0;
    for (int64_t i = b; i < e; ++i) {
      const float v = static_cast<float>(p[i]);
      bs += v;
      bq += v * v;
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
      bz += (v == 0.0f);
      bb += (std::fabs(v) > static_cast<float>(kFp16Max));
    }
    sum += bs;
    sumsq += bq;
    zeros += bz;
    beyond += bb;
  }
  s.min = mn;
  s.max = mx;
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

TensorStats aten_stats(const at::Tensor& t0) {
  at::Tensor t = t0.is_floating_point() ? t0 : t0.to(at::kFloat);
  TensorStats s;
  s.numel = t.numel();
  if (s.numel == 0) return s;
  at::Tensor fin = at::isfinite(t);
  at::Tensor zero = at::zeros({}, t.options());
  at::Tensor tf = at::where(fin, t, zero).to(at::kDouble);
  at::Tensor big = at::full({}, std::numeric_limits<double>::infinity(), tf.options());
  at::Tensor packed = at::stack({
      at::isnan(t).sum().to(at::kDouble),
      fin.logical_not().sum().to(at::kDouble),
      (tf.abs() > kFp16Max).sum().to(at::kDouble),
      (t == 0).logical_and(fin).sum().to(at::kDouble),
      at::where(fin, tf, big).min(),
      at::where(fin, tf, -big).max(),
      tf.sum(),
      (tf * tf).sum(),
  }).cpu();
  const double* v = packed.data_ptr<double>();
  s.nan = static_cast<int64_t>(v[0]);
  s.inf = static_cast<int64_t>(v[1]) - s.nan;
  s.beyond_fp16 = static_cast<int64_t>(v[2]);
  s.zeros = static_cast<int64_t>(v[3]);
  s.min = v[4];
  s.max = v[5];
  s.sum = v[6];
  s.sumsq = v[7];
  return s;
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
  return aten_stats(t);
}

}  // namespace nd
