#include "instrument/instrument.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <functional>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/library.h>

#include "core/error.h"
#include "instrument/recognize.h"
#include "instrument/structure.h"
#include "metrics/metrics.h"

namespace nd {
namespace {

using torch::jit::Node;
using torch::jit::Value;

/// Ops that read a tensor's metadata (shape, dtype, device), never its
/// values: a use by them says nothing about what the values feed.
const std::set<std::string>& metadata_ops() {
  static const std::set<std::string> ops = {"aten::size", "aten::dim", "prim::device", "prim::dtype", "prim::layout",
                                            "aten::len", "prim::shape", "aten::__isnot__", "aten::__is__"};
  return ops;
}

/// True when `v` is a scalar operand: not a tensor (a number), a 0-d
/// tensor, or a traced constant tensor of one element (a traced -log(10000)
/// or a scale is recorded as a tensor constant without its sizes).
bool scalar_operand(const Value* v) {
  const auto tt = v->type()->cast<c10::TensorType>();
  if (!tt || (tt->dim() && *tt->dim() == 0)) return true;
  if (v->node()->kind() == c10::prim::Constant) {
    const auto c = torch::jit::toIValue(v);
    return c && c->isTensor() && c->toTensor().numel() == 1;
  }
  return false;
}

/// True when `n` takes a square root (aten::sqrt, aten::rsqrt, aten::pow with
/// exponent +-0.5) of a one-pass variance, E[x^2] - E[x]^2 (+ eps): a
/// difference whose first term is a mean or sum of a square and whose second
/// term is a square. In fp16/bf16 the two nearly equal terms cancel and the
/// difference can be negative, so the root is NaN (Welford 1962; Chan, Golub
/// and LeVeque 1983, "Algorithms for computing the sample variance").
/// Recognized by what the ops compute, whatever the spelling: x ** 2,
/// x * x, torch.square, mean or sum; the mean may come from an attribute.
bool root_of_one_pass_variance(const Node* n) {
  const std::string k = n->kind().toQualString();
  if (n->inputs().empty()) return false;
  if (k == "aten::pow") {
    if (n->inputs().size() < 2) return false;
    auto e = torch::jit::toIValue(n->input(1));
    if (!e || !(e->isDouble() || e->isInt())) return false;
    const double ex = e->isDouble() ? e->toDouble() : static_cast<double>(e->toInt());
    if (ex != 0.5 && ex != -0.5) return false;
  } else if (k != "aten::sqrt" && k != "aten::rsqrt") {
    return false;
  }
  // The precision emulation wraps op outputs in normdoctor::round(id,
  // dtype, inplace, value): look through it to the value an op computed.
  auto unrounded = [](const Value* w) {
    while (std::string(w->node()->kind().toQualString()) == "normdoctor::round" && w->node()->inputs().size() == 4)
      w = w->node()->input(3);
    return w;
  };
  auto producer = [&](const Value* w) { return unrounded(w)->node(); };
  auto is_square = [](const Node* m) {
    const std::string mk = m->kind().toQualString();
    if (mk == "aten::square") return true;
    if (mk == "aten::pow" && m->inputs().size() >= 2) {
      auto e = torch::jit::toIValue(m->input(1));
      return e && ((e->isInt() && e->toInt() == 2) || (e->isDouble() && e->toDouble() == 2.0));
    }
    if (mk == "aten::mul" && m->inputs().size() >= 2) return m->input(0) == m->input(1);
    return false;
  };
  const Value* v = n->input(0);
  // Through the eps addition and views that keep the values.
  for (int hops = 0; hops < 4; ++hops) {
    const Node* p = producer(v);
    const std::string pk = p->kind().toQualString();
    if ((pk == "aten::add" || pk == "aten::add_") && p->inputs().size() >= 2) {
      const bool c0 = torch::jit::toIValue(p->input(0)).has_value(), c1 = torch::jit::toIValue(p->input(1)).has_value();
      const bool s0 = p->input(0)->type()->kind() != c10::TypeKind::TensorType;
      const bool s1 = p->input(1)->type()->kind() != c10::TypeKind::TensorType;
      if (c1 || s1) { v = p->input(0); continue; }
      if (c0 || s0) { v = p->input(1); continue; }
      return false;
    }
    if (pk == "aten::to" || pk == "aten::contiguous" || pk == "aten::squeeze" || pk == "aten::unsqueeze") {
      v = p->input(0);
      continue;
    }
    break;
  }
  auto one_pass = [&](const Value* w) {
    const Node* d = producer(w);
    const std::string dk = d->kind().toQualString();
    if (dk != "aten::sub" || d->inputs().size() < 2) return false;
    const Node* a = producer(d->input(0));
    const Node* b = producer(d->input(1));
    const std::string ak = a->kind().toQualString();
    if ((ak != "aten::mean" && ak != "aten::sum") || a->inputs().empty()) return false;
    return is_square(producer(a->input(0))) && is_square(b);
  };
  // A variance chosen by scripted control flow (if self.one_pass: ... else:
  // ...): the root takes a one-pass variance when a branch returns one.
  v = unrounded(v);
  const Node* d = v->node();
  if (d->kind() == c10::prim::If) {
    size_t k_out = 0;
    while (k_out < d->outputs().size() && d->output(k_out) != v) ++k_out;
    for (const auto* b : d->blocks())
      if (k_out < b->outputs().size() && one_pass(b->outputs()[k_out])) return true;
    return false;
  }
  return one_pass(v);
}


/// The eps of a division by a statistic plus eps: `n` is a div (divisor =
/// input 1), an rsqrt or reciprocal (input 0); the divisor is followed back
/// through the precision emulation's round wrappers, sqrt / pow(., 0.5),
/// dtype casts and views to an add of a scalar constant. Returns 0 when the
/// divisor has no such constant.
double divisor_eps(Node* n, const std::function<std::optional<double>(Value*)>& attr_double, bool log = false) {
  const std::string k = n->kind().toQualString();
  Value* v = nullptr;
  if (log) {
    if ((k == "aten::log" || k == "aten::log_" || k == "aten::log2" || k == "aten::log10") && !n->inputs().empty())
      v = n->input(0);
  } else if ((k == "aten::div" || k == "aten::div_") && n->inputs().size() >= 2) {
    v = n->input(1);
  } else if ((k == "aten::rsqrt" || k == "aten::rsqrt_" || k == "aten::reciprocal" || k == "aten::reciprocal_") &&
             !n->inputs().empty()) {
    v = n->input(0);
  }
  if (!v || v->type()->kind() != c10::TypeKind::TensorType) return 0.0;
  auto scalar = [&](Value* w) -> std::optional<double> {
    auto c = torch::jit::toIValue(w);
    if (c && c->isDouble()) return c->toDouble();
    if (!c && w->node()->kind() == c10::prim::GetAttr && w->type()->kind() != c10::TypeKind::TensorType)
      return attr_double(w);  // x / (std + self.eps)
    return std::nullopt;
  };
  for (int hops = 0; hops < 8; ++hops) {
    while (std::string(v->node()->kind().toQualString()) == "normdoctor::round" && v->node()->inputs().size() == 4)
      v = v->node()->input(3);
    Node* p = v->node();
    const std::string pk = p->kind().toQualString();
    if ((pk == "aten::add" || pk == "aten::add_") && p->inputs().size() >= 2) {
      if (auto e = scalar(p->input(1)); e && *e > 0) return *e;
      if (auto e = scalar(p->input(0)); e && *e > 0) return *e;
      return 0.0;
    }
    // log(x.clamp(min=1e-8)): the floor plays the eps.
    if (log && (pk == "aten::clamp" || pk == "aten::clamp_min" || pk == "aten::clamp_") && p->inputs().size() >= 2) {
      if (auto e = scalar(p->input(1)); e && *e > 0) return *e;
      return 0.0;
    }
    if (pk == "aten::sqrt" || pk == "aten::to" || pk == "aten::contiguous" || pk == "aten::squeeze" ||
        pk == "aten::unsqueeze" || pk == "aten::view" || pk == "aten::reshape" || pk == "aten::expand_as" ||
        pk == "aten::type_as") {
      v = p->input(0);
      continue;
    }
    if (pk == "aten::pow" && p->inputs().size() >= 2) {
      auto e = scalar(p->input(1));
      if (e && *e == 0.5) { v = p->input(0); continue; }
    }
    break;
  }
  return 0.0;
}


/// The ops computing the statistic a normalization divides by: from each
/// division or inversion whose divisor passes through a square root
/// (x / sqrt(v + eps), x * rsqrt(v + eps), a cumulative norm's
/// (x - mean) / (cum_var + eps).sqrt()), back through the elementwise
/// post-processing (eps, counts, means) to the reductions (sum, mean, var,
/// cumsum, norm) and the squares they reduce, and no further: the tensor
/// being normalized and what produced it are not part of the statistic.
std::set<const Node*> norm_statistic_nodes(const std::vector<Node*>& nodes) {
  static const std::set<std::string> reductions = {
      "aten::sum", "aten::mean", "aten::var", "aten::std", "aten::var_mean", "aten::std_mean", "aten::cumsum",
      "aten::norm", "aten::linalg_vector_norm", "aten::frobenius_norm"};
  static const std::set<std::string> post = {
      "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::mul", "aten::mul_", "aten::div", "aten::div_",
      "aten::pow", "aten::square", "aten::sqrt", "aten::clamp", "aten::clamp_min", "aten::to", "aten::view",
      "aten::reshape", "aten::unsqueeze", "aten::squeeze", "aten::expand", "aten::expand_as", "aten::contiguous"};
  auto kind = [](const Node* n) { return std::string(n->kind().toQualString()); };
  auto is_square = [&](const Node* m) {
    const std::string mk = kind(m);
    if (mk == "aten::square") return true;
    if (mk == "aten::pow" && m->inputs().size() >= 2) {
      auto e = torch::jit::toIValue(m->input(1));
      return e && ((e->isInt() && e->toInt() == 2) || (e->isDouble() && e->toDouble() == 2.0));
    }
    return mk == "aten::mul" && m->inputs().size() >= 2 && m->input(0) == m->input(1);
  };
  std::set<const Node*> out;
  for (Node* n : nodes) {
    const std::string k = kind(n);
    const Value* d = nullptr;
    if ((k == "aten::div" || k == "aten::div_") && n->inputs().size() >= 2) d = n->input(1);
    else if ((k == "aten::rsqrt" || k == "aten::reciprocal") && !n->inputs().empty()) d = n->input(0);
    if (!d || d->type()->kind() != c10::TypeKind::TensorType) continue;
    // The divisor must pass through a root (or be an rsqrt's argument).
    bool root = k == "aten::rsqrt";
    std::vector<const Node*> chain;
    std::vector<std::pair<const Value*, int>> work = {{d, 0}};
    std::set<const Node*> seen;
    while (!work.empty()) {
      auto [v, depth] = work.back();
      work.pop_back();
      const Node* p = v->node();
      if (depth > 12 || !seen.insert(p).second) continue;
      const std::string pk = kind(p);
      if (pk == "aten::sqrt" || (pk == "aten::pow" && p->inputs().size() >= 2 && [&] {
            auto e = torch::jit::toIValue(p->input(1));
            return e && e->isDouble() && e->toDouble() == 0.5;
          }()))
        root = true;
      if (reductions.count(pk)) {
        chain.push_back(p);
        // The reduced tensor: a square of it is part of the statistic.
        if (!p->inputs().empty()) {
          const Node* q = p->input(0)->node();
          if (is_square(q)) chain.push_back(q);
          else if (reductions.count(kind(q))) work.push_back({p->input(0), depth + 1});  // cumsum(x.pow(2).sum(1))
        }
        continue;
      }
      if (!post.count(pk)) continue;
      chain.push_back(p);
      for (const Value* in : p->inputs())
        if (in->type()->kind() == c10::TypeKind::TensorType) work.push_back({in, depth + 1});
    }
    if (!root) continue;
    bool reduced = false;
    for (const Node* c : chain) reduced = reduced || reductions.count(kind(c)) > 0;
    if (reduced)
      for (const Node* c : chain) out.insert(c);
  }
  return out;
}


using torch::jit::Block;

// ---------------------------------------------------------------------------
// The tap and flag operators. They read the pass that is running on this
// thread; outside a pass they are identities.

struct PassContext {
  const std::vector<TapSite>* taps = nullptr;
  Collector* collector = nullptr;
  PassConfig cfg;
};
thread_local PassContext* g_pass = nullptr;

at::Tensor tap_impl(int64_t id, const at::Tensor& x) {
  PassContext* ctx = g_pass;
  if (ctx && x.defined() && id >= 0 && static_cast<size_t>(id) < ctx->taps->size()) {
    const TapSite& site = (*ctx->taps)[static_cast<size_t>(id)];
    if (x.is_nested()) {
      // PyTorch's eval fast path (nn.TransformerEncoder given a key padding
      // mask, no grad): a nested tensor holds the kept positions only and has
      // no sizes(). Its values, as one vector, are what the module computed.
      std::vector<at::Tensor> parts;
      for (const auto& c : x.unbind(0)) parts.push_back(c.reshape({-1}));
      if (!parts.empty()) ctx->collector->on_forward(site, at::cat(parts));
      return x;
    }
    ctx->collector->on_forward(site, x);
    const bool grad_kind = site.kind == TapKind::kModuleOutput || site.kind == TapKind::kModuleInput;
    if (grad_kind && ctx->cfg.record_grad && x.requires_grad()) {
      Collector* col = ctx->collector;
      x.register_hook([col, id](const at::Tensor& g) { col->on_grad(id, g); });
    }
    if (ctx->collector->edit) {
      at::Tensor y = ctx->collector->edit(site, x);
      if (y.defined()) return y;
    }
  }
  return x;
}

// kind 0: batch_norm training flag baked in by tracing -> the pass's mode.
// kind 1: dropout train flag baked in by tracing -> the pass's mode, unless dropout is off.
// kind 2: dropout train flag computed by the model -> as computed, unless dropout is off.
bool flag_impl(int64_t kind, bool orig) {
  PassContext* ctx = g_pass;
  if (!ctx) return orig;
  switch (kind) {
    case 0: return ctx->cfg.keep_baked ? orig : ctx->cfg.training;
    case 1: return (ctx->cfg.keep_baked ? orig : ctx->cfg.training) && ctx->cfg.dropout;
    case 2: return orig && ctx->cfg.dropout;
    default: return orig;
  }
}

// The attention logits of one aten::scaled_dot_product_attention call, as
// PyTorch's math backend forms them: q @ k^T * scale (scale default
// 1/sqrt(E)), key heads repeated for grouped-query attention, is_causal as a
// top-left-aligned lower triangle, a boolean mask (True = takes part) as
// -inf elsewhere, a float mask added. Measured without autograd; returns q.
at::Tensor attn_tap_impl(int64_t id, const at::Tensor& q, const at::Tensor& k, const c10::optional<at::Tensor>& mask,
                         bool is_causal, c10::optional<double> scale) {
  PassContext* ctx = g_pass;
  if (!ctx || !q.defined() || !k.defined() || id < 0 || static_cast<size_t>(id) >= ctx->taps->size()) return q;
  if (!q.is_floating_point() || q.dim() < 2 || k.dim() < 2 || q.size(-1) != k.size(-1)) return q;
  at::NoGradGuard ng;
  at::Tensor qf = q.detach().to(at::kFloat), kf = k.detach().to(at::kFloat);
  if (qf.dim() >= 3 && kf.dim() >= 3 && qf.size(-3) != kf.size(-3) && kf.size(-3) > 0 && qf.size(-3) % kf.size(-3) == 0)
    kf = kf.repeat_interleave(qf.size(-3) / kf.size(-3), -3);
  const double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor logits = at::matmul(qf, kf.transpose(-2, -1)) * sc;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    const int64_t L = logits.size(-2), S = logits.size(-1);
    at::Tensor keep = at::ones({L, S}, at::TensorOptions().dtype(at::kBool).device(logits.device())).tril();
    logits = logits.masked_fill(keep.logical_not(), neg_inf);
  }
  if (mask && mask->defined()) {
    if (mask->scalar_type() == at::kBool) {
      logits = logits.masked_fill(mask->logical_not(), neg_inf);
    } else {
      // An additive mask: the entries it pushes to kMaskFill or below are
      // masked, as at softmax sites (Swin's -100 window mask, added to the
      // relative position bias and passed as attn_mask by Hugging Face's
      // SDPA path, eval32): their softmax weight is e^-30 or less, and
      // the logit statistics leave them out.
      const at::Tensor mf = mask->to(at::kFloat);
      logits = (logits + mf).masked_fill(mf <= recognize::kMaskFill, neg_inf);
    }
  }
  if (is_causal || (mask && mask->defined())) {
    // Causal when every entry above the diagonal of the square scores is
    // removed (is_causal, or a mask at or below kMaskFill there: HF's
    // finfo.min causal masks passed as attn_mask), as for softmax sites.
    bool causal = false;
    const int64_t L = logits.size(-1);
    if (logits.size(-2) == L && L >= 2) {
      const at::Tensor upper = at::ones({L, L}, at::TensorOptions().dtype(at::kBool).device(logits.device())).triu(1);
      const at::Tensor removed = logits.reshape({-1, L, L}) <= recognize::kMaskFill;
      causal = !upper.logical_and(removed.logical_not()).any().item<bool>();
    }
    ctx->collector->note_mask_call(id, causal);
  }
  ctx->collector->on_forward((*ctx->taps)[static_cast<size_t>(id)], logits);
  return q;
}

// A norm-input tap that also records the normalized_shape computed at run
// time (F.layer_norm(x, x.shape[-2:])).
at::Tensor norm_tap_impl(int64_t id, const at::Tensor& x, c10::ArrayRef<int64_t> ns) {
  tap_impl(id, x);
  PassContext* ctx = g_pass;
  if (ctx && id >= 0 && static_cast<size_t>(id) < ctx->taps->size()) ctx->collector->set_ints(id, ns.vec());
  return x;
}

// The masked entries of attention scores after an additive mask (entries
// whose addend is at or below recognize::kMaskFill) or a masked_fill (its
// boolean mask), for the next firing of softmax tap `id`.
at::Tensor mask_tap_impl(int64_t id, const at::Tensor& out, const at::Tensor& operand, int64_t mode) {
  PassContext* ctx = g_pass;
  if (!ctx || !out.defined() || !operand.defined() || id < 0 || static_cast<size_t>(id) >= ctx->taps->size()) return out;
  at::NoGradGuard ng;
  try {
    // mode 0: an additive term (masked where <= kMaskFill); 3: a subtracted
    // one (masked where >= -kMaskFill); 1: masked_fill's
    // boolean mask (true = masked); 2: torch.where(keep, scores, fill)'s
    // condition (true = kept), a mask only when every filled entry is at or
    // below kMaskFill (a -1e4 buffer, finfo.min), which is read here.
    at::Tensor m;
    if (mode == 2) {
      m = operand.detach().to(at::kBool).logical_not().expand(out.sizes());
      if (m.any().item<bool>() && out.detach().masked_select(m).max().item<double>() > recognize::kMaskFill) return out;
    } else {
      // mode 3: a subtracted term (scores - term), masked where >= -kMaskFill.
      m = mode == 1   ? operand.detach().to(at::kBool)
          : mode == 3 ? (operand.detach() >= -recognize::kMaskFill)
                      : (operand.detach() <= recognize::kMaskFill);
    }
    ctx->collector->set_mask(id, m.expand(out.sizes()));
  } catch (const std::exception&) {
    // Shapes that do not broadcast: no mask is applied to the statistics.
  }
  return out;
}

// Precision emulation: x rounded to the format `dtype` (kHalf / kBFloat16)
// and back; `inplace`: the op wrote into its input, which is rounded in
// place. Records the first op whose rounded output holds Inf or NaN.
at::Tensor round_impl(int64_t id, int64_t dtype, bool inplace, const at::Tensor& x) {
  PassContext* ctx = g_pass;
  if (!ctx || !x.defined() || !x.is_floating_point() || x.numel() == 0) return x;
  at::NoGradGuard ng;
  const auto fmt = static_cast<at::ScalarType>(dtype);
  // A native run (tensors already in the format): only the Inf/NaN watch.
  const bool wide = x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble;
  at::Tensor y = wide ? x.to(fmt).to(x.scalar_type()) : x;
  // float32's own extremes (torch.finfo(torch.float32).min as a mask fill,
  // (1 - mask) * finfo.min, scores + that) are what the code computed as
  // torch.finfo(dtype).min: a trace recorded float32's, the model run in
  // fp16/bf16 computes that format's (-65504 in fp16), finite. Rounded to
  // the format they would be -inf and fully masked softmax rows NaN, which
  // the real run never gives (HF left-padded LMs traced, eval16). Values at
  // least half float32's largest: no computation reaches them except from
  // those constants (any real overflow in the format happened far below).
  if (wide && (fmt == at::kHalf || fmt == at::kBFloat16)) {
    const double f32max = static_cast<double>(std::numeric_limits<float>::max());
    const at::Tensor finite_x = at::isfinite(x);
    const at::Tensor extreme = x.abs().ge(0.5 * f32max).logical_and(finite_x);
    if (extreme.any().item<bool>()) {
      const double fmax = fmt == at::kHalf ? 65504.0 : 3.3895313892515355e38;  // finfo(bfloat16).max
      y = at::where(extreme, x.sign() * fmax, y);
    }
  }
  Collector* col = ctx->collector;
  const bool want_event = col->round_events.size() < 64;
  if (want_event || col->round_first_inf < 0 || col->round_first_nan < 0) {
    // Counted once per op for both records.
    const int64_t ninf = at::isinf(y).sum().item<int64_t>();
    const int64_t nnan = at::isnan(y).sum().item<int64_t>();
    if (want_event && (ninf > 0 || nnan > 0)) {
      Collector::RoundEvent ev;
      ev.site = id;
      ev.inf = ninf;
      ev.nan = nnan;
      ev.negative_inf_only = ninf > 0 && y.eq(-std::numeric_limits<double>::infinity()).sum().item<int64_t>() == ninf;
      col->round_events.push_back(ev);
    }
    if (col->round_first_inf < 0 && ninf > 0) col->round_first_inf = id, col->round_first_inf_count = ninf;
    if (col->round_first_nan < 0 && nnan > 0) col->round_first_nan = id, col->round_first_nan_count = nnan;
  }
  if (!wide) return x;
  if (inplace) {
    try {
      x.detach().copy_(y);
      return x;
    } catch (const std::exception&) {
      // An expanded view cannot be written: the rounded copy goes on.
    }
  }
  return y;
}

// The dropout_p of a traced scaled_dot_product_attention: the trace
// recorded the float its module computed in the tracing mode (HF's
// `dropout=0.0 if not self.training else self.dropout.p`), so it is a baked
// training flag like aten::dropout's (flag kind 1): p when the pass trains
// with dropout or keeps the baked flags, else 0.
double dropout_p_impl(int64_t kind, double p) { return flag_impl(kind, true) ? p : 0.0; }

TORCH_LIBRARY(normdoctor, m) {
  m.def("round(int id, int dtype, bool inplace, Tensor x) -> Tensor", round_impl);
  m.def("tap(int id, Tensor(a) x) -> Tensor(a)", tap_impl);
  m.def("norm_tap(int id, Tensor(a) x, int[] normalized_shape) -> Tensor(a)", norm_tap_impl);
  m.def("mask_tap(int id, Tensor(a) out, Tensor operand, int mode) -> Tensor(a)", mask_tap_impl);
  m.def("attn_tap(int id, Tensor(a) q, Tensor k, Tensor? mask, bool is_causal, float? scale) -> Tensor(a)", attn_tap_impl);
  // CONSERVATIVE: the JIT treats the op as having side effects, so constant
  // propagation never folds flag(<const>, <const>) into the value it had on
  // the first run (which would freeze the mode of the first pass forever).
  m.def(torch::schema("flag(int kind, bool orig) -> bool", c10::AliasAnalysisKind::CONSERVATIVE), flag_impl);
  m.def(torch::schema("dropout_p(int kind, float p) -> float", c10::AliasAnalysisKind::CONSERVATIVE), dropout_p_impl);
}

// ---------------------------------------------------------------------------

bool is_tensor(const Value* v) { return v->type()->kind() == c10::TypeKind::TensorType; }

// A tuple with at least one tensor element (a module returning (out, attn)).
bool is_tensor_tuple(const Value* v) {
  auto tt = v->type()->cast<c10::TupleType>();
  if (!tt) return false;
  for (const auto& e : tt->elements())
    if (e->kind() == c10::TypeKind::TensorType) return true;
  return false;
}

// Branches chosen by a module's configuration: an `if self.normalize_before:`
// (fairseq), `if not self.pre_norm:`, `if self.use_layer_scale:` tests a bool
// attribute that is fixed for the whole check, so only the taken block ever
// runs. Inlining it lets every analysis (norm placement, recognition, taps)
// see the model that runs, not the union of its configurations. The training
// flag stays dynamic (the probes switch it), and so does any attribute the
// graph itself assigns (prim::SetAttr).
// An integer fixed for the whole check: a constant, or an int attribute of
// a module (F.normalize(x, dim=self.norm_dim), `k == self.source_idx`).
std::optional<int64_t> static_int(const Value* x, const ScopeResolver& scopes) {
  // An Optional[int] argument's value once a folded `if dim is None:` has
  // unwrapped it (F.softmax / F.log_softmax inlined: prim::unchecked_cast).
  while (x->node()->kind() == c10::prim::unchecked_cast && x->node()->inputs().size() == 1) x = x->node()->input(0);
  auto c = torch::jit::toIValue(x);
  if (c && c->isInt()) return c->toInt();
  if (x->node()->kind() != c10::prim::GetAttr) return std::nullopt;
  const std::optional<c10::IValue> a = scopes.attribute(x);
  if (a && a->isInt()) return a->toInt();
  return std::nullopt;
}

std::optional<bool> static_condition(const Value* c, const ScopeResolver& scopes, const std::set<std::string>& assigned,
                                     int depth = 0) {
  const Node* d = c->node();
  if (depth > 4) return std::nullopt;
  if (d->kind() == c10::aten::__not__) {
    auto v = static_condition(d->input(0), scopes, assigned, depth + 1);
    if (v) return !*v;
    return std::nullopt;
  }
  if (d->kind() == c10::prim::Constant) {
    auto v = torch::jit::toIValue(c);
    if (v && v->isBool()) return v->toBool();
    return std::nullopt;
  }
  // A comparison of integers fixed for the check: constants and int
  // attributes (`if k == self.source_idx:` in a loop over an nn.ModuleList,
  // which TorchScript unrolls with k a constant: SSD's L2Norm on one VGG
  // layer's output).
  {
    static const std::set<std::string> cmp = {"aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge"};
    const std::string k = d->kind().toQualString();
    if (cmp.count(k) && d->inputs().size() == 2) {
      // Not an attribute the graph itself assigns (prim::SetAttr).
      auto int_of = [&](const Value* x) -> std::optional<int64_t> {
        if (x->type()->kind() != c10::TypeKind::IntType) return std::nullopt;
        if (x->node()->kind() == c10::prim::GetAttr && assigned.count(x->node()->s(c10::attr::name))) return std::nullopt;
        return static_int(x, scopes);
      };
      const auto a = int_of(d->input(0)), b = int_of(d->input(1));
      if (!a || !b) return std::nullopt;
      if (k == "aten::eq") return *a == *b;
      if (k == "aten::ne") return *a != *b;
      if (k == "aten::lt") return *a < *b;
      if (k == "aten::le") return *a <= *b;
      if (k == "aten::gt") return *a > *b;
      return *a >= *b;
    }
  }
  // `x is None` / `x is not None` on a value whose static type cannot be
  // None (an int attribute or a literal passed to an Optional[int] parameter
  // of an inlined function: F.softmax(x, dim=self.dim)'s `if dim is None:`),
  // or on the None constant itself.
  if ((d->kind() == c10::aten::__is__ || d->kind() == c10::aten::__isnot__) && d->inputs().size() == 2) {
    const Value* a = d->input(0);
    const Value* b = d->input(1);
    if (a->type()->kind() == c10::TypeKind::NoneType) std::swap(a, b);
    if (b->type()->kind() == c10::TypeKind::NoneType) {
      const auto k = a->type()->kind();
      std::optional<bool> is_none;
      if (k == c10::TypeKind::NoneType) is_none = true;
      else if (k != c10::TypeKind::OptionalType && k != c10::TypeKind::AnyType && k != c10::TypeKind::UnionType)
        is_none = false;
      if (is_none) return d->kind() == c10::aten::__is__ ? *is_none : !*is_none;
    }
    return std::nullopt;
  }
  // `self.a and self.b` / `self.a or self.b`: TorchScript's short circuit
  // is an if whose blocks return the other operand or a constant.
  if (d->kind() == c10::prim::If && d->blocks().size() == 2) {
    auto v = static_condition(d->input(0), scopes, assigned, depth + 1);
    if (!v) return std::nullopt;
    size_t k = 0;
    while (k < d->outputs().size() && d->output(k) != c) ++k;
    const Block* body = d->blocks()[*v ? 0 : 1];
    if (k >= body->outputs().size()) return std::nullopt;
    return static_condition(body->outputs()[k], scopes, assigned, depth + 1);
  }
  if (d->kind() != c10::prim::GetAttr || c->type()->kind() != c10::TypeKind::BoolType) return std::nullopt;
  const std::string name = d->s(c10::attr::name);
  if (name == "training" || assigned.count(name)) return std::nullopt;
  const auto v = scopes.attribute(c);
  if (v && v->isBool()) return v->toBool();
  return std::nullopt;
}

int64_t fold_configuration_branches(Block* b, const ScopeResolver& scopes, const std::set<std::string>& assigned) {
  int64_t folded = 0;
  for (auto it = b->nodes().begin(); it != b->nodes().end();) {
    Node* n = *it;
    ++it;
    if (n->kind() == c10::prim::If && n->blocks().size() == 2) {
      if (auto v = static_condition(n->input(0), scopes, assigned)) {
        Block* body = n->blocks()[*v ? 0 : 1];
        for (auto bi = body->nodes().begin(); bi != body->nodes().end();) {
          Node* m = *bi;
          ++bi;
          m->moveBefore(n);
        }
        for (size_t i = 0; i < n->outputs().size(); ++i) n->outputs()[i]->replaceAllUsesWith(body->outputs()[i]);
        // The moved nodes now lie before `it`: ifs among them are folded
        // by the caller's next round.
        n->destroy();
        ++folded;
        continue;
      }
    }
    for (Block* sb : n->blocks()) folded += fold_configuration_branches(sb, scopes, assigned);
  }
  return folded;
}

void collect_nodes(Block* b, std::vector<Node*>& out) {
  for (Node* n : b->nodes()) {
    out.push_back(n);
    for (Block* sb : n->blocks()) collect_nodes(sb, out);
  }
}

// True when v (a softmax input) is computed from a matrix product, through
// at most 8 elementwise steps (scale, mask add, masked_fill, where, casts,
// reshapes, taps): the softmax of attention scores.
// The ops between an attention's score product and its softmax: scaling,
// masks (additive, masked_fill, where), casts, views, soft-capping (tanh).
const std::set<std::string>& scores_path_ops() {
  static const std::set<std::string> ops = {
      "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::mul", "aten::mul_", "aten::div", "aten::div_",
      "aten::masked_fill", "aten::masked_fill_", "aten::where", "aten::to", "aten::type_as", "aten::float",
      "aten::contiguous", "aten::view", "aten::reshape", "aten::clamp", "aten::tanh", "normdoctor::tap"};
  return ops;
}

const Node* attention_scores_product(const Value* v, int depth) {
  const Node* d = v->node();
  const std::string kq = d->kind().toQualString();
  if (kq == "aten::matmul" || kq == "aten::bmm" || kq == "aten::einsum" || kq == "aten::baddbmm") return d;
  if (depth >= 8) return nullptr;
  // Scores computed in the branches of an if (timm's `if self.fused_attn`,
  // a spelling chosen by an attribute): any branch's product counts.
  if (d->kind() == c10::prim::If) {
    for (const Block* blk : d->blocks())
      if (v->offset() < blk->return_node()->inputs().size())
        if (const Node* m = attention_scores_product(blk->return_node()->input(v->offset()), depth + 1)) return m;
    return nullptr;
  }
  const std::set<std::string>& through = scores_path_ops();
  if (!through.count(kq)) return nullptr;
  for (const Value* in : d->inputs())
    if (in->type()->kind() == c10::TypeKind::TensorType)
      if (const Node* m = attention_scores_product(in, depth + 1)) return m;
  return nullptr;
}

// Whether attention scores reaching `v` (a softmax's input) are scaled by a
// number: a mul/div by a scalar between the product and `v`, a mul/div by a
// scalar of q or k before the product (through views, transposes and
// casts), or baddbmm's alpha other than 1.
bool attention_scores_scaled(const Value* v, int depth) {
  const Node* d = v->node();
  const std::string kq = d->kind().toQualString();
  auto scaled_operand = [](const Value* x) {
    static const std::set<std::string> moves = {"aten::view", "aten::reshape", "aten::transpose", "aten::permute",
                                                "aten::contiguous", "aten::to", "aten::type_as", "aten::float",
                                                "aten::flatten", "aten::unflatten", "aten::t", "normdoctor::tap"};
    for (int i = 0; i < 8; ++i) {
      const Node* n = x->node();
      const std::string k = n->kind().toQualString();
      if ((k == "aten::mul" || k == "aten::mul_" || k == "aten::div" || k == "aten::div_") && n->inputs().size() >= 2 &&
          (scalar_operand(n->input(1)) || ((k == "aten::mul" || k == "aten::mul_") && scalar_operand(n->input(0)))))
        return true;
      if (!moves.count(k) || n->inputs().empty()) return false;
      x = k == "normdoctor::tap" && n->inputs().size() == 2 ? n->input(1) : n->input(0);
    }
    return false;
  };
  if (kq == "aten::matmul" || kq == "aten::bmm" || kq == "aten::einsum") {
    for (const Value* in : d->inputs())
      if (in->type()->kind() == c10::TypeKind::TensorType && scaled_operand(in)) return true;
    if (kq == "aten::einsum" && d->inputs().size() >= 2 && d->input(1)->node()->kind() == c10::prim::ListConstruct)
      for (const Value* in : d->input(1)->node()->inputs())
        if (scaled_operand(in)) return true;
    return false;
  }
  if (kq == "aten::baddbmm") {
    if (d->inputs().size() >= 5) {
      const auto alpha = torch::jit::toIValue(d->input(4));
      if (alpha && (alpha->isDouble() || alpha->isInt()) && alpha->toScalar().toDouble() != 1.0) return true;
    }
    return scaled_operand(d->input(1)) || scaled_operand(d->input(2));
  }
  if (depth >= 8) return false;
  if (d->kind() == c10::prim::If) {
    for (const Block* blk : d->blocks())
      if (v->offset() < blk->return_node()->inputs().size() &&
          attention_scores_scaled(blk->return_node()->input(v->offset()), depth + 1))
        return true;
    return false;
  }
  if ((kq == "aten::mul" || kq == "aten::mul_" || kq == "aten::div" || kq == "aten::div_") && d->inputs().size() >= 2 &&
      (scalar_operand(d->input(1)) || ((kq == "aten::mul" || kq == "aten::mul_") && scalar_operand(d->input(0)))))
    return true;
  const std::set<std::string>& through = scores_path_ops();
  if (!through.count(kq)) return false;
  for (const Value* in : d->inputs())
    if (in->type()->kind() == c10::TypeKind::TensorType && attention_scores_scaled(in, depth + 1)) return true;
  return false;
}

// The ops an attention's q, k and v pass through from the module that
// wrote them: reshapes, transposes, scaling, casts, head splitting, rotary
// embeddings (q * cos + rotate_half(q) * sin) and repeat_kv (slice,
// expand, reshape).
const std::set<std::string>& attention_operand_ops() {
  static const std::set<std::string> ops = {
      "aten::transpose", "aten::permute", "aten::view", "aten::reshape", "aten::contiguous", "aten::mul",
      "aten::div", "aten::to", "aten::type_as", "aten::float", "aten::unsqueeze", "aten::expand",
      "aten::repeat_interleave", "aten::flatten", "aten::unflatten", "aten::t", "aten::clone",
      "aten::add", "aten::slice", "aten::select"};
  return ops;
}

// The module whose output tap `v` comes from, through the ops in `through`
// (read as their first input); "" when none is reached in 12 steps.
std::string producer_module(const Value* v, const std::vector<TapSite>& taps,
                            const std::set<std::string>& through = attention_operand_ops(), int depth = 0) {
  const Node* d = v->node();
  const std::string kq = d->kind().toQualString();
  if (kq == "normdoctor::tap") {
    auto id = torch::jit::toIValue(d->input(0));
    if (id && id->isInt() && id->toInt() >= 0 && static_cast<size_t>(id->toInt()) < taps.size()) {
      const TapSite& site = taps[static_cast<size_t>(id->toInt())];
      if (site.kind == TapKind::kModuleOutput) return site.module;
    }
    return producer_module(d->input(1), taps, through, depth + 1);
  }
  if (depth >= 12) return "";
  if (!through.count(kq) || d->inputs().empty()) return "";
  return producer_module(d->input(0), taps, through, depth + 1);
}

Node* make_constant_int(torch::jit::Graph& g, int64_t v) {
  Node* c = g.create(c10::prim::Constant);
  c->i_(c10::attr::value, v);
  c->output()->setType(c10::IntType::get());
  return c;
}

const c10::Symbol kTap = c10::Symbol::fromQualString("normdoctor::tap");
const c10::Symbol kAttnTap = c10::Symbol::fromQualString("normdoctor::attn_tap");
const c10::Symbol kNormTap = c10::Symbol::fromQualString("normdoctor::norm_tap");
const c10::Symbol kMaskTap = c10::Symbol::fromQualString("normdoctor::mask_tap");
const c10::Symbol kRound = c10::Symbol::fromQualString("normdoctor::round");
const c10::Symbol kFlag = c10::Symbol::fromQualString("normdoctor::flag");
const c10::Symbol kDropoutP = c10::Symbol::fromQualString("normdoctor::dropout_p");

// The value a chain of kTap/kNormTap wrappers (tap(id, x) -> x) hands on: x.
Value* untapped(Value* x) {
  while ((x->node()->kind() == kTap || x->node()->kind() == kNormTap) && x->node()->inputs().size() >= 2)
    x = x->node()->input(1);
  return x;
}

c10::optional<c10::IValue> const_arg(Node* n, size_t i) {
  if (i >= n->inputs().size()) return c10::nullopt;
  return torch::jit::toIValue(n->input(i));
}

// The aten dropout variants (each takes input, p, train).
bool is_dropout_op(const std::string& k) {
  static const std::set<std::string> ops = {"aten::dropout",         "aten::dropout_",         "aten::feature_dropout",
                                            "aten::feature_dropout_", "aten::alpha_dropout",   "aten::alpha_dropout_",
                                            "aten::feature_alpha_dropout", "aten::feature_alpha_dropout_"};
  return ops.count(k) > 0;
}

// ReLU-family ops whose output is exactly 0 for inputs <= 0 (a unit whose
// input stays <= 0 is dead): relu, relu6, hardtanh and clamp/clamp_min
// with a constant lower bound of 0.
bool is_relu_family(Node* n) {
  const std::string k = n->kind().toQualString();
  if (k == "aten::relu" || k == "aten::relu_" || k == "aten::relu6" || k == "aten::relu6_") return true;
  if (k == "aten::hardtanh" || k == "aten::hardtanh_" || k == "aten::clamp_min" || k == "aten::clamp_min_" ||
      k == "aten::clamp" || k == "aten::clamp_") {
    if (n->inputs().size() < 2) return false;
    auto lo = const_arg(n, 1);
    if (!lo || !(lo->isDouble() || lo->isInt())) return false;
    return (lo->isDouble() ? lo->toDouble() : static_cast<double>(lo->toInt())) == 0.0;
  }
  return false;
}

nlohmann::json ivalue_json(const c10::optional<c10::IValue>& v) {
  if (!v) return "dynamic";
  if (v->isDouble()) return v->toDouble();
  if (v->isInt()) return v->toInt();
  if (v->isBool()) return v->toBool();
  if (v->isNone()) return nullptr;
  if (v->isIntList()) return v->toIntVector();
  return "dynamic";
}

// The constant arguments of an aten::*_norm op ("dynamic" when computed).
nlohmann::json norm_op_args(Node* n, const std::string& op) {
  nlohmann::json a = nlohmann::json::object();
  if (op == "batch_norm" || op == "instance_norm") {
    a[op == "batch_norm" ? "training" : "use_input_stats"] = ivalue_json(const_arg(n, 5));
    a["momentum"] = ivalue_json(const_arg(n, 6));
    a["eps"] = ivalue_json(const_arg(n, 7));
  } else if (op == "layer_norm") {
    a["normalized_shape"] = ivalue_json(const_arg(n, 1));
    if (auto l = structure::const_int_list(n->input(1))) a["normalized_shape"] = *l;
    a["eps"] = ivalue_json(const_arg(n, 4));
  } else if (op == "group_norm") {
    a["num_groups"] = ivalue_json(const_arg(n, 1));
    a["eps"] = ivalue_json(const_arg(n, 4));
  } else if (op == "rms_norm") {
    a["normalized_shape"] = ivalue_json(const_arg(n, 1));
    if (auto l = structure::const_int_list(n->input(1))) a["normalized_shape"] = *l;
    a["eps"] = ivalue_json(const_arg(n, 3));
  }
  return a;
}

}  // namespace

namespace {
// The batch axis (0, else the first of size B: [T, B, C]) and the time axis
// (the first other axis of size T) of `a` for a [B, T] `real`; -1 where
// there is none.
std::pair<int64_t, int64_t> batch_and_time_axes(const at::Tensor& a, const at::Tensor& real) {
  if (!real.defined() || a.dim() < 2 || real.dim() != 2) return {-1, -1};
  int64_t db = a.size(0) == real.size(0) ? 0 : -1;
  for (int64_t d = 1; d < a.dim() && db < 0; ++d)
    if (a.size(d) == real.size(0)) db = d;
  if (db < 0) return {-1, -1};
  for (int64_t d = 0; d < a.dim(); ++d)
    if (d != db && a.size(d) == real.size(1)) return {db, d};
  return {db, -1};
}
}  // namespace

bool indexes_positions(const at::Tensor& t, const at::Tensor& real) { return batch_and_time_axes(t, real).second >= 0; }

at::Tensor real_position_weights(const at::Tensor& a, const at::Tensor& real) {
  at::Tensor w;
  const auto [db, dt] = batch_and_time_axes(a, real);
  if (db < 0) return w;
  const at::ScalarType st = a.is_floating_point() ? a.scalar_type() : at::kFloat;
  if (dt >= 0) {
    std::vector<int64_t> shape(static_cast<size_t>(a.dim()), 1);
    shape[static_cast<size_t>(db)] = real.size(0);
    shape[static_cast<size_t>(dt)] = real.size(1);
    w = (dt < db ? real.t() : real).to(st).to(a.device()).reshape(shape);
  }
  if (!w.defined() && db >= 0) {
    // An output with a batch axis and no time axis ([B, classes] from
    // x[:, 0] or a pooling): an example with no real position at all (an
    // empty utterance, every position padding) has no real output to
    // protect, and its output changes with the padded length whatever
    // the model does; only examples with a real position are compared.
    std::vector<int64_t> shape(static_cast<size_t>(a.dim()), 1);
    shape[static_cast<size_t>(db)] = real.size(0);
    w = real.to(at::kBool).any(1).to(st).to(a.device()).reshape(shape);
  }
  return w;
}

namespace {

// ||cur - ref||^2 and ||ref||^2 over the common sizes (each axis narrowed to
// the smaller of the two), finite elements only, weighted by `real` [B, T]
// where the tensor has B on axis 0 and an axis of size T. False when the two
// cannot be compared (not floating, different rank).
bool compare_outputs(const at::Tensor& ref0, const at::Tensor& cur0, const at::Tensor& real, bool align_end,
                     bool time_cut, double& diff_sq, double& ref_sq) {
  if (!ref0.is_floating_point() || !cur0.is_floating_point() || ref0.dim() != cur0.dim()) return false;
  if (time_cut && ref0.sizes() == cur0.sizes()) return false;
  at::Tensor a = ref0, b = cur0;
  // Tokens flattened to one row per (example, position) ([B * T, E]: a
  // mixture-of-experts router's input and output, NLLB-MoE, eval32): rows
  // of different lengths hold different tokens at the same index. Unfolded
  // to [B, T, E] first, so that the same token is compared with itself.
  // The flattened axis is the one axis whose size differs (axis 0, or axis
  // 1 of the routers' outputs stacked per layer).
  if (real.defined() && real.dim() == 2 && real.size(0) > 1) {
    const int64_t B = real.size(0), T = real.size(1);
    int64_t fd = -1, differing = 0;
    for (int64_t d = 0; d < a.dim(); ++d)
      if (a.size(d) != b.size(d)) {
        ++differing;
        fd = d;
      }
    if (differing == 1 && a.size(fd) % B == 0 && b.size(fd) % B == 0 && (a.size(fd) / B == T || b.size(fd) / B == T) &&
        a.size(fd) != T && b.size(fd) != T) {
      auto unfold = [B, fd](const at::Tensor& t) {
        std::vector<int64_t> shape;
        for (int64_t d = 0; d < t.dim(); ++d) {
          if (d == fd) {
            shape.push_back(B);
            shape.push_back(t.size(d) / B);
          } else {
            shape.push_back(t.size(d));
          }
        }
        return t.reshape(shape);
      };
      a = unfold(a);
      b = unfold(b);
    }
  }
  for (int64_t d = 0; d < a.dim(); ++d) {
    const int64_t m = std::min(a.size(d), b.size(d));
    if (a.size(d) != m) a = a.narrow(d, align_end ? a.size(d) - m : 0, m);
    if (b.size(d) != m) b = b.narrow(d, align_end ? b.size(d) - m : 0, m);
  }
  // float32 arithmetic, sums accumulated in float64.
  const at::ScalarType st = (a.scalar_type() == at::kDouble) ? at::kDouble : at::kFloat;
  a = a.to(st);
  b = b.to(st).to(a.device());
  at::Tensor w = real_position_weights(a, real);
  // A strided or pooled time axis ([B, C, T / 2] after QuartzNet's stride-2
  // prologue, eval40 C03): no axis has the sample's T positions, but the
  // one axis besides the batch whose size the padding changed is time at
  // another rate. Its frame t' covers the input around t' * T / T', real
  // when that position is; without this, every frame of a shorter example
  // (its padded ones included) counted as real.
  if (w.defined() && real.defined() && real.dim() == 2 && ref0.sizes() != cur0.sizes() && a.dim() >= 2 &&
      a.size(0) == real.size(0)) {
    // The time axis is the one the padding lengthened: an axis of the
    // sample's length that kept its size is not it (a hidden size equal to
    // the length: Parakeet's 64-wide encoder on 64 frames, downsampled 4x,
    // eval50 masked its hidden axis and compared every frame).
    int64_t moved = -1, differing = 0;
    for (int64_t d = 1; d < ref0.dim(); ++d)
      if (ref0.size(d) != cur0.size(d)) {
        ++differing;
        moved = d;
      }
    const bool time_axis = differing == 1 && ref0.size(moved) == real.size(1);
    if (time_axis && a.size(moved) == real.size(1)) {
      std::vector<int64_t> shape(static_cast<size_t>(a.dim()), 1);
      shape[0] = real.size(0);
      shape[static_cast<size_t>(moved)] = real.size(1);
      w = real.to(a.scalar_type()).to(a.device()).reshape(shape);
    } else if (!time_axis && differing == 1 && cur0.size(moved) > ref0.size(moved) && a.size(moved) > 0) {
      const int64_t T = real.size(1), Tp = a.size(moved);
      const at::Tensor idx =
          ((at::arange(Tp, at::TensorOptions().dtype(at::kDouble)) + 0.5) * (static_cast<double>(T) / static_cast<double>(Tp)))
              .floor()
              .clamp_max(static_cast<double>(T - 1))
              .to(at::kLong)
              .to(real.device());
      std::vector<int64_t> shape(static_cast<size_t>(a.dim()), 1);
      shape[0] = real.size(0);
      shape[static_cast<size_t>(moved)] = Tp;
      w = real.index_select(1, idx).to(a.scalar_type()).to(a.device()).reshape(shape);
    }
  }
  // An output with no batch axis and no axis of the sample's length whose
  // size changed with it (a relative-position table [1, 2T - 1, D],
  // SeamlessM4T's embed_positions) is a function of the length, not of any
  // example, and its rows do not line up by position: not compared (eval36
  // C02 named the table where the padding entered). A position embedding
  // [1, T, D] keeps its time axis and is compared (GPT-2's wpe under left
  // padding shifts).
  if (real.defined() && real.dim() == 2 && !w.defined() && ref0.sizes() != cur0.sizes()) {
    bool time_axis = false;
    for (int64_t d = 0; d < ref0.dim(); ++d) time_axis = time_axis || ref0.size(d) == real.size(1);
    if (!time_axis) return false;
  }
  at::Tensor diff = b - a;
  at::Tensor av = a;
  if (w.defined()) {
    diff = diff * w;
    av = a * w;
  }
  diff_sq = diff.square().sum(at::kDouble).item<double>();
  ref_sq = av.square().sum(at::kDouble).item<double>();
  if (std::isfinite(diff_sq) && std::isfinite(ref_sq)) return true;
  // Non-finite elements: compare over the elements finite in both.
  at::Tensor finite = at::isfinite(a).logical_and(at::isfinite(b));
  diff = at::where(finite, b - a, at::zeros({}, a.options()));
  av = at::where(finite, a, at::zeros({}, a.options()));
  if (w.defined()) {
    diff = diff * w;
    av = av * w;
  }
  diff_sq = diff.square().sum(at::kDouble).item<double>();
  ref_sq = av.square().sum(at::kDouble).item<double>();
  return true;
}

}  // namespace

double TapRecord::cmp_rel() const {
  if (cmp_calls == 0) return std::nan("");
  if (cmp_diff_sq == 0) return 0.0;
  if (cmp_ref_sq == 0) return std::numeric_limits<double>::infinity();
  return std::sqrt(cmp_diff_sq / cmp_ref_sq);
}

// ---------------------------------------------------------------------------
// Collector

Collector::Measured Collector::measure(const at::Tensor& x, const at::Tensor& key, bool sliced, LastSeen& last) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (last.x.defined() && last.x.unsafeGetTensorImpl() == key.unsafeGetTensorImpl() && last.version == key._version() &&
        last.sliced == sliced)
      return last.m;
  }
  Measured m;
  if (x.numel() > 0 && (defer_cpu || !x.device().is_cpu()))
    m.packed = stats_on_device(x);
  else
    m.stats = compute_stats(x);
  std::lock_guard<std::mutex> lock(mu_);
  last.x = key;
  last.version = key._version();
  last.sliced = sliced;
  last.m = m;
  return m;
}

// Merges one measurement (mu_ held).
void Collector::add(int64_t id, bool grad, int64_t seq, bool module_output, const Measured& m, int64_t numel) {
  if (m.packed.defined()) {
    pending_.push_back({id, seq, numel, grad, module_output, m.packed});
    return;
  }
  TapRecord& r = records_[static_cast<size_t>(id)];
  (grad ? r.grad : r.fwd).merge(m.stats);
  if (!grad && module_output && r.call_rms.size() < TapRecord::kMaxCallRms) r.call_rms.push_back(m.stats.rms());
  if (!module_output || m.stats.nonfinite() == 0) return;
  if (grad && seq < first_nonfinite_grad_seq_) {
    first_nonfinite_grad_seq_ = seq;
    first_nonfinite_grad_ = id;
  } else if (!grad && seq < first_nonfinite_fwd_seq_) {
    first_nonfinite_fwd_seq_ = seq;
    first_nonfinite_fwd_ = id;
  }
}

void Collector::finish() const {
  std::lock_guard<std::mutex> lock(mu_);
  last_fwd_ = LastSeen{};
  last_grad_ = LastSeen{};
  if (pending_.empty()) return;
  // One read-back per device for the whole pass.
  std::map<std::string, std::vector<size_t>> by_device;
  for (size_t i = 0; i < pending_.size(); ++i) by_device[pending_[i].packed.device().str()].push_back(i);
  for (const auto& [dev, idx] : by_device) {
    std::vector<at::Tensor> parts;
    for (size_t i : idx) parts.push_back(pending_[i].packed);
    const at::Tensor host = at::stack(parts).cpu().contiguous();
    const double* v = host.data_ptr<double>();
    for (size_t k = 0; k < idx.size(); ++k) {
      const Pending& p = pending_[idx[k]];
      Measured m;
      m.stats = unpack_stats(v + kPackedStats * k, p.numel);
      const_cast<Collector*>(this)->add(p.id, p.grad, p.seq, p.module_output, m, p.numel);
    }
  }
  pending_.clear();
}

TapRecord& Collector::fire(int64_t id, const at::Tensor& x, int64_t& seq) {
  TapRecord& r = records_[static_cast<size_t>(id)];
  seq = fire_seq_++;
  last_tap_ = id;
  if (r.first_fire < 0) {
    r.first_fire = seq;
    r.shape = x.sizes().vec();
    r.dtype = c10::toString(x.scalar_type());
    r.floating = x.is_floating_point();
  }
  ++r.calls;
  return r;
}

void Collector::on_forward(const TapSite& site, const at::Tensor& x0) {
  if (hook) hook(site, x0);
  at::Tensor x = x0.detach();
  if (site.kind == TapKind::kBatchNormInput) {
    BatchNormStats b;
    if (batch_norm_stats && x.is_floating_point() && x.dim() >= 2 && x.numel() > 0) {
      const int64_t n = x.size(0), c = x.size(1);
      b.examples = n;
      b.spatial = (n * c) != 0 ? x.numel() / (n * c) : 1;
      std::tie(b.example_mean, b.example_var) = channel_moments(x);
      b.mean = b.example_mean.mean(0);
      // Law of total variance: within-example plus between-example parts, both
      // non-negative (E[x^2] - E[x]^2 cancels when the mean dwarfs the spread).
      b.var = b.example_var.mean(0) + (b.example_mean - b.mean).pow(2).mean(0);
    }
    std::lock_guard<std::mutex> lock(mu_);
    int64_t seq = 0;
    TapRecord& r = fire(site.id, x0, seq);
    if (r.first_fire == seq) r.bn = b;
    last_bn_tap_ = site.id;
    return;
  }
  if (site.kind == TapKind::kNormInput) {
    // The sequence probe reads only the shape (the normalized axes).
    std::lock_guard<std::mutex> lock(mu_);
    int64_t seq = 0;
    fire(site.id, x0, seq);
    return;
  }
  const bool module_kind = site.kind == TapKind::kModuleOutput || site.kind == TapKind::kModuleInput;
  bool sliced = false, guided = false;
  if (slice0_batch > 0 && module_kind && x.dim() >= 1 && slice_rows.defined() && slice_rows_of > 0 &&
      x.size(0) == slice_rows_of) {
    // A node tensor of a graph batch: the example's nodes, by their rows.
    x = x.index_select(0, slice_rows.to(x.device())).contiguous();
    sliced = guided = true;
  }
  if (!sliced && slice0_batch > 0 && module_kind && x.dim() >= 1 && slice_guide &&
      static_cast<size_t>(site.id) < slice_guide->records().size()) {
    // The shape this output had for example 0 alone: the axis where the
    // batch has slice0_batch and the example 1 (select), or a folded axis
    // where it has slice0_batch * k and the example k (rows [0, k) of a
    // batch-major [B * k] fold, every B-th row of a time-major [k * B] one).
    // Exactly one such axis, every other size equal; none: the output has
    // the same shape alone (nothing to cut) or another one (left whole and
    // not compared).
    const TapRecord& g = slice_guide->records()[static_cast<size_t>(site.id)];
    if (g.calls > 0 && static_cast<int64_t>(g.shape.size()) == x.dim() && x.sizes().vec() != g.shape) {
      int64_t axis = -1, found = 0;
      for (int64_t d = 0; d < x.dim(); ++d) {
        bool others = true;
        for (int64_t e = 0; e < x.dim() && others; ++e)
          if (e != d && x.size(e) != g.shape[static_cast<size_t>(e)]) others = false;
        if (others && g.shape[static_cast<size_t>(d)] >= 1 && x.size(d) == slice0_batch * g.shape[static_cast<size_t>(d)]) {
          axis = d;
          ++found;
        }
      }
      if (found == 1) {
        const int64_t k = g.shape[static_cast<size_t>(axis)];
        if (k == 1) {
          x = x.select(axis, slice_index).contiguous();
        } else {
          // Which fold: the model's layout says (time-major data folds
          // [T * B], batch-first [B * T]), but a batch-first model may fold
          // time-major inside (CRNN: the CNN's [B, C, W] permuted to
          // [T, B, C] for its LSTM, whose output is viewed [T * B, h] for the
          // embedding Linear). Where the two differ, the one whose values
          // match the example's own output alone (mean and RMS) is it.
          at::Tensor major = x.narrow(axis, slice_index * k, k);
          at::Tensor strided = x.slice(axis, slice_index, x.size(axis), slice0_batch);
          bool use_strided = slice_axis > 0;
          if (x.is_floating_point() && g.fwd.finite() > 0) {
            auto distance = [&](const at::Tensor& t) {
              const TensorStats st = compute_stats(t.contiguous());
              const double scale = std::max(g.fwd.rms(), 1e-30);
              return (std::fabs(st.mean() - g.fwd.mean()) + std::fabs(st.rms() - g.fwd.rms())) / scale;
            };
            const double dm = distance(major), ds = distance(strided);
            if (std::isfinite(dm) && std::isfinite(ds) && std::fabs(dm - ds) > 1e-6) use_strided = ds < dm;
          }
          x = (use_strided ? strided : major).contiguous();
        }
        sliced = true;
      }
    }
    guided = g.calls > 0;
  }
  if (slice0_batch > 0 && module_kind && x.dim() >= 1 && !guided) {
    // Example 0 along the batch axis: axis 0, or the model's time-major batch
    // axis; else the one axis of the batch's size (a batch-first GRU's h_n is
    // [layers, batch, hidden] beside its [batch, time, hidden] output). A
    // tensor with no such axis, or several, stays whole.
    int64_t ax = x.size(0) == slice0_batch && (slice_axis == 0 || x.dim() <= slice_axis || x.size(slice_axis) != slice0_batch)
                     ? 0
                 : slice_axis > 0 && x.dim() > slice_axis && x.size(slice_axis) == slice0_batch ? slice_axis
                                                                                              : -1;
    if (ax < 0) {
      int64_t matches = 0;
      for (int64_t d = 0; d < x.dim(); ++d)
        if (x.size(d) == slice0_batch && matches++ == 0) ax = d;
      if (matches != 1) ax = -1;
    }
    if (ax >= 0) {
      x = x.select(ax, slice_index).contiguous();
      sliced = true;
    }
  }
  Measured m;
  int64_t saturated = 0;
  SoftmaxStats sm;
  const bool floating = x.is_floating_point();
  if (floating || module_kind) m = measure(x, x0, sliced, last_fwd_);
  if (floating && (site.kind == TapKind::kSigmoidInput || site.kind == TapKind::kTanhInput))
    saturated = count_abs_above(x, site.kind == TapKind::kSigmoidInput ? 6.0 : 3.0);
  const bool scores = site.kind == TapKind::kSoftmaxInput || site.kind == TapKind::kAttentionScores;
  std::vector<SoftmaxStats> per_head;
  if (floating && scores && x.dim() >= 1 && x.numel() > 0) {
    const int64_t sdim = site.kind == TapKind::kAttentionScores ? -1 : site.dim;
    const int64_t dim = sdim < 0 ? sdim + x.dim() : sdim;
    // The logits the model's own softmax receives: whether a fully masked
    // row turns NaN depends on the value the model masks with (-inf does,
    // a finite -10000 or finfo.min gives a uniform row), not on how the
    // statistics below exclude the masked entries.
    const at::Tensor own = x;
    // Entries a recognized mask removes (Swin's -100, masked_fill) count as masked.
    bool masks_known = false;
    if (site.kind == TapKind::kSoftmaxInput && site.masks > 0) {
      at::Tensor m;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = masks_.find(site.id);
        if (it != masks_.end()) {
          m = it->second;
          masks_.erase(it);
        }
      }
      if (m.defined() && m.numel() == x.numel()) {
        const at::Tensor mm = m.reshape(x.sizes()).to(x.device());
        x = x.masked_fill(mm, -std::numeric_limits<double>::infinity());
        masks_known = true;
        // Causal: every entry above the diagonal of the square [L, L] scores masked.
        bool causal = false;
        if (x.dim() >= 2 && x.size(-1) == x.size(-2) && x.size(-1) >= 2 && dim == x.dim() - 1) {
          const int64_t L = x.size(-1);
          const at::Tensor upper = at::ones({L, L}, mm.options().dtype(at::kBool)).triu(1);
          causal = !upper.logical_and(mm.reshape({-1, L, L}).logical_not()).any().item<bool>();
        }
        std::lock_guard<std::mutex> lock(mu_);
        TapRecord& rec = records_[static_cast<size_t>(site.id)];
        ++rec.mask_calls;
        if (causal) ++rec.causal_calls;
      }
    }
    if (dim >= 0 && dim < x.dim()) {
      sm = softmax_stats(x, dim, /*value_masks=*/!masks_known);
      // Per head: axis -3 of [B, H, L, S] scores, or heads folded into axis 0 of [B*H, L, S].
      if (site.attention && dim == x.dim() - 1) {
        at::Tensor xh;
        if (x.dim() >= 4) xh = x.reshape({-1, x.size(-3), x.size(-2), x.size(-1)});
        else if (x.dim() == 3 && site.heads > 1 && x.size(0) % site.heads == 0)
          xh = x.reshape({x.size(0) / site.heads, site.heads, x.size(1), x.size(2)});
        if (xh.defined() && xh.size(1) <= 256)
          for (int64_t h = 0; h < xh.size(1); ++h) per_head.push_back(softmax_stats(xh.select(1, h), 2, /*value_masks=*/!masks_known));
      }
      // Rows with no unmasked entry, and whether the model's own softmax
      // makes NaN of them (every logit -inf, none NaN before). Only when some
      // row has fewer than two unmasked entries (sm.rows counts the others).
      const int64_t total_rows = x.size(dim) > 0 ? x.numel() / x.size(dim) : 0;
      if (sm.rows < total_rows) {
      at::Tensor xf = x.to(at::kFloat);
      at::Tensor dead = (xf > -1e4).logical_and(at::isnan(xf).logical_not()).sum(dim) == 0;
      sm.masked_rows = dead.sum().item<int64_t>();
      if (sm.masked_rows > 0 && site.kind == TapKind::kSoftmaxInput) {
        const at::Tensor of = own.to(at::kFloat);
        at::Tensor made_nan = at::softmax(of, dim).isnan().any(dim).logical_and(at::isnan(of).any(dim).logical_not());
        sm.nan_rows = made_nan.logical_and(dead).sum().item<int64_t>();
      }
      }
    }
  }
  // Sequence probes: keep or compare the module's output (the whole batch,
  // before any slice0 selection).
  at::Tensor kept;
  double diff_sq = 0, ref_sq = 0;
  bool compared = false;
  if (site.kind == TapKind::kModuleOutput && (capture || reference)) {
    if (capture) kept = x0.detach().clone();
    if (reference) {
      const TapRecord& ref = reference->records_[static_cast<size_t>(site.id)];
      int64_t call = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        call = records_[static_cast<size_t>(site.id)].calls;
      }
      if (call < static_cast<int64_t>(ref.captured.size()))
        compared = compare_outputs(ref.captured[static_cast<size_t>(call)], x0.detach(), real_positions, align_end, time_cut, diff_sq,
                                   ref_sq);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  int64_t seq = 0;
  TapRecord& r = fire(site.id, x0, seq);
  if (kept.defined()) r.captured.push_back(kept);
  if (compared) {
    r.cmp_diff_sq += diff_sq;
    r.cmp_ref_sq += ref_sq;
    ++r.cmp_calls;
  }
  // The first non-finite module output is looked for among primary outputs:
  // a value a module made that others read (a traced CLIP block's
  // attn_mask.to(dtype), -inf above the diagonal by design, read again by
  // the next blocks: eval14 case 05) is no output of its computation.
  // A module's secondary outputs (a tuple's other elements, a value the
  // tracer rebound) do not name where NaN/Inf started, except the model's
  // own: every tensor forward returns is a result the user gets (SAC's
  // std = log_std.exp() beside the action, eval50).
  add(site.id, false, seq, site.kind == TapKind::kModuleOutput && (site.primary || site.module.empty()), m, x.numel());
  r.saturated += saturated;
  r.softmax.merge(sm);
  if (r.heads.size() < per_head.size()) r.heads.resize(per_head.size());
  for (size_t h = 0; h < per_head.size(); ++h) r.heads[h].merge(per_head[h]);
}

void Collector::set_mask(int64_t id, const at::Tensor& masked) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = masks_.find(id);
  if (it != masks_.end() && it->second.sizes() == masked.sizes()) it->second = it->second.logical_or(masked);
  else masks_[id] = masked;
}

void Collector::note_mask_call(int64_t id, bool causal) {
  std::lock_guard<std::mutex> lock(mu_);
  TapRecord& rec = records_[static_cast<size_t>(id)];
  ++rec.mask_calls;
  if (causal) ++rec.causal_calls;
}

void Collector::set_ints(int64_t id, std::vector<int64_t> v) {
  std::lock_guard<std::mutex> lock(mu_);
  TapRecord& r = records_[static_cast<size_t>(id)];
  if (r.ints.empty()) r.ints = std::move(v);
}

void Collector::on_grad(int64_t id, const at::Tensor& g) {
  // An undefined gradient: autograd calls the hook of a tensor that the
  // loss does not reach through it (an output of a tuple the loss does not
  // read, diffusers' SD3 ControlNet returning its block samples: eval44's
  // train pass raised "Expected a proper Tensor but got None").
  if (grad_paused || !g.defined()) return;
  Measured m = measure(g.detach(), g, false, last_grad_);
  std::lock_guard<std::mutex> lock(mu_);
  TapRecord& r = records_[static_cast<size_t>(id)];
  const int64_t seq = grad_seq_++;
  if (r.first_grad < 0) r.first_grad = seq;
  ++r.grad_calls;
  add(id, true, seq, true, m, g.numel());
}

// ---------------------------------------------------------------------------
// Scope resolution: inlined call stacks -> named_modules() paths.

ScopeResolver::ScopeResolver(const LoadedModel& model) : model_(model) {
  for (size_t i = 0; i < model.modules.size(); ++i) index_[model.modules[i].path] = i;
}

std::pair<int64_t, size_t> ScopeResolver::numbered_entries(const std::string& path) const {
  const std::string prefix = path.empty() ? std::string() : path + ".";
  std::set<std::string> kinds;
  int64_t entries = 0;
  for (auto it = index_.lower_bound(prefix); it != index_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    const std::string rest = it->first.substr(prefix.size());
    if (rest.empty() || rest.find('.') != std::string::npos ||
        !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    ++entries;
    kinds.insert(model_.modules[it->second].kind);
  }
  return {entries, kinds.size()};
}

bool ScopeResolver::repeated_entries(const std::string& path) const {
  const auto [entries, kinds] = numbered_entries(path);
  return entries >= 2 && kinds == 1;
}

bool ScopeResolver::mixed_entries(const std::string& path) const {
  const auto [entries, kinds] = numbered_entries(path);
  return entries >= 2 && kinds >= 2;
}

namespace {
// The named_modules() path of the module instance a node runs in, as
// inline_recording_modules records it (a string attribute).
const c10::Symbol& leaf_attr() {
  static const c10::Symbol s = c10::Symbol::attr("normdoctor_module");
  return s;
}
}  // namespace

const std::vector<std::string>& ScopeResolver::chain(const Node* node) {
  static const std::vector<std::string> kEmpty;
  // Graphs built by normdoctor (exported programs) name each node's modules.
  static const c10::Symbol kScope = c10::Symbol::attr(kModuleScopeAttr);
  if (node->hasAttribute(kScope)) {
    auto hit = cache_.find(node);
    if (hit != cache_.end()) return hit->second;
    return cache_.emplace(node, node->ss(kScope)).first->second;
  }
  // ModuleList and ModuleDict have no forward: Python never calls them, so
  // they are never a scope a node runs in (their children are).
  auto runs_forward = [&](const std::string& path) {
    auto it = index_.find(path);
    return it != index_.end() && model_.modules[it->second].module.find_method("forward").has_value();
  };
  auto cs = node->callstack();
  if (!cs) {
    // LibTorch gives no call stack to prim::If/prim::Loop nodes (and to the
    // nodes in their blocks) when it inlines functions, nor to the root's
    // own nodes. In order: a node reading a module attribute (`if
    // self.training:`) lies in that module; an If/Loop lies in the deepest
    // scope common to the nodes inside it; a node in a block lies where its
    // If/Loop does; a top-level node lies in the root.
    auto hit = cache_.find(node);
    if (hit != cache_.end()) return hit->second;
    std::vector<std::string> result;
    // The chain of a module path: its ancestors that run a forward, then itself.
    auto chain_of = [&](const std::string& path) {
      std::vector<std::string> c;
      size_t pos = 0;
      while ((pos = path.find('.', pos)) != std::string::npos) {
        if (runs_forward(path.substr(0, pos))) c.push_back(path.substr(0, pos));
        ++pos;
      }
      if (!path.empty()) c.push_back(path);
      return c;
    };
    // The module instance the inliner recorded on the node (a node in an
    // inlined function's `if training:` block, F.batch_norm's batch-size
    // check reading x.size()): its chain is that module's.
    if (node->hasAttribute(leaf_attr()) && index_.count(node->s(leaf_attr())))
      return cache_.emplace(node, chain_of(node->s(leaf_attr()))).first->second;
    bool found = false;
    for (const Value* in : node->inputs()) {
      const Node* d = in->node();
      if (d->kind() != c10::prim::GetAttr) continue;
      auto path = module_path_of(d->input());
      if (!path || path->empty()) continue;
      result = chain_of(*path);
      found = true;
      break;
    }
    // The deepest scope common to every chain met (`first`: none met yet).
    bool first = true;
    auto meet = [&](const std::vector<std::string>& c) {
      if (first) {
        result = c;
        first = false;
        return;
      }
      size_t k = 0;
      while (k < result.size() && k < c.size() && result[k] == c[k]) ++k;
      result.resize(k);
    };
    if (!found && !node->blocks().empty()) {
      std::function<void(const Block*)> visit = [&](const Block* b) {
        for (const Node* n : b->nodes()) {
          if (n->callstack()) meet(chain(n));
          for (const Block* sb : n->blocks()) visit(sb);
        }
      };
      for (const Block* b : node->blocks()) visit(b);
      // The If/Loop that holds a whole call of a module (`if n == name:
      // x = ln(x)` in a loop over a ModuleDict) and has a branch returning a
      // value made outside it (the else branch returns x unchanged) runs in
      // the caller, not in that module: else the If's output would look like
      // the module's output on every iteration (eval13 case 09). An If that
      // holds only part of a module's forward (`if mask is not None: x = x *
      // mask`) stays in the module.
      if (!first && !result.empty()) {
        auto made_inside = [&](const Node* d) {
          for (const Block* b = d->owningBlock(); b && b->owningNode(); b = b->owningNode()->owningBlock())
            if (b->owningNode() == node) return true;
          return false;
        };
        std::vector<const Node*> outside_makers;
        for (const Block* b : node->blocks())
          for (const Value* v : b->outputs()) {
            const Node* d = v->node();
            if (d->kind() != c10::prim::Constant && !made_inside(d)) outside_makers.push_back(d);
          }
        if (!outside_makers.empty()) {
          // Whole: every node of the graph that runs in that module lies inside.
          const std::string scope = result.back();
          int64_t inside = 0;
          std::function<void(const Block*)> count = [&](const Block* b) {
            for (const Node* n : b->nodes()) {
              if (n->callstack()) {
                const auto& c = chain(n);
                inside += std::find(c.begin(), c.end(), scope) != c.end() ? 1 : 0;
              }
              for (const Block* sb : n->blocks()) count(sb);
            }
          };
          for (const Block* b : node->blocks()) count(b);
          if (inside == nodes_in_scope(node->owningGraph(), scope))
            for (const Node* d : outside_makers) meet(chain(d));
        }
      }
      found = !first;
    }
    if (!found && !node->blocks().empty()) {
      // No node inside has a call stack either: an error branch
      // (BatchNorm's _check_input_dim, `if x.dim() != 3: raise ValueError(...)`:
      // aten::format + prim::RaiseException). It lies where the values it
      // branches on were computed (the deepest scope common to its inputs'
      // producers), not in the root: in the root, every value its message
      // reads (x.dim()) would look like an output of each module around it.
      for (const Value* in : node->inputs()) {
        const Node* d = in->node();
        if (d->kind() != c10::prim::Constant && d->kind() != c10::prim::Param) meet(chain(d));
      }
      found = !first;
    }
    if (!found) {
      const Node* owner = node->owningBlock() ? node->owningBlock()->owningNode() : nullptr;
      if (owner) result = chain(owner);
    }
    return cache_.emplace(node, std::move(result)).first->second;
  }
  const void* key = cs->get();
  auto hit = cache_.find(key);
  if (hit != cache_.end()) return hit->second;
  // The module instance the node runs in, when the inliner recorded it.
  std::string leaf;
  if (node->hasAttribute(leaf_attr())) {
    leaf = node->s(leaf_attr());
    if (!index_.count(leaf)) leaf.clear();
  }

  std::vector<std::string> out;
  std::string cur;  // root
  auto type_of = [&](const std::string& path) { return model_.modules[index_.at(path)].module.type(); };
  auto last_component = [](const std::string& p) {
    auto pos = p.rfind('.');
    return pos == std::string::npos ? p : p.substr(pos + 1);
  };
  for (const auto& entry : (*cs)->vec()) {
    const auto& info = std::get<2>(entry);
    if (!info) continue;
    const std::string name = info->instance_name();
    const auto ctype = info->class_type();
    auto matches = [&](const std::string& path) {
      auto t = type_of(path);
      return !ctype || t == ctype || (t->name() && ctype->name() && t->name()->qualifiedName() == ctype->name()->qualifiedName());
    };
    if (name == "SELF") continue;  // a module calling its own method, or the root's forward
    std::string found;
    const std::string direct = cur.empty() ? name : cur + "." + name;
    if (index_.count(direct) && matches(direct)) {
      found = direct;
    } else {
      // Containers (ModuleList/Sequential/ModuleDict) may be missing from the
      // call stack: look below `cur` for a module with this name and type,
      // nearest first.
      // Several such modules at one depth (layers.0.0 and layers.1.0 of a
      // ModuleList of ModuleLists): the one holding the module the node
      // runs in (inline_recording_modules marks it) is the one.
      const std::string prefix = cur.empty() ? "" : cur + ".";
      std::vector<const std::string*> candidates;
      for (const auto& m : model_.modules)
        if (!m.path.empty() && m.path.compare(0, prefix.size(), prefix) == 0 && last_component(m.path) == name &&
            matches(m.path))
          candidates.push_back(&m.path);
      auto holds_leaf = [&](const std::string* p) {
        return leaf.empty() || leaf == *p || leaf.compare(0, p->size() + 1, *p + ".") == 0;
      };
      const bool any_holds = std::any_of(candidates.begin(), candidates.end(), holds_leaf);
      size_t best_depth = SIZE_MAX;
      for (const std::string* p : candidates) {
        if (any_holds && !holds_leaf(p)) continue;
        const size_t depth = static_cast<size_t>(std::count(p->begin(), p->end(), '.'));
        if (depth < best_depth) {
          best_depth = depth;
          found = *p;
        }
      }
    }
    if (!found.empty()) {
      // A container with a forward (Sequential) missing from the call stack
      // is still a scope the node lies in: add every such path between `cur`
      // and `found`. ModuleList/ModuleDict are not (no forward to call).
      size_t pos = cur.empty() ? 0 : cur.size() + 1;
      while ((pos = found.find('.', pos)) != std::string::npos) {
        const std::string mid = found.substr(0, pos);
        if (runs_forward(mid) && (out.empty() || out.back() != mid)) out.push_back(mid);
        ++pos;
      }
      cur = found;
      out.push_back(cur);
    }
  }
  return cache_.emplace(key, std::move(out)).first->second;
}

bool ScopeResolver::known(const Node*) const { return true; }

int64_t ScopeResolver::nodes_in_scope(const torch::jit::Graph* graph, const std::string& scope) {
  auto it = scope_nodes_.find(graph);
  if (it == scope_nodes_.end()) {
    std::map<std::string, int64_t> counts;
    std::function<void(const Block*)> visit = [&](const Block* b) {
      for (const Node* n : b->nodes()) {
        if (n->callstack())
          for (const auto& m : chain(n)) ++counts[m];
        for (const Block* sb : n->blocks()) visit(sb);
      }
    };
    visit(graph->block());
    it = scope_nodes_.emplace(graph, std::move(counts)).first;
  }
  auto c = it->second.find(scope);
  return c == it->second.end() ? 0 : c->second;
}

std::optional<std::string> ScopeResolver::module_path_of(const Value* v) const {
  const Node* d = v->node();
  if (d->kind() == c10::prim::Param) {
    if (v->offset() == 0) return std::string();  // self
    return std::nullopt;
  }
  if (d->kind() != c10::prim::GetAttr || !v->type()->cast<c10::ClassType>()) return std::nullopt;
  auto parent = module_path_of(d->input());
  if (!parent) return std::nullopt;
  const std::string p = parent->empty() ? d->s(c10::attr::name) : *parent + "." + d->s(c10::attr::name);
  if (!index_.count(p)) return std::nullopt;
  return p;
}

std::optional<c10::IValue> ScopeResolver::attribute(const Value* v) const {
  const Node* g = v->node();
  if (g->kind() != c10::prim::GetAttr) return std::nullopt;
  const auto path = module_path_of(g->input());
  if (!path) return std::nullopt;
  auto it = index_.find(*path);
  if (it == index_.end()) return std::nullopt;
  const torch::jit::Module& mod = model_.modules[it->second].module;
  const std::string name = g->s(c10::attr::name);
  if (!mod._ivalue() || !mod.hasattr(name)) return std::nullopt;
  return mod.attr(name);
}

// ---------------------------------------------------------------------------
// Inlining that keeps module instances apart
//
// torch::jit::Inline records, per inlined call, only the attribute name and
// class of the module called (ModuleInstanceInfo): in a ModuleList of
// ModuleLists (`for attn, ff in self.layers: x = attn(x) + x`, lucidrains'
// vit-pytorch and x-transformers) layers.0.0 and layers.1.0 are both "0" of
// the same class, and a call stack alone cannot tell them apart. This
// inliner does what Inline does with each callee's optimized graph (the
// callee's own calls inlined, then preoptimizeGraph), building each callee's
// graph per module instance, and marks every node with the named_modules()
// path of the instance it runs in (leaf_attr()).
namespace {

struct InlineMemo {
  std::map<std::pair<const torch::jit::GraphFunction*, std::string>, std::shared_ptr<torch::jit::Graph>> graphs;
  std::set<std::pair<const torch::jit::GraphFunction*, std::string>> building;  // recursion guard
};

// The attribute path from the graph's self (its first input) to module value
// `v` through prim::GetAttr ("" for self); nullopt when `v` is not reached so.
std::optional<std::string> path_from_self(const Value* v, const torch::jit::Graph& g) {
  std::vector<std::string> parts;
  while (v->node()->kind() == c10::prim::GetAttr) {
    parts.push_back(v->node()->s(c10::attr::name));
    v = v->node()->input();
  }
  if (g.inputs().empty() || v != g.inputs()[0]) return std::nullopt;
  std::string out;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) out += (out.empty() ? "" : ".") + *it;
  return out;
}

void annotate_leaf(torch::jit::Block* b, const std::string& path) {
  for (Node* n : b->nodes()) {
    if (n->kind() != c10::prim::Constant && !n->hasAttribute(leaf_attr())) n->s_(leaf_attr(), path);
    for (torch::jit::Block* sb : n->blocks()) annotate_leaf(sb, path);
  }
}

std::shared_ptr<torch::jit::Graph> built_callee(torch::jit::GraphFunction* fn, const std::string& path, InlineMemo& memo);

// Inlines the calls of block `b` of a graph whose own nodes run in the module
// at `path`.
void inline_calls(torch::jit::Block* b, const std::string& path, InlineMemo& memo) {
  for (auto it = b->nodes().begin(), end = b->nodes().end(); it != end;) {
    Node* cur = *it++;
    if (cur->kind() == c10::prim::CallFunction) {
      Node* fc = cur->input(0)->node();
      if (fc->kind() != c10::prim::Constant) continue;
      auto ft = fc->output()->type()->cast<c10::FunctionType>();
      torch::jit::GraphFunction* gf = ft ? torch::jit::tryToGraphFunction(*ft->function()) : nullptr;
      if (!gf) continue;
      auto cg = built_callee(gf, path, memo);  // a free function runs in its caller's module
      cur->removeInput(0);
      torch::jit::inlineCallTo(cur, gf, cg.get());
    } else if (cur->kind() == c10::prim::CallMethod) {
      auto ct = cur->input(0)->type()->cast<c10::ClassType>();
      if (!ct) continue;
      torch::jit::GraphFunction* gf = torch::jit::tryToGraphFunction(ct->getMethod(cur->s(c10::attr::name)));
      if (!gf) continue;
      const auto rel = path_from_self(cur->input(0), *b->owningGraph());
      if (!rel) {
        torch::jit::inlineCallTo(cur, gf);  // as Inline does; the call stack alone names its modules
        continue;
      }
      const std::string callee_path = rel->empty() ? path : path.empty() ? *rel : path + "." + *rel;
      auto cg = built_callee(gf, callee_path, memo);
      torch::jit::inlineCallTo(cur, gf, cg.get());
    } else {
      for (torch::jit::Block* sb : cur->blocks()) inline_calls(sb, path, memo);
    }
  }
}

std::shared_ptr<torch::jit::Graph> built_callee(torch::jit::GraphFunction* fn, const std::string& path, InlineMemo& memo) {
  const auto key = std::make_pair(static_cast<const torch::jit::GraphFunction*>(fn), path);
  auto hit = memo.graphs.find(key);
  if (hit != memo.graphs.end()) return hit->second;
  if (memo.building.count(key)) return fn->optimized_graph();  // recursion (TorchScript forbids it): as Inline does
  memo.building.insert(key);
  std::shared_ptr<torch::jit::Graph> g = fn->graph()->copy();
  inline_calls(g->block(), path, memo);
  annotate_leaf(g->block(), path);
  if (torch::jit::getGraphExecutorOptimize()) torch::jit::preoptimizeGraph(g);
  memo.building.erase(key);
  memo.graphs.emplace(key, g);
  return g;
}

// True when block `outer` is `b` or holds it (through nodes' sub-blocks).
bool block_encloses(const torch::jit::Block* outer, const torch::jit::Block* b) {
  while (b) {
    if (b == outer) return true;
    const Node* owner = b->owningNode();
    b = owner ? owner->owningBlock() : nullptr;
  }
  return false;
}

// Reads of a module's tensor attribute that the same forward wrote before
// read the written value: `self.mean = x.mean(dim, keepdim=True)` in one
// method and `x - self.mean` in the next (ts-kim/RevIN keeps its statistics
// so, between its "norm" and "denorm" calls) is, after inlining, a
// prim::SetAttr then a prim::GetAttr of the same path and name; the read is
// replaced by the stored value, so the norm is seen computed from x and not
// from a module attribute (which reads as a parameter: a weight
// standardization). Only where the store certainly runs first: it lies in
// a block enclosing the read, before it, with no other store of that
// attribute after it and before the read, and none in a loop around the
// read. The SetAttr itself stays: the module's state is as before.
void forward_attribute_stores(torch::jit::Graph& g) {
  std::vector<Node*> order;
  collect_nodes(g.block(), order);
  std::map<std::pair<std::string, std::string>, std::vector<Node*>> stores;
  for (Node* n : order)
    if (n->kind() == c10::prim::SetAttr && n->inputs().size() == 2)
      if (auto path = path_from_self(n->input(0), g)) stores[{*path, n->s(c10::attr::name)}].push_back(n);
  if (stores.empty()) return;
  for (Node* n : order) {
    if (n->kind() != c10::prim::GetAttr || n->output()->type()->kind() != c10::TypeKind::TensorType) continue;
    auto path = path_from_self(n->input(), g);
    if (!path) continue;
    auto it = stores.find({*path, n->s(c10::attr::name)});
    if (it == stores.end()) continue;
    Node* last = nullptr;
    for (Node* st : it->second)
      if (st->isBefore(n)) last = st;
    if (!last || !block_encloses(last->owningBlock(), n->owningBlock())) continue;
    if (last->input(1)->type()->kind() != c10::TypeKind::TensorType) continue;
    // A store inside a loop around the read runs again before a later read.
    bool looped = false;
    for (const torch::jit::Block* b = n->owningBlock(); b && b->owningNode() && !looped; b = b->owningNode()->owningBlock())
      if (b->owningNode()->kind() == c10::prim::Loop)
        for (Node* st : it->second) looped = looped || block_encloses(b, st->owningBlock());
    if (looped) continue;
    n->output()->replaceAllUsesWith(last->input(1));
  }
}

// Inlines every call of `graph` (a module's forward) with the module paths
// recorded; see above.
void inline_recording_modules(torch::jit::Graph& graph) {
  InlineMemo memo;
  inline_calls(graph.block(), "", memo);
  torch::jit::Inline(graph);  // whatever is left (nothing, normally)
}

}  // namespace

int64_t fold_static_branches(torch::jit::Graph& graph, const ScopeResolver& scopes) {
  std::vector<Node*> all;
  collect_nodes(graph.block(), all);
  std::set<std::string> assigned;
  for (Node* n : all)
    if (n->kind() == c10::prim::SetAttr) assigned.insert(n->s(c10::attr::name));
  // Repeat: a folded block may hold further configuration ifs.
  int64_t folded = 0;
  for (int round = 0; round < 8; ++round) {
    const int64_t k = fold_configuration_branches(graph.block(), scopes, assigned);
    if (k == 0) break;
    folded += k;
  }
  return folded;
}

// ---------------------------------------------------------------------------
// Graph rewriting

InstrumentedModel::InstrumentedModel(const LoadedModel& model, const InstrumentOptions& opt) : model_(model) {
  graph_ = model.module.get_method("forward").graph()->copy();
  inline_recording_modules(*graph_);
  torch::jit::LowerSimpleTuples(graph_);
  forward_attribute_stores(*graph_);
  ScopeResolver scopes(model);
  // The innermost named_modules() path running node n ("" the root's own
  // forward, or unknown).
  auto innermost_module = [&](Node* n) {
    return scopes.known(n) && !scopes.chain(n).empty() ? scopes.chain(n).back() : std::string();
  };
  fold_static_branches(*graph_, scopes);

  std::vector<Node*> nodes;
  collect_nodes(graph_->block(), nodes);
  graph_nodes_ = static_cast<int64_t>(nodes.size());

  // What reads each argument first (through views, casts and contiguous).
  {
    static const std::set<std::string> through = {"aten::to", "aten::contiguous", "aten::type_as", "aten::float",
                                                  "aten::detach", "aten::clone"};
    const auto inputs = graph_->inputs();
    for (size_t i = 1; i < inputs.size(); ++i) {
      std::set<std::string> kinds;
      std::vector<const Value*> work = {inputs[i]};
      for (size_t w = 0; w < work.size() && w < 64; ++w)
        for (const auto& u : work[w]->uses()) {
          const std::string k = u.user->kind().toQualString();
          if (through.count(k) && u.offset == 0 && u.user->outputs().size() == 1) work.push_back(u.user->output());
          else kinds.insert(k);
        }
      input_consumers_.push_back(std::move(kinds));
      // Whether a use reached from the argument through the uses `through`
      // accepts satisfies `hit` (breadth first, at most `limit` values).
      using UseTest = std::function<bool(const torch::jit::Use&, const std::string&)>;
      auto reaches = [](const Value* from, size_t limit, const UseTest& through, const UseTest& hit) {
        std::vector<const Value*> work = {from};
        for (size_t w = 0; w < work.size() && w < limit; ++w)
          for (const auto& u : work[w]->uses()) {
            const std::string k = u.user->kind().toQualString();
            if (hit(u, k)) return true;
            if (through(u, k)) work.push_back(u.user->output());
          }
        return false;
      };
      // Through reshapes too: does a 1-D convolution read it?
      auto reshape = [](const torch::jit::Use& u, const std::string& k) {
        return (through.count(k) > 0 || k == "aten::unsqueeze" || k == "aten::view" || k == "aten::reshape") &&
               u.offset == 0 && u.user->outputs().size() == 1;
      };
      auto is_conv1d = [](const torch::jit::Use& u, const std::string& k) {
        if (u.offset != 0) return false;
        if (k == "aten::conv1d" || k == "aten::conv_transpose1d") return true;
        // 1-D when the weight is 3-D (its type, when complete).
        if ((k == "aten::_convolution" || k == "aten::_convolution_mode" || k == "aten::convolution") && u.user->inputs().size() > 3) {
          if (auto tt = u.user->input(1)->type()->cast<c10::TensorType>())
            if (tt->dim()) return *tt->dim() == 3;
          // A weight computed in the graph (weight_norm's parametrization)
          // has no rank in its type: one stride per spatial axis says it.
          if (auto st = structure::const_int_list(u.user->input(3))) return st->size() == 1;
        }
        return false;
      };
      input_reaches_conv1d_.push_back(reaches(inputs[i], 64, reshape, is_conv1d));
      // Through casts, slices, elementwise scaling and paddings only (the
      // layout stays [B, C, T]): HF EnCodec cuts the waveform into frames
      // (a slice of the time axis), multiplies it by its padding mask and
      // pads it (F.pad, reflect) before the first conv1d.
      static const std::set<std::string> keep_layout = {
          "aten::pad", "aten::constant_pad_nd", "aten::reflection_pad1d", "aten::replication_pad1d",
          "aten::circular_pad1d", "aten::slice", "aten::narrow", "aten::mul", "aten::div"};
      input_conv1d_layout_.push_back(reaches(
          inputs[i], 64,
          [](const torch::jit::Use& u, const std::string& k) {
            const bool elementwise = k == "aten::mul" || k == "aten::div";
            return (through.count(k) > 0 || keep_layout.count(k) > 0) && (u.offset == 0 || elementwise) &&
                   u.user->outputs().size() == 1;
          },
          is_conv1d));
      // Through views, slices and casts: is it the indices of a lookup?
      static const std::set<std::string> shape_ops = {
          "aten::to", "aten::contiguous", "aten::detach", "aten::clone", "aten::view", "aten::reshape", "aten::flatten",
          "aten::unsqueeze", "aten::squeeze", "aten::slice", "aten::select", "aten::expand", "aten::repeat",
          "aten::narrow", "aten::long", "aten::int", "aten::add", "aten::sub", "aten::masked_fill", "aten::where",
          "aten::clamp", "aten::remainder", "aten::transpose", "aten::permute", "aten::t"};
      input_indexes_table_.push_back(reaches(
          inputs[i], 256,
          [](const torch::jit::Use& u, const std::string& k) {
            return shape_ops.count(k) && u.user->outputs().size() == 1 && is_tensor(u.user->output());
          },
          [](const torch::jit::Use& u, const std::string& k) {
            return (k == "aten::embedding" && u.offset == 1) || (k == "aten::embedding_bag" && u.offset == 1) ||
                   (k == "aten::index_select" && u.offset == 2) || (k == "aten::one_hot" && u.offset == 0);
          }));
      // Columns taken one by one (fastai's `e(x_cat[:, i]) for i, e in
      // enumerate(self.embeds)`), or per-column offsets from the model's own
      // buffers added (torchfm's `x + self.offsets`): its axis 1 holds
      // fields, not positions.
      {
        std::unordered_map<const Value*, bool> memo;
        auto const_int = [](const Value* v) -> std::optional<int64_t> {
          auto c = torch::jit::toIValue(v);
          return c && c->isInt() ? std::optional<int64_t>(c->toInt()) : std::nullopt;
        };
        input_fields_.push_back(reaches(
            inputs[i], 64,
            [&](const torch::jit::Use& u, const std::string& k) {
              // Casts, and x_cat[:, i]'s full slice of axis 0 before the select.
              if (u.offset != 0) return false;
              return k == "aten::to" || k == "aten::contiguous" || k == "aten::long" ||
                     (k == "aten::slice" && u.user->inputs().size() >= 2 && const_int(u.user->input(1)) == 0);
            },
            [&](const torch::jit::Use& u, const std::string& k) {
              if (k == "aten::select" && u.offset == 0 && u.user->inputs().size() >= 3) {
                const auto d = const_int(u.user->input(1));
                return d && (*d == 1 || *d == -1) && torch::jit::toIValue(u.user->input(2)).has_value();
              }
              return k == "aten::add" && u.offset <= 1 && u.user->inputs().size() >= 2 &&
                     u.user->input(1 - u.offset)->type()->kind() == c10::TypeKind::TensorType &&
                     recognize::param_only(u.user->input(1 - u.offset), memo);
            }));
      }
    }
  }
  // The padding_idx each embedding lookup passes (aten::embedding's third
  // argument): a constant in a traced graph, where the Embedding module keeps
  // no padding_idx attribute, self.padding_idx in a scripted one.
  for (Node* n : graph_->nodes()) {
    if (std::string(n->kind().toQualString()) != "aten::embedding" || n->inputs().size() < 3) continue;
    std::optional<int64_t> idx;
    if (auto c = torch::jit::toIValue(n->input(2)); c && c->isInt()) idx = c->toInt();
    else if (auto a = scopes.attribute(n->input(2)); a && a->isInt()) idx = a->toInt();
    if (idx && *idx >= 0) embedding_padding_idx_[innermost_module(n)] = *idx;
  }
  // Integer arguments compared with a constant id (see compared_ids()).
  {
    static const std::set<std::string> casts = {"aten::to", "aten::contiguous", "aten::long", "aten::int",
                                                "aten::detach", "aten::clone", "aten::view", "aten::reshape"};
    std::function<void(Block*)> walk = [&](Block* b) {
      for (Node* n : b->nodes()) {
        for (Block* sb : n->blocks()) walk(sb);
        const std::string k = n->kind().toQualString();
        if ((k != "aten::eq" && k != "aten::ne") || n->inputs().size() != 2) continue;
        const Value* v = n->input(0);
        for (int d = 0; d < 8 && v->node()->kind() != c10::prim::Param && casts.count(v->node()->kind().toQualString()) &&
                        !v->node()->inputs().empty();
             ++d)
          v = v->node()->input(0);
        if (v->node()->kind() != c10::prim::Param || v->node() != graph_->param_node() || v->offset() < 1) continue;
        std::optional<int64_t> id;
        if (auto c = torch::jit::toIValue(n->input(1)); c && c->isInt()) id = c->toInt();
        else if (auto a = scopes.attribute(n->input(1)); a && a->isInt()) id = a->toInt();
        if (!id) continue;
        const std::pair<size_t, int64_t> e{v->offset() - 1, *id};
        if (std::find(compared_ids_.begin(), compared_ids_.end(), e) == compared_ids_.end()) compared_ids_.push_back(e);
      }
    };
    walk(graph_->block());
  }

  // Arguments read only by a periodic encoding (sin/cos of the raw value:
  // diffusion timesteps, positions), on the graph with configuration
  // branches folded. See periodic_inputs().
  {
    static const std::set<std::string> pass = {
        "aten::mul", "aten::div", "aten::add", "aten::sub", "aten::rsub", "aten::neg", "aten::to", "aten::float",
        "aten::type_as", "aten::view", "aten::reshape", "aten::unsqueeze", "aten::squeeze", "aten::expand",
        "aten::expand_as", "aten::slice", "aten::select", "aten::index", "aten::repeat", "aten::flatten",
        "aten::contiguous", "aten::clone", "aten::cat", "aten::stack", "aten::mul_", "aten::div_", "aten::add_",
        "prim::ListConstruct", "aten::detach", "aten::permute", "aten::transpose", "aten::t", "aten::exp"};
    static const std::set<std::string> periodic = {"aten::sin", "aten::cos", "aten::sin_", "aten::cos_"};
    // Random Fourier features: coordinates @ a stored Gaussian matrix, then
    // sin/cos (SAM's prompt encoder, NeRF-style encodings).
    static const std::set<std::string> projections = {"aten::matmul", "aten::mm", "aten::bmm"};
    std::unordered_map<const Value*, bool> stored_memo;
    const auto inputs = graph_->inputs();
    for (size_t i = 1; i < inputs.size(); ++i) {
      bool found = false, other = false;
      std::vector<Value*> work = {inputs[i]};
      std::set<const Value*> seen;
      for (size_t w = 0; w < work.size() && w < 4096 && !other; ++w) {
        if (!seen.insert(work[w]).second) continue;
        for (const auto& u : work[w]->uses()) {
          const std::string k = u.user->kind().toQualString();
          if (periodic.count(k)) {
            found = true;
          } else if (metadata_ops().count(k)) {
          } else if (pass.count(k) || ((k == "aten::copy_" || k == "aten::select") && u.user->outputs().size() == 1) ||
                     (projections.count(k) && u.user->inputs().size() == 2 &&
                      recognize::param_only(u.user->input(1 - u.offset), stored_memo))) {
            // copy_: a slice of a clone rescaled in place
            // (coordinates[..., 0] = coordinates[..., 0] / width); the
            // clone it writes into is walked from its other uses.
            for (Value* o : u.user->outputs()) work.push_back(o);
          } else {
            other = true;  // read by something else (a Linear, a conv, a block) before any sin/cos
            break;
          }
        }
      }
      periodic_inputs_.push_back(found && !other);
    }
  }

  // Arguments the model rescales itself by stored values before any other
  // op reads them: every path from the argument goes through views and
  // additions of stored values to a division or multiplication by a stored
  // value (a buffer, a constant, arithmetic on them). See rescaled_inputs().
  {
    static const std::set<std::string> views = {"aten::to", "aten::float", "aten::type_as", "aten::view", "aten::reshape",
                                                "aten::unsqueeze", "aten::contiguous", "aten::permute", "aten::clone",
                                                "aten::detach", "aten::slice", "aten::select", "aten::narrow",
                                                // axis moves (HF CLAP's HTSAT: input_features.transpose(1, 3)
                                                // before its BatchNorm over the mel bins, eval37 H03)
                                                "aten::transpose", "aten::movedim", "aten::swapaxes", "aten::t",
                                                "aten::flatten", "aten::unflatten", "aten::squeeze", "aten::expand"};
    std::unordered_map<const Value*, bool> memo;
    // A statistic of the data: a reduction (the mean scaler of Hugging
    // Face's time-series transformers: |x * observed|.sum(dim) / n, clamped,
    // with a batch default through torch.where), or elementwise arithmetic
    // on statistics and stored values. Dividing an input by one rescales it
    // by its own scale (DeepAR, RevIN-style scalers).
    static const std::set<std::string> reductions = {"aten::sum", "aten::mean", "aten::std", "aten::var", "aten::norm",
                                                     "aten::linalg_vector_norm", "aten::amax", "aten::amin",
                                                     "aten::std_mean", "aten::var_mean", "aten::median",
                                                     "aten::nanmean", "aten::nansum"};
    static const std::set<std::string> elementwise = {
        "aten::div", "aten::mul", "aten::add", "aten::sub", "aten::rsub", "aten::clamp", "aten::clamp_min",
        "aten::clamp_max", "aten::where", "aten::abs", "aten::log", "aten::log1p", "aten::sqrt", "aten::rsqrt",
        "aten::exp", "aten::zeros_like", "aten::ones_like", "aten::to", "aten::squeeze", "aten::unsqueeze",
        "aten::view", "aten::reshape", "aten::expand", "aten::expand_as", "aten::detach", "aten::neg",
        "aten::reciprocal", "aten::maximum", "aten::minimum", "aten::gt", "aten::ge", "aten::lt", "aten::le",
        "aten::eq", "aten::ne", "aten::contiguous", "aten::clone", "aten::float", "aten::type_as"};
    std::unordered_map<const Value*, bool> stat_memo;
    std::function<bool(Value*, int)> statistic = [&](Value* v, int depth) -> bool {
      auto it = stat_memo.find(v);
      if (it != stat_memo.end()) return it->second;
      Node* n = v->node();
      const std::string k = n->kind().toQualString();
      bool r = false;
      if (reductions.count(k)) {
        r = true;
      } else if (n->kind() == c10::prim::TupleUnpack && n->input()->node()->kind() == c10::prim::TupleConstruct) {
        // A scaler returning (scaled, loc, scale): the element itself.
        size_t j = 0;
        while (j < n->outputs().size() && n->outputs()[j] != v) ++j;
        Node* tc = n->input()->node();
        r = j < tc->inputs().size() && depth < 24 && statistic(tc->input(j), depth + 1);
      } else if (recognize::param_only(v, memo)) {
        r = true;
      } else if (depth < 24 && elementwise.count(k) && n->blocks().empty()) {
        r = true;
        for (Value* in : n->inputs())
          if (in->type()->kind() == c10::TypeKind::TensorType && !statistic(in, depth + 1)) r = false;
      }
      stat_memo[v] = r;
      return r;
    };
    const auto inputs = graph_->inputs();
    for (size_t i = 1; i < inputs.size(); ++i) {
      bool scaled = false, other = !is_tensor(inputs[i]);
      std::vector<Value*> work = {inputs[i]};
      std::set<const Value*> seen;
      for (size_t w = 0; w < work.size() && w < 512 && !other; ++w) {
        if (!seen.insert(work[w]).second) continue;
        for (const auto& u : work[w]->uses()) {
          const std::string k = u.user->kind().toQualString();
          if (metadata_ops().count(k)) continue;
          // Statistics of the input (its scale measured): this path ends in
          // a value the rescaling below divides by, not in a layer.
          if (reductions.count(k) && u.offset == 0) continue;
          if (k == "prim::ListConstruct" || k == "aten::cat" || k == "aten::stack") {
            // Concatenated with other values (past and future targets before
            // the scaler): the result carries this input on.
            if (k == "prim::ListConstruct" && u.user->output()->uses().size() == 1 &&
                (u.user->output()->uses()[0].user->kind() == c10::aten::cat ||
                 u.user->output()->uses()[0].user->kind() == c10::aten::stack)) {
              work.push_back(u.user->output()->uses()[0].user->output());
              continue;
            }
            if (k != "prim::ListConstruct") {
              work.push_back(u.user->output());
              continue;
            }
            other = true;
            break;
          }
          if (u.user->outputs().size() != 1) {
            other = true;
            break;
          }
          const bool binary = u.user->inputs().size() >= 2 && u.offset <= 1;
          Value* operand = binary ? u.user->input(1 - u.offset) : nullptr;
          const bool stored = operand && recognize::param_only(operand, memo);
          const bool stat = operand && !stored && operand->type()->kind() == c10::TypeKind::TensorType &&
                            statistic(operand, 0);
          if (views.count(k) && u.offset == 0) {
            work.push_back(u.user->output());
          } else if ((k == "aten::sub" || k == "aten::add" || k == "aten::rsub") && (stored || stat)) {
            work.push_back(u.user->output());
          } else if ((k == "aten::div" && u.offset == 0 && (stored || stat)) || (k == "aten::mul" && stored)) {
            scaled = true;  // this path is rescaled; its output is no longer the raw input
          } else if (k == "aten::batch_norm" && u.offset == 0) {
            // A BatchNorm on the raw input (a tabular model's per-column
            // BatchNorm1d, an input BatchNorm2d): it standardizes the input,
            // with the batch's statistics in training and its running
            // statistics in eval (eval27 C03). Running statistics that never
            // saw the data are BN001/BN003's finding, not the input's scale.
            scaled = true;
          } else if (k == "aten::mul" || k == "aten::abs" || k == "aten::pow" || k == "aten::square" ||
                     k == "aten::where" || k == "aten::clamp" || k == "aten::clamp_min") {
            // Masking or measuring on the way to a statistic (x * observed,
            // |x|): followed on; a layer that reads the result is `other`.
            work.push_back(u.user->output());
          } else {
            other = true;  // read raw by a layer, a norm or anything else
            break;
          }
        }
      }
      rescaled_inputs_.push_back(scaled && !other);
    }
    // Arguments some layer reads: a value computed from the argument reaches
    // an op with weights (a matrix product, convolution, embedding, norm,
    // recurrence) or an op whose other operand is a stored tensor (a
    // parameter or buffer: x * self.scale, x + self.pos_embed). A target
    // that only the loss computed inside forward reads (a depth map's
    // log(gt) in a scale-invariant loss, eval52 depth_silog_twin) is no
    // layer's input. See layer_read_inputs().
    {
      static const std::set<std::string> weighted = {
          "aten::linear", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution",
          "aten::_convolution_mode", "aten::convolution", "aten::conv_transpose1d", "aten::conv_transpose2d",
          "aten::conv_transpose3d", "aten::embedding", "aten::embedding_bag", "aten::_embedding_bag",
          "aten::layer_norm", "aten::group_norm", "aten::batch_norm", "aten::instance_norm", "aten::rms_norm",
          "aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu", "aten::lstm_cell", "aten::gru_cell",
          "aten::prelu", "aten::addmm", "aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd"};
      std::unordered_map<const Value*, bool> attr_memo;
      std::function<bool(const Value*, int)> from_attribute = [&](const Value* v, int depth) -> bool {
        auto it = attr_memo.find(v);
        if (it != attr_memo.end()) return it->second;
        attr_memo[v] = false;
        const Node* n = v->node();
        bool r = n->kind() == c10::prim::GetAttr && is_tensor(v);
        for (size_t i = 0; !r && depth < 16 && i < n->inputs().size(); ++i) r = from_attribute(n->input(i), depth + 1);
        attr_memo[v] = r;
        return r;
      };
      for (size_t i = 1; i < inputs.size(); ++i) {
        bool read = false;
        std::vector<Value*> work = {inputs[i]};
        std::set<const Value*> seen;
        for (size_t w = 0; w < work.size() && w < 4096 && !read; ++w) {
          if (!seen.insert(work[w]).second) continue;
          for (const auto& u : work[w]->uses()) {
            Node* user = u.user;
            const std::string k = user->kind().toQualString();
            if (weighted.count(k) || user->kind() == c10::prim::CallMethod || user->kind() == c10::prim::CallFunction) {
              read = true;
              break;
            }
            for (Value* in : user->inputs())
              if (in != work[w] && is_tensor(in) && recognize::param_only(in, memo) && from_attribute(in, 0)) read = true;
            if (read) break;
            for (Value* o : user->outputs()) work.push_back(o);
            // A block's return hands the value on as its if's (or loop's) output.
            if (user->kind() == c10::prim::Return && user->owningBlock() && user->owningBlock()->owningNode()) {
              Node* owner = user->owningBlock()->owningNode();
              const size_t shift = owner->kind() == c10::prim::Loop ? 1 : 0;
              if (u.offset >= shift && u.offset - shift < owner->outputs().size()) work.push_back(owner->output(u.offset - shift));
            }
          }
        }
        // Too large to follow to the end: taken as read.
        layer_read_inputs_.push_back(read || work.size() >= 4096);
      }
    }
  }

  auto new_tap = [&](TapKind kind, const std::string& module) -> TapSite& {
    TapSite t;
    t.id = static_cast<int64_t>(taps_.size());
    t.kind = kind;
    t.module = module;
    taps_.push_back(t);
    by_module_[module].push_back(t.id);
    return taps_.back();
  };
  auto consumer_chain = [&](Node* user) -> const std::vector<std::string>& {
    static const std::vector<std::string> kRoot;
    if (user->kind() == c10::prim::Return) {
      Node* owner = user->owningBlock()->owningNode();
      return owner ? scopes.chain(owner) : kRoot;
    }
    return scopes.chain(user);
  };
  // Consumers whose scope is unknown (no call stack) say nothing about
  // whether a value leaves a module; the graph's return is the root.
  auto consumer_known = [&](Node* user) {
    if (user->kind() == c10::prim::Return) {
      Node* owner = user->owningBlock()->owningNode();
      return owner == nullptr || scopes.known(owner);
    }
    return scopes.known(user);
  };
  auto inside = [](const std::vector<std::string>& chain, const std::string& path) {
    return std::find(chain.begin(), chain.end(), path) != chain.end();
  };
  auto insert_tap_after = [&](Node* after, Value* v, int64_t id) -> Value* {
    Node* c = make_constant_int(*graph_, id);
    Node* t = graph_->create(kTap, {c->output(), v});
    t->output()->setType(v->type());
    c->insertAfter(after);
    t->insertAfter(c);
    return t->output();
  };

  // Decisions are made on the original graph; mutations come after the walk.
  struct Plan {
    Value* v;
    Node* def;
    std::vector<std::string> modules;  // outer -> inner
  };
  std::vector<Plan> plans;
  std::vector<Node*> op_nodes, norm_nodes, flag_nodes, sdpa_nodes;
  // A value computed from module attributes and constants only: a norm over
  // it is weight standardization (timm's ScaledStdConv2d / StdConv2d run
  // F.batch_norm(weight.reshape(1, C_out, -1), None, None, training=True) on
  // the conv weight), not a normalization of activations, and its constant
  // training flag is not a baked mode.
  std::unordered_map<const Value*, bool> param_memo;
  for (Node* n : nodes) {
    const auto k = n->kind();
    const std::string kq = k.toQualString();
    if ((kq == "aten::batch_norm" || kq == "aten::layer_norm" || kq == "aten::group_norm" ||
         kq == "aten::instance_norm") &&
        !n->inputs().empty() && recognize::param_only(n->input(0), param_memo)) {
      ++weight_standardizations_;
      continue;
    }
    if (k == c10::aten::sigmoid || k == c10::aten::tanh || k == c10::aten::softmax ||
        k == c10::aten::sigmoid_ || k == c10::aten::tanh_ || kq == "aten::batch_norm" || is_relu_family(n))
      op_nodes.push_back(n);
    if (kq == "aten::scaled_dot_product_attention") sdpa_nodes.push_back(n);
    if (kq == "aten::batch_norm" || kq == "aten::layer_norm" || kq == "aten::group_norm" ||
        kq == "aten::instance_norm" || kq == "aten::rms_norm")
      norm_nodes.push_back(n);
    if (kq == "aten::batch_norm" || is_dropout_op(kq) || kq == "aten::lstm" || kq == "aten::gru" ||
        kq == "aten::rnn_tanh" || kq == "aten::rnn_relu")
      flag_nodes.push_back(n);
    if (k == c10::prim::Constant || k == c10::prim::GetAttr) continue;
    if (!scopes.known(n)) continue;
    const auto& chain = scopes.chain(n);
    if (chain.empty()) continue;
    for (Value* v : n->outputs()) {
      if (!is_tensor(v) && !is_tensor_tuple(v)) continue;
      Plan p{v, n, {}};
      for (const std::string& mod : chain) {
        bool used_outside = false;
        for (const auto& u : v->uses())
          if (consumer_known(u.user) && !inside(consumer_chain(u.user), mod)) used_outside = true;
        if (used_outside) p.modules.push_back(mod);
      }
      if (!p.modules.empty()) plans.push_back(std::move(p));
    }
  }

  // Structure, decided on the graph as loaded (taps change node inputs).
  auto attr_double = [&](Value* v) -> std::optional<double> {
    const auto iv = scopes.attribute(v);
    if (iv && iv->isDouble()) return iv->toDouble();
    if (iv && iv->isInt()) return static_cast<double>(iv->toInt());
    return std::nullopt;
  };
  std::vector<structure::NormNode> norm_sites;
  for (Node* n : norm_nodes) {
    structure::NormNode nn;
    nn.node = nn.anchor = n;
    nn.input = n->input(0);
    nn.op = std::string(n->kind().toQualString()).substr(6);
    nn.args = norm_op_args(n, nn.op);
    // eps and momentum read from a plain module attribute (a user's
    // `F.layer_norm(x, shape, w, b, self.eps)` in a scripted LayerNorm2d;
    // nn.LayerNorm compiles eps as a constant): the attribute's value.
    const bool bn_like = nn.op == "batch_norm" || nn.op == "instance_norm";
    const size_t eps_at = bn_like ? 7 : nn.op == "rms_norm" ? 3 : 4;
    for (const auto& [key, at] : {std::pair<const char*, size_t>{"eps", eps_at}, {"momentum", 6}}) {
      if (!nn.args.contains(key) || nn.args[key] != "dynamic" || at >= n->inputs().size()) continue;
      if (auto d = attr_double(n->input(at))) nn.args[key] = *d;
    }
    const auto& chain = scopes.chain(n);
    nn.module = chain.empty() ? std::string() : chain.back();
    norm_sites.push_back(std::move(nn));
  }
  for (auto& p : recognize::find_norm_patterns(nodes, scopes, attr_double)) norm_sites.push_back(std::move(p));
  // Layout roles of every tensor, from what produced it (before any tap).
  const auto roles = recognize::infer_roles(nodes, *graph_, opt.input_ranks, [&](Value* v) -> std::optional<int64_t> {
    const auto iv = scopes.attribute(v);
    if (iv && iv->isInt()) return iv->toInt();
    return std::nullopt;
  });
  auto roles_of = [&](const Value* v) -> std::vector<std::string> {
    auto it = roles.find(v);
    return it == roles.end() ? std::vector<std::string>() : it->second;
  };
  for (Node* n : nodes) {
    const std::string k = n->kind().toQualString();
    const bool red = (k == "aten::mean" || k == "aten::sum" || k == "aten::amax" || k == "aten::amin") &&
                     n->inputs().size() >= 3;
    // Max-pooling over an axis written as x.max(dim=2)[0] (AllenNLP's
    // CnnEncoder): aten::max.dim / aten::min.dim, one int dim, two outputs.
    const bool max_dim = (k == "aten::max" || k == "aten::min") && n->inputs().size() == 3 && n->outputs().size() == 2;
    const bool conv = k == "aten::conv1d" || k == "aten::conv2d" || k == "aten::_convolution" || k == "aten::_convolution_mode" || k == "aten::convolution";
    // A pooling op: it slides over (or reduces) the axes after batch and
    // channel: F.max_pool1d(h, h.size(2)) over time (Kim's TextCNN).
    static const std::set<std::string> pools = {
        "aten::max_pool1d", "aten::avg_pool1d", "aten::adaptive_max_pool1d", "aten::adaptive_avg_pool1d",
        "aten::max_pool1d_with_indices", "aten::max_pool2d", "aten::avg_pool2d", "aten::adaptive_max_pool2d",
        "aten::adaptive_avg_pool2d", "aten::max_pool2d_with_indices"};
    const bool pool = pools.count(k) > 0;
    if (!red && !conv && !max_dim && !pool) continue;
    OpFact f;
    f.op = k;
    const auto& chain = scopes.chain(n);
    f.module = chain.empty() ? std::string() : chain.back();
    f.input_roles = roles_of(n->input(0));
    if (red) {
      auto d = structure::const_int_list(n->input(1));
      if (!d) continue;
      f.dims = *d;
    } else if (max_dim) {
      auto d = torch::jit::toIValue(n->input(1));
      if (!d || !d->isInt()) continue;
      f.dims = {d->toInt()};
    } else if (pool) {
      // Pooling over the last 1 (1d) or 2 (2d) axes of its input, batched
      // ([N, C, L], [N, C, H, W]) unless the graph's types say otherwise.
      const bool two = k.find("2d") != std::string::npos;
      int64_t rank = two ? 4 : 3;
      if (!f.input_roles.empty()) rank = static_cast<int64_t>(f.input_roles.size());
      else if (auto tt = n->input(0)->type()->cast<c10::TensorType>(); tt && tt->dim()) rank = static_cast<int64_t>(*tt->dim());
      for (int64_t d = std::max<int64_t>(0, rank - (two ? 2 : 1)); d < rank; ++d) f.dims.push_back(d);
    } else {
      const int64_t rank = k == "aten::conv1d" ? 3 : k == "aten::conv2d" ? 4 : static_cast<int64_t>(f.input_roles.size());
      for (int64_t d = 2; d < rank; ++d) f.dims.push_back(d);
    }
    std::deque<Value*> todo{n->outputs()[0]};
    for (int steps = 0; !todo.empty() && steps < 24; ++steps) {
      Value* v = todo.front();
      todo.pop_front();
      for (const auto& u : v->uses()) {
        const std::string uk = u.user->kind().toQualString();
        // (unsqueeze: a pooled bag re-inserted as one more field before
        // torch.cat, DeepFM's genre.mean(1).unsqueeze(1), eval42 C04b.)
        if ((uk == "aten::to" || uk == "aten::contiguous" || uk == "aten::view" || uk == "aten::reshape" ||
             uk == "aten::flatten" || uk == "aten::squeeze" || uk == "aten::unsqueeze" || uk == "aten::dropout") &&
            u.offset == 0) {
          todo.push_back(u.user->output());
          // A dropout module reads it too (its output is the first to
          // change when the pooling takes padding in).
          if (uk == "aten::dropout") {
            const auto& uc = scopes.chain(u.user);
            if (!uc.empty() && std::find(f.consumers.begin(), f.consumers.end(), uc.back()) == f.consumers.end())
              f.consumers.push_back(uc.back());
          }
          continue;
        }
        // Joined with the other pooled features (torch.cat of a TextCNN's
        // pooled maps per kernel size): its users read it.
        if ((uk == "prim::ListConstruct" || uk == "aten::cat") && u.user->outputs().size() == 1) {
          todo.push_back(u.user->output());
          continue;
        }
        // Appended to a list in a scripted loop (`outs.append(pooled)`,
        // then torch.cat(outs)): the list's users read it.
        if (uk == "aten::append" && u.offset == 1) {
          todo.push_back(u.user->input(0));
          continue;
        }
        if (uk == "aten::append" && u.offset == 0) continue;
        // Returned by a branch of a scripted if (`emb = h.mean(1)` under
        // `else:`): its users are those of the if's output.
        if (u.user->kind() == c10::prim::Return && u.user->owningBlock() && u.user->owningBlock()->owningNode() &&
            u.user->owningBlock()->owningNode()->kind() == c10::prim::If &&
            u.offset < u.user->owningBlock()->owningNode()->outputs().size()) {
          todo.push_back(u.user->owningBlock()->owningNode()->output(u.offset));
          continue;
        }
        const auto& uc = scopes.chain(u.user);
        const std::string m = uc.empty() ? std::string() : uc.back();
        if (std::find(f.consumers.begin(), f.consumers.end(), m) == f.consumers.end()) f.consumers.push_back(m);
      }
    }
    op_facts_.push_back(std::move(f));
  }
  // Reductions and whether they normalize the tensor they reduce.
  for (Node* n : nodes) {
    const std::string k = n->kind().toQualString();
    static const std::map<std::string, size_t> dim_at = {
        {"aten::norm", 2},   {"aten::linalg_vector_norm", 2}, {"aten::frobenius_norm", 1}, {"aten::std", 1},
        {"aten::var", 1},    {"aten::mean", 1},               {"aten::sum", 1},            {"aten::softmax", 1},
        {"aten::log_softmax", 1}, {"aten::logsumexp", 1},     {"aten::amax", 1},
        {"aten::amin", 1},   {"aten::max", 1},                {"aten::min", 1}};
    auto it = dim_at.find(k);
    if (it == dim_at.end() || n->inputs().empty() || !is_tensor(n->input(0)) || n->outputs().size() != 1) continue;
    ReductionSite r;
    r.op = k;
    for (const auto& ns : norm_sites)
      if (ns.op != "l2_norm_pattern" && (ns.input == n->input(0) || (ns.view_source && ns.view_source == n->input(0))))
        r.in_norm = true;
    const auto& chain = scopes.chain(n);
    r.module = chain.empty() ? std::string() : chain.back();
    r.input_roles = roles_of(n->input(0));
    if (n->inputs().size() <= it->second) {
      r.all_dims = true;  // x.mean(), x.norm(), x.std()
    } else {
      Value* dv = n->input(it->second);
      auto int_of = [&](const Value* x) { return static_int(x, scopes); };
      if (dv->type()->kind() == c10::TypeKind::IntType) {
        auto c = int_of(dv);
        if (!c) continue;
        r.dims = {*c};
      } else if (dv->node()->kind() == c10::prim::ListConstruct) {
        if (structure::list_written(dv)) continue;  // filled at run time: axes unknown here
        bool ok = true;
        for (Value* e : dv->node()->inputs()) {
          auto c = int_of(e);
          if (c) r.dims.push_back(*c);
          else ok = false;
        }
        if (!ok) continue;
        r.all_dims = r.dims.empty();
      } else if (dv->type()->kind() == c10::TypeKind::NoneType) {
        r.all_dims = true;
      } else if (dv->type()->kind() == c10::TypeKind::BoolType) {
        r.all_dims = true;  // var(input, unbiased)
      } else if (auto d = structure::const_int_list(dv)) {
        r.dims = *d;
        r.all_dims = d->empty();
      } else {
        continue;
      }
    }
    // Does the statistic divide its own input (x / stat, x * (1 / stat),
    // (x - mean) / stat)? Follow it through elementwise steps.
    Value* src = n->input(0);
    auto same_source = [&](Value* y) {
      for (int i = 0; i < 3 && y; ++i) {
        if (y == src) return true;
        const std::string yk = y->node()->kind().toQualString();
        if ((yk == "aten::sub" || yk == "aten::to" || yk == "aten::contiguous") && !y->node()->inputs().empty())
          y = y->node()->input(0);
        else
          return false;
      }
      return y == src;
    };
    // (value, inverted): the statistic or its reciprocal (rsqrt, 1 / x).
    std::deque<std::pair<Value*, bool>> todo{{n->output(), false}};
    static const std::set<std::string> through = {
        "aten::clamp", "aten::clamp_min", "aten::clamp_max", "aten::expand", "aten::expand_as", "aten::add",
        "aten::sqrt", "aten::unsqueeze", "aten::view", "aten::reshape", "aten::to", "aten::detach",
        "aten::maximum"};
    const bool statistic = k != "aten::softmax" && k != "aten::log_softmax";
    // A location statistic (mean, max, min, median, amax): what centring or
    // a floor subtracts or compares; a variance or norm only divides.
    const bool op_is_location = k == "aten::mean" || k == "aten::max" || k == "aten::amax" || k == "aten::min" ||
                                k == "aten::amin";
    for (int steps = 0; statistic && !todo.empty() && steps < 24 && !r.normalizes; ++steps) {
      const auto [v, inverted] = todo.front();
      todo.pop_front();
      for (const auto& u : v->uses()) {
        const std::string uk = u.user->kind().toQualString();
        if (u.user->outputs().size() != 1) continue;
        if ((uk == "aten::div" || uk == "aten::div_") && u.offset == 1 && !inverted && same_source(u.user->input(0))) {
          r.normalizes = true;
          r.applied = "divides";
        } else if ((uk == "aten::mul" || uk == "aten::mul_") && u.user->inputs().size() >= 2 && inverted &&
                   same_source(u.user->input(1 - u.offset))) {
          r.normalizes = true;
          r.applied = "divides";
        } else if ((uk == "aten::sub" || uk == "aten::sub_") && u.offset == 1 && !inverted && op_is_location &&
                   u.user->input(0) == src) {
          // x - x.mean(0): centred with the statistic of the other examples.
          r.normalizes = true;
          r.applied = "centers";
        } else if ((uk == "aten::maximum" || uk == "aten::clamp_min" || uk == "aten::clamp") && u.offset == 1 &&
                   !inverted && op_is_location && u.user->input(0) == src) {
          // torch.maximum(x, x.max() - 8): each value floored by a statistic of all of them.
          r.normalizes = true;
          r.applied = "floors";
        } else if (uk == "aten::rsqrt" || uk == "aten::reciprocal") {
          todo.push_back({u.user->output(), !inverted});
        } else if (through.count(uk) && u.offset == 0) {
          todo.push_back({u.user->output(), inverted});
        } else if ((uk == "aten::add" || uk == "aten::maximum") && u.offset == 1) {
          todo.push_back({u.user->output(), inverted});
        } else if (uk == "aten::sub" && u.offset == 0 && op_is_location) {
          todo.push_back({u.user->output(), inverted});  // x.max() - 8
        }
      }
    }
    {
      static const std::set<std::string> scalar_uses = {"aten::Int", "aten::item", "aten::Float", "aten::Bool",
                                                        "aten::ScalarImplicit", "aten::IntImplicit",
                                                        "aten::FloatImplicit"};
      bool only_scalar = !n->output()->uses().empty();
      for (const auto& u : n->output()->uses()) {
        const std::string uk = u.user->kind().toQualString();
        if (!scalar_uses.count(uk) && !metadata_ops().count(uk)) only_scalar = false;
      }
      r.to_scalar = only_scalar;
    }
    reductions_.push_back(std::move(r));
  }
  // Residual placement (pre-norm, post-norm, the final norm) is judged on
  // LayerNorm/RMSNorm/BatchNorm-like sites: an L2 normalization (cosine
  // attention's F.normalize(q), an embedding's unit length) is no block norm.
  std::vector<structure::NormNode> block_norms;
  for (const auto& ns : norm_sites)
    if (ns.op != "l2_norm_pattern") block_norms.push_back(ns);
  std::vector<structure::Residual> residual_sites = structure::find_residuals(nodes, block_norms, scopes);
  structure::FinalNorm final_norm;
  {
    // The main stack: the container with the most blocks (the later one on a tie).
    std::map<std::string, std::set<std::string>> blocks;
    for (const auto& r : residual_sites) blocks[r.stack].insert(r.block);
    std::string main_stack;
    size_t most = 0;
    for (const auto& r : residual_sites)
      if (blocks[r.stack].size() >= most) {
        most = blocks[r.stack].size();
        main_stack = r.stack;
      }
    // The stack that feeds the head: the main stack, unless another stack of
    // two or more blocks runs after it (a hierarchical model's later stage:
    // PiT's transformers.2 after its deepest stage transformers.1, whose
    // pooling conv the walk from the main stack would take for the head;
    // eval15). A one-block stack after it is a head's own block (timm's
    // AttentionPoolLatent), not a stage.
    std::string final_stack = main_stack;
    {
      std::map<std::string, size_t> last_site;
      for (size_t i = 0; i < residual_sites.size(); ++i) last_site[residual_sites[i].stack] = i;
      size_t latest = last_site.count(main_stack) ? last_site[main_stack] : 0;
      for (const auto& [stack, at] : last_site)
        if (at > latest && blocks[stack].size() >= 2) {
          latest = at;
          final_stack = stack;
        }
    }
    for (auto it = residual_sites.rbegin(); it != residual_sites.rend(); ++it)
      if (it->stack == final_stack) {
        final_norm = structure::find_final_norm(*it, block_norms, scopes);
        break;
      }
    final_norm.stack = final_stack;
    // From the output side: the head is the last parameterized op before the
    // output; what feeds it decides (a UNet's final GroupNorm before its
    // output conv is a final norm whatever the forward walk met on the way).
    if (!residual_sites.empty()) {
      const structure::FinalNorm back =
          structure::find_final_norm_from_output(*graph_, residual_sites, block_norms, scopes, final_stack);
      // When the output walk cannot say what feeds its head, the head named
      // is the one that reads the stream: the forward walk's first
      // parameterized op after the stack when both lie in one head module
      // (classifier.mlp.0 of classifier.mlp's Linear-ReLU-Linear, not the
      // output walk's last layer classifier.mlp.2).
      const std::string fwd_head = final_norm.head_module;
      if (back.status != "unknown") {
        final_norm = back;
        final_norm.stack = final_stack;
      }
      else if (!back.head_module.empty())
        final_norm.head_module = !fwd_head.empty() && !parent_module(fwd_head).empty() &&
                                         parent_module(fwd_head) == parent_module(back.head_module)
                                     ? fwd_head
                                     : back.head_module;
    }
  }
  {
    // The contraction computing the output when no module does (CLIP's and
    // SimCLR's similarity logits in the root's own forward).
    const structure::OutputProduct op = structure::find_output_product(*graph_);
    if (!op.kind.empty()) {
      output_product_.kind = op.kind;
      output_product_.op = op.op;
      output_product_.module = innermost_module(op.node);
    }
    output_class_axis_ = structure::output_class_axis(*graph_);
  }
  std::map<Node*, int64_t> bn_input_tap;

  // The primary outputs of each module with several: the plans matching what
  // its own forward graph returns (the producing op's kind, or the child
  // module whose call produces it): one per call of the module. When none
  // matches, every plan counts as primary (statistics merged, as for one).
  std::map<std::string, std::set<size_t>> primary_plan;
  {
    auto has_forward_graph = [&](const std::string& path) {
      auto it = scopes.paths().find(path);
      return it != scopes.paths().end() && model.modules[it->second].module.find_method("forward").has_value();
    };
    std::map<std::string, std::vector<size_t>> per_module;
    for (size_t i = 0; i < plans.size(); ++i)
      for (const auto& m : plans[i].modules) per_module[m].push_back(i);
    for (const auto& [path, idxs] : per_module) {
      if (idxs.size() < 2) continue;
      std::set<size_t> pick;
      auto it = scopes.paths().find(path);
      if (it != scopes.paths().end()) {
        const auto& mod = model.modules[it->second].module;
        if (auto fwd = mod.find_method("forward")) {
          const auto g = fwd->graph();
          Value* r = g->outputs().empty() ? nullptr : g->outputs()[0];
          // The returned tuple's tensors made by the same kind of op as the
          // primary one (Qwen2/Llama rotary embeddings return (cos.to(dtype),
          // sin.to(dtype)): two aten::to outputs, cos the primary).
          std::vector<Value*> siblings;
          while (r && (r->node()->kind() == c10::prim::TupleConstruct || r->node()->kind() == c10::prim::ListConstruct)) {
            Value* first = nullptr;
            for (Value* e : r->node()->inputs())
              if (is_tensor(e) || e->node()->kind() == c10::prim::TupleConstruct) {
                first = e;
                break;
              }
            siblings.clear();
            for (Value* e : r->node()->inputs())
              if (is_tensor(e)) siblings.push_back(e);
            r = first;
          }
          // The primary's rank among the returned tensors of its kind in
          // graph order (the order the inlined calls produce them in), not in
          // the tuple's order: Glow's ActNorm returns (scale * (x + loc),
          // logdet) and computes logdet, also an aten::mul, first (eval40
          // C01's layer table showed the logdet scalar).
          size_t same_kind = 1, primary_rank = 0;
          if (r && !siblings.empty()) {
            std::vector<Value*> kin;
            for (Value* e : siblings)
              if (e->node()->kind() == r->node()->kind() && std::find(kin.begin(), kin.end(), e) == kin.end())
                kin.push_back(e);
            std::sort(kin.begin(), kin.end(), [](Value* a, Value* b) {
              return a->node() != b->node() && a->node()->isBefore(b->node());
            });
            same_kind = kin.size();
            for (size_t j = 0; j < kin.size(); ++j)
              if (kin[j] == r) primary_rank = j;
          }
          if (r) {
            Node* d = r->node();
            std::string child;
            if (d->kind() == c10::prim::CallMethod && d->input(0)->node()->kind() == c10::prim::GetAttr &&
                d->input(0)->node()->input()->node()->kind() == c10::prim::Param)
              child = (path.empty() ? "" : path + ".") + d->input(0)->node()->s(c10::attr::name);
            std::vector<size_t> matched;
            for (size_t i : idxs) {
              Node* def = plans[i].def;
              const auto& chain = scopes.chain(def);
              const bool match = !child.empty() ? inside(chain, child)
                                                : (def->kind() == d->kind() && !chain.empty() && chain.back() == path);
              if (match) matched.push_back(i);
            }
            // Several returned tensors of that kind per call: the one at the
            // primary's rank among them, call by call (graph order).
            if (child.empty() && same_kind > 1 && matched.size() % same_kind == 0) {
              std::sort(matched.begin(), matched.end(),
                        [&](size_t a, size_t b) { return plans[a].def->isBefore(plans[b].def); });
              std::vector<size_t> kept;
              for (size_t j = 0; j < matched.size(); ++j)
                if (j % same_kind == primary_rank) kept.push_back(matched[j]);
              matched = kept;
            }
            pick.insert(matched.begin(), matched.end());
          }
        }
      }
      if (pick.empty() && !has_forward_graph(path)) {
        // No forward graph of its own (a .pt2 module tree rebuilt from
        // nn_module_stack). Outputs of one call are connected through the
        // module's own ops (LlamaRMSNorm's hidden_states.to(float32) feeds
        // the rest of the norm); separate calls of a reused module (a
        // BasicBlock's relu) only through ops outside it. In each call,
        // forward returns what it computes last: that plan is the primary.
        bool flat = true;
        for (size_t i : idxs) flat = flat && plans[i].def->owningBlock() == plans[idxs.front()].def->owningBlock();
        if (flat) {
          std::map<Node*, size_t> def_of;
          for (size_t i : idxs) def_of[plans[i].def] = i;
          std::vector<size_t> group(plans.size());
          for (size_t i : idxs) group[i] = i;
          std::function<size_t(size_t)> root = [&](size_t i) { return group[i] == i ? i : group[i] = root(group[i]); };
          for (size_t i : idxs) {
            std::vector<Value*> todo{plans[i].v};
            std::set<Node*> seen;
            while (!todo.empty()) {
              Value* v = todo.back();
              todo.pop_back();
              for (const auto& u : v->uses()) {
                Node* n = u.user;
                if (!seen.insert(n).second || !inside(scopes.chain(n), path)) continue;
                auto d = def_of.find(n);
                if (d != def_of.end()) group[root(d->second)] = root(i);
                for (Value* o : n->outputs()) todo.push_back(o);
              }
            }
          }
          std::map<size_t, size_t> last_of;  // group -> plan defined last
          for (size_t i : idxs) {
            auto [it2, fresh] = last_of.emplace(root(i), i);
            if (!fresh && plans[i].def->isAfter(plans[it2->second].def)) it2->second = i;
          }
          for (const auto& [g, i] : last_of) pick.insert(i);
        }
      }
      if (!pick.empty()) primary_plan[path] = pick;
    }
  }
  std::map<std::string, int64_t> outputs_seen;

  // Module-output taps: inner module first, chained; each use sees the tap of
  // the outermost module it lies outside of.
  for (size_t plan_i = 0; plan_i < plans.size(); ++plan_i) {
    Plan& p = plans[plan_i];
    std::vector<torch::jit::Use> uses(p.v->uses().begin(), p.v->uses().end());
    std::map<std::string, Value*> tapped;
    Node* after = p.def;
    Value* cur = p.v;
    std::vector<std::vector<int64_t>> ids;  // per module (inner -> outer): its sites for this value
    for (auto it = p.modules.rbegin(); it != p.modules.rend(); ++it) {
      auto pp = primary_plan.find(*it);
      const bool primary = pp == primary_plan.end() || pp->second.count(plan_i) > 0;
      if (is_tensor(cur)) {
        TapSite& site = new_tap(TapKind::kModuleOutput, *it);
        site.output_index = outputs_seen[*it]++;
        site.primary = primary;
        ids.push_back({site.id});
        cur = insert_tap_after(after, cur, site.id);
        after = cur->node();
      } else {
        // Tuple output: unpack, tap each tensor element with a site of its
        // own (an LSTM's (h_n, c_n) are two tensors, not one), pack again.
        // The first tensor is the primary one of a primary value.
        Node* un = graph_->create(c10::prim::TupleUnpack, {cur}, 0);
        for (const auto& et : cur->type()->cast<c10::TupleType>()->elements()) un->addOutput()->setType(et);
        un->insertAfter(after);
        after = un;
        std::vector<Value*> elems;
        ids.emplace_back();
        // An element the module passes through unchanged (a traced CLIP
        // residual block returns (x, attn_mask), the mask its own input) is
        // no output of the module: not measured as one (its -inf entries
        // are the caller's, eval14 case 05).
        Node* made = p.v->node();
        for (size_t k = 0; k < un->outputs().size(); ++k) {
          Value* e = un->outputs()[k];
          const bool passthrough = made->kind() == c10::prim::TupleConstruct && k < made->inputs().size() &&
                                   [&] {
                                     const Node* src = made->input(k)->node();
                                     if (src->kind() == c10::prim::Param) return true;
                                     const auto& ch = scopes.chain(src);
                                     return !inside(ch, *it);
                                   }();
          if (is_tensor(e) && !passthrough) {
            TapSite& site = new_tap(TapKind::kModuleOutput, *it);
            site.output_index = outputs_seen[*it]++;
            site.primary = primary && ids.back().empty();
            ids.back().push_back(site.id);
            e = insert_tap_after(after, e, site.id);
            after = e->node();
          }
          elems.push_back(e);
        }
        Node* pack = graph_->createTuple(elems);
        pack->output()->setType(cur->type());
        pack->insertAfter(after);
        after = pack;
        cur = pack->output();
      }
      tapped[*it] = cur;
    }
    for (const auto& u : uses) {
      if (!consumer_known(u.user)) continue;
      const auto& cc = consumer_chain(u.user);
      // A clamp with constant bounds reading the output directly.
      std::optional<std::pair<double, double>> bounds;
      {
        const std::string uk = u.user->kind().toQualString();
        const double inf = std::numeric_limits<double>::infinity();
        auto num = [&](size_t i) -> std::optional<double> {
          if (i >= u.user->inputs().size()) return std::nullopt;
          auto c = torch::jit::toIValue(u.user->input(i));
          if (c && c->isDouble()) return c->toDouble();
          if (c && c->isInt()) return static_cast<double>(c->toInt());
          return std::nullopt;
        };
        if (u.offset == 0 && (uk == "aten::clamp" || uk == "aten::clip" || uk == "aten::hardtanh")) {
          auto lo = num(1), hi = num(2);
          if (lo || hi) bounds = std::make_pair(lo.value_or(-inf), hi.value_or(inf));
        } else if (u.offset == 0 && uk == "aten::clamp_min") {
          if (auto lo = num(1)) bounds = std::make_pair(*lo, inf);
        } else if (u.offset == 0 && uk == "aten::clamp_max") {
          if (auto hi = num(1)) bounds = std::make_pair(-inf, *hi);
        }
      }
      for (const std::string& mod : p.modules) {  // outer -> inner
        if (!inside(cc, mod)) {
          u.user->replaceInput(u.offset, tapped[mod]);
          const auto& inner = cc.empty() ? std::string() : cc.back();
          for (int64_t id : ids[static_cast<size_t>(std::find(p.modules.rbegin(), p.modules.rend(), mod) - p.modules.rbegin())]) {
            auto& site = taps_[static_cast<size_t>(id)];
            if (std::find(site.consumers.begin(), site.consumers.end(), inner) == site.consumers.end())
              site.consumers.push_back(inner);
            if (bounds && site.primary) {
              site.clamped = true;
              site.clamp_lo = bounds->first;
              site.clamp_hi = bounds->second;
            }
          }
          break;
        }
      }
    }
  }

  // Root module: the tensors forward returns.
  {
    Node* ret = graph_->return_node();
    for (size_t i = 0; i < ret->inputs().size(); ++i) {
      Value* out = ret->input(i);
      std::vector<std::pair<Node*, size_t>> targets;
      if (is_tensor(out)) {
        targets.push_back({ret, i});
      } else if (out->node()->kind() == c10::prim::TupleConstruct || out->node()->kind() == c10::prim::ListConstruct ||
                 out->node()->kind() == c10::prim::DictConstruct) {
        for (size_t j = 0; j < out->node()->inputs().size(); ++j)
          if (is_tensor(out->node()->input(j))) targets.push_back({out->node(), j});
      }
      for (auto& [user, idx] : targets) {
        TapSite& site = new_tap(TapKind::kModuleOutput, "");
        site.output_index = outputs_seen[""]++;
        site.primary = site.output_index == 0;  // the first tensor forward returns
        Value* src = user->input(idx);
        Node* c = make_constant_int(*graph_, site.id);
        Node* t = graph_->create(kTap, {c->output(), src});
        t->output()->setType(src->type());
        c->insertBefore(user);
        t->insertBefore(user);
        user->replaceInput(idx, t->output());
      }
    }
  }

  // Inputs of modules (the targeted pass after a NaN; the norm layers of the
  // precision probe): tensors used inside a module's scope but defined outside it.
  std::vector<std::string> input_modules = opt.inputs_of;
  if (!opt.inspect_inputs_of.empty()) input_modules.push_back(opt.inspect_inputs_of);
  for (const std::string& target : input_modules) {
    std::map<Value*, std::vector<std::pair<Node*, size_t>>> inputs;
    std::vector<Node*> now;
    collect_nodes(graph_->block(), now);
    for (Node* n : now) {
      if (n->kind() == kTap || n->kind() == c10::prim::Constant) continue;
      if (!inside(scopes.chain(n), target)) continue;
      for (size_t i = 0; i < n->inputs().size(); ++i) {
        Value* v = n->input(i);
        if (!is_tensor(v) || v->node()->kind() == c10::prim::GetAttr || v->node()->kind() == c10::prim::Constant)
          continue;
        Node* d = v->node();
        const bool from_inside = d->kind() != c10::prim::Param && d->kind() != kTap && inside(scopes.chain(d), target);
        if (d->kind() == kTap) {
          // A tap of an inner module's output is inside; one of an outside module is not.
          const auto& site = taps_[static_cast<size_t>(torch::jit::toIValue(d->input(0))->toInt())];
          if (site.module == target ||
              site.module.rfind(target + ".", 0) == 0)
            continue;
        } else if (from_inside) {
          continue;
        }
        inputs[v].push_back({n, i});
      }
    }
    for (auto& [v, users] : inputs) {
      TapSite& site = new_tap(TapKind::kModuleInput, target);
      Node* first = users.front().first;
      Node* c = make_constant_int(*graph_, site.id);
      Node* t = graph_->create(kTap, {c->output(), v});
      t->output()->setType(v->type());
      c->insertBefore(first);
      t->insertBefore(first);
      for (auto& [n, i] : users)
        if (n == first || (n->owningBlock() == t->owningBlock() && n->isAfter(t))) n->replaceInput(i, t->output());
    }
  }

  // Op taps: the inputs of sigmoid / tanh / softmax.
  if (opt.op_taps) {
    // Whether an op's output is returned as the model's output, followed
    // through views, casts, taps and containers (and, for a sigmoid,
    // concatenation) to the graph's return.
    auto returned = [&](const Node* op, bool through_cat) {
      static const std::set<std::string> pass_through = {
          "aten::view", "aten::reshape", "aten::to", "aten::contiguous", "aten::squeeze", "aten::unsqueeze",
          "aten::transpose", "aten::permute", "aten::flatten", "aten::float", "aten::type_as", "aten::detach",
          "prim::TupleConstruct", "prim::ListConstruct", "prim::DictConstruct", "normdoctor::tap"};
      std::vector<const Value*> todo{op->output()};
      std::set<const Value*> seen;
      while (!todo.empty()) {
        const Value* v = todo.back();
        todo.pop_back();
        if (!seen.insert(v).second) continue;
        for (const auto& u : v->uses()) {
          if (u.user == graph_->return_node()) return true;
          const std::string uk = u.user->kind().toQualString();
          if (pass_through.count(uk) || (through_cat && (uk == "aten::cat" || uk == "aten::stack")))
            for (const Value* o : u.user->outputs()) todo.push_back(o);
        }
      }
      return false;
    };
    for (Node* n : op_nodes) {
      const auto k = n->kind();
      TapKind kind = (k == c10::aten::softmax) ? TapKind::kSoftmaxInput
                     : (k == c10::aten::sigmoid || k == c10::aten::sigmoid_) ? TapKind::kSigmoidInput
                     : (std::string(k.toQualString()) == "aten::batch_norm") ? TapKind::kBatchNormInput
                     : is_relu_family(n)                                      ? TapKind::kReluInput
                                                                               : TapKind::kTanhInput;
      const auto& chain = scopes.chain(n);
      TapSite& site = new_tap(kind, chain.empty() ? std::string() : chain.back());
      // A sigmoid returned as (part of) the model's output: a readout of
      // probabilities (YOLOv8's Detect: torch.cat((dbox, cls.sigmoid()), 1)
      // at export), which training replaces by logits into
      // BCE-with-logits; a prior bias of -11.5 there is its design (eval40
      // yolov8n got ACT004).
      if (kind == TapKind::kSigmoidInput) {
        site.to_output = returned(n, /*through_cat=*/true);
        // x * sigmoid(a * x): the tensor the sigmoid's input is a scaling of.
        auto base = [](Value* v) {
          for (int i = 0; i < 6; ++i) {
            Node* p = v->node();
            const std::string pk = p->kind().toQualString();
            if (pk == "aten::to" || pk == "aten::contiguous") {
              v = p->input(0);
              continue;
            }
            if (pk == "normdoctor::round" && p->inputs().size() == 4) {  // (id, dtype, inplace, value)
              v = p->input(3);
              continue;
            }
            if ((pk == "aten::mul" || pk == "aten::div") && p->inputs().size() >= 2) {
              if (scalar_operand(p->input(1))) {
                v = p->input(0);
                continue;
              }
              if (pk == "aten::mul" && scalar_operand(p->input(0))) {
                v = p->input(1);
                continue;
              }
            }
            break;
          }
          return v;
        };
        Value* x = base(n->input(0));
        std::vector<Value*> outs{n->output()};
        for (size_t i = 0; i < outs.size() && i < 4; ++i)
          for (const auto& u : outs[i]->uses()) {
            const std::string uk = u.user->kind().toQualString();
            if (uk == "normdoctor::round" && u.user->outputs().size() == 1) outs.push_back(u.user->output());
            if ((uk == "aten::mul" || uk == "aten::mul_") && u.user->inputs().size() >= 2 && u.offset < 2 &&
                base(u.user->input(1 - u.offset)) == x)
              site.self_gated = true;
          }
      }
      if (kind == TapKind::kReluInput) {
        // Through views and casts only: a sum or a scaling is computed in
        // the ReLU's own module, and its units are not the child's.
        static const std::set<std::string> as_is = {"aten::view", "aten::reshape", "aten::to", "aten::contiguous",
                                                    "aten::flatten", "aten::squeeze", "aten::unsqueeze", "aten::float",
                                                    "aten::type_as", "aten::clone"};
        const std::string from = producer_module(n->input(0), taps_, as_is);
        if (!from.empty() && from != site.module && (site.module.empty() || from.rfind(site.module + ".", 0) == 0))
          site.input_module = from;
      }
      if (kind == TapKind::kSoftmaxInput) {
        auto d = const_arg(n, 1);
        site.dim = (d && d->isInt()) ? d->toInt() : -1;
        // Returned as the model's output (a classifier's output layer).
        site.to_output = returned(n, /*through_cat=*/false);
        if (const Node* mm = attention_scores_product(n->input(0), 0)) {
          site.attention = true;
          site.scores_scaled = attention_scores_scaled(n->input(0), 0);
          // A softmax module of its own (vit-pytorch's self.attend =
          // nn.Softmax(dim=-1)) reads logits its parent computed: the site
          // is the module that holds both, where the scale is applied.
          const auto& mchain = scopes.chain(mm);
          size_t common = 0;
          while (common < chain.size() && common < mchain.size() && chain[common] == mchain[common]) ++common;
          if (common < chain.size()) site.module = common > 0 ? chain[common - 1] : std::string();
          // Heads of rank-3 scores: the owning module's num_heads.
          for (auto it = chain.rbegin(); it != chain.rend() && site.heads == 0; ++it) {
            auto mi = scopes.paths().find(*it);
            if (mi == scopes.paths().end()) continue;
            const torch::jit::Module& mod = model.modules[mi->second].module;
            for (const char* a : {"num_heads", "num_attention_heads", "n_heads", "nhead", "n_head", "heads"})
              if (mod.hasattr(a) && mod.attr(a).isInt()) {
                site.heads = mod.attr(a).toInt();
                break;
              }
          }
          // Masks between the score product and the softmax: a tap after
          // each records which entries it removes.
          for (const auto& mk : recognize::attention_masks(n->input(0))) {
            Value* out = mk.node->output();
            std::vector<torch::jit::Use> uses(out->uses().begin(), out->uses().end());
            Node* c = make_constant_int(*graph_, site.id);
            Node* b = make_constant_int(*graph_, mk.keep ? 2 : mk.boolean ? 1 : mk.subtracted ? 3 : 0);
            Node* t = graph_->create(kMaskTap, {c->output(), out, mk.operand, b->output()});
            t->output()->setType(out->type());
            c->insertAfter(mk.node);
            b->insertAfter(c);
            t->insertAfter(b);
            for (const auto& u : uses) u.user->replaceInput(u.offset, t->output());
            ++site.masks;
          }
          if (mm->inputs().size() >= 2 && std::string(mm->kind().toQualString()) != "aten::einsum") {
            site.attn_q = producer_module(mm->input(0), taps_);
            site.attn_k = producer_module(mm->input(1), taps_);
          }
          // The value: the other operand of the matmul that consumes the
          // probabilities (directly or after dropout).
          std::vector<const Value*> probs{n->output()};
          for (const auto& u : n->output()->uses())
            if (std::string(u.user->kind().toQualString()).find("dropout") != std::string::npos)
              probs.push_back(u.user->output());
          for (const Value* pv : probs)
            for (const auto& u : pv->uses()) {
              const std::string uk = u.user->kind().toQualString();
              if ((uk == "aten::matmul" || uk == "aten::bmm") && u.offset == 0 && site.attn_v.empty())
                site.attn_v = producer_module(u.user->input(1), taps_);
            }
        }
      }
      if (kind == TapKind::kBatchNormInput) bn_input_tap[n] = site.id;
      Value* x = n->input(0);
      Node* c = make_constant_int(*graph_, site.id);
      Node* t = graph_->create(kTap, {c->output(), x});
      t->output()->setType(x->type());
      c->insertBefore(n);
      t->insertBefore(n);
      n->replaceInput(0, t->output());
    }
  }

  // Attention through aten::scaled_dot_product_attention: a tap on the query
  // that computes the logits from (q, k, mask, is_causal, scale).
  if (opt.op_taps) {
    for (Node* n : sdpa_nodes) {
      if (n->inputs().size() < 3) continue;
      const auto& chain = scopes.chain(n);
      TapSite& site = new_tap(TapKind::kAttentionScores, chain.empty() ? std::string() : chain.back());
      site.attention = true;
      site.scores_scaled = true;  // scaled_dot_product_attention scales by 1/sqrt(d) unless given another scale
      site.attn_q = producer_module(n->input(0), taps_);
      site.attn_k = producer_module(n->input(1), taps_);
      site.attn_v = producer_module(n->input(2), taps_);
      torch::jit::WithInsertPoint guard(n);
      Value* id = graph_->insertConstant(site.id);
      Value* mask = n->inputs().size() > 3 ? n->input(3) : graph_->insertConstant(c10::IValue());
      Value* causal = n->inputs().size() > 5 ? n->input(5) : graph_->insertConstant(false);
      Value* scale = n->inputs().size() > 6 ? n->input(6) : graph_->insertConstant(c10::IValue());
      Node* t = graph_->create(kAttnTap, {id, n->input(0), n->input(1), mask, causal, scale});
      t->output()->setType(n->input(0)->type());
      t->insertBefore(n);
      n->replaceInput(0, t->output());
    }
  }

  // Normalization sites: the op's input is tapped (batch_norm's already is).
  // A value that is a forward argument (not self) after shape and dtype ops only.
  auto of_model_input = [&](Value* v) {
    static const std::set<std::string> kShapeOps = {
        "aten::view", "aten::reshape", "aten::transpose", "aten::permute", "aten::contiguous", "aten::to",
        "aten::type_as", "aten::float", "aten::unsqueeze", "aten::squeeze", "aten::flatten", "aten::clone",
        "aten::detach", "aten::movedim", "aten::swapaxes", "aten::t", "aten::expand_as", "aten::expand"};
    for (int step = 0; v && step < 32; ++step) {
      v = untapped(v);
      Node* n = v->node();
      if (n->kind() == c10::prim::Param) return v != graph_->inputs()[0];
      // The input minus its own mean (Time-Series-Library's forecasters:
      // means = x_enc.mean(1, keepdim=True).detach(); x_enc = x_enc - means,
      // then divided by the std of that): still the input, centred.
      if (n->kind().toQualString() == std::string("aten::sub") && n->inputs().size() >= 2) {
        Node* m = n->input(1)->node();
        for (int k = 0; k < 4 && kShapeOps.count(m->kind().toQualString()) && !m->inputs().empty(); ++k)
          m = m->input(0)->node();
        if (m->kind().toQualString() == std::string("aten::mean") && !m->inputs().empty() &&
            untapped(m->input(0)) == untapped(n->input(0))) {
          v = n->input(0);
          continue;
        }
      }
      if (!kShapeOps.count(n->kind().toQualString()) || n->inputs().empty()) return false;
      v = n->input(0);
    }
    return false;
  };
  // A value computed by a convolution, after shape ops only.
  auto after_convolution = [&](Value* v) {
    static const std::set<std::string> kConv = {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution", "aten::_convolution_mode",
                                                "aten::convolution", "aten::conv_transpose1d"};
    static const std::set<std::string> kShape = {"aten::view", "aten::reshape", "aten::transpose", "aten::permute",
                                                 "aten::contiguous", "aten::to", "aten::squeeze", "aten::unsqueeze"};
    for (int step = 0; v && step < 16; ++step) {
      v = untapped(v);
      Node* n = v->node();
      const std::string k = n->kind().toQualString();
      if (kConv.count(k)) return true;
      if (!kShape.count(k) || n->inputs().empty()) return false;
      v = n->input(0);
    }
    return false;
  };
  // The nearest dropout before a value with no normalization between
  // (breadth first, at most 48 nodes): variance shift before a BatchNorm.
  auto dropout_before = [&](Value* v0, std::string& module, double& p) {
    static const std::set<std::string> kNorm = {"aten::batch_norm", "aten::layer_norm", "aten::group_norm",
                                                "aten::instance_norm", "aten::rms_norm"};
    static const std::set<std::string> kFirst = {
        "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution", "aten::_convolution_mode", "aten::convolution", "aten::linear",
        "aten::matmul", "aten::relu", "aten::relu_", "aten::gelu", "aten::silu", "aten::silu_", "aten::elu",
        "aten::leaky_relu", "aten::leaky_relu_", "aten::hardtanh", "aten::hardtanh_", "aten::relu6",
        "aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d", "aten::avg_pool1d", "aten::avg_pool2d",
        "aten::avg_pool3d", "aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_max_pool2d",
        "aten::view", "aten::reshape", "aten::transpose", "aten::permute", "aten::contiguous", "aten::to",
        "aten::flatten", "aten::squeeze", "aten::unsqueeze", "aten::clone", "aten::pad", "aten::constant_pad_nd",
        "aten::mul", "aten::div", "aten::upsample_nearest2d"};
    static const std::set<std::string> kBoth = {"aten::add", "aten::add_", "aten::sub"};
    std::deque<Value*> work = {v0};
    std::set<const Value*> seen;
    for (int visited = 0; !work.empty() && visited < 48; ++visited) {
      Value* v = untapped(work.front());
      work.pop_front();
      if (!v || !seen.insert(v).second) continue;
      Node* n = v->node();
      const std::string k = n->kind().toQualString();
      if (kNorm.count(k)) continue;
      if (is_dropout_op(k)) {
        if (n->inputs().size() > 1)
          if (auto c = torch::jit::toIValue(n->input(1)); c && (c->isDouble() || c->isInt()) && c->toDouble() > 0) {
            p = c->toDouble();
            module = innermost_module(n);
            return true;
          }
        if (!n->inputs().empty()) work.push_back(n->input(0));
        continue;
      }
      if (kFirst.count(k) && !n->inputs().empty()) work.push_back(n->input(0));
      if (kBoth.count(k))
        for (size_t i = 0; i < 2 && i < n->inputs().size(); ++i)
          if (n->input(i)->type()->cast<c10::TensorType>()) work.push_back(n->input(i));
    }
    return false;
  };
  for (const auto& nn : norm_sites) {
    NormOpSite site;
    site.module = nn.module;
    site.op = nn.op;
    site.args = nn.args;
    site.of_model_input = nn.input && of_model_input(nn.input);
    site.after_convolution = nn.input && after_convolution(nn.input);
    if (nn.input && (nn.op == "batch_norm" || nn.op == "batch_norm_pattern"))
      dropout_before(nn.input, site.dropout_upstream, site.dropout_upstream_p);
    site.input_roles = roles_of(nn.input);
    if (nn.view_source) site.source_roles = roles_of(nn.view_source);
    auto bn = bn_input_tap.find(nn.node);
    // A tap before node `n` on its input `x` (every use of x by n).
    auto tap_before = [&](Node* n, Value* x0, TapKind kind, Value* ints) -> int64_t {
      // The input of n that is x0, possibly wrapped in taps inserted since.
      Value* x = x0;
      for (Value* in : n->inputs()) {
        Value* w = in;
        while (w != x0 && (w->node()->kind() == kTap || w->node()->kind() == kNormTap) && w->node()->inputs().size() >= 2)
          w = w->node()->input(1);
        if (w == x0) {
          x = in;
          break;
        }
      }
      TapSite& t = new_tap(kind, nn.module);
      const int64_t id = t.id;
      Node* c = make_constant_int(*graph_, id);
      Node* tn = ints ? graph_->create(kNormTap, {c->output(), x, ints}) : graph_->create(kTap, {c->output(), x});
      tn->output()->setType(x->type());
      c->insertBefore(n);
      tn->insertBefore(n);
      for (size_t i = 0; i < n->inputs().size(); ++i)
        if (n->input(i) == x) n->replaceInput(i, tn->output());
      return id;
    };
    if (bn != bn_input_tap.end()) {
      site.input_tap = bn->second;
    } else if (nn.op == "frozen_batch_norm") {
      // Per-channel statistics of its input, as for batch_norm, when the
      // buffers' reshape puts channels on axis 1.
      const bool ch1 = nn.args.value("channel_axis", nlohmann::json(-1)) == 1;
      site.input_tap = tap_before(nn.node, nn.input, ch1 ? TapKind::kBatchNormInput : TapKind::kNormInput, nullptr);
    } else if (nn.op != "batch_norm") {
      // layer_norm / rms_norm whose normalized_shape is computed at run time:
      // the tap records the list the op receives.
      Value* ints = nullptr;
      if ((nn.op == "layer_norm" || nn.op == "rms_norm") && !nn.args.value("normalized_shape", nlohmann::json()).is_array() &&
          nn.node->inputs().size() > 1 && nn.node->input(1)->type()->kind() == c10::TypeKind::ListType)
        ints = nn.node->input(1);
      site.input_tap = tap_before(nn.node, nn.input, TapKind::kNormInput, ints);
      if (nn.view_source && nn.view_node) site.source_tap = tap_before(nn.view_node, nn.view_source, TapKind::kNormInput, nullptr);
      // Dims filled at run time (RevIN's dim2reduce built by a loop): a tap
      // on the reduction's input records the list the reduction receives.
      if (nn.reduce && nn.reduce_dims && is_tensor(nn.reduce->input(0))) {
        auto lt = nn.reduce_dims->type()->cast<c10::ListType>();
        if (lt && lt->getElementType()->kind() == c10::TypeKind::IntType)
          site.dims_tap = tap_before(nn.reduce, nn.reduce->input(0), TapKind::kNormInput, nn.reduce_dims);
      }
    }
    norm_ops_.push_back(std::move(site));
  }

  // Residual additions: the stream entering and the sum leaving.
  for (const auto& r : residual_sites) {
    ResidualSite site;
    site.module = r.module;
    site.block = r.block;
    site.stack = r.stack;
    site.placement = r.placement;
    site.branch_normalized = r.branch_normalized;
    // The factor a number (a constant or a module attribute) multiplies by,
    // or divides by when `divides`; NaN when it is not known before running.
    auto factor_of = [&](Value* f, bool divides) {
      std::optional<double> v = structure::const_number(f);
      if (!v && f->node()->kind() == c10::prim::GetAttr) v = attr_double(f);
      return !v ? std::nan("") : divides ? (*v != 0 ? 1.0 / *v : std::nan("")) : *v;
    };
    if (r.stream_scale) site.stream_scale = factor_of(r.stream_scale, r.scale_divides);
    if (r.branch_scale) site.branch_scale = factor_of(r.branch_scale, r.branch_divides);
    if (r.sum_scale) site.sum_scale = factor_of(r.sum_scale, r.sum_divides);
    site.norm_module = r.norm_module;
    Node* add = r.add;
    // A kResidualStream tap on operand `i` of the addition; its id.
    auto tap_operand = [&](size_t i) {
      TapSite& t = new_tap(TapKind::kResidualStream, r.module);
      Value* x = add->input(i);
      Node* c = make_constant_int(*graph_, t.id);
      Node* tn = graph_->create(kTap, {c->output(), x});
      tn->output()->setType(x->type());
      c->insertBefore(add);
      tn->insertBefore(add);
      add->replaceInput(i, tn->output());
      return t.id;
    };
    site.in_tap = tap_operand(r.stream_index);
    // The branch itself: what the block adds, measured rather than inferred
    // from the two stream norms (sqrt(out^2 - in^2) is 0 when a branch
    // shrinks the stream a little: eval13 case 08).
    if (add->inputs().size() >= 2 && r.stream_index < 2 && is_tensor(add->input(1 - r.stream_index)))
      site.branch_tap = tap_operand(1 - r.stream_index);
    {
      TapSite& t = new_tap(TapKind::kResidualStream, r.module);
      site.out_tap = t.id;
      Value* out = add->output();
      std::vector<torch::jit::Use> uses(out->uses().begin(), out->uses().end());
      Value* tapped = insert_tap_after(add, out, t.id);
      for (const auto& u : uses) u.user->replaceInput(u.offset, tapped);
    }
    residuals_.push_back(std::move(site));
  }
  final_norm_.status = final_norm.status;
  final_norm_.norm_module = final_norm.norm_module;
  final_norm_.head_module = final_norm.head_module;
  final_norm_.stack = final_norm.stack;

  // Tensor factories whose sizes a trace recorded as constants.
  if (model.kind == "traced") {
    static const std::set<std::string> factories = {"aten::arange", "aten::ones", "aten::zeros", "aten::full",
                                                    "aten::empty", "aten::eye", "aten::linspace",
                                                    "aten::tril_indices", "aten::triu_indices",
                                                    // A trace records Tensor.stride() as constants, so
                                                    // as_strided's strides are the traced layout's
                                                    // (HF Longformer's _chunk: [16, 1024, 256, 1] at 16
                                                    // tokens); its sizes may still be traced.
                                                    "aten::as_strided",
                                                    // Split sizes a trace records from .tolist() of a
                                                    // tensor (a mixture-of-experts dispatch's
                                                    // expert_size.tolist(): HF JetMoe, eval46).
                                                    "aten::split_with_sizes", "aten::split"};
    for (Node* n : nodes) {
      const std::string kq = n->kind().toQualString();
      if (!factories.count(kq)) continue;
      ConstantFactory f;
      f.op = kq;
      bool all_constant = true;
      std::ostringstream text;
      text << kq << "(";
      bool first = true;
      // Only the size arguments (not dtype, layout or device, which a trace
      // records as ints too).
      static const std::set<std::string> size_args = {"start", "end", "step", "size", "n", "m", "row", "col", "offset",
                                                      "steps", "fill_value", "split_sizes", "split_size"};
      const c10::FunctionSchema* schema = n->maybeSchema();
      if (!schema) continue;
      const bool strides_only = kq == "aten::as_strided";
      for (size_t ai = 0; ai < n->inputs().size() && ai < schema->arguments().size(); ++ai) {
        Value* v = n->input(ai);
        if (strides_only ? schema->arguments()[ai].name() != "stride" : !size_args.count(schema->arguments()[ai].name()))
          continue;
        const bool fill = schema->arguments()[ai].name() == "fill_value";
        const auto& ty = v->type();
        const bool is_int = ty->kind() == c10::TypeKind::IntType;
        const bool is_list = ty->kind() == c10::TypeKind::ListType &&
                             ty->expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::IntType;
        const bool is_num = is_int || ty->kind() == c10::TypeKind::FloatType || ty->kind() == c10::TypeKind::NumberType;
        if (!is_num && !is_list) continue;
        auto c = torch::jit::toIValue(v);
        // A list of constants the graph builds at run time.
        if (!c && is_list)
          if (auto l = structure::const_int_list(v)) c = c10::IValue(*l);
        if (!c) {
          all_constant = false;
          break;
        }
        text << (first ? "" : ", ");
        first = false;
        if (fill) {
          if (c->isInt()) text << c->toInt();
          else if (c->isDouble()) text << c->toDouble();
          else text << "?";
        } else if (c->isInt()) {
          f.ints.push_back(c->toInt());
          text << c->toInt();
        } else if (c->isIntList()) {
          text << "[";
          const auto l = c->toIntVector();
          for (size_t i = 0; i < l.size(); ++i) {
            f.ints.push_back(l[i]);
            text << (i ? ", " : "") << l[i];
          }
          text << "]";
        } else if (c->isDouble()) {
          const double d = c->toDouble();
          if (d == std::floor(d) && std::fabs(d) < 1e15) f.ints.push_back(static_cast<int64_t>(d));
          text << d;
        }
      }
      text << ")";
      if (!all_constant || f.ints.empty()) continue;
      // A range that only scales into an exponent (exp(arange(half) *
      // -log(10000) / half), 10000 ** (arange(0, d, 2) / d)) indexes the
      // frequencies of a sinusoidal embedding: its size is half the
      // embedding width, never a length (diffusers' get_timestep_embedding
      // in CogView3Plus, arange(0, 8) beside an 8-token prompt, eval42).
      if (kq == "aten::arange") {
        std::vector<const Value*> todo{n->output()};
        for (size_t i = 0; i < todo.size() && i < 32 && !f.frequency_index; ++i)
          for (const auto& u : todo[i]->uses()) {
            const std::string uk = u.user->kind().toQualString();
            if (uk == "aten::exp" || (uk == "aten::pow" && u.offset == 1)) {
              f.frequency_index = true;
              break;
            }
            // normdoctor's own rounding and taps pass the tensor on.
            if (uk.rfind("normdoctor::", 0) == 0 && u.user->outputs().size() == 1) {
              todo.push_back(u.user->output());
              continue;
            }
            if ((uk == "aten::mul" || uk == "aten::div" || uk == "aten::add" || uk == "aten::sub" || uk == "aten::to" ||
                 uk == "aten::float" || uk == "aten::neg" || uk == "aten::pow") &&
                u.user->outputs().size() == 1) {
              // Only scaled by scalars (a constant, a number): a product
              // with another tensor (positions * inv_freq) ends the walk.
              bool scalar_other = true;
              for (const Value* in : u.user->inputs())
                if (in != todo[i] && !scalar_operand(in)) scalar_other = false;
              if (scalar_other) todo.push_back(u.user->output());
            }
          }
      }
      if ((kq == "aten::split_with_sizes" || kq == "aten::split") && !n->inputs().empty() && is_tensor(n->input(0))) {
        std::unordered_map<const Value*, bool> memo;
        const bool data = !recognize::param_only(n->input(0), memo);
        // The split axis: schema argument "dim"; the last axis (-1, or
        // rank - 1 where the trace recorded the rank) splits features.
        std::optional<int64_t> dim;
        for (size_t ai = 0; ai < n->inputs().size() && ai < schema->arguments().size(); ++ai)
          if (schema->arguments()[ai].name() == "dim")
            if (auto c = torch::jit::toIValue(n->input(ai)); c && c->isInt()) dim = c->toInt();
        std::optional<size_t> rank;
        if (auto tt = n->input(0)->type()->cast<c10::TensorType>())
          if (auto d = tt->dim()) rank = *d;  // c10::optional in LibTorch 1.13
        const bool last_axis = dim && (*dim == -1 || (rank && *dim == static_cast<int64_t>(*rank) - 1));
        f.splits_activations = data && dim && !last_axis;
      }
      f.module = innermost_module(n);
      f.text = text.str();
      constant_factories_.push_back(std::move(f));
    }
  }

  // Mask constants beyond the fp16 range: the scalar a masked_fill, where,
  // full or mask arithmetic writes at masked positions (QANet's
  // mask_logits: target * mask + (1 - mask) * -1e30; HF's
  // torch.finfo(float32).min). An output whose largest magnitude is one of
  // them holds the mask, not an overflowing activation (eval40 qanet_eval).
  {
    static const std::set<std::string> writers = {"aten::masked_fill", "aten::masked_fill_", "aten::where",
                                                  "aten::full", "aten::full_like", "aten::new_full", "aten::fill_",
                                                  "aten::mul", "aten::add", "aten::sub", "aten::rsub"};
    std::vector<Node*> all;
    collect_nodes(graph_->block(), all);
    for (Node* n : all) {
      if (!writers.count(n->kind().toQualString())) continue;
      for (Value* in : n->inputs()) {
        auto c = torch::jit::toIValue(in);
        if (!c || !(c->isDouble() || c->isInt())) continue;
        const double v = c->isDouble() ? c->toDouble() : static_cast<double>(c->toInt());
        if (std::isfinite(v) && std::fabs(v) > 65504.0 &&
            std::find(mask_constants_.begin(), mask_constants_.end(), v) == mask_constants_.end())
          mask_constants_.push_back(v);
      }
    }
  }

  // SDPA dropout that eval() cannot switch off: dropout_p a constant above 0
  // (scripted code passing a number, or a trace that recorded one) or a
  // module attribute read directly, not through `if self.training`.
  // SDPA's dropout_p through normdoctor::dropout_p(kind, p): 0 in a pass
  // run without dropout (flag kinds as flag_impl's).
  auto switch_dropout_p = [&](Node* n, int64_t kind) {
    Node* k = make_constant_int(*graph_, kind);
    Node* f = graph_->create(kDropoutP, {k->output(), n->input(4)});
    f->output()->setType(c10::FloatType::get());
    k->insertBefore(n);
    f->insertBefore(n);
    n->replaceInput(4, f->output());
  };
  for (Node* n : sdpa_nodes) {
    if (n->inputs().size() < 5) continue;
    Value* p = n->input(4);
    std::optional<double> v;
    if (auto c = torch::jit::toIValue(p); c && (c->isDouble() || c->isInt())) v = c->toDouble();
    else if (p->node()->kind() == c10::prim::GetAttr)
      if (auto a = scopes.attribute(p); a && (a->isDouble() || a->isInt())) v = a->toDouble();
    if (!v && p->type()->kind() == c10::TypeKind::FloatType) {
      // A probability the model computes from its mode (nn.MultiheadAttention
      // through F.multi_head_attention_forward: `if not training: dropout_p =
      // 0.0`): it follows the mode already, and a pass run without dropout
      // sets it to 0 like aten::dropout's flag (flag kind 2). Left as it was,
      // the train-mode padding comparison saw the attention dropout draw a
      // new mask at the new length (eval38 C04: SEQ004 at self_attn).
      switch_dropout_p(n, 2);
      continue;
    }
    if (!v || !(*v > 0)) continue;
    // A trace recorded the probability its module chose in the tracing
    // mode: a baked training flag (MODE002), which the passes switch with
    // their mode like aten::dropout's, not code that ignores eval().
    if ((model.kind == "traced" || model.kind == "exported") && p->node()->kind() == c10::prim::Constant) {
      dropout_nodes_++;
      baked_dropout_++;
      baked_values_.push_back(true);
      ModeOpSite mo;
      mo.module = innermost_module(n);
      mo.op = "dropout";
      mo.baked = true;
      mo.baked_value = true;
      mo.constant = true;
      mo.constant_value = true;
      mode_ops_.push_back(std::move(mo));
      switch_dropout_p(n, 1);
      continue;
    }
    const auto& chain = scopes.chain(n);
    std::ostringstream what;
    what << "scaled_dot_product_attention with dropout_p=" << *v
         << (p->node()->kind() == c10::prim::GetAttr ? " (self." + p->node()->s(c10::attr::name) + ")" : std::string())
         << " whatever the mode";
    unswitched_random_.push_back({chain.empty() ? std::string() : chain.back(), what.str()});
  }

  // Random ops a trace recorded (torch.rand of a drop path, stochastic depth
  // or LayerDrop written `if self.training:`; a sampling step): a traced
  // file runs every op it recorded, whatever the mode, and nothing in the
  // graph switches them (eval32: HF Swin traced in train mode). Named for
  // MODE004 as the random source, in graph order.
  // Gaussian draws are samples, not masks: a VAE's reparameterization
  // (mean + std * randn_like, diffusers' DiagonalGaussianDistribution),
  // noise injection; they draw in every mode of a scripted file too unless
  // an `if self.training:` (or a condition built from it) encloses them
  // (eval35 D03 read a VAE's posterior sample as a drop path; eval47 bbb:
  // Bayes-by-Backprop's weight sample w = mu + softplus(rho) * randn_like
  // scripted got MODE004 and a dropout fix, its trace MODE009), so a
  // scripted file's unguarded Gaussian draws are listed as samples too.
  const bool traced = model.kind == "traced" || model.kind == "exported";
  if (traced || model.kind == "scripted") {
    static const std::set<std::string> random_ops = {
        "aten::rand",     "aten::rand_like", "aten::randn",      "aten::randn_like", "aten::bernoulli",
        "aten::bernoulli_", "aten::randint", "aten::randint_like", "aten::randperm",  "aten::multinomial",
        "aten::normal",   "aten::normal_",   "aten::uniform_",   "aten::exponential_"};
    static const std::set<std::string> gaussian_ops = {"aten::randn", "aten::randn_like", "aten::normal",
                                                       "aten::normal_"};
    // Whether `v` is computed from a module's `training` attribute.
    auto from_training = [](Value* v) {
      std::vector<Value*> todo{v};
      for (size_t i = 0; i < todo.size() && i < 16; ++i) {
        Node* p = todo[i]->node();
        if (p->kind() == c10::prim::GetAttr && p->s(c10::attr::name) == "training") return true;
        if (p->kind() == c10::prim::GetAttr || p->kind() == c10::prim::Param) continue;
        for (Value* in : p->inputs()) todo.push_back(in);
      }
      return false;
    };
    std::vector<Node*> all;
    collect_nodes(graph_->block(), all);
    for (Node* n : all) {
      const std::string k = n->kind().toQualString();
      const bool gaussian = gaussian_ops.count(k) > 0;
      if (traced ? !random_ops.count(k) : !gaussian) continue;
      if (!traced) {
        bool guarded = false;
        for (const torch::jit::Block* b = n->owningBlock(); b && b->owningNode() && !guarded;
             b = b->owningNode()->owningBlock()) {
          const Node* owner = b->owningNode();
          if (owner->kind() == c10::prim::If && !owner->inputs().empty() && from_training(owner->input(0))) guarded = true;
        }
        if (guarded) continue;
      }
      const auto& chain = scopes.chain(n);
      unswitched_random_.push_back(
          {chain.empty() ? std::string() : chain.back(),
           !traced ? k + " in the scripted forward, under no `if self.training:`: a Gaussian sample drawn in every "
                         "mode (a Bayesian layer's weight sample mu + sigma * eps, a VAE's reparameterization, noise "
                         "injection)"
           : gaussian ? k + " recorded by the trace: a Gaussian sample drawn in every mode (a VAE's reparameterization "
                            "mean + std * eps, noise injection)"
                      : k + " recorded by the trace (a drop path, stochastic depth or LayerDrop traced "
                            "in train mode runs in every mode)"});
      traced_random_ops_++;
      if (gaussian) gaussian_random_ops_++;
    }
  }

  // Mode flags: constants baked in by tracing follow the pass's mode; dropout
  // can be switched off for a pass.
  for (Node* n : flag_nodes) {
    const bool bn = std::string(n->kind().toQualString()) == "aten::batch_norm";
    // The dropout probability and the training flag: dropout(input, p,
    // train); an nn.LSTM/GRU/RNN op's dropout between its stacked layers
    // (lstm(input, hx, params, has_biases, num_layers, dropout, train, ...),
    // its packed overload one argument later), whose `train` flag does
    // nothing else.
    size_t p_idx = 1, idx = bn ? 5 : 2;
    if (!bn && n->maybeSchema()) {
      const auto& args = n->schema().arguments();
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i].name() == "dropout" || args[i].name() == "p") p_idx = i;
        if (args[i].name() == "train") idx = i;
      }
    }
    // A dropout with a constant p of 0 is the identity in both modes (HF
    // configs' attention_dropout=0.0, diffusers' dropout=0.0, a one-layer
    // LSTM): it is no mode-dependent op, and counting it would make train()
    // look meaningful.
    if (!bn && n->inputs().size() > p_idx) {
      auto p = torch::jit::toIValue(n->input(p_idx));
      if (p && (p->isDouble() || p->isInt()) && p->toDouble() == 0.0) continue;
    }
    (bn ? bn_nodes_ : dropout_nodes_)++;
    if (idx >= n->inputs().size()) continue;
    Value* orig = n->input(idx);
    auto c = torch::jit::toIValue(orig);
    // A constant flag in a traced graph is the mode at tracing time. In a
    // scripted model it is the author's code (F.dropout(x, training=True),
    // BatchNorm without running stats): left alone.
    const bool baked = (model.kind == "traced" || model.kind == "exported") && c.has_value() && c->isBool();
    if (baked) {
      (bn ? baked_bn_ : baked_dropout_)++;
      baked_values_.push_back(c->toBool());
    }
    {
      ModeOpSite mo;
      mo.module = innermost_module(n);
      mo.op = bn ? "batch_norm" : "dropout";
      mo.baked = baked;
      mo.baked_value = baked && c->toBool();
      mo.constant = c.has_value() && c->isBool();
      mo.constant_value = mo.constant && c->toBool();
      mo.follows_mode = !mo.constant && orig->node()->kind() == c10::prim::GetAttr &&
                        orig->node()->s(c10::attr::name) == "training";
      mode_ops_.push_back(std::move(mo));
    }
    if (bn && !baked) continue;
    const int64_t kind = bn ? 0 : (baked ? 1 : 2);
    Node* k = make_constant_int(*graph_, kind);
    Node* f = graph_->create(kFlag, {k->output(), orig});
    f->output()->setType(c10::BoolType::get());
    k->insertBefore(n);
    f->insertBefore(n);
    n->replaceInput(idx, f->output());
  }

  // Precision emulation: every op's float output rounded to the format.
  if (opt.round_ops != at::ScalarType::Undefined) {
    static const std::set<std::string> kViews = {
        "aten::view", "aten::reshape", "aten::transpose", "aten::permute", "aten::select", "aten::slice",
        "aten::expand", "aten::expand_as", "aten::unsqueeze", "aten::squeeze", "aten::flatten", "aten::contiguous",
        "aten::t", "aten::narrow", "aten::detach", "aten::alias", "aten::unflatten", "aten::view_as",
        "aten::reshape_as", "aten::numpy_T", "aten::unfold", "aten::as_strided", "aten::to", "aten::type_as",
        "aten::clone", "aten::dropout", "aten::identity", "aten::size", "aten::dim", "aten::__getitem__"};
    std::vector<Node*> now;
    collect_nodes(graph_->block(), now);
    const std::set<const Node*> statistic = norm_statistic_nodes(now);
    // Regions the model computes in fp32 on purpose: values after an
    // explicit upcast (x.to(torch.float32), x.float()) and everything
    // computed from them (type promotion) until a cast back. Not rounded.
    // (Under autocast emulation the dtype of every value is in_format's,
    // below: no such region.)
    std::set<const Value*> fp32;
    for (Node* n : opt.round_autocast ? std::vector<Node*>() : now) {
      const std::string k = n->kind().toQualString();
      if (k == "aten::float" || k == "aten::double") {
        for (Value* o : n->outputs()) fp32.insert(o);
        continue;
      }
      if (k == "aten::to" || k == "aten::type_as") {
        bool up = false;
        if (k == "aten::to")
          for (size_t i = 1; i < n->inputs().size() && i < 3; ++i) {
            auto c = torch::jit::toIValue(n->input(i));
            if (c && c->isInt() && (c->toInt() == static_cast<int64_t>(at::kFloat) || c->toInt() == static_cast<int64_t>(at::kDouble)))
              up = true;
          }
        if (up)
          for (Value* o : n->outputs()) fp32.insert(o);
        continue;
      }
      bool any = false;
      for (Value* in : n->inputs()) any = any || fp32.count(in) > 0;
      if (any)
        for (Value* o : n->outputs()) fp32.insert(o);
    }
    // Values computed from constants alone (no model input, parameter or
    // buffer in their cone: rotary frequencies `base ** (arange(0, d, 2,
    // dtype=torch.float) / d)`, position tables, masks before they meet the
    // data). Tensors the model creates are float32 unless it asks otherwise,
    // and a traced graph bakes `dtype=x.dtype` as float32 anyway, so the
    // format of such a computation is not the model's: not rounded. Where it
    // meets the data (the mask added to the scores) the result is rounded.
    std::set<const Value*> constant_only;
    for (Node* n : now) {
      if (n->kind() == c10::prim::Param || !n->blocks().empty()) continue;
      bool all = true;
      for (Value* in : n->inputs()) all = all && constant_only.count(in) > 0;
      if (all || n->kind() == c10::prim::Constant)
        for (Value* o : n->outputs()) constant_only.insert(o);
    }
    // torch.autocast: which values are in the format. Parameters, buffers
    // and forward's arguments are fp32; a matrix product or convolution
    // casts its inputs to the format; an op on autocast's fp32 list
    // computes in fp32; any other op runs in its inputs' widest type (an
    // fp32 operand makes it fp32). Casts say their own dtype. Two sweeps: a
    // block's outputs come after its if or loop in the walk.
    std::set<const Value*> in_format;
    if (opt.round_autocast) {
      static const std::set<std::string> lower = {
          "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution", "aten::_convolution_mode",
          "aten::convolution", "aten::conv_tbc", "aten::conv_transpose1d", "aten::conv_transpose2d",
          "aten::conv_transpose3d", "aten::prelu", "aten::addmm", "aten::addmv", "aten::addr", "aten::matmul",
          "aten::einsum", "aten::mm", "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm", "aten::bmm",
          "aten::chain_matmul", "aten::linalg_multi_dot", "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell",
          "aten::rnn_relu_cell", "aten::scaled_dot_product_attention", "aten::lstm", "aten::gru", "aten::rnn_tanh",
          "aten::rnn_relu", "aten::_native_multi_head_attention"};
      static const std::set<std::string> fp32_ops = {
          "aten::acos", "aten::asin", "aten::cosh", "aten::erfinv", "aten::exp", "aten::expm1", "aten::log",
          "aten::log10", "aten::log2", "aten::log1p", "aten::reciprocal", "aten::rsqrt", "aten::sinh", "aten::tan",
          "aten::pow", "aten::softplus", "aten::layer_norm", "aten::native_layer_norm", "aten::group_norm",
          "aten::norm", "aten::frobenius_norm", "aten::nuclear_norm", "aten::linalg_vector_norm",
          "aten::cosine_similarity", "aten::poisson_nll_loss", "aten::cosine_embedding_loss", "aten::nll_loss",
          "aten::nll_loss2d", "aten::hinge_embedding_loss", "aten::kl_div", "aten::l1_loss", "aten::smooth_l1_loss",
          "aten::huber_loss", "aten::mse_loss", "aten::margin_ranking_loss", "aten::multilabel_margin_loss",
          "aten::soft_margin_loss", "aten::triplet_margin_loss", "aten::multi_margin_loss",
          "aten::binary_cross_entropy_with_logits", "aten::dist", "aten::pdist", "aten::cdist", "aten::renorm",
          "aten::logsumexp", "aten::prod", "aten::cumprod", "aten::cumsum", "aten::sum", "aten::softmax",
          "aten::log_softmax", "aten::cross_entropy_loss", "aten::rms_norm"};
      // Ops whose output has their first input's dtype whatever the others
      // (a bool mask, integer indices, fp32 weights of a batch_norm, which
      // cuDNN applies to an input in the format).
      static const std::set<std::string> first_input_dtype = {
          "aten::masked_fill", "aten::masked_fill_", "aten::gather", "aten::index_select", "aten::index",
          "aten::scatter", "aten::scatter_", "aten::scatter_add", "aten::index_put", "aten::index_put_", "aten::roll",
          "aten::pad", "aten::constant_pad_nd", "aten::repeat", "aten::repeat_interleave", "aten::tril", "aten::triu",
          "aten::flip", "aten::batch_norm", "aten::instance_norm", "aten::_batch_norm_impl_index",
          "aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d", "aten::avg_pool1d", "aten::avg_pool2d",
          "aten::avg_pool3d", "aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
          "aten::adaptive_max_pool1d", "aten::adaptive_max_pool2d", "aten::upsample_nearest1d",
          "aten::upsample_nearest2d", "aten::upsample_bilinear2d", "aten::upsample_linear1d", "aten::interpolate",
          "aten::pixel_shuffle", "aten::pixel_unshuffle", "aten::channel_shuffle", "aten::dropout", "aten::dropout_",
          "aten::feature_dropout", "aten::unfold", "aten::im2col", "aten::col2im", "aten::clamp", "aten::clamp_",
          "aten::clamp_min", "aten::clamp_max", "aten::new_zeros", "aten::new_ones", "aten::new_full",
          "aten::zeros_like", "aten::ones_like", "aten::full_like", "aten::empty_like", "aten::rand_like",
          "aten::randn_like", "aten::masked_scatter", "aten::take_along_dim", "aten::sort", "aten::topk"};
      // Values that are never floating: comparisons, logical ops, indices.
      static const std::set<std::string> not_float = {
          "aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge", "aten::logical_not",
          "aten::logical_and", "aten::logical_or", "aten::logical_xor", "aten::__and__", "aten::__or__",
          "aten::__xor__", "aten::__invert__", "aten::bitwise_not", "aten::argmax", "aten::argmin", "aten::argsort",
          "aten::nonzero", "aten::isnan", "aten::isinf", "aten::isfinite", "aten::bucketize", "aten::searchsorted"};
      auto floating_in = [&](const Value* v) {
        if (!is_tensor(v)) return false;
        if (not_float.count(v->node()->kind().toQualString())) return false;
        if (auto tt = v->type()->cast<c10::TensorType>())
          if (auto st = tt->scalarType()) return at::isFloatingType(*st);
        return true;
      };
      // Type promotion: in the format when there is a floating operand and
      // every floating operand is in it (one fp32 operand makes it fp32).
      auto all_in_format = [&](at::ArrayRef<Value*> operands) {
        bool any = false, all = true;
        for (const Value* v : operands)
          if (floating_in(v)) {
            any = true;
            all = all && in_format.count(v) > 0;
          }
        return any && all;
      };
      for (int sweep = 0; sweep < 2; ++sweep)
        for (Node* n : now) {
          const std::string k = n->kind().toQualString();
          if (n->kind() == c10::prim::If || n->kind() == c10::prim::Loop) {
            // An output is in the format when every block returns it so.
            const size_t first = n->kind() == c10::prim::Loop ? 1 : 0;  // a loop block's first output is its condition
            for (size_t j = 0; j < n->outputs().size(); ++j) {
              bool all = !n->blocks().empty();
              for (const torch::jit::Block* b : n->blocks()) {
                const auto& rets = b->return_node()->inputs();
                all = all && j + first < rets.size() && in_format.count(rets[j + first]) > 0;
              }
              if (all) in_format.insert(n->output(j));
              else in_format.erase(n->output(j));
            }
            continue;
          }
          if (n->outputs().empty() || !is_tensor(n->output(0))) continue;
          bool half = false;
          if (lower.count(k)) {
            half = true;
          } else if (fp32_ops.count(k)) {
            half = false;
          } else if (k == "aten::float" || k == "aten::double") {
            half = false;
          } else if (k == "aten::half") {
            half = true;
          } else if (k == "aten::to") {
            // to(dtype) or to(device, dtype): the dtype given; to(other): its format.
            std::optional<int64_t> dt;
            for (size_t i = 1; i < n->inputs().size() && i < 3 && !dt; ++i) {
              auto c = torch::jit::toIValue(n->input(i));
              if (c && c->isInt()) dt = c->toInt();
            }
            if (dt) half = *dt == static_cast<int64_t>(opt.round_ops);
            else if (n->inputs().size() >= 2 && is_tensor(n->input(1))) half = in_format.count(n->input(1)) > 0;
            else half = in_format.count(n->input(0)) > 0;
          } else if (k == "aten::type_as" && n->inputs().size() >= 2) {
            half = in_format.count(n->input(1)) > 0;
          } else if (first_input_dtype.count(k) && !n->inputs().empty()) {
            half = in_format.count(n->input(0)) > 0;
          } else if (k == "aten::where" && n->inputs().size() == 3) {
            half = all_in_format(n->inputs().slice(1));
          } else if ((k == "aten::cat" || k == "aten::stack" || k == "aten::concat") && !n->inputs().empty() &&
                     n->input(0)->node()->kind() == c10::prim::ListConstruct) {
            half = all_in_format(n->input(0)->node()->inputs());
          } else {
            half = all_in_format(n->inputs());
          }
          for (const Value* o : n->outputs())
            if (half) in_format.insert(o);
            else in_format.erase(o);
        }
    }
    for (Node* n : now) {
      const std::string k = n->kind().toQualString();
      if (k.rfind("normdoctor::", 0) == 0 || k.rfind("prim::", 0) == 0 || kViews.count(k) || k.rfind("aten::", 0) != 0) continue;
      // A watch (rounding to float32 or float64 changes nothing: the NaN/Inf
      // producer search) sees every op: the -inf/NaN made after an explicit
      // upcast (BERT's mask `.to(torch.float32)`, then the scores plus it and
      // the softmax of a fully masked row) is the one it looks for (eval57).
      const bool watch_only = opt.round_ops == at::kFloat || opt.round_ops == at::kDouble;
      if (!watch_only && !n->outputs().empty() && (fp32.count(n->output(0)) || constant_only.count(n->output(0)))) continue;
      if (opt.round_autocast && !n->outputs().empty() && !in_format.count(n->output(0))) continue;
      const bool inplace = k.back() == '_';
      for (Value* o : n->outputs()) {
        if (!is_tensor(o) || o->uses().empty()) continue;
        RoundSite rs;
        rs.op = k;
        rs.one_pass_variance_root = root_of_one_pass_variance(n);
        rs.divisor_eps = divisor_eps(n, attr_double);
        rs.log_eps = divisor_eps(n, attr_double, /*log=*/true);
        rs.norm_statistic = statistic.count(n) > 0;
        const auto& chain = scopes.chain(n);
        rs.module = chain.empty() ? std::string() : chain.back();
        const int64_t id = static_cast<int64_t>(round_sites_.size());
        round_sites_.push_back(rs);
        std::vector<torch::jit::Use> uses(o->uses().begin(), o->uses().end());
        Node* after = n->next();
        torch::jit::WithInsertPoint guard(after);
        Value* idv = graph_->insertConstant(id);
        Value* dt = graph_->insertConstant(static_cast<int64_t>(opt.round_ops));
        Value* ip = graph_->insertConstant(inplace);
        Node* r = graph_->create(kRound, {idv, dt, ip, o});
        r->output()->setType(o->type());
        r->insertBefore(after);
        for (const auto& u : uses) u.user->replaceInput(u.offset, r->output());
      }
    }
  }

  // TapSite::next_module: a walk in graph order, each module-output tap
  // resolved by the first computing op after it outside its module.
  {
    std::vector<int64_t> pending;
    std::function<void(Block*)> walk = [&](Block* b) {
      for (Node* n : b->nodes()) {
        if (n->kind() == c10::prim::Constant && n->outputs().size() == 1) {
          const double lim = 0.5 * static_cast<double>(std::numeric_limits<float>::max());
          if (const auto c = torch::jit::toIValue(n->output())) {
            if (c->isDouble() && std::isfinite(c->toDouble()) && std::abs(c->toDouble()) >= lim) float32_limit_constants_ = true;
            if (c->isTensor() && c->toTensor().is_floating_point() && c->toTensor().numel() > 0 && c->toTensor().numel() <= 4096) {
              const at::Tensor t = c->toTensor().to(at::kDouble);
              if (at::isfinite(t).logical_and(t.abs() >= lim).any().item<bool>()) float32_limit_constants_ = true;
            }
          }
          continue;
        }
        if (n->kind() == kTap) {
          const auto id = torch::jit::toIValue(n->input(0));
          if (id && id->isInt() && taps_[static_cast<size_t>(id->toInt())].kind == TapKind::kModuleOutput)
            pending.push_back(id->toInt());
          continue;
        }
        bool computes = n->kind().is_aten() && scopes.known(n);
        if (computes) {
          computes = false;
          for (const Value* o : n->outputs()) computes = computes || is_tensor(o);
        }
        if (computes && !pending.empty()) {
          const std::string m = innermost_module(n);
          std::vector<int64_t> keep;
          for (int64_t id : pending) {
            auto& site = taps_[static_cast<size_t>(id)];
            if (!site.module.empty() && (m == site.module || m.rfind(site.module + ".", 0) == 0)) keep.push_back(id);
            else site.next_module = m;
          }
          pending.swap(keep);
        }
        for (Block* sb : n->blocks()) walk(sb);
      }
    };
    walk(graph_->block());
  }

  graph_->lint();
  if (const char* dump = std::getenv("NORMDOCTOR_DUMP_GRAPH"); dump && *dump) {
    std::cerr << "normdoctor: instrumented graph (" << taps_.size() << " taps):\n" << *graph_;
    for (const auto& t : taps_) std::cerr << "  tap " << t.id << " kind " << static_cast<int>(t.kind) << " module '" << t.module << "'\n";
    for (const auto& f : op_facts_) {
      std::cerr << "  op " << f.op << " in '" << f.module << "' dims";
      for (auto d : f.dims) std::cerr << " " << d;
      std::cerr << " roles";
      for (const auto& r : f.input_roles) std::cerr << " " << r;
      std::cerr << "\n";
    }
    for (const auto& n : norm_ops_) {
      std::cerr << "  norm " << n.op << " in '" << n.module << "' " << n.args.dump() << " roles";
      for (const auto& r : n.input_roles) std::cerr << " " << r;
      std::cerr << "\n";
    }
  }
  fn_ = std::make_unique<torch::jit::GraphFunction>("normdoctor_forward", graph_, nullptr,
                                                     torch::jit::ExecutorExecutionMode::SIMPLE);
}

c10::IValue InstrumentedModel::run(const std::vector<c10::IValue>& args, const PassConfig& cfg, Collector& collector) {
  PassContext ctx;
  ctx.taps = &taps_;
  ctx.collector = &collector;
  ctx.cfg = cfg;
  collector.slice0_batch = cfg.slice0_batch;
  collector.slice_axis = cfg.slice_axis;
  collector.slice_index = cfg.slice_index;
  collector.slice_guide = cfg.slice_guide;
  collector.slice_rows = cfg.slice_rows;
  collector.slice_rows_of = cfg.slice_rows_of;
  collector.batch_norm_stats = cfg.batch_norm_stats;
  torch::jit::Stack stack;
  stack.reserve(args.size() + 1);
  stack.emplace_back(model_.module._ivalue());
  for (const auto& a : args) stack.push_back(a);
  // The graph takes every argument of forward's schema: the trailing ones
  // not given take their defaults (None, ints, floats, bools, lists), as
  // Method::operator() does for a plain call.
  const auto& schema_args = model_.module.get_method("forward").function().getSchema().arguments();
  for (size_t i = stack.size(); i < schema_args.size(); ++i) {
    const auto& d = schema_args[i].default_value();
    if (!d)
      throw Error(error_kind::kUsage, ExitCode::kUsage,
                  "forward's argument '" + schema_args[i].name() + "' has no default and no value was given; give it " +
                      "in the batch file or with --input-shape " + schema_args[i].name() + "=DIMS[:DTYPE][:LOW..HIGH]");
    stack.push_back(*d);
  }
  struct Guard {
    PassContext* prev;
    explicit Guard(PassContext* c) : prev(g_pass) { g_pass = c; }
    ~Guard() { g_pass = prev; }
  } guard(&ctx);
  fn_->run(stack);
  return stack.front();
}

int64_t raised_batch_norm_tap(const std::vector<TapSite>& taps, const Collector& failed, const Collector* reference) {
  if (failed.last_batch_norm_tap() >= 0 && failed.last_batch_norm_tap() == failed.last_tap()) return failed.last_batch_norm_tap();
  if (!reference) return -1;
  int64_t first = -1, first_tap = -1;
  for (const auto& tap : taps) {
    const auto& rr = reference->records()[static_cast<size_t>(tap.id)];
    const auto& fr = failed.records()[static_cast<size_t>(tap.id)];
    if (rr.first_fire >= 0 && fr.calls == 0 && (first < 0 || rr.first_fire < first)) {
      first = rr.first_fire;
      first_tap = tap.id;
    }
  }
  return first_tap >= 0 && taps[static_cast<size_t>(first_tap)].kind == TapKind::kBatchNormInput ? first_tap : -1;
}

/// Axes a normalization reduces over, for an input of rank `rank`; empty
/// when unknown. `runtime_shape`: what a tap recorded at run time, the
/// normalized_shape of a layer_norm/rms_norm computed there
/// (F.layer_norm(x, x.shape[-2:])) or the dims of a written-out norm
/// built at run time (NormOpSite::dims_tap).
bool module_returned(const std::vector<TapSite>& taps, const std::vector<TapRecord>& recs, const std::string& module,
                     const std::vector<TapRecord>* reference) {
  for (const auto& t : taps) {
    if (t.kind != TapKind::kModuleOutput || t.module != module) continue;
    const auto id = static_cast<size_t>(t.id);
    if (id >= recs.size() || recs[id].calls > 0) continue;
    if (!reference || (id < reference->size() && (*reference)[id].calls > 0)) return false;
  }
  return true;
}

std::vector<int64_t> norm_reduced_axes(const NormOpSite& n, int64_t rank, const nlohmann::json& info,
                                       const std::vector<int64_t>& runtime_shape) {
  std::vector<int64_t> r;
  if (n.op == "batch_norm") {
    r.push_back(0);
    for (int64_t d = 2; d < rank; ++d) r.push_back(d);
  } else if (n.op == "instance_norm") {
    for (int64_t d = 2; d < rank; ++d) r.push_back(d);
  } else if (n.op == "group_norm") {
    for (int64_t d = 1; d < rank; ++d) r.push_back(d);
  } else if (n.op == "layer_norm" || n.op == "rms_norm") {
    // A scripted nn.LayerNorm passes self.normalized_shape (an attribute,
    // not a graph constant): the module's own value then.
    nlohmann::json ns = n.args.value("normalized_shape", nlohmann::json());
    if (!ns.is_array() && info.contains("normalized_shape")) ns = info["normalized_shape"];
    // Computed at run time (F.layer_norm(x, x.shape[-2:])): what the op received.
    if (!ns.is_array() && !runtime_shape.empty()) ns = runtime_shape;
    if (!ns.is_array()) return {};
    for (int64_t d = rank - static_cast<int64_t>(ns.size()); d < rank; ++d)
      if (d >= 0) r.push_back(d);
  } else if (n.op == "rms_norm_pattern" || n.op == "layer_norm_pattern" || n.op == "group_norm_pattern" ||
             n.op == "l2_norm_pattern" || n.op == "batch_norm_pattern") {
    nlohmann::json dims = n.args.value("dims", nlohmann::json());
    // Dims filled at run time (NormOpSite::dims_tap): the list received.
    if (dims == "dynamic" && !runtime_shape.empty()) dims = runtime_shape;
    // A statistic over the rows a boolean mask keeps (x[~padding_mask]: the
    // mask covers every axis but the features, the selection is [N, C]):
    // its axis 0 stands for all of x's leading axes.
    if (n.args.value("masked_rows", false) && dims == nlohmann::json::array({0})) {
      for (int64_t d = 0; d + 1 < rank; ++d) r.push_back(d);
      return r;
    }
    if (dims.is_string() && dims.get<std::string>() == "all") {
      for (int64_t d = 0; d < rank; ++d) r.push_back(d);
    } else if (dims.is_array()) {
      for (const auto& x : dims) {
        int64_t d = x.get<int64_t>();
        if (d < 0) d += rank;
        if (d >= 0 && d < rank) r.push_back(d);
      }
      std::sort(r.begin(), r.end());
    }
  }
  return r;
}

}  // namespace nd
