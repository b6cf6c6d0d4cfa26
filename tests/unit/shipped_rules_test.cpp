// Every shipped rule file (rules/*.toml) against the catalog conventions:
// loads, names a valid slug, documents itself (explain parts, references,
// fixes), and only names metrics that docs/metrics.md defines.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>

#include "rules/catalog.h"
#include "rules/rules.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_shipped_rules_test {

namespace {

std::vector<nd::Rule> shipped() { return nd::load_rules((ndtest::source_dir() / "rules").string()); }

/// Every backticked metric-like name in docs/metrics.md.
std::set<std::string> documented_metrics() {
  const std::string text = ndtest::read_file(ndtest::source_dir() / "docs" / "metrics.md");
  std::set<std::string> out;
  const std::regex name("`([a-z0-9_]+(\\.[a-z0-9_]+)+)`");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1].str());
  return out;
}

std::string conditions(const nd::Rule& r) {
  std::string s;
  for (const auto& c : r.when) s += (s.empty() ? "" : " and ") + c.metric + " " + c.op + " " + c.value.dump();
  return s;
}

struct Expected {
  const char* id;
  const char* slug;
  nd::Severity severity;
  const char* scope;
  const char* select;
  bool data_dependent;
  const char* layer_from;
  const char* when;
};

const Expected kExpected[] = {
    {"ACT001", "nonfinite-forward", nd::Severity::kError, "layer", "all", false, "",
     "fwd.first_nonfinite == true and fwd.weights_nonfinite == false"},
    {"ACT002", "activation-growth", nd::Severity::kWarning, "layer", "first", false, "",
     "act.growth > 1000 and act.growth_only_at_output == false"},
    {"ACT003", "fp16-overflow-risk", nd::Severity::kWarning, "layer", "first", true, "", "act.fp16_headroom < 2 and act.absmax_is_mask_constant != true and act.is_returned_loss != true"},
    {"ACT004", "saturated-activation", nd::Severity::kWarning, "layer", "all", true, "", "sat.fraction > 0.5"},
    {"ACT005", "softmax-collapse", nd::Severity::kWarning, "layer", "all", false, "",
     "softmax.onehot_fraction > 0.9 and softmax.rows >= 4 and run.trained == false"},
    {"ACT006", "dead-units", nd::Severity::kWarning, "layer", "all", true, "",
     "dead.fraction > 0.25 and dead.over_chance >= 4 and dead.mirror_p < 0.001"},
    {"ACT007", "outlier-features", nd::Severity::kWarning, "layer", "first", true, "",
     "outlier.ratio > 100 and outlier.count <= 8"},
    {"ACT008", "output-logit-divergence", nd::Severity::kWarning, "model", "all", true, "logits.head",
     "logits.logz_abs_mean > 30 and act.depth_growth_max < 1000"},
    {"ACT009", "nonfinite-forward", nd::Severity::kError, "layer", "all", false, "", "evalfwd.first_nonfinite == true"},
    {"ACT010", "softmax-collapse", nd::Severity::kWarning, "layer", "all", false, "",
     "softmax.other_rows >= 16 and softmax.other_max_prob_mean > 0.75 and softmax.other_entropy_ratio < 0.25 and "
     "softmax.other_logit_absmax > 15 and softmax.other_onehot_fraction <= 0.9 and softmax.other_to_output == false"},
    {"ACT011", "dead-units", nd::Severity::kWarning, "layer", "first", true, "",
     "dead.whole_layer == true and dead.mirror_p >= 0.001 and output.constant_over_batch == true"},
    {"ACT012", "nonfinite-forward", nd::Severity::kError, "layer", "all", false, "",
     "fwd.first_nonfinite == true and fwd.weights_nonfinite == true"},
    {"ACT013", "activation-growth", nd::Severity::kWarning, "layer", "first", false, "",
     "act.calls_measured >= 4 and act.call_growth > 100 and act.call_growth_late > 10 and act.call_rising_fraction >= 0.75"},
    {"ADAM001", "adam-second-moment-lag", nd::Severity::kWarning, "layer", "all", true, "",
     "adam.rms_ratio_max > 3 and adam.loss_is_training_loss == true and adam.clipping_explains == false"},
    {"ADAM002", "adam-second-moment-lag", nd::Severity::kWarning, "layer", "group", true, "", "adam.eps_fraction_max > 0.5"},
    {"ADAM003", "adam-second-moment-lag", nd::Severity::kInfo, "model", "all", true, "adam.rms_ratio_model_param_module",
     "adam.rms_ratio_model_max > 3 and adam.loss_is_training_loss == true and adam.clipping_explains == true"},
    {"ARCH001", "deep-post-norm", nd::Severity::kWarning, "model", "all", false, "arch.stack",
     "arch.post_norm_blocks > 12 and arch.post_norm_residual_scaled == false"},
    {"ARCH002", "missing-final-norm", nd::Severity::kWarning, "model", "all", false, "arch.head_layer",
     "arch.final_stack_pre_norm_blocks >= 4 and arch.final_norm == \"absent\" and arch.head_zero_init == false and "
     "arch.final_stack_to_output == false"},
    {"ARCH003", "no-normalization", nd::Severity::kWarning, "model", "all", false, "arch.stack",
     "arch.blocks_all >= 8 and arch.norm_layers == 0 and arch.norm_modules == 0 and arch.fused_modules == 0 and "
     "arch.branch_stream_ratio_max > 0.01 and arch.stream_decays == false and arch.weight_normalized_modules == 0 and "
     "arch.branches_scaled == false"},
    {"ARCH004", "residual-stream-growth", nd::Severity::kWarning, "model", "all", true, "arch.stream_growth_layer",
     "arch.branches_normalized == false and arch.pre_norm_blocks >= 2 and arch.stream_growth > 100 and "
     "arch.stream_growth_blocks > 100 and arch.block_norms_under_eps == false and arch.stream_growth_concentrated == false and "
     "run.trained == false"},
    {"ARCH005", "residual-stream-growth", nd::Severity::kInfo, "model", "all", true, "arch.branch_rms_max_block",
     "arch.pre_norm_blocks >= 3 and arch.branch_rms_ratio >= 10 and arch.stream_growth_max_factor >= 2 and "
     "arch.stream_growth <= 100 and arch.block_norms_under_eps == false"},
    {"ARCH006", "residual-stream-growth", nd::Severity::kWarning, "model", "all", true, "arch.last_block",
     "arch.branches_normalized == false and arch.pre_norm_blocks >= 4 and arch.stream_late_ratio >= 1.3 and "
     "arch.stream_growth > 10 and arch.stream_growth <= 100 and arch.block_norms_under_eps == false"},
    {"ARCH007", "no-normalization", nd::Severity::kInfo, "model", "all", true, "arch.stack",
     "arch.blocks_all >= 8 and arch.norm_layers == 0 and arch.norm_modules == 0 and arch.fused_modules == 0 and "
     "arch.branch_stream_ratio_max > 0.01 and arch.stream_decays == true"},
    {"ARCH008", "missing-final-norm", nd::Severity::kInfo, "model", "all", false, "arch.final_norm_site",
     "arch.final_norm_mild == true and arch.final_norm == \"absent\" and arch.head_zero_init == false"},
    {"ATTN001", "attention-logit-growth", nd::Severity::kWarning, "layer", "all", false, "",
     "attn.logit_absmax > 30 and attn.large_logit_row_fraction >= 0.01 and run.trained == false"},
    {"ATTN002", "nonfinite-forward", nd::Severity::kError, "layer", "all", true, "", "attn.masked_nan_rows > 0"},
    {"ATTN003", "softmax-collapse", nd::Severity::kWarning, "layer", "all", false, "",
     "attn.logit_absmax > 30 and softmax.max_prob_mean > 0.75 and attn.rows >= 16 and softmax.onehot_fraction <= 0.9 and "
     "run.trained == false"},
    {"ATTN004", "attention-logit-growth", nd::Severity::kWarning, "layer", "all", false, "",
     "attn.logit_absmax > 50 and attn.large_logit_row_fraction >= 0.01 and run.trained == true"},
    {"AXIS001", "norm-over-time-axis", nd::Severity::kError, "layer", "all", false, "",
     "norm.over_time == true and norm.over_batch == false and norm.input_standardization == false"},
    {"AXIS002", "norm-over-batch-axis", nd::Severity::kError, "layer", "all", false, "", "norm.over_batch == true"},
    {"AXIS003", "batchnorm-in-sequence-model", nd::Severity::kWarning, "layer", "group", false, "",
     "norm.batchnorm_over_time == true and arch.attention_ops > 0 and norm.after_convolution == false and "
     "layout.tokens_or_padding == true"},
    {"AXIS004", "groupnorm-group-size", nd::Severity::kWarning, "layer", "group", false, "",
     "norm.channels_per_group == 1 and norm.num_channels > 1 and norm.spatial_size > 1 and norm.groups_are_channels == false"},
    {"AXIS005", "groupnorm-group-size", nd::Severity::kInfo, "layer", "group", false, "",
     "norm.num_groups == 1 and norm.num_channels > 1"},
    {"AXIS006", "groupnorm-group-size", nd::Severity::kWarning, "layer", "all", false, "",
     "norm.groups_straddle_channels == true"},
    {"AXIS007", "norm-over-time-axis", nd::Severity::kInfo, "layer", "all", false, "",
     "norm.over_time == true and norm.over_batch == false and norm.input_standardization == true"},
    {"AXIS008", "norm-over-time-axis", nd::Severity::kError, "layer", "all", false, "", "norm.channels_are_time == true"},
    {"AXIS009", "groupnorm-group-size", nd::Severity::kWarning, "layer", "all", false, "", "norm.groups_split_positions == true"},
    {"AXIS010", "norm-over-batch-axis", nd::Severity::kWarning, "model", "all", false, "batchdep.batch_axis_module",
     "batchdep.batch_axis_normalizes == true and batchdep.max_rel_diff > 0.001 and batchdep.over_floor > 10"},
    {"AXIS011", "norm-over-time-axis", nd::Severity::kWarning, "layer", "group", false, "",
     "norm.time_stats_in_causal_model == true and norm.groupnorm_time_in_causal_model == false"},
    {"AXIS012", "groupnorm-group-size", nd::Severity::kWarning, "layer", "all", false, "",
     "norm.groupnorm_time_in_causal_model == true"},
    {"AXIS013", "batchnorm-in-sequence-model", nd::Severity::kInfo, "layer", "group", false, "",
     "norm.batchnorm_over_time == true and arch.attention_ops > 0 and norm.after_convolution == false and "
     "layout.tokens_or_padding == false"},
    {"AXIS014", "norm-over-time-axis", nd::Severity::kWarning, "layer", "all", false, "",
     "norm.partial_space == true and norm.over_batch == false"},
    {"BN001", "bn-stale-running-stats", nd::Severity::kWarning, "model", "all", false, "bn.first_layer_at_init",
     "bn.layers_at_init > 0 and bn.at_init_before_training == false"},
    {"BN002", "bn-stale-running-stats", nd::Severity::kWarning, "layer", "first", true, "",
     "bn.at_initial_values == false and bn.running_stats_finite == true and bn.mean_z > 1 and bn.train_confirms == true and bn.sample_examples >= 2 and "
     "bn.mean_z_over_noise > 3"},
    {"BN003", "bn-stale-running-stats", nd::Severity::kWarning, "layer", "first", true, "",
     "bn.at_initial_values == false and bn.running_stats_finite == true and bn.var_ratio_off > 4 and bn.var_ratio_over_noise > 3 and "
     "bn.train_confirms == true and bn.mean_beyond_noise == false and bn.sample_examples >= 2 and bn.variance_shift_explains == false"},
    {"BN004", "train-eval-drift", nd::Severity::kWarning, "model", "all", true, "drift.first_layer",
     "drift.rel_output_diff > 0.5 and drift.over_floor > 10 and drift.explained_by_stale_stats == false and "
     "drift.over_bn_noise > 3 and drift.over_train_noise > 3 and drift.sample_examples >= 2"},
    {"BN005", "eval-batch-dependence", nd::Severity::kError, "model", "all", false, "batchdep.first_layer",
     "batchdep.max_rel_diff > 0.001 and batchdep.over_floor > 10 and batchdep.first_call_init != true"},
    {"BN006", "bn-batch-of-one", nd::Severity::kError, "layer", "all", false, "",
     "bn.values_per_channel <= 1 and bn.training_batch_assumed == false"},
    {"BN007", "bn-small-batch-noise", nd::Severity::kWarning, "layer", "first", true, "",
     "bn.train_batch_size_given == true and bn.examples_per_pass < 16 and bn.mean_noise > 0.1"},
    {"BN008", "bn-small-batch-noise", nd::Severity::kInfo, "layer", "first", true, "",
     "bn.train_batch_size_given == false and bn.examples_per_pass < 16 and bn.mean_noise > 0.1"},
    {"BN009", "bn-stale-running-stats", nd::Severity::kWarning, "layer", "first", true, "",
     "bn.at_initial_values == false and bn.layers_past_single_gate == 0 and bn.estimating_in_training == false and bn.eval_error > 0.25 and bn.train_confirms == true and bn.eval_error_over_floor > 5 and drift.rel_output_diff > 0.1 and drift.explained_by_stale_stats == true and drift.over_floor > 10 and "
     "bn.variance_shift_explains == false"},
    {"BN010", "bn-batch-of-one", nd::Severity::kInfo, "layer", "all", false, "",
     "bn.values_per_channel <= 1 and bn.training_batch_assumed == true"},
    {"BN011", "bn-stale-running-stats", nd::Severity::kError, "model", "all", false, "bn.first_layer_running_nonfinite",
     "bn.layers_running_nonfinite > 0"},
    {"BN012", "bn-stale-running-stats", nd::Severity::kError, "model", "all", false, "bn.first_layer_running_var_negative",
     "bn.layers_running_var_negative > 0"},
    {"BN013", "train-eval-drift", nd::Severity::kWarning, "layer", "first", true, "", "bn.variance_shift == true"},
    {"CKPT001", "norm-gain-convention", nd::Severity::kWarning, "layer", "all", false, "",
     "norm.gain_from_checkpoint == true and norm.gain_formula == \"weight\" and norm.gain_loaded_absmean < 0.5 and "
     "norm.gain_negative_fraction >= 0.25"},
    {"CKPT002", "norm-gain-convention", nd::Severity::kInfo, "layer", "all", false, "",
     "norm.gain_from_checkpoint == true and norm.gain_formula == \"1 + weight\" and norm.gain_negative_fraction == 0 and "
     "norm.gain_loaded_mean > 0.75 and norm.gain_loaded_mean < 1.25 and norm.gain_loaded_std < 0.25"},
    {"CKPT003", "norm-gain-convention", nd::Severity::kInfo, "layer", "all", false, "",
     "norm.gain_from_checkpoint == false and norm.gain_formula == \"1 + weight\" and norm.gain_loaded_mean == 1 and "
     "norm.gain_loaded_std == 0"},
    {"GRAD001", "nonfinite-gradient", nd::Severity::kError, "layer", "all", false, "",
     "grad.first_nonfinite == true and grad.nonfinite_reaches_parameters == true"},
    {"GRAD002", "exploding-gradients", nd::Severity::kWarning, "model", "all", false, "grad.first_layer",
     "grad.input_output_ratio > 1000 and grad.ratio_from_one_norm == false and grad.rel_contradicts_exploding == false and "
     "grad.bn_batch_noise == false and grad.growth_between_branches == false and grad.profile_shallow == false and "
     "grad.blocks_contradict_exploding == false"},
    {"GRAD003", "vanishing-gradients", nd::Severity::kWarning, "model", "all", false, "grad.first_layer",
     "grad.input_output_ratio < 0.001 and grad.rel_contradicts_vanishing == false and grad.shrink_concentrated == false and "
     "grad.shrink_between_branches == false and grad.small_gain_params == 0 and grad.bn_batch_noise == false and grad.cut_layer == \"\" and grad.profile_shallow == false and "
     "grad.blocks_contradict_vanishing == false"},
    {"GRAD004", "no-gradient-path", nd::Severity::kWarning, "layer", "all", false, "",
     "grad.params_no_signal > 0 and grad.module_ran != false and grad.no_signal_under == \"\" and grad.blocked_by == \"\" and "
     "grad.output_discarded != true and loss.saturated != true and grad.zero_from_discarded_positions != true and "
     "grad.zero_from_single_value_bn != true"},
    {"GRAD005", "no-gradient-path", nd::Severity::kInfo, "model", "all", false, "grad.zero_weight_layer",
     "grad.blocked_layers > 0"},
    {"GRAD006", "vanishing-gradients", nd::Severity::kInfo, "model", "all", false, "grad.max_shrink_to",
     "grad.input_output_ratio < 0.001 and grad.shrink_concentrated == true and grad.rel_contradicts_vanishing == false and "
     "grad.max_shrink_degenerate_norm == false"},
    {"GRAD007", "no-gradient-path", nd::Severity::kInfo, "model", "all", false, "grad.bn_cancelled_first_layer",
     "grad.bn_cancelled_params > 0"},
    {"GRAD008", "vanishing-gradients", nd::Severity::kInfo, "model", "all", false, "grad.first_layer",
     "grad.input_output_ratio < 0.001 and grad.small_gain_params > 0 and grad.shrink_concentrated == false"},
    {"GRAD009", "no-gradient-path", nd::Severity::kInfo, "model", "all", false, "grad.other_outputs_first_layer",
     "grad.other_outputs_params > 0"},
    {"GRAD010", "bn-small-batch-noise", nd::Severity::kInfo, "model", "all", true, "grad.first_layer",
     "grad.bn_batch_noise == true and grad.input_output_ratio_log10_abs > 3"},
    {"GRAD011", "nonfinite-gradient", nd::Severity::kInfo, "layer", "all", true, "",
     "grad.first_nonfinite == true and grad.nonfinite_reaches_parameters == false"},
    {"GRAD012", "no-gradient-path", nd::Severity::kWarning, "model", "all", false, "grad.no_loss_path_layer",
     "grad.no_loss_path == true and run.training_intent == true"},
    {"GRAD013", "no-gradient-path", nd::Severity::kInfo, "model", "all", false, "",
     "grad.no_loss_path == true and run.training_intent == false"},
    {"GRAD014", "no-gradient-path", nd::Severity::kInfo, "layer", "all", false, "",
     "grad.params_no_signal > 0 and grad.module_ran == false and grad.unused_in_training == false and "
     "grad.unused_under == \"\" and grad.tied_to == \"\""},
    {"GRAD015", "no-gradient-path", nd::Severity::kWarning, "layer", "all", false, "",
     "grad.subtree_no_signal_modules >= 2 and grad.subtree_output_discarded != true and "
     "grad.subtree_kept_in_eval != true"},
    {"GRAD016", "no-gradient-path", nd::Severity::kWarning, "layer", "all", false, "",
     "grad.params_no_signal > 0 and grad.unused_in_training == true and grad.unused_under == \"\" and "
     "grad.tied_to == \"\""},
    {"GRAD017", "no-gradient-path", nd::Severity::kWarning, "layer", "all", true, "",
     "grad.cut_blocked_modules >= 2 and grad.cut_at_degenerate_norm == false"},
    {"GRAD018", "no-gradient-path", nd::Severity::kWarning, "layer", "all", true, "", "moe.idle_chance < 1e-06"},
    {"GRAD019", "no-gradient-path", nd::Severity::kInfo, "layer", "all", false, "", "grad.params_unread > 0 and grad.module_ran == true"},
    {"GRAD020", "no-gradient-path", nd::Severity::kWarning, "layer", "all", false, "",
     "grad.output_layer == true and grad.output_layer_frozen == true and grad.output_layer_tied == false and "
     "grad.trainable_fraction_before_output >= 0.5"},
    {"GRAD021", "no-gradient-path", nd::Severity::kInfo, "layer", "all", false, "",
     "grad.params_no_signal > 0 and grad.module_ran == true and grad.output_discarded == true and grad.no_signal_under == "
     "\"\" and grad.blocked_by == \"\""},
    {"GRAD022", "output-logit-divergence", nd::Severity::kWarning, "model", "all", true, "", "loss.saturated == true"},
    {"GRAD023", "no-gradient-path", nd::Severity::kInfo, "layer", "all", false, "",
     "grad.subtree_no_signal_modules >= 2 and grad.subtree_output_discarded == true"},
    {"GRAD024", "no-gradient-path", nd::Severity::kInfo, "layer", "all", false, "",
     "grad.params_no_signal > 0 and grad.module_ran == true and grad.zero_from_discarded_positions == true and "
     "grad.no_signal_under == \"\" and grad.blocked_by == \"\" and grad.output_discarded != true"},
    {"GRAD025", "no-gradient-path", nd::Severity::kInfo, "layer", "all", true, "",
     "grad.params_written_by_empty_mask > 0 and grad.module_ran != false"},
    {"IN001", "nonfinite-input", nd::Severity::kError, "input", "all", false, "", "input.nonfinite_count > 0"},
    {"IN002", "input-scale", nd::Severity::kWarning, "input", "all", true, "",
     "input.is_float == true and input.scale > 10 and input.scale_invariant == false and input.periodic_encoding != true "
     "and input.rescaled_in_model != true and input.read_by_layer == true"},
    {"LR001", "update-ratio", nd::Severity::kWarning, "layer", "group", true, "", "update.ratio_over_limit > 1"},
    {"MODE001", "saved-in-train-mode", nd::Severity::kWarning, "model", "all", false, "",
     "mode.saved_training == true and mode.dependent_ops > 0 and run.training_intent == false"},
    {"MODE002", "mode-switch-ineffective", nd::Severity::kWarning, "model", "all", false, "",
     "mode.baked_training_true > 0"},
    {"MODE003", "mode-switch-ineffective", nd::Severity::kInfo, "model", "all", false, "",
     "mode.baked_training_false > 0 and run.training_intent == false"},
    {"MODE004", "eval-nondeterminism", nd::Severity::kWarning, "model", "all", false, "evalrep.first_layer",
     "evalrep.rel_diff > 1e-05 and evalrep.baked_only != true and evalrep.gaussian_sampling != true"},
    {"MODE005", "saved-in-train-mode", nd::Severity::kWarning, "model", "all", false, "mode.first_submodule_in_training",
     "mode.saved_training == false and mode.submodules_in_training > 0"},
    {"MODE006", "mode-switch-ineffective", nd::Severity::kWarning, "model", "all", false, "",
     "mode.baked_training_false > 0 and run.training_intent == true"},
    {"MODE007", "eval-nondeterminism", nd::Severity::kWarning, "model", "all", false, "evalstate.first_layer",
     "evalstate.rel_diff > 1e-05 and evalstate.training_step == false"},
    {"MODE008", "saved-in-train-mode", nd::Severity::kInfo, "model", "all", false, "",
     "mode.saved_training == true and mode.dependent_ops > 0 and run.training_intent == true"},
    {"MODE009", "eval-nondeterminism", nd::Severity::kInfo, "model", "all", false, "evalrep.first_layer",
     "evalrep.rel_diff > 1e-05 and evalrep.baked_only != true and evalrep.gaussian_sampling == true"},
    {"MODE010", "eval-nondeterminism", nd::Severity::kWarning, "model", "all", false, "evalstate.overwrite_layer",
     "evalstate.params_overwritten_count > 0 and evalstate.overwritten_were_constant == false and "
     "evalstate.history_rel_diff > 1e-05 and evalstate.rel_diff <= 1e-05"},
    {"MODE011", "saved-in-train-mode", nd::Severity::kWarning, "model", "all", false, "mode.frozen_part",
     "mode.frozen_bn_in_training > 0"},
    {"NORM001", "norm-gain-growth", nd::Severity::kWarning, "layer", "all", false, "", "norm.gain_p99 > 10"},
    {"NORM002", "degenerate-norm-group", nd::Severity::kError, "layer", "all", false, "",
     "norm.values_per_group == 1"},
    {"NORM003", "degenerate-norm-group", nd::Severity::kError, "layer", "all", false, "",
     "norm.raises_single_value == true"},
    {"PREC001", "fp16-overflow-risk", nd::Severity::kError, "layer", "first", true, "",
     "prec.first_nonfinite == true and prec.first_nonfinite_cause != \"norm-eps\" and prec.first_nonfinite_cause != "
     "\"variance-cancellation\" and prec.first_nonfinite_cause != \"domain\" and prec.first_nonfinite_cause != "
     "\"log-underflow\""},
    {"PREC002", "norm-eps-precision", nd::Severity::kError, "layer", "all", true, "",
     "prec.eps_vanishes == true and prec.norm_fp32_internally == false and prec.norm_nonfinite_count > 0"},
    {"PREC003", "loss-scale-underflow", nd::Severity::kWarning, "model", "all", true, "prec.grad_underflow_layer",
     "prec.loss_scale_mode == \"dynamic\" and prec.forward_finite == true and prec.grad_underflow_fraction > 0.01 and "
     "prec.grad_underflow_fraction_unexplained > 0.01"},
    {"PREC004", "norm-eps-precision", nd::Severity::kInfo, "layer", "all", true, "",
     "prec.eps_vanishes == true and prec.norm_fp32_internally == true and prec.norm_nonfinite_count > 0"},
    {"PREC005", "nonfinite-forward", nd::Severity::kError, "layer", "all", true, "",
     "prec.nonfinite_in_format == true"},
    {"PREC006", "norm-eps-precision", nd::Severity::kError, "layer", "all", true, "",
     "prec.norm_internal_overflow == true"},
    {"PREC007", "norm-eps-precision", nd::Severity::kError, "layer", "all", true, "",
     "prec.variance_cancellation == true"},
    {"PREC008", "norm-eps-precision", nd::Severity::kError, "layer", "all", true, "",
     "prec.divisor_eps_vanishes == true"},
    {"PREC009", "fp16-overflow-risk", nd::Severity::kWarning, "layer", "all", true, "",
     "prec.internal_overflow == true and prec.norm_internal_overflow != true"},
    {"PREC010", "fp16-overflow-risk", nd::Severity::kError, "model", "all", false, "prec.native_failed_in",
     "prec.native_overflow == true"},
    {"PREC011", "loss-scale-underflow", nd::Severity::kInfo, "model", "all", true, "prec.grad_underflow_layer",
     "prec.forward_finite == true and prec.grad_underflow_fraction > 0.01 and prec.grad_underflow_fraction_unexplained <= 0.01 and "
     "prec.small_gain_branches > 0"},
    {"PREC012", "loss-scale-underflow", nd::Severity::kWarning, "model", "all", true, "prec.grad_underflow_layer",
     "prec.loss_scale_mode != \"dynamic\" and prec.forward_finite == true and prec.grad_underflow_fraction > 0.01 and "
     "prec.grad_underflow_fraction_unexplained > 0.01"},
    {"PREC013", "nonfinite-forward", nd::Severity::kError, "layer", "first", true, "",
     "prec.first_nonfinite == true and prec.first_nonfinite_cause == \"log-underflow\""},
    {"REPLAY001", "activation-growth", nd::Severity::kWarning, "model", "all", true, "replay.act_growth_layer",
     "replay.act_growth_max > 100"},
    {"REPLAY002", "nonfinite-forward", nd::Severity::kError, "model", "all", true, "replay.nonfinite_layer",
     "replay.nonfinite == true"},
    {"SEQ001", "padding-contamination", nd::Severity::kError, "model", "all", false, "pad.norm_layer",
     "pad.via_norm == true and pad.rel_diff > 0.001 and pad.over_floor > 10 and pad.hypothetical == false"},
    {"SEQ002", "sequence-length-dependence", nd::Severity::kWarning, "model", "all", false, "seqlen.norm_layer",
     "seqlen.via_norm == true and seqlen.rel_diff > 0.001 and seqlen.over_floor > 10 and seqlen.via_input_standardization == false"},
    {"SEQ003", "padding-contamination", nd::Severity::kError, "model", "all", false, "pad.entry_layer",
     "pad.via_pooling_or_conv == true and pad.rel_diff > 0.001 and pad.over_floor > 10 and pad.hypothetical == false and "
     "pad.length_changed_in_baked_trace != true"},
    {"SEQ004", "padding-contamination", nd::Severity::kWarning, "model", "all", false, "pad.enters_at",
     "layout.padding_input != \"\" and pad.via_norm == false and pad.via_pooling_or_conv == false and pad.rel_diff > 0.001 and "
     "pad.over_floor > 10 and seq.trace_baked_length == false and pad.fixed_length_design == false"},
    {"SEQ005", "sequence-length-dependence", nd::Severity::kWarning, "model", "all", false, "seqlen.first_layer",
     "seqlen.causal_attention == true and seqlen.via_norm == false and seqlen.rel_diff > 0.001 and seqlen.over_floor > 10 and "
     "seq.trace_baked_length == false"},
    {"SEQ006", "padding-contamination", nd::Severity::kInfo, "model", "all", false, "pad.enters_at",
     "pad.hypothetical == true and pad.rel_diff > 0.001 and pad.over_floor > 10"},
    {"SEQ007", "sequence-length-dependence", nd::Severity::kWarning, "model", "all", false, "seqlen.enters_at",
     "seqlen.causal_intent == true and seqlen.causal_attention == false and seqlen.via_norm == false and "
     "seqlen.rel_diff > 0.001 and seqlen.over_floor > 10 and seq.trace_baked_length == false and "
     "seqlen.lookahead_fraction > 0.02"},
    {"SEQ008", "sequence-length-dependence", nd::Severity::kInfo, "model", "all", false, "seq.trace_baked_length_module",
     "seq.trace_baked_length == true and seq.baked_length_effect > 0.001"},
    {"SEQ009", "padding-contamination", nd::Severity::kError, "model", "all", false, "pad.train_norm_layer",
     "pad.train_norm_layer != \"\" and pad.via_norm == false and pad.rel_diff_train > 0.001 and pad.train_over_floor > 10 "
     "and pad.padding_declared == true"},
    {"SEQ010", "padding-contamination", nd::Severity::kInfo, "model", "all", false, "pad.enters_at",
     "layout.padding_input != \"\" and pad.via_norm == false and pad.via_pooling_or_conv == false and pad.rel_diff > 0.001 and "
     "pad.over_floor > 10 and seq.trace_baked_length == false and pad.fixed_length_design == true"},
    {"SEQ011", "padding-contamination", nd::Severity::kError, "model", "all", false, "pad.eval_entry_layer",
     "pad.eval_entry_layer != \"\" and pad.rel_diff_eval > 0.001 and pad.eval_over_floor > 10 and pad.hypothetical == false "
     "and pad.length_changed_in_baked_trace != true"},
    {"TL001", "nonfinite-forward", nd::Severity::kError, "layer", "all", false, "",
     "timeline.first_nonfinite_forward == true"},
    {"TL002", "nonfinite-gradient", nd::Severity::kError, "layer", "all", false, "",
     "timeline.first_nonfinite_gradient == true"},
    {"TL003", "activation-growth", nd::Severity::kWarning, "layer", "all", true, "",
     "timeline.first_mover == true and timeline.mover_family == \"activations\""},
    {"TL004", "exploding-gradients", nd::Severity::kWarning, "layer", "all", true, "",
     "timeline.first_mover == true and timeline.mover_family == \"gradients\""},
    {"TL005", "norm-gain-growth", nd::Severity::kWarning, "layer", "all", true, "",
     "timeline.first_mover == true and timeline.mover_family == \"norm gains\""},
    {"TL006", "attention-logit-growth", nd::Severity::kWarning, "layer", "all", true, "",
     "timeline.first_mover == true and timeline.mover_family == \"attention logits\""},
    {"TL007", "update-ratio", nd::Severity::kWarning, "layer", "all", true, "",
     "timeline.first_mover == true and timeline.mover_family == \"update sizes\""},
};

}  // namespace

TEST(ShippedRules, TheCatalogAsSpecified) {
  const auto rules = shipped();
  ASSERT_EQ(rules.size(), std::size(kExpected));
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const nd::Rule& r = rules[i];
    const Expected& e = kExpected[i];
    SCOPED_TRACE(r.id);
    EXPECT_EQ(r.id, e.id);
    EXPECT_EQ(r.failure_mode, e.slug);
    EXPECT_EQ(r.severity, e.severity);
    EXPECT_EQ(r.scope, e.scope);
    EXPECT_EQ(r.select, e.select);
    EXPECT_EQ(r.data_dependent, e.data_dependent);
    EXPECT_EQ(r.layer_from, e.layer_from);
    EXPECT_EQ(conditions(r), e.when);
  }
}

TEST(ShippedRules, FileNamedByIdWithValidSlug) {
  for (const auto& r : shipped()) {
    SCOPED_TRACE(r.source_file);
    EXPECT_EQ(ndtest::fs::path(r.source_file).filename().string(), r.id + ".toml");
    EXPECT_TRUE(nd::is_failure_mode(r.failure_mode)) << r.failure_mode;
    EXPECT_EQ(r.lifecycle, "stable");
    EXPECT_EQ(r.since, "0.1.0");
  }
}

TEST(ShippedRules, ExplainHasTheFixedPartsInOrder) {
  const std::vector<std::string> parts = {"What it detects", "Why it matters", "Example", "How to fix",
                                          "When to ignore"};
  for (const auto& r : shipped()) {
    SCOPED_TRACE(r.id);
    ASSERT_FALSE(r.title.empty());
    EXPECT_NE(r.title.back(), '.') << "titles have no final period";
    std::vector<std::string> lines;
    std::istringstream in(r.explain);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::ptrdiff_t previous = -1;
    for (const auto& p : parts) {
      const auto at = std::find(lines.begin(), lines.end(), p);
      ASSERT_NE(at, lines.end()) << "explain misses the part '" << p << "' (a line of its own)";
      EXPECT_EQ(std::count(lines.begin(), lines.end(), p), 1) << p;
      EXPECT_GT(at - lines.begin(), previous) << "'" << p << "' out of order";
      EXPECT_TRUE(at + 1 != lines.end() && !(at + 1)->empty()) << "'" << p << "' has no text";
      previous = at - lines.begin();
    }
    // The title is the first sentence of the explanation (clang-tidy style).
    EXPECT_EQ(r.explain.rfind("What it detects\n" + r.title + ".", 0), 0u) << r.explain.substr(0, 80);
  }
}

TEST(ShippedRules, ReferencesAndFixes) {
  for (const auto& r : shipped()) {
    SCOPED_TRACE(r.id);
    EXPECT_GE(r.references.size(), 2u) << "a source for the method and one for the threshold";
    bool threshold_source = false;
    for (const auto& ref : r.references) threshold_source |= ref.find("threshold") != std::string::npos;
    EXPECT_TRUE(threshold_source) << "one reference explains the threshold";
    EXPECT_GE(r.fix.size(), 2u);
    for (const auto& f : r.fix) EXPECT_FALSE(f.empty());
  }
}

TEST(ShippedRules, MessagesFollowTheConventions) {
  for (const auto& r : shipped()) {
    SCOPED_TRACE(r.id);
    ASSERT_FALSE(r.message.empty());
    EXPECT_FALSE(r.message.front() >= 'A' && r.message.front() <= 'Z') << "messages start lowercase";
    EXPECT_NE(r.message.back(), '.') << "messages have no final period";
    EXPECT_EQ(r.message.find('\n'), std::string::npos);
  }
}

TEST(ShippedRules, NameOnlyDocumentedMetrics) {
  const auto documented = documented_metrics();
  ASSERT_TRUE(documented.count("act.growth")) << "docs/metrics.md parser found no names";
  for (const auto& r : shipped()) {
    SCOPED_TRACE(r.id);
    std::vector<std::string> names = nd::message_placeholders(r.message);
    for (const auto& c : r.when) names.push_back(c.metric);
    names.insert(names.end(), r.evidence.begin(), r.evidence.end());
    if (!r.layer_from.empty()) names.push_back(r.layer_from);
    for (const auto& n : names) {
      if (n == "layer" || n == "input") continue;
      EXPECT_TRUE(documented.count(n)) << "'" << n << "' is not documented in docs/metrics.md";
    }
  }
}

}  // namespace nd_test_shipped_rules_test
