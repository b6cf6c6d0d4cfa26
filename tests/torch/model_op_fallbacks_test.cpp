// Runtime fallbacks for operators missing from the LibTorch normdoctor runs on
// (src/model/op_fallbacks.h): aten::scaled_dot_product_attention against a
// reference written out with plain ATen ops, its gradients, TorchScript
// resolution, a real model saved by PyTorch 2.11, and the reading of load
// errors.
//
// Compiles unchanged against LibTorch 2.x, where the operator is native: the
// numerical tests then check the native kernel against the same reference and
// the registration tests check that nothing was registered.
#include "model/op_fallbacks.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/jit.h>
#include <torch/script.h>
#include <torch/version.h>

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_model_op_fallbacks_test {

namespace {

constexpr const char* kSdpa = "aten::scaled_dot_product_attention";

std::string shared_model(const std::string& name) {
  return std::string(ND_SOURCE_DIR) + "/corpus/" + name;
}

bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

bool sdpa_exists() {
  return c10::Dispatcher::singleton().findSchema(c10::OperatorName(kSdpa, "")).has_value();
}

bool sdpa_has_argument(const std::string& name) {
  const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(kSdpa, "");
  for (const auto& arg : handle.schema().arguments()) {
    if (arg.name() == name) return true;
  }
  return false;
}

bool fallback_registered() {
  const auto in_use = nd::fallbacks_in_use();
  return std::find(in_use.begin(), in_use.end(), kSdpa) != in_use.end();
}

struct SdpaArgs {
  c10::optional<at::Tensor> attn_mask;
  double dropout_p = 0.0;
  bool is_causal = false;
  c10::optional<double> scale;
  bool enable_gqa = false;
};

// Calls the operator through the dispatcher (boxed, argument by name, so it
// works whatever the schema's length: PyTorch before 2.5 has no enable_gqa).
at::Tensor sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                const SdpaArgs& a = {}) {
  nd::register_missing_op_fallbacks();
  const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(kSdpa, "");
  torch::jit::Stack stack;
  for (const auto& arg : handle.schema().arguments()) {
    const std::string& n = arg.name();
    if (n == "query") stack.emplace_back(q);
    else if (n == "key") stack.emplace_back(k);
    else if (n == "value") stack.emplace_back(v);
    else if (n == "attn_mask") stack.emplace_back(a.attn_mask);
    else if (n == "dropout_p") stack.emplace_back(a.dropout_p);
    else if (n == "is_causal") stack.emplace_back(a.is_causal);
    else if (n == "scale") stack.emplace_back(a.scale);
    else if (n == "enable_gqa") stack.emplace_back(a.enable_gqa);
    else {
      EXPECT_TRUE(arg.default_value().has_value()) << "unexpected argument " << n;
      stack.push_back(*arg.default_value());
    }
  }
  handle.callBoxed(&stack);
  return stack.back().toTensor();
}

// softmax(Q K^T * scale + mask) V, written out; a fully masked row gives zeros.
at::Tensor reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const SdpaArgs& a = {}) {
  const double inf = std::numeric_limits<double>::infinity();
  const double s = a.scale ? *a.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * s;
  if (a.is_causal) {
    const int64_t L = q.size(-2), S = k.size(-2);
    auto keep = at::ones({L, S}, at::kBool);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = i + 1; j < S; ++j) keep[i][j] = false;
    scores = scores.masked_fill(keep.logical_not(), -inf);
  }
  at::Tensor dead;
  if (a.attn_mask) {
    if (a.attn_mask->scalar_type() == at::kBool) {
      scores = scores.masked_fill(a.attn_mask->logical_not(), -inf);
      dead = a.attn_mask->logical_not().all(-1, true);
    } else {
      scores = scores + *a.attn_mask;
    }
  }
  at::Tensor weights = at::softmax(scores, -1);
  if (dead.defined()) weights = weights.masked_fill(dead, 0.0);
  return at::matmul(weights, v);
}

// [.., Hk, S, E] -> [.., Hk * rep, S, E], each head repeated rep times in place.
at::Tensor repeat_heads(const at::Tensor& t, int64_t rep) {
  auto sizes = t.sizes().vec();
  auto expanded = t.unsqueeze(-3).expand({sizes[0], sizes[1], rep, sizes[2], sizes[3]});
  return expanded.reshape({sizes[0], sizes[1] * rep, sizes[2], sizes[3]});
}

void expect_close(const at::Tensor& got, const at::Tensor& want, double tol = 1e-5) {
  ASSERT_EQ(got.sizes(), want.sizes());
  const double diff = (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
  EXPECT_LE(diff, tol) << "max abs difference " << diff;
}

// ---------------------------------------------------------------------------
// Registration (the first test needs a process where nothing is registered yet:
// ctest runs each test in its own process, and gtest runs this file in order).

TEST(OpFallbacks, RealLoadErrorNamesTheMissingOperator) {
  const std::string path = shared_model("tv_vit_tiny.pt");
  if (!file_exists(path)) GTEST_SKIP() << path << " absent";
  if (sdpa_exists()) GTEST_SKIP() << "this LibTorch (or this process) already has " << kSdpa;
  std::string what;
  try {
    torch::jit::load(path);
  } catch (const std::exception& e) {
    what = e.what();
  }
  ASSERT_FALSE(what.empty()) << "load succeeded without the fallback";
  const auto op = nd::missing_operator_in(what);
  ASSERT_TRUE(op.has_value()) << what;
  EXPECT_EQ(*op, kSdpa);
  const std::string msg = nd::missing_operator_message("tv_vit_tiny.pt", *op);
  EXPECT_NE(msg.find("tv_vit_tiny.pt calls operator aten::scaled_dot_product_attention, which "
                     "LibTorch " + nd::libtorch_version()),
            std::string::npos)
      << msg;
}

TEST(OpFallbacks, RegistersExactlyTheMissingOperators) {
  const bool existed = sdpa_exists();
  const auto registered = nd::register_missing_op_fallbacks();
  if (existed) {
    EXPECT_TRUE(std::find(registered.begin(), registered.end(), kSdpa) == registered.end());
  } else {
    EXPECT_EQ(registered, std::vector<std::string>{kSdpa});
  }
#if TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR >= 205  // enable_gqa is native from 2.5
  EXPECT_TRUE(registered.empty());
#endif
  // Idempotent, and remembered.
  EXPECT_EQ(nd::register_missing_op_fallbacks(), registered);
  EXPECT_EQ(nd::fallbacks_in_use(), registered);
  EXPECT_EQ(nd::fallback_table(), std::vector<std::string>{kSdpa});

  // Both the dispatcher and the TorchScript registry know it now.
  ASSERT_TRUE(sdpa_exists());
  EXPECT_FALSE(
      torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(kSdpa)).empty());
  EXPECT_TRUE(sdpa_has_argument("scale"));
  if (!existed) {
    const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(kSdpa, "");
    std::ostringstream schema;
    schema << handle.schema();
    EXPECT_EQ(schema.str(),
              "aten::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, "
              "Tensor? attn_mask=None, float dropout_p=0., bool is_causal=False, *, "
              "float? scale=None, bool enable_gqa=False) -> Tensor");
  }
}

// LibTorch 1.13's gelu backward (approximate "none") read a transposed output
// gradient as if it were contiguous when oneDNN was on (0, 1e33 or another
// tensor's values, run to run: Whisper's and Moonshine's conv front ends got
// all-zero or huge first-conv gradients). After the workarounds the gradient
// of a transposed grad_output equals that of its contiguous copy, on every
// LibTorch.
TEST(OpFallbacks, GeluBackwardReadsTransposedGradients) {
  const auto applied = nd::apply_kernel_workarounds();
#if TORCH_VERSION_MAJOR < 2
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_NE(applied[0].find("oneDNN switched off"), std::string::npos) << applied[0];
#else
  EXPECT_TRUE(applied.empty());
#endif
  EXPECT_EQ(nd::apply_kernel_workarounds(), applied);  // once per process
  torch::manual_seed(0);
  const auto x = torch::randn({3, 32, 20});
  const auto g = torch::randn({3, 20, 32}).transpose(1, 2);
  ASSERT_FALSE(g.is_contiguous());
  for (int rep = 0; rep < 3; ++rep) {
    const auto got = at::gelu_backward(g, x, "none");
    const auto want = at::gelu_backward(g.contiguous(), x, "none");
    EXPECT_TRUE(torch::allclose(got, want)) << (got - want).abs().max().item<double>();
  }
}

TEST(OpFallbacks, LibtorchVersionMatchesHeaders) {
  const std::string v = nd::libtorch_version();
  EXPECT_EQ(v.rfind(std::to_string(TORCH_VERSION_MAJOR) + "." +
                        std::to_string(TORCH_VERSION_MINOR) + ".",
                    0),
            0u)
      << v;
}

// ---------------------------------------------------------------------------
// Numerics against the reference.

class Sdpa : public ::testing::Test {
 protected:
  void SetUp() override {
    nd::register_missing_op_fallbacks();
    torch::manual_seed(0);
  }
};

TEST_F(Sdpa, NoMask4D) {
  auto q = torch::randn({2, 3, 5, 8}), k = torch::randn({2, 3, 7, 8}), v = torch::randn({2, 3, 7, 6});
  expect_close(sdpa(q, k, v), reference(q, k, v));
}

TEST_F(Sdpa, NoMask3DAnd2D) {
  auto q = torch::randn({4, 5, 8}), k = torch::randn({4, 7, 8}), v = torch::randn({4, 7, 3});
  expect_close(sdpa(q, k, v), reference(q, k, v));
  auto q2 = torch::randn({5, 8}), k2 = torch::randn({7, 8}), v2 = torch::randn({7, 3});
  expect_close(sdpa(q2, k2, v2), reference(q2, k2, v2));
}

TEST_F(Sdpa, DoubleIsExact) {
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  auto q = torch::randn({2, 2, 6, 4}, opts), k = torch::randn({2, 2, 6, 4}, opts),
       v = torch::randn({2, 2, 6, 4}, opts);
  expect_close(sdpa(q, k, v), reference(q, k, v), 1e-12);
}

TEST_F(Sdpa, FloatMaskBroadcast) {
  auto q = torch::randn({2, 3, 5, 8}), k = torch::randn({2, 3, 7, 8}), v = torch::randn({2, 3, 7, 8});
  SdpaArgs a;
  a.attn_mask = torch::randn({5, 7});
  expect_close(sdpa(q, k, v, a), reference(q, k, v, a));
  a.attn_mask = torch::randn({2, 1, 5, 7});
  expect_close(sdpa(q, k, v, a), reference(q, k, v, a));
  // -inf entries in a float mask, as a key padding mask made additive.
  auto m = torch::zeros({2, 1, 1, 7});
  m.index_put_({0, 0, 0, torch::indexing::Slice(4, 7)}, -std::numeric_limits<float>::infinity());
  a.attn_mask = m;
  expect_close(sdpa(q, k, v, a), reference(q, k, v, a));
}

TEST_F(Sdpa, BoolMask) {
  auto q = torch::randn({2, 3, 5, 8}), k = torch::randn({2, 3, 7, 8}), v = torch::randn({2, 3, 7, 8});
  auto mask = torch::rand({2, 3, 5, 7}) > 0.4;
  mask.index_put_({torch::indexing::Ellipsis, 0}, true);  // every row keeps a key
  SdpaArgs a;
  a.attn_mask = mask;
  expect_close(sdpa(q, k, v, a), reference(q, k, v, a));
  // Broadcast 2-D boolean mask.
  auto mask2 = torch::rand({5, 7}) > 0.5;
  mask2.index_put_({torch::indexing::Slice(), 3}, true);
  a.attn_mask = mask2;
  expect_close(sdpa(q, k, v, a), reference(q, k, v, a));
}

TEST_F(Sdpa, FullyMaskedRowGivesZerosNotNaN) {
  // PyTorch >= 2.5 (_safe_softmax) behaviour; the fallback follows it.
  if (!fallback_registered()) GTEST_SKIP() << "native operator: row behaviour is the LibTorch's";
  auto q = torch::randn({1, 2, 4, 8}, torch::requires_grad()),
       k = torch::randn({1, 2, 6, 8}, torch::requires_grad()),
       v = torch::randn({1, 2, 6, 8}, torch::requires_grad());
  auto mask = torch::ones({4, 6}, torch::kBool);
  mask[2] = false;
  SdpaArgs a;
  a.attn_mask = mask;
  auto out = sdpa(q, k, v, a);
  EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
  EXPECT_EQ(out.select(2, 2).abs().max().item<float>(), 0.0f);
  expect_close(out, reference(q, k, v, a));
  out.sum().backward();
  for (const auto* t : {&q, &k, &v}) {
    EXPECT_TRUE(torch::isfinite(t->grad()).all().item<bool>());
  }
}

TEST_F(Sdpa, CausalWithLNotEqualS) {
  SdpaArgs a;
  a.is_causal = true;
  for (auto [L, S] : std::vector<std::pair<int64_t, int64_t>>{{5, 7}, {7, 5}, {6, 6}}) {
    SCOPED_TRACE("L=" + std::to_string(L) + " S=" + std::to_string(S));
    auto q = torch::randn({2, 3, L, 8}), k = torch::randn({2, 3, S, 8}), v = torch::randn({2, 3, S, 4});
    expect_close(sdpa(q, k, v, a), reference(q, k, v, a));
  }
  // First query attends to the first key only (top-left alignment).
  auto q = torch::randn({1, 1, 3, 4}), k = torch::randn({1, 1, 5, 4}), v = torch::randn({1, 1, 5, 4});
  expect_close(sdpa(q, k, v, a).select(2, 0), v.select(2, 0));
}

TEST_F(Sdpa, CausalWithMaskIsRejected) {
  // PyTorch's math backend rejects it; a native fused CPU kernel may not check.
  if (!fallback_registered()) GTEST_SKIP() << "native operator";
  auto q = torch::randn({1, 1, 3, 4});
  SdpaArgs a;
  a.is_causal = true;
  a.attn_mask = torch::ones({3, 3}, torch::kBool);
  EXPECT_THROW(sdpa(q, q, q, a), c10::Error);
}

TEST_F(Sdpa, MixedDtypesAreRejected) {
  auto q = torch::randn({1, 1, 3, 4});
  EXPECT_THROW(sdpa(q, q.to(torch::kDouble), q), c10::Error);
}

TEST_F(Sdpa, ExplicitScale) {
  auto q = torch::randn({2, 3, 5, 8}), k = torch::randn({2, 3, 7, 8}), v = torch::randn({2, 3, 7, 8});
  for (double s : {0.3, 1.0, 2.5, -0.2}) {
    SCOPED_TRACE("scale=" + std::to_string(s));
    SdpaArgs a;
    a.scale = s;
    expect_close(sdpa(q, k, v, a), reference(q, k, v, a));
  }
}

TEST_F(Sdpa, GroupedQueryAttention) {
  if (!sdpa_has_argument("enable_gqa")) GTEST_SKIP() << "this LibTorch has no enable_gqa";
  auto q = torch::randn({2, 8, 5, 4}), k = torch::randn({2, 2, 7, 4}), v = torch::randn({2, 2, 7, 6});
  SdpaArgs a;
  a.enable_gqa = true;
  auto want = reference(q, repeat_heads(k, 4), repeat_heads(v, 4));
  expect_close(sdpa(q, k, v, a), want);
  // With a causal mask too, and equal head counts unchanged.
  a.is_causal = true;
  SdpaArgs ref_args;
  ref_args.is_causal = true;
  expect_close(sdpa(q, k, v, a), reference(q, repeat_heads(k, 4), repeat_heads(v, 4), ref_args));
  a.is_causal = false;
  auto k8 = torch::randn({2, 8, 7, 4}), v8 = torch::randn({2, 8, 7, 6});
  expect_close(sdpa(q, k8, v8, a), reference(q, k8, v8));
  // Heads that do not divide are an error.
  EXPECT_THROW(sdpa(q, torch::randn({2, 3, 7, 4}), torch::randn({2, 3, 7, 6}), a), c10::Error);
}

TEST_F(Sdpa, ReducedPrecisionKeepsDtype) {
  auto q = torch::randn({2, 2, 5, 8}), k = torch::randn({2, 2, 7, 8}), v = torch::randn({2, 2, 7, 8});
  auto out = sdpa(q.to(torch::kBFloat16), k.to(torch::kBFloat16), v.to(torch::kBFloat16));
  EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
  expect_close(out, reference(q, k, v), 5e-2);
}

TEST_F(Sdpa, DropoutZeroIsDeterministic) {
  auto q = torch::randn({2, 3, 5, 8}), k = torch::randn({2, 3, 7, 8}), v = torch::randn({2, 3, 7, 8});
  SdpaArgs a;
  a.dropout_p = 0.0;
  EXPECT_TRUE(torch::equal(sdpa(q, k, v, a), sdpa(q, k, v, a)));
}

TEST_F(Sdpa, DropoutChangesOutputAndKeepsShape) {
  auto q = torch::randn({2, 3, 5, 8}), k = torch::randn({2, 3, 7, 8});
  auto v = torch::ones({2, 3, 7, 8});
  SdpaArgs a;
  a.dropout_p = 0.5;
  auto plain = sdpa(q, k, v);
  auto dropped = sdpa(q, k, v, a);
  EXPECT_EQ(dropped.sizes(), plain.sizes());
  EXPECT_TRUE(torch::isfinite(dropped).all().item<bool>());
  EXPECT_FALSE(torch::allclose(dropped, plain));
  // With V all ones the plain output is 1 everywhere; dropping attention
  // weights (not output elements) gives (sum of kept weights) / (1 - p), which
  // is the same across the feature dim of a row and mostly neither 0 nor 2.
  expect_close(plain, torch::ones_like(plain));
  auto spread = (dropped - dropped.select(-1, 0).unsqueeze(-1)).abs().max().item<float>();
  EXPECT_LT(spread, 1e-5f);
  auto not_binary = ((dropped - 0).abs() > 1e-4) & ((dropped - 2).abs() > 1e-4);
  EXPECT_GT(not_binary.to(torch::kFloat).mean().item<float>(), 0.5f);
  // A fixed seed reproduces it.
  torch::manual_seed(7);
  auto first = sdpa(q, k, v, a);
  torch::manual_seed(7);
  EXPECT_TRUE(torch::equal(first, sdpa(q, k, v, a)));
}

// Gradients of sum(out * w) for q, k, v against the reference's.
void expect_same_gradients(const std::vector<int64_t>& qs, const std::vector<int64_t>& ks,
                           const std::vector<int64_t>& vs, const SdpaArgs& a) {
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  auto q0 = torch::randn(qs, opts), k0 = torch::randn(ks, opts), v0 = torch::randn(vs, opts);
  auto run = [&](bool fallback) {
    auto q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(),
         v = v0.clone().requires_grad_();
    auto out = fallback ? sdpa(q, k, v, a) : reference(q, k, v, a);
    torch::manual_seed(3);
    auto w = torch::randn(out.sizes(), opts);
    (out * w).sum().backward();
    return std::vector<at::Tensor>{q.grad(), k.grad(), v.grad()};
  };
  auto got = run(true), want = run(false);
  const char* names[] = {"q", "k", "v"};
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(names[i]);
    ASSERT_TRUE(got[i].defined());
    EXPECT_GT(got[i].abs().sum().item<double>(), 0.0);
    expect_close(got[i], want[i], 1e-10);
  }
}

TEST_F(Sdpa, GradientsFlowToQueryKeyValue) {
  expect_same_gradients({2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 6}, {});
  SdpaArgs causal;
  causal.is_causal = true;
  expect_same_gradients({2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 6}, causal);
  SdpaArgs float_mask;
  float_mask.attn_mask = torch::randn({5, 7}, torch::kDouble);
  float_mask.scale = 0.7;
  expect_same_gradients({2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 6}, float_mask);
  SdpaArgs bool_mask;
  auto m = torch::rand({2, 1, 5, 7}) > 0.5;
  m.index_put_({torch::indexing::Ellipsis, 2}, true);
  bool_mask.attn_mask = m;
  expect_same_gradients({2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 6}, bool_mask);
  expect_same_gradients({4, 5, 8}, {4, 7, 8}, {4, 7, 3}, {});
}

TEST_F(Sdpa, TorchScriptResolvesTheOperator) {
  // The form PyTorch 2.x writes into saved models (positional, six arguments),
  // plus keyword scale; enable_gqa only where the schema has it.
  auto cu = torch::jit::compile(R"JIT(
def plain(q: Tensor, k: Tensor, v: Tensor, m: Optional[Tensor]):
    return torch.scaled_dot_product_attention(q, k, v, m, 0.0, False)

def scaled(q: Tensor, k: Tensor, v: Tensor):
    return torch.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
)JIT");
  auto q = torch::randn({2, 3, 5, 8}), k = torch::randn({2, 3, 7, 8}), v = torch::randn({2, 3, 7, 8});
  auto mask = torch::randn({5, 7});
  SdpaArgs with_mask;
  with_mask.attn_mask = mask;
  expect_close(cu->run_method("plain", q, k, v, mask).toTensor(), reference(q, k, v, with_mask));
  expect_close(cu->run_method("plain", q, k, v, torch::jit::IValue()).toTensor(),
               reference(q, k, v));
  SdpaArgs causal;
  causal.is_causal = true;
  causal.scale = 0.5;
  expect_close(cu->run_method("scaled", q, k, v).toTensor(), reference(q, k, v, causal));

  if (sdpa_has_argument("enable_gqa")) {
    auto gqa = torch::jit::compile(R"JIT(
def gqa(q: Tensor, k: Tensor, v: Tensor):
    return torch.scaled_dot_product_attention(q, k, v, enable_gqa=True)
)JIT");
    auto q8 = torch::randn({1, 8, 5, 4}), k2 = torch::randn({1, 2, 7, 4}), v2 = torch::randn({1, 2, 7, 4});
    expect_close(gqa->run_method("gqa", q8, k2, v2).toTensor(),
                 reference(q8, repeat_heads(k2, 4), repeat_heads(v2, 4)));
  }
}

// ---------------------------------------------------------------------------
// A real model saved by PyTorch 2.11 (torchvision VisionTransformer).

TEST(OpFallbacksRealModel, VitTinyLoadsRunsAndTrains) {
  const std::string path = shared_model("tv_vit_tiny.pt");
  if (!file_exists(path)) GTEST_SKIP() << path << " absent";
  nd::register_missing_op_fallbacks();
  torch::jit::Module model;
  ASSERT_NO_THROW(model = torch::jit::load(path));
  model.eval();

  torch::manual_seed(0);
  const auto x = torch::randn({4, 3, 32, 32});
  // As saved: num_classes=10 (not torchvision's default 1000), and torchvision
  // initialises the classifier head to zeros, so every logit is exactly 0.
  at::Tensor head_weight;
  for (const auto& p : model.named_parameters()) {
    if (p.name == "heads.head.weight") head_weight = p.value;
  }
  ASSERT_TRUE(head_weight.defined());
  EXPECT_EQ(head_weight.size(0), 10);
  const auto as_saved = model.forward({x}).toTensor();
  ASSERT_EQ(as_saved.sizes(), (std::vector<int64_t>{4, 10}));
  EXPECT_TRUE(torch::isfinite(as_saved).all().item<bool>());
  EXPECT_EQ(as_saved.abs().max().item<float>(), 0.0f);

  // Give the head weights so the logits depend on every attention layer.
  {
    torch::NoGradGuard no_grad;
    head_weight.normal_(0.0, 0.1);
  }
  const auto out1 = model.forward({x}).toTensor();
  EXPECT_TRUE(torch::isfinite(out1).all().item<bool>());
  EXPECT_GT(out1.std().item<float>(), 0.1f);
  if (fallback_registered()) {
    const auto called = nd::fallbacks_called();
    EXPECT_NE(std::find(called.begin(), called.end(), kSdpa), called.end());
  }
  // Eval mode is deterministic: a second run gives the same logits.
  const auto out2 = model.forward({x}).toTensor();
  EXPECT_TRUE(torch::allclose(out1, out2, 1e-6, 1e-6)) << (out1 - out2).abs().max().item<float>();

  // Without grad, nn.MultiheadAttention takes its fast path
  // (aten::_native_multi_head_attention, the LibTorch's own kernel, no
  // scaled_dot_product_attention): an independent implementation of the same
  // attention, so the logits must agree.
  {
    torch::NoGradGuard no_grad;
    const auto fast = model.forward({x}).toTensor();
    EXPECT_TRUE(torch::allclose(out1, fast, 1e-5, 1e-5)) << (out1 - fast).abs().max().item<float>();
  }

  // Backward (train mode) reaches every attention projection.
  model.train();
  model.forward({x}).toTensor().pow(2).mean().backward();
  int in_proj_with_grad = 0;
  for (const auto& p : model.named_parameters()) {
    ASSERT_TRUE(p.value.grad().defined()) << p.name;
    EXPECT_TRUE(torch::isfinite(p.value.grad()).all().item<bool>()) << p.name;
    if (p.name.find("self_attention.in_proj_weight") != std::string::npos) {
      EXPECT_GT(p.value.grad().abs().sum().item<float>(), 0.0f) << p.name;
      ++in_proj_with_grad;
    }
  }
  EXPECT_EQ(in_proj_with_grad, 4);  // num_layers=4
}

// ---------------------------------------------------------------------------
// Reading load errors.

TEST(MissingOperatorIn, Libtorch113LoadMessage) {
  // What torch::jit::load of tv_vit_tiny.pt throws on LibTorch 1.13.1 (what()).
  const std::string what = R"MSG(
Unknown builtin op: aten::scaled_dot_product_attention.
Here are some suggestions: 
	aten::_scaled_dot_product_attention

The original call is:
  File "code/__torch__/torch/nn/functional.py", line 483
    _113 = [bsz, num_heads, src_len0, head_dim]
    v8 = torch.view(v6, _113)
    attn_output5 = torch.scaled_dot_product_attention(q3, k8, v8, attn_mask18, dropout_p0, is_causal0)
                   ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE
    _114 = torch.permute(attn_output5, [2, 0, 1, 3])
    _115 = torch.contiguous(_114)
'multi_head_attention_forward' is being compiled since it was called from 'MultiheadAttention.forward'
Serialized   File "code/__torch__/torch/nn/modules/activation.py", line 49
    _10 = "The fast path was not hit because {}"
    _11 = "MultiheadAttention does not support NestedTensor outside of its fast path. "
    _12 = __torch__.torch.nn.functional.multi_head_attention_forward
    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE
    _13 = uninitialized(Tuple[Tensor, Tensor])
    if torch.__isnot__(attn_mask, None):
)MSG";
  EXPECT_EQ(nd::missing_operator_in(what), std::optional<std::string>(kSdpa));
}

TEST(MissingOperatorIn, CompilerWordings) {
  EXPECT_EQ(nd::missing_operator_in(
                "Unknown builtin op: aten::foo_bar.\nCould not find any similar ops to "
                "aten::foo_bar. This op may not exist or may not be currently supported in "
                "TorchScript.\n:\n  File \"code/__torch__/m.py\", line 3\n"),
            "aten::foo_bar");
  // Old releases: lower case, no final period.
  EXPECT_EQ(nd::missing_operator_in("unknown builtin op: aten::baz\nHere are some suggestions: \n"
                                    "\taten::_baz\n"),
            "aten::baz");
  // With an overload name, and a custom namespace.
  EXPECT_EQ(nd::missing_operator_in("Unknown builtin op: aten::foo.Tensor_out.\n"),
            "aten::foo.Tensor_out");
  EXPECT_EQ(nd::missing_operator_in("Unknown builtin op: my_ops::warp_perspective.\n"),
            "my_ops::warp_perspective");
  // Only the second sentence survived (a message cut by a wrapper).
  EXPECT_EQ(nd::missing_operator_in("Could not find any similar ops to aten::qux. This op may "
                                    "not exist"),
            "aten::qux");
}

// A 2.x file calling an operator with an argument 1.13's signature lacks
// (torch.stft's align_to_window), as LibTorch 1.13's compiler words it.
TEST(MissingOperatorIn, ArgumentsMatchNoSignature) {
  EXPECT_EQ(nd::missing_operator_in(
                "\nArguments for call are not valid.\nThe following variants are available:\n  \n"
                "  aten::stft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? "
                "window=None, bool normalized=False, bool? onesided=None, bool? return_complex=None) -> Tensor:\n"
                "  Expected at most 8 arguments but found 9 positional arguments.\n"),
            "aten::stft");
  EXPECT_EQ(nd::missing_operator_in("Arguments for call are not valid: no variants at all"), std::nullopt);
}

TEST(MissingOperatorIn, NodeAndDispatcherAndMobileWordings) {
  EXPECT_EQ(nd::missing_operator_in(
                "Schema not found for node. File a bug report.\n"
                "Node: %16 : Dynamic = my_ops::warp_perspective(%0, %19)\n\n"
                "Input types:Tensor, Tensor\nno candidates found\nwithin the graph:\n"),
            "my_ops::warp_perspective");
  EXPECT_EQ(nd::missing_operator_in("Schema not found for node. File a bug report.\n"
                                    "Node: %3 : Tensor, %4 : Tensor = aten::_foo(%1, %2) # m.py:4:8\n"),
            "aten::_foo");
  EXPECT_EQ(nd::missing_operator_in("Could not find schema for aten::foo."), "aten::foo");
  EXPECT_EQ(nd::missing_operator_in("Could not find schema for aten::foo.out"), "aten::foo.out");
  EXPECT_EQ(nd::missing_operator_in(
                "Following ops cannot be found: [aten::foo.out, aten::bar]. Please check if the "
                "operator library is included in the build."),
            "aten::foo.out");
  EXPECT_EQ(nd::missing_operator_in("Following ops cannot be found. Check fburl.com/missing_ops "
                                    "for the fix.{aten::baz, }"),
            "aten::baz");
}

TEST(MissingOperatorIn, LongMessages) {
  // A graph dump of a few MB before and after the sentence.
  std::string dump;
  for (int i = 0; i < 40000; ++i) dump += "  %" + std::to_string(i) + " : Tensor = aten::add(%1, %2, %3)\n";
  EXPECT_EQ(nd::missing_operator_in(dump + "Unknown builtin op: aten::zzz.\n" + dump), "aten::zzz");
  EXPECT_EQ(nd::missing_operator_in("Schema not found for node. File a bug report.\nNode: %5 : Tensor = "
                                    "aten::yyy(%1)\nInput types:Tensor\nno candidates found\n"
                                    "within the graph:\n" + dump),
            "aten::yyy");
  EXPECT_EQ(nd::missing_operator_in(dump), std::nullopt);
}

TEST(MissingOperatorIn, OtherErrorsAreNotMissingOperators) {
  EXPECT_EQ(nd::missing_operator_in(""), std::nullopt);
  EXPECT_EQ(nd::missing_operator_in("PytorchStreamReader failed locating file constants.pkl: "
                                    "file not found"),
            std::nullopt);
  // The operator exists; the call does not fit it.
  EXPECT_EQ(nd::missing_operator_in(
                "Arguments for call are not valid.\nThe following operator variants are "
                "available:\n  \n  aten::softmax.int(Tensor self, int dim, ScalarType? "
                "dtype=None) -> Tensor:\n  Keyword argument half_to_float unknown.\n"),
            std::nullopt);
  EXPECT_EQ(nd::missing_operator_in("Expected all tensors to be on the same device"), std::nullopt);
}

TEST(MissingOperatorIn, MessageNamesFileOperatorAndVersion) {
  const std::string msg = nd::missing_operator_message("model.pt", "aten::foo");
  EXPECT_EQ(msg, "model.pt calls operator aten::foo, which LibTorch " + nd::libtorch_version() +
                     " (the one normdoctor was built with) does not have; rebuild normdoctor "
                     "against a newer LibTorch (see README) or re-export the model with an older "
                     "PyTorch");
}

// A library's own operator (torchvision's roi_align in a traced Mask R-CNN)
// is in no LibTorch: the message says so instead of advising a rebuild.
TEST(MissingOperatorIn, ALibraryOperatorIsNamedAsTheLibrarys) {
  const std::string msg = nd::missing_operator_message("maskrcnn.pt", "torchvision::roi_align");
  EXPECT_EQ(msg, "maskrcnn.pt calls operator torchvision::roi_align from the torchvision library's C++ extension, "
                 "which normdoctor does not load (LibTorch " + nd::libtorch_version() +
                     " has only aten/prim operators); export the part of the model without it (a detection model's "
                     "backbone and heads without the roi_align step) and check that");
}

}  // namespace

}  // namespace nd_test_model_op_fallbacks_test
