// The measurement engine: load -> instrument -> probes -> metrics document.
// Torch-free header (plain C++ types only), so the CLI compiles without
// LibTorch headers; the implementation lives in src/probes/*.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "metrics/metrics.h"

namespace nd {

/// Everything `normdoctor check` needs to measure a model.
struct CheckOptions {
  std::string model_path;
  std::vector<std::string> input_files;   ///< --input, repeatable (one batch each)
  std::vector<std::string> input_shapes;  ///< --input-shape specs, one per forward argument
  std::string target_file;                ///< --target (labels for the loss), optional
  std::string loss = "auto";              ///< auto | projection | mse | cross_entropy | sum
  std::optional<int64_t> output_index;    ///< --output-index: which output feeds the loss
  uint64_t seed = 0;                      ///< --seed: every random choice
  std::string precision = "fp32";         ///< --precision fp32|fp16|bf16 (emulated on CPU)
  /// --loss-scale: how fp16 training scales the loss. Unset: a dynamic
  /// scaler (torch.amp.GradScaler, initial scale 65536); 1: none (`.half()`
  /// training or autocast without GradScaler); N: a static scale.
  std::optional<double> loss_scale;
  int64_t train_batch_size = 0;           ///< --train-batch-size; 0 = the sample batch size
  double timeout_seconds = 0;             ///< --timeout; 0 = none
  int threads = 0;                        ///< intra-op threads; 0 = LibTorch's default
  std::optional<int64_t> seq_dim;         ///< --seq-dim: the time axis of sequence inputs (overrides inference)
  std::optional<int64_t> batch_dim;       ///< --batch-dim: the batch axis of the inputs (overrides inference, batch_layout)
  std::string mask_input;                 ///< --mask-input NAME|INDEX: the padding-mask argument
  /// --causal: the model is autoregressive (a decoder LM, a causal TCN): an
  /// output may not depend on later positions (rule SEQ007).
  bool causal = false;
  /// --pad-value: token id / feature value used for padding; unset: the
  /// sample's padded positions' value, an Embedding's padding_idx, else 0.
  std::optional<double> pad_value;
  std::optional<double> lr;               ///< --lr: learning rate for the update-ratio probe and the replay
  std::string optimizer = "sgd";          ///< --optimizer sgd|adam (plain SGD; Adam with betas 0.9/0.999, eps 1e-8)
  int64_t steps = 0;                      ///< --steps: optimizer steps the replay takes (0 = no replay; needs lr)
  std::vector<std::string> weights;       ///< --weights, repeatable, globs expanded by the engine (2+: a timeline)
  bool weights_partial = false;           ///< --weights-partial: load what matches, list the rest
  std::string optimizer_state;            ///< --optimizer-state: torch.save(optimizer.state_dict())
};

/// Progress callback: (probe name, pass name). Called on the engine's thread.
using ProgressFn = std::function<void(const std::string& probe, const std::string& pass)>;

/// Loads, measures and returns the metrics document. Throws nd::Error with
/// the kinds of src/core/error.h (model_load, input_load, input_mismatch,
/// missing_operator, model_run, timeout, out_of_memory).
MetricsDoc run_check(const CheckOptions& opt, const ProgressFn& progress = {});

/// The LibTorch version this binary runs on, "1.13.1".
std::string engine_libtorch_version();

}  // namespace nd
