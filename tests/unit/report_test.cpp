// The JSON and text reports: golden files, key order, error reports,
// non-finite numbers, timing isolation, the text layer table.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "report/report.h"
#include "rules/rules.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_report_test {

using ndtest::layer;
using nlohmann::json;

namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

/// A small MLP-like document with growth, a non-finite head and exploding
/// gradients: fires ACT002, ACT003 and GRAD002 of the shipped rules.
nd::MetricsDoc basic_doc() {
  nd::MetricsDoc doc;
  doc.model = {{"path", "examples/mlp.pt"}, {"sha256", "5f1d0c"}, {"kind", "traced"}, {"training", true},
               {"parameters", 12345}};
  nd::InputMetrics x;
  x.name = "x";
  x.index = 0;
  x.info = {{"shape", {4, 16}}, {"dtype", "float32"}, {"source", "batch.pt"}};
  x.metrics = {{"input.is_float", true}, {"input.scale", 1.02}, {"input.nonfinite_count", 0}, {"input.absmax", 3.1}};
  doc.inputs.push_back(x);

  doc.layers.push_back(layer("", "MLP", 5, false));
  doc.layers.back().parameters = 0;
  doc.layers.push_back(layer("fc1", "Linear", 0, true,
                             {{"act.rms", 0.3}, {"act.absmax", 1.2}, {"act.growth", 1.0}, {"grad.out_norm", 0.05},
                              {"grad.param_norm", 5.0}, {"act.fp16_headroom", 54586.0}}));
  doc.layers.back().parameters = 272;
  doc.layers.back().info = {{"in_features", 16}, {"out_features", 16}};
  doc.layers.push_back(layer("act1", "ReLU", 1, true,
                             {{"act.rms", 0.21}, {"act.absmax", 1.2}, {"act.growth", 0.7}, {"act.zero_fraction", 0.5},
                              {"grad.out_norm", 0.04}}));
  doc.layers.push_back(layer("fc2", "Linear", 2, true,
                             {{"act.rms", 450.0}, {"act.absmax", 1800.0}, {"act.growth", 1500.0},
                              {"grad.out_norm", 0.003}, {"act.fp16_headroom", 36.4}}));
  doc.layers.back().parameters = 272;
  doc.layers.push_back(layer("fc3", "Linear", 3, true,
                             {{"act.rms", 9000.0}, {"act.absmax", 40940.0}, {"act.growth", 30000.0},
                              {"grad.out_norm", 0.002}, {"act.fp16_headroom", 1.6}, {"act.fp16_margin", 1.6},
                              {"act.fp16_side", "below"}, {"act.beyond_fp16_count", 0},
                              {"act.absmax_is_mask_constant", false}, {"act.is_returned_loss", false}}));
  doc.layers.back().parameters = 272;
  doc.layers.push_back(layer("head", "Linear", 4, true,
                             {{"act.rms", kNan}, {"act.absmax", kInf}, {"act.nan_count", 0}, {"act.inf_count", 3},
                              {"grad.out_norm", 0.001}, {"grad.param_norm", 0.002}}));
  doc.layers.back().parameters = 34;
  doc.layers.push_back(layer("unused", "Linear", -1, true));
  doc.layers.back().parameters = 17;

  doc.model_metrics = {{"run.precision", "fp32"},
                       {"run.synthetic_inputs", false},
                       {"act.growth_max", 30000.0},
                       {"act.growth_only_at_output", false},
                       {"act.growth_reference_rms", 0.3},
                       {"act.growth_max_layer", "fc3"},
                       {"act.first_beyond_fp16_layer", "none"},
                       {"act.first_beyond_fp16_count", 0},
                       {"grad.input_output_ratio", 2500.0},
                       {"grad.ratio_from_one_norm", false},
                       {"grad.rel_contradicts_exploding", false},
                       {"grad.bn_batch_noise", false},
                       {"grad.growth_between_branches", false},
                       {"grad.profile_shallow", false},
                       {"grad.blocks_contradict_exploding", false},
                       {"grad.first_layer", "fc1"},
                       {"grad.last_layer", "head"},
                       {"grad.first_norm", 5.0},
                       {"grad.last_norm", 0.002},
                       {"grad.rel_ratio", 2500.0},
                       {"grad.rel_first_layer", "fc1"},
                       {"grad.rel_last_layer", "head"},
                       {"grad.rel_first", 0.5},
                       {"grad.rel_last", 0.0002},
                       {"loss.value", 2.31},
                       {"loss.finite", true}};
  doc.probes = {{"loss", "mean of the first output"}, {"forward", {{"taps", 6}}}};
  doc.passes = json::array({{{"name", "train_step"}, {"mode", "train"}, {"seconds", 0.125}},
                            {{"name", "eval"}, {"mode", "eval"}, {"seconds", 0.0625}}});
  doc.assumptions = {"x: batch axis 0"};
  doc.seconds_total = 0.25;
  return doc;
}

std::vector<nd::Finding> basic_findings(const nd::MetricsDoc& doc) {
  return nd::evaluate_rules(nd::load_rules((ndtest::source_dir() / "rules").string()), doc);
}

nd::ReportContext basic_ctx() {
  nd::ReportContext ctx;
  ctx.tool_version = "0.1.0";
  ctx.libtorch_version = "1.13.1";
  ctx.exit_code = 1;
  ctx.options = {{"fail_on", "warning"}, {"format", "json"}, {"seed", 0}};
  return ctx;
}

std::vector<std::string> keys(const nd::ReportJson& o) {
  std::vector<std::string> out;
  for (const auto& [k, v] : o.items()) out.push_back(k);
  return out;
}

/// Paths of every key named `name` in `v`, outside the top-level `timing`.
void find_key(const nd::ReportJson& v, const std::string& name, const std::string& at, std::vector<std::string>& out) {
  if (v.is_object()) {
    for (const auto& [k, e] : v.items()) {
      if (at.empty() && k == "timing") continue;
      if (k == name) out.push_back(at + "/" + k);
      find_key(e, name, at + "/" + k, out);
    }
  } else if (v.is_array()) {
    for (std::size_t i = 0; i < v.size(); ++i) find_key(v[i], name, at + "/" + std::to_string(i), out);
  }
}

}  // namespace

TEST(JsonReport, Golden) {
  const nd::MetricsDoc doc = basic_doc();
  const auto findings = basic_findings(doc);
  ndtest::expect_golden("report_basic.json", nd::dump_json_report(nd::build_json_report(doc, findings, basic_ctx())));
}

TEST(JsonReport, KeyOrderAndFindings) {
  const nd::MetricsDoc doc = basic_doc();
  const auto r = nd::build_json_report(doc, basic_findings(doc), basic_ctx());
  EXPECT_EQ(keys(r), (std::vector<std::string>{"schema_version", "tool", "status", "model", "inputs", "layers",
                                               "probes", "findings", "skipped_rules", "summary", "options", "config", "exit_code",
                                               "timing"}));
  EXPECT_EQ(r["schema_version"], nd::kReportSchemaVersion);
  EXPECT_EQ(r["tool"], (nd::ReportJson{{"name", "normdoctor"}, {"version", "0.1.0"}, {"libtorch", "1.13.1"}}));
  EXPECT_EQ(keys(r["model"]), (std::vector<std::string>{"path", "sha256", "kind", "training", "parameters"}));
  EXPECT_EQ(keys(r["inputs"][0]), (std::vector<std::string>{"name", "index", "shape", "dtype", "source", "metrics"}));
  EXPECT_EQ(keys(r["layers"][0]),
            (std::vector<std::string>{"path", "kind", "exec_order", "leaf", "parameters", "info", "metrics"}));
  // doc.probes is a nlohmann::json object (sorted keys); the report's own keys follow it.
  EXPECT_EQ(keys(r["probes"]), (std::vector<std::string>{"forward", "loss", "model_metrics", "passes", "assumptions"}));

  ASSERT_EQ(r["findings"].size(), 3u);
  const auto& f = r["findings"];
  EXPECT_EQ(keys(f[0]), (std::vector<std::string>{"rule_id", "failure_mode", "severity", "layer", "message",
                                                  "evidence", "fix", "synthetic_inputs"}));
  EXPECT_EQ(f[0]["rule_id"], "ACT002");
  EXPECT_EQ(f[0]["layer"], "fc2");
  EXPECT_EQ(f[0]["evidence"]["matched_layers"], 2);
  EXPECT_EQ(f[1]["rule_id"], "ACT003");
  EXPECT_EQ(f[1]["layer"], "fc3");
  EXPECT_EQ(f[2]["rule_id"], "GRAD002");
  EXPECT_EQ(f[2]["layer"], "fc1");
  EXPECT_EQ(r["summary"], (nd::ReportJson{{"error", 0}, {"warning", 3}, {"info", 0}, {"total", 3}, {"hidden", 0},
                                         {"suppressed", 0}}));
  EXPECT_EQ(r["exit_code"], 1);
  EXPECT_EQ(r["status"], "ok");
  EXPECT_FALSE(r.contains("error"));
}

TEST(JsonReport, InputFindingsCarryTheInputName) {
  nd::MetricsDoc doc = basic_doc();
  nd::Finding f;
  f.rule_id = "IN002";
  f.failure_mode = "input-scale";
  f.input = "x";
  const auto r = nd::build_json_report(doc, {f}, basic_ctx());
  EXPECT_EQ(r["findings"][0]["layer"], nullptr);
  EXPECT_EQ(r["findings"][0]["input"], "x");
  EXPECT_EQ(keys(r["findings"][0]), (std::vector<std::string>{"rule_id", "failure_mode", "severity", "layer", "input",
                                                             "message", "evidence", "fix", "synthetic_inputs"}));
}

TEST(JsonReport, NonFiniteNumbersAreStrings) {
  nd::MetricsDoc doc = basic_doc();
  doc.model_metrics["m.neg"] = -kInf;
  const auto r = nd::build_json_report(doc, {}, basic_ctx());
  const auto& head = r["layers"][5];
  ASSERT_EQ(head["path"], "head");
  EXPECT_EQ(head["metrics"]["act.rms"], "nan");
  EXPECT_EQ(head["metrics"]["act.absmax"], "inf");
  EXPECT_EQ(r["probes"]["model_metrics"]["m.neg"], "-inf");
  const std::string text = nd::dump_json_report(r);
  EXPECT_EQ(text.find("null,"), std::string::npos);  // nlohmann would write NaN as null
  EXPECT_EQ(json::parse(text)["layers"][5]["metrics"]["act.rms"], "nan");
}

TEST(JsonReport, TimeOnlyUnderTiming) {
  const nd::MetricsDoc doc = basic_doc();
  const auto r = nd::build_json_report(doc, basic_findings(doc), basic_ctx());
  std::vector<std::string> found;
  find_key(r, "seconds", "", found);
  find_key(r, "seconds_total", "", found);
  EXPECT_TRUE(found.empty()) << found[0];
  EXPECT_EQ(r["probes"]["passes"], (nd::ReportJson::array({{{"name", "train_step"}, {"mode", "train"}},
                                                           {{"name", "eval"}, {"mode", "eval"}}})));
  EXPECT_EQ(r["timing"], (nd::ReportJson{{"seconds_total", 0.25},
                                         {"passes", nd::ReportJson::array({{{"name", "train_step"}, {"seconds", 0.125}},
                                                                           {{"name", "eval"}, {"seconds", 0.0625}}})}}));
  // Same document, other timings: identical report outside `timing`.
  nd::MetricsDoc slower = doc;
  slower.seconds_total = 9.5;
  slower.passes[0]["seconds"] = 7.0;
  auto a = nd::build_json_report(doc, {}, basic_ctx());
  auto b = nd::build_json_report(slower, {}, basic_ctx());
  a.erase("timing");
  b.erase("timing");
  EXPECT_EQ(nd::dump_json_report(a), nd::dump_json_report(b));
}

TEST(JsonReport, InvalidUtf8DoesNotThrow) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer(std::string("bad\xff") + "name", "L", 0, true));
  const std::string text = nd::dump_json_report(nd::build_json_report(doc, {}, basic_ctx()));
  EXPECT_NE(text.find("bad\xef\xbf\xbdname"), std::string::npos);
}

TEST(ErrorReport, ShapeWithoutDocument) {
  nd::ReportContext ctx = basic_ctx();
  ctx.error_kind = "model_load";
  ctx.error_message = "model.pt: not a TorchScript archive";
  ctx.exit_code = 3;
  const auto r = nd::build_error_report(nullptr, ctx);
  EXPECT_EQ(keys(r), (std::vector<std::string>{"schema_version", "tool", "status", "error", "model", "inputs", "layers",
                                               "probes", "findings", "skipped_rules", "summary", "options", "config", "exit_code",
                                               "timing"}));
  EXPECT_EQ(r["status"], "error");
  EXPECT_EQ(r["error"], (nd::ReportJson{{"kind", "model_load"}, {"message", "model.pt: not a TorchScript archive"}}));
  EXPECT_EQ(r["model"], nd::ReportJson::object());
  EXPECT_EQ(r["inputs"], nd::ReportJson::array());
  EXPECT_EQ(r["layers"], nd::ReportJson::array());
  EXPECT_EQ(r["probes"], nd::ReportJson::object());
  EXPECT_EQ(r["findings"], nd::ReportJson::array());
  EXPECT_EQ(r["summary"], (nd::ReportJson{{"error", 0}, {"warning", 0}, {"info", 0}, {"total", 0}, {"hidden", 0},
                                         {"suppressed", 0}}));
  EXPECT_EQ(r["config"], nd::ReportJson::object());
  EXPECT_EQ(r["exit_code"], 3);
  EXPECT_EQ(r["timing"], (nd::ReportJson{{"seconds_total", 0.0}, {"passes", nd::ReportJson::array()}}));
}

TEST(ErrorReport, KeepsWhatWasMeasured) {
  const nd::MetricsDoc doc = basic_doc();
  nd::ReportContext ctx = basic_ctx();
  ctx.error_kind = "model_run";
  ctx.error_message = "forward raised: shape mismatch";
  ctx.exit_code = 3;
  const auto r = nd::build_error_report(&doc, ctx);
  EXPECT_EQ(r["status"], "error");
  EXPECT_EQ(r["error"]["kind"], "model_run");
  EXPECT_EQ(r["model"]["path"], "examples/mlp.pt");
  EXPECT_EQ(r["layers"].size(), 7u);
  EXPECT_EQ(r["findings"], nd::ReportJson::array());
  EXPECT_EQ(r["timing"]["seconds_total"], 0.25);
}

TEST(TextReport, Golden) {
  const nd::MetricsDoc doc = basic_doc();
  const auto findings = basic_findings(doc);
  nd::TextOptions opt;
  opt.color = false;
  ndtest::expect_golden("report_basic.txt", nd::render_text(doc, findings, basic_ctx(), opt));
}

TEST(TextReport, ColorOnlyWhenAsked) {
  const nd::MetricsDoc doc = basic_doc();
  const auto findings = basic_findings(doc);
  nd::TextOptions opt;
  opt.color = false;
  EXPECT_EQ(nd::render_text(doc, findings, basic_ctx(), opt).find('\x1b'), std::string::npos);
  opt.color = true;
  const std::string colored = nd::render_text(doc, findings, basic_ctx(), opt);
  EXPECT_NE(colored.find("\x1b[1;33mwarning[ACT002]\x1b[0m activation-growth at \x1b[1mfc2\x1b[0m: "),
            std::string::npos);
}

TEST(TextReport, NoFindingsAndRerunHintLast) {
  nd::MetricsDoc doc = basic_doc();
  nd::ReportContext ctx = basic_ctx();
  ctx.rerun_hint = "inputs were synthesized; rerun with --input batch.pt for real measurements";
  const std::string text = nd::render_text(doc, {}, ctx, nd::TextOptions{});
  EXPECT_NE(text.find("\nno findings\n"), std::string::npos);
  const std::string tail = "\n0 errors, 0 warnings, 0 info\n" + ctx.rerun_hint + "\n";
  ASSERT_GE(text.size(), tail.size());
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail);
}

TEST(TextReport, SummaryCountsAndGrouping) {
  nd::Finding info, err, warn;
  info.rule_id = "I001";
  info.severity = nd::Severity::kInfo;
  err.rule_id = "E001";
  err.severity = nd::Severity::kError;
  warn.rule_id = "W001";
  warn.severity = nd::Severity::kWarning;
  nd::TextOptions opt;
  opt.show_layers = false;
  const std::string text = nd::render_text(nd::MetricsDoc{}, {info, err, warn, err}, basic_ctx(), opt);
  EXPECT_NE(text.find("\n2 errors, 1 warning, 1 info\n"), std::string::npos);
  // Grouped by severity although given out of order.
  const auto e = text.find("error[E001]"), w = text.find("warning[W001]"), i = text.find("info[I001]");
  ASSERT_NE(e, std::string::npos);
  EXPECT_LT(e, w);
  EXPECT_LT(w, i);
  EXPECT_EQ(text.find("layers (leaf"), std::string::npos);
}

TEST(TextReport, ErrorStatusIsShown) {
  nd::ReportContext ctx = basic_ctx();
  ctx.status = "error";
  ctx.error_kind = "model_run";
  ctx.error_message = "forward raised";
  const std::string text = nd::render_text(nd::MetricsDoc{}, {}, ctx, nd::TextOptions{});
  EXPECT_NE(text.find("\nnormdoctor failed (model_run): forward raised\n"), std::string::npos);
  EXPECT_EQ(text.find("no findings"), std::string::npos);
}

TEST(TextReport, LongTablesAreElided) {
  nd::MetricsDoc doc;
  for (int i = 0; i < 100; ++i)
    doc.layers.push_back(layer("blocks." + std::to_string(i) + ".fc", "Linear", i, true,
                               {{"act.rms", std::pow(10.0, i / 20.0)}, {"act.absmax", 1.0}}));
  nd::Finding f;
  f.rule_id = "ACT002";
  f.failure_mode = "activation-growth";
  f.layer = "blocks.50.fc";
  const std::string text = nd::render_text(doc, {f}, basic_ctx(), nd::TextOptions{});
  EXPECT_NE(text.find("  blocks.9.fc "), std::string::npos);
  EXPECT_EQ(text.find("  blocks.10.fc "), std::string::npos);
  EXPECT_NE(text.find("  ... 40 rows elided ...\n"), std::string::npos);  // 10..49
  EXPECT_NE(text.find("  ... 39 rows elided ...\n"), std::string::npos);  // 51..89
  EXPECT_NE(text.find(" blocks.50.fc "), std::string::npos);
  EXPECT_NE(text.find("  ACT002\n"), std::string::npos);
  EXPECT_NE(text.find("  blocks.99.fc "), std::string::npos);
  EXPECT_NE(text.find("(79 of 100 rows elided; kept the first and last 10 and every row with a finding)"),
            std::string::npos);
}

// act.* statistics are over the finite values; a layer whose output holds
// -inf (log of a zero mel bin, eval29 C01) must not show a finite maximum in
// the table, and the table says what the marks mean. The layer table also
// says which pass it measures.
TEST(TextReport, NonFiniteOutputsShowInTheTable) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("cmvn", "GlobalCMVN", 0, true,
                             {{"act.rms", 0.4}, {"act.absmax", 1.15}, {"act.inf_count", 8447}, {"act.nan_count", 0}}));
  doc.layers.push_back(layer("conv", "Conv2d", 1, true,
                             {{"act.rms", 0.0}, {"act.absmax", 0.0}, {"act.inf_count", 0}, {"act.nan_count", 120},
                              {"grad.out_norm", 0.0}, {"grad.out_nonfinite_count", 5}}));
  doc.layers.push_back(layer("fc", "Linear", 2, true, {{"act.rms", 0.5}, {"act.absmax", 2.0}}));
  doc.probes["layers"] = {{"pass", "train"}, {"description", "the train pass (train mode)"}};
  const std::string text = nd::render_text(doc, {}, basic_ctx(), nd::TextOptions{});
  auto row = [&](const std::string& path) {
    const auto at = text.find("  " + path + " ");
    return at == std::string::npos ? std::string() : text.substr(at, text.find('\n', at) - at);
  };
  EXPECT_NE(row("cmvn").find(" inf "), std::string::npos) << text;
  EXPECT_EQ(row("cmvn").find("1.15"), std::string::npos) << text;
  EXPECT_NE(row("conv").find(" nan "), std::string::npos) << text;
  EXPECT_NE(row("fc").find(" 2 "), std::string::npos) << text;
  EXPECT_NE(text.find("(inf, nan: the tensor held non-finite values"), std::string::npos) << text;
  EXPECT_NE(text.find("leaf modules in execution order; measured in the train pass (train mode)"), std::string::npos);
}

TEST(TextReport, TableMarksEveryRuleOnALayer) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("norm", "LayerNorm", 0, true, {{"act.rms", 1.0}}));
  nd::Finding a, b, again;
  a.rule_id = "NORM001";
  a.layer = "norm";
  b.rule_id = "ACT002";
  b.layer = "norm";
  b.severity = nd::Severity::kError;
  again = a;
  const std::string text = nd::render_text(doc, {a, b, again}, basic_ctx(), nd::TextOptions{});
  EXPECT_NE(text.find("  ACT002,NORM001\n"), std::string::npos) << text;
}

TEST(TextReport, PrecisionSectionWhenAFormatWasChecked) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("norm", "LayerNorm", 0, true,
                             {{"act.rms", 0.9}, {"norm.eps", 1e-12}, {"prec.eps_in_format", 0.0},
                              {"prec.norm_rows", 24}, {"prec.norm_zero_rows", 4}, {"prec.norm_nonfinite_count", 64},
                              {"prec.norm_sumsq_headroom", 2554.0}}));
  doc.layers.push_back(layer("proj", "Linear", 1, true, {{"act.rms", 0.5}}));
  nd::TextOptions opt;
  opt.color = false;
  // fp32: no section.
  EXPECT_EQ(nd::render_text(doc, {}, basic_ctx(), opt).find("precision "), std::string::npos);
  doc.model_metrics = {{"prec.format", "fp16"},
                       {"prec.mode", "emulated"},
                       {"prec.native_error", "\"LayerNormKernelImpl\" not implemented for 'Half'"},
                       {"prec.native_missing_op", "LayerNormKernelImpl (no Half kernel)"},
                       {"prec.first_nonfinite_layer", "norm"},
                       {"prec.first_nonfinite_cause", "norm-eps"},
                       {"prec.output_rel_error", 0.0004},
                       {"prec.loss_scale_blocked_by", "norm"}};
  const std::string text = nd::render_text(doc, {}, basic_ctx(), opt);
  EXPECT_NE(text.find("\nprecision fp16 (emulated run; native fp16 could not run: LayerNormKernelImpl (no Half "
                      "kernel))\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  first non-finite module: norm (norm-eps)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  loss scale: none helps, the forward pass is already non-finite at norm\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("  norm      1e-12          0          4          64            2554\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("  proj "), text.find("  proj  Linear"));  // proj is in the layer table only
}

}  // namespace nd_test_report_test
