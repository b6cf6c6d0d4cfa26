// The report formats (text, JSON, SARIF, JUnit, GitHub annotations): golden
// files of one fixture with findings of every severity, a config with a
// severity override, a used and an unused suppression; validation of JSON and
// SARIF against their schemas; JUnit well-formedness and distinct testcases;
// escaping; failed runs. Regenerate the goldens after an intended change:
//   ND_UPDATE_GOLDEN=1 build/tests/nd_unit_tests --gtest_filter='Formats*Golden*'
#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <sstream>

#include "config/config.h"
#include "json_schema.h"
#include "mini_xml.h"
#include "report/report.h"
#include "rules/rules.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_formats_test {

using ndtest::layer;
using nlohmann::json;

namespace {

nd::Rule rule(const std::string& id, const std::string& slug, nd::Severity sev, const std::string& scope,
              std::vector<nd::Condition> when, const std::string& message) {
  nd::Rule r;
  r.id = id;
  r.failure_mode = slug;
  r.severity = sev;
  r.scope = scope;
  r.when = std::move(when);
  r.message = message;
  r.title = "Title of " + id;
  r.fix = {"first fix of " + id, "second fix of " + id};
  r.references = {"a paper", "threshold: a bug thread"};
  return r;
}

/// The catalog of the fixture (not the shipped rules, so rule-text edits do
/// not churn these goldens).
std::vector<nd::Rule> fixture_rules() {
  std::vector<nd::Rule> rules;
  rules.push_back(rule("ACT001", "nonfinite-forward", nd::Severity::kError, "layer",
                       {{"fwd.first_nonfinite", "==", true}},
                       "{layer} is the first module to output non-finite values ({act.inf_count} inf)"));
  rules.back().evidence = {"act.inf_count"};
  rules.push_back(rule("ACT002", "activation-growth", nd::Severity::kWarning, "layer", {{"act.growth", ">", 1000}},
                       "{layer} output RMS is {act.growth}x that of the first layers"));
  rules.back().select = "first";
  rules.back().evidence = {"act.rms"};
  rules.back().explain =
      "What it detects\nTitle of ACT002. The RMS of a module's output divided by\nthat of the first layers.\n\n"
      "Why it matters\nLater layers saturate.\n\nExample\n    x = x + block(x)\n\nHow to fix\nNormalize.\n\n"
      "When to ignore\nNever.\n";
  rules.push_back(rule("GRAD005", "no-gradient-path", nd::Severity::kInfo, "model", {{"grad.blocked_layers", ">", 0}},
                       "{grad.zero_weight_layer} blocks the gradient of {grad.blocked_layers} layers"));
  rules.back().layer_from = "grad.zero_weight_layer";
  rules.push_back(rule("IN002", "input-scale", nd::Severity::kInfo, "input", {{"input.scale", ">", 10}},
                       "input {input} has scale {input.scale}"));
  rules.push_back(rule("NORM001", "norm-gain-growth", nd::Severity::kWarning, "layer", {{"norm.gain_p99", ">", 10}},
                       "{layer} has gains up to {norm.gain_p99}"));
  rules.push_back(rule("NORM002", "norm-eps-precision", nd::Severity::kWarning, "layer", {{"norm.eps", "<", 1e-7}},
                       "{layer} uses eps {norm.eps}"));
  return rules;
}

nd::MetricsDoc fixture_doc() {
  nd::MetricsDoc doc;
  doc.model = {{"path", "models/mlp.pt"}, {"sha256", "5f1d0c"}, {"kind", "scripted"}, {"training", false},
               {"parameters", 1234}};
  nd::InputMetrics x = ndtest::input("x", 0, {{"input.scale", 127.5}, {"input.is_float", true}});
  x.info = {{"shape", {8, 16}}, {"dtype", "float32"}, {"source", "batch.pt"}};
  doc.inputs.push_back(x);
  doc.layers.push_back(layer("", "MLP", 4, false));
  doc.layers.push_back(layer("fc1", "Linear", 0, true, {{"act.growth", 1.0}, {"act.rms", 0.3}, {"act.absmax", 1.1}}));
  doc.layers.push_back(layer("blocks.0.ln", "LayerNorm", 1, true,
                             {{"norm.gain_p99", 12.0}, {"act.rms", 1.0}, {"norm.eps", 1e-5}}));
  doc.layers.push_back(layer("fc2", "Linear", 2, true, {{"act.growth", 1500.0}, {"act.rms", 450.0}, {"act.absmax", 900.0}}));
  doc.layers.push_back(layer("head", "Linear", 3, true,
                             {{"fwd.first_nonfinite", true}, {"act.inf_count", 3}, {"act.growth", 2000.0}}));
  doc.model_metrics = {{"grad.blocked_layers", 2}, {"grad.zero_weight_layer", "head"}, {"run.precision", "fp32"}};
  doc.passes = json::array({{{"name", "train_step"}, {"mode", "train"}, {"seconds", 0.5}}});
  doc.seconds_total = 0.75;
  return doc;
}

struct Fixture {
  nd::MetricsDoc doc;
  std::vector<nd::Rule> rules;  ///< evaluated (after the config)
  std::vector<nd::Finding> findings;
  nd::ReportContext ctx;
};

/// The CLI's path through config, rules and suppressions, on the fixture.
Fixture fixture() {
  Fixture fx;
  fx.doc = fixture_doc();
  const std::vector<nd::Rule> all = fixture_rules();
  nd::Config cfg;
  cfg.file = "normdoctor.toml";
  cfg.severity_overrides["IN002"] = nd::Severity::kWarning;
  cfg.suppressions.push_back({"NORM001", "blocks.*", "the blocks' gains are reset by the warm-up", 7, 0, ""});
  cfg.suppressions.push_back({"GRAD", "decoder.*", "no decoder any more", 12, 0, ""});
  fx.rules = nd::apply_config(all, cfg);
  fx.findings = nd::evaluate_rules(fx.rules, fx.doc);
  fx.ctx.tool_version = "0.1.0";
  fx.ctx.libtorch_version = "1.13.1";
  fx.ctx.model_path = "models/mlp.pt";
  fx.ctx.suppressed = nd::suppress_findings(fx.findings, cfg.suppressions);
  fx.ctx.default_severity["IN002"] = nd::Severity::kInfo;
  fx.ctx.config = nd::config_json(cfg, fx.rules, all, "info", "warning");
  fx.ctx.options = {{"fail_on", "warning"}, {"seed", 0}};
  fx.ctx.exit_code = 1;
  for (const auto& s : cfg.suppressions)
    if (s.matched == 0)
      fx.ctx.notes.push_back({cfg.file, s.line, "suppression of " + s.rule + " on modules '" + s.module +
                                                    "' matched no finding; remove it if the problem is gone"});
  return fx;
}

std::string render(const std::string& format, const Fixture& fx) {
  return nd::render_report(format, &fx.doc, fx.findings, fx.rules, fx.ctx, nd::TextOptions{});
}

const ndtest::JsonSchema& sarif_schema() {
  static const ndtest::JsonSchema s(
      json::parse(ndtest::read_file(ndtest::source_dir() / "tests" / "schemas" / "sarif-schema-2.1.0.json")));
  return s;
}

json report_schema_json() { return json::parse(ndtest::read_file(ndtest::source_dir() / "docs" / "report.schema.json")); }

const ndtest::JsonSchema& report_schema() {
  static const ndtest::JsonSchema s(report_schema_json());
  return s;
}

nd::ReportContext failed_ctx() {
  nd::ReportContext ctx;
  ctx.tool_version = "0.1.0";
  ctx.libtorch_version = "1.13.1";
  ctx.model_path = "models/missing.pt";
  ctx.status = "error";
  ctx.error_kind = "model_load";
  ctx.error_message = "models/missing.pt: no such file";
  ctx.exit_code = 3;
  return ctx;
}

}  // namespace

TEST(Formats, FixtureHasFindingsOfEverySeverity) {
  const Fixture fx = fixture();
  std::set<nd::Severity> seen;
  for (const auto& f : fx.findings) seen.insert(f.severity);
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(fx.findings.size(), 4u);
  EXPECT_EQ(fx.ctx.suppressed, 1);  // NORM001 on blocks.0.ln
  EXPECT_EQ(fx.ctx.notes.size(), 1u);
  EXPECT_EQ(nd::report_formats(), (std::vector<std::string>{"text", "json", "sarif", "junit", "github", "html"}));
}

TEST(Formats, TextGolden) { ndtest::expect_golden("formats.txt", render("text", fixture())); }
TEST(Formats, JsonGolden) { ndtest::expect_golden("formats.json", render("json", fixture())); }
TEST(Formats, SarifGolden) { ndtest::expect_golden("formats.sarif", render("sarif", fixture())); }
TEST(Formats, JunitGolden) { ndtest::expect_golden("formats.junit.xml", render("junit", fixture())); }
TEST(Formats, GithubGolden) { ndtest::expect_golden("formats.github.txt", render("github", fixture())); }

TEST(JsonSchemaValidator, CatchesViolations) {
  const ndtest::JsonSchema s(json::parse(R"({
    "type": "object", "required": ["a"], "additionalProperties": false,
    "properties": {"a": {"$ref": "#/definitions/pos"}, "b": {"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": true},
                   "c": {"type": "string", "pattern": "^x"}, "d": {"anyOf": [{"type": "null"}, {"minimum": 3}]}},
    "definitions": {"pos": {"type": "integer", "minimum": 1}}})"));
  EXPECT_TRUE(s.validate(json::parse(R"({"a": 1, "b": [1, 2], "c": "xy", "d": 4})")).empty());
  EXPECT_EQ(s.validate(json::parse(R"({"a": 0})")), std::vector<std::string>{"/a: 0 < minimum 1"});
  EXPECT_EQ(s.validate(json::parse(R"({"a": 1.5})")).size(), 1u);
  EXPECT_EQ(s.validate(json::parse(R"({})")), std::vector<std::string>{": missing required property 'a'"});
  EXPECT_EQ(s.validate(json::parse(R"({"a": 1, "e": 0})")), std::vector<std::string>{": property 'e' is not allowed"});
  EXPECT_EQ(s.validate(json::parse(R"({"a": 1, "b": [1, 3, 1]})")).size(), 2u);
  EXPECT_EQ(s.validate(json::parse(R"({"a": 1, "c": "yx"})")).size(), 1u);
  EXPECT_EQ(s.validate(json::parse(R"({"a": 1, "d": 2})")).size(), 1u);
  EXPECT_THROW(ndtest::JsonSchema(json::parse(R"({"if": {}})")).validate(1), std::runtime_error);
}

TEST(Formats, SarifValidatesAndCarriesWhatCodeScanningNeeds) {
  const Fixture fx = fixture();
  const json log = json::parse(render("sarif", fx));
  const auto errors = sarif_schema().validate(log);
  EXPECT_TRUE(errors.empty()) << ndtest::join_errors(errors);

  EXPECT_EQ(log["version"], "2.1.0");
  ASSERT_EQ(log["runs"].size(), 1u);
  const json& run = log["runs"][0];
  const json& driver = run["tool"]["driver"];
  EXPECT_EQ(driver["name"], "normdoctor");
  ASSERT_EQ(driver["rules"].size(), fx.rules.size());
  for (std::size_t i = 0; i < fx.rules.size(); ++i) {
    const json& d = driver["rules"][i];
    SCOPED_TRACE(fx.rules[i].id);
    EXPECT_EQ(d["id"], fx.rules[i].id);
    EXPECT_EQ(d["name"], fx.rules[i].failure_mode);
    EXPECT_FALSE(d["shortDescription"]["text"].get<std::string>().empty());
    EXPECT_FALSE(d["fullDescription"]["text"].get<std::string>().empty());
    EXPECT_FALSE(d["help"]["text"].get<std::string>().empty());
    EXPECT_TRUE(d["defaultConfiguration"]["level"].is_string());
  }
  EXPECT_EQ(driver["rules"][1]["fullDescription"]["text"],
            "Title of ACT002. The RMS of a module's output divided by that of the first layers.");
  // The configured severity of IN002 is an override of its default.
  const json& in2 = driver["rules"][3];
  EXPECT_EQ(in2["defaultConfiguration"]["level"], "note");
  EXPECT_EQ(run["invocations"][0]["ruleConfigurationOverrides"][0]["configuration"]["level"], "warning");
  EXPECT_EQ(run["invocations"][0]["executionSuccessful"], true);
  EXPECT_EQ(run["invocations"][0]["exitCode"], 1);

  const json& results = run["results"];
  ASSERT_EQ(results.size(), fx.findings.size());
  std::set<std::string> fingerprints;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const json& r = results[i];
    const nd::Finding& f = fx.findings[i];
    SCOPED_TRACE(f.rule_id);
    EXPECT_EQ(r["ruleId"], f.rule_id);
    EXPECT_EQ(driver["rules"][r["ruleIndex"].get<std::size_t>()]["id"], f.rule_id);
    EXPECT_EQ(r["level"], f.severity == nd::Severity::kError     ? "error"
                          : f.severity == nd::Severity::kWarning ? "warning"
                                                                 : "note");
    EXPECT_EQ(r["message"]["text"].get<std::string>().rfind(f.message, 0), 0u);
    ASSERT_EQ(r["locations"].size(), 1u);
    const json& loc = r["locations"][0];
    EXPECT_EQ(loc["physicalLocation"]["artifactLocation"]["uri"], "models/mlp.pt");
    EXPECT_EQ(loc["physicalLocation"]["region"]["startLine"], 1);
    if (f.layer) {
      EXPECT_EQ(loc["logicalLocations"][0]["fullyQualifiedName"], *f.layer);
    }
    ASSERT_TRUE(r["partialFingerprints"].is_object());
    fingerprints.insert(r["partialFingerprints"]["normdoctor/v1"].get<std::string>());
  }
  EXPECT_EQ(fingerprints.size(), results.size()) << "every finding has its own fingerprint";
  // Stable: the same report again gives the same fingerprints.
  EXPECT_EQ(json::parse(render("sarif", fixture()))["runs"][0]["results"][0]["partialFingerprints"],
            results[0]["partialFingerprints"]);
  // The unused suppression is a configuration notification pointing at its line.
  const json& note = run["invocations"][0]["toolConfigurationNotifications"][0];
  EXPECT_EQ(note["locations"][0]["physicalLocation"]["region"]["startLine"], 12);
}

TEST(Formats, SarifOfAFailedRunValidates) {
  const json log = json::parse(nd::render_report("sarif", nullptr, {}, fixture_rules(), failed_ctx(), {}));
  const auto errors = sarif_schema().validate(log);
  EXPECT_TRUE(errors.empty()) << ndtest::join_errors(errors);
  const json& inv = log["runs"][0]["invocations"][0];
  EXPECT_EQ(inv["executionSuccessful"], false);
  EXPECT_EQ(inv["exitCode"], 3);
  EXPECT_EQ(inv["toolExecutionNotifications"][0]["message"]["text"], "models/missing.pt: no such file");
  EXPECT_EQ(inv["toolExecutionNotifications"][0]["descriptor"]["id"], "model_load");
  EXPECT_TRUE(log["runs"][0]["results"].empty());
}

TEST(Formats, SarifUriOfAbsoluteAndOddPaths) {
  Fixture fx = fixture();
  fx.doc.model["path"] = "/srv/models/my model#1.pt";
  const json log = json::parse(render("sarif", fx));
  EXPECT_EQ(log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "file:///srv/models/my%20model%231.pt");
  EXPECT_TRUE(sarif_schema().validate(log).empty());
}

TEST(Formats, JsonValidatesAgainstTheReportSchema) {
  const Fixture fx = fixture();
  const auto errors = report_schema().validate(json::parse(render("json", fx)));
  EXPECT_TRUE(errors.empty()) << ndtest::join_errors(errors);
  // schema_version follows the schema file.
  EXPECT_EQ(report_schema_json()["definitions"]["report"]["properties"]["schema_version"]["const"], nd::kReportSchemaVersion);
  // A failed run too, with and without what was measured.
  const auto failed = report_schema().validate(json::parse(nd::render_report("json", nullptr, {}, {}, failed_ctx(), {})));
  EXPECT_TRUE(failed.empty()) << ndtest::join_errors(failed);
  const auto partial = report_schema().validate(json::parse(nd::render_report("json", &fx.doc, {}, {}, failed_ctx(), {})));
  EXPECT_TRUE(partial.empty()) << ndtest::join_errors(partial);
}

TEST(Formats, JsonRecordsTheEffectiveConfiguration) {
  const json r = json::parse(render("json", fixture()));
  EXPECT_EQ(r["summary"], (json{{"error", 1}, {"warning", 2}, {"info", 1}, {"total", 4}, {"hidden", 0}, {"suppressed", 1}}));
  EXPECT_EQ(r["config"]["file"], "normdoctor.toml");
  EXPECT_EQ(r["config"]["fail_on"], "warning");
  EXPECT_EQ(r["config"]["severity_overrides"][0], (json{{"rule", "IN002"}, {"severity", "warning"}, {"default", "info"}}));
  EXPECT_EQ(r["config"]["suppressions"][0]["matched"], 1);
  EXPECT_EQ(r["config"]["suppressions"][1]["unused"], true);
}

TEST(Formats, JunitParsesAndKeepsEveryFindingDistinct) {
  const Fixture fx = fixture();
  const auto root = ndtest::xml::parse(render("junit", fx));
  ASSERT_EQ(root->name, "testsuites");
  const auto* suite = root->first("testsuite");
  ASSERT_NE(suite, nullptr);
  const auto cases = suite->all("testcase");
  std::set<std::string> names;
  std::vector<std::string> failure_bodies;
  for (const auto* c : cases) {
    EXPECT_TRUE(names.insert(c->attr("name")).second) << "duplicate testcase " << c->attr("name");
    if (const auto* f = c->first("failure")) failure_bodies.push_back(f->text);
  }
  // Rules without findings pass: ACT001..NORM002 minus those with findings.
  EXPECT_TRUE(names.count("NORM001"));  // its only finding was suppressed
  EXPECT_TRUE(names.count("NORM002"));
  EXPECT_TRUE(names.count("ACT002 fc2"));
  EXPECT_TRUE(names.count("IN002 input x"));
  EXPECT_TRUE(names.count("GRAD005 head"));
  ASSERT_EQ(failure_bodies.size(), fx.findings.size());
  std::set<std::string> expected;
  for (const auto& f : fx.findings) expected.insert(nd::finding_text(f));
  EXPECT_EQ(std::set<std::string>(failure_bodies.begin(), failure_bodies.end()), expected);
  EXPECT_EQ(suite->attr("tests"), std::to_string(cases.size()));
  EXPECT_EQ(suite->attr("failures"), std::to_string(fx.findings.size()));
  EXPECT_EQ(root->attr("failures"), std::to_string(fx.findings.size()));
}

TEST(Formats, JunitNamesStayUniqueAndHiddenRulesAreSkipped) {
  Fixture fx = fixture();
  fx.findings.push_back(fx.findings[0]);  // the same rule on the same module twice
  fx.ctx.hidden_rules = {"NORM002"};
  fx.ctx.severity = "warning";
  const auto root = ndtest::xml::parse(render("junit", fx));
  std::set<std::string> names;
  for (const auto* c : root->first("testsuite")->all("testcase")) {
    EXPECT_TRUE(names.insert(c->attr("name")).second) << c->attr("name");
    if (c->attr("name") == "NORM002") {
      EXPECT_NE(c->first("skipped"), nullptr);
    }
  }
  EXPECT_TRUE(names.count("ACT001 head (2)"));
}

TEST(Formats, JunitOfAFailedRun) {
  const auto root = ndtest::xml::parse(nd::render_report("junit", nullptr, {}, fixture_rules(), failed_ctx(), {}));
  const auto* suite = root->first("testsuite");
  ASSERT_NE(suite, nullptr);
  EXPECT_EQ(suite->attr("errors"), "1");
  const auto cases = suite->all("testcase");
  ASSERT_EQ(cases.size(), 1u);
  ASSERT_NE(cases[0]->first("error"), nullptr);
  EXPECT_EQ(cases[0]->first("error")->attr("type"), "model_load");
}

TEST(Formats, EscapingInEveryFormat) {
  Fixture fx = fixture();
  nd::Finding f;
  f.rule_id = "ACT001";
  f.failure_mode = "nonfinite-forward";
  f.severity = nd::Severity::kError;
  f.layer = std::string("blocks[\"a,b\"]:<x>&y'\x01") + "\xff";
  f.message = "100% bad\nsecond line";
  f.evidence = {{"act.inf_count", 3}, {"act.rms", std::numeric_limits<double>::quiet_NaN()}};
  f.fix = {"a fix, with: punctuation"};
  fx.findings = {f};

  const auto root = ndtest::xml::parse(render("junit", fx));  // throws when malformed
  const auto* failure = root->first("testsuite")->all("testcase")[0];
  ASSERT_NE(failure, nullptr);

  const json log = json::parse(render("sarif", fx));
  EXPECT_TRUE(sarif_schema().validate(log).empty());
  EXPECT_EQ(log["runs"][0]["results"][0]["properties"]["evidence"]["act.rms"], "nan");

  const std::string gh = render("github", fx);
  const auto first_line = gh.substr(0, gh.find('\n'));
  EXPECT_EQ(first_line.rfind("::error file=models/mlp.pt,line=1,title=ACT001 nonfinite-forward at blocks[\"a%2Cb\"]%3A<x>&y'", 0), 0u)
      << first_line;
  EXPECT_NE(first_line.find("::100%25 bad%0Asecond line%0Aevidence: "), std::string::npos) << first_line;
  const std::string json_text = render("json", fx);
  EXPECT_TRUE(report_schema().validate(json::parse(json_text)).empty());
}

TEST(Formats, GithubAnnotations) {
  const Fixture fx = fixture();
  std::istringstream in(render("github", fx));
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), fx.findings.size() + 2);  // findings, the unused-suppression notice, the summary
  EXPECT_EQ(lines[0].rfind("::error file=models/mlp.pt,line=1,title=ACT001 nonfinite-forward at head::", 0), 0u);
  EXPECT_EQ(lines[3].rfind("::notice file=models/mlp.pt,line=1,title=GRAD005 ", 0), 0u);
  EXPECT_EQ(lines[4].rfind("::notice file=normdoctor.toml,line=12,title=normdoctor::suppression of GRAD", 0), 0u);
  EXPECT_EQ(lines[5], "normdoctor: 1 error, 2 warnings, 1 info, 1 suppressed by the config (exit code 1)");
  const std::string failed = nd::render_report("github", nullptr, {}, {}, failed_ctx(), {});
  EXPECT_EQ(failed, "::error title=normdoctor failed (model_load)::models/missing.pt: no such file\n");
}

TEST(Formats, TextShowsConfigHiddenSuppressedAndNotes) {
  Fixture fx = fixture();
  fx.ctx.hidden = 2;
  fx.ctx.severity = "warning";
  const std::string text = render("text", fx);
  EXPECT_NE(text.find("\nconfig  normdoctor.toml\n"), std::string::npos);
  EXPECT_NE(text.find("\n1 error, 2 warnings, 1 info (2 below --severity warning not shown, 1 suppressed by the config)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nnote: normdoctor.toml:12: suppression of GRAD on modules 'decoder.*' matched no finding"),
            std::string::npos);
  // A failed run's text report is the stderr message with its error kind
  // and exit code (written where -o asks; stdout is left to stderr's line).
  EXPECT_EQ(nd::render_report("text", nullptr, {}, {}, failed_ctx(), {}),
            "normdoctor: error (model_load, exit 3): models/missing.pt: no such file\n");
}

TEST(Formats, FindingText) {
  const Fixture fx = fixture();
  EXPECT_EQ(nd::finding_text(fx.findings[1]),
            "warning[ACT002] activation-growth at fc2: fc2 output RMS is 1500x that of the first layers\n"
            "evidence: act.growth=1500, act.rms=450, matched_layers=2\n"
            "fix: 1. first fix of ACT002\n"
            "     2. second fix of ACT002\n"
            "see: normdoctor explain ACT002\n");
}

}  // namespace nd_test_formats_test
