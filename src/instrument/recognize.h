// Recognition by what the ops compute (DESIGN.md, "Recognize by what the ops
// compute"): normalizations written out as ops in any spelling, the layout
// role of every tensor's axes from what produced it, and the additive or
// masked_fill masks of attention scores.
//
// Works on forward's inlined graph before taps are inserted. Internal to
// src/instrument (InstrumentedModel turns the results into taps and sites).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <torch/script.h>

#include "instrument/structure.h"

namespace nd {
namespace recognize {

/// True when `v` is computed from module attributes and constants only (no
/// forward argument reaches it): a norm over such a value standardizes a
/// weight, a scale built so is a parameter's. `memo` caches answers per value.
bool param_only(torch::jit::Value* v, std::unordered_map<const torch::jit::Value*, bool>& memo, int depth = 0);

/// True when `n` is an in-place ATen op (`add_`, `mul_`, `copy_`: ATen's
/// trailing underscore, dunders such as `__and__` excluded): it writes its
/// first input, whose later readers see the result.
bool in_place_op(const torch::jit::Node* n);

/// Normalizations written out as ops: a tensor X divided by (or multiplied
/// with the reciprocal of) a statistic of X over some axes, with or without
/// its mean subtracted:
///   * (x - x.mean(d, keepdim=True)) / x.std(d, keepdim=True) [+ eps]
///   * (x - mean) / sqrt(var + eps), (x - mean) * rsqrt(var + eps), var as
///     x.var(d) or ((x - mean)^2).mean(d), also over a view (GroupNorm via
///     x.view(B, G, -1): `view_source` is the tensor before the view)
///   * x * rsqrt(mean(x*x | x^2 | square(x), d) + eps), x / (x.norm(2, d) /
///     sqrt(n) + eps) (RMSNorm spellings; the square in the input dtype or
///     after an upcast: args.upcast)
///   * whole-tensor standardization (x - x.mean()) / x.std() (dims "all")
///   * torchvision's FrozenBatchNorm2d: x * (w * (running_var + eps).rsqrt())
///     + (b - running_mean * scale), the scale computed from buffers only.
///   * a statistic over the rows a boolean mask keeps (x[~pad_mask]) applied
///     to all of x: args.masked_rows, input = x (PowerNorm's MaskBatchNorm).
/// ops: "layer_norm_pattern" (centered), "rms_norm_pattern" (not centered),
/// "group_norm_pattern" (centered over a reshaped view), "batch_norm_pattern"
/// (centered, in a module holding running_mean/running_var buffers: a
/// BatchNorm written out), "frozen_batch_norm".
/// args: dims (list on the normalized tensor, or "all"), eps (number,
/// "dynamic", or 0 when none is added), centered, statistic ("std" | "var" |
/// "mean_square" | "norm"), upcast, keepdim; frozen_batch_norm: eps,
/// channel_axis (1), buffers (module path holding running_mean/var).
/// Nodes already claimed (`claimed`: reductions used by an aten norm or an
/// earlier pattern) are skipped.
std::vector<structure::NormNode> find_norm_patterns(
    const std::vector<torch::jit::Node*>& nodes, ScopeResolver& scopes,
    const std::function<std::optional<double>(torch::jit::Value*)>& attr_double);

/// Role of each axis of a tensor, from the op that produced it (embedding:
/// [..ids.., hidden]; convolution: [batch, channel, spatial...]; linear: last
/// axis hidden; transposes and permutes move roles; reshapes keep the leading
/// roles they read from sizes and merge the trailing ones; a flattened conv
/// map moved to [batch, spatial, channel] is [batch, tokens, hidden]). An
/// entry "in:I:D" stands for axis D of forward argument I (resolved by the
/// caller from the input layout); "?" is unknown.
using Roles = std::vector<std::string>;

/// Roles of every tensor value it can tell, walking `nodes` in execution
/// order. `input_ranks`: ranks of forward's tensor arguments (self excluded;
/// -1 unknown). `attr_int`: an int module attribute's value (scripted
/// `x.transpose(self.d0, self.d1)`), where the caller can read it.
std::unordered_map<const torch::jit::Value*, Roles> infer_roles(const std::vector<torch::jit::Node*>& nodes,
                                                                 torch::jit::Graph& graph,
                                                                 const std::vector<int64_t>& input_ranks,
    const std::function<std::optional<int64_t>(torch::jit::Value*)>& attr_int = {});

/// The additive masks and masked_fill masks between an attention score
/// product (matmul/bmm/baddbmm/einsum) and its softmax input, found by
/// walking back from the softmax input: for each, the node (add or
/// masked_fill) and the operand that masks (the addend that is not derived
/// from the scores, or the boolean mask with a fill value at or below
/// kMaskFill).
struct MaskOperand {
  torch::jit::Node* node = nullptr;  ///< the aten::add / aten::masked_fill / aten::where
  torch::jit::Value* operand = nullptr;  ///< the additive term, or the boolean mask
  bool boolean = false;                  ///< masked_fill: `operand` true = masked
  double fill = 0;                       ///< masked_fill's value
  /// torch.where(keep, scores, fill) (GPT-2's causal mask with masked_bias
  /// -1e4): `operand` true = kept; a mask when the filled entries are at or
  /// below kMaskFill at run time (the fill may be a buffer).
  bool keep = false;
  /// scores - term (Hugging Face Funnel: `attn_score - INF * (1 - mask)`,
  /// INF = 1e6): `operand` is subtracted; masked where it is at or above
  /// -kMaskFill at run time.
  bool subtracted = false;
};
/// An additive term or fill value at or below this removes the entry from
/// the softmax: exp(-30) = 9.4e-14 of the weight of an entry at 0, below
/// fp32's resolution of a probability near 1 (1.2e-7) by six orders.
/// torchvision's Swin uses -100, Hugging Face finfo.min, fairseq -inf,
/// older BERT code -1e4.
inline constexpr double kMaskFill = -30.0;
std::vector<MaskOperand> attention_masks(torch::jit::Value* softmax_input);

}  // namespace recognize
}  // namespace nd
