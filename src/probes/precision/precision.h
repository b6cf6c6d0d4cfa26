// The precision probe.
#pragma once

#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

/// Precision probe (src/probes/precision/precision.cpp, docs/metrics.md "Precision"):
/// always the implied next-layer scale of norm gains (norm.next_*); with
/// --precision fp16|bf16 also the format's limits against every module
/// (headroom, norm internals, eps), a forward in that precision (native when
/// LibTorch has the kernels, else emulated by rounding) compared with fp32,
/// and (fp16) the loss-scale range of the train pass's gradients. Runs after
/// the other probes; needs the train pass's parameter gradients.
void probe_precision(Session& s);

/// The metric names and families (a prefix ending in '.') probe `precision`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& precision_writes();

}  // namespace nd
