// The input_scale probe: whether the model's output depends on the scale of
// a floating-point input at all (issue 16: by what the ops compute).
#pragma once

#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

/// For every floating-point input whose scale (input.scale) is above 10 (the
/// IN002 threshold), runs the dropout-free eval pass again with that input
/// multiplied by 2 and compares the model's floating-point outputs with the
/// unedited pass. A model that standardizes the input with its own
/// statistics first (per example, per batch, a LayerNorm/InstanceNorm
/// stem) gives the same output: the raw scale never reaches a weight, and an
/// input-scale finding would be false. Writes input.scale_invariant (true
/// when the relative output difference is below 1e-3: float32 rounding
/// through a standardization is ~1e-6; false when it is not, or when it
/// could not be shown: no floating-point output, a pass that raised) and
/// input.scale_invariance_rel_diff. A pass that raises is recorded as the
/// probe's error.
void probe_input_scale(Session& s);

/// The metric names probe `input_scale` writes (input scope; Session::run_probe
/// checks model and layer metrics only).
const std::vector<std::string>& input_scale_writes();

}  // namespace nd
