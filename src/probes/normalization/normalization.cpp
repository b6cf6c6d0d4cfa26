// Normalization probes (issue: train/eval drift, BatchNorm statistics, batch
// dependence, small batches, mode problems). Each measures; rules judge.
//
// Passes (all forward only, no gradient):
//   eval             eval mode, the sample batch: BatchNorm inputs vs running stats
//   train-nodropout  train mode with every dropout op replaced by identity:
//                    drift from normalization statistics alone (a model
//                    without dropout ops reuses the train pass instead)
//   eval-repeat      eval mode again with another seed: nondeterminism
//   eval-example0    example 0 alone (and eval-batch-slice0: the batch, measuring
//                    example 0 only): batch dependence and where it starts
//   eval-reversed    the batch in reverse order
//   eval-example-last the last example alone
//   eval-batch-copies0 a batch of copies of example 0 (only when eval mode
//                    draws random numbers: the same draws as the batch's row 0)
//   eval-input-ulp   the batch with its float inputs moved by one ulp (only
//                    when batch dependence would be reported: the floor of a
//                    model that amplifies rounding)
//   plain-train / plain-eval: the uninstrumented model in train() and eval()
//                    (traced graphs with baked flags only): does the switch work?
#include <algorithm>
#include <cmath>
#include <random>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <torch/torch.h>

#include "core/error.h"
#include "probes/normalization/normalization.h"
#include "probes/inputs/inputs.h"
#include "probes/session.h"

namespace nd {
namespace {

/// Partly estimated running statistics (BN009): the eval-mode output of the
/// layer off by a quarter of its unit scale, five times the sampling noise of
/// the sample batch (rules/BN009.toml gives the sources).
constexpr double kStaleEvalError = 0.25, kStaleOverFloor = 5;
/// BN004's drift threshold (rules/BN004.toml): below it the passes that
/// measure the train-mode output's own noise are not run.
constexpr double kDriftWorthMeasuring = 0.5;


/// Module-output statistics of one pass: per module path, per output tap
/// (one per output tensor of a module returning several).
using ModuleTapStats = std::map<std::string, std::map<int64_t, TensorStats>>;

ModuleTapStats module_stats(const InstrumentedModel& im, const Collector& c) {
  ModuleTapStats out;
  for (const auto& t : im.taps())
    if (t.kind == TapKind::kModuleOutput && c.records()[static_cast<size_t>(t.id)].calls > 0)
      out[t.module][t.id] = c.records()[static_cast<size_t>(t.id)].fwd;
  return out;
}

/// Non-finite values over a module's outputs (0 when it did not run).
int64_t module_nonfinite(const ModuleTapStats& m, const std::string& path) {
  auto it = m.find(path);
  int64_t n = 0;
  if (it != m.end())
    for (const auto& [id, st] : it->second) n += st.nonfinite();
  return n;
}

/// Relative difference of two tensor summaries (0 when identical).
double stats_difference(const TensorStats& a, const TensorStats& b) {
  if (a.numel != b.numel) return std::numeric_limits<double>::infinity();
  if (a.nonfinite() != b.nonfinite()) return std::numeric_limits<double>::infinity();
  const double scale = std::max({a.rms(), b.rms(), 1e-12});
  return std::max({std::fabs(a.mean() - b.mean()), std::fabs(a.rms() - b.rms()), std::fabs(a.max - b.max),
                   std::fabs(a.min - b.min)}) /
         scale;
}

/// The first module in execution order whose outputs differ between two
/// passes by more than `tol`; "" if none.
std::string first_divergence(const Session& s, const ModuleTapStats& a, const ModuleTapStats& b, double tol,
                             double* diff) {
  std::vector<const LayerMetrics*> order;
  for (const auto& l : s.doc.layers)
    if (l.exec_order >= 0) order.push_back(&l);
  std::sort(order.begin(), order.end(), [](auto* x, auto* y) { return x->exec_order < y->exec_order; });
  for (const auto* l : order) {
    auto ia = a.find(l->path), ib = b.find(l->path);
    if (ia == a.end() || ib == b.end()) continue;
    // Output by output; an output of another size in the two passes (one
    // example sliced from a tensor without a batch axis of its own, an
    // auxiliary output only one mode returns) is not comparable and is
    // left out rather than read as a difference.
    double d = 0;
    for (const auto& [id, sa] : ia->second) {
      auto jb = ib->second.find(id);
      if (jb == ib->second.end() || sa.numel != jb->second.numel) continue;
      d = std::max(d, stats_difference(sa, jb->second));
    }
    if (d > tol) {
      if (diff) *diff = d;
      return l->path;
    }
  }
  return "";
}

/// A reduction over the batch axis that can explain an eval-mode batch
/// dependence first seen at module `first`.
struct BatchAxisReduction {
  std::string op, module;
  std::string axes;  ///< "axis 0 (batch) of [batch, hidden]"
  bool normalizes = false;
  bool in_norm = false;  ///< part of a recognized normalization (judged by AXIS002)
  std::string applied;   ///< "divides" | "centers" | "floors" (ReductionSite::applied)
  bool all_graphs = false;  ///< a norm over the node axis of a graph batch (every graph's nodes)
};

/// The reduction (ReductionSite) whose reduced axes include the batch axis,
/// run by `first`, by a module holding it, or by the root's own forward:
/// by role when the graph shows it, else axis 0 while every batched
/// argument's batch axis is 0 (stated as assumed). A normalization (the
/// statistic divides its own input) is preferred over a plain reduction;
/// empty when none. `col`: a pass's taps, for the dims a written-out norm
/// received at run time (NormOpSite::dims_tap: RevIN's dim2reduce built by
/// a loop), which the graph does not show.
BatchAxisReduction batch_axis_reduction(const Session& s, const InstrumentedModel& im, const std::string& first,
                                        const Collector* col = nullptr) {
  bool axis0 = false, bags = false, graph = false;
  if (s.doc.probes.contains("batch_layout") && s.doc.probes["batch_layout"].contains("axes")) {
    axis0 = !s.doc.probes["batch_layout"]["axes"].empty();
    // EmbeddingBag's flat ids and offsets: aten::embedding_bag gives one
    // row per bag, the batch on axis 0 of what the model computes. A graph
    // batch: axis 0 of the node tensors holds the nodes of every graph.
    for (const auto& [name, a] : s.doc.probes["batch_layout"]["axes"].items()) {
      bags = bags || a == "bags";
      const bool g = a == "nodes" || a == "edges" || a == "graph ids" || a == "per edge";
      graph = graph || g;
      axis0 = axis0 && (a == 0 || a == "bags" || a == "offsets" || g);
    }
  }
  const std::string assumed = bags    ? "assumed: axis 0 is the batch, one row per bag of the EmbeddingBag's flat ids"
                              : graph ? "assumed: axis 0 holds the nodes of every graph of the batch, as the node "
                                        "features' axis 0 does"
                                      : "assumed: axis 0 of every input is the batch";
  auto holds = [&](const std::string& m) { return m.empty() || m == first || first.rfind(m + ".", 0) == 0; };
  // A forward argument's axis ("in:I:D") is "batch" where the batch layout
  // puts argument I's batch axis at D (an image's axis 0 carried through a
  // permute to [T, B, C]: CRNN's time-major sequence).
  const BatchLayout layout = batch_layout(s);
  auto role_of = [&](const std::string& e) -> std::string {
    if (e.rfind("in:", 0) != 0) return e;
    const auto c = e.find(':', 3);
    if (c == std::string::npos) return e;
    const size_t i = std::stoul(e.substr(3, c - 3));
    const int64_t d = std::stoll(e.substr(c + 1));
    return i < layout.axis.size() && layout.batch >= 2 && layout.axis[i] == d ? "batch" : e;
  };
  BatchAxisReduction best;
  for (const auto& red : im.reductions()) {
    // int(batch.max()) + 1 counting a graph batch's graphs (PyG's pooling)
    // reduces the batch axis but mixes no values (eval45 C2).
    if (!holds(red.module) || red.to_scalar) continue;
    ReductionSite r = red;
    for (auto& e : r.input_roles) e = role_of(e);
    const int64_t rank = static_cast<int64_t>(r.input_roles.size());
    std::string how;
    const int64_t batch_axes = std::count(r.input_roles.begin(), r.input_roles.end(), std::string("batch"));
    if (rank > 0) {
      for (int64_t i = 0; i < rank; ++i) {
        const bool reduced = r.all_dims || std::any_of(r.dims.begin(), r.dims.end(), [&](int64_t d) { return (d < 0 ? d + rank : d) == i; });
        if (!reduced || r.input_roles[static_cast<size_t>(i)] != "batch") continue;
        std::string roles;
        for (const auto& x : r.input_roles) roles += (roles.empty() ? "" : ", ") + x;
        how = "axis " + std::to_string(i) + " (batch) of [" + roles + "]";
        // A softmax over the batch axis normalizes over it: each example's
        // probabilities (log_softmax: minus the log-sum-exp) are taken with
        // the other examples' values (F.log_softmax(out, dim=1) on a
        // time-major [T, B, C] CTC output). Only where the graph names the
        // one batch axis; a [B, B] similarity matrix has two.
        if ((r.op == "aten::softmax" || r.op == "aten::log_softmax") && !r.all_dims && batch_axes == 1) {
          r.normalizes = true;
          r.applied = r.op == "aten::softmax" ? "softmax" : "log_softmax";
        }
      }
    }
    const bool roles_known = batch_axes > 0;
    if (how.empty() && !roles_known && axis0 && (r.all_dims || std::find(r.dims.begin(), r.dims.end(), 0) != r.dims.end()))
      how = r.all_dims ? "every axis, the batch axis 0 included (" + assumed + ")" : "axis 0 (the batch axis, " + assumed + ")";
    if (how.empty()) continue;
    if (best.op.empty() || (r.normalizes && !best.normalizes)) best = {r.op, r.module, how, r.normalizes, r.in_norm, r.applied};
  }
  if (!best.op.empty() || !col) return best;
  // A graph batch (PyG's layout, two or more graphs): a per-example
  // normalization whose statistics span an axis as long as all the nodes
  // together takes them over every graph of the batch (PyG's InstanceNorm
  // or graph-mode LayerNorm called without `batch`: DeepGCNLayer's
  // self.norm(x), pyg-team/pytorch_geometric#9647; eval45 C2). Its input
  // as the tap measured it ([1, C, N] after x.t().unsqueeze(0)).
  if (graph) {
    const BatchLayout bl = batch_layout(s);
    if (bl.graph_ids >= 0 && bl.batch >= 2 && bl.graph_num_nodes >= 2)
      for (const auto& n : im.norm_ops()) {
        if (!holds(n.module) || n.input_tap < 0 || static_cast<size_t>(n.input_tap) >= col->records().size() ||
            n.op == "batch_norm" || n.op == "batch_norm_pattern" || n.op == "l2_norm_pattern")
          continue;
        const auto& rec = col->records()[static_cast<size_t>(n.input_tap)];
        const int64_t rank = static_cast<int64_t>(rec.shape.size());
        const LayerMetrics* lm = s.doc.find_layer(n.module);
        const nlohmann::json info = lm ? lm->info : nlohmann::json::object();
        for (int64_t d : norm_reduced_axes(n, rank, info, rec.ints)) {
          if (d < 0 || d >= rank || rec.shape[static_cast<size_t>(d)] != bl.graph_num_nodes) continue;
          std::string shape;
          for (int64_t x : rec.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(x);
          best = {n.op, n.module,
                  "axis " + std::to_string(d) + " of its input [" + shape + "], the " +
                      std::to_string(bl.graph_num_nodes) + " nodes of all " + std::to_string(bl.batch) +
                      " graphs of the batch together (" + assumed + ")",
                  true, true, "divides", true};
          return best;
        }
      }
  }
  for (const auto& n : im.norm_ops()) {
    if (n.dims_tap < 0 || !holds(n.module) || static_cast<size_t>(n.dims_tap) >= col->records().size()) continue;
    const auto& rec = col->records()[static_cast<size_t>(n.dims_tap)];
    const int64_t rank = static_cast<int64_t>(rec.shape.size());
    if (rank == 0 || rec.ints.empty()) continue;
    std::string dims;
    bool batch = false;
    for (int64_t d : rec.ints) {
      const int64_t w = d < 0 ? d + rank : d;
      dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      const bool named = w >= 0 && w < static_cast<int64_t>(n.input_roles.size()) && n.input_roles[static_cast<size_t>(w)] == "batch";
      if (named || (w == 0 && axis0)) batch = true;
    }
    if (!batch) continue;
    best = {n.op, n.module,
            "dims [" + dims + "] (received at run time) of its input, the batch axis 0 included" +
                (axis0 ? " (" + assumed + ")" : std::string()),
            true, true, "divides"};
    break;
  }
  return best;
}

/// Writes the batchdep.batch_axis_* metrics of `b` and returns the cause's
/// opening words ("a normalization over the batch axis: aten::norm reduces
/// axis 0 (...)"). A recognized normalization's axes are judged by AXIS002,
/// so batch_axis_normalizes (AXIS010) is false for it.
std::string record_batch_axis(MetricMap& mm, const BatchAxisReduction& b) {
  mm["batchdep.batch_axis_op"] = b.op;
  mm["batchdep.batch_axis_module"] = b.module;
  if (b.all_graphs) mm["batchdep.batch_axis_all_graphs"] = true;
  mm["batchdep.batch_axis_normalizes"] = b.normalizes && !b.in_norm;
  mm["batchdep.batch_axis_reduced"] = b.axes;
  // AXIS010's words for how the statistic goes back into the tensor.
  mm["batchdep.batch_axis_applied"] = b.applied == "centers" ? "is subtracted from the same tensor (centring)"
                                      : b.applied == "floors" ? "floors the same tensor (torch.maximum with it)"
                                      : b.applied == "log_softmax"
                                          ? "(the log-sum-exp) is subtracted from the same tensor (log-probabilities over the batch)"
                                      : b.applied == "softmax"
                                          ? "(the sum of exponentials) divides the same tensor's exponentials (probabilities over the batch)"
                                          : "divides the same tensor";
  return std::string(b.normalizes ? "a normalization over the batch axis: " : "a reduction over the batch axis: ") +
         b.op + " reduces " + b.axes;
}

/// Module kinds whose output row b depends on input row b alone and that
/// keep no state: in eval mode they cannot make one example depend on
/// another (Dropout is the identity there).
bool elementwise_kind(const std::string& kind) {
  static const std::set<std::string> kinds = {
      "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "Identity", "ReLU",
      "ReLU6", "LeakyReLU", "PReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh", "Hardtanh",
      "Hardswish", "Hardsigmoid", "Softplus", "Softsign", "Tanhshrink", "Threshold", "LogSigmoid", "QuickGELU",
      "GELUTanh", "NewGELUActivation", "GELUActivation", "FastGELUActivation", "DropPath"};
  return kinds.count(kind) > 0;
}

/// The module that ran the mode-dependent op behind a divergence first seen
/// at module `first`'s output. A module that runs F.batch_norm in its own
/// forward and then hands the result to children (timm's BatchNormAct2d:
/// batch_norm, then self.drop, then self.act) shows the difference first at
/// a child's output; the batch_norm op that fired last before that output,
/// when it ran in an ancestor of `first`, is where the outputs began to
/// differ. `first` itself when it runs a batch_norm, or when the last one
/// before it ran elsewhere (then nothing says it fed `first`).
std::string drift_origin(const InstrumentedModel& im, const Collector& c, const std::string& first) {
  const auto& rec = c.records();
  int64_t first_out = -1;
  for (const auto& t : im.taps())
    if (t.kind == TapKind::kModuleOutput && t.module == first && t.primary) {
      const int64_t f = rec[static_cast<size_t>(t.id)].first_fire;
      if (f >= 0 && (first_out < 0 || f < first_out)) first_out = f;
    }
  if (first_out < 0) return first;
  int64_t best = -1;
  std::string module;
  for (const auto& t : im.taps())
    if (t.kind == TapKind::kBatchNormInput) {
      const int64_t f = rec[static_cast<size_t>(t.id)].first_fire;
      if (f >= 0 && f < first_out && f > best) {
        best = f;
        module = t.module;
      }
    }
  if (best < 0 || module == first) return first;
  const bool ancestor = module.empty() || first.compare(0, module.size() + 1, module + ".") == 0;
  return ancestor ? module : first;
}

/// Output rows of the examples in `index` along each tensor's batch axis:
/// the axis where `alone` (the output of one example run alone, same
/// structure) has size 1 and `out` has the batch, all other sizes equal; else
/// output_batch_axis. An output [B, C] with C == B (4 classes, 4 examples)
/// of a time-major model is told apart only so.
/// The machine epsilon of a floating dtype: fp16 9.77e-4, bf16 7.81e-3, fp32
/// 1.19e-7, fp64 2.22e-16 (IEEE 754 / bfloat16 significand widths).
double machine_epsilon(at::ScalarType t) {
  return t == at::kHalf ? 9.765625e-4 : t == at::kBFloat16 ? 7.8125e-3 : t == at::kFloat ? 1.1920929e-7 : 2.220446e-16;
}

c10::IValue rows_of(const c10::IValue& out, const BatchLayout& L, const at::Tensor& index, const c10::IValue& alone,
                    bool* found = nullptr, const at::Tensor& positions = at::Tensor()) {
  if (out.isTensor()) {
    const auto& t = out.toTensor();
    int64_t ax = -1;
    if (alone.isTensor() && alone.toTensor().dim() == t.dim()) {
      const auto& a = alone.toTensor();
      for (int64_t d = 0; d < t.dim() && ax < 0; ++d) {
        if (t.size(d) != L.batch || a.size(d) != 1) continue;
        bool rest = true;
        for (int64_t e = 0; e < t.dim(); ++e) rest = rest && (e == d || t.size(e) == a.size(e));
        if (rest) ax = d;
      }
    }
    // Node outputs of a graph batch ([N, ...], N the nodes of every
    // graph): the chosen graphs' node rows.
    const int64_t nodes = positions.defined() ? positions.numel() : L.graph_num_nodes;
    if (ax < 0 && L.graph_edges >= 0 && t.dim() >= 1 && t.size(0) == nodes && t.size(0) != L.batch) {
      if (found) *found = true;
      return t.index_select(0, L.graph_node_rows(index, positions).to(t.device()));
    }
    if (ax < 0) ax = output_batch_axis(L, t);
    if (ax >= 0 && found) *found = true;
    return ax >= 0 ? c10::IValue(t.index_select(ax, index.to(t.device()))) : out;
  }
  if (out.isTuple()) {
    std::vector<c10::IValue> el;
    const auto& elems = out.toTupleRef().elements();
    const bool guided = alone.isTuple() && alone.toTupleRef().elements().size() == elems.size();
    for (size_t i = 0; i < elems.size(); ++i)
      el.push_back(rows_of(elems[i], L, index, guided ? alone.toTupleRef().elements()[i] : c10::IValue(), found, positions));
    return c10::ivalue::Tuple::create(std::move(el));
  }
  // A dict of outputs (torchvision's BackboneWithFPN: OrderedDict of
  // feature maps; eval35 C03 read it as having no batch axis) and a list:
  // their values' rows, key by key, element by element.
  if (out.isGenericDict()) {
    const auto src = out.toGenericDict();
    const bool guided = alone.isGenericDict();
    c10::impl::GenericDict d(src.keyType(), src.valueType());
    for (const auto& e : src) {
      c10::IValue a;
      if (guided && alone.toGenericDict().contains(e.key())) a = alone.toGenericDict().at(e.key());
      d.insert(e.key(), rows_of(e.value(), L, index, a, found, positions));
    }
    return c10::IValue(d);
  }
  if (out.isList()) {
    const auto src = out.toList();
    const bool guided = alone.isList() && alone.toList().size() == src.size();
    c10::impl::GenericList l(src.elementType());
    for (size_t i = 0; i < src.size(); ++i)
      l.push_back(rows_of(src.get(i), L, index, guided ? alone.toList().get(i) : c10::IValue(), found, positions));
    return c10::IValue(l);
  }
  return out;
}

}  // namespace

PassSpec normalization_eval_spec() {
  // As a user runs it: eval(), traced flags as saved, BatchNorm input statistics.
  PassSpec ev;
  ev.name = "eval";
  ev.probe = "normalization";
  ev.keep_baked = true;
  ev.batch_norm_stats = true;
  return ev;
}

PassSpec normalization_nodropout_spec(bool train) {
  // The drift comparison: both modes with every dropout op off and the
  // traced flags following the pass's mode.
  PassSpec p;
  p.name = train ? "train-nodropout" : "eval-nodropout";
  p.probe = "normalization";
  p.train_mode = train;
  p.dropout = false;
  // In train mode, the BatchNorm inputs' variance without dropout: against
  // the train pass's, what dropout adds to it (bn.dropout_var_gain).
  p.batch_norm_stats = train;
  return p;
}

/// The train pass with BatchNorm input statistics: what the running
/// statistics estimate (BN002/BN003 confirm a deviation there).
PassSpec normalization_train_spec() {
  PassSpec tr = train_pass_spec();
  tr.batch_norm_stats = true;
  return tr;
}

void declare_normalization_passes(Session& s) {
  s.declare(normalization_eval_spec());
  s.declare(normalization_train_spec());
  s.declare(normalization_nodropout_spec(true));
  s.declare(normalization_nodropout_spec(false));
}

void probe_normalization(Session& s) {
  const InstrumentedModel& im = *s.inst;
  auto& mm = s.doc.model_metrics;
  nlohmann::json report = nlohmann::json::object();

  // ---- eval pass: BatchNorm statistics against the data -------------------
  // As a user runs it: eval(), traced flags as saved.
  const std::shared_ptr<const PassResult> eval_p = s.pass(normalization_eval_spec());
  const PassResult& eval = *eval_p;
  const auto eval_stats = module_stats(im, *eval.collector);
  // The train pass (shared with forward_backward), for the BatchNorm input
  // statistics in training mode; none when it could not run.
  std::shared_ptr<const PassResult> train_p;
  try {
    train_p = s.pass(normalization_train_spec());
  } catch (const Error& e) {
    if (e.kind() == error_kind::kTimeout) throw;
  }
  // The same train-mode forward with every dropout op off: what the
  // BatchNorms' inputs are without dropout (the variance-shift test).
  std::shared_ptr<const PassResult> nodrop_bn_p;
  if (train_p) {
    try {
      nodrop_bn_p = s.pass(normalization_nodropout_spec(true));
    } catch (const Error& e) {
      if (e.kind() == error_kind::kTimeout) throw;
    }
  }

  // Execution order from the eval pass when the train pass could not run.
  bool have_order = false;
  for (const auto& l : s.doc.layers) have_order = have_order || l.exec_order >= 0;
  if (!have_order) {
    std::vector<std::pair<int64_t, std::string>> order;
    std::map<std::string, int64_t> first;
    for (const auto& t : im.taps()) {
      const auto& r = eval.collector->records()[static_cast<size_t>(t.id)];
      if (t.kind != TapKind::kModuleOutput || r.first_fire < 0) continue;
      auto it = first.find(t.module);
      if (it == first.end() || r.first_fire < it->second) first[t.module] = r.first_fire;
    }
    for (const auto& [p, f] : first) order.push_back({f, p});
    std::sort(order.begin(), order.end());
    for (size_t i = 0; i < order.size(); ++i)
      if (LayerMetrics* l = s.doc.find_layer(order[i].second)) l->exec_order = static_cast<int64_t>(i);
  }

  const BatchLayout layout = batch_layout(s);
  const int64_t batch = layout.batch;
  const int64_t train_batch = s.opt.train_batch_size > 0 ? s.opt.train_batch_size : batch;
  int64_t bn_layers = 0, at_init = 0;
  std::string first_at_init, at_init_names;
  int64_t first_at_init_order = std::numeric_limits<int64_t>::max();
  for (const auto& t : im.taps()) {
    if (t.kind != TapKind::kBatchNormInput) continue;
    const auto& rec = eval.collector->records()[static_cast<size_t>(t.id)];
    LayerMetrics* lm = s.doc.find_layer(t.module);
    if (!lm || !rec.bn.mean.defined() || lm->metrics.count("bn.channels")) continue;  // first call of a layer only
    const BatchNormStats& b = rec.bn;
    MetricMap& m = lm->metrics;
    ++bn_layers;
    const int64_t channels = b.mean.numel();
    // A FrozenBatchNorm (x * scale + shift from its buffers, recognized in
    // the graph) never uses batch statistics: only its running statistics
    // are judged, not the batch's noise.
    bool frozen = false;
    for (const auto& no : im.norm_ops())
      if (no.input_tap == t.id && no.op == "frozen_batch_norm") frozen = true;
    m["bn.channels"] = channels;
    m["bn.spatial"] = b.spatial;
    // Examples of the sample batch this BatchNorm saw: with one, its
    // spatial statistics hold no between-example variance, which running
    // statistics do (one image's variance is well below running_var by
    // design), so BN002-BN004 need two.
    m["bn.sample_examples"] = b.examples;
    if (frozen) m["bn.frozen"] = true;
    // A BatchNorm kept in eval mode inside a file saved while training
    // (RAFT's freeze_bn(), a frozen backbone): the train passes run it in
    // eval, as its training does, so it normalizes with its running
    // statistics and no batch noise reaches it (eval46 raft_bn: BN007
    // advised freezing the BatchNorms a twin had frozen).
    bool eval_in_training = false;
    if (s.model.saved_training)
      for (const auto& mi : s.model.modules)
        if (mi.path == lm->path) eval_in_training = !mi.training;
    if (eval_in_training) m["bn.eval_in_training"] = true;
    const bool batch_stats = !frozen && !eval_in_training;
    // Rows of this BatchNorm's input per training step: its own axis 0,
    // which is the model's batch times the rows each example becomes where
    // a model folds an axis into the batch (PatchTST's [B * channels,
    // d_model, patches], eval13), scaled to --train-batch-size when given.
    const int64_t rows_per_pass =
        s.opt.train_batch_size > 0 && batch > 0 && b.examples > 0
            ? std::max<int64_t>(1, (train_batch * b.examples + batch / 2) / batch)
            : (b.examples > 0 ? b.examples : train_batch);
    if (batch_stats) {
    m["bn.examples_per_pass"] = rows_per_pass;
    m["bn.values_per_channel"] = rows_per_pass * b.spatial;
    // Independent draws behind each channel's statistics: the rows, except
    // the nodes of a graph batch, which move together graph by graph (a GIN
    // over 8 graphs of 87 nodes samples 8 graphs, not 87 values: its
    // train/eval drift spreads as 8 would, eval28).
    const bool node_rows = layout.graph_edges >= 0 && layout.batch > 0 && b.examples == layout.graph_num_nodes;
    m["bn.independent_values_per_channel"] = node_rows ? std::max<int64_t>(1, train_batch) * b.spatial : rows_per_pass * b.spatial;
    if (!m.count("bn.batch_of_one")) m["bn.batch_of_one"] = rows_per_pass * b.spatial <= 1;
    }
    // Noise of the per-step batch mean / variance at the training batch size,
    // estimated from the spread of per-example statistics (keeps spatial
    // correlation), in units of the channel's standard deviation / variance.
    // Relative to each channel's own scale, however small: activations that
    // shrank to a variance of 1e-20 deep in an untrained network still have
    // a batch-mean spread of 0.2 of their standard deviation (an absolute
    // floor on the variance printed 4.45e-05 there, issue 15). Channels
    // constant over the batch (variance exactly 0: a dead ReLU) have no
    // spread to measure and are left out of the average.
    if (batch_stats && b.examples >= 2 && rows_per_pass >= 1) {
      const at::Tensor live = b.var > 0;
      if (live.any().item<bool>()) {
        const double root_b = std::sqrt(static_cast<double>(rows_per_pass));
        const at::Tensor var = b.var.masked_select(live);
        const at::Tensor mean_noise = b.example_mean.std(0).masked_select(live) / root_b / var.sqrt();
        // Each row's share of the batch variance is its own variance plus
        // its mean's squared distance from the batch mean (law of total
        // variance): on 1x1 maps (after global pooling, an SE block) the
        // first part is 0 and the batch variance is all the second.
        const at::Tensor share = b.example_var + (b.example_mean - b.mean).pow(2);
        const at::Tensor var_noise = share.std(0).masked_select(live) / root_b / var;
        m["bn.mean_noise"] = metric_number(mean_noise.mean().item<double>());
        // Two rows of one value each (a 1x1 map, a Linear's features at a
        // sample of 2) have equal shares by symmetry, (m1 - m2)^2 / 4 each:
        // their spread reads 0 whatever the data (eval38 D02 printed "by 0
        // of itself"). There the Gaussian value stands in: the variance of
        // n normal values has a relative standard deviation sqrt(2 / (n - 1)).
        if (b.examples == 2 && b.spatial == 1) {
          m["bn.var_noise"] = rows_per_pass >= 2 ? metric_number(std::sqrt(2.0 / static_cast<double>(rows_per_pass - 1)))
                                                 : metric_number(std::numeric_limits<double>::infinity());
          m["bn.var_noise_from"] = "gaussian";
        } else {
          m["bn.var_noise"] = metric_number(var_noise.mean().item<double>());
          m["bn.var_noise_from"] = "rows";
        }
      }
    }
    const auto type = lm->info.contains("running_stats");
    torch::jit::Module mod;
    for (const auto& mi : s.model.modules)
      if (mi.path == t.module) mod = mi.module;
    const bool has_running = mod._ivalue() && mod.type()->hasAttribute("running_mean") &&
                             mod.attr("running_mean").isTensor() && mod.attr("running_var").isTensor();
    m["bn.has_running_stats"] = has_running;
    (void)type;
    // Batch statistics from fewer than 16 values per channel are noise (the
    // standard error of a mean of n values is 1/sqrt(n) standard deviations),
    // unless many channels average it out: with 8 values the per-channel
    // mean |z| expected from sampling alone is sqrt(2/pi/8) = 0.28 and the
    // geometric mean of the variance ratio about 0.75 (E log(chi2_7 / 8)),
    // both well inside BN001-BN003's gates (1 and 4x), and over 16 or more
    // channels their averages hold still. A BatchNorm1d head on pooled
    // features [8, 384] is judged so (eval23 case 37: running_var 0.35
    // against a batch variance of 0.006 went unseen, and the drift it made
    // was blamed on the stem).
    const int64_t sample_values = b.examples * b.spatial;
    const bool enough = sample_values >= 16 || (sample_values >= 8 && channels >= 16);
    m["bn.sample_values_per_channel"] = b.examples * b.spatial;
    if (has_running) {
      at::Tensor rm = mod.attr("running_mean").toTensor().detach().to(at::kDouble).cpu();
      at::Tensor rv = mod.attr("running_var").toTensor().detach().to(at::kDouble).cpu();
      const bool init = rm.eq(0).all().item<bool>() && rv.eq(1).all().item<bool>();
      m["bn.at_initial_values"] = init;
      // NaN/Inf folded into the running averages (a train-mode batch that
      // overflowed, under AMP one fp16 overflow: GradScaler skips the
      // optimizer step, not the buffers' update) never leave them:
      // 0.9 * NaN + 0.1 * x is NaN.
      m["bn.running_nonfinite_count"] = (~at::isfinite(rm)).sum().item<int64_t>() + (~at::isfinite(rv)).sum().item<int64_t>();
      // A variance below zero is no statistic at all: buffers swapped or
      // misnamed in a conversion (running_mean loaded into running_var), or
      // written by hand. rsqrt(var + eps) of it is NaN in eval mode.
      m["bn.running_var_negative_count"] = rv.lt(0).sum().item<int64_t>();
      m["bn.running_var_min"] = rv.numel() ? metric_number(rv.min().item<double>()) : MetricValue(0.0);
      // Statistics at all (BN002/BN003 compare the data with them; NaN/Inf
      // or a negative variance are BN011's and BN012's, not a data shift).
      m["bn.running_stats_finite"] = m["bn.running_nonfinite_count"] == 0 && m["bn.running_var_negative_count"] == 0;
      if (mod.type()->hasAttribute("num_batches_tracked") && mod.attr("num_batches_tracked").isTensor())
        m["bn.num_batches_tracked"] = mod.attr("num_batches_tracked").toTensor().item<int64_t>();
      // momentum in TensorFlow/Keras' convention (the weight of the history,
      // 0.9 or 0.99): PyTorch weighs the new batch by momentum, so above 0.5
      // the running statistics are mostly the last batch's (eval58: a Keras
      // port's BatchNorm(momentum=0.99) after a 2-image tail batch, BN002,
      // whose fixes blamed the data). None (a cumulative average) is not.
      {
        bool keras = false;
        if (mod.hasattr("momentum") && mod.attr("momentum").isDouble()) {
          const double mo = mod.attr("momentum").toDouble();
          m["bn.momentum"] = mo;
          keras = mo > 0.5;
        }
        m["bn.momentum_keras"] = keras;
      }
      // A FrozenBatchNorm at 0/1 counts too: torchvision's FrozenBatchNorm2d
      // starts so and expects its statistics from a checkpoint, and frozen,
      // training can never estimate them.
      if (init) {
        ++at_init;
        if (at_init <= 8) at_init_names += (at_init_names.empty() ? "" : ", ") + t.module;
        // A BatchNorm with no place in the execution order (it ran in the
        // eval pass only, or not where the order was taken: a detection
        // head whose outputs the wrapper drops) comes after every one that
        // has a place (SSDlite named its regression head first, eval27).
        const int64_t order = lm->exec_order >= 0 ? lm->exec_order : std::numeric_limits<int64_t>::max() - 1;
        if (order < first_at_init_order) {
          first_at_init_order = order;
          first_at_init = t.module;
        }
      }
      if (enough && rm.numel() == channels) {
        const double eps = lm->info.contains("eps") && lm->info["eps"].is_number() ? lm->info["eps"].get<double>() : 1e-5;
        at::Tensor z = (b.mean - rm).abs() / (rv + eps).sqrt();
        at::Tensor ratio = (b.var + eps) / (rv + eps);
        const double gm = ratio.log().mean().exp().item<double>();
        m["bn.mean_z"] = metric_number(z.mean().item<double>());
        m["bn.mean_z_max"] = metric_number(z.max().item<double>());
        // What sampling alone gives: the batch mean's standard error (the
        // per-example means' spread / sqrt(examples)) in running standard
        // deviations; a half-normal's mean is sqrt(2 / pi) of its scale.
        // The units whose spread gives the sampling noise of the sample's
        // statistics: its examples. Rows that fold several per example into
        // the batch axis ([B, N, C] viewed as [B * N, C]: PyG's dense
        // DiffPool runs BatchNorm1d over the nodes of 6 graphs, 60 rows)
        // move together example by example, so the units are the B
        // examples (their means, and their variances around them), not
        // N * B independent rows (eval35 C02: 1/sqrt(60) called a healthy
        // layer's mean_z of 1.9 stale, and 4 graphs' variance off by 5x).
        at::Tensor um = b.example_mean, uv = b.example_var;
        int64_t units = b.examples;
        if (batch >= 2 && b.examples > batch && b.examples % batch == 0) {
          const at::Tensor g = um.reshape({batch, b.examples / batch, um.size(1)});
          uv = uv.reshape({batch, b.examples / batch, uv.size(1)}).mean(1) + g.var(1, /*unbiased=*/false);
          um = g.mean(1);
          units = batch;
          m["bn.noise_units"] = std::to_string(batch) + " examples (" + std::to_string(b.examples) + " rows, " +
                                std::to_string(b.examples / batch) + " per example)";
        } else if (batch >= 2 && b.examples > batch) {
          // Rows gathered from the examples in unequal numbers (a BatchNorm
          // over the real nodes x[mask] of a dense graph batch, the real
          // frames of padded utterances): which rows come from which
          // example is not known, and the rows of one example move
          // together. The noise is taken as that of `batch` units with the
          // rows' spread, the largest it can be (every example's rows
          // alike), so that sampling noise is not called staleness (eval57
          // GIN: BN009 on statistics re-estimated over 100 batches, the mean
          // 0.26 running standard deviations off on 240 nodes of 16 graphs).
          units = batch;
          m["bn.noise_units"] = "at most " + std::to_string(batch) + " examples (" + std::to_string(b.examples) +
                                " rows gathered from them, taken as " + std::to_string(batch) + " rows' worth of noise)";
        }
        if (units >= 2) {
          const double n = static_cast<double>(units);
          const double expected =
              (um.std(0) / std::sqrt(n) / (rv + eps).sqrt()).mean().item<double>() * std::sqrt(2.0 / M_PI);
          m["bn.mean_z_noise"] = metric_number(expected);
          m["bn.mean_z_over_noise"] = expected > 0 ? metric_number(z.mean().item<double>() / expected) : MetricValue("inf");
          // The mean off beyond what sampling gives (BN002's data gates):
          // then the mean is the finding, and BN003 does not repeat it.
          m["bn.mean_beyond_noise"] = z.mean().item<double>() > 1 && (expected <= 0 || z.mean().item<double>() > 3 * expected);
        }
        m["bn.var_ratio"] = metric_number(gm);
        m["bn.var_ratio_off"] = metric_number(std::max(gm, 1.0 / gm));
        // What sampling alone gives the variance ratio: the sample's batch
        // variance recomputed over its units drawn with replacement (64
        // bootstrap draws, fixed seed), the spread of log(var_ratio). With
        // few units a channel's batch variance swings by several times (a
        // ReLU channel all but off in 4 graphs), so a far-off ratio is
        // judged against it (BN003: bn.var_ratio_over_noise > 3).
        if (units >= 2) {
          constexpr int64_t kDraws = 64;
          std::mt19937_64 rng(0x5eedULL);
          std::uniform_int_distribution<int64_t> pick(0, um.size(0) - 1);  // `units` draws from every row
          at::Tensor idx = at::empty({kDraws, units}, at::kLong);
          auto* p = idx.data_ptr<int64_t>();
          for (int64_t i = 0; i < kDraws * units; ++i) p[i] = pick(rng);
          const at::Tensor sm = um.index_select(0, idx.flatten()).reshape({kDraws, units, um.size(1)});
          const at::Tensor sv = uv.index_select(0, idx.flatten()).reshape({kDraws, units, uv.size(1)});
          const at::Tensor var_r = sv.mean(1) + (sm - sm.mean(1, /*keepdim=*/true)).pow(2).mean(1);
          const at::Tensor log_gm = ((var_r + eps) / (rv + eps)).log().mean(1);
          const double sd = log_gm.std().item<double>();
          // A geometric mean of few units' variances is biased low (a log
          // of a variance from 8 examples, a ReLU channel on in 2 of them):
          // the bootstrap's own shift of it, subtracted (Efron's bias
          // correction), centres the ratio before it is judged.
          const double bias = log_gm.mean().item<double>() - std::log(gm);
          const double centred = std::log(gm) - bias;
          m["bn.var_ratio_noise"] = metric_number(std::exp(sd));
          m["bn.var_ratio_over_noise"] =
              sd > 0 ? metric_number(std::abs(centred) / sd) : (gm == 1 ? MetricValue(0.0) : MetricValue("inf"));
          // Fewer than 8 units: the bootstrap of so few sees a fraction of
          // the spread (4 images on a 4x4 map: the ratio read 0.118 and 7.6
          // times its bootstrap noise, while other batches of 4 from the same
          // data gave 0.096 to 3.0; eval40 yolov8n). Not judged: BN008 says
          // the batch is small.
          m["bn.var_ratio_units"] = units;
          if (units < 8) m["bn.var_ratio_over_noise"] = 0.0;
        }
        // The same against the train-mode pass's batch statistics: what the
        // running statistics estimate (upstream BatchNorms on batch
        // statistics, dropout and drop-path active). Stale statistics are off
        // there too; a deep layer whose eval-mode input drifted from its
        // train-mode one (torchvision EfficientNet's stochastic depth
        // upstream, eval16: 0.232 in eval, 0.82 in train) is not stale. The
        // eval pass's values where the train pass has none for this layer.
        // The three together (issue 16.8): the RMS difference between the
        // eval-mode output (running statistics) and the train-mode output
        // (batch statistics) of this layer, in units of the batch-normalized
        // output: per channel sqrt((sqrt(ratio) - 1)^2 + z^2), RMS over
        // channels (bn.eval_error below, and against the train-mode input).
        auto combined_error = [](const at::Tensor& r, const at::Tensor& zz) {
          return ((r.sqrt() - 1).pow(2) + zz.pow(2)).mean().sqrt().item<double>();
        };
        const double err = combined_error(ratio, z);
        double gm_train = gm, z_train = z.mean().item<double>(), err_train = err;
        std::string from = "eval pass (the train pass has no statistics of this layer)";
        if (train_p && train_p->collector) {
          const auto& tr = train_p->collector->records()[static_cast<size_t>(t.id)];
          if (tr.bn.mean.defined() && tr.bn.mean.numel() == channels && tr.bn.examples * tr.bn.spatial >= 16) {
            const at::Tensor ratio_t = (tr.bn.var + eps) / (rv + eps);
            const at::Tensor z_t = (tr.bn.mean - rm).abs() / (rv + eps).sqrt();
            gm_train = ratio_t.log().mean().exp().item<double>();
            z_train = z_t.mean().item<double>();
            err_train = combined_error(ratio_t, z_t);
            from = "train pass";
          }
        }
        // How much the dropout ops upstream inflate this layer's input
        // variance in training: the train pass's variance over the same
        // forward's without dropout (geometric mean over channels; 1 when
        // no dropout reaches it). The variance shift that dropout causes in
        // the running statistics is at most about this (Li et al. 2019).
        if (train_p && train_p->collector && nodrop_bn_p && nodrop_bn_p->collector) {
          const auto& tr = train_p->collector->records()[static_cast<size_t>(t.id)];
          const auto& nd = nodrop_bn_p->collector->records()[static_cast<size_t>(t.id)];
          if (tr.bn.var.defined() && nd.bn.var.defined() && tr.bn.var.numel() == channels &&
              nd.bn.var.numel() == channels) {
            const double g = ((tr.bn.var + eps) / (nd.bn.var + eps)).log().mean().exp().item<double>();
            if (std::isfinite(g)) m["bn.dropout_var_gain"] = g;
          }
        }
        m["bn.eval_error_train"] = metric_number(err_train);
        m["bn.var_ratio_train"] = metric_number(gm_train);
        // The eval-mode ratio compounds the BatchNorms before this one (their
        // running statistics shape its eval-mode input); the train-mode
        // pass's, with batch statistics upstream, is this layer's own. When
        // they differ by more than 2x, both are said (eval36 D03: FBNetV3's
        // 0.0098 in eval was 0.40 in train).
        {
          const double off_eval = std::max(gm, 1.0 / gm), off_train = std::max(gm_train, 1.0 / gm_train);
          std::string note;
          if (from == "train pass" && std::isfinite(off_eval) && std::isfinite(off_train) && off_eval > 2 * off_train) {
            char nb[64];
            std::snprintf(nb, sizeof nb, "%.3g", gm_train);
            note = std::string("; in a train-mode pass, where the BatchNorms before it use batch statistics, the ratio is ") +
                   nb + "x: most of the gap comes from the running statistics of the layers before it";
          }
          m["bn.var_ratio_train_note"] = note;
        }
        m["bn.var_ratio_off_train"] = metric_number(std::max(gm_train, 1.0 / gm_train));
        m["bn.mean_z_train"] = metric_number(z_train);
        m["bn.train_stats_from"] = from;
        // bn.eval_error's floor is the sampling noise of the sample batch's
        // own statistics, from the spread of the per-example statistics.
        m["bn.eval_error"] = metric_number(err);
        if (units >= 2) {
          const double n = static_cast<double>(units);
          at::Tensor sd = b.var.clamp_min(1e-12).sqrt();
          at::Tensor mn = um.std(0) / std::sqrt(n) / sd;
          at::Tensor vn = uv.std(0) / std::sqrt(n) / b.var.clamp_min(1e-12);
          const double floor = (mn.pow(2) + (vn / 2).pow(2)).mean().sqrt().item<double>();
          m["bn.eval_error_floor"] = metric_number(floor);
          m["bn.eval_error_over_floor"] = floor > 0 ? metric_number(err / floor) : MetricValue("inf");
        }
      }
    }
  }
  mm["bn.layers"] = bn_layers;
  // BN007 judges the noise at the real per-step batch only when it was given;
  // otherwise BN008 says what was assumed (the sample's batch size).
  mm["bn.train_batch_size_given"] = s.opt.train_batch_size > 0;
  // Whether the batch BN006 judges is only assumed to be the training batch:
  // no --train-batch-size, and the model was saved in eval mode (an inference
  // checkpoint checked on one example says nothing of how it was trained;
  // BN010 states the assumption at info).
  mm["bn.training_batch_assumed"] = s.opt.train_batch_size <= 0 && !s.model.saved_training;
  if (bn_layers > 0) {
    // BatchNorm layers whose running statistics hold NaN/Inf (BN011), in
    // execution order.
    std::vector<std::pair<int64_t, std::string>> bad;
    for (const auto& l : s.doc.layers) {
      auto it = l.metrics.find("bn.running_nonfinite_count");
      if (it != l.metrics.end() && it->second.is_number() && it->second.get<double>() > 0) bad.push_back({l.exec_order, l.path});
    }
    std::sort(bad.begin(), bad.end());
    mm["bn.layers_running_nonfinite"] = static_cast<int64_t>(bad.size());
    if (!bad.empty()) {
      std::string names;
      for (size_t i = 0; i < bad.size() && i < 8; ++i) names += (i ? ", " : "") + bad[i].second;
      if (bad.size() > 8) names += ", ... (" + std::to_string(bad.size() - 8) + " more)";
      mm["bn.first_layer_running_nonfinite"] = bad.front().second;
      mm["bn.layers_running_nonfinite_names"] = names;
    }
    // ... and whose running_var holds negative values (BN012).
    std::vector<std::pair<int64_t, std::string>> neg;
    for (const auto& l : s.doc.layers) {
      auto it = l.metrics.find("bn.running_var_negative_count");
      if (it != l.metrics.end() && it->second.is_number() && it->second.get<double>() > 0) neg.push_back({l.exec_order, l.path});
    }
    std::sort(neg.begin(), neg.end());
    mm["bn.layers_running_var_negative"] = static_cast<int64_t>(neg.size());
    if (!neg.empty()) {
      std::vector<std::string> names;
      for (const auto& [o, p] : neg) names.push_back(p);
      mm["bn.first_layer_running_var_negative"] = neg.front().second;
      mm["bn.layers_running_var_negative_names"] = short_list(names, 8);
    }
    mm["bn.layers_at_init"] = at_init;
    // A file saved in training mode that the user says will be trained
    // (--target, --lr, --optimizer-state: run.training_intent) is a model
    // before its training: its BatchNorms use batch statistics there and
    // training estimates the running ones, so initial values are expected,
    // not stale (eval39 C03: a fresh residual MLP checked before training
    // failed CI on BN001 alone).
    {
      auto intent = mm.find("run.training_intent");
      mm["bn.at_init_before_training"] =
          s.model.saved_training && intent != mm.end() && intent->second.is_boolean() && intent->second.get<bool>();
      // The same file during its training: running statistics that fit the
      // batch only roughly (BN009's combined gate) are still being
      // estimated, 1 / momentum steps behind weights that move (eval45 C3:
      // a PointNet++ checkpoint saved mid-epoch after 20 steps, given
      // --target, exited 1 on BN009 alone). BN002 and BN003, each past its
      // own gate, still report statistics far off.
      mm["bn.estimating_in_training"] = mm["bn.at_init_before_training"];
    }
    if (at_init > 0) {
      if (at_init > 8) at_init_names += ", ... (" + std::to_string(at_init - 8) + " more)";
      mm["bn.first_layer_at_init"] = first_at_init;
      mm["bn.layers_at_init_names"] = at_init_names;
      // What the initial statistics do in eval mode. A traced graph that
      // baked training=True into the layer's batch_norm normalizes with
      // batch statistics in eval too (MODE002): the initial statistics are
      // then those of the Python model's eval mode, not of this file's.
      bool baked_true_here = false;
      for (const auto& mo : im.mode_ops())
        if (mo.op == "batch_norm" && mo.baked && mo.baked_value && mo.module == first_at_init) baked_true_here = true;
      mm["bn.at_init_consequence"] =
          baked_true_here ? std::string(", so the model's eval-mode outputs are not normalized once its batch_norm ops follow "
                                        "the mode (this ") +
                                (s.model.kind == "exported" ? "exported" : "traced") +
                                " graph baked training=True into them: the file itself normalizes with batch statistics "
                                "in eval too, MODE002)"
                          : std::string(", so eval-mode outputs are not normalized");
      // FrozenBatchNorm2d (torchvision's detection backbones) holds buffers
      // that nothing updates: no train-mode pass and no update_bn (which
      // only visits _BatchNorm modules) can estimate them; they come from
      // the checkpoint the backbone was frozen from.
      bool frozen = false;
      for (const auto& no : im.norm_ops())
        if (no.module == first_at_init && no.op == "frozen_batch_norm") frozen = true;
      // Which fixes fit (BN001): a calibration pass cannot estimate frozen ones.
      mm["bn.first_at_init_frozen"] = frozen;
      // At their initial values although training ran: momentum 0 weighs
      // each new batch by 0, so the statistics never move while
      // num_batches_tracked counts on (a Keras port: PyTorch's momentum is
      // the new batch's weight, 1 - Keras' momentum; pointnet ports copy
      // momentum=0.0, eval36 C01).
      int64_t momentum_zero = 0, tracked = 0;
      for (const auto& mi : s.model.modules) {
        const LayerMetrics* l = s.doc.find_layer(mi.path);
        if (!l || !l->metrics.count("bn.at_initial_values") || l->metrics.at("bn.at_initial_values") != true) continue;
        if (!mi.module._ivalue() || !mi.module.hasattr("momentum")) continue;
        const c10::IValue mo = mi.module.attr("momentum");
        auto nb = l->metrics.find("bn.num_batches_tracked");
        const int64_t n = nb != l->metrics.end() && nb->second.is_number() ? nb->second.get<int64_t>() : 0;
        if (mo.isDouble() && mo.toDouble() == 0.0 && n > 0) {
          ++momentum_zero;
          tracked = std::max(tracked, n);
        }
      }
      mm["bn.at_init_momentum_zero"] = momentum_zero;
      mm["bn.at_init_reason"] = std::string("they were never estimated");
      if (momentum_zero > 0) {
        mm["bn.at_init_reason"] = std::to_string(momentum_zero) + " of them have momentum=0.0, which weighs every new batch by "
                                  "0: training never moved them although num_batches_tracked counts " +
                                  std::to_string(tracked) + " batches";
      }
      if (frozen)
        mm["bn.at_init_consequence"] =
            mm["bn.at_init_consequence"].get<std::string>() +
            "; these are frozen BatchNorms (x * scale + shift from fixed buffers) that no train-mode pass or update_bn "
            "updates: load the pretrained weights the backbone was frozen from";
    }
  }

  // Stale running statistics, as the rules BN001-BN003 and BN009 judge them
  // (their thresholds), so the train/eval drift they cause is reported with
  // them and not again by BN004 (one cause, one finding).
  auto val = [](const MetricMap& m, const char* k, double dflt) {
    auto it = m.find(k);
    return it != m.end() && it->second.is_number() ? it->second.get<double>() : dflt;
  };
  // Whether a deviation measured in the eval pass is the running
  // statistics' (bn.train_confirms): the layer's input in the train-mode
  // pass, which the running statistics estimate, deviates too (half the eval
  // gates: mean z 0.5, variance ratio 2x, combined error 0.125 and 2.5x its
  // noise floor), or some
  // BatchNorm of the model is stale against its train-mode input (combined
  // error above 0.25 and 5x its noise floor: then eval-mode inputs downstream
  // move with it, as stale statistics compound). A deviation in eval only,
  // with every layer fitting its train-mode input, is the input moving
  // between modes upstream (stochastic depth, eval16's EfficientNet), not
  // stale statistics.
  int64_t train_stale_layers = 0;
  for (const auto& l : s.doc.layers)
    if (l.metrics.count("bn.train_stats_from") && l.metrics.at("bn.train_stats_from") == "train pass" &&
        val(l.metrics, "bn.eval_error_train", 0) > kStaleEvalError &&
        val(l.metrics, "bn.eval_error_train", 0) > kStaleOverFloor * val(l.metrics, "bn.eval_error_floor", 0))
      ++train_stale_layers;
  if (bn_layers > 0) mm["bn.train_mode_stale_layers"] = train_stale_layers;
  for (auto& l : s.doc.layers) {
    if (!l.metrics.count("bn.var_ratio_train")) continue;
    const double err_train = val(l.metrics, "bn.eval_error_train", 0);
    const bool own = val(l.metrics, "bn.mean_z_train", 0) > 0.5 || val(l.metrics, "bn.var_ratio_off_train", 1) > 2 ||
                     (err_train > kStaleEvalError / 2 &&
                      err_train > kStaleOverFloor / 2 * val(l.metrics, "bn.eval_error_floor", 0));
    l.metrics["bn.train_confirms"] = own || train_stale_layers > 0;
  }
  auto confirms = [&](const MetricMap& m) {
    auto it = m.find("bn.train_confirms");
    return it == m.end() || it->second == true;
  };
  auto is_stale_single = [&](const MetricMap& m) {  // BN001, BN002, BN003's gates
    auto it = m.find("bn.at_initial_values");
    if (it != m.end() && it->second == true) return true;
    if (val(m, "bn.running_nonfinite_count", 0) > 0) return true;  // BN011
    if (val(m, "bn.running_var_negative_count", 0) > 0) return true;  // BN012
    return (val(m, "bn.mean_z", 0) > 1 || val(m, "bn.var_ratio_off", 1) > 4) && confirms(m);
  };
  // ... and past the noise gates of those rules, so that one of them reports
  // it (a point estimate from fewer than 8 examples has no noise floor and
  // is not judged by BN002/BN003: torchvision S3D on 2 clips, eval43).
  auto reported_single = [&](const MetricMap& m) {
    if (!is_stale_single(m)) return false;
    auto it = m.find("bn.at_initial_values");
    if (it != m.end() && it->second == true) return true;
    if (val(m, "bn.running_nonfinite_count", 0) > 0 || val(m, "bn.running_var_negative_count", 0) > 0) return true;
    return val(m, "bn.sample_examples", 0) >= 2 &&
           ((val(m, "bn.mean_z", 0) > 1 && val(m, "bn.mean_z_over_noise", 0) > 3) ||
            (val(m, "bn.var_ratio_off", 1) > 4 && val(m, "bn.var_ratio_over_noise", 0) > 3));
  };
  // BN009's combined gate: the eval-mode output error past its threshold
  // and its noise floor, confirmed by the train pass.
  auto stale_combined = [&](const MetricMap& m) {
    return val(m, "bn.eval_error", 0) > kStaleEvalError && val(m, "bn.eval_error_over_floor", 0) > kStaleOverFloor &&
           confirms(m);
  };
  auto is_stale = [&](const MetricMap& m) { return is_stale_single(m) || stale_combined(m); };
  // Variance shift (Li et al. 2019, "Understanding the disharmony between
  // dropout and batch normalization"): a dropout before the BatchNorm with
  // no normalization between scales its kept values by 1 / (1 - p) in
  // training, so the variance the running statistics average is larger than
  // what the layer sees in eval mode, without dropout. A stale layer whose
  // running_var is too large (batch variance at most 0.8 of it, the mean
  // within its gate) behind such a dropout is that, not statistics that
  // were never estimated: BN013's, and BN003/BN009 step aside.
  std::map<std::string, std::pair<std::string, double>> dropout_before;
  for (const auto& n : im.norm_ops())
    if (n.dropout_upstream_p > 0 && !dropout_before.count(n.module))
      dropout_before[n.module] = {n.dropout_upstream, n.dropout_upstream_p};
  int64_t past_single_gate = 0;
  for (auto& l : s.doc.layers)
    if (l.metrics.count("bn.channels") && l.metrics.count("bn.has_running_stats") && l.metrics["bn.has_running_stats"] == true) {
      l.metrics["bn.stale"] = is_stale(l.metrics);
      past_single_gate += reported_single(l.metrics) ? 1 : 0;
      bool shift = false;
      auto d = dropout_before.find(l.path);
      if (d != dropout_before.end()) {
        l.metrics["bn.dropout_upstream"] = d->second.first.empty() ? std::string("<root>") : d->second.first;
        l.metrics["bn.dropout_upstream_p"] = d->second.second;
        const double vr = val(l.metrics, "bn.var_ratio", 1);
        auto init = l.metrics.find("bn.at_initial_values");
        // Stale in the eval pass, whether or not the train pass confirms
        // it: the running statistics fit the train-mode input, dropout
        // included, by construction; it is eval mode, without the dropout,
        // that they do not fit (eval38 A02: SpeechT5's postnet, BatchNorms
        // behind Dropout(0.5), read as stale statistics by BN004).
        const bool eval_stale = val(l.metrics, "bn.var_ratio_off", 1) > 4 ||
                                (val(l.metrics, "bn.eval_error", 0) > kStaleEvalError &&
                                 val(l.metrics, "bn.eval_error_over_floor", 0) > kStaleOverFloor);
        shift = !(init != l.metrics.end() && init->second == true) && val(l.metrics, "bn.mean_z", 0) <= 1 && vr < 0.8 &&
                vr > 0 && (is_stale(l.metrics) || eval_stale);
        // The dropout must account for the mismatch: its measured variance
        // gain at this layer (bn.dropout_var_gain) reaches the ratio of
        // running_var to the eval variance, within the sampling noise of
        // both (1.5x, or the gain squared when that is larger). A p = 0.1
        // dropout behind attention and a residual (gain ~1.1) does not
        // explain running_var 3.5x the eval variance: statistics from 10
        // batches that still hold a third of their initial value do (eval29
        // C05), and that is BN003's.
        auto gain = l.metrics.find("bn.dropout_var_gain");
        if (shift && gain != l.metrics.end() && gain->second.is_number()) {
          const double g = gain->second.get<double>();
          shift = g > 1.02 && 1 / vr <= std::max(1.5 * g, g * g);
        }
        if (shift) l.metrics["bn.running_to_batch_var"] = metric_number(1 / vr);
      }
      l.metrics["bn.variance_shift"] = shift;
    }
  // A BatchNorm after a variance-shifted one, stale only by the combined
  // gate: its eval input shrank with the shift upstream (the Wide ResNet's
  // next block), the same cause.
  {
    int64_t first_shift = -1;
    for (const auto& l : s.doc.layers) {
      auto it = l.metrics.find("bn.variance_shift");
      if (it != l.metrics.end() && it->second == true && l.exec_order >= 0 &&
          (first_shift < 0 || l.exec_order < first_shift))
        first_shift = l.exec_order;
    }
    for (auto& l : s.doc.layers) {
      auto it = l.metrics.find("bn.variance_shift");
      if (it == l.metrics.end()) continue;
      const bool downstream = first_shift >= 0 && l.exec_order > first_shift && !is_stale_single(l.metrics);
      l.metrics["bn.variance_shift_explains"] = it->second == true || downstream;
    }
  }
  if (bn_layers > 0) mm["bn.layers_past_single_gate"] = past_single_gate;

  // ---- train/eval drift, dropout switched off ----------------------------
  bool share_train = false;
  const std::shared_ptr<const PassResult> train = s.train();
  if (train) {
    // Without dropout ops the train pass (same mode, seed and flags) is the
    // dropout-free train forward: the cache serves it instead of a new run.
    const std::shared_ptr<const PassResult> nodrop = s.pass(normalization_nodropout_spec(true));
    share_train = nodrop == train;
    const c10::IValue& nodrop_output = nodrop->output;
    const Collector& nodrop_collector = *nodrop->collector;
    // The eval reference without dropout and with the switch restored: drift
    // then comes from normalization statistics only (a dropout that ignores
    // the mode is eval-nondeterminism's finding, a baked flag mode-switch's).
    // (The cache serves the eval pass when the flags make them the same.)
    const std::shared_ptr<const PassResult> eval_ref_p = s.pass(normalization_nodropout_spec(false));
    const c10::IValue& eval_ref = eval_ref_p->output;
    const ModuleTapStats eval_ref_stats =
        eval_ref_p == eval_p ? eval_stats : module_stats(im, *eval_ref_p->collector);
    const double drift = Session::relative_difference(nodrop_output, eval_ref);
    mm["drift.rel_output_diff"] = metric_number(drift);
    // The same difference against the train-mode output's norm, the scale
    // the noise floors below are measured on (train-mode outputs moved by
    // batch sampling or a reseed): relative to the eval output it saturates
    // at 1 when eval mode blows the output up, and a noisy small batch then
    // hides a real break (torchvision RegNetX after spiky SGD: eval output
    // norm 916 against 228, drift 0.955 of eval's but 3.8x train's, against
    // half-batch noise 0.49; eval-mode loss 177 against 13.1; eval42). The
    // drift is judged against the noise on whichever scale shows it larger.
    const double drift_train = Session::relative_difference(eval_ref, nodrop_output);
    mm["drift.rel_output_diff_train"] = metric_number(drift_train);
    const double drift_scaled = std::isfinite(drift_train) && std::isfinite(drift) ? std::max(drift, drift_train) : drift;
    // The two outputs' norms. drift is relative to the eval output's norm,
    // so it saturates at 1 when eval mode blows the output up (timm's
    // mobileone_s0 with stale statistics: 2.3e16 in eval against 24.8 in
    // train, eval23): the norms say which way and how far.
    auto output_norm = [](const c10::IValue& v) {
      double sq = 0;
      for (const auto& t : Session::output_tensors(v)) {
        if (!t.is_floating_point()) continue;
        const at::Tensor x = t.detach().to(at::kDouble);
        sq += x.masked_fill(at::isfinite(x).logical_not(), 0).pow(2).sum().item<double>();
      }
      return std::sqrt(sq);
    };
    const double train_norm = output_norm(nodrop_output), eval_norm = output_norm(eval_ref);
    mm["drift.train_output_norm"] = metric_number(train_norm);
    mm["drift.eval_output_norm"] = metric_number(eval_norm);
    std::string norms_note;
    if (train_norm > 0 && eval_norm > 0 && std::isfinite(train_norm) && std::isfinite(eval_norm) &&
        (eval_norm > 10 * train_norm || train_norm > 10 * eval_norm ||
         // eval mode enlarges the output enough that the drift relative to
         // it (the message's figure) understates what it is against training's
         (eval_norm > 2 * train_norm && drift_train > drift))) {
      char nb[160];
      std::snprintf(nb, sizeof nb, " (the output's norm is %.3g in eval mode against %.3g in train mode: %.3gx %s)",
                    eval_norm, train_norm, eval_norm > train_norm ? eval_norm / train_norm : train_norm / eval_norm,
                    eval_norm > train_norm ? "larger" : "smaller");
      norms_note = nb;
    }
    mm["drift.norms_note"] = norms_note;
    // Batch statistics of one example leave out the between-example
    // variance the running statistics hold: drift is expected there (BN004
    // needs two).
    mm["drift.sample_examples"] = batch;
    mm["drift.explained_by_stale_stats"] = false;
    mm["drift.bn_fits"] = false;
    mm["drift.stale_note"] = "";
    // A traced/exported graph with training flags baked in cannot enter the
    // other mode itself; the passes replace the flags by their own mode, so
    // the drift is that of the Python model (the findings must say so).
    const int64_t baked = im.baked_batch_norm() + im.baked_dropout();
    mm["drift.mode_note"] =
        baked > 0 ? "; measured with the " + std::to_string(baked) +
                        " batch_norm/dropout training flags this " + (s.model.kind == "exported" ? "exported" : "traced") +
                        " graph has baked in replaced by each pass's mode, so it is the drift of the Python model "
                        "this file was made from (the file itself cannot switch mode: see MODE003)"
                  : "";
    if (!train->output.isNone())
      mm["drift.rel_output_diff_with_dropout"] = metric_number(Session::relative_difference(train->output, eval.output));
    double d = 0;
    const std::string seen = first_divergence(s, module_stats(im, nodrop_collector), eval_ref_stats, 1e-4, &d);
    const std::string first = seen.empty() ? seen : drift_origin(im, nodrop_collector, seen);
    bool first_instance_tracking = false;
    mm["drift.first_layer_instance_norm_tracking"] = false;
    if (!first.empty()) {
      if (first != seen) mm["drift.first_seen_at"] = seen;
      mm["drift.first_layer"] = first;
      // An InstanceNorm built with track_running_stats=True normalizes with
      // running statistics in eval mode and per image in train mode
      // (CycleGAN/pix2pix use the default False; eval58: BN004's BatchNorm
      // fixes on a CycleGAN generator).
      for (const auto& mi : s.model.modules)
        if (mi.path == first && mi.kind.find("InstanceNorm") != std::string::npos && mi.module._ivalue() &&
            mi.module.hasattr("track_running_stats") && mi.module.attr("track_running_stats").isBool() &&
            mi.module.attr("track_running_stats").toBool())
          first_instance_tracking = true;
      mm["drift.first_layer_instance_norm_tracking"] = first_instance_tracking;
      const LayerMetrics* l = s.doc.find_layer(first);
      // A module that runs batch_norm (measured as one), whatever its class name.
      const bool bn = l && (l->metrics.count("bn.channels") || l->kind.find("BatchNorm") != std::string::npos);
      mm["drift.cause"] = (bn ? std::string("BatchNorm running statistics differ from the batch statistics")
                           : first_instance_tracking
                               ? "the running statistics of " + first +
                                     " (an InstanceNorm built with track_running_stats=True) replace each example's own "
                                     "statistics in eval mode"
                               : "a mode-dependent op other than dropout in " + first) +
                          norms_note;
      // The BatchNorm where the outputs first differ holds running statistics
      // that fit this batch within its sampling floor: the difference there
      // is the small one between batch and running statistics (the biased
      // variance at least), and something after it blows it up (a loss
      // weight exp(12) = 1.6e5 of Kendall's uncertainty weighting over a
      // calibrated backbone: 20.8x the output's norm; eval51
      // mtl_uncertainty_fault).
      if (bn && l) {
        const double own_err = val(l->metrics, "bn.eval_error_over_floor", std::numeric_limits<double>::quiet_NaN());
        if (std::isfinite(own_err) && own_err <= 1.0) {
          mm["drift.bn_fits"] = true;
          char eb[32];
          std::snprintf(eb, sizeof eb, "%.3g", own_err);
          mm["drift.cause"] = "its running statistics fit this batch (eval-mode error " + std::string(eb) +
                              "x its sampling floor), so the outputs differ only slightly there and a later op amplifies "
                              "the difference" + norms_note;
        }
      }
      // Stale where a finding can say so: past the noise gates of BN002,
      // BN003 or BN009 (or at initial or broken values). A layer stale only
      // by its point estimate, with no noise floor to judge it by (fewer than
      // 8 examples: torchvision S3D on 2 clips, running_var 99% initial after
      // 6 batches at momentum 0.001, eval output 15.8x smaller; eval43), does
      // not explain the drift away: BN004 judges it by its own noise gates.
      auto reportable = [&](const MetricMap& m) { return reported_single(m) || stale_combined(m); };
      bool stale = bn && reportable(l->metrics);
      std::string stale_layer = first;
      // The drift starts at a BatchNorm whose statistics fit within their
      // noise but grows at later ones that are stale (a ResNet after a short
      // training: bn1 off by 1.5x its sampling floor, layer2.0.bn2's variance
      // 4.3x): those explain it, and they are reported (BN002/BN003).
      if (!stale && bn) {
        std::vector<std::pair<int64_t, std::string>> stale_bns;
        for (const auto& ol : s.doc.layers)
          if (ol.exec_order >= 0 && reportable(ol.metrics)) stale_bns.push_back({ol.exec_order, ol.path});
        std::sort(stale_bns.begin(), stale_bns.end());
        const double own = val(l->metrics, "bn.eval_error_over_floor", std::numeric_limits<double>::infinity());
        if (!stale_bns.empty() && own < kStaleOverFloor) {
          stale = true;
          stale_layer = stale_bns.front().second;
        }
      }
      mm["drift.explained_by_stale_stats"] = stale;
      // Where the outputs first diverge is not where the statistics are
      // furthest off (a stem BatchNorm off by 0.03 diverges first, a
      // last-stage one on 4x4 maps is off by 0.44: eval25 C04, eval26 C05):
      // BN004 and BN009 name both.
      {
        const LayerMetrics* worst = nullptr;
        double worst_err = 0;
        for (const auto& ol : s.doc.layers) {
          const double e = val(ol.metrics, "bn.eval_error", 0.0);
          if (ol.exec_order >= 0 && std::isfinite(e) && e > worst_err) worst = &ol, worst_err = e;
        }
        const double first_err = l ? val(l->metrics, "bn.eval_error", 0.0) : 0.0;
        if (worst && worst->path != first && worst->path != stale_layer && worst_err > 2 * first_err) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.3g", worst_err);
          mm["drift.largest_note"] = "; the BatchNorm whose running statistics are furthest off this batch is " +
                                     worst->path + " (its eval-mode output " + std::string(buf) +
                                     " of its scale away from the train-mode one)";
        }
      }
      if (stale) {
        mm["drift.stale_layer"] = stale_layer;
        // The stale-statistics finding's message names the drift it causes.
        // A drift of 0 is no consequence to name; an infinite one is an
        // eval-mode output that is all zero (nothing to take a norm of).
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.3g", drift);
        const std::string whose = baked > 0 ? " of the Python model (its mode flags restored)" : "";
        if (std::isinf(drift))
          mm["drift.stale_note"] = "; this is also why the eval-mode output" + whose +
                                   " is all zero where the train-mode output is not, first at " + first;
        else if (drift > 0)
          mm["drift.stale_note"] = "; this is also what makes the train and eval outputs" + whose + " differ by " +
                                   std::string(buf) + " of their norm" + norms_note + ", first at " + first +
                                   (!stale_layer.empty() && stale_layer != first
                                        ? " (where they first differ; the first BatchNorm past the stale-statistics gates is " +
                                              stale_layer + ")"
                                        : std::string());
      }
    }
    // What batch statistics alone move the output by, with running
    // statistics that are exactly right: a BatchNorm over n values per
    // channel misplaces the mean by sigma / sqrt(n) and the standard
    // deviation by about 1 / sqrt(2n) of itself, so its normalized output is
    // off by about sqrt(1.5 / n) of its scale (Gaussian sampling; n = 8, a
    // tabular BatchNorm1d over a batch of 8: 0.43). Values along time or
    // space are not independent (a sensor window's 64 steps move together),
    // so the BatchNorm where the drift starts gives its own measured floor
    // (bn.eval_error_floor, from the spread of the per-example statistics)
    // when it has one. BN004 needs the drift to stand 3x above it.
    double bn_noise = 0;
    {
      int64_t n_min = -1;
      for (const auto& l : s.doc.layers) {
        auto it = l.metrics.find("bn.independent_values_per_channel");
        if (it == l.metrics.end()) it = l.metrics.find("bn.values_per_channel");
        if (it == l.metrics.end() || !it->second.is_number_integer() || it->second.get<int64_t>() <= 0) continue;
        n_min = n_min < 0 ? it->second.get<int64_t>() : std::min(n_min, it->second.get<int64_t>());
      }
      if (n_min > 0) {
        double noise = std::sqrt(1.5 / static_cast<double>(n_min));
        if (const LayerMetrics* at = first.empty() ? nullptr : s.doc.find_layer(first)) {
          auto f = at->metrics.find("bn.eval_error_floor");
          if (f != at->metrics.end() && f->second.is_number() && std::isfinite(f->second.get<double>()) &&
              f->second.get<double>() > noise) {
            noise = f->second.get<double>();
            mm["drift.bn_sampling_noise_from"] = at->path + "'s bn.eval_error_floor";
          }
        }
        mm["drift.bn_values_per_channel_min"] = n_min;
        mm["drift.bn_sampling_noise"] = noise;
        mm["drift.over_bn_noise"] = std::isfinite(drift) ? metric_number(drift_scaled / noise) : MetricValue("nan");
        bn_noise = noise;
      } else {
        mm["drift.over_bn_noise"] = "inf";  // no BatchNorm: nothing samples the batch
      }
    }
    // What the train-mode output moves by with nothing wrong, measured in
    // this run (only when the drift is large enough for BN004 to matter):
    //  - its random ops drawn again (a second seed): train-only augmentation
    //    or stochastic depth written as `if self.training: x * mask`
    //    (torchaudio/NeMo SpecAugment, timm's DropPath) makes every
    //    train-mode output differ from eval by design, as dropout does;
    //  - BatchNorm's batch statistics drawn from half the batch: the outputs
    //    of the first half's examples alone vs in the whole batch. Their
    //    statistics differ by sigma^2 (2/n - 1/n) = sigma^2 / n, the same as
    //    the whole batch's from perfect running statistics, compounded
    //    through every BatchNorm as the drift is (nine BatchNorms after 30
    //    steps of a mean-teacher CNN: 0.52 of drift, each layer within its
    //    sampling noise).
    // BN004 needs the drift 3x above the largest (drift.over_train_noise).
    double train_noise = bn_noise;
    std::string train_noise_from = bn_noise > 0 ? "BatchNorm sampling noise, sqrt(1.5 / n)" : "";
    auto raise_floor = [&](double moved, const std::string& from) {
      if (std::isfinite(moved) && moved > train_noise) {
        train_noise = moved;
        train_noise_from = from;
      }
    };
    if (std::isfinite(drift) && drift > kDriftWorthMeasuring) {
      try {
        PassSpec again = normalization_nodropout_spec(true);
        again.name = "train-nodropout-reseeded";
        again.seed_offset = 1;
        const PassResult r = s.run_pass(again);
        const double moved = Session::relative_difference(r.output, nodrop_output);
        mm["drift.train_random_rel_diff"] = metric_number(moved);
        raise_floor(moved, "random ops of the train-mode forward, drawn with another seed");
      } catch (const PassError& e) {
        mm["drift.train_noise_note"] = std::string("the second train-mode draw failed: ") + e.what();
      }
      if (bn_noise > 0 && batch >= 4 && !layout.axis.empty()) {
        try {
          const int64_t half = batch / 2;
          const at::Tensor idx = at::arange(half, at::kLong);
          PassSpec hp = normalization_nodropout_spec(true);
          hp.name = "train-nodropout-half-batch";
          hp.args = select_examples(s, layout, idx);
          hp.edit = "examples 0.." + std::to_string(half - 1);
          const PassResult r = s.run_pass(hp);
          bool rows = false;
          const c10::IValue full_rows = rows_of(nodrop_output, layout, idx, c10::IValue(), &rows);
          if (rows) {
            const double moved = Session::relative_difference(r.output, full_rows);
            mm["drift.half_batch_rel_diff"] = metric_number(moved);
            raise_floor(moved, "BatchNorm batch statistics of half the batch (examples 0.." + std::to_string(half - 1) +
                                   ") against the whole batch's, train mode");
          }
        } catch (const PassError& e) {
          mm["drift.train_noise_note"] = std::string("the half-batch train-mode pass failed: ") + e.what();
        }
      }
    }
    if (train_noise > 0) {
      mm["drift.train_noise"] = metric_number(train_noise);
      mm["drift.train_noise_from"] = train_noise_from;
      mm["drift.over_train_noise"] = std::isfinite(drift) ? metric_number(drift_scaled / train_noise) : MetricValue("nan");
    } else {
      mm["drift.over_train_noise"] = "inf";  // nothing samples the batch or draws at random
    }
    report["drift_method"] =
        "train-mode forward with every dropout op replaced by identity in the instrumented graph, compared with the "
        "eval-mode forward on the same batch" +
        std::string(share_train ? " (the model has no dropout op: the train pass is that forward)" : "");
  }

  // ---- NaN/Inf in eval mode only ------------------------------------------
  // The eval forward (running statistics) turns non-finite where the train
  // forward of the same batch (batch statistics) is finite: ACT001 judges
  // the train pass and cannot see it. Named at the first module to output
  // NaN/Inf in the eval pass, with its running statistics when they are the
  // cause (BN011).
  if (eval.collector->first_nonfinite_tap() >= 0 &&
      !(mm.count("input.any_nonfinite") && mm["input.any_nonfinite"] == true)) {
    bool train_finite = train && !train->output.isNone();
    if (train_finite)
      for (const at::Tensor& t : Session::output_tensors(train->output))
        if (t.is_floating_point() && !at::isfinite(t.detach()).all().item<bool>()) train_finite = false;
    const std::string culprit = im.taps()[static_cast<size_t>(eval.collector->first_nonfinite_tap())].module;
    LayerMetrics* l = s.doc.find_layer(culprit);
    if (train_finite && l) {
      l->metrics["evalfwd.first_nonfinite"] = true;
      l->metrics["evalfwd.nonfinite_count"] = module_nonfinite(eval_stats, culprit);
      const double rn = val(l->metrics, "bn.running_nonfinite_count", 0);
      const double rneg = val(l->metrics, "bn.running_var_negative_count", 0);
      l->metrics["evalfwd.cause_note"] =
          rn > 0 ? "; its running_mean/running_var hold " + std::to_string(static_cast<int64_t>(rn)) +
                       " NaN/Inf values, which eval mode normalizes with"
          : rneg > 0 ? "; its running_var holds " + std::to_string(static_cast<int64_t>(rneg)) +
                           " negative values, whose square root eval mode takes"
                     : std::string();
      mm["evalfwd.first_nonfinite_layer"] = culprit;
    }
  }

  // ---- nondeterminism in eval mode ----------------------------------------
  {
    PassSpec rep;
    rep.name = "eval-repeat";
    rep.probe = "normalization";
    rep.keep_baked = true;
    // Another random stream for the repeat (the seed is part of the pass's
    // cache key: never served by the eval pass).
    rep.seed_offset = 1;
    const std::shared_ptr<const PassResult> again_p = s.pass(rep);
    const PassResult& again = *again_p;
    const double rep_diff = Session::relative_difference(again.output, eval.output, /*ids=*/true);
    mm["evalrep.rel_diff"] = metric_number(rep_diff);
    // A traced file with dropout baked in training mode (MODE002's): both
    // eval passes above run it, as the file does. Whether the baked ops
    // account for all of the difference: the same two passes with the baked
    // flags following eval() agree then (evalrep.baked_only, which keeps
    // MODE004 from repeating MODE002 with a wrong cause).
    mm["evalrep.baked_only"] = false;
    {
      bool baked_dropout = false;
      for (const auto& mo : im.mode_ops()) baked_dropout = baked_dropout || (mo.op == "dropout" && mo.baked && mo.baked_value);
      if (baked_dropout && rep_diff > 0) {
        try {
          PassSpec a;
          a.name = "eval-baked-flags-off";
          a.probe = "normalization";
          PassSpec b = a;
          b.name = "eval-baked-flags-off-repeat";
          b.seed_offset = 1;
          const std::shared_ptr<const PassResult> ra = s.pass(a);
          const std::shared_ptr<const PassResult> rb = s.pass(b);
          const double d = Session::relative_difference(rb->output, ra->output, /*ids=*/true);
          mm["evalrep.unbaked_rel_diff"] = metric_number(d);
          mm["evalrep.baked_only"] = std::isfinite(d) && d <= 1e-5;
        } catch (const PassError&) {
          // Without the comparison MODE004 reads the difference as it stands.
        }
      }
    }
    // Noise floor of the drift comparison (issue 16.11): the same eval pass
    // repeated. Deterministic kernels give 0 (then any drift is above it).
    if (mm.count("drift.rel_output_diff") && mm["drift.rel_output_diff"].is_number() && std::isfinite(rep_diff)) {
      const double drift = mm["drift.rel_output_diff"].get<double>();
      mm["drift.noise_floor"] = rep_diff;
      mm["drift.over_floor"] = rep_diff > 0 ? metric_number(drift / rep_diff) : MetricValue(drift > 0 ? "inf" : "nan");
    }
    double d = 0;
    const std::string first = first_divergence(s, module_stats(im, *again.collector), eval_stats, 0.0, &d);
    // The module that runs the random op, not the first one to receive its
    // output: a dropout whose training flag is written as a constant true
    // (F.dropout(x, p, training=True) in a forward) ignores eval() by
    // construction. Otherwise the first module whose output differs.
    std::string source, cause;
    bool found = false;
    auto forward_of = [](const std::string& m) { return (m.empty() ? std::string("the model's") : m + "'s") + " forward"; };
    for (const auto& mo : im.mode_ops())
      if (mo.op == "dropout" && mo.constant && mo.constant_value && !mo.baked) {
        source = mo.module;
        found = true;
        cause = "a dropout with training=True written into " + forward_of(source) + ", so eval() cannot switch it off";
        break;
      }
    // The attention that passes SDPA a dropout probability whatever the
    // mode (timm/ViT code with dropout_p=self.attn_drop.p instead of
    // `... if self.training else 0.0`): the first module whose output
    // differs is only its output projection. Or a random op a trace
    // recorded (listed after those): then MODE004's fix is to trace after
    // eval(), not F.dropout's training flag (evalrep.traced_random).
    bool traced_random = false;
    const bool written_dropout = found;  // a dropout written with training=True: MODE004's, whatever else draws
    if (!found && !im.unswitched_random_ops().empty()) {
      traced_random = static_cast<int64_t>(im.unswitched_random_ops().size()) == im.traced_random_ops();
      source = im.unswitched_random_ops().front().first;
      found = true;
      cause = im.unswitched_random_ops().front().second + " in " + forward_of(source) + ", so eval() cannot switch it off";
    }
    // A trace made in eval mode (every batch_norm/dropout flag it baked is
    // False; the root saved in eval when it baked none) recorded no
    // train-mode branch: the random op is the model's own, drawn in every
    // mode (PointNet++'s farthest point sampling from a random start point,
    // SpeechT5's prenet dropout kept on by design, eval38 P01/A02), and
    // tracing after eval() would change nothing.
    bool traced_in_eval = false;
    if (traced_random) {
      const auto baked = im.baked_values();
      traced_in_eval = baked.empty() ? !s.model.saved_training
                                     : std::none_of(baked.begin(), baked.end(), [](bool b) { return b; });
      const std::string& what = im.unswitched_random_ops().front().second;
      // A Gaussian draw keeps its own cause (a sample by design, MODE009).
      if (traced_in_eval && what.find("Gaussian sample") == std::string::npos) {
        cause = what.substr(0, what.find(' ')) + " recorded by a trace made in eval mode (every batch_norm/dropout flag it " +
                "baked is False) in " + forward_of(source) +
                ": the model's own code draws it in every mode (a random sampling step, a dropout kept on by design)";
      }
    }
    mm["evalrep.traced_random"] = traced_random;
    mm["evalrep.traced_in_eval"] = traced_in_eval;
    // Every random op no mode switches is a Gaussian draw the trace
    // recorded: a sample by design (a VAE's posterior sample), stated at
    // info (MODE009) rather than as eval nondeterminism to fix.
    mm["evalrep.gaussian_sampling"] =
        !written_dropout && traced_random && im.gaussian_random_ops() > 0 &&
        im.gaussian_random_ops() == static_cast<int64_t>(im.unswitched_random_ops().size());
    if (!first.empty()) {
      mm["evalrep.first_seen_at"] = first;
      if (found) {
        mm["evalrep.first_layer"] = source;
        mm["evalrep.cause"] = cause;
      } else {
        mm["evalrep.first_layer"] = first;
        mm["evalrep.cause"] = "a random op there or in the code that feeds it ignores eval() (the first module whose output differs)";
      }
    }
  }

  // ---- state an eval forward leaves behind -------------------------------
  // The eval pass wrote to buffers (a hand-written spectral norm's power
  // iteration updating u and v on every call, pytorch#8208; a running
  // normalizer updated in eval): the next call computes with what the last
  // one left, so the same input gives another output. Every pass restores
  // the buffers, so the repeat above cannot see it: the eval forward is run
  // once more first, on the same batch, and the second call is compared.
  mm["evalstate.rel_diff"] = 0.0;
  // A forward that returns its scalar loss is a training step (DINO's
  // DINOLoss updating its teacher center by EMA on every call, eval47
  // dino_center_twin; a training wrapper computing its loss): the state it
  // writes is the training's own update, not an evaluation that changes the
  // model (MODE007 steps aside).
  {
    const auto outs = Session::output_tensors(eval.output);
    mm["evalstate.training_step"] =
        outs.size() == 1 && outs.front().dim() == 0 && outs.front().is_floating_point();
  }
  // A traced or exported file records the update its modules made in the
  // tracing mode (nn.utils.spectral_norm's power iteration runs when
  // training): tracing after eval() removes it (eval39: an SN-GAN
  // discriminator traced in train mode was told to replace PyTorch's own
  // spectral_norm).
  {
    const auto baked = im.baked_values();
    const bool traced = s.model.kind == "traced" || s.model.kind == "exported";
    mm["evalstate.traced_in_train"] = traced && (baked.empty() ? s.model.saved_training
                                                               : std::any_of(baked.begin(), baked.end(), [](bool b) { return b; }));
  }
  if (!s.eval_buffer_writes.empty()) {
    PassSpec st;
    st.name = "eval-after-one-call";
    st.probe = "normalization";
    st.keep_baked = true;
    st.warmup_calls = 1;
    try {
      const PassResult r = s.run_pass(st);
      const double sd = Session::relative_difference(r.output, eval.output, /*ids=*/true);
      mm["evalstate.rel_diff"] = metric_number(sd);
      mm["evalstate.buffers"] = short_list(s.eval_buffer_writes, 6);
      double d = 0;
      const std::string first = first_divergence(s, module_stats(im, *r.collector), eval_stats, 0.0, &d);
      mm["evalstate.first_layer"] = first;
    } catch (const PassError& e) {
      mm["evalstate.note"] = std::string("the second eval call failed: ") + e.what();
    }
  }
  // Parameters the eval forward overwrote, or a plain attribute it set (a
  // one-shot `initialized` flag): a data-dependent initialization on the
  // first call (Glow's ActNorm). Called twice on the same batch it gives the
  // same output, so the repeat above sees nothing; what it does depends on
  // which batch comes first. When the file holds trained values, the first
  // call discards them (rosinality/glow-pytorch #6: the flag a Python
  // attribute, not saved, so a loaded checkpoint re-initializes; eval40
  // C01). Measured: the eval forward called first on the last example
  // alone, then on the batch, against the batch as the first call.
  if (!s.eval_param_writes.empty()) {
    std::vector<std::string> names;
    double rel = -1, moved_sq = 0, base_sq = 0;
    bool constant = true;
    std::string layer, rel_at;
    for (const auto& mi : s.model.modules)
      for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) {
        const std::string n = mi.path.empty() ? p.name : mi.path + "." + p.name;
        auto it = s.eval_param_writes.find(n);
        if (it == s.eval_param_writes.end()) continue;
        if (layer.empty()) layer = mi.path.empty() ? std::string("<root>") : mi.path;
        names.push_back(n);
        if (it->second.rel_change > rel) {
          rel = it->second.rel_change;
          rel_at = n;
        }
        moved_sq += it->second.moved * it->second.moved;
        base_sq += it->second.base * it->second.base;
        constant = constant && it->second.saved_constant;
      }
    mm["evalstate.params_overwritten"] = short_list(names, 4);
    mm["evalstate.params_overwritten_count"] = static_cast<int64_t>(names.size());
    mm["evalstate.param_rel_change"] = metric_number(std::max(rel, 0.0));
    // The largest change is one parameter's (a loc near zero moves by 10x);
    // all of them together is the model's (eval54 C5: 0.05).
    mm["evalstate.param_rel_change_at"] = rel_at;
    mm["evalstate.params_rel_change_all"] =
        metric_number(base_sq > 0 ? std::sqrt(moved_sq / base_sq) : std::numeric_limits<double>::infinity());
    mm["evalstate.overwritten_were_constant"] = constant;
    mm["evalstate.overwrite_layer"] = layer;
    // The other state it set: plain attributes, and buffers (the fixed
    // ActNorm's `initialized` buffer still 0 after an old checkpoint was
    // loaded with strict=False: eval40 C01b).
    std::vector<std::string> state = s.eval_attribute_writes;
    for (const auto& n : s.eval_buffer_writes)
      if (!s.eval_param_writes.count(n)) state.push_back(n);
    mm["evalstate.flags_set"] = state.empty() ? std::string("none") : short_list(state, 4);
    // A buffer among them: the flag is already in the saved state, and the
    // file holds it unset (a checkpoint saved without it, loaded with
    // strict=False: eval54's Glow), so registering it as a buffer is no fix.
    bool buffer_flag = false;
    for (const auto& n : s.eval_buffer_writes) buffer_flag = buffer_flag || !s.eval_param_writes.count(n);
    mm["evalstate.flag_is_buffer"] = buffer_flag;
    if (batch >= 2) {
      PassSpec h;
      h.name = "eval-after-another-batch";
      h.probe = "normalization";
      h.keep_baked = true;
      h.warmup_calls = 1;
      h.warmup_args = select_examples(s, layout, at::tensor({batch - 1}, at::kLong));
      try {
        const PassResult r = s.run_pass(h);
        mm["evalstate.history_rel_diff"] = metric_number(Session::relative_difference(r.output, eval.output, /*ids=*/true));
      } catch (const PassError& e) {
        mm["evalstate.note"] = std::string("the eval call after another batch failed: ") + e.what();
      }
    }
    if (constant)
      s.doc.assumptions.push_back("the eval forward initializes " + short_list(names, 4) +
                                  " from the batch it is given (their saved values are constants: taken as a model before "
                                  "training); every pass here starts from the saved values, as the file's first call does");
  }

  // ---- batch dependence in eval mode --------------------------------------
  if (batch >= 2) {
    mm["batchdep.first_call_init"] = false;
    // As a user runs it (traced flags as saved), dropout off so random masks
    // do not read as batch dependence. Module outputs are measured on
    // example 0 only, to find where example 0 alone and in the batch part.
    auto one = [&](int64_t i) { return at::tensor({i}, at::kLong); };
    auto spec = [&](const char* name, std::vector<c10::IValue> a, int64_t slice0) {
      PassSpec p;
      p.name = name;
      p.probe = "normalization";
      p.keep_baked = true;
      p.dropout = false;
      p.slice0 = slice0;
      // Module tensors of a time-major model hold the batch on axis 1.
      for (int64_t ax : layout.axis) p.slice_axis = std::max(p.slice_axis, ax);
      p.args = std::move(a);
      return p;
    };
    s.run_probe("batch_dependence", [&] {
    // Example 0 alone first: its module-output shapes tell the batch pass
    // how to cut example 0 out of each output (PassConfig::slice_guide).
    PassResult first_alone, last_alone;
    try {
      first_alone = s.run_pass(spec("eval-example0", select_examples(s, layout, one(0)), 0));
      last_alone = s.run_pass(spec("eval-example-last", select_examples(s, layout, one(batch - 1)), 0));
    } catch (const PassError& e) {
      // An eval-mode forward that rejects one example alone while the batch
      // runs: BatchNorm normalizing with batch statistics in eval mode raises
      // "Expected more than 1 value per channel". That is evidence of batch
      // dependence (BN005), recorded before the failure is.
      const std::string what = e.what();
      // The same message comes from F.group_norm and F.instance_norm with one
      // value per group in any mode (PyTorch's _verify_batch_size): only a
      // batch_norm that raised is evidence. Either the last tap that fired is
      // a batch_norm input (aten::batch_norm raised on it), or scripted
      // BatchNorm raised in its own batch-size check before aten::batch_norm:
      // then the first tap the failed pass never reached, in the batch's
      // order (the whole batch, run only then), is that batch_norm's input.
      if (const int64_t t = s.raised_batch_norm(what, spec("eval-batch", {}, batch)); t >= 0) {
        const std::string layer = im.taps()[static_cast<size_t>(t)].module;
        mm["batchdep.max_rel_diff"] = "inf";
        mm["batchdep.worst_example"] = e.pass() == "eval-example0" ? "0" : std::to_string(batch - 1);
        mm["batchdep.reorder_rel_diff"] = "nan";
        // No output to compare: the raise itself is the difference, above any
        // noise floor.
        mm["batchdep.over_floor"] = "inf";
        mm["batchdep.batch"] = batch;
        mm["batchdep.alone_raises"] = true;
        mm["batchdep.compared_as"] = "run alone";
        mm["batchdep.noise_floor_short"] = "none: the raise is the difference";
        if (!layer.empty()) mm["batchdep.first_layer"] = layer;
        mm["batchdep.cause"] = "one example alone raises in eval mode (" + trim_torch_error(what) +
                               "): batch_norm normalizes with batch statistics in eval mode";
      }
      throw;
    }
    PassSpec guided = spec("eval-batch", {}, batch);
    guided.slice_guide = first_alone.collector.get();
    // A graph batch: example 0's node rows in the node tensors.
    auto graph_rows = [&](PassSpec& p, const at::Tensor& index, int64_t k) {
      if (layout.graph_edges < 0) return;
      const at::Tensor pos = layout.graph_positions(index);
      p.slice_rows = layout.graph_node_rows(at::tensor({k}, at::kLong), pos);
      p.slice_rows_of = pos.numel();
    };
    graph_rows(guided, at::arange(batch, at::kLong), 0);
    const PassResult ref = s.run_pass(guided);
    // An output without a batch axis (a scalar: forward returns its own loss
    // over the batch; a batch-pooled vector) has no row for one example:
    // alone and batched differ by construction, and nothing is measured.
    bool rows = false;
    // A tuple output that holds, beside per-example tensors, one without a
    // batch axis (nanoGPT's forward returns (logits, loss), the loss a mean
    // over the batch): that one differs alone and batched by construction
    // and is left out of the comparison (eval14 case 12).
    std::vector<bool> keep;
    if (ref.output.isTuple()) {
      bool any_rows = false, any_batchless = false;
      for (const auto& e : ref.output.toTupleRef().elements()) {
        const bool batchless = e.isTensor() && output_batch_axis(layout, e.toTensor()) < 0;
        keep.push_back(!batchless);
        any_rows = any_rows || (e.isTensor() && !batchless);
        any_batchless = any_batchless || batchless;
      }
      if (!any_rows || !any_batchless) keep.clear();
    }
    auto strip = [&](const c10::IValue& v) -> c10::IValue {
      if (keep.empty() || !v.isTuple() || v.toTupleRef().elements().size() != keep.size()) return v;
      std::vector<c10::IValue> el;
      for (size_t i = 0; i < keep.size(); ++i)
        if (keep[i]) el.push_back(v.toTupleRef().elements()[i]);
      return c10::ivalue::Tuple::create(std::move(el));
    };
    if (!keep.empty()) {
      std::string left;
      for (size_t i = 0; i < keep.size(); ++i)
        if (!keep[i]) left += (left.empty() ? "" : ", ") + std::to_string(i);
      mm["batchdep.outputs_left_out"] = "output element " + left + ": no batch axis (a reduction over the batch)";
    }
    const c10::IValue alone0 = strip(first_alone.output);
    const c10::IValue rows0 = rows_of(strip(ref.output), layout, one(0), alone0, &rows);
    if (!rows) {
      std::string shapes;
      for (const auto& t : Session::output_tensors(ref.output)) shapes += (shapes.empty() ? "" : ", ") + c10::str(t.sizes());
      s.skip_probe("batch_dependence",
                   "the output has no batch axis (" + (shapes.empty() ? std::string("no tensor") : shapes) +
                       " for a batch of " + std::to_string(batch) +
                       ": a scalar or a reduction over the batch, such as a loss the model computes itself); one example "
                       "alone has no row of the batched output to compare with");
      return;
    }
    const double d0 = Session::relative_difference(alone0, rows0, /*ids=*/true);
    const double d1 = Session::relative_difference(
        strip(last_alone.output), rows_of(strip(ref.output), layout, one(batch - 1), alone0), /*ids=*/true);
    at::Tensor rev = at::arange(batch - 1, -1, -1, at::kLong);
    PassResult rr = s.run_pass(spec("eval-reversed", select_examples(s, layout, rev), 0));
    const double dr = Session::relative_difference(
        rows_of(rr.output, layout, rev, first_alone.output, nullptr, layout.graph_positions(rev)), ref.output, /*ids=*/true);
    // An eval forward with random ops beyond dropout (a drop-path drawing
    // torch.rand(B, 1, 1) baked by a trace in train mode, HF Segformer):
    // one example alone draws other random numbers than its row of the
    // batch, and the reordered batch moves the draws to other examples, so
    // both read randomness as batch dependence. Example 0 is then compared
    // in a batch of the same size made of copies of itself, under the same
    // seed: the same draws at the same rows, and only what mixes examples
    // (batch statistics, a batch-wide max) changes its row.
    std::optional<PassResult> copies;
    {
      auto er0 = mm.find("evalrep.rel_diff");
      const bool eval_random = er0 != mm.end() && er0->second.is_number() && er0->second.get<double>() > 1e-6;
      if (eval_random) {
        PassSpec cp = spec("eval-batch-copies0", select_examples(s, layout, at::zeros({batch}, at::kLong)), batch);
        cp.slice_guide = first_alone.collector.get();
        graph_rows(cp, at::zeros({batch}, at::kLong), 0);
        try {
          copies = s.run_pass(cp);
        } catch (const PassError& e) {
          mm["batchdep.locate_note"] = std::string("the batch of copies of example 0 failed: ") + e.what();
        }
      }
    }
    const bool first_worse = std::isnan(d1) || d0 >= d1;  // example 0 alone differs at least as much as the last
    const double alone_worst = first_worse ? d0 : d1;
    double worst = alone_worst;
    std::string worst_example = first_worse ? "0" : std::to_string(batch - 1);
    if (copies) {
      worst = Session::relative_difference(
          rows_of(strip(copies->output), layout, one(0), alone0, nullptr, layout.graph_positions(at::zeros({batch}, at::kLong))),
          rows0, /*ids=*/true);
      worst_example = "0";
      mm["batchdep.alone_rel_diff"] = metric_number(alone_worst);
      mm["batchdep.random_eval"] = true;
    }
    mm["batchdep.max_rel_diff"] = metric_number(worst);
    // BN005's fixes tell a reduction over the batch axis (record_batch_axis
    // names it below) from a normalization with batch statistics ("").
    mm["batchdep.batch_axis_op"] = "";
    mm["batchdep.worst_example"] = worst_example;
    mm["batchdep.reorder_rel_diff"] = metric_number(dr);
    // Noise floor (issue 16.11): the same batch reordered. Batch statistics
    // and every per-example op are invariant to the order, so what changes
    // is the kernels' summation order alone.
    // A model that computes in fp16/bf16 cannot agree with itself better
    // than its format's resolution: a batch of one and a batch of four take
    // different GEMM blockings, so their sums round differently (a Llama in
    // fp16 on the CPU: 1.04e-3 relative at q_proj, one fp16 epsilon). The
    // floor is at least the machine epsilon of the lowest-precision float
    // the outputs or parameters hold (fp16 9.8e-4, bf16 7.8e-3, fp32 1.2e-7).
    double eps = 0;
    auto widen = [&](at::ScalarType t) {
      if (at::isFloatingType(t)) eps = std::max(eps, machine_epsilon(t));
    };
    for (const auto& t : Session::output_tensors(ref.output)) widen(t.scalar_type());
    for (const auto& p : s.model.module.parameters(/*recurse=*/true)) widen(p.scalar_type());
    // A reordered batch that differs far beyond the format's resolution in
    // a model whose eval forward is deterministic is no noise: its outputs
    // depend on the examples' order (DeepSpeed-MoE's expert capacity keeps
    // the tokens that come first in the flattened batch and drops the
    // rest), itself a dependence on the batch. The floor is then the
    // precision's resolution.
    auto er = mm.find("evalrep.rel_diff");
    const bool eval_deterministic = er != mm.end() && er->second.is_number() && er->second.get<double>() <= eps;
    const bool order_dependent = !std::isnan(dr) && eval_deterministic && eps > 0 && dr > 100 * eps && dr > 1e-4;
    mm["batchdep.order_dependent"] = order_dependent;
    // Order-dependent: does an example's output follow its index in the
    // batch rather than the other examples? A batch of copies of example 0
    // whose rows differ from one another does (a [T, B, ...] positional
    // table sliced by x.size(0) on a batch-first input gives each example
    // the encoding of its index, eval39 C02): the fix is the axes, not a
    // normalization.
    bool index_dependent = false;
    if (order_dependent && batch >= 2) {
      std::optional<PassResult> own;
      const PassResult* same = copies ? &*copies : nullptr;
      if (!same) {
        PassSpec cp = spec("eval-batch-copies0", select_examples(s, layout, at::zeros({batch}, at::kLong)), batch);
        cp.slice_guide = first_alone.collector.get();
        graph_rows(cp, at::zeros({batch}, at::kLong), 0);
        try {
          own = s.run_pass(cp);
          same = &*own;
        } catch (const PassError&) {
        }
      }
      if (same) {
        const at::Tensor zeros = at::zeros({batch}, at::kLong);
        const double di = Session::relative_difference(
            rows_of(strip(same->output), layout, one(batch - 1), alone0, nullptr, layout.graph_positions(zeros)),
            rows_of(strip(same->output), layout, one(0), alone0, nullptr, layout.graph_positions(zeros)), /*ids=*/true);
        index_dependent = std::isfinite(di) && di > std::max(1e-4, 100 * eps);
        mm["batchdep.index_rel_diff"] = metric_number(di);
      }
    }
    mm["batchdep.index_dependent"] = index_dependent;
    // With copies (random eval), the same shapes and draws: the floor is the
    // precision's resolution.
    double floor = copies ? eps : std::isnan(dr) ? dr : order_dependent ? eps : std::max(dr, eps);
    // A model that amplifies rounding (a saturated tanh stack with N(0, 1)
    // weights: a 1e-7 change of the input moves its output by 1 %, eval13
    // case 02) turns the GEMM-blocking difference between a batch of one
    // and the batch into a large output difference although nothing mixes
    // examples. When the difference would read as batch dependence, the
    // floor is raised to what one unit in the last place of the float
    // inputs does to example 0's output (the batch with every float input
    // scaled by 1 +- its dtype's epsilon, alternating signs).
    bool jitter_floor = false;
    if (!copies && !order_dependent && std::isfinite(floor) && worst > 1e-3 && worst > 10 * floor) {
      std::vector<c10::IValue> a = select_examples(s, layout, at::arange(batch, at::kLong));
      bool any_float = false;
      for (auto& v : a) {
        if (!v.isTensor() || !v.toTensor().is_floating_point() || v.toTensor().numel() == 0) continue;
        const at::Tensor x = v.toTensor();
        const double e = machine_epsilon(x.scalar_type());
        const at::Tensor sign = 1 - 2 * (at::arange(x.numel(), x.options().dtype(at::kLong)) % 2);
        v = (x * (1 + e * sign.to(x.scalar_type()).reshape(x.sizes()))).contiguous();
        any_float = true;
      }
      if (any_float) {
        try {
          PassResult jr = s.run_pass(spec("eval-input-ulp", std::move(a), 0));
          const double dj = Session::relative_difference(rows_of(strip(jr.output), layout, one(0), alone0), rows0, /*ids=*/true);
          mm["batchdep.input_ulp_rel_diff"] = metric_number(dj);
          if (std::isfinite(dj) && dj > floor) {
            floor = dj;
            jitter_floor = true;
          }
        } catch (const PassError& e) {
          mm["batchdep.locate_note"] = std::string("the batch with its inputs moved by one ulp failed: ") + e.what();
        }
      }
    }
    mm["batchdep.noise_floor"] = metric_number(floor);
    mm["batchdep.precision_floor"] = eps;
    mm["batchdep.compared_as"] = copies ? "inside a batch of copies of itself (eval mode draws random numbers: the same draws)"
                                        : "run alone";
    // Where the floor came from: in words for BN005's message (short) and
    // for the evidence (from).
    const bool precision_floor = !jitter_floor && (copies || order_dependent || (!std::isnan(dr) && eps > dr));
    mm["batchdep.noise_floor_short"] = jitter_floor      ? "what one ulp of the inputs does"
                                       : precision_floor ? "the precision's resolution"
                                                         : "the batch reordered";
    mm["batchdep.noise_floor_from"] =
        jitter_floor ? std::string("the change of example 0's output when every float input moves by one unit in the last "
                                   "place: the model amplifies rounding, so the batch of one's other GEMM blocking moves "
                                   "its output as much")
        : !precision_floor ? std::string("the batch reordered")
        : copies ? std::string("the precision's resolution (machine epsilon): eval mode draws random numbers, so example 0 "
                               "is compared inside a batch of copies of itself (same size, same seed, same draws)")
        : order_dependent ? std::string("the precision's resolution (machine epsilon): the batch reordered differs by ") +
                                std::to_string(dr) + ", the outputs depend on the order of the examples"
                          : std::string("the precision's resolution (machine epsilon)");
    mm["batchdep.over_floor"] = std::isnan(worst) || std::isnan(floor) ? MetricValue("nan")
                                : floor > 0                          ? metric_number(worst / floor)
                                                                     : MetricValue(worst > 0 ? "inf" : "nan");
    mm["batchdep.batch"] = batch;
    report["batch_dependence_method"] =
        copies ? "eval mode with dropout off and traced flags as saved; eval mode draws random numbers, so example 0 inside "
                 "a batch of " + std::to_string(batch) + " copies of itself vs inside the batch, same seed"
               : "eval mode with dropout off and traced flags as saved: examples 0 and " + std::to_string(batch - 1) +
                     " alone vs inside the batch, and the batch reversed";
    if (worst > 1e-3) {
      double d = 0;
      // Where the difference starts, traced on the worst example. Example 0
      // alone may match its row (a batch-wide max that example 0 holds
      // itself: Whisper's log-mel floor, log_spec.max() - 8 over the whole
      // batch); then the last example is traced in its own place in the
      // batch, whose module outputs are measured on it (moved to the front,
      // an example that a positional table indexed by the batch axis treats
      // by its position gets row 0, as alone: eval21 case 06).
      const bool last_worst = !copies && !first_worse && d0 <= 1e-3;
      std::optional<PassResult> batched_last;
      if (last_worst) {
        try {
          PassSpec p = spec("eval-batch-last", select_examples(s, layout, at::arange(batch, at::kLong)), batch);
          p.slice_index = batch - 1;
          p.slice_guide = last_alone.collector.get();
          graph_rows(p, at::arange(batch, at::kLong), batch - 1);
          batched_last = s.run_pass(p);
        } catch (const PassError& e) {
          mm["batchdep.locate_note"] = std::string("tracing the last example failed: ") + e.what();
        }
      }
      const Collector& alone_col = copies ? *copies->collector : batched_last ? *last_alone.collector : *first_alone.collector;
      const Collector& batched_col = batched_last ? *batched_last->collector : *ref.collector;
      if (batched_last) mm["batchdep.traced_example"] = std::to_string(batch - 1);
      const std::string seen = first_divergence(s, module_stats(im, alone_col), module_stats(im, batched_col), 1e-4, &d);
      // The module whose own forward runs the batch_norm (timm's
      // BatchNormAct2d: bn1 normalizes, its child bn1.act returns the same
      // tensor), as for the drift.
      std::string first = seen.empty() ? seen : drift_origin(im, batched_col, seen);
      // A module that cannot mix examples (eval-mode dropout, an identity,
      // an elementwise activation) is where the difference is first seen,
      // not where it is made: its input differs already, made by an op of
      // its caller's own forward (the PyTorch tutorial's PositionalEncoding,
      // x + pe[:x.size(0)] before its dropout, on batch-first data: eval21
      // case 06). The caller is named, up to the root.
      std::string seen_in_passthrough;
      if (const LayerMetrics* l = first.empty() ? nullptr : s.doc.find_layer(first); l && l->leaf && elementwise_kind(l->kind)) {
        seen_in_passthrough = first;
        std::string up = first;
        do {
          const size_t dot = up.rfind('.');
          up = dot == std::string::npos ? std::string() : up.substr(0, dot);
          const LayerMetrics* pl = s.doc.find_layer(up);
          if (up.empty() || (pl && pl->exec_order >= 0)) break;
        } while (true);
        first = up;
      }
      // The op before the pass-through module, in its caller's forward.
      const std::string before_passthrough =
          seen_in_passthrough.empty()
              ? std::string()
              : "an op of " + (first.empty() ? std::string("the model") : first) + "'s own forward before " +
                    seen_in_passthrough + " makes an example's output depend on the rest of the batch (" +
                    seen_in_passthrough + " itself passes its input through)";
      if (!seen_in_passthrough.empty() && first.empty()) {
        mm["batchdep.first_seen_at"] = seen_in_passthrough;
        mm["batchdep.first_layer"] = "";
        mm["batchdep.cause"] = before_passthrough;
      } else if (!first.empty()) {
        if (!seen_in_passthrough.empty()) mm["batchdep.first_seen_at"] = seen_in_passthrough;
        else if (first != seen) mm["batchdep.first_seen_at"] = seen;
        mm["batchdep.first_layer"] = first;
        const LayerMetrics* l = s.doc.find_layer(first);
        std::string cause = seen_in_passthrough.empty() ? "an op that mixes examples in " + first : before_passthrough;
        const bool bn_op = l && l->metrics.count("bn.has_running_stats");
        if (l && bn_op && l->kind.find("BatchNorm") != std::string::npos) {
          const bool running = l->metrics.at("bn.has_running_stats") == true;
          cause = im.baked_batch_norm() > 0 ? "a traced graph baked training=True into batch_norm: eval mode still uses batch statistics"
                  : running ? "batch_norm is called with training=True in eval mode: it normalizes with batch statistics"
                            : "BatchNorm without running statistics (track_running_stats=False) normalizes with batch statistics in eval mode";
        } else if (l && l->info.contains("running_stats")) {
          // A written-out batch norm (no aten::batch_norm): it keeps
          // running_mean/running_var buffers, but its eval forward still
          // normalizes with the batch's own statistics.
          cause = l->kind +
                  " has running_mean/running_var buffers but normalizes with the batch's statistics in eval mode: its "
                  "forward does not switch to them when not training";
        } else if (const BatchAxisReduction b = batch_axis_reduction(s, im, first, &batched_col); !b.op.empty()) {
          // A reduction over the batch axis in the first changed module, a
          // module holding it, or the root's own forward (F.normalize(x,
          // dim=0) between encoder and classifier): the op that mixes. A
          // module holding the first changed one runs it in its own forward
          // (torchnlp's Attention: F.softmax(scores, dim=0) between
          // linear_in and linear_out): that module is where it starts.
          const std::string where = b.module.empty() ? std::string("the model's own forward") : b.module;
          const std::string opening = record_batch_axis(mm, b);  // writes batchdep.batch_axis_applied
          cause = opening + " in " + where +
                  (b.normalizes ? ", and its statistic " + mm["batchdep.batch_axis_applied"].get<std::string>() +
                                      ", so each example is normalized with the whole batch's values"
                                : "");
          if (!b.module.empty() && b.module != first && first.rfind(b.module + ".", 0) == 0) {
            if (!mm.count("batchdep.first_seen_at")) mm["batchdep.first_seen_at"] = first;
            mm["batchdep.first_layer"] = b.module;
          }
        }
        // Its buffers written in eval mode (a running normalizer updated
        // outside training): the statistics it normalizes with are the
        // batch's, and its outputs depend on earlier calls.
        std::string writes;
        const std::string owner = mm.count("batchdep.first_layer") ? mm["batchdep.first_layer"].get<std::string>() : first;
        for (const auto& n : s.eval_buffer_writes)
          if (owner.empty() || n.rfind(owner + ".", 0) == 0) writes += (writes.empty() ? "" : ", ") + n;
        // Parameters it overwrote, once (a second call on the same batch
        // gives the same output): a data-dependent initialization from the
        // batch it is first given (Glow's ActNorm). Alone, an example is
        // normalized with its own statistics; that is the initialization,
        // stated by MODE010 (a trained checkpoint) or an assumption (a model
        // before training), not a batch dependence of the model's layers.
        bool init_params = false;
        for (const auto& [n, pw] : s.eval_param_writes)
          if (owner.empty() || n.rfind(owner + ".", 0) == 0) init_params = true;
        auto repeat = mm.find("evalstate.rel_diff");
        const bool one_shot = init_params && repeat != mm.end() && repeat->second.is_number() && repeat->second.get<double>() <= 1e-5;
        if (one_shot) {
          cause += "; in eval mode its forward initializes its parameters (" + writes +
                   ") from the batch it is first given, so alone an example is normalized with its own statistics";
          mm["batchdep.first_call_init"] = true;
        } else if (!writes.empty()) {
          cause += "; in eval mode its forward also writes to its buffers (" + writes +
                   "), so its outputs depend on the calls before";
          mm["batchdep.writes_buffers"] = true;
        }
        // A file whose trace baked training=True into batch_norm ops, the
        // eval passes run as saved: those normalize with batch statistics
        // in every mode, whatever the first changed module is (torchvision's
        // QAT ShuffleNetV2 traced in train mode: its input observer differs
        // first, the baked BatchNorms make most of the difference; eval46).
        const int64_t baked_true = im.baked_batch_norm() - im.baked_batch_norm_false();
        if (baked_true > 0 && cause.rfind("a traced graph baked", 0) != 0)
          cause += "; besides, the trace baked training=True into " + std::to_string(baked_true) +
                   " batch_norm ops, which normalize with the batch's statistics in eval mode too (MODE002)";
        mm["batchdep.cause"] = cause;
      } else if (const BatchAxisReduction b = batch_axis_reduction(s, im, "", &batched_col); !b.op.empty()) {
        // No module's output differs, the model's output does: the op that
        // mixes runs in the root's own forward after its last module.
        mm["batchdep.cause"] = record_batch_axis(mm, b) + " in the model's own forward after its last module";
        mm["batchdep.first_layer"] = "";
      } else {
        // Nothing names it: say so rather than leave the message blank.
        mm["batchdep.cause"] = "no module output of example " + (batched_last ? std::to_string(batch - 1) : std::string("0")) +
                               " differs alone and in the batch by more than 1e-4 (relative): the examples mix in the "
                               "model's own forward, in an op not identified";
        mm["batchdep.first_layer"] = "";
      }
      if (index_dependent && mm["batchdep.cause"].is_string())
        mm["batchdep.cause"] = mm["batchdep.cause"].get<std::string>() +
                               "; the same example at another index of the batch gives another output (a batch of copies "
                               "of example 0 differs row to row by " + [&] {
                                 char b[32];
                                 std::snprintf(b, sizeof b, "%.3g", mm["batchdep.index_rel_diff"].get<double>());
                                 return std::string(b);
                               }() +
                               "): the output follows the example's index, not the other examples (an op reads the batch "
                               "axis as positions, such as a [T, B, ...] positional table sliced by x.size(0) on a "
                               "batch-first input)";
    }
    });
  } else if (batch == 1) {
    s.skip_probe("batch_dependence", "the batch holds one example (" + layout.from +
                                         "): no other example to compare it with; give a batch of two or more");
  }

  // ---- mode problems -----------------------------------------------------
  // Ops whose behaviour follows the mode: a trace's ops with the flag baked
  // as a constant do not (training=False baked: the file runs as in eval
  // whatever its modules' flags say, so a root saved in training mode
  // changes nothing, eval36 C02; training=True baked is MODE002's).
  const int64_t baked_mode_ops = im.baked_batch_norm() + im.baked_dropout();
  const int64_t mode_ops = std::max<int64_t>(0, im.batch_norm_nodes() + im.dropout_nodes() - baked_mode_ops);
  mm["mode.dependent_ops"] = mode_ops;
  mm["mode.saved_training"] = s.model.saved_training;
  int64_t modules_training = 0;
  for (const auto& mi : s.model.modules) modules_training += mi.training ? 1 : 0;
  mm["mode.modules_in_training"] = modules_training;
  // Modules left in training mode inside a root saved in eval mode (a frozen
  // backbone whose BatchNorm layers stayed in train()): the root's flag says
  // eval, but every op that follows its own module's flag (scripted code reads
  // self.training of the BatchNorm or Dropout module) still trains. Traced
  // graphs ignore the flags (they survive as attributes); their ops' baked
  // constants say the same, and MODE002 names the modules.
  {
    std::map<std::string, const ModuleInfo*> by_path;
    for (const auto& mi : s.model.modules) by_path[mi.path] = &mi;
    std::vector<std::string> training_names, baked_names;
    std::set<std::string> seen, seen_baked;
    int64_t ops = 0, frozen = 0;
    bool bn_ops = false, dropout_ops = false;
    for (const auto& mo : im.mode_ops()) {
      if (mo.baked) {
        if (mo.baked_value && seen_baked.insert(mo.module).second) baked_names.push_back(mo.module);
        continue;
      }
      if (mo.constant || mo.module.empty() || s.model.saved_training) continue;
      auto it = by_path.find(mo.module);
      if (it == by_path.end() || !it->second->training) continue;
      ++ops;
      (mo.op == "batch_norm" ? bn_ops : dropout_ops) = true;
      if (!seen.insert(mo.module).second) continue;
      training_names.push_back(mo.module);
      if (param_training(it->second->module, /*recurse=*/false).frozen()) ++frozen;
    }
    mm["mode.submodules_in_training"] = static_cast<int64_t>(training_names.size());
    mm["mode.submodule_ops_in_training"] = ops;
    if (!training_names.empty()) {
      mm["mode.submodules_in_training_names"] = short_list(training_names);
      mm["mode.first_submodule_in_training"] = training_names.front();
      mm["mode.frozen_submodules_in_training"] = frozen;
      mm["mode.submodule_effect"] =
          bn_ops && dropout_ops ? "normalize with batch statistics, update their running statistics and apply dropout"
          : bn_ops              ? "normalize with batch statistics and update their running statistics"
                                : "apply dropout";
    }
    if (!baked_names.empty()) mm["mode.baked_training_true_modules"] = short_list(baked_names);
    // The converse inside a file saved while training: BatchNorms whose
    // parameters are all frozen (requires_grad false) saved in train mode
    // beside modules that do train. A frozen teacher in distillation or a
    // frozen backbone that follows the root's train() keeps normalizing with
    // batch statistics and overwriting its running statistics with every
    // batch, though nothing trains it (vrvlive/knowlege-distillation #2,
    // facebookresearch/unbiased-teacher #47; eval43 C03). Its highest
    // ancestor whose parameters are all frozen names the part (teacher).
    if (s.model.saved_training && s.model.kind != "traced") {
      const bool trainable = param_training(s.model.module, /*recurse=*/true).trainable;
      std::vector<std::string> frozen_bn;
      std::set<std::string> seen_bn;
      for (const auto& mo : im.mode_ops()) {
        if (mo.baked || mo.constant || mo.op != "batch_norm" || mo.module.empty() || !seen_bn.insert(mo.module).second) continue;
        auto it = by_path.find(mo.module);
        if (it == by_path.end() || !it->second->training) continue;
        if (param_training(it->second->module, /*recurse=*/false).frozen()) frozen_bn.push_back(mo.module);
      }
      mm["mode.frozen_bn_in_training"] = trainable ? static_cast<int64_t>(frozen_bn.size()) : int64_t{0};
      if (trainable && !frozen_bn.empty()) {
        std::string owner = frozen_bn.front();
        for (std::string up = parent_module(owner); !up.empty(); up = parent_module(up)) {
          auto a = by_path.find(up);
          if (a == by_path.end()) break;
          if (!param_training(a->second->module, /*recurse=*/true).frozen()) break;
          owner = up;
        }
        // A frozen part with the architecture of a trainable one (the same
        // class and parameter shapes) is a momentum or EMA copy of it: MoCo's
        // encoder_k, BYOL's target network, a mean teacher. Those run in
        // train mode by design (MoCo's shuffle-BN normalizes keys with batch
        // statistics); a distillation teacher is another architecture.
        auto shapes = [](const torch::jit::Module& m) {
          std::vector<std::vector<int64_t>> out;
          for (const auto& p : m.named_parameters(/*recurse=*/true)) out.push_back(p.value.sizes().vec());
          return out;
        };
        std::string copy_of;
        auto ow = by_path.find(owner);
        if (ow != by_path.end()) {
          const auto own_shapes = shapes(ow->second->module);
          for (const auto& mi : s.model.modules) {
            if (mi.path == owner || mi.kind != ow->second->kind || mi.path.rfind(owner + ".", 0) == 0 ||
                owner.rfind(mi.path + ".", 0) == 0)
              continue;
            if (param_training(mi.module, /*recurse=*/true).trainable && shapes(mi.module) == own_shapes) {
              copy_of = mi.path;
              break;
            }
          }
        }
        mm["mode.frozen_bn_in_training_names"] = short_list(frozen_bn);
        mm["mode.frozen_part"] = owner;
        if (!copy_of.empty()) {
          mm["mode.frozen_part_copy_of"] = copy_of;
          mm["mode.frozen_bn_in_training"] = int64_t{0};
          s.doc.assumptions.push_back(owner + " (frozen, in training mode) has the architecture of the trainable " + copy_of +
                                      ": taken as its momentum or EMA copy (MoCo's key encoder, BYOL's target), which runs "
                                      "in training mode by design");
        }
      }
    }
  }
  int64_t baked_true = 0, baked_false = 0;
  for (bool v : im.baked_values()) (v ? baked_true : baked_false)++;
  mm["mode.baked_training_true"] = baked_true;
  mm["mode.baked_training_false"] = baked_false;
  {
    // What training this file would lose, by the kinds of op baked to eval:
    // MODE006's clause (a BERT trace has dropout only; eval20 case 12 was
    // told of "frozen running statistics" it does not have).
    bool bn = false, drop = false;
    for (const auto& mo : im.mode_ops())
      if (mo.baked && !mo.baked_value) (mo.op == "batch_norm" ? bn : drop) = true;
    mm["mode.baked_false_effect"] = bn && drop ? "runs no dropout and normalizes with frozen running statistics"
                                    : bn       ? "normalizes with frozen running statistics"
                                               : "runs no dropout";
  }
  if (baked_true + baked_false > 0) {
    // Confirm on the uninstrumented model: train() and eval() with the same seed.
    std::vector<std::pair<at::Tensor, at::Tensor>> saved;
    for (const auto& b : s.model.module.named_buffers(true)) saved.push_back({b.value, b.value.clone()});
    const bool was = s.model.module.is_training();
    torch::NoGradGuard ng;
    c10::IValue out_train, out_eval;
    try {
      s.model.module.train(true);
      at::manual_seed(s.opt.seed);
      out_train = s.model.module.forward(s.arg_values());
      s.model.module.train(false);
      at::manual_seed(s.opt.seed);
      out_eval = s.model.module.forward(s.arg_values());
      mm["mode.switch_rel_diff"] = metric_number(Session::relative_difference(out_train, out_eval));
      mm["mode.switch_confirmed"] = Session::relative_difference(out_train, out_eval) == 0.0;
    } catch (const std::exception& e) {
      if (is_out_of_memory(e)) throw;  // an error of the run, not a finding (run_check names the stage)
      mm["mode.switch_confirmed"] = "not run: the plain forward raised";
    }
    s.model.module.train(was);
    for (auto& [live, copy] : saved) live.detach().copy_(copy);
    s.doc.passes.push_back({{"name", "plain-train-and-eval"}, {"probe", "normalization"}, {"mode", "train+eval"},
                            {"dropout", true}, {"backward", false}, {"seconds", 0.0}});
    std::ostringstream a;
    a << "the " << (s.model.kind == "exported" ? "exported" : "traced") << " graph has " << baked_true + baked_false << " batch_norm/dropout training flags baked in as constants ("
      << baked_true << " True, " << baked_false << " False); normdoctor replaced them by each pass's mode in its instrumented copy";
    s.doc.assumptions.push_back(a.str());
  }
  report["passes"] = std::string("eval, ") + (share_train ? "train (shared with forward_backward: no dropout op)" : "train-nodropout") +
                     ", eval-repeat, eval-example0, eval-example-last, eval-reversed";
  s.doc.probes["normalization"] = report;
}

const std::vector<std::string>& normalization_writes() {
  // batchdep.: its batch_dependence sub-probe runs inside it
  static const std::vector<std::string> names = {
      "batchdep.", "bn.", "drift.", "evalfwd.", "evalrep.", "evalstate.", "mode."};
  return names;
}

const std::vector<std::string>& batch_dependence_writes() {
  static const std::vector<std::string> names = {
      "batchdep."};
  return names;
}

}  // namespace nd
