// Runtime fallbacks for ATen operators that models saved by newer PyTorch call
// but the LibTorch normdoctor runs on lacks (LibTorch 1.13 has no
// aten::scaled_dot_product_attention, which PyTorch 2.x's
// nn.MultiheadAttention and most transformer code call).
//
// Each fallback is a composite of ATen ops (so autograd differentiates it) with
// the schema PyTorch 2.x declares in native_functions.yaml. It is registered
// with the dispatcher only when the running LibTorch does not already have the
// operator, so on LibTorch 2.x nothing is registered and the native kernel runs.
// TorchScript's compiler sees dispatcher operators through its registration
// listener, so a model calling torch.scaled_dot_product_attention loads once
// register_missing_op_fallbacks() has run.
//
// This header is torch-free on purpose: the loader and the report include it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace nd {

/// Registers, for each operator of the fallback table that the running LibTorch
/// lacks, a composite implementation under the operator's PyTorch 2.x schema.
/// Call it once before loading any model (later calls do nothing and return the
/// same list). Returns the qualified names registered ("aten::..."); empty on a
/// LibTorch that has all of them (2.x). Thread-safe.
std::vector<std::string> register_missing_op_fallbacks();

/// Works around kernels of the running LibTorch known to compute wrong values,
/// once per process (later calls return the same list). Call it before the
/// first pass, next to register_missing_op_fallbacks(). Returns one line per
/// workaround applied; empty on LibTorch 2.x.
///
/// LibTorch 1.x: oneDNN (MKL-DNN) is switched off for the process. 1.13's CPU
/// gelu_backward (approximate="none") takes oneDNN's eltwise path whenever the
/// *input* is a contiguous float tensor and reads grad_output's buffer as if it
/// were contiguous too: a transposed gradient (gelu, then transpose, as in
/// Whisper's, wav2vec2's and Moonshine's conv front ends) gets values from
/// whatever memory lies there (0, 1e33, inf, another tensor's), different
/// from run to run. The condition is in aten/src/ATen/native/Activation.cpp of
/// 1.13 (gelu_backward_out_cpu: use_mkldnn(self)); PyTorch 2.x checks both
/// tensors. Without oneDNN, 1.13 runs its native kernels, whose gradients
/// match LibTorch 2.13's on the same files.
std::vector<std::string> apply_kernel_workarounds();

/// Qualified names of the fallbacks registered in this process (empty before
/// register_missing_op_fallbacks() and on LibTorch 2.x).
std::vector<std::string> fallbacks_in_use();

/// Subset of fallbacks_in_use() whose implementation has actually run in this
/// process (what a report should list as "used by this model").
std::vector<std::string> fallbacks_called();

/// Qualified names of every operator normdoctor carries a fallback for
/// (registered or not).
std::vector<std::string> fallback_table();

/// The operator a TorchScript load or compile error says is missing, as
/// "ns::name" or "ns::name.overload"; nullopt when the text is not such an
/// error. Understands the wordings of LibTorch 1.x and 2.x:
///   "Unknown builtin op: aten::foo." (compiler, both cases of "unknown"),
///   "Could not find any similar ops to aten::foo.",
///   "Schema not found for node. ... Node: %1 : Tensor = aten::foo(...)",
///   "Could not find schema for aten::foo.overload" (dispatcher),
///   "Following ops cannot be found: [aten::foo, ...]" (mobile/bytecode loader).
std::optional<std::string> missing_operator_in(const std::string& what);

/// The user-facing sentence for a model that calls an operator this LibTorch
/// lacks (error kind missing_operator): names the file, the operator, the
/// LibTorch version and the two ways out.
std::string missing_operator_message(const std::string& model_path, const std::string& op);

/// Version of the LibTorch normdoctor was compiled against, e.g. "1.13.0"
/// (from <torch/version.h>; "unknown" where no version macro exists).
std::string libtorch_version();

}  // namespace nd
