// Architecture: residual blocks, norm placement, depth, final norm and the
// residual stream's RMS at each block boundary (docs/metrics.md, "Architecture").
//
// The graph analysis is src/instrument/structure.cpp; this probe groups the
// residual additions into blocks, picks the main stack (the container with
// the most blocks) and reads the stream's RMS from the train pass's
// kResidualStream taps.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "probes/architecture/architecture.h"
#include "probes/session.h"

namespace nd {
namespace {


struct Block {
  std::string path, stack;
  std::vector<const ResidualSite*> adds;
  std::set<std::string> placements;
  std::vector<std::string> norms;
};

}  // namespace

void probe_architecture(Session& s) {
  const auto& im = *s.inst;
  const auto& res = im.residuals();
  const std::shared_ptr<const PassResult> train = s.train();
  const Collector* col = train ? train->collector.get() : nullptr;

  std::vector<Block> blocks;
  std::map<std::string, size_t> by_path;
  for (const auto& r : res) {
    // An addition inside a branch that never ran (MobileNet's `if
    // self.use_res_connect:` in blocks without a skip) is not a residual.
    if (col && r.out_tap >= 0 && col->records()[static_cast<size_t>(r.out_tap)].calls == 0) continue;
    auto it = by_path.find(r.block);
    if (it == by_path.end()) {
      it = by_path.emplace(r.block, blocks.size()).first;
      blocks.push_back({r.block, r.stack, {}, {}, {}});
    }
    Block& b = blocks[it->second];
    b.adds.push_back(&r);
    b.placements.insert(r.placement);
    if (!r.norm_module.empty() && std::find(b.norms.begin(), b.norms.end(), r.norm_module) == b.norms.end())
      b.norms.push_back(r.norm_module);  // one norm feeding two branches (AdaLayerNormZero) is listed once
  }
  std::map<std::string, size_t> per_stack;
  for (const auto& b : blocks) per_stack[b.stack]++;
  std::string main_stack;
  size_t most = 0;
  for (const auto& b : blocks)
    if (per_stack[b.stack] >= most) {
      most = per_stack[b.stack];
      main_stack = b.stack;
    }

  auto rms_of = [&](int64_t tap) -> double {
    if (!col || tap < 0) return std::nan("");
    const auto& rec = col->records()[static_cast<size_t>(tap)];
    return rec.fwd.numel > 0 ? rec.fwd.rms() : std::nan("");
  };
  int64_t pre = 0, post = 0, main_blocks = 0, normalized_branches = 0, main_adds = 0;
  bool all_post_scaled = true;  // every post-norm addition of the main stack scales its stream by more than 1
  double min_post_scale = std::numeric_limits<double>::infinity();
  double first_in = std::nan(""), last_out = std::nan("");
  int64_t last_out_tap = -1;  // the main stack's stream after its last block
  // The same over every block of every stack, in execution order (the
  // stream through all levels of a multi-stage network).
  double first_in_all = std::nan(""), last_out_all = std::nan("");
  std::string first_block_all, last_block_all;
  std::set<std::string> stacks_measured;
  std::string last_block;
  // What each block of the main stack adds to the stream: its branches' RMS
  // (measured at each addition; else sqrt(out^2 - in^2)). One
  // block adding 10x or more what the median other block adds is where the
  // stream moved (a branch scaled far too large), not the end of the stack;
  // every block adding too much (each branch 8x too large) grows it most in
  // the first block only because the stream starts small.
  std::vector<std::pair<double, std::string>> branch;
  std::vector<double> block_ratio;  // out / in per main-stack block, in order (NaN when not measured)
  double growth_log = 0, top_log = 0;
  double branch_stream_max = 0;  // the largest branch RMS / stream RMS entering its block (main stack)
  std::string top_block;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& b : blocks) {
    const std::string placement = b.placements.size() == 1 ? *b.placements.begin() : "mixed";
    // The stream out: the last addition on the stream that entered, by its
    // shape. A dual-stream block (Flux/SD3 MM-DiT: image tokens, then text
    // tokens, each with its own residual additions) ends with the other
    // stream's additions; its RMS is not this stream's (eval25).
    int64_t out_tap = b.adds.back()->out_tap;
    if (col && b.adds.front()->in_tap >= 0) {
      const auto& recs = col->records();
      const auto& in_shape = recs[static_cast<size_t>(b.adds.front()->in_tap)].shape;
      for (auto it = b.adds.rbegin(); it != b.adds.rend(); ++it)
        if ((*it)->out_tap >= 0 && recs[static_cast<size_t>((*it)->out_tap)].shape == in_shape) {
          out_tap = (*it)->out_tap;
          break;
        }
    }
    const double in = rms_of(b.adds.front()->in_tap), out = rms_of(out_tap);
    const bool main = b.stack == main_stack;
    if (std::isfinite(in) && std::isfinite(out)) {
      if (!std::isfinite(first_in_all)) {
        first_in_all = in;
        first_block_all = b.path;
      }
      last_out_all = out;
      last_block_all = b.path;
      stacks_measured.insert(b.stack);
    }
    if (main) {
      ++main_blocks;
      for (const auto* a : b.adds) {
        ++main_adds;
        if (a->branch_normalized) ++normalized_branches;
      }
      if (placement == "pre-norm") ++pre;
      if (placement == "post-norm") {
        ++post;
        for (const auto* a : b.adds) {
          // DeepNorm (Wang et al. 2022) up-weights the stream before the
          // post-norm: x = LN(alpha * x + F(x)), alpha = (2N)^(1/4) > 1.
          if (!(a->stream_scale > 1.0)) all_post_scaled = false;
          if (std::isfinite(a->stream_scale)) min_post_scale = std::min(min_post_scale, a->stream_scale);
        }
      }
      if (!std::isfinite(first_in)) first_in = in;
      last_out = out;
      last_out_tap = out_tap;
      last_block = b.path;
      block_ratio.push_back(std::isfinite(in) && std::isfinite(out) && in > 0 ? out / in : std::nan(""));
      if (std::isfinite(in) && std::isfinite(out) && in > 0) {
        // The RMS of what the block adds: its branches' RMS measured at the
        // additions, summed as orthogonal (sqrt of the sum of squares);
        // sqrt(out^2 - in^2) when a branch was not measured (branch and
        // stream nearly orthogonal at init).
        double sq = 0;
        bool measured = true;
        for (const auto* a : b.adds) {
          const double r = rms_of(a->branch_tap);
          if (std::isfinite(r)) sq += r * r;
          else measured = false;
        }
        const double added = measured ? std::sqrt(sq) : std::sqrt(std::max(0.0, out * out - in * in));
        branch.emplace_back(added, b.path);
        branch_stream_max = std::max(branch_stream_max, added / in);
        if (out > in) {
          const double g = std::log(out / in);
          growth_log += g;
          if (g > top_log) {
            top_log = g;
            top_block = b.path;
          }
        }
      }
    }
    std::vector<std::string> pl;
    for (const auto* a : b.adds) pl.push_back(a->placement);
    rows.push_back({{"block", b.path},
                    {"stack", b.stack},
                    {"in_main_stack", main},
                    {"placement", placement},
                    {"additions", pl},
                    {"norms", b.norms},
                    {"stream_rms_in", finite_or_null(in)},
                    {"stream_rms_out", finite_or_null(out)}});
  }
  int64_t norm_sites = static_cast<int64_t>(im.norm_ops().size());
  auto& mm = s.doc.model_metrics;
  int64_t ran = 0;
  for (const auto& b : blocks) ran += static_cast<int64_t>(b.adds.size());
  mm["arch.residual_additions"] = ran;
  mm["arch.blocks"] = main_blocks;
  // Every residual block of every stack: a ResNet's stages (3, 4, 6, 3
  // blocks) are one deep network whose stream passes through all of them,
  // though no one stage reaches ARCH003's depth (eval20 case 10).
  mm["arch.blocks_all"] = static_cast<int64_t>(blocks.size());
  mm["arch.stack"] = main_stack;
  // What the initialization lets a branch add, relative to the stream it
  // joins: 0 for Fixup's zero convolutions, ~1e-4 for LayerScale gains of
  // 1e-4 (timm's ResMLP), 0.2-0.3 for PyTorch's default init.
  if (!branch.empty()) mm["arch.branch_stream_ratio_max"] = finite_or_null(branch_stream_max);
  mm["arch.pre_norm_blocks"] = pre;
  mm["arch.post_norm_blocks"] = post;
  // Post-norm blocks that up-weight the stream before their norm (DeepNorm's
  // alpha > 1): the remedy for a deep post-norm stack, not its fault (ARCH001).
  mm["arch.post_norm_residual_scaled"] = post > 0 && all_post_scaled;
  if (post > 0 && std::isfinite(min_post_scale)) mm["arch.post_norm_residual_scale"] = metric_number(min_post_scale);
  mm["arch.norm_layers"] = norm_sites;
  // Norm modules the model holds (nn.LayerNorm, BatchNorm, GroupNorm,
  // *RMSNorm classes), whether or not the graph analysis found their ops: a
  // model holding them is not called normalization-free on the strength of
  // an op count alone (eval21: timm's crossvit scripted, 50 LayerNorm calls
  // the analysis did not place, read as "no normalization op").
  int64_t norm_modules = 0;
  for (const auto& mi : s.model.modules) norm_modules += is_norm_kind(mi.kind) ? 1 : 0;
  mm["arch.norm_modules"] = norm_modules;
  // Weight normalization (Salimans and Kingma 2016): the layers' weights
  // reparameterized as g * v / ||v|| (nn.utils.weight_norm's weight_g and
  // weight_v, parametrizations.weight.original0/1) or divided by their
  // spectral norm (weight_orig): the normalization HiFi-GAN, UnivNet and
  // EnCodec use instead of activation norms (eval36 C01).
  int64_t weight_normalized = 0;
  for (const auto& mi : s.model.modules) {
    bool wn = mi.path.find(".parametrizations.") != std::string::npos || mi.path.rfind("parametrizations.", 0) == 0;
    for (const auto& pr : mi.module.named_parameters(/*recurse=*/false))
      wn = wn || pr.name == "weight_g" || pr.name == "weight_v" || pr.name == "weight_orig";
    weight_normalized += wn ? 1 : 0;
  }
  mm["arch.weight_normalized_modules"] = weight_normalized;
  // Residual scaling (Szegedy et al. 2017, Inception-ResNet; Lim et al.
  // 2017, EDSR's res_scale 0.1; Wang et al. 2018, ESRGAN's 0.2): every
  // residual addition of the repeated blocks multiplies its branch by a constant below 1, the
  // normalization-free design's own way of keeping the stream's scale
  // (eval46 edsr: ARCH003 on EDSR's published recipe); or multiplies the
  // sum by a constant below 1 right after it (WaveNet's and ConvS2S's
  // `(x + residual) * sqrt(0.5)`: the stream's variance stays level, eval57
  // wavenet). ACT002 still judges the growth it measures.
  {
    int64_t scaled = 0, adds = 0;
    double scale_max = 0;
    for (const auto& r : im.residuals()) {
      if (r.stack.empty()) continue;  // a long skip around the stack (EDSR's res += x) is no block
      ++adds;
      const bool branch = std::isfinite(r.branch_scale) && std::fabs(r.branch_scale) < 1;
      const bool sum = std::isfinite(r.sum_scale) && std::fabs(r.sum_scale) < 1 && r.sum_scale != 0;
      if (branch || sum) {
        ++scaled;
        scale_max = std::max(scale_max, std::fabs(branch ? r.branch_scale : r.sum_scale));
      }
    }
    mm["arch.branches_scaled"] = adds > 0 && scaled == adds;
    if (adds > 0 && scaled == adds) mm["arch.branch_scale_max"] = metric_number(scale_max);
  }
  // Modules fused for quantization (torch.ao.quantization.fuse_modules,
  // torchvision's fuse_model(): Conv+BN(+ReLU) become
  // torch.ao.nn.intrinsic's ConvReLU2d / a Conv2d with the BatchNorm folded
  // into its weight and bias, the BatchNorm an Identity): the model was
  // normalized and its norms were folded for inference (eval37 V02).
  int64_t fused = 0;
  for (const auto& mi : s.model.modules)
    fused += mi.qualified.find(".nn.intrinsic.") != std::string::npos ? 1 : 0;  // torch[.ao].nn.intrinsic.*
  mm["arch.fused_modules"] = fused;
  std::string placement = "none";
  if (main_blocks > 0) {
    if (pre == main_blocks) placement = "pre-norm";
    else if (post == main_blocks) placement = "post-norm";
    else if (pre > 0 || post > 0) placement = "mixed";
    else {
      std::set<std::string> all;
      for (const auto& b : blocks)
        if (b.stack == main_stack) all.insert(b.placements.begin(), b.placements.end());
      placement = all.size() == 1 ? *all.begin() : "mixed";
    }
  }
  mm["arch.placement"] = main_blocks > 0 ? placement : std::string("no residual blocks");
  const auto& fin = im.final_norm();
  // The stack whose last block feeds the head: the main stack, or a later
  // stage of a hierarchical model (PiT's, a hybrid's transformer after its
  // CNN stages). Its own counts and placement; "final norm" is asked of it.
  const std::string final_stack = fin.stack.empty() ? main_stack : fin.stack;
  int64_t final_blocks = 0, final_pre = 0, final_post = 0;
  std::string final_last_block;
  double final_last_out = std::nan("");
  std::set<std::string> final_placements;
  for (const auto& b : blocks) {
    if (b.stack != final_stack) continue;
    const std::string pl = b.placements.size() == 1 ? *b.placements.begin() : "mixed";
    ++final_blocks;
    if (pl == "pre-norm") ++final_pre;
    if (pl == "post-norm") ++final_post;
    final_placements.insert(b.placements.begin(), b.placements.end());
    final_last_block = b.path;
    final_last_out = rms_of(b.adds.back()->out_tap);
  }
  std::string final_placement = "none";
  if (final_blocks > 0) {
    if (final_pre == final_blocks) final_placement = "pre-norm";
    else if (final_post == final_blocks) final_placement = "post-norm";
    else if (final_pre > 0 || final_post > 0) final_placement = "mixed";
    else final_placement = final_placements.size() == 1 ? *final_placements.begin() : "mixed";
  }
  mm["arch.final_stack"] = final_stack;
  mm["arch.final_stack_pre_norm_blocks"] = final_pre;
  mm["arch.final_stack_last_block"] = final_last_block;
  mm["arch.final_stack_stream_rms"] = finite_or_null(final_last_out);
  // A post-norm stack ends in its own norm, a CNN's norms sit inside its
  // branches: "final norm" is a pre-norm question.
  mm["arch.final_norm"] = (final_blocks == 0 || final_placement == "post-norm" || final_placement == "in-branch")
                              ? std::string("n/a")
                              : fin.status;
  mm["arch.final_norm_layer"] = fin.norm_module;
  mm["arch.head_layer"] = fin.head_module;
  // No head in this file: the stack's stream is what the model returns
  // (a feature extractor's last_hidden_state: HF CLIP/OWL-ViT vision towers
  // normalize only the pooled token, DonutSwin returns its last stage to
  // the decoder). Whatever reads it lies outside the file and may normalize
  // it: stated at info (ARCH008), not ARCH002's warning (eval36 B03).
  mm["arch.final_stack_to_output"] = fin.status == "absent" && fin.head_module.empty();
  // ARCH008's case: a short stack (2..3 pre-norm blocks) or one returned
  // as the output.
  mm["arch.final_norm_mild"] = final_pre >= 2 && (final_pre < 4 || (fin.status == "absent" && fin.head_module.empty()));
  // Where ARCH008 points: the head that reads the stream, else the last
  // block whose stream the model returns.
  mm["arch.final_norm_site"] = fin.head_module.empty() ? final_last_block : fin.head_module;
  mm["arch.last_block"] = last_block;
  // Every branch of the main stack ends in a norm (sandwich norms): each
  // block adds a bounded, normalized amount, so the stream grows by design
  // like sqrt(blocks) times the norms' gains, which norm-gain rules judge.
  mm["arch.branches_normalized"] = main_adds > 0 && normalized_branches == main_adds;
  mm["arch.stream_rms_first"] = finite_or_null(first_in);
  mm["arch.stream_rms_last"] = finite_or_null(last_out);
  mm["arch.stream_growth"] = (std::isfinite(first_in) && std::isfinite(last_out) && first_in > 0) ? finite_or_null(last_out / first_in)
                                                                                                  : nlohmann::json(nullptr);
  // Whether the stream's RMS after the stack is carried by a few values: its
  // sum of squares is under 1% of (its number of values x its largest
  // square), i.e. worth fewer than 1% of its values at the largest one's
  // magnitude. A massive activation (Sun et al. 2024: one channel
  // at the first token, 1e3x the median) lifts the RMS of a [B, T, H]
  // stream 100x while every other value stays where it was: an outlier
  // feature (ACT007's), not a stream grown block after block (eval58
  // llama: 0.0251 -> 5.67 all from 2 of 64 rows). Gaussian values of the
  // same RMS give a sum of squares about numel / 16 times the largest.
  {
    bool concentrated = false;
    if (col && last_out_tap >= 0) {
      const TensorStats& st = col->records()[static_cast<size_t>(last_out_tap)].fwd;
      const double amax = st.absmax();
      const double effective = amax > 0 ? st.sumsq / (amax * amax) : 0.0;  // values' worth of the largest square
      concentrated = st.finite() >= 1000 && amax > 0 && effective < 0.01 * static_cast<double>(st.finite());
      if (amax > 0) mm["arch.stream_last_effective_values"] = metric_number(effective);
    }
    mm["arch.stream_growth_concentrated"] = concentrated;
  }
  // The stream leaves the main stack with under 0.75 of the RMS it entered
  // with: the layers between the blocks take out more than the branches add
  // (diffusers' AutoencoderTiny, TAESD: 0.44 through its decoder, eval23
  // case 38). Independent branches added to a stream never shrink it; a
  // normalization-free stack that decays is taken as one by design
  // (ARCH007, info) rather than ARCH003's warning. False when not measured.
  // Through a multi-stage network (several stacks with downsampling
  // between them: diffusers' T2I-Adapter, 4 levels of 2 blocks, average
  // pooling between, eval37 D01), the stream is judged from the first
  // block's input to the last block's output as well: the main stack alone
  // may be 2 blocks that grow it a little while the network shrinks it.
  // There any shrinking counts (below 1, not 0.75): the growth with depth
  // ARCH003 warns of is not there when the last block leaves a smaller
  // stream than the first one entered (the T2I-Adapter at 0.58 to 0.79 by
  // its widths; the ResNets without norms ARCH003 is for grow 2.1x to 26x).
  {
    const auto& g = mm["arch.stream_growth"];
    const bool main_decays = g.is_number() && g.get<double>() < 0.75;
    const double all = std::isfinite(first_in_all) && std::isfinite(last_out_all) && first_in_all > 0
                           ? last_out_all / first_in_all
                           : std::nan("");
    const bool all_decays = stacks_measured.size() > 1 && std::isfinite(all) && all < 1.0;
    mm["arch.stream_decays"] = main_decays || all_decays;
    if (!main_decays && all_decays) {
      mm["arch.decay_span"] = "across all " + std::to_string(blocks.size()) + " blocks, " + first_block_all +
                              " to " + last_block_all;
      mm["arch.decay_rms_in"] = finite_or_null(first_in_all);
      mm["arch.decay_rms_out"] = finite_or_null(last_out_all);
      mm["arch.decay_growth"] = finite_or_null(all);
    } else {
      mm["arch.decay_span"] = "through " + main_stack;
      mm["arch.decay_rms_in"] = finite_or_null(first_in);
      mm["arch.decay_rms_out"] = finite_or_null(last_out);
      mm["arch.decay_growth"] = g;
    }
  }
  // The stream's growth per block over the second half of the main stack:
  // the smallest out / in there. Independent unit branches added to the
  // stream grow it like sqrt(k), a ratio sqrt((k + 1) / k) at block k, at
  // most 1.22 from the third block on whatever the scale of the first; a
  // stream that still multiplies by 1.3 or more at every block deep in the
  // stack grows geometrically (each branch adds a constant multiple of the
  // stream), which no depth absorbs (ARCH006). The smallest, not a mean: one
  // block scaled far too large is ARCH005's, not growth per block. Needs 4
  // measured blocks.
  if (block_ratio.size() >= 4) {
    double least = std::numeric_limits<double>::infinity();
    for (size_t i = block_ratio.size() / 2; i < block_ratio.size(); ++i)
      least = std::isfinite(block_ratio[i]) ? std::min(least, block_ratio[i]) : std::nan("");
    if (std::isfinite(least)) mm["arch.stream_late_ratio"] = metric_number(least);
  }
  // The growth the blocks themselves make: the product of each main-stack
  // block's out / in. Between blocks the stream passes unchanged in a plain
  // stack (the product is then arch.stream_growth), but a norm at the end of
  // each block that the residual reading does not see as the stream's (a
  // Conformer block's closing norm_out: LASR-CTC, 0.0006 lifted to 1.0
  // before the next block, every block boundary at RMS 1; eval46) resets it,
  // and first-in to last-out then measures that norm, not the additions.
  // arch.stream_growth when a block was not measured.
  {
    double log_sum = 0;
    bool all = !block_ratio.empty();
    for (double r : block_ratio) {
      if (!std::isfinite(r) || r <= 0) all = false;
      else log_sum += std::log(r);
    }
    mm["arch.stream_growth_blocks"] = all ? finite_or_null(std::exp(log_sum)) : mm["arch.stream_growth"];
  }
  std::string growth_layer = last_block;
  mm["arch.stream_growth_note"] = std::string();
  if (growth_log > 0 && !top_block.empty()) {
    mm["arch.stream_growth_max_block"] = top_block;
    mm["arch.stream_growth_max_factor"] = finite_or_null(std::exp(top_log));
    mm["arch.stream_growth_max_share"] = finite_or_null(top_log / growth_log);
  }
  // The largest branch of the main stack, however few blocks it has
  // (ARCH003 quotes it: a 2-block stack printed "n/a", eval37 D01).
  if (!branch.empty()) {
    auto top = std::max_element(branch.begin(), branch.end());
    mm["arch.branch_rms_max"] = finite_or_null(top->first);
    mm["arch.branch_rms_max_block"] = top->second;
  }
  if (branch.size() >= 3) {
    auto top = std::max_element(branch.begin(), branch.end());
    std::vector<double> others;
    for (auto it = branch.begin(); it != branch.end(); ++it)
      if (it != top) others.push_back(it->first);
    std::nth_element(others.begin(), others.begin() + static_cast<long>(others.size() / 2), others.end());
    const double median = others[others.size() / 2];
    mm["arch.branch_rms_median_others"] = finite_or_null(median);
    // The largest branch over the median other one; inf when only it adds anything.
    mm["arch.branch_rms_ratio"] = median > 0 ? metric_number(top->first / median)
                                  : top->first > 0 ? metric_number(std::numeric_limits<double>::infinity())
                                                   : MetricValue(nullptr);
    if (top->first > 0 && top->first >= 10 * median) {
      growth_layer = top->second;
      std::ostringstream o;
      o << "; " << top->second << "'s branch adds RMS " << std::setprecision(3) << top->first
        << ", " << (median > 0 ? top->first / median : std::numeric_limits<double>::infinity())
        << "x what the median other block adds (" << median << ")";
      mm["arch.stream_growth_note"] = o.str();
    }
  }
  mm["arch.stream_growth_layer"] = growth_layer;

  // Block norms that cannot normalize: a norm divides by sqrt(var + eps),
  // and with its input's mean square (an upper bound of the variance it
  // removes) below eps it multiplies by about 1/sqrt(eps) instead (GroupNorm
  // eps 1e-5 on a stream of RMS 1e-5 scales it by ~300). Then every branch
  // adds a fixed multiple of the stream and the stream grows geometrically
  // whatever the branches' initialization: the growth reads as ARCH004's,
  // but the defect is upstream (activations that vanished before the stack:
  // HF MobileViTV2's BatchNorm gains drawn from N(0, 0.02)). True when every
  // measured pre-norm of the main stack's blocks has mean square < eps.
  {
    int64_t checked = 0, under = 0;
    double worst = 0;  // the largest mean square / eps seen
    for (const auto& b : blocks) {
      if (b.stack != main_stack) continue;
      for (const auto* a : b.adds) {
        if (a->placement != "pre-norm" || a->norm_module.empty()) continue;
        for (const auto& n : im.norm_ops()) {
          if (n.module != a->norm_module || !col) continue;
          const auto eps_it = n.args.find("eps");
          if (eps_it == n.args.end() || !eps_it->is_number()) continue;
          const double eps = eps_it->get<double>();
          // The norm's own input tap, else (no tap, or one the pass did not
          // fill) the stream entering the addition: a pre-norm reads it.
          double rms = rms_of(n.input_tap);
          if (!std::isfinite(rms)) rms = rms_of(a->in_tap);
          if (!(eps > 0) || !std::isfinite(rms)) continue;
          ++checked;
          if (rms * rms < eps) ++under;
          worst = std::max(worst, rms * rms / eps);
        }
      }
    }
    mm["arch.block_norms_under_eps"] = checked > 0 && under == checked;
    if (checked > 0) mm["arch.block_norm_ms_to_eps_max"] = finite_or_null(worst);
  }

  // A head whose weights are all exactly zero: ControlNet's zero
  // convolutions (diffusers zero_module), adapters and LoRA up-projections
  // are built so that the stack's output adds nothing at initialization to
  // another network's features, which normalize it there: no "head" of this
  // model reads the stream (ARCH002 steps aside; a classifier's
  // zero-initialized head behind a final norm is unaffected, it has the norm).
  bool head_zero = false;
  if (!fin.head_module.empty())
    for (const auto& mi : s.model.modules) {
      if (mi.path != fin.head_module) continue;
      bool any = false, all_zero = true;
      for (const auto& p : mi.module.named_parameters(/*recurse=*/false)) {
        if (p.name != "weight" || !p.value.defined() || p.value.numel() == 0) continue;
        any = true;
        all_zero = all_zero && !p.value.detach().ne(0).any().item<bool>();
      }
      head_zero = any && all_zero;
      break;
    }
  mm["arch.head_zero_init"] = head_zero;
  s.doc.probes["architecture"] = {{"blocks", rows},
                                  {"main_stack", main_stack},
                                  {"placement", mm["arch.placement"]},
                                  {"final_norm", {{"status", fin.status}, {"norm", fin.norm_module}, {"head", fin.head_module}, {"stack", final_stack}}},
                                  {"stream_rms_from", col ? "train pass" : "not measured (the train pass did not run)"}};
}

const std::vector<std::string>& architecture_writes() {
  static const std::vector<std::string> names = {
      "arch.blocks", "arch.blocks_all", "arch.branch_stream_ratio_max", "arch.branches_scaled", "arch.stream_growth_blocks", "arch.branch_scale_max", "arch.weight_normalized_modules", "arch.norm_modules", "arch.final_norm_mild", "arch.final_norm_site", "arch.final_stack_to_output", "arch.final_norm", "arch.final_norm_layer", "arch.head_layer", "arch.last_block",
      "arch.norm_layers", "arch.placement", "arch.post_norm_blocks", "arch.post_norm_residual_scaled", "arch.post_norm_residual_scale", "arch.pre_norm_blocks",
      "arch.residual_additions", "arch.stack", "arch.stream_growth", "arch.stream_decays", "arch.fused_modules", "arch.decay_span", "arch.decay_rms_in", "arch.decay_rms_out", "arch.decay_growth", "arch.stream_growth_layer", "arch.stream_growth_note",
      "arch.stream_growth_max_block", "arch.stream_growth_max_factor", "arch.stream_growth_max_share",
      "arch.branch_rms_max", "arch.branch_rms_max_block", "arch.branch_rms_median_others", "arch.branch_rms_ratio",
      "arch.stream_rms_first", "arch.branches_normalized", "arch.stream_late_ratio",
      "arch.stream_rms_last", "arch.final_stack", "arch.final_stack_pre_norm_blocks", "arch.final_stack_last_block",
      "arch.final_stack_stream_rms", "arch.block_norms_under_eps", "arch.block_norm_ms_to_eps_max", "arch.head_zero_init",
      "arch.stream_growth_concentrated", "arch.stream_last_effective_values"};
  return names;
}

}  // namespace nd
