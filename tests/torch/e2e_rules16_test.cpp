// End to end: issue 16's rules on fixtures in the style of real code
// (fixtures/make_fixtures_rules.py, fixtures/models/rules/manifest.json).
// Every fixture produces exactly the findings its manifest entry lists (rule
// id and layer), its healthy twin none beyond them, and the evidence numbers
// match what Python measured.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "e2e_util.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_e2e_rules16_test {

namespace {

using nde2e::json;

std::string rules_model(const std::string& name) { return nde2e::source_dir() + "/fixtures/models/rules/" + name; }

const json& manifest16() {
  static const json m = json::parse(nde2e::read_file(rules_model("manifest.json")));
  return m;
}

json run16(const std::string& name, std::vector<std::string> extra = {}) {
  nde2e::TempDir tmp;
  std::vector<std::string> args = {"check", rules_model(name + ".pt"), "--input", rules_model(name + ".input.pt")};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = nde2e::run_nd(args, tmp.file("report.json"));
  EXPECT_TRUE(r.has_report) << r.describe();
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe();
  return r.has_report ? r.report : json::object();
}

const json* finding(const json& rep, const std::string& id) {
  for (const auto& f : rep.at("findings"))
    if (f.at("rule_id") == id) return &f;
  return nullptr;
}

const json& layer_metrics(const json& rep, const std::string& path) {
  static const json empty = json::object();
  const json* l = nde2e::find_layer(rep, path);
  return l ? l->at("metrics") : empty;
}

double num(const json& v) { return v.get<double>(); }

class Rules16 : public ::testing::TestWithParam<std::string> {};

TEST_P(Rules16, FindingsAreExactlyTheManifests) {
  const std::string name = GetParam();
  const json& e = manifest16().at(name);
  const json rep = run16(name);
  ASSERT_EQ(rep.value("status", ""), "ok");
  std::set<std::pair<std::string, std::string>> want;
  for (const auto& f : e.at("findings")) want.insert({f[0].get<std::string>(), f[1].is_null() ? "" : f[1].get<std::string>()});
  EXPECT_EQ(nde2e::finding_pairs(rep), want) << e.at("description") << "\n" << rep.at("findings").dump(2);
}

INSTANTIATE_TEST_SUITE_P(E2E, Rules16, ::testing::ValuesIn([] {
                           std::vector<std::string> v;
                           for (const auto& [k, _] : manifest16().items()) v.push_back(k);
                           return v;
                         }()),
                         [](const auto& info) { return info.param; });

// ---- 16.6 deliberate zero initialization --------------------------------------

TEST(Rules16Evidence, ZeroInitResidualIsOneInfoFinding) {
  const json& n = manifest16().at("resnet_zero_init").at("numbers");
  const json rep = run16("resnet_zero_init");
  const json* f = finding(rep, "GRAD005");
  ASSERT_NE(f, nullptr) << rep.at("findings").dump(2);
  EXPECT_EQ(f->at("severity"), "info");
  const json& ev = f->at("evidence");
  EXPECT_EQ(ev.at("grad.zero_init_params"), n.at("zero_init_params").size());
  EXPECT_EQ(ev.at("grad.zero_init_on_residual"), n.at("zero_init_params").size());
  EXPECT_EQ(ev.at("grad.zero_init_to_output"), 0);
  EXPECT_EQ(ev.at("grad.silenced_params"), n.at("silenced_params").size());
  EXPECT_EQ(ev.at("grad.blocked_layers"), n.at("silenced_layers").size());
  EXPECT_EQ(ev.at("grad.zero_init_names").get<std::string>().rfind("layer1.0.bn3.weight, layer1.1.bn3.weight", 0), 0u);
  EXPECT_EQ(layer_metrics(rep, "layer1.0.conv2").at("grad.params_silenced"), 1);
  EXPECT_EQ(layer_metrics(rep, "layer1.0.conv2").at("grad.params_no_signal"), 0);
}

TEST(Rules16Evidence, DetachedStemStillWarnsNextToTheConvention) {
  const json& n = manifest16().at("resnet_zero_init_detached_stem").at("numbers");
  const json rep = run16("resnet_zero_init_detached_stem");
  ASSERT_EQ(n.at("no_grad_params").size(), 3u);  // conv1.weight, bn1.weight, bn1.bias
  const json& conv1 = layer_metrics(rep, "conv1");
  EXPECT_EQ(conv1.at("grad.params_without_grad"), 1);
  EXPECT_EQ(conv1.at("grad.params_no_signal"), 1);
  EXPECT_EQ(layer_metrics(rep, "bn1").at("grad.params_no_signal"), 2);
  const json* f = finding(rep, "GRAD005");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->at("evidence").at("grad.silenced_params"), n.at("silenced_params").size());
}

TEST(Rules16Evidence, VitZeroHeadSilencesEverythingBeforeIt) {
  const json& n = manifest16().at("vit_zero_head").at("numbers");
  const json rep = run16("vit_zero_head");
  const json* f = finding(rep, "GRAD005");
  ASSERT_NE(f, nullptr) << rep.at("findings").dump(2);
  const json& ev = f->at("evidence");
  EXPECT_EQ(ev.at("grad.zero_init_names"), "heads.head.weight");
  EXPECT_EQ(ev.at("grad.zero_init_to_output"), 1);
  // The manifest's zero-gradient list comes from a squared-output loss, under
  // which the zero head's own parameters get zero gradient too; normdoctor's
  // cross-entropy gives heads.head a gradient, so everything before it is silenced.
  size_t before_head = 0;
  for (const auto& p : n.at("zero_grad_params"))
    if (p.get<std::string>().rfind("heads.head.", 0) != 0) ++before_head;
  EXPECT_EQ(before_head, 30u);
  EXPECT_EQ(ev.at("grad.silenced_params"), before_head);
}

// ---- 16.4 mode flags of every submodule -----------------------------------------

TEST(Rules16Evidence, FrozenBackboneBatchNormInTrainMode) {
  const json& n = manifest16().at("frozen_backbone_bn_train").at("numbers");
  const json rep = run16("frozen_backbone_bn_train");
  const json* f = finding(rep, "MODE005");
  ASSERT_NE(f, nullptr) << rep.at("findings").dump(2);
  const json& ev = f->at("evidence");
  EXPECT_EQ(ev.at("mode.submodules_in_training"), n.at("modules_in_training").size());
  EXPECT_EQ(ev.at("mode.frozen_submodules_in_training"), n.at("frozen_bn").size());
  EXPECT_EQ(ev.at("mode.submodules_in_training_names"), "backbone.stem.1, backbone.stage1.1, backbone.stage2.1");
  EXPECT_EQ(ev.at("mode.saved_training"), false);
}

TEST(Rules16Evidence, TracedFrozenBackboneNamesTheBakedModules) {
  const json rep = run16("frozen_backbone_bn_train_traced");
  const json* f = finding(rep, "MODE002");
  ASSERT_NE(f, nullptr) << rep.at("findings").dump(2);
  EXPECT_EQ(f->at("evidence").at("mode.baked_training_true_modules"),
            "backbone.stem.1, backbone.stage1.1, backbone.stage2.1");
  EXPECT_EQ(rep.at("probes").at("model_metrics").at("mode.submodules_in_training"), 0);
}

// ---- 16.7 / 16.8 running statistics ----------------------------------------------

TEST(Rules16Evidence, ShiftedCalibrationJudgedTogether) {
  const json& n = manifest16().at("bn_shifted_calibration").at("numbers");
  const json rep = run16("bn_shifted_calibration");
  const json* f = finding(rep, "BN009");
  ASSERT_NE(f, nullptr) << rep.at("findings").dump(2);
  const json& ev = f->at("evidence");
  const json& py = n.at("bn").at("features.1");
  EXPECT_NEAR(num(ev.at("bn.mean_z")), num(py.at("mean_z")), 1e-3 * num(py.at("mean_z")) + 1e-6);
  EXPECT_NEAR(num(ev.at("bn.var_ratio")), num(py.at("var_ratio")), 1e-3 * num(py.at("var_ratio")));
  EXPECT_NEAR(num(ev.at("bn.eval_error")), num(py.at("eval_error")), 1e-3 * num(py.at("eval_error")));
  EXPECT_NEAR(num(ev.at("bn.eval_error_floor")), num(py.at("eval_error_floor")), 1e-3 * num(py.at("eval_error_floor")));
  EXPECT_NEAR(num(ev.at("drift.rel_output_diff")), num(n.at("drift")), 1e-3 * num(n.at("drift")));
  EXPECT_EQ(ev.at("drift.first_layer"), n.at("drift_first_layer"));
  EXPECT_LE(num(ev.at("bn.mean_z")), 1.0);
  // The drift it causes stays below BN004's 0.5 (BN009's message names it).
  EXPECT_EQ(finding(rep, "BN004"), nullptr);
}

// Partly estimated statistics: BN003 names the variance and the drift it
// causes, where the drift starts (one cause, one finding: no BN004 beside it).
TEST(Rules16Evidence, PartlyCalibratedNamesTheDrift) {
  const json& n = manifest16().at("bn_partly_calibrated").at("numbers");
  const json rep = run16("bn_partly_calibrated");
  const json* f = finding(rep, "BN003");
  ASSERT_NE(f, nullptr) << rep.at("findings").dump(2);
  const json& ev = f->at("evidence");
  EXPECT_NEAR(num(ev.at("bn.var_ratio")), num(n.at("bn").at("features.4").at("var_ratio")),
              1e-3 * num(n.at("bn").at("features.4").at("var_ratio")));
  EXPECT_NEAR(num(ev.at("drift.rel_output_diff")), num(n.at("drift")), 1e-3 * num(n.at("drift")));
  EXPECT_EQ(rep.at("probes").at("model_metrics").at("drift.explained_by_stale_stats"), true);
  const std::string first = n.at("drift_first_layer").get<std::string>();
  EXPECT_NE(f->at("message").get<std::string>().find("first at " + first), std::string::npos) << f->at("message");
  EXPECT_EQ(finding(rep, "BN004"), nullptr) << rep.at("findings").dump(2);
}

TEST(Rules16Evidence, SmallBatchNoiseIsInfoWithoutTrainBatchSize) {
  // The shipped bn_small_batch fixture (2 examples): info without the flag, warning with it.
  nde2e::TempDir tmp;
  const auto a = nde2e::run_nd({"check", nde2e::model("bn_small_batch.pt"), "--input", nde2e::model("bn_small_batch.input.pt")},
                               tmp.file("a.json"));
  ASSERT_TRUE(a.has_report) << a.describe();
  const json* info = finding(a.report, "BN008");
  ASSERT_NE(info, nullptr) << a.report.at("findings").dump(2);
  EXPECT_EQ(info->at("severity"), "info");
  EXPECT_NE(info->at("message").get<std::string>().find("--train-batch-size"), std::string::npos);
  EXPECT_EQ(finding(a.report, "BN007"), nullptr);
  const auto b = nde2e::run_nd({"check", nde2e::model("bn_small_batch.pt"), "--input", nde2e::model("bn_small_batch.input.pt"),
                                "--train-batch-size", "2"},
                               tmp.file("b.json"));
  ASSERT_TRUE(b.has_report) << b.describe();
  ASSERT_NE(finding(b.report, "BN007"), nullptr) << b.report.at("findings").dump(2);
  EXPECT_EQ(finding(b.report, "BN008"), nullptr);
}

// ---- 16.9 scale-invariant gradient verdicts ---------------------------------------

TEST(Rules16Evidence, RawSensorFramesAreNotVanishingGradients) {
  const json& n = manifest16().at("raw_sensor_cnn").at("numbers");
  const json rep = run16("raw_sensor_cnn");
  const json& mm = rep.at("probes").at("model_metrics");
  // The raw output-gradient ratio is far below 1e-3 (the old verdict), the
  // gradient-to-weight ratio is not.
  EXPECT_LT(num(mm.at("grad.input_output_ratio")), 1e-3);
  EXPECT_GT(num(mm.at("grad.rel_ratio")), 1e-2);
  EXPECT_EQ(mm.at("grad.rel_first_layer"), "features.0");
  EXPECT_EQ(mm.at("grad.rel_last_layer"), "fc");
  // Loss differs from Python's (random labels); the weight-relative ratio agrees in order of magnitude.
  const double py = num(n.at("grad_to_weight_ratio"));
  EXPECT_GT(num(mm.at("grad.rel_ratio")), py / 10);
  EXPECT_LT(num(mm.at("grad.rel_ratio")), py * 10);
  EXPECT_EQ(finding(rep, "GRAD003"), nullptr);
}

// ---- 16.12 new failure modes ---------------------------------------------------------

TEST(Rules16Evidence, GroupNormAfterGlobalPooling) {
  const json rep = run16("gn_after_pool");
  const json* f = finding(rep, "NORM002");
  ASSERT_NE(f, nullptr) << rep.at("findings").dump(2);
  EXPECT_EQ(f->at("evidence").at("norm.values_per_group"), 1);
  EXPECT_EQ(f->at("evidence").at("norm.groups_per_pass"), 4 * 16);
  EXPECT_EQ(f->at("evidence").at("norm.input_shape"), "[4, 16, 1, 1]");
  const json twin = run16("gn_before_pool");
  EXPECT_EQ(layer_metrics(twin, "head_norm").at("norm.values_per_group"),
            manifest16().at("gn_before_pool").at("numbers").at("values_per_group"));
}

TEST(Rules16Evidence, DeadReluUnits) {
  const json& n = manifest16().at("mlp_dead_relu").at("numbers").at("act1");
  const json rep = run16("mlp_dead_relu");
  const json* f = finding(rep, "ACT006");
  ASSERT_NE(f, nullptr) << rep.at("findings").dump(2);
  EXPECT_EQ(f->at("evidence").at("dead.count"), n.at("dead"));
  EXPECT_EQ(f->at("evidence").at("dead.units"), n.at("units"));
  EXPECT_EQ(f->at("evidence").at("dead.examples"), n.at("examples"));
  const json twin = run16("mlp_relu");
  EXPECT_EQ(layer_metrics(twin, "act2").at("dead.count"), manifest16().at("mlp_relu").at("numbers").at("act2").at("dead"));
}

TEST(Rules16Evidence, MassiveChannelInTheResidualStream) {
  const json& n = manifest16().at("lm_massive_channel").at("numbers").at("block_output").at("blocks.0");
  const json rep = run16("lm_massive_channel");
  const json* f = finding(rep, "ACT007");
  ASSERT_NE(f, nullptr) << rep.at("findings").dump(2);
  const json& ev = f->at("evidence");
  EXPECT_EQ(ev.at("outlier.channel"), n.at("channel"));
  EXPECT_NEAR(num(ev.at("outlier.channel_absmax")), num(n.at("channel_absmax")), 0.02 * num(n.at("channel_absmax")));
  EXPECT_EQ(ev.at("outlier.channels"), 32);
  EXPECT_GT(num(ev.at("outlier.ratio")), 100);
  // The channel is the embedding's: already 100 in the stream entering
  // blocks.0, which the message says (eval36 C03: a BOS massive activation
  // planted in embed_tokens was placed after layers.0 with no source).
  const json& m = layer_metrics(rep, "blocks.0");
  EXPECT_EQ(m.at("outlier.in_stream_before"), true);
  EXPECT_EQ(m.at("outlier.in_stream_writer"), "embed");
  EXPECT_NE(f->at("message").get<std::string>().find("in the stream entering blocks.0, as written by embed"), std::string::npos)
      << f->at("message");
}

TEST(Rules16Evidence, OutputLogitDivergence) {
  const json& n = manifest16().at("classifier_logit_divergence").at("numbers");
  const json rep = run16("classifier_logit_divergence");
  const json* f = finding(rep, "ACT008");
  ASSERT_NE(f, nullptr) << rep.at("findings").dump(2);
  const json& ev = f->at("evidence");
  EXPECT_NEAR(num(ev.at("logits.logz_abs_mean")), num(n.at("logz_abs_mean")), 1e-3 * num(n.at("logz_abs_mean")));
  EXPECT_NEAR(num(ev.at("logits.logz_abs_max")), num(n.at("logz_abs_max")), 1e-3 * num(n.at("logz_abs_max")));
  EXPECT_NEAR(num(ev.at("logits.absmax")), num(n.at("logits_absmax")), 1e-3 * num(n.at("logits_absmax")));
  EXPECT_EQ(ev.at("logits.classes"), 100);
  const json twin = run16("classifier_logits");
  const json& mm = twin.at("probes").at("model_metrics");
  EXPECT_NEAR(num(mm.at("logits.logz_mean")), num(manifest16().at("classifier_logits").at("numbers").at("logz_mean")), 1e-3 * 5);
}

}  // namespace

}  // namespace nd_test_e2e_rules16_test
