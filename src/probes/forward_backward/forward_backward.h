// The forward_backward probe: the layer inventory, the train pass's
// activation and gradient statistics, the first non-finite module, and the
// deliberately zero-initialized parameters that explain zero gradients.
#pragma once

#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

/// The layer inventory: one LayerMetrics per named_modules() entry, with
/// module facts and the normalization ops found in the graph.
void build_inventory(Session& s);

/// The forward+backward measurement (activations, gradients, NaN origin,
/// layer inventory). Always runs first.
void probe_forward_backward(Session& s);

/// Deliberately zero-initialized parameters (src/probes/forward_backward/zero_init.cpp):
/// exactly zero, used as a factor whose product reaches a residual addition
/// or the output (zero-init residual gains, zero heads).
struct ZeroInitFacts {
  std::vector<std::string> params;               ///< parameter paths, in execution order of their modules
  std::map<std::string, std::string> role;       ///< path -> "residual branch" | "output"
  std::set<std::string> silenced;                ///< parameters with exactly zero gradient that the lift ends
  std::set<const void*> silenced_tensors;        ///< the same, by TensorImpl (tied parameters)
  bool lifted = false;                           ///< the pass with the zeros lifted ran
  std::string error;                             ///< why it did not ("" when it ran or was not needed)
};

/// Finds the deliberately zero-initialized parameters and, when some
/// parameter got exactly zero gradient in the train pass, runs the train pass
/// again with those zeros lifted (values and gradients restored afterwards)
/// to tell which zero gradients they cause. Reads the train pass's gradients
/// (Session::train(), PassResult::grads). Throws nd::Error only for timeout /
/// out of memory.
ZeroInitFacts zero_init_conventions(Session& s);

/// Writes a non-zero stand-in into the all-zero tensor `t` (in place, no
/// grad): ones for gains and scalars (fewer than 2 dims), N(0, 1/fan_in)
/// drawn from `gen` for matrices and kernels (fan_in = elements / size(0)).
/// What "the zeros lifted" means for zero_init_conventions and for the
/// forward_backward probe's output-replacement test.
void lift_zero(const at::Tensor& t, at::Generator& gen);

/// Bias parameters whose gradient a train-mode BatchNorm cancels: the bias
/// argument of a convolution or linear whose output is the input of an
/// aten::batch_norm that uses batch statistics in the train pass (its flag
/// is dynamic, true, or a trace's baked constant, which the train pass
/// sets). BatchNorm subtracts the per-channel batch mean, so a per-channel
/// constant added before it changes nothing and its gradient is zero by
/// construction (Ioffe & Szegedy 2015, section 3.2: "the bias b can be
/// ignored"). By TensorImpl. An empty set when the graph has none.
std::set<const void*> biases_cancelled_by_batch_norm(const Session& s);

/// Trainable parameters that forward's graph (inlined) never reads, by
/// TensorImpl: a trace records the one path its example took, so a
/// parameter used only on another path (Hugging Face wav2vec2's
/// masked_spec_embed, read by SpecAugment in training only) is not in the
/// file; a scripted model's parameter that no statement reads. Tied weights
/// count as read when any of their names is. Empty for exported (.pt2)
/// programs, whose graphs take parameters as inputs.
std::set<const void*> parameters_never_read(const Session& s);

/// Trainable parameters whose every route to forward's return (inlined graph)
/// passes through aten::detach, by TensorImpl: a vector quantizer's codebook
/// behind the straight-through estimator `z + (z_q - z).detach()` (VQ-VAE,
/// van den Oord et al. 2017; diffusers' VectorQuantizer) learns only from
/// the codebook and commitment losses on its own output, and gets no
/// gradient from a loss on the reconstruction alone. Empty for exported
/// (.pt2) programs.
/// `behind_index` (optional) receives those whose routes end, with none
/// through a detach, in ops that carry no gradient: the indices of a
/// selection (torch.topk, sort, max over a dim), argmax/argsort,
/// comparisons. A detector's query-selection scores ranked by torch.topk
/// (D-FINE's and RT-DETR's enc_score_head) learn only from the encoder's
/// auxiliary loss on their own output.
/// The ops of `kinds` that `module`'s own forward runs (not its children's),
/// in graph order, comma-separated, each once: read from the inlined forward
/// graph with configuration branches folded (all ops, fp32 regions
/// included). "" for exported programs or when none is found.
std::string ops_in_own_forward(const Session& s, const std::string& module, const std::set<std::string>& kinds);

/// Trainable parameters that the forward only writes into the positions a
/// mask selects: the value of `x[mask] = self.pad_token` (index_put_), of
/// masked_scatter or masked_fill, or a branch of torch.where, through casts,
/// broadcasts and reshapes only. A padding or mask token: its gradient is
/// the sum over the selected positions, exactly zero on a batch whose mask
/// selects none (diffusers' Z-Image x_pad_token, with image token counts
/// that are already a multiple of 32: eval49). Empty for exported programs.
std::set<const void*> parameters_written_by_mask(const Session& s);

/// `last_cut` (optional) receives, among the ops where the routes of the
/// parameters without a live route end, the last in graph order (nearest the
/// output): a spiking neuron's threshold `(mem > thr).float()` without a
/// surrogate gradient (snnTorch tutorial 6, eval48), an argmax, a detach.
struct GradientCut {
  std::string op;      ///< "aten::gt"
  std::string module;  ///< innermost module running it ("" root)
  std::string kind;    ///< "comparison" | "selection" | "detach" | "integer division"
  int64_t sites = 0;   ///< cut ops those routes reach in all
};
std::set<const void*> parameters_behind_detach(const Session& s, std::set<const void*>* behind_index = nullptr,
                                              GradientCut* last_cut = nullptr);

/// Parameters (named_parameters() paths) that the forward's graph writes in
/// place (an aten in-place op on the parameter itself: HF RWKV's
/// rescale_every halves its output weights with div_ on every call). Every
/// pass then starts from a copy (Session::run_pass), and an eval pass that
/// changed one counts as state the forward leaves behind (MODE007).
std::vector<std::string> parameters_written_in_forward(const Session& s);

/// Plain attributes (bool, int, float) that the forward assigns with
/// prim::SetAttr, as (module path, attribute name) in graph order: a
/// one-shot flag such as Glow's ActNorm `self.initialized = True` after its
/// data-dependent initialization (rosinality/glow-pytorch #6). Every pass
/// saves and restores them with the buffers (Session::run_pass), so each
/// pass starts from the state the file was saved in. Empty for exported
/// programs or when the graph cannot be read.
std::vector<std::pair<std::string, std::string>> attributes_set_in_forward(const Session& s);

/// Deliberately small gains on residual branches: trainable parameters whose
/// every element is at most 1e-3 in magnitude and not all zero, used as a
/// factor whose product reaches a residual addition (LayerScale's gamma, CaiT's
/// gamma_1/gamma_2 at 1e-5, ReZero-style scalars). Path and absmax, in graph
/// order. Every branch they scale passes its gradient on multiplied by them:
/// at initialization gradients toward the input shrink by about that factor
/// by design (Touvron et al. 2021, "Going deeper with Image Transformers").
std::vector<std::pair<std::string, double>> small_branch_gains(const Session& s);

/// The metric names and families (a prefix ending in '.') probe `forward_backward`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& forward_backward_writes();

}  // namespace nd
