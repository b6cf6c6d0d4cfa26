// What each probe writes (issue 14, "Self-contained probes"): every probe
// folder declares its metric names and families (NAME_writes() in its
// header, next to its entry point); this table collects them by the name
// Session::run_probe runs the probe under, and run_probe checks every run
// against it (a metric written outside it is listed under
// probes.undeclared_metrics, an internal error of normdoctor).
#include <map>
#include <string>
#include <vector>

#include "probes/architecture/architecture.h"
#include "probes/fast_path/fast_path.h"
#include "probes/features/features.h"
#include "probes/forward_backward/forward_backward.h"
#include "probes/gain_convention/gain_convention.h"
#include "probes/input_scale/input_scale.h"
#include "probes/normalization/normalization.h"
#include "probes/precision/precision.h"
#include "probes/sequence/sequence.h"
#include "probes/session.h"
#include "probes/timeline/timeline.h"
#include "probes/training/training.h"

namespace nd {

const std::map<std::string, std::vector<std::string>>& probe_declared_metrics() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"timeline", timeline_writes()},           {"gain_convention", gain_convention_writes()},
      {"forward_backward", forward_backward_writes()}, {"update", update_writes()},
      {"normalization", normalization_writes()}, {"batch_dependence", batch_dependence_writes()},
      {"fast_path", fast_path_writes()},         {"architecture", architecture_writes()},
      {"features", features_writes()},           {"sequence", sequence_writes()},
      {"noise_floors", noise_floors_writes()},   {"precision", precision_writes()},
      {"replay", replay_writes()},              {"input_scale", input_scale_writes()},
  };
  return table;
}

namespace {
bool always(const Session&) { return true; }
}  // namespace

const std::vector<ProbeEntry>& probe_pipeline() {
  static const std::vector<ProbeEntry> pipeline = {
      // Every checkpoint of 2+ --weights; leaves the last one loaded, whatever
      // happens (every later probe measures the last checkpoint).
      {"timeline", probe_timeline, [](const Session& s) { return s.checkpoints.size() >= 2; }},
      // The gains against the norm's formula: the loaded ones (--weights),
      // else the model file's own.
      {"gain_convention", probe_gain_convention, always},
      {"forward_backward", probe_forward_backward, always},
      {"update", probe_update_ratio, [](const Session& s) { return s.opt.lr.has_value() || s.optimizer.has_value(); }},
      {"normalization", probe_normalization, always},
      // Whether a large-scale input's scale reaches the output (IN002); its
      // reference is the normalization probe's dropout-free eval pass.
      {"input_scale", probe_input_scale, always},
      {"fast_path", probe_fast_path, always},
      {"architecture", probe_architecture, always},
      {"features", probe_features, always},
      {"sequence", probe_sequence, always},
      // The noise floors of batch dependence, drift and the sequence
      // comparisons: read by BN004, BN005, SEQ001, SEQ002.
      {"noise_floors", apply_noise_floors, always},
      {"precision", probe_precision, always},
      {"replay", probe_replay,
       [](const Session& s) { return s.opt.steps > 0 && (s.opt.lr.has_value() || s.optimizer.has_value()); }},
  };
  return pipeline;
}

bool probe_declares(const std::string& probe, const std::string& metric) {
  const auto& t = probe_declared_metrics();
  auto it = t.find(probe);
  if (it == t.end()) return false;
  for (const auto& p : it->second) {
    if (!p.empty() && p.back() == '.' ? metric.rfind(p, 0) == 0 : metric == p) return true;
  }
  return false;
}

}  // namespace nd
