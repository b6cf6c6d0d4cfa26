// Training-step probes: the update ratio of the first optimizer step
// (--lr, --optimizer) and the replay of N optimizer steps on the sample batch
// (--steps). Both use the loss of the train pass (Session::run_pass with
// backward: --target and --loss, docs in README "loss").
//
// Update ratio, per parameter with |weight| > 0 (docs/metrics.md `update.`;
// judged for weights of 2+ dims only, as LARS leaves biases and gains out):
//   sgd:  lr * |g| / |w|
//   adam: |lr * g / (|g| + eps)| / |w| elementwise, eps = 1e-8: Adam's first
//         step (bias-corrected m = g, v = g^2), about lr * sqrt(numel) / |w|;
//         later steps are bounded by about the same size.
// The rule of thumb that the ratio should be about 1e-3 is Karpathy's
// (CS231n notes, "Babysitting the learning process": ratio of the update
// magnitudes to the value magnitudes); per-layer ratios are the quantity LARS
// (You, Gitman, Ginsburg 2017) equalizes across layers.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "probes/training/training.h"
#include "probes/session.h"

namespace nd {
namespace {

/// Parameters whose RMS is below this are initialized near zero by design
/// (timm's cls_token/reg_token at std 1e-6): not judged by the update ratio.
constexpr double kNearZeroInitRms = 1e-4;


constexpr double kAdamBeta1 = 0.9, kAdamBeta2 = 0.999, kAdamEps = 1e-8;


std::string param_path(const std::string& module, const std::string& name) {
  return module.empty() ? name : module + "." + name;
}

double norm_of(const at::Tensor& t) { return t.detach().to(at::kDouble).norm().item<double>(); }

/// |first update| of one parameter for the optimizer (see the file comment).
double first_update_norm(const at::Tensor& g, double lr, const std::string& optimizer) {
  const at::Tensor gd = g.detach().to(at::kDouble);
  if (optimizer == "adam") return lr * (gd / (gd.abs() + kAdamEps)).norm().item<double>();
  return lr * gd.norm().item<double>();
}

/// Parameters of the model in named_modules() order: owning module path,
/// parameter name, tensor.
struct Param {
  std::string module, name;
  at::Tensor value;
};

/// Tied parameters (one tensor in two modules, e.g. embedding and LM head)
/// are listed once, under the first module, so the replay updates them once.
std::vector<Param> trainable_params(const Session& s) {
  std::vector<Param> ps;
  std::set<const void*> seen;
  for (const auto& mi : s.model.modules)
    for (const auto& p : mi.module.named_parameters(/*recurse=*/false))
      if (p.value.requires_grad() && seen.insert(p.value.unsafeGetTensorImpl()).second)
        ps.push_back({mi.path, p.name, p.value});
  return ps;
}

void clear_grads(const std::vector<Param>& ps) {
  for (const auto& p : ps)
    if (p.value.grad().defined()) p.value.mutable_grad() = at::Tensor();
}

/// v with three significant digits, for assumption sentences.
std::string fmt_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

/// Per layer, the adam-second-moment-lag metrics of its parameters of 2+
/// dims (docs/metrics.md "Optimizer state"; biases and gains are left out as
/// in the update ratio).
struct AdamLag {
  struct Best {
    double rms = -1, eps = -1, step = 0;
    std::string rms_param, eps_param, rms_module;
  };
  std::map<std::string, Best> per_module;
  Best model;
  /// Gradient clipping by global norm (torch.nn.utils.clip_grad_norm_):
  /// HF Trainer's max_grad_norm and nanoGPT's grad_clip default to 1.0, so
  /// an optimizer state saved by such a run holds clipped gradients.
  /// grad_norm: this batch's global gradient norm over the parameters with
  /// Adam state; history_norm: sqrt of the sum of their saved v_hat, the RMS
  /// global gradient norm Adam saw; clipped_max: the largest RMS ratio with
  /// this batch's gradient clipped to norm kClipNorm.
  static constexpr double kClipNorm = 1.0;
  double grad_norm = -1, history_norm = -1, clipped_max = -1;
  void add(const std::string& module, const std::string& param, const AdamStep& a, double step) {
    for (Best* b : {&per_module[module], &model}) {
      if (std::isfinite(a.rms_ratio) && a.rms_ratio > b->rms) {
        b->rms = a.rms_ratio;
        b->rms_param = param;
        b->rms_module = module;
        b->step = step;
      }
      if (a.eps_fraction > b->eps) {
        b->eps = a.eps_fraction;
        b->eps_param = param;
      }
    }
  }
  void write(Session& s) const {
    for (const auto& [path, b] : per_module) {
      LayerMetrics* lm = s.doc.find_layer(path);
      if (!lm || b.rms < 0) continue;
      lm->metrics["adam.rms_ratio_max"] = b.rms;
      lm->metrics["adam.rms_ratio_param"] = b.rms_param;
      lm->metrics["adam.step"] = b.step;
      lm->metrics["adam.eps_fraction_max"] = b.eps;
      lm->metrics["adam.eps_fraction_param"] = b.eps_param;
    }
    MetricMap& mm = s.doc.model_metrics;
    if (model.rms >= 0) {
      mm["adam.rms_ratio_model_max"] = model.rms;
      mm["adam.rms_ratio_model_param"] = model.rms_param;
      mm["adam.rms_ratio_model_param_module"] = model.rms_module;
    }
    // g / sqrt(v_hat) compares this batch's gradient with the optimizer's
    // history of training-loss gradients: only meaningful for that loss.
    const std::string desc = s.doc.probes.contains("loss") ? s.doc.probes["loss"].value("description", "") : "";
    const bool training_loss = !s.opt.target_file.empty() || desc.find("(used as the loss)") != std::string::npos;
    mm["adam.loss_is_training_loss"] = training_loss;
    if (grad_norm >= 0 && history_norm >= 0) {
      mm["adam.grad_norm"] = metric_number(grad_norm);
      mm["adam.history_grad_norm"] = metric_number(history_norm);
      mm["adam.clip_norm"] = kClipNorm;
      if (clipped_max >= 0) mm["adam.rms_ratio_clipped_max"] = metric_number(clipped_max);
      // The history fits gradients clipped at norm 1 (never above it, 5 %
      // for the EMA's mixing), this batch's gradient is above it, and
      // clipped it matches the history: a clipping run sees no lag.
      const bool explains = history_norm <= 1.05 * kClipNorm && grad_norm > kClipNorm && clipped_max >= 0 &&
                            clipped_max <= 3.0;
      mm["adam.clipping_explains"] = explains;
      if (explains)
        s.doc.assumptions.push_back("Adam's saved second moments fit gradients clipped at global norm 1 (sqrt of their sum " +
                                    fmt_num(history_norm) + ", this batch's gradient norm " + fmt_num(grad_norm) +
                                    "): if training clips (HF Trainer's max_grad_norm, nanoGPT's grad_clip, both 1.0 by "
                                    "default), Adam sees this gradient clipped and its g / sqrt(v_hat) is at most " +
                                    fmt_num(clipped_max));
    }
    if (!training_loss)
      s.doc.assumptions.push_back("the Adam state's g / sqrt(v_hat) was not judged: the loss (" + desc +
                                  ") is not the training loss the optimizer saw; give --target, or a model that "
                                  "returns its loss");
  }
};

}  // namespace

/// The saved state of parameter 0 (the first in model.parameters() order
/// with saved state), or nullptr without a saved state.
static const SavedParamState* first_saved(const Session& s) {
  const SavedParamState* first = nullptr;
  if (s.optimizer)
    for (const auto& [k, st] : s.optimizer->by_param)
      if (!first || st.index < first->index) first = &st;
  return first;
}

/// The learning rate of the replay (a what-if run of --steps N): --lr,
/// else the saved optimizer's (0 when neither).
static double effective_lr(const Session& s) {
  if (s.opt.lr) return *s.opt.lr;
  const SavedParamState* st = first_saved(s);
  return st ? st->lr : 0.0;
}

/// Whether the update ratio takes the saved param groups' lr rather than
/// --lr: without --lr; or when --lr is the scheduler's initial_lr and the
/// saved lr is the scheduler's current value. Users give the lr they
/// configured (a schedule's peak), while the saved state's next step is
/// taken at the current one (eval17: a cosine schedule at 0.1x its peak
/// read as LR001). A --lr that is no scheduler's starting lr is the user's
/// question (a resume at another lr, mmdet's auto_scale_lr) and is kept.
static bool use_saved_lr(Session& s) {
  const SavedParamState* st = first_saved(s);
  if (!st) return false;
  if (!s.opt.lr) return true;
  auto same = [](double a, double b) { return std::fabs(a - b) <= 1e-6 * std::max(std::fabs(a), std::fabs(b)); };
  if (same(*s.opt.lr, st->lr)) return false;
  std::ostringstream m;
  m << "--lr " << *s.opt.lr << " differs from the saved optimizer state's lr " << st->lr;
  const bool scheduled = st->initial_lr && same(*st->initial_lr, *s.opt.lr);
  if (scheduled)
    m << ", the current value of a scheduler that started from --lr (initial_lr " << *st->initial_lr
      << "): the update ratio measures the next step, at the saved lr of each param group";
  else
    m << ": the update ratio uses --lr, as given";
  s.doc.assumptions.push_back(m.str());
  s.doc.model_metrics["update.lr_given"] = *s.opt.lr;
  return scheduled;
}

/// The optimizer the update ratio and replay follow: the saved state's kind
/// when given ("adam"/"adamw", "sgd"), else --optimizer.
static std::string effective_optimizer(const Session& s) {
  if (s.optimizer && s.optimizer->kind == "adam") return s.optimizer->decoupled ? "adamw" : "adam";
  if (s.optimizer && s.optimizer->kind == "sgd_momentum") return "sgd";
  return s.opt.optimizer;
}

void probe_update_ratio(Session& s) {
  if (!s.opt.lr && !s.optimizer) return;
  const bool saved_lr = use_saved_lr(s);
  const SavedParamState* first = first_saved(s);
  const double lr = saved_lr && first ? first->lr : s.opt.lr.value_or(first ? first->lr : 0.0);
  const std::string optimizer = effective_optimizer(s);
  s.doc.model_metrics["update.lr"] = lr;
  s.doc.model_metrics["update.optimizer"] = optimizer;
  if (!s.train() || !s.backward_skipped().empty()) {
    s.doc.probes["update"] = {{"lr", lr}, {"optimizer", optimizer}};
    s.skip_probe("update", "needs the train pass's gradients: " +
                               (s.train() ? s.backward_skipped() : s.train_pass_error()));
    return;
  }
  nlohmann::json rows = nlohmann::json::array();
  double global_max = -1;
  std::string global_param;
  std::map<std::string, std::pair<double, std::string>> per_module;  // path -> (max ratio, param)
  std::map<std::string, std::pair<double, double>> per_module_norms; // path -> (|update|, |weight|) of that param
  AdamLag lag;
  const auto train = s.train();
  // Global norms for the clipping estimate (AdamLag::kClipNorm): this
  // batch's gradient and Adam's history, over the parameters with Adam state.
  double clip_factor = 1.0;
  if (s.optimizer && s.optimizer->kind == "adam") {
    double g2 = 0, v2 = 0;
    for (const auto& p : trainable_params(s)) {
      const SavedParamState* st = s.optimizer->find(p.value);
      const at::Tensor g = train->grad_of(p.value);
      if (!st || !g.defined()) continue;
      g2 += g.detach().to(at::kDouble).pow(2).sum().item<double>();
      if (st->exp_avg_sq.defined() && st->step > 0)
        v2 += st->exp_avg_sq.to(at::kDouble).sum().item<double>() / (1 - std::pow(st->beta2, st->step));
    }
    lag.grad_norm = std::sqrt(g2);
    lag.history_norm = std::sqrt(v2);
    if (std::isfinite(lag.grad_norm) && lag.grad_norm > AdamLag::kClipNorm) clip_factor = AdamLag::kClipNorm / lag.grad_norm;
  }
  // Parameters with Adam state (2+ dims), for the swapped-state test below.
  struct AdamRow {
    std::string module, full;
    at::Tensor w, g;
    const SavedParamState* st;
    double ratio, lr;
  };
  std::vector<AdamRow> adam_rows;
  for (const auto& p : trainable_params(s)) {
    const at::Tensor g = train->grad_of(p.value);
    const std::string full = param_path(p.module, p.name);
    nlohmann::json row = {{"param", full}, {"numel", p.value.numel()}};
    const double w = norm_of(p.value);
    row["weight_norm"] = metric_number(w);
    if (!g.defined()) {
      row["grad_norm"] = nullptr;
      row["ratio"] = nullptr;
      row["note"] = "no gradient";
      rows.push_back(row);
      continue;
    }
    const double gn = norm_of(g);
    const SavedParamState* st = s.optimizer ? s.optimizer->find(p.value) : nullptr;
    if (s.optimizer && !st) {
      // A fine-tuning optimizer over a filtered parameter list (a frozen
      // backbone, LoRA adapters): this parameter is not in it, nothing updates it.
      row["grad_norm"] = metric_number(gn);
      row["ratio"] = nullptr;
      row["note"] = "not in the optimizer state: not updated by it";
      rows.push_back(row);
      continue;
    }
    double un;
    if (st && s.optimizer->kind == "adam") {
      // The step Adam takes from its saved moments on this batch's gradient.
      const double plr = saved_lr ? st->lr : *s.opt.lr;  // the parameter's own group's lr, or --lr
      const AdamStep a = adam_step(*st, st->exp_avg, st->exp_avg_sq, st->step, p.value, g, plr, s.optimizer->decoupled);
      un = norm_of(a.update);
      row["from_saved_state"] = true;
      row["adam_step"] = st->step;
      row["adam_rms_ratio"] = metric_number(a.rms_ratio);
      row["adam_eps_fraction"] = a.eps_fraction;
      if (p.value.dim() >= 2) {
        adam_rows.push_back({p.module, full, p.value, g, st, a.rms_ratio, plr});
        lag.add(p.module, full, a, st->step);
        const AdamStep c = clip_factor < 1.0 ? adam_step(*st, st->exp_avg, st->exp_avg_sq, st->step, p.value,
                                                         g * clip_factor, plr, s.optimizer->decoupled)
                                             : a;
        if (std::isfinite(c.rms_ratio)) lag.clipped_max = std::max(lag.clipped_max, c.rms_ratio);
      }
    } else if (st && s.optimizer->kind == "sgd_momentum" && st->momentum_buffer.defined()) {
      const at::Tensor gd = g.detach().to(at::kFloat);
      const at::Tensor buf = st->momentum_buffer * st->momentum + gd * (1 - st->dampening);
      const double plr = saved_lr ? st->lr : *s.opt.lr;
      un = plr * (st->nesterov ? gd + st->momentum * buf : buf).to(at::kDouble).norm().item<double>();
      row["from_saved_state"] = true;
    } else {
      un = first_update_norm(g, lr, optimizer == "sgd" ? "sgd" : "adam");
    }
    row["grad_norm"] = metric_number(gn);
    row["update_norm"] = metric_number(un);
    if (w > 0 && std::isfinite(w) && std::isfinite(un)) {
      const double ratio = un / w;
      row["ratio"] = ratio;
      // Initialized near zero on purpose: timm's cls_token and reg_token
      // (std 1e-6), LayerScale-style gains. Any step moves such a tensor by
      // many times its norm (AdamW at lr 1e-3 changes a 1e-6 cls_token by
      // 1000x: eval23 case 09 on every timm ViT), and its scale is set by
      // the first steps; the ratio says nothing about the learning rate.
      // An RMS below 1e-4 is no weight matrix's initialization (Kaiming and
      // Xavier give 1/sqrt(fan_in), BERT-style 0.02).
      const double rms = w / std::sqrt(static_cast<double>(std::max<int64_t>(1, p.value.numel())));
      // Initialized small on purpose, relative to its fan-in: an RMS below a
      // tenth of LeCun's 1/sqrt(fan_in) (CleanRL's PPO policy head,
      // orthogonal with gain 0.01; DeepCTR's init_std 1e-4 on every dense
      // and embedding weight, eval39: a fixed 1e-4 cut split identical
      // layers by their sampling noise). A step moves such a weight by a
      // large fraction of itself whatever the learning rate; the first steps
      // set its scale.
      const int64_t fan_in = p.value.dim() >= 2 && p.value.size(0) > 0 ? p.value.numel() / p.value.size(0) : 1;
      const double small_init = 0.1 / std::sqrt(static_cast<double>(std::max<int64_t>(1, fan_in)));
      if (p.value.dim() < 2 || rms < kNearZeroInitRms || rms < small_init) {
        // Biases and norm gains: listed, not judged (their norms can be
        // tiny by design, e.g. biases initialized at std 1e-6).
        row["judged"] = false;
        if (p.value.dim() >= 2) {
          char b[200];
          std::snprintf(b, sizeof b,
                        "initialized small (RMS %.3g, below a tenth of 1/sqrt(fan_in) = %.3g, or 1e-4): the first "
                        "steps set its scale",
                        rms, 10 * small_init);
          row["note"] = std::string(b);
        }
        rows.push_back(row);
        continue;
      }
      auto& best = per_module[p.module];
      if (best.second.empty() || ratio > best.first) {
        best = {ratio, p.name};
        per_module_norms[p.module] = {un, w};
      }
      if (ratio > global_max) {
        global_max = ratio;
        global_param = full;
      }
    } else {
      row["ratio"] = nullptr;
      row["note"] = w == 0 ? "weight is exactly zero (zero-initialized): the ratio is undefined"
                           : "non-finite gradient or weight";
    }
    rows.push_back(row);
  }
  for (const auto& [path, best] : per_module) {
    LayerMetrics* lm = s.doc.find_layer(path);
    if (!lm) continue;
    lm->metrics["update.ratio_max"] = best.first;
    // What a healthy step of this optimizer changes: SGD's lr * |g| / |w| is
    // about 1e-3 (CS231n); Adam's step is about lr per element whatever the
    // gradient, so a transformer's weights at std 0.02 move by lr / 0.02
    // per step (nanoGPT at lr 6e-4: 3 %, eval14 case 12 at 1e-3: 1-2 %).
    const bool adaptive = optimizer == "adam" || optimizer == "adamw";
    const double limit = adaptive ? 0.1 : 0.01;
    lm->metrics["update.ratio_limit"] = limit;
    lm->metrics["update.ratio_over_limit"] = best.first / limit;
    lm->metrics["update.ratio_param"] = param_path(path, best.second);
    lm->metrics["update.norm"] = per_module_norms[path].first;
    lm->metrics["update.weight_norm"] = per_module_norms[path].second;
  }
  if (global_max >= 0) {
    s.doc.model_metrics["update.model_ratio_max"] = global_max;
    s.doc.model_metrics["update.ratio_max_param"] = global_param;
  }
  s.doc.probes["update"] = {
      {"lr", lr},
      {"optimizer", optimizer},
      {"formula", s.optimizer && s.optimizer->kind != "stateless"
                      ? "|the step the saved optimizer state takes on this batch's gradient| / |w| (--optimizer-state)"
                  : optimizer != "sgd" ? "|lr * g / (|g| + 1e-8)| / |w| (Adam's first step, elementwise)"
                                       : "lr * |g| / |w| (SGD step)"},
      {"params", rows}};
  if (s.optimizer && s.optimizer->kind == "adam") {
    lag.write(s);
    // State loaded onto the wrong parameters: optimizer.load_state_dict
    // maps states by position, and a model whose parameters come in another
    // order (heads registered from a dict, a scripted copy: eval27 C05)
    // gives one parameter a same-shaped sibling's moments. Its gradient is
    // then far off its "own" v_hat (ADAM001) while the sibling's is far the
    // other way, and the two states swapped fit the gradients far better.
    auto off = [](double x) { return x > 0 && std::isfinite(x) ? std::max(x, 1.0 / x) : std::numeric_limits<double>::infinity(); };
    for (const auto& r : adam_rows) {
      LayerMetrics* lm = s.doc.find_layer(r.module);
      if (!lm) continue;
      if (!lm->metrics.count("adam.state_swapped")) {
        lm->metrics["adam.state_swapped"] = false;
        lm->metrics["adam.swap_note"] = "";
      }
    }
    for (const auto& a : adam_rows) {
      if (!(a.ratio > 3)) continue;
      for (const auto& b : adam_rows) {
        if (&a == &b || a.w.sizes() != b.w.sizes() || !(b.ratio < 1.0 / 3)) continue;
        const double ab = adam_step(*b.st, b.st->exp_avg, b.st->exp_avg_sq, b.st->step, a.w, a.g, a.lr, s.optimizer->decoupled).rms_ratio;
        const double ba = adam_step(*a.st, a.st->exp_avg, a.st->exp_avg_sq, a.st->step, b.w, b.g, b.lr, s.optimizer->decoupled).rms_ratio;
        const double before = std::max(off(a.ratio), off(b.ratio)), after = std::max(off(ab), off(ba));
        // This gradient fits the sibling's state (within 3x of 1), the
        // sibling's gradient fits this state within 10x (its own history
        // may have moved), and the pair fits 5x better swapped.
        if (!(off(ab) <= 3 && off(ba) <= 10 && after * 5 <= before)) continue;
        LayerMetrics* lm = s.doc.find_layer(a.module);
        if (!lm || lm->metrics["adam.state_swapped"] == true) continue;
        lm->metrics["adam.state_swapped"] = true;
        lm->metrics["adam.state_fits_param"] = b.full;
        lm->metrics["adam.swap_note"] =
            "; the saved state of " + b.full + " (same shape, g / sqrt(v_hat) " + fmt_num(b.ratio) +
            " on its own) fits this gradient (" + fmt_num(ab) + ") and this parameter's state fits " + b.full + "'s (" +
            fmt_num(ba) + "): the optimizer state was loaded onto the parameters in another order";
        break;
      }
    }
  }
}

void probe_replay(Session& s) {
  if (s.opt.steps <= 0 || (!s.opt.lr && !s.optimizer)) return;
  const double lr = effective_lr(s);
  const std::string optimizer = effective_optimizer(s);
  const bool adam = optimizer != "sgd";
  const bool decoupled = optimizer == "adamw";
  nlohmann::json probe = {{"lr", lr}, {"optimizer", optimizer}, {"steps_requested", s.opt.steps}};
  if (s.optimizer) probe["start"] = "the saved optimizer state " + s.optimizer->path;
  if (!s.train() || !s.backward_skipped().empty()) {
    const std::string why = s.train() ? s.backward_skipped() : s.train_pass_error();
    s.doc.probes["replay"] = probe;
    s.skip_probe("replay", "needs the train pass's loss and gradients: " + why);
    s.doc.assumptions.push_back("the replay did not run: " + why);
    return;
  }
  const auto params = trainable_params(s);

  // Snapshot of every parameter and buffer, put back whatever happens.
  struct Restore {
    std::vector<std::pair<at::Tensor, at::Tensor>> saved;
    const std::vector<Param>* ps = nullptr;
    ~Restore() {
      at::NoGradGuard ng;
      for (auto& [live, copy] : saved) live.detach().copy_(copy);
      if (ps) clear_grads(*ps);
    }
  } restore;
  restore.ps = &params;
  {
    at::NoGradGuard ng;
    for (const auto& p : s.model.module.named_parameters(/*recurse=*/true))
      restore.saved.push_back({p.value, p.value.detach().clone()});
    for (const auto& b : s.model.module.named_buffers(/*recurse=*/true))
      restore.saved.push_back({b.value, b.value.detach().clone()});
  }

  // Norm layers whose gain (weight) is tracked step by step.
  std::vector<std::pair<std::string, at::Tensor>> gains;
  for (const auto& mi : s.model.modules) {
    if (!is_norm_kind(mi.kind) || !mi.module.type()->hasAttribute("weight")) continue;
    auto w = mi.module.attr("weight");
    if (w.isTensor() && w.toTensor().defined() && w.toTensor().numel() > 0) gains.push_back({mi.path, w.toTensor()});
  }
  std::map<std::string, bool> is_leaf;
  for (const auto& mi : s.model.modules) is_leaf[mi.path] = mi.leaf;

  // Zero-initialized parameters (biases) have no ratio at step 0 and an
  // ever-growing one later (an update of size lr over a norm of size lr):
  // the per-step ratio leaves them out, as LR001 does.
  std::vector<bool> zero_init;
  for (const auto& p : params) zero_init.push_back(norm_of(p.value) == 0);
  // Adam moments (or SGD momentum buffers in m1), from --optimizer-state
  // when given, else zero; hyperparameters per parameter.
  std::vector<at::Tensor> m1, m2;
  std::vector<SavedParamState> hyper;
  for (const auto& p : params) {
    const SavedParamState* st = s.optimizer ? s.optimizer->find(p.value) : nullptr;
    SavedParamState h;
    if (st) {
      h = *st;
    } else {
      h.beta1 = kAdamBeta1;
      h.beta2 = kAdamBeta2;
      h.eps = kAdamEps;
      h.weight_decay = decoupled ? 0.01 : 0.0;  // torch.optim.AdamW's default
    }
    hyper.push_back(h);
    m1.push_back(st && adam && st->exp_avg.defined()            ? st->exp_avg.clone()
                 : st && !adam && st->momentum_buffer.defined() ? st->momentum_buffer.clone()
                                                                : at::Tensor());
    m2.push_back(st && adam && st->exp_avg_sq.defined() ? st->exp_avg_sq.clone() : at::Tensor());
  }

  const auto t_start = std::chrono::steady_clock::now();
  const auto& taps = s.inst->taps();
  nlohmann::json steps = nlohmann::json::array();
  std::map<std::string, double> rms0;
  double growth_max = 0, loss_first = std::numeric_limits<double>::quiet_NaN();
  double loss_max = -std::numeric_limits<double>::infinity(), loss_last = std::numeric_limits<double>::quiet_NaN();
  std::string growth_layer;
  int64_t growth_step = -1, nonfinite_step = -1, grad_nonfinite_step = -1;
  std::string nonfinite_layer, nonfinite_what, raised;
  double loss_before = std::numeric_limits<double>::quiet_NaN();
  int64_t step = 0;
  for (; step < s.opt.steps; ++step) {
    s.check_timeout("replay");
    clear_grads(params);
    PassSpec spec;
    spec.name = "replay";
    spec.probe = "replay";
    spec.train_mode = true;
    spec.backward = true;
    PassResult r;
    try {
      r = s.run_pass(spec);
      s.doc.passes.erase(s.doc.passes.size() - 1);  // one entry for the whole replay below
    } catch (const Error& e) {
      if (e.kind() == error_kind::kTimeout) throw;
      raised = e.what();
      break;
    }
    const Collector& col = *r.collector;
    const double loss = r.loss ? r.loss->item<double>() : std::numeric_limits<double>::quiet_NaN();
    if (step == 0) loss_first = loss;
    if (std::isfinite(loss)) {
      loss_max = std::max(loss_max, loss);
      loss_last = loss;
    }

    // Module outputs of this step.
    std::map<std::string, TensorStats> act;
    for (const auto& t : taps)
      if (t.kind == TapKind::kModuleOutput && col.records()[static_cast<size_t>(t.id)].calls > 0)
        act[t.module].merge(col.records()[static_cast<size_t>(t.id)].fwd);
    nlohmann::json modules = nlohmann::json::object();
    double rms_max = 0, absmax_max = 0, step_growth = 0;
    std::string rms_layer, step_growth_layer;
    for (const auto& [path, st] : act) {
      const double rms = st.rms(), am = st.absmax();
      modules[path] = {{"rms", metric_number(rms)}, {"absmax", metric_number(am)}, {"nonfinite_count", st.nonfinite()}};
      if (!is_leaf[path]) continue;
      if (std::isfinite(rms) && rms > rms_max) {
        rms_max = rms;
        rms_layer = path;
      }
      if (std::isfinite(am)) absmax_max = std::max(absmax_max, am);
      if (step == 0 && std::isfinite(rms) && rms > 0) rms0[path] = rms;
      auto it = rms0.find(path);
      if (it != rms0.end() && std::isfinite(rms) && rms / it->second > step_growth) {
        step_growth = rms / it->second;
        step_growth_layer = path;
      }
    }
    double gain_max = 0;
    std::string gain_layer;
    for (const auto& [path, w] : gains) {
      const double g = w.detach().abs().max().to(at::kDouble).item<double>();
      if (!gain_layer.size() || g > gain_max) {
        gain_max = g;
        gain_layer = path;
      }
    }

    nlohmann::json row = {{"step", step},       {"loss", metric_number(loss)},          {"act_rms_max", rms_max},
                          {"act_rms_max_layer", rms_layer}, {"act_absmax_max", absmax_max},
                          {"act_growth", step_growth},       {"act_growth_layer", step == 0 ? std::string() : step_growth_layer}};
    if (!gain_layer.empty()) {
      row["gain_max"] = metric_number(gain_max);
      row["gain_max_layer"] = gain_layer;
    }

    // Non-finite forward: the first module output in execution order, else the loss.
    const int64_t bad = col.first_nonfinite_tap();
    if (bad >= 0 || !std::isfinite(loss)) {
      nonfinite_step = step;
      nonfinite_layer = bad >= 0 ? taps[static_cast<size_t>(bad)].module : std::string();
      nonfinite_what = bad >= 0 ? "output" : "loss";
      row["nonfinite"] = nonfinite_what + (bad >= 0 ? " of " + (nonfinite_layer.empty() ? std::string("<root>") : nonfinite_layer) : "");
      row["modules"] = modules;
      steps.push_back(row);
      ++step;
      break;
    }
    loss_before = loss;
    if (step_growth > growth_max) {  // steps with a finite forward only
      growth_max = step_growth;
      growth_layer = step_growth_layer;
      growth_step = step;
    }

    // Gradients and the update.
    double gsq = 0, ratio_max = 0;
    int64_t g_nonfinite = 0;
    std::string ratio_param;
    at::NoGradGuard ng;
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor w = params[i].value;
      const at::Tensor g = w.grad();
      if (!g.defined()) continue;
      const TensorStats gs = compute_stats(g.detach());
      g_nonfinite += gs.nonfinite();
      gsq += gs.sumsq;
      at::Tensor upd;
      if (adam) {
        const AdamStep a = adam_step(hyper[i], m1[i], m2[i], hyper[i].step + static_cast<double>(step), w, g,
                                     s.opt.lr ? lr : (hyper[i].lr > 0 ? hyper[i].lr : lr), decoupled);
        m1[i] = a.m;
        m2[i] = a.v;
        upd = a.update;
      } else if (hyper[i].momentum > 0) {
        const at::Tensor gd = g.detach().to(at::kFloat);
        m1[i] = m1[i].defined() ? m1[i] * hyper[i].momentum + gd * (1 - hyper[i].dampening) : gd.clone();
        upd = lr * (hyper[i].nesterov ? gd + hyper[i].momentum * m1[i] : m1[i]);
      } else {
        upd = lr * g.detach();
      }
      const double wn = norm_of(w);
      const double un = norm_of(upd);
      if (!zero_init[i] && w.dim() >= 2 && wn > 0 && std::isfinite(un) && un / wn > ratio_max) {
        ratio_max = un / wn;
        ratio_param = param_path(params[i].module, params[i].name);
      }
      w.detach().sub_(upd.to(w.scalar_type()));
    }
    row["grad_norm"] = metric_number(std::sqrt(gsq));
    row["grad_nonfinite_count"] = g_nonfinite;
    row["update_ratio_max"] = ratio_max;
    row["update_ratio_param"] = ratio_param;
    if (g_nonfinite > 0 && grad_nonfinite_step < 0) grad_nonfinite_step = step;
    row["modules"] = modules;
    steps.push_back(row);
  }

  probe["steps_run"] = steps.size();
  probe["loss"] = s.doc.probes.contains("loss") ? s.doc.probes["loss"].value("description", "") : "";
  probe["snapshot"] = "parameters and buffers copied before the replay and restored after it; the model file is never written";
  probe["steps"] = steps;
  if (!raised.empty()) probe["raised"] = {{"step", step}, {"message", raised}};
  s.doc.probes["replay"] = probe;
  s.doc.passes.push_back({{"name", "replay"}, {"probe", "replay"}, {"mode", "train"}, {"dropout", true},
                          {"backward", true}, {"traced_flags", "follow the pass mode"},
                          {"steps", steps.size()},
                          {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count()}});

  MetricMap& mm = s.doc.model_metrics;
  mm["replay.lr"] = lr;
  mm["replay.optimizer"] = optimizer;
  mm["replay.steps_run"] = static_cast<int64_t>(steps.size());
  mm["replay.loss_first"] = metric_number(loss_first);
  mm["replay.loss_max"] = metric_number(std::isfinite(loss_max) ? loss_max : std::numeric_limits<double>::quiet_NaN());
  mm["replay.loss_last"] = metric_number(loss_last);
  if (growth_step >= 0) {
    mm["replay.act_growth_max"] = growth_max;
    mm["replay.act_growth_layer"] = growth_layer;
    mm["replay.act_growth_step"] = growth_step;
  }
  mm["replay.nonfinite"] = nonfinite_step >= 0;
  if (nonfinite_step >= 0) {
    mm["replay.nonfinite_step"] = nonfinite_step;
    mm["replay.nonfinite_layer"] = nonfinite_layer;
    mm["replay.nonfinite_what"] = nonfinite_what;
    mm["replay.loss_before_nonfinite"] = metric_number(loss_before);
  }
  if (grad_nonfinite_step >= 0) mm["replay.grad_nonfinite_step"] = grad_nonfinite_step;
}

const std::vector<std::string>& update_writes() {
  static const std::vector<std::string> names = {
      "adam.", "update."};
  return names;
}

const std::vector<std::string>& replay_writes() {
  static const std::vector<std::string> names = {
      "replay."};
  return names;
}

}  // namespace nd
