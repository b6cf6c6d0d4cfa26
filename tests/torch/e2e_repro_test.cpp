// End to end on independent reproductions of public bug reports
// (fixtures/make_fixtures_repro.py: written by an evaluator who did not read
// normdoctor's fixtures or sources, each a fault in the style of real code and
// a healthy twin with the fix). These are the cases an earlier normdoctor got
// wrong; each test asserts the whole set of warning/error findings (nothing
// else may appear), the layer, and numbers derivable from the model.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "e2e_util.h"
#include "torch_version.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_e2e_repro_test {

namespace {

using nde2e::json;

std::string repro(const std::string& name) { return nde2e::source_dir() + "/fixtures/models/repro/" + name; }

/// One run of a repro fixture. `skip` is set, with the reason, when this
/// LibTorch 1.x build cannot load the PyTorch 2.x file (an operator it
/// lacks): the test skips with it, never silently (see RUN_REPRO).
nde2e::FixtureRun run_repro_raw(const std::string& name, const std::vector<std::string>& extra = {}) {
  return nde2e::run_fixture(repro(name + ".pt"), repro(name + ".input.pt"), extra, TORCH_VERSION_MAJOR < 2);
}

/// `const json VAR = the report of NAME [with EXTRA flags]`, skipping the
/// test (GTEST_SKIP in the test body) when this LibTorch cannot load the file.
#define RUN_REPRO(var, ...)                                  \
  const nde2e::FixtureRun var##_run = run_repro_raw(__VA_ARGS__); \
  if (!var##_run.skip.empty()) GTEST_SKIP() << var##_run.skip; \
  const json& var = var##_run.report

std::set<std::pair<std::string, std::string>> serious(const json& rep) { return nde2e::serious_findings(rep); }
const json* finding(const json& rep, const std::string& id) { return nde2e::first_finding(rep, id); }

using Set = std::set<std::pair<std::string, std::string>>;

// ResNeSt#46: ASPP image pooling -> 1x1 conv -> BatchNorm, trained at batch 1
// (saved in train mode, never trained: initial running statistics).
TEST(Repro, BatchNormAfterPoolingAtBatchOne) {
  RUN_REPRO(rep, "c02_bn_after_pool_batch1");
  EXPECT_EQ(serious(rep), (Set{{"BN006", "pool.2"}, {"BN001", "b0.1"}, {"MODE001", ""}}));
  const json* f = finding(rep, "BN001");
  ASSERT_NE(f, nullptr);
  // The drift note is optional text: absent (the train pass raised), it adds nothing.
  EXPECT_EQ(f->at("message").get<std::string>().find("n/a"), std::string::npos) << f->at("message");
}

// The same model saved in eval mode, checked on one image: the training batch
// is only assumed, so information, not an error.
TEST(Repro, BatchOfOneOnAnInferenceCheckpointIsInfo) {
  RUN_REPRO(rep, "c02_twin_bn_after_pool_eval");
  EXPECT_EQ(serious(rep), Set{});
  const json* f = finding(rep, "BN010");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->at("layer"), "pool.2");
  EXPECT_EQ(f->at("severity"), "info");
  // Given the real per-step batch of one, it is BN006 again.
  RUN_REPRO(given, "c02_twin_bn_after_pool_eval", {"--train-batch-size", "1"});
  EXPECT_EQ(serious(given), (Set{{"BN006", "pool.2"}}));
}

// transformers#17463: last_hidden_state.mean(1) after a TransformerEncoder,
// without the attention mask: padding reaches the sentence embedding.
TEST(Repro, UnmaskedMeanPoolingAfterAFusedEncoder) {
  RUN_REPRO(rep, "c06_mean_pool_unmasked");
  EXPECT_EQ(serious(rep), (Set{{"SEQ003", ""}}));
  const auto& mm = rep.at("probes").at("model_metrics");
  EXPECT_EQ(mm.at("pad.first_layer"), "proj");
  EXPECT_EQ(mm.at("pad.entry_kind"), "pooling");
  EXPECT_NE(mm.at("pad.entry_op").get<std::string>().find("aten::mean"), std::string::npos) << mm.at("pad.entry_op");
  EXPECT_EQ(mm.at("pad.entry_layer"), "");  // the root's own forward: h.mean(dim=1)
  EXPECT_GT(nde2e::as_number(mm.at("pad.rel_diff")), 0.1);
  RUN_REPRO(twin, "c06_twin_mean_pool_masked");
  EXPECT_EQ(serious(twin), Set{});
  EXPECT_LT(nde2e::as_number(twin.at("probes").at("model_metrics").at("pad.rel_diff")), 1e-5);
}

// pytorch#131060: masked_fill(~pair, -inf) makes the padded queries' rows NaN;
// the twin masks with -10000 (old BERT), whose fully masked rows are uniform.
// ACT001 names attn, whose softmax made the NaN, not its output projection
// attn.o, the first module to output it.
TEST(Repro, FullyMaskedRowsAreNaNOnlyWithMinusInfinity) {
  RUN_REPRO(rep, "c07_attn_neginf_padded_rows");
  EXPECT_EQ(serious(rep), (Set{{"ATTN002", "attn"}, {"ACT001", "attn"}}));
  for (const auto& l : rep.at("layers"))
    if (l.at("path") == "attn") {
      EXPECT_EQ(l.at("metrics").value("fwd.nonfinite_passed_to", ""), "attn.o");
    }
  const json* f = finding(rep, "ATTN002");
  ASSERT_NE(f, nullptr);
  // 4 heads x the padded query positions of lengths 16, 11, 7, 13 of 16: 4 x (0 + 5 + 9 + 3).
  EXPECT_EQ(f->at("evidence").at("attn.masked_nan_rows"), 68);
  RUN_REPRO(twin, "c07_twin_attn_mask_minus1e4");
  EXPECT_EQ(serious(twin), Set{});
  const json* l = nde2e::find_layer(twin, "attn");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->at("metrics").value("attn.masked_nan_rows", -1), 0);
  EXPECT_EQ(l->at("metrics").value("attn.masked_rows", -1), 68);
}

// pytorch#41527: a LayerNorm with eps 1e-12 over zero-padded frames in fp16.
// The output gradient grows 1e6x across that one LayerNorm, not through depth:
// not exploding gradients (the parameter gradients are flat).
TEST(Repro, OneLayerNormOverZeroRowsIsNotExplodingGradients) {
  RUN_REPRO(rep, "c09_layernorm_eps1e12_fp16", {"--precision", "fp16"});
  // PREC002 names the cause (eps is 0 in fp16), PREC005 the non-finite output.
  EXPECT_EQ(serious(rep), (Set{{"PREC002", "norm"}, {"PREC005", "norm"}}));
  const auto& mm = rep.at("probes").at("model_metrics");
  EXPECT_GT(nde2e::as_number(mm.at("grad.input_output_ratio")), 1000);
  EXPECT_GE(nde2e::as_number(mm.at("grad.max_step_share")), 0.5);
  RUN_REPRO(twin, "c09_twin_layernorm_eps1e5", {"--precision", "fp16"});
  EXPECT_EQ(serious(twin), Set{});
}

// PerceptualSimilarity#69: sqrt(sum(x^2)) of all-zero feature columns
// (letterboxed images) has an infinite derivative: the NaN gradient starts in
// normalize's backward, reaching features.2 (the last layer of a Sequential).
TEST(Repro, NaNGradientNamesTheModuleWhoseBackwardMadeIt) {
  RUN_REPRO(rep, "c10_sqrt_zero_nan_grad");
  EXPECT_EQ(serious(rep), (Set{{"GRAD001", "normalize"}}));
  const json* l = nde2e::find_layer(rep, "normalize");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->at("metrics").at("grad.nonfinite_from"), "features.2");
  // The zero columns: 8 black columns of the input minus two 3x3 convolutions' reach = 6,
  // x 32 rows x 32 channels x 4 images.
  EXPECT_EQ(l->at("metrics").at("grad.nonfinite_count"), 4 * 32 * 32 * 6);
  RUN_REPRO(twin1, "c10_twin_sqrt_eps_inside");
  EXPECT_EQ(serious(twin1), Set{});
}

// llama-from-scratch#4: an RMSNorm over (T, D) spelled
// torch.linalg.norm(x, dim=(1, 2)) * numel ** -0.5.
TEST(Repro, RMSNormOverTimeSpelledWithLinalgNorm) {
  RUN_REPRO(rep, "c16_rmsnorm_over_time");
  const auto got = serious(rep);
  EXPECT_TRUE(got.count({"AXIS001", "llama_blocks.0.rms"})) << rep.at("findings").dump(1);
  for (const auto& [rule, layer] : got) EXPECT_TRUE(rule == "AXIS001" || rule == "SEQ002") << rule << " at " << layer;
  const json* l = nde2e::find_layer(rep, "llama_blocks.0.rms");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->at("metrics").at("norm.statistic"), "norm");
  // A written-out norm on [batch, time, hidden] already: the fix is its
  // reduction axis, not a transpose nor a normalized_shape (eval55).
  for (const auto& f : rep.at("findings")) {
    if (f.at("rule_id") != "AXIS001" || f.at("layer") != "llama_blocks.0.rms") continue;
    EXPECT_NE(f.at("fix").at(0).get<std::string>().find("compute the statistics over the hidden axis"), std::string::npos) << f.at("fix");
    for (const auto& x : f.at("fix")) EXPECT_EQ(x.get<std::string>().find("transpose to"), std::string::npos) << x;
  }
  RUN_REPRO(twin2, "c16_twin_rmsnorm_over_hidden");
  EXPECT_EQ(serious(twin2), Set{});
}

// Tacotron2-PyTorch#8: the Prenet's F.dropout(x, 0.5, training=True) keeps
// dropout on in eval. The finding names prenet, whose forward runs it, not
// the first module to receive its output.
TEST(Repro, HardCodedDropoutNamesTheModuleThatRunsIt) {
  RUN_REPRO(rep, "d01_prenet_dropout_always_on");
  EXPECT_EQ(serious(rep), (Set{{"MODE004", "prenet"}}));
  const auto& mm = rep.at("probes").at("model_metrics");
  EXPECT_EQ(mm.at("evalrep.first_seen_at"), "prenet.layers.1.linear_layer");
  RUN_REPRO(twin3, "d01_twin_prenet_dropout_self_training");
  EXPECT_EQ(serious(twin3), Set{});
}

// Multilingual_Text_to_Speech#81: BatchNorm1d in a Transformer encoder over
// [batch, time, hidden], wrapped as transpose, BatchNorm1d, transpose back
// (SeqBN). In train mode the padded positions enter the BatchNorm's batch
// statistics over (batch, time): SEQ001, at the BatchNorm inside the wrapper,
// the first module whose output changes (eval mode, with running statistics,
// is untouched). BatchNorm's _check_input_dim error branch reads the
// wrapper's transposed input; that branch has no call stack, and when it was
// taken for the root, the transpose looked like an output of the wrapper and
// of its layer, which then "ran" before the BatchNorm: the finding was
// SEQ004 (other routes) at the wrapper.
TEST(Repro, BatchNormWrappedInATransposeIsTheModuleNamed) {
  RUN_REPRO(rep, "d02_transformer_batchnorm1d");
  // AXIS003 groups: one finding at the first BatchNorm, naming the other five.
  Set want{{"SEQ001", "layers.0.norm1.bn"}, {"AXIS003", "layers.0.norm1.bn"}};
  EXPECT_EQ(serious(rep), want);
  const json* ax = nullptr;
  for (const auto& f : rep.at("findings"))
    if (f.at("rule_id") == "AXIS003") ax = &f;
  ASSERT_NE(ax, nullptr);
  EXPECT_EQ(ax->at("evidence").at("also_layers"),
            "layers.0.norm2.bn, layers.1.norm1.bn, layers.1.norm2.bn, layers.2.norm1.bn, layers.2.norm2.bn");
  const auto& mm = rep.at("probes").at("model_metrics");
  EXPECT_EQ(mm.at("pad.first_layer"), "layers.0.norm1.bn");
  EXPECT_EQ(mm.at("pad.via_norm"), true);
  EXPECT_EQ(mm.at("pad.mode"), "train");
  EXPECT_EQ(nde2e::as_number(mm.at("pad.rel_diff_eval")), 0.0);
  EXPECT_GT(nde2e::as_number(mm.at("pad.rel_diff_train")), 0.1);
  // The wrapper's output is its last transpose: it comes after its BatchNorm,
  // and the layer's after both norms.
  for (int i = 0; i < 3; ++i) {
    const std::string l = "layers." + std::to_string(i);
    const json* w = nde2e::find_layer(rep, l + ".norm1");
    const json* bn = nde2e::find_layer(rep, l + ".norm1.bn");
    const json* n2 = nde2e::find_layer(rep, l + ".norm2");
    const json* layer = nde2e::find_layer(rep, l);
    ASSERT_TRUE(w && bn && n2 && layer) << l;
    EXPECT_GT(w->at("exec_order").get<int64_t>(), bn->at("exec_order").get<int64_t>()) << l;
    EXPECT_GT(layer->at("exec_order").get<int64_t>(), n2->at("exec_order").get<int64_t>()) << l;
  }
  RUN_REPRO(twin, "d02_twin_transformer_layernorm");
  EXPECT_EQ(serious(twin), Set{});
}

// coinrun#41: a hand-written BatchNorm (BatchNorm2dTF, TensorFlow's eps and
// momentum) keeps running_mean/running_var buffers but normalizes with the
// batch's statistics in eval mode too. The cause names that, not
// track_running_stats=False (it has running buffers; no aten::batch_norm runs).
TEST(Repro, HandWrittenBatchNormUsingBatchStatisticsInEval) {
  RUN_REPRO(rep, "d08_custom_bn_batch_stats_in_eval");
  EXPECT_EQ(serious(rep), (Set{{"BN005", "features.1"}}));
  const json* f = finding(rep, "BN005");
  ASSERT_NE(f, nullptr);
  const std::string cause = f->at("evidence").at("batchdep.cause").get<std::string>();
  EXPECT_NE(cause.find("BatchNorm2dTF has running_mean/running_var buffers"), std::string::npos) << cause;
  EXPECT_EQ(cause.find("track_running_stats"), std::string::npos) << cause;
  EXPECT_EQ(f->at("evidence").at("batchdep.batch"), 16);
  RUN_REPRO(twin, "d08_twin_custom_bn_running_stats");
  EXPECT_EQ(serious(twin), Set{});
}

// pytorch#81985: an InstanceNorm1d over time after a 3-tap convolution. The
// convolution reads one padded frame at the boundary (the first module whose
// output changes, a little); the InstanceNorm's statistics take in every
// padded frame (its output changes far more): the norm is named. The model
// takes no mask or lengths, so the user says its batches are padded
// (--pad-value 0); without that the same is SEQ006's info (what padding would
// do, and what was assumed: eval48).
TEST(Repro, InstanceNormOverTimeAfterAConvolutionIsNamed) {
  RUN_REPRO(assumed, "d15_instancenorm1d_over_time");
  EXPECT_EQ(serious(assumed).count({"SEQ001", "blocks.0.norm"}), 0u);
  ASSERT_NE(nde2e::first_finding(assumed, "SEQ006"), nullptr) << assumed.at("findings").dump(1);
  EXPECT_EQ(nde2e::first_finding(assumed, "SEQ006")->at("layer"), "blocks.0.norm");
  RUN_REPRO(rep, "d15_instancenorm1d_over_time", std::vector<std::string>{"--pad-value", "0"});
  // At the shorter length the convolution's boundary frame and the norm change
  // the shared positions by similar amounts (0.08 and 0.12): SEQ002 may name
  // the norm or stay silent; SEQ001 must.
  auto got = serious(rep);
  got.erase({"SEQ002", "blocks.0.norm"});
  EXPECT_EQ(got, (Set{{"SEQ001", "blocks.0.norm"}}));
  const auto& mm = rep.at("probes").at("model_metrics");
  EXPECT_EQ(mm.at("pad.first_layer"), "blocks.0.conv");
  EXPECT_EQ(mm.at("pad.norm_layer"), "blocks.0.norm");
  // The twin normalizes over channels: only the convolution's boundary frame
  // changes, and without a padding mask no padding rule applies.
  RUN_REPRO(twin4, "d15_twin_layernorm_over_channels");
  EXPECT_EQ(serious(twin4), Set{});
}

}  // namespace

}  // namespace nd_test_e2e_repro_test
