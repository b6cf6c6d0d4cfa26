// The update and replay probes (--lr, --steps) and the --optimizer-state
// loader they read.
#pragma once

#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

/// Update ratio (needs --lr): per parameter, the size of the first
/// optimizer step relative to the weight, from the train pass's gradients
/// (src/probes/training/training.cpp, docs/metrics.md `update.`). Run right after
/// probe_forward_backward; reads the train pass's gradients (PassResult::grads).
void probe_update_ratio(Session& s);

/// Replay (--steps N --lr X): N optimizer steps on the sample batch, with the
/// loss of the train pass, on a snapshot of the parameters and buffers that
/// is restored afterwards (the model file is never written). Per step: loss,
/// gradient norm, update ratio, activation scale per module, norm gains, and
/// the first step and module where a value became non-finite.
void probe_replay(Session& s);

/// --optimizer-state (src/probes/training/optimizer_state.cpp): reads it, maps its
/// parameter indices onto the module's parameters in model.parameters()
/// order (named_modules order, direct parameters, a tied tensor once) and
/// checks every state tensor's shape. Throws nd::Error (weights_load, exit 3)
/// listing the mismatches. Run after load_checkpoints.
void load_optimizer_state(Session& s);

/// Adam's next step for one parameter from its saved state and gradient g
/// (PyTorch's torch.optim.Adam/AdamW, non-amsgrad): m = b1 m + (1-b1) g,
/// v = b2 v + (1-b2) g^2, t = step + 1, update = lr (m / (1-b1^t)) /
/// (sqrt(v / (1-b2^t)) + eps), plus lr wd w (AdamW) or with g += wd w (Adam).
/// rms_ratio = sqrt(mean(g^2 / v_hat)) with the updated v_hat: the quantity
/// StableAdamW clips the learning rate by (Wortsman et al. 2023);
/// eps_fraction = fraction of the elements with v_hat > 0 where eps >
/// sqrt(v_hat) (elements that never had a gradient are left out).
struct AdamStep {
  at::Tensor update;  ///< the step to subtract from w
  at::Tensor m, v;    ///< the moments after the step
  double rms_ratio = 0;
  double eps_fraction = 0;
};
AdamStep adam_step(const SavedParamState& st, const at::Tensor& m, const at::Tensor& v, double step,
                   const at::Tensor& w, const at::Tensor& g, double lr, bool decoupled);


/// The metric names and families (a prefix ending in '.') probe `update`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& update_writes();

/// The metric names and families (a prefix ending in '.') probe `replay`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& replay_writes();

}  // namespace nd
