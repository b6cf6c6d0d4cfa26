// Forward arguments when the user gave neither --input nor --input-shape
// (docs/inputs.md). In this order:
//   1. the example inputs torch.jit.trace stored in the archive (PyTorch >= 2.1
//      writes a `traced_inputs.pkl` record; its storages are usually empty, so
//      it gives shapes and dtypes, and values only when the bytes are there);
//   2. what forward's graph does with each argument: the first layer that
//      reads it (through casts, elementwise ops, unsqueeze/transpose/reshape)
//      fixes channels, features or vocabulary; names such as attention_mask
//      and lengths get masks and lengths shaped like the other inputs; free
//      sizes (image side, sequence length) come from a short ladder, keeping
//      the first that forward accepts;
//   3. otherwise an nd::Error (input_inference, exit 2) naming the argument
//      and the flags that give it.
// Every inferred input has source "inferred: <how>" and one sentence in
// doc.assumptions; findings that depend on the data are then marked as
// measured on synthetic inputs (rules engine, run.synthetic_inputs).
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "formats/pickle.h"
#include "model/batch_file.h"
#include "model/synth_inputs.h"
#include "probes/inputs/inputs.h"
#include "probes/session.h"

namespace nd {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Free sizes, tried in order; the first that forward accepts is kept.
constexpr int64_t kSpatialLadder[] = {224, 128, 64, 32, 16};
constexpr int64_t kSequenceLadder[] = {128, 64, 32, 16};
constexpr size_t kLadderSteps = 5;  // the longer ladder
constexpr int64_t kImageBatch = 4, kTokenBatch = 2;
constexpr int kMaxTries = 12;

std::string ladder_text(bool spatial) {
  std::string s;
  if (spatial) {
    for (int64_t v : kSpatialLadder) s += (s.empty() ? "" : "/") + std::to_string(v);
  } else {
    for (int64_t v : kSequenceLadder) s += (s.empty() ? "" : "/") + std::to_string(v);
  }
  return s;
}

// ---------------------------------------------------------------- candidates

/// A dimension: a fixed size, or a size chosen at run time.
enum class Sym : uint8_t { kFixed, kBatch, kSpatial, kSeq };
struct Dim {
  Sym sym = Sym::kFixed;
  int64_t size = 1;
};

/// How the values are made.
enum class Fill : uint8_t {
  kNormal,       ///< standard normal (floating)
  kIds,          ///< uniform integers in [0, high)
  kMask,         ///< ones; the last row's last quarter zero (padding)
  kPaddingMask,  ///< the inverse: true/1 at padded positions
  kLengths,      ///< [N]: the sequence length, the last row a quarter shorter
  kZeros,        ///< token_type_ids
  kPositions,    ///< position_ids: 0..T-1 per row
  kBinary,       ///< uniform 0/1
  kStored,       ///< the traced_inputs record's values
};

struct Candidate {
  std::vector<Dim> dims;
  at::ScalarType dtype = at::kFloat;
  Fill fill = Fill::kNormal;
  int64_t high = 2;      ///< kIds: vocabulary size
  std::string how;       ///< "Conv2d features.0.0 in_channels=3"
  at::Tensor stored;     ///< kStored
};

/// One forward argument to make.
struct ArgPlan {
  std::string name;
  std::vector<Candidate> variants;  ///< preferred first
  bool shaped_by_others = false;    ///< mask / lengths / token_type_ids: [N, T] of the other inputs
  bool from_record = false;         ///< traced_inputs record
};

bool has_sym(const Candidate& c, Sym s) {
  return std::any_of(c.dims.begin(), c.dims.end(), [&](const Dim& d) { return d.sym == s; });
}

std::string dims_text(const std::vector<int64_t>& v) {
  std::ostringstream ss;
  ss << "[";
  for (size_t i = 0; i < v.size(); ++i) ss << (i ? ", " : "") << v[i];
  ss << "]";
  return ss.str();
}

std::string pattern_text(const Candidate& c) {
  std::ostringstream ss;
  ss << "[";
  for (size_t i = 0; i < c.dims.size(); ++i) {
    if (i) ss << ", ";
    switch (c.dims[i].sym) {
      case Sym::kBatch: ss << "N"; break;
      case Sym::kSpatial: ss << "S"; break;
      case Sym::kSeq: ss << "T"; break;
      case Sym::kFixed: ss << c.dims[i].size; break;
    }
  }
  ss << "] " << c10::toString(c.dtype);
  return ss.str();
}

// ---------------------------------------------------------------- names

bool name_in(const std::string& n, std::initializer_list<const char*> names) {
  for (const char* x : names)
    if (n == x) return true;
  return false;
}
bool is_mask_name(const std::string& n) {
  return name_in(n, {"attention_mask", "mask", "input_mask", "attn_padding_mask", "seq_mask", "padding_mask",
                     "key_padding_mask", "src_key_padding_mask", "tgt_key_padding_mask", "pad_mask"});
}
bool is_padding_mask_name(const std::string& n) { return n.find("padding_mask") != std::string::npos || n == "pad_mask"; }
bool is_lengths_name(const std::string& n) {
  return name_in(n, {"lengths", "length", "lens", "seq_lens", "seq_len", "seq_lengths", "input_lengths", "src_lengths"});
}
bool is_token_type_name(const std::string& n) { return name_in(n, {"token_type_ids", "segment_ids"}); }
bool is_position_name(const std::string& n) { return n == "position_ids"; }
bool shaped_by_name(const std::string& n) {
  return is_mask_name(n) || is_lengths_name(n) || is_token_type_name(n) || is_position_name(n);
}

bool is_tensor_type(const std::string& t) { return t == "Tensor" || t == "Optional[Tensor]"; }

// ---------------------------------------------------------------- graph

/// A layout change between the argument and the layer that reads it.
struct Xform {
  enum Op { kUnsqueeze, kSqueeze, kTranspose, kPermute, kReshape };
  Op op = kReshape;
  std::vector<int64_t> a;
};

/// The layer that fixes an argument's shape.
struct Anchor {
  enum Kind { kConv, kEmbedding, kLinear, kLayerNorm, kBatchNorm, kGroupNorm, kParamBroadcast };
  Kind kind = kLinear;
  int64_t channels = 0;          ///< conv/norm channels, linear features, embedding rows
  int64_t spatial_rank = 2;      ///< conv: 1, 2, 3
  std::vector<int64_t> shape;    ///< layer_norm normalized_shape, broadcast parameter sizes
  std::string module_kind;       ///< "Conv2d", or "" for a functional op
  std::string module_path;
  std::string op;                ///< "aten::conv2d"
  std::vector<Xform> path;       ///< ops from the argument to the layer, in order
};

class GraphInspector {
 public:
  explicit GraphInspector(const LoadedModel& m) : model_(m), scopes_(m) {
    graph_ = m.module.get_method("forward").graph()->copy();
    torch::jit::Inline(*graph_);
    collect(graph_->block());
  }

  /// forward's argument i (self excluded).
  Value* arg(size_t i) const { return graph_->inputs().at(i + 1); }

  /// The first layer reading argument i; `seen` gets the ops met on the way.
  std::optional<Anchor> anchor(size_t i, std::vector<std::string>& seen) {
    struct Item {
      Value* v;
      std::vector<Xform> path;
    };
    std::deque<Item> queue{{arg(i), {}}};
    std::set<Value*> visited{arg(i)};
    std::optional<Anchor> weak;
    size_t steps = 0;
    while (!queue.empty() && steps++ < 400) {
      Item it = std::move(queue.front());
      queue.pop_front();
      for (const auto& use : it.v->uses()) {
        Node* u = use.user;
        const std::string k = u->kind().toQualString();
        if (is_shape_query(k)) continue;
        if (auto a = strong_anchor(u, use.offset)) {
          a->path = it.path;
          return a;
        }
        auto push = [&](Value* out, std::optional<Xform> x) {
          if (out->type()->kind() != c10::TypeKind::TensorType || visited.count(out)) return;
          visited.insert(out);
          Item next{out, it.path};
          if (x) next.path.push_back(*x);
          queue.push_back(std::move(next));
        };
        if (is_passthrough(k, use.offset)) {
          if (!weak) {
            for (size_t j = 0; j < u->inputs().size(); ++j) {
              if (j == use.offset) continue;
              if (auto p = param_of(u->input(j)); p && p->dim() >= 1 && p->numel() > 1) {
                Anchor w;
                w.kind = Anchor::kParamBroadcast;
                w.shape = p->sizes().vec();
                w.op = k;
                w.path = it.path;
                name_module(u, w);
                weak = w;
                break;
              }
            }
          }
          push(u->output(0), std::nullopt);
          continue;
        }
        if (auto x = layout_op(u, k, use.offset)) {
          push(u->output(0), x);
          continue;
        }
        if (seen.size() < 6 && std::find(seen.begin(), seen.end(), k) == seen.end()) seen.push_back(k);
      }
    }
    return weak;
  }

  /// The rank `B, T, H = x.shape` (or x.size()) unpacks argument i into, if any.
  std::optional<int64_t> unpacked_rank(size_t i) const {
    for (const auto& use : arg(i)->uses()) {
      Node* u = use.user;
      if (u->kind() != c10::aten::size || u->inputs().size() != 1) continue;
      for (const auto& su : u->output()->uses())
        if (su.user->kind() == c10::prim::ListUnpack) return static_cast<int64_t>(su.user->outputs().size());
    }
    return std::nullopt;
  }

  /// True when a direct use of argument i needs a bool tensor (masked_fill, where, logical ops).
  bool used_as_bool(size_t i) const {
    for (const auto& use : arg(i)->uses()) {
      const std::string k = use.user->kind().toQualString();
      if ((k == "aten::masked_fill" || k == "aten::masked_fill_") && use.offset == 1) return true;
      if (k == "aten::where" && use.offset == 0) return true;
      if (k == "aten::logical_not" || k == "aten::bitwise_not" || k == "aten::logical_and" ||
          k == "aten::logical_or" || k == "aten::__and__" || k == "aten::__or__" || k == "aten::masked_select")
        return true;
    }
    return false;
  }

  /// Attention-like ops (batched matmuls of two activations): the model has a sequence axis.
  bool sequence_signs() const { return sequence_signs_; }

 private:
  void collect(torch::jit::Block* b) {
    for (Node* n : b->nodes()) {
      const std::string k = n->kind().toQualString();
      if (k == "aten::scaled_dot_product_attention" || k == "aten::_scaled_dot_product_attention" ||
          k == "aten::bmm" || k == "aten::baddbmm")
        sequence_signs_ = true;
      if (k == "aten::matmul" && n->inputs().size() == 2 && !param_of(n->input(0)) && !param_of(n->input(1)))
        sequence_signs_ = true;
      for (torch::jit::Block* sb : n->blocks()) collect(sb);
    }
  }

  static bool is_shape_query(const std::string& k) {
    return k == "aten::size" || k == "aten::dim" || k == "aten::len" || k == "aten::numel" || k == "prim::device" ||
           k == "prim::dtype" || k == "aten::is_floating_point" || k == "aten::__is__" || k == "aten::__isnot__" ||
           k == "prim::shape" || k == "aten::sym_size" || k == "prim::is_cuda" || k == "aten::is_nonzero";
  }

  static bool is_passthrough(const std::string& k, size_t offset) {
    static const std::set<std::string> unary{
        "aten::to", "aten::type_as", "aten::float", "aten::double", "aten::half", "aten::bfloat16",
        "aten::contiguous", "aten::clone", "aten::detach", "aten::dropout", "aten::dropout_",
        "aten::feature_dropout", "aten::alpha_dropout", "aten::relu", "aten::relu_", "aten::gelu", "aten::silu",
        "aten::tanh", "aten::sigmoid", "aten::hardswish", "aten::hardsigmoid", "aten::leaky_relu", "aten::elu",
        "aten::selu", "aten::mish", "aten::softplus", "aten::neg", "aten::abs", "aten::exp", "aten::sqrt",
        "aten::rsqrt", "aten::square", "aten::pow", "aten::clamp", "aten::clamp_min", "aten::clamp_max",
        "aten::nan_to_num", "aten::masked_fill", "aten::masked_fill_", "aten::requires_grad_"};
    static const std::set<std::string> binary{"aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::mul",
                                              "aten::mul_", "aten::div", "aten::div_", "aten::rsub",
                                              "aten::maximum", "aten::minimum", "aten::where"};
    if (unary.count(k)) return offset == 0;
    if (k == "aten::where") return offset == 1 || offset == 2;
    return binary.count(k) != 0;
  }

  std::optional<Xform> layout_op(Node* u, const std::string& k, size_t offset) const {
    if (offset != 0) return std::nullopt;
    auto ci = [&](size_t j) { return torch::jit::constant_as<int64_t>(u->input(j)); };
    if (k == "aten::unsqueeze" || k == "aten::unsqueeze_") {
      if (auto d = ci(1)) return Xform{Xform::kUnsqueeze, {*d}};
      return std::nullopt;
    }
    if (k == "aten::squeeze" || k == "aten::squeeze_") {
      if (u->inputs().size() == 2)
        if (auto d = ci(1)) return Xform{Xform::kSqueeze, {*d}};
      return Xform{Xform::kReshape, {}};
    }
    if (k == "aten::transpose" || k == "aten::transpose_" || k == "aten::swapaxes") {
      auto a = ci(1), b = ci(2);
      if (a && b) return Xform{Xform::kTranspose, {*a, *b}};
      return std::nullopt;
    }
    if (k == "aten::permute") {
      if (auto p = int_list(u->input(1))) return Xform{Xform::kPermute, *p};
      return std::nullopt;
    }
    if (k == "aten::view" || k == "aten::reshape" || k == "aten::flatten" || k == "aten::view_as" ||
        k == "aten::reshape_as" || k == "aten::unflatten")
      return Xform{Xform::kReshape, {}};
    return std::nullopt;
  }

  /// A tensor attribute of the module read through prim::GetAttr from self
  /// (parameters, buffers), optionally through .t().
  std::optional<at::Tensor> param_of(Value* v) const {
    bool transposed = false;
    const std::string k = v->node()->kind().toQualString();
    if (k == "aten::t" || k == "aten::numpy_T") {
      transposed = true;
      v = v->node()->input(0);
    }
    auto iv = attr_of(v);
    if (!iv || !iv->isTensor()) return std::nullopt;
    at::Tensor t = iv->toTensor();
    if (transposed && t.dim() == 2) t = t.t();
    return t;
  }

  /// The value of a prim::GetAttr chain starting at self.
  std::optional<c10::IValue> attr_of(Value* v) const {
    std::vector<std::string> names;
    while (v->node()->kind() == c10::prim::GetAttr) {
      names.push_back(v->node()->s(c10::attr::name));
      v = v->node()->input(0);
    }
    if (names.empty() || v != graph_->inputs().at(0)) return std::nullopt;
    c10::IValue cur = model_.module._ivalue();
    for (auto it = names.rbegin(); it != names.rend(); ++it) {
      if (!cur.isObject()) return std::nullopt;
      const auto obj = cur.toObject();
      const auto slot = obj->type()->findAttributeSlot(*it);
      if (!slot) return std::nullopt;
      cur = obj->getSlot(*slot);
    }
    return cur;
  }

  std::optional<std::vector<int64_t>> int_list(Value* v) const {
    if (auto c = torch::jit::toIValue(v)) {
      if (c->isIntList()) return c->toIntVector();
      return std::nullopt;
    }
    if (v->node()->kind() == c10::prim::ListConstruct || v->node()->kind() == c10::prim::TupleConstruct) {
      std::vector<int64_t> out;
      for (Value* e : v->node()->inputs()) {
        auto c = torch::jit::constant_as<int64_t>(e);
        if (!c) return std::nullopt;
        out.push_back(*c);
      }
      return out;
    }
    if (auto a = attr_of(v)) {
      if (a->isIntList()) return a->toIntVector();
      if (a->isTuple()) {
        std::vector<int64_t> out;
        for (const auto& e : a->toTupleRef().elements()) {
          if (!e.isInt()) return std::nullopt;
          out.push_back(e.toInt());
        }
        return out;
      }
    }
    return std::nullopt;
  }

  void name_module(Node* u, Anchor& a) {
    const auto& chain = scopes_.chain(u);
    if (chain.empty()) return;
    a.module_path = chain.back();
    for (const auto& m : model_.modules)
      if (m.path == a.module_path) a.module_kind = m.kind;
  }

  std::optional<Anchor> strong_anchor(Node* u, size_t offset) {
    const std::string k = u->kind().toQualString();
    Anchor a;
    a.op = k;
    auto weight = [&](size_t j) { return j < u->inputs().size() ? param_of(u->input(j)) : std::nullopt; };
    auto const_int = [&](size_t j, int64_t dflt) {
      if (j >= u->inputs().size()) return dflt;
      auto c = torch::jit::constant_as<int64_t>(u->input(j));
      return c ? *c : dflt;
    };
    bool found = false;
    if (k == "aten::embedding" && offset == 1) {
      if (auto w = weight(0); w && w->dim() == 2) {
        a.kind = Anchor::kEmbedding;
        a.channels = w->size(0);
        found = true;
      }
    } else if ((k == "aten::conv1d" || k == "aten::conv2d" || k == "aten::conv3d") && offset == 0) {
      if (auto w = weight(1); w && w->dim() >= 3) {
        a.kind = Anchor::kConv;
        a.channels = w->size(1) * const_int(6, 1);
        a.spatial_rank = w->dim() - 2;
        found = true;
      }
    } else if ((k == "aten::conv_transpose1d" || k == "aten::conv_transpose2d" || k == "aten::conv_transpose3d") &&
               offset == 0) {
      if (auto w = weight(1); w && w->dim() >= 3) {
        a.kind = Anchor::kConv;
        a.channels = w->size(0);
        a.spatial_rank = w->dim() - 2;
        found = true;
      }
    } else if ((k == "aten::_convolution" || k == "aten::_convolution_mode" || k == "aten::convolution") && offset == 0) {
      if (auto w = weight(1); w && w->dim() >= 3) {
        const bool transposed = torch::jit::constant_as<bool>(u->input(6)).value_or(false);
        a.kind = Anchor::kConv;
        a.channels = transposed ? w->size(0) : w->size(1) * const_int(8, 1);
        a.spatial_rank = w->dim() - 2;
        found = true;
      }
    } else if (k == "aten::linear" && offset == 0) {
      if (auto w = weight(1); w && w->dim() == 2) {
        a.channels = w->size(1);
        found = true;
      }
    } else if ((k == "aten::matmul" || k == "aten::mm") && offset == 0) {
      if (auto w = weight(1); w && w->dim() == 2) {
        a.channels = w->size(0);
        found = true;
      }
    } else if (k == "aten::addmm" && offset == 1) {
      if (auto w = weight(2); w && w->dim() == 2) {
        a.channels = w->size(0);
        found = true;
      }
    } else if (k == "aten::layer_norm" && offset == 0) {
      if (auto ns = int_list(u->input(1)); ns && !ns->empty()) {
        a.kind = Anchor::kLayerNorm;
        a.shape = *ns;
        found = true;
      }
    } else if ((k == "aten::batch_norm" || k == "aten::instance_norm") && offset == 0) {
      std::optional<at::Tensor> w = weight(1);
      if (!w || w->dim() != 1) w = weight(3);
      if (w && w->dim() == 1) {
        a.kind = Anchor::kBatchNorm;
        a.channels = w->size(0);
        found = true;
      }
    } else if (k == "aten::group_norm" && offset == 0) {
      if (auto w = weight(2); w && w->dim() == 1) {
        a.kind = Anchor::kGroupNorm;
        a.channels = w->size(0);
        found = true;
      }
    }
    if (!found) return std::nullopt;
    name_module(u, a);
    return a;
  }

  const LoadedModel& model_;
  ScopeResolver scopes_;
  std::shared_ptr<torch::jit::Graph> graph_;
  bool sequence_signs_ = false;
};

// ---------------------------------------------------------------- anchor -> candidates

/// The argument's dims from the dims at the anchor, undoing the layout ops.
std::optional<std::vector<Dim>> undo_path(std::vector<Dim> dims, const std::vector<Xform>& path, bool& through_reshape) {
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const int64_t r = static_cast<int64_t>(dims.size());
    auto norm = [](int64_t d, int64_t rank) { return d < 0 ? d + rank : d; };
    switch (it->op) {
      case Xform::kUnsqueeze: {  // the output has rank r; the input r - 1
        const int64_t d = norm(it->a[0], r);
        if (d < 0 || d >= r) return std::nullopt;
        dims.erase(dims.begin() + d);
        break;
      }
      case Xform::kSqueeze: {  // the input had a size-1 dim at d (rank r + 1)
        const int64_t d = norm(it->a[0], r + 1);
        if (d < 0 || d > r) return std::nullopt;
        dims.insert(dims.begin() + d, Dim{Sym::kFixed, 1});
        break;
      }
      case Xform::kTranspose: {
        const int64_t a = norm(it->a[0], r), b = norm(it->a[1], r);
        if (a < 0 || b < 0 || a >= r || b >= r) return std::nullopt;
        std::swap(dims[static_cast<size_t>(a)], dims[static_cast<size_t>(b)]);
        break;
      }
      case Xform::kPermute: {
        if (static_cast<int64_t>(it->a.size()) != r) return std::nullopt;
        std::vector<Dim> before(dims.size());
        for (int64_t i = 0; i < r; ++i) {
          const int64_t p = norm(it->a[static_cast<size_t>(i)], r);
          if (p < 0 || p >= r) return std::nullopt;
          before[static_cast<size_t>(p)] = dims[static_cast<size_t>(i)];
        }
        dims = before;
        break;
      }
      case Xform::kReshape:
        // A view/reshape accepts the shape it produces: keep the layer's layout.
        through_reshape = true;
        return dims;
    }
  }
  return dims;
}

std::string anchor_text(const Anchor& a) {
  std::string who = a.module_kind.empty() ? a.op : a.module_kind + (a.module_path.empty() ? "" : " " + a.module_path);
  switch (a.kind) {
    case Anchor::kConv: return who + " in_channels=" + std::to_string(a.channels);
    case Anchor::kEmbedding: return who + " num_embeddings=" + std::to_string(a.channels);
    case Anchor::kLinear: return who + " in_features=" + std::to_string(a.channels);
    case Anchor::kLayerNorm: return who + " normalized_shape=" + dims_text(a.shape);
    case Anchor::kBatchNorm:
    case Anchor::kGroupNorm: return who + " num_features=" + std::to_string(a.channels);
    case Anchor::kParamBroadcast: return who + " with a parameter of shape " + dims_text(a.shape);
  }
  return who;
}

/// Candidate shapes at the anchor, preferred first. `seq_first`: prefer a
/// sequence axis for features ([N, T, F] before [N, F]).
std::vector<std::vector<Dim>> anchor_layouts(const Anchor& a, bool seq_first) {
  const Dim N{Sym::kBatch, 0}, S{Sym::kSpatial, 0}, T{Sym::kSeq, 0};
  auto fixed = [](int64_t v) { return Dim{Sym::kFixed, v}; };
  auto features = [&](const std::vector<Dim>& tail) {
    std::vector<Dim> flat{N}, seq{N, T};
    flat.insert(flat.end(), tail.begin(), tail.end());
    seq.insert(seq.end(), tail.begin(), tail.end());
    return seq_first ? std::vector<std::vector<Dim>>{seq, flat} : std::vector<std::vector<Dim>>{flat, seq};
  };
  switch (a.kind) {
    case Anchor::kConv: {
      std::vector<Dim> d{N, fixed(a.channels)};
      for (int64_t i = 0; i < a.spatial_rank; ++i) d.push_back(S);
      return {d};
    }
    case Anchor::kEmbedding: return {{N, T}};
    case Anchor::kLinear: return features({fixed(a.channels)});
    case Anchor::kLayerNorm: {
      std::vector<Dim> tail;
      for (int64_t v : a.shape) tail.push_back(fixed(v));
      return features(tail);
    }
    case Anchor::kBatchNorm: {
      const std::string& m = a.module_kind;
      const bool d1 = m.find("1d") != std::string::npos, d3 = m.find("3d") != std::string::npos;
      if (d3) return {{N, fixed(a.channels), S, S, S}};
      if (d1) {
        std::vector<Dim> flat{N, fixed(a.channels)}, seq{N, fixed(a.channels), T};
        return seq_first ? std::vector<std::vector<Dim>>{seq, flat} : std::vector<std::vector<Dim>>{flat, seq};
      }
      return {{N, fixed(a.channels), S, S}};
    }
    case Anchor::kGroupNorm: return {{N, fixed(a.channels), S, S}, {N, fixed(a.channels), T}};
    case Anchor::kParamBroadcast: {
      if (a.shape.size() == 1) return features({fixed(a.shape[0])});
      std::vector<Dim> d{N};
      for (size_t i = 1; i < a.shape.size(); ++i) d.push_back(a.shape[i] == 1 ? S : fixed(a.shape[i]));
      return {d};
    }
  }
  return {};
}

// ---------------------------------------------------------------- traced_inputs record

struct StoredInput {
  std::vector<int64_t> sizes;
  at::ScalarType dtype = at::kFloat;
  at::Tensor values;  ///< undefined when the record holds no bytes (PyTorch writes none)
};

/// The example inputs of forward stored by torch.jit.trace (PyTorch >= 2.1),
/// or empty. `note` explains why a present record was not used.
std::vector<StoredInput> read_traced_inputs(const std::string& path, std::string& note) {
  using formats::PickleValue;
  std::vector<StoredInput> out;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    if (!reader.hasRecord("traced_inputs.pkl")) return out;
    auto [pkl, size] = reader.getRecord("traced_inputs.pkl");
    const PickleValue root = formats::parse_torch_pickle(static_cast<const uint8_t*>(pkl.get()), size,
                                                         path + " (traced_inputs.pkl)");
    const PickleValue* fwd = nullptr;
    if (root.kind == PickleValue::Kind::kDict)
      for (size_t i = 0; i < root.keys.size(); ++i)
        if (root.keys[i].kind == PickleValue::Kind::kString && root.keys[i].str == "forward") fwd = &root.items[i];
    if (!fwd || (fwd->kind != PickleValue::Kind::kList && fwd->kind != PickleValue::Kind::kTuple)) {
      note = "its traced_inputs record has no list of inputs for forward";
      return out;
    }
    for (const PickleValue& v : fwd->items) {
      if (v.kind != PickleValue::Kind::kTensor) {
        note = "its traced_inputs record holds a " + std::string(formats::pickle_kind_name(v.kind)) +
               " among forward's inputs, not only tensors";
        return {};
      }
      const auto st = scalar_type_of(v.tensor.dtype);
      if (!st) {
        note = "its traced_inputs record holds a " + std::string(formats::dtype_name(v.tensor.dtype)) + " tensor";
        return {};
      }
      StoredInput in;
      in.sizes = v.tensor.sizes;
      in.dtype = *st;
      const std::string rec = "traced_inputs/" + v.tensor.storage_key;
      const uint64_t need = static_cast<uint64_t>(v.tensor.storage_numel) * formats::dtype_itemsize(v.tensor.dtype);
      if (need > 0 && reader.hasRecord(rec)) {
        auto [data, bytes] = reader.getRecord(rec);
        if (bytes >= need) {
          at::Tensor storage = at::empty({v.tensor.storage_numel}, at::TensorOptions().dtype(*st));
          std::memcpy(storage.data_ptr(), data.get(), static_cast<size_t>(need));
          in.values = storage.as_strided(v.tensor.sizes, v.tensor.strides, v.tensor.storage_offset).clone();
        }
      }
      out.push_back(std::move(in));
    }
  } catch (const std::exception& e) {
    note = std::string("its traced_inputs record could not be read (") + trim_torch_error(e.what()) + ")";
    return {};
  }
  return out;
}

// ---------------------------------------------------------------- making tensors

struct Sizes {
  int64_t batch = kImageBatch, spatial = kSpatialLadder[0], seq = kSequenceLadder[0];
};

std::vector<int64_t> concrete(const std::vector<Dim>& dims, const Sizes& z) {
  std::vector<int64_t> out;
  for (const Dim& d : dims) {
    switch (d.sym) {
      case Sym::kBatch: out.push_back(z.batch); break;
      case Sym::kSpatial: out.push_back(z.spatial); break;
      case Sym::kSeq: out.push_back(z.seq); break;
      case Sym::kFixed: out.push_back(d.size); break;
    }
  }
  return out;
}

at::Tensor make_tensor(const Candidate& c, const std::vector<int64_t>& sizes, at::Generator& gen) {
  const auto opts = at::TensorOptions().dtype(at::kLong);
  switch (c.fill) {
    case Fill::kStored: return c.stored.clone();
    case Fill::kNormal: {
      at::Tensor t = at::randn(sizes, gen, at::TensorOptions().dtype(c.dtype == at::kDouble ? at::kDouble : at::kFloat));
      return t.to(c.dtype);
    }
    case Fill::kIds: return at::randint(0, std::max<int64_t>(1, c.high), sizes, gen, opts).to(c.dtype);
    case Fill::kBinary: return at::randint(0, 2, sizes, gen, opts).to(c.dtype);
    case Fill::kZeros: return at::zeros(sizes, opts).to(c.dtype);
    case Fill::kPositions: {
      if (sizes.empty()) return at::zeros(sizes, opts).to(c.dtype);
      const int64_t t = sizes.back();
      return at::arange(t, opts).expand(sizes).contiguous().to(c.dtype);
    }
    case Fill::kMask:
    case Fill::kPaddingMask: {
      at::Tensor m = at::ones(sizes, opts);
      if (sizes.size() >= 2 && sizes[0] >= 2 && sizes.back() >= 4) {
        const int64_t t = sizes.back();
        m.select(0, sizes[0] - 1).narrow(-1, t - t / 4, t / 4).fill_(0);
      }
      if (c.fill == Fill::kPaddingMask) m = 1 - m;
      return m.to(c.dtype);
    }
    case Fill::kLengths: {
      at::Tensor l = at::full(sizes, c.high, opts);
      if (l.dim() == 1 && l.size(0) >= 2 && c.high >= 4) l[l.size(0) - 1] = c.high - c.high / 4;
      return l.to(c.dtype);
    }
  }
  return at::Tensor();
}

std::string fill_text(const Candidate& c, const std::vector<int64_t>& sizes, uint64_t seed) {
  const std::string sd = " (seed " + std::to_string(seed) + ")";
  switch (c.fill) {
    case Fill::kStored: return "the values stored with the trace";
    case Fill::kNormal: return "standard normal values" + sd;
    case Fill::kIds: return "token ids uniform in [0, " + std::to_string(c.high) + ")" + sd;
    case Fill::kBinary: return "uniform 0/1 values" + sd;
    case Fill::kZeros: return "zeros";
    case Fill::kPositions: return "positions 0.." + std::to_string(sizes.empty() ? 0 : sizes.back() - 1);
    case Fill::kMask:
    case Fill::kPaddingMask: {
      std::string s = c.fill == Fill::kMask ? "ones (keep)" : "zeros (not padding)";
      if (sizes.size() >= 2 && sizes[0] >= 2 && sizes.back() >= 4)
        s += ", the last row padded from position " + std::to_string(sizes.back() - sizes.back() / 4);
      return s;
    }
    case Fill::kLengths: return "lengths " + std::to_string(c.high) + ", the last one " + std::to_string(c.high - c.high / 4);
  }
  return "";
}

// ---------------------------------------------------------------- running

class Trial {
 public:
  explicit Trial(LoadedModel& m) : m_(m) {
    for (const auto& b : m.module.named_buffers(/*recurse=*/true)) saved_.push_back({b.value, b.value.clone()});
  }
  ~Trial() {
    try {
      torch::NoGradGuard ng;
      for (auto& [live, copy] : saved_) live.detach().copy_(copy);
    } catch (...) {
    }
  }
  /// One eval-mode forward without gradients; false (and `err`) when it raises.
  bool run(const std::vector<c10::IValue>& args, std::string& err) {
    const bool was = m_.module.is_training();
    torch::NoGradGuard ng;
    try {
      m_.module.eval();
      m_.module.forward(args);
      m_.module.train(was);
      return true;
    } catch (const std::exception& e) {
      m_.module.train(was);
      err = trim_torch_error(e.what());
      return false;
    }
  }

 private:
  LoadedModel& m_;
  std::vector<std::pair<at::Tensor, at::Tensor>> saved_;
};

std::string forward_signature(const LoadedModel& m) {
  std::ostringstream ss;
  ss << "forward(";
  for (size_t i = 0; i < m.args.size(); ++i)
    ss << (i ? ", " : "") << m.args[i].name << ": " << m.args[i].type << (m.args[i].has_default ? " = default" : "");
  ss << ")";
  return ss.str();
}

std::string flags_hint(const std::string& example_for, const std::string& example) {
  return "give a sample batch with --input batch.pt (torch.save of a tuple of tensors in forward's order, or a dict "
         "by argument name) or synthesize the arguments with --input-shape NAME=DIMS[:DTYPE][:LOW..HIGH], for "
         "example --input-shape " + example_for + "=" + example;
}

std::string spec_example(const ArgPlan& p) {
  // A --input-shape example for a plan that could not run.
  if (p.variants.empty()) return "4x16";
  const Candidate& c = p.variants.front();
  Sizes z;
  z.batch = c.fill == Fill::kIds ? kTokenBatch : kImageBatch;
  z.spatial = 32;
  z.seq = 16;
  const auto dims = concrete(c.dims, z);
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  if (c.dtype != at::kFloat) s += std::string(":") + (c.dtype == at::kLong ? "int64" : c10::toString(c.dtype));
  if (c.fill == Fill::kIds) s += ":0.." + std::to_string(c.high);
  return s;
}

}  // namespace

void infer_arguments(Session& s) {
  LoadedModel& m = s.model;
  size_t count = 0;  // arguments to make: the required ones
  while (count < m.args.size() && !m.args[count].has_default) ++count;

  for (size_t i = 0; i < count; ++i) {
    if (!is_tensor_type(m.args[i].type))
      throw Error(error_kind::kInputInference, ExitCode::kUsage,
                  "cannot infer input '" + m.args[i].name + "' of the model's " + forward_signature(m) + ": it is a " +
                      m.args[i].type + ", and normdoctor makes only tensors; the model needs a wrapper whose forward "
                      "takes tensors only (--input / --input-shape give tensors)");
  }

  GraphInspector graph(m);
  Trial trial(m);
  std::vector<ArgPlan> plans(count);
  for (size_t i = 0; i < count; ++i) plans[i].name = m.args[i].name;

  // 1. The example inputs torch.jit.trace stored.
  std::string record_note;
  std::vector<StoredInput> stored = read_traced_inputs(m.path, record_note);
  if (!stored.empty() && (stored.size() < count || stored.size() > m.args.size())) {
    record_note = "its traced_inputs record holds " + std::to_string(stored.size()) + " inputs for the model's " +
                  forward_signature(m);
    stored.clear();
  }

  // Token-id arguments (an Embedding reads them) make batches of 2.
  std::vector<std::optional<Anchor>> anchors(stored.empty() ? count : stored.size());
  std::vector<std::vector<std::string>> seen(anchors.size());
  for (size_t i = 0; i < anchors.size(); ++i)
    if (!shaped_by_name(m.args[i].name)) anchors[i] = graph.anchor(i, seen[i]);

  bool used_record = false;
  std::string record_error;
  if (!stored.empty()) {
    plans.resize(stored.size());
    for (size_t i = 0; i < stored.size(); ++i) {
      ArgPlan& p = plans[i];
      p.name = m.args[i].name;
      p.from_record = true;
      Candidate c;
      for (int64_t v : stored[i].sizes) c.dims.push_back(Dim{Sym::kFixed, v});
      c.dtype = stored[i].dtype;
      const bool integral = !c10::isFloatingType(c.dtype) && !c10::isComplexType(c.dtype);
      if (stored[i].values.defined()) {
        c.fill = Fill::kStored;
        c.stored = stored[i].values;
        c.how = "traced_inputs record (the example inputs torch.jit.trace stored)";
      } else {
        std::string values;
        if (!integral) {
          c.fill = Fill::kNormal;
        } else if (anchors[i] && anchors[i]->kind == Anchor::kEmbedding) {
          c.fill = Fill::kIds;
          c.high = anchors[i]->channels;
          values = "; values: ids below " + anchor_text(*anchors[i]);
        } else if (is_mask_name(p.name)) {
          c.fill = is_padding_mask_name(p.name) ? Fill::kPaddingMask : Fill::kMask;
          values = "; values: a mask (from its name)";
        } else if (is_lengths_name(p.name)) {
          c.fill = Fill::kLengths;
          int64_t t = 1;
          for (const auto& o : stored)
            if (o.sizes.size() >= 2) t = std::max(t, o.sizes[1]);
          c.high = t;
          values = "; values: lengths (from its name)";
        } else if (is_token_type_name(p.name)) {
          c.fill = Fill::kZeros;
          values = "; values: zeros (from its name)";
        } else if (is_position_name(p.name)) {
          c.fill = Fill::kPositions;
          values = "; values: positions (from its name)";
        } else {
          c.fill = Fill::kBinary;
          values = "; values: 0/1 (nothing says their range)";
        }
        c.how = "traced_inputs record (shape and dtype; PyTorch stores no values" + values + ")";
      }
      p.variants.push_back(std::move(c));
    }
    // One try: the shapes the model was traced with.
    std::vector<c10::IValue> args;
    at::Generator gen = make_input_generator(s.opt.seed);
    for (const auto& p : plans) args.push_back(make_tensor(p.variants[0], concrete(p.variants[0].dims, {}), gen));
    std::string err;
    if (trial.run(args, err)) {
      used_record = true;
      for (size_t i = 0; i < plans.size(); ++i) {
        const Candidate& c = plans[i].variants[0];
        const at::Tensor t = args[i].toTensor();
        s.args.push_back({plans[i].name, args[i], "inferred: " + c.how});
        s.doc.assumptions.push_back("input '" + plans[i].name + "' (no --input given): " + dims_text(t.sizes().vec()) +
                                    " " + c10::toString(t.scalar_type()) + " from the model file's traced_inputs record, " +
                                    fill_text(c, t.sizes().vec(), s.opt.seed));
      }
    } else {
      record_error = err;
      plans.assign(count, ArgPlan{});
      for (size_t i = 0; i < count; ++i) plans[i].name = m.args[i].name;
      anchors.assign(count, std::nullopt);
      seen.assign(count, {});
      for (size_t i = 0; i < count; ++i)
        if (!shaped_by_name(m.args[i].name)) anchors[i] = graph.anchor(i, seen[i]);
    }
  }
  if (used_record) return;
  if (!record_note.empty())
    s.doc.assumptions.push_back("the model file's traced_inputs record was not used: " + record_note);
  if (!record_error.empty())
    s.doc.assumptions.push_back("the shapes in the model file's traced_inputs record did not run (" + record_error +
                                "); inputs were inferred from the graph instead");

  // 2. The graph.
  bool any_ids = false, any_named = false;
  for (size_t i = 0; i < count; ++i) {
    if (anchors[i] && anchors[i]->kind == Anchor::kEmbedding) any_ids = true;
    if (shaped_by_name(m.args[i].name)) any_named = true;
  }
  const bool seq_first = graph.sequence_signs() || any_ids || any_named;
  for (size_t i = 0; i < count; ++i) {
    ArgPlan& p = plans[i];
    const std::string& n = p.name;
    if (shaped_by_name(n)) {
      p.shaped_by_others = true;
      Candidate c;
      const bool as_bool = graph.used_as_bool(i);
      c.dtype = as_bool ? at::kBool : (any_ids ? at::kLong : at::kFloat);
      if (is_lengths_name(n)) {
        c.dims = {Dim{Sym::kBatch, 0}};
        c.dtype = at::kLong;
        c.fill = Fill::kLengths;
        c.how = "name '" + n + "': one length per example";
      } else {
        c.dims = {Dim{Sym::kBatch, 0}, Dim{Sym::kSeq, 0}};
        if (is_mask_name(n)) {
          c.fill = is_padding_mask_name(n) ? Fill::kPaddingMask : Fill::kMask;
          c.how = "name '" + n + "': a padding mask [N, T]";
        } else if (is_token_type_name(n)) {
          c.dtype = at::kLong;
          c.fill = Fill::kZeros;
          c.how = "name '" + n + "': segment 0 everywhere";
        } else {
          c.dtype = at::kLong;
          c.fill = Fill::kPositions;
          c.how = "name '" + n + "': positions 0..T-1";
        }
      }
      p.variants.push_back(std::move(c));
      continue;
    }
    if (!anchors[i]) {
      std::string ops;
      for (const auto& o : seen[i]) ops += (ops.empty() ? "" : ", ") + o;
      throw Error(error_kind::kInputInference, ExitCode::kUsage,
                  "cannot infer input '" + n + "' of the model's " + forward_signature(m) +
                      ": no layer that fixes its shape reads it" +
                      (ops.empty() ? std::string(" (forward does not use it)") : " (its first operations: " + ops + ")") +
                      "; " + flags_hint(n, "4x16"));
    }
    const Anchor& a = *anchors[i];
    const std::optional<int64_t> rank = graph.unpacked_rank(i);
    for (const auto& layout : anchor_layouts(a, seq_first)) {
      bool through_reshape = false;
      auto dims = undo_path(layout, a.path, through_reshape);
      if (!dims) continue;
      Candidate c;
      c.dims = *dims;
      c.dtype = a.kind == Anchor::kEmbedding ? at::kLong : at::kFloat;
      c.fill = a.kind == Anchor::kEmbedding ? Fill::kIds : Fill::kNormal;
      c.high = a.channels;
      c.how = anchor_text(a) + (a.path.empty() ? "" : through_reshape ? " (through a reshape)" : " (through layout ops)");
      p.variants.push_back(std::move(c));
    }
    if (rank) {  // `B, T, H = x.shape`: keep the layouts of that rank first
      std::stable_partition(p.variants.begin(), p.variants.end(),
                            [&](const Candidate& c) { return static_cast<int64_t>(c.dims.size()) == *rank; });
    }
    if (p.variants.empty())
      throw Error(error_kind::kInputInference, ExitCode::kUsage,
                  "cannot infer input '" + n + "' of the model's " + forward_signature(m) + ": " + anchor_text(a) +
                      " reads it through layout changes normdoctor cannot undo; " + flags_hint(n, "4x16"));
  }

  // Try the layouts (variant v of every argument) and free sizes (ladder step k).
  size_t variants = 1;
  for (const auto& p : plans) variants = std::max(variants, p.variants.size());
  const int64_t batch = any_ids ? kTokenBatch : kImageBatch;
  int tries = 0;
  std::string last_error;
  std::vector<std::string> tried;
  for (size_t v = 0; v < variants && tries < kMaxTries; ++v) {
    std::vector<const Candidate*> pick;
    bool spatial = false, seq = false;
    for (const auto& p : plans) {
      pick.push_back(&p.variants[std::min(v, p.variants.size() - 1)]);
      spatial = spatial || has_sym(*pick.back(), Sym::kSpatial);
      seq = seq || (!p.shaped_by_others && has_sym(*pick.back(), Sym::kSeq));
    }
    if (any_named) seq = true;
    const size_t steps = (spatial || seq) ? kLadderSteps : 1;
    for (size_t k = 0; k < steps && tries < kMaxTries; ++k) {
      if (!spatial && k >= std::size(kSequenceLadder)) break;
      Sizes z;
      z.batch = batch;
      z.spatial = kSpatialLadder[std::min(k, std::size(kSpatialLadder) - 1)];
      z.seq = kSequenceLadder[std::min(k, std::size(kSequenceLadder) - 1)];
      at::Generator gen = make_input_generator(s.opt.seed);
      std::vector<c10::IValue> args;
      std::string shapes;
      for (size_t i = 0; i < plans.size(); ++i) {
        Candidate c = *pick[i];
        if (c.fill == Fill::kLengths) c.high = z.seq;
        const auto sizes = concrete(c.dims, z);
        args.push_back(make_tensor(c, sizes, gen));
        shapes += (i ? ", " : "") + plans[i].name + "=" + dims_text(sizes);
      }
      ++tries;
      std::string err;
      if (!trial.run(args, err)) {
        last_error = err;
        tried.push_back(shapes);
        continue;
      }
      // Forward accepted these inputs.
      for (size_t i = 0; i < plans.size(); ++i) {
        Candidate c = *pick[i];
        if (c.fill == Fill::kLengths) c.high = z.seq;
        const at::Tensor t = args[i].toTensor();
        const auto sizes = t.sizes().vec();
        std::string free;
        if (has_sym(c, Sym::kSpatial))
          free = "size " + std::to_string(z.spatial) + " from ladder " + ladder_text(true);
        else if (has_sym(c, Sym::kSeq) && !plans[i].shaped_by_others)
          free = "length " + std::to_string(z.seq) + " from ladder " + ladder_text(false);
        else if (plans[i].shaped_by_others)
          free = "shaped like the other inputs";
        const std::string source = "inferred: " + c.how + (free.empty() ? "" : ", " + free);
        s.args.push_back({plans[i].name, args[i], source});
        std::string why = plans[i].shaped_by_others ? "its name (" + c.how + ")"
                                                    : "what forward first does with it (" + c.how + ")";
        std::string sentence = "input '" + plans[i].name + "' (no --input given): " + dims_text(sizes) + " " +
                               c10::toString(t.scalar_type()) + " of " + fill_text(c, sizes, s.opt.seed) +
                               ", inferred from " + why;
        if (has_sym(c, Sym::kSpatial))
          sentence += "; spatial size " + std::to_string(z.spatial) + " is the first of " + ladder_text(true) +
                      " that forward accepted";
        else if (has_sym(c, Sym::kSeq) && !plans[i].shaped_by_others)
          sentence += "; sequence length " + std::to_string(z.seq) + " is the first of " + ladder_text(false) +
                      " that forward accepted";
        if (has_sym(c, Sym::kBatch)) sentence += "; batch " + std::to_string(z.batch);
        s.doc.assumptions.push_back(sentence);
      }
      return;
    }
  }

  std::ostringstream ss;
  ss << "cannot infer inputs of the model's " << forward_signature(m) << ": forward rejected every candidate inferred "
     << "from its graph (";
  for (size_t i = 0; i < plans.size(); ++i)
    ss << (i ? "; " : "") << plans[i].name << " " << pattern_text(plans[i].variants[0]) << " from " << plans[i].variants[0].how;
  ss << "; tried " << tried.size() << ": " << (tried.empty() ? "" : tried.front()) << (tried.size() > 1 ? " ... " + tried.back() : "")
     << "; last error: " << last_error << "); " << flags_hint(plans[0].name, spec_example(plans[0]));
  throw Error(error_kind::kInputInference, ExitCode::kUsage, ss.str());
}

}  // namespace nd
