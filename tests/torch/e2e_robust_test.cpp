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

namespace {

using nde2e::json;

std::string rmodel(const std::string& name) { return nde2e::model("robust/" + name); }

const json& robust_manifest() {
  static const json m = json::parse(nde2e::read_file(rmodel("manifest.json")));
  return m;
}

struct Run {
  nde2e::NdRun r;
  const json& rep() const { return r.report; }
};

Run check(const std::string& name, const std::vector<std::string>& inputs, const std::vector<std::string>& extra = {}) {
  nde2e::TempDir tmp;
  std::vector<std::string> in;
  for (const auto& i : inputs) in.push_back(i);
  Run run{nde2e::check(rmodel(name + ".pt"), in, extra, tmp.file("r.json"))};
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
void expect_outputs_match_python(const json& rep, const json& modules) {
  int compared = 0;
  for (const auto& [path, want] : modules.items()) {
    SCOPED_TRACE("module '" + path + "'");
    const json& m = layer_metrics(rep, path);
    ASSERT_TRUE(m.contains("act.rms")) << "no act.rms";
    EXPECT_TRUE(nde2e::near_rel("act.rms", nde2e::as_number(m.at("act.rms")), want.at("rms").get<double>(), 1e-4));
    EXPECT_TRUE(nde2e::near_rel("act.absmax", nde2e::as_number(m.at("act.absmax")), want.at("absmax").get<double>(), 1e-4));
    ++compared;
  }
  EXPECT_GE(compared, 3);
}

// ---------------------------------------------------------------- 15.1

// forward(input_ids, attention_mask=None, position_ids=None, scale=1.0,
// output_hidden_states=False, pool_dim=1) given input_ids only: the graph
// gets the schema's defaults.
TEST(E2ERobustSignature, DefaultsFromTheSchema) {
  const Run run = check("hf_optional_args", {rmodel("hf_optional_args.input.pt")});
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
  const Run run = check("hf_optional_args", {rmodel("hf_optional_args.gap.input.pt")});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(run.rep().value("status", ""), "ok") << run.r.describe();
  const json& inputs = run.rep().at("inputs");
  ASSERT_GE(inputs.size(), 3u) << inputs.dump(1);
  EXPECT_EQ(inputs[1].value("name", ""), "attention_mask");
  EXPECT_EQ(inputs[1].at("info").value("source", ""), "default: None");
  EXPECT_EQ(inputs[2].value("name", ""), "position_ids");
  expect_outputs_match_python(run.rep(), robust_manifest().at("fixtures").at("hf_optional_args").at("gap_modules"));
}

// A dict batch without the required input_ids: exit 2, naming the argument
// and the flag that gives it.
TEST(E2ERobustSignature, MissingRequiredArgumentNamesTheFlag) {
  const Run run = check("hf_optional_args", {rmodel("hf_optional_args.no_ids.input.pt")});
  EXPECT_EQ(run.r.exit_code, 2) << run.r.describe();
  nde2e::expect_error_report(run.r, "usage", "argument 'input_ids'");
  const std::string msg = run.rep().at("error").value("message", "");
  EXPECT_NE(msg.find("--input-shape input_ids="), std::string::npos) << msg;
  EXPECT_NE(msg.find("hf_optional_args.no_ids.input.pt"), std::string::npos) << msg;
}

// ... and the flag works: --input-shape gives the argument the batch lacks.
TEST(E2ERobustSignature, InputShapeGivesWhatTheBatchLacks) {
  const Run run = check("hf_optional_args", {rmodel("hf_optional_args.no_ids.input.pt")},
                        {"--input-shape", "input_ids=4x10:int64:0..50"});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  EXPECT_EQ(run.rep().value("status", ""), "ok") << run.r.describe();
  const json& inputs = run.rep().at("inputs");
  ASSERT_GE(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].at("info").value("source", ""), "synthetic:input_ids=4x10:int64:0..50");
}

// ---------------------------------------------------------------- 15.3

// Class ids out (argmax): the forward-only probes run, the gradients are
// skipped with the reason, exit 0/1 (not 3). BatchNorm1d without running
// statistics raises on one example alone in eval mode: evidence for BN005.
TEST(E2ERobustNoGradient, ArgmaxWithBatchStatisticsInEval) {
  const Run run = check("argmax_batch_stats", {rmodel("argmax_batch_stats.input.pt")}, {"--fail-on", "error"});
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
  EXPECT_NE(t.out.find("batch_dependence: error (model_run) in the eval-example0 pass"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("gradients: skipped"), std::string::npos) << t.out;
}

// Its healthy twin: the same class-id output, running statistics estimated:
// no finding, exit 0, only the gradients skipped.
TEST(E2ERobustNoGradient, ArgmaxHealthyTwin) {
  const Run run = check("argmax_healthy", {rmodel("argmax_healthy.input.pt")}, {"--fail-on", "warning"});
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
  const Run run = check("llama_rmsnorm_traced", {rmodel("llama_rmsnorm_traced.input.pt")});
  ASSERT_TRUE(run.r.has_report) << run.r.describe();
  expect_probe_status(run.rep());
  expect_outputs_match_python(run.rep(), robust_manifest().at("fixtures").at("llama_rmsnorm_traced").at("modules"));
  const json& n = layer_metrics(run.rep(), "layers.0.input_layernorm");
  ASSERT_TRUE(n.contains("act.outputs")) << n.dump();
  ASSERT_EQ(n.at("act.outputs").size(), 2u) << n.dump();
  int primaries = 0;
  for (const auto& o : n.at("act.outputs")) {
    primaries += o.value("primary", false) ? 1 : 0;
    if (!o.value("primary", false)) EXPECT_LT(nde2e::as_number(o.at("rms")), 0.1) << o.dump();  // the input's scale
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
  expect_outputs_match_python(r.report, json{{"m.layers.0.input_layernorm", want.at("m.layers.0.input_layernorm")},
                                             {"m.embed_tokens", want.at("m.embed_tokens")},
                                             {"m.layers.0.input_layernorm", want.at("m.layers.0.input_layernorm")}});
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
