// Graph structure analysis for the architecture and normalized-axis probes:
// normalization written out as ops (RMSNorm as pow/mean/add/rsqrt, as in
// Llama, T5 and Gemma), residual additions and where the norm sits in each
// block (pre-norm x + F(Norm(x)), post-norm Norm(x + F(x))), and whether a
// final norm stands between the last block and the head.
//
// Works on forward's inlined graph before taps are inserted; results point
// at nodes of that graph. Internal to src/instrument (InstrumentedModel
// turns the results into taps and public sites).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/script.h>

namespace nd {

class ScopeResolver;

namespace structure {

/// True when `n` is a list or dict mutator (`append`, `insert`, `extend`,
/// `_set_item`, `pop`, `sort`, ...): it writes into its first argument.
bool container_writer(const torch::jit::Node* n);
/// True when a list value is written after its construction: `dims = [i
/// for i in range(1, x.dim() - 1)]` scripts to an empty prim::ListConstruct
/// filled by aten::append in a loop (RevIN's dim2reduce). Its elements are
/// then known only at run time, not from the ListConstruct's inputs.
bool list_written(const torch::jit::Value* v);
/// A constant int list: a prim::Constant, or a prim::ListConstruct of
/// constant ints (how traced graphs pass dims and normalized_shape) that
/// nothing writes afterwards (list_written).
std::optional<std::vector<int64_t>> const_int_list(torch::jit::Value* v);
/// A constant number: a scalar constant or a one-element tensor constant
/// (traced graphs store eps as a 0-dim tensor).
std::optional<double> const_number(torch::jit::Value* v);

/// A normalization found in the graph: an aten::*_norm op, or RMSNorm
/// written out as x * rsqrt(mean(x^2, dims) + eps).
struct NormNode {
  torch::jit::Node* node = nullptr;   ///< the op, or the pow/mul/square node that starts the pattern
  torch::jit::Node* anchor = nullptr; ///< the op, or the rsqrt/sqrt node (its output is the normalizer)
  torch::jit::Value* input = nullptr; ///< the tensor normalized
  std::string op;                     ///< "batch_norm" ... "rms_norm", or "rms_norm_pattern"
  nlohmann::json args = nlohmann::json::object();  ///< eps, normalized_shape / dims, num_groups, ...
  std::string module;                 ///< innermost named_modules() path running it
  /// Written-out norms over a view (GroupNorm as x.view(B, G, -1)): the
  /// tensor before the view, and the view node; nullptr otherwise.
  torch::jit::Value* view_source = nullptr;
  torch::jit::Node* view_node = nullptr;
  /// Written-out norms whose reduced dims are not constants (args "dims" is
  /// "dynamic": a list filled at run time): the reduction and its dims
  /// argument, so a tap can record the list it receives; nullptr otherwise.
  torch::jit::Node* reduce = nullptr;
  torch::jit::Value* reduce_dims = nullptr;
};

/// Finds RMSNorm written out as ops: rsqrt(mean(pow(x, 2) | x * x | square(x), dims) + eps)
/// (or 1 / sqrt(...)). `eps` is read from a constant or from the module
/// attribute it comes from (self.variance_epsilon). args: {"dims": [-1] | "all",
/// "eps": number | "dynamic", "keepdim": bool}.
std::vector<NormNode> find_rms_patterns(const std::vector<torch::jit::Node*>& nodes, ScopeResolver& scopes,
                                        const std::function<std::optional<double>(torch::jit::Value*)>& attr_double);

/// One residual addition out = stream + branch, where branch = F(stream)
/// contains at least one parameterized op (linear, matmul, convolution).
struct Residual {
  torch::jit::Node* add = nullptr;
  size_t stream_index = 0;    ///< which input of `add` is the stream
  std::string module;         ///< innermost module running the add
  std::string block;          ///< the repeated unit it belongs to ("model.layers.3"); "" = root
  std::string stack;          ///< the container of the blocks ("model.layers")
  std::string placement;      ///< "pre-norm" | "post-norm" | "in-branch" | "none"
  std::string norm_module;    ///< the norm that decides the placement ("" for none)
  /// The branch ends in a normalization (a "sandwich" or post-branch norm:
  /// GLM-4's post_self_attn_layernorm, Gemma 2's post_attention_layernorm,
  /// OLMo 2's reordered norm), read back from the added branch through
  /// views, casts and gate multiplications: it adds a bounded amount.
  bool branch_normalized = false;
  /// The number the stream is multiplied (or divided, `scale_divides`) by
  /// before the addition: DeepNorm's `residual * self.alpha + x`; nullptr
  /// when the stream is added as it is.
  torch::jit::Value* stream_scale = nullptr;
  bool scale_divides = false;
  /// The number the branch is multiplied (or divided, `branch_divides`) by
  /// just before the addition: EDSR's residual scaling `res =
  /// self.body(x).mul(self.res_scale)` (0.1), ESRGAN's `x5 * 0.2 + x`,
  /// Inception-ResNet's `scale`; nullptr when added as it is.
  torch::jit::Value* branch_scale = nullptr;
  bool branch_divides = false;
  /// The number the sum is multiplied (or divided, `sum_divides`) by right
  /// after the addition, the sum's only use: WaveNet's and ConvS2S's
  /// `x = (x + residual) * math.sqrt(0.5)`; nullptr when the sum carries on
  /// as it is.
  torch::jit::Value* sum_scale = nullptr;
  bool sum_divides = false;
};

/// Finds residual additions (aten::add / add_ of two tensors) and classifies
/// where the norm sits. `nodes` in execution order (pre-order walk).
std::vector<Residual> find_residuals(const std::vector<torch::jit::Node*>& nodes, const std::vector<NormNode>& norms,
                                     ScopeResolver& scopes);

/// What follows the last residual addition of a stack on the way to the output.
struct FinalNorm {
  std::string status = "n/a";   ///< "present" | "absent" | "unknown" | "n/a" (no stack)
  std::string norm_module;      ///< the final norm when present
  std::string head_module;      ///< the first parameterized module after the stack when absent ("" = output)
  std::string stack;            ///< the residual stack judged (set by the caller)
};
FinalNorm find_final_norm(const Residual& last, const std::vector<NormNode>& norms, ScopeResolver& scopes);

/// The head and the final norm found from the output side: the head is the
/// last parameterized op (linear, matmul, convolution) on the path from the
/// graph's output back through shape ops, pooling, activations and the
/// output's own bias/scale; the final norm is a norm whose output reaches
/// the head's input (or the output, without a head) through the same kind of
/// ops. "present" when one does, "absent" when the walk back reaches a
/// residual addition of `residuals` first (of `main_stack` when given: a
/// head module's own residual, as in attention pooling, leaves it
/// "unknown"), "unknown" otherwise. A final GroupNorm + SiLU before a UNet's
/// output convolution is "present".
FinalNorm find_final_norm_from_output(torch::jit::Graph& graph, const std::vector<Residual>& residuals,
                                      const std::vector<NormNode>& norms, ScopeResolver& scopes,
                                      const std::string& main_stack = "");

/// The op that computes the model's output when no module does: the walk
/// back from the first tensor the graph returns (a dict's "logits") through
/// rearrangements (view, index, slice, cat, transpose ...) and scalings by
/// constants or parameters (a temperature, CLIP's logit_scale.exp(), a
/// bias) to a contraction. kind "similarity": both operands are
/// activations, contracted over their last axes (a @ b.t(), F.linear(a, b),
/// einsum "nd,md->nm"): CLIP's and SimCLR's contrastive logits; "linear":
/// one operand is a 2-D parameter (x @ self.wte.weight.t(), a tied head
/// written in forward). Empty kind when the output is not reached that way
/// (a module's output, a sum, a feature map a @ b with b not transposed).
struct OutputProduct {
  std::string kind;                  ///< "similarity" | "linear" | "" (not found)
  std::string op;                    ///< "aten::matmul" ...
  torch::jit::Node* node = nullptr;  ///< the contraction
};
OutputProduct find_output_product(torch::jit::Graph& graph);

/// The class axis of the output the loss reads, from the op that writes it
/// (through casts, dropout, a bias, a temperature, a soft-cap, a softmax
/// over the last axis): -1 (the last axis) for a Linear or a contraction
/// with a weight (a language model's [B, T, V] head), 1 for a convolution
/// ([N, C, L] per-position classes, PyTorch's cross_entropy convention);
/// nullopt when the graph does not say. Used only when both axes fit the
/// target's shape.
std::optional<int64_t> output_class_axis(torch::jit::Graph& graph);

}  // namespace structure
}  // namespace nd
