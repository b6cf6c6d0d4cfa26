// The precision probe: what the run precision (--precision fp16|bf16) does
// to this model. Every module's fp32 output against the format's limits, the
// internals of LayerNorm/RMSNorm layers (sum of squares, eps) computed in the
// format from the layer's input, a forward pass in the format (native when
// LibTorch has the kernels on this device, else emulated by rounding)
// compared module by module with an fp32 pass, and for fp16 the range of
// loss scales that keeps the train pass's gradients representable.
// Also, at every precision, the scale that large norm gains hand to the next
// layer (norm.next_*). Metric names: docs/metrics.md, "Precision".
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include <torch/torch.h>

#include "core/error.h"
#include "instrument/stats.h"
#include "model/op_fallbacks.h"
#include "probes/forward_backward/forward_backward.h"
#include "probes/precision/precision.h"
#include "probes/sequence/sequence.h"
#include "probes/session.h"

namespace nd {
namespace {

/// Relative error (L2, over elements finite in both passes) above which a
/// module's low-precision output counts as diverged from fp32. fp16 rounds
/// with a relative error of 2^-11 (4.9e-4) and bf16 of 2^-8 (3.9e-3) per
/// value; 0.1 is far above what rounding accumulates through a few layers.
constexpr double kDivergenceThreshold = 0.1;
/// The initial scale of torch.cuda.amp.GradScaler (init_scale = 2**16). It
/// stays there for its first growth_interval = 2000 steps unless gradients overflow.
constexpr double kDefaultLossScale = 65536.0;
// The share of underflowing gradients worth a line in the report's
// assumptions: PREC003/PREC012's threshold (1%).
constexpr double kUnderflowShown = 0.01;
/// A parameter gradient element below this fraction of its tensor's largest
/// gradient is float32 rounding noise, not a gradient fp16 could lose: a
/// value mathematically zero (the key bias of every softmax attention, whose
/// q . b_k shifts a whole row of logits; query and key weights of an
/// attention over a single key) comes out of float32 sums of terms near the
/// tensor's scale as residues of about 1.2e-7 (float32's epsilon) times that
/// scale or less (eval37 T02: MobileViT at 64 px, 9.5e-19 beside 1e-4, read
/// as 6 % of all gradients underflowing fp16). 1e-6: 8 epsilons.
constexpr double kRoundingNoiseRel = 1e-6;

// 0.902 -> "90.2%".
std::string fmt_fraction(double x) {
  std::ostringstream o;
  o.precision(3);
  o << x * 100 << "%";
  return o.str();
}

/// An op that divides or inverts (rsqrt, reciprocal, div): an Inf it makes
/// is a division by a value rounding made zero, not an overflow.
bool inverting_op(const std::string& op) {
  return op.find("rsqrt") != std::string::npos || op.find("reciprocal") != std::string::npos ||
         op.find("div") != std::string::npos;
}
/// Reference-pass memory budget: module outputs kept for the comparison.
constexpr int64_t kReferenceBudgetBytes = int64_t{2} << 30;

/// Ops a deliberate mask writes -inf with: an op that writes only -inf (no
/// NaN) of these kinds (masked_fill(~mask, -inf), scores + an additive -inf
/// mask, torch.full(..., -inf).triu(1), and nn.MultiheadAttention's
/// baddbmm(attn_mask, q, k^T), which adds a causal -inf mask as the
/// product's input: eval19's SASRec) does so in fp32 too: no producer.
/// Ops that only move values (cat, stack, pad, slicing, gathering) make no
/// new ones: a -inf at their output came in with a mask piece (HF
/// Longformer concatenates its -inf-filled chunks: eval56 read the cat as
/// an fp16 overflow).
bool mask_op(const std::string& op) {
  static const std::set<std::string> ops = {
      "aten::baddbmm", "aten::addmm", "aten::addbmm", "aten::masked_fill", "aten::masked_fill_", "aten::where",
      "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::fill_", "aten::full", "aten::full_like",
      "aten::new_full", "aten::triu", "aten::tril", "aten::index_put", "aten::index_put_", "aten::scatter",
      "aten::scatter_", "aten::masked_scatter", "aten::cat", "aten::concat", "aten::stack", "aten::constant_pad_nd",
      "aten::pad", "aten::slice", "aten::select", "aten::index", "aten::index_select", "aten::gather",
      "aten::narrow", "aten::repeat", "aten::expand", "aten::flip", "aten::roll", "aten::as_strided",
      "aten::diagonal", "aten::unfold", "aten::copy_", "aten::clone", "aten::contiguous"};
  return ops.count(op) > 0;
}


/// A floating-point storage format and its IEEE 754 limits.
struct Format {
  std::string name;       ///< "fp16" | "bf16"
  at::ScalarType dtype;
  double max;             ///< largest finite value
  double min_normal;      ///< smallest positive normal value
  double min_subnormal;   ///< smallest positive subnormal value
};

Format format_of(const std::string& precision) {
  if (precision == "fp16") return {"fp16", at::kHalf, 65504.0, std::ldexp(1.0, -14), std::ldexp(1.0, -24)};
  // bfloat16: fp32's 8-bit exponent, 8-bit significand.
  return {"bf16", at::kBFloat16, 3.3895313892515355e38, std::ldexp(1.0, -126), std::ldexp(1.0, -133)};
}

/// x rounded to the format and back to x's dtype (round to nearest even; overflow -> inf).
at::Tensor round_to(const at::Tensor& x, const Format& f) { return x.to(f.dtype).to(x.scalar_type()); }

double round_scalar(double v, const Format& f) {
  return at::scalar_tensor(v, at::kDouble).to(f.dtype).to(at::kDouble).item<double>();
}

bool is_layer_norm_like(const std::string& kind) {
  static const std::regex re(".*(LayerNorm|RMSNorm|RmsNorm|Rmsnorm|T5LayerNorm).*");
  return std::regex_match(kind, re);
}

bool is_rms(const LayerMetrics& lm) {
  if (lm.info.contains("ops"))
    for (const auto& o : lm.info["ops"]) {
      const std::string op = o.value("op", "");
      if (op == "layer_norm" || op == "layer_norm_pattern") return false;
      if (op == "rms_norm" || op == "rms_norm_pattern") return true;
    }
  std::string k = lm.kind;
  std::transform(k.begin(), k.end(), k.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return k.find("rms") != std::string::npos || k == "t5layernorm";
}

/// Elements per normalized row: the product of normalized_shape when known, else 0 (= the input's last dim).
int64_t normalized_width(const LayerMetrics& lm) {
  auto prod = [](const nlohmann::json& v) -> int64_t {
    if (!v.is_array() || v.empty()) return 0;
    int64_t p = 1;
    for (const auto& e : v) {
      if (!e.is_number_integer()) return 0;
      p *= e.get<int64_t>();
    }
    return p;
  };
  if (lm.info.contains("ops"))
    for (const auto& o : lm.info["ops"])
      if (o.contains("normalized_shape") && prod(o["normalized_shape"]) > 0) return prod(o["normalized_shape"]);
  if (lm.info.contains("normalized_shape")) return prod(lm.info["normalized_shape"]);
  return 0;
}

/// A LayerNorm/RMSNorm layer whose internals are computed in the format.
struct NormSite {
  std::string path;
  bool rms = false;
  int64_t width = 0;                    ///< 0: the input's last dim
  std::optional<double> eps;
  bool fp32_inside = false;             ///< fused kernel or upcast: eps is added in fp32
  /// An L2 normalization x / (||x|| + eps) (SSD's L2Norm, F.normalize) over
  /// `dims` of its input (negative: from the end; empty: the last axis).
  bool l2 = false;
  std::vector<int64_t> dims;
  // Measured from the layer's input (all calls).
  int64_t rows = 0, zero_rows = 0, nonfinite = 0, overflow_rows = 0;
  double sumsq_max = 0;
  bool measured = false;
};

/// The normalization of one input tensor computed in the format the way a
/// norm written out in that precision does it (round after each op, sums
/// accumulated in fp32 as GPU reductions do): LayerNorm (x - mean) *
/// rsqrt(var + eps), RMSNorm x * rsqrt(mean(x^2) + eps), an L2 normalization x / (||x|| + eps) over its axes. Counts rows whose
/// variance (mean square) is exactly 0 in fp32, rows whose squares overflow
/// the format, and output elements that come out NaN/Inf.
void norm_internals(const at::Tensor& x0, const Format& f, NormSite& n) {
  if (!x0.defined() || !x0.is_floating_point() || x0.numel() == 0 || x0.dim() == 0) return;
  // One row per normalized vector.
  at::Tensor x;
  if (n.l2) {
    // The reduced axes moved last.
    std::vector<int64_t> src, dst;
    for (int64_t d : n.dims.empty() ? std::vector<int64_t>{-1} : n.dims) {
      const int64_t a = d < 0 ? d + x0.dim() : d;
      if (a < 0 || a >= x0.dim() || std::find(src.begin(), src.end(), a) != src.end()) return;
      src.push_back(a);
    }
    int64_t w = 1;
    for (size_t i = 0; i < src.size(); ++i) {
      dst.push_back(x0.dim() - static_cast<int64_t>(src.size()) + static_cast<int64_t>(i));
      w *= x0.size(src[i]);
    }
    if (w <= 0) return;
    x = x0.detach().to(at::kFloat).movedim(src, dst).reshape({-1, w});
  } else {
    const int64_t w = n.width > 0 ? n.width : x0.size(-1);
    if (w <= 0 || x0.numel() % w != 0 || (n.width > 0 && x0.size(-1) > w)) return;
    x = x0.detach().to(at::kFloat).reshape({-1, w});
  }
  at::Tensor xd = x.to(at::kDouble);
  at::Tensor sumsq = xd.pow(2).sum(1);
  at::Tensor fin_rows = at::isfinite(xd).all(1);
  at::Tensor zero = n.rms || n.l2 ? (sumsq == 0) : ((xd - xd.mean(1, true)).pow(2).mean(1) == 0);
  const double eps_f = round_scalar(n.eps.value_or(0.0), f);
  at::Tensor xr = round_to(x, f);
  at::Tensor y, sq, stat;  // stat: the row's statistic, [rows, 1]
  if (n.l2) {
    // y = x / (||x|| + eps)
    sq = round_to(xr * xr, f);
    stat = round_to(sq.sum(1, true), f);
    at::Tensor denom = round_to(round_to(stat.sqrt(), f) + eps_f, f);
    y = round_to(xr / denom, f);
  } else if (n.rms) {
    sq = round_to(xr * xr, f);
    stat = round_to(sq.mean(1, true), f);
    at::Tensor denom = round_to(stat + eps_f, f);
    y = round_to(xr * round_to(denom.rsqrt(), f), f);
  } else {
    at::Tensor mu = round_to(xr.mean(1, true), f);
    at::Tensor d = round_to(xr - mu, f);
    sq = round_to(d * d, f);
    stat = round_to(sq.mean(1, true), f);
    at::Tensor denom = round_to(stat + eps_f, f);
    y = round_to(d * round_to(denom.rsqrt(), f), f);
  }
  // Rows whose input was already non-finite are not the norm's doing.
  at::Tensor bad = at::isfinite(y).logical_not().logical_and(fin_rows.unsqueeze(1));
  n.rows += x.size(0);
  n.zero_rows += zero.logical_and(fin_rows).sum().item<int64_t>();
  n.nonfinite += bad.sum().item<int64_t>();
  // A row overflows when one of its squares does, or their sum / mean does
  // (SSD's L2Norm: no square beyond 65504, their sum over 512 channels is).
  n.overflow_rows += at::isinf(sq).any(1).logical_or(at::isinf(stat).squeeze(1)).logical_and(fin_rows).sum().item<int64_t>();
  at::Tensor s_fin = sumsq.masked_fill(fin_rows.logical_not(), 0);
  if (s_fin.numel()) n.sumsq_max = std::max(n.sumsq_max, s_fin.max().item<double>());
  n.measured = true;
}

/// One module's low-precision outputs against its fp32 outputs.
struct Cmp {
  double num = 0, den = 0, dot = 0, lp = 0, ref_absmax = 0;
  int64_t new_nonfinite = 0, ref_beyond = 0, compared = 0, uncompared = 0, unrounded = 0;
  int64_t first_fire = -1;
  /// Execution-order index (among all module-output calls of the pass) of
  /// the first call of this module whose output held a value that is finite
  /// in fp32 and not in the format; -1 when none. A module called at several
  /// sites (T5's one encoder.dropout after the embedding and after the final
  /// norm) is first in execution order by its first call, but its first
  /// non-finite output may come from its last one.
  int64_t first_bad_call = -1;
};

/// Floating parameters and buffers of the model, saved so a pass can change
/// them (cast or round) and put them back.
class StateGuard {
 public:
  explicit StateGuard(torch::jit::Module& m) {
    for (const auto& p : m.parameters(true))
      if (p.is_floating_point()) saved_.push_back({p, p.detach().clone()});
    for (const auto& b : m.buffers(true))
      if (b.is_floating_point()) saved_.push_back({b, b.detach().clone()});
  }
  ~StateGuard() {
    torch::NoGradGuard ng;
    for (auto& [live, copy] : saved_) {
      at::Tensor l = live;
      if (l.scalar_type() != copy.scalar_type()) l.set_data(copy);
      else l.detach().copy_(copy);
    }
  }
  /// Casts every saved tensor to `dtype` (model.half() / model.to(torch.bfloat16)).
  void cast(at::ScalarType dtype) {
    torch::NoGradGuard ng;
    for (auto& [live, copy] : saved_) {
      at::Tensor l = live;
      l.set_data(copy.to(dtype));
    }
  }
  /// Rounds every saved tensor to the format in place (weights stored in it).
  void round(const Format& f) {
    torch::NoGradGuard ng;
    for (auto& [live, copy] : saved_) live.detach().copy_(round_to(copy, f));
  }
  StateGuard(const StateGuard&) = delete;
  StateGuard& operator=(const StateGuard&) = delete;

 private:
  std::vector<std::pair<at::Tensor, at::Tensor>> saved_;
};

/// float16 or bfloat16: a model saved after .half()/.bfloat16() holds these.
bool is_low_float(const at::Tensor& t) { return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16; }

std::vector<c10::IValue> args_as(const std::vector<c10::IValue>& a, const std::function<at::Tensor(const at::Tensor&)>& fn) {
  std::vector<c10::IValue> out;
  for (const auto& v : a) {
    if (v.isTensor() && v.toTensor().is_floating_point()) out.emplace_back(fn(v.toTensor()));
    else if (v.isTensor()) out.emplace_back(v.toTensor().clone());
    else out.push_back(v);
  }
  return out;
}

/// The op named in a "... not implemented for 'Half'" error, or "".
std::string missing_kernel_op(const std::string& msg) {
  static const std::regex re("\"([A-Za-z0-9_:]+)\" not implemented for '([A-Za-z0-9]+)'");
  std::smatch m;
  if (std::regex_search(msg, m, re)) return std::string(m[1]) + " (no " + std::string(m[2]) + " kernel)";
  return "";
}

// ---------------------------------------------------------------------------

/// norm.next_*: the module that consumes a norm layer's output, and the scale it gets.
void norm_gain_scale(Session& s) {
  std::map<std::string, std::set<std::string>> consumers;
  for (const auto& t : s.inst->taps())
    if (t.kind == TapKind::kModuleOutput)
      for (const auto& c : t.consumers) consumers[t.module].insert(c);
  for (auto& lm : s.doc.layers) {
    if (!lm.metrics.count("norm.gain_p99") || !lm.metrics.count("act.rms")) continue;
    lm.metrics["norm.next_input_rms"] = lm.metrics["act.rms"];
    const LayerMetrics* best = nullptr;
    double best_absmax = -1;
    for (const auto& c : consumers[lm.path]) {
      // The norm itself, its ancestors (a residual add in the parent's scope)
      // and the root are not "the next layer".
      if (c.empty() || c == lm.path || lm.path.rfind(c + ".", 0) == 0 || c.rfind(lm.path + ".", 0) == 0) continue;
      const LayerMetrics* n = s.doc.find_layer(c);
      if (!n || !n->metrics.count("act.absmax") || !n->metrics.at("act.absmax").is_number()) continue;
      const double a = n->metrics.at("act.absmax").get<double>();
      if (a > best_absmax) {
        best_absmax = a;
        best = n;
      }
    }
    if (!best) continue;
    lm.metrics["norm.next_layer"] = best->path;
    lm.metrics["norm.next_layer_absmax"] = best_absmax;
    lm.metrics["norm.next_layer_fp16_headroom"] = best_absmax > 0 ? metric_number(kFp16Max / best_absmax) : MetricValue("inf");
  }
}

/// prec.grad_* and prec.loss_scale_*: the train pass's parameter gradients against fp16.
void loss_scale(Session& s, const Format& f) {
  MetricMap& mm = s.doc.model_metrics;
  const auto train = s.train();
  if (!train || !s.backward_skipped().empty()) return;
  std::vector<at::Tensor> gs;
  std::vector<std::pair<std::string, at::Tensor>> per_module;
  int64_t rounding_noise = 0;
  for (const auto& mi : s.model.modules) {
    std::vector<at::Tensor> mine;
    for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) {
      const at::Tensor g = train->grad_of(p.value);
      if (!g.defined() || !g.is_floating_point() || !g.numel()) continue;
      at::Tensor a = g.detach().flatten().abs().to(at::kFloat);
      // Rounding noise (kRoundingNoiseRel) counts as the zero it stands for.
      const at::Tensor finite = a.masked_select(at::isfinite(a));
      if (finite.numel()) {
        const double top = finite.max().item<double>();
        const at::Tensor noise = (a > 0).logical_and(a < kRoundingNoiseRel * top);
        const int64_t k = noise.sum().item<int64_t>();
        if (k > 0) {
          rounding_noise += k;
          a = a.masked_fill(noise, 0.0);
        }
      }
      mine.push_back(a);
    }
    if (mine.empty()) continue;
    at::Tensor cat = at::cat(mine);
    gs.push_back(cat);
    per_module.push_back({mi.path, cat});
  }
  if (gs.empty()) return;
  at::Tensor all = at::cat(gs);
  const int64_t nonfinite = at::isfinite(all).logical_not().sum().item<int64_t>();
  mm["prec.grad_nonfinite_count"] = nonfinite;
  at::Tensor nz = all.masked_select(at::isfinite(all).logical_and(all > 0));
  mm["prec.grad_nonzero_count"] = nz.numel();
  mm["prec.grad_rounding_noise_count"] = rounding_noise;
  if (nonfinite > 0 || nz.numel() == 0) return;  // nonfinite-gradient / no-gradient-path say why
  const double absmax = nz.max().item<double>(), minnz = nz.min().item<double>();
  const double hi = f.max / absmax, lo = f.min_normal / minnz;
  const double best = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(hi))));
  // The scale the run uses: what a dynamic scaler settles on (the largest
  // power of two keeping the largest gradient finite, capped at
  // GradScaler's initial 65536), or what --loss-scale fixed (1 without a
  // scaler).
  const double dynamic = std::min(best, kDefaultLossScale);
  const std::optional<double>& given = s.opt.loss_scale;
  const double used = given ? *given : dynamic;
  const std::string mode = !given ? "dynamic" : *given == 1.0 ? "none" : "static";
  auto under = [&](const at::Tensor& v, double scale) {
    return (v.to(at::kDouble) * scale < f.min_subnormal).sum().item<int64_t>();
  };
  auto frac = [&](double scale) { return static_cast<double>(under(nz, scale)) / static_cast<double>(nz.numel()); };
  mm["prec.grad_absmax"] = absmax;
  mm["prec.grad_min_nonzero"] = minnz;
  mm["prec.grad_dynamic_range"] = absmax / minnz;
  mm["prec.loss_scale_min"] = lo;
  mm["prec.loss_scale_max"] = hi;
  mm["prec.loss_scale_feasible"] = lo <= hi;
  mm["prec.loss_scale_best"] = best;
  mm["prec.loss_scale_used"] = used;
  mm["prec.loss_scale_mode"] = mode;
  mm["prec.loss_scale_dynamic"] = dynamic;
  mm["prec.loss_scale_note"] =
      mode == "dynamic" ? "a dynamic loss scaler's: GradScaler's initial 65536, or the largest power of two that keeps "
                          "the largest gradient finite"
      : mode == "none"  ? "no loss scaling: --loss-scale none"
                        : "the static scale --loss-scale gave";
  mm["prec.grad_overflow_at_used"] = absmax * used > f.max;
  mm["prec.grad_underflow_fraction_dynamic"] = frac(dynamic);
  mm["prec.grad_underflow_fraction_scale1"] = frac(1.0);
  mm["prec.grad_underflow_fraction_default"] = frac(kDefaultLossScale);
  mm["prec.grad_overflow_at_default"] = absmax * kDefaultLossScale > f.max;
  mm["prec.grad_underflow_fraction"] = frac(used);
  // Judged with a dynamic scaler by default: say what a run without one
  // would see, so that a user training with .half() alone knows to ask.
  if (mode == "dynamic" && frac(1.0) > kUnderflowShown)
    s.doc.assumptions.push_back(
        "fp16 gradients are judged with a dynamic loss scaler (torch.amp.GradScaler); without one (--loss-scale none), " +
        fmt_fraction(frac(1.0)) + " of the non-zero parameter gradients underflow fp16 at scale 1");
  mm["prec.grad_underflow_fraction_best"] = frac(best);
  // Residual branches behind small learned gains (LayerScale / CaiT gamma
  // at 1e-5, ReZero scalars): the gain multiplies the branch's gradients
  // down by design, and it learns (Adam moves it by about lr per step), so
  // their underflow lasts until the gains grow. A gain's branch is the
  // module holding it, or that module's parent when the gain is the
  // module's only parameter (timm's LayerScale module, ls1.gamma).
  std::vector<std::string> gain_scopes;
  std::string gain_names;
  double gain_absmax = 0;
  {
    std::map<std::string, int64_t> own_params;
    for (const auto& mi : s.model.modules) {
      int64_t n = 0;
      for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) n += p.value.defined() ? 1 : 0;
      own_params[mi.path] = n;
    }
    const auto gains = small_branch_gains(s);
    for (size_t i = 0; i < gains.size(); ++i) {
      const std::string& gp = gains[i].first;
      gain_absmax = std::max(gain_absmax, gains[i].second);
      if (i < 6) gain_names += (i ? ", " : "") + gp;
      std::string owner = gp.find('.') == std::string::npos ? "" : gp.substr(0, gp.rfind('.'));
      if (!owner.empty() && own_params[owner] == 1)
        owner = owner.find('.') == std::string::npos ? "" : owner.substr(0, owner.rfind('.'));
      if (!owner.empty()) gain_scopes.push_back(owner);  // a gain on the root scales the whole model: no branch
    }
    if (gains.size() > 6) gain_names += ", ... (" + std::to_string(gains.size() - 6) + " more)";
  }
  auto behind_gain = [&](const std::string& path) {
    for (const auto& sc : gain_scopes)
      if (path == sc || path.rfind(sc + ".", 0) == 0) return true;
    return false;
  };
  int64_t worst = 0, unexplained = 0;
  std::string worst_path;
  for (const auto& [path, g] : per_module) {
    const int64_t u = under(g.masked_select(g > 0), used);
    if (!behind_gain(path)) unexplained += u;
    if (u > worst) {
      worst = u;
      worst_path = path;
    }
  }
  mm["prec.grad_underflow_fraction_unexplained"] = static_cast<double>(unexplained) / static_cast<double>(nz.numel());
  {
    // PREC011's words for the share behind the gains: "all", not "all but
    // 0" (eval57 cait).
    char share[64];
    std::snprintf(share, sizeof share, "all but %.3g", static_cast<double>(unexplained) / static_cast<double>(nz.numel()));
    mm["prec.small_gain_share"] = unexplained == 0 ? std::string("all") : std::string(share);
  }
  mm["prec.small_gain_branches"] = static_cast<int64_t>(gain_scopes.size());
  if (!gain_scopes.empty()) {
    mm["prec.small_gain_names"] = gain_names;
    mm["prec.small_gain_absmax"] = gain_absmax;
  }
  if (worst > 0) {
    mm["prec.grad_underflow_layer"] = worst_path;
    mm["prec.grad_underflow_layer_count"] = worst;
  }
}

}  // namespace

void probe_precision(Session& s) {
  norm_gain_scale(s);
  const std::string& precision = s.precision;
  if (precision != "fp16" && precision != "bf16") return;
  const Format f = format_of(precision);
  MetricMap& mm = s.doc.model_metrics;
  mm["prec.format"] = f.name;
  mm["prec.format_max"] = f.max;
  mm["prec.divergence_threshold"] = kDivergenceThreshold;

  // Gradients first: the native pass below changes the parameters' dtype.
  if (f.name == "fp16") loss_scale(s, f);

  // Per-module headroom of the fp32 train pass against the format.
  for (auto& lm : s.doc.layers) {
    auto it = lm.metrics.find("act.absmax");
    if (it == lm.metrics.end() || !it->second.is_number()) continue;
    const double a = it->second.get<double>();
    lm.metrics["prec.headroom"] = a > 0 ? metric_number(f.max / a) : MetricValue("inf");
  }

  // LayerNorm / RMSNorm layers: eps in the format; internals from their inputs.
  std::map<std::string, NormSite> norms;
  for (auto& lm : s.doc.layers) {
    // A LayerNorm/RMSNorm by what its forward computes (a recognized
    // layer_norm/rms_norm op, or one written out: x / sqrt(mean(x * x) + eps)
    // in a leaf module of its own), or by its class name in a leaf module:
    // a class holding modules is a container whose inputs are not one
    // normalized tensor (transformers' Wav2Vec2EncoderLayerStableLayerNorm,
    // a whole encoder layer given the additive mask of float32's minimum:
    // its "statistic" was the mask's square, PREC006 in fp16, eval57;
    // Wav2Vec2LayerNormConvLayer, a conv + LayerNorm + GELU).
    bool recognized = false;
    if (lm.info.contains("ops") && lm.info["ops"].size() == 1) {
      const std::string op = lm.info["ops"][0].value("op", "");
      recognized = op == "layer_norm" || op == "rms_norm" ||
                   ((op == "layer_norm_pattern" || op == "rms_norm_pattern" || op == "l2_norm_pattern") && lm.leaf);
    }
    if (!recognized && !(lm.leaf && is_layer_norm_like(lm.kind))) continue;
    NormSite n;
    n.path = lm.path;
    n.rms = is_rms(lm);
    n.width = normalized_width(lm);
    if (lm.info.contains("ops") && lm.info["ops"].size() == 1 && lm.info["ops"][0].value("op", "") == "l2_norm_pattern") {
      n.l2 = true;
      const auto& d = lm.info["ops"][0].value("dims", nlohmann::json());
      if (d.is_array())
        for (const auto& e : d)
          if (e.is_number_integer()) n.dims.push_back(e.get<int64_t>());
      if (d.is_string()) n.l2 = false;  // over every axis: not a per-vector norm
    }
    if (lm.info.contains("eps") && lm.info["eps"].is_number()) n.eps = lm.info["eps"].get<double>();
    // PyTorch's fused norm kernels (layer_norm, rms_norm, group_norm)
    // accumulate in fp32 and add eps in fp32 for half inputs; a written-out
    // RMSNorm that upcasts first (LlamaRMSNorm) does too.
    bool fp32_inside = false;
    if (lm.info.contains("ops"))
      for (const auto& o : lm.info["ops"]) {
        const std::string op = o.value("op", "");
        if (op == "layer_norm" || op == "rms_norm" || op == "group_norm" || o.contains("upcast")) fp32_inside = true;
      }
    lm.metrics["prec.norm_fp32_internally"] = fp32_inside;
    n.fp32_inside = fp32_inside;
    if (n.eps) {
      const double e = round_scalar(*n.eps, f);
      lm.metrics["prec.eps_in_format"] = e;
      lm.metrics["prec.eps_vanishes"] = *n.eps > 0 && e == 0;
    }
    norms.emplace(lm.path, std::move(n));
  }

  InstrumentOptions io;
  io.op_taps = false;
  for (const auto& [p, n] : norms) io.inputs_of.push_back(p);
  InstrumentedModel pim(s.model, io);
  const auto& taps = pim.taps();
  // The tensor each norm normalizes: its recognized op's own input where
  // the module holds one norm op, not every tensor the module receives
  // (Qwen3-Next's gated RMSNorm, forward(hidden_states, gate): the gate is
  // an input too; eval49 counted its rows and headroom). Modules known by
  // class name only fall back to their inputs.
  std::map<int64_t, std::string> norm_input_tap;
  std::set<std::string> norm_by_op_input;
  for (const auto& no : pim.norm_ops())
    if (no.input_tap >= 0 && norms.count(no.module) && norm_by_op_input.insert(no.module).second)
      norm_input_tap[no.input_tap] = no.module;
  // The emulated pass: the same taps (same ids), and every op's output
  // rounded to the format, intermediates inside modules included.
  InstrumentOptions io_round = io;
  io_round.round_ops = f.dtype;
  // Also used for the native run, where it only watches for Inf/NaN (the
  // tensors are in the format already).
  auto pim_round = std::make_unique<InstrumentedModel>(s.model, io_round);

  // The fp32 reference: eval mode, dropout off; module outputs kept.
  std::map<int64_t, std::vector<at::Tensor>> ref;
  int64_t ref_bytes = 0;
  bool ref_truncated = false;
  PassSpec rs;
  rs.name = "precision-fp32";
  rs.probe = "precision";
  rs.dropout = false;
  rs.instrumented = &pim;
  // A model whose parameters are in a lower precision (saved after .half())
  // runs its fp32 reference on an fp32 copy: parameters, buffers and float
  // inputs cast up for this pass and put back after it.
  bool low_params = false;
  for (const auto& p : s.model.module.parameters(/*recurse=*/true))
    if (is_low_float(p)) low_params = true;
  std::optional<StateGuard> up;
  if (low_params) {
    up.emplace(s.model.module);
    up->cast(at::kFloat);
    rs.args = args_as(s.arg_values(), [](const at::Tensor& t) {
      return is_low_float(t) ? t.to(at::kFloat) : t.clone();
    });
  } else {
    rs.args = args_as(s.arg_values(), [](const at::Tensor& t) { return t.clone(); });
  }
  rs.tap_hook = [&](const TapSite& site, const at::Tensor& x) {
    if (site.kind != TapKind::kModuleOutput || !x.is_floating_point()) return;
    const int64_t bytes = x.numel() * 4;
    if (ref_bytes + bytes > kReferenceBudgetBytes) {
      ref_truncated = true;
      ref[site.id].push_back(at::Tensor());
      return;
    }
    ref_bytes += bytes;
    ref[site.id].push_back(x.detach().to(at::kFloat).clone());
  };
  PassResult ref_pass;
  try {
    ref_pass = s.run_pass(std::move(rs));
  } catch (const PassError& e) {
    if (!low_params) throw;
    // A traced graph that fixes the saved dtype in its ops (a mask built
    // with dtype=torch.float16) cannot run as an fp32 copy: say so.
    std::string msg = e.what();
    const std::string hint = " (the model's parameters are " + precision +
                             " and the fp32 copy the precision probe compares with could not run: the graph fixes that "
                             "dtype in its ops, as a trace of a .half() model does; export the model in float32 and pass "
                             "--precision " + precision + ")";
    msg.insert(std::min(msg.find('\n'), msg.size()), hint);  // on the first line, which the text report shows
    throw PassError(e.kind(), e.exit_code(), msg, e.pass());
  }
  up.reset();  // the model's own parameters again

  // The sample's real positions, when it is padded: errors are measured
  // there (what a padded position holds is discarded by the loss and the
  // masks; GPT-Neo's padded query rows diverge by 7 % in fp16 while the real
  // ones stay within 0.1 %, eval34 C08). Non-finite values are counted
  // everywhere.
  std::string real_from;
  const at::Tensor real = sample_real_positions(s, real_from);
  // The pass in the format.
  std::map<int64_t, int64_t> calls;
  std::map<std::string, Cmp> cmp;
  int64_t output_calls = 0;  // module-output calls so far in the pass (Cmp::first_bad_call)
  bool emulate = false;
  auto lp_hook = [&](const TapSite& site, const at::Tensor& x) {
    if (site.kind == TapKind::kNormInput) {
      auto it = norm_input_tap.find(site.id);
      if (it != norm_input_tap.end()) norm_internals(x, f, norms.at(it->second));
      return;
    }
    if (site.kind == TapKind::kModuleInput) {
      auto it = norms.find(site.module);
      if (it != norms.end() && !norm_by_op_input.count(site.module)) norm_internals(x, f, it->second);
      return;
    }
    if (site.kind != TapKind::kModuleOutput || !x.is_floating_point()) return;
    Cmp& c = cmp[site.module];
    if (emulate && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble)) {
      try {
        torch::NoGradGuard ng;
        x.detach().copy_(round_to(x.detach(), f));
      } catch (const std::exception&) {
        ++c.unrounded;  // an expanded view cannot be written in place
      }
    }
    const int64_t k = calls[site.id]++;
    const int64_t call_index = output_calls++;
    auto it = ref.find(site.id);
    if (it == ref.end() || k >= static_cast<int64_t>(it->second.size()) || !it->second[static_cast<size_t>(k)].defined() ||
        it->second[static_cast<size_t>(k)].sizes() != x.sizes()) {
      ++c.uncompared;
      return;
    }
    at::Tensor r = it->second[static_cast<size_t>(k)].to(at::kDouble);
    at::Tensor y = x.detach().to(at::kDouble);
    at::Tensor fr = at::isfinite(r), fy = at::isfinite(y);
    at::Tensor both = fr.logical_and(fy).logical_not();
    const int64_t fresh_nonfinite = fr.logical_and(fy.logical_not()).sum().item<int64_t>();
    c.new_nonfinite += fresh_nonfinite;
    if (fresh_nonfinite > 0 && c.first_bad_call < 0) c.first_bad_call = call_index;
    at::Tensor rf = r.masked_fill(fr.logical_not(), 0);
    c.ref_beyond += (rf.abs() > f.max).sum().item<int64_t>();
    if (rf.numel()) c.ref_absmax = std::max(c.ref_absmax, rf.abs().max().item<double>());
    at::Tensor r0 = r.masked_fill(both, 0), y0 = y.masked_fill(both, 0);
    if (real.defined()) {
      const at::Tensor w = real_position_weights(r0, real);
      if (w.defined()) {
        r0 = r0 * w;
        y0 = y0 * w;
      }
    }
    c.num += (y0 - r0).pow(2).sum().item<double>();
    c.den += r0.pow(2).sum().item<double>();
    c.dot += (y0 * r0).sum().item<double>();
    c.lp += y0.pow(2).sum().item<double>();
    ++c.compared;
  };
  auto reset = [&]() {
    calls.clear();
    cmp.clear();
    output_calls = 0;
    for (auto& [p, n] : norms) {
      NormSite fresh;
      fresh.path = n.path;
      fresh.rms = n.rms;
      fresh.width = n.width;
      fresh.eps = n.eps;
      fresh.fp32_inside = n.fp32_inside;
      fresh.l2 = n.l2;
      fresh.dims = n.dims;
      n = fresh;
    }
  };

  PassResult lp_pass;
  bool ran = false;
  std::string native_error, native_after, native_in;
  bool native_in_known = false;
  {
    // Native: parameters, buffers and float inputs cast to the format.
    StateGuard guard(s.model.module);
    guard.cast(f.dtype);
    PassSpec ns;
    ns.name = "precision-" + f.name + "-native";
    ns.probe = "precision";
    ns.dropout = false;
    ns.instrumented = pim_round.get();
    ns.args = args_as(s.arg_values(), [&](const at::Tensor& t) { return t.to(f.dtype); });
    ns.tap_hook = lp_hook;
    try {
      lp_pass = s.run_pass(std::move(ns));
      ran = true;
    } catch (const Error& e) {
      if (e.kind() == error_kind::kTimeout) throw;
      std::string msg = e.what();
      const auto cut = msg.find("\n  inputs given");
      if (cut != std::string::npos) msg = msg.substr(0, cut);
      const auto raised = msg.find("pass: ");
      if (raised != std::string::npos) msg = msg.substr(raised + 6);
      // One line: the "raised after ..." location run_pass adds on its own
      // line reads as a cut-off parenthesis inside the report's sentences.
      for (size_t nl; (nl = msg.find("\n  ")) != std::string::npos;) msg.replace(nl, 3, "; ");
      for (size_t nl; (nl = msg.find('\n')) != std::string::npos;) msg.replace(nl, 1, " ");
      native_error = msg;
      if (s.failed_collector) {
        int64_t last = -1;
        for (const auto& t : taps) {
          const TapRecord& r = s.failed_collector->records()[static_cast<size_t>(t.id)];
          if (t.kind == TapKind::kModuleOutput && r.first_fire > last) {
            last = r.first_fire;
            native_after = t.module;
          }
        }
        const auto train = s.train();
        // A module that had not returned (an output measured in the fp32
        // pass was not measured here) is not the last one that finished.
        if (!native_after.empty() &&
            !module_returned(taps, s.failed_collector->records(), native_after,
                             train && train->collector ? &train->collector->records() : nullptr))
          native_after.clear();
        // The module whose forward raised: the one holding both the last
        // module that finished and the first, in the fp32 train pass's order,
        // that never did (self_attn for a masked_fill between
        // self_attn.linears.2 and self_attn.linears.3).
        if (train && train->collector) {
          int64_t next_fire = -1;
          std::string next;
          for (const auto& t : taps) {
            if (t.kind != TapKind::kModuleOutput) continue;
            const int64_t ref = train->collector->records()[static_cast<size_t>(t.id)].first_fire;
            if (ref < 0 || s.failed_collector->records()[static_cast<size_t>(t.id)].first_fire >= 0) continue;
            if (next_fire < 0 || ref < next_fire) next_fire = ref, next = t.module;
          }
          if (next_fire >= 0) {
            // A container that never runs a forward of its own (a ModuleList
            // holding both) is not where it raised: its nearest ancestor that
            // produced an output in the fp32 pass is.
            auto ran = [&](const std::string& m) {
              if (m.empty()) return true;
              for (const auto& t : taps)
                if (t.kind == TapKind::kModuleOutput && t.module == m &&
                    train->collector->records()[static_cast<size_t>(t.id)].first_fire >= 0)
                  return true;
              return false;
            };
            native_in = native_after.empty() ? next : native_after;
            while (!native_in.empty() && (!within_module(next, native_in) || !ran(native_in)))
              native_in = parent_module(native_in);
            native_in_known = true;
          }
        }
      }
    }
  }
  if (!ran) {
    // Emulated: fp32 kernels, with weights, inputs and every module output
    // rounded to the format.
    reset();
    emulate = true;
    StateGuard guard(s.model.module);
    if (low_params) guard.cast(at::kFloat);  // fp32 kernels for a model saved in the format too
    guard.round(f);
    PassSpec es;
    es.name = "precision-" + f.name + "-emulated";
    es.probe = "precision";
    es.dropout = false;
    es.instrumented = pim_round.get();
    es.args = args_as(s.arg_values(), [&](const at::Tensor& t) {
      return round_to(is_low_float(t) ? t.to(at::kFloat) : t, f);
    });
    es.tap_hook = lp_hook;
    lp_pass = s.run_pass(std::move(es));
  }
  // The producer (first op whose output overflows to Inf, or becomes NaN,
  // in the format) and the propagator (the first op turning it into NaN).
  std::string producer_layer, propagator_layer;
  // The module whose own forward ran the op that made the pass's first
  // NaN/Inf (an Inf or a NaN, whichever came first).
  std::string origin_layer;
  // The producer made NaN (no Inf before it) in an op with a restricted
  // domain: a root or logarithm of a value that is negative in the format
  // although fp32 keeps it non-negative. Not an overflow.
  bool producer_domain = false, producer_variance = false;
  // The producer divides by (or inverts) a statistic plus an eps that is 0
  // in the format: x / sqrt(v + 1e-10) of a zero-variance row is 0/0 there,
  // whatever the values (a weight standardization, a hand-written norm).
  double producer_eps = 0.0;
  // The producer is part of a normalization's statistic (a square, its sum
  // or cumulative sum under the root of a divisor) and overflowed to Inf.
  bool producer_statistic = false;
  // The producer overflowed: it made Inf (not NaN first) in an op that is
  // not an inversion (exp of a large score, a square): the format's range
  // was exceeded inside a module whose outputs stay in range in fp32.
  bool producer_overflow = false, producer_log_zero = false;
  // The producer is a log whose eps (log(x + eps), log(x.clamp(min=eps)))
  // is 0 in the format: that eps; 0 otherwise.
  double producer_log_eps = 0.0;
  if (pim_round) {
    const auto& rs = pim_round->round_sites();
    const Collector& c = *lp_pass.collector;
    // Deliberate masks are no producer (mask_op).
    int64_t inf = -1, nan = -1, inf_count = 0, nan_count = 0;
    int64_t first_event_site = -1;
    for (const auto& ev : c.round_events) {
      if (ev.site < 0 || ev.site >= static_cast<int64_t>(rs.size())) continue;
      // Its NaN, when an earlier op already made NaN, came in with an input
      // (a NaN query row of a norm's 0/0 through the masked baddbmm).
      const bool mask = ev.negative_inf_only && (ev.nan == 0 || nan >= 0) &&
                        mask_op(rs[static_cast<size_t>(ev.site)].op);
      if (mask) continue;
      if (inf < 0 && ev.inf > 0) inf = ev.site, inf_count = ev.inf;
      if (nan < 0 && ev.nan > 0) nan = ev.site, nan_count = ev.nan;
      if (first_event_site < 0 && (ev.inf > 0 || ev.nan > 0)) first_event_site = ev.site;
    }
    if (first_event_site >= 0) origin_layer = rs[static_cast<size_t>(first_event_site)].module;
    if (c.round_events.size() >= 64 && inf < 0 && nan < 0) {
      inf = c.round_first_inf, nan = c.round_first_nan;  // past the first 64: as before
      inf_count = c.round_first_inf_count, nan_count = c.round_first_nan_count;
    }
    const int64_t prod = inf >= 0 ? inf : nan;
    if (prod >= 0 && prod < static_cast<int64_t>(rs.size())) {
      producer_layer = rs[static_cast<size_t>(prod)].module;
      mm["prec.producer_op"] = rs[static_cast<size_t>(prod)].op;
      mm["prec.producer_layer"] = producer_layer;
      mm["prec.producer_makes"] = inf >= 0 ? "inf" : "nan";
      mm["prec.producer_count"] = inf >= 0 ? inf_count : nan_count;
      static const std::set<std::string> domain_ops = {
          "aten::sqrt", "aten::sqrt_", "aten::rsqrt", "aten::rsqrt_", "aten::log", "aten::log_", "aten::log2",
          "aten::log10", "aten::log1p", "aten::pow", "aten::acos", "aten::asin", "aten::atanh", "aten::acosh"};
      const RoundSite& site = rs[static_cast<size_t>(prod)];
      producer_domain = inf < 0 && domain_ops.count(site.op) > 0;
      producer_variance = site.one_pass_variance_root;  // rsqrt(0) is Inf: a zero variance also cancels
      if (site.divisor_eps > 0 && round_scalar(site.divisor_eps, f) == 0) producer_eps = site.divisor_eps;
      producer_statistic = site.norm_statistic && inf >= 0;
      // log of a value that rounded to 0 in the format (softmax
      // probabilities below fp16's smallest subnormal, then log: CTC's
      // log(softmax(x)), eval16): -inf from an underflow, not an overflow.
      static const std::set<std::string> log_ops = {"aten::log", "aten::log_", "aten::log2", "aten::log10"};
      producer_log_zero = inf >= 0 && log_ops.count(site.op) > 0;
      // log(x + eps) with an eps the format rounds to 0 (1e-8 in fp16, whose
      // smallest subnormal is 6e-8): a zero x gives log(0) (eval52
      // se_logpow_fp16_fault: log(|X|^2 + 1e-8) of silent frames, reported
      // as a log of softmax probabilities).
      if (producer_log_zero && site.log_eps > 0 && round_scalar(site.log_eps, f) == 0) producer_log_eps = site.log_eps;
      producer_overflow = inf >= 0 && !inverting_op(site.op) && producer_eps == 0 && !producer_log_zero;
    }
    if (inf >= 0 && nan >= 0 && nan != inf && nan < static_cast<int64_t>(rs.size())) {
      propagator_layer = rs[static_cast<size_t>(nan)].module;
      mm["prec.propagator_op"] = rs[static_cast<size_t>(nan)].op;
      mm["prec.propagator_layer"] = propagator_layer;
    }
    mm["prec.rounded_ops"] = static_cast<int64_t>(rs.size());
  }
  mm["prec.mode"] = emulate ? "emulated" : "native";
  if (!native_error.empty()) {
    const std::string op = missing_kernel_op(native_error);
    mm["prec.native_error"] = native_error;
    if (!op.empty()) mm["prec.native_missing_op"] = op;
    if (!native_after.empty()) mm["prec.native_failed_after"] = native_after;
    // c10's "value cannot be converted to type c10::Half without overflow":
    // a number written into a tensor of the format is beyond its range (the
    // Annotated Transformer's masked_fill(mask == 0, -1e9) on fp16 scores).
    // The model as written cannot run in the format at all.
    mm["prec.native_overflow"] = native_error.find("without overflow") != std::string::npos;
    // The value is float32's own limit, which a trace recorded where the
    // code asks torch.finfo(dtype).min (eval56: HF Longformer in fp16, whose
    // Python code runs in fp16): the file, not the code, is what overflows.
    mm["prec.float32_limit_constant"] = s.inst->float32_limit_constants() && s.model.kind != "scripted";
    if (native_in_known) mm["prec.native_failed_in"] = native_in;
    s.doc.assumptions.push_back("the " + f.name + " forward could not run natively on LibTorch " + libtorch_version() +
                                " (" + (op.empty() ? native_error : op) + "); it was emulated: fp32 kernels with weights, inputs "
                                "and every module output rounded to " + f.name + ", LayerNorm/RMSNorm internals recomputed in " +
                                f.name + " from each norm's input");
  }

  // First-fire order of each module in the low-precision pass.
  for (const auto& t : taps) {
    if (t.kind != TapKind::kModuleOutput) continue;
    const TapRecord& r = lp_pass.collector->records()[static_cast<size_t>(t.id)];
    if (r.first_fire < 0) continue;
    Cmp& c = cmp[t.module];
    if (c.first_fire < 0 || r.first_fire < c.first_fire) c.first_fire = r.first_fire;
  }
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [p, c] : cmp)
    if (c.first_fire >= 0) order.push_back({c.first_fire, p});
  std::sort(order.begin(), order.end());

  // The first module in execution order whose output turned non-finite in
  // the format: ordered by the call that did (Cmp::first_bad_call), not by
  // the module's first call.
  std::string first_bad_path;
  {
    int64_t best = -1;
    for (const auto& [p, c] : cmp)
      if (c.first_bad_call >= 0 && (best < 0 || c.first_bad_call < best) && s.doc.find_layer(p)) {
        best = c.first_bad_call;
        first_bad_path = p;
      }
  }
  std::string first_nonfinite, first_divergent, cause;
  bool found_nonfinite = false;  // first_nonfinite may be "" (the root's own forward)
  for (const auto& [ff, path] : order) {
    LayerMetrics* lm = s.doc.find_layer(path);
    if (!lm) continue;
    const Cmp& c = cmp[path];
    MetricMap& m = lm->metrics;
    const NormSite* n = norms.count(path) ? &norms[path] : nullptr;
    // In an emulated run, the internals in the format decide the output of a
    // norm that computes in the format (not of a fused fp32-internal kernel).
    // The emulated graph rounds every op's output, so a written-out norm
    // already computes in the format there: its internals recomputed from
    // the input (n->nonfinite) explain the cause but are not added again.
    const int64_t norm_bad = 0;
    const int64_t internal_bad = (emulate && n && !n->fp32_inside) ? n->nonfinite : 0;
    const int64_t nonfinite = c.new_nonfinite + norm_bad;
    if (c.compared > 0) {
      const double rel = c.den > 0 ? std::sqrt(c.num / c.den) : (c.num == 0 ? 0.0 : std::numeric_limits<double>::infinity());
      const double cos = (c.den > 0 && c.lp > 0) ? c.dot / std::sqrt(c.den * c.lp) : (c.den == 0 && c.lp == 0 ? 1.0 : 0.0);
      m["prec.rel_error"] = metric_number(rel);
      m["prec.cosine"] = metric_number(cos);
      m["prec.ref_absmax"] = c.ref_absmax;
      m["prec.beyond_max_count"] = c.ref_beyond;
      m["prec.nonfinite_count"] = nonfinite;
      if (!found_nonfinite && nonfinite > 0 && (first_bad_path.empty() || path == first_bad_path)) {
        first_nonfinite = path;
        found_nonfinite = true;
        m["prec.first_nonfinite"] = true;
        const bool eps_gone = m.count("prec.eps_vanishes") && m["prec.eps_vanishes"].get<bool>();
        // The norm's own internals in the format (measured in both modes) explain
        // the non-finite output: eps vanished on zero-variance rows, nothing overflowed.
        const bool norm_explains = n && !n->fp32_inside && (internal_bad > 0 || n->nonfinite > 0);
        if (norm_explains && eps_gone && n->overflow_rows == 0) cause = "norm-eps";
        else if (producer_eps > 0 && c.ref_beyond == 0) cause = "norm-eps";
        else if (c.ref_beyond > 0 || (n && n->overflow_rows > 0) || producer_overflow) cause = "overflow";
        else if (producer_log_zero) cause = "log-underflow";  // a value rounded to 0 in the format, then log (PREC013)
        else if (producer_variance) cause = "variance-cancellation";
        else if (producer_domain) cause = "domain";
        else cause = "other";
        m["prec.first_nonfinite_cause"] = cause;
        if (cause == "log-underflow") {
          // PREC013's clause: which values rounded to 0.
          char eb[160];
          std::snprintf(eb, sizeof eb,
                        ": its eps %.3g is itself 0 in %s (the smallest subnormal is %.3g), so a zero input (a silent "
                        "frame, an empty bin) gives log(0)",
                        producer_log_eps, f.name.c_str(), f.name == "fp16" ? 5.96e-8 : 9.18e-41);
          m["prec.log_eps_vanishes"] = producer_log_eps > 0;
          m["prec.log_zero_note"] = producer_log_eps > 0
                                        ? std::string(eb)
                                        : std::string(" (probabilities below its smallest subnormal), so log(softmax(x)) "
                                                      "or log(sigmoid(x)) must be computed in log space");
          if (producer_log_eps > 0) m["prec.log_eps"] = producer_log_eps;
        }
      }
      if (first_divergent.empty() && !found_nonfinite && nonfinite == 0 && rel > kDivergenceThreshold) {
        first_divergent = path;
        m["prec.first_divergent"] = true;
      }
    }
    if (c.uncompared > 0) m["prec.uncompared_outputs"] = c.uncompared;
    if (c.unrounded > 0) m["prec.unrounded_outputs"] = c.unrounded;
  }
  for (auto& [path, n] : norms) {
    LayerMetrics* lm = s.doc.find_layer(path);
    if (!lm || !n.measured) continue;
    MetricMap& m = lm->metrics;
    m["prec.norm_rows"] = n.rows;
    m["prec.norm_zero_rows"] = n.zero_rows;
    m["prec.norm_nonfinite_count"] = n.nonfinite;
    m["prec.norm_overflow_rows"] = n.overflow_rows;
    m["prec.norm_sumsq_max"] = n.sumsq_max;
    m["prec.norm_sumsq_headroom"] = n.sumsq_max > 0 ? metric_number(f.max / n.sumsq_max) : MetricValue("inf");
  }
  // A norm whose own statistic overflows in the format (the square or the
  // variance of a norm computed in the format) is an eps-precision problem
  // whatever eps is: the producer op lies in a norm that is not fp32 inside.
  if (!producer_layer.empty()) {
    if (LayerMetrics* lm = s.doc.find_layer(producer_layer)) {
      bool norm_in_format = false;
      if (lm->info.contains("ops"))
        for (const auto& o : lm->info["ops"]) {
          const std::string op = o.value("op", "");
          if (op.size() > 8 && op.compare(op.size() - 8, 8, "_pattern") == 0 && !o.contains("upcast")) norm_in_format = true;
        }
      // ... and the statistic itself overflowed (rows whose sum of squares
      // is beyond the format, or the first Inf made by the statistic's own
      // op: pow, var, mean, sum): an rsqrt or a division of a zero variance
      // whose eps vanished is PREC002's, not an overflow.
      auto nit = norms.find(producer_layer);
      const std::string pop = mm.count("prec.producer_op") && mm["prec.producer_op"].is_string()
                                  ? mm["prec.producer_op"].get<std::string>() : std::string();
      const bool inversion = inverting_op(pop);
      // (The op must belong to the statistic: an exp() that overflows in a
      // module that also L2-normalizes q and k, cosine attention with a
      // softmax written out, is no norm's statistic.)
      const bool stat_overflowed = (nit != norms.end() && nit->second.overflow_rows > 0) || (producer_statistic && !inversion);
      // ... or, for a norm the recognizer does not list (Conv-TasNet's
      // cumulative LayerNorm: cumsum of x.pow(2).sum(1) under a root), the
      // first Inf is made by an op of the statistic the module divides by.
      if ((norm_in_format && stat_overflowed) || (producer_statistic && !inversion)) {
        lm->metrics["prec.norm_internal_overflow"] = true;
        lm->metrics["prec.norm_internal_overflow_op"] = mm["prec.producer_op"];
        // A written-out norm the recognizer lists (a LayerNorm, RMSNorm or
        // GroupNorm by hand), which PyTorch's own modules can replace; not a
        // statistic of another kind (StyleGAN2's weight demodulation, a
        // cumulative LayerNorm: eval42 C03 was told to use nn.LayerNorm).
        lm->metrics["prec.norm_replaceable"] = norm_in_format;
        if (nit != norms.end() && nit->second.measured && nit->second.overflow_rows > 0)
          lm->metrics["prec.norm_overflow_note"] = "; the statistic overflows in " + std::to_string(nit->second.overflow_rows) +
                                                   " of " + std::to_string(nit->second.rows) + " rows";
      }
    }
  }
  // A written-out norm computed in the format (no upcast, no fused kernel)
  // whose statistic overflows when it is computed in the format row by row
  // (norm_internals: its squares or their mean beyond the maximum), also
  // when the run's emulation rounded only the norm's output: an RMSNorm
  // squaring a stream channel of 1253 in fp16 gives rsqrt(inf) = 0 and
  // zero rows natively, and no Inf reaches any output (eval44: HF Llama's
  // RMSNorm without its fp32 upcast, 27 of 32 rows, missed).
  for (auto& [path, n] : norms) {
    if (!n.measured || n.fp32_inside || n.overflow_rows == 0) continue;
    LayerMetrics* lm = s.doc.find_layer(path);
    if (!lm || (lm->metrics.count("prec.norm_internal_overflow") && lm->metrics["prec.norm_internal_overflow"] == true)) continue;
    lm->metrics["prec.norm_internal_overflow"] = true;
    lm->metrics["prec.norm_internal_overflow_op"] = n.rms || n.l2 ? std::string("the square of its input")
                                                                  : std::string("the square of its centered input");
    lm->metrics["prec.norm_overflow_note"] = "; the statistic overflows in " + std::to_string(n.overflow_rows) + " of " +
                                             std::to_string(n.rows) + " rows, computed in the format";
    lm->metrics["prec.norm_replaceable"] = true;
  }
  // A division by a statistic plus eps made the first NaN/Inf, and eps is 0
  // in the format: the eps-precision problem of a norm the recognizer does
  // not list as one (a weight standardization, x / (x.std() + eps)). A
  // recognized norm whose eps vanished is PREC002's already.
  if (producer_eps > 0 && !producer_layer.empty()) {
    if (LayerMetrics* lm = s.doc.find_layer(producer_layer)) {
      MetricMap& m = lm->metrics;
      const bool norm_rule = m.count("prec.eps_vanishes") && m["prec.eps_vanishes"].is_boolean() && m["prec.eps_vanishes"].get<bool>();
      if (!norm_rule) {
        m["prec.divisor_eps_vanishes"] = true;
        m["prec.divisor_eps"] = producer_eps;
        m["prec.divisor_eps_in_format"] = round_scalar(producer_eps, f);
        m["prec.divisor_eps_op"] = mm["prec.producer_op"];
        m["prec.divisor_nonfinite_count"] = mm["prec.producer_count"];
      }
    }
  }
  // An op inside a module overflowed to Inf in the format while the
  // module's own output stayed finite (the square inside a norm, a sum of
  // squares, an exp): the module's result in the format is wrong although
  // no output shows it. Inversions (rsqrt, reciprocal, division) are left
  // out: their Inf is a division by a zero that rounding made, not an
  // overflow.
  if (!producer_layer.empty() && mm.count("prec.producer_makes") && mm["prec.producer_makes"] == "inf") {
    const std::string pop = mm["prec.producer_op"].is_string() ? mm["prec.producer_op"].get<std::string>() : std::string();
    const bool inversion = inverting_op(pop);
    auto it = cmp.find(producer_layer);
    LayerMetrics* lm = s.doc.find_layer(producer_layer);
    if (!inversion && lm && it != cmp.end() && it->second.compared > 0 && it->second.new_nonfinite == 0) {
      lm->metrics["prec.internal_overflow"] = true;
      // Whether that op is the module's normalizing statistic: then PREC006
      // names the one cause and PREC009 steps aside (eval42's StyleGAN2
      // demodulation sum got both findings).
      if (!lm->metrics.count("prec.norm_internal_overflow")) lm->metrics["prec.norm_internal_overflow"] = false;
      lm->metrics["prec.internal_overflow_op"] = pop;
      lm->metrics["prec.internal_overflow_count"] = mm["prec.producer_count"];
    }
  }
  // A one-pass variance (E[x^2] - E[x]^2) that goes negative in the format:
  // the norm's statistic is lost to cancellation, whatever eps is.
  if (producer_variance && !producer_layer.empty()) {
    if (LayerMetrics* lm = s.doc.find_layer(producer_layer)) {
      lm->metrics["prec.variance_cancellation"] = true;
      lm->metrics["prec.variance_cancellation_op"] = mm["prec.producer_op"];
      lm->metrics["prec.variance_cancellation_count"] = mm["prec.producer_count"];
    }
  }
  // The first non-finite values made by an op in the own forward of a
  // module holding the first non-finite module (OPT's fp16 attention: the
  // combined mask overflows and the softmax makes NaN in self_attn's
  // forward, whose out_proj only carries them on): the finding names the
  // module that made them, and the child where they first showed.
  if (!first_nonfinite.empty() && !origin_layer.empty() && first_nonfinite.rfind(origin_layer + ".", 0) == 0) {
    LayerMetrics* child = s.doc.find_layer(first_nonfinite);
    LayerMetrics* parent = s.doc.find_layer(origin_layer);
    if (child && parent) {
      MetricMap& cm = child->metrics;
      MetricMap& pm = parent->metrics;
      for (const char* k : {"prec.first_nonfinite", "prec.first_nonfinite_cause"})
        if (cm.count(k)) {
          pm[k] = cm[k];
          cm.erase(k);
        }
      // Its output holds what the child's did.
      for (const char* k : {"prec.nonfinite_count", "prec.ref_absmax", "prec.beyond_max_count"})
        if (cm.count(k) && (!pm.count(k) || (pm[k].is_number() && pm[k].get<double>() == 0))) pm[k] = cm[k];
      pm["prec.first_seen_at"] = first_nonfinite;
      first_nonfinite = origin_layer;
    }
  }
  if (found_nonfinite) {
    if (LayerMetrics* lm = s.doc.find_layer(first_nonfinite)) {
      lm->metrics["prec.nonfinite_in_format"] = true;
      if (mm.count("prec.producer_op")) {
        lm->metrics["prec.producer"] = mm["prec.producer_op"].get<std::string>() + " in " + (producer_layer.empty() ? std::string("the root module") : producer_layer);
        // PREC005's clause; absent where no op was seen overflowing (a
        // native run: no op-level view), not "is n/a" (eval20 case 01).
        lm->metrics["prec.producer_note"] = "; the first op to turn NaN/Inf is " + lm->metrics["prec.producer"].get<std::string>();
      }
      if (!propagator_layer.empty()) lm->metrics["prec.propagator"] = mm["prec.propagator_op"].get<std::string>() + " in " + propagator_layer;
    }
  }
  // The same batch under torch.autocast (InstrumentOptions::round_autocast:
  // only what autocast computes in the format is rounded; exp, log, pow,
  // softmax, sums and norms stay fp32). A non-finite forward in a pass that
  // rounds every op is the .half() case (fp16 weights: fp16 serving, or
  // training without autocast); whether autocast, the usual way to train in
  // fp16 with a GradScaler, would see it too decides the fix (eval51
  // mtl_uncertainty_fault: exp(-log_var) of a Kendall uncertainty weight
  // overflows under .half(), autocast keeps it in fp32). Not for a model
  // saved in the format, which is the .half() case itself.
  if (found_nonfinite && !low_params) {
    std::string ac_state;
    try {
      InstrumentOptions io_ac = io;
      io_ac.round_ops = f.dtype;
      io_ac.round_autocast = true;
      InstrumentedModel pim_ac(s.model, io_ac);
      StateGuard guard(s.model.module);
      guard.round(f);  // the weights a product casts; fp32 ops see them within the format's rounding
      PassSpec as;
      as.name = "precision-" + f.name + "-autocast";
      as.probe = "precision";
      as.dropout = false;
      as.instrumented = &pim_ac;
      as.args = args_as(s.arg_values(), [](const at::Tensor& t) { return t.clone(); });  // fp32: the first product casts them
      PassResult ap = s.run_pass(std::move(as));
      int64_t bad = 0;
      const auto& ars = pim_ac.round_sites();
      for (const auto& ev : ap.collector->round_events) {
        if (ev.site < 0 || ev.site >= static_cast<int64_t>(ars.size())) continue;
        // A deliberate -inf mask is no overflow (as for the pass above).
        if (ev.negative_inf_only && ev.nan == 0 && mask_op(ars[static_cast<size_t>(ev.site)].op)) continue;
        bad += ev.inf + ev.nan;
      }
      auto nonfinite = [](const c10::IValue& v) {
        int64_t n = 0;
        for (const at::Tensor& t : Session::output_tensors(v))
          if (t.is_floating_point()) n += (~at::isfinite(t.detach())).sum().item<int64_t>();
        return n;
      };
      const int64_t out_bad = std::max<int64_t>(0, nonfinite(ap.output) - nonfinite(ref_pass.output));
      ac_state = bad == 0 && out_bad == 0 ? "finite" : "nonfinite";
      mm["prec.autocast_nonfinite_count"] = bad;
    } catch (const Error& e) {
      if (e.kind() == error_kind::kTimeout) throw;
      ac_state = "not run";
      mm["prec.autocast_error"] = std::string(e.what()).substr(0, 300);
    }
    mm["prec.autocast_finite"] = ac_state == "finite" ? MetricValue(true)
                                 : ac_state == "nonfinite" ? MetricValue(false) : MetricValue("n/a");
    if (LayerMetrics* lm = s.doc.find_layer(first_nonfinite)) {
      lm->metrics["prec.autocast_finite"] = mm["prec.autocast_finite"];
      if (ac_state == "finite")
        lm->metrics["prec.autocast_note"] =
            std::string("; this is the .half() case: under torch.autocast, which keeps exp, log, pow, softmax, sums "
                        "and norms in fp32 and casts only products and convolutions to ") + f.name +
            ", the same batch stays finite (checked)";
      else if (ac_state == "nonfinite")
        lm->metrics["prec.autocast_note"] = "; under torch.autocast too (checked)";
    }
  }
  mm["prec.forward_finite"] = !found_nonfinite;
  if (found_nonfinite) {
    mm["prec.first_nonfinite_layer"] = first_nonfinite;
    mm["prec.first_nonfinite_cause"] = cause;
    // No loss scale can help when the forward pass itself is non-finite.
    if (f.name == "fp16") mm["prec.loss_scale_blocked_by"] = first_nonfinite;
  }
  const double out_rel = Session::relative_difference(lp_pass.output, ref_pass.output, /*ids=*/false, real);
  mm["prec.output_rel_error"] = metric_number(out_rel);
  // "At the real positions" only where an output has the mask's positions
  // (eval53 D1: BART's decoder logits [B, 12, V] beside the encoder's mask
  // [B, 16], CLIP's logits_per_image [B, B]: compared whole).
  bool output_positions = false;
  if (real.defined())
    for (const at::Tensor& t : Session::output_tensors(lp_pass.output)) output_positions = output_positions || indexes_positions(t, real);
  if (output_positions) mm["prec.real_positions_from"] = real_from;
  // The relative error covers the elements finite in both: say how many are
  // not (a NaN output next to a small error reads as healthy otherwise).
  int64_t out_nonfinite = 0;
  {
    auto bad = [](const c10::IValue& v) {
      int64_t n = 0;
      for (const at::Tensor& t : Session::output_tensors(v))
        if (t.is_floating_point()) n += (~at::isfinite(t.detach())).sum().item<int64_t>();
      return n;
    };
    out_nonfinite = std::max<int64_t>(0, bad(lp_pass.output) - bad(ref_pass.output));
    mm["prec.output_nonfinite_count"] = out_nonfinite;
  }
  // A module that diverges while the model's output stays within the
  // threshold is no origin of a divergence: what it computes does not reach
  // the output in that size, or its calls no longer line up with fp32's (a
  // mixture-of-experts layer where one token of 96 took other experts in
  // bf16 compares different tokens row by row: OLMoE's experts.act_fn at
  // 1.14 next to an output error of 0.008, eval34 C11). Kept in the layer's
  // prec.rel_error, not named as the first divergent module.
  if (!first_divergent.empty() && std::isfinite(out_rel) && out_rel <= kDivergenceThreshold && out_nonfinite == 0) {
    if (LayerMetrics* lm = s.doc.find_layer(first_divergent)) lm->metrics.erase("prec.first_divergent");
    mm["prec.internal_divergence_layer"] = first_divergent;
    first_divergent.clear();
  }
  if (!first_divergent.empty()) mm["prec.first_divergent_layer"] = first_divergent;
  if (ref_truncated)
    s.doc.assumptions.push_back("the precision probe kept fp32 module outputs up to 2 GiB; later modules were not compared");

  nlohmann::json probe = {{"format", f.name}, {"mode", emulate ? "emulated" : "native"},
                          {"divergence_threshold", kDivergenceThreshold}};
  if (!native_error.empty()) probe["native_error"] = native_error;
  if (found_nonfinite) probe["first_nonfinite_layer"] = first_nonfinite;
  if (!first_divergent.empty()) probe["first_divergent_layer"] = first_divergent;
  s.doc.probes["precision"] = probe;
}

const std::vector<std::string>& precision_writes() {
  static const std::vector<std::string> names = {
      "norm.next_input_rms", "norm.next_layer", "norm.next_layer_absmax", "norm.next_layer_fp16_headroom",
      "prec."};
  return names;
}

}  // namespace nd
