// Forward arguments: batch files (--input), synthesized tensors
// (--input-shape), inferred ones (neither flag: infer_inputs.cpp), and their
// metrics.
#include <algorithm>
#include <cctype>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include <torch/csrc/jit/passes/inliner.h>

#include "core/error.h"
#include "formats/input_spec.h"
#include "instrument/instrument.h"
#include "instrument/recognize.h"
#include "instrument/stats.h"
#include "metrics/metrics.h"
#include "model/batch_file.h"
#include "model/synth_inputs.h"
#include "probes/inputs/inputs.h"
#include "probes/session.h"

namespace nd {
namespace {

std::string arg_list(const LoadedModel& m) {
  std::ostringstream ss;
  ss << "forward(";
  for (size_t i = 0; i < m.args.size(); ++i) {
    if (i) ss << ", ";
    ss << m.args[i].name << ": " << m.args[i].type << (m.args[i].has_default ? " = default" : "");
  }
  ss << ")";
  return ss.str();
}

std::string describe(const at::Tensor& t) {
  std::ostringstream ss;
  ss << t.sizes() << " " << c10::toString(t.scalar_type());
  return ss.str();
}

/// forward's default for argument i (self excluded), when it has one.
std::optional<c10::IValue> default_of(const LoadedModel& m, size_t i) {
  const auto& sa = m.module.get_method("forward").function().getSchema().arguments();
  if (i + 1 >= sa.size() || !sa[i + 1].default_value()) return std::nullopt;
  return *sa[i + 1].default_value();
}

std::string ivalue_text(const c10::IValue& v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

/// The message for a required argument nobody gave: its name and the flags that give it.
std::string missing_required(const LoadedModel& m, size_t i) {
  return "argument '" + m.args[i].name + "' of the model's " + arg_list(m) +
         " is required (no default) and has no value: add it to the batch file (a dict key '" + m.args[i].name +
         "', or element " + std::to_string(i) + " of a tuple/list), or give it with --input-shape " + m.args[i].name +
         "=DIMS[:DTYPE][:LOW..HIGH]";
}

// Maps one batch file onto forward's arguments. Dict batches match names;
// an optional argument missing before a given one takes forward's default
// (source "default: VALUE"); trailing ones are left to the graph's defaults.
// `by_spec`: names an --input-shape NAME= spec gives (a placeholder here).
std::vector<ArgValue> bind_batch(const LoadedModel& m, const BatchFile& b, const std::set<std::string>& by_spec) {
  std::vector<ArgValue> out;
  const std::string src = "file:" + b.path;
  std::vector<std::optional<c10::IValue>> slot(m.args.size());
  std::vector<std::string> source(m.args.size(), src);
  if (!b.keyword.empty()) {
    for (const auto& [k, t] : b.keyword) {
      size_t i = 0;
      while (i < m.args.size() && m.args[i].name != k) ++i;
      if (i == m.args.size())
        throw load_error(error_kind::kInputMismatch,
                         b.path + ": key '" + k + "' is not an argument of the model's " + arg_list(m));
      slot[i] = t;
    }
  } else {
    if (b.positional.size() > m.args.size()) {
      std::ostringstream ss;
      size_t required = 0;
      for (const auto& a : m.args) required += a.has_default ? 0 : 1;
      ss << b.path << ": holds " << b.positional.size() << " tensor" << (b.positional.size() == 1 ? "" : "s") << " (";
      for (size_t i = 0; i < b.positional.size(); ++i) ss << (i ? ", " : "") << describe(b.positional[i]);
      ss << ") but the model's " << arg_list(m) << " takes "
         << (required == m.args.size() ? std::to_string(required) : std::to_string(required) + " to " + std::to_string(m.args.size()));
      throw load_error(error_kind::kInputMismatch, ss.str());
    }
    for (size_t i = 0; i < b.positional.size(); ++i) slot[i] = b.positional[i];
  }
  for (size_t i = 0; i < slot.size(); ++i)
    if (!slot[i] && by_spec.count(m.args[i].name)) {
      slot[i] = c10::IValue();  // filled by load_arguments from the spec
      source[i] = "spec";
    }
  size_t last = 0;
  for (size_t i = 0; i < slot.size(); ++i)
    if (slot[i]) last = i + 1;
  for (size_t i = 0; i < slot.size(); ++i) {
    if (slot[i] || m.args[i].has_default) continue;
    std::ostringstream ss;
    ss << b.path << ": ";
    if (b.keyword.empty()) {
      ss << "holds " << b.positional.size() << " tensor" << (b.positional.size() == 1 ? "" : "s") << " (";
      for (size_t k = 0; k < b.positional.size(); ++k) ss << (k ? ", " : "") << describe(b.positional[k]);
      size_t required = 0;
      for (const auto& a : m.args) required += a.has_default ? 0 : 1;
      ss << ") but the model's " << arg_list(m) << " takes "
         << (required == m.args.size() ? std::to_string(required) : std::to_string(required) + " to " + std::to_string(m.args.size()))
         << "; ";
    }
    ss << missing_required(m, i);
    throw usage_error(ss.str());
  }
  for (size_t i = 0; i < last; ++i) {
    if (slot[i]) {
      out.push_back({m.args[i].name, *slot[i], source[i]});
      continue;
    }
    const c10::IValue d = default_of(m, i).value_or(c10::IValue());
    out.push_back({m.args[i].name, d, "default: " + ivalue_text(d)});
  }
  return out;
}

// Binds --input-shape specs to forward's arguments (NAME= by name, the others
// in order over the arguments no spec names) and synthesizes them from one
// generator seeded with --seed, in forward's argument order.
std::vector<ArgValue> synthesize(const LoadedModel& m, const std::vector<std::string>& texts, uint64_t seed,
                                 std::vector<std::string>& assumptions) {
  std::vector<formats::InputShapeSpec> specs;
  for (const auto& t : texts) specs.push_back(formats::parse_input_shape_spec(t));
  std::vector<const formats::InputShapeSpec*> slot(m.args.size(), nullptr);
  for (const auto& sp : specs) {
    if (sp.name.empty()) continue;
    size_t i = 0;
    while (i < m.args.size() && m.args[i].name != sp.name) ++i;
    if (i == m.args.size())
      throw usage_error("--input-shape '" + sp.text + "': '" + sp.name + "' is not an argument of the model's " +
                        arg_list(m));
    if (slot[i])
      throw usage_error("--input-shape '" + sp.text + "': argument '" + sp.name + "' is already given by '" +
                        slot[i]->text + "'");
    slot[i] = &sp;
  }
  size_t next = 0;
  for (const auto& sp : specs) {
    if (!sp.name.empty()) continue;
    while (next < m.args.size() && slot[next]) ++next;
    if (next == m.args.size())
      throw usage_error("--input-shape '" + sp.text + "': more specs than the model's " + arg_list(m) + " takes");
    slot[next++] = &sp;
  }
  // Arguments up to the last one given must all be given (forward takes them
  // positionally); later ones keep their defaults.
  size_t last = 0;
  for (size_t i = 0; i < slot.size(); ++i)
    if (slot[i]) last = i + 1;
  for (size_t i = 0; i < slot.size(); ++i) {
    if (slot[i] || (i >= last && m.args[i].has_default)) continue;
    throw usage_error("--input-shape: no spec for argument '" + m.args[i].name + "' of the model's " + arg_list(m) +
                      "; add --input-shape " + m.args[i].name + "=DIMS[:DTYPE][:LOW..HIGH]");
  }
  std::vector<ArgValue> out;
  at::Generator gen = make_input_generator(seed);
  for (size_t i = 0; i < last; ++i) {
    const auto& sp = *slot[i];
    if (m.args[i].type != "Tensor" && m.args[i].type != "Optional[Tensor]")
      throw usage_error("--input-shape '" + sp.text + "': argument '" + m.args[i].name + "' is a " + m.args[i].type +
                        ", not a tensor");
    at::Tensor t = synthesize_input(sp, gen);
    std::string values;
    if (sp.constant()) {
      std::ostringstream v;
      v << "every element " << sp.low;
      values = v.str();
    } else if (sp.has_range) {
      std::ostringstream v;
      v << (formats::dtype_is_integral(sp.dtype) ? "uniform integers in [" : "uniform in [") << sp.low << ", " << sp.high << ")";
      values = v.str();
    } else {
      values = formats::dtype_is_integral(sp.dtype) ? "uniform 0/1" : "standard normal values";
    }
    assumptions.push_back("input '" + m.args[i].name + "' synthesized from --input-shape " + sp.text + ": " + describe(t) +
                          ", " + values + " (seed " + std::to_string(seed) + ")");
    out.push_back({m.args[i].name, t, "synthetic:" + sp.text});
  }
  return out;
}

}  // namespace

namespace {
/// Per forward argument: what reads it as time-major, its axes in their
/// order (through linears, norms, activations, elementwise ops; not through
/// a transpose, permute or reshape), or "": a recurrent op with
/// batch_first=False ("aten::gru with batch_first=False"), or a scripted
/// module whose batch_first (a class constant or attribute) is False
/// ("module 'enc.layers.0.self_attn' with batch_first=False":
/// nn.MultiheadAttention, inside nn.TransformerEncoderLayer and
/// nn.Transformer). nn.GRU / nn.LSTM and nn.MultiheadAttention default to
/// batch_first=False: their input is [T, B, F].
std::vector<std::string> find_time_major_readers(const Session& s) {
  std::vector<std::string> out(s.args.size());
  try {
    auto g = s.model.module.get_method("forward").graph()->copy();
    torch::jit::Inline(*g);
    ScopeResolver scopes(s.model);
    static const std::set<std::string> rnn = {"aten::gru", "aten::lstm", "aten::rnn_tanh", "aten::rnn_relu"};
    static const std::set<std::string> reorders = {
        "aten::transpose", "aten::permute", "aten::t", "aten::view", "aten::reshape", "aten::flatten",
        "aten::unflatten", "aten::unsqueeze", "aten::squeeze", "aten::movedim", "aten::swapaxes", "aten::matmul",
        "aten::bmm", "aten::einsum", "aten::cat", "aten::stack", "aten::select", "aten::index_select",
        "aten::expand", "aten::repeat", "aten::mean", "aten::sum", "prim::ListConstruct", "prim::TupleConstruct"};
    // Nodes in graph order (blocks included), for finding a module's first input.
    std::vector<torch::jit::Node*> order;
    std::function<void(torch::jit::Block*)> collect = [&](torch::jit::Block* b) {
      for (torch::jit::Node* n : b->nodes()) {
        order.push_back(n);
        for (torch::jit::Block* sb : n->blocks()) collect(sb);
      }
    };
    collect(g->block());
    auto in_scope = [&](const torch::jit::Node* n, const std::string& path) {
      const auto& c = scopes.chain(n);
      return std::find(c.begin(), c.end(), path) != c.end();
    };
    // The data a module's code reads from outside it (its forward's first
    // tensor argument: `query` of nn.MultiheadAttention, `src` of
    // nn.TransformerEncoder[Layer]), or nullptr. Of the tensors read from
    // outside, the one fewest ops away from an op that also reads one of the
    // module's parameters (the query's in_proj linear): not simply the first
    // read, which is the key_padding_mask (`torch.is_floating_point(
    // key_padding_mask)` opens nn.MultiheadAttention.forward), whose [B, T]
    // would be read as time-major (eval38 C04: fairseq's encoder transposes
    // the embedded tokens, not the mask, to [T, B, C]).
    std::unordered_map<const torch::jit::Value*, bool> param_memo;
    auto reads_parameter = [&](const torch::jit::Node* n, const torch::jit::Value* data) {
      for (torch::jit::Value* in : const_cast<torch::jit::Node*>(n)->inputs())
        if (in != data && in->type()->kind() == c10::TypeKind::TensorType && in->node()->kind() != c10::prim::Constant &&
            recognize::param_only(in, param_memo))
          return true;
      return false;
    };
    auto hops_to_parameter = [&](const torch::jit::Value* start, const std::string& path) -> size_t {
      std::vector<std::pair<const torch::jit::Value*, size_t>> work = {{start, 0}};
      std::set<const torch::jit::Value*> seen = {start};
      for (size_t w = 0; w < work.size() && w < 4096; ++w) {
        const auto [v, hops] = work[w];
        if (hops > 64) break;
        for (const auto& u : v->uses()) {
          if (!in_scope(u.user, path)) continue;
          if (reads_parameter(u.user, v)) return hops + 1;
          for (const torch::jit::Value* o : u.user->outputs())
            if (seen.insert(o).second) work.push_back({o, hops + 1});
        }
      }
      return std::numeric_limits<size_t>::max();
    };
    auto first_input = [&](const std::string& path) -> const torch::jit::Value* {
      std::vector<const torch::jit::Value*> read;
      for (const torch::jit::Node* n : order) {
        if (!in_scope(n, path)) continue;
        for (const torch::jit::Value* in : n->inputs()) {
          if (in->type()->kind() != c10::TypeKind::TensorType) continue;
          const torch::jit::Node* d = in->node();
          if ((d->kind() == c10::prim::Param || !in_scope(d, path)) &&
              std::find(read.begin(), read.end(), in) == read.end())
            read.push_back(in);
        }
      }
      if (read.empty()) return nullptr;
      const torch::jit::Value* best = read.front();
      size_t best_hops = std::numeric_limits<size_t>::max();
      for (const torch::jit::Value* v : read) {
        const size_t h = hops_to_parameter(v, path);
        if (h < best_hops) {
          best_hops = h;
          best = v;
        }
      }
      return best;
    };
    // Back from a time-major reader's input to an argument, axes kept in order.
    auto mark = [&](const torch::jit::Value* start, const std::string& reader) {
      std::vector<const torch::jit::Value*> work = {start};
        std::set<const torch::jit::Value*> seen;
        for (size_t w = 0; w < work.size() && w < 256; ++w) {
          const torch::jit::Value* v = work[w];
          if (!seen.insert(v).second) continue;
          const torch::jit::Node* d = v->node();
          if (d->kind() == c10::prim::Param) {
            const size_t i = v->offset();
            if (i >= 1 && i - 1 < out.size() && out[i - 1].empty()) out[i - 1] = reader;
            continue;
          }
          if (d->kind() == c10::prim::If) {
            // nn.GRU's `if not is_batched: input.unsqueeze(...)`: the branches' values.
            for (const torch::jit::Block* blk : d->blocks())
              if (v->offset() < blk->outputs().size()) work.push_back(blk->outputs()[v->offset()]);
            continue;
          }
          if (reorders.count(d->kind().toQualString()) || !d->blocks().empty()) continue;
          for (const torch::jit::Value* in : d->inputs())
            if (in->type()->kind() == c10::TypeKind::TensorType) work.push_back(in);
        }
    };
    for (torch::jit::Node* n : order) {
      const std::string k = n->kind().toQualString();
      if (rnn.count(k) && n->inputs().size() >= 9) {
        torch::jit::Value* bf = n->inputs().back();
        std::optional<bool> first;
        if (auto c = torch::jit::toIValue(bf); c && c->isBool()) first = c->toBool();
        if (auto a = scopes.attribute(bf); !first && a && a->isBool()) first = a->toBool();
        if (first && !*first) mark(n->input(0), k + " with batch_first=False");
      }
    }
    // nn.MultiheadAttention (and the nn.TransformerEncoderLayer /
    // nn.Transformer built on it) defaults to batch_first=False, a constant of
    // its scripted class (__constants__): its query is [T, B, E].
    std::set<std::string> batch_first_false;
    for (const auto& mi : s.model.modules) {
      const auto type = mi.module.type();
      std::optional<c10::IValue> bf;
      if (type->hasConstant("batch_first")) bf = type->getConstant("batch_first");
      else if (mi.module.hasattr("batch_first")) bf = mi.module.attr("batch_first");
      if (!mi.path.empty() && bf && bf->isBool() && !bf->toBool()) batch_first_false.insert(mi.path);
    }
    for (const std::string& path : batch_first_false) {
      // The outermost such module names the reader; its inner ones read the same tensor.
      bool inner = false;
      for (const std::string& o : batch_first_false)
        inner |= o != path && within_module(path, o);
      if (inner) continue;
      if (const torch::jit::Value* v = first_input(path)) mark(v, "module '" + path + "' with batch_first=False");
    }
  } catch (const std::exception&) {
    // No TorchScript forward (an exported program): no graph evidence.
  }
  return out;
}
}  // namespace

namespace {
/// The (indices, offsets, include_last_offset) arguments of the first
/// aten::embedding_bag whose indices and offsets are forward arguments
/// (through casts), each 1-D integral with offsets a valid start list of the
/// indices; nullopt otherwise (a .pt2, no such op, offsets built in forward).
std::optional<std::tuple<int64_t, int64_t, bool>> find_bag_arguments(const Session& s) {
  try {
    auto g = s.model.module.get_method("forward").graph()->copy();
    torch::jit::Inline(*g);
    static const std::set<std::string> casts = {"aten::to", "aten::contiguous", "aten::long", "aten::int",
                                                "prim::unchecked_cast", "aten::_unwrap_optional", "aten::detach"};
    // The forward argument `v` is, through casts and the branches of an
    // if (F.embedding_bag's `if input.dim() == 2: ... elif input.dim() == 1:`
    // keeps 1-D input and offsets unchanged in one branch); -1 when none.
    std::function<int64_t(const torch::jit::Value*, int)> argument_of = [&](const torch::jit::Value* v,
                                                                            int depth) -> int64_t {
      if (depth > 12) return -1;
      const torch::jit::Node* d = v->node();
      if (d->kind() == c10::prim::Param) return static_cast<int64_t>(v->offset()) - 1;  // input 0 is self
      if (d->kind() == c10::prim::If) {
        for (const torch::jit::Block* b : d->blocks())
          if (v->offset() < b->outputs().size())
            if (const int64_t a = argument_of(b->outputs()[v->offset()], depth + 1); a >= 0) return a;
        return -1;
      }
      if (!casts.count(d->kind().toQualString()) || d->inputs().empty()) return -1;
      return argument_of(d->input(0), depth + 1);
    };
    std::vector<const torch::jit::Node*> bags;
    std::function<void(torch::jit::Block*)> walk = [&](torch::jit::Block* b) {
      for (torch::jit::Node* n : b->nodes()) {
        const std::string k = n->kind().toQualString();
        if ((k == "aten::embedding_bag" || k == "aten::_embedding_bag") && n->inputs().size() >= 3) bags.push_back(n);
        for (torch::jit::Block* sb : n->blocks()) walk(sb);
      }
    };
    walk(g->block());
    for (const torch::jit::Node* n : bags) {
      const int64_t i = argument_of(n->input(1), 0), j = argument_of(n->input(2), 0);
      if (i < 0 || j < 0 || i == j || static_cast<size_t>(std::max(i, j)) >= s.args.size()) continue;
      const c10::IValue &a = s.args[static_cast<size_t>(i)].value, &b = s.args[static_cast<size_t>(j)].value;
      if (!a.isTensor() || !b.isTensor()) continue;
      const at::Tensor ids = a.toTensor(), off = b.toTensor();
      if (ids.dim() != 1 || off.dim() != 1 || off.numel() == 0 || ids.is_floating_point() || off.is_floating_point())
        continue;
      const at::Tensor o = off.to(at::kLong).cpu();
      if (o[0].item<int64_t>() != 0 || o[-1].item<int64_t>() > ids.numel()) continue;
      if (o.numel() > 1 && (o.slice(0, 1) - o.slice(0, 0, -1)).lt(0).any().item<bool>()) continue;
      bool last = false;
      if (n->inputs().size() >= 8)
        if (auto c = torch::jit::toIValue(n->input(7)); c && c->isBool()) last = c->toBool();
      if (last && o.numel() < 2) continue;
      return std::make_tuple(i, j, last);
    }
  } catch (const std::exception&) {
    // No TorchScript forward (an exported program): no graph evidence.
  }
  return std::nullopt;
}

/// The arguments of forward that index rows of a tensor: the index of
/// aten::index (first of its list), index_select, index_add, index_copy,
/// index_fill, index_put, scatter, scatter_add, scatter_reduce and gather,
/// traced back through selects, slices, concatenation, unbinding, casts and
/// views (PyG's `row, col = edge_index`, `x[row]`, `scatter_add(0, col, ...)`,
/// a self-loop cat). Empty without a TorchScript forward.
std::set<int64_t> row_index_arguments(const Session& s) {
  std::set<int64_t> out;
  try {
    auto g = s.model.module.get_method("forward").graph()->copy();
    torch::jit::Inline(*g);
    static const std::set<std::string> back = {
        "aten::select", "aten::slice", "aten::cat", "aten::to", "aten::long", "aten::int", "aten::contiguous",
        "aten::view", "aten::reshape", "aten::expand", "aten::expand_as", "aten::unsqueeze", "aten::squeeze",
        "aten::repeat", "aten::flatten", "aten::t", "aten::transpose", "aten::clone", "aten::detach", "aten::unbind",
        "aten::__getitem__", "prim::ListUnpack", "prim::ListConstruct", "prim::TupleUnpack", "prim::unchecked_cast",
        "aten::_unwrap_optional", "aten::chunk", "aten::split", "aten::view_as", "aten::type_as", "aten::flip"};
    static const std::set<std::string> at_two = {
        "aten::index_select", "aten::index_add", "aten::index_add_", "aten::index_copy", "aten::index_copy_",
        "aten::index_fill", "aten::index_fill_", "aten::scatter", "aten::scatter_", "aten::scatter_add",
        "aten::scatter_add_", "aten::scatter_reduce", "aten::scatter_reduce_", "aten::gather", "aten::index_reduce",
        "aten::index_reduce_"};
    std::vector<const torch::jit::Value*> work;
    std::function<void(torch::jit::Block*)> walk = [&](torch::jit::Block* b) {
      for (torch::jit::Node* n : b->nodes()) {
        const std::string k = n->kind().toQualString();
        if (at_two.count(k) && n->inputs().size() > 2) work.push_back(n->input(2));
        if ((k == "aten::index" || k == "aten::index_put" || k == "aten::index_put_") && n->inputs().size() > 1) {
          const torch::jit::Node* l = n->input(1)->node();
          if (l->kind() == c10::prim::ListConstruct && !l->inputs().empty()) work.push_back(l->input(0));
        }
        for (torch::jit::Block* sb : n->blocks()) walk(sb);
      }
    };
    walk(g->block());
    std::set<const torch::jit::Value*> seen;
    for (size_t w = 0; w < work.size() && w < 4096; ++w) {
      const torch::jit::Value* v = work[w];
      if (!seen.insert(v).second) continue;
      const torch::jit::Node* d = v->node();
      if (d->kind() == c10::prim::Param) {
        if (v->offset() >= 1) out.insert(static_cast<int64_t>(v->offset()) - 1);
        continue;
      }
      if (d->kind() == c10::prim::If) {
        for (const torch::jit::Block* b : d->blocks())
          if (v->offset() < b->outputs().size()) work.push_back(b->outputs()[v->offset()]);
        continue;
      }
      if (!back.count(d->kind().toQualString())) continue;
      for (const torch::jit::Value* in : d->inputs())
        if (in->type()->kind() == c10::TypeKind::TensorType || in->type()->kind() == c10::TypeKind::ListType ||
            in->type()->kind() == c10::TypeKind::OptionalType)
          work.push_back(in);
    }
  } catch (const std::exception&) {
    // No TorchScript forward (an exported program): no graph evidence.
  }
  return out;
}

/// A graph batch in PyTorch Geometric's layout: an integer edge list
/// [2, E] (or [E, 2]) that forward uses as row indices, whose entries are
/// node numbers below N, the size of axis 0 of a float argument (the node
/// features [N, F]); optionally the graph id of each node (PyG's `batch`,
/// integer [N], non-decreasing from 0), also used as row indices or named
/// batch. Fills the graph_* fields of L; false when there is none.
bool find_graph_arguments(const Session& s, BatchLayout& L) {
  if (!s.row_index_args) s.row_index_args = row_index_arguments(s);
  const std::set<int64_t>& rows = *s.row_index_args;
  if (rows.empty()) return false;
  auto tensor = [&](int64_t i) -> const at::Tensor* {
    return i >= 0 && static_cast<size_t>(i) < s.args.size() && s.args[static_cast<size_t>(i)].value.isTensor()
               ? &s.args[static_cast<size_t>(i)].value.toTensor()
               : nullptr;
  };
  auto integral = [](const at::Tensor& t) {
    return !t.is_floating_point() && !t.is_complex() && t.scalar_type() != at::kBool;
  };
  for (int64_t e : rows) {
    const at::Tensor* et = tensor(e);
    if (!et || et->dim() != 2 || !integral(*et) || et->numel() == 0) continue;
    const int64_t pair = et->size(0) == 2 ? 0 : et->size(1) == 2 ? 1 : -1;
    if (pair < 0) continue;
    const at::Tensor ev = et->to(at::kLong).cpu();
    const int64_t lo = ev.min().item<int64_t>(), hi = ev.max().item<int64_t>();
    if (lo < 0) continue;
    // The node features: the first float argument with more rows than the
    // largest node number (and more than the two ends of an edge).
    int64_t nodes = -1;
    for (size_t i = 0; i < s.args.size() && nodes < 0; ++i) {
      const at::Tensor* t = tensor(static_cast<int64_t>(i));
      if (t && t->is_floating_point() && t->dim() >= 1 && t->size(0) > hi && t->size(0) > 2) nodes = static_cast<int64_t>(i);
    }
    if (nodes < 0) continue;
    const int64_t n = tensor(nodes)->size(0), edges = et->size(1 - pair);
    L.graph_edges = e;
    L.graph_edge_axis = 1 - pair;
    L.graph_nodes = nodes;
    L.graph_num_nodes = n;
    L.node_graph = at::zeros({n}, at::kLong);
    for (size_t i = 0; i < s.args.size(); ++i) {
      const auto k = static_cast<int64_t>(i);
      const at::Tensor* t = tensor(k);
      if (k == e || k == nodes || !t || t->dim() == 0) continue;
      const std::string name = s.args[i].name;
      if (L.graph_ids < 0 && t->dim() == 1 && integral(*t) && t->size(0) == n &&
          (rows.count(k) || name == "batch")) {
        const at::Tensor b = t->to(at::kLong).cpu();
        const at::Tensor step = b.slice(0, 1) - b.slice(0, 0, -1);  // 0 within a graph, 1 at the next
        if (b[0].item<int64_t>() == 0 && step.ge(0).logical_and(step.le(1)).all().item<bool>()) {
          L.graph_ids = k;
          L.node_graph = b;
          continue;
        }
      }
      const bool edge_named = name.find("edge") != std::string::npos;
      if (t->size(0) == edges && (edges != n || edge_named)) L.graph_edge_aligned.push_back(k);
      else if (t->size(0) == n) L.graph_node_aligned.push_back(k);
    }
    return true;
  }
  return false;
}
}  // namespace

BatchLayout batch_layout(const Session& s) {
  BatchLayout L;
  L.axis.assign(s.args.size(), -1);
  auto tensor = [&](size_t i) -> const at::Tensor* {
    return s.args[i].value.isTensor() ? &s.args[i].value.toTensor() : nullptr;
  };
  auto lower = [](std::string n) {
    for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return n;
  };
  const std::optional<int64_t> bd = s.opt.batch_dim;
  if (bd) {
    for (size_t i = 0; i < s.args.size() && L.batch == 0; ++i)
      if (const at::Tensor* t = tensor(i); t && t->dim() > *bd) {
        L.batch = t->size(*bd);
        L.from = "--batch-dim " + std::to_string(*bd) + " of '" + s.args[i].name + "'";
      }
  }
  // A rank-3 argument a recurrent op with batch_first=False reads in axis
  // order is [T, B, F]: its axis 1 holds the examples.
  if (!s.time_major_readers) s.time_major_readers = find_time_major_readers(s);
  std::vector<bool> time_major(s.args.size(), false);
  if (!bd)
    for (size_t i = 0; i < s.args.size() && i < s.time_major_readers->size(); ++i) {
      const at::Tensor* t = tensor(i);
      // [T, B, F] features, or [T, B] token ids that an embedding makes [T, B, E]
      // (PyTorch's word_language_model: nn.TransformerEncoder / nn.LSTM read them time-major).
      const bool ids = t && t->dim() == 2 && !t->is_floating_point() && t->scalar_type() != at::kBool;
      if (!t || (t->dim() != 3 && !ids) || (*s.time_major_readers)[i].empty()) continue;
      time_major[i] = true;
    }
  // EmbeddingBag's flat ids + offsets: one example per bag, however many ids.
  if (!bd)
    if (const auto bag = find_bag_arguments(s)) {
      const auto [i, j, last] = *bag;
      L.bag_indices = i;
      L.bag_offsets = j;
      L.bag_last_offset = last;
      L.batch = tensor(static_cast<size_t>(j))->size(0) - (last ? 1 : 0);
      L.from = "the offsets '" + s.args[static_cast<size_t>(j)].name + "' of the flat ids '" +
               s.args[static_cast<size_t>(i)].name + "' that aten::embedding_bag reads (one bag per example)";
      const int64_t n_ids = tensor(static_cast<size_t>(i))->size(0);
      for (size_t k = 0; k < s.args.size(); ++k) {
        const at::Tensor* t = tensor(k);
        if (static_cast<int64_t>(k) == i || static_cast<int64_t>(k) == j || !t || t->dim() != 1) continue;
        if (t->size(0) == n_ids && n_ids != L.batch) L.bag_aligned.push_back(static_cast<int64_t>(k));
      }
    }
  // A graph batch: the graphs are the examples.
  if (!bd && L.batch == 0 && find_graph_arguments(s, L)) {
    const std::string e = s.args[static_cast<size_t>(L.graph_edges)].name,
                      x = s.args[static_cast<size_t>(L.graph_nodes)].name;
    if (L.graph_ids >= 0) {
      L.batch = L.node_graph.numel() ? L.node_graph.max().item<int64_t>() + 1 : 0;
      L.from = "the graph ids '" + s.args[static_cast<size_t>(L.graph_ids)].name + "' of the " +
               std::to_string(L.graph_num_nodes) + " nodes of '" + x + "' that the edge list '" + e +
               "' connects (one graph per example)";
    } else {
      L.batch = 1;
      L.from = "one graph: the edge list '" + e + "' connects the " + std::to_string(L.graph_num_nodes) +
               " nodes of '" + x + "', which are not independent examples (no graph ids give several graphs)";
    }
  }
  for (int rule = 0; rule < 3 && L.batch == 0; ++rule) {
    if (rule == 2)  // before axis 0 of the first tensor: the recurrent op's evidence
      for (size_t i = 0; i < s.args.size() && L.batch == 0; ++i)
        if (time_major[i]) {
          L.batch = tensor(i)->size(1);
          L.from = "axis 1 of '" + s.args[i].name + "': " + (*s.time_major_readers)[i] + " reads it time-major ([T, B, ...])";
        }
    for (size_t i = 0; i < s.args.size() && L.batch == 0; ++i) {
      const at::Tensor* t = tensor(i);
      if (!t || t->dim() == 0) continue;
      const std::string n = lower(s.args[i].name);
      const bool integral = !t->is_floating_point() && !t->is_complex();
      const bool lengths = t->dim() == 1 && integral && t->scalar_type() != at::kBool &&
                           (n.find("len") != std::string::npos);
      const bool mask = t->dim() == 2 && (t->scalar_type() == at::kBool || n.find("mask") != std::string::npos);
      if ((rule == 0 && lengths) || (rule == 1 && mask) || rule == 2) {
        L.batch = t->size(0);
        L.from = rule == 0 ? "the lengths vector '" + s.args[i].name + "'"
                 : rule == 1 ? "axis 0 of the padding mask '" + s.args[i].name + "'"
                             : "axis 0 of '" + s.args[i].name + "'";
      }
    }
  }
  if (L.batch == 0) return L;
  for (size_t i = 0; i < s.args.size(); ++i) {
    const at::Tensor* t = tensor(i);
    const auto k = static_cast<int64_t>(i);
    if (!t || t->dim() == 0 || L.bag_ids(k) || k == L.bag_offsets || L.graph_arg(k)) continue;
    if (bd && t->dim() > *bd && t->size(*bd) == L.batch) {
      L.axis[i] = *bd;
      continue;
    }
    if (time_major[i] && t->size(1) == L.batch) {
      L.axis[i] = 1;
      continue;
    }
    for (int64_t d = 0; d < t->dim(); ++d)
      if (t->size(d) == L.batch) {
        L.axis[i] = d;
        break;
      }
  }
  return L;
}

std::vector<c10::IValue> select_examples(const Session& s, const BatchLayout& L, const at::Tensor& index) {
  std::vector<c10::IValue> out;
  // The bags of an EmbeddingBag layout: [start, end) of example k's ids.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  at::Tensor new_offsets;
  if (L.bag_indices >= 0) {
    const at::Tensor off = s.args[static_cast<size_t>(L.bag_offsets)].value.toTensor();
    const at::Tensor o = off.to(at::kLong).cpu();
    const int64_t n_ids = s.args[static_cast<size_t>(L.bag_indices)].value.toTensor().size(0);
    const at::Tensor idx = index.to(at::kLong).cpu();
    std::vector<int64_t> starts;
    int64_t at_id = 0;
    for (int64_t r = 0; r < idx.numel(); ++r) {
      const int64_t k = idx[r].item<int64_t>();
      const int64_t b = o[k].item<int64_t>();
      const int64_t e = k + 1 < o.numel() ? o[k + 1].item<int64_t>() : n_ids;
      ranges.push_back({b, e});
      starts.push_back(at_id);
      at_id += e - b;
    }
    if (L.bag_last_offset) starts.push_back(at_id);
    new_offsets = at::tensor(starts, at::TensorOptions().dtype(at::kLong)).to(off.scalar_type()).to(off.device());
  }
  auto cut_bags = [&](const at::Tensor& t) {
    std::vector<at::Tensor> parts;
    for (const auto& [b, e] : ranges) parts.push_back(t.slice(0, b, e));
    return parts.empty() ? t.slice(0, 0, 0) : at::cat(parts);
  };
  // A graph layout: the chosen graphs' nodes, renumbered in the order of
  // `index` (a graph chosen twice is two graphs), and their edges.
  at::Tensor node_rows, new_ids, edge_list, edge_rows;
  if (L.graph_edges >= 0) {
    const at::Tensor idx = index.to(at::kLong).cpu();
    const at::Tensor et = s.args[static_cast<size_t>(L.graph_edges)].value.toTensor();
    const at::Tensor ev = (L.graph_edge_axis == 1 ? et : et.t()).to(at::kLong).cpu();  // [2, E]
    // An edge belongs to a graph when both its ends do.
    const at::Tensor src_graph = L.node_graph.index_select(0, ev[0]);
    const at::Tensor edge_graph =
        src_graph.where(src_graph.eq(L.node_graph.index_select(0, ev[1])), at::full({1}, -1, at::kLong));
    std::vector<at::Tensor> nodes, ids, edges, erows;
    int64_t next = 0;
    for (int64_t r = 0; r < idx.numel(); ++r) {
      const int64_t k = idx[r].item<int64_t>();
      const at::Tensor nk = L.node_graph.eq(k).nonzero().squeeze(1);
      at::Tensor local = at::full({L.graph_num_nodes}, -1, at::kLong);
      local.index_put_({nk}, at::arange(next, next + nk.numel(), at::kLong));
      const at::Tensor ek = edge_graph.eq(k).nonzero().squeeze(1);
      nodes.push_back(nk);
      ids.push_back(at::full({nk.numel()}, r, at::kLong));
      edges.push_back(local.index_select(0, ev.index_select(1, ek).flatten()).view({2, -1}));  // both ends renumbered
      erows.push_back(ek);
      next += nk.numel();
    }
    node_rows = at::cat(nodes);
    new_ids = at::cat(ids);
    edge_list = at::cat(edges, 1);
    if (L.graph_edge_axis == 0) edge_list = edge_list.t().contiguous();
    edge_list = edge_list.to(et.scalar_type()).to(et.device());
    edge_rows = at::cat(erows);
  }
  auto graph_rows = [](const at::Tensor& t, const at::Tensor& rows) { return t.index_select(0, rows.to(t.device())); };
  for (size_t i = 0; i < s.args.size(); ++i) {
    const c10::IValue& a = s.args[i].value;
    const auto k = static_cast<int64_t>(i);
    if (a.isTensor() && L.graph_arg(k)) {
      const at::Tensor& t = a.toTensor();
      if (k == L.graph_edges) out.emplace_back(edge_list);
      else if (k == L.graph_ids) out.emplace_back(new_ids.to(t.scalar_type()).to(t.device()));
      else if (L.graph_per_edge(k))
        out.emplace_back(graph_rows(t, edge_rows));
      else
        out.emplace_back(graph_rows(t, node_rows));
      continue;
    }
    if (a.isTensor() && L.bag_ids(k)) {
      out.emplace_back(cut_bags(a.toTensor()));
      continue;
    }
    if (k == L.bag_offsets) {
      out.emplace_back(new_offsets);
      continue;
    }
    if (i < L.axis.size() && L.axis[i] >= 0 && a.isTensor())
      out.emplace_back(a.toTensor().index_select(L.axis[i], index.to(a.toTensor().device())));
    else
      out.push_back(a);
  }
  return out;
}

at::Tensor BatchLayout::graph_node_rows(const at::Tensor& index, const at::Tensor& positions) const {
  if (graph_edges < 0) return at::Tensor();
  const at::Tensor pos = positions.defined() ? positions : node_graph;
  const at::Tensor idx = index.to(at::kLong).cpu();
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < idx.numel(); ++r) parts.push_back(pos.eq(idx[r].item<int64_t>()).nonzero().squeeze(1));
  return parts.empty() ? at::zeros({0}, at::kLong) : at::cat(parts);
}

at::Tensor BatchLayout::graph_positions(const at::Tensor& index) const {
  if (graph_edges < 0) return at::Tensor();
  const at::Tensor idx = index.to(at::kLong).cpu();
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < idx.numel(); ++r)
    parts.push_back(at::full({node_graph.eq(idx[r].item<int64_t>()).sum().item<int64_t>()}, r, at::kLong));
  return parts.empty() ? at::zeros({0}, at::kLong) : at::cat(parts);
}

int64_t output_batch_axis(const BatchLayout& L, const at::Tensor& t) {
  if (L.batch <= 0 || t.dim() == 0) return -1;
  int64_t main = -1;  // a time-major input's batch axis (1) wins over axis 0
  for (int64_t a : L.axis) main = std::max(main, a);
  if (main > 0 && main < t.dim() && t.size(main) == L.batch) return main;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) == L.batch) return d;
  return -1;
}

void load_arguments(Session& s) {
  const auto& opt = s.opt;
  if (!opt.input_files.empty()) {
    // --input-shape NAME=... next to --input: gives the arguments the batch
    // files lack (a mask, lengths).
    std::vector<formats::InputShapeSpec> specs;
    std::set<std::string> by_spec;
    for (const auto& t : opt.input_shapes) {
      specs.push_back(formats::parse_input_shape_spec(t));
      if (specs.back().name.empty())
        throw usage_error("--input-shape '" + t + "' next to --input must name its argument (NAME=DIMS...): the batch "
                          "file gives the others");
      by_spec.insert(specs.back().name);
    }
    std::vector<std::vector<ArgValue>> batches;
    for (const auto& f : opt.input_files) batches.push_back(bind_batch(s.model, read_batch_file(f), by_spec));
    for (const auto& sp : specs) {
      bool used = false;
      for (const auto& a : batches.front()) used = used || (a.name == sp.name && a.source == "spec");
      if (!used)
        throw usage_error("--input-shape '" + sp.text + "': '" + sp.name +
                          "' is not an argument the batch file leaves out (the model's " + arg_list(s.model) + ")");
    }
    s.args = batches.front();
    // Several batches: concatenated along the batch axis (0) when they agree.
    for (size_t b = 1; b < batches.size(); ++b) {
      if (batches[b].size() != s.args.size())
        throw load_error(error_kind::kInputMismatch, opt.input_files[b] + ": holds " + std::to_string(batches[b].size()) +
                                                     " arguments, the first batch " + std::to_string(s.args.size()));
      for (size_t i = 0; i < s.args.size(); ++i) {
        if (!s.args[i].value.isTensor() || !batches[b][i].value.isTensor()) continue;  // defaults, specs
        const auto a = s.args[i].value.toTensor(), c = batches[b][i].value.toTensor();
        if (a.dim() == 0 || a.dim() != c.dim() || a.sizes().slice(1) != c.sizes().slice(1) || a.scalar_type() != c.scalar_type())
          throw load_error(error_kind::kInputMismatch,
                           opt.input_files[b] + ": argument '" + s.args[i].name + "' is " + describe(c) + ", the first batch's is " +
                               describe(a) + "; batches are joined along axis 0 and must agree elsewhere");
        s.args[i].value = at::cat({a, c}, 0);
        s.args[i].source += "+" + opt.input_files[b];
      }
    }
    if (batches.size() > 1)
      s.doc.assumptions.push_back(std::to_string(batches.size()) + " batch files joined along axis 0 into one batch");
    at::Generator gen = make_input_generator(opt.seed);
    for (auto& a : s.args) {
      if (a.source != "spec") continue;
      size_t i = 0;
      while (i < s.model.args.size() && s.model.args[i].name != a.name) ++i;
      const auto& sp = *std::find_if(specs.begin(), specs.end(), [&](const auto& x) { return x.name == a.name; });
      if (i < s.model.args.size() && s.model.args[i].type != "Tensor" && s.model.args[i].type != "Optional[Tensor]")
        throw usage_error("--input-shape '" + sp.text + "': argument '" + a.name + "' is a " + s.model.args[i].type +
                          ", not a tensor");
      a.value = synthesize_input(sp, gen);
      a.source = "synthetic:" + sp.text;
      s.doc.assumptions.push_back("input '" + a.name + "' synthesized from --input-shape " + sp.text + ": " +
                                  describe(a.value.toTensor()) + " (seed " + std::to_string(opt.seed) + ")");
    }
    for (const auto& a : s.args)
      if (a.source.rfind("default: ", 0) == 0)
        s.doc.assumptions.push_back("input '" + a.name + "' is not in the batch: forward's default (" + a.source.substr(9) +
                                    ") is used");
  } else if (!opt.input_shapes.empty()) {
    s.args = synthesize(s.model, opt.input_shapes, opt.seed, s.doc.assumptions);
  } else if (s.model.sample_inputs) {
    // A .pt2 archive's own sample inputs (the example arguments it was exported with).
    s.args = bind_batch(s.model, *s.model.sample_inputs, {});
    s.doc.assumptions.push_back("no --input: the batch is the sample inputs saved in the archive (" +
                                s.model.sample_inputs->path + "), the example arguments given to torch.export.export");
  } else {
    if (s.model.format == "pt2" && !s.model.sample_inputs_note.empty())
      s.doc.assumptions.push_back("the archive's sample inputs are not used: " + s.model.sample_inputs_note);
    infer_arguments(s);
  }
  if (opt.input_files.empty() && !s.args.empty() && !(opt.input_shapes.empty() && s.model.sample_inputs)) {
    s.doc.assumptions.push_back(
        "the inputs were made by normdoctor, not read from a batch: findings that depend on the data (input scale, "
        "statistics against data, saturation, overflow headroom) are marked as measured on synthetic inputs and "
        "lowered one severity; run again with --input batch.pt for a diagnosis of real data");
  }

  // An empty batch (0 examples along axis 0 in every tensor argument) gives
  // no statistics to measure. One empty auxiliary argument next to a real
  // batch (no boxes in this image, an empty memory) or next to a scalar the
  // model builds its batch from is the model's business.
  bool any_examples = false;
  for (const ArgValue& a : s.args)
    if (a.value.isTensor() && (a.value.toTensor().dim() == 0 || a.value.toTensor().size(0) > 0)) any_examples = true;
  for (const ArgValue& a : s.args) {
    if (!a.value.isTensor() || any_examples) continue;
    const at::Tensor t = a.value.toTensor();
    if (t.dim() == 0 || t.size(0) > 0) continue;
    const std::string where = a.source.rfind("file:", 0) == 0 ? a.source.substr(5) : a.source;
    throw load_error(error_kind::kInputMismatch,
                     where + ": argument '" + a.name + "' is " + describe(t) +
                         ", an empty batch (0 examples along axis 0); give at least one example, and two or more "
                         "for the batch statistics");
  }

  bool any_nonfinite = false, synthetic = false;
  for (size_t i = 0; i < s.args.size(); ++i) {
    const ArgValue& a = s.args[i];
    InputMetrics im;
    im.name = a.name;
    im.index = static_cast<int64_t>(i);
    im.info["source"] = a.source;
    if (a.value.isTensor()) {
      const at::Tensor t = a.value.toTensor();
      im.info["shape"] = t.sizes().vec();
      im.info["dtype"] = std::string(c10::toString(t.scalar_type()));
      const TensorStats st = compute_stats(t);
      const bool is_float = t.is_floating_point();
      im.metrics["input.is_float"] = is_float;
      im.metrics["input.numel"] = st.numel;
      im.metrics["input.min"] = st.finite() ? st.min : 0.0;
      im.metrics["input.max"] = st.finite() ? st.max : 0.0;
      im.metrics["input.absmax"] = st.absmax();
      im.metrics["input.mean"] = st.mean();
      im.metrics["input.std"] = st.std();
      im.metrics["input.nan_count"] = st.nan;
      im.metrics["input.inf_count"] = st.inf;
      im.metrics["input.nonfinite_count"] = st.nonfinite();
      if (is_float) im.metrics["input.scale"] = std::max(std::fabs(st.mean()), st.std());
      // Made by normdoctor (--input-shape or inferred), not the user's data.
      const bool made = a.source.rfind("synthetic", 0) == 0 || a.source.rfind("inferred", 0) == 0;
      im.metrics["input.synthetic"] = made;
      any_nonfinite = any_nonfinite || st.nonfinite() > 0;
      synthetic = synthetic || made;
    }
    s.doc.inputs.push_back(std::move(im));
  }
  s.doc.model_metrics["input.any_nonfinite"] = any_nonfinite;
  s.doc.model_metrics["run.synthetic_inputs"] = synthetic;
}

}  // namespace nd
