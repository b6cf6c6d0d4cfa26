// Internal to src/probes: the state shared by the probes of one check run.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <torch/script.h>

#include "core/error.h"
#include "instrument/instrument.h"
#include "metrics/metrics.h"
#include "model/model.h"
#include "probes/engine.h"

namespace nd {

struct FeatureStats;  // src/probes/features.cpp
/// One trainable parameter's saved optimizer state (--optimizer-state),
/// with its param_groups hyperparameters.
struct SavedParamState {
  std::string path;         ///< "h.0.attn.q.weight"
  int64_t index = 0;        ///< position in model.parameters() order (the optimizer's index)
  at::Tensor exp_avg, exp_avg_sq, momentum_buffer;  ///< undefined when absent
  double step = 0;          ///< steps taken (Adam)
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0, momentum = 0, dampening = 0;
  bool nesterov = false;
};

/// --optimizer-state mapped onto the module (src/probes/optimizer_state.cpp).
struct SavedOptimizer {
  std::string path;
  std::string kind;         ///< "adam" | "sgd_momentum" | "stateless" (formats::OptimizerStateDict::kind)
  bool decoupled = false;   ///< AdamW (param_groups' decoupled_weight_decay, or --optimizer adamw)
  std::map<const void*, SavedParamState> by_param;  ///< TensorImpl of the parameter -> state
  /// The state of parameter `p`, or nullptr (a parameter the optimizer has no state for).
  const SavedParamState* find(const at::Tensor& p) const {
    auto it = by_param.find(p.unsafeGetTensorImpl());
    return it == by_param.end() ? nullptr : &it->second;
  }
};

/// One forward argument, after loading or synthesis.
struct ArgValue {
  std::string name;
  c10::IValue value;  ///< usually a tensor
  std::string source; ///< "file:PATH", "synthetic:SPEC"
};

/// What one pass produced. Passes served by Session::pass are shared
/// read-only (std::shared_ptr<const PassResult>) between the probes that ask.
struct PassResult {
  std::string name;
  std::string key;   ///< Session::pass_key of its spec when the cache ran it ("" otherwise)
  std::unique_ptr<Collector> collector;
  /// Per-unit statistics (PassSpec::features; src/probes/features.cpp).
  std::shared_ptr<const FeatureStats> features;
  bool batch_norm_stats = false;  ///< ran with PassSpec::batch_norm_stats
  bool backward = false;          ///< ran with PassSpec::backward
  c10::IValue output;
  std::optional<at::Tensor> loss;   ///< train passes with backward
  std::string loss_description;
  /// Backward asked for but not run: why (forward returned only integer or
  /// bool tensors, so no gradient can flow). "" when it ran or was not asked.
  std::string backward_skipped;
  double seconds = 0;
};

/// A pass that raised (Session::run_pass): the nd::Error with the pass's name.
class PassError : public Error {
 public:
  PassError(std::string kind, ExitCode code, const std::string& message, std::string pass)
      : Error(std::move(kind), code, message), pass_(std::move(pass)) {}
  const std::string& pass() const noexcept { return pass_; }

 private:
  std::string pass_;
};

/// An error no probe isolation absorbs: the check cannot go on (forward
/// returned no tensor at all, so nothing it computes can be compared).
class FatalRunError : public Error {
 public:
  using Error::Error;
};

/// One pass: what it runs (mode, dropout, traced flags, backward, which
/// examples, an edit of the batch) and what it captures. Session::pass runs
/// each distinct pass once (Session::pass_key says which specs are the same
/// pass) and shares its PassResult; Session::run_pass always runs.
struct PassSpec {
  std::string name;            ///< "train", "eval", ... (listed in the report)
  std::string probe;           ///< the probe that asked for it
  bool train_mode = false;     ///< module.train(true) and baked flags -> true
  bool dropout = true;         ///< false: dropout ops become identity
  bool backward = false;       ///< compute the loss and run backward (needs train_mode or grad)
  int64_t slice0 = 0;          ///< > 0: module outputs measured on example 0 only (PassConfig::slice0_batch)
  bool keep_baked = false;     ///< PassConfig::keep_baked: run traced flags as saved
  bool capture = false;        ///< Collector::capture: keep every module output (reference pass)
  const Collector* reference = nullptr;  ///< Collector::reference: compare module outputs with it
  at::Tensor real_positions;   ///< Collector::real_positions: [B, T] bool, real (not padded) positions
  bool batch_norm_stats = false;  ///< PassConfig::batch_norm_stats (only the normalization probe's eval pass reads them)
  const InstrumentedModel* instrumented = nullptr;  ///< default: the session's
  std::vector<c10::IValue> args;  ///< default (empty): the session's arguments
  /// With `args`: what they are in words, the same for the same edit of the
  /// session's batch ("example 0", "time 12 (cut)"). A pass with args and no
  /// edit is never shared.
  std::string edit;
  /// Per-unit statistics for probe_features (PassResult::features).
  bool features = false;
  /// Optional Collector::hook for this pass (sees every tapped tensor first).
  /// A pass with a hook is never shared.
  std::function<void(const TapSite&, const at::Tensor&)> tap_hook;
};

/// The train pass of the forward_backward probe (train mode, dropout on,
/// traced flags following the mode, backward, per-unit features): the pass
/// the layer table, the gradient probes, architecture and features read.
PassSpec train_pass_spec();

class Session {
 public:
  Session(const CheckOptions& opt, const ProgressFn& progress);

  const CheckOptions& opt;
  ProgressFn progress;
  LoadedModel model;
  std::vector<ArgValue> args;
  std::unique_ptr<InstrumentedModel> inst;
  MetricsDoc doc;
  std::chrono::steady_clock::time_point started;
  std::unique_ptr<Collector> failed_collector;  ///< the collector of the last pass that raised
  /// The train pass (train_pass_spec()) from the cache, or nullptr when it
  /// did not run or raised.
  std::shared_ptr<const PassResult> train() const { return peek(train_pass_spec()); }
  /// Why the train pass could not run ("train-mode forward raised: ...", or
  /// "the train pass did not run"), "" when it ran.
  std::string train_pass_error() const;
  c10::optional<at::Tensor> target;   ///< --target, loaded on the first backward pass
  bool target_loaded = false;
  /// Passes that completed (any probe). None after every probe ran: the
  /// model cannot run at all, and run_check rethrows the first error.
  int64_t passes_ok = 0;
  std::string last_pass_started;  ///< the pass an error outside run_pass happened after ("" none)
  /// The first isolated failure (probe, pass, error), rethrown as the run's
  /// error when no pass completed.
  std::optional<Error> first_error;
  /// Why the backward half of the train pass did not run ("" when it ran or
  /// the train pass did not run): forward returned no floating-point tensor.
  /// Gradient probes are skipped.
  std::string backward_skipped() const {
    const auto t = train();
    return t ? t->backward_skipped : std::string();
  }

  /// Runs one probe isolated (issue 14, "Isolation"): an nd::Error of exit
  /// code 3 (model_run, input_mismatch, out_of_memory, missing_operator) or
  /// any other exception from LibTorch is recorded as
  /// probes.<name> = {status: "error", pass, error: {kind, message}} and the
  /// check goes on; on success probes.<name>.status is "ok" (or stays
  /// "skipped" when the probe skipped itself). Usage errors (exit 2), the
  /// --timeout deadline and FatalRunError propagate. Returns true when the
  /// probe ran to its end.
  bool run_probe(const std::string& name, const std::function<void()>& body);
  /// Metrics a probe wrote outside its declaration ("PROBE wrote METRIC"),
  /// in the order found (probe_declares; reported as an internal error).
  std::vector<std::string> undeclared_writes;
  /// Marks probes.<name> skipped (status "skipped", reason in words).
  void skip_probe(const std::string& name, const std::string& reason);
  std::vector<std::string> checkpoints;  ///< --weights expanded, in step order (the last one is measured)
  std::optional<SavedOptimizer> optimizer;  ///< --optimizer-state, after load_optimizer_state

  /// The pass `spec` describes, run once per check (issue 14, "Pass cache"):
  /// the first request runs it (with what every declared request of the same
  /// key captures), later requests with the same pass_key get the same
  /// result, read-only; a request for more than the kept result captured
  /// (captured outputs, BatchNorm input statistics, features, backward) runs
  /// it again. A pass with captured module outputs is dropped from the cache
  /// once its declared requests were served (its memory goes with the last
  /// holder). A pass that raised raises again, with the same PassError,
  /// without running (failed_collector is that of the last pass that ran).
  /// Uncacheable specs (pass_key "") just run. Throws as run_pass.
  std::shared_ptr<const PassResult> pass(const PassSpec& spec);
  /// The cached result of `spec`, or nullptr when it did not run or raised;
  /// never runs anything.
  std::shared_ptr<const PassResult> peek(const PassSpec& spec) const;
  /// Why the cached pass `spec` raised (PassError's message), "" when it did
  /// not run or did not raise.
  std::string pass_error(const PassSpec& spec) const;
  /// Announces a request pass() will make, before any pass runs, so that the
  /// first run captures what every requester needs.
  void declare(const PassSpec& spec);
  /// What makes two specs the same pass: mode, the effective value of every
  /// batch_norm/dropout flag in the graph under the spec's dropout and
  /// keep_baked settings, the batch (or its edit), slice0, the seed, and for
  /// eval passes whether grad is on. "" when the spec cannot be shared (a tap
  /// hook, a reference collector, real positions, another instrumented
  /// graph, args without an edit).
  std::string pass_key(const PassSpec& spec) const;
  /// The weights or buffers changed (a checkpoint loaded): every cached pass
  /// is dropped.
  void invalidate_passes();

  /// Runs one pass. Buffers (BatchNorm running statistics) are restored after
  /// train-mode passes and the module's saved mode is restored. Throws
  /// PassError (model_run / input_mismatch / out_of_memory) with a trimmed
  /// message when forward or backward raises; FatalRunError (model_run) when
  /// forward returns no tensor at all. A backward pass whose forward returns
  /// only integer or bool tensors runs forward only (PassResult::backward_skipped).
  PassResult run_pass(PassSpec spec);

  /// Reads --target (one tensor). Throws nd::Error (input_load).
  c10::optional<at::Tensor> load_target();
  /// The forward arguments as IValues.
  std::vector<c10::IValue> arg_values() const;
  /// The tensors forward returned, flattened (tuple/list/dict values in order).
  static std::vector<at::Tensor> output_tensors(const c10::IValue& out);
  /// ||a - b|| / ||b|| over the floating tensors of two outputs of the same
  /// structure (non-finite elements ignored); NaN when they do not match.
  static double relative_difference(const c10::IValue& a, const c10::IValue& b);
  /// Throws nd::Error(timeout) when --timeout has passed; `where` names the probe.
  void check_timeout(const std::string& where) const;

 private:
  struct CachedPass {
    std::shared_ptr<const PassResult> result;  ///< null when it raised
    std::optional<PassError> error;
    size_t report_index = 0;                   ///< its entry in doc.passes
  };
  /// What the declared requests of one key need, and how many are pending.
  struct Planned {
    bool capture = false, batch_norm_stats = false, features = false, backward = false;
    int64_t pending = 0;
  };
  std::map<std::string, CachedPass> cache_;
  std::map<std::string, Planned> planned_;
};

/// Which axis of each forward argument holds the examples (issue 15,
/// "slicing only what is batch-major").
struct BatchLayout {
  int64_t batch = 0;          ///< examples in the batch; 0: no tensor argument has one
  std::vector<int64_t> axis;  ///< per argument of s.args: its batch axis; -1 not batch-major (scalars, tables, None)
  std::string from;           ///< how the batch size was found, in words
};

/// The batch layout of s.args. The batch size comes from --batch-dim D
/// (axis D of the first tensor that has it), else from a lengths vector
/// (integer [B] named *len*), else from a padding mask ([B, T] bool or named
/// *mask*: nn.Transformer's key padding mask stays [B, T] when the inputs
/// are [T, B, F]), else from axis 0 of the first tensor. Each tensor's batch
/// axis is --batch-dim when its size there is B, else axis 0 when its size
/// is B, else its first axis of size B, else none.
BatchLayout batch_layout(const Session& s);

/// The examples `index` of every batch-major argument, along its own batch
/// axis; the other arguments unchanged.
std::vector<c10::IValue> select_examples(const Session& s, const BatchLayout& L, const at::Tensor& index);

/// The batch axis of an output tensor of the model: the main input's batch
/// axis when the output has B there, else axis 0, else its first axis of
/// size B; -1 when none has size B.
int64_t output_batch_axis(const BatchLayout& L, const at::Tensor& t);

/// Loads --input files / synthesizes --input-shape arguments into s.args and
/// fills s.doc.inputs (input metrics). Throws nd::Error.
void load_arguments(Session& s);

/// No --input and no --input-shape: makes forward's required arguments from
/// the model file (src/probes/infer_inputs.cpp, docs/inputs.md): the example
/// inputs torch.jit.trace stored (traced_inputs record), else what forward's
/// graph does with each argument, checked by running forward in eval mode.
/// Appends to s.args (source "inferred: <how>") and one sentence per input to
/// s.doc.assumptions. Throws nd::Error (input_inference, exit 2) naming the
/// argument that could not be inferred and the flags that give it.
void infer_arguments(Session& s);

/// The layer inventory: one LayerMetrics per named_modules() entry, with
/// module facts and the normalization ops found in the graph.
void build_inventory(Session& s);

/// Input layout, normalized axes and the sequence probes (src/probes/sequence.cpp,
/// docs/metrics.md "Sequences and axes"): infers each input's role (batch,
/// time, feature axes; padding mask or lengths), names the axes every
/// normalization reduces over by role, and for sequence inputs runs the
/// padding probe (real-position outputs with extra padding appended) and the
/// sequence-length probe (shared positions at two lengths). Never throws for
/// a model that cannot run at another length: that is recorded as evidence.
void probe_sequence(Session& s);

/// Checks --mask-input and --seq-dim against the loaded arguments before any
/// pass runs. Throws nd::Error (usage, exit 2) when they name no argument or axis.
void check_sequence_flags(const Session& s);

/// Architecture (src/probes/architecture.cpp): residual blocks, where the
/// norm sits in each (pre-norm / post-norm), depth, final norm, residual
/// stream RMS at each block boundary (from the train pass).
void probe_architecture(Session& s);

/// Normalization probes: train/eval drift, BatchNorm statistics against the
/// data, batch dependence in eval mode, small-batch noise, mode problems.
void probe_normalization(Session& s);
/// The normalization probe's eval pass (eval, traced flags as saved,
/// BatchNorm input statistics) and its dropout-free passes for the drift
/// (train or eval, flags following the mode).
PassSpec normalization_eval_spec();
PassSpec normalization_nodropout_spec(bool train);
/// Session::declare for the passes of probe_normalization and probe_sequence
/// on the session's batch (before any pass runs).
void declare_normalization_passes(Session& s);
void declare_sequence_passes(Session& s);

/// Eval fast paths (src/probes/fastpath.cpp, issue 15.6): when the graph
/// holds PyTorch's inference fast path (nn.TransformerEncoder's nested
/// tensors, the fused encoder layer or multi-head attention kernels), the
/// model is run as users run inference (eval, no grad: the fast path) and
/// with grad enabled (the slow path, what training computes), uninstrumented,
/// and the difference is recorded (fastpath.* model metrics). A fast path
/// that raises is recorded as evidence (fastpath.raises, the message), not
/// as the end of the check.
void probe_fast_path(Session& s);

/// Precision probe (src/probes/precision.cpp, docs/metrics.md "Precision"):
/// always the implied next-layer scale of norm gains (norm.next_*); with
/// --precision fp16|bf16 also the format's limits against every module
/// (headroom, norm internals, eps), a forward in that precision (native when
/// LibTorch has the kernels, else emulated by rounding) compared with fp32,
/// and (fp16) the loss-scale range of the train pass's gradients. Runs after
/// the other probes; needs the train pass's parameter gradients.
void probe_precision(Session& s);

/// Deliberately zero-initialized parameters (src/probes/conventions.cpp):
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
/// to tell which zero gradients they cause. Needs the train pass's gradients
/// on the parameters. Throws nd::Error only for timeout / out of memory.
ZeroInitFacts zero_init_conventions(Session& s);

/// The tap hook that fills `f` during a pass (PassSpec::features):
/// per-unit activity at ReLU-family inputs, per-channel absmax of residual
/// streams, and which leaf module wrote each output (src/probes/features.cpp).
std::function<void(const TapSite&, const at::Tensor&)> feature_hook(const Session& s, std::shared_ptr<FeatureStats> f);
/// An empty FeatureStats (the type is complete in src/probes/features.cpp only).
std::shared_ptr<FeatureStats> new_feature_stats();

/// New failure modes of issue 16 (src/probes/features.cpp, docs/metrics.md):
/// dead ReLU units (dead.*), outlier channels of residual streams
/// (outlier.*), the log-partition of the head's logits (logits.*) and
/// normalizations with one value per group (norm.values_per_group). Reads
/// the train pass (Session::train(): its collector, output and features).
void probe_features(Session& s);

/// Noise floors of the sequence comparisons (pad.*, seqlen.*): the floor
/// measured in this run (batchdep.noise_floor) and the difference over it.
/// Runs after probe_sequence.
void apply_noise_floors(Session& s);

/// The forward+backward measurement (activations, gradients, NaN origin,
/// layer inventory). Always runs first.
void probe_forward_backward(Session& s);

/// Update ratio (needs --lr): per parameter, the size of the first
/// optimizer step relative to the weight, from the train pass's gradients
/// (src/probes/training.cpp, docs/metrics.md `update.`). Run right after
/// probe_forward_backward, while the gradients are still on the parameters.
void probe_update_ratio(Session& s);

/// Replay (--steps N --lr X): N optimizer steps on the sample batch, with the
/// loss of the train pass, on a snapshot of the parameters and buffers that
/// is restored afterwards (the model file is never written). Per step: loss,
/// gradient norm, update ratio, activation scale per module, norm gains, and
/// the first step and module where a value became non-finite.
void probe_replay(Session& s);

/// --weights (src/probes/timeline.cpp): expands the globs, orders the
/// checkpoints by the step in their names, loads the last one into the module
/// (strict unless --weights-partial) and records what was loaded
/// (model.weights, probes.weights, assumptions). Run before the inventory.
/// Throws nd::Error (weights_load, exit 3).
void load_checkpoints(Session& s);

/// --optimizer-state (src/probes/optimizer_state.cpp): reads it, maps its
/// parameter indices onto the module's parameters in model.parameters()
/// order (named_modules order, direct parameters, a tied tensor once) and
/// checks every state tensor's shape. Throws nd::Error (weights_load, exit 3)
/// listing the mismatches. Run after load_checkpoints.
void load_optimizer_state(Session& s);

/// Adam's next step for one parameter from its saved state and gradient g
/// (PyTorch's torch.optim.Adam/AdamW, non-amsgrad): m = b1 m + (1-b1) g,
/// v = b2 v + (1-b2) g^2, t = step + 1, update = lr (m / (1-b1^t)) /
/// (sqrt(v / (1-b2^t)) + eps), plus lr wd w (AdamW) or with g += wd w (Adam).
/// rms_ratio = sqrt(mean(g^2 / v_hat)) with the updated v_hat: the quantity
/// StableAdamW clips the learning rate by (Wortsman et al. 2023);
/// eps_fraction = fraction of elements where eps > sqrt(v_hat).
struct AdamStep {
  at::Tensor update;  ///< the step to subtract from w
  at::Tensor m, v;    ///< the moments after the step
  double rms_ratio = 0;
  double eps_fraction = 0;
};
AdamStep adam_step(const SavedParamState& st, const at::Tensor& m, const at::Tensor& v, double step,
                   const at::Tensor& w, const at::Tensor& g, double lr, bool decoupled);

/// Norm-gain convention (src/probes/gain_convention.cpp; --weights only):
/// per LayerNorm/RMSNorm module, whether it multiplies by weight or by
/// 1 + weight (found by running it alone at weight 0 and 1), and the loaded
/// gains' mean, spread and sign mix (norm.gain_formula, norm.gain_loaded_*).
void probe_gain_convention(Session& s);

/// Timeline over 2+ checkpoints (src/probes/timeline.cpp, docs/metrics.md
/// "Timeline"): per checkpoint the forward_backward probe's train pass on the
/// same batch, per layer the series of probes.timeline, the first non-finite
/// checkpoint and module, and the first mover (the criterion is in the file
/// comment). Leaves the last checkpoint loaded. Run after build_inventory.
void probe_timeline(Session& s);

/// The metric-name prefixes each probe (Session::run_probe name) declares it
/// writes, model-scope and per layer (src/probes/probe_metrics.cpp); the
/// names are those of docs/metrics.md.
const std::map<std::string, std::vector<std::string>>& probe_declared_metrics();
/// Whether probe `probe` declares metric `metric` (a declared prefix ending
/// in '.' covers a family, any other entry one name).
bool probe_declares(const std::string& probe, const std::string& metric);

/// True for an allocation failure: std::bad_alloc, c10::OutOfMemoryError, or
/// LibTorch's "DefaultCPUAllocator: can't allocate memory" c10::Error.
bool is_out_of_memory(const std::exception& e);

/// The out_of_memory error (exit 3): names the stage ("the train pass of the
/// forward_backward probe"), LibTorch's detail (the bytes it tried to
/// allocate), the input shapes when known and what to do (a smaller batch or
/// --input-shape).
Error out_of_memory_error(const std::string& stage, const std::string& detail, const std::vector<ArgValue>& args);

/// Trims a LibTorch/TorchScript exception text to the lines a user needs
/// (the final error line, without C++ frames).
std::string trim_torch_error(const std::string& what);

}  // namespace nd
