// End to end: the attention, update-ratio and replay probes on their
// fixtures, as a user runs them, against what Python measured
// (fixtures/models/manifest.json):
//
//   softmax_collapse(_healthy)   ATTN001 attention-logit-growth at attn
//   masked_attention(_healthy)   ATTN002 a fully -inf-masked row makes NaN; intentional -inf masking does not
//   lr_unstable --lr 1 / 1e-3    LR001 update-ratio per layer; the healthy twin is the same fixture at
//                                lr 1e-3 (a different flag, not a different file)
//   lr_unstable --steps          REPLAY001/REPLAY002: the losses step by step and the step where the
//                                forward becomes non-finite; at lr 1e-3 nothing fires
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "e2e_util.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_e2e_training_test {

namespace {

using namespace nde2e;

std::vector<json> findings_of(const json& report, const std::string& rule) {
  std::vector<json> v;
  for (const auto& f : report.at("findings"))
    if (f.value("rule_id", "") == rule) v.push_back(f);
  return v;
}

const json& metric(const json& report, const std::string& layer, const std::string& name) {
  const json* l = find_layer(report, layer);
  EXPECT_NE(l, nullptr) << "no layer " << layer;
  static const json kNull;
  if (!l || !l->at("metrics").contains(name)) {
    ADD_FAILURE() << layer << " has no metric " << name;
    return kNull;
  }
  return l->at("metrics").at(name);
}

NdRun run_fixture(const std::string& name, const std::vector<std::string>& extra, const TempDir& tmp,
                  const std::string& input = "") {
  return check(model(name + ".pt"), {model(input.empty() ? name + ".input.pt" : input)}, extra, tmp.file("r.json"));
}

std::vector<std::string> lr_args(const std::string& lr, int steps = 0) {
  std::vector<std::string> a{"--target", model("lr_unstable.target.pt"), "--lr", lr};
  if (steps > 0) {
    a.push_back("--steps");
    a.push_back(std::to_string(steps));
  }
  return a;
}

// ---- attention ----------------------------------------------------------------

TEST(Attention, LogitGrowthOnScaledQueryKey) {
  TempDir tmp;
  const NdRun r = run_fixture("softmax_collapse", {}, tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  const auto f = findings_of(r.report, "ATTN001");
  ASSERT_EQ(f.size(), 1u) << r.report.at("findings").dump(2);
  EXPECT_EQ(f[0].at("failure_mode"), "attention-logit-growth");
  EXPECT_EQ(f[0].at("layer"), "attn");
  EXPECT_EQ(mf("/softmax_collapse/faults/1/slug"), "attention-logit-growth");
  const json& ev = f[0].at("evidence");
  EXPECT_TRUE(near_rel("attn.logit_absmax", as_number(ev.at("attn.logit_absmax")),
                       mf("/softmax_collapse/faults/1/numbers/logit_absmax").get<double>(), 1e-3));
  EXPECT_TRUE(near_rel("attn.onehot_fraction", as_number(ev.at("attn.onehot_fraction")),
                       mf("/softmax_collapse/numbers/onehot_fraction").get<double>(), 1e-6));
  EXPECT_TRUE(near_rel("attn.entropy_mean", as_number(ev.at("attn.entropy_mean")),
                       mf("/softmax_collapse/numbers/entropy_mean").get<double>(), 1e-2));
  EXPECT_EQ(ev.at("attn.rows"), mf("/softmax_collapse/numbers/rows"));
  EXPECT_EQ(ev.at("attn.source"), "softmax");
  EXPECT_EQ(metric(r.report, "attn", "attn.sites"), 1);
}

TEST(Attention, HealthyTwinIsSilentAndMeasured) {
  TempDir tmp;
  const NdRun r = run_fixture("softmax_collapse_healthy", {}, tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_TRUE(r.report.at("findings").empty()) << r.report.at("findings").dump(2);
  EXPECT_TRUE(near_rel("attn.logit_absmax", as_number(metric(r.report, "attn", "attn.logit_absmax")),
                       mf("/softmax_collapse_healthy/numbers/logit_absmax").get<double>(), 1e-3));
  EXPECT_EQ(metric(r.report, "attn", "attn.onehot_fraction"), 0.0);
  EXPECT_EQ(metric(r.report, "attn", "attn.masked_rows"), 0);
}

// Query/key vs value weight norms: the faulty fixture is the healthy one
// (same seed) with q and k weights x24, so the ratio grows exactly 24x.
TEST(Attention, QueryKeyVersusValueWeightNorms) {
  TempDir tmp_a, tmp_b;
  const NdRun bad = run_fixture("softmax_collapse", {}, tmp_a);
  const NdRun good = run_fixture("softmax_collapse_healthy", {}, tmp_b);
  ASSERT_TRUE(bad.has_report && good.has_report) << bad.describe() << good.describe();
  for (const NdRun* r : {&bad, &good}) {
    EXPECT_EQ(metric(r->report, "attn", "attn.q_module"), "attn.q");
    EXPECT_EQ(metric(r->report, "attn", "attn.k_module"), "attn.k");
    EXPECT_EQ(metric(r->report, "attn", "attn.v_module"), "attn.v");
  }
  const double scale = mf("/softmax_collapse/numbers/qk_weight_scale").get<double>();
  EXPECT_TRUE(near_rel("q norm", as_number(metric(bad.report, "attn", "attn.q_weight_norm")),
                       scale * as_number(metric(good.report, "attn", "attn.q_weight_norm")), 1e-6));
  EXPECT_TRUE(near_rel("v norm", as_number(metric(bad.report, "attn", "attn.v_weight_norm")),
                       as_number(metric(good.report, "attn", "attn.v_weight_norm")), 1e-9));
  EXPECT_TRUE(near_rel("ratio", as_number(metric(bad.report, "attn", "attn.qk_v_weight_ratio")),
                       scale * as_number(metric(good.report, "attn", "attn.qk_v_weight_ratio")), 1e-6));
  EXPECT_LT(std::fabs(as_number(metric(good.report, "attn", "attn.qk_v_weight_ratio")) - 1.0), 0.2);
}

TEST(Attention, FullyMaskedRowThatMakesNaN) {
  TempDir tmp;
  const NdRun r = run_fixture("masked_attention", {}, tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  const auto f = findings_of(r.report, "ATTN002");
  ASSERT_EQ(f.size(), 1u) << r.report.at("findings").dump(2);
  EXPECT_EQ(f[0].at("failure_mode"), mf("/masked_attention/faults/0/slug"));
  EXPECT_EQ(f[0].at("layer"), mf("/masked_attention/faults/0/layer"));
  EXPECT_EQ(f[0].at("severity"), "error");
  const json& ev = f[0].at("evidence");
  EXPECT_EQ(ev.at("attn.masked_nan_rows"), mf("/masked_attention/faults/0/numbers/nan_rows"));
  EXPECT_EQ(ev.at("attn.masked_rows"), mf("/masked_attention/faults/0/numbers/fully_masked_rows"));
  EXPECT_EQ(ev.at("attn.rows"), mf("/masked_attention/faults/0/numbers/rows_with_unmasked_keys"));
  // The NaN itself is also ACT001's (first non-finite module output); nothing else.
  for (const auto& x : r.report.at("findings")) {
    const std::string id = x.value("rule_id", "");
    EXPECT_TRUE(id == "ATTN002" || id == "ACT001") << x.dump(2);
    if (id == "ACT001") {
      EXPECT_EQ(x.at("layer"), "attn");
    }
  }
}

TEST(Attention, IntentionalInfMaskingIsNoFault) {
  TempDir tmp;
  const NdRun r = run_fixture("masked_attention_healthy", {}, tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(r.report.at("findings").empty()) << r.report.at("findings").dump(2);
  EXPECT_EQ(metric(r.report, "attn", "attn.masked_rows"), 0);
  EXPECT_EQ(metric(r.report, "attn", "attn.masked_nan_rows"), 0);
  EXPECT_EQ(metric(r.report, "attn", "attn.rows"), mf("/masked_attention_healthy/numbers/rows_with_unmasked_keys"));
}

// The real models (corpus/, default random init): every attention
// site is found (eager softmax in the traced BERT/Llama, scaled_dot_product_attention
// in the scripted ViT), and none has large logits or NaN rows, so no ATTN finding.
TEST(Attention, RealModelsAreQuiet) {
  struct Real {
    std::string name;
    std::vector<std::string> layers;
    std::string source;
    int64_t rows;        // rows with >= 2 unmasked keys over all heads and examples
    double entropy_max;  // log(keys)
  };
  const std::vector<Real> reals = {
      // [2 examples x 4 heads x 16 queries]; padding masks keys only (finfo.min), no row is fully masked
      {"hf_bert_tiny", {"m.encoder.layer.0.attention.self", "m.encoder.layer.1.attention.self"}, "softmax", 128,
       std::log(16.0)},
      // causal: query 0 of each head sees one key only, so 2 x 4 x 15 rows qualify
      {"hf_llama_tiny", {"m.layers.0.self_attn", "m.layers.1.self_attn"}, "softmax", 120, std::log(16.0)},
      // 64 patches + class token = 65 keys, [4 examples x 4 heads x 65 queries]
      {"tv_vit_tiny",
       {"encoder.layers.encoder_layer_0.self_attention", "encoder.layers.encoder_layer_3.self_attention"},
       "scaled_dot_product_attention", 1040, std::log(65.0)},
  };
  for (const auto& rm : reals) {
    SCOPED_TRACE(rm.name);
    const std::string pt = real_models_dir() + "/" + rm.name + ".pt";
    if (!fs::exists(pt)) GTEST_SKIP() << "no " << pt;
    TempDir tmp;
    const NdRun r = check(pt, {real_models_dir() + "/" + rm.name + ".input.pt"}, {}, tmp.file("r.json"));
    ASSERT_TRUE(r.has_report) << r.describe();
    for (const auto& f : r.report.at("findings")) EXPECT_NE(f.value("rule_id", "").rfind("ATTN", 0), 0u) << f.dump(2);
    for (const auto& l : rm.layers) {
      SCOPED_TRACE(l);
      EXPECT_EQ(metric(r.report, l, "attn.sites"), 1);
      EXPECT_EQ(metric(r.report, l, "attn.source"), rm.source);
      EXPECT_EQ(metric(r.report, l, "attn.rows"), rm.rows);
      EXPECT_EQ(metric(r.report, l, "attn.masked_rows"), 0);
      EXPECT_TRUE(near_rel("attn.entropy_max", as_number(metric(r.report, l, "attn.entropy_max")), rm.entropy_max, 1e-9));
      const double logit = as_number(metric(r.report, l, "attn.logit_absmax"));
      EXPECT_GT(logit, 0.0);
      EXPECT_LT(logit, 5.0);
    }
  }
}

// ---- update ratio ----------------------------------------------------------------

TEST(UpdateRatio, LrOneNamesEveryLayer) {
  TempDir tmp;
  const NdRun r = run_fixture("lr_unstable", lr_args("1"), tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  // One learning rate, one finding (LR001 groups): the layer furthest over
  // its limit (fc3, rank_by), naming the other two in execution order;
  // every layer's ratio is its own.
  const auto f = findings_of(r.report, "LR001");
  ASSERT_EQ(f.size(), 1u) << r.report.at("findings").dump(2);
  EXPECT_EQ(f[0].at("failure_mode"), mf("/lr_unstable/faults/0/slug"));
  EXPECT_EQ(f[0].at("layer"), "fc3");
  EXPECT_EQ(f[0].at("evidence").at("also_layers"), "fc1, fc2");
  EXPECT_EQ(as_number(f[0].at("evidence").at("matched_layers")), 3.0);
  EXPECT_NE(f[0].at("message").get<std::string>().find("; the same holds for 2 more layers (fc1, fc2)"), std::string::npos)
      << f[0].at("message");
  EXPECT_EQ(f[0].at("evidence").at("update.ratio_param"), "fc3.weight");
  EXPECT_EQ(f[0].at("evidence").at("update.lr"), 1.0);
  EXPECT_EQ(f[0].at("evidence").at("update.optimizer"), "sgd");
  const char* layers[] = {"fc1", "fc2", "fc3"};
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(layers[i]);
    const std::string param = std::string(layers[i]) + ".weight";
    EXPECT_TRUE(near_rel("update.ratio_max", as_number(metric(r.report, layers[i], "update.ratio_max")),
                         mf("/lr_unstable/faults/0/numbers/update_ratio_at_lr_1/" + param).get<double>(), 1e-3));
  }
  // Zero-initialized biases have no ratio (the manifest's null).
  for (const auto& p : r.report.at("probes").at("update").at("params"))
    if (p.at("param").get<std::string>().find("bias") != std::string::npos) {
      EXPECT_TRUE(p.at("ratio").is_null()) << p.dump();
      EXPECT_TRUE(mf("/lr_unstable/numbers/update_ratio/" + p.at("param").get<std::string>() + "/lr_1").is_null());
    }
  EXPECT_EQ(r.report.at("findings").size(), 1u) << r.report.at("findings").dump(2);
}

// The healthy twin of lr_unstable is the same fixture at --lr 1e-3.
TEST(UpdateRatio, StableLrIsSilent) {
  TempDir tmp;
  const NdRun r = run_fixture("lr_unstable", lr_args("0.001"), tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_TRUE(r.report.at("findings").empty()) << r.report.at("findings").dump(2);
  EXPECT_TRUE(near_rel("fc3 ratio", as_number(metric(r.report, "fc3", "update.ratio_max")),
                       mf("/lr_unstable/numbers/update_ratio/fc3.weight/lr_1e_3").get<double>(), 1e-3));
}

TEST(UpdateRatio, AdamStepIsBoundedBySqrtNumel) {
  // Adam's first step is lr * sign(g) elementwise: |update| = lr * sqrt(numel) for a gradient without zeros.
  TempDir tmp;
  const NdRun r = run_fixture("lr_unstable", {"--target", model("lr_unstable.target.pt"), "--lr", "0.001",
                                              "--optimizer", "adam"}, tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  for (const auto& p : r.report.at("probes").at("update").at("params")) {
    if (p.at("param") != "fc3.weight") continue;
    EXPECT_TRUE(near_rel("adam update norm", as_number(p.at("update_norm")), 1e-3 * std::sqrt(64.0 * 4.0), 1e-4));
  }
  EXPECT_EQ(r.report.at("options").value("optimizer", ""), "adam");
}

// ---- replay ----------------------------------------------------------------

TEST(Replay, LrOneDivergesAtTheManifestStep) {
  TempDir tmp;
  const std::string before = read_file(model("lr_unstable.pt"));
  const NdRun r = run_fixture("lr_unstable", lr_args("1", 10), tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(read_file(model("lr_unstable.pt")), before) << "the model file was written";

  const json& rp = r.report.at("probes").at("replay");
  const json& steps = rp.at("steps");
  const json& losses = mf("/lr_unstable/numbers/losses_lr_1");
  const int64_t nonfinite = mf("/lr_unstable/numbers/step_loss_nonfinite_lr_1").get<int64_t>();
  ASSERT_EQ(static_cast<int64_t>(steps.size()), nonfinite + 1) << rp.dump(1).substr(0, 3000);
  for (int64_t k = 0; k < nonfinite; ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    EXPECT_EQ(steps[k].at("step"), k);
    // float32 training diverging by 1e30: later steps agree to about 1%.
    EXPECT_TRUE(near_rel("loss", as_number(steps[k].at("loss")), losses[k].get<double>(), k < 2 ? 1e-4 : 2e-2));
    EXPECT_TRUE(steps[k].contains("grad_norm"));
    EXPECT_TRUE(steps[k].at("modules").contains("fc3"));
  }
  EXPECT_FALSE(std::isfinite(as_number(steps[nonfinite].at("loss"))));

  const auto f2 = findings_of(r.report, "REPLAY002");
  ASSERT_EQ(f2.size(), 1u) << r.report.at("findings").dump(2);
  EXPECT_EQ(f2[0].at("failure_mode"), "nonfinite-forward");
  EXPECT_EQ(f2[0].at("evidence").at("replay.nonfinite_step"), nonfinite);
  EXPECT_NE(f2[0].at("message").get<std::string>().find("step " + std::to_string(nonfinite)), std::string::npos);
  // The named layer is the first module in execution order with a non-finite output at that step.
  const std::string layer = f2[0].at("layer").get<std::string>();
  const json& mods = steps[nonfinite].at("modules");
  ASSERT_TRUE(mods.contains(layer)) << mods.dump();
  EXPECT_GT(mods.at(layer).at("nonfinite_count").get<int64_t>(), 0);
  for (const char* earlier : {"fc1", "act1", "fc2", "act2", "fc3"}) {
    if (layer == earlier) break;
    EXPECT_EQ(mods.at(earlier).at("nonfinite_count"), 0) << earlier;
  }

  const auto f1 = findings_of(r.report, "REPLAY001");
  ASSERT_EQ(f1.size(), 1u) << r.report.at("findings").dump(2);
  EXPECT_EQ(f1[0].at("failure_mode"), "activation-growth");
  const json& ev = f1[0].at("evidence");
  EXPECT_GT(as_number(ev.at("replay.act_growth_max")), 100.0);
  EXPECT_LT(ev.at("replay.act_growth_step").get<int64_t>(), nonfinite);
  EXPECT_EQ(ev.at("replay.steps_run"), nonfinite + 1);
  EXPECT_TRUE(near_rel("loss_first", as_number(ev.at("replay.loss_first")), losses[0].get<double>(), 1e-4));
  // Also the update ratios of the first step (LR001) and nothing else.
  for (const auto& x : r.report.at("findings")) {
    const std::string id = x.value("rule_id", "");
    EXPECT_TRUE(id == "REPLAY001" || id == "REPLAY002" || id == "LR001") << x.dump(2);
  }
}

TEST(Replay, StableLrRunsEveryStepSilently) {
  TempDir tmp;
  const NdRun r = run_fixture("lr_unstable", lr_args("0.001", 30), tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(r.report.at("findings").empty()) << r.report.at("findings").dump(2);
  const json& steps = r.report.at("probes").at("replay").at("steps");
  const json& losses = mf("/lr_unstable/numbers/losses_lr_1e_3");
  ASSERT_EQ(steps.size(), losses.size());
  for (size_t k = 0; k < steps.size(); ++k)
    EXPECT_TRUE(near_rel(("loss at step " + std::to_string(k)).c_str(), as_number(steps[k].at("loss")),
                         losses[k].get<double>(), 1e-4));
  EXPECT_EQ(r.report.at("probes").at("model_metrics").value("replay.nonfinite", true), false);
}

TEST(Replay, TextTableIsReadable) {
  const NdRun r = run_nd({"check", model("lr_unstable.pt"), "--input", model("lr_unstable.input.pt"), "--target",
                          model("lr_unstable.target.pt"), "--lr", "1", "--steps", "10", "--color", "never"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.out.find("replay (sgd, lr 1, 5 of 10 steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("non-finite: "), std::string::npos) << r.out;
  // One line per step: step numbers 0..4 right-aligned at the start.
  for (int k = 0; k <= 4; ++k) EXPECT_NE(r.out.find("\n     " + std::to_string(k) + "  "), std::string::npos) << k;
}

TEST(Replay, StepsNeedLr) {
  const NdRun r = run_nd({"check", model("lr_unstable.pt"), "--input", model("lr_unstable.input.pt"), "--steps", "3"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE((r.err + r.out).find("--steps 3 needs --lr"), std::string::npos) << r.describe();
}

}  // namespace

}  // namespace nd_test_e2e_training_test
