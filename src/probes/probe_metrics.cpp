// What each probe writes (issue 14, "Self-contained probes"): the metric
// families of docs/metrics.md, by the probe that measures them. Session::run_probe
// checks every run against this table; a metric written outside it is an
// internal error of normdoctor (tests/torch/probe_metrics_test.cpp).
#include <map>
#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

const std::map<std::string, std::vector<std::string>>& probe_declared_metrics() {
  static const std::map<std::string, std::vector<std::string>> table = {
    // its per-checkpoint forward_backward runs are put back; the series are timeline.*
      {"timeline", {"timeline."}},
      {"gain_convention",
       {"norm.gain_effective_mean", "norm.gain_formula", "norm.gain_loaded_absmean", "norm.gain_loaded_mean",
        "norm.gain_loaded_std", "norm.gain_negative_fraction"}},
      {"forward_backward",
       {"act.", "attn.", "fwd.", "grad.", "loss.", "norm.eps", "norm.gain_absmax", "norm.gain_mean",
        "norm.gain_p99", "param.", "sat.", "softmax."}},
      {"update", {"adam.", "update."}},
    // batchdep.: its batch_dependence sub-probe runs inside it
      {"normalization", {"batchdep.", "bn.", "drift.", "evalrep.", "mode."}},
      {"batch_dependence", {"batchdep."}},
      {"fast_path", {"fastpath."}},
      {"architecture",
       {"arch.blocks", "arch.final_norm", "arch.final_norm_layer", "arch.head_layer", "arch.last_block",
        "arch.norm_layers", "arch.placement", "arch.post_norm_blocks", "arch.pre_norm_blocks",
        "arch.residual_additions", "arch.stack", "arch.stream_growth", "arch.stream_rms_first",
        "arch.stream_rms_last"}},
      {"features", {"dead.", "logits.", "norm.groups_per_pass", "norm.values_per_group", "outlier."}},
      {"sequence",
       {"arch.attention_ops", "layout.", "norm.batchnorm_over_time", "norm.centered",
        "norm.channels_per_group", "norm.computing_dtype", "norm.eps", "norm.fails_at_other_length",
        "norm.input_layout", "norm.input_shape", "norm.layout_from", "norm.num_channels", "norm.num_groups",
        "norm.op", "norm.over_batch", "norm.over_time", "norm.reduced_axes", "norm.reduces_batch",
        "norm.reduces_time", "norm.spatial_size", "norm.statistic", "norm.time_axis_from", "norm.written_out",
        "pad.error", "pad.first_layer", "pad.first_layer_kind", "pad.mode", "pad.norms_over_time",
        "pad.padded_to", "pad.rel_diff", "pad.rel_diff_eval", "pad.rel_diff_train", "pad.via_norm",
        "pad.via_pooling_or_conv", "seqlen.error", "seqlen.failed_layer", "seqlen.first_layer",
        "seqlen.first_layer_kind", "seqlen.lengths", "seqlen.rel_diff", "seqlen.via_norm"}},
      {"noise_floors",
       {"pad.noise_floor", "pad.noise_floor_from", "pad.over_floor", "seqlen.noise_floor",
        "seqlen.noise_floor_from", "seqlen.over_floor"}},
      {"precision",
       {"norm.next_input_rms", "norm.next_layer", "norm.next_layer_absmax", "norm.next_layer_fp16_headroom",
        "prec."}},
      {"replay", {"replay."}},
  };
  return table;
}

bool probe_declares(const std::string& probe, const std::string& metric) {
  const auto& t = probe_declared_metrics();
  auto it = t.find(probe);
  if (it == t.end()) return false;
  for (const auto& p : it->second) {
    if (!p.empty() && p.back() == '.' ? metric.rfind(p, 0) == 0 : metric == p) return true;
  }
  return false;
}

}  // namespace nd
