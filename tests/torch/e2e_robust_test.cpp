// End to end, issue 15 and issue 14's isolation: models written by others
// (fixtures/make_fixtures_robust.py, fixtures/models/robust/manifest.json):
// forward signatures with defaults, dict batches with gaps, batch layouts,
// class-id outputs, modules with several outputs, probes that raise, and the
// report's numbers against a recomputation in Python.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "e2e_util.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_e2e_robust_test {

namespace {

using nde2e::json;

std::string rmodel(const std::string& name) { return nde2e::model("robust/" + name); }

const json& robust_manifest() {
  static const json m = json::parse(nde2e::read_file(rmodel("manifest.json")));
  return m;
}

struct RobustRun {
  nde2e::NdRun r;
  const json& rep() const { return r.report; }
};

RobustRun check(const std::string& name, const std::vector<std::string>& inputs, const std::vector<std::string>& extra = {}) {
  nde2e::TempDir tmp;
  std::vector<std::string> in;
  for (const auto& i : inputs) in.push_back(i);
  RobustRun run{nde2e::check(rmodel(name + ".pt"), in, extra, tmp.file("r.json"))};
  return run;
}

const json& mm(const json& rep) { return rep.at("probes").at("model_metrics"); }

const json& layer_metrics(const json& rep, const std::string& path) {
  const json* l = nde2e::find_layer(rep, path);
  static const json kEmpty = json::object();
  return l ? l->at("metrics") : kEmpty;
}

/// Every probe the engine ran has a status; none of them is "error" unless named.
void expect_probe_status(const json& rep, const std::vector<std::string>& errors = {},
                         const std::vector<std::string>& skipped = {}) {
  const json& p = rep.at("probes");
  for (const char* name : {"forward_backward", "normalization", "architecture", "sequence", "precision"}) {
    ASSERT_TRUE(p.contains(name) && p[name].is_object()) << name << "\n" << p.dump(1).substr(0, 3000);
    const std::string st = p[name].value("status", "");
    const bool err = std::find(errors.begin(), errors.end(), name) != errors.end();
    const bool skip = std::find(skipped.begin(), skipped.end(), name) != skipped.end();
    EXPECT_EQ(st, err ? "error" : skip ? "skipped" : "ok") << name << ": " << p[name].dump();
  }
  for (const auto& [name, v] : p.items()) {
    if (!v.is_object() || !v.contains("status")) continue;
    const std::string st = v["status"].get<std::string>();
    EXPECT_TRUE(st == "ok" || st == "error" || st == "skipped") << name;
    if (st == "error") {
      EXPECT_TRUE(std::find(errors.begin(), errors.end(), name) != errors.end()) << name << ": " << v.dump();
      ASSERT_TRUE(v.contains("pass") && v["pass"].is_string()) << v.dump();
      ASSERT_TRUE(v.contains("error") && v["error"].is_object()) << v.dump();
      EXPECT_FALSE(v["error"].value("kind", "").empty());
      EXPECT_FALSE(v["error"].value("message", "").empty());
    }
    if (st == "skipped") {
      EXPECT_TRUE(std::find(skipped.begin(), skipped.end(), name) != skipped.end()) << name << ": " << v.dump();
      EXPECT_FALSE(v.value("reason", "").empty()) << name;
    }
  }
}

/// act.rms / act.absmax of every module the manifest measured (what its
/// forward returns, train mode) within 1e-4 relative.
void expect_outputs_match_python(const json& rep, const json& modules, int at_least = 3) {
  int compared = 0;
  for (const auto& [path, want] : modules.items()) {
    SCOPED_TRACE("module '" + path + "'");
    const json& m = layer_metrics(rep, path);
    ASSERT_TRUE(m.contains("act.rms")) << "no act.rms";
    EXPECT_TRUE(nde2e::near_rel("act.rms", nde2e::as_number(m.at("act.rms")), want.at("rms").get<double>(), 1e-4));
    EXPECT_TRUE(nde2e::near_rel("act.absmax", nde2e::as_number(m.at("act.absmax")), want.at("absmax").get<double>(), 1e-4));
    ++compared;
  }
  EXPECT_GE(compared, at_least);
}

// ---------------------------------------------------------------- 15.1

// forward(input_ids, attention_mask=None, position_ids=None, scale=1.0,
// output_hidden_states=False, pool_dim=1) given input_ids only: the graph
// gets the schema's defaults.
TEST(E2ERobustSignature, DefaultsFromTheSchema) {
  const RobustRun run = check("hf_optional_args", {rmodel("hf_optional_args.input.pt")});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(run.rep().value("status", ""), "ok") << run.r.describe();
  EXPECT_TRUE(run.r.exit_code == 0 || run.r.exit_code == 1) << run.r.describe();
  expect_probe_status(run.rep());
  expect_outputs_match_python(run.rep(), robust_manifest().at("fixtures").at("hf_optional_args").at("modules"));
}

// A dict batch {input_ids, position_ids}: attention_mask, between them, takes
// its default; position_ids reaches forward (the numbers are those of the
// flipped positions, not of the default ones).
TEST(E2ERobustSignature, DictBatchWithAGapTakesTheDefault) {
  const RobustRun run = check("hf_optional_args", {rmodel("hf_optional_args.gap.input.pt")});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(run.rep().value("status", ""), "ok") << run.r.describe();
  const json& inputs = run.rep().at("inputs");
  ASSERT_GE(inputs.size(), 3u) << inputs.dump(1);
  EXPECT_EQ(inputs[1].value("name", ""), "attention_mask");
  EXPECT_EQ(inputs[1].value("source", ""), "default: None");
  EXPECT_EQ(inputs[2].value("name", ""), "position_ids");
  expect_outputs_match_python(run.rep(), robust_manifest().at("fixtures").at("hf_optional_args").at("gap_modules"));
}

// A dict batch without the required input_ids: exit 2, naming the argument
// and the flag that gives it.
TEST(E2ERobustSignature, MissingRequiredArgumentNamesTheFlag) {
  const RobustRun run = check("hf_optional_args", {rmodel("hf_optional_args.no_ids.input.pt")});
  EXPECT_EQ(run.r.exit_code, 2) << run.r.describe();
  nde2e::expect_error_report(run.r, "usage", "argument 'input_ids'");
  const std::string msg = run.rep().at("error").value("message", "");
  EXPECT_NE(msg.find("--input-shape input_ids="), std::string::npos) << msg;
  EXPECT_NE(msg.find("hf_optional_args.no_ids.input.pt"), std::string::npos) << msg;
}

// ... and the flag works: --input-shape gives the argument the batch lacks.
TEST(E2ERobustSignature, InputShapeGivesWhatTheBatchLacks) {
  const RobustRun run = check("hf_optional_args", {rmodel("hf_optional_args.no_ids.input.pt")},
                        {"--input-shape", "input_ids=4x10:int64:0..50"});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(run.rep().value("status", ""), "ok") << run.r.describe();
  const json& inputs = run.rep().at("inputs");
  ASSERT_GE(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].value("source", ""), "synthetic:input_ids=4x10:int64:0..50");
}

// ---------------------------------------------------------------- 15.2

/// probes.batch_layout of a report: the batch size, where it came from, each argument's batch axis.
const json& layout(const json& rep) { return rep.at("probes").at("batch_layout"); }

// forward(x [B, T, F], lengths [B]): the batch is the lengths vector's, both
// arguments are sliced along axis 0, and the per-example passes (which end
// in a mask built from one length) match the batch: the model treats each
// example alone.
TEST(E2ERobustLayout, ConformerLengthsVector) {
  const RobustRun run = check("conformer_lengths", {rmodel("conformer_lengths.input.pt")});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(run.rep().value("status", ""), "ok") << run.r.describe();
  expect_probe_status(run.rep());
  EXPECT_EQ(run.rep().at("probes").at("batch_dependence").value("status", ""), "ok");
  EXPECT_EQ(layout(run.rep()).value("batch", 0), 4);
  EXPECT_EQ(layout(run.rep()).value("from", ""), "the lengths vector 'lengths'");
  EXPECT_EQ(layout(run.rep()).at("axes"), (json{{"x", 0}, {"lengths", 0}}));
  ASSERT_TRUE(mm(run.rep()).contains("batchdep.max_rel_diff")) << mm(run.rep()).dump();
  EXPECT_LT(nde2e::as_number(mm(run.rep()).at("batchdep.max_rel_diff")), 1e-5);
  EXPECT_LT(nde2e::as_number(mm(run.rep()).at("batchdep.reorder_rel_diff")), 1e-5);
  for (const auto& f : run.rep().at("findings")) EXPECT_NE(f.value("rule_id", ""), "BN005") << f.dump();
  expect_outputs_match_python(run.rep(), robust_manifest().at("fixtures").at("conformer_lengths").at("modules"));
}

// src [T, B, F] with a key padding mask [B, T] (nn.Transformer's
// batch_first=False layout): the batch size comes from the mask, src is
// sliced along axis 1, the output's rows along its own batch axis; the
// per-example passes match the batch (before: src sliced along time, a
// [1, 4, 12] src next to a [4, 20] mask).
TEST(E2ERobustLayout, TimeMajorWithAKeyPaddingMask) {
  const RobustRun run = check("time_major", {rmodel("time_major.input.pt")});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(run.rep().value("status", ""), "ok") << run.r.describe();
  EXPECT_EQ(run.rep().at("probes").at("batch_dependence").value("status", ""), "ok")
      << run.rep().at("probes").dump(1).substr(0, 3000);
  EXPECT_EQ(layout(run.rep()).value("batch", 0), 4);
  EXPECT_EQ(layout(run.rep()).value("from", ""), "axis 0 of the padding mask 'src_key_padding_mask'");
  EXPECT_EQ(layout(run.rep()).at("axes"), (json{{"src", 1}, {"src_key_padding_mask", 0}}));
  bool said = false;
  for (const auto& a : run.rep().at("probes").at("assumptions"))
    said = said || a.get<std::string>().find("src: axis 1") != std::string::npos;
  EXPECT_TRUE(said) << run.rep().at("probes").at("assumptions").dump(1);
  ASSERT_TRUE(mm(run.rep()).contains("batchdep.max_rel_diff")) << mm(run.rep()).dump();
  EXPECT_LT(nde2e::as_number(mm(run.rep()).at("batchdep.max_rel_diff")), 1e-5);
  EXPECT_LT(nde2e::as_number(mm(run.rep()).at("batchdep.reorder_rel_diff")), 1e-5);
  for (const auto& f : run.rep().at("findings")) EXPECT_NE(f.value("rule_id", ""), "BN005") << f.dump();
  expect_outputs_match_python(run.rep(), robust_manifest().at("fixtures").at("time_major").at("modules"));
}

// --batch-dim 1 says the same explicitly: the batch is axis 1 of src.
TEST(E2ERobustLayout, BatchDimFlag) {
  const RobustRun run = check("time_major", {rmodel("time_major.input.pt")}, {"--batch-dim", "1"});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(run.rep().value("status", ""), "ok") << run.r.describe();
  EXPECT_EQ(layout(run.rep()).value("batch", 0), 4);
  EXPECT_EQ(layout(run.rep()).value("from", ""), "--batch-dim 1 of 'src'");
  EXPECT_EQ(layout(run.rep()).at("axes"), (json{{"src", 1}, {"src_key_padding_mask", 0}}));
  EXPECT_LT(nde2e::as_number(mm(run.rep()).at("batchdep.max_rel_diff")), 1e-5);
  // And it is a flag like the others: a negative value is a usage error.
  const RobustRun bad = check("time_major", {rmodel("time_major.input.pt")}, {"--batch-dim", "-1"});
  EXPECT_EQ(bad.r.exit_code, 2) << bad.r.describe();
}

// ---------------------------------------------------------------- 15.6

bool has_fast_path_assumption(const json& rep) {
  for (const auto& a : rep.at("probes").at("assumptions"))
    if (a.get<std::string>().find("fast path") != std::string::npos) return true;
  return false;
}

// nn.TransformerEncoder(enable_nested_tensor=True) with a key padding mask:
// in eval without grad the padded positions come back as zeros (nested
// tensors inside: the instrumented eval passes see them too and must not
// raise "NestedTensorImpl doesn't support sizes"). The model pools with a
// plain mean over time, so inference differs from the slow path by the
// relative difference Python measured.
TEST(E2ERobustFastPath, UnmaskedPoolDiffersFromTheSlowPath) {
  const RobustRun run = check("transformer_fastpath", {rmodel("transformer_fastpath.input.pt")});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(run.rep().value("status", ""), "ok") << run.r.describe();
  EXPECT_TRUE(run.r.exit_code == 0 || run.r.exit_code == 1) << run.r.describe();
  expect_probe_status(run.rep());
  const json& p = run.rep().at("probes");
  EXPECT_EQ(p.at("fast_path").value("status", ""), "ok") << p.at("fast_path").dump();
  EXPECT_EQ(p.at("batch_dependence").value("status", ""), "ok") << p.at("batch_dependence").dump();
  EXPECT_EQ(mm(run.rep()).value("fastpath.present", false), true);
  EXPECT_EQ(mm(run.rep()).value("fastpath.raises", true), false);
  EXPECT_EQ(mm(run.rep()).value("fastpath.shape_changed", true), false);
  const double want = robust_manifest().at("fixtures").at("transformer_fastpath").at("fast_slow_rel_diff").get<double>();
  ASSERT_GT(want, 1e-2);
  EXPECT_TRUE(nde2e::near_rel("fastpath.rel_output_diff", nde2e::as_number(mm(run.rep()).at("fastpath.rel_output_diff")),
                              want, 1e-3));
  EXPECT_TRUE(has_fast_path_assumption(run.rep())) << p.at("assumptions").dump(1);
  // Batch dependence on the fast path: each example's kept positions alone
  // equal its rows in the batch.
  EXPECT_LT(nde2e::as_number(mm(run.rep()).at("batchdep.max_rel_diff")), 1e-4);
}

// Its healthy twin pools over the kept positions only: both paths agree.
TEST(E2ERobustFastPath, MaskedPoolAgrees) {
  const RobustRun run = check("transformer_fastpath_masked", {rmodel("transformer_fastpath_masked.input.pt")});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(run.rep().value("status", ""), "ok") << run.r.describe();
  expect_probe_status(run.rep());
  EXPECT_EQ(mm(run.rep()).value("fastpath.present", false), true);
  EXPECT_LT(nde2e::as_number(mm(run.rep()).at("fastpath.rel_output_diff")), 1e-5);
  EXPECT_FALSE(has_fast_path_assumption(run.rep())) << run.rep().at("probes").at("assumptions").dump(1);
  for (const auto& f : run.rep().at("findings")) EXPECT_NE(f.value("rule_id", ""), "BN005") << f.dump();
}

// A model without a fast path: the probe runs, finds none, says so.
TEST(E2ERobustFastPath, AbsentElsewhere) {
  const RobustRun run = check("conformer_lengths", {rmodel("conformer_lengths.input.pt")});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(mm(run.rep()).value("fastpath.present", true), false);
  EXPECT_FALSE(mm(run.rep()).contains("fastpath.rel_output_diff"));
}

// ---------------------------------------------------------------- 15.7

// torchvision's mobilenet_v3_small, untrained: activations shrink to a
// variance of 1e-20 deep in the network. bn.mean_noise / bn.var_noise of
// every BatchNorm2d against the recomputation in Python (manifest "real");
// before, an absolute floor on the variance printed 4.45e-05 at
// features.10.block.1.1 where the spread is 0.2 of the channel's scale.
TEST(E2ERobustNumbers, MobilenetBatchNormNoise) {
  const json& want = robust_manifest().at("real").at("tv_mobilenet_v3_small").at("bn");
  ASSERT_GE(want.size(), 30u);
  nde2e::TempDir tmp;
  const auto r = nde2e::check(nde2e::real_models_dir() + "/tv_mobilenet_v3_small.pt",
                              {nde2e::real_models_dir() + "/tv_mobilenet_v3_small.input.pt"}, {}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  int compared = 0;
  for (const auto& [path, w] : want.items()) {
    SCOPED_TRACE(path);
    const json& m = layer_metrics(r.report, path);
    ASSERT_TRUE(m.contains("bn.mean_noise")) << m.dump();
    EXPECT_TRUE(nde2e::near_rel("bn.mean_noise", nde2e::as_number(m.at("bn.mean_noise")), w.at("mean_noise").get<double>(), 1e-4));
    EXPECT_TRUE(nde2e::near_rel("bn.var_noise", nde2e::as_number(m.at("bn.var_noise")), w.at("var_noise").get<double>(), 1e-4));
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(want.size()));
  const json& deep = layer_metrics(r.report, "features.10.block.1.1");
  ASSERT_TRUE(deep.contains("bn.mean_noise"));
  EXPECT_GT(nde2e::as_number(deep.at("bn.mean_noise")), 0.1);  // not 4.45e-05
}

// ---------------------------------------------------------------- 15.3

// Class ids out (argmax): the forward-only probes run, the gradients are
// skipped with the reason, exit 0/1 (not 3). BatchNorm1d without running
// statistics raises on one example alone in eval mode: evidence for BN005.
TEST(E2ERobustNoGradient, ArgmaxWithBatchStatisticsInEval) {
  const RobustRun run = check("argmax_batch_stats", {rmodel("argmax_batch_stats.input.pt")}, {"--fail-on", "error"});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(run.rep().value("status", ""), "ok") << run.r.describe();
  EXPECT_EQ(run.r.exit_code, 1) << run.r.describe();
  expect_probe_status(run.rep(), {"batch_dependence"}, {"gradients"});
  const json& g = run.rep().at("probes").at("gradients");
  EXPECT_NE(g.value("reason", "").find("only integer or bool tensors"), std::string::npos) << g.dump();
  const json& bd = run.rep().at("probes").at("batch_dependence");
  EXPECT_EQ(bd.value("pass", ""), "eval-example0") << bd.dump();
  EXPECT_EQ(bd.at("error").value("kind", ""), "model_run") << bd.dump();
  EXPECT_EQ(mm(run.rep()).value("batchdep.alone_raises", false), true);
  EXPECT_EQ(mm(run.rep()).value("batchdep.first_layer", ""), "bn");
  const auto f = nde2e::finding_pairs(run.rep());
  EXPECT_TRUE(f.count({"BN005", "bn"})) << run.rep().at("findings").dump(1);
  // Forward statistics of the train pass stand.
  const json& fc1 = layer_metrics(run.rep(), "fc1");
  EXPECT_TRUE(fc1.contains("act.rms")) << fc1.dump();
  EXPECT_FALSE(fc1.contains("grad.out_norm"));
  // The text report lists the probes that could not run.
  nde2e::TempDir tmp;
  const auto t = nde2e::run_nd({"check", rmodel("argmax_batch_stats.pt"), "--input", rmodel("argmax_batch_stats.input.pt")});
  EXPECT_NE(t.out.find("probes that could not run"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("batch_dependence (error): failed in pass eval-example0 (model_run)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("gradients (skipped)"), std::string::npos) << t.out;
}

// Its healthy twin: the same class-id output, running statistics estimated
// on batches of 64 (--train-batch-size says so: at the sample batch of 8,
// BN007 rightly warns that BatchNorm1d's batch mean is noisy): no finding,
// exit 0, only the gradients skipped (and no GRAD004: no backward ran, so no
// parameter is reported without gradient).
TEST(E2ERobustNoGradient, ArgmaxHealthyTwin) {
  const RobustRun run = check("argmax_healthy", {rmodel("argmax_healthy.input.pt")},
                              {"--fail-on", "warning", "--train-batch-size", "64"});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(run.r.exit_code, 0) << run.rep().at("findings").dump(1);
  expect_probe_status(run.rep(), {}, {"gradients"});
  EXPECT_TRUE(mm(run.rep()).contains("batchdep.max_rel_diff"));
  EXPECT_LT(nde2e::as_number(mm(run.rep()).at("batchdep.max_rel_diff")), 1e-4);
  expect_outputs_match_python(run.rep(), robust_manifest().at("fixtures").at("argmax_healthy").at("modules"));
}

// ---------------------------------------------------------------- 15.4

// Traced LlamaRMSNorm returns (output, hidden_states.to(float32)): act.rms
// is the output's (about 1), the float copy of the input is listed.
TEST(E2ERobustOutputs, TracedRMSNormReportsItsOutput) {
  const RobustRun run = check("llama_rmsnorm_traced", {rmodel("llama_rmsnorm_traced.input.pt")});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  expect_probe_status(run.rep());
  expect_outputs_match_python(run.rep(), robust_manifest().at("fixtures").at("llama_rmsnorm_traced").at("modules"));
  const json& n = layer_metrics(run.rep(), "layers.0.input_layernorm");
  ASSERT_TRUE(n.contains("act.outputs")) << n.dump();
  ASSERT_EQ(n.at("act.outputs").size(), 2u) << n.dump();
  int primaries = 0;
  for (const auto& o : n.at("act.outputs")) {
    primaries += o.value("primary", false) ? 1 : 0;
    if (!o.value("primary", false)) {
      EXPECT_LT(nde2e::as_number(o.at("rms")), 0.1) << o.dump();  // the input's scale
    }
  }
  EXPECT_EQ(primaries, 1);
}

// The real file of issue 15: m.layers.0.input_layernorm of the traced HF
// Llama, 0.706 before (two tensors averaged), 0.999 in Python.
TEST(E2ERobustOutputs, RealHFLlamaRMSNorm) {
  const json& want = robust_manifest().at("real").at("hf_llama_tiny").at("modules");
  nde2e::TempDir tmp;
  const auto r = nde2e::check(nde2e::real_models_dir() + "/hf_llama_tiny.pt",
                              {nde2e::real_models_dir() + "/hf_llama_tiny.input.pt"}, {}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  expect_probe_status(r.report);
  expect_outputs_match_python(r.report, want, 2);
}

// ---------------------------------------------------------------- isolation

// A forward that rejects every batch is a model that cannot run at all:
// exit 3, the first pass's error (unchanged contract).
TEST(E2ERobustIsolation, ModelThatCannotRunAtAllIsExit3) {
  nde2e::TempDir tmp;
  const auto r = nde2e::check(nde2e::bad("raises.pt"), {nde2e::bad("x.input.pt")}, {}, tmp.file("r.json"));
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  nde2e::expect_error_report(r, "model_run", "normdoctor fixture: forward raises");
}

}  // namespace

}  // namespace nd_test_e2e_robust_test
