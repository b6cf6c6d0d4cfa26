// --weights loading and the timeline probe.
#pragma once

#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

/// --weights (src/probes/timeline/timeline.cpp): expands the globs, orders the
/// checkpoints by the step in their names, loads the last one into the module
/// (strict unless --weights-partial) and records what was loaded
/// (model.weights, probes.weights, assumptions). Run before the inventory.
/// Throws nd::Error (weights_load, exit 3).
void load_checkpoints(Session& s);

/// Timeline over 2+ checkpoints (src/probes/timeline/timeline.cpp, docs/metrics.md
/// "Timeline"): per checkpoint the forward_backward probe's train pass on the
/// same batch, per layer the series of probes.timeline, the first non-finite
/// checkpoint and module, and the first mover (the criterion is in the file
/// comment). Leaves the last checkpoint loaded. Run after build_inventory.
void probe_timeline(Session& s);

/// The metric names and families (a prefix ending in '.') probe `timeline`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& timeline_writes();

}  // namespace nd
