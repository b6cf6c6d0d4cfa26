// The architecture probe.
#pragma once

#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

/// Architecture (src/probes/architecture/architecture.cpp): residual blocks, where the
/// norm sits in each (pre-norm / post-norm), depth, final norm, residual
/// stream RMS at each block boundary (from the train pass).
void probe_architecture(Session& s);

/// The metric names and families (a prefix ending in '.') probe `architecture`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& architecture_writes();

}  // namespace nd
