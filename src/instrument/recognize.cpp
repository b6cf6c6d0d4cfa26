#include "instrument/recognize.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <iostream>
#include <set>

#include <torch/csrc/jit/ir/constants.h>

#include "instrument/instrument.h"

namespace nd {
namespace recognize {
namespace {

using torch::jit::Node;
using torch::jit::Value;

std::string kind_of(const Node* n) { return n->kind().toQualString(); }
bool is_tensor(const Value* v) { return v->type()->kind() == c10::TypeKind::TensorType; }

bool is_trivial(const std::string& k) {
  static const std::unordered_set<std::string> kOps = {
      "aten::to", "aten::type_as", "aten::contiguous", "aten::clone", "aten::detach", "aten::dropout",
      "aten::dropout_", "aten::float", "aten::half", "aten::bfloat16", "normdoctor::tap", "aten::identity",
      // Broadcasting written out (attention-is-all-you-need-pytorch's
      // LayerNormalization: (z - mu.expand_as(z)) / (sigma.expand_as(z) + eps)):
      // the same values as the implicit broadcast.
      "aten::expand_as", "aten::expand"};
  return kOps.count(k) > 0;
}

Value* strip(Value* v) {
  for (int i = 0; i < 16; ++i) {
    Node* n = v->node();
    if (is_trivial(kind_of(n)) && !n->inputs().empty() && is_tensor(n->input(0))) {
      v = n->input(0);
      continue;
    }
    // An if whose branches all return the same tensor up to casts
    // (`h = x.to(torch.float32) if self.upcast else x`).
    if (n->kind() == c10::prim::If && n->blocks().size() == 2) {
      Value* same = nullptr;
      bool ok = true;
      for (auto* blk : n->blocks()) {
        if (v->offset() >= blk->return_node()->inputs().size()) {
          ok = false;
          break;
        }
        Value* r = strip(blk->return_node()->input(v->offset()));
        if (same && r != same) ok = false;
        same = r;
      }
      if (ok && same) {
        v = same;
        continue;
      }
    }
    break;
  }
  return v;
}

std::optional<double> number(Value* v) { return structure::const_number(v); }

// A value that is not data: a scalar (float/int, constant or computed from
// attributes), a constant tensor, or a module attribute.
bool not_data(Value* v) {
  if (!is_tensor(v)) return v->type()->kind() == c10::TypeKind::FloatType || v->type()->kind() == c10::TypeKind::IntType ||
                            v->type()->kind() == c10::TypeKind::NumberType;
  const auto k = strip(v)->node()->kind();
  return k == c10::prim::Constant || k == c10::prim::GetAttr;
}

// pow(x, 2), x * x, square(x): the x; nullptr otherwise.
Value* squared(Value* v) {
  Node* sq = v->node();
  const std::string sk = kind_of(sq);
  if (sk == "aten::pow" && sq->inputs().size() >= 2 && is_tensor(sq->input(0))) {
    auto e = number(sq->input(1));
    if (e && *e == 2.0) return sq->input(0);
  } else if (sk == "aten::mul" && sq->inputs().size() >= 2 && is_tensor(sq->input(0)) && sq->input(0) == sq->input(1)) {
    return sq->input(0);
  } else if (sk == "aten::square") {
    return sq->input(0);
  }
  return nullptr;
}

// The rows of x a boolean mask keeps (x[keep], keep = ~pad_mask.view(-1)):
// the x, whose statistic over those rows is a masked statistic of x along
// axis 0 (fairseq/PowerNorm's MaskBatchNorm over the non-pad tokens of a
// [T*B, C] view). v itself otherwise.
Value* rows_of(Value* v, int depth = 0) {
  Value* s = strip(v);
  Node* n = s->node();
  // `xs = x[keep] if pad_mask is not None else x`: both branches rows of x.
  if (n->kind() == c10::prim::If && n->blocks().size() == 2 && depth < 3) {
    Value* same = nullptr;
    for (auto* blk : n->blocks()) {
      if (s->offset() >= blk->return_node()->inputs().size()) return s;
      Value* r = rows_of(blk->return_node()->input(s->offset()), depth + 1);
      if (same && r != same) return s;
      same = r;
    }
    return same ? same : s;
  }
  // x.reshape(-1, C) / x.view(-1, x.size(-1)) / x.flatten(0, -2): every
  // row of x, its leading axes merged.
  const std::string nk = kind_of(n);
  if ((nk == "aten::reshape" || nk == "aten::view") && n->inputs().size() >= 2 && is_tensor(n->input(0))) {
    Node* l = n->input(1)->node();
    if (l->kind() == c10::prim::ListConstruct && l->inputs().size() == 2 && number(l->input(0)) == -1.0)
      return strip(n->input(0));
    if (auto c = structure::const_int_list(n->input(1)))
      if (c->size() == 2 && (*c)[0] == -1) return strip(n->input(0));
    return s;
  }
  if (nk == "aten::flatten" && n->inputs().size() >= 3 && number(n->input(1)) == 0.0 && number(n->input(2)) == -2.0)
    return strip(n->input(0));
  if (nk != "aten::index" || n->inputs().size() < 2 || !is_tensor(n->input(0))) return s;
  Node* l = n->input(1)->node();
  if (l->kind() != c10::prim::ListConstruct || l->inputs().size() != 1) return s;
  Value* m = l->input(0);
  bool boolean = false;
  if (auto tt = m->type()->cast<c10::TensorType>())
    if (tt->scalarType() && *tt->scalarType() == at::kBool) boolean = true;
  static const std::unordered_set<std::string> kBoolOps = {
      "aten::bitwise_not", "aten::logical_not", "aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge",
      "aten::logical_and", "aten::logical_or", "aten::__invert__", "aten::bool"};
  Node* mn = m->node();
  for (int i = 0; i < 4 && !boolean; ++i) {
    const std::string mk = kind_of(mn);
    if (kBoolOps.count(mk)) boolean = true;
    else if ((mk == "aten::reshape" || mk == "aten::view" || mk == "aten::flatten" || mk == "aten::contiguous") &&
             !mn->inputs().empty())
      mn = mn->input(0)->node();
    else
      break;
  }
  return boolean ? strip(n->input(0)) : s;
}

// aten::slice(x, dim, None|0, None|INT64_MAX, 1): every element of x along
// dim, the `:` of `mean[None, :, None, None]`.
bool full_slice(const Node* n) {
  if (kind_of(n) != "aten::slice" || n->inputs().size() < 5) return false;
  auto start = torch::jit::toIValue(n->input(2));
  auto end = torch::jit::toIValue(n->input(3));
  const bool start_ok = start && (start->isNone() || (start->isInt() && start->toInt() == 0));
  const bool end_ok = end && (end->isNone() || (end->isInt() && end->toInt() >= (int64_t{1} << 62)));
  return start_ok && end_ok && number(n->input(4)) == 1.0;
}

// A per-channel statistic given the axes it broadcasts over
// (mean[None, :, None, None], mean.view(1, -1, 1, 1), mean.unsqueeze(-1)):
// the statistic, the same values in another shape.
Value* broadcast_source(Value* v) {
  v = strip(v);
  for (int i = 0; i < 8; ++i) {
    Node* n = v->node();
    const std::string k = kind_of(n);
    if (n->inputs().empty() || !is_tensor(n->input(0))) break;
    if (k == "aten::unsqueeze" || k == "aten::view" || k == "aten::reshape" || full_slice(n))
      v = strip(n->input(0));
    else
      break;
  }
  return v;
}

// A mean over some axes, then over others, each keeping its axes
// (Conv-TasNet's gLN: y.mean(dim=1, keepdim=True).mean(dim=2, keepdim=True)):
// the innermost mean's input and the union of the constant dims; `outer`
// itself and no dims when the nesting is not that.
Value* nested_mean_source(Node* outer, std::vector<int64_t>* dims, Node** innermost = nullptr) {
  Node* m = outer;
  std::vector<int64_t> all;
  for (int i = 0; i < 4; ++i) {
    if (kind_of(m) != "aten::mean" || m->inputs().size() < 3) break;
    const auto d = structure::const_int_list(m->input(1));
    auto kd = torch::jit::toIValue(m->input(2));
    if (!d || !kd || !kd->isBool() || !kd->toBool()) break;
    all.insert(all.end(), d->begin(), d->end());
    Node* inner = strip(m->input(0))->node();
    if (kind_of(inner) != "aten::mean") break;
    m = inner;
  }
  if (innermost) *innermost = m;
  if (m == outer) return outer->input(0);
  if (dims) {
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    *dims = all;
  }
  return m->input(0);
}

// The aten::mean producing v, also from a branch of an if (a written-out
// BatchNorm's `mean = x.mean(0) if self.training else self.running_mean`)
// and through the shape a per-channel mean is given to broadcast.
Node* mean_node(Value* v, int depth = 0) {
  Value* b = broadcast_source(v);
  Node* m = b->node();
  if (kind_of(m) == "aten::mean") return m;
  if (m->kind() == c10::prim::If && depth < 3)
    for (auto* blk : m->blocks())
      if (b->offset() < blk->return_node()->inputs().size())
        if (Node* r = mean_node(blk->return_node()->input(b->offset()), depth + 1)) return r;
  return nullptr;
}

// The tensor a view/reshape reads (x of x.view(N, C, -1)); nullptr when v
// is not one.
Value* view_base(Value* v) {
  Node* n = strip(v)->node();
  const std::string k = kind_of(n);
  if ((k == "aten::view" || k == "aten::reshape") && !n->inputs().empty() && is_tensor(n->input(0)))
    return strip(n->input(0));
  return nullptr;
}

// sub(x, mean(x, dims, keepdim)): the x; nullptr otherwise. The mean may be
// over the rows of x a mask keeps (rows_of), or over x reshaped.
Value* centered_source(Value* v, Node** mean_out = nullptr) {
  Node* s = strip(v)->node();
  if (kind_of(s) != "aten::sub" || s->inputs().size() < 2 || !is_tensor(s->input(1))) return nullptr;
  Node* m = mean_node(s->input(1));
  if (!m) return nullptr;
  Node* inner = m;
  // The mean of x, or of x reshaped and broadcast back onto x (AdaIN's
  // calc_mean_std: feat.view(N, C, -1).mean(dim=2).view(N, C, 1, 1),
  // naoto0804/pytorch-AdaIN, eval48).
  Value* mean_of = rows_of(nested_mean_source(m, nullptr, &inner));
  if (mean_of != strip(s->input(0)) && view_base(mean_of) != strip(s->input(0))) return nullptr;
  if (mean_out) *mean_out = inner;  // the mean that reads x itself
  return s->input(0);
}

struct Reduction {
  nlohmann::json dims = "dynamic";
  bool keepdim = false;
  Value* dims_value = nullptr;  // the dims argument, when "dynamic" (read at run time)
};

// The dims of aten::mean / std / var / sum / norm / linalg_vector_norm /
// linalg_norm / frobenius_norm.
Reduction reduction_dims(Node* r, const std::function<std::optional<double>(Value*)>& attr_double) {
  Reduction out;
  const std::string k = kind_of(r);
  size_t dim_index = 1, keep_index = 2;
  if (k == "aten::norm" || k == "aten::linalg_vector_norm" || k == "aten::linalg_norm") dim_index = 2, keep_index = 3;
  if (k == "aten::std" || k == "aten::var") {
    // std(self, unbiased) | std.dim(self, dim, unbiased, keepdim) | std.correction(self, dim, *, correction, keepdim)
    keep_index = r->inputs().size() >= 4 ? 3 : 99;
  }
  if (r->inputs().size() <= dim_index) {
    out.dims = "all";
    return out;
  }
  Value* d = r->input(dim_index);
  auto iv = torch::jit::toIValue(d);
  if (iv && (iv->isNone() || iv->isBool())) {
    out.dims = "all";
  } else if (auto l = structure::const_int_list(d)) {
    out.dims = l->empty() ? nlohmann::json("all") : nlohmann::json(*l);
  } else if (d->node()->kind() == c10::prim::ListConstruct && !structure::list_written(d)) {
    // Dims held by the module (x.mean(self.dim, keepdim=True)).
    std::vector<int64_t> dims;
    for (Value* e : d->node()->inputs()) {
      std::optional<double> v = structure::const_number(e);
      if (!v && e->node()->kind() == c10::prim::GetAttr) v = attr_double(e);
      if (!v) {
        dims.clear();
        break;
      }
      dims.push_back(static_cast<int64_t>(*v));
    }
    if (!dims.empty()) out.dims = dims;
  } else if (d->type()->kind() == c10::TypeKind::ScalarTypeType || d->type()->kind() == c10::TypeKind::IntType) {
    // mean(self, dtype): all elements
    out.dims = "all";
  }
  if (out.dims == "dynamic") out.dims_value = d;
  if (keep_index < r->inputs().size()) {
    auto kd = torch::jit::toIValue(r->input(keep_index));
    if (kd && kd->isBool()) out.keepdim = kd->toBool();
  }
  return out;
}

// What the denominator (or reciprocal factor) of a scaling computes.
struct Stat {
  Value* source = nullptr;   // the tensor whose statistic it is (as used, before strip)
  Node* reader = nullptr;    // a node of the pattern that reads `source`
  Node* reduce = nullptr;
  Reduction red;
  bool centered = false;
  std::string statistic;     // std | var | mean_square | norm
  nlohmann::json eps = 0.0;
  bool inverted = false;     // the value is 1/statistic
  bool sqrt_seen = false;
  bool scaled = false;
  std::string normalizer;    // rsqrt | sqrt | std | norm | pow
  bool l2_unscaled = false;  // an L2 norm not divided by sqrt(n): F.normalize's denominator
};

std::optional<Stat> analyze(Value* d, const std::function<std::optional<double>(Value*)>& attr_double,
                            Stat st = Stat{}, int depth = 0) {
  Value* v = d;
  for (int step = 0; step < 16; ++step) {
    Node* n = v->node();
    const std::string k = kind_of(n);
    // A statistic chosen by a branch (`var = x.var(0) if self.training else
    // self.running_var`): the branch that computes one.
    if (n->kind() == c10::prim::If && depth < 3) {
      for (auto* blk : n->blocks())
        if (v->offset() < blk->return_node()->inputs().size())
          if (auto r = analyze(blk->return_node()->input(v->offset()), attr_double, st, depth + 1)) return r;
      return std::nullopt;
    }
    if (is_trivial(k) && !n->inputs().empty() && is_tensor(n->input(0))) {
      v = n->input(0);
      continue;
    }
    // A statistic reduced without keepdim and given its dims back for the
    // division (norm(x, dim=(1, 2)).unsqueeze(-1).unsqueeze(-1), .view(-1, 1, 1)).
    if ((k == "aten::unsqueeze" || k == "aten::view" || k == "aten::reshape" || k == "aten::expand" ||
         k == "aten::expand_as" || full_slice(n)) &&
        !n->inputs().empty() && is_tensor(n->input(0))) {
      v = n->input(0);
      continue;
    }
    if ((k == "aten::add" || k == "aten::add_") && n->inputs().size() >= 2) {
      Value *t = nullptr, *o = nullptr;
      if (is_tensor(n->input(0)) && !not_data(n->input(0)) && not_data(n->input(1))) t = n->input(0), o = n->input(1);
      else if (is_tensor(n->input(1)) && !not_data(n->input(1)) && not_data(n->input(0))) t = n->input(1), o = n->input(0);
      if (!t) return std::nullopt;
      std::optional<double> e = number(o);
      if (!e && o->node()->kind() == c10::prim::GetAttr) e = attr_double(o);
      st.eps = e ? nlohmann::json(*e) : nlohmann::json("dynamic");
      v = t;
      continue;
    }
    if ((k == "aten::clamp_min" || k == "aten::clamp") && n->inputs().size() >= 2) {
      std::optional<double> e = number(n->input(1));
      if (!e && n->input(1)->node()->kind() == c10::prim::GetAttr) e = attr_double(n->input(1));  // clamp(min=self.eps)
      if (e) st.eps = *e;
      v = n->input(0);
      continue;
    }
    if (k == "aten::sqrt") {
      st.sqrt_seen = true;
      if (st.normalizer.empty()) st.normalizer = "sqrt";
      v = n->input(0);
      continue;
    }
    if (k == "aten::rsqrt") {
      st.sqrt_seen = true;
      st.inverted = !st.inverted;
      if (st.normalizer.empty()) st.normalizer = "rsqrt";
      v = n->input(0);
      continue;
    }
    if (k == "aten::reciprocal") {
      st.inverted = !st.inverted;
      v = n->input(0);
      continue;
    }
    if (k == "aten::pow" && n->inputs().size() >= 2 && is_tensor(n->input(0))) {
      auto e = number(n->input(1));
      if (!e) return std::nullopt;
      if (*e == 0.5 || *e == -0.5) st.sqrt_seen = true;
      if (*e == -0.5 || *e == -1.0) st.inverted = !st.inverted;
      if (*e != 0.5 && *e != -0.5 && *e != -1.0) return std::nullopt;
      if (st.normalizer.empty()) st.normalizer = "pow";
      v = n->input(0);
      continue;
    }
    if ((k == "aten::mul" || k == "aten::div") && n->inputs().size() >= 2) {
      // Scaling by a number (x.norm(2, -1) / sqrt(d), * d ** -0.5).
      if (is_tensor(n->input(0)) && !not_data(n->input(0)) && not_data(n->input(1))) {
        st.scaled = true;
        v = n->input(0);
        continue;
      }
      if (k == "aten::mul" && is_tensor(n->input(1)) && !not_data(n->input(1)) && not_data(n->input(0))) {
        st.scaled = true;
        v = n->input(1);
        continue;
      }
      return std::nullopt;
    }
    if (k == "aten::std" || k == "aten::var") {
      if (k == "aten::var" && !st.sqrt_seen) return std::nullopt;
      st.statistic = k.substr(6);
      st.centered = true;
      st.source = n->input(0);
      st.reader = n;
      st.reduce = n;
      st.red = reduction_dims(n, attr_double);
      if (k == "aten::std") {
        st.sqrt_seen = true;
        if (st.normalizer.empty()) st.normalizer = "std";
      }
      break;
    }
    if (k == "aten::mean" || k == "aten::sum") {
      if (!st.sqrt_seen) return std::nullopt;
      // sqrt(sum(x^2)) unscaled: an L2 norm (ParseNet/SSD's L2Norm,
      // x / (x.pow(2).sum(1, keepdim=True).sqrt() + eps)).
      if (k == "aten::sum" && !st.scaled) st.l2_unscaled = true;
      // A mean of means over other axes (gLN), and an eps added to the
      // squares before their mean (DIN's Dice: sqrt(((x - mean) ** 2 +
      // eps).mean(dims))).
      std::vector<int64_t> nested_dims;
      Value* inner = k == "aten::mean" ? nested_mean_source(n, &nested_dims) : n->input(0);
      Node* an = strip(inner)->node();
      if ((kind_of(an) == "aten::add") && an->inputs().size() >= 2 && is_tensor(an->input(0)) &&
          not_data(an->input(1))) {
        std::optional<double> e = number(an->input(1));
        if (!e && an->input(1)->node()->kind() == c10::prim::GetAttr) e = attr_double(an->input(1));
        st.eps = e ? nlohmann::json(*e) : nlohmann::json("dynamic");
        inner = an->input(0);
      }
      Value* z = squared(inner);
      if (!z) return std::nullopt;
      Node* cm = nullptr;
      if (Value* c = centered_source(z, &cm)) {
        st.centered = true;
        st.statistic = "var";
        st.source = c;
        st.reader = cm;
      } else {
        st.statistic = k == "aten::sum" && !st.scaled ? "sum_square" : "mean_square";
        st.source = z;
        st.reader = n->input(0)->node();
      }
      st.reduce = n;
      st.red = reduction_dims(n, attr_double);
      if (!nested_dims.empty()) {
        st.red.dims = nested_dims;
        st.red.dims_value = nullptr;
        st.red.keepdim = true;
      }
      break;
    }
    if (k == "aten::norm" || k == "aten::linalg_vector_norm" || k == "aten::linalg_norm" || k == "aten::frobenius_norm") {
      // An L2 norm divided by sqrt(n) is a root-mean-square; without the
      // scaling (F.normalize) it is an L2 normalization, which the caller
      // counts only when its output is scaled by a number (x-transformers'
      // F.normalize(x, dim=-1) * self.scale * self.gamma, scale = sqrt(dim)).
      if (!st.scaled) st.l2_unscaled = true;
      if (k == "aten::linalg_norm" && n->inputs().size() >= 3) {
        // torch.linalg.norm: ord None or 'fro' over one or two dims is the
        // L2 norm of the values; a number over two dims is a matrix norm
        // (ord=2: the largest singular value), not a root-mean-square.
        auto p = torch::jit::toIValue(n->input(1));
        const auto dims = structure::const_int_list(n->input(2));
        if (p && p->isString() && p->toStringRef() != "fro") return std::nullopt;
        if (p && !p->isNone() && !p->isString() && !(dims && dims->size() == 1 && number(n->input(1)) == 2.0))
          return std::nullopt;
      } else if (k != "aten::frobenius_norm" && n->inputs().size() >= 2) {
        auto p = torch::jit::toIValue(n->input(1));
        if (p && !p->isNone()) {
          auto pv = number(n->input(1));
          if (!pv || *pv != 2.0) return std::nullopt;
        }
      }
      st.statistic = "norm";
      st.sqrt_seen = true;
      if (st.normalizer.empty()) st.normalizer = "norm";
      st.source = n->input(0);
      st.reader = n;
      st.reduce = n;
      st.red = reduction_dims(n, attr_double);
      break;
    }
    return std::nullopt;
  }
  if (!st.source || !st.sqrt_seen) return std::nullopt;
  return st;
}

// The numerator is the source, or the source with its mean subtracted,
// possibly multiplied by a gain first (g * (x - mean) / std).
bool numerator_of(Value* y, Value* src, int depth, bool& centered) {
  Value* s = strip(y);
  // The statistic may be of x reshaped (x.view(N, C, -1).var(dim=2)) and
  // divide x itself: the same groups of values.
  Value* base = view_base(src);
  if (s == src || (base && s == base)) return true;
  if (Value* c = centered_source(s)) {
    if (strip(c) == src || (base && strip(c) == base)) {
      centered = true;
      return true;
    }
  }
  if (depth >= 4) return false;
  Node* n = s->node();
  const std::string k = kind_of(n);
  if ((k == "aten::mul" || k == "aten::div") && n->inputs().size() >= 2) {
    for (size_t i = 0; i < (k == "aten::mul" ? 2u : 1u); ++i)
      if (is_tensor(n->input(i)) && numerator_of(n->input(i), src, depth + 1, centered)) return true;
  }
  return false;
}

}  // namespace

namespace {

// True when `user` writes into its input at `offset`: an in-place tensor op
// (in_place_op: the first argument) or a list/dict mutator
// (structure::container_writer: `append`, `insert`, `extend`, `_set_item`, ...). Values written so are not their
// defining node's alone: `xs = []` then `xs.append(x)` makes the list hold x.
bool writes_input(const Node* user, size_t offset) {
  return offset == 0 && (structure::container_writer(user) || in_place_op(user));
}

}  // namespace

bool in_place_op(const Node* n) {
  const std::string k = n->kind().toQualString();
  if (k.rfind("aten::", 0) != 0) return false;
  const std::string name = k.substr(6);
  return name.size() > 1 && name.back() == '_' && name.compare(0, 2, "__") != 0;
}

bool param_only(Value* v, std::unordered_map<const Value*, bool>& memo, int depth) {
  auto it = memo.find(v);
  if (it != memo.end()) return it->second;
  memo[v] = false;  // a cycle through a written list (xs.append(f(xs[0]))) reads an argument: answer no
  Node* n = v->node();
  bool r = true;
  if (n->kind() == c10::prim::Param) r = false;
  else if (n->kind() == c10::prim::GetAttr || n->kind() == c10::prim::Constant) r = true;
  else if (depth > 24 || !n->blocks().empty()) r = false;
  else
    for (Value* in : n->inputs())
      if (!param_only(in, memo, depth + 1)) {
        r = false;
        break;
      }
  // What is written into v later (an empty list then filled with x, a
  // zeros buffer then copy_(x)) counts as v's too.
  if (r && n->kind() != c10::prim::GetAttr && n->kind() != c10::prim::Constant)
    for (const auto& u : v->uses()) {
      if (!writes_input(u.user, u.offset)) continue;
      for (size_t i = 1; i < u.user->inputs().size() && r; ++i)
        if (!param_only(u.user->input(i), memo, depth + 1)) r = false;
      if (!r) break;
    }
  memo[v] = r;
  return r;
}

namespace {

// The GetAttr of a buffer whose name contains `part`, among v's ancestors.
Node* attr_ancestor(Value* v, const std::string& part, int depth = 0) {
  Node* n = v->node();
  if (n->kind() == c10::prim::GetAttr && is_tensor(v) && n->s(c10::attr::name).find(part) != std::string::npos) return n;
  if (depth > 12) return nullptr;
  for (Value* in : n->inputs())
    if (Node* f = attr_ancestor(in, part, depth + 1)) return f;
  return nullptr;
}

// A root (sqrt/rsqrt/pow) among v's ancestors, with the add that gives eps.
bool has_root(Value* v, nlohmann::json& eps, const std::function<std::optional<double>(Value*)>& attr_double, int depth = 0) {
  Node* n = v->node();
  const std::string k = kind_of(n);
  if (k == "aten::rsqrt" || k == "aten::sqrt" || (k == "aten::pow" && number(n->input(1)).value_or(0) < 0)) {
    Node* a = n->input(0)->node();
    if (kind_of(a) == "aten::add" && a->inputs().size() >= 2) {
      for (size_t i : {size_t{1}, size_t{0}}) {
        Value* o = a->input(i);
        std::optional<double> e = number(o);  // a constant (a 0-dim tensor constant when traced)
        if (!e && o->node()->kind() == c10::prim::GetAttr && !is_tensor(o)) e = attr_double(o);
        if (e) {
          eps = *e;
          break;
        }
      }
    }
    return true;
  }
  if (depth > 12) return false;
  for (Value* in : n->inputs())
    if (is_tensor(in) && has_root(in, eps, attr_double, depth + 1)) return true;
  return false;
}

// Whether `v` (an L2-normalized tensor) is multiplied by a number, maybe
// after a gain (F.normalize(x, dim=-1) * self.scale * self.gamma,
// F.normalize(x, dim=1) * self.g * (x.shape[1] ** 0.5)).
bool scaled_by_number(Value* v, int depth) {
  for (const auto& u : v->uses()) {
    const std::string k = kind_of(u.user);
    if ((k != "aten::mul" && k != "aten::mul_") || u.user->inputs().size() < 2 || u.offset > 1) continue;
    Value* other = u.user->input(1 - u.offset);
    if (!is_tensor(other) && not_data(other)) return true;
    if (depth < 2 && is_tensor(other) && not_data(other) && scaled_by_number(u.user->output(), depth + 1)) return true;
  }
  return false;
}

}  // namespace

std::vector<structure::NormNode> find_norm_patterns(const std::vector<Node*>& nodes, ScopeResolver& scopes,
                                                    const std::function<std::optional<double>(Value*)>& attr_double) {
  std::vector<structure::NormNode> out;
  std::unordered_set<const Node*> claimed;
  std::unordered_map<const Value*, bool> memo;
  auto module_of = [&](Node* n) {
    const auto& chain = scopes.chain(n);
    return chain.empty() ? std::string() : chain.back();
  };
  // Modules holding running statistics (a BatchNorm's buffers, by name).
  std::unordered_set<std::string> running_stat_modules;
  for (Node* n : nodes) {
    if (n->kind() != c10::prim::GetAttr || !is_tensor(n->output())) continue;
    const std::string& name = n->s(c10::attr::name);
    if (name.find("running_var") == std::string::npos && name.find("running_mean") == std::string::npos &&
        name.find("moving_var") == std::string::npos && name.find("moving_mean") == std::string::npos)
      continue;
    if (auto path = scopes.module_path_of(n->input())) running_stat_modules.insert(*path);
  }
  for (Node* n : nodes) {
    const std::string k = kind_of(n);
    if ((k != "aten::div" && k != "aten::mul" && k != "aten::div_" && k != "aten::mul_") || n->inputs().size() < 2) continue;
    if (!is_tensor(n->input(0)) || !is_tensor(n->input(1))) continue;

    // FrozenBatchNorm2d: x * scale, scale from buffers through a root.
    for (size_t xi = 0; xi < 2 && k.rfind("aten::mul", 0) == 0; ++xi) {
      Value* x = n->input(xi);
      Value* sc = n->input(1 - xi);
      if (param_only(x, memo) || !param_only(sc, memo)) continue;
      Node* rv = attr_ancestor(sc, "var");
      nlohmann::json eps = "dynamic";
      if (!rv || !has_root(sc, eps, attr_double) || claimed.count(n)) continue;
      structure::NormNode nn;
      nn.node = n;
      nn.anchor = n;
      nn.input = x;
      nn.op = "frozen_batch_norm";
      nn.args["eps"] = eps;
      nn.args["running_var"] = rv->s(c10::attr::name);
      // The channel axis: where the buffer's reshape puts its values (1, -1, 1, 1).
      int64_t axis = -1;
      for (const auto& u : rv->output()->uses()) {
        const std::string uk = kind_of(u.user);
        if ((uk == "aten::reshape" || uk == "aten::view") && u.user->inputs().size() >= 2)
          if (auto l = structure::const_int_list(u.user->input(1))) {
            int64_t found = -1, count = 0;
            for (size_t i = 0; i < l->size(); ++i)
              if ((*l)[i] != 1) found = static_cast<int64_t>(i), ++count;
            if (count == 1) axis = found;
          }
      }
      nn.args["channel_axis"] = axis;
      if (auto path = scopes.module_path_of(rv->input())) nn.module = *path;
      else nn.module = module_of(n);
      nn.args["buffers"] = nn.module;
      claimed.insert(n);
      out.push_back(std::move(nn));
      break;
    }
    if (claimed.count(n)) continue;

    // A statistic of x dividing (or its reciprocal multiplying) x or x - mean.
    const bool div = k.rfind("aten::div", 0) == 0;
    for (size_t di = div ? 1 : 0; di < 2; ++di) {
      Value* y = n->input(1 - di);
      Value* d = n->input(di);
      auto st = analyze(d, attr_double);
      if (!st || st->inverted == div || claimed.count(st->reduce)) continue;
      // An L2 norm not scaled back to unit RMS by a number is an L2
      // normalization (F.normalize, SSD's L2Norm): its own kind, recognized
      // for its axes and eps, not a LayerNorm/RMSNorm placement.
      const bool l2 = st->l2_unscaled && !scaled_by_number(n->output(), 0);
      Value* src = strip(st->source);
      bool num_centered = false;
      // The statistic of the rows a mask keeps, applied to all rows
      // (MaskBatchNorm: mean and var of x[~pad_mask], then (x - mean) / std).
      Value* rows = rows_of(src);
      bool masked = false;
      if (!numerator_of(y, src, 0, num_centered)) {
        if (rows == src || !numerator_of(y, rows, 0, num_centered)) continue;
        masked = true;
      }
      // A statistic of parameters (weight standardization) is not an activation norm.
      if (param_only(src, memo)) continue;
      claimed.insert(st->reduce);
      structure::NormNode nn;
      nn.node = st->reader;
      if (masked) {
        // Tap x where the numerator reads it (x - mean, outside any
        // training-only branch), else where the mask selects its rows.
        Node* sub = strip(y)->node();
        nn.node = kind_of(sub) == "aten::sub" && strip(sub->input(0)) == rows ? sub : src->node();
      }
      nn.anchor = n;
      nn.input = masked ? rows : st->source;
      if (masked) nn.args["masked_rows"] = true;
      const bool centered = st->centered || num_centered;
      nn.args["dims"] = st->red.dims;
      if (st->red.dims_value) {
        nn.reduce = st->reduce;
        nn.reduce_dims = st->red.dims_value;
      }
      nn.args["keepdim"] = st->red.keepdim;
      nn.args["eps"] = st->eps;
      nn.args["statistic"] = st->statistic;
      nn.args["centered"] = centered;
      nn.args["normalizer"] = st->normalizer;
      // The tensor before a view/reshape (GroupNorm written as x.view(B, G, -1)).
      Node* vn = src->node();
      const std::string vk = kind_of(vn);
      if ((vk == "aten::view" || vk == "aten::reshape") && is_tensor(vn->input(0))) {
        nn.view_source = vn->input(0);
        nn.view_node = vn;
        // The group count of x.view(N, G, -1): computed from the input's
        // own sizes at run time (AdaIN's `N, C = size[:2]; feat.view(N, C,
        // -1)`: an instance norm written out), or configured (a constant,
        // self.num_groups).
        if (vn->inputs().size() >= 2) {
          Node* l = vn->input(1)->node();
          if (l->kind() == c10::prim::ListConstruct && l->inputs().size() >= 3) {
            Value* g = l->input(1);
            nn.args["groups_from_input"] = !torch::jit::toIValue(g) && g->node()->kind() != c10::prim::GetAttr;
          }
        }
      }
      nn.module = module_of(n);
      // A centered statistic in a module that keeps running statistics
      // (buffers named running_mean/running_var, moving_mean/moving_var) is a
      // BatchNorm written out: its training branch normalizes with batch
      // statistics, its eval branch with the running ones (PowerNorm's
      // MaskBatchNorm, hand-written BatchNorms in research code).
      const bool batch_stats = centered && !nn.view_source && running_stat_modules.count(nn.module) > 0;
      nn.op = l2 && !centered ? "l2_norm_pattern"
              : !centered      ? "rms_norm_pattern"
              : nn.view_source ? "group_norm_pattern"
              : batch_stats    ? "batch_norm_pattern"
                               : "layer_norm_pattern";
      // An upcast before the statistic (x.to(torch.float32), x.float()):
      // the statistic and eps are in that dtype whatever the model's.
      Node* up = st->source->node();
      for (int i = 0; i < 3 && up; ++i) {
        const std::string uk = kind_of(up);
        if (uk == "aten::float") {
          nn.args["upcast"] = "float32";
          break;
        }
        if (uk == "aten::to") {
          for (Value* in : up->inputs()) {
            auto c = torch::jit::toIValue(in);
            if (c && c->isInt() && in != up->input(0) &&
                (c->toInt() == static_cast<int64_t>(at::kFloat) || c->toInt() == static_cast<int64_t>(at::kDouble)))
              nn.args["upcast"] = c->toInt() == static_cast<int64_t>(at::kFloat) ? "float32" : "float64";
          }
          break;
        }
        if (!is_trivial(uk) || up->inputs().empty()) break;
        up = up->input(0)->node();
      }
      out.push_back(std::move(nn));
      break;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Roles

namespace {

std::optional<int64_t> const_int(Value* v) {
  auto iv = torch::jit::toIValue(v);
  if (iv && iv->isInt()) return iv->toInt();
  return std::nullopt;
}

std::string merge_roles(const Roles& r, size_t from, size_t to) {
  std::set<std::string> s(r.begin() + static_cast<long>(from), r.begin() + static_cast<long>(to));
  if (s.size() == 1) return *s.begin();
  if (s.count("?")) return "?";
  std::string j;
  for (size_t i = from; i < to; ++i) j += (i > from ? "*" : "") + r[i];
  return j;
}

}  // namespace

std::unordered_map<const Value*, Roles> infer_roles(const std::vector<Node*>& nodes, torch::jit::Graph& graph,
                                                    const std::vector<int64_t>& input_ranks,
                                                    const std::function<std::optional<int64_t>(Value*)>& attr_int) {
  std::unordered_map<const Value*, Roles> R;
  // A constant int, or an int module attribute (TorchScript keeps
  // `self.d0` as prim::GetAttr).
  auto const_int = [&](Value* v) -> std::optional<int64_t> {
    if (auto c = ::nd::recognize::const_int(v)) return c;
    if (attr_int) return attr_int(v);
    return std::nullopt;
  };
  // Ranks from complete tensor types (traced graphs).
  auto typed_rank = [](const Value* v) -> int64_t {
    if (auto tt = v->type()->cast<c10::TensorType>())
      if (auto d = tt->dim()) return static_cast<int64_t>(*d);
    return -1;
  };
  for (size_t i = 1; i < graph.inputs().size(); ++i) {
    Value* v = graph.inputs()[i];
    if (!is_tensor(v)) continue;
    int64_t rank = i - 1 < input_ranks.size() ? input_ranks[i - 1] : -1;
    if (rank < 0) rank = typed_rank(v);
    if (rank < 0) continue;
    Roles r;
    for (int64_t d = 0; d < rank; ++d) r.push_back("in:" + std::to_string(i - 1) + ":" + std::to_string(d));
    R[v] = r;
  }
  auto get = [&](Value* v) -> const Roles* {
    auto it = R.find(v);
    return it == R.end() ? nullptr : &it->second;
  };
  auto wrap = [](int64_t d, size_t rank) -> int64_t {
    if (d < 0) d += static_cast<int64_t>(rank);
    return (d >= 0 && d < static_cast<int64_t>(rank)) ? d : -1;
  };
  // An int that is axis d of a tensor's size: aten::size(t, d), through
  // NumToTensor/Int (traced), or an element of ListUnpack(aten::size(t)).
  std::function<std::optional<std::string>(Value*)> size_role = [&](Value* v) -> std::optional<std::string> {
    Node* n = v->node();
    for (int i = 0; i < 4; ++i) {
      const std::string k = kind_of(n);
      if ((k == "aten::Int" || k == "prim::NumToTensor" || k == "aten::ScalarImplicit") && !n->inputs().empty()) {
        n = n->input(0)->node();
        continue;
      }
      break;
    }
    if (kind_of(n) == "aten::size" && n->inputs().size() >= 2) {
      const Roles* r = get(n->input(0));
      auto d = const_int(n->input(1));
      if (r && d) {
        const int64_t w = wrap(*d, r->size());
        if (w >= 0) return (*r)[static_cast<size_t>(w)];
      }
      return std::nullopt;
    }
    // x.shape[d] in scripted code: aten::__getitem__(aten::size(x), d).
    if (kind_of(n) == "aten::__getitem__" && n->inputs().size() == 2 && kind_of(n->input(0)->node()) == "aten::size" &&
        n->input(0)->node()->inputs().size() == 1) {
      const Roles* r = get(n->input(0)->node()->input(0));
      auto d = const_int(n->input(1));
      if (r && d) {
        const int64_t w = wrap(*d, r->size());
        if (w >= 0) return (*r)[static_cast<size_t>(w)];
      }
      return std::nullopt;
    }
    if (n->kind() == c10::prim::ListUnpack && kind_of(n->input(0)->node()) == "aten::size" &&
        n->input(0)->node()->inputs().size() == 1) {
      const Roles* r = get(n->input(0)->node()->input(0));
      if (!r) return std::nullopt;
      for (size_t j = 0; j < n->outputs().size(); ++j)
        if (n->output(j) == v && j < r->size()) return (*r)[j];
    }
    // B * N of two sizes: the two axes merged (x.reshape(B * N, -1), PyG's
    // dense-to-flat node features; eval15 case 03).
    if (kind_of(n) == "aten::mul" && n->inputs().size() == 2 && !is_tensor(n->input(0)) && !is_tensor(n->input(1))) {
      const auto a = size_role(n->input(0)), b = size_role(n->input(1));
      if (a && b && *a != "?" && *b != "?") return *a + "*" + *b;
    }
    return std::nullopt;
  };
  static const std::unordered_set<std::string> kSame = {
      "aten::relu", "aten::relu_", "aten::gelu", "aten::silu", "aten::silu_", "aten::sigmoid", "aten::tanh",
      "aten::hardswish", "aten::hardswish_", "aten::hardsigmoid", "aten::leaky_relu", "aten::elu", "aten::mish",
      "aten::dropout", "aten::dropout_", "aten::feature_dropout", "aten::to", "aten::type_as", "aten::contiguous",
      "aten::clone", "aten::detach", "aten::float", "aten::half", "aten::bfloat16", "normdoctor::tap",
      "aten::layer_norm", "aten::group_norm", "aten::batch_norm", "aten::instance_norm", "aten::rms_norm",
      "aten::softmax", "aten::log_softmax", "aten::neg", "aten::abs", "aten::exp", "aten::sqrt", "aten::rsqrt",
      "aten::pow", "aten::square", "aten::masked_fill", "aten::masked_fill_", "aten::relu6", "aten::hardtanh",
      "aten::hardtanh_", "aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d", "aten::avg_pool1d",
      "aten::avg_pool2d", "aten::avg_pool3d", "aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d",
      "aten::adaptive_avg_pool3d", "aten::adaptive_max_pool2d", "aten::upsample_nearest2d",
      "aten::upsample_bilinear2d", "aten::pad", "aten::constant_pad_nd", "aten::roll", "aten::scaled_dot_product_attention",
      "aten::_transformer_encoder_layer_fwd", "aten::glu", "aten::erf", "aten::replication_pad1d",
      "aten::replication_pad2d", "aten::reflection_pad1d", "aten::reflection_pad2d", "aten::circular_pad1d",
      "aten::circular_pad2d", "aten::_pad_circular"};
  static const std::unordered_set<std::string> kBinary = {"aten::add", "aten::add_", "aten::sub", "aten::sub_",
                                                          "aten::mul", "aten::mul_", "aten::div", "aten::div_",
                                                          "aten::where", "aten::maximum", "aten::minimum"};
  // prim::If: each output takes the roles of the first block's return that
  // has them (timm's `if self.dynamic_img_size: ... else: ...`: the branch
  // taken may be the second); the blocks' nodes come after the If in the
  // walk, so the second sweep replaces what the first could not see.
  // An if on the rank of a tensor whose roles are known (nn.LSTM's scripted
  // forward: `is_batched = input.dim() == 3`, then `if not is_batched:
  // input = input.unsqueeze(batch_dim)`): the branch that runs, from the
  // number of roles. nullopt: not such a test, or the rank is unknown.
  auto rank_condition = [&](Value* c) -> std::optional<bool> {
    Node* d = c->node();
    bool negate = false;
    while (d->kind() == c10::aten::__not__ && !d->inputs().empty()) {
      negate = !negate;
      d = d->input(0)->node();
    }
    const std::string dk = kind_of(d);
    if ((dk != "aten::eq" && dk != "aten::ne") || d->inputs().size() != 2) return std::nullopt;
    Value* a = d->input(0);
    Value* b = d->input(1);
    if (kind_of(a->node()) != "aten::dim") std::swap(a, b);
    if (kind_of(a->node()) != "aten::dim" || a->node()->inputs().empty()) return std::nullopt;
    const Roles* r = get(a->node()->input(0));
    const auto want = ::nd::recognize::const_int(b);
    if (!r || !want) return std::nullopt;
    const bool eq = static_cast<int64_t>(r->size()) == *want;
    return (dk == "aten::eq" ? eq : !eq) != negate;
  };
  auto if_roles = [&](Node* n) {
    if (n->blocks().size() == 2 && !n->inputs().empty())
      if (const auto taken = rank_condition(n->input(0))) {
        Node* ret = n->blocks()[*taken ? 0 : 1]->return_node();
        for (size_t j = 0; j < n->outputs().size() && j < ret->inputs().size(); ++j)
          if (const Roles* r = get(ret->input(j))) R[n->output(j)] = *r;
        return;
      }
    for (size_t j = 0; j < n->outputs().size(); ++j)
      for (torch::jit::Block* b : n->blocks()) {
        Node* ret = b->return_node();
        if (j >= ret->inputs().size()) continue;
        if (const Roles* r = get(ret->input(j))) {
          R[n->output(j)] = *r;
          break;
        }
      }
  };
  // Sweeps until nothing new is learnt: an if's outputs take their roles
  // from its blocks, whose nodes come after it in the pre-order walk, and a
  // chain of ifs (timm's patch embedding, then _pos_embed, then the blocks)
  // needs one sweep per link.
  size_t known_before = 0;
  for (int sweep = 0; sweep < 12; ++sweep) {
    if (sweep >= 2 && R.size() == known_before) break;
    known_before = R.size();
    for (Node* n : nodes) {
      const std::string k = kind_of(n);
      if (n->outputs().empty() || !is_tensor(n->output(0))) {
        if (n->kind() == c10::prim::If) if_roles(n);
        continue;
      }
      Value* o = n->output(0);
      if (n->kind() == c10::prim::If) {
        if_roles(n);
        continue;
      }
      if (n->inputs().empty()) continue;
      if ((k == "aten::cat" || k == "aten::concat") && n->input(0)->node()->kind() == c10::prim::ListConstruct) {
        // cat(list, dim): the roles of an element that has them (a class token
        // prepended to the patch tokens keeps the patches' roles).
        for (Value* e : n->input(0)->node()->inputs())
          if (const Roles* r = get(e)) {
            R[o] = *r;
            break;
          }
        continue;
      }
      const Roles* in0 = is_tensor(n->input(0)) ? get(n->input(0)) : nullptr;
      if (kSame.count(k)) {
        if (in0) R[o] = *in0;
        continue;
      }
      if (kBinary.count(k)) {
        // Broadcast: the operand of larger rank; equal ranks merged (known roles win).
        const Roles* a = in0;
        const Roles* b = n->inputs().size() > 1 && is_tensor(n->input(1)) ? get(n->input(1)) : nullptr;
        if (k == "aten::where" && n->inputs().size() > 2) {
          a = is_tensor(n->input(1)) ? get(n->input(1)) : nullptr;
          b = is_tensor(n->input(2)) ? get(n->input(2)) : nullptr;
        }
        if (a && b && a->size() == b->size()) {
          Roles m = *a;
          for (size_t i = 0; i < m.size(); ++i)
            if (m[i] == "?") m[i] = (*b)[i];
          R[o] = m;
        } else if (a && (!b || a->size() > b->size())) {
          R[o] = *a;
        } else if (b) {
          R[o] = *b;
        }
        continue;
      }
      if (k == "aten::embedding" && n->inputs().size() >= 2) {
        if (const Roles* ids = get(n->input(1))) {
          Roles r = *ids;
          r.push_back("hidden");
          R[o] = r;
        }
        continue;
      }
      if (k == "aten::linear" || ((k == "aten::matmul" || k == "aten::mm") && n->inputs().size() >= 2 &&
                                  strip(n->input(1))->node()->kind() == c10::prim::GetAttr)) {
        if (in0 && !in0->empty()) {
          Roles r = *in0;
          r.back() = "hidden";
          R[o] = r;
        }
        continue;
      }
      if (k == "aten::matmul" && n->inputs().size() >= 2) {
        const Roles* b = get(n->input(1));
        if (in0 && b && in0->size() == b->size() && in0->size() >= 2) {
          Roles r = *in0;
          r.back() = b->back();
          R[o] = r;
        }
        continue;
      }
      if (k == "aten::conv1d" || k == "aten::conv2d" || k == "aten::conv3d" || k == "aten::_convolution" || k == "aten::_convolution_mode" ||
          k == "aten::convolution" || k == "aten::conv_transpose1d" || k == "aten::conv_transpose2d" ||
          k == "aten::conv_transpose3d") {
        int64_t rank = k.find("1d") != std::string::npos ? 3 : k.find("2d") != std::string::npos ? 4
                       : k.find("3d") != std::string::npos                                     ? 5
                                                                                               : -1;
        if (rank < 0) rank = in0 ? static_cast<int64_t>(in0->size()) : typed_rank(o);
        if (rank < 3) continue;
        Roles r(static_cast<size_t>(rank), "spatial");
        r[0] = (in0 && in0->size() == static_cast<size_t>(rank)) ? (*in0)[0] : "batch";
        r[1] = "channel";
        if (in0 && in0->size() == static_cast<size_t>(rank))
          for (size_t d = 2; d < r.size(); ++d)
            if ((*in0)[d] == "time") r[d] = "time";
        R[o] = r;
        continue;
      }
      if (!in0) continue;
      const size_t rank = in0->size();
      if (k == "aten::transpose" && n->inputs().size() >= 3) {
        auto a = const_int(n->input(1)), b = const_int(n->input(2));
        if (!a || !b) continue;
        const int64_t wa = wrap(*a, rank), wb = wrap(*b, rank);
        if (wa < 0 || wb < 0) continue;
        Roles r = *in0;
        std::swap(r[static_cast<size_t>(wa)], r[static_cast<size_t>(wb)]);
        R[o] = r;
      } else if (k == "aten::unfold" && n->inputs().size() >= 4) {
        // x.unfold(d, size, step): axis d now counts the windows, which
        // follow the axis they slide along (PatchTST's patches over time),
        // and a new last axis holds each window's offsets.
        auto d = const_int(n->input(1));
        if (!d || wrap(*d, rank) < 0) continue;
        Roles r = *in0;
        r.push_back("?");
        R[o] = r;
      } else if (k == "aten::t" && rank == 2) {
        R[o] = {(*in0)[1], (*in0)[0]};
      } else if (k == "aten::permute" && n->inputs().size() >= 2) {
        auto p = structure::const_int_list(n->input(1));
        if (!p || p->size() != rank) continue;
        Roles r;
        for (int64_t d : *p) {
          const int64_t w = wrap(d, rank);
          if (w < 0) break;
          r.push_back((*in0)[static_cast<size_t>(w)]);
        }
        if (r.size() == rank) R[o] = r;
      } else if (k == "aten::flatten" && n->inputs().size() >= 3) {
        auto s = const_int(n->input(1)), e = const_int(n->input(2));
        if (!s || !e) continue;
        const int64_t ws = wrap(*s, rank), we = wrap(*e, rank);
        if (ws < 0 || we < ws) continue;
        Roles r(in0->begin(), in0->begin() + ws);
        r.push_back(merge_roles(*in0, static_cast<size_t>(ws), static_cast<size_t>(we) + 1));
        r.insert(r.end(), in0->begin() + we + 1, in0->end());
        R[o] = r;
      } else if ((k == "aten::view" || k == "aten::reshape") && n->inputs().size() >= 2) {
        Node* ln = n->input(1)->node();
        std::vector<Value*> elems;
        if (ln->kind() == c10::prim::ListConstruct) elems.assign(ln->inputs().begin(), ln->inputs().end());
        else if (auto l = structure::const_int_list(n->input(1))) elems.resize(l->size(), nullptr);
        if (elems.empty()) continue;
        const size_t m = elems.size();
        Roles r(m, "?");
        for (size_t j = 0; j < m; ++j)
          if (elems[j])
            if (auto sr = size_role(elems[j])) r[j] = *sr;
        // Fewer axes: the axes whose size the graph names (x.size(d)) keep
        // their place, and one unnamed axis between two of them merges the
        // input axes in between: [B, H, W, C].reshape(B, -1, C) is
        // [batch, spatial, channel] (Swin), [B, C, H, W].view(B, C, -1) is
        // [batch, channel, spatial]. Without names: the leading axes kept,
        // the trailing ones merged (a conv map reshaped to [B, C, H*W]).
        if (m < rank && m >= 2) {
          bool aligned = true, any_named = false;
          Roles a(m, "?");
          size_t p = 0;        // next input axis
          size_t pending = m;  // an unnamed output axis waiting for its span
          for (size_t j = 0; j < m && aligned; ++j) {
            if (r[j] == "?") {
              if (pending != m) aligned = false;  // two unnamed axes in one gap
              pending = j;
              continue;
            }
            any_named = true;
            // The input axes it names: one (x.size(d)), or consecutive ones
            // merged (B * N).
            size_t q = p, span = 0;
            for (; q < rank && span == 0; ++q)
              for (size_t e = q + 1; e <= rank && span == 0; ++e)
                if (merge_roles(*in0, q, e) == r[j]) span = e - q;
            if (span == 0) {
              aligned = false;
              break;
            }
            --q;
            if (pending != m) {
              if (q == p) aligned = false;
              else a[pending] = merge_roles(*in0, p, q);
              pending = m;
            } else if (q != p) {
              aligned = false;  // input axes dropped without an axis to hold them
            }
            a[j] = r[j];
            p = q + span;
          }
          if (aligned && pending != m) {
            if (p < rank) a[pending] = merge_roles(*in0, p, rank);
            else aligned = false;
          } else if (aligned && p != rank) {
            aligned = false;
          }
          if (aligned && any_named) {
            r = a;
          } else {
            bool leading = true;
            for (size_t j = 0; j + 1 < m; ++j)
              if (r[j] != "?" && r[j] != (*in0)[j]) leading = false;
            if (leading) {
              for (size_t j = 0; j + 1 < m; ++j) r[j] = (*in0)[j];
              r[m - 1] = merge_roles(*in0, m - 1, rank);
            }
          }
        }
        R[o] = r;
      } else if (k == "aten::select" && n->inputs().size() >= 2) {
        auto d = const_int(n->input(1));
        if (!d || wrap(*d, rank) < 0) continue;
        Roles r = *in0;
        r.erase(r.begin() + wrap(*d, rank));
        R[o] = r;
      } else if (k == "aten::slice" || k == "aten::narrow" || k == "aten::expand" || k == "aten::expand_as" ||
                 k == "aten::repeat") {
        R[o] = *in0;
      } else if (k == "aten::squeeze" && n->inputs().size() >= 2 && !n->input(1)->type()->cast<c10::ListType>()) {
        // x.squeeze(d): axis d (of size 1) removed.
        auto d = const_int(n->input(1));
        if (!d || wrap(*d, rank) < 0) continue;
        Roles r = *in0;
        r.erase(r.begin() + wrap(*d, rank));
        R[o] = r;
      } else if (k == "aten::lstm" || k == "aten::gru" || k == "aten::rnn_tanh" || k == "aten::rnn_relu") {
        // A recurrent layer's output keeps its input's axes (batch_first or
        // time-major alike), the features replaced by the hidden state. Not
        // the packed overloads (data, batch_sizes, ...): their first list
        // argument (hx for lstm, params for the others) comes one later.
        size_t first_list = 0;
        while (first_list < n->inputs().size() && !n->input(first_list)->type()->cast<c10::ListType>()) ++first_list;
        if (rank == 0 || first_list != (k == "aten::lstm" ? 1u : 2u)) continue;
        Roles r = *in0;
        r.back() = "hidden";
        R[o] = r;
      } else if (k == "aten::unsqueeze" && n->inputs().size() >= 2) {
        auto d = const_int(n->input(1));
        if (!d) continue;
        int64_t w = *d < 0 ? *d + static_cast<int64_t>(rank) + 1 : *d;
        if (w < 0 || w > static_cast<int64_t>(rank)) continue;
        Roles r = *in0;
        r.insert(r.begin() + w, "?");
        R[o] = r;
      } else if ((k == "aten::mean" || k == "aten::sum" || k == "aten::amax") && n->inputs().size() >= 3) {
        auto dims = structure::const_int_list(n->input(1));
        auto kd = torch::jit::toIValue(n->input(2));
        if (!dims || !kd || !kd->isBool()) continue;
        if (kd->toBool()) {
          R[o] = *in0;
          continue;
        }
        std::set<int64_t> drop;
        for (int64_t d : *dims) drop.insert(wrap(d, rank));
        Roles r;
        for (size_t d = 0; d < rank; ++d)
          if (!drop.count(static_cast<int64_t>(d))) r.push_back((*in0)[d]);
        R[o] = r;
      }
    }
  }  // sweeps
  if (const char* dump = std::getenv("NORMDOCTOR_DUMP_ROLES"); dump && *dump)
    for (Node* n : nodes)
      for (Value* v : n->outputs())
        if (auto it = R.find(v); it != R.end()) {
          std::cerr << "roles %" << v->debugName() << " (" << kind_of(n) << "):";
          for (const auto& x : it->second) std::cerr << " " << x;
          std::cerr << "\n";
        }
  return R;
}

// ---------------------------------------------------------------------------
// Attention masks

std::vector<MaskOperand> attention_masks(Value* softmax_input) {
  std::vector<MaskOperand> out;
  // Values on the path from the score product to the softmax input.
  std::function<bool(Value*, int)> from_scores = [&](Value* v, int depth) -> bool {
    const std::string k = kind_of(v->node());
    if (k == "aten::matmul" || k == "aten::bmm" || k == "aten::einsum" || k == "aten::baddbmm") return true;
    if (depth >= 10) return false;
    if (v->node()->kind() == c10::prim::If) {
      for (auto* blk : v->node()->blocks())
        if (v->offset() < blk->return_node()->inputs().size() &&
            from_scores(blk->return_node()->input(v->offset()), depth + 1))
          return true;
      return false;
    }
    for (Value* in : v->node()->inputs())
      if (is_tensor(in) && from_scores(in, depth + 1)) return true;
    return false;
  };
  Value* v = softmax_input;
  for (int step = 0; step < 12; ++step) {
    Node* n = v->node();
    const std::string k = kind_of(n);
    if (k == "aten::matmul" || k == "aten::bmm" || k == "aten::einsum") break;
    if (n->kind() == c10::prim::If) {
      // Scripted code that adds a mask only in some calls (torchvision
      // Swin: `if sum(shift_size) > 0: attn = attn + attn_mask`): each
      // branch's value is followed to the scores; a mask found in either
      // is measured where it is added (one site, whichever branch runs).
      std::set<Node*> seen;
      for (const auto& m : out) seen.insert(m.node);
      for (auto* blk : n->blocks()) {
        if (v->offset() >= blk->return_node()->inputs().size()) continue;
        for (const auto& m : attention_masks(blk->return_node()->input(v->offset())))
          if (seen.insert(m.node).second) out.push_back(m);
      }
      break;
    }
    if (k == "aten::baddbmm") {
      // baddbmm(mask, q, k^T): the first input is an additive term.
      if (!from_scores(n->input(0), 0)) out.push_back({n, n->input(0), false, 0});
      break;
    }
    if ((k == "aten::add" || k == "aten::add_" || k == "aten::sub" || k == "aten::sub_") && n->inputs().size() >= 2 &&
        is_tensor(n->input(0)) && is_tensor(n->input(1))) {
      const bool a = from_scores(n->input(0), 0), b = from_scores(n->input(1), 0);
      if (a && !b && k.rfind("aten::add", 0) == 0) {
        out.push_back({n, n->input(1), false, 0});
        v = n->input(0);
        continue;
      }
      if (b && !a && k.rfind("aten::add", 0) == 0) {
        out.push_back({n, n->input(0), false, 0});
        v = n->input(1);
        continue;
      }
      if (a && !b && k.rfind("aten::sub", 0) == 0) {
        MaskOperand m{n, n->input(1), false, 0};
        m.subtracted = true;
        out.push_back(m);
        v = n->input(0);
        continue;
      }
      v = a ? n->input(0) : n->input(1);
      continue;
    }
    if (k == "aten::where" && n->inputs().size() == 3 && is_tensor(n->input(0))) {
      // where(cond, scores, fill) keeps the scores where cond is true;
      // where(cond, fill, scores) keeps them where it is false.
      const bool a = is_tensor(n->input(1)) && from_scores(n->input(1), 0);
      const bool b = is_tensor(n->input(2)) && from_scores(n->input(2), 0);
      auto fill_ok = [&](Value* f) {
        auto c = structure::const_number(f);
        return !c || *c <= kMaskFill;  // a buffer or computed fill is checked at run time
      };
      if (a && !b && fill_ok(n->input(2))) {
        MaskOperand m{n, n->input(0), false, 0};
        m.keep = true;
        out.push_back(m);
        v = n->input(1);
        continue;
      }
      const auto fill_const = structure::const_number(n->input(1));
      if (b && !a && fill_const && *fill_const <= kMaskFill) {
        out.push_back({n, n->input(0), true, 0});
        v = n->input(2);
        continue;
      }
    }
    if ((k == "aten::masked_fill" || k == "aten::masked_fill_") && n->inputs().size() >= 3) {
      auto fill = structure::const_number(n->input(2));
      if (fill && *fill <= kMaskFill) out.push_back({n, n->input(1), true, *fill});
      v = n->input(0);
      continue;
    }
    // Anything else on the way: follow the input that comes from the scores.
    Value* next = nullptr;
    for (Value* in : n->inputs())
      if (is_tensor(in) && from_scores(in, 0)) {
        next = in;
        break;
      }
    if (!next) break;
    v = next;
  }
  return out;
}

}  // namespace recognize
}  // namespace nd
