// The normalization probe (and its batch_dependence sub-probe).
#pragma once

#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

/// Normalization probes: train/eval drift, BatchNorm statistics against the
/// data, batch dependence in eval mode, small-batch noise, mode problems.
void probe_normalization(Session& s);
/// The normalization probe's eval pass (eval, traced flags as saved,
/// BatchNorm input statistics) and its dropout-free passes for the drift
/// (train or eval, flags following the mode).
PassSpec normalization_eval_spec();
PassSpec normalization_nodropout_spec(bool train);
/// The shared train pass (forward_backward's) with BatchNorm input statistics.
PassSpec normalization_train_spec();
/// Session::declare for the passes of probe_normalization on the session's
/// batch (before any pass runs).
void declare_normalization_passes(Session& s);

/// The metric names and families (a prefix ending in '.') probe `normalization`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& normalization_writes();

/// The metric names and families (a prefix ending in '.') probe `batch_dependence`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& batch_dependence_writes();

}  // namespace nd
