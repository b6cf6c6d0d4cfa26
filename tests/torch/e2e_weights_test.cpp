// End to end: checkpoints (--weights), the timeline over several, the
// optimizer's saved state (--optimizer-state) and the norm-gain convention,
// on the fixtures of fixtures/make_checkpoints.py (fixtures/checkpoints/,
// its manifest.json holds what Python measured):
//
//   wrappers/mlp.pt + every container   the weights land in the module (param.absmax = Python's)
//   lm/arch.pt + lm/diverge/step_*.pt   SGD at lr 0.8: TL001 names the first non-finite checkpoint
//                                       and module, a TL00x first mover names the layer that grew first
//   lm/arch.pt + lm/healthy/step_*.pt   the same at lr 0.05: no timeline finding, no mover
//   lm/adam_lag + lm/adamw              ADAM001 on a lagging second moment; none on a fresh one
//   gain/{llama,gemma}.pt + gains_*     CKPT001/CKPT002 and their twins
// Bad checkpoints are in e2e_errors_test.cpp's error table (docs/bad-inputs.md).
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "e2e_util.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_e2e_weights_test {

namespace {

using namespace nde2e;

std::string ck(const std::string& f) { return source_dir() + "/fixtures/checkpoints/" + f; }

const json& ckmf() {
  static const json m = json::parse(read_file(ck("manifest.json")));
  return m;
}

std::vector<json> findings_of(const json& report, const std::string& rule) {
  std::vector<json> v;
  for (const auto& f : report.at("findings"))
    if (f.value("rule_id", "") == rule) v.push_back(f);
  return v;
}

const json& layer_metric(const json& report, const std::string& layer, const std::string& name) {
  static const json kNull;
  const json* l = find_layer(report, layer);
  if (!l || !l->at("metrics").contains(name)) {
    ADD_FAILURE() << layer << " has no metric " << name;
    return kNull;
  }
  return l->at("metrics").at(name);
}

NdRun mlp(const std::vector<std::string>& extra, const TempDir& tmp) {
  return check(ck("wrappers/mlp.pt"), {ck("wrappers/mlp.input.pt")}, extra, tmp.file("r.json"));
}

NdRun lm(const std::string& weights_glob, const std::vector<std::string>& extra, const TempDir& tmp) {
  std::vector<std::string> a{"--weights", weights_glob};
  a.insert(a.end(), extra.begin(), extra.end());
  return check(ck("lm/arch.pt"), {ck("lm/batch.pt")}, a, tmp.file("r.json"));
}

}  // namespace

// ---- --weights: every container, the same tensors in the module -------------

struct WrapperCase {
  const char* file;
  const char* container;  ///< part of probes.weights.measured.container
  const char* prefix;     ///< prefix stripped ("" none)
};

class Wrappers : public ::testing::TestWithParam<WrapperCase> {};

TEST_P(Wrappers, LoadIntoTheModule) {
  const WrapperCase& c = GetParam();
  TempDir tmp;
  const NdRun r = mlp({"--weights", ck(std::string("wrappers/") + c.file)}, tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report["status"], "ok") << r.describe();
  const json& w = r.report["probes"]["weights"]["measured"];
  EXPECT_EQ(w["loaded"], 6);
  EXPECT_EQ(w["module_tensors"], 6);
  EXPECT_NE(w["container"].get<std::string>().find(c.container), std::string::npos) << w["container"];
  if (*c.prefix) EXPECT_EQ(w["prefixes_stripped"][c.prefix], 6) << w.dump();
  else EXPECT_TRUE(w["prefixes_stripped"].empty()) << w.dump();
  EXPECT_TRUE(w["dtype_conversions"].empty());
  // The model file's own weights differ (another seed): these are the checkpoint's.
  EXPECT_TRUE(near_rel("fc1 param.absmax", as_number(layer_metric(r.report, "fc1", "param.absmax")),
                       ckmf()["wrappers_fc1_param_absmax"].get<double>(), 1e-6));
  EXPECT_TRUE(near_rel("norm param.absmax", as_number(layer_metric(r.report, "norm", "param.absmax")),
                       ckmf()["wrappers_norm_param_absmax"].get<double>(), 1e-6));
  EXPECT_EQ(r.report["model"]["weights"]["measured"], ck(std::string("wrappers/") + c.file));
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, Wrappers,
    ::testing::Values(WrapperCase{"state_dict.pt", "the file's root (a state_dict)", ""},
                      WrapperCase{"lightning.ckpt", "dict['state_dict'] (Lightning checkpoint)", "model."},
                      WrapperCase{"model_state_dict.pt", "dict['model_state_dict']", ""},
                      WrapperCase{"model_key.pt", "dict['model']", ""},
                      WrapperCase{"module_key.pt", "dict['module']", ""},
                      WrapperCase{"ddp.pt", "the file's root", "module."},
                      WrapperCase{"compiled.pt", "the file's root", "_orig_mod."},
                      WrapperCase{"pytorch_model.bin", "the file's root", ""},
                      WrapperCase{"model.safetensors", "safetensors", ""},
                      WrapperCase{"model.safetensors.index.json", "sharded (2 shard files)", ""}),
    [](const ::testing::TestParamInfo<WrapperCase>& i) {
      std::string n = i.param.file;
      for (auto& ch : n)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

TEST(Weights, DtypeConversionStated) {
  TempDir tmp;
  const NdRun r = mlp({"--weights", ck("wrappers/bf16.pt")}, tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report["status"], "ok") << r.describe();
  EXPECT_EQ(r.report["probes"]["weights"]["measured"]["dtype_conversions"]["BFloat16 -> Float"], 6);
  bool said = false;
  for (const auto& a : r.report["probes"]["assumptions"])
    said |= a.get<std::string>().find("6 tensors converted BFloat16 -> Float") != std::string::npos;
  EXPECT_TRUE(said) << r.report["probes"]["assumptions"].dump();
  EXPECT_TRUE(near_rel("fc1 param.absmax", as_number(layer_metric(r.report, "fc1", "param.absmax")),
                       ckmf()["wrappers_bf16_fc1_param_absmax"].get<double>(), 1e-6));
}

TEST(Weights, PartialLoadsWhatMatchesAndListsTheRest) {
  TempDir tmp;
  const NdRun r = mlp({"--weights", ck("wrappers/missing_key.pt"), "--weights-partial"}, tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report["status"], "ok") << r.describe();
  const json& w = r.report["probes"]["weights"]["measured"];
  EXPECT_EQ(w["loaded"], 5);
  EXPECT_EQ(w["missing"], json::array({"fc2.bias"}));
  const NdRun s = mlp({"--weights", ck("wrappers/wrong_shape.pt"), "--weights-partial"}, tmp);
  ASSERT_TRUE(s.has_report) << s.describe();
  const json& ws = s.report["probes"]["weights"]["measured"];
  EXPECT_EQ(ws["loaded"], 5);
  ASSERT_EQ(ws["mismatched"].size(), 1u);
  EXPECT_NE(ws["mismatched"][0].get<std::string>().find("size mismatch for fc2.weight"), std::string::npos);
}

TEST(Weights, PartialNeedsWeights) {
  TempDir tmp;
  const NdRun r = mlp({"--weights-partial"}, tmp);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("--weights-partial needs --weights"), std::string::npos) << r.describe();
}

// ---- the timeline -------------------------------------------------------------

TEST(Timeline, DivergingRunNamesTheFirstNonFiniteCheckpointAndTheFirstMover) {
  TempDir tmp;
  const NdRun r = lm(ck("lm/diverge/step_*.pt"), {}, tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report["status"], "ok") << r.describe();
  const json& tl = r.report["probes"]["timeline"];
  ASSERT_EQ(tl["checkpoints"].size(), 22u);
  EXPECT_EQ(tl["checkpoints"][0]["step"], 0);
  EXPECT_EQ(tl["checkpoints"][21]["step"], 105);  // sorted by step, not by name
  // Python: the state_dict at step 100 is the first with non-finite weights.
  const json& nf = tl["first_nonfinite"];
  EXPECT_EQ(nf["checkpoint"], ck("lm/diverge/step_0100.pt")) << nf.dump();
  EXPECT_EQ(nf["what"], "forward");
  EXPECT_EQ(nf["layer"], "wte") << nf.dump();
  const auto tl001 = findings_of(r.report, "TL001");
  ASSERT_EQ(tl001.size(), 1u) << r.out;
  EXPECT_EQ(tl001[0]["layer"], "wte");
  EXPECT_NE(tl001[0]["message"].get<std::string>().find("step_0100.pt (step 100)"), std::string::npos);
  EXPECT_NE(tl001[0]["message"].get<std::string>().find("step_0095.pt (step 95), ran finite"), std::string::npos);
  // The first mover, with its trajectory.
  ASSERT_TRUE(tl.contains("first_mover")) << tl.dump().substr(0, 2000);
  const json& fm = tl["first_mover"];
  // Python (fixtures/make_checkpoints.py's series): the gradient norm of the
  // first attention's query projection grows 32x by step 15, while the loss
  // has only begun to climb (0.73 at step 10, 1.71 at step 15).
  EXPECT_EQ(fm["layer"], "h.0.attn.q") << fm.dump();
  EXPECT_EQ(fm["metric"], "grad.param_norm") << fm.dump();
  EXPECT_EQ(fm["checkpoint"], ck("lm/diverge/step_0015.pt")) << fm.dump();
  EXPECT_TRUE(near_rel("mover ratio", as_number(fm["ratio"]), 31.69, 0.01));
  EXPECT_EQ(findings_of(r.report, "TL004").size(), 1u);
  EXPECT_GT(as_number(fm["z"]), 3.5);
  int movers = 0;
  for (const char* id : {"TL003", "TL004", "TL005", "TL006", "TL007"}) movers += static_cast<int>(findings_of(r.report, id).size());
  EXPECT_EQ(movers, 1);
  // Series: one value per checkpoint.
  EXPECT_EQ(tl["layers"]["h.0.attn"]["attn.logit_absmax"].size(), 22u);
  EXPECT_TRUE(tl["layers"]["h.0.attn.q"]["weight.rel_change"][0].is_null());
  EXPECT_GT(as_number(tl["layers"]["h.0.attn.q"]["weight.rel_change"][1]), 0.0);
  EXPECT_EQ(tl["loss"].size(), 22u);
  // The text report's table.
  TempDir t2;
  const NdRun txt = run_nd({"check", ck("lm/arch.pt"), "--input", ck("lm/batch.pt"), "--weights", ck("lm/diverge/step_*.pt")});
  EXPECT_NE(txt.out.find("timeline (22 checkpoints"), std::string::npos) << txt.out.substr(0, 3000);
  EXPECT_NE(txt.out.find("first non-finite: forward of"), std::string::npos);
}

TEST(Timeline, HealthyRunHasNoMover) {
  TempDir tmp;
  const NdRun r = lm(ck("lm/healthy/step_*.pt"), {}, tmp);
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report["status"], "ok") << r.describe();
  const json& tl = r.report["probes"]["timeline"];
  EXPECT_EQ(tl["checkpoints"].size(), 11u);
  EXPECT_FALSE(tl.contains("first_mover")) << tl["first_mover"].dump();
  EXPECT_FALSE(tl.contains("first_nonfinite"));
  for (const char* id : {"TL001", "TL002", "TL003", "TL004", "TL005", "TL006", "TL007"})
    EXPECT_TRUE(findings_of(r.report, id).empty()) << id;
}

// The same morning on an architecture of the corpus (torchvision's ViT,
// scripted by torchvision's code, not ours), with checkpoints that
// fixtures/make_checkpoints.py trained from its TorchScript file.
TEST(Timeline, CorpusArchitectureDivergingRun) {
  TempDir tmp;
  const std::string arch = real_models_dir() + "/tv_vit_tiny.pt", sample = real_models_dir() + "/tv_vit_tiny.input.pt";
  const NdRun r = check(arch, {sample}, {"--weights", ck("corpus/vit_diverge/step_*.pt")}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report["status"], "ok") << r.describe();
  const json& tl = r.report["probes"]["timeline"];
  const json& want = ckmf()["corpus"]["vit_diverge"]["checkpoints"];
  ASSERT_EQ(tl["checkpoints"].size(), want.size());
  // Python: the first checkpoint whose eval forward on the sample is
  // non-finite, and conv_proj (the first op) already non-finite there.
  size_t first_bad = want.size();
  for (size_t i = 0; i < want.size(); ++i)
    if (!want[i]["finite_eval_forward"].get<bool>()) {
      first_bad = i;
      break;
    }
  ASSERT_LT(first_bad, want.size());
  ASSERT_FALSE(want[first_bad]["conv_proj_finite"].get<bool>());
  const json& nf = tl["first_nonfinite"];
  EXPECT_EQ(nf["checkpoint"], ck(want[first_bad]["path"].get<std::string>().substr(std::string("checkpoints/").size())))
      << nf.dump();
  EXPECT_EQ(nf["what"], "forward");
  EXPECT_EQ(nf["layer"], "conv_proj");
  const auto tl001 = findings_of(r.report, "TL001");
  ASSERT_EQ(tl001.size(), 1u) << r.out;
  EXPECT_EQ(tl001[0]["layer"], "conv_proj");
  // Each finite checkpoint's series value equals Python's recomputation of
  // encoder_layer_1.mlp's output (the ViT forward written out with the
  // scripted submodules).
  const json& series = tl["layers"]["encoder.layers.encoder_layer_1.mlp"]["act.absmax"];
  ASSERT_EQ(series.size(), want.size());
  for (size_t i = 0; i < first_bad; ++i)
    EXPECT_TRUE(near_rel("encoder_layer_1.mlp act.absmax", as_number(series[i]),
                         want[i]["encoder_layer_1_mlp_absmax"].get<double>(), 1e-4))
        << want[i]["path"];
  // The first mover moved before the forward broke, and its trajectory is shown.
  ASSERT_TRUE(tl.contains("first_mover")) << tl.dump().substr(0, 2000);
  const json& fm = tl["first_mover"];
  EXPECT_LT(fm["index"].get<size_t>(), first_bad) << fm.dump();
  EXPECT_GT(as_number(fm["z"]), 3.5);
  // encoder_layer_0's attention output is already 27.7x its first value at
  // the second checkpoint and keeps growing: it moved before encoder_layer_1's
  // MLP, which the early-range test alone would name at the fourth (eval30).
  EXPECT_EQ(fm["index"].get<size_t>(), 1u) << fm.dump();
  // Its dropout carries the same values; the module that runs first is named.
  EXPECT_EQ(fm["layer"], "encoder.layers.encoder_layer_0.self_attention") << fm.dump();
  EXPECT_EQ(fm["early"], "its value at the first checkpoint (it grew from the start)");
  int movers = 0;
  for (const char* id : {"TL003", "TL004", "TL005", "TL006", "TL007"}) movers += static_cast<int>(findings_of(r.report, id).size());
  EXPECT_EQ(movers, 1);
  for (const auto& f : r.report["findings"])
    if (f.value("rule_id", "").rfind("TL00", 0) == 0 && f.value("rule_id", "") != "TL001") {
      EXPECT_NE(f["message"].get<std::string>().find("trajectory"), std::string::npos) << f["message"];
    }
}

TEST(Timeline, CorpusArchitectureHealthyRunHasNoMover) {
  TempDir tmp;
  const NdRun r = check(real_models_dir() + "/tv_vit_tiny.pt", {real_models_dir() + "/tv_vit_tiny.input.pt"},
                        {"--weights", ck("corpus/vit_healthy/step_*.pt")}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report["status"], "ok") << r.describe();
  const json& tl = r.report["probes"]["timeline"];
  EXPECT_EQ(tl["checkpoints"].size(), ckmf()["corpus"]["vit_healthy"]["checkpoints"].size());
  EXPECT_FALSE(tl.contains("first_mover")) << tl["first_mover"].dump();
  EXPECT_FALSE(tl.contains("first_nonfinite"));
  for (const char* id : {"TL001", "TL002", "TL003", "TL004", "TL005", "TL006", "TL007"})
    EXPECT_TRUE(findings_of(r.report, id).empty()) << id;
}

TEST(Timeline, OrderGivenWhenNamesHaveNoStep) {
  TempDir tmp;
  // Two copies without a step in their names: kept in the order given.
  fs::copy_file(ck("lm/healthy/step_0100.pt"), tmp.file("late.pt"));
  fs::copy_file(ck("lm/healthy/step_0000.pt"), tmp.file("early.pt"));
  const NdRun r = check(ck("lm/arch.pt"), {ck("lm/batch.pt")},
                        {"--weights", tmp.file("late.pt"), "--weights", tmp.file("early.pt")}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  const json& cks = r.report["probes"]["timeline"]["checkpoints"];
  ASSERT_EQ(cks.size(), 2u);
  EXPECT_EQ(cks[0]["path"], tmp.file("late.pt"));
  EXPECT_TRUE(cks[0]["step"].is_null());
  EXPECT_EQ(r.report["model"]["weights"]["measured"], tmp.file("early.pt"));
}

// ---- --optimizer-state ----------------------------------------------------------

TEST(OptimizerState, LaggingSecondMomentFires) {
  TempDir tmp;
  const NdRun r = check(ck("lm/arch.pt"), {ck("lm/batch.pt")},
                        {"--weights", ck("lm/adam_lag/weights.pt"), "--optimizer-state", ck("lm/adam_lag/optim.pt")},
                        tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report["status"], "ok") << r.describe();
  EXPECT_EQ(r.report["probes"]["optimizer_state"]["kind"], "adam");
  EXPECT_EQ(r.report["probes"]["optimizer_state"]["decoupled_weight_decay"], true);
  EXPECT_EQ(r.report["probes"]["update"]["optimizer"], "adamw");
  EXPECT_EQ(r.report["probes"]["model_metrics"]["adam.loss_is_training_loss"], true);
  const auto f = findings_of(r.report, "ADAM001");
  ASSERT_FALSE(f.empty()) << r.out;
  // beta2 0.95 bounds g^2 / v_hat by 1 / (1 - 0.95) = 20 for a second moment
  // that is far too small: RMS ~ sqrt(20) = 4.47.
  EXPECT_GT(as_number(f[0]["evidence"]["adam.rms_ratio_max"]), 4.0);
  EXPECT_EQ(f[0]["evidence"]["adam.step"], 5000.0);
}

TEST(OptimizerState, FreshSecondMomentIsQuiet) {
  TempDir tmp;
  const NdRun r = check(ck("lm/arch.pt"), {ck("lm/batch.pt")},
                        {"--weights", ck("lm/adamw/weights.pt"), "--optimizer-state", ck("lm/adamw/optim.pt"), "--steps", "2"},
                        tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report["status"], "ok") << r.describe();
  EXPECT_TRUE(findings_of(r.report, "ADAM001").empty()) << r.out;
  EXPECT_TRUE(findings_of(r.report, "ADAM002").empty());
  EXPECT_LT(as_number(r.report["probes"]["model_metrics"]["adam.rms_ratio_model_max"]), 3.0);
  // The replay starts from the saved state, at the saved lr.
  EXPECT_EQ(r.report["probes"]["replay"]["lr"], 1e-3);
  EXPECT_EQ(r.report["probes"]["replay"]["steps_run"], 2);
  EXPECT_NE(r.report["probes"]["replay"]["start"].get<std::string>().find("optim.pt"), std::string::npos);
}

// ---- norm-gain-convention -------------------------------------------------------

struct GainCase {
  const char* model;
  const char* gains;
  const char* rule;  ///< "" = no CKPT finding
  const char* formula;
};

class GainConvention : public ::testing::TestWithParam<GainCase> {};

TEST_P(GainConvention, ByWhatTheModuleComputes) {
  const GainCase& c = GetParam();
  TempDir tmp;
  const NdRun r = check(ck(std::string("gain/") + c.model), {ck("gain/batch.pt")},
                        {"--weights", ck(std::string("gain/") + c.gains)}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report["status"], "ok") << r.describe();
  EXPECT_EQ(layer_metric(r.report, "norm", "norm.gain_formula"), c.formula);
  const auto f1 = findings_of(r.report, "CKPT001"), f2 = findings_of(r.report, "CKPT002");
  if (std::string(c.rule).empty()) {
    EXPECT_TRUE(f1.empty() && f2.empty()) << r.out;
  } else {
    const auto& f = std::string(c.rule) == "CKPT001" ? f1 : f2;
    ASSERT_EQ(f.size(), 1u) << r.out;
    EXPECT_EQ(f[0]["layer"], "norm");
    const std::string key = std::string(c.gains) == "gains_near0.pt" ? "near0_mean" : "near1_mean";
    EXPECT_TRUE(near_rel("gain mean", as_number(f[0]["evidence"]["norm.gain_loaded_mean"]),
                         ckmf()["gain"][key].get<double>(), 1e-6));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GainConvention,
                         ::testing::Values(GainCase{"llama.pt", "gains_near0.pt", "CKPT001", "weight"},
                                           GainCase{"llama.pt", "gains_near1.pt", "", "weight"},
                                           GainCase{"gemma.pt", "gains_near1.pt", "CKPT002", "1 + weight"},
                                           GainCase{"gemma.pt", "gains_near0.pt", "", "1 + weight"}),
                         [](const ::testing::TestParamInfo<GainCase>& i) {
                           std::string n = std::string(i.param.model) + "_" + i.param.gains;
                           for (auto& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace nd_test_e2e_weights_test
