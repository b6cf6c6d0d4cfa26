// Statistics kernels (src/instrument/stats.cpp) against plain ATen
// references, and the collector's deferred (device) path against its
// immediate one on real fixtures.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include <torch/script.h>

#include "instrument/instrument.h"
#include "instrument/stats.h"
#include "model/batch_file.h"
#include "model/model.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_stats_test {

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// Reference statistics in float64 with ATen ops.
nd::TensorStats reference(const at::Tensor& t0) {
  at::Tensor t = t0.to(at::kDouble).flatten();
  nd::TensorStats s;
  s.numel = t.numel();
  at::Tensor fin = at::isfinite(t);
  s.nan = at::isnan(t).sum().item<int64_t>();
  s.inf = at::isinf(t).sum().item<int64_t>();
  s.neg_inf = (t == -kInf).sum().item<int64_t>();
  at::Tensor f = t.masked_select(fin);
  s.zeros = (f == 0).sum().item<int64_t>();
  s.beyond_fp16 = (f.abs() > nd::kFp16Max).sum().item<int64_t>();
  if (f.numel()) {
    s.min = f.min().item<double>();
    s.max = f.max().item<double>();
  }
  s.sum = f.sum().item<double>();
  s.sumsq = (f * f).sum().item<double>();
  return s;
}

void expect_same(const nd::TensorStats& a, const nd::TensorStats& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.numel, b.numel);
  EXPECT_EQ(a.nan, b.nan);
  EXPECT_EQ(a.inf, b.inf);
  EXPECT_EQ(a.neg_inf, b.neg_inf);
  EXPECT_EQ(a.zeros, b.zeros);
  EXPECT_EQ(a.beyond_fp16, b.beyond_fp16);
  EXPECT_DOUBLE_EQ(a.min, b.min);
  EXPECT_DOUBLE_EQ(a.max, b.max);
  EXPECT_NEAR(a.sum, b.sum, 1e-9 * (1 + std::fabs(b.sumsq)));
  EXPECT_NEAR(a.sumsq, b.sumsq, 1e-6 * (1 + std::fabs(b.sumsq)));
}

at::Tensor sample(int64_t n, uint64_t seed) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  at::Tensor x = at::randn({n}, g, at::TensorOptions().dtype(at::kFloat)) * 3;
  auto a = x.accessor<float, 1>();
  a[1] = 0;
  a[2] = 0;
  a[5] = 70000;  // beyond fp16
  a[n - 1] = static_cast<float>(kNaN);
  a[n / 2] = static_cast<float>(kInf);
  a[n / 3] = static_cast<float>(-kInf);
  return x;
}

TEST(Stats, OneReadMatchesReference) {
  for (int64_t n : {int64_t{17}, int64_t{100000}}) {
    at::Tensor x = sample(n, 1);
    expect_same(nd::compute_stats(x), reference(x), "float " + std::to_string(n));
    expect_same(nd::compute_stats(x.to(at::kDouble)), reference(x), "double " + std::to_string(n));
  }
  // Finite data: the fast (SIMD lanes) path, with a tail.
  for (int64_t n : {int64_t{256}, int64_t{100003}}) {
    at::Generator g = at::detail::createCPUGenerator(9);
    at::Tensor f = at::randn({n}, g, at::TensorOptions().dtype(at::kFloat)) * 5;
    f[3] = 0;
    f[n - 1] = 80000;
    expect_same(nd::compute_stats(f), reference(f), "finite " + std::to_string(n));
    expect_same(nd::compute_stats(f.to(at::kHalf)), reference(f.to(at::kHalf)), "half " + std::to_string(n));
  }
  at::Tensor y = at::arange(-5, 6, at::kFloat);
  const nd::TensorStats s = nd::compute_stats(y);
  EXPECT_EQ(s.zeros, 1);
  EXPECT_DOUBLE_EQ(s.sum, 0.0);
  EXPECT_DOUBLE_EQ(s.sumsq, 110.0);
  EXPECT_DOUBLE_EQ(s.min, -5.0);
  EXPECT_DOUBLE_EQ(s.max, 5.0);
}

TEST(Stats, NonContiguousAndIntegerTensors) {
  at::Tensor x = sample(4096, 2).reshape({64, 64}).t();
  ASSERT_FALSE(x.is_contiguous());
  expect_same(nd::compute_stats(x), reference(x), "transposed");
  at::Tensor i = at::arange(0, 10, at::kLong);
  const nd::TensorStats s = nd::compute_stats(i);
  EXPECT_EQ(s.numel, 10);
  EXPECT_EQ(s.zeros, 1);
  EXPECT_DOUBLE_EQ(s.sum, 45.0);
  EXPECT_DOUBLE_EQ(s.max, 9.0);
}

TEST(Stats, DevicePathMatchesOneRead) {
  for (int64_t n : {int64_t{17}, int64_t{100000}}) {
    at::Tensor x = sample(n, 3);
    at::Tensor packed = nd::stats_on_device(x).cpu();
    ASSERT_EQ(packed.numel(), nd::kPackedStats);
    expect_same(nd::unpack_stats(packed.data_ptr<double>(), x.numel()), nd::compute_stats(x), "device path");
  }
  at::Tensor all_nan = at::full({4}, kNaN);
  at::Tensor packed = nd::stats_on_device(all_nan).cpu();
  const nd::TensorStats s = nd::unpack_stats(packed.data_ptr<double>(), 4);
  EXPECT_EQ(s.nan, 4);
  EXPECT_EQ(s.finite(), 0);
  EXPECT_EQ(s.absmax(), 0.0);
}

// Finite values beyond the threshold only: the sample's +inf and -inf are
// masks (sigmoid(-inf) = 0 for a router's unchosen experts), not saturation.
TEST(Stats, CountAbsAbove) {
  at::Tensor x = sample(50000, 4);
  EXPECT_EQ(nd::count_abs_above(x, 3.0), (x.abs() > 3.0).sum().item<int64_t>() - 2);
  EXPECT_EQ(nd::count_abs_above(x.to(at::kDouble), 6.0), (x.abs() > 6.0).sum().item<int64_t>() - 2);
  EXPECT_EQ(nd::count_abs_above(at::tensor({kNaN, 7.0, -7.0, 1.0}).to(at::kFloat), 6.0), 2);
  EXPECT_EQ(nd::count_abs_above(at::tensor({-kInf, 7.0, kInf, -kInf}).to(at::kFloat), 6.0), 1);
}

TEST(Stats, ChannelMomentsMatchReference) {
  at::Generator g = at::detail::createCPUGenerator(5);
  at::Tensor x = at::randn({4, 3, 5, 7}, g, at::TensorOptions().dtype(at::kFloat)) * 2 + 10;
  auto [mean, var] = nd::channel_moments(x);
  at::Tensor xv = x.reshape({4, 3, -1}).to(at::kDouble);
  ASSERT_EQ(mean.sizes(), (std::vector<int64_t>{4, 3}));
  EXPECT_TRUE(at::allclose(mean, xv.mean(2), 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(var, xv.var(2, /*unbiased=*/false), 1e-9, 1e-9));
  // A non-contiguous input takes the ATen path: same numbers.
  auto [m2, v2] = nd::channel_moments(x.transpose(2, 3));
  EXPECT_TRUE(at::allclose(m2, mean, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(v2, var, 1e-9, 1e-9));
}

// The ATen formulation the one-sweep softmax kernel replaces.
nd::SoftmaxStats softmax_reference(const at::Tensor& x, int64_t dim) {
  nd::SoftmaxStats sm;
  at::Tensor xf = x.to(at::kDouble);
  at::Tensor masked = (xf <= -1e4).logical_or(at::isnan(xf));
  at::Tensor valid = masked.logical_not().sum(dim);
  at::Tensor eligible = valid >= 2;
  at::Tensor p = at::softmax(xf.masked_fill(masked, -kInf), dim);
  at::Tensor pmax = std::get<0>(p.max(dim));
  at::Tensor ent = -at::xlogy(p, p).nan_to_num(0).sum(dim);
  sm.rows = eligible.sum().item<int64_t>();
  sm.onehot_rows = (pmax > 0.99).logical_and(eligible).sum().item<int64_t>();
  sm.max_prob_sum = pmax.masked_fill(eligible.logical_not(), 0).sum().item<double>();
  sm.entropy_sum = ent.masked_fill(eligible.logical_not(), 0).sum().item<double>();
  sm.row_len_max = valid.max().item<int64_t>();
  sm.logit_absmax = xf.masked_fill(masked.logical_or(at::isinf(xf)), 0).abs().max().item<double>();
  sm.large_rows = (std::get<0>(xf.masked_fill(masked.logical_or(at::isinf(xf)), 0).abs().max(dim)) > 30)
                      .logical_and(eligible)
                      .sum()
                      .item<int64_t>();
  return sm;
}

TEST(Stats, SoftmaxOneSweepMatchesReference) {
  at::Generator g = at::detail::createCPUGenerator(6);
  at::Tensor x = at::randn({2, 3, 6, 9}, g, at::TensorOptions().dtype(at::kFloat)) * 4;
  x[0][0][0].fill_(0);
  x[0][0][0][0] = 40;            // one-hot row
  x[0][1][2].slice(0, 2).fill_(-1e9);  // masked (attention mask): 2 valid
  x[1][2][3].slice(0, 1).fill_(-1e9);  // 1 valid: not counted
  x[1][0][1][4] = static_cast<float>(kNaN);  // NaN: treated as masked
  for (int64_t dim : {int64_t{3}, int64_t{1}}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    const nd::SoftmaxStats a = nd::softmax_stats(x, dim), b = softmax_reference(x, dim);
    EXPECT_EQ(a.rows, b.rows);
    EXPECT_EQ(a.onehot_rows, b.onehot_rows);
    EXPECT_EQ(a.row_len_max, b.row_len_max);
    EXPECT_NEAR(a.max_prob_sum, b.max_prob_sum, 1e-6 * b.rows);  // exp in float, as softmax
    EXPECT_NEAR(a.entropy_sum, b.entropy_sum, 1e-6 * b.rows);
    EXPECT_DOUBLE_EQ(a.logit_absmax, b.logit_absmax);
    EXPECT_EQ(a.large_rows, b.large_rows);
    EXPECT_EQ(a.large_rows, 1);  // the row (column) of the 40
  }
  const nd::SoftmaxStats a = nd::softmax_stats(x, 3);
  EXPECT_EQ(a.rows, 2 * 3 * 6 - 1);
  EXPECT_GE(a.onehot_rows, 1);
  EXPECT_EQ(a.row_len_max, 9);
}

// An additive mask the graph did not show, scores + (1 - mask) * -10000:
// its entries (-10000 plus a score, on either side of -1e4) are far below
// the row's largest logit and have probability 0, so they are not measured
// as logits (diffusers' PriorTransformer and Sana reached "10000"). Computed
// logits that are all low together (-15000 each) stay measured. Both the
// one-sweep (last axis) and the ATen (other axis) paths.
TEST(Stats, AdditiveMaskResidueIsNoLogit) {
  at::Tensor x = at::tensor({2.0f, -1.0f, 0.5f, -10000.0f + 0.3f, -10000.0f - 0.4f}).reshape({1, 5});
  for (bool known : {false, true}) {
    const nd::SoftmaxStats a = nd::softmax_stats(x, 1, /*value_masks=*/!known);
    EXPECT_DOUBLE_EQ(a.logit_absmax, 2.0) << known;
    EXPECT_EQ(a.row_len_max, 3) << known;
    const nd::SoftmaxStats b = nd::softmax_stats(x.t().contiguous(), 0, /*value_masks=*/!known);
    EXPECT_DOUBLE_EQ(b.logit_absmax, 2.0) << known;
  }
  const at::Tensor low = at::tensor({-15000.0f, -15003.0f, -14998.0f}).reshape({1, 3});
  EXPECT_DOUBLE_EQ(nd::softmax_stats(low, 1, /*value_masks=*/false).logit_absmax, 15003.0);
}

// The collector's deferred path (statistics on the tensor's device, read back
// once per pass) gives the same records as the immediate one.
void compare_paths(const std::string& fixture) {
  SCOPED_TRACE(fixture);
  const std::string dir = std::string(ND_SOURCE_DIR) + "/fixtures/models/";
  nd::LoadedModel m = nd::load_model(dir + fixture + ".pt");
  nd::BatchFile b = nd::read_batch_file(dir + fixture + ".input.pt");
  std::vector<c10::IValue> args(b.positional.begin(), b.positional.end());
  nd::InstrumentedModel im(m);
  nd::PassConfig cfg;
  cfg.training = true;
  cfg.record_grad = true;
  std::vector<std::unique_ptr<nd::Collector>> cs;
  for (bool defer : {false, true}) {
    auto c = std::make_unique<nd::Collector>(im.taps().size());
    c->defer_cpu = defer;
    m.module.train(true);
    at::manual_seed(0);
    torch::AutoGradMode grad(true);
    for (const auto& p : m.module.parameters(true))
      if (p.grad().defined()) p.mutable_grad() = at::Tensor();
    c10::IValue out = im.run(args, cfg, *c);
    at::Tensor y = out.toTensor();
    (y.square().nan_to_num(0).sum()).backward();
    c->finish();
    cs.push_back(std::move(c));
  }
  const auto& a = cs[0]->records();
  const auto& d = cs[1]->records();
  ASSERT_EQ(a.size(), d.size());
  int64_t measured = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("tap " + std::to_string(i));
    EXPECT_EQ(a[i].calls, d[i].calls);
    EXPECT_EQ(a[i].grad_calls, d[i].grad_calls);
    EXPECT_EQ(a[i].fwd.numel, d[i].fwd.numel);
    EXPECT_EQ(a[i].fwd.nan, d[i].fwd.nan);
    EXPECT_EQ(a[i].fwd.inf, d[i].fwd.inf);
    EXPECT_EQ(a[i].grad.nan, d[i].grad.nan);
    EXPECT_DOUBLE_EQ(a[i].fwd.max, d[i].fwd.max);
    EXPECT_NEAR(a[i].fwd.sumsq, d[i].fwd.sumsq, 1e-5 * (1 + a[i].fwd.sumsq));
    EXPECT_NEAR(a[i].grad.sumsq, d[i].grad.sumsq, 1e-5 * (1 + a[i].grad.sumsq));
    measured += a[i].fwd.numel > 0;
  }
  EXPECT_GT(measured, 0);
  EXPECT_EQ(cs[0]->first_nonfinite_tap(), cs[1]->first_nonfinite_tap());
  EXPECT_EQ(cs[0]->first_nonfinite_grad_tap(), cs[1]->first_nonfinite_grad_tap());
}

TEST(Collector, DeferredReadBackMatchesImmediate) {
  compare_paths("growth20");
  compare_paths("nan_forward");
}

TEST(Collector, NestedModulesReadTheirSharedOutputOnce) {
  // nested_scripted: a container's output is its last child's output; both
  // taps must hold the same numbers (the second reuses the first's reading).
  const std::string dir = std::string(ND_SOURCE_DIR) + "/fixtures/models/";
  nd::LoadedModel m = nd::load_model(dir + "nested_scripted.pt");
  nd::BatchFile b = nd::read_batch_file(dir + "nested_scripted.input.pt");
  std::vector<c10::IValue> args(b.positional.begin(), b.positional.end());
  nd::InstrumentedModel im(m);
  nd::Collector c(im.taps().size());
  torch::NoGradGuard ng;
  im.run(args, nd::PassConfig{}, c);
  const auto& recs = c.records();
  int64_t pairs = 0;
  for (size_t i = 1; i < im.taps().size(); ++i) {
    const auto& r0 = recs[i - 1];
    const auto& r1 = recs[i];
    if (im.taps()[i].kind != nd::TapKind::kModuleOutput || r0.first_fire < 0 || r1.first_fire != r0.first_fire + 1) continue;
    if (r0.fwd.numel == r1.fwd.numel && r0.fwd.sumsq == r1.fwd.sumsq && r0.fwd.min == r1.fwd.min) ++pairs;
  }
  EXPECT_GT(pairs, 0) << "no chained taps of nested modules found";
}

// Autograd may call a tensor's gradient hook with an undefined gradient
// (an output the loss does not reach through it: eval44's SD3 ControlNet
// returning its block samples as a tuple). The collector ignores it
// instead of raising "Expected a proper Tensor but got None".
TEST(Collector, AnUndefinedGradientIsIgnored) {
  nd::Collector c(2);
  EXPECT_NO_THROW(c.on_grad(1, at::Tensor()));
  EXPECT_EQ(c.records()[1].grad_calls, 0);
}

}  // namespace

}  // namespace nd_test_stats_test
