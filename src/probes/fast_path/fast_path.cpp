// Eval fast paths (issue 15.6, docs/metrics.md "Eval fast paths").
//
// nn.TransformerEncoder (enable_nested_tensor=True, the default) and
// nn.TransformerEncoderLayer / nn.MultiheadAttention take PyTorch's
// inference fast path when the module is in eval mode and autograd is off
// (torch.no_grad, torch.inference_mode): the padded batch becomes a nested
// tensor without the padded positions, the fused kernels run, and the
// result comes back padded with zeros (older PyTorch: trimmed to the longest
// kept sequence). Training, and any call with grad enabled, takes the slow
// path that computes every position. normdoctor's instrumented passes see
// what the model computes, so this probe runs the model itself, as users run
// it, both ways, and records the difference. A fast path that raises is
// evidence, not the end of the check.
#include <cmath>
#include <set>
#include <sstream>

#include <torch/csrc/jit/passes/inliner.h>

#include "probes/fast_path/fast_path.h"
#include "probes/session.h"

namespace nd {
namespace {

/// Operators only the inference fast path calls (torch/nn/modules/transformer.py
/// and activation.py, PyTorch 1.12 to 2.x).
const std::set<std::string> kFastPathOps = {
    "aten::_nested_tensor_from_mask",         "aten::_nested_tensor_from_mask_left_aligned",
    "aten::_transformer_encoder_layer_fwd",   "aten::_native_multi_head_attention",
    "aten::_nested_tensor_from_tensor_list",
};

void find_ops(torch::jit::Block* b, std::set<std::string>& found) {
  for (torch::jit::Node* n : b->nodes()) {
    const std::string k = n->kind().toQualString();
    if (kFastPathOps.count(k)) found.insert(k);
    for (torch::jit::Block* sub : n->blocks()) find_ops(sub, found);
  }
}

std::string shape_text(const c10::IValue& v) {
  std::ostringstream ss;
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    if (t.is_nested()) return "nested";
    ss << t.sizes();
  } else if (v.isTuple()) {
    ss << "(";
    bool first = true;
    for (const auto& e : v.toTupleRef().elements()) {
      ss << (first ? "" : ", ") << shape_text(e);
      first = false;
    }
    ss << ")";
  } else {
    ss << v.tagKind();
  }
  return ss.str();
}

}  // namespace

void probe_fast_path(Session& s) {
  MetricMap& mm = s.doc.model_metrics;
  std::set<std::string> ops;
  {
    auto g = s.model.module.get_method("forward").graph()->copy();
    torch::jit::Inline(*g);
    find_ops(g->block(), ops);
  }
  nlohmann::json& probe = s.doc.probes["fast_path"];
  probe = nlohmann::json::object();
  probe["ops"] = ops;
  mm["fastpath.present"] = !ops.empty();
  if (ops.empty()) return;

  auto& module = s.model.module;
  const bool was_training = module.is_training();
  // The slow path needs grad enabled and a parameter that requires grad
  // (TransformerEncoderLayer's check); a model saved with frozen
  // parameters gets requires_grad for this one call.
  std::vector<at::Tensor> frozen;
  for (const auto& p : module.parameters(/*recurse=*/true))
    if (!p.requires_grad()) frozen.push_back(p);
  struct Restore {
    torch::jit::Module& m;
    bool training;
    std::vector<at::Tensor>& frozen;
    ~Restore() {
      m.train(training);
      for (auto& p : frozen) p.requires_grad_(false);
    }
  } restore{module, was_training, frozen};
  module.eval();

  const std::vector<c10::IValue> args = s.arg_values();
  auto forward = module.get_method("forward");
  s.check_timeout("the fast-path probe");
  at::manual_seed(s.opt.seed);
  c10::IValue fast, slow;
  std::string fast_error;
  try {
    torch::NoGradGuard ng;  // as users run inference
    fast = forward(args);
  } catch (const std::exception& e) {
    fast_error = trim_torch_error(e.what());
  }
  s.check_timeout("the fast-path probe");
  at::manual_seed(s.opt.seed);
  {
    at::AutoGradMode on(true);
    for (auto& p : frozen) p.requires_grad_(true);
    slow = forward(args);  // raises like any pass: the probe's error, isolated by the engine
    for (auto& p : frozen) p.requires_grad_(false);
  }
  mm["fastpath.raises"] = !fast_error.empty();
  probe["slow_shape"] = shape_text(slow);
  if (!fast_error.empty()) {
    mm["fastpath.error"] = fast_error;
    s.doc.assumptions.push_back("the eval fast path (eval, no grad) raised: " + fast_error +
                                "; the slow path (grad enabled) ran; batch dependence and drift were measured on "
                                "normdoctor's own passes");
    return;
  }
  probe["fast_shape"] = shape_text(fast);
  const bool same_shape = probe["fast_shape"] == probe["slow_shape"];
  mm["fastpath.shape_changed"] = !same_shape;
  const double d = same_shape ? Session::relative_difference(fast, slow) : std::numeric_limits<double>::quiet_NaN();
  mm["fastpath.rel_output_diff"] = metric_number(d);
  if (!same_shape || d > 1e-3)
    s.doc.assumptions.push_back(
        "in eval mode without grad the model takes PyTorch's fast path (" + *ops.begin() + (ops.size() > 1 ? ", ..." : "") +
        "), whose output " +
        (same_shape ? "differs from the slow path's (what training computes) by " + std::to_string(d) + " relative"
                    : "has another shape (" + probe["fast_shape"].get<std::string>() + ") than the slow path's (" +
                          probe["slow_shape"].get<std::string>() + ")") +
        ": padded positions are zeros on the fast path; code that reads them (an unmasked mean over time) sees "
        "different numbers at inference than in training");
}

const std::vector<std::string>& fast_path_writes() {
  static const std::vector<std::string> names = {
      "fastpath."};
  return names;
}

}  // namespace nd
