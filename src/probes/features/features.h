// The features probe (issue 16.12) and the per-unit statistics its train pass
// captures.
#pragma once

#include <memory>
#include <functional>
#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

/// The tap hook that fills `f` during a pass (PassSpec::features):
/// per-unit activity at ReLU-family inputs, per-channel absmax of residual
/// streams, and which leaf module wrote each output (src/probes/features/features.cpp).
std::function<void(const TapSite&, const at::Tensor&)> feature_hook(const Session& s, std::shared_ptr<FeatureStats> f);
/// An empty FeatureStats (the type is complete in src/probes/features/features.cpp only).
std::shared_ptr<FeatureStats> new_feature_stats();

/// New failure modes of issue 16 (src/probes/features/features.cpp, docs/metrics.md):
/// dead ReLU units (dead.*), outlier channels of residual streams
/// (outlier.*), the log-partition of the head's logits (logits.*) and
/// normalizations with one value per group (norm.values_per_group). Reads
/// the train pass (Session::train(): its collector, output and features).
void probe_features(Session& s);

/// The metric names and families (a prefix ending in '.') probe `features`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& features_writes();

}  // namespace nd
