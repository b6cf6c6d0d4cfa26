#include "probes/engine.h"

#include <cmath>
#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <regex>
#include <set>
#include <sstream>

#include <torch/torch.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "core/error.h"
#include "model/batch_file.h"
#include "model/op_fallbacks.h"
#include "probes/architecture/architecture.h"
#include "probes/fast_path/fast_path.h"
#include "probes/features/features.h"
#include "probes/forward_backward/forward_backward.h"
#include "probes/gain_convention/gain_convention.h"
#include "probes/inputs/inputs.h"
#include "probes/normalization/normalization.h"
#include "probes/precision/precision.h"
#include "probes/sequence/sequence.h"
#include "probes/timeline/timeline.h"
#include "probes/training/training.h"
#include "probes/session.h"

namespace nd {

namespace {

/// Hands the heap memory a pass freed back to the OS (glibc's malloc_trim;
/// nothing elsewhere). glibc keeps freed chunks for reuse, but a train
/// pass's activations (hundreds of MB on a transformer) leave a heap that
/// later allocations of other sizes fragment around: a reference pass
/// captured for the sequence probe then stacked on that cache, and check
/// peaked at 1.32x the plain train step's resident memory (bench
/// transformer, 7 December; 1.1x with this).
void release_freed_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace

std::string engine_libtorch_version() { return libtorch_version(); }

std::string short_list(const std::vector<std::string>& names, size_t show) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < show; ++i)
    out += (i ? ", " : "") + (names[i].empty() ? std::string("<root>") : names[i]);
  if (names.size() > show) out += ", ... (" + std::to_string(names.size() - show) + " more)";
  return out;
}

std::string trim_torch_error(const std::string& what) {
  // TorchScript interpreter errors end with "RuntimeError: <message>" after a
  // traceback; C++ errors carry "Exception raised from ..." frames.
  std::string s = what;
  auto frames = s.find("\nException raised from");
  if (frames != std::string::npos) s = s.substr(0, frames);
  static const std::regex last_error(R"((?:^|\n)\s*(?:RuntimeError|ValueError|IndexError|TypeError|AssertionError|Exception|builtins\.\w+|torch\.\w+Error):\s*([^\n]*(?:\n[^\n]+)?))");
  std::smatch m;
  std::string found;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), last_error); it != std::sregex_iterator(); ++it)
    found = (*it)[1];
  if (!found.empty()) s = found;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '.')) s.pop_back();
  if (s.size() > 600) s = s.substr(0, 600) + " ...";
  return s;
}

c10::optional<at::Tensor> Session::load_target() {
  if (opt.target_file.empty()) return c10::nullopt;
  BatchFile b = read_batch_file(opt.target_file);
  if (b.positional.size() == 1) return b.positional.front();
  if (b.keyword.size() == 1) return b.keyword.front().second;
  throw load_error(error_kind::kInputLoad, opt.target_file + ": --target must hold one tensor, found " +
                                               std::to_string(b.positional.size() + b.keyword.size()));
}

Session::Session(const CheckOptions& o, const ProgressFn& p)
    : opt(o), precision(o.precision), progress(p), started(std::chrono::steady_clock::now()) {}

void Session::check_timeout(const std::string& where) const {
  if (opt.timeout_seconds <= 0) return;
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (el > opt.timeout_seconds) {
    std::ostringstream ss;
    ss << "--timeout " << opt.timeout_seconds << " s passed during the " << where << " (" << el
       << " s elapsed); raise --timeout or measure fewer passes";
    throw Error(error_kind::kTimeout, ExitCode::kLoad, ss.str());
  }
}

std::vector<c10::IValue> Session::arg_values() const {
  std::vector<c10::IValue> v;
  for (const auto& a : args) v.push_back(a.value);
  return v;
}

std::vector<at::Tensor> Session::output_tensors(const c10::IValue& out) {
  std::vector<at::Tensor> ts;
  std::function<void(const c10::IValue&)> walk = [&](const c10::IValue& v) {
    if (v.isTensor()) ts.push_back(v.toTensor());
    else if (v.isTuple()) for (const auto& e : v.toTupleRef().elements()) walk(e);
    else if (v.isList()) for (const auto& e : v.toListRef()) walk(e);
    else if (v.isGenericDict()) for (const auto& kv : v.toGenericDict()) walk(kv.value());
  };
  walk(out);
  return ts;
}

double Session::relative_difference(const c10::IValue& a, const c10::IValue& b, bool ids_share, const at::Tensor& real) {
  // Outputs present in one mode only: torchvision's GoogLeNet and Inception
  // return (logits, aux2, aux1) with the aux slots None in eval mode
  // (eval32 C10: the drift read NaN). The slots both hold are compared.
  if (a.isTuple() && b.isTuple()) {
    const auto& ea = a.toTupleRef().elements();
    const auto& eb = b.toTupleRef().elements();
    if (ea.size() == eb.size()) {
      std::vector<c10::IValue> ka, kb;
      for (size_t i = 0; i < ea.size(); ++i)
        if (!ea[i].isNone() && !eb[i].isNone()) {
          ka.push_back(ea[i]);
          kb.push_back(eb[i]);
        }
      if (ka.size() < ea.size() && !ka.empty())
        return relative_difference(c10::ivalue::Tuple::create(std::move(ka)), c10::ivalue::Tuple::create(std::move(kb)),
                                   ids_share, real);
    }
  }
  const auto ta = output_tensors(a), tb = output_tensors(b);
  if (ta.size() != tb.size()) return std::numeric_limits<double>::quiet_NaN();
  double num = 0, den = 0;
  bool any_float = false;
  int64_t ids_changed = 0, ids = 0;  // outputs with no floating tensor: class or token ids
  for (size_t i = 0; i < ta.size(); ++i) {
    if (!ta[i].is_floating_point() || !tb[i].is_floating_point()) {
      if (!ta[i].is_floating_point() && !tb[i].is_floating_point() && ta[i].sizes() == tb[i].sizes()) {
        ids_changed += ta[i].ne(tb[i]).sum().item<int64_t>();
        ids += ta[i].numel();
      }
      continue;
    }
    any_float = true;
    if (ta[i].sizes() != tb[i].sizes()) return std::numeric_limits<double>::quiet_NaN();
    at::Tensor x = ta[i].detach().to(at::kDouble), y = tb[i].detach().to(at::kDouble);
    at::Tensor ok = at::isfinite(x).logical_and(at::isfinite(y));
    // In an exact comparison (ids_share: the same eval computation on another
    // batch composition, an eval repeat), a value finite in one output and
    // NaN/Inf in the other is the largest change there is (a batch
    // standardization z.std(0) over one example alone gives NaN), not a
    // value to leave out.
    if (ids_share && at::isfinite(x).ne(at::isfinite(y)).any().item<bool>()) return std::numeric_limits<double>::infinity();
    at::Tensor dx = (x - y).masked_fill(ok.logical_not(), 0), yy = y.masked_fill(ok.logical_not(), 0);
    if (real.defined()) {
      const at::Tensor w = real_position_weights(yy, real);
      if (w.defined()) {
        dx = dx * w;
        yy = yy * w;
      }
    }
    num += dx.pow(2).sum().item<double>();
    den += yy.pow(2).sum().item<double>();
  }
  // A model that returns only ids (argmax predictions, generated tokens):
  // with ids_share, the share of ids that changed (batch dependence and the
  // eval repeat, issue 15.3); without it such outputs compare as 0.
  if (ids_share && !any_float && ids > 0) return static_cast<double>(ids_changed) / static_cast<double>(ids);
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

namespace {

std::string shapes_of(const std::vector<ArgValue>& args) {
  std::ostringstream ss;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) ss << ", ";
    ss << args[i].name << "=";
    if (args[i].value.isTensor()) {
      const auto& t = args[i].value.toTensor();
      ss << t.sizes() << " " << c10::toString(t.scalar_type());
    } else {
      ss << args[i].value.tagKind();
    }
  }
  return ss.str();
}

// Every floating tensor of a (nested) output, named as pick_loss_output names them.
void float_outputs(const c10::IValue& v, const std::string& name, std::vector<std::pair<std::string, at::Tensor>>& out) {
  if (v.isTensor()) {
    if (v.toTensor().defined() && v.toTensor().is_floating_point()) out.push_back({name, v.toTensor()});
  } else if (v.isTuple()) {
    size_t i = 0;
    for (const auto& e : v.toTupleRef().elements()) float_outputs(e, name + "[" + std::to_string(i++) + "]", out);
  } else if (v.isList()) {
    size_t i = 0;
    for (const auto& e : v.toListRef()) float_outputs(e, name + "[" + std::to_string(i++) + "]", out);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict())
      float_outputs(kv.value(), name + "[" + (kv.key().isString() ? kv.key().toStringRef() : std::string("?")) + "]", out);
  }
}

// The same (nested) value with every tensor detached from the autograd graph;
// tuples, lists and dicts are rebuilt, everything else is kept.
c10::IValue detached(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().defined() ? c10::IValue(v.toTensor().detach()) : v;
  if (v.isTuple()) {
    std::vector<c10::IValue> e;
    for (const auto& x : v.toTupleRef().elements()) e.push_back(detached(x));
    return c10::ivalue::Tuple::create(std::move(e));
  }
  if (v.isList()) {
    const auto l = v.toList();
    c10::impl::GenericList out(l.elementType());
    for (const auto& x : l) out.push_back(detached(x));
    return out;
  }
  if (v.isGenericDict()) {
    const auto d = v.toGenericDict();
    c10::impl::GenericDict out(d.keyType(), d.valueType());
    for (const auto& kv : d) out.insert(kv.key(), detached(kv.value()));
    return out;
  }
  return v;
}

// Which of `params` get a nonzero gradient from a seeded random projection
// of `outputs`, sum over them of sum(y * r), r ~ N(0, 1) drawn in order from
// one generator seeded with `seed`: one more backward, with the collector's
// gradient hooks paused so the pass's statistics stay those of the loss. A
// graph the second backward cannot walk reaches none of them.
std::set<const void*> reached_by_projection(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& params,
                                            int64_t seed, bool retain_graph, Collector& col) {
  std::set<const void*> out;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  at::Tensor total;
  for (const auto& t : outputs) {
    const at::Tensor y = t.to(at::kFloat);
    const at::Tensor proj = at::randn(y.sizes(), gen, at::TensorOptions().dtype(at::kFloat)).to(y.device());
    const at::Tensor l = (y * proj).sum();
    total = total.defined() ? total + l : l;
  }
  col.grad_paused = true;
  try {
    const auto g = torch::autograd::grad({total}, params, /*grad_outputs=*/{}, retain_graph,
                                         /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t i = 0; i < params.size() && i < g.size(); ++i)
      if (g[i].defined() && g[i].ne(0).any().item<bool>()) out.insert(params[i].unsafeGetTensorImpl());
  } catch (const std::exception&) {
  }
  col.grad_paused = false;
  return out;
}

// After a cross-entropy loss's backward (graph retained): which parameters
// with an all-zero gradient get one from a random projection of the same
// output (retain_graph kept for reach_of_other_outputs).
void shift_invariant_params(const torch::jit::Module& m, const at::Tensor& y, int64_t seed, Collector& col,
                            PassResult& r) {
  std::vector<at::Tensor> zero;
  for (const auto& p : m.parameters(/*recurse=*/true)) {
    auto it = r.grads.find(p.unsafeGetTensorImpl());
    if (p.requires_grad() && it != r.grads.end() && !it->second.ne(0).any().item<bool>()) zero.push_back(p);
  }
  if (zero.empty() || !y.requires_grad()) return;
  r.shift_invariant_only = reached_by_projection({y}, zero, seed + 13, /*retain_graph=*/true, col);
}

// After the loss's backward (graph retained): which parameters without a
// gradient from the loss do reach one of `others` (outputs the loss did not
// read), asked only for the parameters that got no gradient.
void reach_of_other_outputs(const torch::jit::Module& m, const std::vector<at::Tensor>& others,
                            const std::vector<std::string>& names, int64_t seed, Collector& col, PassResult& r) {
  // Without a gradient from the loss, or with an all-zero one (RAFT's flow
  // encoder reads the all-zero initial flow in the update the loss reads,
  // and the flow of later updates, which other outputs return).
  std::vector<at::Tensor> missing;
  for (const auto& p : m.parameters(/*recurse=*/true)) {
    if (!p.requires_grad()) continue;
    auto it = r.grads.find(p.unsafeGetTensorImpl());
    if (it == r.grads.end() || !it->second.ne(0).any().item<bool>()) missing.push_back(p);
  }
  if (missing.empty()) return;
  // Up to 8 unread outputs: which of them reach those parameters, one
  // backward each (eval54: GRAD009 said Deformable DETR's bbox_embed
  // reaches all six unread outputs; only pred_boxes does).
  const bool each = others.size() >= 2 && others.size() <= 8 && names.size() == others.size();
  r.reach_other_outputs_only = reached_by_projection(others, missing, seed + 11, /*retain_graph=*/each, col);
  if (!each || r.reach_other_outputs_only.empty()) return;
  std::vector<at::Tensor> reached;
  for (const auto& p : missing)
    if (r.reach_other_outputs_only.count(p.unsafeGetTensorImpl())) reached.push_back(p);
  for (size_t i = 0; i < others.size(); ++i)
    if (!reached_by_projection({others[i]}, reached, seed + 11, /*retain_graph=*/i + 1 < others.size(), col).empty())
      r.reaching_outputs += (r.reaching_outputs.empty() ? "" : ", ") + names[i];
}

// Chooses the output that feeds the loss and computes the loss.
// Rule (documented in README): a scalar output is the loss itself; otherwise
// --output-index, else for a dict the "loss" key, then "logits", then the
// first floating tensor; for a tuple/list the first floating tensor. Only
// integer or bool tensors: an undefined tensor, with `desc` saying why.
// No tensor at all: FatalRunError.
at::Tensor pick_loss_output(const c10::IValue& out, const CheckOptions& opt, std::string& desc) {
  std::vector<std::pair<std::string, at::Tensor>> cands;
  std::function<void(const c10::IValue&, const std::string&)> walk = [&](const c10::IValue& v, const std::string& name) {
    if (v.isTensor()) cands.push_back({name, v.toTensor()});
    else if (v.isTuple()) { size_t i = 0; for (const auto& e : v.toTupleRef().elements()) walk(e, name + "[" + std::to_string(i++) + "]"); }
    else if (v.isList()) { size_t i = 0; for (const auto& e : v.toListRef()) walk(e, name + "[" + std::to_string(i++) + "]"); }
    else if (v.isGenericDict()) for (const auto& kv : v.toGenericDict()) walk(kv.value(), name + "[" + (kv.key().isString() ? kv.key().toStringRef() : std::string("?")) + "]");
  };
  walk(out, "output");
  if (cands.empty())
    throw FatalRunError(error_kind::kModelRun, ExitCode::kLoad,
                        "forward returned no tensor (" + std::string(out.tagKind()) + "); normdoctor needs a tensor output to compute a loss");
  if (opt.output_index) {
    if (*opt.output_index < 0 || static_cast<size_t>(*opt.output_index) >= cands.size())
      throw usage_error("--output-index " + std::to_string(*opt.output_index) + " is out of range: forward returned " +
                        std::to_string(cands.size()) + " tensors");
    desc = cands[static_cast<size_t>(*opt.output_index)].first + " (--output-index)";
    return cands[static_cast<size_t>(*opt.output_index)].second;
  }
  for (const char* key : {"loss", "logits"})
    for (auto& [n, t] : cands)
      if (n == std::string("output[") + key + "]" && t.is_floating_point()) { desc = n; return t; }
  for (auto& [n, t] : cands)
    if (t.is_floating_point()) { desc = n; return t; }
  // Class ids (argmax), token ids, masks: the forward-only probes still run.
  desc = "forward returned only integer or bool tensors (" + cands.front().first + " is " +
         std::string(c10::toString(cands.front().second.scalar_type())) + " " + c10::str(cands.front().second.sizes()) +
         "); no gradient can flow, so the backward measurements cannot run";
  return at::Tensor();
}

// The loss of the backward pass. auto: cross-entropy against seeded random
// labels for [N, C] logits; otherwise a random projection,
// sum(output * r) / N with r ~ N(0, 1) seeded. A projection's gradient is a
// random direction whatever the output is, where a mean square of a
// normalized output (LayerNorm/RMSNorm last) is constant and would make
// every gradient vanish. With a padded batch (`real`, [B, T] bool) and an
// output of rank 3 or more whose first two axes are [B, T] (or [T, B]), the
// projection reads real positions only, as a training loss does (labels
// -100 at padding, a masked mean): the outputs at padded positions
// (left-padded queries that attend to nothing) get no gradient.
at::Tensor compute_loss(const at::Tensor& y0, const CheckOptions& opt, const std::string& what,
                        const c10::optional<at::Tensor>& target, std::optional<int64_t> class_axis_hint,
                        const at::Tensor& real, const std::string& real_from, std::string& desc, double& chance) {
  const at::Tensor y = y0.to(at::kFloat);
  if (target) {
    const at::Tensor& t = *target;
    // Class ids: the output's shape without its class axis, which is axis 1
    // (PyTorch's [N, C, d1, ...]) or the last axis (a language model's
    // [B, T, V] logits against [B, T] token ids, as nanoGPT and Hugging Face
    // flatten them: logits.view(-1, V), targets.view(-1)).
    auto without = [&](int64_t axis) {
      std::vector<int64_t> v = y.sizes().vec();
      v.erase(v.begin() + axis);
      return v;
    };
    // When both fit ([B, T, V] with T == V against [B, T] ids), the op
    // writing the output decides: a Linear writes classes last, a
    // convolution on axis 1; without evidence, axis 1 as F.cross_entropy.
    const bool ids = !t.is_floating_point() && t.dim() == y.dim() - 1 && y.dim() >= 2;
    const bool fits1 = ids && t.sizes().vec() == without(1);
    const bool fits_last = ids && y.dim() >= 3 && t.sizes().vec() == without(y.dim() - 1);
    const bool both = fits1 && fits_last;
    const bool last = fits_last && (!fits1 || (class_axis_hint && *class_axis_hint == -1));
    const bool axis1 = fits1 && !last;
    if ((opt.loss == "auto" || opt.loss == "cross_entropy") && (axis1 || last)) {
      const int64_t classes = y.size(axis1 ? 1 : y.dim() - 1);
      const at::Tensor tl = t.to(at::kLong).to(y.device());
      // ignore_index -100 (PyTorch's default) marks positions without a label.
      const at::Tensor labelled = tl.ne(-100);
      if (tl.masked_select(labelled).numel() > 0 &&
          (tl.masked_select(labelled).min().item<int64_t>() < 0 || tl.masked_select(labelled).max().item<int64_t>() >= classes))
        throw load_error(error_kind::kInputMismatch,
                         opt.target_file + ": class ids must lie in 0.." + std::to_string(classes - 1) + " (or be -100, ignored) for " +
                             what + " " + c10::str(y.sizes()) + "; they span " +
                             std::to_string(tl.masked_select(labelled).min().item<int64_t>()) + ".." +
                             std::to_string(tl.masked_select(labelled).max().item<int64_t>()));
      desc = "cross_entropy of " + what + " against --target " + opt.target_file +
             (last && both ? " (classes on the last axis: a Linear writes the output; axis 1 has as many entries)"
              : last       ? " (classes on the last axis)"
              : both && class_axis_hint && *class_axis_hint == 1
                  ? " (classes on axis 1: a convolution writes the output; the last axis has as many entries)"
              : both ? " (classes on axis 1, as F.cross_entropy reads [N, C, d1]; the last axis has as many entries "
                       "and the graph does not say which holds the classes)"
                     : "");
      chance = std::log(static_cast<double>(classes));
      return last ? at::cross_entropy_loss(y.reshape({-1, classes}), tl.reshape({-1}))
                  : at::cross_entropy_loss(y, tl);
    }
    if ((opt.loss == "auto" || opt.loss == "mse") && t.sizes() == y.sizes()) {
      desc = "mean square error of " + what + " against --target " + opt.target_file;
      return (y - t.to(at::kFloat).to(y.device())).pow(2).mean();
    }
    throw load_error(error_kind::kInputMismatch,
                     opt.target_file + ": target " + c10::str(t.sizes()) + " " + std::string(c10::toString(t.scalar_type())) +
                         " does not fit " + what + " " + c10::str(y.sizes()) +
                         " (expected class ids of the output's shape without its class axis, axis 1 or the last, for cross_entropy, or a float tensor of the output's shape for mse)");
  }
  // A scalar is the loss; a [1, 1] is a [B, 1] head's prediction for a
  // batch of one (DIN's click probability served one request at a time,
  // eval54 C4), not a loss.
  if (y.numel() == 1 && y.dim() <= 1 && opt.loss == "auto") {
    desc = "the model's scalar " + what + " (used as the loss)";
    return y.sum();
  }
  std::string kind = opt.loss;
  if (kind == "auto") kind = (y.dim() == 2 && y.size(1) > 1) ? "cross_entropy" : "projection";
  at::Generator gen = at::detail::createCPUGenerator(opt.seed + 7);
  const std::string seed = "seed " + std::to_string(opt.seed);
  if (kind == "cross_entropy") {
    if (y.dim() < 2)
      throw usage_error("--loss cross_entropy needs [N, C] (or [N, C, ...]) logits; forward returned shape " +
                        c10::str(y.sizes()));
    std::vector<int64_t> tshape{y.size(0)};
    for (int64_t d = 2; d < y.dim(); ++d) tshape.push_back(y.size(d));
    at::Tensor target = at::randint(0, y.size(1), tshape, gen, at::TensorOptions().dtype(at::kLong));
    desc = "cross_entropy of " + what + " against random labels (" + seed + ")";
    return at::cross_entropy_loss(y, target.to(y.device()));
  }
  if (kind == "sum") {
    desc = "sum of " + what;
    return y.sum();
  }
  if (kind == "mse") {
    desc = "mean square of " + what;
    return y.pow(2).mean();
  }
  at::Tensor r = at::randn(y.sizes(), gen, at::TensorOptions().dtype(at::kFloat)).to(y.device());
  desc = "random projection of " + what + ", sum(y * r) / N with r ~ N(0, 1) (" + seed + ")";
  // [B, T, F] (or [T, B, F]) outputs only: an image-shaped output whose
  // channels happen to number T (HunyuanDiT's [2, 8, 16, 16] latents beside
  // an 8-token mask, eval52) has no sequence axis to mask.
  if (real.defined() && real.dim() == 2 && y.dim() == 3) {
    const int64_t B = real.size(0), T = real.size(1);
    const bool batch_major = y.size(0) == B && y.size(1) == T;
    const bool time_major = !batch_major && y.size(0) == T && y.size(1) == B;
    if (batch_major || time_major) {
      std::vector<int64_t> shape{y.size(0), y.size(1)};
      for (int64_t d = 2; d < y.dim(); ++d) shape.push_back(1);
      const at::Tensor keep = (time_major ? real.t() : real).to(at::kFloat).reshape(shape).to(y.device());
      r = r * keep;
      desc = "random projection of " + what + " at its real positions, sum(y * r) / N with r ~ N(0, 1) (" + seed +
             ") and r = 0 at the " + std::to_string(real.logical_not().sum().item<int64_t>()) +
             " padded positions, as a training loss skips them (labels -100): " + real_from;
    }
  }
  return (y * r).sum() / static_cast<double>(std::max<int64_t>(1, y.dim() ? y.size(0) : 1));
}

// For a dtype error ("mat1 and mat2 must have the same dtype", "expected
// scalar type Float but found Long"): what the model's parameters hold, the
// dtype forward's floating-point inputs are expected to have.
std::string dtype_hint(const std::string& msg, const torch::jit::Module& m) {
  if (msg.find("dtype") == std::string::npos && msg.find("scalar type") == std::string::npos) return "";
  for (const auto& p : m.parameters(/*recurse=*/true))
    if (p.is_floating_point())
      return "\n  the model's parameters are " + std::string(c10::toString(p.scalar_type())) +
             ": give floating-point inputs that dtype (integer inputs only where forward indexes with them, e.g. token ids)";
  return "";
}

}  // namespace

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  const std::string what = e.what();
  return what.find("DefaultCPUAllocator: can't allocate memory") != std::string::npos ||
         what.find("DefaultCPUAllocator: not enough memory") != std::string::npos ||
         what.find("CUDA out of memory") != std::string::npos || what.find("std::bad_alloc") != std::string::npos;
}

Error out_of_memory_error(const std::string& stage, const std::string& detail, const std::vector<ArgValue>& args) {
  std::string d = detail;
  if (auto at = d.find(" (Triggered internally"); at != std::string::npos) d = d.substr(0, at);
  // "[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: ..." -> "DefaultCPUAllocator: ..."
  if (auto at = d.find("DefaultCPUAllocator: "); at != std::string::npos) d = d.substr(at);
  std::string msg = "out of memory in " + stage + " (" + d + ")";
  if (!args.empty()) msg += "; inputs: " + shapes_of(args);
  msg += "; use a smaller batch: fewer examples in the --input file, or a smaller first dimension in --input-shape";
  return Error(error_kind::kOutOfMemory, ExitCode::kLoad, msg);
}

namespace {
// A pass's entry in the report's probes.passes (key "" until the cache sets it).
nlohmann::json pass_entry(const PassSpec& spec, double seconds) {
  return {{"name", spec.name},
          {"probe", spec.probe},
          {"mode", spec.train_mode ? "train" : "eval"},
          {"dropout", spec.dropout},
          {"backward", spec.backward},
          {"traced_flags", spec.keep_baked ? "as saved" : "follow the pass mode"},
          {"key", ""},
          {"requested_by", nlohmann::json::array({spec.probe + ":" + spec.name})},
          {"seconds", seconds}};
}
}  // namespace

at::Tensor loss_output(const c10::IValue& out, const CheckOptions& opt) {
  std::string which;
  return pick_loss_output(out, opt, which);
}

PassSpec train_pass_spec() {
  PassSpec spec;
  spec.name = "train";
  spec.probe = "forward_backward";
  spec.train_mode = true;
  spec.backward = true;
  spec.features = true;
  return spec;
}

std::string Session::pass_key(const PassSpec& p) const {
  if (p.tap_hook || p.tap_edit || p.reference || p.real_positions.defined() || !p.warmup_args.empty()) return "";
  if (p.instrumented && p.instrumented != inst.get()) return "";
  if (!p.args.empty() && p.edit.empty()) return "";
  if (!inst) return "";
  const bool m = p.train_mode;
  // The value each batch_norm / dropout flag takes in this pass (flag_impl in
  // src/instrument/instrument.cpp): '0'/'1', or 'm' where the model computes
  // it (then it is a function of the mode, which is in the key).
  std::string flags;
  for (const auto& mo : inst->mode_ops()) {
    char c;
    if (mo.baked) {
      const bool v = p.keep_baked ? mo.baked_value : m;
      c = (v && (mo.op != "dropout" || p.dropout)) ? '1' : '0';
    } else if (mo.constant) {
      c = (mo.constant_value && (mo.op != "dropout" || p.dropout)) ? '1' : '0';
    } else if (mo.follows_mode) {
      c = (m && (mo.op != "dropout" || p.dropout)) ? '1' : '0';
    } else {
      c = (mo.op == "dropout" && !p.dropout) ? '0' : 'm';
    }
    flags += c;
  }
  std::string k = std::string(m ? "train" : "eval") + " flags=" + (flags.empty() ? "-" : flags) +
                  " batch=" + (p.edit.empty() ? std::string("as given") : p.edit) +
                  " slice0=" + std::to_string(p.slice0) + "@" + std::to_string(p.slice_axis) +
                  (p.slice_index > 0 ? "#" + std::to_string(p.slice_index) : std::string()) +
                  (p.slice_guide ? " guided" : "") +
                  (p.slice_rows.defined() ? " rows=" + std::to_string(p.slice_rows.numel()) + "/" +
                                                std::to_string(p.slice_rows_of)
                                          : std::string()) +
                  " seed=" + std::to_string(opt.seed + p.seed_offset) +
                  (p.warmup_calls > 0 ? " warmup=" + std::to_string(p.warmup_calls) : std::string());
  // In eval mode grad on or off is another forward (PyTorch's inference fast
  // paths run only without grad); in train mode backward adds to a pass.
  if (!m && p.backward) k += " grad";
  return k;
}

void Session::declare(const PassSpec& spec) {
  const std::string k = pass_key(spec);
  if (k.empty()) return;
  Planned& pl = planned_[k];
  pl.capture = pl.capture || spec.capture;
  pl.batch_norm_stats = pl.batch_norm_stats || spec.batch_norm_stats;
  pl.features = pl.features || spec.features;
  pl.backward = pl.backward || spec.backward;
  ++pl.pending;
}

std::shared_ptr<const PassResult> Session::peek(const PassSpec& spec) const {
  auto it = cache_.find(pass_key(spec));
  if (it == cache_.end() || !it->second.result) return nullptr;  // not run, or raised
  if (spec.features && !it->second.result->features) return nullptr;
  return it->second.result;
}

std::string Session::pass_error(const PassSpec& spec) const {
  auto it = cache_.find(pass_key(spec));
  return it == cache_.end() || !it->second.error ? std::string() : std::string(it->second.error->what());
}

std::string Session::train_pass_error() const {
  if (train()) return "";
  const std::string e = pass_error(train_pass_spec());
  if (e.empty()) return "the train pass did not run";
  const auto at = e.find("raised in the train pass: ");
  return "train-mode forward raised: " + (at == std::string::npos ? e : e.substr(at + 26));
}

void Session::invalidate_passes() { cache_.clear(); }

std::shared_ptr<const PassResult> Session::pass(const PassSpec& spec0) {
  // NORMDOCTOR_NO_PASS_CACHE=1: every request runs its own pass (the test
  // that sharing changes no number compares the two; docs/report.md).
  static const bool no_cache = [] {
    const char* v = std::getenv("NORMDOCTOR_NO_PASS_CACHE");
    return v && *v && std::string(v) != "0";
  }();
  const std::string k = pass_key(spec0);
  if (k.empty()) return std::make_shared<const PassResult>(run_pass(spec0));
  if (no_cache) {
    // Run; the first result of a key stays for peek() (Session::train()).
    PassResult r = run_pass(spec0);
    r.key = k;
    auto result = std::make_shared<const PassResult>(std::move(r));
    if (!cache_.count(k)) cache_[k] = CachedPass{result, std::nullopt, doc.passes.size() - 1};
    return result;
  }
  Planned* pl = nullptr;
  if (auto p = planned_.find(k); p != planned_.end()) pl = &p->second;
  auto served = [&](CachedPass& c, bool first = false) {
    if (!first && c.report_index < doc.passes.size()) {
      nlohmann::json& e = doc.passes[c.report_index];
      e["requested_by"].push_back(spec0.probe + ":" + spec0.name);
    }
    if (pl && pl->pending > 0) --pl->pending;
    std::shared_ptr<const PassResult> r = c.result;
    // Captured module outputs are kept only until every declared request had them.
    if (r && r->collector && r->collector->capture && (!pl || pl->pending == 0) && !keep_captures) cache_.erase(k);
    return r;
  };
  // What every declared request of this key needs, so the first run serves them all.
  PassSpec spec = spec0;
  if (pl) {
    spec.capture = spec.capture || pl->capture;
    spec.batch_norm_stats = spec.batch_norm_stats || pl->batch_norm_stats;
    spec.features = spec.features || pl->features;
    spec.backward = spec.backward || pl->backward;
  }
  auto it = cache_.find(k);
  if (it == cache_.end() && replay_only)
    throw Error(error_kind::kInternal, ExitCode::kInternal,
                "pass '" + spec0.name + "' of the " + spec0.probe + " probe (key " + k + ") is not in the recording");
  if (it != cache_.end()) {
    CachedPass& c = it->second;
    if (c.error) {
      served(c);
      throw *c.error;
    }
    const PassResult& r = *c.result;
    const bool enough = (!spec0.capture || r.collector->capture) &&
                        (!spec0.batch_norm_stats || r.batch_norm_stats) && (!spec0.features || r.features) &&
                        (!spec0.backward || r.backward);
    if (enough) return served(c);
    if (replay_only)
      throw Error(error_kind::kInternal, ExitCode::kInternal,
                  "pass '" + spec0.name + "' of the " + spec0.probe + " probe asks for more than the recording captured");
    // An undeclared request for more than the kept pass captured: run for
    // it alone; the kept one stays for the others.
    if (pl && pl->pending > 0) --pl->pending;
    return std::make_shared<const PassResult>(run_pass(spec));
  }
  CachedPass c;
  try {
    PassResult r = run_pass(spec);
    r.key = k;
    c.result = std::make_shared<const PassResult>(std::move(r));
    c.report_index = doc.passes.size() - 1;
    doc.passes[c.report_index]["key"] = k;
  } catch (const PassError& e) {
    c.error = e;
    c.report_index = doc.passes.size();
    nlohmann::json entry = pass_entry(spec, 0.0);
    entry["key"] = k;
    entry["raised"] = true;
    doc.passes.push_back(std::move(entry));
    CachedPass& kept = cache_.insert_or_assign(k, std::move(c)).first->second;
    served(kept, true);
    throw;
  }
  CachedPass& kept = cache_.insert_or_assign(k, std::move(c)).first->second;
  return served(kept, true);
}

/// The output frames [B, frames] (bool) that cover only real positions of
/// the batch's sequence `real` [B, T] (T > frames): a speech encoder's
/// feature extractor downsamples 4000 samples with a padding mask per
/// sample to 199 frames, and a training loss (CTC, the frames of
/// _get_feat_extract_output_lengths) reads only the frames of real audio.
/// Frame f covers positions [f T / frames, (f + 1) T / frames); it is real
/// when every one of them is (an adaptive max pool of the padding), which
/// also holds for left padding. Undefined when `frames` is any input's
/// length along an axis other than the batch (a second sequence, whose
/// positions are not the first one's downsampled) or not below T. Without
/// this the loss read the padded frames, whose gradients through
/// zero-variance LayerNorms reached 6e16 (eval58 data2vec-audio: PREC003 in
/// fp16 on a healthy model).
at::Tensor Session::real_frames_of(const at::Tensor& real, int64_t frames, const std::string& real_from,
                                   std::string& from) const {
  if (!real.defined() || real.dim() != 2 || frames < 2 || frames >= real.size(1)) return {};
  for (const auto& a : args)
    if (a.value.isTensor())
      for (int64_t d = 1; d < a.value.toTensor().dim(); ++d)
        if (a.value.toTensor().size(d) == frames) return {};
  const at::Tensor pad = real.logical_not().to(at::kFloat).unsqueeze(1);             // [B, 1, T]
  const at::Tensor frame_pad = std::get<0>(at::adaptive_max_pool1d(pad, {frames})).squeeze(1);  // [B, frames]
  const at::Tensor out = frame_pad.eq(0);
  if (out.all().item<bool>() || out.logical_not().all().item<bool>()) return {};
  from = real_from + ", mapped onto the output's " + std::to_string(frames) + " frames (a frame is real where every position " +
         "it covers is)";
  return out;
}

PassResult Session::run_pass(PassSpec spec) {
  check_timeout(spec.probe + " probe, before its " + spec.name + " pass");
  if (progress) progress(spec.probe, spec.name);
  ++passes_run;
  PassResult r;
  r.name = spec.name;
  r.batch_norm_stats = spec.batch_norm_stats;
  r.backward = spec.backward;
  const InstrumentedModel& im = spec.instrumented ? *spec.instrumented : *inst;
  r.collector = std::make_unique<Collector>(im.taps().size());
  r.collector->capture = spec.capture;
  r.collector->reference = spec.reference;
  r.collector->real_positions = spec.real_positions;
  r.collector->align_end = spec.align_end;
  r.collector->time_cut = spec.time_cut;
  r.collector->hook = spec.tap_hook;
  r.collector->edit = spec.tap_edit;
  if (spec.features) {
    std::shared_ptr<FeatureStats> f = new_feature_stats();
    r.features = f;
    auto fh = feature_hook(*this, f);
    if (spec.tap_hook)
      r.collector->hook = [fh, h = spec.tap_hook](const TapSite& site, const at::Tensor& x) {
        fh(site, x);
        h(site, x);
      };
    else
      r.collector->hook = fh;
  }
  std::vector<c10::IValue> a = spec.args.empty() ? arg_values() : spec.args;
  // Every module's training flag back as the file saved it (a root saved
  // in eval may hold submodules saved training, and the reverse).
  // One module's own `training` attribute (Module::train sets it
  // recursively; these set one module's slot only).
  auto set_own_training = [](const ModuleInfo& mi, bool training) {
    if (mi.module._ivalue())
      if (auto slot = mi.module._ivalue()->type()->findAttributeSlot("training"))
        mi.module._ivalue()->setSlot(*slot, c10::IValue(training));
  };
  auto restore_modes = [this, &set_own_training] {
    for (const auto& mi : model.modules) set_own_training(mi, mi.training);
  };

  // Train-mode passes update BatchNorm running statistics in place, and a
  // forward may write to its buffers in eval mode too (rsl_rl's
  // EmpiricalNormalization updating its mean and variance on every call):
  // keep a copy of every buffer and put it back afterwards, so that every
  // pass starts from the state the file was saved in.
  std::vector<std::pair<at::Tensor, at::Tensor>> saved;
  std::vector<std::string> saved_names;
  for (const auto& b : model.module.named_buffers(/*recurse=*/true)) {
    saved.push_back({b.value, b.value.clone()});
    saved_names.push_back(b.name);
  }
  const size_t first_param = saved.size();
  for (const auto& [name, p] : written_params) {
    saved.push_back({p, p.detach().clone()});
    saved_names.push_back(name);
  }
  std::vector<c10::IValue> saved_attributes;
  for (const auto& wa : written_attributes) saved_attributes.push_back(wa.module.attr(wa.name));
  // Puts the saved state back (after the pass, or when it raised).
  auto restore_state = [&] {
    torch::NoGradGuard ng;
    for (auto& [live, copy] : saved) live.detach().copy_(copy);
    for (size_t i = 0; i < written_attributes.size() && i < saved_attributes.size(); ++i)
      written_attributes[i].module.setattr(written_attributes[i].name, saved_attributes[i]);
  };

  last_pass_started = spec.name;
  const auto t0 = std::chrono::steady_clock::now();
  at::manual_seed(opt.seed + spec.seed_offset);
  bool forward_done = false;  // a raise after it is the loss's or backward's, not a module's
  PassConfig cfg;
  cfg.training = spec.train_mode;
  cfg.dropout = spec.dropout;
  cfg.record_grad = spec.backward;
  cfg.slice0_batch = spec.slice0;
  cfg.slice_axis = spec.slice_axis;
  cfg.slice_index = spec.slice_index;
  cfg.slice_guide = spec.slice_guide;
  cfg.slice_rows = spec.slice_rows;
  cfg.slice_rows_of = spec.slice_rows_of;
  cfg.keep_baked = spec.keep_baked;
  cfg.batch_norm_stats = spec.batch_norm_stats;
  try {
    model.module.train(spec.train_mode);
    // A file saved while training with some modules kept in eval (a frozen
    // teacher in distillation, a backbone whose BatchNorms were frozen with
    // .eval() after model.train()): its training runs them in eval, so the
    // train passes do too (eval43 C03: a twin whose teacher was in eval got
    // a train/eval drift of its teacher in train mode). Each module's own
    // flag, not recursively.
    if (spec.train_mode && model.saved_training)
      for (const auto& mi : model.modules)
        if (!mi.training) set_own_training(mi, false);
    if (spec.backward) {
      if (!target_loaded) {
        target = load_target();
        target_loaded = true;
        loss_real_positions = sample_real_positions(*this, loss_real_from);
      }
      torch::AutoGradMode grad(true);
      r.output = const_cast<InstrumentedModel&>(im).run(a, cfg, *r.collector);
      forward_done = true;
      std::string which;
      at::Tensor y = pick_loss_output(r.output, opt, which);
      if (!y.defined()) {
        r.backward_skipped = which;
        r.loss_description = "none: " + which;
      } else {
        // A [B, T', F] output of a second sequence (an encoder-decoder's
        // decoder logits [B, 12, V] beside the encoder's mask [B, 16]): its
        // own mask's real positions, as labels of -100 at the decoder's
        // padding train it (eval53).
        at::Tensor real = loss_real_positions;
        std::string real_from = loss_real_from;
        if (y.dim() == 3 && spec.args.empty() && (!real.defined() || real.size(1) != y.size(1))) {
          auto it = loss_real_by_length.find(y.size(1));
          if (it == loss_real_by_length.end()) {
            std::string other_from;
            at::Tensor other = real_positions_of_length(*this, y.size(1), other_from);
            if (!other.defined()) other = real_frames_of(loss_real_positions, y.size(1), loss_real_from, other_from);
            it = loss_real_by_length.emplace(y.size(1), std::make_pair(std::move(other), std::move(other_from))).first;
          }
          const auto& [other, other_from] = it->second;
          if (other.defined() && other.size(0) == y.size(0)) {
            real = other;
            real_from = other_from;
          }
        }
        at::Tensor loss = compute_loss(y, opt, which, target, opt.output_index ? std::nullopt : im.output_class_axis(),
                                       real, real_from, r.loss_description, r.loss_chance);
        r.loss = loss.detach();
        if (loss.requires_grad()) {
          // This pass's gradients are its own (PassResult::grads): nothing
          // accumulates into the tensors an earlier pass handed out.
          for (const auto& p : model.module.parameters(/*recurse=*/true))
            if (p.grad().defined()) p.mutable_grad() = at::Tensor();
          // The other floating outputs that depend on parameters: the loss
          // reads one output, and a parameter that feeds only the others
          // (HRNet's other resolutions, an auxiliary head, a VQ-VAE's
          // codebook that only its VQ loss output trains) gets no gradient
          // from it by the choice of output, not by the model's graph. Also
          // under --output-index: a training loss often adds the outputs
          // (reconstruction + VQ loss), and which ones it adds is not known.
          std::vector<at::Tensor> others;
          std::vector<std::string> other_names;
          {
            std::vector<std::pair<std::string, at::Tensor>> outs;
            float_outputs(r.output, "output", outs);
            for (auto& [n, t] : outs)
              if (!t.is_same(y) && t.requires_grad()) {
                others.push_back(t);
                other_names.push_back(n);
                r.unread_outputs += (r.unread_outputs.empty() ? "" : ", ") + n;
              }
          }
          const bool cross_entropy = r.loss_description.rfind("cross_entropy", 0) == 0;
          loss.backward(/*gradient=*/{}, /*retain_graph=*/!others.empty() || cross_entropy);
          for (const auto& p : model.module.parameters(/*recurse=*/true))
            if (p.grad().defined()) r.grads.emplace(p.unsafeGetTensorImpl(), p.grad());
          // A cross-entropy of exactly 0 with no nonzero gradient anywhere:
          // the softmax gives every target probability 1 in float (logit
          // margins beyond ~88 in fp32), so softmax - onehot is 0 and no
          // parameter learns from this batch. Not a shift of every class
          // alike (eval26 C06: GIN logits of 1e5).
          if (cross_entropy && loss.item<double>() == 0.0) {
            bool any = false;
            for (const auto& [impl, g] : r.grads) any = any || g.ne(0).any().item<bool>();
            r.loss_saturated = !any && !r.grads.empty();
          }
          if (cross_entropy && !r.loss_saturated) shift_invariant_params(model.module, y, opt.seed, *r.collector, r);
          if (!others.empty()) reach_of_other_outputs(model.module, others, other_names, opt.seed, *r.collector, r);
          // The cached output keeps no autograd graph: with the graph
          // retained for the second backward, its saved tensors (every
          // activation of the model) would otherwise live as long as the
          // pass cache.
          r.output = detached(r.output);
        } else
          r.backward_skipped = "the loss (" + r.loss_description +
                               ") does not depend on any parameter through a differentiable path (the output is "
                               "detached or computed under no_grad); no gradient can flow";
      }
    } else {
      torch::NoGradGuard ng;
      for (int w = 0; w < spec.warmup_calls; ++w) {
        Collector scratch(im.taps().size());
        (void)const_cast<InstrumentedModel&>(im).run(spec.warmup_args.empty() ? a : spec.warmup_args, cfg, scratch);
      }
      if (spec.warmup_calls > 0) at::manual_seed(opt.seed + spec.seed_offset);  // the measured call draws as the first did
      r.output = const_cast<InstrumentedModel&>(im).run(a, cfg, *r.collector);
      std::string which;
      (void)pick_loss_output(r.output, opt, which);  // FatalRunError when forward returns no tensor
    }
  } catch (const FatalRunError& e) {
    restore_modes();
    restore_state();
    const std::string what = e.what();
    if (what.rfind(model.path, 0) == 0) throw;
    throw FatalRunError(e.kind(), e.exit_code(), model.path + ": " + what);  // every message names the file
  } catch (const Error& e) {
    restore_modes();
    restore_state();
    failed_collector = std::move(r.collector);
    std::string what = e.what();
    if (e.exit_code() != ExitCode::kLoad || e.kind() == error_kind::kTimeout) throw;  // usage errors, the deadline
    if (what.rfind(model.path, 0) != 0) what = model.path + ": " + what;  // every message names the file
    throw PassError(e.kind(), e.exit_code(), what, spec.name);
  } catch (const std::bad_alloc&) {
    restore_modes();
    saved.clear();  // nothing to restore into: free the copies first
    const Error oom = out_of_memory_error("the " + spec.name + " pass of the " + spec.probe + " probe", "std::bad_alloc", args);
    throw PassError(oom.kind(), oom.exit_code(), oom.what(), spec.name);
  } catch (const std::exception& e) {
    restore_modes();
    const std::string msg = trim_torch_error(e.what());
    if (is_out_of_memory(e)) {
      saved.clear();
      const Error oom = out_of_memory_error("the " + spec.name + " pass of the " + spec.probe + " probe", msg, args);
      throw PassError(oom.kind(), oom.exit_code(), oom.what(), spec.name);
    }
    restore_state();
    // Where the forward raised: the op after the last value a tap measured.
    // A norm's or softmax's input tap is in front of its op, so that op (in
    // that module) raised; after a module's output, the next op in execution
    // order did (pix2pix's InstanceNorm2d over the innermost 1x1 map raises
    // "Expected more than 1 spatial element": eval24 case 04).
    std::string where;
    failed_in_module.clear();
    const int64_t lt = r.collector ? r.collector->last_tap() : -1;
    if (!forward_done && lt >= 0 && static_cast<size_t>(lt) < im.taps().size()) {
      const TapSite& t = im.taps()[static_cast<size_t>(lt)];
      const std::string mod = t.module.empty() ? std::string("the model's own forward") : t.module;
      switch (t.kind) {
        case TapKind::kNormInput:
        case TapKind::kBatchNormInput:
          where = "\n  raised at the normalization op of " + mod + " (its input was the last value measured)";
          failed_in_module = t.module;
          break;
        case TapKind::kSoftmaxInput:
          where = "\n  raised at the softmax of " + mod + " (its input was the last value measured)";
          break;
        case TapKind::kModuleOutput: {
          // A module with another output that never got measured had not
          // returned: the tapped value is one it computes early and also
          // hands out (a trace returns a cast input beside the result when
          // the caller reads the same tensor: DINOv3's embeddings return
          // pixel_values.to(float32) for rope_embeddings, and the patch
          // conv after that cast raised in fp16; eval42). Then the op that
          // raised is inside it, most likely in the child reading that value.
          const auto& recs = r.collector->records();
          if (!module_returned(im.taps(), recs, t.module) && !t.module.empty()) {
            where = "\n  raised inside " + mod + " before it returned (one of its outputs, computed early, was the last value measured)";
            // Its first submodule (named_modules() order) whose output was
            // never measured: the ops run in that order in most forwards.
            std::set<std::string> measured, tapped;
            for (const auto& o : im.taps())
              if (o.kind == TapKind::kModuleOutput && static_cast<size_t>(o.id) < recs.size()) {
                tapped.insert(o.module);
                if (recs[static_cast<size_t>(o.id)].calls > 0) measured.insert(o.module);
              }
            for (const auto& mi : model.modules)
              if (mi.path.rfind(t.module + ".", 0) == 0 && tapped.count(mi.path) && !measured.count(mi.path)) {
                where += ", probably in " + mi.path + " (" + mi.kind + "), its first submodule whose output was not measured";
                failed_in_module = mi.path;
                break;
              }
            break;
          }
          where = "\n  raised after " + mod + " returned (the last value measured): in the op that runs next";
          // The module whose op reads that output (the graph's consumers, in
          // graph order: Gemma's q_proj after input_layernorm, eval33), else
          // the module after it in named_modules() order (outside its own
          // children), where that op most often sits (an nn.Sequential's next
          // layer).
          std::string reader;
          for (const auto& c : t.consumers)
            if (!c.empty() && c != t.module && c.rfind(t.module + ".", 0) != 0) {
              reader = c;
              break;
            }
          // A module whose ops run first in the graph, elsewhere than the
          // reader (a distillation wrapper's teacher(x) between student(x)
          // and the loss reading the student's output: eval54 C2).
          if (t.next_module && !t.next_module->empty() && *t.next_module != reader &&
              reader.rfind(*t.next_module + ".", 0) != 0) {
            std::string kind;
            for (const auto& mi : model.modules)
              if (mi.path == *t.next_module) kind = mi.kind;
            where += ", probably in " + *t.next_module + (kind.empty() ? std::string() : " (" + kind + ")") +
                     ", the module whose ops run next in the graph";
            failed_in_module = *t.next_module;
            break;
          }
          if (!reader.empty()) {
            std::string kind;
            for (const auto& mi : model.modules)
              if (mi.path == reader) kind = mi.kind;
            where += ", probably in " + reader + (kind.empty() ? std::string() : " (" + kind + ")") +
                     ", which reads that output";
            failed_in_module = reader;
            break;
          }
          for (size_t i = 0; i + 1 < model.modules.size(); ++i) {
            if (model.modules[i].path != t.module || t.module.empty()) continue;
            for (size_t j = i + 1; j < model.modules.size(); ++j) {
              const auto& nx = model.modules[j];
              if (nx.path.rfind(t.module + ".", 0) == 0) continue;
              where += ", probably in " + nx.path + " (" + nx.kind + "), the next module in named_modules() order";
              failed_in_module = nx.path;
              break;
            }
            break;
          }
          break;
        }
        default:
          where = "\n  raised in or after " + mod + " (the last value measured was there)";
      }
    }
    failed_collector = std::move(r.collector);
    // torch.export specializes every axis it was not told is dynamic: an
    // exported graph fed other shapes than its example inputs' may fail on
    // a view or cat sized for them.
    std::string static_hint;
    bool reshaped = false;
    if (model.kind == "exported")
      for (size_t i = 0; i < a.size() && i < args.size(); ++i)
        if (a[i].isTensor() && args[i].value.isTensor() && a[i].toTensor().sizes() != args[i].value.toTensor().sizes())
          reshaped = true;
    if (reshaped)
      static_hint = "\n  (this pass gave other shapes than the batch's; an exported program keeps the shapes it was "
                    "exported with unless torch.export.export(..., dynamic_shapes=...) marked their axes dynamic, e.g. "
                    "{\"x\": {0: torch.export.Dim(\"batch\")}})";
    throw PassError(error_kind::kModelRun, ExitCode::kLoad,
                    model.path + ": forward" + std::string(spec.backward ? "/backward" : "") + " raised in the " +
                        spec.name + " pass: " + msg + where + "\n  inputs given: " + shapes_of(args) + dtype_hint(msg, model.module) +
                        static_hint,
                    spec.name);
  }
  // The precision probe's passes run a converted model (every parameter
  // cast to the format or to fp32): they say nothing of whether the file
  // runs as saved (eval54 C1: an fp16 teacher in an fp32 wrapper raised in
  // every other pass, and the check exited 0 with "no findings").
  // A model saved wholly in a low precision is the exception: its fp32
  // reference is how it runs where the format's CPU kernels are missing
  // (LibTorch 1.13's "not implemented for 'Half'"), not a repair of it.
  if (spec.probe != "precision" || saved_in_low_precision) ++passes_ok;
  restore_modes();
  if (!spec.train_mode) {
    // Buffers an eval-mode forward wrote to: its outputs depend on the calls
    // before it (run.eval_buffer_writes).
    // Buffers by their attribute now (a forward may rebind one: self._mean
    // = ... replaces the tensor), then the written parameters.
    std::vector<at::Tensor> current;
    for (const auto& b : model.module.named_buffers(/*recurse=*/true)) current.push_back(b.value);
    for (size_t i = current.size(); i < saved.size(); ++i) current.push_back(saved[i].first);
    for (size_t i = 0; i < saved.size() && i < current.size(); ++i) {
      const at::Tensor& copy = saved[i].second;
      const at::Tensor now = current[i].detach();
      bool changed = now.sizes() != copy.sizes() || now.scalar_type() != copy.scalar_type();
      if (!changed && now.numel() > 0) {
        if (now.is_floating_point()) {
          const at::Tensor both_nan = at::isnan(now).logical_and(at::isnan(copy));
          changed = now.ne(copy).logical_and(both_nan.logical_not()).any().item<bool>();
        } else {
          changed = !now.equal(copy);
        }
      }
      if (changed && std::find(eval_buffer_writes.begin(), eval_buffer_writes.end(), saved_names[i]) == eval_buffer_writes.end())
        eval_buffer_writes.push_back(saved_names[i]);
      // A parameter: how far the forward moved it from the file's value.
      if (changed && i >= first_param && now.sizes() == copy.sizes() && now.is_floating_point() && copy.numel() > 0) {
        torch::NoGradGuard ng;
        const double base = copy.to(at::kDouble).norm().item<double>();
        const double moved = (now.to(at::kDouble) - copy.to(at::kDouble)).norm().item<double>();
        ParamWrite& pw = eval_param_writes[saved_names[i]];
        const double rel = base > 0 ? moved / base : std::numeric_limits<double>::infinity();
        if (rel >= pw.rel_change) {
          pw.moved = moved;
          pw.base = base;
        }
        pw.rel_change = std::max(pw.rel_change, rel);
        pw.saved_constant = copy.numel() == 1 || copy.eq(copy.flatten()[0]).all().item<bool>();
      }
    }
    for (size_t i = 0; i < written_attributes.size(); ++i) {
      const c10::IValue now = written_attributes[i].module.attr(written_attributes[i].name);
      const c10::IValue& was = saved_attributes[i];
      const bool same = now.isBool() && was.isBool()     ? now.toBool() == was.toBool()
                        : now.isInt() && was.isInt()       ? now.toInt() == was.toInt()
                        : now.isDouble() && was.isDouble() ? now.toDouble() == was.toDouble()
                                                           : true;
      const std::string& n = written_attributes[i].path;
      if (!same && std::find(eval_attribute_writes.begin(), eval_attribute_writes.end(), n) == eval_attribute_writes.end())
        eval_attribute_writes.push_back(n);
    }
  }
  restore_state();
  r.collector->finish();  // statistics kept on a device: one read-back per pass
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  doc.passes.push_back(pass_entry(spec, r.seconds));
  release_freed_memory();
  return r;
}

int64_t Session::raised_batch_norm(const std::string& what, const PassSpec& reference) {
  if (what.find("Expected more than 1 value per channel") == std::string::npos || !failed_collector) return -1;
  std::unique_ptr<Collector> failed = std::move(failed_collector);
  std::shared_ptr<const PassResult> ref;
  if (failed->last_batch_norm_tap() < 0 || failed->last_batch_norm_tap() != failed->last_tap()) {
    try {
      ref = pass(reference);
    } catch (const Error&) {
      ref.reset();  // the reference raises too: no layer is named
    }
  }
  const int64_t t = raised_batch_norm_tap(inst->taps(), *failed, ref ? ref->collector.get() : nullptr);
  failed_collector = std::move(failed);
  return t;
}

void Session::skip_probe(const std::string& name, const std::string& reason) {
  nlohmann::json& p = doc.probes[name];
  if (!p.is_object()) p = nlohmann::json::object();
  p["status"] = "skipped";
  p["reason"] = reason;
}

namespace {
/// For a pass of a traced file that raised on a shape mismatch ("does not
/// match", "must match"): the tensor constants of its graph whose leading
/// axis is the sample's batch size (two or more), "" when none. A value
/// computed in Python at trace time (Wav2Vec2's SpecAugment mask drawn with
/// numpy: a constant [4, 24] bool; eval45) is baked in, so a pass with
/// another batch size or length cannot run, and the report says why.
std::string baked_constants_note(const Session& s, const std::string& msg) {
  if (s.model.kind != "traced") return "";
  if (msg.find("does not match") == std::string::npos && msg.find("must match") == std::string::npos) return "";
  int64_t batch = 0;
  if (s.doc.probes.contains("batch_layout") && s.doc.probes["batch_layout"].contains("batch") &&
      s.doc.probes["batch_layout"]["batch"].is_number_integer())
    batch = s.doc.probes["batch_layout"]["batch"].get<int64_t>();
  if (batch < 2) return "";
  std::vector<std::string> shapes;
  try {
    std::shared_ptr<torch::jit::Graph> g = s.model.module.get_method("forward").graph()->copy();
    torch::jit::Inline(*g);
    std::function<void(const torch::jit::Block*)> walk = [&](const torch::jit::Block* b) {
      for (const torch::jit::Node* n : b->nodes()) {
        if (n->kind() == c10::prim::Constant && n->outputs().size() == 1) {
          const auto v = torch::jit::toIValue(n->output());
          if (v && v->isTensor()) {
            const at::Tensor t = v->toTensor();
            if (t.dim() >= 1 && t.numel() >= 2 && t.size(0) == batch && shapes.size() < 3) {
              std::string sh = c10::str(t.sizes()) + " " + std::string(c10::toString(t.scalar_type()));
              if (std::find(shapes.begin(), shapes.end(), sh) == shapes.end()) shapes.push_back(sh);
            }
          }
        }
        for (const torch::jit::Block* sb : n->blocks()) walk(sb);
      }
    };
    walk(g->block());
  } catch (const std::exception&) {
    return "";
  }
  if (shapes.empty()) return "";
  std::string list;
  for (const auto& x : shapes) list += (list.empty() ? "" : ", ") + x;
  return "; the traced graph holds constant tensors shaped for the sample's batch of " + std::to_string(batch) + " (" +
         list + "): values computed in Python at trace time (a mask drawn with numpy, a tensor built from the "
         "batch size) are baked in, so another batch size or length cannot run; trace with the batch and length "
         "you will serve, or script the model";
}

// The metric names in the document: model-scope ones and those of any layer.
std::set<std::string> metric_names(const MetricsDoc& d) {
  std::set<std::string> out;
  for (const auto& kv : d.model_metrics) out.insert(kv.first);
  for (const auto& l : d.layers)
    for (const auto& kv : l.metrics) out.insert(kv.first);
  return out;
}
}  // namespace

bool Session::run_probe(const std::string& name, const std::function<void()>& body) {
  // A probe writes only the metrics it declares (probe_declared_metrics);
  // checked after it ran, whatever happened.
  const std::set<std::string> before = metric_names(doc);
  struct WriteCheck {
    Session& s;
    const std::string& name;
    const std::set<std::string>& before;
    ~WriteCheck() {
      for (const auto& m : metric_names(s.doc))
        if (!before.count(m) && !probe_declares(name, m)) s.undeclared_writes.push_back(name + " wrote " + m);
    }
  } write_check{*this, name, before};
  last_pass_started.clear();
  auto record = [&](const std::string& pass, const std::string& kind, ExitCode code, const std::string& msg) {
    nlohmann::json& p = doc.probes[name];
    if (!p.is_object()) p = nlohmann::json::object();
    p["status"] = "error";
    p["pass"] = pass.empty() ? "none" : pass;
    p["error"] = {{"kind", kind}, {"message", msg}};
    if (!first_error) first_error = Error(kind, code, msg);
  };
  // Errors of the run itself, not of one probe: usage (exit 2), the
  // --timeout deadline, no tensor returned at all.
  auto isolable = [](const Error& e) { return e.exit_code() == ExitCode::kLoad && e.kind() != error_kind::kTimeout; };
  try {
    body();
  } catch (const FatalRunError&) {
    throw;
  } catch (const PassError& e) {
    if (!isolable(e)) throw;
    record(e.pass(), e.kind(), e.exit_code(), std::string(e.what()) + baked_constants_note(*this, e.what()));
    return false;
  } catch (const Error& e) {
    if (!isolable(e)) throw;
    record(last_pass_started, e.kind(), e.exit_code(), e.what());
    return false;
  } catch (const std::exception& e) {
    // LibTorch raising outside a pass (statistics of an unusual tensor): a
    // bug of normdoctor's or an allocation failure, recorded the same way.
    const bool oom = is_out_of_memory(e);
    record(last_pass_started, oom ? error_kind::kOutOfMemory : error_kind::kInternal,
           oom ? ExitCode::kLoad : ExitCode::kInternal, trim_torch_error(e.what()));
    return false;
  }
  nlohmann::json& p = doc.probes[name];
  if (!p.is_object()) p = nlohmann::json::object();
  if (!p.contains("status")) p["status"] = "ok";
  return true;
}

namespace {
MetricsDoc run_check_stages(const CheckOptions& opt, const ProgressFn& progress);
}  // namespace

MetricsDoc run_check(const CheckOptions& opt, const ProgressFn& progress) {
  // Allocation failures outside a pass (synthesizing --input-shape inputs,
  // statistics after a pass) name the stage that was running.
  std::string probe = "load", pass = "start";
  const ProgressFn track = [&](const std::string& p, const std::string& q) {
    probe = p;
    pass = q;
    if (progress) progress(p, q);
  };
  try {
    return run_check_stages(opt, track);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) throw;
    throw out_of_memory_error("the " + probe + " step (" + pass + ")", trim_torch_error(e.what()), {});
  }
}

namespace {
MetricsDoc run_check_stages(const CheckOptions& opt, const ProgressFn& progress) {
  if (opt.threads > 0) at::set_num_threads(opt.threads);
  if (opt.lr && !(std::isfinite(*opt.lr) && *opt.lr > 0))
    throw usage_error("--lr must be a positive finite number, got " + std::to_string(*opt.lr));
  if (opt.optimizer != "sgd" && opt.optimizer != "adam" && opt.optimizer != "adamw")
    throw usage_error("--optimizer must be sgd, adam or adamw, got '" + opt.optimizer + "'");
  if (opt.steps < 0) throw usage_error("--steps must be >= 0, got " + std::to_string(opt.steps));
  if (opt.steps > 0 && !opt.lr && opt.optimizer_state.empty())
    throw usage_error("--steps " + std::to_string(opt.steps) + " needs --lr: the replay takes optimizer steps at that learning rate");
  auto sp = prepare_check(opt, progress);
  Session& s = *sp;
  run_probes(s);
  // A metric written by a probe that does not declare it is normdoctor's bug
  // (registry.cpp); listed so that the tests see it, never fatal.
  if (!s.undeclared_writes.empty()) s.doc.probes["undeclared_metrics"] = s.undeclared_writes;

  const auto used = fallbacks_called();
  if (!used.empty()) {
    s.doc.model["operator_fallbacks"] = used;
    for (const auto& op : used)
      s.doc.assumptions.push_back("operator " + op + " is missing from LibTorch " + libtorch_version() +
                                  "; normdoctor's reference implementation ran instead");
  }
  s.doc.seconds_total = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count();
  return std::move(s.doc);
}
}  // namespace

std::unique_ptr<Session> prepare_check(const CheckOptions& opt, const ProgressFn& progress) {
  auto sp = std::make_unique<Session>(opt, progress);
  Session& s = *sp;
  if (progress) progress("load", "model");
  s.model = load_model(opt.model_path);
  s.doc.model = {{"path", opt.model_path},
                 {"sha256", s.model.sha256},
                 {"kind", s.model.kind},
                 {"kind_reason", s.model.kind_reason},
                 {"training", s.model.saved_training},
                 {"parameters", s.model.parameters},
                 {"modules", s.model.modules.size()}};
  nlohmann::json fargs = nlohmann::json::array();
  for (const auto& a : s.model.args) fargs.push_back({{"name", a.name}, {"type", a.type}, {"has_default", a.has_default}});
  s.doc.model["forward_args"] = fargs;
  load_checkpoints(s);  // --weights: the last checkpoint, before anything reads the module's tensors
  load_optimizer_state(s);  // --optimizer-state, mapped onto the (loaded) parameters
  s.precision = opt.precision;
  if (s.precision == "fp32") {
    // A model saved after .half() (.bfloat16()): every floating parameter in
    // the format. It computes in that format whatever --precision says, so
    // the precision probe judges it there against an fp32 copy.
    int64_t half = 0, bf16 = 0, other = 0;
    for (const auto& p : s.model.module.parameters(/*recurse=*/true)) {
      if (!p.is_floating_point()) continue;
      if (p.scalar_type() == at::kHalf) ++half;
      else if (p.scalar_type() == at::kBFloat16) ++bf16;
      else ++other;
    }
    if (other == 0 && (half > 0) != (bf16 > 0)) {
      s.precision = half > 0 ? "fp16" : "bf16";
      s.doc.assumptions.push_back("every floating parameter of the model is " +
                                  std::string(half > 0 ? "float16" : "bfloat16") + ": it runs in " + s.precision +
                                  ", as with --precision " + s.precision +
                                  " (the precision probe compares it with an fp32 copy of the model)");
    }
  }
  s.doc.model_metrics["run.precision"] = s.precision;
  {
    // Whether the user says this file will be trained: a target to fit, a
    // learning rate or an optimizer's state. Rules that are harmless for a
    // served file (an argmax export, a traced eval mode) become warnings.
    std::string intent;
    if (!s.opt.target_file.empty()) intent = "--target " + s.opt.target_file;
    else if (s.opt.lr) intent = "--lr";
    else if (!s.opt.optimizer_state.empty()) intent = "--optimizer-state " + s.opt.optimizer_state;
    s.doc.model_metrics["run.training_intent"] = !intent.empty();
    s.doc.model_metrics["run.training_intent_from"] = intent;
  }

  if (progress) progress("load", "inputs");
  load_arguments(s);
  check_sequence_flags(s);

  {
    // Which axis of each argument holds the examples: what the per-example
    // and sub-batch passes slice (stated in the report).
    const BatchLayout bl = batch_layout(s);
    nlohmann::json axes = nlohmann::json::object();
    std::string unusual;
    for (size_t i = 0; i < s.args.size(); ++i) {
      if (!s.args[i].value.isTensor()) continue;
      const auto k = static_cast<int64_t>(i);
      const bool bag_ids = bl.bag_ids(k);
      if (bag_ids || k == bl.bag_offsets) {
        // EmbeddingBag's flat layout: no axis holds the examples.
        axes[s.args[i].name] = bag_ids ? "bags" : "offsets";
        unusual += (unusual.empty() ? "" : ", ") + s.args[i].name +
                   (bag_ids ? std::string(": flat ids, cut into bags by the offsets")
                            : std::string(": the bags' offsets, rebuilt for each selection"));
        continue;
      }
      if (bl.graph_arg(k)) {
        // A graph batch: cut by graph, not along an axis.
        const bool edge_aligned = bl.graph_per_edge(k);
        const char* role = k == bl.graph_edges ? "edges" : k == bl.graph_ids ? "graph ids" : edge_aligned ? "per edge" : "nodes";
        axes[s.args[i].name] = role;
        const std::string how = k == bl.graph_edges ? ": the edge list, renumbered for the graphs kept"
                                : k == bl.graph_ids ? ": the graph of each node"
                                : edge_aligned      ? ": one row per edge"
                                                    : ": one row per node";
        unusual += (unusual.empty() ? "" : ", ") + s.args[i].name + how;
        continue;
      }
      axes[s.args[i].name] = bl.axis[i] >= 0 ? nlohmann::json(bl.axis[i]) : nlohmann::json(nullptr);
      if (bl.axis[i] != 0)
        unusual += (unusual.empty() ? "" : ", ") + s.args[i].name +
                   (bl.axis[i] < 0 ? std::string(": none (passed unchanged)") : ": axis " + std::to_string(bl.axis[i]));
    }
    // probes.batch_layout (probes.layout is the sequence probe's roles).
    s.doc.probes["batch_layout"] = {{"batch", bl.batch}, {"from", bl.from}, {"axes", axes}};
    if (!unusual.empty())
      s.doc.assumptions.push_back("batch of " + std::to_string(bl.batch) + (bl.batch == 1 ? " example" : " examples") + " (from " + bl.from +
                                  "); batch axes not 0: " + unusual + (opt.batch_dim ? "" : " (--batch-dim overrides)"));
  }

  if (progress) progress("instrument", "graph");
  {
    InstrumentOptions io;
    for (const auto& a : s.args) io.input_ranks.push_back(a.value.isTensor() ? a.value.toTensor().dim() : -1);
    s.inst = std::make_unique<InstrumentedModel>(s.model, io);
  }
  // Parameters the forward writes in place: every pass starts from the
  // file's values (the buffers are kept the same way in run_pass).
  {
    const std::vector<std::string> written = parameters_written_in_forward(s);
    if (!written.empty()) {
      std::map<std::string, at::Tensor> by_name;
      for (const auto& p : s.model.module.named_parameters(/*recurse=*/true)) by_name[p.name] = p.value;
      for (const auto& n : written)
        if (by_name.count(n)) s.written_params.push_back({n, by_name[n]});
    }
    // Modules saved in eval inside a root saved training: the train passes
    // keep them in eval (Session::run_pass), as the training that saved
    // them ran them; said, with the outermost of them.
    if (s.model.saved_training) {
      std::vector<std::string> kept;
      for (const auto& mi : s.model.modules) {
        if (mi.training || mi.path.empty()) continue;
        // Only where it changes something: a batch_norm or dropout runs in it.
        bool has_mode_op = false;
        for (const auto& mo : s.inst->mode_ops())
          has_mode_op = has_mode_op || mo.module == mi.path || mo.module.rfind(mi.path + ".", 0) == 0;
        if (!has_mode_op) continue;
        bool under = false;
        for (const auto& k : kept) under = under || mi.path.rfind(k + ".", 0) == 0;
        if (!under) kept.push_back(mi.path);
      }
      if (!kept.empty())
        s.doc.assumptions.push_back("the train passes run " + short_list(kept, 4) +
                                    " in eval mode, as the file saved them inside a model saved in training mode (a frozen "
                                    "part kept in eval while the rest trains)");
    }
    // And the plain attributes it assigns (a one-shot `initialized` flag).
    for (const auto& [path, name] : attributes_set_in_forward(s))
      for (const auto& mi : s.model.modules)
        if (mi.path == path && mi.module.hasattr(name))
          s.written_attributes.push_back({mi.module, name, path.empty() ? name : path + "." + name});
  }
  s.doc.model["graph_nodes"] = s.inst->graph_nodes();
  s.doc.model["taps"] = s.inst->taps().size();

  build_inventory(s);
  // Every floating parameter in fp16/bf16 as the file holds them (before any
  // probe casts them): a model saved in the format (Session::passes_ok).
  {
    bool any = false, all_low = true;
    for (const auto& p : s.model.module.parameters(/*recurse=*/true)) {
      if (!p.is_floating_point()) continue;
      any = true;
      all_low = all_low && (p.scalar_type() == at::kHalf || p.scalar_type() == at::kBFloat16);
    }
    s.saved_in_low_precision = any && all_low;
  }
  // The passes the probes will ask for on this batch, so that the first run
  // of each distinct pass captures what all of them need (issue 14).
  s.declare(train_pass_spec());
  declare_normalization_passes(s);
  declare_sequence_passes(s);
  return sp;
}

void run_probes(Session& s) {
  // Each probe isolated: one that raises is recorded (probes.<name>.status
  // "error") and the others still run; a model none of whose passes ran
  // cannot run at all (exit 3, the first error).
  for (const ProbeEntry& p : probe_pipeline())
    if (p.applies(s)) s.run_probe(p.name, [&] { p.run(s); });
  if (s.passes_ok == 0 && s.first_error && !s.run_failure_diagnosed) throw *s.first_error;
  // Buffers that eval-mode passes wrote to (Session::run_pass records them,
  // whichever probe asked for the pass): the engine's own metrics.
  if (!s.eval_buffer_writes.empty()) {
    s.doc.model_metrics["run.eval_buffer_writes"] = static_cast<int64_t>(s.eval_buffer_writes.size());
    s.doc.model_metrics["run.eval_buffer_writes_names"] = short_list(s.eval_buffer_writes);
  }
}

}  // namespace nd
