// The forward+backward measurement: one train-mode pass with the loss and
// backward gives activations, output gradients and parameter gradients for
// every module; a targeted second pass runs only when a NaN/Inf appeared,
// to measure the inputs of the module where it started.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <limits>
#include <optional>
#include <iomanip>
#include <regex>
#include <sstream>
#include <set>

#include "core/error.h"
#include "probes/forward_backward/forward_backward.h"
#include "probes/session.h"

namespace nd {
namespace {

/// Ops whose domain ends at -inf: log(0), x / 0, a negative power of 0. A
/// -inf they make is an error, where a -inf alone is otherwise a mask fill
/// (masked_fill(mask, -inf), an additive -inf mask; eval46 depth_relu: the
/// log of a ReLU head's exact zeros).
const std::set<std::string> kDomainEndOps = {"aten::log", "aten::log2", "aten::log10", "aten::log1p", "aten::xlogy",
                                             "aten::div", "aten::div_", "aten::reciprocal", "aten::pow", "aten::rsqrt"};

double finite_or(double v, double fallback) { return std::isfinite(v) ? v : fallback; }

std::string layer_label(const std::string& path) { return path.empty() ? "<root>" : path; }

/// ACT002's threshold (rules/ACT002.toml): three orders of magnitude.
constexpr double kGrowthGate = 1000.0;


struct ParamGrad {
  int64_t params = 0, without = 0, zero = 0, nonfinite = 0;
  int64_t silenced = 0;  ///< zero-gradient parameters explained by deliberate zero initialization
  int64_t cancelled = 0; ///< zero-gradient biases a train-mode BatchNorm cancels
  int64_t shift_invariant = 0; ///< zero under cross-entropy only (PassResult::shift_invariant_only)
  int64_t other_outputs = 0; ///< no (or an all-zero) gradient from the loss, but a gradient from an output the loss does not read
  int64_t unread = 0;        ///< no gradient, and forward's graph never reads the parameter (parameters_never_read)
  int64_t behind_detach = 0; ///< no gradient, and every route to the output passes a detach (parameters_behind_detach)
  int64_t behind_index = 0;  ///< no gradient, and every route ends in selection indices or comparisons (no detach)
  std::string unread_names;  ///< their names (first six), comma-separated
  /// All-zero gradients of parameters the forward only writes where a mask
  /// selects (parameters_written_by_mask): this batch's mask selected none.
  int64_t mask_written = 0;
  std::string mask_written_names;  ///< their names (first six), comma-separated
  // Weights of 2+ dims (matrices, kernels; LARS-style, biases and gains left
  // out): the gradient-to-weight ratio, and rows of the gradient that are
  // exactly zero (an embedding's gradient touches only the rows of the batch's tokens).
  double w2_sumsq = 0, g2_sumsq = 0;
  int64_t rows = 0, zero_rows = 0;
  double sumsq = 0, absmax_param = 0;
  int64_t param_nonfinite = 0, param_numel = 0;
  int64_t zero_weights = 0;      ///< all-zero gradients of parameters not named "bias"
  int64_t zero_biases = 0;       ///< all-zero gradients of parameters named "bias"
  int64_t live_biases = 0;       ///< "bias" parameters with a nonzero gradient
};

/// True when weight `w` (2+ dims) looks like a fixed signal transform rather
/// than learned or randomly initialized weights: more than 10% of its
/// elements exactly zero, or fewer than half of them distinct in magnitude.
/// EDSR's MeanShift (a frozen diagonal 1x1 conv: 6 of 9 zeros), a blur or
/// one-hot kernel, a mel filterbank, or whole numbers everywhere (YOLOv8's
/// DFL bins 0..15). Random init and trained weights have no exact zeros,
/// nearly all magnitudes distinct and fractional values.
bool structured_weight(const at::Tensor& w) {
  const at::Tensor a = w.detach().abs().flatten().to(at::kDouble);
  const double n = static_cast<double>(a.numel());
  const double zeros = static_cast<double>(a.eq(0).sum().item<int64_t>());
  const double distinct = static_cast<double>(std::get<0>(at::_unique(a, /*sorted=*/false)).numel());
  // Whole numbers everywhere: a fixed operator written as a layer (YOLOv8's
  // DFL conv holds the bin indices 0..15 and takes the expectation of the
  // distance distribution, eval40), never trained weights.
  const bool integers = a.numel() > 0 && a.eq(a.round()).all().item<bool>();
  return zeros > 0.1 * n || distinct < 0.5 * n || integers;
}

ParamGrad param_grads(const torch::jit::Module& m, const PassResult& pass, const std::set<const void*>& silenced,
                      const std::set<const void*>& cancelled, const std::set<const void*>& never_read,
                      const std::set<const void*>& behind_detach, const std::set<const void*>& behind_index,
                      const std::set<const void*>& mask_written) {
  ParamGrad pg;
  for (const auto& p : m.named_parameters(/*recurse=*/false)) {
    const at::Tensor w = p.value;
    if (w.numel()) {
      const TensorStats ws = compute_stats(w.detach());
      pg.absmax_param = std::max(pg.absmax_param, ws.absmax());
      pg.param_nonfinite += ws.nonfinite();
      pg.param_numel += w.numel();
    }
    if (!w.requires_grad()) continue;
    ++pg.params;
    const at::Tensor g = pass.grad_of(w);
    if (!g.defined()) {
      ++pg.without;
      // Not connected to the loss, but reached through a deliberate zero
      // (found with the zeros lifted: ControlNet's trunk feeds only the
      // other outputs, through zero convs) or by the other outputs.
      if (silenced.count(w.unsafeGetTensorImpl())) ++pg.silenced;
      else if (pass.reach_other_outputs_only.count(w.unsafeGetTensorImpl())) ++pg.other_outputs;
      else if (never_read.count(w.unsafeGetTensorImpl())) {
        if (++pg.unread <= 6) pg.unread_names += (pg.unread > 1 ? ", " : "") + p.name;
        else if (pg.unread == 7) pg.unread_names += ", ...";
      }
      else if (behind_detach.count(w.unsafeGetTensorImpl())) ++pg.behind_detach;
      else if (behind_index.count(w.unsafeGetTensorImpl())) ++pg.behind_index;
      continue;
    }
    const TensorStats gs = compute_stats(g.detach());
    if (w.dim() >= 2 && w.numel() > 0 && gs.nonfinite() == 0) {
      pg.w2_sumsq += compute_stats(w.detach()).sumsq;
      pg.g2_sumsq += gs.sumsq;
      pg.rows += w.size(0);
      pg.zero_rows += g.detach().reshape({w.size(0), -1}).ne(0).any(1).logical_not().sum().item<int64_t>();
    }
    const bool is_bias = p.name == "bias";
    if (gs.nonfinite() == 0 && gs.zeros == gs.numel) {
      (is_bias ? pg.zero_biases : pg.zero_weights)++;
      ++pg.zero;
      if (silenced.count(w.unsafeGetTensorImpl())) ++pg.silenced;
      else if (cancelled.count(w.unsafeGetTensorImpl())) ++pg.cancelled;
      else if (pass.shift_invariant_only.count(w.unsafeGetTensorImpl())) ++pg.shift_invariant;
      else if (pass.reach_other_outputs_only.count(w.unsafeGetTensorImpl())) ++pg.other_outputs;
      else if (mask_written.count(w.unsafeGetTensorImpl())) {
        if (++pg.mask_written <= 6) pg.mask_written_names += (pg.mask_written > 1 ? ", " : "") + p.name;
        else if (pg.mask_written == 7) pg.mask_written_names += ", ...";
      }
    } else if (is_bias) {
      ++pg.live_biases;
    }
    pg.nonfinite += gs.nonfinite();
    pg.sumsq += gs.sumsq;
  }
  return pg;
}

void put_stats(MetricMap& m, const std::string& prefix, const TensorStats& s) {
  m[prefix + ".numel"] = s.numel;
  m[prefix + ".min"] = s.finite() ? s.min : 0.0;
  m[prefix + ".max"] = s.finite() ? s.max : 0.0;
  m[prefix + ".absmax"] = s.absmax();
  m[prefix + ".mean"] = s.mean();
  m[prefix + ".rms"] = s.rms();
  m[prefix + ".std"] = s.std();
  m[prefix + ".nan_count"] = s.nan;
  m[prefix + ".inf_count"] = s.inf;
  m[prefix + ".nonfinite_count"] = s.nonfinite();
}

// p-th quantile (0..1) of a 1-D tensor's values.
double quantile_of(const at::Tensor& v, double q) {
  at::Tensor s = std::get<0>(v.flatten().to(at::kDouble).sort());
  const int64_t n = s.numel();
  if (n == 0) return 0;
  const double pos = q * static_cast<double>(n - 1);
  const int64_t lo = static_cast<int64_t>(std::floor(pos)), hi = std::min(n - 1, lo + 1);
  const double a = s[lo].item<double>(), b = s[hi].item<double>();
  return a + (b - a) * (pos - static_cast<double>(lo));
}

/// What in a module's own state makes its output non-finite from finite
/// inputs, as a clause for ACT001's message ("; ..."), or "": parameters or
/// buffers that hold NaN/Inf, and a normalization with running statistics
/// whose running_var + eps is 0 in some channel (rsqrt(0) = inf: torchvision's
/// FrozenBatchNorm2d had eps = 0 until 0.8, pytorch/vision#2933, and a
/// channel dead in pretraining has running_var 0).
std::string nonfinite_state_note(const Session& s, const InstrumentedModel& im, const std::string& module) {
  const ModuleInfo* info = nullptr;
  for (const auto& mi : s.model.modules)
    if (mi.path == module) info = &mi;
  if (!info || !info->module._ivalue()) return "";
  std::string out;
  auto tensors = [&](auto&& list, const char* what) {
    for (const auto& t : list) {
      if (!t.value.defined() || !t.value.is_floating_point() || t.value.numel() == 0) continue;
      const int64_t bad = (~t.value.detach().isfinite()).sum().template item<int64_t>();
      if (bad > 0)
        out += std::string("; its ") + what + " " + t.name + " holds " + std::to_string(bad) + " non-finite values";
    }
  };
  tensors(info->module.named_parameters(/*recurse=*/false), "parameter");
  tensors(info->module.named_buffers(/*recurse=*/false), "buffer");
  if (!out.empty()) return out;
  const torch::jit::Module& mod = info->module;
  if (!mod.hasattr("running_var") || !mod.attr("running_var").isTensor()) return "";
  const at::Tensor rv = mod.attr("running_var").toTensor().detach().to(at::kDouble);
  std::optional<double> eps;
  for (const auto& n : im.norm_ops())
    if (n.module == module && n.args.contains("eps") && n.args["eps"].is_number()) eps = n.args["eps"].get<double>();
  if (!eps && mod.hasattr("eps") && mod.attr("eps").isDouble()) eps = mod.attr("eps").toDouble();
  if (!eps) return "";
  const int64_t zero = (rv + *eps <= 0).sum().item<int64_t>();
  if (zero == 0) return "";
  std::ostringstream o;
  o << "; running_var + eps is 0 or below in " << zero << " of " << rv.numel()
    << " channels (eps " << *eps << "), so rsqrt(running_var + eps) is inf there";
  return o.str();
}

/// `x` replaced for the discard check: -x + N(0, 1) * scale, scale the
/// larger of x's standard deviation and mean magnitude (1e-3 at least), the
/// noise drawn from a generator seeded with `seed`. Neither a rescaling (a
/// norm after it would cancel one) nor small: a ReLU that x leaves dead
/// everywhere comes alive, so only a model that never reads x keeps its
/// outputs. Undefined (no edit) for non-floating, empty or non-finite x.
at::Tensor discard_probe_value(const at::Tensor& x, uint64_t seed) {
  if (!x.defined() || !x.is_floating_point() || x.numel() == 0 || x.is_nested()) return at::Tensor();
  at::NoGradGuard ng;
  const at::Tensor xd = x.detach().to(at::kDouble);
  if (!at::isfinite(xd).all().item<bool>()) return at::Tensor();
  const double scale = std::max({xd.numel() > 1 ? xd.std().item<double>() : 0.0, xd.mean().abs().item<double>(), 1e-3});
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const at::Tensor noise = at::randn(x.sizes(), gen, at::TensorOptions().dtype(at::kFloat)).to(x.device());
  return (noise.to(at::kDouble) * scale - xd).to(x.scalar_type());
}

/// The largest change between two outputs of the same structure, relative
/// to the reference's largest finite magnitude: 0 when every tensor is
/// identical; +inf when their structure, shapes, integer values or the
/// places of NaN/Inf differ.
double output_change(const c10::IValue& ref, const c10::IValue& other) {
  const auto ta = Session::output_tensors(ref), tb = Session::output_tensors(other);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (ta.size() != tb.size()) return kInf;
  double diff = 0, mag = 0;
  for (size_t i = 0; i < ta.size(); ++i) {
    if (ta[i].sizes() != tb[i].sizes() || ta[i].is_floating_point() != tb[i].is_floating_point()) return kInf;
    if (ta[i].numel() == 0) continue;
    if (!ta[i].is_floating_point()) {
      if (!ta[i].equal(tb[i])) return kInf;
      continue;
    }
    const at::Tensor a = ta[i].detach().to(at::kDouble).cpu(), b = tb[i].detach().to(at::kDouble).cpu();
    const at::Tensor fa = at::isfinite(a), fb = at::isfinite(b);
    if (!fa.equal(fb) || !at::isnan(a).equal(at::isnan(b))) return kInf;
    if (!fa.any().item<bool>()) continue;
    const at::Tensor d = (a - b).abs().masked_select(fa);
    diff = std::max(diff, d.max().item<double>());
    mag = std::max(mag, a.abs().masked_select(fa).max().item<double>());
  }
  return diff == 0 ? 0.0 : diff / std::max(mag, 1e-30);
}

/// The spec of a forward in the train pass's mode, dropout off, no backward,
/// never served from the cache (an edit that changes nothing): the reference
/// of the output-replacement tests, and their base.
PassSpec replacement_pass_spec(const std::string& name) {
  PassSpec spec;
  spec.name = name;
  spec.probe = "forward_backward";
  spec.train_mode = true;
  spec.dropout = false;
  spec.tap_edit = [](const TapSite&, const at::Tensor&) { return at::Tensor(); };
  return spec;
}

/// A Collector::edit replacing every output of module `path` with
/// discard_probe_value (seeded `seed` + the count so far), or with NaN
/// everywhere when `nan`; `edits` counts the replacements made (0: the
/// module gave no floating output).
std::function<at::Tensor(const TapSite&, const at::Tensor&)> replace_module_output(const std::string& path,
                                                                                   std::shared_ptr<int64_t> edits,
                                                                                   uint64_t seed, bool nan = false) {
  return [path, edits, seed, nan](const TapSite& site, const at::Tensor& x) {
    if (site.kind != TapKind::kModuleOutput || site.module != path) return at::Tensor();
    at::Tensor y = discard_probe_value(x, seed + static_cast<uint64_t>(*edits));
    if (y.defined() && nan) y = at::full_like(y, std::numeric_limits<double>::quiet_NaN());
    if (y.defined()) ++*edits;
    return y;
  };
}

/// Whether `other` holds a NaN or Inf where `ref` holds a finite value, in
/// any floating tensor of the same shape.
bool gains_nonfinite(const c10::IValue& ref, const c10::IValue& other) {
  const auto ta = Session::output_tensors(ref), tb = Session::output_tensors(other);
  if (ta.size() != tb.size()) return true;
  for (size_t i = 0; i < ta.size(); ++i) {
    if (!ta[i].is_floating_point() || !tb[i].is_floating_point() || ta[i].sizes() != tb[i].sizes()) continue;
    if ((at::isfinite(ta[i]) & at::isfinite(tb[i]).logical_not()).any().item<bool>()) return true;
  }
  return false;
}

}  // namespace

void build_inventory(Session& s) {
  std::map<std::string, size_t> idx;
  // Module records in named_modules() order.
  for (const auto& mi : s.model.modules) {
    LayerMetrics lm;
    lm.path = mi.path;
    lm.kind = mi.kind;
    lm.leaf = mi.leaf;
    lm.parameters = mi.parameters;
    lm.info = module_facts(mi);
    lm.info["training"] = mi.training;
    idx[mi.path] = s.doc.layers.size();
    s.doc.layers.push_back(std::move(lm));
  }
  // Normalization ops found in the graph (eps etc. from the op itself: traced
  // modules keep no attributes).
  for (const auto& no : s.inst->norm_ops()) {
    auto it = idx.find(no.module);
    if (it == idx.end()) continue;
    auto& info = s.doc.layers[it->second].info;
    if (!info.contains("ops")) info["ops"] = nlohmann::json::array();
    nlohmann::json o = no.args;
    o["op"] = no.op;
    info["ops"].push_back(o);
    if (!info.contains("eps") && no.args.contains("eps") && no.args["eps"].is_number()) info["eps"] = no.args["eps"];
  }

}


/// run.trained: whether the evidence says the model has been trained, not
/// freshly initialized. Sharp attention, a growing residual stream and
/// near-one-hot softmax rows are failure modes at initialization
/// ("softmax-collapse: ... before the model has learned", failure-modes.md)
/// and what training produces on purpose afterwards (learned attention to
/// one key, massive activations, confident predictions). Evidence: a
/// cross-entropy against --target below 0.7 of a uniform prediction's
/// ln(C) (the model predicts far better than chance: an initialized model's
/// loss sits at ln(C) or above; 0.7, not 0.5, because part of a target can
/// be unpredictable by design, a copy task's first half at ln(256), eval37
/// C01 read a trained copy model at 0.53 of chance as untrained), or a saved optimizer
/// state of 100 or more steps (past the warm-up of common recipes; a
/// normdoctor choice). Without either the model is taken as untrained, and
/// run.trained_from says what was missing.
/// The share of ln(C) below which a cross-entropy shows training (run.trained).
constexpr double kTrainedLossShare = 0.7;

static void record_training_evidence(Session& s, double loss, double chance) {
  std::string from;
  if (std::isfinite(loss) && std::isfinite(chance) && chance > 0 && loss < kTrainedLossShare * chance) {
    std::ostringstream m;
    m << "the loss against --target, " << loss << ", is below 0.7 of a uniform prediction's ln(C) = " << chance;
    from = m.str();
  }
  double steps = 0;
  if (s.optimizer)
    for (const auto& [k, st] : s.optimizer->by_param) steps = std::max(steps, st.step);
  if (from.empty() && steps >= 100) {
    std::ostringstream m;
    m << "the saved optimizer state is at step " << steps;
    from = m.str();
  }
  s.doc.model_metrics["run.trained"] = !from.empty();
  s.doc.model_metrics["run.trained_from"] =
      !from.empty() ? from
                    : std::string("nothing says the model was trained (no cross-entropy against --target below 0.7 of "
                                  "chance, no saved optimizer state of 100 or more steps): judged as at initialization");
  // What was checked and not found, as the options given allow: a note that
  // asks for --target when it was given contradicts the command line (eval23
  // cases 06 and 10).
  if (from.empty()) {
    std::ostringstream m;
    m << std::setprecision(3) << " (judged as at initialization: ";
    if (std::isfinite(loss) && std::isfinite(chance) && chance > 0)
      m << "the cross-entropy against --target, " << loss << ", is not below 0.7 of a uniform prediction's ln(C) = "
        << chance << ", and no saved optimizer state of 100 or more steps says otherwise; --optimizer-state would)";
    else if (!s.opt.target_file.empty())
      m << "the loss against --target is not a cross-entropy over classes, so it cannot be compared with chance, and no "
           "saved optimizer state of 100 or more steps says the model was trained; --optimizer-state would)";
    else if (!s.opt.weights.empty())
      m << "the weights loaded with --weights do not say how long the model trained; --target or "
           "--optimizer-state would)";
    else
      m << "nothing says the model was trained; --target or --optimizer-state would)";
    s.doc.model_metrics["run.trained_note"] = m.str();
  }
  if (std::isfinite(chance)) s.doc.model_metrics["loss.chance"] = chance;
}

/// The module whose own backward made the gradient non-finite, when the
/// module output first holding a non-finite gradient (`fallback`) is read by
/// ops outside any single module (a view in the root's forward, whose result
/// a BatchNorm neck and a triplet loss both read; eval31 C02): a targeted
/// train pass taps the inputs of every module that ran after it, and the
/// module whose input gradient is non-finite while every gradient of its own
/// outputs (`recs`, the train pass) is finite made it; the innermost such
/// module when they nest. `fallback` when none or several are found, or when
/// the pass fails.
static std::string nonfinite_gradient_producer(Session& s, const std::vector<TapSite>& taps,
                                               const std::vector<TapRecord>& recs, const std::string& fallback) {
  std::map<std::string, int64_t> order;
  for (const auto& l : s.doc.layers) order[l.path] = l.exec_order;
  const int64_t after = order.count(fallback) ? order[fallback] : -1;
  std::map<std::string, bool> outputs_finite;
  for (const auto& t : taps)
    if (t.kind == TapKind::kModuleOutput && !t.module.empty()) {
      const bool fin = recs[static_cast<size_t>(t.id)].grad.nonfinite() == 0;
      auto [it, fresh] = outputs_finite.emplace(t.module, fin);
      if (!fresh) it->second = it->second && fin;
    }
  std::vector<std::string> candidates;
  for (const auto& [m, fin] : outputs_finite) {
    auto it = order.find(m);
    if (!fin || it == order.end() || it->second <= after || fallback.rfind(m + ".", 0) == 0) continue;
    candidates.push_back(m);
  }
  if (candidates.empty() || candidates.size() > 512) return fallback;
  try {
    InstrumentOptions io;
    io.op_taps = false;
    io.inputs_of = candidates;
    InstrumentedModel probe(s.model, io);
    PassSpec ps = train_pass_spec();
    ps.name = "train-inputs-of-modules-after-nonfinite-gradient";
    ps.features = false;
    ps.instrumented = &probe;
    // A tap hands its input on unchanged, so a hook there sees the gradient
    // of every use summed; each module input is handed on as its own view
    // instead, whose gradient is that module's share alone.
    std::set<std::string> bad;
    ps.tap_edit = [&bad](const TapSite& site, const at::Tensor& x) -> at::Tensor {
      if (site.kind != TapKind::kModuleInput || !x.requires_grad()) return at::Tensor();
      at::Tensor y = x.view_as(x);
      const std::string m = site.module;
      y.register_hook([&bad, m](const at::Tensor& g) {
        if (g.defined() && g.is_floating_point() && !at::isfinite(g).all().item<bool>()) bad.insert(m);
      });
      return y;
    };
    s.run_pass(std::move(ps));
    // The innermost: a module that holds another producer only passes its
    // child's non-finite gradient on.
    std::vector<std::string> inner;
    for (const auto& m : bad) {
      bool holds = false;
      for (const auto& o : bad) holds = holds || (o != m && o.rfind(m + ".", 0) == 0);
      if (!holds) inner.push_back(m);
    }
    if (inner.size() == 1) return inner.front();
  } catch (const std::exception&) {
    // The targeted pass is a refinement: the module the gradient reached stands.
  }
  return fallback;
}

/// Whether module `path`, which never ran, is a numbered layer (its last
/// path component a number) with a numbered sibling that ran, in a traced
/// or exported file saved in train mode: the trace recorded one draw of a
/// random layer skip (LayerDrop in Hugging Face's wav2vec2 family, `if
/// self.training and torch.rand([]) < layerdrop`; stochastic depth that
/// skips whole blocks), and the file holds only the layers that draw kept
/// (eval32 C19).
static bool skipped_by_train_mode_trace(const Session& s, const std::string& path) {
  if ((s.model.kind != "traced" && s.model.kind != "exported") || !s.model.saved_training) return false;
  auto numbered = [](const std::string& t) {
    return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const auto dot = path.rfind('.');
  if (dot == std::string::npos || !numbered(path.substr(dot + 1))) return false;
  const std::string prefix = path.substr(0, dot + 1);
  for (const auto& other : s.doc.layers) {
    if (other.path == path || other.exec_order < 0 || other.path.compare(0, prefix.size(), prefix) != 0) continue;
    if (numbered(other.path.substr(prefix.size()))) return true;
  }
  return false;
}

/// grad.skipped_by_trace and GRAD016's words for it.
static void set_skipped_by_trace(MetricMap& m, bool skipped) {
  m["grad.skipped_by_trace"] = skipped;
  m["grad.skipped_by_trace_note"] =
      skipped ? "; here a numbered sibling ran and the file was traced in train mode: the trace recorded one draw of a "
                "random layer skip (LayerDrop, stochastic depth), and the file does not contain this layer at all"
              : "";
}

/// The ops in `module`'s own forward (not its children's) whose derivative is
/// infinite or undefined where their argument reaches 0 or the edge of
/// their domain (sqrt at 0, a norm of a zero vector, log at 0, acos at 1, a
/// division by 0), in forward order without repeats, comma-separated; "" when
/// none. Read from a second instrumentation of the graph (round sites: every
/// op's output). The ops whose backward can make a NaN gradient from finite
/// values (the triplet-loss distance sqrt(sum(d^2)) without eps; triplet-reid,
/// omoindrot/tensorflow-triplet-loss).
static std::string singular_backward_ops(const Session& s, const std::string& module) {
  static const std::set<std::string> singular = {
      "aten::sqrt",   "aten::rsqrt",  "aten::norm",   "aten::linalg_vector_norm", "aten::linalg_norm",
      "aten::frobenius_norm", "aten::cdist", "aten::pdist", "aten::log", "aten::log2", "aten::log10",
      "aten::acos",   "aten::asin",   "aten::atan2",  "aten::reciprocal", "aten::std", "aten::var",
      "aten::div",    "aten::true_divide"};
  // Every op of its own forward, those in fp32 regions too (the precision
  // emulation's round sites leave out what follows an explicit upcast:
  // schnetpack's PaiNN mixing computed sqrt(sum(mu_V ** 2)) there, eval49).
  return ops_in_own_forward(s, module, singular);
}

void probe_forward_backward(Session& s) {
  const auto& taps = s.inst->taps();
  const PassSpec spec = train_pass_spec();

  std::shared_ptr<const PassResult> rp;
  try {
    rp = s.pass(spec);
  } catch (const PassError& e) {
    // Recorded by the engine's isolation (probes.forward_backward.status
    // "error"); the probes that need the train pass read
    // Session::train_pass_error().
    const std::string what = e.what();
    std::string why = s.train_pass_error();
    // BatchNorm in train mode with one value per channel: PyTorch raises
    // "Expected more than 1 value per channel when training". That is a
    // finding about the layer (evidence for BN006), not only a failure.
    // Scripted BatchNorm raises in its own check, before aten::batch_norm
    // (and its tap) runs: then an eval pass of the same batch, which runs to
    // the end, says which batch_norm the failed pass did not reach.
    if (what.find("Expected more than 1 value per channel") != std::string::npos && s.failed_collector) {
      PassSpec ev;
      ev.name = "eval";
      ev.probe = "forward_backward";
      const int64_t t = s.raised_batch_norm(what, ev);
      const std::string layer = t >= 0 ? taps[static_cast<size_t>(t)].module : std::string();
      if (LayerMetrics* lm = t >= 0 ? s.doc.find_layer(layer) : nullptr) {
        lm->metrics["bn.batch_of_one"] = true;
        lm->metrics["bn.values_per_channel"] = 1;
      }
      const auto at = what.find("raised in the train pass: ");
      why = "train-mode forward raised at " + (layer.empty() ? std::string("a batch_norm") : layer) + ": " +
            (at == std::string::npos ? what : what.substr(at + 26));
    }
    // InstanceNorm over a single spatial element: F.instance_norm's own
    // check (_verify_spatial_size) raises "Expected more
    // than 1 spatial element when training, got input size [...]" whenever
    // it uses the input's statistics, in eval too without running
    // statistics: no pass can run at this input size (eval46 unet3d: an
    // nnU-Net bottleneck at 1x1x1 for a 16^3 patch ended the check, exit 3).
    // A finding about the layer (NORM003), with the input size PyTorch
    // reports.
    {
      static const std::regex spatial("Expected more than 1 spatial element when training, got input size \\[([0-9, ]+)\\]");
      std::smatch m;
      const std::string layer = s.failed_in_module;
      LayerMetrics* lm = layer.empty() ? nullptr : s.doc.find_layer(layer);
      if (lm && std::regex_search(what, m, spatial)) {
        std::vector<int64_t> shape;
        std::stringstream ss(m[1].str());
        for (std::string part; std::getline(ss, part, ',');) shape.push_back(std::stoll(part));
        const int64_t groups = shape.size() >= 2 ? shape[0] * shape[1] : 0;
        std::string sh = "[";
        for (size_t i = 0; i < shape.size(); ++i) sh += (i ? ", " : "") + std::to_string(shape[i]);
        sh += "]";
        lm->metrics["norm.raises_single_value"] = true;
        lm->metrics["norm.op"] = "instance_norm";
        lm->metrics["norm.input_shape"] = sh;
        lm->metrics["norm.groups_per_pass"] = groups;
        s.run_failure_diagnosed = true;
      }
    }
    s.doc.assumptions.push_back("the train-mode pass could not run (" + why +
                                "); activation and gradient measurements are missing");
    s.skip_probe("gradients", "needs the train pass, which raised");
    throw;
  }
  const PassResult& r = *rp;
  const Collector& col = *r.collector;
  const auto& recs = col.records();

  if (!r.backward_skipped.empty()) {
    // Class ids, token ids, masks: every forward-only probe still runs.
    s.skip_probe("gradients", r.backward_skipped);
    s.doc.assumptions.push_back("the backward pass did not run: " + r.backward_skipped +
                                "; gradient measurements (and --lr, --steps, fp16 loss scaling) are missing, the "
                                "forward-only probes ran");
    // No loss on this output reaches any parameter (an argmax export, a
    // detached output): a fault for a model meant to be trained, which
    // --target, --lr or --optimizer-state says it is (GRAD012), a property
    // of an inference export otherwise (GRAD013, info).
    const bool trainable = param_training(s.model.module, /*recurse=*/true).trainable;
    s.doc.model_metrics["grad.no_loss_path"] = trainable;  // a model without parameters has nothing to train
    s.doc.model_metrics["grad.no_loss_path_reason"] = r.backward_skipped;
    // Where the routes end: the op nearest the output that every trainable
    // parameter's route to it passes (a spiking neuron's threshold written
    // as (mem > thr).float() without a surrogate gradient, eval48).
    GradientCut cut;
    if (trainable) {
      try {
        parameters_behind_detach(s, nullptr, &cut);
      } catch (const std::exception&) {
        // No graph to read (an exported program): the reason stands alone.
      }
    }
    s.doc.model_metrics["grad.no_loss_path_cut_kind"] = cut.kind;
    if (!cut.op.empty()) {
      s.doc.model_metrics["grad.no_loss_path_layer"] = cut.module;
      const std::string where = cut.op + " in " + (cut.module.empty() ? std::string("the model's own forward") : cut.module);
      std::string note = "; every route from a parameter to the output ends at a " + cut.kind + ", which carries no gradient (the last: " + where;
      if (cut.sites > 1) note += ", of " + std::to_string(cut.sites) + " such ops";
      note += ")";
      if (cut.kind == "comparison")
        note += ": a step function such as a spiking neuron's threshold (mem > threshold).float() has zero gradient "
                "almost everywhere and needs a surrogate gradient";
      s.doc.model_metrics["grad.no_loss_path_cut_note"] = note;
    }
  } else {
    s.doc.probes["gradients"] = {{"status", "ok"}, {"pass", "train"}};
  }
  s.doc.probes["loss"] = {{"description", r.loss_description}};
  // A forward that returns its own loss, a 0-dim tensor (Lightning-Bolts'
  // SimCLR computing nt_xent_loss in forward, reid-strong-baseline's
  // CE + triplet): the file is a training wrapper, so saving it in train
  // mode is deliberate (MODE008, not MODE001; eval33 C02). Said only when the
  // command line said nothing.
  if (s.doc.model_metrics["run.training_intent"] != true && r.backward_skipped.empty()) {
    const at::Tensor y = loss_output(r.output, s.opt);
    if (y.defined() && y.dim() == 0 && y.is_floating_point() && s.opt.loss == "auto") {
      s.doc.model_metrics["run.training_intent"] = true;
      s.doc.model_metrics["run.training_intent_from"] = std::string("a forward that returns a scalar loss");
    }
  }
  // Which pass the layer table describes: with dropout active, a module
  // after a Dropout reads its zeroed and 1/(1-p)-scaled input, so its RMS is
  // that of training, not of serving (eval27).
  s.doc.probes["layers"] = {{"pass", "train"},
                            {"description", std::string("the train pass (train mode: batch statistics, dropout active") +
                                                (r.backward_skipped.empty() ? "; gradients of the loss)" : ")")}};
  const double loss_v = r.loss ? r.loss->item<double>() : std::numeric_limits<double>::quiet_NaN();
  s.doc.model_metrics["loss.value"] = metric_number(loss_v);
  s.doc.model_metrics["loss.finite"] = std::isfinite(loss_v);
  // GRAD022's: a saturated cross-entropy (0, every gradient exactly zero);
  // GRAD004 does not repeat it per module.
  s.doc.model_metrics["loss.saturated"] = r.loss_saturated;
  s.doc.probes["loss"]["value"] = metric_number(loss_v);
  record_training_evidence(s, loss_v, r.loss_chance);
  const bool returns_loss = r.loss_description.find("(used as the loss)") != std::string::npos && std::isfinite(loss_v);

  std::map<std::string, size_t> idx;
  for (size_t i = 0; i < s.doc.layers.size(); ++i) idx[s.doc.layers[i].path] = i;

  // Aggregate taps per module.
  struct Agg {
    TensorStats fwd, grad;
    int64_t calls = 0, first_fire = -1, first_grad = -1, grad_calls = 0;
    int64_t sat_n = 0, sat_sigmoid = 0, sat_tanh = 0, sat_sig_n = 0, sat_tanh_n = 0;
    int64_t sat_readouts = 0;  ///< sigmoid inputs whose output is returned (not judged)
    // The most saturated single op (each op over all its calls): an LSTM
    // cell's four gates are four ops, and one saturated gate is not diluted
    // by the others.
    double sat_op_max = -1;
    std::string sat_op_max_kind;
    SoftmaxStats sm;
    bool has_softmax = false;
    SoftmaxStats other;    // softmax sites that are not attention (routers, gates, pointer distributions)
    int64_t other_sites = 0;
    bool other_to_output = false;  // one of them is what the model returns
    SoftmaxStats attn;     // attention sites only (softmax of matmul scores, scaled_dot_product_attention)
    int64_t attn_sites = 0;
    bool attn_sdpa = false, attn_softmax = false;
    bool attn_unscaled = false;  // some attention site's scores are scaled by no number (TapSite::scores_scaled)
    std::string attn_q, attn_k, attn_v;  // producing modules (first site that names them)
    std::vector<const TapSite*> outputs;  // every output tap that fired, in output order
    const TapSite* first_float = nullptr;  // the first of them holding floating-point values
    bool primary_fired = false;            // a primary output holding floating-point values fired
    /// Whether `t` is what act.* and grad.* describe: a primary output that
    /// holds floating-point values (a router's top-k expert indices, int64,
    /// are not its activations: Mixtral's router returns logits, weights
    /// and indices, eval23), else the first floating-point output that
    /// fired, else the first output.
    bool describes(const TapSite* t, bool floating) const {
      if (primary_fired) return t->primary && floating;
      return t == (first_float ? first_float : outputs.front());
    }
    std::vector<SoftmaxStats> heads;     // per head, over the attention sites
    int64_t masks = 0;                   // masks recognized between scores and softmax
  };
  std::map<std::string, Agg> agg;
  // A module with several outputs: act.* and grad.* describe its primary
  // output (what its forward returns); the others are listed in act.outputs.
  for (const auto& t : taps)
    if (t.kind == TapKind::kModuleOutput && recs[static_cast<size_t>(t.id)].calls > 0) {
      Agg& a = agg[t.module];
      a.outputs.push_back(&t);
      const bool fl = recs[static_cast<size_t>(t.id)].floating;
      if (fl && !a.first_float) a.first_float = &t;
      a.primary_fired = a.primary_fired || (t.primary && fl);
    }
  for (const auto& t : taps) {
    const TapRecord& rec = recs[static_cast<size_t>(t.id)];
    if (rec.calls == 0 || t.kind == TapKind::kNormInput || t.kind == TapKind::kResidualStream) continue;
    Agg& a = agg[t.module];
    switch (t.kind) {
      case TapKind::kModuleOutput:
        if (rec.first_fire >= 0 && (a.first_fire < 0 || rec.first_fire < a.first_fire)) a.first_fire = rec.first_fire;
        // Primary output only; when it never fired, the first output that did.
        if (!a.describes(&t, rec.floating)) break;
        a.fwd.merge(rec.fwd);
        a.grad.merge(rec.grad);
        a.calls += rec.calls;
        a.grad_calls += rec.grad_calls;
        if (rec.first_grad >= 0 && (a.first_grad < 0 || rec.first_grad < a.first_grad)) a.first_grad = rec.first_grad;
        break;
      case TapKind::kSigmoidInput:
      case TapKind::kTanhInput: {
        const bool sig = t.kind == TapKind::kSigmoidInput;
        // A sigmoid readout returned as the output (TapSite::to_output):
        // training takes its logits, so its saturation is no gradient lost.
        if (sig && t.to_output) {
          a.sat_readouts += rec.fwd.numel;
          break;
        }
        // x * sigmoid(a * x) (QuickGELU, a written-out Swish): an
        // activation, not a gate; its saturation for large positive x
        // passes the gradient on (eval43 hf_xclip got ACT004).
        if (sig && t.self_gated) break;
        (sig ? a.sat_sigmoid : a.sat_tanh) += rec.saturated;
        // Infinite inputs are masks, not pre-activations (Llama 4's router:
        // sigmoid of the top-k logits scattered into a -inf tensor, so
        // sigmoid gives exactly 0 to the experts not chosen): neither
        // saturated nor counted.
        const int64_t finite_n = rec.fwd.numel - rec.fwd.inf;
        (sig ? a.sat_sig_n : a.sat_tanh_n) += finite_n;
        if (finite_n > 0) {
          const double f = static_cast<double>(rec.saturated) / static_cast<double>(finite_n);
          if (f > a.sat_op_max) {
            a.sat_op_max = f;
            a.sat_op_max_kind = sig ? "sigmoid" : "tanh";
          }
        }
        break;
      }
      case TapKind::kSoftmaxInput:
        a.has_softmax = true;
        a.sm.merge(rec.softmax);
        if (!t.attention && rec.calls > 0) {
          a.other.merge(rec.softmax);
          ++a.other_sites;
          a.other_to_output = a.other_to_output || t.to_output;
        }
        if (t.attention) {
          if (a.attn_q.empty()) a.attn_q = t.attn_q;
          if (a.attn_k.empty()) a.attn_k = t.attn_k;
          if (a.attn_v.empty()) a.attn_v = t.attn_v;
          a.attn.merge(rec.softmax);
          ++a.attn_sites;
          a.attn_softmax = true;
          a.attn_unscaled = a.attn_unscaled || !t.scores_scaled;
          a.masks += t.masks;
          if (a.heads.size() < rec.heads.size()) a.heads.resize(rec.heads.size());
          for (size_t h = 0; h < rec.heads.size(); ++h) a.heads[h].merge(rec.heads[h]);
        }
        break;
      case TapKind::kAttentionScores:
        if (a.attn_q.empty()) a.attn_q = t.attn_q;
        if (a.attn_k.empty()) a.attn_k = t.attn_k;
        if (a.attn_v.empty()) a.attn_v = t.attn_v;
        a.attn.merge(rec.softmax);
        ++a.attn_sites;
        a.attn_sdpa = true;
        break;
      case TapKind::kModuleInput:
      case TapKind::kBatchNormInput:
      case TapKind::kNormInput:
      case TapKind::kResidualStream:
      case TapKind::kReluInput:  // probe_features
        break;
    }
  }

  // Execution order: rank of each module's first output tap.
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [path, a] : agg)
    if (a.first_fire >= 0) order.push_back({a.first_fire, path});
  std::sort(order.begin(), order.end());
  for (size_t i = 0; i < order.size(); ++i) s.doc.layers[idx[order[i].second]].exec_order = static_cast<int64_t>(i);

  // Modules holding parameters (their own or their children's): the only
  // ones whose growth over calls is judged (below).
  std::set<std::string> with_params;
  for (const auto& mi : s.model.modules)
    if (mi.module.parameters(/*recurse=*/true).size() > 0) with_params.insert(mi.path);
  for (auto& [path, a] : agg) {
    auto it = idx.find(path);
    if (it == idx.end()) continue;
    LayerMetrics& lm = s.doc.layers[it->second];
    MetricMap& m = lm.metrics;
    if (a.outputs.size() >= 2) {
      nlohmann::json outs = nlohmann::json::array();
      for (const TapSite* t : a.outputs) {
        const TapRecord& rec = recs[static_cast<size_t>(t->id)];
        outs.push_back({{"index", t->output_index},
                        {"primary", a.describes(t, rec.floating)},
                        {"shape", rec.shape},
                        {"rms", metric_number(rec.fwd.rms())},
                        {"absmax", metric_number(rec.fwd.absmax())}});
      }
      m["act.outputs"] = outs;
    }
    if (a.calls > 0) {
      m["act.calls"] = a.calls;
      put_stats(m, "act", a.fwd);
      // Scale over the calls of one module: a recurrence written as a loop
      // (the char-RNN tutorial's hidden = self.i2h(cat(x_t, hidden)), one
      // call per time step). From the first call with a nonzero output.
      // Modules with parameters only: one nn.ReLU reused after every layer
      // is called once per depth, and its growth is ACT002's.
      for (const TapSite* t : (with_params.count(path) ? a.outputs : std::vector<const TapSite*>{})) {
        const TapRecord& rec = recs[static_cast<size_t>(t->id)];
        if (!a.describes(t, rec.floating) || rec.call_rms.size() < 4) continue;
        size_t k0 = 0;
        while (k0 < rec.call_rms.size() && !(rec.call_rms[k0] > 0)) ++k0;
        const size_t n = rec.call_rms.size() - k0;
        if (n < 4) break;
        const double first = rec.call_rms[k0], last = rec.call_rms.back(), mid = rec.call_rms[k0 + n / 2];
        if (!std::isfinite(first) || !std::isfinite(last) || !std::isfinite(mid) || !(mid > 0)) break;
        int64_t rising = 0;
        for (size_t k = k0 + 1; k < rec.call_rms.size(); ++k) rising += rec.call_rms[k] > rec.call_rms[k - 1];
        m["act.call_rms_first"] = first;
        m["act.call_rms_mid"] = mid;
        m["act.call_rms_last"] = last;
        m["act.call_growth"] = last / first;
        m["act.call_growth_late"] = last / mid;
        m["act.call_rising_fraction"] = static_cast<double>(rising) / static_cast<double>(n - 1);
        m["act.calls_measured"] = static_cast<int64_t>(n);
        break;
      }
      m["act.beyond_fp16_count"] = a.fwd.beyond_fp16;
      m["act.zero_fraction"] = a.fwd.numel ? static_cast<double>(a.fwd.zeros) / static_cast<double>(a.fwd.numel) : 0.0;
      m["act.fp16_headroom"] = a.fwd.absmax() > 0 ? metric_number(kFp16Max / a.fwd.absmax()) : MetricValue("inf");
      // The largest magnitude is a mask constant of the graph (float32's
      // rounding of it): the masked positions, not an activation (ACT003
      // steps aside; in fp16 the constant becomes -inf or the format's
      // minimum, which the precision probe judges).
      {
        bool mask_constant = false;
        const double am = a.fwd.absmax();
        if (am > kFp16Max && std::isfinite(am))
          for (double c : s.inst->mask_constants())
            if (std::fabs(am - std::fabs(static_cast<double>(static_cast<float>(c)))) <= 1e-6 * am) mask_constant = true;
        m["act.absmax_is_mask_constant"] = mask_constant;
      }
      // The module computes the scalar the model returns as its loss (a
      // forward that returns its loss: Kendall's uncertainty weighting,
      // sum(exp(-s) * L + s), in a module of its own; eval51
      // mtl_uncertainty_fault): its value is a loss, not an activation, so
      // it is no growth (ACT002), no fp16 headroom (ACT003: autocast keeps
      // losses in fp32, the precision probe judges .half()) and no end of
      // the gradient profile (its gradient is 1 by definition).
      m["act.is_returned_loss"] = returns_loss && a.calls == 1 && a.fwd.numel == 1 &&
                                  std::fabs(a.fwd.sum - loss_v) <= 1e-6 * std::max(1.0, std::fabs(loss_v));
      // How far from the fp16 maximum, either side: ACT003 says "1.6x below"
      // or "54x above", never a headroom below 1 read as "below".
      if (a.fwd.absmax() > 0 && std::isfinite(a.fwd.absmax())) {
        const bool above = a.fwd.absmax() > kFp16Max;
        m["act.fp16_side"] = std::string(above ? "above" : "below");
        m["act.fp16_margin"] = metric_number(above ? a.fwd.absmax() / kFp16Max : kFp16Max / a.fwd.absmax());
      }
      if (a.grad_calls > 0) {
        m["grad.out_norm"] = metric_number(a.grad.l2());
        m["grad.out_rms"] = metric_number(a.grad.rms());
        m["grad.out_nonfinite_count"] = a.grad.nonfinite();
        m["grad.out_zero_fraction"] =
            a.grad.numel > 0 ? static_cast<double>(a.grad.zeros) / static_cast<double>(a.grad.numel) : 0.0;
      }
    }
    const int64_t sat_n = a.sat_sig_n + a.sat_tanh_n;
    if (sat_n > 0) {
      const double fs = a.sat_sig_n ? static_cast<double>(a.sat_sigmoid) / static_cast<double>(a.sat_sig_n) : 0.0;
      const double ft = a.sat_tanh_n ? static_cast<double>(a.sat_tanh) / static_cast<double>(a.sat_tanh_n) : 0.0;
      m["sat.fraction"] = std::max(a.sat_op_max, 0.0);
      m["sat.op"] = a.sat_op_max_kind.empty() ? std::string(fs >= ft && a.sat_sig_n ? "sigmoid" : "tanh") : a.sat_op_max_kind;
      m["sat.fraction_all"] = static_cast<double>(a.sat_sigmoid + a.sat_tanh) / static_cast<double>(sat_n);
      m["sat.numel"] = sat_n;
    }
    if (a.sat_readouts > 0) m["sat.readout_values"] = a.sat_readouts;
    if (a.has_softmax) {
      m["softmax.rows"] = a.sm.rows;
      if (a.sm.rows > 0) {
        m["softmax.onehot_fraction"] = static_cast<double>(a.sm.onehot_rows) / static_cast<double>(a.sm.rows);
        m["softmax.max_prob_mean"] = a.sm.max_prob_sum / static_cast<double>(a.sm.rows);
        m["softmax.entropy_mean"] = a.sm.entropy_sum / static_cast<double>(a.sm.rows);
      }
      m["softmax.entropy_max"] = a.sm.row_len_max > 0 ? std::log(static_cast<double>(a.sm.row_len_max)) : 0.0;
      m["softmax.logit_absmax"] = a.sm.logit_absmax;
      // Rows every entry of which is masked (-inf) that the softmax turned
      // into NaN, attention or not (pyGAT's graph attention with padded
      // nodes masked by -inf, eval41 C02): ACT001's fix for them.
      m["softmax.masked_nan_rows"] = a.sm.nan_rows;
      // Attention softmaxes among them (scores of a matmul): which fixes fit
      // (1/sqrt(d_head), QK-norm for attention; z-loss for a router).
      m["softmax.attention_sites"] = a.attn_sites;
      m["softmax.other_to_output"] = a.other_to_output;
      if (a.other_sites > 0) {
        // The softmaxes that are not attention (a mixture-of-experts
        // router, a gate, a pointer distribution): ACT010 judges them alone.
        m["softmax.other_sites"] = a.other_sites;
        m["softmax.other_rows"] = a.other.rows;
        m["softmax.other_to_output"] = a.other_to_output;
        m["softmax.other_logit_absmax"] = a.other.logit_absmax;
        const double hmax = a.other.row_len_max > 1 ? std::log(static_cast<double>(a.other.row_len_max)) : 0.0;
        m["softmax.other_entropy_max"] = hmax;
        if (a.other.rows > 0) {
          const double rows = static_cast<double>(a.other.rows);
          m["softmax.other_max_prob_mean"] = a.other.max_prob_sum / rows;
          m["softmax.other_entropy_mean"] = a.other.entropy_sum / rows;
          m["softmax.other_onehot_fraction"] = static_cast<double>(a.other.onehot_rows) / rows;
          if (hmax > 0) m["softmax.other_entropy_ratio"] = a.other.entropy_sum / rows / hmax;
        }
      }
    }
    if (a.attn_sites > 0) {
      m["attn.sites"] = a.attn_sites;
      m["attn.source"] = a.attn_sdpa && a.attn_softmax ? "softmax+scaled_dot_product_attention"
                         : a.attn_sdpa                ? "scaled_dot_product_attention"
                                                      : "softmax";
      m["attn.rows"] = a.attn.rows;
      if (a.attn.rows > 0) {
        m["attn.onehot_fraction"] = static_cast<double>(a.attn.onehot_rows) / static_cast<double>(a.attn.rows);
        m["attn.entropy_mean"] = a.attn.entropy_sum / static_cast<double>(a.attn.rows);
        m["attn.large_logit_row_fraction"] = static_cast<double>(a.attn.large_rows) / static_cast<double>(a.attn.rows);
      }
      m["attn.entropy_max"] = a.attn.row_len_max > 0 ? std::log(static_cast<double>(a.attn.row_len_max)) : 0.0;
      m["attn.logit_absmax"] = a.attn.logit_absmax;
      m["attn.scores_scaled"] = !a.attn_unscaled;
      m["attn.masked_rows"] = a.attn.masked_rows;
      m["attn.masked_nan_rows"] = a.attn.nan_rows;
      if (a.attn_softmax) m["attn.masks_recognized"] = a.masks;
      // Per head: the head with the largest logits, and the extremes.
      if (!a.heads.empty()) {
        nlohmann::json rows = nlohmann::json::array();
        size_t worst = 0;
        double onehot_max = 0, entropy_min = std::numeric_limits<double>::infinity();
        for (size_t h = 0; h < a.heads.size(); ++h) {
          const SoftmaxStats& hs = a.heads[h];
          const double oh = hs.rows ? static_cast<double>(hs.onehot_rows) / static_cast<double>(hs.rows) : 0.0;
          const double en = hs.rows ? hs.entropy_sum / static_cast<double>(hs.rows) : std::nan("");
          if (hs.logit_absmax > a.heads[worst].logit_absmax) worst = h;
          onehot_max = std::max(onehot_max, oh);
          if (std::isfinite(en)) entropy_min = std::min(entropy_min, en);
          rows.push_back({{"head", h}, {"rows", hs.rows}, {"logit_absmax", hs.logit_absmax},
                          {"entropy_mean", metric_number(en)}, {"onehot_fraction", oh}});
        }
        m["attn.heads"] = static_cast<int64_t>(a.heads.size());
        m["attn.worst_head"] = static_cast<int64_t>(worst);
        m["attn.worst_head_logit_absmax"] = a.heads[worst].logit_absmax;
        m["attn.head_onehot_fraction_max"] = onehot_max;
        m["attn.head_entropy_min"] = metric_number(entropy_min);
        lm.info["attention_heads"] = rows;
      }
      // Query/key versus value projection weights (Frobenius norms), where
      // the graph shows which module produces each.
      auto weight_norm = [&](const std::string& path) -> double {
        for (const auto& mi : s.model.modules)
          if (mi.path == path && mi.module.type()->hasAttribute("weight")) {
            auto w = mi.module.attr("weight");
            if (w.isTensor() && w.toTensor().defined()) return w.toTensor().detach().to(at::kDouble).norm().item<double>();
          }
        return -1;
      };
      const double nq = a.attn_q.empty() ? -1 : weight_norm(a.attn_q), nk = a.attn_k.empty() ? -1 : weight_norm(a.attn_k),
                   nv = a.attn_v.empty() ? -1 : weight_norm(a.attn_v);
      if (nq >= 0 && nk >= 0 && nv >= 0) {
        m["attn.q_module"] = a.attn_q;
        m["attn.k_module"] = a.attn_k;
        m["attn.v_module"] = a.attn_v;
        m["attn.q_weight_norm"] = nq;
        m["attn.k_weight_norm"] = nk;
        m["attn.v_weight_norm"] = nv;
        if (nv > 0) m["attn.qk_v_weight_ratio"] = std::sqrt(nq * nk) / nv;
      }
    }
  }

  // Parameters, gradients and norm gains, per module (direct parameters).
  // Deliberately zero-initialized factors (a zero BatchNorm gamma at the end
  // of a residual branch, a zero head) pass exactly zero gradient to the
  // parameters before them on this step; the first update ends that. Such
  // zeros are explained (src/probes/forward_backward/zero_init.cpp), not a missing gradient
  // path; zeros that lifting them does not end are not.
  const ZeroInitFacts zi = zero_init_conventions(s);
  // Modules whose every output in the train pass was empty.
  std::set<std::string> ran_empty;
  {
    std::map<std::string, bool> empty;
    for (const auto& t : taps) {
      if (t.kind != TapKind::kModuleOutput || recs[static_cast<size_t>(t.id)].calls == 0) continue;
      auto [it, fresh] = empty.emplace(t.module, true);
      it->second = it->second && recs[static_cast<size_t>(t.id)].fwd.numel == 0;
    }
    for (const auto& [m, e] : empty)
      if (e && !m.empty()) ran_empty.insert(m);
  }
  const auto intent = s.doc.model_metrics.find("run.training_intent");
  const bool training_intent = intent != s.doc.model_metrics.end() && intent->second == true;
  std::vector<ParamGrad> pgs;
  std::set<const void*> cancelled = biases_cancelled_by_batch_norm(s);
  const std::set<const void*> never_read = parameters_never_read(s);
  std::set<const void*> behind_index;
  const std::set<const void*> behind_detach = parameters_behind_detach(s, &behind_index);
  const std::set<const void*> mask_written = parameters_written_by_mask(s);
  for (const auto& mi : s.model.modules)
    pgs.push_back(param_grads(mi.module, *rp, zi.silenced_tensors, cancelled, never_read, behind_detach, behind_index,
                              mask_written));
  // A shift that reaches a train-mode BatchNorm through other linear ops (a
  // learnable scalar bias, then a 1x1 convolution or a concatenation, then
  // BatchNorm: timm's HGNetV2 LearnableAffineBlock, eval31) is removed by
  // the batch mean as a convolution's own bias is, so its gradient is exactly
  // zero or round-off. What the graph does not show, the gradients do: a
  // parameter with an all-zero gradient in the train pass that gets one in
  // an eval-mode backward (running statistics, no dropout) was zeroed by the
  // batch statistics. Only run when such zeros are left unexplained in a
  // model whose BatchNorm normalizes with batch statistics.
  {
    bool batch_stats = false;
    for (const auto& mo : s.inst->mode_ops())
      batch_stats = batch_stats || (mo.op == "batch_norm" && !(mo.constant && !mo.constant_value && !mo.baked));
    bool unexplained = false;
    for (const auto& pg : pgs)
      unexplained = unexplained || pg.zero > pg.silenced + pg.cancelled + pg.other_outputs + pg.shift_invariant + pg.mask_written;
    if (batch_stats && unexplained && r.backward_skipped.empty()) {
      try {
        PassSpec ev;
        ev.name = "eval-backward";
        ev.probe = "forward_backward";
        ev.train_mode = false;
        ev.dropout = false;
        ev.backward = true;
        const std::shared_ptr<const PassResult> er = s.pass(ev);
        bool more = false;
        for (const auto& mi : s.model.modules) {
          // A shift (a bias) whose module's output does get a gradient: a
          // module whose output gets none (a ReLU after it off for the batch)
          // or a weight whose input is zero has its zero from the values,
          // which the eval pass's other activations may simply not repeat.
          const LayerMetrics* lm = s.doc.find_layer(mi.path);
          const auto out = lm ? lm->metrics.find("grad.out_norm") : MetricMap::const_iterator();
          if (!lm || out == lm->metrics.end() || !out->second.is_number() || !(out->second.get<double>() > 0)) continue;
          for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) {
            const at::Tensor& w = p.value;
            if (p.name != "bias" || !w.requires_grad() || cancelled.count(w.unsafeGetTensorImpl())) continue;
            const at::Tensor g = rp->grad_of(w), ge = er->grad_of(w);
            if (!g.defined() || !ge.defined() || g.ne(0).any().item<bool>()) continue;
            if (!at::isfinite(ge).all().item<bool>() || !ge.ne(0).any().item<bool>()) continue;
            cancelled.insert(w.unsafeGetTensorImpl());
            more = true;
          }
        }
        if (more) {
          pgs.clear();
          for (const auto& mi : s.model.modules)
            pgs.push_back(param_grads(mi.module, *rp, zi.silenced_tensors, cancelled, never_read, behind_detach, behind_index,
                                      mask_written));
        }
      } catch (const std::exception&) {
        // Evidence only: without the eval-mode backward the zeros stay unexplained.
      }
    }
  }
  int64_t cancelled_params = 0, other_output_params = 0, shift_invariant_params = 0;
  std::set<const void*> other_output_seen;
  std::vector<std::string> cancelled_layers, other_output_layers, shift_invariant_layers;
  std::string zi_names;
  for (size_t i = 0; i < zi.params.size(); ++i) {
    if (i == 6) {
      zi_names += ", ... (" + std::to_string(zi.params.size() - 6) + " more)";
      break;
    }
    zi_names += (i ? ", " : "") + zi.params[i];
  }
  int64_t blocked = 0, silenced_params = 0;
  std::string silenced_names;
  // BatchNorms that normalized one value per channel in the train pass (a
  // batch of one through global pooling: DeepLabV3+'s ASPP pooling branch at
  // batch 1): their output is their bias, so no gradient passes them back,
  // and PyTorch's own BatchNorm refuses that input in training ("Expected
  // more than 1 value per channel"). A module before one in execution order
  // whose output gets no gradient is explained (eval40: two GRAD004 on a
  // DeepLabV3+ checked on one image).
  std::vector<std::pair<int64_t, std::string>> single_value_bns;
  if (rp && rp->collector) {
    for (const auto& no : s.inst->norm_ops()) {
      if (no.op != "batch_norm" || no.input_tap < 0 ||
          static_cast<size_t>(no.input_tap) >= rp->collector->records().size())
        continue;
      const auto& shape = rp->collector->records()[static_cast<size_t>(no.input_tap)].shape;
      if (shape.size() < 2 || rp->collector->records()[static_cast<size_t>(no.input_tap)].calls == 0) continue;
      int64_t values = shape[0];
      for (size_t d = 2; d < shape.size(); ++d) values *= shape[d];
      const LayerMetrics* bl = s.doc.find_layer(no.module);
      if (values <= 1 && bl && bl->exec_order >= 0) single_value_bns.push_back({bl->exec_order, no.module});
    }
  }
  // The same over each module's whole subtree: a container's own
  // parameters may be a zero bias beside a child's weight (PyG's
  // DenseGCNConv: bias [C] of its own, the weight in its child lin;
  // eval45 C1), and ACT001 reads the weights that made the output.
  std::map<std::string, double> subtree_absmax;
  std::map<std::string, int64_t> subtree_numel, subtree_nonfinite;
  for (size_t k = 0; k < s.model.modules.size(); ++k) {
    const ParamGrad& pg = pgs[k];
    if (pg.param_numel == 0) continue;
    for (std::string up = s.model.modules[k].path;; up = parent_module(up)) {
      subtree_absmax[up] = std::max(subtree_absmax[up], pg.absmax_param);
      subtree_numel[up] += pg.param_numel;
      subtree_nonfinite[up] += pg.param_nonfinite;
      if (up.empty()) break;
    }
  }
  // A module of the same class whose every parameter shares its storage
  // with an earlier module's (a ModuleList assigned to two attributes:
  // D-FINE's class_embed is its decoder's class_embed; torch.jit.load keeps
  // two modules over one storage): the other path is the one that runs, and
  // this one's never running is not GRAD014's (eval45 hf_dfine).
  std::map<std::string, std::string> tied_to;
  {
    using Key = std::tuple<const void*, int64_t, int64_t>;
    std::map<Key, std::string> holder;
    for (const auto& mi : s.model.modules) {
      std::vector<Key> keys;
      for (const auto& p : mi.module.named_parameters(/*recurse=*/false))
        if (p.value.has_storage())
          keys.emplace_back(p.value.storage().unsafeGetStorageImpl(), p.value.storage_offset(), p.value.numel());
      if (keys.empty()) continue;
      std::string first;
      bool all = true;
      for (const auto& key : keys) {
        auto it = holder.find(key);
        if (it == holder.end()) {
          all = false;
          continue;
        }
        if (first.empty()) first = it->second;
        all = all && it->second == first;
      }
      const auto* fm = first.empty() ? nullptr : s.doc.find_layer(first);
      if (all && fm && fm->kind == mi.kind) tied_to[mi.path] = first;
      for (const auto& key : keys) holder.emplace(key, mi.path);
    }
  }
  for (size_t k = 0; k < s.model.modules.size(); ++k) {
    const auto& mi = s.model.modules[k];
    LayerMetrics& lm = s.doc.layers[idx[mi.path]];
    MetricMap& m = lm.metrics;
    const ParamGrad& pg = pgs[k];
    const bool explained = pg.silenced > 0;
    if (explained) {
      m["grad.zero_explained_by"] = zi_names;
      m["grad.params_silenced"] = pg.silenced;
      silenced_params += pg.silenced;
      if (++blocked <= 6) silenced_names += (blocked > 1 ? ", " : "") + (mi.path.empty() ? std::string("<root>") : mi.path);
    }
    if (subtree_numel[mi.path] > 0)
      m["param.absmax_all"] = metric_number(subtree_nonfinite[mi.path] == subtree_numel[mi.path]
                                                ? std::nan("")
                                                : subtree_absmax[mi.path]);
    if (mi.parameters > 0) {
      // The largest finite magnitude; "nan" when no element is finite (a
      // layer whose weights are all NaN has no largest value, not 0: eval16).
      m["param.absmax"] = metric_number(pg.param_numel > 0 && pg.param_nonfinite == pg.param_numel
                                            ? std::nan("")
                                            : pg.absmax_param);
      m["param.nonfinite_count"] = pg.param_nonfinite;
    }
    // No backward ran (class ids out): no parameter gradient was measured,
    // so none is reported missing (GRAD004 would read "got none").
    if (pg.params > 0 && r.backward_skipped.empty()) {
      const bool ran = lm.exec_order >= 0 && !ran_empty.count(mi.path);
      m["grad.params"] = pg.params;
      m["grad.params_without_grad"] = pg.without;
      m["grad.params_zero_grad"] = pg.zero;
      // Parameters the file's graph never reads, of a module that runs (a
      // trace's other path): not a gradient path that broke, a path the file
      // does not contain (GRAD019). A module that never runs is GRAD014's.
      const int64_t unread = ran ? pg.unread : 0;
      m["grad.params_no_signal"] = pg.without + pg.zero - pg.silenced - pg.cancelled - pg.other_outputs -
                                   pg.shift_invariant - pg.mask_written - unread;
      // Padding or mask tokens this batch's mask wrote nowhere (GRAD025,
      // info): they learn on the batches that have padding.
      m["grad.params_written_by_empty_mask"] = pg.mask_written;
      if (pg.mask_written > 0) m["grad.params_written_by_empty_mask_names"] = pg.mask_written_names;
      m["grad.params_unread"] = unread;
      if (unread > 0) m["grad.params_unread_names"] = pg.unread_names;
      // Whether the module's forward produced an output in the train pass: a
      // module that is declared but never called (or whose output nothing
      // uses, so the graph drops it) has parameters outside what this file
      // computes, which is not a gradient that vanished (GRAD014, info).
      // A module that ran only on empty tensors (a mixture-of-experts
      // expert the router sent no token: expert(x[empty selection])) takes
      // no part in this batch either.
      m["grad.module_ran"] = ran;
      m["grad.module_ran_empty"] = ran_empty.count(mi.path) > 0;
      m["grad.tied_to"] = tied_to.count(mi.path) ? tied_to.at(mi.path) : std::string();
      // Parameters outside the forward of a model the user trains (--target,
      // --lr, --optimizer-state): DistributedDataParallel stops on them
      // (GRAD016, a warning); an expert that only this batch's routing
      // skipped is not that.
      m["grad.unused_in_training"] = lm.exec_order < 0 && training_intent;
      const bool skipped_by_trace = lm.exec_order < 0 && skipped_by_train_mode_trace(s, mi.path);
      set_skipped_by_trace(m, skipped_by_trace);
      m["grad.no_signal_under"] = "";  // set below when a whole sub-network is cut (GRAD015)
      if (pg.shift_invariant > 0) {
        m["grad.params_loss_shift_invariant"] = pg.shift_invariant;
        shift_invariant_params += pg.shift_invariant;
        shift_invariant_layers.push_back(mi.path);
      }
      if (pg.other_outputs > 0) {
        m["grad.params_other_outputs_only"] = pg.other_outputs;
        // Each tensor once: a module registered under two paths (HF Deformable
        // DETR's bbox_embed.0 and bbox_embed.1 are one MLP, eval54) is
        // counted and listed at its first path.
        int64_t fresh = 0;
        for (const auto& p : mi.module.named_parameters(/*recurse=*/false))
          if (rp->reach_other_outputs_only.count(p.value.unsafeGetTensorImpl()) &&
              other_output_seen.insert(p.value.unsafeGetTensorImpl()).second)
            ++fresh;
        if (fresh > 0) {
          other_output_params += fresh;
          other_output_layers.push_back(mi.path);
        }
      }
      if (pg.cancelled > 0) {
        m["grad.params_cancelled_by_batch_norm"] = pg.cancelled;
        cancelled_params += pg.cancelled;
        cancelled_layers.push_back(mi.path);
      }
      // Every such parameter got a gradient tensor from autograd, all zero:
      // the path exists and this batch's values closed it (a ReLU inactive
      // for every example, an all-zero input), not the graph's structure.
      const bool zero_from_values = pg.without == 0 && pg.zero > pg.silenced + pg.cancelled + pg.other_outputs +
                                                                pg.shift_invariant + pg.mask_written;
      m["grad.zero_from_values"] = zero_from_values;
      // Why the values closed the path, where the gradients say: no
      // gradient reaches the module's output at all (what reads it is flat
      // in it on this batch: an attention whose values are the same at
      // every key ignores its queries and keys, DETR's first decoder layer
      // on all-zero queries, eval29), or the bias learns and the weights do
      // not (a weight's gradient is the input times the output's gradient:
      // the input is zero on this batch).
      std::string cause;
      bool saturated_softmax = false, zero_input = false, discarded_positions = false, single_value_bn = false;
      if (zero_from_values) {
        auto out = m.find("grad.out_norm");
        // A parametrization (weight_norm's parametrizations.weight holding
        // original0/original1): its output is the weight of the module that
        // owns it. When that module's output gets a gradient and the weight
        // it reads does not, its input is zero on this batch (EnCodec's
        // decoder conv behind the zero-initialized codebook, eval34 C13).
        std::string owner;
        {
          const size_t at = mi.path.find(".parametrizations.");
          if (at != std::string::npos) owner = mi.path.substr(0, at);
          else if (mi.path.rfind("parametrizations.", 0) == 0) owner = "<root>";
        }
        const LayerMetrics* ol = owner.empty() || owner == "<root>" ? nullptr : s.doc.find_layer(owner);
        bool owner_gets_grad = false;
        if (ol) {
          auto oo = ol->metrics.find("grad.out_norm");
          owner_gets_grad = oo != ol->metrics.end() && oo->second.is_number() && oo->second.get<double>() > 0;
        }
        if (owner_gets_grad && out != m.end() && out->second.is_number() && out->second.get<double>() == 0) {
          zero_input = true;
          cause = "it computes the weight of " + owner + " (a parametrization such as weight_norm), whose output " +
                  "gets a gradient while that weight gets none: " + owner + "'s input is zero on this batch (a " +
                  "weight's gradient is the input times the output's gradient)";
        } else if (out != m.end() && out->second.is_number() && out->second.get<double>() == 0) {
          // The nearest enclosing module whose softmax is one-hot in every
          // row (a query/key projection under an attention whose logits
          // reach 1e4: eval34 C01, Stable Diffusion 2 attention): a
          // saturated softmax has a zero Jacobian, so its logits, and what
          // computes them, get no gradient.
          std::string sat_at;
          double sat_logits = 0;
          for (std::string p = mi.path; !p.empty();) {
            const size_t dot = p.rfind('.');
            p = dot == std::string::npos ? std::string() : p.substr(0, dot);
            const LayerMetrics* al = s.doc.find_layer(p);
            if (!al) continue;
            auto of = al->metrics.find("softmax.onehot_fraction");
            if (of == al->metrics.end() || !of->second.is_number()) continue;
            if (of->second.get<double>() >= 0.999) {
              sat_at = p.empty() ? std::string("<root>") : p;
              auto la = al->metrics.find("softmax.logit_absmax");
              if (la != al->metrics.end() && la->second.is_number()) sat_logits = la->second.get<double>();
            }
            break;
          }
          saturated_softmax = !sat_at.empty();
          std::string one_value_bn;
          for (const auto& [order, bn] : single_value_bns)
            if (lm.exec_order >= 0 && order > lm.exec_order && bn != mi.path) {
              one_value_bn = bn;
              break;
            }
          single_value_bn = !saturated_softmax && !one_value_bn.empty();
          // A clamp with constant bounds reads the output and every value
          // lies beyond one of them: the clamp passes no gradient (a VAE's
          // log-variance head diverged past torch.clamp(logvar, -30, 20):
          // eval49 vae_logvar_clamp_diverged).
          std::string clamp_cause;
          for (const auto& t : s.inst->taps()) {
            if (t.kind != TapKind::kModuleOutput || t.module != mi.path || !t.primary || !t.clamped) continue;
            auto mn = m.find("act.min"), mx = m.find("act.max");
            if (mn == m.end() || mx == m.end() || !mn->second.is_number() || !mx->second.is_number()) break;
            const double lo = mn->second.get<double>(), hi = mx->second.get<double>();
            if (!(lo >= t.clamp_hi || hi <= t.clamp_lo)) break;
            char nb[160];
            std::snprintf(nb, sizeof nb, "[%.4g, %.4g]) holds every value beyond a bound (output min %.4g, max %.4g)",
                          t.clamp_lo, t.clamp_hi, lo, hi);
            clamp_cause = std::string("no gradient reaches its output on this batch: the clamp that reads it (bounds ") +
                          nb + ", and a clamp passes no gradient where it clamps: the values it bounds have diverged";
            break;
          }
          if (!clamp_cause.empty() && !saturated_softmax && !single_value_bn) {
            cause = clamp_cause;
          } else if (single_value_bn) {
            cause = "no gradient reaches its output on this batch: " + one_value_bn +
                    ", after it, normalizes one value per channel in the train-mode pass (a batch of one through "
                    "global pooling), so its output is its bias and passes no gradient back; PyTorch's BatchNorm "
                    "refuses that input in training (BN006, BN010)";
          } else if (saturated_softmax) {
            char nb[32];
            std::snprintf(nb, sizeof nb, "%.4g", sat_logits);
            cause = "no gradient reaches its output on this batch: the softmax in " + sat_at +
                    " that it feeds is saturated (every row one-hot, logits reach " + nb +
                    "), and a one-hot softmax passes no gradient to its logits";
          } else {
            cause = "no gradient reaches its output on this batch: what reads it does not change the loss here (a ReLU "
                    "off for every example, an attention whose values are the same at every key ignores its queries "
                    "and keys)";
          }
        } else if (pg.zero_weights > 0 && pg.zero_biases == 0 && pg.live_biases > 0 &&
                   std::any_of(single_value_bns.begin(), single_value_bns.end(),
                               [&](const std::pair<int64_t, std::string>& b) { return b.second == mi.path; })) {
          // The BatchNorm itself over one value per channel: its normalized
          // values are all 0, so its gain gets no gradient and its bias does.
          single_value_bn = true;
          cause = "it normalizes one value per channel in the train-mode pass (a batch of one through global pooling): "
                  "every normalized value is 0, so its weight gets no gradient and its bias does; PyTorch's BatchNorm "
                  "refuses that input in training (BN006, BN010)";
        } else if (pg.zero_weights > 0 && pg.zero_biases == 0 && pg.live_biases > 0) {
          zero_input = true;
          cause = "its bias gets a gradient and its weight does not: its input is zero on this batch (a weight's "
                  "gradient is the input times the output's gradient)";
        } else if (pg.zero >= pg.params && out != m.end() && out->second.is_number() && out->second.get<double>() > 0) {
          // Its output gets a gradient at a few positions only, and its
          // parameters act on the others: the model reads part of the
          // output (the class token after the last block) and these
          // parameters shape only the positions it drops. torchvision's
          // MViT v2: the last block's rel_pos_h/w/t add to the spatial
          // queries' logits, and the head reads the class token.
          auto zf = m.find("grad.out_zero_fraction");
          if (zf != m.end() && zf->second.is_number() && zf->second.get<double>() >= 0.5) {
            discarded_positions = true;
            char nb[32];
            std::snprintf(nb, sizeof nb, "%.3g", zf->second.get<double>());
            cause = std::string("its output gets a gradient at a few positions only (a fraction ") + nb +
                    " of its output gradient is exactly zero: positions the model does not read, such as every "
                    "token but the class token after the last block), and these parameters act only on the others";
          }
        }
      }
      // No gradient at all, and `n` of those without one are cut on every
      // route to the output (the rest explained otherwise).
      auto all_cut = [&](int64_t n) {
        return cause.empty() && pg.without > 0 && n > 0 && n + pg.silenced + pg.other_outputs >= pg.without;
      };
      // Every route passes a detach: a straight-through estimator's
      // codebook (VQ-VAE).
      if (all_cut(pg.behind_detach))
        cause = "every route from it to the output passes through detach(): it learns only from a loss on its own "
                "output, which this forward does not return (a vector quantizer's codebook behind the "
                "straight-through estimator z + (z_q - z).detach() is trained by the codebook and commitment "
                "losses)";
      // ... or in the indices of a selection: the scores torch.topk ranks
      // (D-FINE's enc_score_head picks the decoder's queries; eval45) get
      // no gradient through the indices, only from a loss on their own output.
      if (all_cut(pg.behind_index))
        cause = "every route from it to the output ends in integer indices (torch.topk, sort or argmax picking "
                "entries by its values) or a comparison, which carry no gradient: it learns only from a loss on its "
                "own output, which this forward does not return (a detector's query-selection scores are trained by "
                "the encoder's auxiliary loss)";
      m["grad.params_behind_detach"] = pg.behind_detach;
      m["grad.params_behind_index"] = pg.behind_index;
      m["grad.zero_from_saturated_softmax"] = saturated_softmax;
      m["grad.zero_from_single_value_bn"] = single_value_bn;
      m["grad.zero_from_zero_input"] = zero_input;
      m["grad.zero_from_discarded_positions"] = discarded_positions;
      m["grad.zero_cause"] = cause;
      m["grad.zero_cause_note"] = cause.empty() ? std::string() : "; " + cause;
      m["grad.param_norm"] = metric_number(std::sqrt(pg.sumsq));
      m["grad.param_nonfinite_count"] = pg.nonfinite;
      if (pg.w2_sumsq > 0) {
        m["grad.to_weight"] = metric_number(std::sqrt(pg.g2_sumsq / pg.w2_sumsq));
        m["grad.zero_rows_fraction"] = pg.rows ? static_cast<double>(pg.zero_rows) / static_cast<double>(pg.rows) : 0.0;
      }
    }
    if (is_norm_kind(mi.kind)) {
      if (lm.info.contains("eps") && lm.info["eps"].is_number()) m["norm.eps"] = lm.info["eps"];
      if (mi.module.type()->hasAttribute("weight")) {
        auto w = mi.module.attr("weight");
        if (w.isTensor() && w.toTensor().defined() && w.toTensor().numel() > 0) {
          at::Tensor g = w.toTensor().detach().abs().to(at::kDouble);
          m["norm.gain_absmax"] = g.max().item<double>();
          m["norm.gain_mean"] = g.mean().item<double>();
          m["norm.gain_p99"] = quantile_of(g, 0.99);
        }
      }
    }
  }

  // Modules that hold others (not the root), shortest path first: the
  // highest covering module is found first by both roll-ups below.
  std::vector<std::string> parents;
  for (const auto& mi : s.model.modules)
    if (!mi.path.empty() && !mi.leaf) parents.push_back(mi.path);
  std::sort(parents.begin(), parents.end(), [](const std::string& a, const std::string& b) { return a.size() < b.size(); });

  // A whole sub-module outside the forward (a BERT pooler a token head
  // never reads: bert.pooler.dense; a prompt encoder's unused mask_embed):
  // one finding at the highest module whose every module with parameters
  // produced no output, with the totals; the modules under it name it in
  // grad.unused_under and stay silent.
  {
    for (auto& l : s.doc.layers)
      if (l.metrics.count("grad.params")) l.metrics["grad.unused_under"] = "";
    auto flag = [](const LayerMetrics& l, const char* k) {
      auto it = l.metrics.find(k);
      return it != l.metrics.end() && it->second == true;
    };
    std::set<std::string> covered;
    for (const auto& p : parents) {
      if (covered.count(p)) continue;
      LayerMetrics& pl = s.doc.layers[idx[p]];
      if (pl.exec_order >= 0 && !flag(pl, "grad.module_ran_empty") && pl.metrics.count("grad.module_ran") &&
          pl.metrics.at("grad.module_ran") == true)
        continue;
      int64_t modules = 0, params = 0, without = 0, no_signal = 0;
      bool all = true, all_empty = true, training = false;
      for (const auto& l : s.doc.layers) {
        if (l.path.rfind(p + ".", 0) != 0 && l.path != p) continue;
        auto it = l.metrics.find("grad.params");
        if (it == l.metrics.end() || !it->second.is_number() || it->second.get<double>() <= 0) continue;
        auto ran = l.metrics.find("grad.module_ran");
        if (ran == l.metrics.end() || ran->second != false) {
          all = false;
          break;
        }
        auto tied = l.metrics.find("grad.tied_to");
        if (tied != l.metrics.end() && tied->second != "") continue;  // another path runs it
        ++modules;
        params += l.metrics.at("grad.params").get<int64_t>();
        without += l.metrics.at("grad.params_without_grad").get<int64_t>();
        no_signal += l.metrics.at("grad.params_no_signal").get<int64_t>();
        all_empty = all_empty && flag(l, "grad.module_ran_empty");
        training = training || flag(l, "grad.unused_in_training");
      }
      if (!all || modules < 1 || (modules == 1 && pl.metrics.count("grad.params"))) continue;
      pl.metrics["grad.params"] = params;
      pl.metrics["grad.params_without_grad"] = without;
      pl.metrics["grad.params_zero_grad"] = params - without;
      pl.metrics["grad.params_no_signal"] = no_signal;
      pl.metrics["grad.module_ran"] = false;
      pl.metrics["grad.module_ran_empty"] = all_empty;
      pl.metrics["grad.unused_in_training"] = training;
      set_skipped_by_trace(pl.metrics, pl.exec_order < 0 && skipped_by_train_mode_trace(s, p));
      pl.metrics["grad.unused_under"] = "";
      pl.metrics["grad.unused_modules"] = modules;
      pl.metrics["grad.tied_to"] = "";
      for (auto& l : s.doc.layers)
        if (l.path.rfind(p + ".", 0) == 0) {
          covered.insert(l.path);
          if (l.metrics.count("grad.params")) l.metrics["grad.unused_under"] = p;
        }
    }
  }

  // Mixture-of-experts experts idle beyond chance (rule GRAD018): a
  // container of 4 or more child modules of one class (the experts of a
  // MoE layer), two or more of which ran on the batch, on different numbers
  // of rows, while at least half did not (not called, or called on empty
  // tensors). Each routed row goes to a
  // given expert with probability 1/E under uniform routing, so an expert
  // is left without any of S rows with probability (1 - 1/E)^S; below 1e-6
  // (8 experts, 104 rows) idle experts are not the batch's chance but a
  // router that sends every token to the same few (router collapse:
  // Fedus et al. 2021, Switch Transformers; torchtitan#1246). S is counted
  // from the experts that ran: the rows entering their first Linear
  // (act.numel / out_features), all calls together.
  {
    std::map<std::string, std::vector<LayerMetrics*>> children;
    for (auto& l : s.doc.layers)
      if (l.path.find('.') != std::string::npos) children[parent_module(l.path)].push_back(&l);
    auto ran_on_rows = [](const LayerMetrics& k) {  // called, not only on empty tensors
      auto calls = k.metrics.find("act.calls");
      auto empty = k.metrics.find("grad.module_ran_empty");
      return calls != k.metrics.end() && calls->second.is_number_integer() && calls->second.get<int64_t>() > 0 &&
             !(empty != k.metrics.end() && empty->second == true);
    };
    auto subtree_params = [&](const std::string& p) {
      int64_t n = 0;
      for (const auto& l : s.doc.layers)
        if (within_module(l.path, p)) n += l.parameters;
      return n;
    };
    auto rows_of = [&](const std::string& p) -> int64_t {  // rows entering the first Linear under p
      const LayerMetrics* first = nullptr;
      for (const auto& l : s.doc.layers)
        if (within_module(l.path, p) && l.kind == "Linear" && l.exec_order >= 0 && l.info.contains("out_features") &&
            l.info["out_features"].is_number_integer() && l.metrics.count("act.numel") &&
            (!first || l.exec_order < first->exec_order))
          first = &l;
      if (!first) return -1;
      const int64_t out = first->info["out_features"].get<int64_t>();
      const auto& n = first->metrics.at("act.numel");
      return out > 0 && n.is_number_integer() ? n.get<int64_t>() / out : -1;
    };
    for (auto& [parent, kids] : children) {
      const int64_t E = static_cast<int64_t>(kids.size());
      if (E < 4 || !std::all_of(kids.begin(), kids.end(), [&](const LayerMetrics* k) { return k->kind == kids.front()->kind; }))
        continue;
      // The cheap test first: at least half the children idle, two or more ran.
      std::vector<std::string> idle;
      for (const auto* k : kids)
        if (!ran_on_rows(*k)) idle.push_back(k->path);
      const int64_t ran = E - static_cast<int64_t>(idle.size());
      if (2 * static_cast<int64_t>(idle.size()) < E || ran < 2) continue;
      if (std::any_of(kids.begin(), kids.end(), [&](const LayerMetrics* k) { return subtree_params(k->path) == 0; }))
        continue;
      int64_t rows = 0;
      bool rows_known = true;
      std::set<int64_t> row_counts;  // rows of each expert that ran
      for (const auto* k : kids) {
        if (!ran_on_rows(*k)) continue;
        const int64_t r = rows_of(k->path);
        rows_known = rows_known && r >= 0;
        rows += std::max<int64_t>(r, 0);
        row_counts.insert(r);
      }
      // Routing, not a choice of whole modules: the experts ran on
      // different numbers of rows (a router's subsets), or next to a router
      // (a 2-D parameter with one row per expert, [E, D], in the layer that
      // holds the experts: nn.Linear(D, E), DeepSeek's Gate.weight) when a
      // full collapse gives the chosen experts every row. One module picked
      // per call (task heads) or layers skipped whole (LayerDrop) are not
      // judged.
      bool router = false;
      const std::string layer = parent_module(parent);
      for (const auto& mi : s.model.modules) {
        if (router || !within_module(mi.path, layer) || within_module(mi.path, parent)) continue;
        for (const auto& pr : mi.module.named_parameters(/*recurse=*/false))
          if (pr.value.dim() == 2 && pr.value.size(0) == E) router = true;
      }
      if (!rows_known || rows <= 0 || (row_counts.size() < 2 && !router)) continue;
      const double chance = std::exp(static_cast<double>(rows) * std::log1p(-1.0 / static_cast<double>(E)));
      LayerMetrics* pl = s.doc.find_layer(parent);
      if (!pl) continue;
      pl->metrics["moe.experts"] = E;
      pl->metrics["moe.idle_experts"] = static_cast<int64_t>(idle.size());
      pl->metrics["moe.idle_names"] = short_list(idle, 6);
      pl->metrics["moe.routed_rows"] = rows;
      pl->metrics["moe.idle_chance"] = chance;
    }
  }

  // A whole sub-network cut from the loss (a VQ-VAE encoder behind a
  // quantizer without the straight-through estimator, a frozen-by-mistake
  // backbone behind detach()): every module with parameters under it that ran
  // got no gradient signal for any of them. One finding at the highest such
  // module (not the root), with the totals, instead of one per layer; each
  // layer it covers names it in grad.no_signal_under.
  {
    auto fully_silent = [&](const LayerMetrics& l) {
      auto get = [&](const char* k) {
        auto it = l.metrics.find(k);
        return it != l.metrics.end() && it->second.is_number() ? it->second.get<double>() : -1.0;
      };
      auto ran = l.metrics.find("grad.module_ran");
      return get("grad.params") > 0 && get("grad.params_no_signal") == get("grad.params") &&
             get("grad.params_zero_grad") == 0 && ran != l.metrics.end() && ran->second == true;
    };
    std::set<std::string> covered;
    for (const auto& p : parents) {
      if (covered.count(p)) continue;
      int64_t modules = 0, params = 0, without = 0;
      bool all = true;
      for (const auto& l : s.doc.layers) {
        if (l.path.rfind(p + ".", 0) != 0 && l.path != p) continue;
        auto it = l.metrics.find("grad.params");
        if (it == l.metrics.end() || !it->second.is_number() || it->second.get<double>() <= 0) continue;
        if (!fully_silent(l)) {
          all = false;
          break;
        }
        ++modules;
        params += l.metrics.at("grad.params").get<int64_t>();
        without += l.metrics.at("grad.params_without_grad").get<int64_t>();
      }
      if (!all || modules < 2) continue;
      LayerMetrics& pl = s.doc.layers[idx[p]];
      pl.metrics["grad.subtree_no_signal_modules"] = modules;
      pl.metrics["grad.subtree_no_signal_params"] = params;
      pl.metrics["grad.subtree_params_without_grad"] = without;
      pl.metrics["grad.subtree_output_discarded"] = false;  // the discard test below may set it
      // Saved in eval inside a model saved training: a part kept frozen
      // while the rest trains (a distillation teacher run under no_grad,
      // RepDistiller's model_t; a frozen encoder). That it gets no gradient
      // is its design, not a cut (eval54: GRAD015 on the healthy teacher).
      bool kept_in_eval = false;
      if (s.model.saved_training)
        for (const auto& mi : s.model.modules)
          if (mi.path == p) kept_in_eval = !mi.training;
      pl.metrics["grad.subtree_kept_in_eval"] = kept_in_eval;
      if (kept_in_eval)
        s.doc.assumptions.push_back(p + " gets no gradient from the loss (" + std::to_string(without) +
                                    " of its parameters none): taken as frozen by design, since the file saved it in eval "
                                    "mode inside a model saved in training mode (a distillation teacher, a frozen "
                                    "encoder); if it should train, the loss does not reach it (GRAD015 is not reported)");
      for (auto& l : s.doc.layers)
        if (l.path.rfind(p + ".", 0) == 0) {
          covered.insert(l.path);
          if (l.metrics.count("grad.params")) l.metrics["grad.no_signal_under"] = p;
        }
    }
  }

  // A cut made by values, not by the graph: every leaf before module C in
  // execution order has an output gradient of exactly zero while C's own
  // output gradient is not zero. The path closes in C (a ReLU with every
  // unit inactive, a train-mode BatchNorm over one value per channel) or in
  // the ops between the last zero module and C (torch.round of a learned
  // compression's latents without a straight-through estimator), and every
  // parameter before it gets exact zeros. One finding (GRAD017) in place of
  // one GRAD004 per module before it; those modules name its layer in
  // grad.blocked_by. The layer: the highest module made only of zero
  // modules that ends where C starts (a whole encoder, g_a), else C.
  {
    for (auto& l : s.doc.layers)
      if (l.metrics.count("grad.params")) l.metrics["grad.blocked_by"] = "";
    s.doc.model_metrics["grad.cut_layer"] = "";
    std::vector<LayerMetrics*> ran;
    for (auto& l : s.doc.layers)
      if (l.leaf && l.exec_order >= 0 && l.metrics.count("grad.out_norm") && l.metrics.at("grad.out_norm").is_number())
        ran.push_back(&l);
    std::sort(ran.begin(), ran.end(), [](auto* a, auto* b) { return a->exec_order < b->exec_order; });
    size_t cut = 0;
    while (cut < ran.size() && ran[cut]->metrics.at("grad.out_norm").get<double>() == 0.0) ++cut;
    // Every leaf that ran got a zero output gradient and the model's output
    // did not: the path closes in the root's own forward after its last
    // module (NeRF's raw2outputs, F.relu(raw[..., 3]) off at every sample of
    // every ray, after the MLP; eval45 C4). The root then stands for C.
    LayerMetrics* root = s.doc.find_layer("");
    const bool root_cut = cut > 0 && cut == ran.size() && root && root->exec_order >= 0 &&
                          root->metrics.count("grad.out_norm") && root->metrics.at("grad.out_norm").is_number() &&
                          root->metrics.at("grad.out_norm").get<double>() > 0;
    if (cut > 0 && (cut < ran.size() || root_cut)) {
      LayerMetrics& c = root_cut ? *root : *ran[cut];
      std::set<std::string> zero_leaves;
      for (size_t i = 0; i < cut; ++i) zero_leaves.insert(ran[i]->path);
      // The modules before the cut with parameters of their own: the zero
      // leaves, and modules that are not leaves but hold parameters (timm's
      // StarReLU scale and bias around its nn.ReLU child) with a zero output
      // gradient.
      std::vector<LayerMetrics*> before_cut;
      for (auto& l : s.doc.layers) {
        if (!l.metrics.count("grad.params") || l.exec_order < 0) continue;
        auto on = l.metrics.find("grad.out_norm");
        const bool zero_out = on != l.metrics.end() && on->second.is_number() && on->second.get<double>() == 0.0;
        if (l.leaf ? zero_leaves.count(l.path) > 0 : (zero_out && l.exec_order < c.exec_order)) before_cut.push_back(&l);
      }
      int64_t modules = 0, params = 0, modules_other = 0, params_other = 0;
      for (const LayerMetrics* l : before_cut) {
        auto count = [&](const char* k) -> int64_t {
          auto it = l->metrics.find(k);
          return it != l->metrics.end() && it->second.is_number() && it->second.get<double>() > 0 ? it->second.get<int64_t>() : 0;
        };
        const int64_t own = count("grad.params_no_signal"), other = count("grad.params_other_outputs_only");
        if (own > 0) ++modules, params += own;
        if (own + other > 0) ++modules_other, params_other += own + other;
      }
      // Parameters the loss's output does not reach but other outputs do
      // (a VAE returning (recons, mu, log_var) that samples z with
      // torch.normal(mu, std), whose gradient to mu and std is 0: the
      // reconstruction cannot train the encoder, the KL term over mu and
      // log_var only pulls it to the prior; eval26 C04). A cut all the same
      // when the loss's output does read what they compute: the last zero
      // leaf's output replaced by noise changes it (an auxiliary branch
      // computed first, which the loss's output never reads, does not).
      std::string cut_other_outputs;
      if (modules < 2 && modules_other >= 2) {
        const PassSpec ref_spec = replacement_pass_spec("cut-reference");
        PassSpec ed = replacement_pass_spec("cut-check");
        auto edits = std::make_shared<int64_t>(0);
        ed.tap_edit = replace_module_output(ran[cut - 1]->path, edits, s.opt.seed + 7907);
        try {
          const at::Tensor a = loss_output(s.run_pass(ref_spec).output, s.opt);
          const at::Tensor b = loss_output(s.run_pass(ed).output, s.opt);
          if (*edits > 0 && a.defined() && b.defined() && output_change(c10::IValue(a), c10::IValue(b)) > 1e-6) {
            modules = modules_other;
            params = params_other;
            cut_other_outputs = rp->unread_outputs;
          }
        } catch (const PassError&) {
        } catch (const FatalRunError&) {
        }
      }
      if (modules >= 2) {
        // The highest module holding the last zero leaf whose every leaf
        // that ran is a zero leaf (not the root).
        std::string after = ran[cut - 1]->path;
        for (std::string p = after; p.find('.') != std::string::npos;) {
          p = p.substr(0, p.rfind('.'));
          bool all = true, any = false;
          for (const auto& l : s.doc.layers)
            if (l.leaf && l.exec_order >= 0 && l.path.rfind(p + ".", 0) == 0) {
              any = true;
              all = all && zero_leaves.count(l.path) > 0;
            }
          if (!any || !all) break;
          after = p;
        }
        const bool sub_network = after != ran[cut - 1]->path;
        LayerMetrics* at = sub_network ? s.doc.find_layer(after) : &c;
        if (!at) at = &c;
        // C's own parameters that got zeros for the same reason (the gain
        // of a BatchNorm whose normalized output is 0).
        auto own = c.metrics.find("grad.params_no_signal");
        if (!sub_network && !root_cut && own != c.metrics.end() && own->second.is_number() && own->second.get<double>() > 0) {
          params += own->second.get<int64_t>();
          c.metrics["grad.blocked_by"] = c.path;
        }
        // The cut is a norm over one value per group (nn.LayerNorm(1) on a
        // pooled map, GroupNorm with a channel per group on 1x1 maps): its
        // output is its bias, so no gradient passes it; NORM002 reports that
        // cause, with the path it closes (one cause, one finding; eval37 C03).
        bool degenerate_norm = false;
        for (const auto& no : s.inst->norm_ops()) {
          if (no.module != c.path) continue;
          const bool tapped = rp && rp->collector && no.input_tap >= 0 &&
                              static_cast<size_t>(no.input_tap) < rp->collector->records().size();
          const std::vector<int64_t> shape =
              tapped ? rp->collector->records()[static_cast<size_t>(no.input_tap)].shape : std::vector<int64_t>{};
          degenerate_norm = degenerate_norm || norm_groups(no, shape, c.info).values_per_group == 1;
        }
        at->metrics["grad.cut_at_degenerate_norm"] = degenerate_norm;
        at->metrics["grad.cut_blocked_modules"] = modules;
        at->metrics["grad.cut_blocked_params"] = params;
        at->metrics["grad.cut_first_layer"] = ran.front()->path;
        at->metrics["grad.cut_after"] = after;
        at->metrics["grad.cut_before"] = root_cut ? std::string("the model's own forward after its last module") : c.path;
        at->metrics["grad.cut_closes_in"] =
            root_cut ? std::string("the operations of the model's own forward after ") + after
                     : c.path + " or in the operations between the two";
        at->metrics["grad.cut_before_out_norm"] = c.metrics.at("grad.out_norm");
        // Other outputs still reach the modules before the cut ("" none).
        at->metrics["grad.cut_other_outputs"] = cut_other_outputs;
        for (LayerMetrics* l : before_cut) l->metrics["grad.blocked_by"] = at->path;
        // GRAD003's guard: a first layer at exactly zero is this cut's.
        s.doc.model_metrics["grad.cut_layer"] = at->path;
      }
    }
  }

  // Outputs the architecture discards (GRAD021, info). A module with
  // parameters that get no signal although nothing before it cut the path
  // (GRAD004's candidates) is tested once more: its output is replaced by
  // discard_probe_value in a forward of the train pass's mode (dropout off,
  // no backward, every all-zero parameter and buffer lifted) and the model's outputs
  // are compared with the same forward unedited. Unchanged outputs (relative change <= 1e-6): no output
  // depends on this module's output, so its parameters cannot get a
  // gradient from any loss over them: the last SD3/MMDiT block's context
  // query projection (context_pre_only: the attention output rows of the
  // context tokens are sliced away). A detach() or a dead ReLU changes the
  // outputs (the forward still reads the module) and stays GRAD004. At
  // most kDiscardChecks tests, the first in execution order; the rest keep
  // grad.output_discarded false (GRAD004).
  {
    constexpr size_t kDiscardChecks = 8;
    std::vector<LayerMetrics*> cand;
    for (auto& l : s.doc.layers) {
      if (!l.metrics.count("grad.params")) continue;
      MetricMap& m = l.metrics;
      m["grad.output_discarded"] = false;
      auto num = [&](const char* k) {
        auto it = m.find(k);
        return it != m.end() && it->second.is_number() ? it->second.get<double>() : 0.0;
      };
      auto str = [&](const char* k) {
        auto it = m.find(k);
        return it != m.end() && it->second.is_string() ? it->second.get<std::string>() : std::string();
      };
      auto ran = m.find("grad.module_ran");
      if (num("grad.params_no_signal") > 0 && ran != m.end() && ran->second == true && str("grad.no_signal_under").empty() &&
          str("grad.blocked_by").empty() && l.exec_order >= 0)
        cand.push_back(&l);
    }
    std::sort(cand.begin(), cand.end(), [](auto* a, auto* b) { return a->exec_order < b->exec_order; });
    // A module (not the root) whose every module with parameters that ran
    // is a candidate, two or more (a discarded branch: an unused context
    // FeedForward): tested once, by its own output, for all of them.
    struct Test {
      std::string module;               ///< whose outputs are replaced
      std::vector<LayerMetrics*> layers;  ///< the candidates it decides
      bool subtree = false;             ///< a GRAD015 sub-network's top module (grad.subtree_output_*)
    };
    std::vector<Test> tests;
    {
      std::set<const LayerMetrics*> in_cand(cand.begin(), cand.end()), grouped;
      for (const auto& p : parents) {
        std::vector<LayerMetrics*> under;
        bool all = true;
        for (auto& l : s.doc.layers) {
          if (l.path != p && l.path.rfind(p + ".", 0) != 0) continue;
          if (!l.metrics.count("grad.params") || l.exec_order < 0) continue;
          if (!in_cand.count(&l) || grouped.count(&l)) {
            all = false;
            break;
          }
          under.push_back(&l);
        }
        const LayerMetrics* pl = s.doc.find_layer(p);
        if (!all || under.size() < 2 || !pl || pl->exec_order < 0) continue;
        for (auto* l : under) grouped.insert(l);
        tests.push_back({p, under});
      }
      for (auto* l : cand)
        if (!grouped.count(l)) tests.push_back({l->path, {l}});
      // A whole sub-network without gradient (GRAD015's top module) that
      // ran: tested by its own output too. A detection head that a wrapper
      // returning only the class logits drops is dropped by the model, not
      // cut by a detach (torchvision RetinaNet's regression head, eval27).
      for (auto& l : s.doc.layers) {
        auto sm = l.metrics.find("grad.subtree_no_signal_modules");
        if (sm == l.metrics.end() || !sm->second.is_number() || l.exec_order < 0 || l.path.empty()) continue;
        tests.push_back({l.path, {&l}, true});
      }
      std::stable_sort(tests.begin(), tests.end(), [](const Test& a, const Test& b) {
        return a.layers.front()->exec_order < b.layers.front()->exec_order;
      });
    }
    if (tests.size() > kDiscardChecks) tests.resize(kDiscardChecks);
    // Zero-valued parameters and buffers lifted for these passes (ones for
    // gains and scalars, N(0, 1/fan_in) for matrices, put back after): an output
    // multiplied by a zero gain (two zero factors in a row, NF-ResNet's
    // skipinit gain after a zero-initialized branch) is closed by values
    // that training could move, not dropped by the architecture; with the
    // zeros lifted its replacement reaches the outputs, and GRAD004 stays.
    // Put back when the block ends, however it ends (the deadline, a usage
    // error rethrown below): the model as it was.
    struct PutBack {
      std::vector<std::pair<at::Tensor, at::Tensor>> saved;
      ~PutBack() {
        at::NoGradGuard ng;
        for (auto& [live, copy] : saved) live.detach().copy_(copy);
      }
    } put_back;
    std::vector<std::pair<at::Tensor, at::Tensor>>& lifted = put_back.saved;
    if (!tests.empty()) {
      at::NoGradGuard ng;
      at::Generator gen = at::detail::createCPUGenerator(s.opt.seed + 23);
      std::set<const void*> seen;
      std::vector<at::Tensor> zeros_to_lift;
      for (const auto& p : s.model.module.parameters(/*recurse=*/true)) zeros_to_lift.push_back(p);
      // Floating buffers too: a gain registered as a buffer (timm's skipinit
      // gain kept out of the optimizer) closes the branch for good, a value
      // no training moves, but a value all the same (GRAD004).
      for (const auto& b : s.model.module.buffers(/*recurse=*/true)) zeros_to_lift.push_back(b);
      for (const auto& p : zeros_to_lift) {
        if (!p.defined() || !p.is_floating_point() || p.numel() == 0 || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
        if (p.detach().ne(0).any().item<bool>()) continue;
        lifted.push_back({p, p.detach().clone()});
        lift_zero(p, gen);
      }
    }
    if (!tests.empty()) {
      // Compared bit for bit with the edited passes below, which run the same way.
      const PassSpec ref_spec = replacement_pass_spec("discard-reference");
      std::optional<c10::IValue> ref;
      try {
        ref = s.run_pass(ref_spec).output;
      } catch (const PassError&) {
      } catch (const FatalRunError&) {
      }
      for (size_t ci = 0; ref && ci < tests.size(); ++ci) {
        const std::string path = tests[ci].module;
        auto edits = std::make_shared<int64_t>(0);
        PassSpec ed = replacement_pass_spec("discard-check");
        ed.tap_edit = replace_module_output(path, edits, s.opt.seed + 7919 * (ci + 1));
        double change = std::numeric_limits<double>::infinity();
        try {
          const PassResult pr = s.run_pass(ed);
          if (*edits > 0) change = output_change(*ref, pr.output);
        } catch (const PassError&) {
        } catch (const FatalRunError&) {
        }
        // Unchanged within 1e-6: read with a tiny weight (a LayerScale of
        // 1e-5 after it: HF SwiftFormer, eval27) or not at all. NaN in its
        // place tells them apart: any arithmetic that reads it carries the
        // NaN to an output, where a slice, a mask or an unused branch drops
        // it.
        bool nan_reaches = false;
        if (*edits > 0 && change <= 1e-6) {
          auto nan_edits = std::make_shared<int64_t>(0);
          PassSpec nn = replacement_pass_spec("discard-check-nan");
          nn.tap_edit = replace_module_output(path, nan_edits, s.opt.seed, /*nan=*/true);
          try {
            const PassResult pr = s.run_pass(nn);
            nan_reaches = *nan_edits > 0 && gains_nonfinite(*ref, pr.output);
          } catch (const PassError&) {
            nan_reaches = true;  // the forward raised on NaN: it reads the value
          } catch (const FatalRunError&) {
            nan_reaches = true;
          }
        }
        if (*edits > 0 && tests[ci].subtree) {
          LayerMetrics* l = tests[ci].layers.front();
          l->metrics["grad.subtree_output_discard_change"] = metric_number(change);
          l->metrics["grad.subtree_output_discarded"] = change <= 1e-6 && !nan_reaches;
          continue;
        }
        if (*edits > 0)
          for (LayerMetrics* l : tests[ci].layers) {
            l->metrics["grad.output_discard_change"] = metric_number(change);
            l->metrics["grad.output_discard_nan_reaches"] = nan_reaches;
            l->metrics["grad.output_discarded"] = change <= 1e-6 && !nan_reaches;
            if (path != l->path) l->metrics["grad.output_discard_tested_at"] = path;
          }
      }
    }
  }

  // The output layer frozen while the layers before it train (GRAD020): a
  // `for p in model.classifier.parameters(): p.requires_grad = False` meant
  // for the backbone, or a head left frozen after a linear-probe stage.
  // The output layer: the last leaf in execution order with a weight matrix
  // or kernel of its own (2+ dims) whose output reached the loss (a nonzero
  // output gradient). Frozen means every parameter of its own has
  // requires_grad false; tied means one of them is also another module's
  // (an LM head sharing the embedding: frozen with it, a choice about the
  // embedding). A frozen layer whose weights are a fixed transform
  // (structured_weight: EDSR's MeanShift de-normalizing the output) is not
  // the output layer; the one before it is. What trains before it: the fraction of the elements of all
  // other parameters with requires_grad true, each shared tensor counted
  // once; a LoRA, prompt-tuning or BitFit run trains a few percent and
  // leaves its pretrained head frozen by design.
  if (r.backward_skipped.empty()) {
    std::map<const void*, int64_t> holders;
    for (const auto& mi : s.model.modules)
      for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) ++holders[p.value.unsafeGetTensorImpl()];
    std::map<std::string, size_t> mod_of;
    for (size_t k = 0; k < s.model.modules.size(); ++k) mod_of[s.model.modules[k].path] = k;
    LayerMetrics* out_layer = nullptr;
    for (auto& l : s.doc.layers) {
      if (!l.leaf || l.exec_order < 0 || (out_layer && l.exec_order <= out_layer->exec_order)) continue;
      auto on = l.metrics.find("grad.out_norm");
      if (on == l.metrics.end() || !on->second.is_number() || !(on->second.get<double>() > 0)) continue;
      auto k = mod_of.find(l.path);
      if (k == mod_of.end()) continue;
      bool matrix = false, fixed_transform = true;
      for (const auto& p : s.model.modules[k->second].module.named_parameters(/*recurse=*/false)) {
        if (p.value.dim() < 2 || p.value.numel() == 0) continue;
        matrix = true;
        fixed_transform = fixed_transform && !p.value.requires_grad() && structured_weight(p.value);
      }
      if (matrix && !fixed_transform) out_layer = &l;
    }
    if (out_layer) {
      LayerMetrics& ol = *out_layer;
      std::set<const void*> own;
      bool frozen = true, tied = false;
      int64_t n_frozen = 0;
      for (const auto& p : s.model.modules[mod_of.at(ol.path)].module.named_parameters(/*recurse=*/false)) {
        own.insert(p.value.unsafeGetTensorImpl());
        frozen = frozen && !p.value.requires_grad();
        n_frozen += p.value.requires_grad() ? 0 : 1;
        tied = tied || holders[p.value.unsafeGetTensorImpl()] > 1;
      }
      int64_t before = 0, trainable_before = 0;
      std::set<const void*> seen;
      for (const auto& mi : s.model.modules)
        for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) {
          const void* t = p.value.unsafeGetTensorImpl();
          if (own.count(t) || !seen.insert(t).second) continue;
          before += p.value.numel();
          trainable_before += p.value.requires_grad() ? p.value.numel() : 0;
        }
      ol.metrics["grad.output_layer"] = true;
      ol.metrics["grad.output_layer_frozen"] = frozen;
      ol.metrics["grad.output_layer_tied"] = tied;
      ol.metrics["grad.params_frozen"] = n_frozen;
      MetricMap& mm = s.doc.model_metrics;
      mm["grad.output_layer"] = ol.path;
      mm["grad.trainable_params_before_output"] = trainable_before;
      mm["grad.trainable_fraction_before_output"] =
          before > 0 ? static_cast<double>(trainable_before) / static_cast<double>(before) : 0.0;
    }
  }

  // The first six module paths, then how many more ("a, b, ... (3 more)").
  // Zero only because the assumed cross-entropy cancels a shift of every class alike.
  if (shift_invariant_params > 0)
    s.doc.assumptions.push_back(
        "the loss (" + rp->loss_description + ") gives " + std::to_string(shift_invariant_params) +
        " parameters an all-zero gradient that a random projection of the same output does not (" +
        short_list(shift_invariant_layers) +
        "): they shift every class alike, which softmax cancels; not counted as missing gradients. If the output's axis 1 "
        "is not a class axis, --loss projection (or --target) says what the loss is");
  // Biases before a train-mode BatchNorm (GRAD007, info): zero by construction.
  if (cancelled_params > 0) {
    MetricMap& mm = s.doc.model_metrics;
    mm["grad.bn_cancelled_params"] = cancelled_params;
    mm["grad.bn_cancelled_layers"] = short_list(cancelled_layers);
    mm["grad.bn_cancelled_first_layer"] = cancelled_layers.front();
  }

  // Parameters that only the outputs the loss did not read reach (GRAD009, info).
  if (other_output_params > 0) {
    MetricMap& mm = s.doc.model_metrics;
    mm["grad.other_outputs_params"] = other_output_params;
    mm["grad.other_outputs_layers"] = short_list(other_output_layers);
    mm["grad.other_outputs_first_layer"] = other_output_layers.front();
    mm["grad.unread_outputs"] = rp->unread_outputs;
    mm["grad.reaching_outputs"] = rp->reaching_outputs.empty() ? rp->unread_outputs : rp->reaching_outputs;
  }

  if (!zi.params.empty()) {
    const std::string& first = zi.params.front();
    const size_t dot = first.rfind('.');
    int64_t to_output = 0, gates = 0;
    for (const auto& [p, role] : zi.role) {
      to_output += role == "output" ? 1 : 0;
      gates += role == "gate" ? 1 : 0;
    }
    MetricMap& mm = s.doc.model_metrics;
    mm["grad.zero_init_params"] = static_cast<int64_t>(zi.params.size());
    mm["grad.zero_init_names"] = zi_names;
    mm["grad.zero_init_to_output"] = to_output;
    const int64_t on_residual = static_cast<int64_t>(zi.params.size()) - to_output - gates;
    mm["grad.zero_init_on_residual"] = on_residual;
    // For GRAD005's message: "2 residual branches", "the output", or both.
    auto count_of = [](int64_t n, const char* one, const char* many) {
      return std::to_string(n) + " " + (n == 1 ? one : many);
    };
    std::string targets;
    if (on_residual > 0) targets = count_of(on_residual, "residual branch", "residual branches");
    if (to_output > 0)
      targets += (targets.empty() ? "" : " and ") + (to_output == 1 ? std::string("the output") : count_of(to_output, "output", "outputs"));
    // A zero factor whose product the forward reads elsewhere (Doge's
    // exp(A * x) with A = 0): what it multiplies gets no gradient.
    if (gates > 0)
      targets += (targets.empty() ? "" : " and ") + count_of(gates, "gate (a product the forward reads on)",
                                                             "gates (products the forward reads on)");
    mm["grad.zero_init_targets"] = targets;
    mm["grad.zero_weight_layer"] = dot == std::string::npos ? std::string() : first.substr(0, dot);
    mm["grad.blocked_layers"] = blocked;
    mm["grad.silenced_params"] = silenced_params;
    if (blocked > 6) silenced_names += ", ... (" + std::to_string(blocked - 6) + " more)";
    mm["grad.silenced_layers"] = silenced_names;
    if (!zi.error.empty()) mm["grad.zero_init_lift_error"] = zi.error;
  }

  // Activation growth through depth (leaf modules, execution order).
  std::vector<LayerMetrics*> leaves;
  for (auto& lm : s.doc.layers)
    if (lm.leaf && lm.exec_order >= 0 && lm.metrics.count("act.rms") &&
        !(lm.metrics.count("act.is_returned_loss") && lm.metrics.at("act.is_returned_loss") == true))
      leaves.push_back(&lm);
  std::sort(leaves.begin(), leaves.end(), [](auto* a, auto* b) { return a->exec_order < b->exec_order; });
  // A module called at several depths (one self.act = nn.ReLU() reused
  // after every layer) holds the statistics of all its calls, the deepest
  // dominating: it is no reference for the first layers' scale, and no
  // growth is placed on it (it has no depth of its own).
  auto several_depths = [](const LayerMetrics* lm) {
    auto calls = lm->metrics.find("act.calls");
    return calls != lm->metrics.end() && calls->second.is_number() && calls->second.get<double>() > 1;
  };
  // Embedding lookups are no reference either: their scale is an
  // initialization convention (std 0.02 in BERT, GPT-2, FNet) that the norm
  // after them undoes, so growth measured from them reads 50x too high.
  auto lookup = [](const LayerMetrics* lm) { return lm->kind == "Embedding" || lm->kind == "EmbeddingBag"; };
  // Outputs bounded by construction (a softmax's probabilities, a sigmoid's
  // or tanh's values, and a dropout or identity handing on values in [0, 1]:
  // the attention probabilities HF's attention drops out) are no growth
  // and no reference: their RMS is set by the row length or the bound
  // (eval35 B09: BLIP's attention dropout, RMS 1/65, read as 37517x growth
  // over layers whose eps-dominated LayerNorms gave 4e-7).
  auto bounded = [](const LayerMetrics* lm) {
    if (bounded_output_kind(lm->kind)) return true;
    if (lm->kind != "Dropout" && lm->kind != "Identity") return false;
    auto mn = lm->metrics.find("act.min"), mx = lm->metrics.find("act.max");
    return mn != lm->metrics.end() && mx != lm->metrics.end() && mn->second.is_number() && mx->second.is_number() &&
           mn->second.get<double>() >= 0 && mx->second.get<double>() <= 1.0;
  };
  double ref = 0;
  int seen = 0;
  std::string ref_layer;
  for (auto* lm : leaves) {
    if (several_depths(lm) || lookup(lm) || bounded(lm)) continue;
    const double rms = lm->metrics["act.rms"].get<double>();
    if (rms > 0 && std::isfinite(rms)) {
      if (rms > ref) {
        ref = rms;
        ref_layer = lm->path;
      }
      if (++seen == 3) break;
    }
  }
  if (ref > 0) {
    double gmax = 0;
    std::string gmax_layer;
    for (auto* lm : leaves) {
      if (several_depths(lm) || bounded(lm)) continue;
      const double g = lm->metrics["act.rms"].get<double>() / ref;
      lm->metrics["act.growth"] = g;
      if (g > gmax) {
        gmax = g;
        gmax_layer = lm->path;
      }
    }
    s.doc.model_metrics["act.growth_reference_rms"] = ref;
    s.doc.model_metrics["act.growth_reference_layer"] = ref_layer;
    // The reference is the largest of the first three: growth that starts
    // inside them (StyleGAN2's mapping network) is measured from its third step.
    s.doc.model_metrics["act.growth_reference_note"] = ", the largest RMS of the first " + std::to_string(seen) +
                                                       " layers, at " + (ref_layer.empty() ? "<root>" : ref_layer);
    s.doc.model_metrics["act.growth_max"] = gmax;
    s.doc.model_metrics["act.growth_max_layer"] = gmax_layer;
    // Growth that only the last leaf shows, when it multiplies by a weight
    // matrix (the output head: a language model's lm_head whose logits
    // drifted to -170 behind a LayerNorm, 6435x against 35.6x before it):
    // the head's scale, not growth with depth (ACT002 stays silent; ACT008
    // judges the logits).
    const LayerMetrics* last = leaves.back();
    double before = 0;
    for (auto* lm : leaves)
      if (lm != last && lm->metrics.count("act.growth")) before = std::max(before, lm->metrics["act.growth"].get<double>());
    bool matrix = false;
    for (const auto& mi : s.model.modules)
      if (mi.path == last->path && !is_norm_kind(mi.kind))
        for (const auto& p : mi.module.named_parameters(/*recurse=*/false))
          if (p.value.dim() >= 2) matrix = true;
    // The head itself must make the jump (10x or more over anything before
    // it): a stack growing 1.8x per layer crosses 1000x at its last layer too.
    const double at_last = last->metrics.count("act.growth") ? last->metrics.at("act.growth").get<double>() : 0.0;
    s.doc.model_metrics["act.growth_only_at_output"] =
        matrix && leaves.size() >= 2 && at_last > kGrowthGate && before <= kGrowthGate && at_last >= 10 * before;
    // Growth through depth, leaving out such a head (ACT008's gate).
    s.doc.model_metrics["act.depth_growth_max"] =
        s.doc.model_metrics["act.growth_only_at_output"].get<bool>() ? before : gmax;
    // Shrinkage through depth: the median act.growth of the deepest quarter
    // of the leaves (at least 3; the head left out). A plain ReLU stack with
    // Xavier initialization halves the signal's variance per layer (He et
    // al. 2015): the deep layers sit orders of magnitude below the first
    // ones. A median over many layers is not moved by one tiny branch (a
    // LayerScale gain at 1e-6, a zero-initialized conv) in a residual model
    // whose stream stays level.
    // Only in a model without normalization layers: a norm resets the
    // scale, so activations below the first layers' there are a raw input
    // normalized (sensor counts through a BatchNorm), not a collapse.
    std::vector<double> deep;
    bool normalized = false;
    for (auto* lm : leaves) {
      normalized = normalized || is_norm_kind(lm->kind);
      if (lm != last && !several_depths(lm) && lm->metrics.count("act.growth")) deep.push_back(lm->metrics["act.growth"].get<double>());
    }
    const size_t q = std::max<size_t>(3, deep.size() / 4);
    if (deep.size() >= 8 && !normalized) {
      std::vector<double> tail(deep.end() - static_cast<std::ptrdiff_t>(q), deep.end());
      std::nth_element(tail.begin(), tail.begin() + static_cast<std::ptrdiff_t>(tail.size() / 2), tail.end());
      s.doc.model_metrics["act.depth_shrink"] = tail[tail.size() / 2];
    }
  }

  // The first module (execution order) already holding values beyond the
  // fp16 maximum: ACT003 fires on the first module near the limit, which
  // may itself hold none while later ones hold many (issue 15).
  {
    std::vector<const LayerMetrics*> ran;
    for (const auto& lm : s.doc.layers)
      if (lm.exec_order >= 0 && lm.metrics.count("act.beyond_fp16_count")) ran.push_back(&lm);
    std::sort(ran.begin(), ran.end(), [](auto* a, auto* b) { return a->exec_order < b->exec_order; });
    std::string first = "none";
    int64_t count = 0;
    for (const auto* lm : ran) {
      const int64_t c = lm->metrics.at("act.beyond_fp16_count").get<int64_t>();
      if (c > 0) {
        first = layer_label(lm->path);
        count = c;
        break;
      }
    }
    s.doc.model_metrics["act.first_beyond_fp16_layer"] = first;
    s.doc.model_metrics["act.first_beyond_fp16_count"] = count;
  }

  // Modules that produce an attention's query or key: their gradient is
  // small by the attention's structure, not by depth. With logits near 0
  // (any attention at initialization: BERT's std-0.02 weights) the softmax
  // is nearly uniform and its Jacobian nearly zero along the logits, so
  // d loss / d W_q and d W_k are ~100x smaller than those of the value and output
  // projections of the same block (eval21 case 04: query 5.4e-6 against the
  // head's 0.29, while layer 0's dense weights match layer 1's). They are
  // left out of the first-vs-last profiles below; a profile of q/k alone
  // would say nothing either way.
  std::set<std::string> query_key;
  for (const auto& t : taps)
    if (t.attention) {
      if (!t.attn_q.empty()) query_key.insert(t.attn_q);
      if (!t.attn_k.empty()) query_key.insert(t.attn_k);
    }
  // Gradient profile: first vs last parameterized leaf module.
  std::vector<LayerMetrics*> pleaves;
  for (auto* lm : leaves)
    if (lm->parameters > 0 && lm->metrics.count("grad.out_norm") && lm->metrics["grad.out_norm"].is_number() &&
        !query_key.count(lm->path))
      pleaves.push_back(lm);
  const bool forward_finite = col.first_nonfinite_tap() < 0 && std::isfinite(loss_v);
  bool grads_finite = col.first_nonfinite_grad_tap() < 0;
  for (const auto& lm : s.doc.layers) {
    auto it = lm.metrics.find("grad.param_nonfinite_count");
    if (it != lm.metrics.end() && it->second.get<int64_t>() > 0) grads_finite = false;
  }
  // A NaN gradient reads as a zero norm (norms are over finite values): the
  // profile says nothing then, and nonfinite-gradient is the finding.
  if (pleaves.size() >= 2 && forward_finite && grads_finite) {
    const double first = pleaves.front()->metrics["grad.out_norm"].get<double>();
    const double last = pleaves.back()->metrics["grad.out_norm"].get<double>();
    const bool blocked_first = first == 0 && pleaves.front()->metrics.count("grad.zero_explained_by");
    if (last > 0 && std::isfinite(first) && !blocked_first) {
      s.doc.model_metrics["grad.input_output_ratio"] = first / last;
      s.doc.model_metrics["grad.growth_between_branches"] = false;
      // How much depth the profile spans: the residual blocks holding its
      // leaves. In a model with residual blocks, a profile inside one block
      // and the layers after it (the last block of a BERT fine-tuned on top
      // of frozen layers, then its pooler and head: eval21 case 04) measures
      // one block's internal structure and the head's boundary, not
      // gradients vanishing or exploding with depth: GRAD002/GRAD003 need
      // two blocks or more. Models without residual blocks are judged on
      // their leaves as before.
      {
        std::set<std::string> blocks;
        for (const auto& r : s.inst->residuals())
          if (!r.block.empty()) blocks.insert(r.block);
        std::set<std::string> spanned;
        for (const auto* lm : pleaves)
          for (const auto& b : blocks)
            if (lm->path == b || lm->path.compare(0, b.size() + 1, b + ".") == 0) spanned.insert(b);
        s.doc.model_metrics["grad.profile_blocks"] = static_cast<int64_t>(spanned.size());
        s.doc.model_metrics["grad.profile_shallow"] = !blocks.empty() && spanned.size() < 2;
        // The same layers of the first and the last block the profile
        // spans: the median, over the leaves of the first block that the
        // last block has under the same relative name (attention.value,
        // mlp.fc1), of their output-gradient ratio. The first-vs-last leaf
        // ratio also crosses the head and whatever sits between the stack
        // and it (a BERT's std-0.02 pooler and classifier: 4.5e-4 from the
        // first block's value projection to the head while the first and
        // last blocks' projections agree within 2x; eval22); this one
        // measures depth alone. The guards below read it.
        auto block_of = [&](const std::string& path) {
          std::string best;
          for (const auto& b : blocks)
            if (path.compare(0, b.size() + 1, b + ".") == 0 && b.size() > best.size()) best = b;
          return best;
        };
        std::string first_block, last_block;
        for (const auto* lm : pleaves) {
          const std::string b = block_of(lm->path);
          if (b.empty()) continue;
          if (first_block.empty()) first_block = b;
          last_block = b;
        }
        if (!first_block.empty() && first_block != last_block) {
          std::map<std::string, double> last_by_role;
          for (const auto* lm : pleaves)
            if (block_of(lm->path) == last_block)
              last_by_role[lm->path.substr(last_block.size() + 1)] = lm->metrics.at("grad.out_norm").get<double>();
          std::vector<double> ratios;
          for (const auto* lm : pleaves) {
            if (block_of(lm->path) != first_block) continue;
            auto it = last_by_role.find(lm->path.substr(first_block.size() + 1));
            const double a = lm->metrics.at("grad.out_norm").get<double>();
            if (it != last_by_role.end() && it->second > 0 && a > 0 && std::isfinite(a)) ratios.push_back(a / it->second);
          }
          if (ratios.size() >= 2) {
            std::nth_element(ratios.begin(), ratios.begin() + static_cast<std::ptrdiff_t>(ratios.size() / 2), ratios.end());
            s.doc.model_metrics["grad.block_ratio"] = ratios[ratios.size() / 2];
            s.doc.model_metrics["grad.block_ratio_blocks"] = first_block + " / " + last_block;
          }
        }
      }
      // LayerScale-style gains (GRAD008 info when gradients vanish with them).
      {
        const auto gains = first / last < 1e-3 ? small_branch_gains(s) : std::vector<std::pair<std::string, double>>{};
        std::string names;
        double gmax = 0;
        for (size_t i = 0; i < gains.size(); ++i) {
          gmax = std::max(gmax, gains[i].second);
          if (i < 6) names += (i ? ", " : "") + gains[i].first;
        }
        if (gains.size() > 6) names += ", ... (" + std::to_string(gains.size() - 6) + " more)";
        s.doc.model_metrics["grad.small_gain_params"] = static_cast<int64_t>(gains.size());
        s.doc.model_metrics["grad.small_gain_names"] = names;
        s.doc.model_metrics["grad.small_gain_absmax"] = gmax;
      }
      s.doc.model_metrics["grad.first_layer"] = pleaves.front()->path;
      s.doc.model_metrics["grad.last_layer"] = pleaves.back()->path;
      s.doc.model_metrics["grad.first_norm"] = first;
      s.doc.model_metrics["grad.last_norm"] = last;
      // How the growth toward the input is spread over the stack: the largest
      // growth between two consecutive parameterized leaves (in log scale) as a
      // share of all the growth. Gradients that explode through depth grow
      // layer after layer (each layer's Jacobian a little above 1, share
      // 1/depth); one op that multiplies the gradient by 1000 (a LayerNorm
      // over rows that are almost constant, such as zero padding, whose
      // backward divides by sqrt(var + eps)) carries it all (share about 1),
      // and what it multiplies reaches no parameter when those rows are zero.
      //
      // The mirror for shrinking toward the input: the largest drop between
      // two consecutive parameterized leaves as a share of the net drop from
      // the last leaf to the first (log scale). Gradients that vanish
      // through depth shrink layer after layer (share about 1/depth); a drop
      // that one step makes (share >= 0.5) is one module's scaling: a
      // LayerScale gain of 1e-5 (timm ViTs: every branch dips by 1e-5 and the
      // stream's gradient comes back after it, so the net drop is one dip),
      // a head initialized at 0.001 scale (BEiT), a cls-token readout.
      double grow = 0, top = 0, shrink = 0, top_s = 0;
      size_t top_i = 0, top_si = 0;
      for (size_t i = 0; i + 1 < pleaves.size(); ++i) {
        const double a = pleaves[i]->metrics["grad.out_norm"].get<double>();
        const double b = pleaves[i + 1]->metrics["grad.out_norm"].get<double>();
        if (!(a > 0 && b > 0 && std::isfinite(a) && std::isfinite(b)) || a == b) continue;
        const double step = std::log(a > b ? a / b : b / a);
        double& sum = a > b ? grow : shrink;
        double& best = a > b ? top : top_s;
        size_t& at = a > b ? top_i : top_si;
        sum += step;
        if (step > best) {
          best = step;
          at = i;
        }
      }
      // The norm ops of the step from leaf i to leaf i + 1: those that run
      // after the input-side leaf and no later than the next leaf, which may
      // be the norm itself (a LayerNorm has a gain).
      auto norms_in_step = [&](size_t i) {
        std::vector<const NormOpSite*> out;
        const int64_t lo = pleaves[i]->exec_order, hi = pleaves[i + 1]->exec_order;
        for (const auto& n : s.inst->norm_ops()) {
          auto it = idx.find(n.module);
          if (it == idx.end()) continue;
          const int64_t e = s.doc.layers[it->second].exec_order;
          if (e > lo && e <= hi) out.push_back(&n);
        }
        return out;
      };
      // Whether leaf i + 1 reads leaf i's output (directly or through
      // modules without parameters: dropout, activations): only then is the
      // step between them one backward edge. Leaves next to each other in
      // execution order may lie on parallel branches (a UNet's timestep MLP,
      // then its conv_in; a dueling DQN's advantage and value heads): a
      // ratio "between" them says nothing about one module's scaling.
      auto chained_step = [&](size_t i) {
        bool chained = false;
        std::vector<std::string> work = {pleaves[i]->path};
        std::set<std::string> seen;
        for (size_t w = 0; w < work.size() && w < 64 && !chained; ++w) {
          for (const auto& t : taps) {
            // Its own output taps, and those of the modules around it: a
            // value leaving several modules at once (attn.proj's output is
            // attn's) records its outside consumers on the outermost one.
            const bool around = t.module.empty() || work[w].rfind(t.module + ".", 0) == 0;
            if (t.kind != TapKind::kModuleOutput || (t.module != work[w] && !around)) continue;
            for (const auto& c : t.consumers) {
              if (c == pleaves[i + 1]->path) chained = true;
              auto ci = idx.find(c);
              if (ci != idx.end() && s.doc.layers[ci->second].parameters == 0 && seen.insert(c).second)
                work.push_back(c);
            }
          }
        }
        return chained;
      };
      if (grow > 0) {
        s.doc.model_metrics["grad.max_step_share"] = top / grow;
        s.doc.model_metrics["grad.max_step_layer"] = pleaves[top_i]->path;
        // Half or more of the growth "between" two leaves on parallel
        // branches: the ratio compares heads, not a backward path (a dueling
        // DQN's value head, whose gradient a softmax loss cancels: Q = V + A
        // shifts every action's logit alike).
        s.doc.model_metrics["grad.growth_between_branches"] = top / grow >= 0.5 && !chained_step(top_i);
        // Whether that step crosses a normalization.
        const auto crossed = norms_in_step(top_i);
        s.doc.model_metrics["grad.max_step_norm"] = crossed.empty() ? std::string() : crossed.front()->module;
      }
      const double net = first > 0 && last > first ? std::log(last / first) : 0.0;
      if (shrink > 0 && net > 0) {
        MetricMap& mm = s.doc.model_metrics;
        // A norm in that step whose groups hold one value each (GroupNorm
        // after global pooling): its backward is zero, NORM002's finding.
        bool degenerate = false;
        for (const NormOpSite* n : norms_in_step(top_si)) {
          if (n->input_tap < 0) continue;
          const auto& shape = col.records()[static_cast<size_t>(n->input_tap)].shape;
          if (shape.size() < 2) continue;
          int64_t spatial = 1;
          for (size_t d = 2; d < shape.size(); ++d) spatial *= shape[d];
          const auto g = n->args.value("num_groups", nlohmann::json());
          if (n->op == "instance_norm" && spatial == 1) degenerate = true;
          if (n->op == "group_norm" && g.is_number_integer() && g.get<int64_t>() > 0 &&
              shape[1] / g.get<int64_t>() * spatial == 1)
            degenerate = true;
        }
        mm["grad.max_shrink_degenerate_norm"] = degenerate;
        // A drop between leaves on parallel branches is no module's scaling.
        const bool chained = chained_step(top_si);
        mm["grad.max_shrink_chained"] = chained;
        mm["grad.max_shrink_share"] = std::min(1.0, top_s / net);
        mm["grad.max_shrink_from"] = pleaves[top_si]->path;
        mm["grad.max_shrink_to"] = pleaves[top_si + 1]->path;
        mm["grad.max_shrink_factor"] = std::exp(top_s);
        mm["grad.shrink_concentrated"] = top_s / net >= 0.5 && chained;
        // Half or more of the drop in one step between leaves that do not
        // read each other: execution order jumps from one branch to another
        // (an encoder's last layer, then the decoder's embedding), and the
        // first and last leaves' ratio is the junction's, not a decline
        // through depth. SpeechT5 at Hugging Face's N(0, 0.02) init (eval34
        // C16): the encoder's gradient is flat (0.0049 to 0.0076) and the
        // whole drop is the cross-attention's v_proj/k_proj into it.
        mm["grad.shrink_between_branches"] = top_s / net >= 0.5 && !chained;
      } else {
        s.doc.model_metrics["grad.shrink_concentrated"] = false;
        s.doc.model_metrics["grad.shrink_between_branches"] = false;
      }
    }
  }

  // The scale-invariant profile (issue 16.9): |grad W| / |W| of the first and
  // last leaf with a weight matrix, in execution order. A norm after a layer
  // with large inputs divides that layer's output gradient by the input scale
  // while its weight gradient (output gradient x input) stays healthy; the
  // ratio of weight-relative gradients is what the learning rate acts on.
  // Left out: exact zeros (no-gradient-path's), sparse gradients (more than
  // half the rows or more exactly zero: embeddings, whose gradient touches
  // only the rows of the batch's tokens), layers without a 2+-dim weight.
  std::vector<LayerMetrics*> wleaves;
  for (auto* lm : leaves) {
    auto tw = lm->metrics.find("grad.to_weight");
    auto zr = lm->metrics.find("grad.zero_rows_fraction");
    if (tw == lm->metrics.end() || !tw->second.is_number() || tw->second.get<double>() <= 0) continue;
    if (zr != lm->metrics.end() && zr->second.get<double>() >= 0.5) continue;
    if (query_key.count(lm->path)) continue;  // small by the attention's structure (above)
    wleaves.push_back(lm);
  }
  if (wleaves.size() >= 2 && forward_finite && grads_finite) {
    const double first = wleaves.front()->metrics["grad.to_weight"].get<double>();
    const double last = wleaves.back()->metrics["grad.to_weight"].get<double>();
    MetricMap& mm = s.doc.model_metrics;
    mm["grad.rel_ratio"] = first / last;
    mm["grad.rel_first_layer"] = wleaves.front()->path;
    mm["grad.rel_last_layer"] = wleaves.back()->path;
    mm["grad.rel_first"] = first;
    mm["grad.rel_last"] = last;
  }
  // GRAD002's guard: the output-gradient ratio made by one normalization's
  // backward (half or more of the growth in the step across it) while the
  // weight-relative gradients stay within 10x: a LayerNorm over rows that are
  // almost constant (zero padding) with a tiny eps divides by sqrt(eps) there,
  // and what it multiplies meets zero inputs, so no parameter receives it.
  // Gradients that explode through depth, or a parameterized layer with a
  // huge gain, are not this.
  {
    MetricMap& mm = s.doc.model_metrics;
    auto sh = mm.find("grad.max_step_share");
    auto nm = mm.find("grad.max_step_norm");
    auto rr = mm.find("grad.rel_ratio");
    const bool one_norm = sh != mm.end() && sh->second.is_number() && sh->second.get<double>() >= 0.5 &&
                          nm != mm.end() && nm->second.is_string() && !nm->second.get<std::string>().empty() &&
                          rr != mm.end() && rr->second.is_number() && rr->second.get<double>() >= 0.1 &&
                          rr->second.get<double>() <= 10;
    if (mm.count("grad.input_output_ratio")) mm["grad.ratio_from_one_norm"] = one_norm;
  }
  // GRAD003's guard: raw output-gradient norms that vanish toward the input
  // while the weight-relative gradients stay within 10x of each other are a
  // scale effect (a norm after a layer with large inputs), not vanishing.
  {
    MetricMap& mm = s.doc.model_metrics;
    auto rr = mm.find("grad.rel_ratio");
    // Where the activations themselves collapse through depth (the deepest
    // quarter of the leaves 100x or more below the first layers:
    // act.depth_shrink < 0.01), the backward mirrors the forward: the output
    // gradients shrink toward the input as the activations grow toward it,
    // their product (the weight gradient) stays level, and every layer's
    // update is tiny. That is the vanishing-signal failure of a deep plain
    // ReLU stack with Xavier initialization (He et al. 2015), whatever the
    // weight-relative ratio.
    auto ds = mm.find("act.depth_shrink");
    const bool collapsing_forward = ds != mm.end() && ds->second.is_number() && ds->second.get<double>() < 0.01;
    mm["grad.rel_contradicts_vanishing"] = !collapsing_forward && rr != mm.end() && rr->second.is_number() &&
                                           std::isfinite(rr->second.get<double>()) && rr->second.get<double>() >= 0.1;
    // GRAD003's cause where the forward collapses too: every layer scales
    // the signal down (HF's conv init at std 0.02 in SuperPoint's encoder,
    // eval48: activations and gradients shrink together).
    if (collapsing_forward) {
      char nb[32];
      std::snprintf(nb, sizeof nb, "%.3g", ds->second.get<double>());
      mm["grad.forward_collapse_note"] = std::string("; the activations shrink through depth the same way (the deepest "
                                                     "layers' RMS is ") + nb +
                                         "x the first layers'): the layers scale the signal down in both directions, "
                                         "as weights initialized below sqrt(2 / fan_in) (a fixed std such as 0.02) do";
    }
    // GRAD003/GRAD002's guard in a model with residual blocks: the same
    // layers of the first and last block within 100x of each other
    // (grad.block_ratio) say the stack does not lose or gain the gradient
    // with depth; the change is at its ends (the head, a pooler).
    auto br = mm.find("grad.block_ratio");
    const bool level_blocks = br != mm.end() && br->second.is_number() && std::isfinite(br->second.get<double>());
    if (mm.count("grad.input_output_ratio")) {
      mm["grad.blocks_contradict_vanishing"] = level_blocks && br->second.get<double>() >= 0.01;
      mm["grad.blocks_contradict_exploding"] = level_blocks && br->second.get<double>() <= 100;
    }
    // GRAD002's, the same the other way, in a model whose activations do
    // not grow with depth (act.depth_growth_max below 100): raw
    // output-gradient norms that grow toward the input while the
    // weight-relative gradients stay within 10x are a scale effect (an
    // embedding initialized at std 0.02 before an RMSNorm, which divides its
    // output gradient by that RMS: Hugging Face Qwen3 and RWKV at
    // initialization, 6578x and 6944x raw, 0.8x and 0.19x weight-relative,
    // activations level within 1.1x). Where the activations grow through
    // depth, the backward mirrors the forward (a stack with gain 1.8 per
    // layer: activations 1156x, output gradients 3748x toward the input) and
    // the gradients explode with them, whatever the weight-relative ratio.
    auto dg = mm.find("act.depth_growth_max");
    const bool level_forward = dg != mm.end() && dg->second.is_number() && dg->second.get<double>() < 100;
    mm["grad.rel_contradicts_exploding"] = level_forward && rr != mm.end() && rr->second.is_number() &&
                                           std::isfinite(rr->second.get<double>()) && rr->second.get<double>() <= 10;
    // GRAD002/GRAD003's third guard: a BatchNorm that normalizes with the
    // statistics of fewer than 16 values per channel in the train pass (batch
    // 2 through a 2x2 feature map: 8) divides its output gradient by a noisy
    // sigma of a handful of values, and the gradient's norm across depth
    // follows that noise, not the model (SelecSLS at batch 2: 18405x toward
    // the input, at batch 8: 126x; LeViT: 1.4e-4 and 1.5). The same 16 as
    // bn.mean_z and bn.var_ratio need (docs/metrics.md).
    int64_t bn_min = -1;
    for (size_t i = 0; i < taps.size() && i < recs.size(); ++i) {
      if (taps[i].kind != TapKind::kBatchNormInput || recs[i].calls == 0 || recs[i].shape.size() < 2) continue;
      int64_t v = recs[i].shape[0];
      for (size_t d = 2; d < recs[i].shape.size(); ++d) v *= recs[i].shape[d];
      bn_min = bn_min < 0 ? v : std::min(bn_min, v);
    }
    if (mm.count("grad.input_output_ratio")) {
      mm["grad.bn_batch_noise"] = bn_min >= 0 && bn_min < 16;
      const auto& ratio = mm["grad.input_output_ratio"];
      if (ratio.is_number() && ratio.get<double>() > 0 && std::isfinite(ratio.get<double>()))
        mm["grad.input_output_ratio_log10_abs"] = std::abs(std::log10(ratio.get<double>()));
      if (bn_min >= 0) mm["grad.bn_values_per_channel_min"] = bn_min;
    }
  }

  // Where NaN/Inf started, forward.
  const bool inputs_finite = !s.doc.model_metrics["input.any_nonfinite"].get<bool>();
  if (col.first_nonfinite_tap() >= 0 && inputs_finite) {
    // The first module whose output is non-finite. When its own inputs are
    // non-finite already, an op its caller runs outside any child module
    // made them (a softmax over a fully masked row inside an attention
    // module, whose attn_dropout only passes the NaN on): the caller, its
    // parent module, is named instead, up to a module whose inputs are
    // finite (a targeted pass each, only on a non-finite forward).
    std::string culprit = taps[static_cast<size_t>(col.first_nonfinite_tap())].module;
    const std::string first_seen = culprit;
    for (int up = 0; up < 64; ++up) {
      auto it = idx.find(culprit);
      if (it == idx.end()) break;
      // Targeted pass: the same forward with taps on this module's inputs.
      InstrumentOptions io;
      io.op_taps = false;
      io.inspect_inputs_of = culprit;
      // Every op's output watched for NaN/Inf (the precision emulation's
      // round nodes, rounding to float32: no change): the producer op.
      io.round_ops = at::kFloat;
      InstrumentedModel probe(s.model, io);
      PassSpec ps;
      ps.name = "train-inputs-of-first-nonfinite";
      ps.probe = "forward_backward";
      ps.train_mode = true;
      ps.instrumented = &probe;
      PassResult pr = s.run_pass(std::move(ps));
      TensorStats in;
      for (const auto& t : probe.taps())
        if (t.kind == TapKind::kModuleInput) in.merge(pr.collector->records()[static_cast<size_t>(t.id)].fwd);
      // The caller: the nearest ancestor whose forward ran (a ModuleList
      // holding the culprit is never called; the module indexing it is).
      // Past the top-level modules, the root's own forward (a free
      // function it calls: AdaIN's calc_mean_std, eval48).
      std::string parent = culprit;
      bool has_caller = !culprit.empty();
      while (has_caller) {
        parent = parent_module(parent);
        if (parent.empty()) {
          has_caller = idx.count("") > 0;
          break;
        }
        auto pit = idx.find(parent);
        if (pit != idx.end() && s.doc.layers[pit->second].exec_order >= 0) break;
      }
      // A -inf alone among its inputs is a mask handed down by the caller
      // (masked_fill(mask == 0, float("-inf")), an additive -inf mask), as
      // the producer search below reads a -inf: the module that turns it
      // into NaN (a softmax over a fully masked row) is the culprit, not the
      // root that built the mask (eval57 bert: ACT001 named <root>). Unless
      // an op whose domain ends there made that -inf outside the module
      // (log(0) in the caller).
      bool domain_neg_inf = false;
      if (in.neg_inf > 0 && in.nan == 0 && in.inf == in.neg_inf) {
        const auto& rs = probe.round_sites();
        for (const auto& ev : pr.collector->round_events)
          if (ev.site >= 0 && ev.site < static_cast<int64_t>(rs.size()) && ev.inf > 0) {
            const RoundSite& site = rs[static_cast<size_t>(ev.site)];
            if (kDomainEndOps.count(site.op) && !within_module(site.module, culprit)) domain_neg_inf = true;
          }
      }
      const bool from_caller = in.nan > 0 || in.inf > in.neg_inf || (in.neg_inf > 0 && domain_neg_inf);
      if (from_caller && has_caller) {
        culprit = parent;
        continue;
      }
      const int64_t mask_neg_inf = from_caller ? 0 : in.neg_inf;
      LayerMetrics& lm = s.doc.layers[it->second];
      lm.metrics["fwd.first_nonfinite"] = true;
      // Its own weights (parameters and buffers, its submodules' included)
      // already hold NaN/Inf: the run did not make them, a diverged step
      // saved to the checkpoint or a broken conversion did (ACT012, not
      // ACT001's overflow or domain error).
      {
        int64_t bad = 0;
        std::string names;
        int64_t named = 0;
        auto scan = [&](const std::string& name, const at::Tensor& t) {
          if (!t.defined() || !t.is_floating_point() || t.numel() == 0) return;
          const int64_t n = at::isfinite(t.detach()).logical_not().sum().item<int64_t>();
          if (n == 0) return;
          bad += n;
          if (++named <= 4) names += (named > 1 ? ", " : "") + name;
          else if (named == 5) names += ", ...";
        };
        for (const auto& mi : s.model.modules) {
          if (mi.path != culprit) continue;
          for (const auto& p : mi.module.named_parameters(/*recurse=*/true)) scan(p.name, p.value);
          for (const auto& b : mi.module.named_buffers(/*recurse=*/true)) scan(b.name, b.value);
        }
        lm.metrics["fwd.weights_nonfinite"] = bad > 0;
        lm.metrics["fwd.weights_nonfinite_count"] = bad;
        lm.metrics["fwd.weights_nonfinite_names"] = names;
      }
      if (culprit != first_seen) lm.metrics["fwd.nonfinite_passed_to"] = first_seen;
      // The counts of every output of the culprit: the model's own outputs
      // all count (its primary output may be finite while another holds the
      // Inf: SAC's std = log_std.exp() beside the action, eval50).
      {
        int64_t nan_all = 0, inf_all = 0;
        std::string other;
        for (const auto& t : taps) {
          if (t.kind != TapKind::kModuleOutput || t.module != culprit || static_cast<size_t>(t.id) >= recs.size()) continue;
          const TensorStats& st = recs[static_cast<size_t>(t.id)].fwd;
          nan_all += st.nan;
          inf_all += st.inf;
          if (!t.primary && st.nonfinite() > 0 && other.empty()) other = "output[" + std::to_string(t.output_index) + "]";
        }
        auto cnt = [&](const char* k) {
          auto it = lm.metrics.find(k);
          return it != lm.metrics.end() && it->second.is_number() ? it->second.get<int64_t>() : int64_t{0};
        };
        if (!other.empty() && nan_all + inf_all > cnt("act.nan_count") + cnt("act.inf_count")) {
          lm.metrics["act.nan_count"] = nan_all;
          lm.metrics["act.inf_count"] = inf_all;
          lm.metrics["fwd.nonfinite_output"] = other;
        }
      }
      double in_absmax = in.absmax(), in_min = in.finite() ? in.min : 0.0, in_max = in.finite() ? in.max : 0.0;
      if (culprit.empty()) {
        // The root's inputs are the model's (floating ones; all finite here).
        bool any = false;
        for (const auto& x : s.doc.inputs) {
          auto num = [&](const char* k) -> std::optional<double> {
            auto it = x.metrics.find(k);
            if (it == x.metrics.end() || !it->second.is_number()) return std::nullopt;
            return it->second.get<double>();
          };
          auto fl = x.metrics.find("input.is_float");
          if (fl == x.metrics.end() || !fl->second.is_boolean() || !fl->second.get<bool>()) continue;
          const auto a = num("input.absmax"), lo = num("input.min"), hi = num("input.max");
          if (!a || !lo || !hi) continue;
          in_absmax = any ? std::max(in_absmax, *a) : *a;
          in_min = any ? std::min(in_min, *lo) : *lo;
          in_max = any ? std::max(in_max, *hi) : *hi;
          any = true;
        }
      }
      lm.metrics["fwd.input_absmax"] = in_absmax;
      lm.metrics["fwd.input_min"] = in_min;
      lm.metrics["fwd.input_max"] = in_max;
      lm.metrics["fwd.input_nonfinite_count"] = in.nonfinite();
      std::string note = nonfinite_state_note(s, *s.inst, culprit);
      if (mask_neg_inf > 0)
        note += "; " + std::to_string(mask_neg_inf) + " of its input values are -inf, read as a mask its caller built";
      if (lm.metrics.count("fwd.nonfinite_output"))
        note += "; they are in its " + lm.metrics["fwd.nonfinite_output"].get<std::string>() +
                ", not in the output the loss reads (--output-index)";
      // The op that made the first NaN/Inf inside it (its own forward or a
      // child's), from the round nodes of the targeted pass: a root of a
      // one-pass variance E[x^2] - E[x]^2 that cancellation made negative
      // (eval27 C01: eps cannot help), a log or root of a negative value,
      // an overflow.
      {
        const auto& rs = probe.round_sites();
        std::string producer_op, makes;
        bool one_pass = false;
        for (const auto& ev : pr.collector->round_events) {
          if (ev.site < 0 || ev.site >= static_cast<int64_t>(rs.size()) || (ev.inf == 0 && ev.nan == 0)) continue;
          const RoundSite& site = rs[static_cast<size_t>(ev.site)];
          if (!within_module(site.module, culprit)) continue;
          // A -inf alone is a mask fill (masked_fill(mask, -inf), an
          // additive -inf mask), except from an op whose domain ends there:
          // log(0) (a depth loss's log of a ReLU head's exact zeros: eval46
          // depth_relu named the pow after it), x / 0, a negative power of 0.
          if (ev.negative_inf_only && ev.nan == 0 && !kDomainEndOps.count(site.op)) continue;
          producer_op = site.op;
          makes = ev.inf > 0 ? "Inf" : "NaN";
          one_pass = site.one_pass_variance_root;
          break;
        }
        // A variance or standard deviation that made NaN (no Inf) from
        // finite values: torch.var/std divide by N - correction, 1 by
        // default, so over a single value they are 0/0 (PyTorch warns
        // "degrees of freedom is <= 0"; AdaIN's calc_mean_std on a 1x1 map,
        // eval48).
        static const std::set<std::string> spread_ops = {"aten::var", "aten::std", "aten::var_mean", "aten::std_mean"};
        const bool spread_nan = spread_ops.count(producer_op) > 0 && makes == "NaN";
        lm.metrics["fwd.producer_op"] = producer_op;
        lm.metrics["fwd.producer_one_pass_variance"] = one_pass;
        lm.metrics["fwd.producer_spread_nan"] = spread_nan;
        if (!producer_op.empty())
          note += "; the first " + makes + " comes from " + producer_op +
                  (one_pass ? " of a one-pass variance E[x^2] - E[x]^2, which cancellation in float makes negative "
                              "where the mean is large against the spread (no eps fixes a negative variance)"
                   : spread_nan ? ", which divides by N - 1 by default (unbiased): over a single value (N = 1) "
                                  "that is 0/0, whatever eps is added after it"
                                : std::string());
      }
      if (culprit != first_seen)
        note += "; an op in its own forward (not in a child module) made the first NaN/Inf: " + first_seen +
                ", the first module to output them, received them as input";
      if (!note.empty()) lm.metrics["fwd.cause_note"] = note;
      break;
    }
  }

  // Where NaN/Inf started, backward (only meaningful when forward was finite).
  if (forward_finite) {
    std::string culprit, from;
    const int64_t g = col.first_nonfinite_grad_tap();
    if (g >= 0) {
      const TapSite& site = taps[static_cast<size_t>(g)];
      from = site.module;
      // The gradient w.r.t. this module's output went non-finite inside the
      // backward of the op that consumed it: name that module when there is one.
      // A module whose output its parent returns as its own (the last layer
      // of a Sequential) has its consumers on the parent's tap of the same
      // tensor: follow the enclosing taps whose gradient is non-finite too.
      const TapSite* cur = &site;
      for (int hops = 0; hops < 32 && cur->consumers.empty(); ++hops) {
        const TapSite* outer = nullptr;
        for (const TapSite& t : taps) {
          if (t.kind != TapKind::kModuleOutput || t.module == cur->module) continue;
          const bool encloses = t.module.empty() || cur->module.rfind(t.module + ".", 0) == 0;
          if (!encloses || recs[static_cast<size_t>(t.id)].grad.nonfinite() == 0) continue;
          if (!outer || t.module.size() > outer->module.size()) outer = &t;
        }
        if (!outer) break;
        cur = outer;
      }
      culprit = (cur->consumers.size() == 1 && !cur->consumers.front().empty()) ? cur->consumers.front() : site.module;
      if (culprit == site.module) culprit = nonfinite_gradient_producer(s, taps, recs, site.module);
    } else {
      // Only parameter gradients: the parameterized module nearest the loss.
      int64_t best = -1;
      for (auto& lm : s.doc.layers) {
        auto it = lm.metrics.find("grad.param_nonfinite_count");
        if (it != lm.metrics.end() && it->second.get<int64_t>() > 0 && lm.exec_order > best) {
          best = lm.exec_order;
          culprit = lm.path;
        }
      }
      from = culprit;
    }
    if (!culprit.empty() && idx.count(culprit)) {
      LayerMetrics& lm = s.doc.layers[idx[culprit]];
      lm.metrics["grad.first_nonfinite"] = true;
      lm.metrics["grad.nonfinite_from"] = from;
      // The ops of its own forward whose backward is infinite at 0.
      const std::string ops = singular_backward_ops(s, culprit);
      lm.metrics["grad.singular_ops"] = ops;
      lm.metrics["grad.singular_ops_note"] =
          ops.empty() ? std::string()
                      : "; its own forward computes " + ops +
                            ", whose derivative is infinite where the argument is 0 (or at the edge of its domain)";
      int64_t count = 0;
      if (g >= 0) {
        count = recs[static_cast<size_t>(g)].grad.nonfinite();
      } else if (lm.metrics.count("grad.param_nonfinite_count")) {
        count = lm.metrics["grad.param_nonfinite_count"].get<int64_t>();
      }
      lm.metrics["grad.nonfinite_count"] = count;
      // Whether any parameter's gradient is non-finite: a NaN that the
      // backward drops before it reaches a parameter (an Embedding's
      // padding_idx rows, a masked_fill's backward) leaves every update
      // finite, and a GradScaler sees nothing (GRAD011, info).
      int64_t param_nonfinite = 0;
      for (const auto& l : s.doc.layers) {
        auto it = l.metrics.find("grad.param_nonfinite_count");
        if (it != l.metrics.end() && it->second.is_number_integer()) param_nonfinite += it->second.get<int64_t>();
      }
      lm.metrics["grad.nonfinite_reaches_parameters"] = param_nonfinite > 0;
    }
  }

  s.doc.probes["forward_backward"] = {
      {"pass", "train"},
      {"taps", taps.size()},
      {"baked_batch_norm_flags", s.inst->baked_batch_norm()},
      {"baked_dropout_flags", s.inst->baked_dropout()},
      {"modules_measured", order.size()},
  };
  (void)finite_or;
}

const std::vector<std::string>& forward_backward_writes() {
  static const std::vector<std::string> names = {
      // bn.batch_of_one, bn.values_per_channel: a train pass that BatchNorm
      // refused (one value per channel), turned into evidence for BN006/BN010
      "act.", "attn.", "bn.batch_of_one", "bn.values_per_channel", "fwd.", "grad.", "loss.", "moe.", "norm.eps", "norm.gain_absmax", "norm.gain_mean",
      "norm.gain_p99", "norm.raises_single_value", "norm.op", "norm.input_shape", "norm.groups_per_pass", "param.", "run.trained", "run.trained_from", "run.trained_note", "sat.", "softmax."};
  return names;
}

}  // namespace nd
