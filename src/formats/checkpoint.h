// Checkpoints without LibTorch: where the state_dict sits in an unpickled
// torch.save file, the optimizer's saved state, Hugging Face shard indexes,
// and the step numbers in checkpoint file names.
//
// The pickle itself is run by the restricted VM (formats/pickle.h): a
// checkpoint that needs any Python global but tensors, storages and
// OrderedDict (a pickled nn.Module, a Lightning AttributeDict, a numpy array)
// is refused there with the global's name. Everything here throws nd::Error
// (kind weights_load, exit 3) naming `source` and the key it met.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/pickle.h"

namespace nd::formats {

/// One tensor of a state_dict, under its key as stored in the file.
struct CheckpointTensor {
  std::string key;
  TensorRef ref;
};

/// The state_dict found in a checkpoint.
struct StateDictView {
  /// Where it was: "the file's root (a state_dict)", "dict['state_dict'] (Lightning)",
  /// "dict['model']", "dict['model_state_dict']", "dict['module']", or a nesting of them.
  std::string container;
  std::vector<CheckpointTensor> tensors;  ///< in the file's order
  /// Entries that are not tensors (Lightning's extra state, an int
  /// `num_batches_tracked` saved as a number): listed, not loaded.
  std::vector<std::string> skipped;
  /// Other top-level keys of a wrapper ("epoch", "optimizer", ...), for the report.
  std::vector<std::string> wrapper_keys;
};

/// Finds the state_dict in an unpickled checkpoint: the root itself when it is
/// a dict of str -> Tensor (torch.save(model.state_dict())); else the value of
/// the first of "state_dict" (Lightning .ckpt), "model_state_dict", "model",
/// "module" that is one (searched up to 3 wrappers deep). Throws nd::Error
/// (weights_load) when the root is not a dict, holds no tensors, or a key is
/// not a str, naming what was found and the keys a wrapper had.
StateDictView find_state_dict(const PickleValue& root, std::string_view source);

/// One parameter's saved optimizer state (optimizer.state_dict()["state"][index]).
struct OptimizerParamState {
  int64_t index = 0;                       ///< position in the optimizer's params (model.parameters() order)
  std::map<std::string, TensorRef> tensors;  ///< "exp_avg", "exp_avg_sq", "momentum_buffer", "step" (a 0-d tensor since PyTorch 1.12), ...
  std::map<std::string, double> numbers;   ///< "step" as a number (PyTorch < 1.12)
};

/// One param_groups entry.
struct OptimizerGroup {
  std::vector<int64_t> params;             ///< parameter indices
  std::map<std::string, double> numbers;   ///< lr, eps, weight_decay, momentum, dampening, ...
  std::map<std::string, bool> flags;       ///< amsgrad, nesterov, maximize, ...
  std::optional<double> beta1, beta2;      ///< betas (Adam family)
};

/// torch.save(optimizer.state_dict()) of Adam/AdamW/SGD, as saved.
struct OptimizerStateDict {
  std::string container;                   ///< "the file's root", "dict['optimizer']", "dict['optimizer_states'][0] (Lightning)", ...
  std::vector<OptimizerGroup> groups;
  std::vector<OptimizerParamState> state;  ///< sorted by index
  /// "adam" (exp_avg and exp_avg_sq), "sgd_momentum" (momentum_buffer),
  /// "stateless" (no per-parameter state: plain SGD or no step taken yet),
  /// "unknown" (other keys, e.g. Adagrad's "sum").
  std::string kind;
};

/// Finds and reads an optimizer state_dict: the root {"state", "param_groups"},
/// or under "optimizer", "optimizer_state_dict", "optimizer_states"[0]
/// (Lightning), "optim". Throws nd::Error (weights_load) naming the key that
/// does not have the expected type.
OptimizerStateDict find_optimizer_state(const PickleValue& root, std::string_view source);

/// The `weight_map` of a Hugging Face sharded checkpoint index
/// (model.safetensors.index.json, pytorch_model.bin.index.json): tensor name
/// -> shard file name (relative to the index's folder). Throws nd::Error
/// (weights_load) for invalid JSON, a missing weight_map, a non-string
/// value, or a shard name that leaves the folder ("..", absolute).
std::map<std::string, std::string> parse_shard_index(std::string_view json, std::string_view source);

/// The training step a checkpoint's file name states: the number after
/// "step" ("step_400.pt", "epoch=3-step=1200.ckpt", "ckpt-step400"),
/// else "checkpoint-500" / "iter_0300" style (the last number of the
/// file's stem). Empty when the name holds no number.
std::optional<int64_t> step_from_name(std::string_view path);

/// Expands --weights arguments: each is a path or a glob pattern (*, ?, [...],
/// expanded by normdoctor, so quoting it for the shell works); matches of one
/// pattern are sorted by name. Throws nd::Error (weights_load) when a
/// pattern matches nothing.
std::vector<std::string> expand_weight_paths(const std::vector<std::string>& args);

/// The order of a timeline: by step_from_name when every path has a step
/// (stable for equal steps), else as given.
std::vector<std::string> order_by_step(const std::vector<std::string>& paths);

}  // namespace nd::formats
