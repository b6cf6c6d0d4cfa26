// End to end: input layout, normalized axes, the padding and sequence-length
// probes and the architecture probe, on fixtures with one known fault each
// (fixtures/make_fixtures.py, manifest.json) and their healthy twins, and on
// the real models in corpus/ (the real-model corpus).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "e2e_util.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_e2e_sequence_test {

namespace {

using nde2e::json;
using nde2e::mf;

struct Case {
  const char* name;
  const char* model;
  // Every finding of the run: rule id -> layer ("" = model-level).
  std::vector<std::pair<std::string, std::string>> findings;
};

std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.name; }

json run(const std::string& model, const std::vector<std::string>& extra = {}) {
  nde2e::TempDir tmp;
  std::vector<std::string> args = {"check", nde2e::model(model + ".pt"), "--input", nde2e::model(model + ".input.pt")};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = nde2e::run_nd(args, tmp.file("report.json"));
  EXPECT_TRUE(r.has_report) << r.describe();
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe();
  return r.report;
}

const json& mm(const json& rep) { return rep.at("probes").at("model_metrics"); }

const json& lm(const json& rep, const std::string& path) {
  const json* l = nde2e::find_layer(rep, path);
  static const json kEmpty = json::object();
  EXPECT_NE(l, nullptr) << path;
  return l ? l->at("metrics") : kEmpty;
}

const json* finding(const json& rep, const std::string& rule, const std::string& layer) {
  for (const auto& f : rep.at("findings"))
    if (f.at("rule_id") == rule && (f.at("layer").is_null() ? std::string() : f.at("layer").get<std::string>()) == layer)
      return &f;
  return nullptr;
}

class Sequence : public ::testing::TestWithParam<Case> {};

TEST_P(Sequence, FindingsAreExactlyTheFault) {
  const Case& c = GetParam();
  const json rep = run(c.model);
  ASSERT_EQ(rep.at("status"), "ok");
  const std::set<std::pair<std::string, std::string>> want(c.findings.begin(), c.findings.end());
  EXPECT_EQ(nde2e::finding_pairs(rep), want) << rep.at("findings").dump(2);
}

INSTANTIATE_TEST_SUITE_P(
    E2E, Sequence,
    ::testing::Values(// BN008: 2 examples per pass would also be too few for BatchNorm statistics (info: the batch size is assumed).
                      Case{"seq_bn_padding", "seq_bn_padding", {{"SEQ001", "norm"}, {"AXIS003", "norm"}, {"BN008", "norm"}}},
                      Case{"seq_ln", "seq_ln", {}},
                      Case{"ln_over_time", "ln_over_time", {{"AXIS001", "norm"}}},
                      Case{"ln_over_time_healthy", "ln_over_time_healthy", {}},
                      // A mean over every axis spans time too: padding and length change the outputs (true);
                      // nothing says the batches are padded, so padding is SEQ006's info (what was assumed).
                      Case{"norm_over_batch", "norm_over_batch",
                           {{"AXIS002", "norm"}, {"BN005", "norm"}, {"SEQ006", "norm"}, {"SEQ002", "norm"}}},
                      Case{"norm_over_batch_healthy", "norm_over_batch_healthy", {}},
                      Case{"seqlen_instnorm", "seqlen_instnorm", {{"SEQ006", "norm"}, {"SEQ002", "norm"}}},
                      Case{"seqlen_instnorm_healthy", "seqlen_instnorm_healthy", {}},
                      Case{"groupnorm1", "groupnorm1", {{"AXIS004", "features.1"}}},  // one finding naming features.4
                      Case{"groupnorm1_healthy", "groupnorm1_healthy", {}},
                      Case{"groupnorm_onegroup", "groupnorm_onegroup", {{"AXIS005", "features.1"}}},
                      Case{"postnorm24", "postnorm24", {{"ARCH001", "blocks"}}},
                      Case{"postnorm6", "postnorm6", {}},
                      Case{"prenorm_nofinal", "prenorm_nofinal", {{"ARCH002", "head"}}},
                      Case{"prenorm_final", "prenorm_final", {}},
                      Case{"prenorm_growth", "prenorm_growth", {{"ARCH004", "blocks.5"}}},
                      Case{"prenorm_growth_healthy", "prenorm_growth_healthy", {}},
                      Case{"resnet_nonorm", "resnet_nonorm", {{"ARCH003", "blocks"}}},
                      Case{"resnet_nonorm_healthy", "resnet_nonorm_healthy", {}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(SequenceEvidence, BatchNormOverPaddedTokens) {
  const json rep = run("seq_bn_padding");
  // The layout: x is [batch, time, feature], mask marks real positions with 1.
  const json& in = rep.at("probes").at("layout").at("inputs");
  EXPECT_EQ(in.at(0).at("role"), "features");
  EXPECT_EQ(in.at(0).at("axes"), (json{"batch", "time", "feature"}));
  EXPECT_EQ(in.at(1).at("role"), "mask");
  EXPECT_EQ(in.at(1).at("real_value"), "1/true");
  EXPECT_EQ(mm(rep).at("layout.seq_len"), 12);
  // Padding 12 -> 20: train mode changes the real positions (the manifest's
  // Python measurement), eval mode (running statistics) does not.
  EXPECT_EQ(mm(rep).at("pad.padded_to"), mf("/seq_bn_padding/numbers/pad_to"));
  EXPECT_TRUE(nde2e::near_rel("pad.rel_diff_train", nde2e::as_number(mm(rep).at("pad.rel_diff_train")),
                              mf("/seq_bn_padding/numbers/real_positions_rel_diff_train").get<double>(), 1e-3));
  EXPECT_LT(nde2e::as_number(mm(rep).at("pad.rel_diff_eval")), 1e-5);
  EXPECT_EQ(mm(rep).at("pad.first_layer"), "norm");
  EXPECT_EQ(mm(rep).at("pad.norms_over_time"), "norm");
  const json* f = finding(rep, "SEQ001", "norm");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->at("failure_mode"), "padding-contamination");
  // The BatchNorm's axes: [batch, hidden, time], reduced over batch and time.
  EXPECT_EQ(lm(rep, "norm").at("norm.input_layout"), "[batch, hidden, time]");
  EXPECT_EQ(lm(rep, "norm").at("norm.reduced_axes"), "batch, time");
  EXPECT_EQ(lm(rep, "norm").at("norm.input_shape"), "[2, 16, 12]");
}

TEST(SequenceEvidence, LayerNormWithMaskIsUntouchedByPadding) {
  const json rep = run("seq_ln");
  // No batch_norm: train mode without dropout is eval mode, one comparison.
  EXPECT_FALSE(mm(rep).contains("pad.rel_diff_train"));
  EXPECT_TRUE(rep.at("probes").contains("padding_train_skipped"));
  EXPECT_LT(nde2e::as_number(mm(rep).at("pad.rel_diff_eval")), 1e-5);
  EXPECT_EQ(lm(rep, "norm").at("norm.reduced_axes"), "hidden");
}

TEST(SequenceEvidence, LayerNormOverTimeFoundAtTheSecondLength) {
  const json rep = run("ln_over_time");
  const json& m = lm(rep, "norm");
  EXPECT_EQ(m.at("norm.op"), "layer_norm");
  EXPECT_EQ(m.at("norm.input_shape"), "[2, 16, 16]");
  EXPECT_EQ(m.at("norm.input_layout"), "[batch, hidden, time]");
  EXPECT_EQ(m.at("norm.reduced_axes"), "time");
  EXPECT_EQ(m.at("norm.fails_at_other_length"), true);
  EXPECT_EQ(m.at("norm.time_axis_from"), "sizes at lengths 16 and 12");
  EXPECT_FALSE(mf("/ln_over_time/numbers/runs_at_T12").get<bool>());
  EXPECT_NE(mm(rep).at("seqlen.error").get<std::string>().find("normalized_shape"), std::string::npos) << mm(rep).dump(2);
  EXPECT_EQ(mm(rep).at("seqlen.failed_layer"), "norm");
}

TEST(SequenceEvidence, LayerNormOverHiddenRunsAtBothLengths) {
  const json rep = run("ln_over_time_healthy");
  EXPECT_EQ(lm(rep, "norm").at("norm.reduced_axes"), "hidden");
  EXPECT_EQ(lm(rep, "norm").at("norm.input_layout"), "[batch, time, hidden]");
  EXPECT_LT(nde2e::as_number(mm(rep).at("seqlen.rel_diff")), 1e-5);
}

TEST(SequenceEvidence, RmsNormPatternOverTheBatch) {
  const json rep = run("norm_over_batch");
  const json& m = lm(rep, "norm");
  EXPECT_EQ(m.at("norm.op"), "rms_norm_pattern");
  EXPECT_EQ(m.at("norm.reduced_axes"), mf("/norm_over_batch/numbers/reduced_axes"));
  EXPECT_EQ(m.at("norm.over_batch"), true);
  const json rep2 = run("norm_over_batch_healthy");
  EXPECT_EQ(lm(rep2, "norm").at("norm.reduced_axes"), "hidden");
  EXPECT_EQ(lm(rep2, "norm").at("norm.over_batch"), false);
}

TEST(SequenceEvidence, InstanceNormOverTimeDependsOnLength) {
  const json rep = run("seqlen_instnorm");
  EXPECT_EQ(mm(rep).at("seqlen.lengths"), "16 and 12");
  EXPECT_TRUE(nde2e::near_rel("seqlen.rel_diff", nde2e::as_number(mm(rep).at("seqlen.rel_diff")),
                              mf("/seqlen_instnorm/numbers/first12_T16_vs_T12_rel_diff").get<double>(), 1e-3));
  EXPECT_EQ(mm(rep).at("seqlen.first_layer"), "norm");
  EXPECT_EQ(mm(rep).at("pad.padded_to"), mf("/seqlen_instnorm/numbers/pad_to"));
  EXPECT_TRUE(nde2e::near_rel("pad.rel_diff_eval", nde2e::as_number(mm(rep).at("pad.rel_diff_eval")),
                              mf("/seqlen_instnorm/numbers/real_positions_rel_diff_eval").get<double>(), 1e-3));
  const json rep2 = run("seqlen_instnorm_healthy");
  EXPECT_LT(nde2e::as_number(mm(rep2).at("seqlen.rel_diff")), 1e-5);
}

TEST(SequenceEvidence, GroupNormGroupSize) {
  const json rep = run("groupnorm1");
  for (const char* p : {"features.1", "features.4"}) {
    EXPECT_EQ(lm(rep, p).at("norm.num_groups"), mf("/groupnorm1/numbers/num_groups"));
    EXPECT_EQ(lm(rep, p).at("norm.num_channels"), mf("/groupnorm1/numbers/num_channels"));
    EXPECT_EQ(lm(rep, p).at("norm.channels_per_group"), mf("/groupnorm1/numbers/channels_per_group"));
    EXPECT_EQ(lm(rep, p).at("norm.input_layout"), "[batch, channel, spatial, spatial]");
  }
}

TEST(ArchitectureEvidence, PostNormDepth) {
  const json rep = run("postnorm24");
  EXPECT_EQ(mm(rep).at("arch.post_norm_blocks"), mf("/postnorm24/numbers/depth"));
  EXPECT_EQ(mm(rep).at("arch.placement"), "post-norm");
  EXPECT_EQ(mm(rep).at("arch.stack"), "blocks");
  const json rep6 = run("postnorm6");
  EXPECT_EQ(mm(rep6).at("arch.post_norm_blocks"), mf("/postnorm6/numbers/depth"));
}

TEST(ArchitectureEvidence, PreNormFinalNormAndStream) {
  const json rep = run("prenorm_nofinal");
  EXPECT_EQ(mm(rep).at("arch.pre_norm_blocks"), mf("/prenorm_nofinal/numbers/depth"));
  EXPECT_EQ(mm(rep).at("arch.final_norm"), "absent");
  EXPECT_EQ(mm(rep).at("arch.head_layer"), "head");
  EXPECT_EQ(mm(rep).at("arch.last_block"), "blocks.5");
  EXPECT_TRUE(nde2e::near_rel("arch.stream_growth", nde2e::as_number(mm(rep).at("arch.stream_growth")),
                              mf("/prenorm_nofinal/numbers/stream_growth_last_over_input").get<double>(), 1e-3));
  // The per-block table: stream RMS after each block, as measured in Python.
  const json& blocks = rep.at("probes").at("architecture").at("blocks");
  ASSERT_EQ(blocks.size(), 6u);
  for (const auto& b : blocks) {
    EXPECT_EQ(b.at("placement"), "pre-norm");
    const std::string p = b.at("block");
    EXPECT_TRUE(nde2e::near_rel(p.c_str(), b.at("stream_rms_out").get<double>(),
                                mf("/prenorm_nofinal/numbers/stream_rms_at_block_outputs/" + p).get<double>(), 1e-3));
  }
  const json rep2 = run("prenorm_final");
  EXPECT_EQ(mm(rep2).at("arch.final_norm"), "present");
  EXPECT_EQ(mm(rep2).at("arch.final_norm_layer"), "final_norm");
}

TEST(ArchitectureEvidence, StreamGrowth) {
  const json rep = run("prenorm_growth");
  EXPECT_TRUE(nde2e::near_rel("arch.stream_growth", nde2e::as_number(mm(rep).at("arch.stream_growth")),
                              mf("/prenorm_growth/numbers/stream_growth_last_over_input").get<double>(), 1e-3));
  EXPECT_EQ(mm(rep).at("arch.final_norm"), "present");
}

TEST(ArchitectureEvidence, NoNormalization) {
  const json rep = run("resnet_nonorm");
  EXPECT_EQ(mm(rep).at("arch.blocks"), mf("/resnet_nonorm/numbers/blocks"));
  EXPECT_EQ(mm(rep).at("arch.norm_layers"), 0);
  const json rep2 = run("resnet_nonorm_healthy");
  EXPECT_EQ(mm(rep2).at("arch.norm_layers"), mf("/resnet_nonorm_healthy/numbers/norm_layers"));
  EXPECT_EQ(mm(rep2).at("arch.placement"), "in-branch");
}

// ---- real models ------------------------------------------------------------

json run_real(const std::string& name) {
  const std::string dir = nde2e::real_models_dir();
  nde2e::TempDir tmp;
  const auto r = nde2e::run_nd({"check", dir + "/" + name + ".pt", "--input", dir + "/" + name + ".input.pt"},
                               tmp.file("report.json"));
  EXPECT_TRUE(r.has_report) << r.describe();
  return r.report;
}

bool have_real(const std::string& name) {
  return std::filesystem::exists(nde2e::real_models_dir() + "/" + name + ".pt");
}

TEST(RealModels, LlamaRmsNormIsRecognizedAndPreNorm) {
  if (!have_real("hf_llama_tiny")) GTEST_SKIP() << "no " << nde2e::real_models_dir();
  const json rep = run_real("hf_llama_tiny");
  ASSERT_EQ(rep.at("status"), "ok");
  int rms = 0;
  for (const auto& l : rep.at("layers")) {
    const json& m = l.at("metrics");
    if (!m.contains("norm.op")) continue;
    EXPECT_EQ(m.at("norm.op"), "rms_norm_pattern") << l.at("path");
    EXPECT_EQ(m.at("norm.reduced_axes"), "hidden") << l.at("path");
    ++rms;
  }
  EXPECT_GE(rms, 3);  // per block: input_layernorm, post_attention_layernorm; plus model.norm
  bool eps = false;
  for (const auto& a : rep.at("probes").at("axes"))
    if (a.at("op") == "rms_norm_pattern" && a.at("eps").is_number()) eps = true;
  EXPECT_TRUE(eps);
  EXPECT_EQ(mm(rep).at("arch.placement"), "pre-norm");
  EXPECT_EQ(mm(rep).at("arch.final_norm"), "present");
  for (const auto& f : rep.at("findings")) {
    const std::string id = f.at("rule_id");
    EXPECT_TRUE(id.rfind("SEQ", 0) != 0 && id.rfind("AXIS", 0) != 0 && id.rfind("ARCH", 0) != 0) << f.dump(2);
  }
}

TEST(RealModels, BertIsShallowPostNormWithMaskedPadding) {
  if (!have_real("hf_bert_tiny")) GTEST_SKIP() << "no " << nde2e::real_models_dir();
  const json rep = run_real("hf_bert_tiny");
  ASSERT_EQ(rep.at("status"), "ok");
  EXPECT_EQ(mm(rep).at("arch.placement"), "post-norm");
  EXPECT_EQ(mm(rep).at("arch.post_norm_blocks"), 2);
  EXPECT_LT(nde2e::as_number(mm(rep).at("pad.rel_diff")), 1e-3);
  for (const auto& l : rep.at("layers"))
    if (l.at("kind") == "LayerNorm") {
      EXPECT_EQ(l.at("metrics").at("norm.reduced_axes"), "hidden") << l.at("path");
    }
  for (const auto& f : rep.at("findings")) {
    const std::string id = f.at("rule_id");
    EXPECT_TRUE(id.rfind("SEQ", 0) != 0 && id.rfind("AXIS", 0) != 0 && id.rfind("ARCH", 0) != 0) << f.dump(2);
  }
}

TEST(RealModels, VitReadsAsFourPreNormBlocksWithFinalNorm) {
  if (!have_real("tv_vit_tiny")) GTEST_SKIP() << "no " << nde2e::real_models_dir();
  const json rep = run_real("tv_vit_tiny");
  ASSERT_EQ(rep.at("status"), "ok");
  EXPECT_EQ(mm(rep).at("arch.placement"), "pre-norm");
  EXPECT_EQ(mm(rep).at("arch.pre_norm_blocks"), 4);
  EXPECT_EQ(mm(rep).at("arch.residual_additions"), 8);  // attention and MLP residual per block
  EXPECT_EQ(mm(rep).at("arch.final_norm"), "present");
  EXPECT_EQ(mm(rep).at("arch.final_norm_layer"), "encoder.ln");
  EXPECT_EQ(mm(rep).at("layout.sequence"), false);  // an image input: no padding or length probe
}

// timm's DeiT reaches its blocks through a chain of scripted ifs (the patch
// embedding's `if self.flatten`, _pos_embed's `if self.no_embed_class`, the
// blocks' `if attn_mask is not None`): the LayerNorms' input is still
// [batch, tokens, hidden] and they reduce over hidden, as the code says.
TEST(RealModels, DeitLayerNormsAreOverHiddenThroughScriptedIfs) {
  if (!have_real("timm_deit_tiny_distilled")) GTEST_SKIP() << "no " << nde2e::real_models_dir();
  const json rep = run_real("timm_deit_tiny_distilled");
  ASSERT_EQ(rep.at("status"), "ok");
  int norms = 0;
  for (const auto& l : rep.at("layers")) {
    const json& m = l.at("metrics");
    if (!m.contains("norm.input_layout") || l.at("kind") != "LayerNorm") continue;
    ++norms;
    EXPECT_EQ(m.at("norm.input_layout"), "[batch, tokens, hidden]") << l.at("path");
    EXPECT_EQ(m.at("norm.reduced_axes"), "hidden") << l.at("path");
  }
  EXPECT_EQ(norms, 9);  // norm1 and norm2 of 4 blocks, and the final norm
}

}  // namespace

// ---- the layout flags -------------------------------------------------------

namespace {

TEST(LayoutFlags, MaskInputByIndexGivesTheSameResult) {
  const json rep = run("seq_bn_padding", {"--mask-input", "1"});
  const json& in = rep.at("probes").at("layout").at("inputs");
  EXPECT_EQ(in.at(1).at("role"), "mask");
  EXPECT_EQ(in.at(1).at("from"), "--mask-input 1");
  EXPECT_TRUE(nde2e::near_rel("pad.rel_diff_train", nde2e::as_number(mm(rep).at("pad.rel_diff_train")),
                              mf("/seq_bn_padding/numbers/real_positions_rel_diff_train").get<double>(), 1e-3));
}

TEST(LayoutFlags, SeqDimAndPadValueAreReported) {
  const json rep = run("seq_ln", {"--seq-dim", "1", "--pad-value", "0.5"});
  const json& in = rep.at("probes").at("layout").at("inputs");
  EXPECT_EQ(in.at(0).at("time_axis"), 1);
  EXPECT_NE(in.at(0).at("from").get<std::string>().find("--seq-dim 1"), std::string::npos);
  EXPECT_EQ(rep.at("probes").at("layout").at("pad_value"), 0.5);
}

TEST(LayoutFlags, MaskInputNamingNothingIsAUsageError) {
  nde2e::TempDir tmp;
  const auto r = nde2e::run_nd({"check", nde2e::model("seq_ln.pt"), "--input", nde2e::model("seq_ln.input.pt"),
                                "--mask-input", "attention_mask"},
                               tmp.file("report.json"));
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_EQ(r.report.at("status"), "error");
  const std::string msg = r.report.at("error").at("message");
  EXPECT_NE(msg.find("--mask-input attention_mask"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0=x, 1=mask"), std::string::npos) << msg;
}

TEST(LayoutFlags, SeqDimBeyondEveryInputIsAUsageError) {
  nde2e::TempDir tmp;
  const auto r = nde2e::run_nd({"check", nde2e::model("growth20.pt"), "--input", nde2e::model("growth20.input.pt"),
                                "--seq-dim", "5"},
                               tmp.file("report.json"));
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_NE(r.report.at("error").at("message").get<std::string>().find("--seq-dim 5"), std::string::npos);
}

}  // namespace

}  // namespace nd_test_e2e_sequence_test
