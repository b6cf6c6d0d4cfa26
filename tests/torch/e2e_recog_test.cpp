// End to end: recognition by what the ops compute (issue 16 items 1, 2, 3,
// 5, 10; issue 15 item 5) on fixtures written the way public model code is
// written (fixtures/make_fixtures_recog.py, fixtures/models/recog/manifest.json),
// each fault with a healthy twin, and on the real models in
// corpus/ (the project's real-model corpus).
#include <gtest/gtest.h>

#include <iostream>

#include <cmath>
#include <filesystem>
#include <set>

#include "torch_version.h"

#include "e2e_util.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_e2e_recog_test {

namespace {

using nde2e::json;

const json& rmanifest() {
  static const json m =
      json::parse(nde2e::read_file(nde2e::source_dir() + "/fixtures/models/recog/manifest.json"));
  return m;
}
const json& rmf(const std::string& name) { return rmanifest().at(name); }

std::string recog_model(const std::string& name) { return nde2e::source_dir() + "/fixtures/models/recog/" + name; }

json run(const std::string& name, const std::vector<std::string>& extra = {}) {
  nde2e::TempDir tmp;
  std::vector<std::string> args = {"check", recog_model(name + ".pt"), "--input", recog_model(name + ".input.pt")};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = nde2e::run_nd(args, tmp.file("report.json"));
#if TORCH_VERSION_MAJOR < 2
  // Fixtures calling 2.x operators (aten::rms_norm, nn.RMSNorm since 2.4)
  // cannot run on LibTorch 1.x: the callers skip them with this reason.
  if (r.exit_code == 3 && r.has_report && r.report.contains("error") &&
      r.report["error"].value("kind", "") == "missing_operator")
    return json::object({{"status", "unrunnable_on_1x"}, {"reason", r.report["error"].value("message", "")},
                         {"findings", json::array()}, {"layers", json::array()}});
#endif
  EXPECT_TRUE(r.has_report) << r.describe();
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe();
  return r.has_report ? r.report : json::object({{"findings", json::array()}, {"layers", json::array()}});
}

const json& mm(const json& rep) { return rep.at("probes").at("model_metrics"); }

const json& lm(const json& rep, const std::string& path) {
  const json* l = nde2e::find_layer(rep, path);
  static const json kEmpty = json::object();
  EXPECT_NE(l, nullptr) << path;
  return l ? l->at("metrics") : kEmpty;
}

/// The --precision a fixture (or its fault twin) is checked in.
std::vector<std::string> flags_for(const std::string& name) {
  const json& e = rmf(name);
  std::string fault = name;
  if (e.contains("twin_of") && e["twin_of"].is_string()) fault = e["twin_of"].get<std::string>();
  for (const auto& f : rmf(fault).at("faults"))
    if (f.contains("precision")) return {"--precision", f["precision"].get<std::string>()};
  return {};
}

std::set<std::string> rule_ids(const json& rep) {
  std::set<std::string> s;
  for (const auto& f : rep.at("findings")) s.insert(f.at("rule_id").get<std::string>());
  return s;
}

class Recog : public ::testing::TestWithParam<std::string> {};

// Every fault fixture gives its finding at the manifest's layer; its healthy
// twin gives none of the fault's rules.
TEST_P(Recog, FaultFoundAndTwinClean) {
  const std::string name = GetParam();
  const json& e = rmf(name);
  const json rep = run(name, flags_for(name));
  if (rep.value("status", "") == "unrunnable_on_1x") GTEST_SKIP() << rep.value("reason", "");
  ASSERT_EQ(rep.value("status", ""), "ok") << rep.dump(1).substr(0, 2000);
  const auto got = nde2e::finding_pairs(rep);
  for (const auto& f : e.at("faults"))
    EXPECT_TRUE(got.count({f.at("rule").get<std::string>(), f.at("layer").get<std::string>()}))
        << name << ": no " << f.at("rule") << " at '" << f.at("layer").get<std::string>() << "'\n"
        << rep.at("findings").dump(1);
  if (e.contains("twin") && e["twin"].is_string()) {
    const std::string twin = e["twin"].get<std::string>();
    const json trep = run(twin, flags_for(twin));
    const auto trules = rule_ids(trep);
    for (const auto& f : e.at("faults"))
      EXPECT_FALSE(trules.count(f.at("rule").get<std::string>()))
          << twin << " (healthy twin of " << name << ") has " << f.at("rule") << "\n" << trep.at("findings").dump(1);
  }
}

std::vector<std::string> fault_fixtures() {
  std::vector<std::string> v;
  for (const auto& [k, e] : rmanifest().items())
    if (!e.at("faults").empty()) v.push_back(k);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Recog, ::testing::ValuesIn(fault_fixtures()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// ---- 16.1: normalizations written out by hand ------------------------------

TEST(RecogNorms, LayerNormWrittenOutOverTime) {
  for (const std::string name : {"ln_time_written", "ln_time_written_healthy"}) {
    SCOPED_TRACE(name);
    const json rep = run(name);
    const json& m = lm(rep, "norm");
    EXPECT_EQ(m.at("norm.op"), "layer_norm_pattern");
    EXPECT_EQ(m.at("norm.statistic"), "std");
    EXPECT_EQ(m.at("norm.centered"), true);
    EXPECT_DOUBLE_EQ(m.at("norm.eps").get<double>(), rmf(name).at("numbers").at("eps").get<double>());
    EXPECT_EQ(m.at("norm.reduced_axes"), rmf(name).at("numbers").at("reduced"));
    EXPECT_EQ(m.at("norm.input_layout"), "[batch, time, hidden]");
    EXPECT_EQ(m.at("norm.computing_dtype"), "float32");
  }
}

TEST(RecogNorms, WholeBatchStandardization) {
  const json rep = run("standardize_batch");
  const json& m = lm(rep, "");
  EXPECT_EQ(m.at("norm.op"), "layer_norm_pattern");
  EXPECT_EQ(m.at("norm.reduced_axes"), rmf("standardize_batch").at("numbers").at("reduced"));
  EXPECT_EQ(m.at("norm.over_batch"), true);
  const json rep2 = run("standardize_batch_healthy");
  EXPECT_EQ(lm(rep2, "").at("norm.reduced_axes"), rmf("standardize_batch_healthy").at("numbers").at("reduced"));
  EXPECT_EQ(lm(rep2, "").at("norm.over_batch"), false);
}

TEST(RecogNorms, GroupNormWrittenWithView) {
  for (const std::string name : {"gn_view_instance", "gn_view_healthy", "gn_view_straddle"}) {
    SCOPED_TRACE(name);
    const json& want = rmf(name).at("numbers");
    const json rep = run(name);
    const json& m = lm(rep, "norm1");
    EXPECT_EQ(m.at("norm.op"), "group_norm_pattern");
    EXPECT_EQ(m.at("norm.num_groups"), want.at("num_groups"));
    EXPECT_EQ(m.at("norm.num_channels"), want.at("num_channels"));
    EXPECT_DOUBLE_EQ(m.at("norm.channels_per_group").get<double>(),
                     want.at("num_channels").get<double>() / want.at("num_groups").get<double>());
    EXPECT_EQ(m.at("norm.groups_straddle_channels"), want.at("straddle"));
    EXPECT_EQ(m.at("norm.input_layout"), "[batch, channel, spatial, spatial]");
    // One channel per group: the group is that channel's spatial extent.
    const bool one = want.at("num_channels") == want.at("num_groups");
    const std::string first = want.at("straddle").get<bool>() ? "channel (groups straddle channels), " : one ? "" : "channel (within a group), ";
    EXPECT_EQ(m.at("norm.reduced_axes"), first + "spatial, spatial");
    EXPECT_EQ(m.at("norm.over_batch"), false);
  }
}

TEST(RecogNorms, FrozenBatchNormRunningStatistics) {
  const json rep = run("frozen_bn_init");
  for (const std::string l : {"bn1", "bn2"}) {
    const json& m = lm(rep, l);
    EXPECT_EQ(m.at("norm.op"), "frozen_batch_norm") << l;
    EXPECT_EQ(m.at("bn.frozen"), true);
    EXPECT_EQ(m.at("bn.at_initial_values"), true);
    EXPECT_FALSE(m.contains("bn.mean_noise")) << "a frozen BatchNorm uses no batch statistics";
    EXPECT_EQ(m.at("bn.channels"), 16);
  }
  EXPECT_EQ(mm(rep).at("bn.layers_at_init"), 2);
  EXPECT_EQ(mm(rep).at("bn.first_layer_at_init"), "bn1");
  const json rep2 = run("frozen_bn_healthy");
  EXPECT_EQ(lm(rep2, "bn1").at("bn.at_initial_values"), false);
  EXPECT_LT(lm(rep2, "bn1").at("bn.mean_z").get<double>(), 1.0);
  EXPECT_EQ(mm(rep2).at("bn.layers_at_init"), 0);
}

// torchvision's FrozenBatchNorm2d with eps 0 (before 0.8) over a channel whose
// running_var is 0: ACT001 at that norm, its NaN count the channel's values,
// and the cause in the message; with eps 1e-5 the same checkpoint is clean.
TEST(RecogNorms, FrozenBatchNormEpsZeroOverADeadChannel) {
  const json& want = rmf("frozen_bn_eps0").at("numbers");
  const json rep = run("frozen_bn_eps0");
  const json* act = nullptr;
  for (const auto& f : rep.at("findings"))
    if (f.at("rule_id") == "ACT001") act = &f;
  ASSERT_NE(act, nullptr) << rep.at("findings").dump(1);
  EXPECT_EQ(act->at("layer"), want.at("layer"));
  EXPECT_EQ(act->at("evidence").at("act.nan_count"), want.at("nan_count"));
  EXPECT_EQ(act->at("evidence").at("norm.eps"), 0.0);
  EXPECT_NE(act->at("message").get<std::string>().find("running_var + eps is 0 or below in 1 of 16 channels (eps 0)"),
            std::string::npos)
      << act->at("message");
  const json twin = run("frozen_bn_eps0_healthy");
  for (const auto& f : twin.at("findings")) EXPECT_EQ(f.at("severity"), "info") << f.dump();
  EXPECT_FALSE(lm(twin, "bn2").contains("fwd.cause_note"));
}

TEST(RecogNorms, LayerNormShapeComputedAtRunTime) {
  for (const std::string name : {"ln_runtime_shape", "ln_runtime_shape_scripted", "ln_runtime_shape_healthy"}) {
    SCOPED_TRACE(name);
    const json& want = rmf(name).at("numbers");
    const json rep = run(name);
    EXPECT_EQ(lm(rep, "ln").at("norm.reduced_axes"), want.at("reduced"));
    bool row = false;
    for (const auto& r : rep.at("probes").at("axes"))
      if (r.at("layer") == "ln") {
        row = true;
        EXPECT_EQ(r.at("normalized_shape_at_run_time"), want.at("normalized_shape"));
      }
    EXPECT_TRUE(row);
  }
}

TEST(RecogNorms, RMSNormSpellings) {
  for (const std::string name : {"rms_time_written", "rms_time_written_healthy", "rms_norm_spelling", "rms_aten_time",
                                 "rms_aten_healthy"}) {
    SCOPED_TRACE(name);
    const json rep = run(name);
    if (rep.value("status", "") == "unrunnable_on_1x") {
      std::cout << "skipped on LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << ": " << name << ": "
                << rep.value("reason", "") << "\n";
      continue;
    }
    const json& m = lm(rep, "norm");
    EXPECT_EQ(m.at("norm.reduced_axes"), rmf(name).at("numbers").at("reduced"));
    EXPECT_EQ(m.at("norm.input_layout"), "[batch, time, hidden]");
    if (name.rfind("rms_aten", 0) == 0) {
      EXPECT_EQ(m.at("norm.op"), "rms_norm");
    } else {
      EXPECT_EQ(m.at("norm.op"), "rms_norm_pattern");
      EXPECT_EQ(m.at("norm.centered"), false);
      EXPECT_DOUBLE_EQ(m.at("norm.eps").get<double>(), rmf(name).at("numbers").at("eps").get<double>());
    }
  }
  EXPECT_EQ(lm(run("rms_norm_spelling"), "norm").at("norm.statistic"), "norm");
  EXPECT_EQ(lm(run("rms_time_written"), "norm").at("norm.statistic"), "mean_square");
}

// ---- 15.5: layout by role ---------------------------------------------------

TEST(RecogLayout, PatchEmbeddingIsTokensByHidden) {
  const json rep = run("vit_layout");
  for (const std::string l : {"layers.0.ln_1", "layers.0.ln_2", "layers.1.ln_1", "ln"}) {
    const json& m = lm(rep, l);
    EXPECT_EQ(m.at("norm.input_layout"), "[batch, tokens, hidden]") << l;
    EXPECT_EQ(m.at("norm.reduced_axes"), "hidden") << l;
    EXPECT_EQ(m.at("norm.layout_from"), "graph") << l;
  }
  EXPECT_TRUE(rep.at("findings").empty()) << rep.at("findings").dump(1);
}

// fairseq's time-first layout: axis 0 follows the length but is not B*T, so
// it is time, and the batch-sized axis 1 is the batch (it was labelled
// [batch*time, batch, hidden]).
TEST(RecogLayout, TimeFirstEncoderIsTimeBatchHidden) {
  const json& want = rmf("tbc_layout").at("numbers");
  const json rep = run("tbc_layout");
  for (const std::string l : {"layers.0.self_attn_layer_norm", "layers.0.final_layer_norm", "layers.1.final_layer_norm"}) {
    const json& m = lm(rep, l);
    EXPECT_EQ(m.at("norm.input_layout"), want.at("input_layout")) << l;
    EXPECT_EQ(m.at("norm.reduced_axes"), want.at("reduced")) << l;
    EXPECT_EQ(m.at("norm.over_time"), false) << l;
    EXPECT_EQ(m.at("norm.over_batch"), false) << l;
  }
  for (const auto& f : rep.at("findings")) EXPECT_EQ(f.at("severity"), "info") << f.dump();
}

// ---- 16.5: attention by structure ------------------------------------------

void expect_attention(const std::string& name) {
  SCOPED_TRACE(name);
  const json rep = run(name);
  for (const auto& [layer, want] : rmf(name).at("numbers").at("attention").items()) {
    const json& m = lm(rep, layer);
    ASSERT_TRUE(m.contains("attn.logit_absmax")) << layer << " not recognized as attention: " << m.dump(1).substr(0, 800);
    EXPECT_TRUE(nde2e::near_rel("attn.logit_absmax", m.at("attn.logit_absmax").get<double>(),
                                want.at("logit_absmax").get<double>(), 1e-3))
        << layer;
    EXPECT_EQ(m.at("attn.heads"), want.at("heads")) << layer;
    EXPECT_EQ(m.at("attn.worst_head"), want.at("worst_head")) << layer;
    // ATTN001 exactly where the logits pass 30.
    const bool fires = nde2e::finding_pairs(rep).count({"ATTN001", layer}) > 0;
    EXPECT_EQ(fires, want.at("logit_absmax").get<double>() > 30) << layer;
  }
}

TEST(RecogAttention, HandWrittenAttentionMeasuredPerHead) {
  for (const std::string name : {"attn_timm_growth", "attn_timm_healthy", "attn_einsum_healthy", "attn_baddbmm_growth",
                                 "attn_baddbmm_healthy"})
    expect_attention(name);
}

TEST(RecogAttention, SwinShiftedWindowMaskIsAMask) {
  expect_attention("swin_mask");
  expect_attention("swin_mask_growth");
  const json rep = run("swin_mask");
  EXPECT_GE(lm(rep, "attn").at("attn.masks_recognized").get<int>(), 1);
  EXPECT_LT(lm(rep, "attn").at("attn.logit_absmax").get<double>(), 30.0) << "the -100 mask counted as a logit";
}

TEST(RecogAttention, BaddbmmCausalBiasIsAMask) {
  const json rep = run("attn_baddbmm_healthy");
  EXPECT_GE(lm(rep, "blocks.0.attn").at("attn.masks_recognized").get<int>(), 1);
}

// ---- 16.2: padding through pooling and convolutions -------------------------

TEST(RecogPadding, EntersThroughPoolingAndConvolution) {
  for (const std::string name : {"pool_unmasked", "conv_unmasked"}) {
    SCOPED_TRACE(name);
    const json rep = run(name);
    EXPECT_EQ(mm(rep).at("pad.entry_layer"), rmf(name).at("numbers").at("entry_layer"));
    EXPECT_EQ(mm(rep).at("pad.entry_kind"), name == "pool_unmasked" ? "pooling" : "convolution");
    EXPECT_GT(mm(rep).at("pad.rel_diff").get<double>(), 1e-3);
  }
  for (const std::string name : {"pool_masked", "conv_masked"}) {
    SCOPED_TRACE(name);
    const json rep = run(name);
    EXPECT_LT(mm(rep).at("pad.rel_diff").get<double>(), 1e-4);
    EXPECT_EQ(mm(rep).at("pad.via_pooling_or_conv"), false);
  }
}

TEST(RecogPadding, LayerNormOverTimeReportedWhenTheModelRaises) {
  const json rep = run("ln_time_fixed");
  const json& m = lm(rep, "ln");
  EXPECT_EQ(m.at("norm.reduced_axes"), "time, hidden");
  EXPECT_EQ(m.at("norm.fails_at_other_length"), true);
  EXPECT_TRUE(mm(rep).contains("seqlen.error"));
}

// ---- 16.3: precision inside modules -----------------------------------------

TEST(RecogPrecision, ProducerAndPropagatorNamed) {
  const json rep = run("exp_pool_fp16", {"--precision", "fp16"});
  EXPECT_EQ(mm(rep).at("prec.producer_op"), "aten::exp");
  EXPECT_EQ(mm(rep).at("prec.producer_layer"), "pool");
  EXPECT_EQ(mm(rep).at("prec.producer_makes"), "inf");
  EXPECT_EQ(mm(rep).at("prec.propagator_op"), "aten::div");
  EXPECT_EQ(mm(rep).at("prec.first_nonfinite_layer"), "pool");
  const json twin = run("exp_pool_fp16_healthy", {"--precision", "fp16"});
  EXPECT_EQ(mm(twin).at("prec.forward_finite"), true);
  EXPECT_FALSE(mm(twin).contains("prec.producer_op"));
}

TEST(RecogPrecision, NormVarianceOverflowInTheFormat) {
  const json rep = run("rms_fp16_overflow", {"--precision", "fp16"});
  EXPECT_EQ(mm(rep).at("prec.producer_layer"), "norm");
  EXPECT_EQ(lm(rep, "norm").at("prec.norm_internal_overflow"), true);
  const json rep2 = run("gn_fp16_overflow", {"--precision", "fp16"});
  EXPECT_EQ(mm(rep2).at("prec.producer_layer"), "norm1");
  EXPECT_EQ(mm(rep2).at("prec.producer_op"), "aten::var");
  for (const std::string twin : {"rms_fp16_upcast", "gn_fp16_fused"}) {
    const json t = run(twin, {"--precision", "fp16"});
    EXPECT_FALSE(mm(t).contains("prec.producer_op")) << twin << ": " << mm(t).dump().substr(0, 400);
  }
}

// ---- 16.10: heads and final norms -------------------------------------------

TEST(RecogArchitecture, UNetFinalGroupNormIsAFinalNorm) {
  const json rep = run("unet_final_norm");
  EXPECT_EQ(mm(rep).at("arch.head_layer"), "conv_out");
  EXPECT_EQ(mm(rep).at("arch.final_norm_layer"), "conv_norm_out");
  const json rep2 = run("unet_no_final_norm");
  EXPECT_EQ(mm(rep2).at("arch.final_norm"), "absent");
  EXPECT_EQ(mm(rep2).at("arch.head_layer"), "conv_out");
}

// ---- the real models ---------------------------------------------------------

json run_real(const std::string& name) {
  nde2e::TempDir tmp;
  const std::string dir = nde2e::real_models_dir();
  const auto r = nde2e::run_nd({"check", dir + "/" + name + ".pt", "--input", dir + "/" + name + ".input.pt"},
                               tmp.file("report.json"));
  EXPECT_TRUE(r.has_report) << r.describe();
  return r.has_report ? r.report : json::object({{"findings", json::array()}, {"layers", json::array()}});
}

TEST(RecogReal, VitLayerNormsAreTokensByHidden) {
  if (!std::filesystem::exists(nde2e::real_models_dir() + "/tv_vit_tiny.pt")) GTEST_FAIL() << "real models missing";
  const json rep = run_real("tv_vit_tiny");
  int seen = 0;
  for (const auto& l : rep.at("layers")) {
    const json& m = l.at("metrics");
    if (!m.contains("norm.input_layout")) continue;
    ++seen;
    EXPECT_EQ(m.at("norm.input_layout"), "[batch, tokens, hidden]") << l.at("path");
    EXPECT_EQ(m.at("norm.reduced_axes"), "hidden") << l.at("path");
  }
  EXPECT_EQ(seen, 9);  // 4 blocks x (ln_1, ln_2) + encoder.ln
}

TEST(RecogReal, LlamaRMSNormWrittenOutOverHidden) {
  const json rep = run_real("hf_llama_tiny");
  int seen = 0;
  for (const auto& l : rep.at("layers")) {
    const json& m = l.at("metrics");
    if (!m.contains("norm.op")) continue;
    ++seen;
    EXPECT_EQ(m.at("norm.op"), "rms_norm_pattern") << l.at("path");
    EXPECT_EQ(m.at("norm.reduced_axes"), "hidden") << l.at("path");
  }
  EXPECT_EQ(seen, 5);  // 2 layers x 2 + final norm
  EXPECT_EQ(mm(rep).at("arch.final_norm"), "present");
}

TEST(RecogReal, BertAttentionAndLayerNorms) {
  const json rep = run_real("hf_bert_tiny");
  for (const auto& l : rep.at("layers")) {
    const json& m = l.at("metrics");
    if (m.contains("norm.reduced_axes")) {
      EXPECT_EQ(m.at("norm.reduced_axes"), "hidden") << l.at("path");
    }
  }
  for (const auto& f : rep.at("findings")) {
    const std::string id = f.at("rule_id");
    EXPECT_NE(id.rfind("AXIS", 0), 0u) << f.dump();
    EXPECT_NE(id, "ATTN001") << f.dump();
  }
}

}  // namespace

}  // namespace nd_test_e2e_recog_test
