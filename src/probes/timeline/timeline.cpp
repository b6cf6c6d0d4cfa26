// Checkpoints (--weights) and the timeline over several of them.
//
// load_checkpoints: expands and orders --weights, loads the last checkpoint
// (in step order) into the module before the inventory, so every probe
// measures it. probe_timeline (2+ checkpoints): per checkpoint, in order, the
// same train pass of the forward_backward probe on the same batch, and per
// layer the series of docs/metrics.md "Timeline" (probes.timeline); then the
// first checkpoint whose forward or backward is non-finite, and the first
// mover.
//
// First mover: the layer whose statistic left its own early range first.
// Early range = the first kEarly (3) checkpoints where the statistic is
// defined. On log10 values (the statistics span decades), a checkpoint's
// departure is the modified z-score of Iglewicz and Hoaglin,
//   z = (log10 x - median) / max(1.4826 * MAD, kFloor)
// (MAD: median absolute deviation of the early values; 1.4826 * MAD
// estimates the standard deviation of normal data), one-sided (growth only:
// instability grows activations, gradients, gains, logits and update sizes;
// learning shrinks weight changes). A value is out of range at z > 3.5, their
// recommended outlier cut (Iglewicz & Hoaglin 1993, "How to Detect and Handle
// Outliers", ASQC Basic References in Quality Control 16). kFloor = 0.25
// decades keeps a flat early range from turning ordinary drift into a
// departure: with it, a statistic must grow at least 10^(3.5*0.25) = 7.5x
// over its early median, where learning alone moves attention logits and
// activations by about 2-3x over a run. A non-finite value counts as out of
// range. The first mover is the layer with the earliest out-of-range
// checkpoint; ties go to the larger z, then to the earlier module in
// execution order.
#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <set>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "formats/checkpoint.h"
#include "model/weights.h"
#include "probes/timeline/timeline.h"
#include "probes/forward_backward/forward_backward.h"
#include "probes/session.h"

namespace nd {
namespace {

constexpr size_t kEarly = 3;
constexpr double kZ = 3.5;
constexpr double kFloor = 0.25;

const double kNaN = std::numeric_limits<double>::quiet_NaN();


double as_double(const MetricValue& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return kNaN;
  }
  return kNaN;
}

/// Statistics of the timeline, per layer; the mover is judged on kMoving.
const char* const kSeries[] = {"act.absmax", "act.rms", "grad.out_norm", "grad.param_norm", "norm.gain_absmax",
                               "attn.logit_absmax", "bn.running_var_mean", "bn.running_mean_absmean",
                               "weight.rel_change"};
const std::set<std::string> kMoving = {"act.absmax", "act.rms", "grad.out_norm", "grad.param_norm",
                                       "norm.gain_absmax", "attn.logit_absmax", "weight.rel_change"};

/// The rule family of a moving statistic (rules TL003-TL007 each read one).
std::string family(const std::string& metric) {
  if (metric.rfind("act.", 0) == 0) return "activations";
  if (metric.rfind("grad.", 0) == 0) return "gradients";
  if (metric == "norm.gain_absmax") return "norm gains";
  if (metric == "attn.logit_absmax") return "attention logits";
  return "update sizes";  // weight.rel_change
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string label(const std::string& path, const std::optional<int64_t>& step, size_t i, size_t n) {
  return path + (step ? " (step " + std::to_string(*step) + ")"
                      : " (checkpoint " + std::to_string(i + 1) + " of " + std::to_string(n) + ")");
}

using Series = std::vector<std::optional<double>>;  // per checkpoint; empty: not measured there

std::string trajectory(const Series& xs) {
  std::ostringstream ss;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) ss << " ";
    if (!xs[i]) ss << "-";
    else if (std::isnan(*xs[i])) ss << "nan";
    else if (std::isinf(*xs[i])) ss << (*xs[i] > 0 ? "inf" : "-inf");
    else ss << std::setprecision(3) << *xs[i];
  }
  return ss.str();
}

/// Per module path: its direct parameters (a snapshot, for the weight change).
std::map<std::string, std::vector<at::Tensor>> snapshot(const Session& s) {
  std::map<std::string, std::vector<at::Tensor>> out;
  for (const auto& mi : s.model.modules)
    for (const auto& p : mi.module.named_parameters(/*recurse=*/false))
      out[mi.path].push_back(p.value.detach().to(at::kDouble).clone());
  return out;
}

}  // namespace

void load_checkpoints(Session& s) {
  if (s.opt.weights.empty()) {
    if (s.opt.weights_partial) throw usage_error("--weights-partial needs --weights");
    return;
  }
  s.checkpoints = formats::order_by_step(formats::expand_weight_paths(s.opt.weights));
  if (s.progress) s.progress("load", "weights");
  const std::string last = s.checkpoints.back();
  Checkpoint ck = read_checkpoint(last);
  WeightsLoad wl = load_weights(s.model.module, ck, s.opt.weights_partial, s.model.path);
  for (const auto& sentence : wl.sentences()) s.doc.assumptions.push_back(sentence);
  nlohmann::json paths = nlohmann::json::array();
  for (const auto& p : s.checkpoints) {
    auto st = formats::step_from_name(p);
    paths.push_back({{"path", p}, {"step", st ? nlohmann::json(*st) : nlohmann::json()}});
  }
  s.doc.model["weights"] = {{"measured", last}, {"checkpoints", paths}};
  s.doc.probes["weights"] = {{"measured", wl.to_json()}, {"partial", s.opt.weights_partial}};
  if (s.checkpoints.size() > 1)
    s.doc.assumptions.push_back("every probe measured the last checkpoint in step order, " + last +
                                "; the timeline (probes.timeline) ran the train pass on all " +
                                std::to_string(s.checkpoints.size()));
}

void probe_timeline(Session& s) {
  const size_t n = s.checkpoints.size();
  if (n < 2) return;
  // Per layer path -> metric -> values per checkpoint.
  std::map<std::string, std::map<std::string, Series>> series;
  for (const auto& lm : s.doc.layers)
    for (const char* m : kSeries) series[lm.path][m] = Series(n);
  nlohmann::json cks = nlohmann::json::array();
  std::vector<std::string> labels;
  std::vector<double> loss(n, kNaN);
  std::string loss_desc;  // the loss of the checkpoints' train passes (probes.loss.description)
  std::map<std::string, int64_t> run_order;  // execution order of the first checkpoint that ran
  std::vector<std::string> errors(n);
  int64_t nf_fwd = -1, nf_grad = -1;
  std::string nf_fwd_layer, nf_grad_layer, nf_grad_from;
  std::map<std::string, std::vector<at::Tensor>> prev;

  // The measurement of each checkpoint runs on a copy of the document; the
  // real one is put back after.
  const std::vector<LayerMetrics> layers0 = s.doc.layers;
  const MetricMap model0 = s.doc.model_metrics;
  const nlohmann::json probes0 = s.doc.probes;
  const nlohmann::json passes0 = s.doc.passes;
  const size_t assumptions0 = s.doc.assumptions.size();
  std::vector<std::string> load_notes;
  // A checkpoint that fails to load or run midway (the probe is isolated,
  // the check goes on) must not leave its weights or its measurements
  // behind: every later probe measures the last checkpoint.
  struct PutBack {
    Session& s;
    const std::vector<LayerMetrics>& layers0;
    const MetricMap& model0;
    const nlohmann::json& probes0;
    const nlohmann::json& passes0;
    size_t assumptions0;
    bool done = false;
    ~PutBack() {
      if (done) return;
      s.doc.layers = layers0;
      s.doc.model_metrics = model0;
      s.doc.probes = probes0;
      s.doc.passes = passes0;
      s.doc.assumptions.resize(assumptions0);
      try {
        Checkpoint ck = read_checkpoint(s.checkpoints.back());
        load_weights(s.model.module, ck, s.opt.weights_partial, s.model.path);
        s.invalidate_passes();
      } catch (...) {
        // It loaded before the timeline ran (load_checkpoints); a failure
        // now leaves the error the timeline raised as the probe's status.
      }
    }
  } put_back{s, layers0, model0, probes0, passes0, assumptions0};
  std::set<std::string> said;  // sentence tails already in the assumptions
  {
    const std::string& last = s.checkpoints.back();
    for (size_t k = 0; k < s.doc.assumptions.size(); ++k) {
      const std::string& a = s.doc.assumptions[k];
      if (a.rfind(last + ": ", 0) == 0) said.insert(a.substr(last.size() + 2));
    }
  }

  for (size_t i = 0; i < n; ++i) {
    const std::string& path = s.checkpoints[i];
    s.check_timeout("timeline probe, before checkpoint " + path);
    if (s.progress) s.progress("timeline", path);
    Checkpoint ck = read_checkpoint(path);
    WeightsLoad wl = load_weights(s.model.module, ck, s.opt.weights_partial, s.model.path);
    s.invalidate_passes();  // every cached pass measured other weights
    labels.push_back(label(path, ck.step, i, n));
    cks.push_back({{"path", path}, {"step", ck.step ? nlohmann::json(*ck.step) : nlohmann::json()},
                   {"loaded", wl.loaded}, {"format", wl.format}, {"container", wl.container}});
    // What loading said, once per kind of sentence (the last checkpoint's
    // are in already): "PATH: 2 buffers ... keep the model file's values"
    // for every checkpoint would drown the report.
    for (const auto& sentence : wl.sentences()) {
      const std::string tail = sentence.substr(std::min(sentence.size(), path.size() + 2));
      if (said.insert(tail).second) load_notes.push_back(sentence);
    }

    // Relative weight change per module, and BatchNorm running statistics.
    auto now = snapshot(s);
    for (const auto& mi : s.model.modules) {
      auto& ser = series[mi.path];
      if (!prev.empty() && now.count(mi.path) && prev.count(mi.path)) {
        double d2 = 0, w2 = 0;
        const auto& a = now[mi.path];
        const auto& b = prev[mi.path];
        for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
          if (a[k].sizes() != b[k].sizes()) continue;
          d2 += (a[k] - b[k]).pow(2).sum().item<double>();
          w2 += b[k].pow(2).sum().item<double>();
        }
        if (w2 > 0) ser["weight.rel_change"][i] = std::sqrt(d2 / w2);
      }
      if (mi.kind.rfind("BatchNorm", 0) == 0 && mi.module.hasattr("running_var")) {
        auto rv = mi.module.attr("running_var"), rm = mi.module.attr("running_mean");
        if (rv.isTensor() && rv.toTensor().defined())
          ser["bn.running_var_mean"][i] = rv.toTensor().to(at::kDouble).mean().item<double>();
        if (rm.isTensor() && rm.toTensor().defined())
          ser["bn.running_mean_absmean"][i] = rm.toTensor().to(at::kDouble).abs().mean().item<double>();
      }
    }
    prev = std::move(now);

    // The train pass of the forward_backward probe, on a fresh copy.
    s.doc.layers = layers0;
    s.doc.model_metrics = model0;
    try {
      probe_forward_backward(s);
    } catch (const Error& e) {
      if (e.kind() == error_kind::kTimeout || e.kind() == error_kind::kOutOfMemory) throw;
      errors[i] = e.what();
    }
    auto lv = s.doc.model_metrics.find("loss.value");
    if (lv != s.doc.model_metrics.end()) loss[i] = as_double(lv->second);
    // How the loss was computed, from this probe's own train pass: the
    // forward_backward probe that writes probes.loss runs after the timeline
    // (eval56: "the model's scalar output (used as the loss)" was not seen,
    // and TL003 named a first mover on a run that kept 99% of its gains).
    if (loss_desc.empty() && s.doc.probes.contains("loss")) loss_desc = s.doc.probes["loss"].value("description", "");
    // Execution order from the first checkpoint that ran (the restored
    // document may hold none yet): ties between movers go to the module
    // that runs first (an attention before the dropout after it).
    if (run_order.empty())
      for (const auto& lm : s.doc.layers)
        if (lm.exec_order >= 0) run_order[lm.path] = lm.exec_order;
    for (const auto& lm : s.doc.layers) {
      auto& ser = series[lm.path];
      for (const char* m : kSeries) {
        auto it = lm.metrics.find(m);
        if (it != lm.metrics.end() && (it->second.is_number() || it->second.is_string())) ser[m][i] = as_double(it->second);
      }
      // Gradient norms are taken over finite values: a non-finite gradient
      // would read as a small norm. The series says nan there.
      for (const auto& [norm, count] : {std::pair<const char*, const char*>{"grad.out_norm", "grad.out_nonfinite_count"},
                                        {"grad.param_norm", "grad.param_nonfinite_count"}}) {
        auto c = lm.metrics.find(count);
        if (c != lm.metrics.end() && c->second.is_number() && c->second.get<double>() > 0) ser[norm][i] = kNaN;
      }
      if (nf_fwd < 0 && lm.metrics.count("fwd.first_nonfinite")) {
        nf_fwd = static_cast<int64_t>(i);
        nf_fwd_layer = lm.path;
      }
      if (nf_fwd < 0 && nf_grad < 0 && lm.metrics.count("grad.first_nonfinite")) {
        nf_grad = static_cast<int64_t>(i);
        nf_grad_layer = lm.path;
        nf_grad_from = lm.metrics.at("grad.nonfinite_from").get<std::string>();
      }
    }
    s.invalidate_passes();
  }
  s.doc.layers = layers0;
  s.doc.model_metrics = model0;
  s.doc.probes = probes0;
  s.doc.passes = passes0;
  s.doc.assumptions.resize(assumptions0);

  // Back to the checkpoint every other probe measures (the last one).
  {
    Checkpoint ck = read_checkpoint(s.checkpoints.back());
    load_weights(s.model.module, ck, s.opt.weights_partial, s.model.path);
    s.invalidate_passes();
  }
  put_back.done = true;
  for (const auto& note : load_notes) s.doc.assumptions.push_back(note);

  // First mover.
  std::map<std::string, int64_t> order;
  for (const auto& lm : s.doc.layers) order[lm.path] = lm.exec_order;
  for (const auto& [path, o] : run_order) order[path] = o;
  struct Move {
    std::string layer, metric;
    size_t at = 0;
    double z = 0, ratio = 0, early = 0;
    int64_t exec = 0;
    bool from_first = false;  ///< measured against its first value (it grew from the start)
  };
  std::optional<Move> best;
  // Only checkpoints before the first non-finite one: that one is TL001/TL002's.
  const size_t horizon = nf_fwd >= 0 ? static_cast<size_t>(nf_fwd) : nf_grad >= 0 ? static_cast<size_t>(nf_grad) : n;
  // The model's output is not a mover: a classifier's logits (the root's
  // output, and the head module writing the same tensor) grow on purpose as
  // its predictions become confident while the loss falls. Its statistics
  // stay in probes.timeline; the output itself is judged by ACT008.
  auto same_series = [](const Series& a, const Series& b) {
    if (a.size() != b.size()) return false;
    bool any = false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].has_value() != b[i].has_value()) return false;
      if (!a[i]) continue;
      any = true;
      const double x = *a[i], y = *b[i];
      if (!(x == y || std::fabs(x - y) <= 1e-6 * std::max(std::fabs(x), std::fabs(y)))) return false;
    }
    return any;
  };
  const auto root = series.find("");
  auto is_output = [&](const std::string& path, const std::string& metric, const Series& xs) {
    if (path.empty()) return true;
    if (metric.rfind("act.", 0) != 0 || root == series.end()) return false;
    const auto rm = root->second.find(metric);
    return rm != root->second.end() && same_series(rm->second, xs);
  };
  // Modules whose output is bounded by construction (a softmax's
  // probabilities, a sigmoid's or tanh's values): their act.* statistics
  // rise toward the bound when the logits before them grow, which is the
  // logits' movement, not activation growth (eval33 C04: a ViT's attention
  // softmax going from 0.074 to 1 was named the first mover while its
  // logits grew 89x). Their inputs' statistics move instead.
  std::set<std::string> bounded;
  std::map<int64_t, const LayerMetrics*> by_exec;  // by `order`: the checkpoints' runs
  for (const auto& lm : s.doc.layers) {
    if (bounded_output_kind(lm.kind)) bounded.insert(lm.path);
    auto o = order.find(lm.path);
    if (o != order.end() && o->second >= 0) by_exec[o->second] = &lm;
  }
  // A dropout or identity right after one passes its bounded values on
  // (vit-pytorch's attn = self.dropout(self.attend(dots))).
  for (const auto& [o, lm] : by_exec) {
    if (lm->kind != "Dropout" && lm->kind != "Identity") continue;
    auto prev = by_exec.find(o - 1);
    if (prev != by_exec.end() && bounded.count(prev->second->path)) bounded.insert(lm->path);
  }
  // Every moving statistic of every layer (not the model's output), with
  // the checkpoints where it is defined.
  auto for_each_moving = [&](const std::function<void(const std::string&, const std::string&, const Series&,
                                                      const std::vector<size_t>&)>& fn) {
    for (const auto& [path, ms] : series)
      for (const auto& [metric, xs] : ms) {
        if (!kMoving.count(metric) || is_output(path, metric, xs)) continue;
        if (metric.rfind("act.", 0) == 0 && bounded.count(path)) continue;
        std::vector<size_t> defined;
        for (size_t i = 0; i < horizon; ++i)
          if (xs[i]) defined.push_back(i);
        fn(path, metric, xs, defined);
      }
  };
  for_each_moving([&](const std::string& path, const std::string& metric, const Series& xs,
                      const std::vector<size_t>& defined) {
    if (defined.size() < kEarly + 1) return;
    std::vector<double> early;
    for (size_t k = 0; k < kEarly; ++k) {
      const double x = *xs[defined[k]];
      if (!(std::isfinite(x) && x > 0)) return;
      early.push_back(std::log10(x));
    }
    const double med = median(early);
    std::vector<double> dev;
    for (double e : early) dev.push_back(std::fabs(e - med));
    const double scale = std::max(1.4826 * median(dev), kFloor);
    auto z_at = [&](size_t k) {
      const double x = *xs[defined[k]];
      if (!std::isfinite(x)) return std::numeric_limits<double>::infinity();  // inf or a measured nan
      if (x <= 0) return -std::numeric_limits<double>::infinity();
      return (std::log10(x) - med) / scale;
    };
    for (size_t k = kEarly; k < defined.size(); ++k) {
      const size_t i = defined[k];
      const double x = *xs[i];
      const double z = z_at(k);
      if (!(z > kZ)) continue;
      // A departure the next checkpoint takes back is a spike, not a move
      // (a gradient norm that follows one noisy batch's loss): the next
      // checkpoint, when there is one, must be out of range as well.
      if (k + 1 < defined.size() && !(z_at(k + 1) > kZ)) continue;
      Move m{path, metric, i, z, std::isfinite(x) ? x / std::pow(10.0, med) : x, std::pow(10.0, med),
             order.count(path) ? order[path] : -1};
      const bool better = !best || m.at < best->at ||
                          (m.at == best->at && (m.z > best->z || (m.z == best->z && m.exec >= 0 && m.exec < best->exec)));
      if (better) best = m;
      break;
    }
  });

  // A statistic that grew from the very first checkpoint, before the mover
  // left its range: already more than kZ * kFloor decades (7.5x) above its
  // first value at an earlier checkpoint, and staying there. Its own early
  // range holds the growth, so it cannot win the test above, yet it moved
  // first (eval30 C04: attention logits 0.14, 3.6, 20, 89 over four
  // checkpoints, and the patch embedding's gradient, which rose only at the
  // last, was named; the corpus ViT's diverging run: encoder_layer_0's
  // attention output 27x at the second checkpoint, and encoder_layer_1's
  // MLP at the fourth was named). Only when a mover was found: a healthy
  // run, where nothing leaves its range, gains no finding from it.
  if (best) {
    std::optional<Move> grown;
    for_each_moving([&](const std::string& path, const std::string& metric, const Series& xs,
                        const std::vector<size_t>& defined) {
      if (defined.size() < 2) return;
      const double x0 = *xs[defined[0]];
      if (!(std::isfinite(x0) && x0 > 0)) return;
      for (size_t k = 1; k < defined.size() && defined[k] < best->at; ++k) {
        bool stays = true;
        for (size_t j = k; j < defined.size() && stays; ++j) {
          const double x = *xs[defined[j]];
          stays = (std::isfinite(x) && x > 0) ? std::log10(x / x0) > kZ * kFloor : std::isinf(x);
        }
        if (!stays) continue;
        const double x = *xs[defined[k]];
        Move m{path, metric, defined[k], std::log10(x / x0) / kFloor, x / x0, x0, order.count(path) ? order[path] : -1};
        m.from_first = true;
        const bool better = !grown || m.at < grown->at ||
                            (m.at == grown->at && m.exec >= 0 && (grown->exec < 0 || m.exec < grown->exec));
        if (better) grown = m;
        break;
      }
    });
    if (grown) best = grown;
  }

  // The report: probes.timeline and the metrics the rules read.
  nlohmann::json jl = nlohmann::json::object();
  for (const auto& [path, ms] : series) {
    nlohmann::json jm = nlohmann::json::object();
    for (const auto& [metric, xs] : ms) {
      bool any = false;
      for (const auto& x : xs) any = any || x.has_value();
      if (!any) continue;
      nlohmann::json arr = nlohmann::json::array();
      for (size_t i = 0; i < n; ++i) arr.push_back(xs[i] ? metric_number(*xs[i]) : nlohmann::json());
      jm[metric] = arr;
    }
    if (!jm.empty()) jl[path] = jm;
  }
  nlohmann::json jloss = nlohmann::json::array();
  for (double x : loss) jloss.push_back(metric_number(x));
  nlohmann::json tl = {{"checkpoints", cks},
                       {"layers", jl},
                       {"loss", jloss},
                       {"criterion",
                        {{"early_checkpoints", kEarly},
                         {"z_threshold", kZ},
                         {"scale_floor_decades", kFloor},
                         {"statistics", std::vector<std::string>(kMoving.begin(), kMoving.end())},
                         {"description",
                          "modified z-score of log10(value) against the median and MAD of the layer's first 3 "
                          "checkpoints, growth only, out of range above 3.5 (Iglewicz & Hoaglin 1993)"}}}};
  nlohmann::json errs = nlohmann::json::object();
  for (size_t i = 0; i < n; ++i)
    if (!errors[i].empty()) errs[s.checkpoints[i]] = errors[i];
  if (!errs.empty()) tl["errors"] = errs;

  MetricMap& mm = s.doc.model_metrics;
  mm["timeline.checkpoints"] = static_cast<int64_t>(n);
  if (nf_fwd >= 0 || nf_grad >= 0) {
    const bool fwd = nf_fwd >= 0;
    const size_t i = static_cast<size_t>(fwd ? nf_fwd : nf_grad);
    const std::string layer = fwd ? nf_fwd_layer : nf_grad_layer;
    mm["timeline.first_nonfinite_checkpoint"] = labels[i];
    mm["timeline.first_nonfinite_what"] = fwd ? "forward" : "backward";
    mm["timeline.first_nonfinite_layer"] = layer;
    tl["first_nonfinite"] = {{"checkpoint", s.checkpoints[i]}, {"index", i}, {"what", fwd ? "forward" : "backward"},
                             {"layer", layer}};
    if (LayerMetrics* lm = s.doc.find_layer(layer)) {
      auto& m = lm->metrics;
      m[fwd ? "timeline.first_nonfinite_forward" : "timeline.first_nonfinite_gradient"] = true;
      m["timeline.nonfinite_checkpoint"] = labels[i];
      m["timeline.last_finite_checkpoint"] = i > 0 ? labels[i - 1] : std::string("none (the first checkpoint)");
      m["timeline.nonfinite_loss"] = metric_number(loss[i]);
      m["timeline.last_finite_loss"] = i > 0 ? metric_number(loss[i - 1]) : MetricValue("nan");
      if (!fwd) m["timeline.nonfinite_from"] = nf_grad_from;
    }
  }
  // A run whose training loss stayed finite and kept at least 90% of its
  // improvement (first - last >= 0.9 (first - min)) did not go wrong:
  // statistics that left their early range there are what learning does
  // (activations and logits grow as a classifier becomes confident), so no
  // layer is named the first mover (TL003-TL007 stay silent). Without a
  // training loss (--target, or a model returning its loss) nothing is known
  // and the mover is judged as before.
  if (loss_desc.empty() && s.doc.probes.contains("loss")) loss_desc = s.doc.probes["loss"].value("description", "");
  const bool training_loss = !s.opt.target_file.empty() || loss_desc.find("(used as the loss)") != std::string::npos;
  bool loss_finite = n > 0;
  double loss_min = std::numeric_limits<double>::infinity();
  for (double x : loss) {
    loss_finite = loss_finite && std::isfinite(x);
    loss_min = std::min(loss_min, x);
  }
  const double kept = loss_finite && loss.front() > loss_min ? (loss.front() - loss.back()) / (loss.front() - loss_min)
                                                             : std::numeric_limits<double>::quiet_NaN();
  const bool kept_improving = training_loss && loss_finite && kept >= 0.9;
  if (std::isfinite(kept)) mm["timeline.loss_improvement_kept"] = kept;
  mm["timeline.loss_kept_improving"] = kept_improving;
  if (best) {
    const auto& xs = series[best->layer][best->metric];
    Series upto(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(std::min(n, horizon)));
    mm["timeline.first_mover_layer"] = best->layer;
    tl["first_mover"] = {{"layer", best->layer}, {"metric", best->metric}, {"checkpoint", s.checkpoints[best->at]},
                         {"index", best->at}, {"z", metric_number(best->z)}, {"ratio", metric_number(best->ratio)},
                         {"early_median", best->early}, {"trajectory", trajectory(upto)}};
    if (kept_improving)
      tl["first_mover"]["note"] = "the training loss stayed finite and kept its improvement: the earliest departure is "
                                  "what learning does, not a first mover (no TL003-TL007 finding)";
    // What the ratio is against: the early median, or the first value.
    const std::string early_text = best->from_first ? std::string("its value at the first checkpoint (it grew from the start)")
                                                    : "the median of its first " + std::to_string(kEarly) + " checkpoints";
    if (best->from_first) tl["first_mover"]["early"] = early_text;
    LayerMetrics* lm = kept_improving ? nullptr : s.doc.find_layer(best->layer);
    if (lm) {
      auto& m = lm->metrics;
      m["timeline.first_mover"] = true;
      m["timeline.mover_metric"] = best->metric;
      m["timeline.mover_family"] = family(best->metric);
      m["timeline.mover_checkpoint"] = labels[best->at];
      m["timeline.mover_z"] = metric_number(best->z);
      m["timeline.mover_ratio"] = metric_number(best->ratio);
      m["timeline.mover_early_median"] = best->early;
      m["timeline.mover_early_text"] = early_text;
      m["timeline.mover_trajectory"] = trajectory(upto);
    }
  }
  s.doc.probes["timeline"] = tl;
}

const std::vector<std::string>& timeline_writes() {
  // its per-checkpoint forward_backward runs are put back; the series are timeline.*
  static const std::vector<std::string> names = {
      "timeline."};
  return names;
}

}  // namespace nd
