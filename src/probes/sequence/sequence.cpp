// Input layout, normalized axes, padding and sequence-length probes.
//
// Layout: each forward argument gets a role (tokens, features, mask,
// lengths, positions, segments, image) and, for sequences, a time axis;
// --seq-dim, --mask-input and --pad-value override. Axes: every
// normalization site's input shape, recorded by its input tap, is read with
// those roles; at a second sequence length the axes whose size changed are
// the time axes, which tells time from hidden when their sizes match.
// Padding: the batch with extra padding appended (mask/lengths unchanged for
// real positions), compared module by module at real positions with the
// batch as given, in train mode (batch statistics) and eval mode. Length:
// the same tokens truncated, compared at the shared positions in eval mode.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>
#include <set>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "probes/inputs/inputs.h"
#include "probes/sequence/sequence.h"
#include "probes/session.h"

namespace nd {
namespace {

/// A module's output counts as changed when its relative difference at real
/// positions exceeds this: float32 reductions over differently sized axes
/// differ by ~1e-7 relative; 1e-4 leaves three orders of margin.
constexpr double kChanged = 1e-4;

struct InputLayout {
  std::string role = "other";  // tokens | features | mask | lengths | positions | segments | image | other
  int64_t time_axis = -1;
  std::vector<std::string> axes;  // role of each axis
  std::string from;               // why, in words
  int64_t mask_squeeze = -1;      // mask: its singleton axis ([B, 1, T]: 1, [B, T, 1]: 2), -1 for [B, T]
  double pad = 0;                 // the value appended as padding along the time axis
  std::string pad_from;           // why that value, in words
  bool time_axis_by_default = false;  // float [B, T, F] taken for want of any sign (a lengths vector may correct it)
  /// The time axis of a second sequence, of another length than the
  /// layout's T (an encoder-decoder's decoder_input_ids [B, 12] beside
  /// input_ids [B, 16]; Whisper's input_features [B, mels, 100] beside the
  /// decoder's 10 tokens): labelled time, never resized or padded, and a
  /// norm's reduction over it is unconfirmed (no second length measured).
  int64_t other_time_axis = -1;
};

struct Layout {
  std::vector<InputLayout> inputs;
  int64_t batch = 0, T = 0;
  int mask = -1, lengths = -1;
  bool mask_real_nonzero = true;
  std::string mask_from;
  /// The sample's mask pads on the left (every example's last position real,
  /// some first one padding: GPT-style batched generation); longer batches
  /// are padded before the first position.
  bool left_padded = false;
  bool sequence = false;
  /// A graph batch of two or more graphs (PyG's layout with its `batch`
  /// vector): the node axis holds the nodes of every graph together.
  bool graph_batch = false;
  /// No mask or lengths argument, but the token ids of this input end (or
  /// start) with runs of the model's padding_idx in some rows and not in
  /// others: the sample is padded, and nothing tells the model where.
  int pad_tokens = -1;
  int64_t pad_token = -1;
  std::string pad_token_from;  ///< "padding_idx", "--pad-value" or the id forward compares the tokens with
  at::Tensor real;  // [B, T] bool
};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool has(const std::string& s, const char* key) { return s.find(key) != std::string::npos; }

std::string shape_str(at::IntArrayRef sizes) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < sizes.size(); ++i) o << (i ? ", " : "") << sizes[i];
  o << "]";
  return o.str();
}
std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

/// The padding_idx values (>= 0) of the model's embedding lookups: Embedding
/// modules' attribute, and aten::embedding's argument in the graph (a traced
/// Embedding keeps it only there); `first_module` names one that has it.
std::set<int64_t> model_padding_idx(const Session& s, std::string* first_module = nullptr) {
  std::set<int64_t> padding_idx;
  std::string idx_module;
  for (const auto& mi : s.model.modules) {
    if ((mi.kind != "Embedding" && mi.kind != "EmbeddingBag") || !mi.module._ivalue() || !mi.module.hasattr("padding_idx")) continue;
    const c10::IValue v = mi.module.attr("padding_idx");
    if (v.isInt() && v.toInt() >= 0) {
      padding_idx.insert(v.toInt());
      if (idx_module.empty()) idx_module = mi.path;
    }
  }
  if (s.inst)
    for (const auto& [path, idx] : s.inst->embedding_padding_idx()) {
      padding_idx.insert(idx);
      if (idx_module.empty()) idx_module = path.empty() ? std::string("<root>") : path;
    }
  if (first_module) *first_module = idx_module;
  return padding_idx;
}

/// The value each sequence input is padded with: --pad-value; else the one
/// value the sample's own padded positions hold (fairseq pads tokens with 1,
/// and its models find padding by src_tokens.eq(padding_idx): padding with 0
/// appends real tokens); else, for token ids, the padding_idx of the model's
/// Embedding modules when they agree on one; else 0.
void infer_pad_values(const Session& s, Layout& L) {
  std::string idx_module;
  const std::set<int64_t> padding_idx = model_padding_idx(s, &idx_module);
  for (size_t i = 0; i < L.inputs.size(); ++i) {
    InputLayout& il = L.inputs[i];
    if (il.time_axis < 0 || (il.role != "tokens" && il.role != "features") || !s.args[i].value.isTensor()) continue;
    if (s.opt.pad_value) {
      il.pad = *s.opt.pad_value;
      il.pad_from = "--pad-value";
      continue;
    }
    const at::Tensor t = s.args[i].value.toTensor();
    // [B, T, ...] whatever the layout ([T, B, F] and [B, C, T] move their time axis to 1).
    const at::Tensor tt = t.dim() >= 2 ? t.movedim(il.time_axis, 1) : t;
    if (L.real.defined() && L.real.dim() == 2 && !L.real.all().item<bool>() && tt.dim() >= 2 &&
        tt.size(0) == L.real.size(0) && tt.size(1) == L.real.size(1)) {
      // The padded positions of the sample.
      at::Tensor pad = L.real.logical_not();
      std::vector<int64_t> shape = {pad.size(0), pad.size(1)};
      for (int64_t d = 2; d < tt.dim(); ++d) shape.push_back(1);
      const at::Tensor vals = tt.masked_select(pad.view(shape).expand_as(tt).to(tt.device()));
      if (vals.numel() > 0 && vals.eq(vals.flatten()[0]).all().item<bool>()) {
        il.pad = vals.flatten()[0].item<double>();
        std::ostringstream o;
        o << "the sample's padded positions hold " << il.pad;
        il.pad_from = o.str();
        continue;
      }
    }
    if (il.role == "tokens" && padding_idx.size() == 1) {
      il.pad = static_cast<double>(*padding_idx.begin());
      il.pad_from = "padding_idx of " + idx_module;
      continue;
    }
    il.pad = 0;
    il.pad_from = "default (--pad-value sets it)";
  }
}

Layout infer_layout(const Session& s) {
  const CheckOptions& opt = s.opt;
  Layout L;
  // The batch axis of each argument (--batch-dim, else inferred): a
  // time-major [T, B, F] input has its time axis at 0.
  const BatchLayout bl = batch_layout(s);
  L.graph_batch = bl.graph_edges >= 0 && bl.graph_ids >= 0 && bl.batch >= 2;
  for (size_t i = 0; i < s.args.size(); ++i) {
    InputLayout il;
    const auto& a = s.args[i];
    if (!a.value.isTensor()) {
      il.from = "not a tensor";
      L.inputs.push_back(il);
      continue;
    }
    const at::Tensor t = a.value.toTensor();
    const std::string n = lower(a.name);
    const bool integral = !t.is_floating_point() && !t.is_complex();
    const int64_t ba = i < bl.axis.size() ? bl.axis[i] : 0;
    const bool time_major = ba == 1;  // [T, B, ...]
    if (bl.graph_arg(static_cast<int64_t>(i))) {
      // A graph batch (edge list, node features, graph ids): no time axis.
      const auto k = static_cast<int64_t>(i);
      const bool per_edge = bl.graph_per_edge(k);
      il.role = k == bl.graph_edges ? "edges" : k == bl.graph_ids ? "graph ids" : per_edge ? "edge features" : "nodes";
      il.from = k == bl.graph_edges ? "integer edge list used as row indices into the node tensors"
                : k == bl.graph_ids ? "the graph of each node (PyG's batch vector)"
                : per_edge          ? "one row per edge of the edge list"
                                    : "one row per node of a graph batch";
      L.inputs.push_back(il);
      continue;
    }
    // What reads the argument: a conv1d takes [batch, channel, time].
    bool conv1d = false;
    if (s.inst && i < s.inst->input_consumers().size())
      for (const auto& k : s.inst->input_consumers()[i])
        conv1d = conv1d || k == "aten::conv1d" || ((k == "aten::_convolution" || k == "aten::_convolution_mode") && t.dim() == 3);
    if (s.inst && t.dim() == 3 && i < s.inst->input_conv1d_layout().size() && s.inst->input_conv1d_layout()[i])
      conv1d = true;
    // A missing-value indicator (time-series past_observed_mask) is named a
    // mask but marks observed values, not padding: a forecaster reading the
    // last context_length positions cannot be padded after them.
    // A mask of one frame axis and a singleton channel axis: Grad-TTS and
    // VITS pass x_mask as [B, 1, T] to broadcast over [B, C, T] features,
    // WeNet and ESPnet encoder layers take masks as (B, 1, T) booleans. Named
    // a mask and holding only 0/1 values, it is one without --mask-input;
    // [B, T, 1] only with it (a feature of size 1 otherwise).
    const bool singleton_mask = t.dim() == 3 && t.size(1) == 1 && t.size(2) > 1 && !time_major && t.numel() > 0 &&
                                !t.is_complex() && t.eq(0).logical_or(t.eq(1)).all().item<bool>();
    // Longformer's global_attention_mask marks the tokens that attend
    // globally, not padding (eval56): read as segments are, padded with 0.
    const bool global_mask = opt.mask_input.empty() && has(n, "mask") && has(n, "global");
    const bool named_mask = opt.mask_input.empty()
                                ? (has(n, "mask") && !has(n, "observed") && !global_mask && (t.dim() == 2 || singleton_mask))
                                : (opt.mask_input == a.name || opt.mask_input == std::to_string(i));
    int64_t squeeze = -1;
    if (named_mask && t.dim() == 3 && !time_major) {
      if (t.size(1) == 1 && t.size(2) > 1) squeeze = 1;
      else if (t.size(2) == 1 && t.size(1) > 1 && !opt.mask_input.empty()) squeeze = 2;
    }
    if (named_mask && (t.dim() == 2 || squeeze > 0)) {
      il.role = "mask";
      il.time_axis = squeeze == 1 ? 2 : time_major ? 0 : 1;
      il.mask_squeeze = squeeze;
      il.from = opt.mask_input.empty() ? (squeeze == 1 ? "0/1 values named " : "[B, T] named ") + a.name
                                       : "--mask-input " + opt.mask_input;
      if (time_major) il.from += " (batch axis 1: [T, B])";
      if (squeeze == 1) il.from += " ([B, 1, T]: one channel, broadcast over the features)";
      if (squeeze == 2) il.from += " ([B, T, 1]: broadcast over the features)";
      if (L.mask < 0) L.mask = static_cast<int>(i);
    } else if ((has(n, "length") || n == "lens" || has(n, "_lens") || named_mask) && t.dim() == 1 && integral) {
      // --mask-input may name a lengths vector too (torchaudio's Conformer
      // takes forward(input, lengths) and builds its padding mask itself).
      il.role = "lengths";
      il.from = named_mask && !opt.mask_input.empty() ? "--mask-input " + opt.mask_input + " (integer [B]: lengths)"
                                                      : "integer [B] named " + a.name;
      if (L.lengths < 0 || named_mask) L.lengths = static_cast<int>(i);
    } else if (t.scalar_type() == at::kBool && t.dim() == 2 && opt.mask_input.empty() && !time_major && !global_mask) {
      // A boolean [B, T] is a mask whatever its name (timm NaFlexViT's
      // patch_valid beside the [B, T, F] patches): never token ids, whose
      // refill rewrote the mask itself (eval43: a false SEQ004).
      il.role = "mask";
      il.time_axis = 1;
      il.from = "Bool [B, T] named " + a.name + ": a mask";
      if (L.mask < 0) L.mask = static_cast<int>(i);
    } else if (integral && t.dim() == 2) {
      il.time_axis = time_major ? 0 : 1;
      if (has(n, "position")) {
        il.role = "positions";
        il.from = "integer [B, T] named " + a.name;
      } else if (has(n, "token_type") || has(n, "segment") || global_mask) {
        il.role = "segments";
        il.from = "integer [B, T] named " + a.name +
                  (global_mask ? ": marks the tokens with global attention, not padding" : std::string());
      } else if (!time_major && opt.mask_input.empty() && s.inst && i < s.inst->input_indexes_table().size() &&
                 !s.inst->input_indexes_table()[i] && i > 0 && t.numel() > 0 &&
                 (t.eq(0).logical_or(t.eq(1))).all().item<bool>() && t.ne(0).any(1).all().item<bool>() &&
                 [&] {
                   // Another argument of the same [B, T] is read by a lookup:
                   // the token ids this one masks.
                   for (size_t j = 0; j < s.args.size() && j < s.inst->input_indexes_table().size(); ++j)
                     if (j != i && s.inst->input_indexes_table()[j] && s.args[j].value.isTensor() &&
                         s.args[j].value.toTensor().sizes() == t.sizes())
                       return true;
                   return false;
                 }()) {
        // Unnamed (a traced wrapper's forward(a, b)): 0/1 values beside token
        // ids of the same shape, and no embedding reads it, as none reads an
        // attention_mask (HF left-padded LMs traced through a wrapper).
        il.role = "mask";
        il.from = "integer [B, T] of 0/1 values beside the token ids, read by no embedding: a padding mask";
        if (L.mask < 0) L.mask = static_cast<int>(i);
      } else if (!time_major && !opt.seq_dim &&
                 ((s.inst && i < s.inst->input_fields().size() && s.inst->input_fields()[i]) || [&] {
                   // Each column its own range of ids, in increasing order
                   // (a recommender's global feature ids: field k's ids
                   // follow field k-1's): fields, not positions. Token ids
                   // can be anything at any position.
                   if (t.size(0) < 4 || t.size(1) < 2 || t.numel() == 0) return false;
                   const at::Tensor lo = std::get<0>(t.min(0)), hi = std::get<0>(t.max(0));
                   return (lo.slice(0, 1) > hi.slice(0, 0, -1)).all().item<bool>();
                 }())) {
        il.role = "fields";
        il.time_axis = -1;
        il.from = "integer [B, F]: categorical fields (each column its own embedding, offsets or range of ids), "
                  "not positions";
      } else {
        il.role = "tokens";
        il.from = time_major ? "integer [T, B]: token ids (batch axis 1)" : "integer [B, T]: token ids";
      }
    } else if (t.is_floating_point() && t.dim() == 3) {
      il.role = "features";
      if (time_major) {
        il.time_axis = 0;
        il.from = "float [T, B, F] (batch axis 1)";
      } else if (conv1d) {
        il.time_axis = 2;
        il.from = "float [B, C, T]: read by a conv1d";
      } else {
        il.time_axis = 1;
        il.from = "float [B, T, F]";
        il.time_axis_by_default = true;
      }
    } else if (t.is_floating_point() && t.dim() >= 4) {
      il.role = "image";
      il.from = "float rank " + std::to_string(t.dim()) + ": [B, C, spatial...]";
    } else if (t.is_floating_point() && t.dim() == 2) {
      il.role = "features";
      il.from = "float [B, F]: no time axis";
      // A waveform: unsqueezed into a Conv1d (Conv-TasNet's encoder,
      // Demucs), or any [B, N] signal of a model declared causal (--causal:
      // its outputs are ordered in time, so its input is).
      const bool to_conv1d = s.inst && i < s.inst->input_reaches_conv1d().size() && s.inst->input_reaches_conv1d()[i];
      if (!time_major && (to_conv1d || opt.causal)) {
        il.time_axis = 1;
        il.from = to_conv1d ? "float [B, T] unsqueezed into a conv1d: a signal over time (a waveform)"
                            : "float [B, T] of a model declared causal (--causal): a signal over time";
      }
    } else {
      il.from = "no rule applies";
    }
    if (opt.seq_dim && il.role != "mask" && il.role != "lengths" && t.dim() >= 2) {
      int64_t d = *opt.seq_dim < 0 ? *opt.seq_dim + t.dim() : *opt.seq_dim;
      if (d >= 0 && d < t.dim() && d != std::max<int64_t>(ba, 0)) {
        il.time_axis = d;
        if (il.role == "image" || il.role == "other") il.role = "features";
        il.from += "; --seq-dim " + std::to_string(*opt.seq_dim);
      }
    }
    L.inputs.push_back(il);
  }
  // A float [B, N] beside a padding mask of the same [B, N] is a signal over
  // time, not a feature vector: wav2vec2/HuBERT's input_values [B, samples]
  // with attention_mask [B, samples] (the mask says which samples are real).
  if (L.mask >= 0 && !opt.seq_dim) {
    const at::Tensor m = s.args[static_cast<size_t>(L.mask)].value.toTensor();
    for (size_t i = 0; i < s.args.size(); ++i) {
      auto& il = L.inputs[i];
      if (!s.args[i].value.isTensor() || il.role != "features" || il.time_axis >= 0) continue;
      const at::Tensor t = s.args[i].value.toTensor();
      if (t.dim() == 2 && t.sizes() == m.sizes()) {
        il.time_axis = 1;
        il.from = "float [B, T] of the shape of mask '" + s.args[static_cast<size_t>(L.mask)].name +
                  "': a signal over time (a waveform)";
      }
    }
  }
  // Float [B, ?, ?] features whose time axis was taken as axis 1 for want
  // of anything better, beside a lengths vector that reaches beyond axis 1's
  // size and fits axis 2's: [B, C, T] (NeMo's audio_signal [B, mels, frames]
  // with length up to the frames, eval30: its mel bins were read as time and
  // "padded").
  if (L.lengths >= 0 && !opt.seq_dim) {
    const at::Tensor len = s.args[static_cast<size_t>(L.lengths)].value.toTensor();
    const int64_t lmax = len.numel() > 0 ? len.max().item<int64_t>() : 0;
    for (size_t i = 0; i < s.args.size(); ++i) {
      auto& il = L.inputs[i];
      if (!s.args[i].value.isTensor() || !il.time_axis_by_default || il.time_axis != 1) continue;
      const at::Tensor t = s.args[i].value.toTensor();
      if (t.dim() == 3 && t.size(1) < lmax && t.size(2) >= lmax) {
        il.time_axis = 2;
        il.from = "float [B, C, T]: lengths '" + s.args[static_cast<size_t>(L.lengths)].name + "' reach " +
                  std::to_string(lmax) + ", beyond axis 1's " + std::to_string(t.size(1)) + " entries";
      }
    }
  }
  // Flags that name nothing are errors, not silent no-ops.
  const bool mask_input_is_lengths =
      L.lengths >= 0 && (opt.mask_input == s.args[static_cast<size_t>(L.lengths)].name ||
                         opt.mask_input == std::to_string(L.lengths));
  if (!opt.mask_input.empty() && L.mask < 0 && !mask_input_is_lengths) {
    std::string names;
    for (size_t i = 0; i < s.args.size(); ++i) names += (i ? ", " : "") + std::to_string(i) + "=" + s.args[i].name;
    bool found = false;
    for (size_t i = 0; i < s.args.size(); ++i)
      if (opt.mask_input == s.args[i].name || opt.mask_input == std::to_string(i)) found = true;
    throw Error(error_kind::kUsage, ExitCode::kUsage,
                "--mask-input " + opt.mask_input +
                    (found ? ": that argument is neither a [B, T] tensor (a padding mask is [batch, time]) nor an integer [B] lengths vector"
                           : ": forward has no such argument (its arguments: " + names + ")"));
  }
  if (opt.seq_dim) {
    bool any = false;
    for (const auto& il : L.inputs) any = any || il.time_axis >= 0;
    if (!any)
      throw Error(error_kind::kUsage, ExitCode::kUsage,
                  "--seq-dim " + std::to_string(*opt.seq_dim) + ": no input has that axis (sequence inputs are [B, T, ...])");
  }
  // Batch size and the sequence length: the first input with a time axis
  // (tokens or features first) sets T; inputs whose time axis differs are
  // not resized.
  L.batch = bl.batch;
  for (size_t i = 0; i < s.args.size() && L.batch == 0; ++i)
    if (s.args[i].value.isTensor() && s.args[i].value.toTensor().dim() >= 1) L.batch = s.args[i].value.toTensor().size(0);
  // A padding mask says which stream is padded: of two token or feature
  // streams (a dual-stream diffusion transformer's 64 image tokens and its
  // 12-token prompt with encoder_hidden_states_mask: diffusers QwenImage,
  // Chroma; eval45), the one whose positions the mask covers is the
  // sequence, not the first one.
  if (L.mask >= 0 && !opt.seq_dim) {
    const auto& ml = L.inputs[static_cast<size_t>(L.mask)];
    const at::Tensor m = s.args[static_cast<size_t>(L.mask)].value.toTensor();
    const int64_t mt = ml.time_axis >= 0 && ml.time_axis < m.dim() ? m.size(ml.time_axis) : -1;
    int64_t first_t = -1;
    bool matches = false;
    for (size_t i = 0; i < L.inputs.size(); ++i) {
      const auto& il = L.inputs[i];
      if (il.time_axis < 0 || !(il.role == "tokens" || il.role == "features")) continue;
      const int64_t ti = s.args[i].value.toTensor().size(il.time_axis);
      if (first_t < 0) first_t = ti;
      matches = matches || ti == mt;
    }
    if (matches && first_t != mt) L.T = mt;
  }
  for (int pass = 0; pass < 2 && L.T == 0; ++pass)
    for (size_t i = 0; i < L.inputs.size(); ++i) {
      const auto& il = L.inputs[i];
      const bool primary = il.role == "tokens" || il.role == "features";
      if (il.time_axis < 0 || (pass == 0 && !primary)) continue;
      L.T = s.args[i].value.toTensor().size(il.time_axis);
      break;
    }
  for (size_t i = 0; i < L.inputs.size(); ++i) {
    auto& il = L.inputs[i];
    if (!s.args[i].value.isTensor()) continue;
    const at::Tensor t = s.args[i].value.toTensor();
    if (il.time_axis >= 0 && t.size(il.time_axis) != L.T) {
      // A time axis told by the data (token ids, a mask, a conv1d's [B, C,
      // T]) stays one of another sequence (eval53: BART's decoder ids were
      // labelled [batch, feature] and its decoder LayerNorms' inputs
      // [batch, hidden, hidden]); a float [B, T, F] guess is dropped.
      il.from += "; axis " + std::to_string(il.time_axis) + " has " + std::to_string(t.size(il.time_axis)) +
                 " positions, not " + std::to_string(L.T) +
                 (il.time_axis_by_default ? ": left as it is" : ": another sequence, left as it is");
      if (!il.time_axis_by_default) il.other_time_axis = il.time_axis;
      il.time_axis = -1;
    }
    const int64_t ba = i < bl.axis.size() && bl.axis[i] >= 0 ? bl.axis[i] : 0;
    if (il.role == "edges" || il.role == "nodes" || il.role == "graph ids" || il.role == "edge features") {
      for (int64_t d = 0; d < t.dim(); ++d)
        il.axes.push_back(il.role == "edges" ? (d == bl.graph_edge_axis ? "edge" : "pair")
                          : d == 0          ? (il.role == "edge features" ? "edge" : "node")
                                            : "feature");
      continue;
    }
    for (int64_t d = 0; d < t.dim(); ++d) {
      std::string r = d == il.time_axis || d == il.other_time_axis ? "time" : d == ba ? "batch" : "";
      if (r.empty()) r = il.role == "image" ? (d == 1 ? "channel" : "spatial") : "feature";
      il.axes.push_back(r);
    }
    if (il.time_axis >= 0 && (il.role == "tokens" || il.role == "features")) L.sequence = L.T >= 2;
  }
  // A mask whose positions are not this sequence's (a caption mask of 12
  // beside 128 video tokens, eval37 D03) masks another sequence: no padding
  // of this one is read from it (its real positions were cut to the new
  // length and crashed four probes).
  if (L.mask >= 0 && static_cast<size_t>(L.mask) < L.inputs.size() && L.inputs[static_cast<size_t>(L.mask)].time_axis < 0)
    L.mask = -1;
  // Mask polarity: with right padding every example's first position is real.
  if (L.mask >= 0) {
    at::Tensor m = s.args[static_cast<size_t>(L.mask)].value.toTensor().to(at::kDouble) != 0;
    if (L.inputs[static_cast<size_t>(L.mask)].mask_squeeze > 0) m = m.squeeze(L.inputs[static_cast<size_t>(L.mask)].mask_squeeze);
    if (L.inputs[static_cast<size_t>(L.mask)].time_axis == 0) m = m.t();  // [T, B] -> [B, T]
    const std::string n = lower(s.args[static_cast<size_t>(L.mask)].name);
    const bool pad_named = has(n, "padding");
    const at::Tensor first = m.select(1, 0), last = m.select(1, m.size(1) - 1);
    if (m.all().item<bool>() || m.logical_not().all().item<bool>()) {
      L.mask_real_nonzero = !pad_named;
      L.mask_from = pad_named ? "no padding in the sample; the name says true/1 marks padding"
                              : "no padding in the sample; 1/true taken as real (attention_mask convention)";
    } else if ((first == first[0]).all().item<bool>() && (last == last[0]).all().item<bool>() &&
               first[0].item<bool>() != last[0].item<bool>()) {
      // Every example padded, all on the same side: [0 0 1 1] is right
      // padding with 0 real or left padding with 1 real, and the values
      // cannot tell. The name decides (attention_mask: 1 is real;
      // *padding*: true is padding), and with it the side.
      const bool real_is_first = first[0].item<bool>() == !pad_named;
      L.mask_from = std::string("every example is padded, all on one side; the name says ") +
                    (pad_named ? "true/1 marks padding" : "1/true marks real positions (attention_mask convention)");
      L.mask_real_nonzero = (real_is_first ? first[0] : last[0]).item<bool>();
      L.left_padded = !real_is_first;
      if (L.left_padded) L.mask_from = "left padding: " + L.mask_from;
    } else if ((first == first[0]).all().item<bool>()) {
      L.mask_real_nonzero = first[0].item<bool>();
      L.mask_from = "every example's first position holds " + std::string(L.mask_real_nonzero ? "1/true" : "0/false");
    } else if ((last == last[0]).all().item<bool>()) {
      L.mask_real_nonzero = last[0].item<bool>();
      L.left_padded = true;
      L.mask_from = "left padding: every example's last position holds " + std::string(L.mask_real_nonzero ? "1/true" : "0/false");
    } else {
      L.mask_real_nonzero = !pad_named;
      L.mask_from = "mixed values at both ends; taken by name";
    }
    L.real = L.mask_real_nonzero ? m : m.logical_not();
  } else if (L.lengths >= 0 && L.T > 0) {
    const at::Tensor len = s.args[static_cast<size_t>(L.lengths)].value.toTensor().to(at::kLong).view({-1, 1});
    L.real = at::arange(L.T, at::kLong).view({1, -1}) < len;
  } else if (L.T > 0 && L.batch > 0) {
    L.real = at::ones({L.batch, L.T}, at::kBool);
    // Token ids padded with the model's padding_idx and no mask argument (a
    // BERT traced with input_ids alone, eval16): runs of it at the end of
    // some rows and not of others (right padding), or at the start (left).
    // The padding id: --pad-value (an integer), else the padding_idx of the
    // model's embeddings when they agree on one, else an id forward compares
    // the tokens with itself (a TextCNN's `x != self.pad`, fairseq's
    // src_tokens.eq(self.padding_idx) over an Embedding without one; eval27
    // C02).
    const std::set<int64_t> idx = model_padding_idx(s);
    std::vector<std::pair<int64_t, std::string>> ids_to_try;
    if (opt.pad_value && std::nearbyint(*opt.pad_value) == *opt.pad_value)
      ids_to_try.push_back({static_cast<int64_t>(*opt.pad_value), "--pad-value"});
    else if (idx.size() == 1)
      ids_to_try.push_back({*idx.begin(), "padding_idx"});
    if (L.batch >= 2 && L.T >= 2)
      for (size_t i = 0; i < L.inputs.size() && L.pad_tokens < 0; ++i) {
        const InputLayout& il = L.inputs[i];
        // Ids from a file: synthesized ones end in padding_idx by chance.
        if (il.role != "tokens" || il.time_axis != 1 || !s.args[i].value.isTensor() ||
            s.args[i].source.rfind("synthetic:", 0) == 0)
          continue;
        const at::Tensor ids = s.args[i].value.toTensor();
        if (ids.dim() != 2 || ids.size(0) != L.batch || ids.size(1) != L.T) continue;
        std::vector<std::pair<int64_t, std::string>> tries = ids_to_try;
        if (tries.empty() && s.inst)
          for (const auto& [arg, id] : s.inst->compared_ids())
            if (arg == i) tries.push_back({id, "the id forward compares '" + s.args[i].name + "' with"});
        // Nothing in the model names one (Kim's TextCNN: an Embedding without
        // padding_idx, no mask): the conventional padding ids 0 and 1
        // (torchtext's and fairseq's <pad> is 1), when the sample holds that id
        // only in runs at the ends of rows (checked below), of two lengths or
        // more.
        bool from_data = false;
        if (tries.empty()) {
          from_data = true;
          for (int64_t id : {int64_t{1}, int64_t{0}})
            tries.push_back({id, "the sample: id " + std::to_string(id) +
                                     " (a usual padding id) fills runs at the ends of rows and appears nowhere else"});
        }
        for (const auto& [pad_id, pad_from] : tries) {
          const at::Tensor is_pad = ids.eq(pad_id);
          // Trailing run per row: positions from the last non-pad on.
          const at::Tensor pos = at::arange(L.T, at::kLong).view({1, -1});
          const at::Tensor last_real = at::where(is_pad.logical_not(), pos, at::full_like(pos, -1)).amax(1, true);
          const at::Tensor first_real =
              at::where(is_pad.logical_not(), pos, at::full_like(pos, L.T)).amin(1, true);
          const at::Tensor right = pos > last_real, left = pos < first_real;
          // Padded rows, one of them by two or more (a single trailing id
          // equal to padding_idx may be a real token of a random sample).
          const auto padded_rows = [](const at::Tensor& p) { return p.any(1); };
          if (std::max(right.sum(1).max().item<int64_t>(), left.sum(1).max().item<int64_t>()) < 2) continue;
          // Some row unpadded (the batch padded to its longest row), or every
          // row padded by runs of two lengths or more (padded to a fixed
          // width beyond the longest: a recommender's multi-hot field of 6
          // slots holding 1-3 genres, eval42 C04).
          const auto unequal_runs = [](const at::Tensor& p) {
            return std::get<0>(at::_unique(p.sum(1))).numel() >= 2;
          };
          const bool right_ok = padded_rows(right).any().item<bool>() &&
                                (padded_rows(right).logical_not().any().item<bool>() || unequal_runs(right)) &&
                                last_real.ge(0).all().item<bool>();
          const bool left_ok = !right_ok && padded_rows(left).any().item<bool>() &&
                               (padded_rows(left).logical_not().any().item<bool>() || unequal_runs(left)) &&
                               first_real.lt(L.T).all().item<bool>();
          if (!right_ok && !left_ok) continue;
          if (from_data) {
            // Only in the runs, and runs of at least two lengths.
            const at::Tensor runs = right_ok ? right : left;
            if (is_pad.logical_and(runs.logical_not()).any().item<bool>()) continue;
            const at::Tensor lengths = runs.sum(1);
            if (std::get<0>(at::_unique(lengths.masked_select(lengths > 0))).numel() < 2) continue;
          }
          L.pad_tokens = static_cast<int>(i);
          L.pad_token = pad_id;
          L.pad_token_from = pad_from;
          L.left_padded = left_ok;
          L.real = (right_ok ? right : left).logical_not();
          break;
        }
      }
  }
  infer_pad_values(s, L);
  return L;
}

/// The arguments with every time axis resized to `newT`: truncated, or
/// extended with padding (tokens/features: --pad-value; mask: its padded
/// value; positions continue; segments 0) after the last position, or
/// before the first when the sample pads on the left (Layout::left_padded;
/// positions then repeat the first one). Lengths are clamped to newT.
std::vector<c10::IValue> resize_time(const Session& s, const Layout& L, int64_t newT) {
  std::vector<c10::IValue> out;
  for (size_t i = 0; i < s.args.size(); ++i) {
    const auto& il = L.inputs[i];
    const c10::IValue& v = s.args[i].value;
    if (!v.isTensor()) {
      out.push_back(v);
      continue;
    }
    at::Tensor t = v.toTensor();
    if (il.role == "lengths" && newT < L.T) {
      out.emplace_back(t.clamp_max(newT));
      continue;
    }
    // An input whose axis is not this sequence's length (a caption mask of
    // 12 positions beside 128 video tokens: diffusers' LTX-Video
    // transformer, eval37 D03, whose mask was cut to 96 and crashed four
    // probes) belongs to another sequence: left as it is.
    if (il.time_axis < 0 || il.time_axis >= t.dim() || t.size(il.time_axis) != L.T) {
      out.emplace_back(t);
      continue;
    }
    const int64_t ax = il.time_axis;
    if (newT <= L.T) {
      out.emplace_back(t.narrow(ax, 0, newT).contiguous());
      continue;
    }
    auto sizes = t.sizes().vec();
    sizes[static_cast<size_t>(ax)] = newT - L.T;
    at::Tensor extra;
    if (il.role == "mask") {
      extra = at::full(sizes, L.mask_real_nonzero ? 0 : 1, t.options());
    } else if (il.role == "positions" && L.left_padded) {
      // Left padding: the padded positions take the first one's value
      // (what a mask-derived position_ids gives them); real ones keep theirs.
      extra = t.narrow(ax, 0, 1).expand(sizes).contiguous();
    } else if (il.role == "positions") {
      std::vector<int64_t> shape(static_cast<size_t>(t.dim()), 1);
      shape[static_cast<size_t>(ax)] = newT - L.T;
      extra = at::arange(L.T, newT, t.options()).view(shape).expand(sizes).contiguous();
    } else if (il.role == "segments") {
      extra = at::zeros(sizes, t.options());
    } else {
      extra = at::full(sizes, il.pad, t.options());
    }
    out.emplace_back(L.left_padded ? at::cat({extra, t}, ax) : at::cat({t, extra}, ax));
  }
  return out;
}

/// The padding masks of this sequence: mask arguments whose time axis has
/// the sequence's length L.T.
std::vector<size_t> sequence_masks(const Session& s, const Layout& L) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.args.size() && i < L.inputs.size(); ++i) {
    const auto& il = L.inputs[i];
    if (il.role != "mask" || il.time_axis < 0 || !s.args[i].value.isTensor()) continue;
    const at::Tensor t = s.args[i].value.toTensor();
    if (il.time_axis < t.dim() && t.size(il.time_axis) == L.T) out.push_back(i);
  }
  return out;
}

/// The mask argument that says which positions of argument `i` are real:
/// L.mask when the sequence has one mask; with several of one length (two
/// text streams, each with its own: HunyuanDiT's encoder_hidden_states /
/// text_embedding_mask and encoder_hidden_states_t5 / text_embedding_mask_t5;
/// T5's input_ids / attention_mask and decoder_input_ids /
/// decoder_attention_mask), the one whose distinctive name words (not
/// mask, attention, padding, ...) argument i's name shares, else the one
/// with none. -1: no mask, or none can be told (eval52
/// df_hunyuandit_t5full: the CLIP mask refilled real T5 tokens, an error
/// on a correctly masked model).
int mask_for_input(const Session& s, const Layout& L, size_t i) {
  const std::vector<size_t> masks = sequence_masks(s, L);
  if (masks.size() <= 1) return L.mask;
  auto words = [](const std::string& name) {
    std::set<std::string> w;
    std::string cur;
    for (char c : lower(name) + "_") {
      if (std::isalnum(static_cast<unsigned char>(c))) {
        cur += c;
      } else if (!cur.empty()) {
        w.insert(cur);
        cur.clear();
      }
    }
    return w;
  };
  static const std::set<std::string> generic = {
      "mask", "masks", "attention", "attn", "padding", "pad", "key", "keys", "input", "inputs", "ids", "hidden",
      "states", "state", "embedding", "embeddings", "embeds", "emb", "text", "values", "value", "x", "features",
      "feats", "seq", "sequence", "tokens", "token", "src", "valid", "is"};
  const std::set<std::string> mine = words(s.args[i].name);
  std::vector<size_t> sharing, plain;
  for (size_t m : masks) {
    std::set<std::string> own;
    for (const auto& w : words(s.args[m].name))
      if (!generic.count(w)) own.insert(w);
    if (own.empty()) {
      plain.push_back(m);
      continue;
    }
    for (const auto& w : own)
      if (mine.count(w)) {
        sharing.push_back(m);
        break;
      }
  }
  if (sharing.size() == 1) return static_cast<int>(sharing.front());
  if (sharing.empty() && plain.size() == 1) return static_cast<int>(plain.front());
  return -1;
}

/// Real positions [B, length] (bool) by mask argument `m` (a tensor),
/// its positions along `time_axis` (0 or 1 after squeezing
/// il.mask_squeeze), read with the sequence's convention
/// (L.mask_real_nonzero: the sequence's own mask decides 1/true real or
/// padding). Undefined when the mask is not [B, length] once read.
at::Tensor read_mask(const Session& s, const Layout& L, size_t m, int64_t time_axis, int64_t length) {
  const auto& il = L.inputs[m];
  at::Tensor t = s.args[m].value.toTensor().to(at::kDouble) != 0;
  if (il.mask_squeeze > 0) t = t.squeeze(il.mask_squeeze);
  if (time_axis == 0) t = t.t();
  if (t.dim() != 2 || t.size(0) != L.batch || t.size(1) != length) return {};
  return L.mask_real_nonzero ? t : t.logical_not();
}

/// Real positions [B, T] (bool) by mask argument `m` of the sequence.
at::Tensor real_by_mask(const Session& s, const Layout& L, int m) {
  if (m == L.mask) return L.real;
  return read_mask(s, L, static_cast<size_t>(m), L.inputs[static_cast<size_t>(m)].time_axis, L.T);
}

/// The positions real in every stream of this length (two masks: real in
/// both); L.real with one mask.
at::Tensor real_in_every_stream(const Session& s, const Layout& L) {
  const std::vector<size_t> masks = sequence_masks(s, L);
  if (masks.size() <= 1 || !L.real.defined()) return L.real;
  at::Tensor all = L.real;
  for (size_t m : masks) {
    const at::Tensor r = real_by_mask(s, L, static_cast<int>(m));
    if (r.defined()) all = all.logical_and(r);
  }
  return all;
}

/// The arguments with the sample's own padded positions (L.real false)
/// refilled with other values: features with seeded noise of the input's
/// scale, token ids with each example's first (real) token. Masks, lengths
/// and positions are kept. Empty when the sample has no padded position or
/// no sequence input of [B, T, ...] (or [T, B, ...]) layout to refill.
std::vector<c10::IValue> refill_padding(const Session& s, const Layout& L, int64_t seed) {
  if (!L.real.defined() || L.real.dim() != 2 || L.real.all().item<bool>()) return {};
  at::Generator gen = at::detail::createCPUGenerator(seed + 29);
  std::vector<c10::IValue> out;
  bool any = false;
  for (size_t i = 0; i < s.args.size(); ++i) {
    const auto& il = L.inputs[i];
    const c10::IValue& v = s.args[i].value;
    if (!v.isTensor() || il.time_axis < 0 || (il.role != "tokens" && il.role != "features")) {
      out.push_back(v);
      continue;
    }
    const at::Tensor t = v.toTensor();
    const int64_t ax = il.time_axis, ba = ax == 0 ? 1 : 0;
    if (t.dim() < 2 || t.size(ax) != L.T || t.size(ba) != L.batch) {
      out.push_back(v);
      continue;
    }
    // Its own mask's padded positions (a second text stream has its own);
    // left as it is when no mask can be told to be its.
    const int m = L.mask >= 0 ? mask_for_input(s, L, i) : L.mask;
    const at::Tensor real = m >= 0 ? real_by_mask(s, L, m) : L.mask >= 0 ? at::Tensor() : L.real;
    if (!real.defined() || real.all().item<bool>()) {
      out.push_back(v);
      continue;
    }
    // The padded positions, shaped to broadcast over t.
    std::vector<int64_t> shape(static_cast<size_t>(t.dim()), 1);
    shape[static_cast<size_t>(ba)] = L.batch;
    shape[static_cast<size_t>(ax)] = L.T;
    at::Tensor pad = real.logical_not();
    if (ax < ba) pad = pad.t();
    pad = pad.contiguous().view(shape).expand(t.sizes()).to(t.device());
    at::Tensor other;
    if (t.is_floating_point()) {
      const at::Tensor f = t.to(at::kFloat);
      const double sd = std::max(1e-3, f.masked_select(pad.logical_not()).std().item<double>());
      other = (at::randn(t.sizes(), gen, at::TensorOptions().dtype(at::kFloat)) * sd).to(t.device()).to(t.scalar_type());
    } else {
      other = t.narrow(ax, 0, 1).expand(t.sizes());
    }
    out.emplace_back(at::where(pad, other, t));
    any = true;
  }
  return any ? out : std::vector<c10::IValue>{};
}

/// Relative difference per module (all its output taps together) and the
/// order modules first produced output in the reference pass.
struct Deviation {
  std::vector<std::pair<std::string, double>> modules;  // execution order
  double root = std::nan("");
  std::string first;     // first module (execution order) with rel > kChanged
  double first_rel = 0;
};

Deviation deviations(const InstrumentedModel& im, const Collector& ref, const Collector& cur) {
  struct Acc {
    double d = 0, r = 0;
    int64_t calls = 0;
    int64_t order = INT64_MAX;
    bool shared = false;  ///< called more than once in the pass (one nn.Dropout used after every sublayer)
    int64_t last = -1;    ///< the latest first firing of its output taps
  };
  std::map<std::string, Acc> acc;
  const auto& taps = im.taps();
  for (const auto& t : taps) {
    if (t.kind != TapKind::kModuleOutput) continue;
    const auto& rr = ref.records()[static_cast<size_t>(t.id)];
    const auto& cr = cur.records()[static_cast<size_t>(t.id)];
    if (rr.first_fire < 0 || cr.cmp_calls == 0) continue;
    Acc& a = acc[t.module];
    a.d += cr.cmp_diff_sq;
    a.r += cr.cmp_ref_sq;
    a.calls += cr.cmp_calls;
    a.order = std::min(a.order, rr.first_fire);
    // Called more than once: a tap that fired twice (a loop).
    a.shared = a.shared || rr.calls > 1;
    a.last = std::max(a.last, rr.first_fire);
  }
  // Or called at several call sites: scripted code inlines each call of the
  // module separately and the taps read as several outputs of one module,
  // whose firings other modules' outputs fall between (the outputs of one
  // call fire together).
  for (auto& [m, a] : acc) {
    if (a.shared || a.last <= a.order) continue;
    for (const auto& t : taps) {
      if (t.kind != TapKind::kModuleOutput || t.module == m) continue;
      const bool related = m.empty() || t.module.empty() || t.module.rfind(m + ".", 0) == 0 || m.rfind(t.module + ".", 0) == 0;
      const int64_t f = ref.records()[static_cast<size_t>(t.id)].first_fire;
      if (!related && f > a.order && f < a.last) {
        a.shared = true;
        break;
      }
    }
  }
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [m, a] : acc) order.push_back({a.order, m});
  std::sort(order.begin(), order.end());
  Deviation d;
  for (const auto& [o, m] : order) {
    const Acc& a = acc[m];
    const double rel = a.d == 0 ? 0.0 : (a.r == 0 ? std::numeric_limits<double>::infinity() : std::sqrt(a.d / a.r));
    d.modules.push_back({m, rel});
    if (m.empty()) d.root = rel;
    // A module called several times (ESPnet's Conformer layer applies one
    // self.dropout after each sublayer) merges its calls, so its first call
    // looks changed by what a later call saw: the first module called once
    // that changed is named; a shared one only when no other changed.
    if (d.first.empty() && rel > kChanged && !m.empty() && !a.shared) {
      d.first = m;
      d.first_rel = rel;
    }
  }
  for (const auto& [o, m] : order) {
    if (!d.first.empty()) break;
    const Acc& a = acc[m];
    const double rel = a.d == 0 ? 0.0 : (a.r == 0 ? std::numeric_limits<double>::infinity() : std::sqrt(a.d / a.r));
    if (rel > kChanged && !m.empty()) {
      d.first = m;
      d.first_rel = rel;
    }
  }
  if (d.first.empty() && d.root > kChanged) {
    d.first = "";
    d.first_rel = d.root;
  }
  // A container named first whose own children changed too: its output tap
  // fired ahead of them (a Sequential iterated by its owner's loop,
  // deepspeech.pytorch's MaskConv: `for module in self.seq_module`), so the
  // change entered at its earliest changed child (eval35 C05 named the
  // container, then its first conv, whose output was unchanged).
  if (!d.first.empty()) {
    int64_t best = INT64_MAX;
    std::string child;
    for (const auto& [o, m] : order) {
      if (m.rfind(d.first + ".", 0) != 0) continue;
      const Acc& a = acc[m];
      const double rel = a.d == 0 ? 0.0 : (a.r == 0 ? std::numeric_limits<double>::infinity() : std::sqrt(a.d / a.r));
      if (rel > kChanged && !a.shared && o < best) {
        best = o;
        child = m;
        d.first_rel = rel;
      }
    }
    if (!child.empty()) d.first = child;
  }
  // A module that hands its input on unchanged in eval mode (Dropout,
  // Identity) computes nothing: the change entered in the ops of the module
  // that holds it (BERT's attention probabilities change in the scores and
  // softmax of attention.self, first seen at its attention dropout).
  if (!d.first.empty()) {
    static const std::regex pass_through("^(Dropout[123]?d?|AlphaDropout|FeatureAlphaDropout|Identity|DropPath|StochasticDepth)$");
    for (const auto& mi : im.model().modules)
      if (mi.path == d.first && std::regex_match(mi.kind, pass_through)) {
        const auto dot = d.first.rfind('.');
        if (dot != std::string::npos) d.first = d.first.substr(0, dot);
        break;
      }
  }
  return d;
}

bool per_example_op(const std::string& op) { return op != "batch_norm" && op != "batch_norm_pattern"; }

/// A norm written out over a view (GroupNorm as x.view(B, G, -1)): the axes
/// of the tensor before the view that the reduced view axes cover. `source`
/// and `view` are the two shapes; `reduced` the reduced view axes (a suffix).
/// `partial` is set when the reduced elements start inside an axis (groups
/// that straddle channels: C % G != 0). Empty when they do not line up.
std::vector<int64_t> source_axes(const std::vector<int64_t>& source, const std::vector<int64_t>& view,
                                 const std::vector<int64_t>& reduced, bool& partial) {
  partial = false;
  if (reduced.empty() || source.empty()) return {};
  for (size_t i = 0; i < reduced.size(); ++i)
    if (reduced[i] != static_cast<int64_t>(view.size() - reduced.size() + i)) return {};  // not a suffix
  int64_t p = 1;
  for (int64_t d : reduced) p *= view[static_cast<size_t>(d)];
  int64_t q = 1;
  for (int64_t k = static_cast<int64_t>(source.size()) - 1; k >= 0; --k) {
    const int64_t prev = q;
    q *= source[static_cast<size_t>(k)];
    if (q == p || (prev < p && q > p)) {
      // A group of whole channels covers `p / prev` channels; otherwise its
      // elements start inside a channel (groups straddle channels).
      partial = q != p && p % prev != 0;
      std::vector<int64_t> out;
      for (int64_t d = k; d < static_cast<int64_t>(source.size()); ++d) out.push_back(d);
      return out;
    }
  }
  return {};
}

/// The role resolve_roles gives the time axis of a second sequence
/// (InputLayout::other_time_axis): shown as "time", never taken for the
/// layout's own time axis (no padding or length edit reaches it).
const char* const kOtherTime = "time:other";

/// Static roles (recognize::infer_roles) with forward arguments' axes filled
/// in from the input layout; a flattened conv map moved to [batch, spatial,
/// channel] read as [batch, tokens, hidden]. Entries it cannot tell: "?".
std::vector<std::string> resolve_roles(const std::vector<std::string>& r, const Layout& L) {
  std::vector<std::string> out;
  for (const std::string& e : r) {
    if (e.rfind("in:", 0) != 0) {
      out.push_back(e);
      continue;
    }
    const auto c = e.find(':', 3);
    const size_t i = std::stoul(e.substr(3, c - 3));
    const size_t d = std::stoul(e.substr(c + 1));
    std::string role = "?";
    if (i < L.inputs.size() && d < L.inputs[i].axes.size()) {
      role = L.inputs[i].axes[d];
      if (static_cast<int64_t>(d) == L.inputs[i].other_time_axis) role = kOtherTime;
      const std::string& ir = L.inputs[i].role;
      if (role == "feature") role = (ir == "features" || ir == "tokens") ? "hidden" : "?";
      if (ir == "other" && role != "batch") role = "?";
    }
    out.push_back(role);
  }
  if (out.size() == 3 && out[1] == "spatial" && (out[2] == "channel" || out[2] == "hidden")) {
    out[1] = "tokens";
    out[2] = "hidden";
  }
  for (auto& e : out)
    if (e.find('*') != std::string::npos && e.find('?') == std::string::npos) {
      // Merged axes of one kind ("spatial*spatial" is "spatial").
      std::set<std::string> parts;
      size_t a = 0, b;
      while ((b = e.find('*', a)) != std::string::npos) parts.insert(e.substr(a, b - a)), a = b + 1;
      parts.insert(e.substr(a));
      if (parts.size() == 1) e = *parts.begin();
    }
  return out;
}

/// The model's own error from a failed pass: the text after "... pass: ",
/// first line only.
// The pass error's message without the model path and pass name, first line
// only, plus the dynamic-shapes hint of an exported program when the pass
// error carries one (Session::run_pass): the probe's recorded reason then
// says how to make it runnable.
std::string first_line_after_pass(const std::string& what) {
  std::string m = trim_torch_error(what);
  if (auto p = m.find(" pass: "); p != std::string::npos) m = m.substr(p + 7);
  std::string hint;
  if (auto h = m.find("\n  (this pass gave other shapes"); h != std::string::npos) {
    hint = m.substr(h + 3);
    if (auto e = hint.find('\n'); e != std::string::npos) hint = hint.substr(0, e);
  }
  if (auto p = m.find('\n'); p != std::string::npos) m = m.substr(0, p);
  return hint.empty() ? m : m + " " + hint;
}

}  // namespace

at::Tensor sample_real_positions(const Session& s, std::string& from) {
  try {
    const Layout L = infer_layout(s);
    if (!L.real.defined() || L.real.dim() != 2 || L.real.all().item<bool>() || L.real.logical_not().all().item<bool>())
      return {};
    // Two masks of this length (two text streams, an encoder's and a
    // decoder's): which one the output's positions follow is not known.
    if (sequence_masks(s, L).size() > 1) return {};
    if (L.mask >= 0)
      from = "padding mask '" + s.args[static_cast<size_t>(L.mask)].name + "' (" + L.mask_from + ")";
    else if (L.lengths >= 0)
      from = "lengths '" + s.args[static_cast<size_t>(L.lengths)].name + "'";
    else if (L.pad_tokens >= 0)
      from = "runs of padding_idx " + std::to_string(L.pad_token) + " in '" +
             s.args[static_cast<size_t>(L.pad_tokens)].name + "'";
    else
      return {};
    return L.real;
  } catch (const std::exception&) {
    return {};
  }
}

at::Tensor real_positions_of_length(const Session& s, int64_t length, std::string& from) {
  try {
    const Layout L = infer_layout(s);
    // The mask convention (1/true real or padding) is the sequence's own
    // mask's: without one, another stream's mask is not read.
    if (L.mask < 0 || length == L.T || L.batch <= 0) return {};
    int found = -1;
    at::Tensor real;
    for (size_t i = 0; i < s.args.size() && i < L.inputs.size(); ++i) {
      const auto& il = L.inputs[i];
      if (il.role != "mask" || il.other_time_axis < 0 || !s.args[i].value.isTensor()) continue;
      const at::Tensor m = s.args[i].value.toTensor();
      if (il.other_time_axis >= m.dim() || m.size(il.other_time_axis) != length) continue;
      if (found >= 0) return {};  // two masks of this length: which one is not known
      real = read_mask(s, L, i, il.other_time_axis, length);
      if (!real.defined()) return {};
      found = static_cast<int>(i);
    }
    if (found < 0 || real.all().item<bool>() || real.logical_not().all().item<bool>()) return {};
    from = "padding mask '" + s.args[static_cast<size_t>(found)].name + "' of the " + std::to_string(length) +
           "-position sequence (" + (L.mask_real_nonzero ? "1/true" : "0/false") + " real, as in '" +
           s.args[static_cast<size_t>(L.mask)].name + "')";
    return real;
  } catch (const std::exception&) {
    return {};
  }
}

void check_sequence_flags(const Session& s) {
  if (!s.opt.mask_input.empty() || s.opt.seq_dim) (void)infer_layout(s);
}

namespace {
PassSpec sequence_reference_spec(bool train) {
  PassSpec p;
  p.name = train ? "train-seq-reference" : "eval-seq-reference";
  p.probe = "sequence";
  p.train_mode = train;
  p.dropout = false;
  p.capture = true;
  return p;
}
}  // namespace

void declare_sequence_passes(Session& s) {
  // A declaration only lets passes be shared: a layout that cannot be
  // inferred here is reported by probe_sequence itself.
  try {
    if (infer_layout(s).sequence) s.declare(sequence_reference_spec(false));
  } catch (const std::exception&) {
  }
}

void probe_sequence(Session& s) {
  const Layout L = infer_layout(s);
  const auto& im = *s.inst;

  // -- the layout, in the report
  nlohmann::json jl = nlohmann::json::array();
  for (size_t i = 0; i < L.inputs.size(); ++i) {
    const auto& il = L.inputs[i];
    nlohmann::json e = {{"name", s.args[i].name}, {"index", i}, {"role", il.role}, {"axes", il.axes}, {"from", il.from}};
    if (!il.pad_from.empty()) {
      e["pad_value"] = il.pad;
      e["pad_value_from"] = il.pad_from;
    }
    if (s.args[i].value.isTensor()) e["shape"] = s.args[i].value.toTensor().sizes().vec();
    if (il.time_axis >= 0) e["time_axis"] = il.time_axis;
    if (il.role == "mask") {
      e["real_value"] = L.mask_real_nonzero ? "1/true" : "0/false";
      e["polarity_from"] = L.mask_from;
    }
    jl.push_back(e);
    if (s.args[i].value.isTensor()) {
      std::string sentence = "input " + s.args[i].name + " " + shape_str(s.args[i].value.toTensor().sizes()) + " read as " +
                             il.role + " [" + join(il.axes) + "] (" + il.from + ")";
      if (il.role == "mask") sentence += "; real positions hold " + std::string(L.mask_real_nonzero ? "1/true" : "0/false") + " (" + L.mask_from + ")";
      if (L.sequence) s.doc.assumptions.push_back(sentence);
    }
  }
  s.doc.probes["layout"] = {{"inputs", jl}, {"batch_size", L.batch}, {"sequence", L.sequence}};
  std::string declared;  // what says the model is fed padded batches ("" when nothing does)
  if (L.sequence) {
    s.doc.probes["layout"]["seq_len"] = L.T;
    const std::string pad_tokens_text =
        L.pad_tokens >= 0 ? (L.pad_token_from == "padding_idx" ? "padding_idx " : "padding id ") +
                                std::to_string(L.pad_token) + " tokens in " +
                                s.args[static_cast<size_t>(L.pad_tokens)].name + " (" +
                                (L.left_padded ? "left" : "right") + " padded; no mask argument" +
                                (L.pad_token_from == "padding_idx" ? std::string() : "; the id: " + L.pad_token_from) + ")"
                          : std::string();
    s.doc.probes["layout"]["padding"] = L.mask >= 0 ? "mask " + s.args[static_cast<size_t>(L.mask)].name
                                        : L.lengths >= 0 ? "lengths " + s.args[static_cast<size_t>(L.lengths)].name
                                        : L.pad_tokens >= 0 ? pad_tokens_text
                                                            : std::string("none (every position real)");
    for (const auto& il : L.inputs)
      if (!il.pad_from.empty()) {
        // The primary sequence input's padding value (each input's is in its row).
        s.doc.probes["layout"]["pad_value"] = il.pad;
        s.doc.probes["layout"]["pad_value_from"] = il.pad_from;
        if (il.pad_from != "--pad-value" && il.pad != 0) {
          std::ostringstream o;
          o << "padding appended with the value " << il.pad << " (" << il.pad_from << ")";
          s.doc.assumptions.push_back(o.str());
        }
        break;
      }
    s.doc.model_metrics["layout.seq_len"] = L.T;
    // Whether this model is fed padded batches: a padding mask or lengths
    // argument, --pad-value, or an Embedding's padding_idx (the pad token of
    // token ids) says so. Without any, the padding probe's appended
    // positions are hypothetical: a convolution over time, a norm over time
    // or a pooling changes the last real positions when padding is
    // appended, whatever the model, and a model that is never given padded
    // batches has nothing to protect (pad.hypothetical below, which SEQ001,
    // SEQ003 and SEQ006 read).
    if (L.mask >= 0) declared = "padding mask " + s.args[static_cast<size_t>(L.mask)].name;
    else if (L.lengths >= 0) declared = "lengths " + s.args[static_cast<size_t>(L.lengths)].name;
    else if (L.pad_tokens >= 0) declared = "the sample's " + pad_tokens_text;
    else
      for (const auto& il : L.inputs)
        if (il.pad_from == "--pad-value" || il.pad_from.rfind("padding_idx of ", 0) == 0 ||
            il.pad_from.rfind("the sample's padded positions", 0) == 0) {
          declared = il.pad_from;
          break;
        }
    s.doc.model_metrics["pad.padding_declared"] = !declared.empty();
    s.doc.model_metrics["pad.padding_declared_from"] = declared;
    s.doc.model_metrics["layout.padding_input"] =
        L.mask >= 0      ? s.args[static_cast<size_t>(L.mask)].name
        : L.lengths >= 0 ? s.args[static_cast<size_t>(L.lengths)].name
        : L.pad_tokens >= 0 ? s.args[static_cast<size_t>(L.pad_tokens)].name + " (padding-id tokens, no mask argument)"
                            : "";
  }
  s.doc.model_metrics["layout.sequence"] = L.sequence;
  // Whether the batches vary in what their statistics span: token ids
  // (text, whose lengths vary and are padded) or a declared padding. A
  // fixed-length float series without padding (PatchTST's patches) is the
  // case where BatchNorm in an attention block is a deliberate choice.
  {
    bool tokens = false;
    for (const auto& il : L.inputs) tokens = tokens || il.role == "tokens";
    s.doc.model_metrics["layout.tokens_or_padding"] = L.sequence && (tokens || !declared.empty());
  }

  // -- the sequence passes
  // The references come from the pass cache (the eval one is often the
  // normalization probe's dropout-free eval pass, run once for both).
  std::shared_ptr<const PassResult> ref_eval, ref_train;
  std::optional<PassResult> shorter, padded_eval, padded_train;
  std::string short_error, short_failed_layer, pad_error;
  // The pass and error kind of each failure: probes.padding /
  // probes.sequence_length then carry status "error", listed with the probes
  // that could not run.
  std::string short_pass, short_kind, pad_pass, pad_kind;
  const int64_t T2 = L.T - std::max<int64_t>(1, L.T / 4);
  int64_t P = std::max<int64_t>(8, L.T / 2);
  // The paddings tried, in order: T/2 (at least 8), then, when the model
  // raises at that length, an eighth of that and one position.
  std::vector<int64_t> pad_tries = {P};
  for (int64_t q : {P / 8, int64_t{1}})
    if (q >= 1 && q < pad_tries.back()) pad_tries.push_back(q);
  // What a longer padded batch raised, when a shorter padding then ran (a
  // learned position table of GPT-2's n_positions rows cannot index past
  // it): the probe pads by less rather than measure nothing.
  std::string pad_retry_note;
  // What the padding pass did, for the rules' messages ("the batch is padded
  // from 64 to 96 positions"); set where it differs.
  std::string pad_how;
  std::vector<c10::IValue> refilled_args;  // the refilled batch, when that replaced appending
  // A later try measured: the first try's failure is no longer the probe's.
  auto clear_pad_error = [&] {
    pad_error.clear();
    pad_pass.clear();
    pad_kind.clear();
  };
  auto spec = [&](const std::string& name, bool train, std::vector<c10::IValue> args) {
    PassSpec p;
    p.name = name;
    p.probe = "sequence";
    p.train_mode = train;
    p.dropout = false;
    p.args = std::move(args);
    return p;
  };
  auto last_module_fired = [&](const Collector& c) {
    int64_t best = -1, seq = -1;
    for (size_t i = 0; i < c.records().size(); ++i)
      if (c.records()[i].first_fire > seq) {
        seq = c.records()[i].first_fire;
        best = static_cast<int64_t>(i);
      }
    return best;
  };
  std::set<int64_t> failed_taps;  // norm-input taps that fired in a pass that then raised
  if (L.sequence) {
    ref_eval = s.pass(sequence_reference_spec(false));
    if (T2 >= 1) {
      const std::string short_name = "eval-seq-T" + std::to_string(T2);
      PassSpec sp = spec(short_name, false, resize_time(s, L, T2));
      sp.reference = &*ref_eval->collector;
      sp.real_positions = L.real.narrow(1, 0, T2);
      sp.time_cut = true;
      try {
        shorter = s.run_pass(std::move(sp));
      } catch (const Error& e) {
        if (e.kind() == error_kind::kTimeout || e.kind() == error_kind::kOutOfMemory) throw;
        short_error = first_line_after_pass(e.what());
        short_pass = short_name;
        short_kind = e.kind();
        if (s.failed_collector) {
          const int64_t t = last_module_fired(*s.failed_collector);
          if (t >= 0) short_failed_layer = im.taps()[static_cast<size_t>(t)].module;
          shorter.emplace();
          shorter->name = "failed";
          shorter->collector = std::move(s.failed_collector);
        }
      }
    }
    // A model that raises at the first longer length (a traced graph with
    // its sizes baked in; one that builds its padding mask from
    // lengths.max(), as torchaudio's Conformer does) is asked the same
    // question inside its length when the sample has padded positions of its
    // own: refilled with other values, they must leave the real ones alone.
    // A smaller padding may add nothing a strided front end reads (one more
    // sample under a stride of 64), so it comes only after.
    std::string refill_failed = "the sample has no padded positions of its own to refill";
    auto try_refill = [&]() -> bool {
      std::vector<c10::IValue> refilled = refill_padding(s, L, s.opt.seed);
      if (refilled.empty()) return false;
      refill_failed = "refilling the sample's own padded positions raised too";
      PassSpec pr = spec("eval-seq-refilled", false, refilled);
      pr.reference = &*ref_eval->collector;
      // Compared where every stream is real: a second stream's padded
      // positions were refilled too.
      const at::Tensor real_all = real_in_every_stream(s, L);
      pr.real_positions = real_all;
      try {
        padded_eval = s.run_pass(std::move(pr));
      } catch (const Error& e) {
        if (e.kind() == error_kind::kTimeout || e.kind() == error_kind::kOutOfMemory) throw;
        return false;
      }
      const int64_t n_pad = real_all.logical_not().sum().item<int64_t>();
      pad_retry_note = "padding to " + std::to_string(L.T + pad_tries.front()) + " positions raised (" + pad_error +
                       "); the sample's own " + std::to_string(n_pad) + " padded positions were refilled with other values instead";
      pad_how = "the sample's own " + std::to_string(n_pad) + " padded positions are refilled with other values";
      P = 0;
      refilled_args = std::move(refilled);
      clear_pad_error();
      return true;
    };
    bool refill_tried = false;
    for (size_t k = 0; k < pad_tries.size() && !padded_eval; ++k) {
      if (k == 1 && !refill_tried) {
        refill_tried = true;
        if (try_refill()) break;
      }
      PassSpec pe = spec("eval-seq-padded", false, resize_time(s, L, L.T + pad_tries[k]));
      pe.reference = &*ref_eval->collector;
      pe.real_positions = real_in_every_stream(s, L);
      pe.align_end = L.left_padded;
      try {
        padded_eval = s.run_pass(std::move(pe));
        P = pad_tries[k];
        if (k > 0) {
          pad_retry_note = "padding to " + std::to_string(L.T + pad_tries[0]) + " positions raised (" + pad_error +
                           "); padded to " + std::to_string(L.T + P) + " instead (" + refill_failed + ")";
          clear_pad_error();
        }
      } catch (const Error& e) {
        if (e.kind() == error_kind::kTimeout || e.kind() == error_kind::kOutOfMemory) throw;
        if (k == 0) {
          pad_error = first_line_after_pass(e.what());
          pad_pass = "eval-seq-padded";
          pad_kind = e.kind();
        }
      }
    }
    if (!padded_eval && !pad_error.empty() && !refill_tried) try_refill();
    // Train mode differs from eval mode (dropout off) only where a norm uses
    // batch statistics in training: batch_norm, or instance_norm with
    // running statistics. Without one, the eval comparison says it all.
    bool train_differs = im.batch_norm_nodes() > 0;
    for (const auto& n : im.norm_ops()) train_differs = train_differs || n.op == "instance_norm";
    if (!train_differs) s.doc.probes["padding_train_skipped"] = "no batch_norm/instance_norm: train mode without dropout equals eval mode";
    // A trace that baked training=False into every batch_norm (an inference
    // export, MODE003) never takes batch statistics, in any mode: the
    // train-mode comparison would describe the Python model, not this file
    // (eval36 C02: SeamlessM4T's encoder traced in eval).
    if (train_differs && im.batch_norm_nodes() > 0) {
      const int64_t baked_false_bn = im.baked_batch_norm_false();
      bool instance = false;
      for (const auto& n : im.norm_ops()) instance = instance || n.op == "instance_norm";
      if (baked_false_bn >= im.batch_norm_nodes() && !instance) {
        train_differs = false;
        s.doc.probes["padding_train_skipped"] =
            "every batch_norm of this trace has training=False baked in: the file never takes batch statistics";
      }
    }
    if (pad_error.empty() && train_differs) {
      try {
        // Run for this probe alone (not from the cache): a train-mode pass
        // with every module output kept, which no other probe asks for.
        ref_train = std::make_shared<const PassResult>(s.run_pass(sequence_reference_spec(true)));
        PassSpec pt = spec("train-seq-padded", true, refilled_args.empty() ? resize_time(s, L, L.T + P) : refilled_args);
        pt.reference = &*ref_train->collector;
        pt.real_positions = real_in_every_stream(s, L);
        pt.align_end = L.left_padded;
        padded_train = s.run_pass(std::move(pt));
      } catch (const Error& e) {
        if (e.kind() == error_kind::kTimeout || e.kind() == error_kind::kOutOfMemory) throw;
        pad_error = first_line_after_pass(e.what());
        pad_pass = ref_train ? "train-seq-padded" : "train-seq-reference";
        pad_kind = e.kind();
        ref_train.reset();
      }
    }
  }

  // -- normalized axes, per norm site
  const std::shared_ptr<const PassResult> train = s.train();
  const Collector* base = ref_eval ? &*ref_eval->collector : train ? train->collector.get() : nullptr;
  bool any_attention = false;
  for (const auto& t : im.taps())
    if (t.kind == TapKind::kSoftmaxInput) any_attention = true;
  nlohmann::json axes_rows = nlohmann::json::array();
  std::vector<std::string> norms_over_time;
  std::set<std::string> done;
  for (const auto& n : im.norm_ops()) {
    if (n.input_tap < 0 || !base) continue;
    // A norm in a training-only branch (a written-out BatchNorm's
    // `if self.training:` statistics) runs only in the train pass: its
    // input's shape from there, and no second length to compare.
    const Collector* here = base;
    if (base->records()[static_cast<size_t>(n.input_tap)].shape.empty() && train && train->collector &&
        base != train->collector.get() && !train->collector->records()[static_cast<size_t>(n.input_tap)].shape.empty())
      here = train->collector.get();
    const auto& rec = here->records()[static_cast<size_t>(n.input_tap)];
    if (rec.shape.empty()) continue;
    const bool written_out = n.op.size() > 8 && n.op.compare(n.op.size() - 8, 8, "_pattern") == 0;
    const bool frozen = n.op == "frozen_batch_norm";
    // The tensor whose axes are named: the normalized one, or for a norm
    // over a view (GroupNorm as x.view(B, G, -1)) the tensor before the view.
    const bool over_view = n.source_tap >= 0 && !here->records()[static_cast<size_t>(n.source_tap)].shape.empty();
    const int64_t subject_tap = over_view ? n.source_tap : n.input_tap;
    const auto& shape = here->records()[static_cast<size_t>(subject_tap)].shape;
    const int64_t rank = static_cast<int64_t>(shape.size());
    std::vector<int64_t> shape2;
    if (shorter && shorter->collector && here == base)
      shape2 = shorter->collector->records()[static_cast<size_t>(subject_tap)].shape;
    // Roles of the input's axes: from what produced the tensor where the
    // graph tells (recognize::infer_roles), else from the sizes.
    std::vector<std::string> roles(static_cast<size_t>(rank));
    std::string time_from;
    std::vector<int64_t> time_axes;
    std::vector<std::string> graph_roles = resolve_roles(over_view ? n.source_roles : n.input_roles, L);
    if (static_cast<int64_t>(graph_roles.size()) != rank) graph_roles.clear();
    // A second sequence's time axis (kOtherTime): named time, its reduction
    // unconfirmed.
    std::set<int64_t> other_time;
    for (size_t d = 0; d < graph_roles.size(); ++d)
      if (graph_roles[d] == kOtherTime) other_time.insert(static_cast<int64_t>(d));
    std::string layout_from = graph_roles.empty() ? "sizes" : "graph";
    // A time axis found only by its size (no second length to compare, the
    // graph silent about it) is a guess: hidden = 64 next to 64 frames. It is
    // labelled, but no rule treats a reduction over it as one over time.
    bool time_guessed = false;
    if (L.sequence && shape2.size() == shape.size()) {
      for (int64_t d = 0; d < rank; ++d)
        if (shape[static_cast<size_t>(d)] != shape2[static_cast<size_t>(d)]) time_axes.push_back(d);
      time_from = "sizes at lengths " + std::to_string(L.T) + " and " + std::to_string(T2);
    } else if (L.sequence) {
      for (int64_t d = 1; d < rank; ++d) {
        const std::string g = graph_roles.empty() ? std::string("?") : graph_roles[static_cast<size_t>(d)];
        if (shape[static_cast<size_t>(d)] == L.T && (g == "?" || g == "time" || g == "tokens")) time_axes.push_back(d);
      }
      if (time_axes.size() > 1) time_axes.clear();  // time and another axis share the size: undecided
      time_guessed = !time_axes.empty() &&
                     (graph_roles.empty() || graph_roles[static_cast<size_t>(time_axes.front())] == "?");
      time_from = time_axes.empty() ? "undecided (no second length)"
                                    : "size match (" + std::to_string(L.T) + ")" +
                                          (time_guessed ? ", unconfirmed: no second length" : ", and the graph");
    }
    // A LayerNorm/RMSNorm over the last axis of a 4-D (or deeper) tensor
    // whose roles the graph does not give is a channels-last norm
    // ([N, H, W, C] after a permute: ConvNeXt, EdgeNeXt, Swin): its
    // reduced axis holds the channels, not a spatial axis (eval22: timm's
    // edgenext rows read "[batch, channel, spatial, spatial] over spatial").
    const LayerMetrics* owner = s.doc.find_layer(n.module);
    const nlohmann::json info = owner ? owner->info : nlohmann::json::object();
    // The dims a written-out norm's reduction received at run time.
    std::vector<int64_t> run_dims;
    if (n.dims_tap >= 0) run_dims = here->records()[static_cast<size_t>(n.dims_tap)].ints;
    bool channels_last = false;
    if (rank >= 4 && graph_roles.empty() && !L.sequence &&
        (n.op == "layer_norm" || n.op == "rms_norm" || n.op == "layer_norm_pattern" || n.op == "rms_norm_pattern")) {
      channels_last = norm_reduced_axes(n, rank, info, rec.ints.empty() ? run_dims : rec.ints) == std::vector<int64_t>{rank - 1};
      if (channels_last) layout_from = "sizes, channels-last (a LayerNorm over the last axis of a " + std::to_string(rank) + "-D tensor)";
    }
    for (int64_t d = 0; d < rank; ++d) {
      std::string& r = roles[static_cast<size_t>(d)];
      const int64_t sz = shape[static_cast<size_t>(d)];
      const std::string g = graph_roles.empty() ? std::string("?") : graph_roles[static_cast<size_t>(d)];
      const bool changed = std::find(time_axes.begin(), time_axes.end(), d) != time_axes.end();
      if (changed) {
        // An axis that follows the length: time, or batch and time merged
        // ([B*T, C]: its size is B*T at both lengths). A [time, batch, ...]
        // layout's axis 0 is time, whatever its size.
        const bool merged = d == 0 && sz == L.batch * L.T && L.batch > 1 &&
                            (shape2.empty() || shape2[0] == L.batch * T2);
        r = merged ? "batch*time" : "time";
      } else if (other_time.count(d)) {
        r = "time";
      } else if (g != "?" && !(g == "time" && L.sequence && shape2.size() == shape.size())) {
        r = g;
      } else if (d == 0) {
        r = sz == L.batch ? "batch" : (L.sequence && sz == L.batch * L.T) ? "batch*time" : "other";
      } else if (L.sequence && sz == L.batch && d == 1 &&
                 (shape[0] != L.batch || std::find(time_axes.begin(), time_axes.end(), 0) != time_axes.end())) {
        // [time, batch, ...]: the batch moved to axis 1 (axis 0 is not batch-sized).
        r = "batch";
      } else if (L.sequence || rank == 2) {
        // The last axis of a sequence tensor holds its features; the middle
        // axis of [batch, C, time] its channels. Other axes are named by
        // the graph or not at all.
        r = d == rank - 1 || (rank == 3 && d == 1) ? "hidden" : rank == 4 && d == 1 ? "heads" : "unknown";
      } else if (rank >= 4 && graph_roles.empty()) {
        r = channels_last ? (d == rank - 1 ? "channel" : "spatial") : d == 1 ? "channel" : "spatial";
      } else {
        // No time axis and nothing in the graph says what this axis is.
        r = "unknown";
      }
    }
    bool straddle = false;
    int64_t view_groups = 0;
    std::string groups_along;  // the role of the axis a written-out GroupNorm's groups split
    bool groups_split_positions = false;
    std::vector<int64_t> red;
    if (over_view) {
      const auto& vshape = rec.shape;
      const auto vred = norm_reduced_axes(n, static_cast<int64_t>(vshape.size()), info, run_dims);
      red = source_axes(shape, vshape, vred, straddle);
      // Groups only where the view is read as [batch, groups, rest] with
      // the rest reduced: a channels-last port that groups the last axis
      // ([N, H, W, G, C/G] reduced over H, W, C/G) is not read as groups
      // along axis 1 (reduced axes "unknown", no group metrics).
      if (vshape.size() >= 3 && !red.empty()) view_groups = vshape[1];
      // The axis the groups split: the first reduced axis when the group
      // holds only part of it, else the axis before. A channels-last port of
      // tfa.GroupNormalization ([N, H, W, C] viewed as [N, G, H/G, W, C],
      // reduced over all but G) splits H, a spatial axis, and every group
      // holds all the channels: bands of image rows (tensorflow/addons#751).
      // Only a centered statistic over a view is read as a GroupNorm: an
      // RMSNorm whose input was reshaped first (diffusers' RMSNorm on
      // caption tokens viewed back to [batch, tokens, hidden]) has no groups.
      if (!red.empty() && n.op == "group_norm_pattern") {
        int64_t p = 1, q = 1;
        for (int64_t d : vred) p *= vshape[static_cast<size_t>(d)];
        for (int64_t d : red) q *= shape[static_cast<size_t>(d)];
        const int64_t g_axis = q == p ? red.front() - 1 : red.front();
        if (g_axis >= 1 && g_axis < static_cast<int64_t>(roles.size())) {
          groups_along = roles[static_cast<size_t>(g_axis)];
          bool channel_reduced = false, position_reduced = false;
          auto is_position = [](const std::string& r) { return r == "spatial" || r == "time" || r == "tokens"; };
          for (int64_t d : red) {
            if (d >= static_cast<int64_t>(roles.size())) continue;
            const std::string& rd = roles[static_cast<size_t>(d)];
            if (d != g_axis && (rd == "channel" || rd == "hidden")) channel_reduced = true;
            if (is_position(rd)) position_reduced = true;
          }
          const bool positions = is_position(groups_along);
          // A group spans positions too: statistics over the channels alone,
          // per position, are a channels-last LayerNorm written out over a
          // flattened map (Restormer's to_3d: [B, C, H, W] -> [B, H*W, C],
          // mean over C; eval39 read its merged H, W as split into groups).
          groups_split_positions = positions && channel_reduced && position_reduced;
          if (positions) view_groups = 0;  // axis 1 is no channel axis: no num_groups / num_channels
        }
      }
    } else if (!frozen) {
      red = norm_reduced_axes(n, rank, info, rec.ints.empty() ? run_dims : rec.ints);
    }
    nlohmann::json eps = n.args.value("eps", nlohmann::json());
    if (!eps.is_number() && info.contains("eps")) eps = info["eps"];
    std::vector<std::string> red_roles;
    bool r_time = false, r_batch = false, r_time_guess = false, r_graphs = false;
    for (size_t i = 0; i < red.size(); ++i) {
      const int64_t d = red[i];
      std::string r = roles[static_cast<size_t>(d)];
      if ((n.op == "group_norm" || n.op == "group_norm_pattern") && d == 1)
        r = straddle ? r + " (groups straddle channels)" : r + " (within a group)";
      // A graph batch's node axis holds every graph's nodes: statistics over
      // it mix the graphs (PyG's InstanceNorm called without `batch`,
      // pyg-team/pytorch_geometric#9647; eval45 C2).
      const bool all_graphs = r == "node" && L.graph_batch;
      red_roles.push_back(all_graphs ? r + " (the nodes of all " + std::to_string(L.batch) + " graphs)" : r);
      if (r == "time" || r == "batch*time" || r == "tokens") (time_guessed || other_time.count(d) ? r_time_guess : r_time) = true;
      if ((r == "batch" || r == "batch*time" || all_graphs) && L.batch >= 2) r_batch = true;
      r_graphs = r_graphs || all_graphs;
    }
    nlohmann::json row = {{"layer", n.module},     {"op", n.op},         {"input_shape", shape},
                          {"axes", roles},         {"reduced_axes", red}, {"reduced", red_roles},
                          {"eps", eps},            {"layout_from", layout_from}};
    if (over_view) row["view_shape"] = rec.shape;
    if (!shape2.empty()) row["input_shape_at_T2"] = shape2;
    if (!time_from.empty()) row["time_from"] = time_from;
    if (!rec.ints.empty()) row["normalized_shape_at_run_time"] = rec.ints;
    if (!run_dims.empty()) row["dims_at_run_time"] = run_dims;
    if (frozen) row["reduced"] = "none: running statistics (frozen)";
    else if (red.empty())
      row["reduced"] = written_out ? "unknown (dims computed at run time, not recorded)" : "unknown (normalized_shape computed at run time)";
    axes_rows.push_back(row);
    // Once per module (a written-out norm can match as two patterns).
    if (r_time && (n.op == "batch_norm" || n.op == "group_norm" || n.op == "instance_norm" || written_out) &&
        std::find(norms_over_time.begin(), norms_over_time.end(), n.module) == norms_over_time.end())
      norms_over_time.push_back(n.module);

    LayerMetrics* lm = s.doc.find_layer(n.module);
    // Written-out norms may run in the root's own forward (a whole-batch
    // standardization of the input).
    if (!lm || (n.module.empty() && !written_out) || !done.insert(n.module).second) continue;
    auto& m = lm->metrics;
    if (!groups_along.empty()) {
      m["norm.groups_along"] = groups_along;
      m["norm.groups_split_positions"] = groups_split_positions;
    }
    m["norm.op"] = n.op;
    m["norm.input_shape"] = shape_str(shape);
    m["norm.input_layout"] = "[" + join(roles) + "]";
    m["norm.layout_from"] = layout_from;
    m["norm.reduced_axes"] = frozen ? std::string("none (running statistics)") : red.empty() ? std::string("unknown") : join(red_roles);
    // A written-out standardization of a forward argument itself, in a
    // module without parameters (per-utterance CMVN, (x - x.mean(t)) /
    // x.std(t) on the input features) or inline in the forward of a module
    // with children (Time-Series-Library's forecasters, RevIN: means =
    // x_enc.mean(1), stdev over time, de-normalized at the output):
    // normalizing over time is its purpose, like InstanceNorm1d's on the
    // input of a speaker model (AXIS007, info). A leaf norm module with
    // parameters of its own applied to the input over time is not this,
    // unless its parameters are per feature of an axis it keeps (RevIN's
    // affine_weight [num_features] on [batch, time, features] reduced over
    // time: InstanceNorm1d(affine=True) written out, ts-kim/RevIN); a
    // LayerNorm misapplied over time has its weight along the reduced axis.
    bool affine_on_kept_axes = false;
    if (written_out && n.of_model_input && lm->parameters > 0 && lm->leaf && !red.empty()) {
      std::set<int64_t> kept_sizes, reduced_sizes;
      for (int64_t d = 0; d < rank; ++d) {
        const bool reduced = std::find(red.begin(), red.end(), d) != red.end();
        if (reduced) reduced_sizes.insert(shape[static_cast<size_t>(d)]);
        else if (roles[static_cast<size_t>(d)] != "batch") kept_sizes.insert(shape[static_cast<size_t>(d)]);
      }
      bool all_fit = true, any_vector = false;
      for (const auto& mi : s.model.modules) {
        if (mi.path != n.module) continue;
        for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) {
          const int64_t k = p.value.numel();
          if (k <= 1) continue;  // a scalar gain says nothing about axes
          any_vector = true;
          if (!kept_sizes.count(k) || reduced_sizes.count(k)) all_fit = false;
        }
      }
      affine_on_kept_axes = all_fit && any_vector;
    }
    m["norm.input_standardization"] =
        written_out && n.of_model_input && (lm->parameters == 0 || !lm->leaf || affine_on_kept_axes);
    if (m["norm.input_standardization"] == true)
      m["norm.standardization_params"] =
          affine_on_kept_axes ? std::string("a learned affine per feature of the axes it keeps (RevIN's, InstanceNorm1d(affine=True)'s)")
                              : std::string("no learned parameters");
    m["norm.after_convolution"] = n.after_convolution;
    m["norm.written_out"] = written_out || frozen;
    if (written_out || frozen) {
      if (n.args.contains("statistic")) m["norm.statistic"] = n.args["statistic"];
      if (n.args.contains("centered")) m["norm.centered"] = n.args["centered"];
      if (eps.is_number()) m["norm.eps"] = eps;
      std::string dt = n.args.value("upcast", std::string());
      if (dt.empty()) dt = rec.dtype == "Float" ? "float32" : rec.dtype == "Half" ? "float16" : rec.dtype == "BFloat16" ? "bfloat16" : rec.dtype == "Double" ? "float64" : rec.dtype;
      m["norm.computing_dtype"] = dt;
    }
    // A written-out norm over every axis but the batch of a [batch, channel,
    // time] map (Conv-TasNet's global layer norm, gLN: y.mean(1).mean(2)):
    // GroupNorm with one group, the per-utterance normalization of
    // convolutional speech models, not a LayerNorm put over time. Judged as
    // a GroupNorm is: deliberate, except in a causal model (AXIS011) or over
    // padded batches (SEQ001). A LayerNorm over [time, hidden] of [batch,
    // time, hidden] tokens stays AXIS001's.
    bool global_channel_time = false;
    if (!red.empty() && rank == 3 && (n.op == "layer_norm_pattern" || n.op == "layer_norm") &&
        red == std::vector<int64_t>{1, 2}) {
      const std::string& r1 = roles[1];
      const std::string& r2 = roles[2];
      global_channel_time = (r1 == "channel" || r1 == "hidden") && r2 == "time";
    }
    if (!red.empty()) {
      const bool per_example = per_example_op(n.op) && n.op != "group_norm" && n.op != "instance_norm" &&
                               n.op != "group_norm_pattern" && !global_channel_time;
      if (global_channel_time) m["norm.global_over_channels_and_time"] = true;
      m["norm.reduces_time"] = r_time;
      if (r_time_guess) m["norm.reduces_time_unconfirmed"] = true;
      m["norm.reduces_batch"] = r_batch;
      // A per-example norm whose statistics span time: over time only, or
      // over [time, hidden] together (normalized_shape including the time axis).
      m["norm.over_time"] = per_example && r_time;
      // An L2 normalization over the batch axis is judged by its measured
      // batch dependence (AXIS010), not by its axes alone.
      m["norm.over_batch"] = per_example_op(n.op) && r_batch && n.op != "l2_norm_pattern";
      if (r_graphs) m["norm.over_all_graphs"] = true;
      m["norm.batchnorm_over_time"] = (n.op == "batch_norm" || n.op == "batch_norm_pattern") && r_time;
      // BatchNorm1d(T) applied to [batch, time, features]: the "channels" are
      // the time steps, each normalized over batch and features with its own
      // running statistics (a HAR LSTM's nn.BatchNorm1d(n_steps) before the
      // LSTM), which runs only because T equals num_features.
      m["norm.channels_are_time"] = (n.op == "batch_norm" || n.op == "instance_norm") && rank >= 3 &&
                                    roles.size() >= 2 && roles[1] == "time" && !time_guessed;
      // A per-example norm of a 5-D [batch, channel, spatial x3] map (a
      // video clip [B, C, T, H, W] or a volume [B, C, D, H, W]) over some of
      // its spatial axes. Over none (per position), over all three, or over
      // the last two (per frame / per slice: video diffusion's frame-wise
      // GroupNorm) is how such models normalize; any other subset
      // (ConvNeXt issue #112's x.mean([1, 2, 3]) ported to Conv3d: channel,
      // time and height, not width) mixes positions along one axis and not
      // along another, so a frame's output depends on the clip's length.
      if (per_example && n.op != "l2_norm_pattern" && rank == 5 && roles.size() == 5 &&
          roles[2] == "spatial" && roles[3] == "spatial" && roles[4] == "spatial") {
        std::vector<int64_t> sp;
        for (int64_t d : red)
          if (d >= 2) sp.push_back(d);
        const bool partial = !sp.empty() && sp.size() < 3 && sp != std::vector<int64_t>{3, 4};
        m["norm.partial_space"] = partial;
        if (partial) {
          std::vector<std::string> kept, taken;
          for (int64_t d = 2; d < 5; ++d)
            (std::find(sp.begin(), sp.end(), d) == sp.end() ? kept : taken).push_back(std::to_string(d));
          m["norm.partial_space_kept"] = (kept.size() == 1 ? "axis " : "axes ") + join(kept);
          m["norm.partial_space_reduced"] = (taken.size() == 1 ? "axis " : "axes ") + join(taken);
        }
      }
    }
    if (!time_from.empty()) m["norm.time_axis_from"] = time_from;
    if (!shape2.empty() && shorter && shorter->name == "failed" && short_failed_layer == n.module)
      m["norm.fails_at_other_length"] = true;
    nlohmann::json groups = n.args.value("num_groups", nlohmann::json());
    if (!groups.is_number_integer() && info.contains("num_groups")) groups = info["num_groups"];
    if (n.op == "group_norm_pattern" && view_groups > 0) groups = view_groups;
    if ((n.op == "group_norm" || n.op == "group_norm_pattern") && rank >= 2 && groups.is_number_integer()) {
      const int64_t g = groups.get<int64_t>(), c = shape[1];
      m["norm.num_groups"] = g;
      m["norm.num_channels"] = c;
      // Groups that straddle channels (C % G != 0) hold a fraction of a channel more.
      if (g > 0) m["norm.channels_per_group"] = c % g == 0 ? nlohmann::json(c / g) : nlohmann::json(static_cast<double>(c) / static_cast<double>(g));
      if (n.op == "group_norm_pattern") m["norm.groups_straddle_channels"] = straddle;
      // One group per channel, the count read from the input's own channel
      // size at run time: an instance norm written out on purpose (AdaIN's
      // calc_mean_std over feat.view(N, C, -1)), not a GroupNorm whose
      // num_groups was set to C.
      m["norm.groups_are_channels"] = n.op == "group_norm_pattern" && g == c && n.args.value("groups_from_input", false);
      int64_t spatial = 1;
      for (size_t d = 2; d < shape.size(); ++d) spatial *= shape[d];
      m["norm.spatial_size"] = spatial;
    }
  }
  s.doc.probes["axes"] = axes_rows;
  s.doc.model_metrics["arch.attention_ops"] = [&] {
    int64_t k = 0;
    // Attention softmax sites (the softmax of a product of two activations,
    // q @ k^T: not a classifier's output softmax, a router's or a gate's),
    // and scaled_dot_product_attention calls (an nn.MultiheadAttention or
    // TransformerEncoderLayer runs through SDPA).
    for (const auto& t : im.taps())
      if ((t.kind == TapKind::kSoftmaxInput && t.attention) || t.kind == TapKind::kAttentionScores) ++k;
    return k;
  }();
  (void)any_attention;

  if (!L.sequence) return;

  // -- a trace that baked the sample's length
  // A traced graph records x.size(1) as a size only where it reaches a
  // tensor op directly; Python arithmetic on it (HF Funnel's relative
  // positions, a causal mask built with torch.ones(T, T)) is recorded as
  // constants. A tensor factory whose constant arguments are the sample's
  // length, as a position range (arange with step 1 from or to +-T) or a
  // [T, T] table, computes for T positions at every length: the padding
  // and length comparisons then measure the trace, not the model's code.
  {
    std::string at;
    const int64_t T = L.T;
    for (const auto& f : im.constant_factories()) {
      if (T < 4) break;
      bool hit = false;
      if (f.op == "aten::arange" && f.frequency_index) {
        continue;
      } else if (f.op == "aten::split_with_sizes" || f.op == "aten::split") {
        // Unequal split sizes fixed by the trace: sizes computed from the
        // sample's values (a mixture-of-experts dispatch's
        // expert_size.tolist(): HF JetMoe, eval46, where the refilled padding
        // routed tokens otherwise and the file dispatched them wrongly).
        const auto& v = f.ints;
        hit = f.splits_activations && v.size() >= 2 &&
              std::any_of(v.begin(), v.end(), [&](int64_t x) { return x != v.front(); });
        if (hit) {
          at = f.text + " in " + (f.module.empty() ? std::string("the model's own forward") : f.module) +
               ": split sizes computed from the sample's values (a mixture-of-experts dispatch), fixed for any "
               "other input";
          s.doc.model_metrics["seq.trace_baked_length_module"] = f.module;
          break;
        }
        continue;
      } else if (f.op == "aten::arange") {
        // (end), (start, end) or (start, end, step) among the ints.
        const auto& v = f.ints;
        const bool step1 = v.size() < 3 || v[2] == 1 || v[2] == -1;
        if (step1)
          for (size_t i = 0; i < std::min<size_t>(v.size(), 2); ++i)
            if (v[i] == T || v[i] == -T) hit = true;
      } else if (f.op == "aten::as_strided") {
        // Strides of a traced layout: one that is a multiple of T steps over
        // the time axis of the traced length (a false hit only makes the
        // padding and length rules step aside for SEQ008).
        for (int64_t v : f.ints)
          if (v > 1 && v % T == 0) hit = true;
      } else {
        int64_t n = 0;
        for (int64_t v : f.ints) n += v == T ? 1 : 0;
        hit = n >= 2 || (f.op == "aten::eye" && n >= 1);
      }
      if (hit) {
        at = f.text + " in " + (f.module.empty() ? std::string("the model's own forward") : f.module);
        s.doc.model_metrics["seq.trace_baked_length_module"] = f.module;
        break;
      }
    }
    s.doc.model_metrics["seq.trace_baked_length"] = !at.empty();
    if (!at.empty()) {
      s.doc.model_metrics["seq.trace_baked_length_at"] = at;
      s.doc.model_metrics["seq.sample_length"] = T;
    }
  }

  // -- padding and length results
  // Whether the norm at `layer` is a parameter-free standardization of a
  // forward argument (norm.input_standardization, written above).
  auto is_input_standardization = [&](const std::string& layer) {
    const LayerMetrics* nl = s.doc.find_layer(layer);
    if (!nl) return false;
    auto it = nl->metrics.find("norm.input_standardization");
    return it != nl->metrics.end() && it->second.is_boolean() && it->second.get<bool>();
  };
  // A BatchNorm with running statistics normalizes each position alone in
  // an eval-mode pass: no length or padding dependence enters there
  // (eval35 C05: a BatchNorm over the real frames gathered by index_select,
  // whose row axis changes with the length, was named in eval mode).
  std::set<std::string> with_running_stats;  // module paths holding a running_mean tensor
  for (const auto& mi : s.model.modules)
    if (mi.module._ivalue() && mi.module.hasattr("running_mean") && mi.module.attr("running_mean").isTensor())
      with_running_stats.insert(mi.path);
  auto running_stats_bn = [&](const NormOpSite& n) {
    return (n.op == "batch_norm" || n.op == "batch_norm_pattern") && with_running_stats.count(n.module) > 0;
  };
  auto norm_at = [&](const std::string& layer, bool eval_mode = false) {
    // The deviation enters at a normalization whose statistics span time.
    for (const auto& n : im.norm_ops())
      if (n.module == layer) {
        if (eval_mode && running_stats_bn(n)) continue;
        const LayerMetrics* lm = s.doc.find_layer(layer);
        if (lm) {
          auto it = lm->metrics.find("norm.reduces_time");
          if (it != lm->metrics.end() && it->second.is_boolean()) return it->second.get<bool>();
        }
        return true;
      }
    return false;
  };
  // An unmasked pooling over time (mean/sum) or a convolution sliding over
  // time, run by `layer` (or inside it), or a pooling whose output `layer`
  // reads: where padding reaches real positions without a norm.
  struct Entry {
    std::string kind, op, layer;
  };
  auto entry_at = [&](const std::string& layer) -> Entry {
    auto within = [&](const std::string& m) { return m == layer || (!layer.empty() && m.rfind(layer + ".", 0) == 0) || layer.empty(); };
    // Pass 0: an op in the layer's own forward (AllenNLP's CnnEncoder
    // max-pools over time itself: its convolutions' real windows are
    // unchanged, the pooling takes the padded ones in); pass 1: one in a
    // module under it; pass 2: a pooling whose output the layer reads.
    // A convolution module whose kernel is 1 along every time axis it
    // slides over reads no neighbouring position (DGCNN's 1x1 conv over
    // [B, 2C, points, k] edge features: the padded points entered before
    // it, through the kNN gather; eval55).
    auto pointwise_over_time = [&](const nd::OpFact& f, const std::vector<std::string>& roles) {
      at::Tensor weight;
      for (const auto& mi : s.model.modules)
        if (mi.path == f.module)
          for (const auto& p : mi.module.named_parameters(/*recurse=*/false))
            if (p.name == "weight" && p.value.dim() >= 3) weight = p.value;
      if (!weight.defined()) return false;
      bool any = false;  // at least one axis along positions (time, or spatial where a transpose hid time)
      for (int64_t d : f.dims) {
        const int64_t w = d < 0 ? d + static_cast<int64_t>(roles.size()) : d;
        if (w < 0 || w >= static_cast<int64_t>(roles.size())) continue;
        const std::string& r = roles[static_cast<size_t>(w)];
        if (r != "time" && r != "spatial") continue;
        if (w >= weight.dim() || weight.size(w) != 1) return false;
        any = true;
      }
      return any;
    };
    for (int pass = 0; pass < 3; ++pass)
      for (const auto& f : im.op_facts()) {
        const auto roles = resolve_roles(f.input_roles, L);
        bool over_time = false;
        for (int64_t d : f.dims) {
          const int64_t w = d < 0 ? d + static_cast<int64_t>(roles.size()) : d;
          if (w >= 0 && w < static_cast<int64_t>(roles.size()) && roles[static_cast<size_t>(w)] == "time") over_time = true;
        }
        if (!over_time) continue;
        const bool conv = f.op.find("conv") != std::string::npos;
        if (conv && pointwise_over_time(f, roles)) continue;
        const bool reads = std::find(f.consumers.begin(), f.consumers.end(), layer) != f.consumers.end();
        if ((pass == 0 && f.module == layer && !layer.empty()) || (pass == 1 && within(f.module) && !layer.empty()) ||
            (pass == 2 && !conv && reads))
          return {conv ? "convolution" : "pooling", f.op + (conv ? " over time" : " over the time axis"), f.module};
      }
    // The layer is an nn.EmbeddingBag: it sums, averages or max-pools the
    // embeddings of every position of each bag ([B, L] ids, one bag per
    // row), the padding ids among them unless its padding_idx excludes them
    // (DeepFM's multi-hot genre field, pytorch#3194 and #47858: the mean
    // divides by the padded length; eval42 C04). F.embedding_bag flattens
    // the ids before the op, so the graph keeps no axis roles for it.
    if (!layer.empty())
      for (const auto& mi : s.model.modules) {
        if (mi.path != layer || mi.kind != "EmbeddingBag") continue;
        std::string mode = "mean";
        if (mi.module._ivalue() && mi.module.hasattr("mode") && mi.module.attr("mode").isString())
          mode = mi.module.attr("mode").toStringRef();
        std::string why = "no padding_idx excludes the padding ids";
        if (mi.module._ivalue() && mi.module.hasattr("padding_idx") && mi.module.attr("padding_idx").isInt() &&
            mi.module.attr("padding_idx").toInt() >= 0)
          why = "the padding ids appended are not its padding_idx " + std::to_string(mi.module.attr("padding_idx").toInt());
        return {"pooling", "the EmbeddingBag's mode='" + mode + "' reduction over each bag's positions (" + why + ")", layer};
      }
    // The layer is a convolution module whose op's axes the graph names only
    // "spatial" (a transpose to [batch, channel, time] hid the time role:
    // WeNet's ConvolutionModule.depthwise_conv after x.transpose(1, 2)):
    // with a kernel wider than 1 it reads neighbouring positions along that
    // axis, the padded ones among them; the measured change at real positions
    // starts in it (eval15 case 01).
    //
    // A convolution module with kernel 1 along time mixes no positions, so
    // its input already differed, computed by ops outside any module
    // (DGCNN's kNN gather of neighbour features over the padded points in
    // EdgeConv's forward, eval55): the entry when nothing below names one.
    Entry pointwise_input;
    if (!layer.empty())
      for (const auto& f : im.op_facts()) {
        if (f.module != layer || f.op.find("conv") == std::string::npos) continue;
        const auto roles = resolve_roles(f.input_roles, L);
        if (pointwise_input.kind.empty() && pointwise_over_time(f, roles)) {
          const auto dot = layer.rfind('.');
          const std::string parent = dot == std::string::npos ? std::string("the model") : layer.substr(0, dot);
          pointwise_input = {"input", "the ops computing its input in " + parent + "'s forward (" + layer +
                                          " has kernel 1 along time and mixes no positions)", layer};
        }
        bool spatial = !f.dims.empty();
        for (int64_t d : f.dims) {
          const int64_t w = d < 0 ? d + static_cast<int64_t>(roles.size()) : d;
          const std::string role = w >= 0 && w < static_cast<int64_t>(roles.size()) ? roles[static_cast<size_t>(w)] : "";
          if (role != "spatial" && role != "time") spatial = false;
        }
        if (!spatial) continue;
        int64_t widest = 0;
        for (const auto& mi : s.model.modules)
          if (mi.path == layer)
            for (const auto& p : mi.module.named_parameters(/*recurse=*/false))
              if (p.name == "weight" && p.value.dim() >= 3)
                for (int64_t d = 2; d < p.value.dim(); ++d) widest = std::max(widest, p.value.size(d));
        if (widest > 1)
          return {"convolution", f.op + " over the padded axis (kernel " + std::to_string(widest) +
                                     "; the graph names the axis spatial)", f.module};
      }
    // A pooling op (max_pool1d, avg_pool1d, their adaptive forms) whose
    // output the layer reads or that runs in it, over axes the graph names
    // spatial or not at all: a TextCNN's F.max_pool1d(h, h.size(2)) over the
    // conv2d's [N, Co, W - K + 1] windows of the padded sentence (eval27
    // C02). Its windows at real positions are unchanged; the pooling takes
    // the padded ones in.
    for (const auto& f : im.op_facts()) {
      if (f.op.find("pool") == std::string::npos) continue;
      const bool reads = std::find(f.consumers.begin(), f.consumers.end(), layer) != f.consumers.end();
      if (!reads && !(!layer.empty() && within(f.module))) continue;
      const auto roles = resolve_roles(f.input_roles, L);
      bool padded_axis = !f.dims.empty();
      for (int64_t d : f.dims) {
        const int64_t w = d < 0 && !roles.empty() ? d + static_cast<int64_t>(roles.size()) : d;
        const std::string role = w >= 0 && w < static_cast<int64_t>(roles.size()) ? roles[static_cast<size_t>(w)] : "?";
        if (w == 0 || !(role == "spatial" || role == "time" || role == "?" || role == "unknown" || role.empty()))
          padded_axis = false;
      }
      if (padded_axis) {
        std::string axes;
        for (int64_t d : f.dims) axes += (axes.empty() ? "" : ", ") + std::to_string(d);
        return {"pooling", f.op + " over axis " + axes + ", which the padding lengthens (the graph does not name it time)",
                f.module};
      }
    }
    // A mean/sum whose output the layer reads, over an axis whose role the
    // graph does not show (the tensor came out of an op that hides roles, such
    // as the fused TransformerEncoder layer): `h.mean(dim=1)` of
    // last_hidden_state. Only axes that cannot be the batch (not 0) nor, for
    // a [batch, time, hidden] tensor, the hidden axis (-1); the measured
    // change at real positions is the evidence, this names the op.
    for (const auto& f : im.op_facts()) {
      if (f.op.find("conv") != std::string::npos || f.dims.empty()) continue;
      if (std::find(f.consumers.begin(), f.consumers.end(), layer) == f.consumers.end()) continue;
      const auto roles = resolve_roles(f.input_roles, L);
      bool candidate = true;
      for (int64_t d : f.dims) {
        const int64_t w = d < 0 && !roles.empty() ? d + static_cast<int64_t>(roles.size()) : d;
        const std::string role = w >= 0 && w < static_cast<int64_t>(roles.size()) ? roles[static_cast<size_t>(w)] : "?";
        const bool unknown = role == "?" || role == "unknown" || role.empty();
        if (!unknown || w == 0 || d == -1) candidate = false;
      }
      if (candidate)
        return {"pooling", f.op + " over axis " + std::to_string(f.dims.front()) + " (read as the time axis: its role is not in the graph)",
                f.module};
    }
    return pointwise_input;
  };
  auto kind_of_layer = [&](const std::string& layer) -> std::string {
    if (layer.empty()) return "output";
    if (norm_at(layer)) return "normalization";
    if (const Entry e = entry_at(layer); !e.kind.empty()) return e.kind;
    for (const auto& t : im.taps())
      if (t.kind == TapKind::kSoftmaxInput && (t.module == layer || t.module.rfind(layer + ".", 0) == 0)) return "attention";
    // A convolution or pooling module whose input axes the graph does not
    // name (HF Canine's Conv1d after a transpose): named by its class.
    if (const LayerMetrics* lm = s.doc.find_layer(layer)) {
      if (lm->kind.find("Conv") != std::string::npos) return "convolution";
      if (lm->kind.find("Pool") != std::string::npos) return "pooling";
    }
    return "other";
  };
  // The normalization over time through which the change reaches real
  // positions: the first changed module when it is one; else the first norm
  // over time whose output changes at least 3x more than any module before it
  // (a norm passes a relative change on at about its size; three times more
  // is its own statistics taking in the padded or extra positions: an
  // InstanceNorm over time after a convolution that reads one padded frame at
  // the boundary). "" when none.
  auto norm_route = [&](const Deviation& d, bool eval_mode) -> std::string {
    if (!d.first.empty() && norm_at(d.first, eval_mode)) return d.first;
    if (!(d.root > kChanged)) return "";
    for (size_t j = 0; j < d.modules.size(); ++j) {
      const auto& [n, rn] = d.modules[j];
      if (n.empty() || !(rn > kChanged) || !norm_at(n, eval_mode)) continue;
      // Modules before it, leaving out its ancestors (a container's output
      // already holds what the norm did).
      double before = 0;
      for (size_t i = 0; i < j; ++i) {
        const std::string& m = d.modules[i].first;
        if (m.empty() || n.rfind(m + ".", 0) == 0) continue;
        before = std::max(before, d.modules[i].second);
      }
      if (before > 0 && rn >= 3 * before) return n;
    }
    return "";
  };
  auto dev_json = [&](const Deviation& d) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& [m, r] : d.modules)
      if (r > kChanged || m.empty()) j.push_back({{"layer", m}, {"rel_diff", finite_or_null(r)}});
    return j;
  };
  nlohmann::json jp = {{"padded_to", L.T + P}, {"from", L.T}, {"mode_note", "train mode: batch statistics; eval mode: running statistics"}};
  if (!pad_retry_note.empty()) {
    jp["note"] = pad_retry_note;
    // Said where a reader of the text report sees it: the padding finding
    // (or its absence) rests on the fallback (eval35 C02: the refill cannot
    // show a norm over positions the model zeroes).
    s.doc.assumptions.push_back("the padding probe: " + pad_retry_note);
  }
  // A model that raises in eval at a shorter and at every longer length
  // runs only at its sample's length (Whisper's encoder checks for 3000 mel
  // frames; a fixed positional table without slicing): that is what the
  // model is, not a failure of the probe. Both probes say so as "skipped"
  // with the two errors; the metrics (pad.error, seqlen.error) stay, for the
  // rules that read a raise as evidence. An exported program is left as
  // "error": its shapes may be fixed by the export (no dynamic_shapes), not
  // by the model, and the recorded error says how to re-export.
  const bool fixed_length = s.model.kind != "exported" && !short_error.empty() && !pad_error.empty() && short_kind == error_kind::kModelRun &&
                            pad_kind == error_kind::kModelRun && pad_pass == "eval-seq-padded";
  std::string fixed_reason, longer;  // longer: the padded lengths tried, "48, 34, 33"
  for (int64_t q : pad_tries) longer += (longer.empty() ? "" : ", ") + std::to_string(L.T + q);
  if (fixed_length) {
    fixed_reason = "the model runs only at its sample's length, " + std::to_string(L.T) +
                   " positions: in eval it raised at " + std::to_string(T2) + " (" + short_error + ") and at " +
                   longer + " (" + pad_error + "); --seq-dim names another axis if this one is not the time axis";
    s.doc.model_metrics["seq.fixed_length"] = true;
  }
  // Shorter ran, every longer padding raised in the model's own code: the
  // sample is already at the longest length the model takes (a learned
  // position table, a gain of shape [context, d] sliced to the length).
  // Padding cannot run on this batch; that is the batch's length, not a
  // failure of the probe (TorchScript only, as above).
  const bool at_longest = !fixed_length && s.model.kind != "exported" && short_error.empty() && !pad_error.empty() &&
                          pad_kind == error_kind::kModelRun && pad_pass == "eval-seq-padded";
  if (at_longest) {
    fixed_reason = "the sample's " + std::to_string(L.T) +
                   " positions are the most the model takes: in eval it ran at " + std::to_string(T2) +
                   " and raised at " + longer + " (" + pad_error +
                   "); give a batch shorter than the model's maximum length to measure padding";
  }
  if (!pad_error.empty()) {
    jp["status"] = fixed_length || at_longest ? "skipped" : "error";
    if (fixed_length || at_longest) jp["reason"] = fixed_reason;
    jp["pass"] = pad_pass;
    jp["error"] = {{"kind", pad_kind}, {"message", pad_error}};
    s.doc.model_metrics["pad.error"] = pad_error;
  }
  // The nearest ancestor of `first` that ran an attention (softmax of q @
  // k^T, or SDPA) in its own forward before `first` did, when `first` runs
  // none itself: "" otherwise. A projection after the attention (timm's
  // Attention.proj, HF MPT's attn.out_proj) is the first module whose output
  // changes, the attention in its parent is where the positions mixed.
  auto attention_entry = [&](const std::string& first, const Collector& col) -> std::string {
    if (first.empty()) return "";
    auto fire = [&](const TapSite& t) { return col.records()[static_cast<size_t>(t.id)].first_fire; };
    auto attention_tap = [](const TapSite& t) {
      return (t.kind == TapKind::kSoftmaxInput && t.attention) || t.kind == TapKind::kAttentionScores;
    };
    int64_t first_out = -1;
    for (const auto& t : im.taps()) {
      if (t.kind == TapKind::kModuleOutput && t.module == first && fire(t) >= 0 && (first_out < 0 || fire(t) < first_out))
        first_out = fire(t);
      if (attention_tap(t) && (t.module == first || t.module.rfind(first + ".", 0) == 0)) return "";
    }
    if (first_out < 0) return "";
    std::string parent = first;
    for (size_t dot = parent.rfind('.'); dot != std::string::npos; dot = parent.rfind('.')) {
      parent = parent.substr(0, dot);
      for (const auto& t : im.taps())
        if (attention_tap(t) && t.module == parent && fire(t) >= 0 && fire(t) < first_out) return parent;
    }
    return "";
  };
  Deviation dt, de;
  if (padded_eval) {
    de = deviations(im, *ref_eval->collector, *padded_eval->collector);
    jp["eval"] = {{"rel_diff", finite_or_null(de.root)}, {"first_layer", de.first}, {"changed", dev_json(de)}};
    s.doc.model_metrics["pad.rel_diff_eval"] = finite_or_null(de.root);
  }
  if (padded_train) {
    dt = deviations(im, *ref_train->collector, *padded_train->collector);
    jp["train"] = {{"rel_diff", finite_or_null(dt.root)}, {"first_layer", dt.first}, {"changed", dev_json(dt)}};
    s.doc.model_metrics["pad.rel_diff_train"] = finite_or_null(dt.root);
  }
  if (padded_eval || padded_train) {
    const bool train_worse = padded_train && (!padded_eval || !(de.root >= dt.root));
    const Deviation& w = train_worse ? dt : de;
    s.doc.model_metrics["pad.rel_diff"] = finite_or_null(w.root);
    s.doc.model_metrics["pad.mode"] = train_worse ? "train" : "eval";
    s.doc.model_metrics["pad.padded_to"] = L.T + P;
    // The padding comparison changed the length of a traced file that built
    // tensors sized for the sample's length (seq.trace_baked_length): the
    // change may be the trace's (HF LED's Longformer attention, eval30: its
    // eager model is exact at every padded length). Refilling the sample's
    // own padding keeps the length, and the trace's sizes with it.
    {
      auto baked = s.doc.model_metrics.find("seq.trace_baked_length");
      s.doc.model_metrics["pad.length_changed_in_baked_trace"] =
          P > 0 && baked != s.doc.model_metrics.end() && baked->second == true;
    }
    // Padding ids and no padding mask, at exactly the length of a position
    // table the model holds (an Embedding, or a [T, D] / [1, T, D]
    // parameter, of num_embeddings T beside the token embedding): padded to
    // the model's maximum length, as a model trained with fixed-length
    // padding and no mask is fed (SigLIP's text tower: padding="max_length",
    // the pad tokens part of every training input, the last position read;
    // eval35 B01). Refilling those pads changes the input itself.
    {
      std::string table;
      if (L.pad_tokens >= 0 && L.mask < 0 && L.lengths < 0 && L.T > 1)
        for (const auto& mi : s.model.modules) {
          if (!table.empty()) break;
          for (const auto& pr : mi.module.named_parameters(/*recurse=*/false)) {
            const at::Tensor& w = pr.value;
            const bool rows_t = (w.dim() == 2 && w.size(0) == L.T) || (w.dim() == 3 && w.size(0) == 1 && w.size(1) == L.T);
            if (!rows_t) continue;
            // (A token embedding whose vocabulary equals T by coincidence
            // counts too: the finding is then stated at info, the safe side.)
            table = (mi.path.empty() ? std::string() : mi.path + ".") + pr.name;
            break;
          }
        }
      s.doc.model_metrics["pad.fixed_length_design"] = !table.empty();
      if (!table.empty())
        s.doc.model_metrics["pad.fixed_length_note"] =
            "the sample is padded with padding ids to " + std::to_string(L.T) + " positions, the size of the position table " +
            table + ", and the model takes no padding mask: assumed trained and served with fixed-length padding (the pads "
            "are part of every input, as SigLIP's text tower is trained)";
    }
    s.doc.model_metrics["pad.how"] = !pad_how.empty() ? pad_how
                                                      : "the batch is padded from " + std::to_string(L.T) + " to " +
                                                            std::to_string(L.T + P) + " positions" +
                                                            (L.left_padded ? " on the left, as the sample's mask pads" : "");
    s.doc.model_metrics["pad.first_layer"] = w.first;
    s.doc.model_metrics["pad.first_layer_kind"] = w.first.empty() && !(w.root > kChanged) ? "none" : kind_of_layer(w.first);
    const std::string via = norm_route(w, /*eval_mode=*/!train_worse);
    s.doc.model_metrics["pad.via_norm"] = !via.empty();
    if (!via.empty()) s.doc.model_metrics["pad.norm_layer"] = via;
    // The norm normalizes a convolution's output (a Tacotron postnet's
    // BatchNorm1d, a video model's BatchNorm3d): SEQ001 leads with masked
    // statistics, not a per-token LayerNorm (eval52 video_bn3d_pad_fault).
    {
      bool after_conv = false;
      if (!via.empty())
        if (const LayerMetrics* nl = s.doc.find_layer(via)) {
          auto it = nl->metrics.find("norm.after_convolution");
          after_conv = it != nl->metrics.end() && it->second == true;
        }
      s.doc.model_metrics["pad.norm_after_convolution"] = after_conv;
    }
    // The other route: the eval pass shows the larger change through one
    // entry (a pooling that ignores the lengths, NeMo's StatsPoolLayer before
    // its fix), while in train mode the padding also enters a BatchNorm's
    // batch statistics earlier on (eval32 C03). Only the mode with the larger
    // change names its entry above; this one is SEQ009's.
    {
      std::string train_via;
      if (padded_train && !train_worse && via.empty() && dt.root > kChanged) train_via = norm_route(dt, /*eval_mode=*/false);
      s.doc.model_metrics["pad.train_norm_layer"] = train_via;
    }
    // The converse (eval40 C03, NeMo's QuartzNet exported with
    // conv_mask=False): the train pass shows the larger change, through a
    // BatchNorm's batch statistics (SEQ001), while in eval mode, with running
    // statistics, padding still reaches real positions through a convolution
    // or a pooling over time that no mask excludes it from. That route is the
    // one inference takes, and masking it is a different fix: SEQ011's.
    {
      Entry ee;
      if (train_worse && !via.empty() && padded_eval && de.root > kChanged && norm_route(de, /*eval_mode=*/true).empty())
        ee = entry_at(de.first);
      s.doc.model_metrics["pad.eval_entry_layer"] = ee.kind.empty() ? std::string() : ee.layer;
      if (!ee.kind.empty()) {
        s.doc.model_metrics["pad.eval_entry_kind"] = ee.kind;
        s.doc.model_metrics["pad.eval_entry_op"] = ee.op;
        s.doc.model_metrics["pad.eval_first_layer"] = de.first;
        jp["eval"]["entry"] = {{"kind", ee.kind}, {"op", ee.op}, {"layer", ee.layer}};
      }
    }
    // Not through a norm: a pooling over time or a convolution over time.
    const Entry e = (w.root > kChanged && via.empty()) ? entry_at(w.first) : Entry{};
    s.doc.model_metrics["pad.via_pooling_or_conv"] = !e.kind.empty();
    if (!e.kind.empty()) {
      s.doc.model_metrics["pad.entry_kind"] = e.kind;
      s.doc.model_metrics["pad.entry_op"] = e.op;
      s.doc.model_metrics["pad.entry_layer"] = e.layer;
      jp["entry"] = {{"kind", e.kind}, {"op", e.op}, {"layer", e.layer}};
    }
    s.doc.model_metrics["pad.norms_over_time"] = join(norms_over_time);
    // A convolution or pooling lets the padding into the frames next to it;
    // a normalization over time after it (Moonshine's one-group GroupNorm
    // over the conv features, eval29) then carries the change into every
    // real position through its statistics.
    {
      std::string spread;
      const LayerMetrics* el = e.kind.empty() ? nullptr : s.doc.find_layer(e.layer);
      // In an eval-mode comparison a BatchNorm reads its running
      // statistics: it spreads nothing (eval55: FastSpeech2Conformer's
      // conv_module.norm was said to carry the change; attention did).
      const auto pm = s.doc.model_metrics.find("pad.mode");
      const bool eval_mode = pm != s.doc.model_metrics.end() && pm->second == "eval";
      for (const auto& nm : norms_over_time) {
        const LayerMetrics* nl = s.doc.find_layer(nm);
        if (!el || !nl || nl->exec_order <= el->exec_order || nm == e.layer) continue;
        if (eval_mode) {
          const auto op = nl->metrics.find("norm.op");
          const std::string o = op != nl->metrics.end() && op->second.is_string() ? op->second.get<std::string>() : "";
          if (o == "batch_norm" || o == "batch_norm_pattern" || o == "frozen_batch_norm") continue;
        }
        spread = nm;
        break;
      }
      s.doc.model_metrics["pad.spread_by_norm"] = spread;
      s.doc.model_metrics["pad.spread_note"] =
          spread.empty() ? std::string()
                         : "; " + spread + ", a normalization over time after it, then carries the change into every "
                                           "real position through its statistics";
    }
    // Hypothetical padding: nothing says the model is fed padded batches
    // (no mask, lengths, pad token or --pad-value), whatever the route: a
    // convolution's edge frames, a pooling over time, a standardization of
    // the input, a BatchNorm's train-mode batch statistics (M5's fixed
    // one-second clips, Tacotron's postnet), and also a GroupNorm or
    // InstanceNorm over time, which takes padding in per example in both
    // modes (pytorch#81985) but only when the model is given padded batches:
    // an error for it is a false alarm on a model trained on fixed-length
    // segments (asteroid's Conv-TasNet with gLN, eval48). SEQ006 says it as
    // info, with what was assumed. Other routes (an attention without a
    // mask, ...) are SEQ004's, which needs a padding input.
    s.doc.model_metrics["pad.hypothetical"] = declared.empty() && (!via.empty() || !e.kind.empty());
    // SEQ006's words for what the model was given: a forward with an
    // optional tensor argument the batch left out (VITS' x_mask: Optional[Tensor]
    // = None) may take a mask, just not in this batch (eval25).
    {
      std::string unfed;
      for (const auto& a : s.model.args) {
        if (!a.has_default || a.type.find("Tensor") == std::string::npos) continue;
        bool given = false;
        for (const auto& v : s.args) given = given || v.name == a.name;
        if (!given) unfed += (unfed.empty() ? "" : ", ") + a.name;
      }
      // (A mask or lengths argument the batch gives: said as such, eval40
      // C03's JSON read "no padding mask or lengths" beside "lengths length".)
      s.doc.model_metrics["pad.mask_note"] =
          L.mask >= 0      ? "it takes the padding mask " + s.args[static_cast<size_t>(L.mask)].name
          : L.lengths >= 0 ? "it takes the lengths " + s.args[static_cast<size_t>(L.lengths)].name
          : unfed.empty() ? std::string("it takes no padding mask or lengths")
                        : "the batch gives no padding mask or lengths (forward's optional " + unfed +
                              (unfed.find(',') == std::string::npos ? " was" : " were") + " left at the default)";
    }
    // Where the change enters, whatever the route (SEQ006 names it).
    auto layer_label = [](const std::string& p) { return p.empty() ? std::string("<root>") : p; };
    std::string enters = !via.empty() ? via : !e.kind.empty() ? e.layer : w.first;
    std::string through = !via.empty() ? "the statistics of " + layer_label(via) + ", a normalization over time"
                          : !e.kind.empty() ? e.op + " (" + e.kind + ") in " + layer_label(e.layer)
                                            : layer_label(w.first) + ", the first module whose output changes";
    // The first changed module does not mix positions itself (timm's
    // Attention.proj, a Linear run after F.scaled_dot_product_attention in
    // its parent's own forward): the change came in through the attention of
    // the nearest ancestor that ran one, before this module.
    if (via.empty() && e.kind.empty() && (padded_eval || padded_train)) {
      const std::string parent = attention_entry(w.first, train_worse ? *padded_train->collector : *padded_eval->collector);
      if (!parent.empty()) {
        enters = parent;
        through = "the attention in " + parent + "'s own forward, which runs before " + w.first + ", the first module whose output changes";
        s.doc.model_metrics["pad.first_layer_kind"] = "attention";
      }
    }
    s.doc.model_metrics["pad.enters_at"] = enters;
    s.doc.model_metrics["pad.enters_through"] = through;
  }
  jp["norms_over_time"] = norms_over_time;
  s.doc.probes["padding"] = jp;

  nlohmann::json js = {{"lengths", {L.T, T2}}, {"mode", "eval"}};
  s.doc.model_metrics["seqlen.lengths"] = std::to_string(L.T) + " and " + std::to_string(T2);
  if (!short_error.empty()) {
    js["status"] = fixed_length ? "skipped" : "error";
    if (fixed_length) js["reason"] = fixed_reason;
    js["pass"] = short_pass;
    js["error"] = {{"kind", short_kind}, {"message", short_error}};
    js["failed_layer"] = short_failed_layer;
    s.doc.model_metrics["seqlen.error"] = short_error;
    s.doc.model_metrics["seqlen.failed_layer"] = short_failed_layer;
  } else if (shorter) {
    Deviation d = deviations(im, *ref_eval->collector, *shorter->collector);
    // An output without a time axis (SASRec's last-position readout, a
    // pooled [B, classes]) is not compared (Collector::time_cut): the last
    // module output that has one stands for it.
    std::string rel_at;
    if (std::isnan(d.root) && !d.modules.empty()) {
      rel_at = d.modules.back().first;
      d.root = d.modules.back().second;
    }
    s.doc.model_metrics["seqlen.rel_diff_at"] = rel_at.empty() ? std::string("output") : rel_at;
    // How far back from the cut the model's output changes (its first
    // tensor, along the first axis whose size the cut changed): a
    // frame-based encoder/decoder (Conv-TasNet's Conv1d(1, N, 16, stride 8)
    // and overlap-add) lets its last output samples read the next frame, a
    // lookahead of under one window by design; a norm or an attention over
    // time reaches every earlier position. 1 (everything) where it cannot
    // be located (an output without a time axis).
    {
      double fraction = 1;
      int64_t lookahead = -1;
      const auto ra = Session::output_tensors(ref_eval->output), rb = Session::output_tensors(shorter->output);
      if (!ra.empty() && !rb.empty() && ra[0].is_floating_point() && rb[0].is_floating_point() && ra[0].dim() == rb[0].dim()) {
        at::Tensor a = ra[0].detach().to(at::kDouble), b = rb[0].detach().to(at::kDouble);
        int64_t axis = -1;
        bool shaped = false;
        for (int64_t k = 0; k < a.dim() && axis < 0; ++k)
          if (a.size(k) != b.size(k)) axis = k;
        if (axis >= 0 && std::min(a.size(axis), b.size(axis)) > 0 && a.numel() > 0 && b.numel() > 0) {
          const int64_t m = std::min(a.size(axis), b.size(axis));
          // Every axis narrowed to the common size (a pooled or strided
          // axis may differ too), then [positions, everything else].
          for (int64_t k = 0; k < a.dim(); ++k) {
            const int64_t c = std::min(a.size(k), b.size(k));
            a = a.narrow(k, 0, c);
            b = b.narrow(k, 0, c);
          }
          a = a.movedim(axis, 0).reshape({m, -1});
          b = b.movedim(axis, 0).reshape({m, -1});
          shaped = true;
        }
        if (shaped && a.numel() > 0 && a.sizes() == b.sizes()) {
          const int64_t m = a.size(0);
          const double scale = a.square().mean().sqrt().item<double>();
          const at::Tensor per = (a - b).abs().amax(1);
          const at::Tensor changed = at::isfinite(per).logical_not().logical_or(per > 1e-3 * scale);
          const at::Tensor idx = changed.nonzero();
          lookahead = idx.numel() > 0 ? m - idx[0][0].item<int64_t>() : 0;
          fraction = m > 0 ? static_cast<double>(lookahead) / static_cast<double>(m) : 1.0;
        }
      }
      if (lookahead >= 0) s.doc.model_metrics["seqlen.lookahead"] = lookahead;
      s.doc.model_metrics["seqlen.lookahead_fraction"] = fraction;
    }
    js["rel_diff"] = finite_or_null(d.root);
    js["first_layer"] = d.first;
    js["changed"] = dev_json(d);
    s.doc.model_metrics["seqlen.rel_diff"] = finite_or_null(d.root);
    s.doc.model_metrics["seqlen.first_layer"] = d.first;
    s.doc.model_metrics["seqlen.first_layer_kind"] = d.first.empty() && !(d.root > kChanged) ? "none" : kind_of_layer(d.first);
    const std::string via = norm_route(d, /*eval_mode=*/true);
    s.doc.model_metrics["seqlen.via_norm"] = !via.empty();
    if (!via.empty()) {
      s.doc.model_metrics["seqlen.norm_layer"] = via;
      // The norm is a deliberate standardization of the input over time:
      // its length dependence is its design (AXIS007 says so, SEQ002 yields).
      s.doc.model_metrics["seqlen.via_input_standardization"] = is_input_standardization(via);
    } else {
      s.doc.model_metrics["seqlen.via_input_standardization"] = false;
    }
    // Whether every attention of the reference pass masks the future (a
    // causal decoder): then an output may not depend on later tokens, and
    // cutting them must leave the earlier positions as they were (SEQ005).
    int64_t sites = 0, causal = 0;
    for (const auto& t : im.taps()) {
      if ((t.kind != TapKind::kSoftmaxInput && t.kind != TapKind::kAttentionScores) || !t.attention) continue;
      const TapRecord& r = ref_eval->collector->records()[static_cast<size_t>(t.id)];
      if (r.calls == 0) continue;
      ++sites;
      if (r.causal_calls == r.calls) ++causal;
    }
    s.doc.model_metrics["seqlen.attention_sites"] = sites;
    s.doc.model_metrics["seqlen.causal_attention"] = sites > 0 && causal == sites;
    // SEQ007's closing words: an unmasked attention, or, with no attention
    // at all, an op over time that reads ahead (a TCN's convolution padded
    // on both sides: eval23 case 01).
    s.doc.model_metrics["seqlen.lookahead_note"] =
        sites > 0 ? ", and not every attention masks the future (" + std::to_string(causal) + " of " +
                        std::to_string(sites) + " attention sites do)"
                  : ", and the model has no attention: a convolution padded on both sides or another op over time "
                    "reads later positions";
    // Where later positions first reach earlier ones: the first changed
    // module, or the attention in its parent's own forward before it.
    const std::string parent = via.empty() ? attention_entry(d.first, *shorter->collector) : std::string();
    s.doc.model_metrics["seqlen.enters_at"] = !via.empty() ? via : !parent.empty() ? parent : d.first;
    // Whether the model is meant to be causal: --causal, or a module whose
    // library declares it a causal LM by its class (Hugging Face's
    // *ForCausalLM). Nothing in the computation says so; the name is the
    // library's contract, and the report states which was used.
    std::string intent_from = s.opt.causal ? "--causal" : "";
    if (intent_from.empty())
      for (const auto& mi : s.model.modules) {
        const std::string& k = mi.kind;
        if (k.size() > 11 && k.compare(k.size() - 11, 11, "ForCausalLM") == 0) {
          intent_from = "class " + k + " of " + (mi.path.empty() ? std::string("the model") : mi.path) +
                        " (a causal language model by its library's name)";
          break;
        }
      }
    s.doc.model_metrics["seqlen.causal_intent"] = !intent_from.empty();
    s.doc.model_metrics["seqlen.causal_intent_from"] = intent_from;
    // A norm with per-example statistics over time (GroupNorm or
    // InstanceNorm over [B, C, T], their written-out forms) in a causal
    // model: every position is normalized with statistics of later ones
    // (neural_sp's streaming Conformer, GroupNorm on the depthwise conv's
    // [B, C, T] output; fixed by normalizing each frame). A LayerNorm over
    // time is AXIS001's (norm.over_time); a BatchNorm uses running
    // statistics at inference.
    const bool causal_model = !intent_from.empty() || (sites > 0 && causal == sites);
    const std::string causal_from =
        !intent_from.empty() ? intent_from : "every one of its " + std::to_string(sites) + " attention site(s) masks the future";
    for (auto& l : s.doc.layers) {
      auto rt = l.metrics.find("norm.reduces_time");
      auto op = l.metrics.find("norm.op");
      if (rt == l.metrics.end() || op == l.metrics.end() || !op->second.is_string()) continue;
      const std::string o = op->second.get<std::string>();
      const bool batch_stats = o == "batch_norm" || o == "batch_norm_pattern" || o == "frozen_batch_norm";
      auto flag = [&](const char* k) {
        auto it = l.metrics.find(k);
        return it != l.metrics.end() && it->second == true;
      };
      const bool leak = causal_model && rt->second == true && !batch_stats && !flag("norm.over_time") &&
                        !flag("norm.reduces_batch") && !flag("norm.reduces_time_unconfirmed");
      l.metrics["norm.time_stats_in_causal_model"] = leak;
      // A GroupNorm (nn.GroupNorm, or one written out over x.view(B, G, -1))
      // used over a sequence that way is the catalog's groupnorm-group-size
      // ("... or used over sequences"): AXIS012's, not AXIS011's.
      l.metrics["norm.groupnorm_time_in_causal_model"] = leak && (o == "group_norm" || o == "group_norm_pattern");
      if (leak) l.metrics["norm.causal_from"] = causal_from;
    }
  }
  s.doc.probes["sequence_length"] = js;
}

const std::vector<std::string>& sequence_writes() {
  static const std::vector<std::string> names = {
      "arch.attention_ops", "layout.", "norm.batchnorm_over_time", "norm.centered", "norm.channels_are_time", "norm.channels_per_group", "norm.groups_along",
      "norm.groups_split_positions", "norm.groups_straddle_channels", "norm.global_over_channels_and_time",
      "norm.computing_dtype", "norm.eps", "norm.fails_at_other_length", "norm.input_layout",
      "norm.after_convolution", "norm.time_stats_in_causal_model", "norm.groupnorm_time_in_causal_model", "norm.causal_from", "norm.input_shape", "norm.input_standardization", "norm.standardization_params", "norm.layout_from", "norm.num_channels", "norm.num_groups", "norm.groups_are_channels", "norm.op",
      "norm.over_batch", "norm.over_all_graphs", "norm.over_time", "norm.partial_space", "norm.partial_space_kept", "norm.partial_space_reduced", "norm.reduced_axes", "norm.reduces_batch", "norm.reduces_time",
      "norm.reduces_time_unconfirmed", "norm.spatial_size", "norm.statistic", "norm.time_axis_from", "norm.written_out", "pad.entry_kind",
      "pad.enters_at", "pad.enters_through", "pad.entry_layer", "pad.fixed_length_design", "pad.fixed_length_note", "pad.entry_op", "pad.error", "pad.first_layer",
      "pad.first_layer_kind", "pad.how", "pad.hypothetical", "pad.mask_note", "pad.mode", "pad.padding_declared", "pad.padding_declared_from",
      "pad.norm_layer", "pad.norm_after_convolution", "pad.norms_over_time", "pad.padded_to", "pad.spread_by_norm", "pad.spread_note", "pad.length_changed_in_baked_trace",
      "pad.rel_diff", "pad.rel_diff_eval", "pad.eval_entry_layer", "pad.eval_entry_kind", "pad.eval_entry_op", "pad.eval_first_layer", "pad.rel_diff_train", "pad.train_norm_layer", "pad.via_norm", "pad.via_pooling_or_conv",
      "seq.fixed_length", "seq.trace_baked_length", "seq.trace_baked_length_at", "seq.trace_baked_length_module", "seq.sample_length", "seqlen.error", "seqlen.failed_layer", "seqlen.attention_sites", "seqlen.causal_attention", "seqlen.causal_intent", "seqlen.causal_intent_from", "seqlen.enters_at", "seqlen.first_layer", "seqlen.first_layer_kind", "seqlen.lengths", "seqlen.lookahead", "seqlen.lookahead_fraction",
      "seqlen.norm_layer", "seqlen.lookahead_note", "seqlen.rel_diff", "seqlen.rel_diff_at", "seqlen.via_input_standardization", "seqlen.via_norm"};
  return names;
}

}  // namespace nd
