// Internal to src/probes: the state shared by the probes of one check run.
#pragma once

#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <memory>
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

/// Module classes whose output is bounded by construction (a softmax's
/// probabilities, a sigmoid's or tanh's values): their RMS is set by the row
/// length or the bound, not by the scale of what feeds them, so neither the
/// activation-growth profile nor the timeline's first mover counts them.
inline bool bounded_output_kind(const std::string& kind) {
  static const std::set<std::string> kinds = {"Softmax", "Softmax2d", "Softmin",  "Sigmoid", "Tanh",
                                              "Hardsigmoid", "Hardtanh", "Softsign", "ReLU6"};
  return kinds.count(kind) > 0;
}

/// Values and groups a normalization op normalizes over, from the op and the
/// shape of its input ([N, C, ...]): instance_norm holds prod(spatial)
/// values per group and N * C groups, group_norm C/G * prod(spatial) and
/// N * G (num_groups from the op, else the layer's info), layer_norm
/// prod(normalized_shape) and numel / that (values known without the
/// shape). {-1, -1} when the op or its arguments do not say (a batch_norm,
/// a written-out norm, an instance or group norm without a 2-D input).
struct NormGroups {
  int64_t values_per_group = -1;
  int64_t groups = -1;
};
inline NormGroups norm_groups(const NormOpSite& n, const std::vector<int64_t>& shape, const nlohmann::json& info) {
  NormGroups out;
  int64_t spatial = 1;
  for (size_t d = 2; d < shape.size(); ++d) spatial *= shape[d];
  if (shape.size() < 2 && n.op != "layer_norm") return out;  // layer_norm's groups per value need no input shape
  if (n.op == "instance_norm") {
    out = {spatial, shape[0] * shape[1]};
  } else if (n.op == "group_norm") {
    nlohmann::json g = n.args.value("num_groups", nlohmann::json());
    if (!g.is_number_integer() && info.contains("num_groups")) g = info["num_groups"];
    if (g.is_number_integer() && g.get<int64_t>() > 0)
      out = {shape[1] / g.get<int64_t>() * spatial, shape[0] * g.get<int64_t>()};
  } else if (n.op == "layer_norm") {
    const nlohmann::json ns = n.args.value("normalized_shape", nlohmann::json());
    if (ns.is_array() && !ns.empty()) {
      int64_t vpg = 1;
      for (const auto& d : ns) vpg *= d.is_number_integer() ? d.get<int64_t>() : 0;
      int64_t all = 1;
      for (int64_t d : shape) all *= d;
      out = {vpg, vpg > 0 && !shape.empty() ? all / vpg : -1};
    }
  }
  return out;
}

struct FeatureStats;  // src/probes/features/features.cpp
/// One trainable parameter's saved optimizer state (--optimizer-state),
/// with its param_groups hyperparameters.
struct SavedParamState {
  std::string path;         ///< "h.0.attn.q.weight"
  int64_t index = 0;        ///< position in model.parameters() order (the optimizer's index)
  at::Tensor exp_avg, exp_avg_sq, momentum_buffer;  ///< undefined when absent
  double step = 0;          ///< steps taken (Adam)
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0, momentum = 0, dampening = 0;
  /// The param group's initial_lr: present when an LR scheduler was attached
  /// (the lr it started from; lr is its current value). nullopt otherwise.
  std::optional<double> initial_lr;
  bool nesterov = false;
};

/// --optimizer-state mapped onto the module (src/probes/training/optimizer_state.cpp).
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
  /// Per-unit statistics (PassSpec::features; src/probes/features/features.cpp).
  std::shared_ptr<const FeatureStats> features;
  bool batch_norm_stats = false;  ///< ran with PassSpec::batch_norm_stats
  bool backward = false;          ///< ran with PassSpec::backward
  c10::IValue output;
  std::optional<at::Tensor> loss;   ///< train passes with backward
  /// Backward passes: every parameter's gradient from this pass's backward,
  /// by the parameter's TensorImpl (a tied parameter once); a parameter
  /// without a gradient is absent. The pass owns these tensors: run_pass
  /// clears the parameters' .grad before each backward, so a later pass never
  /// accumulates into them, and probes read gradients here, never from the
  /// module (the module's .grad is whatever the last backward left).
  std::map<const void*, at::Tensor> grads;
  /// The gradient of parameter `p` in this pass; undefined when it got none.
  at::Tensor grad_of(const at::Tensor& p) const {
    auto it = grads.find(p.unsafeGetTensorImpl());
    return it == grads.end() ? at::Tensor() : it->second;
  }
  std::string loss_description;
  /// The loss of a uniform prediction, ln(C), when the loss is a
  /// cross-entropy against --target class ids over C classes (NaN otherwise):
  /// a loss far below it says the model has learned.
  double loss_chance = std::numeric_limits<double>::quiet_NaN();
  /// Backward passes on a model returning several floating tensors, the loss
  /// reading one of them (no --output-index): the parameters that got no
  /// (or an all-zero) gradient from the loss but a nonzero one from the other outputs (by
  /// TensorImpl), found by a second backward from those outputs that records
  /// no statistics. Their missing gradient is the loss's choice of output,
  /// not a missing path (rule GRAD009, info). Empty otherwise.
  std::set<const void*> reach_other_outputs_only;
  /// Parameters whose gradient from a cross-entropy loss is exactly zero
  /// while a random projection of the same output gives them one: a bias
  /// added to every class alike (ELECTRA's Linear(hidden, 1) over [B, T]
  /// read as T classes), which softmax's shift invariance cancels. The zero
  /// is the loss's, not a missing path.
  std::set<const void*> shift_invariant_only;
  /// A cross-entropy loss of exactly 0 whose backward left every parameter
  /// gradient exactly zero: the softmax is saturated at the targets (no
  /// shift-invariance test is made then).
  bool loss_saturated = false;
  /// The outputs the loss did not read, "output[1], output[2]" ("" when none).
  std::string unread_outputs;
  /// Those of them that give a parameter in reach_other_outputs_only its
  /// gradient (one more backward per unread output, up to 8 of them; all
  /// the unread outputs, unnamed, beyond that): "" when none is reached.
  std::string reaching_outputs;
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
  int64_t slice_axis = 0;      ///< PassConfig::slice_axis: the batch axis of time-major module tensors
  int64_t slice_index = 0;     ///< PassConfig::slice_index: the example measured (0: the first)
  bool keep_baked = false;     ///< PassConfig::keep_baked: run traced flags as saved
  const Collector* slice_guide = nullptr;  ///< PassConfig::slice_guide: example 0's pass alone
  at::Tensor slice_rows;       ///< PassConfig::slice_rows: the example's nodes in a graph batch
  int64_t slice_rows_of = 0;   ///< PassConfig::slice_rows_of: the nodes of the whole graph batch
  bool capture = false;        ///< Collector::capture: keep every module output (reference pass)
  const Collector* reference = nullptr;  ///< Collector::reference: compare module outputs with it
  at::Tensor real_positions;   ///< Collector::real_positions: [B, T] bool, real (not padded) positions
  bool align_end = false;      ///< Collector::align_end: the batch was padded before its first position
  bool time_cut = false;       ///< Collector::time_cut: the pass cut the time axis (outputs without it not compared)
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
  /// Optional Collector::edit for this pass (replaces tapped tensors).
  /// A pass with an edit is never shared.
  std::function<at::Tensor(const TapSite&, const at::Tensor&)> tap_edit;
  /// Added to --seed for this pass's random ops (0: the session's seed); a
  /// second draw of a train-mode pass measures what its random ops move.
  uint64_t seed_offset = 0;
  /// Forward calls made first, on the same batch and without restoring the
  /// buffers in between (their outputs discarded); the measured call then
  /// sees the state they left. Buffers are restored after the pass as always.
  int warmup_calls = 0;
  /// The batch the warmup calls are given, when not the measured one (an
  /// eval forward that initializes itself from the first batch it sees is
  /// called first on another batch: evalstate.history_rel_diff).
  std::vector<c10::IValue> warmup_args;
};

/// The tensor of `out` the loss reads (--output-index, else a "loss" or
/// "logits" entry, else the first floating tensor; src/probes/engine.cpp);
/// undefined when no output is floating. Throws FatalRunError when `out`
/// holds no tensor, nd::Error (usage) for an --output-index out of range.
at::Tensor loss_output(const c10::IValue& out, const CheckOptions& opt);

/// The train pass of the forward_backward probe (train mode, dropout on,
/// traced flags following the mode, backward, per-unit features): the pass
/// the layer table, the gradient probes, architecture and features read.
PassSpec train_pass_spec();

class Session {
 public:
  Session(const CheckOptions& opt, const ProgressFn& progress);

  const CheckOptions& opt;
  /// The precision the model runs in: --precision; when that is fp32 (the
  /// default) and every floating parameter of the model is float16
  /// (bfloat16), fp16 (bf16): the model computes in that format, and the
  /// precision probe compares it with an fp32 copy (prepare_check).
  std::string precision;
  ProgressFn progress;
  LoadedModel model;
  std::vector<ArgValue> args;
  std::unique_ptr<InstrumentedModel> inst;
  /// batch_layout's graph evidence, computed once: per forward argument, the
  /// recurrent op (aten::gru/lstm/rnn_*) or scripted module with
  /// batch_first=False that reads it with its axes in order ("" when none):
  /// such an argument is [T, B, F].
  mutable std::optional<std::vector<std::string>> time_major_readers;
  /// Forward arguments whose values index rows of a tensor (a graph's edge
  /// list, PyG's batch vector), from forward's graph; cached by
  /// batch_layout (src/probes/inputs/inputs.cpp), which every probe that
  /// slices examples calls.
  mutable std::optional<std::set<int64_t>> row_index_args;
  MetricsDoc doc;
  std::chrono::steady_clock::time_point started;
  std::unique_ptr<Collector> failed_collector;  ///< the collector of the last pass that raised
  /// The module the last pass that raised most likely raised in (the
  /// reader of the last value measured, or the next module), "" unknown.
  std::string failed_in_module;
  /// A failure of every pass that a finding explains (an InstanceNorm over
  /// one spatial element raises in every mode: NORM003): the report is
  /// written with that finding instead of ending the run (exit 3).
  bool run_failure_diagnosed = false;
  /// Buffers (named_buffers paths) some eval-mode pass wrote to; every pass
  /// restores them, so each starts from the saved state.
  std::vector<std::string> eval_buffer_writes;
  /// Parameters the forward writes in place (parameters_written_in_forward),
  /// with their names: saved and restored around every pass like buffers.
  std::vector<std::pair<std::string, at::Tensor>> written_params;
  /// Plain attributes the forward assigns (attributes_set_in_forward): the
  /// module that holds each, the attribute's name and its "path.name"; saved
  /// and restored around every pass like buffers.
  struct WrittenAttribute {
    torch::jit::Module module;
    std::string name, path;
  };
  std::vector<WrittenAttribute> written_attributes;
  /// Attributes ("path.name") some eval-mode pass changed.
  std::vector<std::string> eval_attribute_writes;
  /// Per parameter some eval-mode pass changed: the largest relative change
  /// ||after - saved|| / ||saved|| (inf when the saved value is all zero),
  /// and whether the saved value was one constant (zeros, ones: an
  /// initialization, not a trained value).
  struct ParamWrite {
    double rel_change = 0;      ///< ||after - saved|| / ||saved||, the largest of the passes
    double moved = 0, base = 0;  ///< ||after - saved|| and ||saved|| of that pass
    bool saved_constant = false;
  };
  std::map<std::string, ParamWrite> eval_param_writes;
  /// The train pass (train_pass_spec()) from the cache, or nullptr when it
  /// did not run or raised.
  std::shared_ptr<const PassResult> train() const { return peek(train_pass_spec()); }
  /// Why the train pass could not run ("train-mode forward raised: ...", or
  /// "the train pass did not run"), "" when it ran.
  std::string train_pass_error() const;
  c10::optional<at::Tensor> target;   ///< --target, loaded on the first backward pass
  bool target_loaded = false;
  /// The batch's real positions for the loss ([B, T] bool, undefined when
  /// the batch is not padded) and how they were found; set on the first
  /// backward pass (sample_real_positions).
  at::Tensor loss_real_positions;
  std::string loss_real_from;
  /// A second sequence's real positions by its length ([B, length] bool,
  /// undefined when no single mask of that length is found) and how they
  /// were found (real_positions_of_length), filled on the first default-args
  /// backward pass whose 3-D output has that length.
  std::map<int64_t, std::pair<at::Tensor, std::string>> loss_real_by_length;
  /// The output frames [B, frames] that cover only real positions of
  /// `real` [B, T] (a downsampling encoder's frames: speech feature
  /// extractors); undefined when `frames` is an input's length or not below
  /// T. `from` says how they were found (real_from, mapped).
  at::Tensor real_frames_of(const at::Tensor& real, int64_t frames, const std::string& real_from, std::string& from) const;
  /// Passes that completed that ran the model as saved (any probe but the
  /// precision probe's, which convert it, unless every floating parameter
  /// is fp16/bf16: a model saved in the format). None after every probe
  /// ran: the model cannot run at all, and run_check rethrows the first error.
  int64_t passes_ok = 0;
  /// Every floating parameter of the file is fp16/bf16 (set before any pass).
  bool saved_in_low_precision = false;
  /// Passes run_pass started (completed or raised), any probe.
  int64_t passes_run = 0;
  /// A recording (tests; probe_alone_test.cpp): cached passes keep their
  /// captured module outputs after every declared request was served, so a
  /// probe can be run again alone on them.
  bool keep_captures = false;
  /// Replaying a recording: a cacheable pass (non-empty pass_key) that is not
  /// in the cache raises nd::Error(internal) naming it instead of running, so
  /// a probe run alone is served only from what was recorded. Passes that
  /// can never be shared (edited batches, hooks) still run.
  bool replay_only = false;
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

  /// Runs one pass. Every buffer (BatchNorm running statistics, a normalizer
  /// an eval forward updates) is restored afterwards, buffers an eval-mode
  /// pass wrote to are recorded in eval_buffer_writes, and the module's saved
  /// mode is restored. Throws
  /// PassError (model_run / input_mismatch / out_of_memory) with a trimmed
  /// message when forward or backward raises; FatalRunError (model_run) when
  /// forward returns no tensor at all. A backward pass whose forward returns
  /// only integer or bool tensors runs forward only (PassResult::backward_skipped).
  PassResult run_pass(PassSpec spec);

  /// After a pass raised `what` (failed_collector holds what it measured):
  /// the batch_norm input tap (InstrumentedModel::taps) whose layer raised
  /// PyTorch's "Expected more than 1 value per channel", or -1 (another
  /// error, or none named; see raised_batch_norm_tap). `reference` is the
  /// same batch run to the end, asked for (Session::pass) only when the last
  /// tap that fired is not that batch_norm's input; if it raises too, no
  /// layer is named. failed_collector is left as it was.
  int64_t raised_batch_norm(const std::string& what, const PassSpec& reference);

  /// Reads --target (one tensor). Throws nd::Error (input_load).
  c10::optional<at::Tensor> load_target();
  /// The forward arguments as IValues.
  std::vector<c10::IValue> arg_values() const;
  /// The tensors forward returned, flattened (tuple/list/dict values in order).
  static std::vector<at::Tensor> output_tensors(const c10::IValue& out);
  /// ||a - b|| / ||b|| over the floating tensors of two outputs of the same
  /// structure (non-finite elements ignored); NaN when they do not match.
  /// With `ids` set, outputs with no floating tensor (class ids, token ids)
  /// compare as the share of their elements that differ (0..1); without it
  /// they compare as 0. Only for comparisons whose healthy value is exact
  /// (the same eval computation on other batch compositions, an eval repeat):
  /// between train and eval mode a tiny logit change flips near-tied ids, so
  /// the share says nothing there. With `ids` set, an element finite in one
  /// output and NaN/Inf in the other makes the difference infinite (without
  /// it, such elements are left out). With `real` ([B, T] bool, the
  /// sample's real positions), floating outputs with a batch and a time axis
  /// are compared at the real positions only (real_position_weights).
  static double relative_difference(const c10::IValue& a, const c10::IValue& b, bool ids = false,
                                    const at::Tensor& real = at::Tensor());
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

/// One probe of the pipeline, in run order (src/probes/registry.cpp).
struct ProbeEntry {
  const char* name;                    ///< probes.<name> in the report, Session::run_probe's name
  void (*run)(Session&);               ///< its entry point (src/probes/NAME/NAME.h)
  bool (*applies)(const Session&);     ///< whether it runs for these options (--weights, --lr, --steps)
};
/// The probes in the order run_check runs them. The order is data, with
/// its reasons: the timeline first (it leaves the last checkpoint loaded),
/// forward_backward before the probes that read its layer table (features,
/// precision) and before update (its gradients), sequence before
/// noise_floors (the floors judge its comparisons), precision after the
/// others (it reads their activations), replay last (it takes optimizer
/// steps on a snapshot).
const std::vector<ProbeEntry>& probe_pipeline();

/// Loading, instrumentation, the layer inventory and the pass declarations
/// of a check: everything before the first probe. Throws nd::Error as
/// run_check.
std::unique_ptr<Session> prepare_check(const CheckOptions& opt, const ProgressFn& progress);
/// Runs every applicable probe of probe_pipeline() on a prepared session,
/// each isolated. Throws the first error when no pass completed.
void run_probes(Session& s);

/// The metric-name prefixes each probe (Session::run_probe name) declares it
/// writes, model-scope and per layer: each probe folder's NAME_writes(),
/// collected in src/probes/registry.cpp; the names are those of
/// docs/metrics.md.
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

/// The first `show` module paths (or names) joined by ", " ("" reads
/// "<root>"), then ", ... (N more)": the lists findings quote.
std::string short_list(const std::vector<std::string>& names, size_t show = 6);

}  // namespace nd
