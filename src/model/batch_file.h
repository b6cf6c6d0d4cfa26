// Reading sample batches: torch.save files (tensor, tuple, list, dict, including
// the one-element list and one-key dict that LibTorch 1.13's pickle_load
// rejects) and .safetensors files.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "formats/dtype.h"
#include "formats/pickle.h"

namespace nd {

/// The tensors of one batch file, as forward arguments.
struct BatchFile {
  std::string path;
  /// "tensor" | "tuple" | "list" | "dict" | "safetensors"
  std::string container;
  /// Positional arguments (tensor, tuple, list), in order.
  std::vector<at::Tensor> positional;
  /// Keyword arguments (dict, safetensors), in file order; matched to forward's
  /// parameter names by the caller.
  std::vector<std::pair<std::string, at::Tensor>> keyword;
};

/// Reads one batch file. Format chosen by content (zip magic -> torch.save,
/// 8-byte header length + JSON -> safetensors), not by extension.
/// Throws nd::Error (kind input_load, exit 3) naming the file and what was
/// expected: missing/unreadable file, corrupt zip or header, legacy
/// (non-zip) torch.save format, a pickle with unsupported content (names the
/// Python class it met), a container holding something else than tensors, or
/// a TorchScript model given as a batch.
BatchFile read_batch_file(const std::string& path);

/// A torch.save archive or a .safetensors file, opened but not interpreted
/// (for checkpoints: src/model/weights.h decides what the value tree means).
struct SavedFile {
  std::string path;
  std::string format;        ///< "torch.save" | "safetensors"
  formats::PickleValue root;  ///< torch.save: the unpickled data.pkl
  /// torch.save: materializes a TensorRef of `root` (a CPU tensor viewing a
  /// copy of its storage); `where` names it in errors.
  std::function<at::Tensor(const formats::TensorRef&, const std::string& where)> tensor;
  /// safetensors: every tensor, in the header's order.
  std::vector<std::pair<std::string, at::Tensor>> named;
};

/// Reads a file as read_batch_file does (format by content), with errors of
/// kind `error_kind` (exit 3) ending in `expected` for files of another kind.
SavedFile read_saved_file(const std::string& path, const char* error_kind, const std::string& expected);

/// LibTorch's type for a file's element type; empty for the types this
/// LibTorch cannot hold (uint16/32/64 and float8 are newer than 1.13).
std::optional<at::ScalarType> scalar_type_of(formats::DType t);

}  // namespace nd
