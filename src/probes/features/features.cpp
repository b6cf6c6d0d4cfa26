// Failure modes of issue 16, item 12 (docs/metrics.md "Units, channels,
// logits and norm groups"). Measured on the train pass (forward_backward)
// through its tap hook; rules ACT006-ACT008 and NORM002 judge.
//
//   dead units        at every ReLU-family op (relu, relu6, hardtanh(0, x),
//                     clamp(min=0)): units whose input is <= 0 for every
//                     example and position of the batch. The unit axis is 1
//                     ([N, C, ...] and [N, F]); for 3-D inputs both axis 1
//                     and the last axis are tried and the one with more dead
//                     units is kept ([B, T, F] feature units, [N, C, L]
//                     channels).
//   outlier channels  at every residual addition's output (the residual
//                     stream): per-channel absmax over batch and positions
//                     (hidden = last axis for 3-D, axis 1 otherwise), the
//                     largest against the median channel.
//   output logits     the tensor that feeds the loss, when the last leaf
//                     module writing it multiplies by a weight matrix
//                     (linear/conv head) and is not a normalization:
//                     log Z = logsumexp over the class axis per row.
//   norm groups       values per normalization group from each norm op's
//                     input shape: instance_norm prod(spatial), group_norm
//                     C/G * prod(spatial), layer_norm prod(normalized_shape).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "probes/features/features.h"
#include "probes/session.h"

namespace nd {

struct FeatureStats {
  struct Dead {
    int64_t units = 0, dead = 0, always = 0, calls = 0, constant = 0;
    int64_t min_examples = INT64_MAX, min_values_per_unit = INT64_MAX;
    /// The ancestor whose own forward runs the ReLU on this module's output
    /// (TapSite::input_module; "" the model's own forward); none when the
    /// ReLU runs in the module itself.
    std::optional<std::string> reader;
  };
  struct Outlier {
    at::Tensor channel_absmax;  ///< [H] max over calls (float64, CPU)
    std::string hidden_axis;
    std::string writer;         ///< stream_in: the leaf module whose output the stream is ("" = none)
  };
  std::mutex mu;
  std::map<std::string, Dead> dead;          ///< module path -> dead units
  std::map<int64_t, Outlier> outlier;        ///< residual out tap id -> channels
  std::map<int64_t, Outlier> stream_in;      ///< residual in tap id -> channels of the stream entering the addition
  /// A storage a leaf module's output used, held weakly: its data pointer
  /// may be reused once it is freed (a later tensor at the same address is
  /// not that module's output), so a match counts only while it is alive.
  struct StorageRef {
    std::string module;
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    /// Whether `t` lives in this very storage.
    bool holds(const at::Tensor& t) const {
      auto live = storage.lock();
      return live && live.get() == t.storage().unsafeGetStorageImpl();
    }
  };
  std::map<const void*, StorageRef> writer;  ///< storage data -> last leaf module writing it
  /// sizes -> the leaf module that last wrote a tensor of those sizes (in
  /// execution order): the head behind ops the model applies after it.
  std::map<std::vector<int64_t>, std::pair<std::string, at::Tensor>> last_of_shape;
  std::map<const void*, StorageRef> residual_sums;  ///< storage data of residual additions' outputs
  std::set<int64_t> residual_out;            ///< kResidualStream ids that are sums (not stream inputs)
  std::set<int64_t> residual_in;             ///< kResidualStream ids of the streams entering the additions
  std::set<std::string> leaves;
};

namespace {


/// Whether `y` is an elementwise function of `h` alone (same sizes): y
/// read in the order of increasing h has a total variation of at most 4x its
/// range, as a function with a few monotone pieces has (a soft-cap
/// cap * tanh(h / cap), a temperature h / t, x * tanh(x / c): at most 2x). A
/// sum with another tensor (a residual stream x + proj(h)) jumps at every
/// step instead: its variation is about n / 3 times its range.
bool is_function_of(const at::Tensor& y0, const at::Tensor& h0) {
  if (y0.sizes() != h0.sizes() || y0.numel() < 16) return false;
  const at::Tensor h = h0.reshape({-1}).to(at::kDouble).cpu();
  const at::Tensor y = y0.reshape({-1}).to(at::kDouble).cpu();
  if (!at::isfinite(h).all().item<bool>() || !at::isfinite(y).all().item<bool>()) return false;
  const at::Tensor ys = y.index_select(0, std::get<1>(h.sort()));
  const double range = (ys.max() - ys.min()).item<double>();
  if (!(range > 0)) return false;
  const double variation = (ys.slice(0, 1) - ys.slice(0, 0, -1)).abs().sum().item<double>();
  return variation <= 4 * range;
}

/// Units of x along `axis`: how many are counted, how many of those are
/// <= 0 everywhere (dead), how many are > 0 everywhere (always active, the
/// mirror image). A unit whose input is exactly 0 on every value is left
/// out of all three and counted in `constant`: a zero-initialized parameter
/// upstream makes it so until the first step (timm's NF-ResNet
/// zero-initializes the gain of the conv feeding its SE block, whose ReLU
/// then sees 0 everywhere): at the kink, not a dead ReLU. A unit held at a
/// negative constant (its bias alone, behind dead units) is dead.
struct UnitCount {
  int64_t units = 0, dead = 0, always = 0, constant = 0;
};
UnitCount dead_along(const at::Tensor& x, int64_t axis) {
  at::Tensor moved = x.movedim(axis, 0).reshape({x.size(axis), -1});
  auto mm = moved.aminmax(1);
  const at::Tensor& lo = std::get<0>(mm);
  const at::Tensor& hi = std::get<1>(mm);
  const at::Tensor varies = (hi != 0).logical_or(lo != 0);
  const int64_t n_varies = varies.sum().item<int64_t>();
  return {n_varies, ((hi <= 0) & varies).sum().item<int64_t>(), ((lo > 0) & varies).sum().item<int64_t>(),
          x.size(axis) - n_varies};
}

/// Each hidden channel's absolute maximum over the batch and positions of a
/// residual stream (the last axis of [B, T, H], axis 1 of [N, C, H, W]),
/// merged into `o` by the elementwise maximum over calls. Holds no lock:
/// the caller holds FeatureStats::mu.
void merge_channel_absmax(FeatureStats::Outlier& o, const at::Tensor& x) {
  const int64_t axis = x.dim() == 3 ? 2 : 1;
  const at::Tensor a = x.abs().movedim(axis, 0).reshape({x.size(axis), -1}).amax(1).to(at::kDouble).cpu();
  o.channel_absmax = o.channel_absmax.defined() && o.channel_absmax.sizes() == a.sizes() ? at::maximum(o.channel_absmax, a) : a;
  o.hidden_axis = axis == 2 ? "last" : "1";
}

double median_of(const at::Tensor& v) {
  at::Tensor s = std::get<0>(v.flatten().sort());
  const int64_t n = s.numel();
  if (n == 0) return 0;
  return n % 2 ? s[n / 2].item<double>() : 0.5 * (s[n / 2 - 1].item<double>() + s[n / 2].item<double>());
}

}  // namespace

std::shared_ptr<FeatureStats> new_feature_stats() { return std::make_shared<FeatureStats>(); }

std::function<void(const TapSite&, const at::Tensor&)> feature_hook(const Session& s, std::shared_ptr<FeatureStats> f) {
  for (const auto& r : s.inst->residuals())
    if (r.out_tap >= 0) f->residual_out.insert(r.out_tap);
  for (const auto& r : s.inst->residuals())
    if (r.in_tap >= 0 && !f->residual_out.count(r.in_tap)) f->residual_in.insert(r.in_tap);
  for (const auto& mi : s.model.modules)
    if (mi.leaf) f->leaves.insert(mi.path);
  return [f](const TapSite& site, const at::Tensor& x0) {
    if (!x0.defined() || !x0.is_floating_point() || x0.numel() == 0) return;
    at::NoGradGuard ng;
    const at::Tensor x = x0.detach();
    if (site.kind == TapKind::kReluInput && x.dim() >= 2) {
      auto best = dead_along(x, 1);
      if (x.dim() == 3 && x.size(2) > 1) {
        auto last = dead_along(x, 2);
        if (last.dead * best.units > best.dead * last.units) best = last;
      }
      std::lock_guard<std::mutex> lock(f->mu);
      // Units of the child module whose output the ReLU reads as it is (a
      // functional F.relu(self.lin1(x)) in the parent's forward): counted
      // there, not pooled with every other ReLU of the parent (eval57 GIN:
      // 54 of lin1's 64 units reported as "54 of 152 in <root>").
      auto& d = f->dead[site.input_module.empty() ? site.module : site.input_module];
      if (!site.input_module.empty()) d.reader = site.module;
      d.units += best.units;
      d.dead += best.dead;
      d.always += best.always;
      d.constant += best.constant;
      ++d.calls;
      d.min_examples = std::min(d.min_examples, x.size(0));
      d.min_values_per_unit = std::min(d.min_values_per_unit, x.numel() / std::max<int64_t>(1, best.units));
    } else if (site.kind == TapKind::kResidualStream && f->residual_out.count(site.id) && x.dim() >= 2) {
      if (x.has_storage()) {
        std::lock_guard<std::mutex> lock(f->mu);
        f->residual_sums.insert_or_assign(x.storage().data(), FeatureStats::StorageRef{"", x.storage().getWeakStorageImpl()});
      }
      std::lock_guard<std::mutex> lock(f->mu);
      merge_channel_absmax(f->outlier[site.id], x);
    } else if (site.kind == TapKind::kResidualStream && f->residual_in.count(site.id) && x.dim() >= 2) {
      // The stream entering an addition: where a channel already stands out
      // before the block (an embedding's massive dimension), and which leaf
      // module wrote it.
      std::lock_guard<std::mutex> lock(f->mu);
      auto& o = f->stream_in[site.id];
      merge_channel_absmax(o, x);
      o.writer.clear();
      if (x.has_storage()) {
        auto w = f->writer.find(x.storage().data());
        if (w != f->writer.end() && w->second.holds(x)) o.writer = w->second.module;
      }
    } else if (site.kind == TapKind::kModuleOutput && f->leaves.count(site.module) && x.has_storage()) {
      std::lock_guard<std::mutex> lock(f->mu);
      f->writer.insert_or_assign(x.storage().data(), FeatureStats::StorageRef{site.module, x.storage().getWeakStorageImpl()});
      if (x.dim() >= 2 && x.is_floating_point()) f->last_of_shape[x.sizes().vec()] = {site.module, x.detach()};
    }
  };
}

void probe_features(Session& s) {
  const std::shared_ptr<const PassResult> train = s.train();
  if (!train || !train->features) return;
  const FeatureStats& f = *train->features;
  const InstrumentedModel& im = *s.inst;
  auto& mm = s.doc.model_metrics;
  nlohmann::json probe = nlohmann::json::object();

  // ---- dead units -------------------------------------------------------
  int64_t dead_layers = 0;
  for (const auto& [path, d] : f.dead) {
    LayerMetrics* lm = s.doc.find_layer(path);
    if (lm && d.constant > 0) lm->metrics["dead.constant_units"] = d.constant;
    if (!lm || d.units == 0) continue;
    const double frac = static_cast<double>(d.dead) / static_cast<double>(d.units);
    // What chance alone gives, measured two ways; the larger is the floor.
    // A unit with a symmetric input is inactive on one example with
    // probability 1/2, on N independent examples with 0.5^N (the values of
    // one example can be fully correlated). Examples can be correlated too
    // (random weights on similar inputs): then as many units are active on
    // the whole batch as inactive, so the always-active share, measured in
    // the same pass, is the mirror-image floor. A unit killed by a large
    // negative bias has no such mirror.
    const double always = static_cast<double>(d.always) / static_cast<double>(d.units);
    const double chance = std::max(std::pow(0.5, static_cast<double>(d.min_examples)), always);
    auto& m = lm->metrics;
    m["dead.units"] = d.units;
    m["dead.count"] = d.dead;
    m["dead.reader_note"] = d.reader ? " (its outputs, which a ReLU in " + (d.reader->empty() ? std::string("the model") : *d.reader) +
                                           "'s own forward reads)"
                                     : std::string();
    m["dead.fraction"] = frac;
    m["dead.examples"] = d.min_examples;
    m["dead.values_per_unit"] = d.min_values_per_unit;
    m["dead.always_active_fraction"] = always;
    m["dead.chance_fraction"] = chance;
    m["dead.over_chance"] = chance > 0 ? metric_number(frac / chance) : MetricValue("inf");
    // Sign test against the mirror image: if the units' inputs are symmetric
    // about 0, a unit with one sign on the whole batch is dead or always
    // active with equal odds, so dead ~ Binomial(dead + always, 1/2). The
    // one-sided tail P(X >= dead) says whether so many dead units can be that
    // coin (an SE block's squeeze ReLU sees one pooled value per example:
    // 7 dead of 8 constant-sign units is p = 0.035, chance on random weights).
    {
      const int64_t n = d.dead + d.always;
      double tail = 0;
      for (int64_t k = d.dead; k <= n; ++k)
        tail += std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) - n * std::log(2.0));
      m["dead.mirror_p"] = n > 0 ? std::min(1.0, tail) : 1.0;
    }
    // Every unit dead on a batch of 8 or more: the layer outputs 0 for the
    // whole batch (a deep narrow ReLU net "born dead", Lu et al. 2019),
    // whatever the sign test says of a layer of 4 units.
    m["dead.whole_layer"] = d.units >= 2 && d.dead == d.units && d.min_examples >= 8;
    if (d.dead > 0) ++dead_layers;
  }
  mm["dead.layers_with_dead_units"] = dead_layers;
  // Whether the model's output is the same for every example of the batch
  // (its first output tensor, batch on axis 0, exactly equal rows): the
  // input no longer reaches it (a layer cut off everything before it).
  {
    const auto outs = Session::output_tensors(train->output);
    if (!outs.empty() && outs.front().dim() >= 1 && outs.front().size(0) >= 2 && outs.front().is_floating_point()) {
      const at::Tensor o = outs.front().detach();
      mm["output.constant_over_batch"] = at::equal(o, o.narrow(0, 0, 1).expand_as(o));
    }
  }

  // ---- outlier channels of the residual stream --------------------------
  std::map<int64_t, const ResidualSite*> site_of;
  for (const auto& r : im.residuals()) site_of[r.out_tap] = &r;
  // Each block's first residual addition (execution order): the stream it
  // reads is the block's input.
  std::map<std::string, const ResidualSite*> first_of_block;
  for (const auto& r : im.residuals()) first_of_block.emplace(!r.block.empty() ? r.block : r.module, &r);
  // The norms that ran, once for every block below: their 1-D floating
  // parameters as doubles (in declaration order) and each one's median
  // magnitude.
  struct NormParam {
    std::string name;
    at::Tensor value;  ///< double
    double abs_median;
  };
  struct NormParams {
    std::string module;
    int64_t exec_order;
    std::vector<NormParam> params;
  };
  std::vector<NormParams> norm_params;
  if (!f.outlier.empty()) {
    std::map<std::string, const torch::jit::Module*> module_of;
    for (const auto& mi : s.model.modules) module_of.emplace(mi.path, &mi.module);
    std::set<std::string> seen_norms;
    for (const auto& no : im.norm_ops()) {
      if (no.module.empty() || !seen_norms.insert(no.module).second) continue;
      const LayerMetrics* nl = s.doc.find_layer(no.module);
      auto mod = module_of.find(no.module);
      if (!nl || nl->exec_order < 0 || mod == module_of.end()) continue;
      NormParams np{no.module, nl->exec_order, {}};
      for (const auto& p : mod->second->named_parameters(/*recurse=*/false)) {
        if (p.value.dim() != 1 || !p.value.is_floating_point()) continue;
        const at::Tensor v = p.value.detach().to(at::kDouble);
        np.params.push_back({p.name, v, median_of(v.abs())});
      }
      norm_params.push_back(std::move(np));
    }
  }
  for (const auto& [tap, o] : f.outlier) {
    const ResidualSite* r = site_of.count(tap) ? site_of[tap] : nullptr;
    if (!r || !o.channel_absmax.defined() || o.channel_absmax.numel() < 8) continue;
    const std::string path = !r->block.empty() ? r->block : r->module;
    LayerMetrics* lm = s.doc.find_layer(path);
    if (!lm) continue;
    // The median of the channels that carry anything: channels that are
    // exactly 0 on the whole batch (a Fixup stream whose zero-initialized
    // branches have not written them yet, pruned channels) are no scale to
    // compare with, and with half the channels at 0 the plain median is 0 and
    // every live channel an "infinite" outlier (eval13 case 05).
    const at::Tensor live = o.channel_absmax.masked_select(o.channel_absmax > 0);
    const int64_t zero_channels = o.channel_absmax.numel() - live.numel();
    if (live.numel() < 8) continue;
    const double med = median_of(live);
    auto mx = o.channel_absmax.max(0);
    const double top = std::get<0>(mx).item<double>();
    const int64_t at = std::get<1>(mx).item<int64_t>();
    const double ratio = top / med;
    auto& m = lm->metrics;
    // A block has several residual additions: keep the largest ratio.
    if (m.count("outlier.ratio") && m["outlier.ratio"].is_number() && m["outlier.ratio"].get<double>() >= ratio) continue;
    m["outlier.ratio"] = metric_number(ratio);
    m["outlier.channel"] = at;
    m["outlier.channel_absmax"] = top;
    m["outlier.median_absmax"] = med;
    m["outlier.channels"] = o.channel_absmax.numel();
    m["outlier.count"] = (o.channel_absmax > 100 * med).sum().item<int64_t>();
    m["outlier.zero_channels"] = zero_channels;
    m["outlier.hidden_axis"] = o.hidden_axis;
    // Where the channel comes from: the first norm (in execution order)
    // whose gain at that channel stands out from its other gains, or whose
    // bias there is of the gains' size or more. A LayerNorm gives every
    // channel unit scale; a gain of 12 at one channel writes it into the
    // stream at 12x (BERT's outlier dimension 308 lives in the output
    // LayerNorms' weight and bias: Kovaleva et al. 2021, eval29 C02).
    std::string source, note;
    double source_gain = 0, source_ratio = 0;
    int64_t source_order = std::numeric_limits<int64_t>::max();
    const int64_t width = o.channel_absmax.numel();
    for (const auto& np : norm_params) {
      if (np.exec_order >= source_order) continue;
      // The gain: the first 1-D parameter of the stream's width not named
      // bias; the bias: the one named so.
      const NormParam* w = nullptr;
      const NormParam* b = nullptr;
      for (const auto& p : np.params) {
        if (p.value.numel() != width) continue;
        if (!w && p.name != "bias") w = &p;
        else if (p.name == "bias") b = &p;
      }
      if (!w || !(w->abs_median > 0)) continue;
      const double wmed = w->abs_median;
      const double g = std::abs(w->value[at].item<double>());
      const double bias_here = b ? std::abs(b->value[at].item<double>()) : 0.0;
      const double ratio_here = g / wmed;
      if (ratio_here > 5 || bias_here > 5 * wmed) {
        source = np.module;
        source_gain = g;
        source_ratio = ratio_here;
        source_order = np.exec_order;
        std::ostringstream t;
        t.precision(3);
        t << "; " << np.module << "'s gain at channel " << at << " is " << g << ", " << ratio_here << "x its median gain";
        if (b) t << ", its bias " << b->value[at].item<double>();
        t << ": that norm writes the channel into the stream";
        note = t.str();
      }
    }
    // Whether the channel already stands out in the stream entering the
    // block (its first addition's stream input, not a later addition's,
    // which a post-norm block's own LayerNorm writes): then it comes from
    // before this block (an embedding's or the input's massive dimension,
    // eval36 C03), not from the block's branches.
    const FeatureStats::Outlier* in = nullptr;
    const ResidualSite* first = first_of_block.count(path) ? first_of_block[path] : r;
    if (first->in_tap >= 0) {
      auto a = f.stream_in.find(first->in_tap);
      if (a != f.stream_in.end()) in = &a->second;
      auto b = f.outlier.find(first->in_tap);
      if (!in && b != f.outlier.end()) in = &b->second;
    }
    bool before_block = false;
    std::string in_writer;
    if (in && in->channel_absmax.defined() && in->channel_absmax.sizes() == o.channel_absmax.sizes()) {
      const at::Tensor in_live = in->channel_absmax.masked_select(in->channel_absmax > 0);
      const double in_med = in_live.numel() >= 8 ? median_of(in_live) : 0.0;
      const double in_top = in->channel_absmax[at].item<double>();
      if (in_med > 0 && in_top > 100 * in_med) {
        before_block = true;
        in_writer = in->writer;
        std::ostringstream t;
        t.precision(3);
        t << "; the channel is already " << in_top << " (" << in_top / in_med
          << "x the median) in the stream entering " << path;
        if (!in_writer.empty()) t << ", as written by " << in_writer;
        t << ": it comes from before this block";
        note += t.str();
      }
    }
    m["outlier.in_stream_before"] = before_block;
    m["outlier.in_stream_writer"] = in_writer;
    m["outlier.source_layer"] = source;
    m["outlier.source_note"] = note;
    if (!source.empty()) {
      m["outlier.source_gain"] = source_gain;
      m["outlier.source_gain_ratio"] = source_ratio;
    }
  }

  // ---- log-partition of the head's logits -------------------------------
  {
    std::vector<at::Tensor> outs;
    const c10::IValue& out = train->output;
    if (out.isGenericDict()) {
      for (const auto& kv : out.toGenericDict())
        if (kv.key().isString() && kv.key().toStringRef() == "logits" && kv.value().isTensor()) outs.push_back(kv.value().toTensor());
    }
    if (outs.empty())
      for (const auto& t : Session::output_tensors(out))
        if (t.is_floating_point()) {
          outs.push_back(t);
          break;
        }
    if (!outs.empty() && outs[0].dim() >= 2 && outs[0].has_storage()) {
      const at::Tensor y = outs[0].detach();
      auto w = f.writer.find(y.storage().data());
      if (w != f.writer.end() && !w->second.holds(y)) w = f.writer.end();
      std::string head = w == f.writer.end() ? std::string("?") : w->second.module;
      // The output written by an op after the head, outside any module
      // (Gemma's soft-cap cap * tanh(logits / cap), a temperature, MPT's
      // logit_scale): the head is the last leaf module that wrote a tensor
      // of the output's sizes; the output itself is still what is judged.
      std::string head_from = w == f.writer.end() ? "" : "writes the output";
      if (w == f.writer.end()) {
        auto ls = f.last_of_shape.find(y.sizes().vec());
        // Not a residual stream (x + proj(norm(x)) returned as it is): a
        // branch dominating the sum makes it nearly a function of the branch.
        auto rs = f.residual_sums.find(y.storage().data());
        const bool residual_sum = rs != f.residual_sums.end() && rs->second.holds(y);
        if (ls != f.last_of_shape.end() && !residual_sum &&
            is_function_of(y, ls->second.second)) {
          head = ls->second.first;
          head_from = "the last module whose output has the output's sizes; the output is a function of it alone";
        }
      }
      // A linear head (a 2-D weight: nn.Linear, HF's Conv1D, a tied
      // embedding matrix): its output's last axis holds the classes or the
      // vocabulary. A convolution is no logit head that can be told apart
      // from a decoder: an audio or image decoder ends in one too, with
      // samples or pixels along its axes, so it is not judged.
      bool linear_head = false;
      bool from_product = false;
      const OutputProductSite& product = im.output_product();
      if (head == "?" && !product.kind.empty()) {
        from_product = true;
        // No module wrote the output: one contraction in a forward did,
        // through rearrangements and scalings only (SimCLR's
        // cat([positives, negatives]) / temperature of features @
        // features.t(), CLIP's logit_scale.exp() * image @ text.t(), a tied
        // head x @ wte.weight.t()). Its last axis holds the classes: the
        // other examples, the texts, the vocabulary (eval14 case 05, eval15
        // case 10).
        head = product.module;
        head_from = product.kind == "similarity"
                        ? "a product of two activations over their last axes (" + product.op +
                              "): similarity logits computed in " + (head.empty() ? std::string("the model's own forward") : head)
                        : "a product with a 2-D parameter (" + product.op + "): a head written in " +
                              (head.empty() ? std::string("the model's own forward") : head);
        linear_head = true;
      } else {
        for (const auto& mi : s.model.modules)
          if (mi.path == head && !is_norm_kind(mi.kind))
            for (const auto& p : mi.module.named_parameters(/*recurse=*/false))
              if (p.value.dim() == 2) linear_head = true;
        for (const auto& no : im.norm_ops())
          if (no.module == head) linear_head = false;
      }
      const int64_t cdim = y.dim() - 1;
      const int64_t classes = y.size(cdim);
      if (linear_head && classes > 1) {
        at::Tensor yd = y.to(at::kDouble);
        at::Tensor ok = at::isfinite(yd).all(cdim);
        at::Tensor logz = at::logsumexp(yd, {cdim});
        logz = logz.masked_select(ok);
        if (logz.numel() > 0) {
          mm["logits.head"] = head;
          mm["logits.classes"] = classes;
          mm["logits.rows"] = logz.numel();
          mm["logits.logz_mean"] = logz.mean().item<double>();
          mm["logits.logz_abs_mean"] = logz.abs().mean().item<double>();
          mm["logits.logz_abs_max"] = logz.abs().max().item<double>();
          mm["logits.logz_uniform"] = std::log(static_cast<double>(classes));
          mm["logits.absmax"] = yd.masked_fill(at::isfinite(yd).logical_not(), 0).abs().max().item<double>();
          // The head's own gain: the RMS of its weight rows' L2 norms, what it
          // multiplies a unit-RMS input by (sqrt(fan_in) * std(W)). About 1
          // or below for the usual inits (std 1/sqrt(fan_in): LeCun, Xavier;
          // 0.02 in BERT/GPT-2 at their widths); sqrt(d_model) for HF mT5's
          // untied head (std 1.0, modeling_mt5.py _init_weights) or a head
          // tied to an nn.Embedding left at its N(0, 1) default, whose
          // logits are then large whatever the norm before it does.
          double gain = -1;
          for (const auto& mi : s.model.modules)
            if (mi.path == head)
              for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) {
                const at::Tensor wt = p.value.detach();
                if (wt.dim() != 2 || !wt.is_floating_point() || gain >= 0) continue;
                int64_t fan_axis = -1;
                if (wt.size(0) == classes) fan_axis = 1;
                else if (wt.size(1) == classes) fan_axis = 0;
                if (fan_axis < 0) continue;
                const at::Tensor rows = wt.to(at::kDouble).pow(2).sum(fan_axis);
                gain = std::sqrt(rows.mean().item<double>());
              }
          // A head written in forward as a product with a parameter held
          // elsewhere (T5's and the mlx port's logits = h @ shared.weight.T,
          // tied to the embedding; eval37 C04 got "put a normalization
          // before the head"): the 2-D parameter with a classes-sized axis,
          // an embedding's first.
          if (gain < 0 && product.kind == "linear") {
            bool found = false;
            std::string best_name;
            bool best_embedding = false;
            for (const auto& mi : s.model.modules)
              for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) {
                if (p.value.dim() != 2 || !p.value.is_floating_point()) continue;
                if (p.value.size(0) != classes && p.value.size(1) != classes) continue;
                const bool emb = mi.kind.find("Embedding") != std::string::npos;
                if (found && (best_embedding || !emb)) continue;
                found = true;
                best_name = (mi.path.empty() ? std::string() : mi.path + ".") + p.name;
                best_embedding = emb;
                const at::Tensor wt = p.value.detach().to(at::kDouble);
                gain = std::sqrt(wt.pow(2).sum(wt.size(0) == classes ? 1 : 0).mean().item<double>());
              }
            if (found) mm["logits.head_weight"] = best_name;
          }
          if (gain >= 0) mm["logits.head_weight_gain"] = metric_number(gain);
          // Above 4: the head alone makes logits 4x the RMS of its input
          // (a normalized input has RMS about 1).
          mm["logits.head_init_large"] = gain > 4;
          // Similarity logits: a product of two activations (SimCLR's and
          // MoCo's q . k / T, CLIP's image . text): their size is the
          // features' norms times the inverse temperature, so the features
          // must be L2-normalized (facebookresearch/moco builder.py; an
          // unnormalized MoCo reaches mean |log Z| 96, eval42 C02).
          mm["logits.similarity"] = from_product && product.kind == "similarity";
        }
      }
      probe["logits_head"] = head;
      probe["logits_head_is_linear"] = linear_head;
      if (!head_from.empty()) probe["logits_head_from"] = head_from;
    }
  }

  // ---- values per normalization group ------------------------------------
  const Collector& col = *train->collector;
  std::set<std::string> done;
  std::vector<std::pair<int64_t, std::string>> degenerate;
  for (const auto& n : im.norm_ops()) {
    if (n.input_tap < 0 || done.count(n.module)) continue;
    const auto& shape = col.records()[static_cast<size_t>(n.input_tap)].shape;
    if (shape.size() < 2) continue;
    LayerMetrics* lm = s.doc.find_layer(n.module);
    if (!lm) continue;
    NormGroups ng = norm_groups(n, shape, lm->info);
    // A centered norm written out (AdaIN's calc_mean_std over
    // feat.view(N, C, -1), a hand-written LayerNorm): its reduced axes of the
    // tapped input (the view it takes its statistics of) give the values per
    // group. Not a BatchNorm written out (its batch is BN's own rules') nor
    // one over the rows a mask keeps, nor an uncentered one (x / rms(x) of
    // one value is its sign, not 0).
    if (ng.values_per_group < 0 && n.args.value("centered", false) && n.op != "batch_norm_pattern" &&
        !n.args.value("masked_rows", false)) {
      std::vector<int64_t> run_dims;
      if (n.dims_tap >= 0) run_dims = col.records()[static_cast<size_t>(n.dims_tap)].ints;
      const auto red = norm_reduced_axes(n, static_cast<int64_t>(shape.size()), lm->info, run_dims);
      if (!red.empty()) {
        int64_t vpg = 1, all = 1;
        for (int64_t d : red) vpg *= shape[static_cast<size_t>(d)];
        for (int64_t d : shape) all *= d;
        if (vpg > 0) ng = {vpg, all / vpg};
      }
    }
    const int64_t vpg = ng.values_per_group, groups = ng.groups;
    if (vpg < 0) continue;
    done.insert(n.module);
    auto& m = lm->metrics;
    m["norm.values_per_group"] = vpg;
    m["norm.groups_per_pass"] = groups;
    // A LayerNorm over a normalized_shape of one value (nn.LayerNorm(1) on
    // a scalar feature or one tabular column): no pooling to move it before.
    // Not a pooled feature map: [N, C, 1, 1] normalized over its last axis
    // (nn.LayerNorm(1) after global pooling, eval37 C03) has a pooling to
    // move it before.
    bool pooled_map = shape.size() >= 4;
    for (size_t d = 2; d < shape.size() && pooled_map; ++d) pooled_map = shape[d] == 1;
    m["norm.over_one_feature"] = n.op == "layer_norm" && vpg == 1 && !pooled_map;
    if (vpg == 1) degenerate.push_back({lm->exec_order, n.module});
  }
  // Nothing before a one-value-per-group norm gets a gradient through it:
  // those zero gradients are its consequence (one cause, one finding).
  std::sort(degenerate.begin(), degenerate.end());
  // The layers after such a norm in its own module that read its output get
  // a constant (the bias: 0 at init) and so exactly zero weight gradient:
  // timm's csatv2 SpatialTransformerBlock runs LayerNorm(1) and then
  // pos_embed / qkv, and LayerNorm(1) and then its MLP (eval27). These are
  // attributed first, to the nearest such norm before them in the same
  // module (up to the next one), so that a norm is not credited with the
  // layers the norm before it zeroed.
  auto explain = [&](LayerMetrics& l, const std::string& path) -> bool {
    auto z = l.metrics.find("grad.params_zero_grad");
    auto ns = l.metrics.find("grad.params_no_signal");
    if (z == l.metrics.end() || ns == l.metrics.end() || z->second.get<int64_t>() == 0 || l.metrics.count("grad.zero_explained_by"))
      return false;
    const int64_t explained = std::min(z->second.get<int64_t>(), ns->second.get<int64_t>());
    if (explained <= 0) return false;
    ns->second = ns->second.get<int64_t>() - explained;
    l.metrics["grad.zero_explained_by"] = path;
    return true;
  };
  for (size_t k = 0; k < degenerate.size(); ++k) {
    const auto& [order, path] = degenerate[k];
    const size_t dot = path.rfind('.');
    const std::string scope = dot == std::string::npos ? std::string() : path.substr(0, dot + 1);
    int64_t until = std::numeric_limits<int64_t>::max();
    for (size_t j = k + 1; j < degenerate.size(); ++j)
      if (degenerate[j].second.rfind(scope, 0) == 0) {
        until = degenerate[j].first;
        break;
      }
    std::vector<std::string> readers;
    for (auto& l : s.doc.layers) {
      if (l.exec_order <= order || l.exec_order >= until || l.path.rfind(scope, 0) != 0) continue;
      if (explain(l, path)) readers.push_back(l.path);
    }
    LayerMetrics* nl = s.doc.find_layer(path);
    nl->metrics["norm.constant_readers"] = static_cast<int64_t>(readers.size());
    nl->metrics["norm.constant_readers_note"] =
        readers.empty() ? std::string()
                        : "; " + std::to_string(readers.size()) + " later layer" + (readers.size() == 1 ? "" : "s") +
                              " of its module (" + short_list(readers) +
                              ") read" + (readers.size() == 1 ? "s" : "") + " its constant output and get" +
                              (readers.size() == 1 ? "s" : "") + " exactly zero weight gradient";
  }
  for (const auto& [order, path] : degenerate) {
    LayerMetrics* nl = s.doc.find_layer(path);
    std::vector<std::string> silenced;
    for (auto& l : s.doc.layers) {
      if (l.exec_order < 0 || l.exec_order >= order) continue;
      if (explain(l, path)) silenced.push_back(l.path);
    }
    nl->metrics["norm.silenced_layers"] = static_cast<int64_t>(silenced.size());
    if (!silenced.empty()) nl->metrics["norm.silenced_layer_names"] = short_list(silenced);
    // Its backward is zero up to rounding: the gradient profile across it
    // (GRAD002/GRAD003) measures that rounding, not the network.
    auto first = mm.find("grad.rel_first_layer");
    if (first != mm.end() && first->second.is_string()) {
      const LayerMetrics* fl = s.doc.find_layer(first->second.get<std::string>());
      if (fl && fl->exec_order >= 0 && fl->exec_order < order && mm.count("grad.rel_ratio")) {
        mm.erase("grad.rel_ratio");
        mm["grad.rel_ratio_skipped"] = "the gradient reaches " + first->second.get<std::string>() + " only through " + path +
                                       ", a normalization over one value per group (NORM002)";
      }
    }
  }
  s.doc.probes["features"] = probe;
}


const std::vector<std::string>& features_writes() {
  static const std::vector<std::string> names = {
      "dead.", "logits.", "output.constant_over_batch", "norm.groups_per_pass", "norm.values_per_group", "norm.silenced_layers",
      "norm.silenced_layer_names", "norm.constant_readers", "norm.constant_readers_note", "norm.over_one_feature", "grad.zero_explained_by", "grad.rel_ratio_skipped", "outlier."};
  return names;
}

}  // namespace nd
