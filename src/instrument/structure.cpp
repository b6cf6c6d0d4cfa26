#include "instrument/structure.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <deque>
#include <functional>
#include <iostream>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <torch/csrc/jit/ir/constants.h>

#include "instrument/instrument.h"
#include "metrics/metrics.h"

namespace nd {
namespace structure {
namespace {

using torch::jit::Node;
using torch::jit::Value;

std::string kind_of(const Node* n) { return n->kind().toQualString(); }

bool is_tensor(const Value* v) { return v->type()->kind() == c10::TypeKind::TensorType; }

// Ops that leave a tensor's values (or their role) unchanged for structure
// purposes: casts, copies, dropout, our own taps.
bool is_trivial(const std::string& k) {
  static const std::unordered_set<std::string> kOps = {
      "aten::to", "aten::type_as", "aten::contiguous", "aten::clone", "aten::detach", "aten::dropout",
      "aten::dropout_", "aten::feature_dropout", "aten::alpha_dropout", "aten::float", "aten::half",
      "aten::bfloat16", "normdoctor::tap", "aten::identity"};
  return kOps.count(k) > 0;
}

// Ops with learned weights or a data-dependent contraction: a residual
// branch must contain one (x + pos_emb is not a residual block).
bool is_parameterized(const std::string& k) {
  static const std::unordered_set<std::string> kOps = {
      "aten::linear", "aten::matmul", "aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::einsum",
      "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution", "aten::_convolution_mode", "aten::convolution",
      "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
      "aten::scaled_dot_product_attention", "aten::_native_multi_head_attention",
      "aten::_transformer_encoder_layer_fwd", "aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu"};
  return kOps.count(k) > 0;
}

// Shape-preserving or reducing ops between a stack's last block and its head.
bool is_passthrough_to_head(const std::string& k) {
  static const std::unordered_set<std::string> kOps = {
      "aten::select", "aten::slice", "aten::index", "aten::squeeze", "aten::unsqueeze", "aten::view",
      "aten::reshape", "aten::flatten", "aten::mean", "aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d",
      "aten::adaptive_avg_pool3d", "aten::avg_pool1d", "aten::avg_pool2d", "aten::transpose", "aten::permute",
      "aten::relu", "aten::relu_", "aten::gelu", "aten::silu", "aten::tanh"};
  return is_trivial(k) || kOps.count(k) > 0;
}

// Tensors, and tuples/lists/optionals holding tensors (a module returning
// (out, weights), an If returning a tuple); not ints (aten::size).
bool carries_tensor(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::TensorType) return true;
  if (auto tt = t->cast<c10::TupleType>()) {
    for (const auto& e : tt->elements())
      if (carries_tensor(e)) return true;
    return false;
  }
  if (auto lt = t->cast<c10::ListType>()) return carries_tensor(lt->getElementType());
  if (auto ot = t->cast<c10::OptionalType>()) return carries_tensor(ot->getElementType());
  return false;
}

Value* strip(Value* v) {
  while (is_trivial(kind_of(v->node())) && !v->node()->inputs().empty() && is_tensor(v->node()->input(0)))
    v = v->node()->input(0);
  return v;
}

std::optional<double> const_double(Value* v) { return const_number(v); }

bool last_component_numeric(const std::string& path, bool allow_suffix) {
  const auto pos = path.rfind('.');
  const std::string last = pos == std::string::npos ? path : path.substr(pos + 1);
  if (last.empty()) return false;
  if (std::all_of(last.begin(), last.end(), [](unsigned char c) { return std::isdigit(c); })) return true;
  if (!allow_suffix) return false;
  // torchvision's "encoder_layer_3": a name, an underscore, an index.
  const auto us = last.rfind('_');
  if (us == std::string::npos || us + 1 >= last.size()) return false;
  return std::all_of(last.begin() + static_cast<long>(us) + 1, last.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

bool container_writer(const Node* n) {
  static const std::set<std::string> kWriters = {
      "aten::append", "aten::insert", "aten::extend", "aten::_set_item", "aten::__setitem__", "aten::setdefault",
      "aten::update", "aten::pop",    "aten::clear",  "aten::remove",    "aten::reverse",     "aten::sort"};
  return kWriters.count(n->kind().toQualString()) > 0;
}

bool list_written(const Value* v) {
  for (const auto& u : v->uses())
    if (u.offset == 0 && container_writer(u.user)) return true;
  return false;
}

std::optional<std::vector<int64_t>> const_int_list(Value* v) {
  if (auto iv = torch::jit::toIValue(v)) {
    if (iv->isIntList()) return iv->toIntVector();
    if (iv->isInt()) return std::vector<int64_t>{iv->toInt()};
    return std::nullopt;
  }
  if (v->node()->kind() != c10::prim::ListConstruct) return std::nullopt;
  if (list_written(v)) return std::nullopt;
  std::vector<int64_t> out;
  for (Value* e : v->node()->inputs()) {
    auto iv = torch::jit::toIValue(e);
    if (!iv || !iv->isInt()) return std::nullopt;
    out.push_back(iv->toInt());
  }
  return out;
}

std::optional<double> const_number(Value* v) {
  auto iv = torch::jit::toIValue(v);
  if (!iv) return std::nullopt;
  if (iv->isDouble()) return iv->toDouble();
  if (iv->isInt()) return static_cast<double>(iv->toInt());
  if (iv->isTensor() && iv->toTensor().numel() == 1) return iv->toTensor().to(at::kDouble).item<double>();
  return std::nullopt;
}

std::vector<NormNode> find_rms_patterns(const std::vector<Node*>& nodes, ScopeResolver& scopes,
                                        const std::function<std::optional<double>(Value*)>& attr_double) {
  std::vector<NormNode> out;
  for (Node* n : nodes) {
    const std::string k = kind_of(n);
    if (k != "aten::rsqrt" && k != "aten::sqrt") continue;
    Node* add = n->input(0)->node();
    if (kind_of(add) != "aten::add" || add->inputs().size() < 2) continue;
    Node* mean = nullptr;
    Value* eps = nullptr;
    for (size_t i = 0; i < 2 && !mean; ++i) {
      Node* d = add->input(i)->node();
      if (kind_of(d) == "aten::mean" && is_tensor(add->input(i))) {
        mean = d;
        eps = add->input(1 - i);
      }
    }
    if (!mean) continue;
    Node* sq = mean->input(0)->node();
    const std::string sk = kind_of(sq);
    bool squares = false;
    if (sk == "aten::pow" && sq->inputs().size() >= 2) {
      auto e = const_double(sq->input(1));
      squares = e && *e == 2.0;
    } else if (sk == "aten::mul" && sq->inputs().size() >= 2) {
      squares = sq->input(0) == sq->input(1);
    } else if (sk == "aten::square") {
      squares = true;
    }
    if (!squares) continue;
    NormNode nn;
    nn.node = sq;
    nn.anchor = n;
    nn.input = sq->input(0);
    nn.op = "rms_norm_pattern";
    // aten::mean(self, dim[], keepdim, dtype) or aten::mean(self, dtype) (all elements).
    if (mean->inputs().size() >= 3) {
      auto d = torch::jit::toIValue(mean->input(1));
      if (auto dims = const_int_list(mean->input(1)))
        nn.args["dims"] = *dims;
      else if (d && d->isNone())
        nn.args["dims"] = "all";
      else {
        nn.args["dims"] = "dynamic";
        nn.reduce = mean;
        nn.reduce_dims = mean->input(1);
      }
      auto kd = torch::jit::toIValue(mean->input(2));
      if (kd && kd->isBool()) nn.args["keepdim"] = kd->toBool();
    } else {
      nn.args["dims"] = "all";
    }
    std::optional<double> e = const_double(eps);
    if (!e && eps->node()->kind() == c10::prim::GetAttr) e = attr_double(eps);
    nn.args["eps"] = e ? nlohmann::json(*e) : nlohmann::json("dynamic");
    nn.args["normalizer"] = k == "aten::rsqrt" ? "rsqrt" : "sqrt";
    // Hugging Face's LlamaRMSNorm upcasts first (x.to(torch.float32)): the
    // statistics and eps are then fp32 whatever the model's dtype.
    if (kind_of(nn.input->node()) == "aten::to") {
      for (Value* in : nn.input->node()->inputs()) {
        auto c = torch::jit::toIValue(in);
        if (c && c->isInt() && (c->toInt() == static_cast<int64_t>(at::kFloat) || c->toInt() == static_cast<int64_t>(at::kDouble)) &&
            in != nn.input->node()->input(0))
          nn.args["upcast"] = c->toInt() == static_cast<int64_t>(at::kFloat) ? "float32" : "float64";
      }
    }
    const auto& chain = scopes.chain(n);
    nn.module = chain.empty() ? std::string() : chain.back();
    out.push_back(std::move(nn));
  }
  return out;
}

namespace {

/// Whether `v` is a statistic of a tensor (a mean, sum, standard deviation
/// or norm over some axes, possibly divided, scaled, shifted or clamped):
/// the location a scaler took out of the input (Hugging Face's
/// time-series StdScaler: loc = (x * observed).sum(1, keepdim) / count),
/// which y * scale + loc adds back. Such an addition de-normalizes the
/// output; it is no residual stream (eval29: PatchTSMixer's root read as a
/// residual block holding the whole model).
bool is_statistic(Value* v, int depth = 0) {
  if (depth > 6) return false;
  Node* n = strip(v)->node();
  const std::string k = kind_of(n);
  static const std::unordered_set<std::string> kReductions = {
      "aten::mean", "aten::sum", "aten::std", "aten::var", "aten::amax", "aten::amin", "aten::norm",
      "aten::linalg_vector_norm", "aten::nansum", "aten::nanmean", "aten::median", "aten::logsumexp"};
  if (kReductions.count(k)) {
    // Over given axes with keepdim (the last bool argument): shaped to
    // broadcast back onto the tensor it summarizes. A pooled feature
    // (x.mean(1), the axis dropped) may well carry a residual stream.
    bool keepdim = false;
    for (Value* in : n->inputs())
      if (auto c = torch::jit::toIValue(in); c && c->isBool()) keepdim = c->toBool();
    return n->inputs().size() >= 2 && keepdim;
  }
  static const std::unordered_set<std::string> kElementwise = {
      "aten::div", "aten::mul", "aten::add", "aten::sub", "aten::sqrt", "aten::rsqrt", "aten::clamp",
      "aten::clamp_min", "aten::abs", "aten::detach", "aten::neg"};
  if (!kElementwise.count(k) || n->inputs().empty() || !is_tensor(n->input(0))) return false;
  return is_statistic(n->input(0), depth + 1);
}

/// The values `v` flows into unchanged but for the ops `follow` accepts
/// (read as their first input): `v` first, then breadth first.
std::vector<Value*> flows_into(Value* v, const std::function<bool(const std::string&)>& follow) {
  std::vector<Value*> out;
  std::deque<Value*> fwd{v};
  std::unordered_set<const Value*> seen;
  while (!fwd.empty()) {
    Value* x = fwd.front();
    fwd.pop_front();
    if (!seen.insert(x).second) continue;
    out.push_back(x);
    for (const auto& u : x->uses())
      if (u.offset == 0 && follow(kind_of(u.user)))
        for (Value* o : u.user->outputs()) fwd.push_back(o);
  }
  return out;
}

}  // namespace

std::vector<Residual> find_residuals(const std::vector<Node*>& nodes, const std::vector<NormNode>& norms,
                                     ScopeResolver& scopes) {
  std::unordered_map<const Node*, size_t> pos;
  for (size_t i = 0; i < nodes.size(); ++i) pos[nodes[i]] = i + 1;  // 0: graph inputs
  auto pos_of = [&](const Node* n) -> size_t {
    auto it = pos.find(n);
    return it == pos.end() ? 0 : it->second;
  };
  // Norm lookup by anchor node and by (stripped) input value.
  std::unordered_map<const Node*, const NormNode*> by_anchor;
  std::unordered_map<const Value*, const NormNode*> by_input;
  for (const auto& nn : norms) {
    by_anchor[nn.anchor] = &nn;
    by_input[strip(nn.input)] = &nn;
    by_input[nn.input] = &nn;
  }

  std::vector<Residual> out;
  for (Node* n : nodes) {
    const std::string k = kind_of(n);
    if ((k != "aten::add" && k != "aten::add_") || n->inputs().size() < 2) continue;
    if (!is_tensor(n->input(0)) || !is_tensor(n->input(1))) continue;
    for (size_t si = 0; si < 2; ++si) {
      Value* a = n->input(si);
      Value* b = n->input(1 - si);
      // A constant (a pooled eps tensor) or a parameter is not a stream.
      const auto ak = strip(a)->node()->kind();
      if (ak == c10::prim::Constant || ak == c10::prim::GetAttr) continue;
      if (is_statistic(a)) continue;
      // A stream scaled by a number before the addition (DeepNorm's
      // `x = residual * self.alpha + x`, torchscale and fairseq; Admin's
      // omega): the branch reads the stream before the scaling (eval24
      // case 03: no residual block was found, and no deep-post-norm).
      Value* src = a;
      Value* scale = nullptr;
      bool divides = false;
      {
        Node* an = strip(a)->node();
        const std::string mk = kind_of(an);
        // Or by a learned per-channel gain on the shortcut (timm MetaFormer's
        // res_scale: x = self.res_scale1(x) + branch, Scale's x *
        // self.scale.view(...) in PoolFormerV2's later stages; eval42 found
        // those stages' blocks missing): a parameter seen through views.
        auto gain_parameter = [](Value* v) {
          for (int i = 0; i < 6; ++i) {
            const std::string vk = kind_of(v->node());
            if (vk != "aten::view" && vk != "aten::reshape" && vk != "aten::unsqueeze" && vk != "aten::to") break;
            v = v->node()->input(0);
          }
          return v->node()->kind() == c10::prim::GetAttr;
        };
        const bool in_place = mk == "aten::mul_";
        if ((mk == "aten::mul" || mk == "aten::div" || in_place) && an->inputs().size() >= 2 && is_tensor(an->input(0)) &&
            (!carries_tensor(an->input(1)->type()) || (mk != "aten::div" && gain_parameter(an->input(1))))) {
          src = an->input(0);
          scale = carries_tensor(an->input(1)->type()) ? nullptr : an->input(1);
          divides = mk == "aten::div";
        }
      }
      // From the stream before any cast: HF Mamba's `residual =
      // residual.to(torch.float32)` (residual_in_fp32) runs after the branch's
      // norm has read the stream, so the cast's position would hide the
      // whole branch (eval42: FalconMamba had no residual blocks).
      const size_t lo = std::min(pos_of(src->node()), pos_of(strip(src)->node()));
      // Ancestors of b defined after a (the branch), through tensor inputs only
      // (a shape read with aten::size is not a data dependence).
      std::unordered_set<const Node*> seen;
      std::deque<Node*> todo{b->node()};
      bool reaches = false, parameterized = false;
      const Value* a_stripped = strip(src);
      while (!todo.empty()) {
        Node* d = todo.front();
        todo.pop_front();
        if (!seen.insert(d).second) continue;
        if (pos_of(d) <= lo) continue;
        if (is_parameterized(kind_of(d))) parameterized = true;
        std::vector<Value*> ins(d->inputs().begin(), d->inputs().end());
        for (auto* blk : d->blocks())
          for (Value* r : blk->return_node()->inputs()) ins.push_back(r);
        for (Value* in : ins) {
          if (!carries_tensor(in->type())) continue;
          if (in == a || in == src || in == a_stripped) {
            reaches = true;
            continue;
          }
          todo.push_back(in->node());
        }
      }
      static const bool debug = std::getenv("NORMDOCTOR_DEBUG_STRUCTURE") != nullptr;
      if (debug)
        std::cerr << "residual? " << *n << "  stream input " << si << " reaches=" << reaches
                  << " parameterized=" << parameterized << "\n";
      if (!reaches || !parameterized) continue;

      const auto& chain = scopes.chain(n);
      std::string block;
      for (int pass = 0; pass < 2 && block.empty(); ++pass)
        for (auto it = chain.rbegin(); it != chain.rend(); ++it)
          if (last_component_numeric(*it, pass == 1)) {
            block = *it;
            break;
          }
      // The innermost numbered module is an entry of a list of different
      // sublayers (Hugging Face T5: encoder.block.2.layer holds
      // T5LayerSelfAttention then T5LayerFF, each adding its branch): the
      // repeated unit is the numbered module around that list
      // (encoder.block.2, in the stack encoder.block), when there is one
      // whose own container repeats one class. Swin's stages (layers.0,
      // layers.1: one class) keep their blocks (layers.0.blocks.1), and so
      // does a stage of one block (timm ConvNeXt's stages.0.blocks.0 at
      // depth 1 is no list of different sublayers: eval42 read stages.0).
      // A stage of one block goes up to the stage only when every stage
      // holds one block (NAFNet's decoders.i = Sequential(NAFBlock) in a
      // small config: the stages are the repeated unit, eval39's ARCH008),
      // not when the depths differ (ConvNeXt's 1-1-2-1).
      const bool one_entry = !block.empty() && scopes.entry_count(parent_module(block)) == 1;
      if (!block.empty() && (scopes.mixed_entries(parent_module(block)) || one_entry)) {
        for (auto it = chain.rbegin(); it != chain.rend(); ++it)
          if (it->size() < block.size() && block.compare(0, it->size() + 1, *it + ".") == 0 &&
              last_component_numeric(*it, false) && scopes.repeated_entries(parent_module(*it))) {
            if (one_entry && !scopes.mixed_entries(parent_module(block))) {
              // The container's path below the stage (".blocks" or ""), in
              // every sibling stage.
              const std::string rel = parent_module(block).substr(it->size());
              const std::string stages = parent_module(*it);
              bool all_single = true;
              for (const auto& [p, idx] : scopes.paths()) {
                if (p.size() <= stages.size() + 1 || p.compare(0, stages.size() + 1, stages + ".") != 0) continue;
                const std::string tail = p.substr(stages.size() + 1);
                if (tail.empty() || !std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
                if (scopes.entry_count(p + rel) != 1) all_single = false;
              }
              if (!all_single) break;
            }
            block = *it;
            break;
          }
      }
      // No numbered module runs the add: the loop adds the branches itself
      // (vit-pytorch's `for attn, ff in self.layers: x = attn(x) + x`, a
      // ModuleList of ModuleLists). The block is then the outermost numbered
      // ModuleList entry holding the branch's module (layers.0 for both of
      // layers.0.0 and layers.0.1): each entry is a repeated unit.
      bool block_from_branch = false;
      if (block.empty()) {
        const std::string base = chain.empty() ? std::string() : chain.back();
        const auto& bc = scopes.chain(strip(b)->node());
        std::string inner;
        for (const auto& p : bc)
          if (std::find(chain.begin(), chain.end(), p) == chain.end()) {
            inner = p;
            break;
          }
        if (!inner.empty() && (base.empty() || inner.compare(0, base.size() + 1, base + ".") == 0)) {
          size_t pos = base.empty() ? 0 : base.size() + 1;
          while (pos <= inner.size()) {
            const size_t dot = inner.find('.', pos);
            const std::string prefix = inner.substr(0, dot == std::string::npos ? inner.size() : dot);
            if (last_component_numeric(prefix, false)) {
              block = prefix;
              block_from_branch = true;
              break;
            }
            if (dot == std::string::npos) break;
            pos = dot + 1;
          }
        }
      }
      if (block.empty() && !chain.empty()) block = chain.back();
      // The branch F lies inside the block: a value reused many blocks later
      // (an attention mask added to every layer's scores) is not a stream.
      if (!block.empty()) {
        std::unordered_set<const Node*> from_a;
        std::deque<Value*> fwd{src};
        const size_t hi = pos_of(n);
        while (!fwd.empty()) {
          Value* v = fwd.front();
          fwd.pop_front();
          for (const auto& u : v->uses()) {
            Node* un = u.user;
            if (un == n || !seen.count(un) || pos_of(un) >= hi || !from_a.insert(un).second) continue;
            for (Value* o : un->outputs()) fwd.push_back(o);
          }
        }
        bool outside = false;
        for (const Node* pn : from_a) {
          const auto& pc = scopes.chain(const_cast<Node*>(pn));
          // Nodes inside If/Loop blocks often have no call stack (scope
          // unknown, empty chain): they do not count as outside.
          if (pc.empty()) continue;
          // A block found from its branch is a ModuleList entry, which runs
          // no forward of its own: inside it means inside one of its modules
          // (the add's own module, which loops over the entries, counts too).
          const bool inside =
              block_from_branch
                  ? std::any_of(pc.begin(), pc.end(),
                                [&](const std::string& p) { return p.compare(0, block.size() + 1, block + ".") == 0; }) ||
                        (!chain.empty() && pc.back() == chain.back())
                  : std::find(pc.begin(), pc.end(), block) != pc.end();
          if (!inside) {
            if (debug) std::cerr << "  outside block " << block << ": " << *pn;
            outside = true;
            break;
          }
        }
        if (outside) continue;
      }

      Residual r;
      r.add = n;
      r.stream_index = si;
      r.module = chain.empty() ? std::string() : chain.back();
      r.block = block;
      r.stack = r.block.empty() ? std::string() : parent_module(r.block);
      r.stream_scale = scale;
      r.scale_divides = divides;
      {
        Node* bn = strip(b)->node();
        const std::string bk = kind_of(bn);
        if ((bk == "aten::mul" || bk == "aten::mul_" || bk == "aten::div") && bn->inputs().size() >= 2) {
          for (size_t j = 0; j < 2 && !r.branch_scale; ++j) {
            if (bk == "aten::div" && j == 0) continue;  // x / scale only
            Value* f = bn->input(j);
            if (!carries_tensor(f->type()) && is_tensor(bn->input(1 - j))) {
              r.branch_scale = f;
              r.branch_divides = bk == "aten::div";
            }
          }
        }
      }

      // The sum scaled as a whole right after the addition (WaveNet's and
      // ConvS2S's `x = (x + residual) * math.sqrt(0.5)`, which keeps the
      // stream's variance level without a norm: eval57): the scaling must
      // be the sum's only use, through casts and dropout.
      {
        std::vector<Node*> users;
        for (Value* v : flows_into(n->output(), is_trivial))
          for (const auto& u : v->uses())
            if (!(u.offset == 0 && is_trivial(kind_of(u.user)))) users.push_back(u.user);
        if (users.size() == 1) {
          Node* un = users.front();
          const std::string uk = kind_of(un);
          if ((uk == "aten::mul" || uk == "aten::div") && un->inputs().size() >= 2) {
            const size_t j = uk == "aten::div" ? 1 : (carries_tensor(un->input(0)->type()) ? 1 : 0);
            if (!carries_tensor(un->input(j)->type()) && is_tensor(un->input(1 - j))) {
              r.sum_scale = un->input(j);
              r.sum_divides = uk == "aten::div";
            }
          }
        }
      }

      // Pre-norm: a norm in the branch normalizes the stream itself, or the
      // stream concatenated with other tokens (CaiT's class attention:
      // x_cls + attn(norm1(torch.cat([x_cls, x], dim=1)))).
      auto is_stream = [&](Value* v) { return strip(v) == a_stripped || v == a || v == src; };
      auto concat_of_stream = [&](Value* v) {
        Node* c = strip(v)->node();
        if (kind_of(c) != "aten::cat" && kind_of(c) != "aten::concat") return false;
        Node* l = c->input(0)->node();
        if (l->kind() != c10::prim::ListConstruct) return false;
        return std::any_of(l->inputs().begin(), l->inputs().end(), [&](Value* e) { return is_stream(e); });
      };
      for (const auto& nn : norms)
        if (seen.count(nn.anchor) && pos_of(nn.anchor) > lo && (is_stream(nn.input) || concat_of_stream(nn.input))) {
          r.placement = "pre-norm";
          r.norm_module = nn.module;
          break;
        }
      // Post-norm: the sum goes straight into a norm and the norm's output
      // carries on. A sum also added to later as it is (the stream of a
      // pre-norm stack: h = x + attn(norm1(x)); h + mlp(norm2(h))) feeds the
      // next block's pre-norm, not a post-norm of this one. A layout move on
      // the way is still "straight into" the norm (PatchTST's Transpose(1, 2)
      // -> BatchNorm1d -> Transpose(1, 2)).
      if (r.placement.empty()) {
        bool sum_carries_on = false;
        for (Value* v : flows_into(n->output(), is_trivial))
          for (const auto& u : v->uses())
            sum_carries_on = sum_carries_on || kind_of(u.user) == "aten::add" || kind_of(u.user) == "aten::add_";
        if (!sum_carries_on)
          for (Value* v : flows_into(n->output(), [](const std::string& k) {
                 return is_trivial(k) || k == "aten::transpose" || k == "aten::permute";
               })) {
            auto hit = by_input.find(v);
            // The norm is this block's: under the block, or run by the
            // module that adds (a parent's x = norms[i](x + layers[i](x))).
            // A norm outside both reads the block's output as the next
            // stage's input (timm ConvNeXt's stages.1.downsample.0 after
            // the last block of stage 0: eval33, eval42 called it post-norm).
            auto under = [](const std::string& m, const std::string& owner) {
              return owner.empty() || m == owner || m.compare(0, owner.size() + 1, owner + ".") == 0;
            };
            if (hit != by_input.end() && !under(hit->second->module, r.block) && !under(hit->second->module, r.module))
              continue;
            if (hit != by_input.end()) {
              r.placement = "post-norm";
              r.norm_module = hit->second->module;
              break;
            }
          }
      }
      if (r.placement.empty()) {
        for (const auto& nn : norms)
          if (seen.count(nn.anchor) && pos_of(nn.anchor) > lo) {
            r.placement = "in-branch";
            r.norm_module = nn.module;
            break;
          }
      }
      if (r.placement.empty()) r.placement = "none";
      // Whether the added branch comes straight out of a norm module.
      {
        std::set<std::string> norm_modules;
        for (const auto& nn : norms)
          if (!nn.module.empty()) norm_modules.insert(nn.module);
        std::vector<Value*> work = {n->input(1 - si)};
        std::unordered_set<const Value*> vs;
        for (size_t w = 0; w < work.size() && w < 16 && !r.branch_normalized; ++w) {
          Value* v = work[w];
          if (!vs.insert(v).second) continue;
          Node* p = v->node();
          const auto& pc = scopes.chain(p);
          if (!pc.empty() && norm_modules.count(pc.back())) {
            r.branch_normalized = true;
            break;
          }
          const std::string pk = kind_of(p);
          if ((is_trivial(pk) && !p->inputs().empty()) || pk == "aten::mul" || pk == "aten::mul_")
            for (Value* in : p->inputs())
              if (is_tensor(in)) work.push_back(in);
        }
      }
      out.push_back(std::move(r));
      break;
    }
  }
  return out;
}

FinalNorm find_final_norm(const Residual& last, const std::vector<NormNode>& norms, ScopeResolver& scopes) {
  std::unordered_map<const Value*, const NormNode*> by_input;
  for (const auto& nn : norms) {
    by_input[nn.input] = &nn;
    by_input[strip(nn.input)] = &nn;
  }
  FinalNorm f;
  bool to_output = false, unknown = false;
  std::string head;
  std::deque<Value*> todo{last.add->output()};
  std::unordered_set<const Value*> seen;
  // Values reached through a concatenation with other tensors.
  std::unordered_set<const Value*> via_cat;
  // Whether a module path lies inside a numbered entry (up.0.norm1).
  auto in_numbered_entry = [](const std::string& path) {
    for (size_t pos = 0; pos <= path.size();) {
      const size_t dot = path.find('.', pos);
      const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
      if (!part.empty() && std::all_of(part.begin(), part.end(), [](unsigned char c) { return std::isdigit(c); }))
        return true;
      if (dot == std::string::npos) break;
      pos = dot + 1;
    }
    return false;
  };
  size_t steps = 0;
  while (!todo.empty() && ++steps < 10000) {
    Value* v = todo.front();
    todo.pop_front();
    if (!seen.insert(v).second) continue;
    auto hit = by_input.find(v);
    if (hit != by_input.end()) {
      // After a concatenation, only a norm outside the numbered blocks is
      // the stack's final norm: a U-Net's skip concatenation feeds the next
      // stage's first block (up.0.norm1), which normalizes its own branch.
      if (via_cat.count(v) && in_numbered_entry(hit->second->module)) {
        unknown = true;
        continue;
      }
      f.status = "present";
      f.norm_module = hit->second->module;
      return f;
    }
    for (const auto& u : v->uses()) {
      Node* user = u.user;
      const std::string k = kind_of(user);
      if (user->kind() == c10::prim::Return) {
        // The graph's own return is the model output; a block's return
        // (inside If/Loop) continues through the owning node's outputs.
        Node* owner = user->owningBlock()->owningNode();
        if (!owner) {
          to_output = true;
        } else if (u.offset < owner->outputs().size()) {
          todo.push_back(owner->output(u.offset));
        }
      } else if (user->kind() == c10::prim::TupleConstruct || user->kind() == c10::prim::ListConstruct ||
                 user->kind() == c10::prim::DictConstruct) {
        Value* agg = user->output();
        for (const auto& au : agg->uses()) {
          Node* an = au.user;
          if (an->kind() == c10::prim::Return && !an->owningBlock()->owningNode()) {
            to_output = true;
          } else if (an->kind() == c10::prim::TupleUnpack || an->kind() == c10::prim::ListUnpack) {
            if (u.offset < an->outputs().size()) todo.push_back(an->output(u.offset));
          } else if (an->kind() == c10::prim::TupleIndex || kind_of(an) == "aten::__getitem__") {
            auto idx = torch::jit::toIValue(an->input(1));
            if (idx && idx->isInt() && idx->toInt() == static_cast<int64_t>(u.offset)) todo.push_back(an->output());
          } else if (user->kind() == c10::prim::ListConstruct && au.offset == 0 &&
                     (kind_of(an) == "aten::cat" || kind_of(an) == "aten::concat")) {
            // The stream joined with other tokens (CaiT's class-attention
            // stage returns x_cls, and forward_features norms
            // torch.cat((x_cls, x), dim=1)): the concatenation carries it on.
            todo.push_back(an->output());
            via_cat.insert(an->output());
          } else {
            unknown = true;
          }
        }
      } else if (is_parameterized(k)) {
        if (head.empty()) {
          const auto& chain = scopes.chain(user);
          head = chain.empty() ? std::string() : chain.back();
          if (head.empty()) head = "<" + k.substr(6) + ">";
        }
      } else if (is_passthrough_to_head(k) && u.offset == 0) {
        for (Value* o : user->outputs())
          if (is_tensor(o)) {
            todo.push_back(o);
            if (via_cat.count(v)) via_cat.insert(o);
          }
      } else {
        unknown = true;
      }
    }
  }
  if (!head.empty()) {
    f.status = "absent";
    f.head_module = head.front() == '<' ? std::string() : head;
  } else if (to_output && !unknown) {
    f.status = "absent";
  } else {
    f.status = "unknown";
  }
  return f;
}

FinalNorm find_final_norm_from_output(torch::jit::Graph& graph, const std::vector<Residual>& residuals,
                                      const std::vector<NormNode>& norms, ScopeResolver& scopes,
                                      const std::string& main_stack) {
  FinalNorm f;
  std::unordered_map<const Value*, const Residual*> adds;
  for (const auto& r : residuals) adds[r.add->output()] = &r;
  // A norm's output: the anchor's output, and after it the gain/bias applied
  // with parameters (x * weight + bias) in a written-out norm.
  std::unordered_map<const Value*, const NormNode*> outputs;
  for (const auto& nn : norms) {
    Value* v = nn.anchor->output();
    outputs[v] = &nn;
    for (int i = 0; i < 4; ++i) {
      Value* next = nullptr;
      for (const auto& u : v->uses()) {
        const std::string k = kind_of(u.user);
        // The gain or bias: the other operand is a parameter or a constant.
        // An add of another activation is a residual add after a norm on the
        // branch (Gemma's post_feedforward_layernorm), not the norm's output.
        bool affine = k == "aten::view" || k == "aten::reshape" || is_trivial(k);
        if ((k == "aten::mul" || k == "aten::add") && u.user->inputs().size() >= 2 && u.offset <= 1) {
          Value* other = u.user->input(1 - u.offset);
          const auto ok = strip(other)->node()->kind();
          affine = !is_tensor(other) || ok == c10::prim::GetAttr || ok == c10::prim::Constant;
        }
        if (affine && is_tensor(u.user->output())) next = u.user->output();
      }
      if (!next) break;
      outputs[next] = &nn;
      v = next;
    }
  }
  auto head_through = [](const std::string& k) {
    static const std::unordered_set<std::string> kOps = {
        "aten::relu", "aten::relu_", "aten::gelu", "aten::silu", "aten::silu_", "aten::tanh", "aten::sigmoid",
        "aten::hardswish", "aten::hardswish_", "aten::leaky_relu", "aten::softmax", "aten::log_softmax",
        "aten::flatten", "aten::view", "aten::reshape", "aten::select", "aten::slice", "aten::squeeze",
        "aten::unsqueeze", "aten::permute", "aten::transpose", "aten::mean", "aten::adaptive_avg_pool1d",
        "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d", "aten::avg_pool2d", "aten::max_pool2d",
        "aten::index", "aten::mul", "aten::add", "aten::div"};
    return is_trivial(k) || kOps.count(k) > 0;
  };
  // The tensor input of a pass-through op: the one that is not a parameter/constant.
  auto data_input = [](Node* n) -> Value* {
    for (Value* in : n->inputs())
      if (is_tensor(in) && strip(in)->node()->kind() != c10::prim::GetAttr && strip(in)->node()->kind() != c10::prim::Constant)
        return in;
    return nullptr;
  };
  // Output tensors of the graph (through tuples).
  std::deque<Value*> starts;
  for (Value* r : graph.return_node()->inputs()) {
    if (is_tensor(r)) {
      starts.push_back(r);
    } else if (r->node()->kind() == c10::prim::TupleConstruct || r->node()->kind() == c10::prim::ListConstruct) {
      for (Value* e : r->node()->inputs())
        if (is_tensor(e)) starts.push_back(e);
    } else if (r->node()->kind() == c10::prim::DictConstruct) {  // key, value, key, value, ...
      for (size_t i = 1; i < r->node()->inputs().size(); i += 2)
        if (is_tensor(r->node()->input(i))) starts.push_back(r->node()->input(i));
    }
  }
  // No tensor found at the return: the forward walk decides (eval54: a
  // wrapper returning a dict printed "final norm: n/a" for Jamba's pre-norm
  // stack, which ends in final_layernorm).
  if (starts.empty()) {
    f.status = "unknown";
    return f;
  }
  Value* v = starts.front();
  // 1. The head.
  Node* head = nullptr;
  for (int i = 0; i < 64 && v; ++i) {
    if (outputs.count(v) || adds.count(v)) break;
    Node* n = v->node();
    const std::string k = kind_of(n);
    if (is_parameterized(k)) {
      head = n;
      break;
    }
    if (!head_through(k)) break;
    v = data_input(n);
  }
  if (head) {
    const auto& chain = scopes.chain(head);
    f.head_module = chain.empty() ? std::string() : chain.back();
    v = data_input(head);
  } else {
    v = starts.front();
  }
  // 2. What feeds it.
  for (int i = 0; i < 64 && v; ++i) {
    auto hit = outputs.find(v);
    if (hit != outputs.end()) {
      f.status = "present";
      f.norm_module = hit->second->module;
      return f;
    }
    if (auto a = adds.find(v); a != adds.end()) {
      // A residual add of the main stack feeds the head: no final norm. One
      // of a head module's own (timm's AttentionPoolLatent: x + mlp(norm(x))
      // after the stack's final norm) says nothing about the stack: the
      // forward walk from the stack's last block decides.
      if (!main_stack.empty() && a->second->stack != main_stack) break;
      f.status = "absent";
      return f;
    }
    Node* n = v->node();
    if (n->kind() == c10::prim::Param) break;
    if (!head_through(kind_of(n))) break;
    v = data_input(n);
  }
  f.status = "unknown";
  return f;
}

namespace {

// A tensor computed from parameters and constants alone (a temperature
// parameter, logit_scale.exp().clamp(max=100), 1 / self.tau): scaling by it
// keeps the output a function of one contraction.
bool parameter_derived(Value* v, int depth = 0) {
  if (depth > 8) return false;
  if (!is_tensor(v)) return v->node()->kind() == c10::prim::Constant || v->type()->kind() != c10::TypeKind::TensorType;
  Node* n = v->node();
  const auto k = n->kind();
  if (k == c10::prim::GetAttr || k == c10::prim::Constant) return true;
  static const std::unordered_set<std::string> kOps = {
      "aten::exp", "aten::clamp", "aten::clamp_max", "aten::clamp_min", "aten::reciprocal", "aten::log",
      "aten::mul", "aten::div", "aten::add", "aten::sub", "aten::to", "aten::detach", "aten::neg", "aten::abs",
      "aten::softplus", "aten::sigmoid", "aten::sqrt", "aten::pow"};
  if (!kOps.count(kind_of(n))) return false;
  for (Value* in : n->inputs())
    if (!parameter_derived(in, depth + 1)) return false;
  return true;
}

// A 2-D parameter seen through transposes and views (W.t(), W.T, W.transpose(0, 1)).
bool weight_operand(Value* v) {
  for (int i = 0; i < 8; ++i) {
    Node* n = strip(v)->node();
    if (n->kind() == c10::prim::GetAttr) return true;
    const std::string k = kind_of(n);
    if (k != "aten::t" && k != "aten::transpose" && k != "aten::permute" && k != "aten::view" && k != "aten::reshape" &&
        k != "aten::numpy_T" && k != "aten::mT")
      return false;
    v = n->input(0);
  }
  return false;
}

// b enters a @ b transposed (b.t(), b.T, b.transpose(-2, -1), b.mT): a and
// b are both [..., n, d] and the product contracts their last axes.
bool transposed_operand(Value* v) {
  const std::string k = kind_of(strip(v)->node());
  return k == "aten::t" || k == "aten::transpose" || k == "aten::numpy_T" || k == "aten::mT" || k == "aten::permute";
}

OutputProduct classify_contraction(Node* n) {
  OutputProduct r;
  const std::string k = kind_of(n);
  Value *a = nullptr, *b = nullptr;
  bool contracts_last = false;
  if (k == "aten::matmul" || k == "aten::mm" || k == "aten::bmm") {
    a = n->input(0);
    b = n->input(1);
    contracts_last = transposed_operand(b);
  } else if (k == "aten::linear") {
    a = n->input(0);
    b = n->input(1);
    contracts_last = true;
  } else if (k == "aten::einsum") {
    const auto eq = torch::jit::toIValue(n->input(0));
    Node* list = n->input(1)->node();
    if (!eq || !eq->isString() || list->kind() != c10::prim::ListConstruct || list->inputs().size() != 2) return r;
    a = list->input(0);
    b = list->input(1);
    std::string e = eq->toStringRef();
    e.erase(std::remove(e.begin(), e.end(), ' '), e.end());
    const auto comma = e.find(','), arrow = e.find("->");
    if (comma == std::string::npos || arrow == std::string::npos || comma == 0 || arrow <= comma + 1) return r;
    const char la = e[comma - 1], lb = e[arrow - 1];
    contracts_last = la == lb && e.find(la, arrow) == std::string::npos;
  } else {
    return r;
  }
  const bool wa = weight_operand(a), wb = weight_operand(b);
  if (wa != wb) {
    r.kind = "linear";
  } else if (!wa && contracts_last) {
    r.kind = "similarity";
  } else {
    return r;
  }
  r.op = k;
  r.node = n;
  return r;
}

// The out-of-place name of an in-place arithmetic op (`logits /= self.T`
// in MoCo's builder.py is aten::div_): the same scaling for these walks.
std::string out_of_place(const std::string& k) {
  static const std::unordered_set<std::string> kInPlace = {"aten::mul_", "aten::div_", "aten::add_", "aten::sub_",
                                                           "aten::true_divide_"};
  return kInPlace.count(k) ? k.substr(0, k.size() - 1) : k;
}

OutputProduct product_behind(Value* v, int depth) {
  if (depth > 48) return {};
  v = strip(v);
  Node* n = v->node();
  const std::string k = out_of_place(kind_of(n));
  static const std::unordered_set<std::string> kRearrange = {
      "aten::view", "aten::reshape", "aten::flatten", "aten::index", "aten::slice", "aten::select",
      "aten::transpose", "aten::t", "aten::permute", "aten::squeeze", "aten::unsqueeze", "aten::narrow",
      "aten::masked_select", "aten::masked_fill", "aten::numpy_T", "aten::mT", "aten::contiguous"};
  if (kRearrange.count(k)) return product_behind(n->input(0), depth + 1);
  if (k == "aten::cat" || k == "aten::stack") {
    Node* list = n->input(0)->node();
    if (list->kind() != c10::prim::ListConstruct || list->inputs().empty()) return {};
    OutputProduct first;
    for (Value* e : list->inputs()) {
      OutputProduct p = product_behind(e, depth + 1);
      if (p.kind.empty()) return {};
      if (first.kind.empty()) first = p;
    }
    return first;
  }
  if (k == "aten::mul" || k == "aten::div" || k == "aten::add" || k == "aten::sub" || k == "aten::true_divide") {
    if (n->inputs().size() < 2) return {};
    Value* x = n->input(0);
    Value* y = n->input(1);
    if (parameter_derived(y)) return product_behind(x, depth + 1);
    // logit_scale * logits: the scale first (not for x / y or x - y).
    if ((k == "aten::mul" || k == "aten::add") && parameter_derived(x)) return product_behind(y, depth + 1);
    return {};
  }
  return classify_contraction(n);
}

}  // namespace

namespace {
// The output the loss and the features probe read: a returned tensor, the
// first element of a returned tuple/list, or a dict's "logits".
Value* primary_output(torch::jit::Graph& graph) {
  Value* out = nullptr;
  for (Value* r : graph.return_node()->inputs()) {
    if (is_tensor(r)) {
      out = r;
    } else {
      Node* c = r->node();
      // The first element, as the features probe reads the output (a
      // nested tuple first: not followed, the probe would read another tensor).
      if (c->kind() == c10::prim::TupleConstruct || c->kind() == c10::prim::ListConstruct) {
        if (!c->inputs().empty() && is_tensor(c->input(0))) out = c->input(0);
      } else if (c->kind() == c10::prim::DictConstruct) {
        for (size_t i = 0; i + 1 < c->inputs().size(); i += 2) {
          const auto key = torch::jit::toIValue(c->input(i));
          if (key && key->isString() && key->toStringRef() == "logits" && is_tensor(c->input(i + 1))) out = c->input(i + 1);
        }
      }
    }
    break;
  }
  return out;
}
}  // namespace

OutputProduct find_output_product(torch::jit::Graph& graph) {
  Value* out = primary_output(graph);
  if (!out) return {};
  return product_behind(out, 0);
}

std::optional<int64_t> output_class_axis(torch::jit::Graph& graph) {
  Value* v = primary_output(graph);
  for (int depth = 0; v && depth < 32; ++depth) {
    Node* n = v->node();
    const std::string k = out_of_place(kind_of(n));
    // Casts, dropout and normdoctor's own taps and rounding (their tensor is
    // their last input): the tensor they pass on.
    if (is_trivial(k) || k.rfind("normdoctor::", 0) == 0) {
      Value* t = nullptr;
      for (Value* in : n->inputs())
        if (is_tensor(in)) {
          t = in;
          if (is_trivial(k) && k != "normdoctor::tap") break;  // aten casts: the first input
        }
      if (!t) return std::nullopt;
      v = t;
      continue;
    }
    // A bias, a temperature, a soft-cap (cap * tanh(logits / cap)): the
    // same axes as the tensor they scale.
    if (k == "aten::mul" || k == "aten::div" || k == "aten::add" || k == "aten::sub" || k == "aten::true_divide") {
      if (n->inputs().size() < 2) return std::nullopt;
      Value* x = n->input(0);
      Value* y = n->input(1);
      if (!is_tensor(y) || parameter_derived(y)) v = x;
      else if (is_tensor(x) && parameter_derived(x) && (k == "aten::mul" || k == "aten::add")) v = y;
      else return std::nullopt;
      continue;
    }
    if (k == "aten::tanh" || k == "aten::log_softmax" || k == "aten::softmax") {
      // Only a softmax over the last axis keeps "classes last" evidence.
      if (k != "aten::tanh") {
        const auto d = const_number(n->input(1));
        const auto* tt = n->input(0)->type()->castRaw<c10::TensorType>();
        const auto rank = tt ? tt->dim() : c10::nullopt;
        if (!d || !(*d == -1 || (rank && *d == static_cast<double>(*rank) - 1))) return std::nullopt;
      }
      v = n->input(0);
      continue;
    }
    if (k == "aten::linear" || k == "aten::addmm") return -1;
    if (k == "aten::matmul" || k == "aten::mm" || k == "aten::bmm" || k == "aten::einsum") {
      const OutputProduct p = classify_contraction(n);
      return p.kind == "linear" ? std::optional<int64_t>(-1) : std::nullopt;
    }
    if (k == "aten::_convolution" || k == "aten::_convolution_mode" || k == "aten::conv1d" || k == "aten::conv2d" || k == "aten::conv3d" ||
        k == "aten::conv_transpose1d" || k == "aten::conv_transpose2d" || k == "aten::conv_transpose3d")
      return 1;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace structure
}  // namespace nd
