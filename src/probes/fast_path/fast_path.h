// The fast_path probe.
#pragma once

#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

/// Eval fast paths (src/probes/fast_path/fast_path.cpp, issue 15.6): when the graph
/// holds PyTorch's inference fast path (nn.TransformerEncoder's nested
/// tensors, the fused encoder layer or multi-head attention kernels), the
/// model is run as users run inference (eval, no grad: the fast path) and
/// with grad enabled (the slow path, what training computes), uninstrumented,
/// and the difference is recorded (fastpath.* model metrics). A fast path
/// that raises is recorded as evidence (fastpath.raises, the message), not
/// as the end of the check.
void probe_fast_path(Session& s);

/// The metric names and families (a prefix ending in '.') probe `fast_path`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& fast_path_writes();

}  // namespace nd
