// Instrumentation: a copy of forward's inlined graph with a tap after every
// module output (the equivalent of a forward hook on every module of
// named_modules()), taps on the inputs of sigmoid/tanh/softmax ops, and the
// mode switch restored for traced graphs (DESIGN.md, "Instrumentation").
#pragma once

#include <cstdint>
#include <atomic>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <torch/script.h>

#include "instrument/stats.h"
#include "model/model.h"

namespace nd {

/// What a tap measures.
enum class TapKind : int {
  kModuleOutput = 0,  ///< a tensor a module returns (used outside its scope)
  kModuleInput = 1,   ///< a tensor entering a module (only for InstrumentOptions::inspect_inputs_of)
  kSigmoidInput = 2,  ///< the input of aten::sigmoid
  kTanhInput = 3,     ///< the input of aten::tanh
  kSoftmaxInput = 4,  ///< the logits entering aten::softmax
  kBatchNormInput = 5,  ///< the input of aten::batch_norm (per-channel statistics)
  kNormInput = 6,       ///< the input of layer_norm / group_norm / instance_norm / rms_norm (or RMSNorm written out)
  kResidualStream = 7,  ///< a residual addition: the stream entering it, or the sum leaving it
  /// The attention logits of aten::scaled_dot_product_attention, computed by
  /// the tap from its query, key, mask and scale (the op's own softmax is
  /// inside the operator, out of the graph's reach). Rows along the last dim.
  kAttentionScores = 8,
  /// The input of a ReLU-family op (relu, relu6, hardtanh(0, x), clamp_min(0)):
  /// a unit whose input is <= 0 for the whole batch is dead (probe_features).
  kReluInput = 9,
};

/// One tap inserted in the graph.
struct TapSite {
  int64_t id = 0;
  TapKind kind = TapKind::kModuleOutput;
  std::string module;                  ///< module path ("" = root)
  int64_t dim = -1;                    ///< softmax dim (kSoftmaxInput), when constant
  /// kSoftmaxInput whose input comes from a matmul/bmm/einsum (through scale,
  /// mask add, masked_fill, casts): an attention softmax. Always true for
  /// kAttentionScores.
  bool attention = false;
  /// Attention sites: the modules whose outputs feed the query, key and
  /// value (the module-output tap reached through reshapes, transposes,
  /// scaling and casts); "" when the graph does not show one (e.g. a packed
  /// in_proj_weight applied inside the attention module).
  std::string attn_q, attn_k, attn_v;
  std::vector<std::string> consumers;  ///< innermost module paths of the ops that use a module output
  /// kModuleOutput read by a clamp with constant bounds (torch.clamp,
  /// clamp_min/clamp_max, F.hardtanh): the bounds (-inf / +inf where one is
  /// absent). A VAE's log-variance clamped to [-30, 20] (diffusers'
  /// DiagonalGaussianDistribution): when every value lies beyond a bound the
  /// clamp passes no gradient (eval49 vae_logvar_clamp_diverged).
  bool clamped = false;
  double clamp_lo = -std::numeric_limits<double>::infinity();
  double clamp_hi = std::numeric_limits<double>::infinity();
  /// kModuleOutput: which of the module's outputs (tensors defined inside
  /// its scope and used outside it, in graph order) this tap measures, and
  /// whether it is the primary one: the value the module's forward returns
  /// (its first tensor when a tuple), read from the module's own forward
  /// graph. The others are secondary: a tuple's other elements, or values
  /// the tracer rebound (LlamaRMSNorm's `hidden_states.to(float32)`, the
  /// module's input passed on, is "used outside" when the parent's residual
  /// addition reads the same tensor).
  int64_t output_index = 0;
  bool primary = true;
  /// kModuleOutput: the innermost module of the first computing op (an aten
  /// op with a tensor output) after this tap in graph order, outside this
  /// tap's module; "" the root's own forward. Where a forward that raised
  /// right after this value was measured most likely raised (a distillation
  /// wrapper's teacher(x) runs after student(x) returns, before the loss
  /// that reads the student's output: eval54 C2). Unset at the graph's end.
  std::optional<std::string> next_module;
  /// Attention softmax sites with rank-3 scores [batch*heads, L, S]: the
  /// owning module's num_heads (0: unknown; rank-4 scores carry heads on axis 1).
  int64_t heads = 0;
  /// kSoftmaxInput: its probabilities are what the model's forward returns
  /// (through views, casts and tuples only): a classifier's output layer,
  /// where confident rows are the goal of training. kSigmoidInput: its
  /// output is returned (through those and concatenation): a probability
  /// readout whose training takes the logits.
  bool to_output = false;
  /// kSigmoidInput: the sigmoid gates its own input, x * sigmoid(a * x)
  /// (QuickGELU's x * sigmoid(1.702 x) in CLIP and X-CLIP, a written-out
  /// Swish): an activation whose gradient stays about 1 for large positive
  /// x, not a gate whose saturation stops the gradient (ACT004 skips it).
  bool self_gated = false;
  /// Attention sites: the scores are scaled by a number between the product
  /// and the softmax, or q or k before the product (`/ math.sqrt(d)`,
  /// `q * self.scale`, baddbmm's alpha), or by scaled_dot_product_attention
  /// itself. False when no scaling is found (T5's unscaled scores, a
  /// forgotten 1/sqrt(d_head)).
  bool scores_scaled = false;
  /// kReluInput: the child module whose output this ReLU-family op, run in
  /// an ancestor's own forward, reads as it is (through views and casts):
  /// GIN's `F.relu(self.lin1(x))` in the model's forward reads lin1's units.
  /// "" when the input is computed in the op's own module (a sum, a ReLU
  /// module reading its sibling).
  std::string input_module;
  /// Attention sites: masks found between the score product and the softmax
  /// (additive terms or masked_fill), measured by normdoctor::mask_tap.
  int64_t masks = 0;
};

/// A normalization op found in the graph, with its constant arguments.
struct NormOpSite {
  std::string module;        ///< innermost module path running the op
  /// "batch_norm" | "layer_norm" | "group_norm" | "instance_norm" | "rms_norm", or
  /// "rms_norm_pattern": x * rsqrt(mean(x^2, dims) + eps) written out (Llama, T5, Gemma).
  /// "batch_norm_pattern": a centred normalization in a module holding running_mean /
  /// running_var (a BatchNorm written out; statistics may be over masked rows).
  std::string op;
  /// eps, momentum, normalized_shape, num_groups, training (constant or
  /// "dynamic"); rms_norm_pattern: dims (list or "all"), keepdim, eps.
  nlohmann::json args;
  int64_t input_tap = -1;    ///< tap on the normalized tensor (kBatchNormInput / kNormInput); -1: none
  /// Written-out norms over a view (GroupNorm as x.view(B, G, -1)): a
  /// kNormInput tap on the tensor before the view; -1: none.
  int64_t source_tap = -1;
  /// Written-out norms whose reduced dims are a list filled at run time
  /// (args "dims" = "dynamic"): a kNormInput tap before the reduction that
  /// records the dims it receives (TapRecord::ints); -1: none.
  int64_t dims_tap = -1;
  /// Roles of the normalized tensor's axes from what produced it
  /// (recognize::infer_roles: "batch", "time", "hidden", "channel",
  /// "spatial", "tokens", "in:I:D" for axis D of argument I, "?"); empty:
  /// unknown. source_roles: the same for the tensor before the view.
  std::vector<std::string> input_roles, source_roles;
  /// The normalized tensor is a forward argument itself, after shape and
  /// dtype ops only (view, transpose, permute, to, ...): no layer has
  /// computed it (a per-utterance standardization of the input features).
  bool of_model_input = false;
  /// The normalized tensor is a convolution's output (after shape ops):
  /// conv -> BatchNorm, the norm's intended use (a Conformer's convolution
  /// module: depthwise Conv1d over time, then BatchNorm1d).
  bool after_convolution = false;
  /// batch_norm: a dropout that runs before the normalized tensor with no
  /// normalization between (through convolutions, linears, activations,
  /// pooling, shape ops and additions): its module path ("" root) and p;
  /// p 0 when none. In training its scaled mask inflates the variance the
  /// BatchNorm accumulates, eval sees less ("variance shift", Li et al. 2019).
  std::string dropout_upstream;
  double dropout_upstream_p = 0;
};

/// Axes a normalization reduces over, for an input of rank `rank`; empty
/// when unknown. `info`: the module's facts (a scripted nn.LayerNorm's
/// normalized_shape attribute). `runtime_shape`: what a tap recorded at run
/// time, the normalized_shape of a layer_norm/rms_norm computed there
/// (F.layer_norm(x, x.shape[-2:])) or the dims of a written-out norm built
/// at run time (NormOpSite::dims_tap).
std::vector<int64_t> norm_reduced_axes(const NormOpSite& n, int64_t rank, const nlohmann::json& info,
                                       const std::vector<int64_t>& runtime_shape = {});

/// A residual addition out = stream + F(stream) (F holds a linear, matmul
/// or convolution), with where the normalization sits (src/instrument/structure.h).
struct ResidualSite {
  std::string module;        ///< innermost module running the addition
  std::string block;         ///< the repeated unit ("model.layers.3", "encoder.layer.0"); "" = root
  std::string stack;         ///< the container of the blocks ("model.layers"); "" = none
  std::string placement;     ///< "pre-norm" | "post-norm" | "in-branch" | "none"
  std::string norm_module;   ///< the norm that gives the placement ("" for none)
  bool branch_normalized = false;  ///< the added branch ends in a norm (structure::Residual)
  /// The number the stream is scaled by before the addition (DeepNorm's
  /// alpha: `residual * self.alpha + x`); 1 when added as it is, NaN when
  /// scaled by a number not known before running.
  double stream_scale = 1.0;
  /// The number the branch is scaled by before the addition (EDSR's
  /// res_scale 0.1, ESRGAN's 0.2); 1 when added as it is, NaN when scaled by
  /// a number not known before running.
  double branch_scale = 1.0;
  /// The number the sum is scaled by right after the addition (WaveNet's
  /// sqrt(0.5)); 1 when it carries on as it is, NaN when not known before
  /// running.
  double sum_scale = 1.0;
  int64_t in_tap = -1;       ///< kResidualStream tap on the stream entering the addition
  int64_t out_tap = -1;      ///< kResidualStream tap on the sum
  int64_t branch_tap = -1;   ///< kResidualStream tap on the branch added to the stream (-1: not tapped)
};

/// What stands between the last residual addition of the model and its
/// head: "present" (a norm: norm_module), "absent" (head_module, or the
/// output when empty), "unknown" (the graph path was not followed), "n/a".
struct FinalNormSite {
  std::string status = "n/a";  ///< "present" | "absent" | "unknown" | "n/a"
  std::string norm_module;     ///< the final norm when present
  std::string head_module;     ///< the head the stack feeds ("" = the output)
  std::string stack;           ///< the stack whose last block feeds the head (the last stage of two or more blocks)
};

/// The contraction that computes the model's output when no module's output
/// is it: "similarity" (two activations contracted over their last axes:
/// contrastive logits) or "linear" (an activation and a 2-D parameter: a
/// head written in forward). Empty kind when the output is not one.
struct OutputProductSite {
  std::string kind;    ///< "similarity" | "linear" | ""
  std::string op;      ///< "aten::matmul" ...
  std::string module;  ///< innermost named_modules() path running it ("" = the root's own forward)
};

/// A batch_norm or dropout op: the module running it and whether tracing
/// baked its training flag in as a constant.
struct ModeOpSite {
  std::string module;        ///< innermost module path running the op ("" = root or unknown)
  std::string op;            ///< "batch_norm" | "dropout" (any aten dropout variant)
  bool baked = false;        ///< traced graph: the flag is a constant
  bool baked_value = false;  ///< the constant, when baked
  bool constant = false;     ///< the flag is a constant (baked, or written so in scripted code)
  bool constant_value = false;  ///< the constant, when constant
  /// The flag is the module's `training` attribute itself (prim::GetAttr
  /// "training": nn.Dropout's F.dropout(x, p, self.training)).
  bool follows_mode = false;
};

/// A reduction (aten::mean / aten::sum over constant dims) or a convolution
/// in the graph, with the roles of its input's axes (as NormOpSite::input_roles):
/// where padding can reach real positions (a pooling over time that no mask
/// excludes padding from, a convolution whose window reads padded frames).
struct OpFact {
  std::string op;                        ///< "aten::mean", "aten::sum", "aten::amax", "aten::max" (max.dim), "aten::conv1d", ...
  std::string module;                    ///< innermost module running it
  std::vector<int64_t> dims;             ///< reduced axes; convolutions: the axes the kernel slides over
  std::vector<std::string> input_roles;  ///< empty: unknown
  std::vector<std::string> consumers;    ///< innermost modules of the ops using its output
};

/// A reduction in the graph (a norm, mean, sum, std/var, softmax,
/// logsumexp, amax) with its reduced axes as written: what can mix the
/// examples of a batch when an axis is the batch axis.
struct ReductionSite {
  std::string op;                        ///< "aten::linalg_vector_norm"
  std::string module;                    ///< innermost module running it ("" = the root's forward)
  std::vector<int64_t> dims;             ///< reduced axes as written (negative: from the end)
  bool all_dims = false;                 ///< x.mean(), x.norm(): every axis
  std::vector<std::string> input_roles;  ///< layout roles of the reduced tensor; empty: unknown
  /// The reduced statistic (through clamp, expand, eps, roots) divides the
  /// tensor it was computed from, or its reciprocal multiplies it, or it is
  /// subtracted from it or bounds it from below: a normalization
  /// (F.normalize(x, dim=0), (x - x.mean(0)) / x.std(0), x - x.mean(0),
  /// torch.maximum(x, x.max() - 8)).
  bool normalizes = false;
  /// How the statistic is applied back to its own tensor when `normalizes`:
  /// "divides" (x / stat, x * rsqrt(stat)), "centers" (x - x.mean(0)) or
  /// "floors" (torch.maximum(x, x.max() - 8): Whisper's log-mel floor).
  std::string applied;
  /// Part of a normalization recognized as such (a norm op or a written-out
  /// pattern over the same input): its axes are judged there (AXIS002).
  bool in_norm = false;
  /// Its result only becomes a Python number (int(batch.max()) + 1, the
  /// graph count of PyG's pooling; x.sum().item()): it sizes or steers the
  /// computation but mixes no example's values into another's.
  bool to_scalar = false;
};

class Collector;

/// Settings of one pass.
struct PassConfig {
  bool training = false;     ///< mode of batch_norm/dropout flags that tracing baked in
  bool dropout = true;       ///< false: every dropout op is replaced by identity for this pass
  bool record_grad = false;  ///< register gradient hooks on tapped tensors that require grad
  /// > 0: module-output statistics cover only example 0 of tensors whose
  /// axis 0 has this size (to compare one example alone and inside a batch).
  int64_t slice0_batch = 0;
  /// The batch axis of module tensors whose axis 0 is not the batch (1 for
  /// a time-major [T, B, C] model): sliced there when their size is the batch.
  int64_t slice_axis = 0;
  /// With slice0_batch: the example measured, 0 (the first) or another
  /// (the last example in its own place in the batch: a model that adds
  /// a positional table indexed by the batch axis treats example k by its
  /// position, so it cannot be moved to the front).
  int64_t slice_index = 0;
  /// With slice0_batch: the pass of example 0 alone. Each module output is
  /// cut to the shape it had there (the one axis of the batch's size where
  /// the alone tensor has 1, or a folded [batch * k] axis where it has k);
  /// the axis heuristics above apply only where its shapes say nothing.
  const Collector* slice_guide = nullptr;
  /// With slice0_batch: the rows (long [n]) of the example measured in
  /// module tensors whose axis 0 has slice_rows_of entries: the nodes of one
  /// graph in a graph batch ([N, F] node tensors, N the nodes of all graphs),
  /// kept whole along axis 0 (compared with the graph alone's [n, F]).
  /// Undefined: no such rows.
  at::Tensor slice_rows;
  int64_t slice_rows_of = 0;
  /// true: flags that tracing baked in keep their saved value (the model as
  /// a user runs it); false: they follow `training` (the switch restored).
  bool keep_baked = false;
  /// Per-channel statistics of batch_norm inputs (TapRecord::bn); off, a
  /// batch_norm tap only records that it fired.
  bool batch_norm_stats = true;
};

/// Weights for comparing a tensor at the real (not padded) positions only:
/// `real` is [B, T] bool; for `t` with a batch axis (0, else the first of
/// size B: [T, B, C]) and an axis of size T (the first other one; a
/// [B, H, T, S] attention map takes its query axis), 1 at real positions and
/// 0 at padded ones, shaped to broadcast against `t` in t's dtype. For a
/// batch axis without a time axis ([B, classes]), 0 for the examples with no
/// real position. Undefined when `real` is undefined or t has no batch axis.
at::Tensor real_position_weights(const at::Tensor& t, const at::Tensor& real);

/// Whether `t` has a batch axis and a time axis for the [B, T] `real`
/// (real_position_weights then weights positions, not only examples): a
/// decoder's [B, T', V] logits beside an encoder mask [B, T] have none.
bool indexes_positions(const at::Tensor& t, const at::Tensor& real);

/// Statistics gathered by the taps of one pass. Thread-safe for gradient hooks.
/// Per-channel statistics of a batch_norm input [N, C, *] (first call in the pass).
struct BatchNormStats {
  int64_t examples = 0;        ///< N
  int64_t spatial = 1;         ///< elements per example and channel
  at::Tensor mean;             ///< [C] over N and spatial (float64, CPU)
  at::Tensor var;              ///< [C] biased, over N and spatial
  at::Tensor example_mean;     ///< [N, C] per example, over spatial
  at::Tensor example_var;      ///< [N, C] per example, over spatial
};
struct TapRecord {
  int64_t calls = 0;
  int64_t first_fire = -1;        ///< sequence number of its first firing in the pass
  TensorStats fwd;                ///< forward values (module output/input; op input)
  int64_t saturated = 0;          ///< sigmoid/tanh inputs in the flat region
  SoftmaxStats softmax;
  int64_t grad_calls = 0;
  int64_t first_grad = -1;        ///< sequence number of its first gradient hook call
  TensorStats grad;               ///< gradient w.r.t. the tapped tensor
  BatchNormStats bn;              ///< kBatchNormInput only
  std::vector<int64_t> shape;     ///< sizes of the tensor at its first firing
  std::string dtype;              ///< its dtype at the first firing (c10::toString: "Float", "Half", "Long", ...)
  bool floating = false;          ///< that dtype holds floating-point values
  /// normdoctor::norm_tap: the normalized_shape the op received at its
  /// first firing (computed at run time: F.layer_norm(x, x.shape[-2:])).
  std::vector<int64_t> ints;
  /// Attention softmax sites: statistics per head (heads on axis -3 of
  /// rank-4 scores, or folded into axis 0 of rank-3 ones), merged over calls.
  std::vector<SoftmaxStats> heads;
  /// Attention softmax sites with a recognized mask, and
  /// scaled_dot_product_attention sites given a mask or is_causal: the calls whose mask
  /// removed a square score matrix's whole strict upper triangle (no query
  /// sees a later key: a causal mask, perhaps combined with padding), and
  /// the calls with any recognized mask.
  int64_t causal_calls = 0, mask_calls = 0;
  /// Module outputs: the RMS of each call's output, in call order, for the
  /// first kMaxCallRms calls (a recurrence written as a loop calls one cell
  /// per time step: its per-call RMS is the hidden state's scale over time).
  std::vector<double> call_rms;
  static constexpr size_t kMaxCallRms = 512;
  // Output comparison (Collector::reference set): over the module's outputs,
  // call by call, narrowed to the common sizes, real positions only.
  std::vector<at::Tensor> captured;  ///< Collector::capture: a copy of each call's output
  double cmp_diff_sq = 0;         ///< sum of (this - reference)^2
  double cmp_ref_sq = 0;          ///< sum of reference^2
  int64_t cmp_calls = 0;          ///< outputs compared
  /// sqrt(cmp_diff_sq / cmp_ref_sq); 0 when nothing differs; NaN when nothing was compared.
  double cmp_rel() const;
};
/// Statistics gathered by the taps of one pass. Thread-safe for gradient hooks.
///
/// Statistics of tensors off the CPU stay on their device until the pass is
/// read (no host synchronization per tap): finish() reads them all back in
/// one transfer; every accessor calls it first.
class Collector {
 public:
  explicit Collector(size_t taps) : records_(taps) {}
  std::vector<TapRecord>& records() { finish(); return records_; }
  const std::vector<TapRecord>& records() const { finish(); return records_; }
  /// First tap (by firing order) whose forward values held NaN/Inf; -1 if none.
  int64_t first_nonfinite_tap() const { finish(); return first_nonfinite_fwd_; }
  /// First tap (by gradient hook order) whose gradient held NaN/Inf; -1 if none.
  int64_t first_nonfinite_grad_tap() const { finish(); return first_nonfinite_grad_; }
  int64_t fires() const { return fire_seq_; }
  /// The last batch_norm input tap that fired (names the layer when batch_norm raises); -1 if none.
  int64_t last_batch_norm_tap() const { return last_bn_tap_; }
  /// The last tap of any kind that fired; -1 if none. When it is
  /// last_batch_norm_tap(), the op after that input (batch_norm) raised.
  int64_t last_tap() const { return last_tap_; }
  int64_t slice0_batch = 0;  ///< copied from PassConfig by InstrumentedModel::run
  int64_t slice_axis = 0;    ///< copied from PassConfig by InstrumentedModel::run
  int64_t slice_index = 0;   ///< copied from PassConfig by InstrumentedModel::run
  const Collector* slice_guide = nullptr;  ///< copied from PassConfig by InstrumentedModel::run
  at::Tensor slice_rows;                   ///< copied from PassConfig by InstrumentedModel::run
  int64_t slice_rows_of = 0;               ///< copied from PassConfig by InstrumentedModel::run
  /// Sequence probes: keep a copy of every module output (the reference pass).
  bool capture = false;
  /// While true the gradient hooks record nothing: a second backward through
  /// the same graph (which parameters only the outputs the loss does not
  /// read reach, Session::run_pass) must not add to this pass's gradient
  /// statistics.
  std::atomic<bool> grad_paused{false};
  /// Sequence probes: compare every module output with this pass's captured
  /// ones. Sizes that differ (a longer or shorter time axis) are narrowed to
  /// the smaller; the reference must outlive the pass.
  const Collector* reference = nullptr;
  /// [B, T] bool at the compared length: true at real (not padded) positions.
  /// Applied to outputs with B on axis 0 and an axis of size T; undefined: all positions.
  at::Tensor real_positions;
  /// Sequence probes on a left-padded batch (the padding extended before the
  /// first position): sizes that differ are narrowed to their last
  /// positions, so the reference's positions meet the same tokens.
  bool align_end = false;
  /// The compared pass cut the time axis (the sequence-length probe): an
  /// output with no axis that changed length (a last-token readout, a pooled
  /// [B, C]) is a function of the whole sequence, so a causal model changes
  /// it by design; it is not compared.
  bool time_cut = false;
  /// Optional: called by on_forward with every tapped tensor (not detached)
  /// before its statistics are taken, outside the collector's lock. A hook
  /// may modify the tensor in place (the precision probe rounds module
  /// outputs to fp16/bf16 this way); the statistics then see the new values.
  std::function<void(const TapSite&, const at::Tensor&)> hook;
  /// Optional: called by the tap operator after the statistics are taken;
  /// a defined tensor it returns replaces the tapped one for every use
  /// after the tap (the forward_backward probe replaces one module's
  /// output with noise to see whether any model output depends on it). An
  /// undefined return leaves the tensor as it was. Passes with an edit are
  /// never shared (Session::pass_key).
  std::function<at::Tensor(const TapSite&, const at::Tensor&)> edit;
  bool batch_norm_stats = true;  ///< copied from PassConfig by InstrumentedModel::run
  /// Defer CPU tensors' statistics too (the device path; tests use it on a CPU build).
  bool defer_cpu = false;

  /// Reads back the statistics kept on a device and merges them into the
  /// records; drops the tensors kept to recognize a repeated tap. Idempotent.
  void finish() const;

  /// Called by normdoctor::mask_tap: entries masked out of the next firing
  /// of softmax tap `id` (true = masked), broadcast to the scores' shape.
  void set_mask(int64_t id, const at::Tensor& masked);
  /// Called by normdoctor::attn_tap (scaled_dot_product_attention, whose
  /// masks are its arguments): one call with a mask, causal or not
  /// (TapRecord::causal_calls, mask_calls).
  void note_mask_call(int64_t id, bool causal);
  /// Called by normdoctor::norm_tap.
  void set_ints(int64_t id, std::vector<int64_t> v);

  // Called by the tap operator and the gradient hooks.
  void on_forward(const TapSite& site, const at::Tensor& x);
  void on_grad(int64_t id, const at::Tensor& g);

 private:
  // Statistics of one tensor, either computed (CPU) or pending on its device.
  struct Measured {
    TensorStats stats;
    at::Tensor packed;  ///< stats_on_device values, when deferred
  };
  // The last tensor measured: nested modules return the same tensor (a
  // block's output is also its container's), so a chain of taps reads it once.
  struct LastSeen {
    at::Tensor x;
    int64_t version = -1;
    bool sliced = false;
    Measured m;
  };
  Measured measure(const at::Tensor& x, const at::Tensor& key, bool sliced, LastSeen& last);
  /// Counts one firing of tap `id` (mu_ held): sets `seq` to its sequence
  /// number and, on the first firing (r.first_fire == seq), records the
  /// tensor's shape.
  TapRecord& fire(int64_t id, const at::Tensor& x, int64_t& seq);
  void add(int64_t id, bool grad, int64_t seq, bool module_output, const Measured& m, int64_t numel);

  mutable std::mutex mu_;
  mutable std::vector<TapRecord> records_;
  struct Pending {
    int64_t id, seq, numel;
    bool grad, module_output;
    at::Tensor packed;
  };
  mutable std::vector<Pending> pending_;
  mutable LastSeen last_fwd_, last_grad_;
  int64_t fire_seq_ = 0, grad_seq_ = 0;
  mutable int64_t first_nonfinite_fwd_ = -1, first_nonfinite_grad_ = -1;
  mutable int64_t first_nonfinite_fwd_seq_ = INT64_MAX, first_nonfinite_grad_seq_ = INT64_MAX;
  int64_t last_bn_tap_ = -1;
  int64_t last_tap_ = -1;
  std::map<int64_t, at::Tensor> masks_;  // softmax tap id -> masked entries (mu_)

 public:
  /// Precision emulation: the first rounded op (execution order) whose
  /// output holds Inf (the producer) and the first whose output holds NaN
  /// (a propagator when it comes after the producer); RoundSite ids, -1: none.
  int64_t round_first_inf = -1, round_first_nan = -1;
  int64_t round_first_inf_count = 0, round_first_nan_count = 0;
  /// Every rounded op whose output holds Inf or NaN, in execution order (the
  /// first 64): the precision probe skips deliberate masks (a masked_fill
  /// or an additive mask of -inf, in fp32 too) when it names the producer.
  struct RoundEvent {
    int64_t site = -1;
    int64_t inf = 0, nan = 0;
    bool negative_inf_only = false;  ///< every Inf is -inf
  };
  std::vector<RoundEvent> round_events;
};

/// Whether `module` returned in a pass that stopped early: none of its
/// module-output taps is unmeasured in `recs` while measured in `reference`
/// (every tap counts when `reference` is null). A module with one output
/// measured and another not had not returned: the measured value is one it
/// computes early and also hands out (a trace's embeddings return the cast
/// input beside their result; DINOv3, eval42), so the op that raised is
/// inside it.
bool module_returned(const std::vector<TapSite>& taps, const std::vector<TapRecord>& recs, const std::string& module,
                     const std::vector<TapRecord>* reference = nullptr);

/// Options for building the instrumented graph.
struct InstrumentOptions {
  bool op_taps = true;               ///< taps on sigmoid/tanh/softmax inputs
  std::string inspect_inputs_of;     ///< also tap the inputs of this module (targeted NaN pass)
  std::vector<std::string> inputs_of;  ///< also tap the inputs of each of these modules (kModuleInput, e.g. norm layers)
  /// Ranks of forward's tensor arguments (self excluded; -1 or missing:
  /// unknown), for the layout roles of scripted graphs (traced graphs carry them).
  std::vector<int64_t> input_ranks;
  /// Precision emulation (DESIGN.md, "Instrumentation"): kHalf or kBFloat16
  /// rounds the output of EVERY op producing a float tensor to that format
  /// (x.to(fmt).to(float)), intermediates inside modules included. Fused
  /// kernels that compute in fp32 internally (layer_norm, softmax,
  /// group_norm, batch_norm, rms_norm) stay one op: only their output is
  /// rounded. Views are not rounded (their base is). Undefined: off.
  at::ScalarType round_ops = at::ScalarType::Undefined;
  /// With round_ops: round only what torch.autocast would compute in the
  /// format (CUDA's op lists, torch/csrc/autograd autocast_mode.cpp): the
  /// outputs of matrix products and convolutions, and of ops whose inputs
  /// are all in the format; ops on autocast's fp32 list (exp, log, pow,
  /// softmax, log_softmax, sum, cumsum, norms, layer_norm, group_norm, the
  /// losses) and everything computed from an fp32 value up to the next
  /// product stay fp32, unrounded.
  bool round_autocast = false;
};

/// An op whose output the precision emulation rounds (InstrumentOptions::round_ops).
struct RoundSite {
  std::string op;      ///< "aten::pow"
  std::string module;  ///< innermost module running it ("" = root)
  /// The op is a square root (sqrt, rsqrt, pow(., 0.5), pow(., -0.5)) of a
  /// one-pass variance: E[x^2] - E[x]^2, optionally plus eps. In a low
  /// precision the two terms cancel and the difference can go negative.
  bool one_pass_variance_root = false;
  /// The op divides by, or inverts, a statistic plus a constant eps
  /// (x / sqrt(v + eps), rsqrt(v + eps), x / (std + eps)): that eps, read
  /// from the graph; 0 when the op is no such division. A weight
  /// standardization or a hand-written norm has this form without being an
  /// aten norm op.
  double divisor_eps = 0.0;
  /// The op is a logarithm of a value plus a constant eps (log(mag ** 2 +
  /// 1e-8), a log-spectrogram): that eps; 0 otherwise.
  double log_eps = 0.0;
  /// The op computes part of the statistic a normalization divides by (the
  /// square, its sum or cumulative sum, the mean, the eps addition under the
  /// root): an Inf here is the norm's statistic overflowing in the format.
  bool norm_statistic = false;
};

/// The instrumented forward of one model. Build once, run many passes.
class InstrumentedModel {
 public:
  /// Builds the instrumented graph. Throws nd::Error (internal) if the graph
  /// cannot be rewritten.
  InstrumentedModel(const LoadedModel& model, const InstrumentOptions& opt = {});

  /// Runs forward with `args` (forward's arguments, self excluded), filling
  /// `collector`. The module's own train()/eval() state is the caller's job
  /// (scripted graphs read it); traced constants follow `cfg.training`.
  c10::IValue run(const std::vector<c10::IValue>& args, const PassConfig& cfg, Collector& collector);

  const std::vector<TapSite>& taps() const { return taps_; }
  /// The forward graph holds a floating constant at float32's limits
  /// (|v| >= half of torch.finfo(torch.float32).max, finite): a trace
  /// recorded torch.finfo(dtype).min where the code asks the run dtype's
  /// (HF Longformer's mask fill), a value no fp16 tensor can take.
  bool float32_limit_constants() const { return float32_limit_constants_; }
  const std::vector<NormOpSite>& norm_ops() const { return norm_ops_; }
  /// Residual additions in execution order, and the final-norm check after the last one.
  const std::vector<ResidualSite>& residuals() const { return residuals_; }
  const FinalNormSite& final_norm() const { return final_norm_; }
  /// The contraction computing the output outside any module (see OutputProductSite).
  const OutputProductSite& output_product() const { return output_product_; }
  /// structure::output_class_axis of the forward graph: -1 when a Linear
  /// writes the output (classes last), 1 when a convolution does, nullopt
  /// when the graph does not say.
  std::optional<int64_t> output_class_axis() const { return output_class_axis_; }
  /// batch_norm / dropout nodes whose training flag was a graph constant
  /// (tracing baked the mode in); the value the constant held.
  int64_t baked_batch_norm() const { return baked_bn_; }
  int64_t baked_dropout() const { return baked_dropout_; }
  /// Of baked_batch_norm(), those whose baked flag is training=False (the
  /// trace ran in eval: the file never takes batch statistics there).
  int64_t baked_batch_norm_false() const {
    int64_t n = 0;
    for (const auto& mo : mode_ops_) n += (mo.op == "batch_norm" && mo.baked && !mo.baked_value) ? 1 : 0;
    return n;
  }
  std::vector<bool> baked_values() const { return baked_values_; }
  /// All batch_norm / dropout nodes (baked or not).
  int64_t batch_norm_nodes() const { return bn_nodes_; }
  int64_t dropout_nodes() const { return dropout_nodes_; }
  /// Every batch_norm / dropout op, in graph order.
  const std::vector<ModeOpSite>& mode_ops() const { return mode_ops_; }
  /// Random ops that no mode switches off, (module path, what), in graph
  /// order: aten::scaled_dot_product_attention given a dropout_p above 0
  /// that is a constant or a module attribute (dropout_p=self.attn_drop,
  /// where `self.attn_drop if self.training else 0.0` was meant).
  const std::vector<std::pair<std::string, std::string>>& unswitched_random_ops() const { return unswitched_random_; }
  /// Of unswitched_random_ops(), the random ops a traced or exported graph
  /// recorded (aten::rand, bernoulli, ...), and the Gaussian draws a scripted
  /// forward makes under no `if self.training:`: the file runs them in every
  /// mode.
  int64_t traced_random_ops() const { return traced_random_ops_; }
  /// Of those, the Gaussian draws (aten::randn, randn_like, normal): samples
  /// such as a VAE's reparameterization, not drop masks.
  int64_t gaussian_random_ops() const { return gaussian_random_ops_; }
  /// A tensor factory of a traced graph whose size arguments are all
  /// constants (aten::arange, ones, zeros, full, empty, eye, linspace,
  /// tril_indices, triu_indices): where a trace may have baked a length the
  /// tracer did not see as a tensor size (Python arithmetic on x.size(1),
  /// HF Funnel's relative positions: arange(16, -16, -1) at length 16).
  struct ConstantFactory {
    std::string module;           ///< innermost module path ("" root or unknown)
    std::string op;               ///< "aten::arange", ...
    std::vector<int64_t> ints;    ///< every constant int argument, lists flattened
    std::string text;             ///< "aten::arange(16, -16, -1)"
    /// An arange only scaled by scalars into exp or the exponent of pow: the
    /// frequency index of a sinusoidal embedding (half its width), not a
    /// range of positions.
    bool frequency_index = false;
    /// aten::split / split_with_sizes: the sizes cut a tensor computed from
    /// the forward's inputs (not only parameters, buffers and constants)
    /// along an axis other than its last: tokens gathered for a
    /// mixture-of-experts dispatch (HF JetMoe, eval46), not a rotary table's
    /// feature split ([8, 4, 4] of a 16-wide head: SkyReels-V2's rope, eval48).
    bool splits_activations = false;
  };
  /// Constant-sized tensor factories of a traced graph, in graph order
  /// (empty for scripted and exported models).
  const std::vector<ConstantFactory>& constant_factories() const { return constant_factories_; }
  /// Scalar constants beyond the fp16 range that masked_fill, where, full or
  /// mask arithmetic (mul/add/sub) in the graph write (-1e30, -1e9,
  /// torch.finfo(float32).min): the values masked positions hold.
  const std::vector<double>& mask_constants() const { return mask_constants_; }
  /// Modules that own at least one tap, by path.
  const std::map<std::string, std::vector<int64_t>>& taps_by_module() const { return by_module_; }
  /// Graph size (nodes, after inlining) for the report.
  int64_t graph_nodes() const { return graph_nodes_; }
  /// Ops rounded by the precision emulation (InstrumentOptions::round_ops), by id.
  const std::vector<RoundSite>& round_sites() const { return round_sites_; }
  /// Reductions and convolutions of the graph (for the padding probe).
  const std::vector<OpFact>& op_facts() const { return op_facts_; }
  /// The model this graph was built from.
  const LoadedModel& model() const { return model_; }
  /// Reductions of the forward graph with their axes (see ReductionSite).
  const std::vector<ReductionSite>& reductions() const { return reductions_; }
  /// Per forward argument (self excluded): the ops that read it directly,
  /// through views, casts and taps ("aten::conv1d", "aten::linear", ...),
  /// for the sequence probe's layout (a conv1d input is [batch, channel, time]).
  const std::vector<std::set<std::string>>& input_consumers() const { return input_consumers_; }
  /// Per forward argument (after self): whether it reaches a 1-D convolution
  /// through reshapes only (unsqueeze, view, reshape, casts): a [B, T]
  /// waveform unsqueezed into Conv1d(1, C, ...) (Conv-TasNet's encoder).
  const std::vector<bool>& input_reaches_conv1d() const { return input_reaches_conv1d_; }
  /// Per forward argument: a 1-D convolution reads it as it is, through
  /// casts and paddings only ([B, C, T] stays [B, C, T]: EnCodec pads the
  /// waveform before its first conv1d).
  const std::vector<bool>& input_conv1d_layout() const { return input_conv1d_layout_; }
  /// Per forward argument (self excluded): whether it reaches, through
  /// views, slices and casts, the indices of a table lookup
  /// (aten::embedding, embedding_bag, index_select, one_hot): token ids do,
  /// a padding mask does not.
  const std::vector<bool>& input_indexes_table() const { return input_indexes_table_; }
  /// Per forward argument (self excluded): whether its axis 1 holds fields
  /// (categorical columns), not positions: columns selected one by one
  /// with constant indexes, or offsets from the model's own buffers added to
  /// it (a recommender's per-field id offsets).
  const std::vector<bool>& input_fields() const { return input_fields_; }
  /// padding_idx >= 0 of each aten::embedding in forward's graph, by the
  /// module running it (traced Embeddings keep it only in the graph).
  const std::map<std::string, int64_t>& embedding_padding_idx() const { return embedding_padding_idx_; }
  /// Integer constants (or int attributes) that forward compares an integer
  /// argument with, by eq/ne (fairseq's src_tokens.eq(self.padding_idx), a
  /// TextCNN's `x != self.pad`): candidate padding ids of models that find
  /// padding themselves, with the argument's index (self excluded).
  const std::vector<std::pair<size_t, int64_t>>& compared_ids() const { return compared_ids_; }
  /// Per forward argument (self excluded): true when it is read only by a
  /// periodic encoding, reaching aten::sin/cos through elementwise
  /// arithmetic, views, casts and concatenation before any op with weights
  /// (diffusers' get_timestep_embedding of raw timesteps 0..1000; Vaswani
  /// et al. 2017's sinusoidal positions). On the graph with configuration
  /// branches folded.
  const std::vector<bool>& periodic_inputs() const { return periodic_inputs_; }
  /// Per forward argument (self excluded): the model rescales it itself
  /// before anything else reads it, by stored values (buffers, constants):
  /// (x - self.mean) / self.std, x / 255 * self.scale + self.shift, the
  /// in-model image normalization of torchvision's detection transform; or
  /// by a statistic of the data (a reduction: the mean scaler of Hugging
  /// Face's time-series transformers divides the targets by their mean
  /// absolute value, (x - x.mean()) / x.std()).
  const std::vector<bool>& rescaled_inputs() const { return rescaled_inputs_; }
  /// Per forward argument (self excluded): some layer reads a value
  /// computed from it (an op with weights, or with a parameter or buffer as
  /// another operand). False for a target read only by a loss computed
  /// inside forward.
  const std::vector<bool>& layer_read_inputs() const { return layer_read_inputs_; }
  /// Norm ops over parameters only (weight standardization: timm's
  /// ScaledStdConv2d), left out of norm_ops(), mode_ops() and the taps.
  int64_t weight_standardizations() const { return weight_standardizations_; }

 private:
  const LoadedModel& model_;
  std::shared_ptr<torch::jit::Graph> graph_;
  std::unique_ptr<torch::jit::GraphFunction> fn_;
  std::vector<TapSite> taps_;
  std::vector<std::set<std::string>> input_consumers_;
  std::vector<bool> input_reaches_conv1d_;
  std::vector<bool> input_conv1d_layout_;
  std::vector<bool> input_indexes_table_;
  std::vector<bool> input_fields_;
  std::vector<bool> periodic_inputs_;
  std::vector<bool> rescaled_inputs_;
  std::vector<bool> layer_read_inputs_;
  int64_t weight_standardizations_ = 0;
  std::vector<NormOpSite> norm_ops_;
  std::vector<ResidualSite> residuals_;
  std::vector<RoundSite> round_sites_;
  std::vector<OpFact> op_facts_;
  std::vector<ReductionSite> reductions_;
  FinalNormSite final_norm_;
  OutputProductSite output_product_;
  std::optional<int64_t> output_class_axis_;
  std::map<std::string, int64_t> embedding_padding_idx_;
  std::vector<std::pair<size_t, int64_t>> compared_ids_;
  std::map<std::string, std::vector<int64_t>> by_module_;
  int64_t baked_bn_ = 0, baked_dropout_ = 0, graph_nodes_ = 0, bn_nodes_ = 0, dropout_nodes_ = 0;
  int64_t traced_random_ops_ = 0, gaussian_random_ops_ = 0;
  bool float32_limit_constants_ = false;
  std::vector<bool> baked_values_;
  std::vector<ModeOpSite> mode_ops_;
  std::vector<double> mask_constants_;
  std::vector<std::pair<std::string, std::string>> unswitched_random_;
  std::vector<ConstantFactory> constant_factories_;
};

/// Maps a node's inlined call stack to the chain of named_modules() paths,
/// outermost first. Exposed for tests.
class ScopeResolver {
 public:
  explicit ScopeResolver(const LoadedModel& model);
  const std::vector<std::string>& chain(const torch::jit::Node* node);
  /// Whether chain(node) is known. Every node resolves at present: nodes
  /// without a call stack (LibTorch gives none to prim::If/prim::Loop and
  /// their blocks' nodes when inlining functions, nor to the root's own
  /// nodes) take the scope chain() infers for them.
  bool known(const torch::jit::Node* node) const;
  /// The named_modules() path of a module-typed value reached from self by
  /// prim::GetAttr; nullopt when it is not one.
  std::optional<std::string> module_path_of(const torch::jit::Value* v) const;
  /// The value of the module attribute a prim::GetAttr output `v` reads
  /// (`self.eps`, `self.normalize_before`, `self.batch_first`); nullopt when
  /// `v` is no such read or its module is not one of named_modules().
  std::optional<c10::IValue> attribute(const torch::jit::Value* v) const;
  /// named_modules() paths of the model (for tests).
  const std::map<std::string, size_t>& paths() const { return index_; }
  /// Whether the numbered entries of container `path` ("encoder.block.2.layer":
  /// entries .0, .1, ...) are all of one module class: a stack of repeated
  /// units. False for Hugging Face T5's per-block `layer` list (T5LayerSelfAttention,
  /// then T5LayerFF), and when `path` has fewer than two numbered entries.
  bool repeated_entries(const std::string& path) const;
  /// Whether `path` holds two or more numbered entries of different
  /// classes (Hugging Face T5's block.N.layer: T5LayerSelfAttention, then
  /// T5LayerFF): a list of different sublayers, not a stack of one unit.
  bool mixed_entries(const std::string& path) const;
  /// How many numbered entries (.0, .1, ...) container `path` holds.
  int64_t entry_count(const std::string& path) const { return numbered_entries(path).first; }

 private:
  /// Nodes of `graph` (all blocks) with a call stack whose chain holds
  /// `scope`; counted once per graph.
  int64_t nodes_in_scope(const torch::jit::Graph* graph, const std::string& scope);

  const LoadedModel& model_;
  std::map<const void*, std::vector<std::string>> cache_;
  std::map<const torch::jit::Graph*, std::map<std::string, int64_t>> scope_nodes_;
  std::map<std::string, size_t> index_;  // path -> modules_ index
  /// The numbered entries of container `path` (.0, .1, ...) and how many
  /// module classes they have.
  std::pair<int64_t, size_t> numbered_entries(const std::string& path) const;
};

/// Folds the ifs whose condition a module attribute fixes for the whole
/// check (`if self.surrogate:`, `if self.normalize_before:`, `self.a and
/// self.b`): the branch that runs replaces the if, in place. The training
/// flag and attributes the graph assigns (prim::SetAttr) stay dynamic.
/// Returns the number of ifs folded.
int64_t fold_static_branches(torch::jit::Graph& graph, const ScopeResolver& scopes);

/// The batch_norm input tap whose layer raised PyTorch's "Expected more than
/// 1 value per channel" in a failed pass: the last tap that fired when it is
/// a batch_norm input (aten::batch_norm raised on it); else, for a scripted
/// nn.BatchNorm that raises in its own batch-size check before
/// aten::batch_norm runs, the first tap in `reference`'s firing order (the
/// same batch run to the end in another pass) that the failed pass never
/// reached, when it is a batch_norm input. -1 when neither names one.
int64_t raised_batch_norm_tap(const std::vector<TapSite>& taps, const Collector& failed, const Collector* reference);

}  // namespace nd
