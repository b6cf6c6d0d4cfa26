#include "rules/catalog.h"

#include <algorithm>

namespace nd {

const std::vector<std::string>& failure_mode_slugs() {
  // Same order as docs/failure-modes.md, the copy of ../shared/failure-modes.md
  // (tests/unit/catalog_test.cpp compares both).
  static const std::vector<std::string> kSlugs = {
      // Inputs
      "nonfinite-input",
      "input-scale",
      // Forward numerics
      "nonfinite-forward",
      "activation-growth",
      "residual-stream-growth",
      "fp16-overflow-risk",
      "norm-gain-growth",
      "saturated-activation",
      "softmax-collapse",
      "attention-logit-growth",
      "output-logit-divergence",
      "outlier-features",
      "dead-units",
      // Backward numerics
      "nonfinite-gradient",
      "exploding-gradients",
      "vanishing-gradients",
      "no-gradient-path",
      "update-ratio",
      "loss-scale-underflow",
      "adam-second-moment-lag",
      // Train / eval mode
      "train-eval-drift",
      "mode-switch-ineffective",
      "saved-in-train-mode",
      "eval-nondeterminism",
      // BatchNorm
      "eval-batch-dependence",
      "bn-batch-of-one",
      "bn-small-batch-noise",
      "bn-stale-running-stats",
      "padding-contamination",
      "sequence-length-dependence",
      // Normalization axis and architecture
      "norm-over-time-axis",
      "norm-over-batch-axis",
      "batchnorm-in-sequence-model",
      "groupnorm-group-size",
      "degenerate-norm-group",
      "norm-eps-precision",
      "deep-post-norm",
      "missing-final-norm",
      "no-normalization",
      // Checkpoints (with --weights)
      "norm-gain-convention",
  };
  return kSlugs;
}

bool is_failure_mode(const std::string& slug) {
  const auto& s = failure_mode_slugs();
  return std::find(s.begin(), s.end(), slug) != s.end();
}

}  // namespace nd
