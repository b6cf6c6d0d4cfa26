// Loading a TorchScript model and taking its inventory (module paths, kinds,
// parameters, normalization-layer facts). One of the two layers that include
// LibTorch headers (with src/instrument).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/script.h>

#include "model/batch_file.h"

namespace nd {

/// One module of named_modules(), in that order.
struct ModuleInfo {
  std::string path;         ///< "" for the root, else "layer1.0.bn1"
  std::string kind;         ///< unqualified, unmangled class name: "BatchNorm2d"
  std::string qualified;    ///< full TorchScript class name
  bool leaf = false;        ///< no child modules
  bool training = false;    ///< the module's training flag as saved
  int64_t parameters = 0;   ///< elements in its direct parameters
  torch::jit::Module module;
};

/// One argument of forward (self excluded).
struct ArgInfo {
  std::string name;
  std::string type;         ///< TorchScript type, "Tensor", "Optional[Tensor]", "int"
  bool has_default = false;
};

/// A loaded model plus the facts the report needs.
struct LoadedModel {
  std::string path;
  std::string sha256;        ///< of the file's bytes, lowercase hex
  torch::jit::Module module;
  std::string kind;          ///< "scripted" | "traced" (inferred, see model_kind_reason) | "exported" (.pt2)
  std::string kind_reason;   ///< what the inference rests on, in words
  bool saved_training = false;  ///< root module's training flag
  int64_t parameters = 0;    ///< elements in all parameters, a tensor two modules share (tied weights) once
  std::vector<ModuleInfo> modules;
  std::vector<ArgInfo> args;
  std::string format = "torchscript";  ///< "torchscript" | "pt2" (a torch.export archive, model/pt2_model.h)
  /// .pt2 archives: the sample inputs saved with the program
  /// (data/sample_inputs/<name>.pt), the default batch when no --input is given.
  std::optional<BatchFile> sample_inputs;
  std::string sample_inputs_note;  ///< why the archive's sample inputs are not usable, when they are not
};

/// Graphs that normdoctor builds itself (model/pt2_model.cpp) carry each
/// node's chain of named_modules() paths, outermost first, in this strings
/// attribute; ScopeResolver (src/instrument) reads it before call stacks.
inline const char* const kModuleScopeAttr = "normdoctor_scope";

/// SHA-256 of a file's bytes, lowercase hex.
std::string sha256_file(const std::string& path);

/// Loads `path` as TorchScript. Throws nd::Error (kind model_load, exit 3)
/// naming the file for: missing/unreadable/empty file, not a zip archive,
/// a truncated archive, a torch.save file (state_dict or pickled nn.Module,
/// with how to export TorchScript), no forward method; (kind
/// missing_operator) when the model calls an operator this LibTorch lacks.
LoadedModel load_model(const std::string& path);

/// Sets lm.kind ("scripted" | "traced") and lm.kind_reason from lm.module
/// (which must have a forward method): its inlined forward graph (control
/// flow, training-flag reads, compiled free functions are scripted signs)
/// and its module types (compiled constants and helper methods are
/// scripted; forward arguments named `argument_N` by the tracer are traced).
/// Called by load_model; public so graph tests can classify modules built
/// in memory.
void infer_model_kind(LoadedModel& lm);

/// Fills lm.args (forward's schema after self) and lm.modules / lm.parameters
/// (named_modules() order, direct parameter elements) from lm.module, which
/// must have a forward method. Shared by TorchScript and .pt2 loading.
void describe_forward_and_modules(LoadedModel& lm);

/// Unqualified class name without TorchScript's ___torch_mangle_N prefix:
/// "__torch__.torch.nn.modules.batchnorm.___torch_mangle_3.BatchNorm2d" -> "BatchNorm2d".
std::string short_class_name(const std::string& qualified);

/// Inventory facts for a module: eps, momentum, affine, track_running_stats,
/// normalized_shape, num_groups, num_features, running-statistics summary,
/// in/out features or channels. Attributes absent on the module are omitted.
nlohmann::json module_facts(const ModuleInfo& m);

/// True for BatchNorm*, LayerNorm, GroupNorm, InstanceNorm*, *RMSNorm* kinds.
bool is_norm_kind(const std::string& kind);

/// Whether a module holds parameters (its own, or with `recurse` its
/// subtree's too) and whether any of them requires grad.
struct ParamTraining {
  bool any = false;        ///< at least one parameter
  bool trainable = false;  ///< at least one with requires_grad
  /// Parameters, none of them trained (a frozen teacher, a frozen BN).
  bool frozen() const { return any && !trainable; }
};
ParamTraining param_training(const torch::jit::Module& m, bool recurse);

}  // namespace nd
