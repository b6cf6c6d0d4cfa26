// The gain_convention probe (--weights only).
#pragma once

#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

/// Norm-gain convention (src/probes/gain_convention/gain_convention.cpp; --weights only):
/// per LayerNorm/RMSNorm module, whether it multiplies by weight or by
/// 1 + weight (found by running it alone at weight 0 and 1), and the loaded
/// gains' mean, spread and sign mix (norm.gain_formula, norm.gain_loaded_*).
void probe_gain_convention(Session& s);

/// The metric names and families (a prefix ending in '.') probe `gain_convention`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& gain_convention_writes();

}  // namespace nd
