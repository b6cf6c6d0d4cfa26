// One "catches" and one "catches not" case per shipped rule (hadolint style):
// a synthetic metrics document that must fire the rule, with the layer and
// evidence it must report, and a healthy twin that must stay silent.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "rules/rules.h"
#include "test_util.h"

using ndtest::input;
using ndtest::layer;
using nlohmann::json;

namespace {

const std::vector<nd::Rule>& shipped() {
  static const std::vector<nd::Rule> rules = nd::load_rules((ndtest::source_dir() / "rules").string());
  return rules;
}

/// Findings of the shipped rule `id` alone.
std::vector<nd::Finding> run(const std::string& id, const nd::MetricsDoc& doc) {
  const nd::Rule* r = nd::find_rule(shipped(), id);
  EXPECT_NE(r, nullptr) << id << " is not shipped";
  if (!r) return {};
  return nd::evaluate_rules({*r}, doc);
}

/// Rules with a catches / catches-not pair below; a new rule file fails
/// ShippedRulesHaveCases until it gets one.
const std::set<std::string> kCovered = {"IN001",   "IN002",   "ACT001",  "ACT002",  "ACT003",  "ACT004",  "ACT005",
                                        "NORM001", "GRAD001", "GRAD002", "GRAD003", "GRAD004", "GRAD005", "BN001",
                                        "BN002",   "BN003",   "BN004",   "BN005",   "BN006",   "BN007",   "MODE001",
                                        "MODE002", "MODE003", "MODE004", "SEQ001",  "SEQ002",  "AXIS001", "AXIS002",
                                        "AXIS003", "AXIS004", "AXIS005", "ARCH001", "ARCH002", "ARCH003", "ARCH004",
                                        "PREC001", "PREC002", "PREC003", "PREC004", "ATTN001", "ATTN002", "LR001",
                                        "REPLAY001", "REPLAY002", "BN008",  "BN009",   "MODE005", "NORM002",
                                        "ACT006",  "ACT007",  "ACT008",  "TL001",   "TL002",   "TL003",   "TL004",
                                        "TL005",   "TL006",   "TL007",   "ADAM001", "ADAM002", "CKPT001", "CKPT002",
                                        // cases in rule_cases_recog_test.cpp
                                        "SEQ003", "PREC005", "PREC006"};

const double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST(RuleCases, ShippedRulesHaveCases) {
  for (const auto& r : shipped()) EXPECT_TRUE(kCovered.count(r.id)) << r.id << " has no catches/catches-not case";
}

// ---- IN001 nonfinite-input ------------------------------------------------

nd::MetricsDoc in001_doc(int nonfinite) {
  nd::MetricsDoc doc;
  doc.inputs.push_back(input("x", 0, {{"input.nonfinite_count", 0}, {"input.nan_count", 0}, {"input.inf_count", 0},
                                      {"input.numel", 48}}));
  doc.inputs.push_back(input("mask", 1, {{"input.nonfinite_count", nonfinite}, {"input.nan_count", nonfinite ? 2 : 0},
                                         {"input.inf_count", nonfinite ? 1 : 0}, {"input.numel", 64}}));
  return doc;
}

TEST(IN001, Catches) {
  const auto f = run("IN001", in001_doc(3));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule_id, "IN001");
  EXPECT_EQ(f[0].failure_mode, "nonfinite-input");
  EXPECT_EQ(f[0].severity, nd::Severity::kError);
  EXPECT_EQ(f[0].layer, std::nullopt);
  EXPECT_EQ(f[0].input, "mask");
  EXPECT_EQ(f[0].evidence, (json{{"input.nonfinite_count", 3}, {"input.nan_count", 2}, {"input.inf_count", 1},
                                 {"input.numel", 64}}));
  EXPECT_EQ(f[0].message, "input mask holds 3 non-finite values (2 nan, 1 inf) before any layer runs");
  EXPECT_EQ(f[0].fix.size(), 3u);
}

TEST(IN001, CatchesNot) { EXPECT_TRUE(run("IN001", in001_doc(0)).empty()); }

// ---- IN002 input-scale ----------------------------------------------------

nd::MetricsDoc in002_doc(double scale) {
  nd::MetricsDoc doc;
  doc.inputs.push_back(input("image", 0, {{"input.is_float", true}, {"input.scale", scale}, {"input.mean", scale},
                                          {"input.std", 70.3}, {"input.min", 0}, {"input.max", 255},
                                          {"input.absmax", 255}}));
  // Token ids are large but not a float signal: never an input-scale finding.
  doc.inputs.push_back(input("input_ids", 1, {{"input.is_float", false}, {"input.absmax", 30000}}));
  doc.model_metrics["run.synthetic_inputs"] = false;
  return doc;
}

TEST(IN002, Catches) {
  const auto f = run("IN002", in002_doc(110.7));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "input-scale");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].input, "image");
  EXPECT_FALSE(f[0].synthetic_inputs);
  EXPECT_EQ(f[0].evidence["input.scale"], 110.7);
  EXPECT_EQ(f[0].evidence["input.is_float"], true);
  EXPECT_EQ(f[0].evidence["input.max"], 255);
  EXPECT_EQ(f[0].message,
            "input image has scale 111 (mean 111, std 70.3), far from the unit scale the first layer's initialization "
            "assumes");
}

TEST(IN002, CatchesNot) { EXPECT_TRUE(run("IN002", in002_doc(1.02)).empty()); }

TEST(IN002, LoweredOnSyntheticInputs) {
  nd::MetricsDoc doc = in002_doc(110.7);
  doc.model_metrics["run.synthetic_inputs"] = true;
  const auto f = run("IN002", doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, nd::Severity::kInfo);
  EXPECT_TRUE(f[0].synthetic_inputs);
  EXPECT_EQ(f[0].message.substr(f[0].message.size() - 31), " (measured on synthetic inputs)");
}

// ---- ACT001 nonfinite-forward ---------------------------------------------

nd::MetricsDoc act001_doc(bool broken) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("", "Net", 9, false));
  doc.layers.push_back(layer("blocks.0.fc", "Linear", 0, true, {{"act.nan_count", 0}, {"fwd.first_nonfinite", false}}));
  nd::MetricMap bad = {{"act.nan_count", broken ? 12 : 0}, {"act.inf_count", 0}, {"fwd.first_nonfinite", broken},
                       {"param.absmax", 0.5}};
  if (broken) {
    bad["fwd.input_absmax"] = 3.2e4;
    bad["fwd.input_nonfinite_count"] = 0;
  }
  doc.layers.push_back(layer("blocks.3.fc", "Linear", 3, true, bad));
  // Downstream of the first one: non-finite too, but not the first.
  doc.layers.push_back(layer("blocks.4.fc", "Linear", 4, true,
                             {{"act.nan_count", broken ? 64 : 0}, {"fwd.first_nonfinite", false}}));
  return doc;
}

TEST(ACT001, Catches) {
  const auto f = run("ACT001", act001_doc(true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "nonfinite-forward");
  EXPECT_EQ(f[0].severity, nd::Severity::kError);
  EXPECT_EQ(f[0].layer, "blocks.3.fc");
  EXPECT_EQ(f[0].evidence, (json{{"fwd.first_nonfinite", true}, {"act.nan_count", 12}, {"act.inf_count", 0},
                                 {"fwd.input_absmax", 3.2e4}, {"fwd.input_nonfinite_count", 0},
                                 {"param.absmax", 0.5}}));
  EXPECT_EQ(f[0].message,
            "blocks.3.fc is the first module to output non-finite values (12 nan, 0 inf) although the model inputs "
            "were finite; its inputs reach 32000");
}

TEST(ACT001, CatchesNot) { EXPECT_TRUE(run("ACT001", act001_doc(false)).empty()); }

// ---- ACT002 activation-growth ---------------------------------------------

nd::MetricsDoc act002_doc(double peak) {
  nd::MetricsDoc doc;
  const char* paths[] = {"blocks.0.fc", "blocks.1.fc", "blocks.2.fc", "blocks.19.fc"};
  const double growth[] = {1.0, 50.0, std::min(peak, 1500.0), peak};
  const double rms[] = {0.3, 15.0, 450.0, 78000.0};
  const double absmax[] = {1.2, 60.0, 1800.0, 312000.0};
  // blocks.19.fc first in named_modules order but last to run: select=first
  // must go by execution order, not by document order.
  for (int i : {3, 0, 1, 2})
    doc.layers.push_back(layer(paths[i], "Linear", i, true,
                               {{"act.growth", growth[i]}, {"act.rms", rms[i]}, {"act.absmax", absmax[i]}}));
  doc.model_metrics["act.growth_max"] = peak;
  doc.model_metrics["act.growth_max_layer"] = "blocks.19.fc";
  doc.model_metrics["act.growth_reference_rms"] = 0.3;
  return doc;
}

TEST(ACT002, CatchesFirstLayerInExecutionOrder) {
  const auto f = run("ACT002", act002_doc(2.6e5));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "activation-growth");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, "blocks.2.fc");
  EXPECT_EQ(f[0].evidence, (json{{"act.growth", 1500.0}, {"act.rms", 450.0}, {"act.absmax", 1800.0},
                                 {"act.growth_max", 2.6e5}, {"act.growth_max_layer", "blocks.19.fc"},
                                 {"act.growth_reference_rms", 0.3}, {"matched_layers", 2}}));
  EXPECT_EQ(f[0].message,
            "blocks.2.fc output RMS 450 is 1500x that of the first layers (0.3); activations keep growing with depth, "
            "up to 2.6e+05x at blocks.19.fc");
}

TEST(ACT002, CatchesNot) { EXPECT_TRUE(run("ACT002", act002_doc(900)).empty()); }

// ---- ACT003 fp16-overflow-risk --------------------------------------------

nd::MetricsDoc act003_doc(double headroom) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("embed", "Embedding", 0, true, {{"act.fp16_headroom", 20.0}, {"act.absmax", 3275.2}}));
  doc.layers.push_back(layer("zero", "Identity", 1, true, {{"act.fp16_headroom", kInf}, {"act.absmax", 0.0}}));
  doc.layers.push_back(layer("blocks.7.mlp", "Linear", 2, true,
                             {{"act.fp16_headroom", headroom}, {"act.absmax", 65504 / headroom},
                              {"act.beyond_fp16_count", 0}}));
  doc.layers.push_back(layer("blocks.8.mlp", "Linear", 3, true,
                             {{"act.fp16_headroom", headroom / 2}, {"act.absmax", 131008 / headroom},
                              {"act.beyond_fp16_count", 7}}));
  // The probe's model metrics: the first module already beyond 65504.
  doc.model_metrics["act.first_beyond_fp16_layer"] = headroom / 2 < 1 ? "blocks.8.mlp" : "none";
  doc.model_metrics["act.first_beyond_fp16_count"] = headroom / 2 < 1 ? 7 : 0;
  doc.model_metrics["run.synthetic_inputs"] = false;
  return doc;
}

TEST(ACT003, Catches) {
  const auto f = run("ACT003", act003_doc(1.6));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "fp16-overflow-risk");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, "blocks.7.mlp");
  EXPECT_EQ(f[0].evidence, (json{{"act.fp16_headroom", 1.6}, {"act.absmax", 40940.0},
                                 {"act.beyond_fp16_count", 0}, {"act.first_beyond_fp16_layer", "blocks.8.mlp"},
                                 {"act.first_beyond_fp16_count", 7}, {"matched_layers", 2}}));
  // The first module near the limit holds none beyond it; the message names
  // the first one that does (issue 15: "0 values beyond" while later layers
  // already held hundreds).
  EXPECT_EQ(f[0].message,
            "blocks.7.mlp output reaches 40940, only 1.6x below the fp16 maximum 65504 (0 values beyond it); "
            "first module already beyond it: blocks.8.mlp (7 values)");
  EXPECT_FALSE(f[0].synthetic_inputs);
}

TEST(ACT003, CatchesNot) { EXPECT_TRUE(run("ACT003", act003_doc(4.5)).empty()); }

// Near the limit, nothing beyond it anywhere: the message says so.
TEST(ACT003, NoModuleBeyondTheMaximum) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("blocks.7.mlp", "Linear", 0, true,
                             {{"act.fp16_headroom", 1.6}, {"act.absmax", 40940.0}, {"act.beyond_fp16_count", 0}}));
  doc.model_metrics["act.first_beyond_fp16_layer"] = "none";
  doc.model_metrics["act.first_beyond_fp16_count"] = 0;
  doc.model_metrics["run.synthetic_inputs"] = false;
  const auto f = run("ACT003", doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].layer, "blocks.7.mlp");
  EXPECT_EQ(f[0].message,
            "blocks.7.mlp output reaches 40940, only 1.6x below the fp16 maximum 65504 (0 values beyond it); "
            "first module already beyond it: none (0 values)");
}

TEST(ACT003, LoweredOnSyntheticInputs) {
  nd::MetricsDoc doc = act003_doc(1.6);
  doc.model_metrics["run.synthetic_inputs"] = true;
  const auto f = run("ACT003", doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, nd::Severity::kInfo);
  EXPECT_TRUE(f[0].synthetic_inputs);
  EXPECT_EQ(f[0].message,
            "blocks.7.mlp output reaches 40940, only 1.6x below the fp16 maximum 65504 (0 values beyond it); "
            "first module already beyond it: blocks.8.mlp (7 values) (measured on synthetic inputs)");
}

// ---- ACT004 saturated-activation ------------------------------------------

nd::MetricsDoc act004_doc(double fraction) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("gate", "GatedUnit", 0, true,
                             {{"sat.fraction", fraction}, {"sat.op", "sigmoid"}, {"sat.numel", 4096}}));
  doc.layers.push_back(layer("cell", "Cell", 1, true, {{"sat.fraction", 0.2}, {"sat.op", "tanh"}, {"sat.numel", 4096}}));
  return doc;
}

TEST(ACT004, Catches) {
  const auto f = run("ACT004", act004_doc(0.73));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "saturated-activation");
  EXPECT_EQ(f[0].layer, "gate");
  EXPECT_EQ(f[0].evidence, (json{{"sat.fraction", 0.73}, {"sat.op", "sigmoid"}, {"sat.numel", 4096}}));
  EXPECT_EQ(f[0].message,
            "0.73 of the sigmoid inputs in gate sit in the flat region where its gradient nearly vanishes (4096 "
            "values measured)");
}

TEST(ACT004, CatchesNot) { EXPECT_TRUE(run("ACT004", act004_doc(0.5)).empty()); }

// ---- ACT005 softmax-collapse ----------------------------------------------

nd::MetricsDoc act005_doc(double onehot) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("encoder.layers.0.attn", "MultiheadAttention", 0, true,
                             {{"softmax.onehot_fraction", onehot}, {"softmax.rows", 64},
                              {"softmax.max_prob_mean", 0.995}, {"softmax.entropy_mean", 0.021},
                              {"softmax.entropy_max", 2.77}, {"softmax.logit_absmax", 48.5}}));
  // Fully one-hot but only two rows: too few to call it a collapse.
  doc.layers.push_back(layer("pool", "AttentionPool", 1, true,
                             {{"softmax.onehot_fraction", 1.0}, {"softmax.rows", 2}}));
  return doc;
}

TEST(ACT005, Catches) {
  const auto f = run("ACT005", act005_doc(0.97));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "softmax-collapse");
  EXPECT_EQ(f[0].layer, "encoder.layers.0.attn");
  EXPECT_EQ(f[0].evidence, (json{{"softmax.onehot_fraction", 0.97}, {"softmax.rows", 64},
                                 {"softmax.max_prob_mean", 0.995}, {"softmax.entropy_mean", 0.021},
                                 {"softmax.entropy_max", 2.77}, {"softmax.logit_absmax", 48.5}}));
  EXPECT_EQ(f[0].message,
            "0.97 of the 64 softmax rows in encoder.layers.0.attn are near one-hot (mean entropy 0.021 of at most "
            "2.77 nats), logits reach 48.5");
}

TEST(ACT005, CatchesNot) { EXPECT_TRUE(run("ACT005", act005_doc(0.4)).empty()); }

// ---- NORM001 norm-gain-growth ---------------------------------------------

nd::MetricsDoc norm001_doc(double p99) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("layers.0.input_layernorm", "LlamaRMSNorm", 0, true,
                             {{"norm.gain_p99", 1.1}, {"norm.gain_absmax", 1.3}, {"norm.gain_mean", 1.0}}));
  doc.layers.push_back(layer("layers.1.post_attention_layernorm", "LlamaRMSNorm", 1, true,
                             {{"norm.gain_p99", p99}, {"norm.gain_absmax", 400}, {"norm.gain_mean", 2.5}}));
  return doc;
}

TEST(NORM001, Catches) {
  const auto f = run("NORM001", norm001_doc(35));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "norm-gain-growth");
  EXPECT_EQ(f[0].layer, "layers.1.post_attention_layernorm");
  EXPECT_EQ(f[0].evidence, (json{{"norm.gain_p99", 35.0}, {"norm.gain_absmax", 400}, {"norm.gain_mean", 2.5}}));
  EXPECT_EQ(f[0].message,
            "layers.1.post_attention_layernorm multiplies its normalized output by gains up to 400 (p99 35, mean "
            "2.5), far from the initial 1");
}

TEST(NORM001, CatchesNot) { EXPECT_TRUE(run("NORM001", norm001_doc(9.5)).empty()); }

// ---- GRAD001 nonfinite-gradient -------------------------------------------

nd::MetricsDoc grad001_doc(bool broken) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("encoder", "Linear", 0, true, {{"grad.first_nonfinite", false}, {"grad.out_nonfinite_count", broken ? 5 : 0}}));
  doc.layers.push_back(layer("head", "Linear", 1, true,
                             {{"grad.first_nonfinite", broken}, {"grad.out_nonfinite_count", 0},
                              {"grad.nonfinite_from", "encoder"}, {"grad.nonfinite_count", broken ? 10 : 0},
                              {"grad.param_nonfinite_count", broken ? 640 : 0}}));
  return doc;
}

TEST(GRAD001, Catches) {
  const auto f = run("GRAD001", grad001_doc(true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "nonfinite-gradient");
  EXPECT_EQ(f[0].severity, nd::Severity::kError);
  EXPECT_EQ(f[0].layer, "head");
  EXPECT_EQ(f[0].evidence, (json{{"grad.first_nonfinite", true}, {"grad.nonfinite_from", "encoder"},
                                 {"grad.nonfinite_count", 10}, {"grad.param_nonfinite_count", 640}}));
  EXPECT_EQ(f[0].message,
            "the gradient first turns non-finite in the backward of head: 10 NaN/Inf values in the gradient reaching "
            "encoder, although the forward pass and the loss were finite");
}

TEST(GRAD001, CatchesNot) { EXPECT_TRUE(run("GRAD001", grad001_doc(false)).empty()); }

// ---- GRAD002 exploding-gradients / GRAD003 vanishing-gradients -------------
// Judged on the output-gradient norms of the first and last module
// (failure-modes.md: the first/last ratio); the gradient-to-weight ratio
// grad.rel_ratio is evidence, and GRAD003's guard (a scale effect, not
// vanishing, when the weight-relative gradients stay within 10x).

nd::MetricsDoc grad_ratio_doc(double first_norm, double last_norm, double ratio, double rel_ratio = std::nan("")) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("conv1", "Conv2d", 0, true, {{"grad.param_norm", first_norm}}));
  doc.layers.push_back(layer("fc", "Linear", 1, true, {{"grad.param_norm", last_norm}}));
  doc.model_metrics = {{"grad.input_output_ratio", ratio},
                       {"grad.first_layer", "conv1"},
                       {"grad.last_layer", "fc"},
                       {"grad.first_norm", first_norm},
                       {"grad.last_norm", last_norm},
                       {"grad.rel_contradicts_vanishing", std::isfinite(rel_ratio) && rel_ratio >= 0.1}};
  if (std::isfinite(rel_ratio)) doc.model_metrics["grad.rel_ratio"] = rel_ratio;
  return doc;
}

TEST(GRAD002, Catches) {
  const auto f = run("GRAD002", grad_ratio_doc(5.0, 0.002, 2500.0, 40.0));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "exploding-gradients");
  EXPECT_EQ(f[0].layer, "conv1");  // layer_from = grad.first_layer
  EXPECT_EQ(f[0].evidence, (json{{"grad.input_output_ratio", 2500.0}, {"grad.rel_ratio", 40.0},
                                 {"grad.first_norm", 5.0}, {"grad.last_norm", 0.002},
                                 {"grad.first_layer", "conv1"}, {"grad.last_layer", "fc"}}));
  EXPECT_EQ(f[0].message,
            "gradient norm at conv1 is 2500x that at fc (5 vs 0.002), gradients explode toward the input");
}

TEST(GRAD002, CatchesNot) {
  EXPECT_TRUE(run("GRAD002", grad_ratio_doc(0.3, 0.1, 3.0)).empty());
  EXPECT_TRUE(run("GRAD002", grad_ratio_doc(1e-6, 0.1, 1e-5)).empty());  // vanishing is GRAD003's
  // Parallel branches: skip(x) + fc2(fc1(x) * 1e-3) (loss_scale_underflow_healthy):
  // weight-relative 1814x apart, the same output gradient (ratio 1): not exploding.
  EXPECT_TRUE(run("GRAD002", grad_ratio_doc(0.23, 0.23, 1.0, 1814.0)).empty());
}

TEST(GRAD003, Catches) {
  const auto f = run("GRAD003", grad_ratio_doc(1e-6, 0.1, 1e-5));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "vanishing-gradients");
  EXPECT_EQ(f[0].layer, "conv1");
  EXPECT_EQ(f[0].evidence["grad.input_output_ratio"], 1e-5);
  EXPECT_EQ(f[0].evidence["grad.first_norm"], 1e-6);
  EXPECT_EQ(f[0].evidence["grad.last_layer"], "fc");
  EXPECT_EQ(f[0].message,
            "gradient norm at conv1 is only 1e-05x that at fc (1e-06 vs 0.1), gradients vanish toward the input");
  // The weight-relative gradients vanish too.
  EXPECT_EQ(run("GRAD003", grad_ratio_doc(1e-6, 0.1, 1e-5, 1e-4)).size(), 1u);
}

TEST(GRAD003, CatchesNot) {
  EXPECT_TRUE(run("GRAD003", grad_ratio_doc(0.03, 0.1, 0.3)).empty());
  EXPECT_TRUE(run("GRAD003", grad_ratio_doc(0.0, 0.0, std::nan(""))).empty());  // ratio NaN: no gradient at all is not "vanishing"
  // A norm after a layer with large inputs: raw output-gradient ratio 6e-5,
  // weight-relative gradients 0.17x apart (fixtures/models/rules/raw_sensor_cnn).
  EXPECT_TRUE(run("GRAD003", grad_ratio_doc(6e-6, 0.1, 6e-5, 0.17)).empty());
}

// ---- GRAD004 no-gradient-path ---------------------------------------------

nd::MetricsDoc grad004_doc(int without, int zero) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("backbone", "Linear", 0, true,
                             {{"grad.params", 2}, {"grad.params_without_grad", 0}, {"grad.params_zero_grad", 0},
                              {"grad.params_no_signal", 0}}));
  doc.layers.push_back(layer("aux_head", "Linear", 1, true,
                             {{"grad.params", 2}, {"grad.params_without_grad", without},
                              {"grad.params_zero_grad", zero}, {"grad.params_no_signal", without + zero}}));
  return doc;
}

TEST(GRAD004, Catches) {
  const auto f = run("GRAD004", grad004_doc(2, 0));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "no-gradient-path");
  EXPECT_EQ(f[0].layer, "aux_head");
  EXPECT_EQ(f[0].evidence, (json{{"grad.params_no_signal", 2}, {"grad.params", 2}, {"grad.params_without_grad", 2},
                                 {"grad.params_zero_grad", 0}}));
  EXPECT_EQ(f[0].message,
            "aux_head has 2 of 2 trainable parameters without gradient signal (2 got none, 0 got all zeros)");
}

TEST(GRAD004, CatchesNot) { EXPECT_TRUE(run("GRAD004", grad004_doc(0, 0)).empty()); }

// ---- GRAD005 no-gradient-path (deliberate zero initialization) -----------

nd::MetricsDoc grad005_doc(int blocked) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("layer1.0.conv1", "Conv2d", 0, true,
                             {{"grad.params", 1}, {"grad.params_zero_grad", 1}, {"grad.params_silenced", 1},
                              {"grad.params_no_signal", 0}, {"grad.zero_explained_by", "layer1.0.bn3.weight"}}));
  doc.layers.push_back(layer("layer1.0.bn3", "BatchNorm2d", 1, true, {{"grad.params", 2}, {"grad.params_no_signal", 0}}));
  if (blocked) {
    doc.model_metrics = {{"grad.zero_init_params", 1},
                         {"grad.zero_init_names", "layer1.0.bn3.weight"},
                         {"grad.zero_init_on_residual", 1},
                         {"grad.zero_init_to_output", 0},
                         {"grad.zero_init_targets", "1 residual branch"},
                         {"grad.zero_weight_layer", "layer1.0.bn3"},
                         {"grad.blocked_layers", blocked},
                         {"grad.silenced_params", 7},
                         {"grad.silenced_layers", "layer1.0.conv1, layer1.0.bn1"}};
  }
  return doc;
}

TEST(GRAD005, Catches) {
  const auto f = run("GRAD005", grad005_doc(5));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "no-gradient-path");
  EXPECT_EQ(f[0].severity, nd::Severity::kInfo);
  EXPECT_EQ(f[0].layer, "layer1.0.bn3");
  EXPECT_EQ(f[0].evidence["grad.blocked_layers"], 5);
  EXPECT_EQ(f[0].evidence["grad.silenced_params"], 7);
  EXPECT_EQ(f[0].evidence["grad.zero_init_names"], "layer1.0.bn3.weight");
  EXPECT_EQ(f[0].message,
            "zero-initialized by design (1 in all: layer1.0.bn3.weight), they scale 1 residual branch to exactly "
            "zero, so by design 7 parameters in 5 layers before them (layer1.0.conv1, layer1.0.bn1) get exactly zero "
            "gradient on this step; the first optimizer update ends it");
  // The layer-scope rule stays silent on zeros the convention explains.
  EXPECT_TRUE(run("GRAD004", grad005_doc(5)).empty());
}

TEST(GRAD005, CatchesNot) { EXPECT_TRUE(run("GRAD005", grad005_doc(0)).empty()); }

// ---- BN001 bn-stale-running-stats (never estimated) ----------------------

nd::MetricsDoc bn001_doc(int at_init) {
  nd::MetricsDoc doc;
  // layer1.0.bn1 comes first in named_modules order but runs after bn1.
  doc.layers.push_back(layer("layer1.0.bn1", "BatchNorm2d", 3, true, {{"bn.at_initial_values", at_init > 1}}));
  doc.layers.push_back(layer("bn1", "BatchNorm2d", 1, true, {{"bn.at_initial_values", at_init > 0}}));
  doc.model_metrics["bn.layers"] = 20;
  doc.model_metrics["bn.layers_at_init"] = at_init;
  if (at_init > 0) {  // the probe writes these only when a layer is at its initial values
    doc.model_metrics["bn.first_layer_at_init"] = "bn1";
    doc.model_metrics["bn.layers_at_init_names"] = at_init > 1 ? "bn1, layer1.0.bn1" : "bn1";
  }
  doc.model_metrics["drift.rel_output_diff"] = at_init > 0 ? 1.8 : 0.03;
  doc.model_metrics["drift.stale_note"] =
      at_init > 0 ? "; this is also what makes the train and eval outputs differ by 1.8 of their norm, first at bn1" : "";
  return doc;
}

TEST(BN001, Catches) {
  const auto f = run("BN001", bn001_doc(2));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule_id, "BN001");
  EXPECT_EQ(f[0].failure_mode, "bn-stale-running-stats");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, "bn1");  // layer_from = bn.first_layer_at_init
  EXPECT_EQ(f[0].evidence, (json{{"bn.layers_at_init", 2}, {"bn.layers", 20},
                                 {"bn.layers_at_init_names", "bn1, layer1.0.bn1"},
                                 {"bn.first_layer_at_init", "bn1"}, {"drift.rel_output_diff", 1.8},
                                 {"drift.stale_note", "; this is also what makes the train and eval outputs differ by 1.8 "
                                                      "of their norm, first at bn1"}}));
  EXPECT_EQ(f[0].message,
            "2 of 20 BatchNorm layers still hold their initial running statistics (mean 0, variance 1), first bn1: "
            "they were never estimated, so eval-mode outputs are not normalized; this is also what makes the train "
            "and eval outputs differ by 1.8 of their norm, first at bn1");
}

TEST(BN001, CatchesNot) {
  EXPECT_TRUE(run("BN001", bn001_doc(0)).empty());
  // A model without BatchNorm: the probe writes bn.layers 0 and nothing else.
  nd::MetricsDoc none;
  none.model_metrics["bn.layers"] = 0;
  EXPECT_TRUE(run("BN001", none).empty());
}

// ---- BN002 bn-stale-running-stats (mean far from running_mean) -----------

nd::MetricsDoc bn002_doc(double z) {
  nd::MetricsDoc doc;
  // Still at its initial values: BN001's case, never BN002's, however large.
  doc.layers.push_back(layer("stem.bn", "BatchNorm2d", 0, true,
                             {{"bn.at_initial_values", true}, {"bn.mean_z", 10.0}, {"bn.channels", 32}}));
  doc.layers.push_back(layer("bn1", "BatchNorm2d", 1, true,
                             {{"bn.at_initial_values", false}, {"bn.mean_z", 0.2}, {"bn.channels", 64}}));
  // layer2.0.bn1 first in document order, but runs after layer1.0.bn1.
  doc.layers.push_back(layer("layer2.0.bn1", "BatchNorm2d", 5, true,
                             {{"bn.at_initial_values", false}, {"bn.mean_z", z * 1.5}, {"bn.channels", 128}}));
  doc.layers.push_back(layer("layer1.0.bn1", "BatchNorm2d", 2, true,
                             {{"bn.at_initial_values", false}, {"bn.mean_z", z}, {"bn.mean_z_max", 6.4},
                              {"bn.var_ratio", 1.3}, {"bn.num_batches_tracked", 125000}, {"bn.channels", 64}}));
  doc.model_metrics["run.synthetic_inputs"] = false;
  doc.model_metrics["drift.stale_note"] = "";  // the drift starts elsewhere
  return doc;
}

TEST(BN002, CatchesFirstLayerInExecutionOrder) {
  const auto f = run("BN002", bn002_doc(2.1));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule_id, "BN002");
  EXPECT_EQ(f[0].failure_mode, "bn-stale-running-stats");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, "layer1.0.bn1");
  EXPECT_EQ(f[0].evidence, (json{{"bn.at_initial_values", false}, {"bn.mean_z", 2.1}, {"bn.mean_z_max", 6.4},
                                 {"bn.var_ratio", 1.3}, {"bn.num_batches_tracked", 125000}, {"bn.channels", 64},
                                 {"drift.stale_note", ""}, {"matched_layers", 2}}));
  EXPECT_EQ(f[0].message,
            "the batch mean of layer1.0.bn1's input is 2.1 running standard deviations from running_mean, averaged "
            "over 64 channels (worst channel 6.4, variance ratio 1.3): the data has moved away from the statistics "
            "or the statistics are stale");
  EXPECT_FALSE(f[0].synthetic_inputs);
}

TEST(BN002, CatchesNot) { EXPECT_TRUE(run("BN002", bn002_doc(0.6)).empty()); }

TEST(BN002, LoweredOnSyntheticInputs) {
  nd::MetricsDoc doc = bn002_doc(2.1);
  doc.model_metrics["run.synthetic_inputs"] = true;
  const auto f = run("BN002", doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, nd::Severity::kInfo);
  EXPECT_TRUE(f[0].synthetic_inputs);
}

// ---- BN003 bn-stale-running-stats (variance far from running_var) --------

nd::MetricsDoc bn003_doc(double ratio, double z = 0.4) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("stem.bn", "BatchNorm1d", 0, true,
                             {{"bn.at_initial_values", true}, {"bn.var_ratio", 50.0}, {"bn.var_ratio_off", 50.0}}));
  doc.layers.push_back(layer("features.bn", "BatchNorm1d", 1, true,
                             {{"bn.at_initial_values", false}, {"bn.var_ratio", ratio},
                              {"bn.var_ratio_off", std::max(ratio, 1 / ratio)}, {"bn.mean_z", z}}));
  doc.layers.push_back(layer("head.bn", "BatchNorm1d", 2, true,
                             {{"bn.at_initial_values", false}, {"bn.var_ratio", 1.1}, {"bn.var_ratio_off", 1.1},
                              {"bn.mean_z", 0.1}}));
  doc.model_metrics["run.synthetic_inputs"] = false;
  doc.model_metrics["drift.rel_output_diff"] = 0.9;
  doc.model_metrics["drift.first_layer"] = "features.bn";
  doc.model_metrics["drift.stale_note"] =
      "; this is also what makes the train and eval outputs differ by 0.9 of their norm, first at features.bn";
  return doc;
}

TEST(BN003, Catches) {
  const auto f = run("BN003", bn003_doc(0.01));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule_id, "BN003");
  EXPECT_EQ(f[0].failure_mode, "bn-stale-running-stats");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, "features.bn");
  EXPECT_EQ(f[0].evidence, (json{{"bn.at_initial_values", false}, {"bn.var_ratio", 0.01}, {"bn.var_ratio_off", 100.0},
                                 {"bn.mean_z", 0.4}, {"drift.rel_output_diff", 0.9},
                                 {"drift.first_layer", "features.bn"},
                                 {"drift.stale_note", "; this is also what makes the train and eval outputs differ by "
                                                      "0.9 of their norm, first at features.bn"},
                                 {"matched_layers", 1}}));
  EXPECT_EQ(f[0].message,
            "the batch variance of features.bn's input is 0.01x its running_var (geometric mean over channels, off "
            "by 100x), so eval-mode outputs are scaled wrong by about the square root of that; this is also what "
            "makes the train and eval outputs differ by 0.9 of their norm, first at features.bn");
  // Too large a variance fires as well as too small a one.
  const auto up = run("BN003", bn003_doc(6.0));
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].layer, "features.bn");
}

TEST(BN003, CatchesNot) {
  EXPECT_TRUE(run("BN003", bn003_doc(0.3)).empty());
  EXPECT_TRUE(run("BN003", bn003_doc(3.5)).empty());
  // The mean is off too: BN002 is the finding (it shows the variance ratio), not both.
  EXPECT_TRUE(run("BN003", bn003_doc(0.01, 2.5)).empty());
}

// ---- BN004 train-eval-drift -------------------------------------------------

nd::MetricsDoc bn004_doc(double drift, double with_dropout, bool stale = false, double floor = 0.0) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("conv1", "Conv2d", 0, true));
  doc.layers.push_back(layer("layer1.0.bn1", "BatchNorm2d", 1, true));
  doc.model_metrics = {{"drift.rel_output_diff", drift},
                       {"drift.rel_output_diff_with_dropout", with_dropout},
                       {"drift.explained_by_stale_stats", stale},
                       {"drift.noise_floor", floor},
                       {"drift.over_floor", floor > 0 ? json(drift / floor) : json("inf")},
                       {"drift.mode_note", ""},
                       {"run.synthetic_inputs", false}};
  if (drift > 1e-4) {
    doc.model_metrics["drift.first_layer"] = "layer1.0.bn1";
    doc.model_metrics["drift.cause"] = "BatchNorm running statistics differ from the batch statistics";
  }
  return doc;
}

TEST(BN004, Catches) {
  const auto f = run("BN004", bn004_doc(1.4, 1.9));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule_id, "BN004");
  EXPECT_EQ(f[0].failure_mode, "train-eval-drift");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, "layer1.0.bn1");  // layer_from = drift.first_layer
  EXPECT_EQ(f[0].evidence, (json{{"drift.rel_output_diff", 1.4}, {"drift.over_floor", "inf"}, {"drift.rel_output_diff_with_dropout", 1.9},
                                 {"drift.first_layer", "layer1.0.bn1"},
                                 {"drift.cause", "BatchNorm running statistics differ from the batch statistics"},
                                 {"drift.noise_floor", 0.0}}));
  EXPECT_EQ(f[0].message,
            "with dropout switched off, the train-mode output differs from the eval-mode output by 1.4 of the eval "
            "output's norm (1.9 with dropout); the two runs first diverge at layer1.0.bn1: BatchNorm running "
            "statistics differ from the batch statistics");
}

// A traced graph with batch_norm's training flag baked in cannot switch
// mode itself: the drift measured with the flags replaced is the Python
// model's, and the message says so (the conformer of the corpus).
TEST(BN004, SaysWhenTheFlagsWereBakedIn) {
  nd::MetricsDoc doc = bn004_doc(0.77, 0.77);
  doc.model_metrics["drift.mode_note"] = "; measured with the 2 batch_norm/dropout training flags this traced graph has baked in replaced";
  const auto f = run("BN004", doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].message.find("statistics differ from the batch statistics; measured with the 2 batch_norm/dropout "
                              "training flags this traced graph has baked in replaced"),
            std::string::npos)
      << f[0].message;
}

// Stale running statistics are one cause of train/eval drift
// (failure-modes.md, train-eval-drift: "stale running stats, dropout"): the
// drift is reported as such, beside the stale-statistics finding, and names
// the layer where it starts.
TEST(BN004, CatchesDriftThatStaleStatisticsCause) {
  const auto f = run("BN004", bn004_doc(1.4, 1.9, true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].layer, "layer1.0.bn1");
}

TEST(BN004, CatchesNot) {
  // Dropout alone makes train and eval differ: expected, not a finding.
  EXPECT_TRUE(run("BN004", bn004_doc(0.04, 0.6)).empty());
  EXPECT_TRUE(run("BN004", bn004_doc(0.0, 0.0)).empty());
  // Not above the noise floor of the same pass repeated.
  EXPECT_TRUE(run("BN004", bn004_doc(0.6, 0.6, false, 0.2)).empty());
}

// ---- BN005 eval-batch-dependence ---------------------------------------------

nd::MetricsDoc bn005_doc(double diff, double floor = 1e-7) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("conv1", "Conv2d", 0, true));
  doc.layers.push_back(layer("bn1", "BatchNorm2d", 1, true));
  doc.model_metrics = {{"batchdep.max_rel_diff", diff},
                       {"batchdep.worst_example", "0"},
                       {"batchdep.reorder_rel_diff", floor},
                       {"batchdep.noise_floor", floor},
                       {"batchdep.over_floor", diff / floor},
                       {"batchdep.batch", 32}};
  if (diff > 1e-3) {  // the probe looks for the layer only above the threshold
    doc.model_metrics["batchdep.first_layer"] = "bn1";
    doc.model_metrics["batchdep.cause"] =
        "a traced graph baked training=True into batch_norm: eval mode still uses batch statistics";
  }
  return doc;
}

TEST(BN005, Catches) {
  const auto f = run("BN005", bn005_doc(0.8));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule_id, "BN005");
  EXPECT_EQ(f[0].failure_mode, "eval-batch-dependence");
  EXPECT_EQ(f[0].severity, nd::Severity::kError);
  EXPECT_EQ(f[0].layer, "bn1");  // layer_from = batchdep.first_layer
  EXPECT_EQ(f[0].evidence,
            (json{{"batchdep.max_rel_diff", 0.8}, {"batchdep.over_floor", 0.8 / 1e-7}, {"batchdep.worst_example", "0"},
                  {"batchdep.noise_floor", 1e-7}, {"batchdep.batch", 32}, {"batchdep.first_layer", "bn1"},
                  {"batchdep.cause",
                   "a traced graph baked training=True into batch_norm: eval mode still uses batch statistics"}}));
  EXPECT_EQ(f[0].message,
            "in eval mode, example 0 run alone gives an output 0.8 (relative) away from its output inside the batch "
            "of 32 (noise floor, the batch reordered: 1e-07); the difference starts at bn1: a traced graph baked "
            "training=True into batch_norm: eval mode still uses batch statistics");
}

TEST(BN005, CatchesNot) {
  // Float noise from another batch size (different kernels, summation order).
  EXPECT_TRUE(run("BN005", bn005_doc(2e-7)).empty());
  EXPECT_TRUE(run("BN005", bn005_doc(0.0)).empty());
  // Above 0.001 but within 10x of the floor the same run measured (nondeterministic kernels).
  EXPECT_TRUE(run("BN005", bn005_doc(2e-3, 5e-4)).empty());
}

// ---- BN006 bn-batch-of-one ----------------------------------------------------

nd::MetricsDoc bn006_doc(int batch) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("bn1", "BatchNorm2d", 1, true,
                             {{"bn.examples_per_pass", batch}, {"bn.spatial", 12544},
                              {"bn.values_per_channel", batch * 12544}, {"bn.batch_of_one", false}}));
  // After global pooling: one value per channel and example.
  doc.layers.push_back(layer("head.bn", "BatchNorm1d", 5, true,
                             {{"bn.examples_per_pass", batch}, {"bn.spatial", 1}, {"bn.values_per_channel", batch},
                              {"bn.batch_of_one", batch <= 1}}));
  return doc;
}

TEST(BN006, Catches) {
  const auto f = run("BN006", bn006_doc(1));
  ASSERT_EQ(f.size(), 1u);  // bn1 sees 12544 values per channel even at batch 1
  EXPECT_EQ(f[0].rule_id, "BN006");
  EXPECT_EQ(f[0].failure_mode, "bn-batch-of-one");
  EXPECT_EQ(f[0].severity, nd::Severity::kError);
  EXPECT_EQ(f[0].layer, "head.bn");
  EXPECT_EQ(f[0].evidence, (json{{"bn.values_per_channel", 1}, {"bn.examples_per_pass", 1}, {"bn.spatial", 1},
                                 {"bn.batch_of_one", true}}));
  EXPECT_EQ(f[0].message,
            "head.bn gets 1 value per channel in train mode (batch 1 x spatial size 1): PyTorch raises an error, and "
            "no batch statistics can be computed");
}

TEST(BN006, CatchesNot) { EXPECT_TRUE(run("BN006", bn006_doc(2)).empty()); }

// ---- BN007 / BN008 bn-small-batch-noise ----------------------------------------

nd::MetricsDoc bn007_doc(int batch, double noise, bool given = true) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("bn1", "BatchNorm2d", 1, true,
                             {{"bn.examples_per_pass", batch}, {"bn.values_per_channel", batch * 12544},
                              {"bn.mean_noise", 0.02}, {"bn.var_noise", 0.05}}));
  // layer4.1.bn2 first in document order, but runs after layer4.0.bn1.
  doc.layers.push_back(layer("layer4.1.bn2", "BatchNorm2d", 45, true,
                             {{"bn.examples_per_pass", batch}, {"bn.values_per_channel", batch * 49},
                              {"bn.mean_noise", noise * 1.2}, {"bn.var_noise", 0.5}}));
  doc.layers.push_back(layer("layer4.0.bn1", "BatchNorm2d", 40, true,
                             {{"bn.examples_per_pass", batch}, {"bn.values_per_channel", batch * 49},
                              {"bn.mean_noise", noise}, {"bn.var_noise", 0.45}}));
  doc.model_metrics["run.synthetic_inputs"] = false;
  doc.model_metrics["bn.train_batch_size_given"] = given;
  return doc;
}

TEST(BN007, CatchesFirstLayerInExecutionOrder) {
  const auto f = run("BN007", bn007_doc(4, 0.31));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule_id, "BN007");
  EXPECT_EQ(f[0].failure_mode, "bn-small-batch-noise");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, "layer4.0.bn1");
  EXPECT_EQ(f[0].evidence, (json{{"bn.train_batch_size_given", true}, {"bn.examples_per_pass", 4},
                                 {"bn.mean_noise", 0.31}, {"bn.values_per_channel", 196}, {"bn.var_noise", 0.45},
                                 {"matched_layers", 2}}));
  EXPECT_EQ(f[0].message,
            "at 4 examples per forward pass (196 values per channel), the batch mean of layer4.0.bn1's input wanders "
            "by 0.31 of the channel's standard deviation from step to step (batch variance by 0.45 of itself)");
}

TEST(BN007, CatchesNot) {
  EXPECT_TRUE(run("BN007", bn007_doc(4, 0.08)).empty());
  // 16 examples or more: not a small batch, whatever the estimate says.
  EXPECT_TRUE(run("BN007", bn007_doc(16, 0.31)).empty());
  // --train-batch-size not given: the batch size is assumed, BN008 says so.
  EXPECT_TRUE(run("BN007", bn007_doc(4, 0.31, false)).empty());
}

TEST(BN008, CatchesWithTheAssumptionStated) {
  const auto f = run("BN008", bn007_doc(4, 0.31, false));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "bn-small-batch-noise");
  EXPECT_EQ(f[0].severity, nd::Severity::kInfo);
  EXPECT_EQ(f[0].layer, "layer4.0.bn1");
  EXPECT_EQ(f[0].message,
            "assuming the sample's batch size of 4 is the training batch (196 values per channel), the batch mean of "
            "layer4.0.bn1's input would wander by 0.31 of the channel's standard deviation from step to step (batch "
            "variance by 0.45 of itself); give the real per-step batch with --train-batch-size N to judge it");
}

TEST(BN008, CatchesNot) {
  EXPECT_TRUE(run("BN008", bn007_doc(4, 0.31, true)).empty());  // given: BN007 judges it
  EXPECT_TRUE(run("BN008", bn007_doc(4, 0.08, false)).empty());
  EXPECT_TRUE(run("BN008", bn007_doc(32, 0.31, false)).empty());
}

// ---- BN009 bn-stale-running-stats (partly estimated) ----------------------------

nd::MetricsDoc bn009_doc(double err, int past_gate = 0, double drift = 0.25, bool stale = true) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("features.0", "Conv2d", 0, true));
  doc.layers.push_back(layer("features.1", "BatchNorm2d", 1, true,
                             {{"bn.at_initial_values", false}, {"bn.mean_z", 0.17}, {"bn.var_ratio", 1.55},
                              {"bn.eval_error", err}, {"bn.eval_error_floor", 0.017},
                              {"bn.eval_error_over_floor", err / 0.017}, {"bn.num_batches_tracked", 30}}));
  doc.model_metrics = {{"bn.layers_past_single_gate", past_gate}, {"drift.rel_output_diff", drift},
                       {"drift.explained_by_stale_stats", stale}, {"drift.first_layer", "features.1"},
                       {"drift.noise_floor", 0.0}, {"drift.over_floor", "inf"}, {"run.synthetic_inputs", false}};
  return doc;
}

TEST(BN009, Catches) {
  const auto f = run("BN009", bn009_doc(0.32));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "bn-stale-running-stats");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, "features.1");
  EXPECT_EQ(f[0].evidence["bn.eval_error"], 0.32);
  EXPECT_EQ(f[0].evidence["drift.rel_output_diff"], 0.25);
  EXPECT_EQ(f[0].message,
            "features.1's running statistics are only partly estimated (30 batches tracked): mean 0.17 running "
            "standard deviations off and variance ratio 1.55, each under its own gate, together put its eval-mode "
            "output 0.32 of its scale away from the train-mode one (18.8x the sampling noise 0.017), and the model's "
            "train/eval output drift is 0.25, first at features.1");
}

TEST(BN009, CatchesNot) {
  EXPECT_TRUE(run("BN009", bn009_doc(0.1)).empty());         // within a quarter of the scale
  EXPECT_TRUE(run("BN009", bn009_doc(0.32, 1)).empty());     // a single gate fired: that finding is the one
  EXPECT_TRUE(run("BN009", bn009_doc(0.32, 0, 0.05)).empty());  // no drift at the output
  EXPECT_TRUE(run("BN009", bn009_doc(0.32, 0, 0.25, false)).empty());  // the drift starts elsewhere
}

// ---- MODE001 saved-in-train-mode -------------------------------------------

nd::MetricsDoc mode001_doc(bool training, int ops) {
  nd::MetricsDoc doc;
  doc.model_metrics = {{"mode.saved_training", training},
                       {"mode.modules_in_training", training ? 14 : 0},
                       {"mode.dependent_ops", ops}};
  return doc;
}

TEST(MODE001, Catches) {
  const auto f = run("MODE001", mode001_doc(true, 6));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule_id, "MODE001");
  EXPECT_EQ(f[0].failure_mode, "saved-in-train-mode");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, std::nullopt);
  EXPECT_EQ(f[0].evidence,
            (json{{"mode.saved_training", true}, {"mode.dependent_ops", 6}, {"mode.modules_in_training", 14}}));
  EXPECT_EQ(f[0].message,
            "the model was saved in training mode (14 modules with training=True) and runs 6 dropout/batch_norm ops: "
            "loaded and run without eval(), it uses batch statistics and random dropout");
}

TEST(MODE001, CatchesNot) {
  EXPECT_TRUE(run("MODE001", mode001_doc(false, 6)).empty());
  // Saved in training mode but nothing depends on the mode: harmless.
  EXPECT_TRUE(run("MODE001", mode001_doc(true, 0)).empty());
}

// ---- MODE002 / MODE003 mode-switch-ineffective -------------------------------

nd::MetricsDoc mode_baked_doc(int baked_true, int baked_false) {
  nd::MetricsDoc doc;
  doc.model_metrics = {{"mode.baked_training_true", baked_true}, {"mode.baked_training_false", baked_false}};
  if (baked_true + baked_false > 0) {  // the probe runs the confirmation only then
    doc.model_metrics["mode.switch_confirmed"] = true;
    doc.model_metrics["mode.switch_rel_diff"] = 0.0;
  }
  return doc;
}

TEST(MODE002, Catches) {
  const auto f = run("MODE002", mode_baked_doc(3, 0));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule_id, "MODE002");
  EXPECT_EQ(f[0].failure_mode, "mode-switch-ineffective");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, std::nullopt);
  EXPECT_EQ(f[0].evidence, (json{{"mode.baked_training_true", 3}, {"mode.switch_confirmed", true},
                                 {"mode.switch_rel_diff", 0.0}}));
  EXPECT_EQ(f[0].message,
            "the traced or exported graph has 3 batch_norm/dropout ops with training=True baked in as a constant: eval() does not "
            "switch them, inference uses batch statistics and dropout (train and eval outputs identical: true, "
            "relative difference 0)");
}

TEST(MODE002, CatchesNot) {
  EXPECT_TRUE(run("MODE002", mode_baked_doc(0, 0)).empty());
  EXPECT_TRUE(run("MODE002", mode_baked_doc(0, 3)).empty());  // traced in eval mode is MODE003's
}

TEST(MODE003, Catches) {
  const auto f = run("MODE003", mode_baked_doc(0, 3));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule_id, "MODE003");
  EXPECT_EQ(f[0].failure_mode, "mode-switch-ineffective");
  EXPECT_EQ(f[0].severity, nd::Severity::kInfo);
  EXPECT_EQ(f[0].layer, std::nullopt);
  EXPECT_EQ(f[0].evidence, (json{{"mode.baked_training_false", 3}, {"mode.switch_confirmed", true}}));
  EXPECT_EQ(f[0].message,
            "the traced or exported graph has 3 batch_norm/dropout ops with training=False baked in as a constant: train() does "
            "not switch them (train and eval outputs identical: true); fine for inference, wrong for fine-tuning this "
            "file");
}

TEST(MODE003, CatchesNot) {
  EXPECT_TRUE(run("MODE003", mode_baked_doc(0, 0)).empty());
  EXPECT_TRUE(run("MODE003", mode_baked_doc(3, 0)).empty());
}

// ---- MODE004 eval-nondeterminism ---------------------------------------------

nd::MetricsDoc mode004_doc(double diff) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("blocks.0.mlp", "Mlp", 0, true));
  doc.layers.push_back(layer("blocks.3.mlp", "Mlp", 3, true));
  doc.model_metrics["evalrep.rel_diff"] = diff;
  // The probe names the first differing module at any difference, float noise included.
  if (diff > 0) doc.model_metrics["evalrep.first_layer"] = "blocks.3.mlp";
  return doc;
}

TEST(MODE004, Catches) {
  const auto f = run("MODE004", mode004_doc(0.42));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rule_id, "MODE004");
  EXPECT_EQ(f[0].failure_mode, "eval-nondeterminism");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, "blocks.3.mlp");  // layer_from = evalrep.first_layer
  EXPECT_EQ(f[0].evidence, (json{{"evalrep.rel_diff", 0.42}, {"evalrep.first_layer", "blocks.3.mlp"}}));
  EXPECT_EQ(f[0].message,
            "two eval-mode forward passes on the same batch with different random seeds differ by 0.42 (relative); "
            "the first module whose output differs is blocks.3.mlp: a dropout or other random op there ignores "
            "eval()");
}

TEST(MODE004, CatchesNot) {
  EXPECT_TRUE(run("MODE004", mode004_doc(0.0)).empty());
  EXPECT_TRUE(run("MODE004", mode004_doc(3e-7)).empty());  // nondeterministic GPU reductions
}

// ---- SEQ001 padding-contamination / SEQ002 sequence-length-dependence --------

nd::MetricsDoc seq_doc(bool via_norm, double pad_rel, double len_rel, bool len_via_norm, double floor = 0.0) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("attn", "MaskedAttention", 0, false));
  doc.layers.push_back(layer("norm", "BatchNorm1d", 1, true));
  doc.model_metrics = {{"layout.sequence", true},       {"layout.seq_len", 12},
                       {"layout.padding_input", "mask"}, {"pad.rel_diff", pad_rel},
                       {"pad.rel_diff_train", pad_rel},  {"pad.rel_diff_eval", 0.0},
                       {"pad.mode", "train"},           {"pad.padded_to", 20},
                       {"pad.first_layer", via_norm ? "norm" : "attn"},
                       {"pad.via_norm", via_norm},      {"pad.norms_over_time", "norm"},
                       {"seqlen.lengths", "12 and 9"},  {"seqlen.rel_diff", len_rel},
                       {"seqlen.first_layer", len_via_norm ? "norm" : "attn"},
                       {"seqlen.first_layer_kind", len_via_norm ? "normalization" : "attention"},
                       {"seqlen.via_norm", len_via_norm}};
  // The floor measured in the same run (the batch reordered).
  auto over = [&](double d) { return floor > 0 ? json(d / floor) : json(d > 0 ? "inf" : "nan"); };
  doc.model_metrics["pad.noise_floor"] = floor;
  doc.model_metrics["pad.over_floor"] = over(pad_rel);
  doc.model_metrics["seqlen.noise_floor"] = floor;
  doc.model_metrics["seqlen.over_floor"] = over(len_rel);
  return doc;
}

TEST(SEQ001, Catches) {
  const auto f = run("SEQ001", seq_doc(true, 0.296324, 0.0, false));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "padding-contamination");
  EXPECT_EQ(f[0].severity, nd::Severity::kError);
  EXPECT_EQ(f[0].layer, "norm");
  EXPECT_EQ(f[0].evidence["pad.rel_diff"], 0.296324);
  EXPECT_EQ(f[0].evidence["pad.padded_to"], 20);
  EXPECT_EQ(f[0].evidence["pad.norms_over_time"], "norm");
  EXPECT_EQ(f[0].message,
            "the outputs at real positions change by 0.296 (relative, train mode) when the batch is padded from 12 "
            "to 20 positions; the change enters at norm, whose statistics include the padded positions");
}

TEST(SEQ001, CatchesNot) {
  EXPECT_TRUE(run("SEQ001", seq_doc(true, 2e-7, 0.0, false)).empty());   // masked correctly: float noise
  EXPECT_TRUE(run("SEQ001", seq_doc(false, 0.4, 0.0, false)).empty());   // enters through unmasked attention
  // Within 10x of the noise floor the same run measured: kernel nondeterminism.
  EXPECT_TRUE(run("SEQ001", seq_doc(true, 2e-3, 0.0, false, 5e-4)).empty());
}

TEST(SEQ002, Catches) {
  const auto f = run("SEQ002", seq_doc(false, 0.0, 0.21, true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "sequence-length-dependence");
  EXPECT_EQ(f[0].layer, "norm");
  EXPECT_EQ(f[0].evidence["seqlen.rel_diff"], 0.21);
  EXPECT_EQ(f[0].evidence["seqlen.lengths"], "12 and 9");
}

TEST(SEQ002, CatchesNot) {
  EXPECT_TRUE(run("SEQ002", seq_doc(false, 0.0, 0.3, false)).empty());  // bidirectional attention: by design
  EXPECT_TRUE(run("SEQ002", seq_doc(false, 0.0, 1e-7, true)).empty());
  EXPECT_TRUE(run("SEQ002", seq_doc(false, 0.0, 2e-3, true, 5e-4)).empty());
}

// ---- AXIS001..AXIS005 normalized axes -------------------------------------

nd::MetricsDoc axis_doc(const std::string& kind, nd::MetricMap m, int attention_ops = 1) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("norm", kind, 0, true, std::move(m)));
  doc.model_metrics = {{"arch.attention_ops", attention_ops}};
  return doc;
}

TEST(AXIS001, Catches) {
  const auto f = run("AXIS001", axis_doc("LayerNorm", {{"norm.op", "layer_norm"}, {"norm.over_time", true}, {"norm.over_batch", false},
                                                       {"norm.input_shape", "[2, 16, 16]"},
                                                       {"norm.input_layout", "[batch, hidden, time]"},
                                                       {"norm.reduced_axes", "time"},
                                                       {"norm.time_axis_from", "sizes at lengths 16 and 12"},
                                                       {"norm.fails_at_other_length", true}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "norm-over-time-axis");
  EXPECT_EQ(f[0].layer, "norm");
  EXPECT_EQ(f[0].evidence["norm.reduced_axes"], "time");
  EXPECT_EQ(f[0].evidence["norm.fails_at_other_length"], true);
  EXPECT_EQ(f[0].message,
            "norm (layer_norm) normalizes its input [2, 16, 16] = [batch, hidden, time] over time, the time axis, not "
            "the hidden features");
}

TEST(AXIS001, CatchesNot) {
  // Over every axis, batch included: AXIS002's finding, not a second one.
  EXPECT_TRUE(run("AXIS001", axis_doc("RMSNorm", {{"norm.op", "rms_norm_pattern"}, {"norm.over_time", true},
                                                  {"norm.over_batch", true}, {"norm.reduced_axes", "batch, time, hidden"}}))
                  .empty());
  EXPECT_TRUE(run("AXIS001", axis_doc("LayerNorm", {{"norm.op", "layer_norm"}, {"norm.over_time", false},
                                                    {"norm.reduced_axes", "hidden"}}))
                  .empty());
}

TEST(AXIS002, Catches) {
  const auto f = run("AXIS002", axis_doc("RMSNorm", {{"norm.op", "rms_norm_pattern"}, {"norm.over_batch", true},
                                                     {"norm.input_shape", "[2, 12, 16]"},
                                                     {"norm.input_layout", "[batch, time, hidden]"},
                                                     {"norm.reduced_axes", "batch, time, hidden"}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "norm-over-batch-axis");
  EXPECT_EQ(f[0].layer, "norm");
  EXPECT_EQ(f[0].evidence["norm.reduced_axes"], "batch, time, hidden");
}

TEST(AXIS002, CatchesNot) {
  EXPECT_TRUE(run("AXIS002", axis_doc("RMSNorm", {{"norm.op", "rms_norm_pattern"}, {"norm.over_batch", false}})).empty());
}

TEST(AXIS003, Catches) {
  const auto f = run("AXIS003", axis_doc("BatchNorm1d", {{"norm.batchnorm_over_time", true},
                                                         {"norm.input_shape", "[2, 16, 12]"},
                                                         {"norm.input_layout", "[batch, hidden, time]"},
                                                         {"norm.reduced_axes", "batch, time"}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "batchnorm-in-sequence-model");
  EXPECT_EQ(f[0].layer, "norm");
  EXPECT_EQ(f[0].evidence["norm.input_layout"], "[batch, hidden, time]");
}

TEST(AXIS003, CatchesNot) {
  // A convolutional speech front end: BatchNorm over time, no attention.
  EXPECT_TRUE(run("AXIS003", axis_doc("BatchNorm1d", {{"norm.batchnorm_over_time", true}}, 0)).empty());
  EXPECT_TRUE(run("AXIS003", axis_doc("BatchNorm2d", {{"norm.batchnorm_over_time", false}})).empty());
}

TEST(AXIS004, Catches) {
  const auto f = run("AXIS004", axis_doc("GroupNorm", {{"norm.num_groups", 32}, {"norm.num_channels", 32},
                                                       {"norm.channels_per_group", 1}, {"norm.spatial_size", 256},
                                                       {"norm.input_shape", "[4, 32, 16, 16]"},
                                                       {"norm.reduced_axes", "channel (within a group), spatial, spatial"}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "groupnorm-group-size");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].evidence["norm.num_groups"], 32);
  EXPECT_EQ(f[0].evidence["norm.channels_per_group"], 1);
}

TEST(AXIS004, CatchesNot) {
  EXPECT_TRUE(run("AXIS004", axis_doc("GroupNorm", {{"norm.num_groups", 8}, {"norm.num_channels", 32},
                                                    {"norm.channels_per_group", 4}, {"norm.spatial_size", 256}}))
                  .empty());
  // One value per group (after global pooling) is NORM002's degenerate norm, not an instance norm.
  EXPECT_TRUE(run("AXIS004", axis_doc("GroupNorm", {{"norm.num_groups", 16}, {"norm.num_channels", 16},
                                                    {"norm.channels_per_group", 1}, {"norm.spatial_size", 1}}))
                  .empty());
}

TEST(AXIS005, Catches) {
  const auto f = run("AXIS005", axis_doc("GroupNorm", {{"norm.num_groups", 1}, {"norm.num_channels", 32},
                                                       {"norm.channels_per_group", 32}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "groupnorm-group-size");
  EXPECT_EQ(f[0].severity, nd::Severity::kInfo);
}

TEST(AXIS005, CatchesNot) {
  EXPECT_TRUE(run("AXIS005", axis_doc("GroupNorm", {{"norm.num_groups", 1}, {"norm.num_channels", 1}})).empty());
  EXPECT_TRUE(run("AXIS005", axis_doc("GroupNorm", {{"norm.num_groups", 8}, {"norm.num_channels", 32}})).empty());
}

// ---- ARCH001..ARCH004 architecture ------------------------------------------

nd::MetricsDoc arch_doc(int blocks, const std::string& placement, const std::string& final_norm, int norm_layers,
                        double growth) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("blocks", "ModuleList", 0, false));
  doc.layers.push_back(layer("head", "Linear", 1, true));
  doc.model_metrics = {{"arch.blocks", blocks},
                       {"arch.stack", "blocks"},
                       {"arch.placement", placement},
                       {"arch.pre_norm_blocks", placement == "pre-norm" ? blocks : 0},
                       {"arch.post_norm_blocks", placement == "post-norm" ? blocks : 0},
                       {"arch.residual_additions", blocks},
                       {"arch.norm_layers", norm_layers},
                       {"arch.final_norm", final_norm},
                       {"arch.head_layer", "head"},
                       {"arch.last_block", "blocks." + std::to_string(blocks - 1)},
                       {"arch.stream_rms_first", 1.0},
                       {"arch.stream_rms_last", growth},
                       {"arch.stream_growth", growth}};
  return doc;
}

TEST(ARCH001, Catches) {
  const auto f = run("ARCH001", arch_doc(24, "post-norm", "n/a", 24, 1.0));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "deep-post-norm");
  EXPECT_EQ(f[0].layer, std::nullopt);
  EXPECT_EQ(f[0].evidence["arch.post_norm_blocks"], 24);
  EXPECT_EQ(f[0].message,
            "blocks has 24 post-norm blocks (x = Norm(x + F(x))); post-norm stacks this deep are fragile early in training");
}

TEST(ARCH001, CatchesNot) {
  EXPECT_TRUE(run("ARCH001", arch_doc(12, "post-norm", "n/a", 12, 1.0)).empty());
  EXPECT_TRUE(run("ARCH001", arch_doc(24, "pre-norm", "present", 25, 1.0)).empty());
}

TEST(ARCH002, Catches) {
  const auto f = run("ARCH002", arch_doc(6, "pre-norm", "absent", 6, 1.17));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "missing-final-norm");
  EXPECT_EQ(f[0].layer, "head");
  EXPECT_EQ(f[0].evidence["arch.last_block"], "blocks.5");
}

TEST(ARCH002, CatchesNot) {
  EXPECT_TRUE(run("ARCH002", arch_doc(6, "pre-norm", "present", 7, 1.17)).empty());
  EXPECT_TRUE(run("ARCH002", arch_doc(6, "pre-norm", "unknown", 6, 1.17)).empty());  // path not followed: silent
  EXPECT_TRUE(run("ARCH002", arch_doc(6, "post-norm", "absent", 6, 1.0)).empty());
}

TEST(ARCH003, Catches) {
  const auto f = run("ARCH003", arch_doc(16, "none", "n/a", 0, 1.0));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "no-normalization");
  EXPECT_EQ(f[0].evidence["arch.blocks"], 16);
  EXPECT_EQ(f[0].evidence["arch.norm_layers"], 0);
}

TEST(ARCH003, CatchesNot) {
  EXPECT_TRUE(run("ARCH003", arch_doc(16, "in-branch", "n/a", 32, 1.0)).empty());
  EXPECT_TRUE(run("ARCH003", arch_doc(4, "none", "n/a", 0, 1.0)).empty());  // shallow
}

TEST(ARCH004, Catches) {
  const auto f = run("ARCH004", arch_doc(6, "pre-norm", "present", 7, 730.0));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "residual-stream-growth");
  EXPECT_EQ(f[0].layer, "blocks.5");
  EXPECT_EQ(f[0].evidence["arch.stream_growth"], 730.0);
  EXPECT_EQ(f[0].evidence["arch.stream_rms_last"], 730.0);
}

TEST(ARCH004, CatchesNot) {
  EXPECT_TRUE(run("ARCH004", arch_doc(6, "pre-norm", "present", 7, 1.17)).empty());
  EXPECT_TRUE(run("ARCH004", arch_doc(6, "post-norm", "n/a", 6, 500.0)).empty());
}

// ---- the whole catalog on one healthy model -------------------------------

TEST(RuleCases, HealthyModelHasNoFindings) {
  nd::MetricsDoc doc;
  doc.inputs.push_back(input("x", 0, {{"input.is_float", true}, {"input.scale", 1.0}, {"input.nonfinite_count", 0}}));
  doc.layers.push_back(layer("", "Net", 3, false));
  doc.layers.push_back(layer("fc1", "Linear", 0, true,
                             {{"act.growth", 1.0}, {"act.fp16_headroom", 3000.0}, {"fwd.first_nonfinite", false},
                              {"grad.first_nonfinite", false}, {"grad.params_no_signal", 0}}));
  doc.layers.push_back(layer("norm", "LayerNorm", 1, true,
                             {{"act.growth", 1.2}, {"norm.gain_p99", 1.0}, {"grad.params_no_signal", 0}}));
  doc.layers.push_back(layer("attn", "Attention", 2, true,
                             {{"softmax.onehot_fraction", 0.0}, {"softmax.rows", 64}, {"sat.fraction", 0.01}}));
  doc.layers.push_back(layer("bn", "BatchNorm1d", 4, true,
                             {{"bn.at_initial_values", false}, {"bn.mean_z", 0.05}, {"bn.var_ratio", 1.02},
                              {"bn.var_ratio_off", 1.02}, {"bn.examples_per_pass", 32}, {"bn.values_per_channel", 32},
                              {"bn.mean_noise", 0.03}, {"bn.batch_of_one", false}}));
  doc.model_metrics = {{"grad.input_output_ratio", 1.7},
                       {"grad.first_layer", "fc1"},
                       {"run.synthetic_inputs", false},
                       {"bn.layers", 1},
                       {"bn.layers_at_init", 0},
                       {"drift.rel_output_diff", 0.02},
                       {"drift.rel_output_diff_with_dropout", 0.4},
                       {"batchdep.max_rel_diff", 3e-7},
                       {"batchdep.reorder_rel_diff", 0.0},
                       {"evalrep.rel_diff", 0.0},
                       {"mode.saved_training", false},
                       {"mode.dependent_ops", 2},
                       {"mode.baked_training_true", 0},
                       {"mode.baked_training_false", 0}};
  EXPECT_TRUE(nd::evaluate_rules(shipped(), doc).empty());
}

// ---- PREC001 fp16-overflow-risk (the run in the format) --------------------

nd::MetricsDoc prec001_doc(bool nonfinite, const std::string& cause) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("ffn.fc1", "Linear", 0, true,
                             {{"prec.nonfinite_count", 0}, {"prec.ref_absmax", 3.5}, {"prec.beyond_max_count", 0}}));
  nd::MetricMap fc2 = {{"prec.nonfinite_count", nonfinite ? 1 : 0}, {"prec.ref_absmax", 70000.0},
                       {"prec.beyond_max_count", 1}};
  if (nonfinite) {
    fc2["prec.first_nonfinite"] = true;
    fc2["prec.first_nonfinite_cause"] = cause;
  }
  doc.layers.push_back(layer("ffn.fc2", "Linear", 1, true, fc2));
  doc.model_metrics = {{"prec.format", "fp16"}, {"prec.mode", "emulated"}, {"prec.format_max", 65504.0}};
  return doc;
}

TEST(PREC001, Catches) {
  const auto f = run("PREC001", prec001_doc(true, "overflow"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "fp16-overflow-risk");
  EXPECT_EQ(f[0].severity, nd::Severity::kError);
  EXPECT_EQ(f[0].layer, "ffn.fc2");
  EXPECT_EQ(f[0].evidence["prec.nonfinite_count"], 1);
  EXPECT_EQ(f[0].evidence["prec.ref_absmax"], 70000.0);
  EXPECT_EQ(f[0].evidence["prec.mode"], "emulated");
  EXPECT_EQ(f[0].message.rfind("ffn.fc2 output becomes non-finite in fp16 (1 values, emulated run)", 0), 0u) << f[0].message;
}

TEST(PREC001, CatchesNot) {
  EXPECT_TRUE(run("PREC001", prec001_doc(false, "")).empty());
  EXPECT_TRUE(run("PREC001", prec001_doc(true, "norm-eps")).empty());  // PREC002's case
}

// ---- PREC002 norm-eps-precision --------------------------------------------

nd::MetricsDoc prec002_doc(double eps_in_format, int nonfinite, bool fp32_inside = false) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("norm", "RMSNorm", 0, true,
                             {{"norm.eps", 1e-12}, {"prec.eps_in_format", eps_in_format},
                              {"prec.norm_fp32_internally", fp32_inside},
                              {"prec.eps_vanishes", eps_in_format == 0}, {"prec.norm_rows", 24},
                              {"prec.norm_zero_rows", 4}, {"prec.norm_nonfinite_count", nonfinite}}));
  doc.layers.push_back(layer("proj", "Linear", 1, true, {{"prec.nonfinite_count", 0}}));
  doc.model_metrics = {{"prec.format", "fp16"}};
  return doc;
}

TEST(PREC002, Catches) {
  const auto f = run("PREC002", prec002_doc(0.0, 64));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "norm-eps-precision");
  EXPECT_EQ(f[0].layer, "norm");
  EXPECT_EQ(f[0].evidence["prec.norm_zero_rows"], 4);
  EXPECT_EQ(f[0].evidence["prec.norm_nonfinite_count"], 64);
  EXPECT_EQ(f[0].evidence["prec.eps_in_format"], 0.0);
  EXPECT_NE(f[0].message.find("4 of 24 rows have zero variance"), std::string::npos) << f[0].message;
}

TEST(PREC002, CatchesNot) {
  EXPECT_TRUE(run("PREC002", prec002_doc(1.0e-5, 0)).empty());   // eps survives
  EXPECT_TRUE(run("PREC002", prec002_doc(0.0, 0)).empty());      // eps vanishes, but no row divides by zero
  EXPECT_TRUE(run("PREC002", prec002_doc(0.0, 64, true)).empty());  // fused kernel: eps added in fp32 (PREC004)
}

TEST(PREC004, Catches) {
  const auto f = run("PREC004", prec002_doc(0.0, 64, true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "norm-eps-precision");
  EXPECT_EQ(f[0].severity, nd::Severity::kInfo);
  EXPECT_EQ(f[0].layer, "norm");
  EXPECT_EQ(f[0].evidence["prec.norm_zero_rows"], 4);
}

TEST(PREC004, CatchesNot) {
  EXPECT_TRUE(run("PREC004", prec002_doc(0.0, 64, false)).empty());  // computed in the format: PREC002's
  EXPECT_TRUE(run("PREC004", prec002_doc(1.0e-5, 0, true)).empty());
}

// ---- PREC003 loss-scale-underflow ------------------------------------------

nd::MetricsDoc prec003_doc(double fraction, bool forward_finite) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("fc1", "Linear", 0, true));
  doc.layers.push_back(layer("skip", "Linear", 1, true));
  doc.model_metrics = {{"prec.format", "fp16"},
                       {"prec.forward_finite", forward_finite},
                       {"prec.grad_underflow_fraction", fraction},
                       {"prec.grad_underflow_fraction_scale1", 0.9},
                       {"prec.loss_scale_used", 16384.0},
                       {"prec.loss_scale_best", 16384.0},
                       {"prec.grad_underflow_fraction_best", fraction},
                       {"prec.loss_scale_max", 30000.0},
                       {"prec.loss_scale_min", 1e9},
                       {"prec.grad_absmax", 2.0},
                       {"prec.grad_min_nonzero", 1e-14},
                       {"prec.grad_underflow_layer", "fc1"},
                       {"prec.grad_underflow_layer_count", 1000}};
  return doc;
}

TEST(PREC003, Catches) {
  const auto f = run("PREC003", prec003_doc(0.8, true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "loss-scale-underflow");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, "fc1");
  EXPECT_EQ(f[0].evidence["prec.grad_underflow_fraction"], 0.8);
  EXPECT_EQ(f[0].evidence["prec.loss_scale_used"], 16384.0);
  EXPECT_EQ(f[0].message,
            "0.8 of the non-zero parameter gradients underflow fp16 (below 6e-8) at loss scale 16384, GradScaler's "
            "initial 65536 or the largest power of two below 30000 where the largest gradient 2 stays finite (0.8 at "
            "16384); keeping every gradient normal needs 1e+09; most of them are in fc1");
}

TEST(PREC003, CatchesNot) {
  EXPECT_TRUE(run("PREC003", prec003_doc(0.001, true)).empty());
  EXPECT_TRUE(run("PREC003", prec003_doc(0.8, false)).empty());  // the forward is non-finite: PREC001 says where
}

// ---- ATTN001 attention-logit-growth ----------------------------------------

nd::MetricsDoc attn001_doc(double logit_absmax) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("attn", "SelfAttention", 3, false,
                             {{"attn.sites", 1}, {"attn.source", "softmax"}, {"attn.rows", 64},
                              {"attn.logit_absmax", logit_absmax}, {"attn.onehot_fraction", 0.984375},
                              {"attn.entropy_mean", 0.00255}, {"attn.entropy_max", 2.77}, {"attn.masked_rows", 0},
                              {"attn.masked_nan_rows", 0}}));
  // A classifier head's softmax is no attention site: no attn.* metrics.
  doc.layers.push_back(layer("head", "Linear", 4, true, {{"softmax.logit_absmax", 120.0}}));
  return doc;
}

TEST(ATTN001, Catches) {
  const auto f = run("ATTN001", attn001_doc(765.64));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "attention-logit-growth");
  EXPECT_EQ(f[0].layer, "attn");
  EXPECT_EQ(f[0].evidence, (json{{"attn.logit_absmax", 765.64}, {"attn.onehot_fraction", 0.984375},
                                 {"attn.entropy_mean", 0.00255}, {"attn.entropy_max", 2.77}, {"attn.rows", 64},
                                 {"attn.source", "softmax"}}));
  EXPECT_EQ(f[0].message,
            "attention logits in attn reach 766 before the softmax (0.984 of 64 rows near one-hot, mean entropy "
            "0.00255 of at most 2.77 nats)");
}

TEST(ATTN001, CatchesNot) { EXPECT_TRUE(run("ATTN001", attn001_doc(1.33)).empty()); }

// ---- ATTN002 nonfinite-forward (fully masked attention rows) -----------------

nd::MetricsDoc attn002_doc(int nan_rows) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("attn", "MaskedAttention", 3, false,
                             {{"attn.rows", 48}, {"attn.masked_rows", 16}, {"attn.masked_nan_rows", nan_rows},
                              {"attn.logit_absmax", 1.2}}));
  return doc;
}

TEST(ATTN002, Catches) {
  const auto f = run("ATTN002", attn002_doc(16));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "nonfinite-forward");
  EXPECT_EQ(f[0].severity, nd::Severity::kError);
  EXPECT_EQ(f[0].layer, "attn");
  EXPECT_EQ(f[0].evidence, (json{{"attn.masked_nan_rows", 16}, {"attn.masked_rows", 16}, {"attn.rows", 48}}));
  EXPECT_EQ(f[0].message,
            "16 attention rows in attn are masked entirely with -inf, so their softmax is NaN (16 fully masked rows, "
            "48 rows with unmasked keys)");
}

// Rows masked with a large finite value (finfo.min) are fully masked but give no NaN.
TEST(ATTN002, CatchesNot) { EXPECT_TRUE(run("ATTN002", attn002_doc(0)).empty()); }

// ---- LR001 update-ratio ----------------------------------------------------

nd::MetricsDoc lr001_doc(double lr) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("fc1", "Linear", 0, true,
                             {{"update.ratio_max", 0.135921 * lr}, {"update.ratio_param", "fc1.weight"},
                              {"update.norm", 1.2 * lr}, {"update.weight_norm", 8.8}}));
  doc.layers.push_back(layer("fc3", "Linear", 4, true,
                             {{"update.ratio_max", 1.63796 * lr}, {"update.ratio_param", "fc3.weight"},
                              {"update.norm", 3.3 * lr}, {"update.weight_norm", 2.0}}));
  doc.model_metrics = {{"update.lr", lr}, {"update.optimizer", "sgd"}};
  return doc;
}

TEST(LR001, Catches) {
  const auto f = run("LR001", lr001_doc(1.0));
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].failure_mode, "update-ratio");
  EXPECT_EQ(f[0].layer, "fc1");
  EXPECT_EQ(f[1].layer, "fc3");
  EXPECT_EQ(f[1].evidence, (json{{"update.ratio_max", 1.63796}, {"update.ratio_param", "fc3.weight"},
                                 {"update.norm", 3.3}, {"update.weight_norm", 2.0}, {"update.lr", 1.0},
                                 {"update.optimizer", "sgd"}}));
  EXPECT_EQ(f[1].message,
            "fc3.weight: one sgd step at lr 1 changes it by 1.64 of its norm (3.3 vs 2), far above the ~1e-3 rule of "
            "thumb");
}

// lr 1e-3: the same gradients give ratios of 1.4e-4 .. 1.6e-3.
TEST(LR001, CatchesNot) { EXPECT_TRUE(run("LR001", lr001_doc(1e-3)).empty()); }

// ---- REPLAY001 activation-growth / REPLAY002 nonfinite-forward (replay) -------

nd::MetricsDoc replay_doc(double growth, bool nonfinite) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("fc1", "Linear", 0, true, {}));
  doc.layers.push_back(layer("fc3", "Linear", 4, true, {}));
  doc.model_metrics = {{"replay.lr", 1.0},          {"replay.optimizer", "sgd"},    {"replay.steps_run", 5},
                       {"replay.loss_first", 2.99}, {"replay.loss_max", 4.3e31}, {"replay.loss_last", 4.3e31},     {"replay.act_growth_max", growth},
                       {"replay.act_growth_layer", "fc3"}, {"replay.act_growth_step", 3}, {"replay.nonfinite", nonfinite}};
  if (nonfinite) {
    doc.model_metrics["replay.nonfinite_step"] = 4;
    doc.model_metrics["replay.nonfinite_layer"] = "fc1";
    doc.model_metrics["replay.nonfinite_what"] = "output";
    doc.model_metrics["replay.loss_before_nonfinite"] = 4.3e31;
  }
  return doc;
}

TEST(REPLAY001, Catches) {
  const auto f = run("REPLAY001", replay_doc(3.2e15, true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "activation-growth");
  EXPECT_EQ(f[0].layer, "fc3");
  EXPECT_EQ(f[0].evidence["replay.act_growth_step"], 3);
  EXPECT_EQ(f[0].message,
            "in the replay (sgd, lr 1), the activation RMS of fc3 grows to 3.2e+15x its step-0 value by step 3; the "
            "loss was 2.99 at step 0, at most 4.3e+31, and 4.3e+31 at the last finite step");
}

TEST(REPLAY001, CatchesNot) { EXPECT_TRUE(run("REPLAY001", replay_doc(1.02, false)).empty()); }

TEST(REPLAY002, Catches) {
  const auto f = run("REPLAY002", replay_doc(3.2e15, true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "nonfinite-forward");
  EXPECT_EQ(f[0].severity, nd::Severity::kError);
  EXPECT_EQ(f[0].layer, "fc1");
  EXPECT_EQ(f[0].evidence["replay.nonfinite_step"], 4);
  EXPECT_EQ(f[0].message,
            "in the replay (sgd, lr 1), the output of fc1 is non-finite at step 4; the loss was 2.99 at step 0 and "
            "4.3e+31 one step before");
}

TEST(REPLAY002, CatchesNot) { EXPECT_TRUE(run("REPLAY002", replay_doc(1.02, false)).empty()); }

// ---- MODE005 saved-in-train-mode (submodules) ---------------------------------

nd::MetricsDoc mode005_doc(bool root_training, int submodules) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("backbone.stem.1", "BatchNorm2d", 1, true));
  doc.model_metrics = {{"mode.saved_training", root_training},
                       {"mode.modules_in_training", submodules},
                       {"mode.submodules_in_training", submodules},
                       {"mode.dependent_ops", 3}};
  if (submodules) {
    doc.model_metrics["mode.submodule_ops_in_training"] = submodules;
    doc.model_metrics["mode.submodules_in_training_names"] = "backbone.stem.1, backbone.stage1.1, backbone.stage2.1";
    doc.model_metrics["mode.first_submodule_in_training"] = "backbone.stem.1";
    doc.model_metrics["mode.frozen_submodules_in_training"] = submodules;
  }
  return doc;
}

TEST(MODE005, Catches) {
  const auto f = run("MODE005", mode005_doc(false, 3));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "saved-in-train-mode");
  EXPECT_EQ(f[0].severity, nd::Severity::kWarning);
  EXPECT_EQ(f[0].layer, "backbone.stem.1");
  EXPECT_EQ(f[0].message,
            "the model was saved in eval mode, but 3 modules inside it are in training mode (backbone.stem.1, "
            "backbone.stage1.1, backbone.stage2.1; 3 of them with frozen parameters) and run 3 batch_norm/dropout ops "
            "that follow their own flag: run as saved, they normalize with batch statistics, update their running "
            "statistics and apply dropout");
  // MODE001 reads the root only and stays silent here.
  EXPECT_TRUE(run("MODE001", mode005_doc(false, 3)).empty());
}

TEST(MODE005, CatchesNot) {
  EXPECT_TRUE(run("MODE005", mode005_doc(false, 0)).empty());
  EXPECT_TRUE(run("MODE005", mode005_doc(true, 3)).empty());  // the root in training mode: MODE001's
}

// ---- NORM002 degenerate-norm-group ----------------------------------------------

nd::MetricsDoc norm002_doc(int vpg) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("block2.gn", "GroupNorm", 3, true, {{"norm.values_per_group", 256}}));
  doc.layers.push_back(layer("head_norm", "GroupNorm", 6, true,
                             {{"norm.values_per_group", vpg}, {"norm.op", "group_norm"},
                              {"norm.input_shape", "[4, 16, 1, 1]"}, {"norm.groups_per_pass", 64},
                              {"act.std", 0.0}, {"norm.silenced_layers", 0}}));
  return doc;
}

TEST(NORM002, Catches) {
  const auto f = run("NORM002", norm002_doc(1));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "degenerate-norm-group");
  EXPECT_EQ(f[0].severity, nd::Severity::kError);
  EXPECT_EQ(f[0].layer, "head_norm");
  EXPECT_EQ(f[0].evidence["norm.values_per_group"], 1);
  EXPECT_EQ(f[0].evidence["norm.groups_per_pass"], 64);
}

TEST(NORM002, CatchesNot) { EXPECT_TRUE(run("NORM002", norm002_doc(4)).empty()); }

// ---- ACT006 dead-units ------------------------------------------------------------

nd::MetricsDoc act006_doc(int dead, int examples) {
  nd::MetricsDoc doc;
  const double frac = dead / 64.0, chance = std::pow(0.5, examples);
  doc.layers.push_back(layer("act1", "ReLU", 1, true,
                             {{"dead.units", 64}, {"dead.count", dead}, {"dead.fraction", frac},
                              {"dead.examples", examples}, {"dead.chance_fraction", chance},
                              {"dead.over_chance", frac / chance}, {"dead.mirror_p", dead > 0 ? std::pow(0.5, dead) : 1.0}}));
  doc.model_metrics["run.synthetic_inputs"] = false;
  return doc;
}

TEST(ACT006, Catches) {
  const auto f = run("ACT006", act006_doc(40, 32));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "dead-units");
  EXPECT_EQ(f[0].layer, "act1");
  EXPECT_EQ(f[0].evidence["dead.count"], 40);
  EXPECT_EQ(f[0].evidence["dead.fraction"], 0.625);
}

TEST(ACT006, CatchesNot) {
  EXPECT_TRUE(run("ACT006", act006_doc(1, 32)).empty());
  // Two examples leave a quarter of healthy units inactive by chance.
  EXPECT_TRUE(run("ACT006", act006_doc(20, 2)).empty());
  // torchvision mobilenet_v3's SE squeeze ReLU at init: 8 units, one pooled
  // value per example, 7 dead and 1 always active: a coin (sign test p = 0.035).
  nd::MetricsDoc se;
  se.layers.push_back(layer("se.activation", "ReLU", 1, true,
                            {{"dead.units", 8}, {"dead.count", 7}, {"dead.fraction", 0.875}, {"dead.examples", 4},
                             {"dead.chance_fraction", 0.125}, {"dead.over_chance", 7.0}, {"dead.mirror_p", 9.0 / 256}}));
  se.model_metrics["run.synthetic_inputs"] = false;
  EXPECT_TRUE(run("ACT006", se).empty());
}

// ---- ACT007 outlier-features --------------------------------------------------------

nd::MetricsDoc act007_doc(double top, int count) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("blocks.0", "Block", 2, false,
                             {{"outlier.ratio", top / 0.35}, {"outlier.channel", 7}, {"outlier.channel_absmax", top},
                              {"outlier.median_absmax", 0.35}, {"outlier.channels", 32}, {"outlier.count", count},
                              {"outlier.hidden_axis", "last"}}));
  doc.model_metrics["run.synthetic_inputs"] = false;
  return doc;
}

TEST(ACT007, Catches) {
  const auto f = run("ACT007", act007_doc(40.0, 1));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "outlier-features");
  EXPECT_EQ(f[0].layer, "blocks.0");
  EXPECT_EQ(f[0].evidence["outlier.channel"], 7);
  EXPECT_EQ(f[0].message,
            "in the residual stream after blocks.0, channel 7 reaches 40, 114x the median channel's 0.35 (1 of 32 "
            "channels above 100x the median)");
}

TEST(ACT007, CatchesNot) {
  EXPECT_TRUE(run("ACT007", act007_doc(0.8, 0)).empty());
  EXPECT_TRUE(run("ACT007", act007_doc(20.0, 0)).empty());  // 57x: under two orders of magnitude
  EXPECT_TRUE(run("ACT007", act007_doc(200.0, 20)).empty());  // the whole stream scaled, not a few channels
}

// ---- ACT008 output-logit-divergence ---------------------------------------------------

nd::MetricsDoc act008_doc(double logz, double growth_max = 1.0) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("classifier", "Linear", 2, true));
  doc.model_metrics = {{"logits.head", "classifier"}, {"logits.classes", 100},   {"logits.rows", 16},
                       {"logits.logz_mean", logz},    {"logits.logz_abs_mean", logz}, {"logits.logz_abs_max", logz * 1.5},
                       {"logits.logz_uniform", std::log(100.0)}, {"logits.absmax", logz * 1.6},
                       {"act.growth_max", growth_max}, {"run.synthetic_inputs", false}};
  return doc;
}

TEST(ACT008, Catches) {
  const auto f = run("ACT008", act008_doc(117.0));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "output-logit-divergence");
  EXPECT_EQ(f[0].layer, "classifier");
  EXPECT_EQ(f[0].evidence["logits.logz_abs_mean"], 117.0);
}

TEST(ACT008, CatchesNot) {
  EXPECT_TRUE(run("ACT008", act008_doc(4.6)).empty());
  // Activations grew 7e4x through depth before the head (growth20): the
  // logits are large because everything is; ACT002 names that cause.
  EXPECT_TRUE(run("ACT008", act008_doc(1.6e5, 7.2e4)).empty());
}

// ---- TL001 / TL002 the first non-finite checkpoint (timeline) ----------------

nd::MetricsDoc tl_nonfinite_doc(bool forward, bool fires) {
  nd::MetricsDoc doc;
  nd::MetricMap m;
  if (fires) {
    m[forward ? "timeline.first_nonfinite_forward" : "timeline.first_nonfinite_gradient"] = true;
    m["timeline.nonfinite_checkpoint"] = "ckpts/step_0100.pt (step 100)";
    m["timeline.last_finite_checkpoint"] = "ckpts/step_0095.pt (step 95)";
    m["timeline.nonfinite_loss"] = "nan";
    m["timeline.last_finite_loss"] = 5.6e12;
    if (!forward) m["timeline.nonfinite_from"] = "lm_head";
  }
  doc.layers.push_back(layer("wte", "Embedding", 0, true, m));
  doc.layers.push_back(layer("lm_head", "Linear", 9, true, {}));
  return doc;
}

TEST(TL001, Catches) {
  const auto f = run("TL001", tl_nonfinite_doc(true, true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "nonfinite-forward");
  EXPECT_EQ(f[0].severity, nd::Severity::kError);
  EXPECT_EQ(f[0].layer, "wte");
  EXPECT_EQ(f[0].evidence["timeline.nonfinite_checkpoint"], "ckpts/step_0100.pt (step 100)");
  EXPECT_EQ(f[0].message,
            "wte is the first module to output non-finite values in checkpoint ckpts/step_0100.pt (step 100); the "
            "checkpoint before it, ckpts/step_0095.pt (step 95), ran finite (loss 5.6e+12)");
}

TEST(TL001, CatchesNot) {
  EXPECT_TRUE(run("TL001", tl_nonfinite_doc(true, false)).empty());
  EXPECT_TRUE(run("TL001", tl_nonfinite_doc(false, true)).empty());
}

TEST(TL002, Catches) {
  const auto f = run("TL002", tl_nonfinite_doc(false, true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "nonfinite-gradient");
  EXPECT_EQ(f[0].layer, "wte");
  EXPECT_EQ(f[0].evidence["timeline.nonfinite_from"], "lm_head");
}

TEST(TL002, CatchesNot) { EXPECT_TRUE(run("TL002", tl_nonfinite_doc(false, false)).empty()); }

// ---- TL003-TL007 the first mover (timeline) ---------------------------------

nd::MetricsDoc tl_mover_doc(const std::string& metric, const std::string& family) {
  nd::MetricsDoc doc;
  nd::MetricMap m;
  if (!metric.empty()) {
    m = {{"timeline.first_mover", true},
         {"timeline.mover_metric", metric},
         {"timeline.mover_family", family},
         {"timeline.mover_checkpoint", "ckpts/step_0030.pt (step 30)"},
         {"timeline.mover_ratio", 41.5},
         {"timeline.mover_z", 11.2},
         {"timeline.mover_early_median", 1.02},
         {"timeline.mover_trajectory", "0.98 1.02 1.1 2.3 41.5"}};
  }
  doc.layers.push_back(layer("h.0.attn", "CausalSelfAttention", 2, false, m));
  return doc;
}

TEST(TL003, Catches) {
  const auto f = run("TL003", tl_mover_doc("act.rms", "activations"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "activation-growth");
  EXPECT_EQ(f[0].layer, "h.0.attn");
  EXPECT_EQ(f[0].evidence["timeline.mover_trajectory"], "0.98 1.02 1.1 2.3 41.5");
  EXPECT_EQ(f[0].message,
            "h.0.attn is the first mover: its act.rms left its early range at ckpts/step_0030.pt (step 30), 41.5x the "
            "median of its first 3 checkpoints (robust z 11.2); trajectory 0.98 1.02 1.1 2.3 41.5");
}

TEST(TL003, CatchesNot) {
  EXPECT_TRUE(run("TL003", tl_mover_doc("", "")).empty());
  EXPECT_TRUE(run("TL003", tl_mover_doc("grad.out_norm", "gradients")).empty());
}

TEST(TL004, Catches) { EXPECT_EQ(run("TL004", tl_mover_doc("grad.param_norm", "gradients")).at(0).failure_mode, "exploding-gradients"); }
TEST(TL004, CatchesNot) { EXPECT_TRUE(run("TL004", tl_mover_doc("act.rms", "activations")).empty()); }
TEST(TL005, Catches) { EXPECT_EQ(run("TL005", tl_mover_doc("norm.gain_absmax", "norm gains")).at(0).failure_mode, "norm-gain-growth"); }
TEST(TL005, CatchesNot) { EXPECT_TRUE(run("TL005", tl_mover_doc("", "")).empty()); }
TEST(TL006, Catches) {
  EXPECT_EQ(run("TL006", tl_mover_doc("attn.logit_absmax", "attention logits")).at(0).failure_mode, "attention-logit-growth");
}
TEST(TL006, CatchesNot) { EXPECT_TRUE(run("TL006", tl_mover_doc("norm.gain_absmax", "norm gains")).empty()); }
TEST(TL007, Catches) { EXPECT_EQ(run("TL007", tl_mover_doc("weight.rel_change", "update sizes")).at(0).failure_mode, "update-ratio"); }
TEST(TL007, CatchesNot) { EXPECT_TRUE(run("TL007", tl_mover_doc("", "")).empty()); }

// ---- ADAM001 / ADAM002 adam-second-moment-lag ---------------------------------

nd::MetricsDoc adam_doc(double rms, double eps_fraction, bool training_loss) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("h.0.mlp.fc", "Linear", 5, true,
                             {{"adam.rms_ratio_max", rms}, {"adam.rms_ratio_param", "h.0.mlp.fc.weight"},
                              {"adam.step", 5001.0}, {"adam.eps_fraction_max", eps_fraction},
                              {"adam.eps_fraction_param", "h.0.mlp.fc.weight"}}));
  doc.model_metrics["adam.loss_is_training_loss"] = training_loss;
  return doc;
}

TEST(ADAM001, Catches) {
  const auto f = run("ADAM001", adam_doc(31.4, 0.0, true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "adam-second-moment-lag");
  EXPECT_EQ(f[0].layer, "h.0.mlp.fc");
  EXPECT_EQ(f[0].message,
            "the gradient of h.0.mlp.fc.weight on this batch is 31.4x the size Adam's second moment expects (RMS of g "
            "/ sqrt(v_hat) after step 5001); the next step is that much larger than the recent ones");
}

TEST(ADAM001, CatchesNot) {
  EXPECT_TRUE(run("ADAM001", adam_doc(1.1, 0.0, true)).empty());
  EXPECT_TRUE(run("ADAM001", adam_doc(31.4, 0.0, false)).empty()) << "not judged without the training loss";
}

TEST(ADAM002, Catches) {
  const auto f = run("ADAM002", adam_doc(1.0, 0.93, true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].evidence["adam.eps_fraction_max"], 0.93);
}

TEST(ADAM002, CatchesNot) { EXPECT_TRUE(run("ADAM002", adam_doc(1.0, 0.01, true)).empty()); }

// ---- CKPT001 / CKPT002 norm-gain-convention -----------------------------------

nd::MetricsDoc gain_doc(const std::string& formula, double mean, double absmean, double stdev, double negative) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("norm", "LlamaRMSNorm", 1, true,
                             {{"norm.gain_formula", formula}, {"norm.gain_loaded_mean", mean},
                              {"norm.gain_loaded_absmean", absmean}, {"norm.gain_loaded_std", stdev},
                              {"norm.gain_negative_fraction", negative},
                              {"norm.gain_effective_mean", formula == "weight" ? mean : mean + 1}}));
  return doc;
}

TEST(CKPT001, Catches) {
  const auto f = run("CKPT001", gain_doc("weight", 0.012, 0.081, 0.1, 0.44));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "norm-gain-convention");
  EXPECT_EQ(f[0].layer, "norm");
  EXPECT_EQ(f[0].evidence["norm.gain_effective_mean"], 0.012);
}

TEST(CKPT001, CatchesNot) {
  EXPECT_TRUE(run("CKPT001", gain_doc("weight", 1.01, 1.01, 0.1, 0.0)).empty());
  // Small but positive trained gains (early Llama-2 input norms): not this.
  EXPECT_TRUE(run("CKPT001", gain_doc("weight", 0.08, 0.08, 0.03, 0.0)).empty());
  EXPECT_TRUE(run("CKPT001", gain_doc("1 + weight", 0.012, 0.081, 0.1, 0.44)).empty());
}

TEST(CKPT002, Catches) {
  const auto f = run("CKPT002", gain_doc("1 + weight", 1.01, 1.01, 0.1, 0.0));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, nd::Severity::kInfo);
}

TEST(CKPT002, CatchesNot) {
  EXPECT_TRUE(run("CKPT002", gain_doc("1 + weight", 0.012, 0.081, 0.1, 0.44)).empty());
  EXPECT_TRUE(run("CKPT002", gain_doc("weight", 1.01, 1.01, 0.1, 0.0)).empty());
}
