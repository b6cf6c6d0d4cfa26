// Loading checkpoints into a TorchScript module (--weights) and reading an
// optimizer's saved state (--optimizer-state). The file structure is read
// torch-free by src/formats/checkpoint.h on the restricted pickle VM (no code
// from a checkpoint ever runs); this layer materializes the tensors and
// copies them into the module's parameters and buffers by name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/script.h>

#include "formats/checkpoint.h"

namespace nd {

/// One checkpoint's tensors, by key as stored.
struct Checkpoint {
  std::string path;
  std::optional<int64_t> step;  ///< formats::step_from_name
  std::string format;           ///< "torch.save", "safetensors", "sharded safetensors (2 files)", ...
  std::string container;        ///< where the state_dict was (formats::StateDictView::container)
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::vector<std::string> skipped;  ///< non-tensor entries, not loaded
};

/// Reads a checkpoint: torch.save(model.state_dict()), a dict holding it
/// (Lightning .ckpt 'state_dict', 'model_state_dict', 'model', 'module'),
/// Hugging Face pytorch_model.bin or .safetensors, or a sharded
/// *.index.json with its shards (relative to the index's folder). Throws
/// nd::Error (kind weights_load, exit 3) naming the file and what it holds.
Checkpoint read_checkpoint(const std::string& path);

/// What load_weights did.
struct WeightsLoad {
  std::string path;
  std::optional<int64_t> step;
  std::string format, container;
  int64_t loaded = 0;                   ///< tensors copied into the module
  int64_t module_tensors = 0;           ///< parameters + buffers of the module
  std::vector<std::string> missing;     ///< module names the checkpoint lacks (partial only; strict throws)
  std::vector<std::string> unexpected;  ///< checkpoint keys the module lacks
  std::vector<std::string> mismatched;  ///< "name: checkpoint [a, b], model [c, d]"
  std::vector<std::string> tied;        ///< missing names that share storage with a loaded tensor (tied weights)
  std::vector<std::string> kept_buffers;  ///< buffers the checkpoint lacks that keep the model file's values
  std::map<std::string, int64_t> prefixes;  ///< prefix stripped -> keys ("module.": DDP, "_orig_mod.": torch.compile)
  std::map<std::string, int64_t> conversions;  ///< "bfloat16 -> float32" -> tensors converted
  std::vector<std::string> skipped;
  /// The report's record (probes.weights.checkpoints[i]).
  nlohmann::json to_json() const;
  /// Sentences for the report's assumptions (conversions, prefixes, kept buffers).
  std::vector<std::string> sentences() const;
};

/// Copies the checkpoint's tensors into `module`'s parameters and buffers
/// (named_parameters / named_buffers, recursive) by name, after removing
/// DDP's "module.", torch.compile's "_orig_mod." and a wrapper's "model."
/// prefixes from keys the module does not have as they are. Converts dtypes
/// to the module's (said in `conversions`). Strict unless `partial`: any
/// missing or unexpected key or shape mismatch throws nd::Error
/// (weights_load, exit 3) listing them all in one message, the way
/// PyTorch's load_state_dict(strict=True) does, and nothing is copied.
/// Missing buffers other than BatchNorm's running statistics (rotary
/// inv_freq, causal masks, position_ids: usually non-persistent) keep the
/// model file's values and are listed, never an error.
WeightsLoad load_weights(torch::jit::Module& module, const Checkpoint& ck, bool partial, const std::string& model_path);

/// An optimizer state_dict with its tensors.
struct OptimizerState {
  std::string path;
  formats::OptimizerStateDict dict;
  /// per parameter index: tensor name ("exp_avg", ...) -> tensor
  std::map<int64_t, std::map<std::string, at::Tensor>> tensors;
  /// per parameter index: the step count (from a 0-d tensor or a number)
  std::map<int64_t, double> step;
};

/// Reads torch.save(optimizer.state_dict()) (or a checkpoint holding it).
/// Throws nd::Error (weights_load, exit 3).
OptimizerState read_optimizer_state(const std::string& path);

}  // namespace nd
