// Deliberate zero initialization (issue 16, item 6; docs/metrics.md
// "Zero-initialized parameters").
//
// torchvision (zero_init_residual) and timm (zero_init_last) set the gamma of
// the last BatchNorm of every residual branch to 0, ReZero scales each
// branch by a scalar that starts at 0, diffusers' ControlNet adds zero convs
// to the UNet's residuals, and torchvision's VisionTransformer starts its
// head at 0. Every parameter before such a zero gets exactly zero gradient on
// the first step, by design; the first update ends it.
//
// Recognized by what the graph computes, not by class or parameter names:
//   1. a trainable parameter that is exactly 0 in every element,
//   2. used as a factor (the weight of a linear/conv/norm, an operand of
//      mul/matmul/einsum; not a bias, which adds),
//   3. whose product reaches a residual addition (aten::add/sub with another
//      tensor) or the model's output through ops that keep a zero a zero
//      (casts, views, dropout, pooling, ReLU/GELU, further linears, a norm
//      whose gain it is),
//   4. and that gets a gradient itself in the real pass (so the first update
//      moves it; two zero factors in a row keep each other at zero forever).
// Then the train pass is repeated with those parameters set to a non-zero
// value (ones for gains and scalars, N(0, 1/fan_in) for matrices), on a copy
// of nothing: the values are put back, and the gradients of the real pass
// restored, right after. A parameter whose gradient was exactly zero in the
// real pass and is non-zero with the zeros lifted is silenced by the
// convention; one that stays zero has another cause (GRAD004 warns about it).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/lower_tuples.h>

#include "instrument/recognize.h"
#include "probes/forward_backward/forward_backward.h"
#include "probes/session.h"

namespace nd {
namespace {

using torch::jit::Node;
using torch::jit::Value;

std::string kind_of(const Node* n) { return n->kind().toQualString(); }

/// Ops that hand a parameter to its use with the same zeros (casts, views, lists for einsum).
bool carries_param(const std::string& k) {
  static const std::set<std::string> ops = {
      "aten::to",        "aten::view",    "aten::reshape", "aten::unsqueeze", "aten::expand",  "aten::expand_as",
      "aten::t",         "aten::transpose", "aten::permute", "aten::contiguous", "aten::type_as", "aten::flatten",
      "aten::squeeze",   "aten::view_as", "aten::reshape_as", "aten::clone",  "prim::ListConstruct", "aten::float",
      "aten::half",      "aten::bfloat16", "prim::unchecked_cast", "aten::_unwrap_optional"};
  return ops.count(k) > 0;
}

/// True when input `offset` of `n` multiplies the result (weights, factors).
bool multiplies(const Node* n, size_t offset) {
  const std::string k = kind_of(n);
  if (k == "aten::mul" || k == "aten::mul_" || k == "aten::matmul" || k == "aten::mm" || k == "aten::bmm" ||
      k == "aten::einsum" || k == "aten::outer")
    return true;
  if (k == "aten::linear" || k == "aten::conv1d" || k == "aten::conv2d" || k == "aten::conv3d" ||
      k == "aten::_convolution" || k == "aten::_convolution_mode" || k == "aten::convolution" || k == "aten::conv_transpose1d" ||
      k == "aten::conv_transpose2d" || k == "aten::conv_transpose3d" || k == "aten::batch_norm" ||
      k == "aten::instance_norm")
    return offset == 1;
  if (k == "aten::layer_norm" || k == "aten::group_norm" || k == "aten::rms_norm") return offset == 2;
  if (k == "aten::addmm" || k == "aten::baddbmm" || k == "aten::addbmm" || k == "aten::addcmul" ||
      k == "aten::addmv")
    return offset == 1 || offset == 2;
  if (k == "aten::div" || k == "aten::div_") return offset == 0;
  return false;
}

/// Ops whose output is zero wherever the product entering them is zero.
bool keeps_zero(const std::string& k) {
  static const std::set<std::string> ops = {
      "aten::mul", "aten::mul_", "aten::div", "aten::div_", "aten::dropout", "aten::dropout_", "aten::feature_dropout",
      "aten::feature_dropout_", "aten::alpha_dropout", "aten::to", "aten::view", "aten::reshape", "aten::flatten",
      "aten::permute", "aten::transpose", "aten::contiguous", "aten::squeeze", "aten::unsqueeze", "aten::select",
      "aten::slice", "aten::expand", "aten::clone", "aten::type_as", "aten::view_as", "aten::reshape_as",
      "aten::linear", "aten::matmul", "aten::mm", "aten::bmm", "aten::conv1d", "aten::conv2d", "aten::conv3d",
      "aten::_convolution", "aten::_convolution_mode", "aten::relu", "aten::relu_", "aten::gelu", "aten::silu", "aten::silu_", "aten::tanh",
      "aten::hardswish", "aten::hardswish_", "aten::leaky_relu", "aten::leaky_relu_", "aten::relu6", "aten::hardtanh",
      "aten::hardtanh_", "aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
      "aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d", "aten::max_pool1d", "aten::max_pool2d",
      "aten::max_pool3d", "aten::mean", "aten::sum", "prim::TupleConstruct", "prim::ListConstruct",
      "prim::DictConstruct", "aten::__getitem__", "prim::TupleIndex", "aten::chunk", "aten::split",
      "prim::ListUnpack", "prim::TupleUnpack", "aten::index_select", "aten::float", "aten::half",
      // The zero part stays zero in a stacked or joined output (diffusers'
      // SD3 ControlNet stacking its zero-initialized block outputs, eval44).
      "aten::stack", "aten::cat"};
  return ops.count(k) > 0;
}

/// The weight (gain) argument of a norm op, whose bias follows it; -1 for other ops.
int norm_weight_offset(const std::string& k) {
  if (k == "aten::batch_norm" || k == "aten::instance_norm") return 1;
  if (k == "aten::layer_norm" || k == "aten::group_norm") return 2;
  return -1;
}

/// Where a zero factor's product goes. kGate: somewhere else in the forward
/// (HF Doge's A = zeros in exp(A * softplus(dt_proj(x))), eval47: the
/// product is 0 and exp(0) = 1, so dt_proj gets no gradient while A is 0,
/// and A gets one: the first update ends it).
enum class Reach { kNone, kGate, kResidual, kOutput };

/// Where a zero product goes: a residual addition, the graph output, or neither.
Reach follow(const Value* p, int depth) {
  if (depth > 24) return Reach::kNone;
  Reach best = Reach::kNone;
  for (const auto& u : p->uses()) {
    const Node* user = u.user;
    const std::string k = kind_of(user);
    Reach r = Reach::kNone;
    if (user->kind() == c10::prim::Return) {
      const Node* owner = user->owningBlock()->owningNode();
      r = owner ? (u.offset < owner->outputs().size() ? follow(owner->output(u.offset), depth + 1) : Reach::kNone)
                : Reach::kOutput;
    } else if (k == "aten::add" || k == "aten::add_" || k == "aten::sub" || k == "aten::sub_") {
      // A join with another tensor: the residual stream plus the (zero) branch.
      const bool tensor_other = user->inputs().size() >= 2 &&
                                user->input(u.offset == 0 ? 1 : 0)->type()->cast<c10::TensorType>() != nullptr;
      r = tensor_other ? Reach::kResidual : follow(user->output(), depth + 1);
    } else if (const int wi = norm_weight_offset(k); wi >= 0 && static_cast<int>(u.offset) == wi &&
                                                      user->inputs().size() > static_cast<size_t>(wi + 1) &&
                                                      user->input(static_cast<size_t>(wi + 1))->type()->kind() ==
                                                          c10::TypeKind::NoneType) {
      // A zero gain of a norm without bias outputs zeros: timm's
      // ScaledStdConv2d standardizes its weight with F.batch_norm(weight,
      // weight=gain * scale), and NF-ResNets start conv3's gain at 0.
      r = follow(user->output(), depth + 1);
    } else if (keeps_zero(k)) {
      for (const Value* o : user->outputs()) {
        r = follow(o, depth + 1);
        if (r != Reach::kNone) break;
      }
    }
    if (r == Reach::kOutput) return r;
    if (r == Reach::kResidual) best = r;
  }
  return best;
}

/// True when `user` subtracts from `v` (input `offset` 0) a mean of `v`
/// itself: aten::mean / aten::var_mean / aten::std_mean of the same value,
/// read through views and tuple unpacking. The difference is zero where `v`
/// is all zero.
bool centres_on_own_mean(const Node* user, size_t offset, const Value* v) {
  const std::string k = kind_of(user);
  if ((k != "aten::sub" && k != "aten::sub_") || offset != 0 || user->inputs().size() < 2) return false;
  const Value* m = user->input(1);
  for (int hops = 0; hops < 4; ++hops) {
    const Node* p = m->node();
    const std::string pk = kind_of(p);
    if (pk == "prim::TupleIndex" || pk == "prim::TupleUnpack" || carries_param(pk)) {
      if (p->inputs().empty()) return false;
      m = p->input(0);
      continue;
    }
    if ((pk == "aten::mean" || pk == "aten::var_mean" || pk == "aten::std_mean") && !p->inputs().empty())
      return p->input(0) == v;
    return false;
  }
  return false;
}

/// The op adds a bias term that is not a zero parameter (`zero_values`: the
/// reads of the all-zero parameters): linear / convolution / norm bias, the
/// added matrix of addmm. None, or a zero parameter, adds nothing.
bool adds_nonzero_bias(const Node* n, const std::set<const Value*>& zero_values) {
  const std::string k = kind_of(n);
  int bias = -1;
  if (k == "aten::linear" || k == "aten::conv1d" || k == "aten::conv2d" || k == "aten::conv3d" ||
      k == "aten::_convolution" || k == "aten::_convolution_mode" || k == "aten::convolution" ||
      k == "aten::conv_transpose1d" || k == "aten::conv_transpose2d" || k == "aten::conv_transpose3d" ||
      k == "aten::batch_norm" || k == "aten::instance_norm")
    bias = 2;
  else if (k == "aten::layer_norm" || k == "aten::group_norm")
    bias = 3;
  else if (k == "aten::addmm" || k == "aten::baddbmm" || k == "aten::addbmm" || k == "aten::addmv")
    bias = 0;
  if (bias < 0 || static_cast<size_t>(bias) >= n->inputs().size()) return false;
  const Value* b = n->input(static_cast<size_t>(bias));
  if (b->type()->kind() == c10::TypeKind::NoneType || !b->type()->cast<c10::TensorType>()) return false;
  return !zero_values.count(b) && b->node()->kind() == c10::prim::GetAttr;
}

/// Does the parameter value `v` (a GetAttr output) act as a factor whose
/// product reaches a residual addition or the output? With `zero_values`
/// (the reads of all-zero parameters), a product beside a bias that is
/// not zero reaches only as a gate.
Reach factor_reach(const Value* v, int depth, const std::set<const Value*>* zero_values = nullptr) {
  if (depth > 6) return Reach::kNone;
  Reach best = Reach::kNone;
  for (const auto& u : v->uses()) {
    const Node* user = u.user;
    Reach r = Reach::kNone;
    if (carries_param(kind_of(user)) && kind_of(user) != "prim::ListConstruct") {
      r = factor_reach(user->output(), depth + 1, zero_values);
    } else if (centres_on_own_mean(user, u.offset, v)) {
      // w - w.mean(...): a weight standardization (BiT's StdConv2d,
      // (w - m) / sqrt(v + eps)) of a zero weight is zero.
      r = factor_reach(user->output(), depth + 1, zero_values);
    } else if (kind_of(user) == "prim::ListConstruct") {
      for (const auto& lu : user->output()->uses())
        if (kind_of(lu.user) == "aten::einsum") r = follow(lu.user->output(), 0);
    } else if (multiplies(user, u.offset) && zero_values && adds_nonzero_bias(user, *zero_values)) {
      // A zero weight beside a bias that is not zero (xLSTM's gate
      // projections, bias -10 on the input gate): the output is the bias,
      // not zero, so no branch is zeroed; what the weight multiplies still
      // gets no gradient while it is 0 (eval46 hf_xlstm_train named 8
      // zeroed residual branches where 4 were).
      r = Reach::kGate;
    } else if (multiplies(user, u.offset)) {
      r = follow(user->output(), 0);
      // In place (timm's NormFreeBlock: out.mul_(self.skipinit_gain), its
      // result unused): the product is the written tensor, read by what
      // comes after.
      if (r == Reach::kNone && u.offset > 0 && recognize::in_place_op(user)) r = follow(user->input(0), 0);
      // A zero product read by anything else (an exponent, a gate): the
      // other factor's gradient is zero all the same.
      if (r == Reach::kNone && !user->output()->uses().empty()) r = Reach::kGate;
    }
    if (r == Reach::kOutput) return r;
    if (r == Reach::kResidual || (r == Reach::kGate && best == Reach::kNone)) best = r;
  }
  return best;
}

void walk(torch::jit::Block* b, std::vector<Node*>& out) {
  for (Node* n : b->nodes()) {
    out.push_back(n);
    for (torch::jit::Block* sb : n->blocks()) walk(sb, out);
  }
}

bool all_zero(const at::Tensor& t) { return t.numel() > 0 && t.detach().eq(0).all().item<bool>(); }

/// Every read of a tensor attribute (a parameter or buffer: prim::GetAttr)
/// in forward's inlined graph (with any_type, every attribute read: an
/// Optional[Tensor] bias too), with its named_parameters()-style path
/// ("blocks.0.gamma_1"), in graph order. `graph` owns the values.
struct AttrReads {
  std::shared_ptr<torch::jit::Graph> graph;
  std::vector<std::pair<std::string, Value*>> reads;
};

/// forward's graph as it runs: inlined, with a submodule's tuple returns
/// packed and unpacked lowered to their values (so what reaches a spiking
/// neuron's mem does not reach its spk), and the configuration branches an
/// attribute decides folded (`if self.surrogate:` set False reads nothing).
std::shared_ptr<torch::jit::Graph> forward_as_it_runs(const Session& s, const ScopeResolver& scopes) {
  std::shared_ptr<torch::jit::Graph> g = s.model.module.get_method("forward").graph()->copy();
  torch::jit::Inline(*g);
  torch::jit::LowerSimpleTuples(g);
  fold_static_branches(*g, scopes);
  return g;
}

AttrReads tensor_attribute_reads(const Session& s, bool any_type = false) {
  AttrReads r;
  ScopeResolver scopes(s.model);
  r.graph = forward_as_it_runs(s, scopes);
  std::vector<Node*> nodes;
  walk(r.graph->block(), nodes);
  for (Node* n : nodes) {
    if (n->kind() != c10::prim::GetAttr || (!any_type && !n->output()->type()->cast<c10::TensorType>())) continue;
    auto owner = scopes.module_path_of(n->input());
    if (!owner) continue;
    r.reads.push_back({owner->empty() ? n->s(c10::attr::name) : *owner + "." + n->s(c10::attr::name), n->output()});
  }
  return r;
}

/// small_branch_gains' bound: LayerScale and CaiT initialize their gains at
/// 1e-5 or 1e-6 (Touvron et al. 2021), ReZero-style scalars start near 0;
/// a learned gain of a trained model that small is the same convention.
constexpr double kSmallGain = 1e-3;

}  // namespace

std::vector<std::pair<std::string, double>> small_branch_gains(const Session& s) {
  std::vector<std::pair<std::string, double>> out;
  std::map<std::string, double> small;  // path -> absmax
  for (const auto& mi : s.model.modules)
    for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) {
      if (!p.value.requires_grad() || p.value.numel() == 0) continue;
      // A gain is a scalar or a vector over channels ([C], torchvision
      // ConvNeXt's [C, 1, 1]): at most one axis longer than 1. A weight
      // matrix that small is an initialization (SAM's initializer_range
      // 1e-10), not a branch gain.
      int64_t long_axes = 0;
      for (int64_t d : p.value.sizes()) long_axes += d > 1 ? 1 : 0;
      if (long_axes > 1) continue;
      const double a = p.value.detach().abs().max().item<double>();
      if (a > 0 && a <= kSmallGain) small[mi.path.empty() ? p.name : mi.path + "." + p.name] = a;
    }
  if (small.empty()) return out;
  const AttrReads ar = tensor_attribute_reads(s);
  std::set<std::string> seen;
  for (const auto& [path, v] : ar.reads) {
    auto it = small.find(path);
    if (it == small.end() || seen.count(path)) continue;
    if (factor_reach(v, 0) == Reach::kResidual) {
      seen.insert(path);
      out.push_back(*it);
    }
  }
  return out;
}

/// Trainable parameters by their full path (module path + "." + name), as TensorImpl.
static std::map<std::string, const void*> trainable_by_path(const Session& s) {
  std::map<std::string, const void*> by_path;
  for (const auto& mi : s.model.modules)
    for (const auto& p : mi.module.named_parameters(/*recurse=*/false))
      if (p.value.requires_grad())
        by_path[mi.path.empty() ? p.name : mi.path + "." + p.name] = p.value.unsafeGetTensorImpl();
  return by_path;
}

std::set<const void*> parameters_never_read(const Session& s) {
  std::set<const void*> out;
  if (s.model.kind != "traced" && s.model.kind != "scripted") return out;
  const std::map<std::string, const void*> by_path = trainable_by_path(s);
  if (by_path.empty()) return out;
  // Every attribute read, whatever its type: a scripted nn.Conv2d reads
  // its bias as Optional[Tensor] (self.bias).
  std::set<const void*> read;
  const AttrReads ar = tensor_attribute_reads(s, /*any_type=*/true);
  for (const auto& [path, v] : ar.reads) {
    auto it = by_path.find(path);
    if (it != by_path.end()) read.insert(it->second);
  }
  // A graph that reads no parameter at all by attribute (parameters passed
  // some other way) says nothing about any of them.
  if (read.empty()) return out;
  for (const auto& [path, impl] : by_path)
    if (!read.count(impl)) out.insert(impl);
  return out;
}

std::vector<std::string> parameters_written_in_forward(const Session& s) {
  std::vector<std::string> out;
  if (s.model.kind != "traced" && s.model.kind != "scripted") return out;
  std::set<std::string> params;
  for (const auto& mi : s.model.modules)
    for (const auto& p : mi.module.named_parameters(/*recurse=*/false))
      params.insert(mi.path.empty() ? p.name : mi.path + "." + p.name);
  if (params.empty()) return out;
  try {
    const AttrReads ar = tensor_attribute_reads(s);
    for (const auto& [path, v0] : ar.reads) {
      if (!params.count(path) || std::find(out.begin(), out.end(), path) != out.end()) continue;
      // The parameter and the tensors that alias its storage: `.data` and
      // `.detach()` (Glow's ActNorm.initialize writes self.loc.data.copy_(...)
      // on its first call, eval40 C01), views and slices of either.
      std::vector<const Value*> aliases{v0};
      bool written = false;
      for (size_t i = 0; i < aliases.size() && !written && aliases.size() < 64; ++i)
        for (const auto& u : aliases[i]->uses()) {
          const std::string k = kind_of(u.user);
          // An in-place aten op on it (its first argument): HF RWKV's
          // rescale_every divides the output weights by 2 in place (div_),
          // and a trace keeps the op.
          if (u.offset == 0 && k.rfind("aten::", 0) == 0 && k.size() > 7 && k.back() == '_' && k != "aten::requires_grad_") {
            written = true;
            break;
          }
          static const std::set<std::string> kAlias = {"prim::data", "aten::detach", "aten::view", "aten::view_as",
                                                        "aten::reshape", "aten::select", "aten::slice", "aten::squeeze",
                                                        "aten::unsqueeze", "aten::flatten", "aten::expand_as", "aten::t",
                                                        "aten::permute", "aten::transpose"};
          if (u.offset == 0 && kAlias.count(k) && u.user->outputs().size() == 1) aliases.push_back(u.user->output());
        }
      if (written) out.push_back(path);
    }
  } catch (const std::exception&) {
    // No graph to read: nothing known to be written.
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> attributes_set_in_forward(const Session& s) {
  std::vector<std::pair<std::string, std::string>> out;
  if (s.model.kind != "traced" && s.model.kind != "scripted") return out;
  try {
    std::shared_ptr<torch::jit::Graph> g = s.model.module.get_method("forward").graph()->copy();
    torch::jit::Inline(*g);
    ScopeResolver scopes(s.model);
    std::vector<Node*> nodes;
    walk(g->block(), nodes);
    for (Node* n : nodes) {
      if (n->kind() != c10::prim::SetAttr || n->inputs().size() < 2) continue;
      const c10::TypePtr t = n->input(1)->type();
      if (t->cast<c10::TensorType>()) continue;  // a tensor attribute is a buffer or parameter, kept as such
      if (t->kind() != c10::TypeKind::BoolType && t->kind() != c10::TypeKind::IntType && t->kind() != c10::TypeKind::FloatType)
        continue;
      auto owner = scopes.module_path_of(n->input(0));
      if (!owner) continue;
      const std::pair<std::string, std::string> key{*owner, n->s(c10::attr::name)};
      if (std::find(out.begin(), out.end(), key) == out.end()) out.push_back(key);
    }
  } catch (const std::exception&) {
    // No graph to read: nothing known to be set.
  }
  return out;
}

std::set<const void*> parameters_behind_detach(const Session& s, std::set<const void*>* behind_index,
                                              GradientCut* last_cut) {
  std::set<const void*> out;
  // Ops whose output carries no gradient to the input: the indices of a
  // selection (topk, sort, max/min over a dim: output 1), argmax/argsort,
  // comparisons (their bools). A route through one is cut as by a detach.
  static const std::set<std::string> two_output_select = {"aten::topk", "aten::sort", "aten::max", "aten::min",
                                                          "aten::kthvalue", "aten::mode", "aten::median"};
  static const std::set<std::string> no_grad_ops = {"aten::argmax", "aten::argmin", "aten::argsort", "aten::eq",
                                                    "aten::ne",     "aten::gt",     "aten::lt",      "aten::ge",
                                                    "aten::le",     "aten::sign",   "aten::floor_divide"};
  if (s.model.kind != "traced" && s.model.kind != "scripted") return out;
  const std::map<std::string, const void*> by_path = trainable_by_path(s);
  const AttrReads ar = tensor_attribute_reads(s);
  // Per parameter: whether a route without detach reaches the return, and
  // whether one through a detach does.
  std::map<const void*, std::pair<bool, bool>> reach;
  std::set<const void*> indexed_params;
  // The cut ops each parameter's routes reach.
  std::map<const void*, std::set<const Node*>> cuts_of;
  for (const auto& [path, v0] : ar.reads) {
    auto param = by_path.find(path);
    if (param == by_path.end()) continue;
    bool live = false, detached = false, indexed = false;
    std::set<const Node*>& cuts = cuts_of[param->second];
    std::vector<const Value*> todo{v0};
    std::set<const Value*> seen{v0};
    while (!todo.empty() && !live && seen.size() < 200000) {
      const Value* v = todo.back();
      todo.pop_back();
      for (const auto& u : v->uses()) {
        const Node* user = u.user;
        if (user->kind() == c10::prim::Return) {
          const Node* owner = user->owningBlock()->owningNode();
          if (!owner) {
            live = true;
            break;
          }
          if (owner->kind() == c10::prim::Loop) {
            // A loop body returns (continue?, carried...): carried value k
            // is the loop's output k - 1 and the body's input k next time.
            if (u.offset == 0) continue;
            if (u.offset - 1 < owner->outputs().size() && seen.insert(owner->output(u.offset - 1)).second)
              todo.push_back(owner->output(u.offset - 1));
            const auto* body = user->owningBlock();
            if (u.offset < body->inputs().size() && seen.insert(body->inputs()[u.offset]).second)
              todo.push_back(body->inputs()[u.offset]);
            continue;
          }
          if (u.offset < owner->outputs().size() && seen.insert(owner->output(u.offset)).second)
            todo.push_back(owner->output(u.offset));
          continue;
        }
        const std::string uk = kind_of(user);
        if (uk == "aten::detach") {
          detached = true;
          cuts.insert(user);
          continue;
        }
        if (no_grad_ops.count(uk)) {
          indexed = true;
          cuts.insert(user);
          continue;
        }
        if (two_output_select.count(uk) && user->outputs().size() == 2) {
          indexed = true;  // the indices: cut; the values carry the gradient on
          cuts.insert(user);
          if (seen.insert(user->output(0)).second) todo.push_back(user->output(0));
          continue;
        }
        for (const Value* o : user->outputs())
          if (seen.insert(o).second) todo.push_back(o);
      }
    }
    auto& r = reach[param->second];
    r.first = r.first || live;
    r.second = r.second || detached;
    if (indexed) indexed_params.insert(param->second);
  }
  std::set<const Node*> closing;  // cut ops of the parameters without a live route
  for (const auto& [impl, r] : reach) {
    if (r.first) continue;
    closing.insert(cuts_of[impl].begin(), cuts_of[impl].end());
    if (r.second) out.insert(impl);
    else if (indexed_params.count(impl) && behind_index) behind_index->insert(impl);
  }
  if (last_cut && !closing.empty()) {
    // The last of them in graph order: where the deepest parameters'
    // routes end, nearest the output.
    std::vector<Node*> nodes;
    walk(ar.graph->block(), nodes);
    const Node* last = nullptr;
    for (const Node* n : nodes)
      if (closing.count(n)) last = n;
    if (last) {
      ScopeResolver scopes(s.model);
      const auto& chain = scopes.chain(last);
      const std::string k = kind_of(last);
      last_cut->op = k;
      last_cut->module = chain.empty() ? std::string() : chain.back();
      last_cut->kind = k == "aten::detach"                                          ? "detach"
                       : two_output_select.count(k) || k.find("arg") != std::string::npos ? "selection"
                       : k == "aten::floor_divide"                                  ? "integer division"
                                                                                    : "comparison";
      last_cut->sites = static_cast<int64_t>(closing.size());
    }
  }
  return out;
}

std::string ops_in_own_forward(const Session& s, const std::string& module, const std::set<std::string>& kinds) {
  std::string out;
  if (s.model.kind != "traced" && s.model.kind != "scripted") return out;
  try {
    ScopeResolver scopes(s.model);
    const std::shared_ptr<torch::jit::Graph> g = forward_as_it_runs(s, scopes);
    std::vector<Node*> nodes;
    walk(g->block(), nodes);
    std::set<std::string> seen;
    for (Node* n : nodes) {
      const std::string k = kind_of(n);
      if (!kinds.count(k) || seen.count(k)) continue;
      const auto& chain = scopes.chain(n);
      if ((chain.empty() ? std::string() : chain.back()) != module) continue;
      seen.insert(k);
      out += (out.empty() ? "" : ", ") + k;
    }
  } catch (const std::exception&) {
    // No graph to read: none named.
  }
  return out;
}

std::set<const void*> parameters_written_by_mask(const Session& s) {
  std::set<const void*> out;
  if (s.model.kind != "traced" && s.model.kind != "scripted") return out;
  // Ops that pass the parameter's values on unchanged in kind (a cast, a
  // broadcast, a reshape, a repeat), and the masked writes whose value or
  // source operand it may be, by operand index.
  static const std::set<std::string> carriers = {
      "aten::to", "aten::type_as", "aten::expand", "aten::expand_as", "aten::broadcast_to", "aten::repeat",
      "aten::view", "aten::reshape", "aten::unsqueeze", "aten::squeeze", "aten::flatten", "aten::contiguous",
      "aten::clone", "aten::view_as", "aten::reshape_as"};
  static const std::map<std::string, std::set<size_t>> writes = {
      {"aten::index_put_", {2}}, {"aten::index_put", {2}},        {"aten::masked_scatter", {2}},
      {"aten::masked_scatter_", {2}}, {"aten::masked_fill", {2}}, {"aten::masked_fill_", {2}},
      {"aten::where", {1, 2}}};
  try {
    const std::map<std::string, const void*> by_path = trainable_by_path(s);
    const AttrReads ar = tensor_attribute_reads(s);
    std::map<const void*, bool> all_masked;  // per parameter: every read ends in a masked write
    for (const auto& [path, v0] : ar.reads) {
      auto param = by_path.find(path);
      if (param == by_path.end()) continue;
      bool masked = true;
      int64_t ends = 0;
      std::vector<const Value*> todo{v0};
      for (size_t i = 0; i < todo.size() && masked && i < 256; ++i)
        for (const auto& u : todo[i]->uses()) {
          const std::string uk = kind_of(u.user);
          auto w = writes.find(uk);
          if (w != writes.end() && w->second.count(u.offset)) {
            ++ends;
            continue;
          }
          if (carriers.count(uk) && u.offset == 0 && u.user->outputs().size() == 1) {
            todo.push_back(u.user->output());
            continue;
          }
          masked = false;
          break;
        }
      auto it = all_masked.find(param->second);
      const bool here = masked && ends > 0;
      all_masked[param->second] = it == all_masked.end() ? here : it->second && here;
    }
    for (const auto& [impl, masked] : all_masked)
      if (masked) out.insert(impl);
  } catch (const std::exception&) {
    // No graph to read: none known.
  }
  return out;
}

std::set<const void*> biases_cancelled_by_batch_norm(const Session& s) {
  std::set<const void*> out;
  std::map<std::string, const void*> by_path;
  for (const auto& mi : s.model.modules)
    for (const auto& p : mi.module.named_parameters(/*recurse=*/false))
      by_path[mi.path.empty() ? p.name : mi.path + "." + p.name] = p.value.unsafeGetTensorImpl();
  const AttrReads ar = tensor_attribute_reads(s);
  static const std::set<std::string> producers = {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution", "aten::_convolution_mode",
                                                  "aten::convolution", "aten::linear"};
  for (const auto& [path, v] : ar.reads) {
    auto param = by_path.find(path);
    if (param == by_path.end()) continue;
    for (const auto& u : v->uses()) {
      // The bias argument of a convolution/linear whose output is a batch_norm's input.
      if (!producers.count(kind_of(u.user)) || u.offset != 2) continue;
      for (const auto& bu : u.user->output()->uses()) {
        Node* bn = bu.user;
        if (kind_of(bn) != "aten::batch_norm" || bu.offset != 0 || bn->inputs().size() < 6) continue;
        // A scripted `training=False` written in the code keeps running statistics.
        if (auto flag = torch::jit::toIValue(bn->input(5)); flag && flag->isBool() && !flag->toBool() && s.model.kind != "traced")
          continue;
        out.insert(param->second);
      }
    }
  }
  return out;
}

void lift_zero(const at::Tensor& t, at::Generator& gen) {
  at::NoGradGuard ng;
  at::Tensor v;
  if (t.dim() >= 2) {
    const double fan_in = static_cast<double>(t.numel() / std::max<int64_t>(1, t.size(0)));
    v = at::randn(t.sizes(), gen, at::TensorOptions().dtype(at::kFloat)) / std::sqrt(std::max(1.0, fan_in));
  } else {
    v = at::ones(t.sizes(), at::TensorOptions().dtype(at::kFloat));
  }
  t.detach().copy_(v.to(t.device()).to(t.scalar_type()));
}

ZeroInitFacts zero_init_conventions(Session& s) {
  ZeroInitFacts f;
  auto role_of = [](Reach r) {
    return r == Reach::kOutput ? "output" : r == Reach::kGate ? "gate" : "residual branch";
  };
  // Trainable parameters that are exactly zero, once per tensor (tied weights).
  struct Cand {
    std::string path;
    at::Tensor value;
    int64_t order;
  };
  std::map<const void*, Cand> zero;
  std::map<std::string, const void*> by_path;
  std::map<std::string, int64_t> exec;
  for (const auto& l : s.doc.layers) exec[l.path] = l.exec_order;
  for (const auto& mi : s.model.modules)
    for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) {
      const std::string path = mi.path.empty() ? p.name : mi.path + "." + p.name;
      by_path[path] = p.value.unsafeGetTensorImpl();
      if (!p.value.requires_grad() || !all_zero(p.value) || zero.count(p.value.unsafeGetTensorImpl())) continue;
      zero[p.value.unsafeGetTensorImpl()] = {path, p.value, exec.count(mi.path) ? exec[mi.path] : -1};
    }
  if (zero.empty()) return f;

  // Their uses in the inlined forward graph.
  const AttrReads ar = tensor_attribute_reads(s);
  std::set<const Value*> zero_values;
  for (const auto& [path, v] : ar.reads) {
    auto it = by_path.find(path);
    if (it != by_path.end() && zero.count(it->second)) zero_values.insert(v);
  }
  std::map<const void*, Reach> reach;
  for (const auto& [path, v] : ar.reads) {
    auto it = by_path.find(path);
    if (it == by_path.end() || !zero.count(it->second)) continue;
    const Reach r = factor_reach(v, 0, &zero_values);
    if (r == Reach::kNone) continue;
    Reach& cur = reach[it->second];
    if (static_cast<int>(r) > static_cast<int>(cur)) cur = r;
  }
  if (reach.empty()) return f;
  std::vector<const Cand*> conv;
  for (const auto& [impl, r] : reach) conv.push_back(&zero[impl]);
  std::sort(conv.begin(), conv.end(), [](const Cand* a, const Cand* b) {
    return std::tie(a->order, a->path) < std::tie(b->order, b->path);
  });
  // Zero parameters the first update ends: those with a gradient in the
  // real pass, then, lifting them, those that get one once the zeros after
  // them are lifted (ControlNet's conditioning embedding ends in a zero conv
  // that feeds a zero conv: the second moves on the first step, the first on
  // the second); a zero BatchNorm gamma moves at once (the branch before it
  // is live). Two zero factors in a row whose product stays zero (timm's
  // skipinit gain and a zero conv3 gain: each one's gradient is the other's
  // value times something) never move: neither is a convention.
  const auto train = s.train();
  if (!train) return f;
  std::vector<const Cand*> pending = conv;
  conv.clear();
  // A gradient from the loss, or (a zero conv before an output the loss
  // does not read) from the other outputs.
  auto moves = [&](const PassResult& pass, const at::Tensor& v) {
    const at::Tensor g = pass.grad_of(v);
    return (g.defined() && !all_zero(g)) || pass.reach_other_outputs_only.count(v.unsafeGetTensorImpl()) > 0;
  };
  auto take = [&](const PassResult& pass) {
    size_t added = 0;
    for (auto it = pending.begin(); it != pending.end();) {
      if (moves(pass, (*it)->value)) {
        conv.push_back(*it);
        it = pending.erase(it);
        ++added;
      } else {
        ++it;
      }
    }
    return added;
  };
  take(*train);
  if (conv.empty()) return f;

  // Parameters whose gradient is exactly zero, or missing, in the real pass.
  struct P {
    std::string path;
    at::Tensor value, grad;
  };
  std::vector<P> params;
  std::set<const void*> seen;
  bool any_without_signal = false;
  for (const auto& mi : s.model.modules)
    for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) {
      if (!p.value.requires_grad() || !seen.insert(p.value.unsafeGetTensorImpl()).second) continue;
      const std::string path = mi.path.empty() ? p.name : mi.path + "." + p.name;
      const at::Tensor g = train->grad_of(p.value);
      params.push_back({path, p.value, g});
      if (!g.defined() || all_zero(g)) any_without_signal = true;
    }
  if (!any_without_signal) {
    for (const Cand* c : conv) {
      f.params.push_back(c->path);
      f.role[c->path] = role_of(reach[c->value.unsafeGetTensorImpl()]);
    }
    return f;
  }

  // The train pass again with the zeros lifted (values and gradients put
  // back after), at most three times while lifting reveals more.
  at::Generator gen = at::detail::createCPUGenerator(s.opt.seed + 16);
  std::vector<std::pair<at::Tensor, at::Tensor>> saved_values;
  std::set<const void*> lifted_set;
  std::map<std::string, bool> lifted_nonzero;
  auto restore = [&]() {
    at::NoGradGuard ng;
    for (auto& [live, copy] : saved_values) live.detach().copy_(copy);
    for (auto& p : params) p.value.mutable_grad() = p.grad;
  };
  for (int round = 0; round < 3; ++round) {
    {
      at::NoGradGuard ng;
      for (const Cand* c : conv) {
        if (!lifted_set.insert(c->value.unsafeGetTensorImpl()).second) continue;
        saved_values.push_back({c->value, c->value.detach().clone()});
        lift_zero(c->value, gen);
      }
    }
    for (auto& p : params) p.value.mutable_grad() = at::Tensor();
    try {
      PassSpec spec;
      spec.name = round == 0 ? "train-zero-init-lifted" : "train-zero-init-lifted-" + std::to_string(round + 1);
      spec.probe = "forward_backward";
      spec.train_mode = true;
      spec.backward = true;
      const PassResult lifted = s.run_pass(std::move(spec));
      // A gradient from the loss, or (for a parameter the loss does not
      // reach) from the outputs the loss does not read.
      for (auto& p : params) lifted_nonzero[p.path] = moves(lifted, p.value);
      f.lifted = true;
      if (round == 2 || take(lifted) == 0) break;
    } catch (const Error& e) {
      if (e.kind() == error_kind::kTimeout || e.kind() == error_kind::kOutOfMemory) {
        restore();
        throw;
      }
      f.error = e.what();
      break;
    }
  }
  restore();
  for (const Cand* c : conv) {
    f.params.push_back(c->path);
    f.role[c->path] = role_of(reach[c->value.unsafeGetTensorImpl()]);
  }
  if (!f.lifted) return f;
  // Silenced: no signal in the real pass, a signal with the zeros lifted
  // (the zero parameters lifted after the first round among them: they
  // move on the second step).
  for (const auto& p : params)
    if ((!p.grad.defined() || all_zero(p.grad)) && lifted_nonzero[p.path] &&
        !train->reach_other_outputs_only.count(p.value.unsafeGetTensorImpl())) {
      f.silenced.insert(p.path);
      f.silenced_tensors.insert(p.value.unsafeGetTensorImpl());
    }
  return f;
}

}  // namespace nd
