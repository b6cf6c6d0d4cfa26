// The command line in-process (cli_main with a fake engine: no LibTorch, no
// model): the default --fail-on, typos and suggestions, -V, case-insensitive
// rule ids, progress lines in CI, skipped rules in JUnit (validated against
// the Jenkins junit-10 XSD), SARIF suppressions and %SRCROOT% URIs (validated
// against the SARIF 2.1.0 schema), pyproject.toml discovery, suppressions by
// model glob, several models per run, and the HTML report.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <map>
#include <regex>
#include <set>

#include "cli/cli.h"
#include "core/error.h"
#include "json_schema.h"
#include "mini_xml.h"
#include "policy/policy.h"
#include "report/report.h"
#include "rules/rules.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_cli_test {

using nlohmann::json;

namespace {

namespace fs = std::filesystem;

/// A run of cli_main: exit code, stdout, stderr.
struct CliRun {
  int code = -1;
  std::string out, err;
};

/// Captures fd 1 and 2 into files while `fn` runs.
CliRun capture(const std::function<int()>& fn) {
  ndtest::TempDir t;
  const std::string o = (t.path() / "out").string(), e = (t.path() / "err").string();
  std::fflush(stdout);
  std::fflush(stderr);
  const int save_out = ::dup(1), save_err = ::dup(2);
  const int fo = ::open(o.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int fe = ::open(e.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fo, 1);
  ::dup2(fe, 2);
  CliRun r;
  r.code = fn();
  std::cout.flush();
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(save_out, 1);
  ::dup2(save_err, 2);
  ::close(fo);
  ::close(fe);
  ::close(save_out);
  ::close(save_err);
  r.out = ndtest::read_file(o);
  r.err = ndtest::read_file(e);
  return r;
}

/// A metrics document per model file name: growing activations (ACT002 on
/// "layers.2"), an input, no precision/replay probe entries.
nd::MetricsDoc fake_doc(const std::string& model) {
  nd::MetricsDoc doc;
  doc.model = {{"path", model}, {"sha256", "00"}, {"kind", "traced"}, {"training", false}, {"parameters", 100}};
  nd::InputMetrics x = ndtest::input("x", 0, {{"input.scale", 1.0}});
  x.info = {{"shape", {8, 4}}, {"dtype", "Float"}, {"source", "synthetic"}};
  doc.inputs.push_back(x);
  doc.layers.push_back(ndtest::layer("", "Net", 3, false));
  const bool healthy = model.find("healthy") != std::string::npos;
  doc.layers.push_back(ndtest::layer("layers.0", "Linear", 0, true, {{"act.growth", 1.0}, {"act.rms", 0.3}, {"act.absmax", 1.0}, {"grad.out_norm", 0.01}}));
  doc.layers.push_back(ndtest::layer("layers.1", "Linear", 1, true, {{"act.growth", 30.0}, {"act.rms", 9.0}, {"act.absmax", 40.0}, {"grad.out_norm", 0.1}}));
  doc.layers.push_back(ndtest::layer("layers.2.a.very.long.module.path.that.goes.on.and.on.and.on.fc", "Linear", 2, true,
                                     {{"act.growth", healthy ? 2.0 : 5000.0}, {"act.rms", healthy ? 0.6 : 1500.0},
                                      {"act.absmax", healthy ? 2.0 : 90000.0}, {"grad.out_norm", 2.0}}));
  doc.model_metrics = {{"layout.sequence", false}};
  doc.probes = {{"loss", {{"description", "cross_entropy of output against random labels (seed 0)"}}}};
  doc.passes = json::array({{{"name", "train"}, {"mode", "train"}, {"seconds", 0.25}},
                            {{"name", "eval"}, {"mode", "eval"}, {"seconds", 0.125}}});
  return doc;
}

/// The fake engine: reports progress for two passes, throws a model_load
/// error for a file named "broken.pt".
nd::Engine fake_engine() {
  nd::Engine e;
  e.run = [](const nd::CheckOptions& o, const nd::ProgressFn& p) {
    if (fs::path(o.model_path).filename() == "broken.pt")
      throw nd::load_error(nd::error_kind::kModelLoad, o.model_path + ": not a TorchScript archive");
    if (p) {
      p("forward_backward", "train");
      p("normalization", "eval");
    }
    return fake_doc(o.model_path);
  };
  e.libtorch_version = [] { return "9.9.9"; };
  return e;
}

/// Rule files for the tests: ACT002 (forward_backward), PREC001 (precision),
/// REPLAY001 (replay), SEQ001 (padding).
std::string rules_dir(const ndtest::TempDir& t) {
  t.write("rules/ACT002.toml",
          "id = \"ACT002\"\nfailure_mode = \"activation-growth\"\nseverity = \"warning\"\nprobe = \"forward_backward\"\n"
          "when = [ { metric = \"act.growth\", op = \">\", value = 1000 } ]\nmessage = \"{layer} grows {act.growth}x\"\n");
  t.write("rules/PREC001.toml",
          "id = \"PREC001\"\nfailure_mode = \"fp16-overflow-risk\"\nseverity = \"error\"\nprobe = \"precision\"\n"
          "when = [ { metric = \"prec.first_nonfinite\", op = \"==\", value = true } ]\nmessage = \"{layer} overflows\"\n");
  t.write("rules/REPLAY001.toml",
          "id = \"REPLAY001\"\nfailure_mode = \"nonfinite-forward\"\nseverity = \"error\"\nprobe = \"replay\"\nscope = \"model\"\n"
          "when = [ { metric = \"replay.nonfinite\", op = \"==\", value = true } ]\nmessage = \"replay goes non-finite\"\n");
  t.write("rules/SEQ001.toml",
          "id = \"SEQ001\"\nfailure_mode = \"padding-contamination\"\nseverity = \"warning\"\nprobe = \"padding\"\n"
          "when = [ { metric = \"pad.changed\", op = \"==\", value = true } ]\nmessage = \"{layer} reads padding\"\n");
  return (t.path() / "rules").string();
}

/// Runs cli_main with `args` in folder `cwd` (restored afterwards).
CliRun cli(const std::vector<std::string>& args, const fs::path& cwd = fs::current_path()) {
  std::vector<std::string> words = {"normdoctor"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const fs::path before = fs::current_path();
  fs::current_path(cwd);
  const nd::Engine engine = fake_engine();
  CliRun r = capture([&] { return nd::cli_main(static_cast<int>(words.size()), argv.data(), engine); });
  fs::current_path(before);
  return r;
}

struct Env {
  Env() : rules(rules_dir(dir)) {
    ::setenv("NO_COLOR", "1", 1);
  }
  ndtest::TempDir dir;
  std::string rules;
  /// `check` args with the test rules and no config.
  std::vector<std::string> check(std::vector<std::string> extra, bool no_config = true) const {
    std::vector<std::string> a = {"check"};
    a.insert(a.end(), extra.begin(), extra.end());
    a.push_back("--rules-dir");
    a.push_back(rules);
    if (no_config) a.push_back("--no-config");
    return a;
  }
};

const ndtest::JsonSchema& sarif_schema() {
  static const ndtest::JsonSchema s(
      json::parse(ndtest::read_file(ndtest::source_dir() / "tests" / "schemas" / "sarif-schema-2.1.0.json")));
  return s;
}

const ndtest::JsonSchema& report_schema() {
  static const ndtest::JsonSchema s(json::parse(ndtest::read_file(ndtest::source_dir() / "docs" / "report.schema.json")));
  return s;
}

bool have(const std::string& tool) { return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0; }

/// xmllint --schema tests/schemas/junit-10.xsd FILE: "" when valid, else its output.
std::string junit_xsd_errors(const std::string& file) {
  const std::string xsd = (ndtest::source_dir() / "tests" / "schemas" / "junit-10.xsd").string();
  const std::string cmd = "xmllint --noout --schema '" + xsd + "' '" + file + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = ::pclose(p);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? std::string() : out;
}

}  // namespace

// ------------------------------------------------------------ 1. default gate

TEST(CliGate, WarningsFailByDefaultInfoDoesNot) {
  Env env;
  const CliRun r = cli(env.check({"growth.pt"}));
  EXPECT_EQ(r.code, 1) << r.err;  // ACT002 is a warning
  EXPECT_NE(r.out.find("warning[ACT002]"), std::string::npos) << r.out;
  const CliRun h = cli(env.check({"healthy.pt"}));
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(cli(env.check({"growth.pt", "--fail-on", "error"})).code, 0);
  // An info finding never fails by default.
  ndtest::TempDir t;
  t.write("rules/ACT002.toml",
          "id = \"ACT002\"\nfailure_mode = \"activation-growth\"\nseverity = \"info\"\n"
          "when = [ { metric = \"act.growth\", op = \">\", value = 1000 } ]\nmessage = \"{layer} grows\"\n");
  const CliRun i = cli({"check", "growth.pt", "--no-config", "--rules-dir", (t.path() / "rules").string()});
  EXPECT_EQ(i.code, 0) << i.out;
  EXPECT_NE(i.out.find("info[ACT002]"), std::string::npos);
}

// ------------------------------------------------------------ 5. typos

TEST(CliTypos, UnknownCommandSuggestsTheNearest) {
  const CliRun r = cli({"chek", "model.pt"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown command 'chek'; did you mean 'check'?"), std::string::npos) << r.err;
  const CliRun e = cli({"explian", "ACT002"});
  EXPECT_NE(e.err.find("did you mean 'explain'?"), std::string::npos) << e.err;
}

TEST(CliTypos, UnknownFlagSuggestsTheNearestRealFlag) {
  Env env;
  const CliRun r = cli(env.check({"m.pt", "--inptu", "b.pt"}));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--inptu: did you mean '--input'?"), std::string::npos) << r.err;
  const CliRun b = cli(env.check({"m.pt", "--fail-onn", "error"}));
  EXPECT_NE(b.err.find("did you mean '--fail-on'?"), std::string::npos) << b.err;
  const CliRun bogus = cli(env.check({"m.pt", "--bogus"}));
  EXPECT_EQ(bogus.code, 2);
  EXPECT_NE(bogus.err.find("--bogus"), std::string::npos) << bogus.err;
}

TEST(CliTypos, EnumValuesSuggestTheNearest) {
  Env env;
  const CliRun r = cli(env.check({"m.pt", "--fail-on", "warn"}));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--fail-on: warn not in {info,warning,error,never}; did you mean 'warning'?"), std::string::npos)
      << r.err;
  const CliRun f = cli(env.check({"m.pt", "--format", "jsno"}));
  EXPECT_EQ(f.code, 2);
  EXPECT_NE(f.err.find("did you mean 'json'?"), std::string::npos) << f.err;
  // Case does not matter for fixed values.
  EXPECT_EQ(cli(env.check({"healthy.pt", "--fail-on", "WARNING"})).code, 0);
}

TEST(CliTypos, VersionPrintsToolAndLibtorch) {
  for (const char* flag : {"-V", "--version"}) {
    const CliRun r = cli({flag});
    EXPECT_EQ(r.code, 0) << flag;
    EXPECT_NE(r.out.find("normdoctor "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(libtorch 9.9.9)"), std::string::npos) << r.out;
  }
}

TEST(CliTypos, RuleIdsAreCaseInsensitiveEverywhere) {
  Env env;
  const CliRun sel = cli(env.check({"growth.pt", "--select", "act002", "--format", "json"}));
  ASSERT_EQ(sel.code, 1) << sel.err;
  const json r = json::parse(sel.out);
  EXPECT_EQ(r["config"]["rules"], json::array({"ACT002"}));
  EXPECT_EQ(r["config"]["select"], json::array({"ACT002"}));
  EXPECT_EQ(cli(env.check({"growth.pt", "--ignore", "act"})).code, 0);
  // In the config file: select, [rules.id], suppress.rule.
  ndtest::TempDir proj;
  proj.write("normdoctor.toml", "select = [\"act002\"]\n[rules.act002]\nseverity = \"error\"\n"
                                "[[suppress]]\nrule = \"act0\"\nmodule = \"nothing.*\"\nreason = \"r\"\n");
  const CliRun c = cli(env.check({"growth.pt", "--format", "json"}, false), proj.path());
  ASSERT_EQ(c.code, 1) << c.err;
  const json cj = json::parse(c.out);
  EXPECT_EQ(cj["findings"][0]["severity"], "error");
  EXPECT_EQ(cj["config"]["suppressions"][0]["rule"], "ACT0");
  EXPECT_EQ(cli({"explain", "act002", "--rules-dir", env.rules}).code, 0);
}

TEST(CliTypos, ParseErrorsExitTwo) {
  Env env;
  EXPECT_EQ(cli(env.check({"m.pt", "--seed", "abc"})).code, 2);
  EXPECT_EQ(cli(env.check({})).code, 2);
  EXPECT_EQ(cli({}).code, 2);
}

// ------------------------------------------------------------ 6. layout

TEST(CliLayout, ModulePathsAreNotCutOutsideATerminal) {
  Env env;
  ::setenv("COLUMNS", "60", 1);
  const CliRun r = cli(env.check({"growth.pt"}));
  ::unsetenv("COLUMNS");
  EXPECT_NE(r.out.find("  layers.2.a.very.long.module.path.that.goes.on.and.on.and.on.fc  Linear"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("\u2026"), std::string::npos) << "a path was cut:\n" << r.out;
}

TEST(CliLayout, RulesTableAlignsLongIds) {
  Env env;
  const CliRun r = cli({"rules", "--rules-dir", env.rules});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(r.out);
  std::string header;
  std::getline(in, header);
  const auto col = header.find("SEVERITY");
  ASSERT_NE(col, std::string::npos);
  int rows = 0;
  for (std::string line; std::getline(in, line) && !line.empty();) {
    ++rows;
    const auto sev = line.find_first_of("iwe", line.find(' '));
    EXPECT_EQ(sev, col) << "misaligned: '" << line << "'";
  }
  EXPECT_EQ(rows, 4);
}

TEST(CliLayout, VerboseLevelsPrintMore) {
  Env env;
  const CliRun plain = cli(env.check({"growth.pt", "-q"}));
  const CliRun v = cli(env.check({"growth.pt", "-q", "-v"}));
  const CliRun vv = cli(env.check({"growth.pt", "-q", "-vv"}));
  EXPECT_EQ(plain.out.find("passes (name, mode, seconds)"), std::string::npos);
  EXPECT_EQ(v.out.find("passes (name, mode, seconds)"), std::string::npos);
  EXPECT_NE(vv.out.find("passes (name, mode, seconds)"), std::string::npos) << vv.out;
  EXPECT_NE(vv.out.find("metrics of layers.2.a.very"), std::string::npos);
  EXPECT_NE(vv.out.find("  act.absmax = 90000"), std::string::npos) << vv.out;
  EXPECT_GT(vv.out.size(), v.out.size());
}

// ------------------------------------------------------------ 7. progress

TEST(CliProgress, OneLinePerPassWhenStderrIsNotATerminal) {
  Env env;
  const CliRun r = cli(env.check({"growth.pt"}));
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(normdoctor: forward_backward: train \([0-9.]+ s\)\n)"))) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(normdoctor: normalization: eval \([0-9.]+ s\)\n)"))) << r.err;
  const CliRun q = cli(env.check({"growth.pt", "-q"}));
  EXPECT_EQ(q.err, "");
}

// ------------------------------------------------------------ 2. JUnit

TEST(CliJunit, SkippedRulesCarryTheirReasonAndTheXsdValidates) {
  Env env;
  const std::string file = (env.dir.path() / "r.xml").string();
  const CliRun r = cli(env.check({"growth.pt", "--format", "junit", "-o", file}));
  ASSERT_EQ(r.code, 1) << r.err;
  const std::string xml = ndtest::read_file(file);
  EXPECT_NE(xml.find("<testcase name=\"PREC001\" classname=\"normdoctor.PREC001\">\n      <skipped message=\"probe "
                     "precision did not run: runs only with --precision fp16 or bf16\"/>"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<skipped message=\"probe replay did not run: runs only with --lr and --steps N\"/>"),
            std::string::npos);
  EXPECT_NE(xml.find("<skipped message=\"probe padding did not run: the model has no sequence inputs"),
            std::string::npos);
  EXPECT_NE(xml.find("<testsuite name=\"normdoctor growth.pt\" tests=\"4\" failures=\"1\" errors=\"0\" skipped=\"3\" "
                     "file=\"growth.pt\">"),
            std::string::npos)
      << xml;
  EXPECT_EQ(xml.find("<testsuites name=\"normdoctor\" tests=\"4\" failures=\"1\" errors=\"0\">"), 39u) << xml;
  EXPECT_NO_THROW(ndtest::xml::parse(xml));
  if (have("xmllint")) {
    EXPECT_EQ(junit_xsd_errors(file), "");
  } else {
    ADD_FAILURE() << "xmllint is missing (Debian package libxml2-utils, in .ci/packages.txt)";
  }
}

TEST(CliJunit, ProbeStatusFromTheDocumentSkipsItsRules) {
  // A probe that failed (the contract: status error, pass, error {kind, message}).
  nd::MetricsDoc doc = fake_doc("m.pt");
  doc.probes["precision"] = {{"status", "error"}, {"pass", "fp16"}, {"error", {{"kind", "model_run"}, {"message", "boom"}}}};
  doc.probes["forward_backward"] = {{"status", "skipped"}, {"reason", "no differentiable output"}};
  const auto st = nd::probe_statuses(doc);
  EXPECT_EQ(st.at("precision").status, "error");
  EXPECT_EQ(st.at("precision").describe(), "failed in pass fp16 (model_run): boom");
  EXPECT_EQ(st.at("forward_backward").status, "skipped");
  EXPECT_EQ(st.at("replay").status, "skipped");
  EXPECT_EQ(st.at("normalization").status, "ok");
  nd::Rule prec, act, free_rule;
  prec.id = "PREC001";
  prec.probe = "precision";
  act.id = "ACT002";
  act.probe = "forward_backward";
  free_rule.id = "X001";
  nd::Finding f;
  f.rule_id = "ACT002";  // it fired: it ran, whatever the status says
  const auto skipped = nd::skipped_rules({prec, act, free_rule}, {f}, st);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].rule_id, "PREC001");
  EXPECT_EQ(skipped[0].reason, "probe precision failed in pass fp16 (model_run): boom");
  // The pre-contract error entry of the train pass.
  nd::MetricsDoc old = fake_doc("m.pt");
  old.probes["forward_backward"] = {{"pass", "train"}, {"error", "forward raised"}};
  EXPECT_EQ(nd::probe_statuses(old).at("forward_backward").describe(), "failed in pass train: forward raised");
}

TEST(CliJunit, ShippedRulesNameKnownProbes) {
  const auto rules = nd::load_rules((ndtest::source_dir() / "rules").string());
  ASSERT_GT(rules.size(), 40u);
  for (const auto& r : rules) {
    EXPECT_FALSE(r.probe.empty()) << r.id << " names no probe";
    EXPECT_TRUE(nd::is_known_probe(r.probe)) << r.id << " names unknown probe '" << r.probe << "'";
  }
  for (const char* id : {"PREC001", "PREC004"}) EXPECT_EQ(nd::find_rule(rules, id)->probe, "precision");
  EXPECT_EQ(nd::find_rule(rules, "LR001")->probe, "update");
  EXPECT_EQ(nd::find_rule(rules, "REPLAY002")->probe, "replay");
  EXPECT_EQ(nd::find_rule(rules, "SEQ001")->probe, "padding");
  EXPECT_EQ(nd::find_rule(rules, "SEQ002")->probe, "sequence_length");
}

// ------------------------------------------------------------ 3. SARIF

TEST(CliSarif, SuppressedFindingsAndRelativeUris) {
  Env env;
  ndtest::TempDir proj;
  proj.write("exports/growth.pt", "x");
  proj.write("normdoctor.toml", "[[suppress]]\nrule = \"ACT002\"\nmodule = \"layers.2.*\"\nreason = \"deliberate: tested\"\n");
  const std::string file = (proj.path() / "r.sarif").string();
  const CliRun r = cli(env.check({"exports/growth.pt", "--format", "sarif", "-o", file}, false), proj.path());
  ASSERT_EQ(r.code, 0) << r.err;  // the only finding is suppressed
  const json log = json::parse(ndtest::read_file(file));
  const auto errors = sarif_schema().validate(log);
  EXPECT_TRUE(errors.empty()) << ndtest::join_errors(errors);
  const json& run = log["runs"][0];
  ASSERT_EQ(run["results"].size(), 1u);
  const json& res = run["results"][0];
  EXPECT_EQ(res["ruleId"], "ACT002");
  EXPECT_EQ(res["suppressions"][0]["kind"], "external");
  EXPECT_EQ(res["suppressions"][0]["justification"], "deliberate: tested");
  const json& loc = res["locations"][0]["physicalLocation"]["artifactLocation"];
  EXPECT_EQ(loc["uri"], "exports/growth.pt");
  EXPECT_EQ(loc["uriBaseId"], "%SRCROOT%");
  std::string root = "file://" + fs::canonical(proj.path()).string() + "/";
  EXPECT_EQ(run["originalUriBaseIds"]["%SRCROOT%"]["uri"], root);
  // Outside the working tree: an absolute file URI.
  ndtest::TempDir other;
  const std::string outside = (fs::canonical(proj.path()) / "exports" / "growth.pt").string();
  const CliRun o = cli(env.check({outside, "--format", "sarif"}), other.path());
  const json ol = json::parse(o.out);
  EXPECT_TRUE(sarif_schema().validate(ol).empty());
  EXPECT_EQ(ol["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "file://" + outside);
  EXPECT_FALSE(ol["runs"][0].contains("originalUriBaseIds"));
  // Probes that did not run are tool execution notifications.
  bool note = false;
  for (const auto& n : ol["runs"][0]["invocations"][0]["toolExecutionNotifications"])
    note |= n["descriptor"]["id"] == "probe.precision";
  EXPECT_TRUE(note);
}

// ------------------------------------------------------------ 8. config

TEST(CliConfig, PyprojectIsDiscoveredAndNormdoctorTomlWins) {
  Env env;
  ndtest::TempDir proj;
  proj.write("pyproject.toml", "[project]\nname = \"x\"\n\n[tool.normdoctor]\nfail-on = \"error\"\n");
  fs::create_directories(proj.path() / "sub");
  const CliRun r = cli(env.check({"growth.pt", "--format", "json"}, false), proj.path() / "sub");
  EXPECT_EQ(r.code, 0) << r.err;  // fail-on error from [tool.normdoctor]
  const json j = json::parse(r.out);
  EXPECT_EQ(j["config"]["file"], (proj.path() / "pyproject.toml").string());
  EXPECT_EQ(j["config"]["section"], "tool.normdoctor");
  EXPECT_TRUE(report_schema().validate(j).empty()) << ndtest::join_errors(report_schema().validate(j));
  const CliRun text = cli(env.check({"growth.pt"}, false), proj.path());
  EXPECT_NE(text.out.find("config  " + (proj.path() / "pyproject.toml").string() + " [tool.normdoctor]\n"),
            std::string::npos)
      << text.out;
  // Both: normdoctor.toml wins.
  proj.write("normdoctor.toml", "fail-on = \"warning\"\n");
  const CliRun both = cli(env.check({"growth.pt", "--format", "json"}, false), proj.path());
  EXPECT_EQ(both.code, 1);
  EXPECT_EQ(json::parse(both.out)["config"]["file"], (proj.path() / "normdoctor.toml").string());
  // A pyproject.toml without [tool.normdoctor] is passed over.
  ndtest::TempDir plain;
  plain.write("pyproject.toml", "[project]\nname = \"y\"\n");
  EXPECT_EQ(json::parse(cli(env.check({"growth.pt", "--format", "json"}, false), plain.path()).out)["config"]["file"],
            nullptr);
  // Errors in [tool.normdoctor] name the pyproject.toml line.
  plain.write("pyproject.toml", "[project]\nname = \"y\"\n[tool.normdoctor]\nfail_on = \"error\"\n");
  const CliRun bad = cli(env.check({"growth.pt"}, false), plain.path());
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("pyproject.toml:4: unknown key 'fail_on'; did you mean 'fail-on'?"), std::string::npos)
      << bad.err;
}

TEST(CliConfig, SuppressionsByModelGlob) {
  Env env;
  ndtest::TempDir proj;
  proj.write("exports/a_growth.pt", "x");
  proj.write("train/b_growth.pt", "x");
  proj.write("normdoctor.toml",
             "[[suppress]]\nrule = \"ACT002\"\nmodel = \"exports/*.pt\"\nreason = \"exported copies are rescaled\"\n");
  const CliRun a = cli(env.check({"exports/a_growth.pt", "--format", "json"}, false), proj.path());
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(json::parse(a.out)["summary"]["suppressed"], 1);
  const CliRun b = cli(env.check({"train/b_growth.pt", "--format", "json"}, false), proj.path());
  EXPECT_EQ(b.code, 1);
  // From another folder the glob is matched relative to the config file.
  const CliRun c = cli(env.check({"../exports/a_growth.pt", "--config", (proj.path() / "normdoctor.toml").string(),
                                  "--format", "json"},
                                 false),
                       proj.path() / "train");
  EXPECT_EQ(c.code, 0) << c.out;
  // A suppression needs module or model.
  proj.write("normdoctor.toml", "[[suppress]]\nrule = \"ACT002\"\nreason = \"r\"\n");
  const CliRun bad = cli(env.check({"exports/a_growth.pt"}, false), proj.path());
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("misses 'module' (a glob on module paths) or 'model'"), std::string::npos) << bad.err;
}

// ------------------------------------------------------------ 9. many models

TEST(CliManyModels, OneReportPerFormatWorstExitCode) {
  Env env;
  ndtest::TempDir models;
  models.write("b_growth.pt", "x");
  models.write("a_healthy.pt", "x");
  models.write("c.pt2", "x");
  models.write("notes.txt", "x");
  const std::string j = (env.dir.path() / "r.json").string(), x = (env.dir.path() / "r.xml").string(),
                    s = (env.dir.path() / "r.sarif").string();
  const CliRun r = cli(env.check({models.path().string(), "broken.pt", "--format", "json", "-o", j, "--format", "junit",
                                  "-o", x, "--format", "sarif", "-o", s, "--format", "text"}));
  EXPECT_EQ(r.code, 3) << r.err;  // broken.pt could not be loaded: the worst
  const json report = json::parse(ndtest::read_file(j));
  const auto errors = report_schema().validate(report);
  EXPECT_TRUE(errors.empty()) << ndtest::join_errors(errors);
  ASSERT_EQ(report["reports"].size(), 4u);
  EXPECT_EQ(report["reports"][0]["model"]["path"], (models.path() / "a_healthy.pt").string());  // sorted
  EXPECT_EQ(report["reports"][1]["model"]["path"], (models.path() / "b_growth.pt").string());
  EXPECT_EQ(report["reports"][2]["model"]["path"], (models.path() / "c.pt2").string());
  EXPECT_EQ(report["reports"][3]["status"], "error");
  EXPECT_EQ(report["reports"][3]["error"]["kind"], "model_load");
  EXPECT_EQ(report["reports"][0]["exit_code"], 0);
  EXPECT_EQ(report["reports"][1]["exit_code"], 1);
  EXPECT_EQ(report["exit_code"], 3);
  EXPECT_EQ(report["summary"]["models"], 4);
  EXPECT_EQ(report["summary"]["failed"], 1);
  const std::string junit = ndtest::read_file(x);
  EXPECT_EQ(std::count_if(junit.begin(), junit.end(), [](char) { return false; }), 0);
  std::size_t suites = 0;
  for (auto at = junit.find("<testsuite "); at != std::string::npos; at = junit.find("<testsuite ", at + 1)) ++suites;
  EXPECT_EQ(suites, 4u);
  if (have("xmllint")) {
    EXPECT_EQ(junit_xsd_errors(x), "");
  }
  const json sarif = json::parse(ndtest::read_file(s));
  EXPECT_TRUE(sarif_schema().validate(sarif).empty());
  EXPECT_EQ(sarif["runs"].size(), 4u);
  EXPECT_NE(r.out.find("==> " + (models.path() / "a_healthy.pt").string() + " (1 of 4) <=="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("==> broken.pt (4 of 4) <==\nnormdoctor failed (model_load): broken.pt: not a TorchScript archive"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("4 models: 0 errors, 2 warnings, 0 info, 1 could not be checked; exit code 3"), std::string::npos)
      << r.out;
  // Progress lines name the model.
  EXPECT_NE(r.err.find("normdoctor: " + (models.path() / "a_healthy.pt").string() + ": forward_backward: train ("),
            std::string::npos)
      << r.err;
}

TEST(CliManyModels, SingleModelKeepsTheSingleShapeAndEmptyFolderIsAnError) {
  Env env;
  const CliRun r = cli(env.check({"growth.pt", "--format", "json"}));
  const json j = json::parse(r.out);
  EXPECT_FALSE(j.contains("reports"));
  EXPECT_EQ(j["schema_version"], "1.3");
  EXPECT_TRUE(report_schema().validate(j).empty()) << ndtest::join_errors(report_schema().validate(j));
  ndtest::TempDir empty;
  const CliRun e = cli(env.check({empty.path().string()}));
  EXPECT_EQ(e.code, 2);
  EXPECT_NE(e.err.find("holds no .pt or .pt2 file"), std::string::npos) << e.err;
  // Like every failed run, it still writes the JSON report it was asked for.
  const std::string file = (env.dir.path() / "empty.json").string();
  const CliRun f = cli(env.check({empty.path().string(), "--format", "json", "-o", file}));
  EXPECT_EQ(f.code, 2);
  const json ej = json::parse(ndtest::read_file(file));
  EXPECT_EQ(ej["status"], "error");
  EXPECT_EQ(ej["error"]["kind"], "usage");
  EXPECT_NE(ej["error"]["message"].get<std::string>().find("holds no .pt or .pt2 file"), std::string::npos);
  EXPECT_TRUE(report_schema().validate(ej).empty()) << ndtest::join_errors(report_schema().validate(ej));
}

// ------------------------------------------------------------ 10. HTML

TEST(CliHtml, SelfContainedWithFindingsLinkedToLayersAndPlots) {
  Env env;
  const std::string file = (env.dir.path() / "report.html").string();
  const CliRun r = cli(env.check({"growth.pt", "-o", file}));
  ASSERT_EQ(r.code, 1) << r.err;
  const std::string html = ndtest::read_file(file);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // No network: no external URLs in src/href attributes, no link/import tags.
  EXPECT_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=\s*"(https?:)?//)"))) << "external reference";
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  // The finding, linked to its layer row, which exists.
  const std::string anchor = "m0-layer-layers.2.a.very.long.module.path.that.goes.on.and.on.and.on.fc";
  EXPECT_NE(html.find("href=\"#" + anchor + "\""), std::string::npos);
  EXPECT_NE(html.find("<tr id=\"" + anchor + "\" class=\"flagged\">"), std::string::npos);
  EXPECT_NE(html.find("data-rule=\"ACT002\""), std::string::npos);
  // Plots: SVG with the fp16 maximum line, the gradient plot, the probes that did not run.
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("fp16 max 65504"), std::string::npos);
  EXPECT_NE(html.find("Gradient norm"), std::string::npos);
  EXPECT_NE(html.find("Probes that could not run"), std::string::npos);
  EXPECT_NE(html.find("runs only with --precision fp16 or bf16"), std::string::npos);
  EXPECT_NE(html.find("exit status 1"), std::string::npos);
}

TEST(CliHtml, TimelineHookDrawsLinesOverSteps) {
  nd::MetricsDoc doc = fake_doc("m.pt");
  doc.probes["timeline"] = {{"steps", {100, 200, 300}},
                            {"series", json::array({{{"name", "layers.1 act.absmax"}, {"values", {1.0, 10.0, 1e4}}},
                                                    {{"name", "layers.1 grad.norm"}, {"values", {0.1, 0.2, "inf"}}}})}};
  nd::ReportRun run;
  run.doc = &doc;
  run.ctx.tool_version = "0.1.0";
  const std::string html = nd::render_html({run});
  EXPECT_NE(html.find("Checkpoint timeline"), std::string::npos);
  EXPECT_NE(html.find("steps: 100, 200, 300"), std::string::npos);
  EXPECT_NE(html.find("step 300: layers.1 act.absmax = 10000"), std::string::npos);
  EXPECT_NE(html.find("step 300: layers.1 grad.norm = inf"), std::string::npos);  // drawn as a cross
  const nd::MetricsDoc none = fake_doc("m.pt");
  run.doc = &none;
  EXPECT_EQ(nd::render_html({run}).find("Checkpoint timeline"), std::string::npos);
}

// The timeline probe's own document (src/probes/timeline/timeline.cpp): the loss and
// the first mover's series are drawn over the checkpoints' steps.
TEST(CliHtml, TimelineProbeDocumentDrawsLossAndFirstMover) {
  nd::MetricsDoc doc = fake_doc("m.pt");
  doc.probes["timeline"] = {
      {"checkpoints", json::array({{{"path", "s0.pt"}, {"step", 0}}, {{"path", "s5.pt"}, {"step", 5}}})},
      {"loss", {3.4, "nan"}},
      {"first_mover", {{"layer", "h.0.attn.q"}, {"metric", "grad.param_norm"}}},
      {"layers", {{"h.0.attn.q", {{"grad.param_norm", {0.02, 0.6}}}}, {"lm_head", {{"act.rms", {1.0, 1.1}}}}}}};
  nd::ReportRun run;
  run.doc = &doc;
  run.ctx.tool_version = "0.1.0";
  const std::string html = nd::render_html({run});
  EXPECT_NE(html.find("Checkpoint timeline"), std::string::npos);
  EXPECT_NE(html.find("steps: 0, 5"), std::string::npos);
  EXPECT_NE(html.find("step 5: h.0.attn.q grad.param_norm = 0.6"), std::string::npos);
  EXPECT_NE(html.find("step 0: loss = 3.4"), std::string::npos);
  EXPECT_EQ(html.find("lm_head act.rms"), std::string::npos);  // only the first mover's layer
}

namespace {

/// Runs a shell command, returning its stdout (stderr to `err_file` when given).
std::string shell(const std::string& cmd, int* status = nullptr) {
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (std::size_t n; p && (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = p ? ::pclose(p) : -1;
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

}  // namespace

TEST(CliHtml, RendersInHeadlessChromiumWithoutScriptErrors) {
  if (!have("chromium")) {
    ADD_FAILURE() << "chromium is missing (Debian package chromium, in .ci/packages.txt)";
    return;
  }
  Env env;
  const fs::path out_dir = fs::path(ND_BINARY_DIR) / "tests" / "html";
  fs::create_directories(out_dir);
  const std::string file = (out_dir / "report.html").string();
  // Two models (one healthy) and a timeline, so every part of the page is drawn.
  const CliRun r = cli(env.check({"growth.pt", "healthy.pt", "--format", "html", "-o", file}));
  ASSERT_EQ(r.code, 1) << r.err;
  const std::string flags =
      "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking "
      "--disable-component-update --disable-sync --user-data-dir=" + (env.dir.path() / "chromium").string();
  const std::string url = "file://" + file;
  int status = -1;
  const std::string log = (env.dir.path() / "console.txt").string();
  const std::string dom = shell("timeout 120 chromium " + flags + " --enable-logging=stderr --v=0 --dump-dom '" + url +
                                    "' 2>'" + log + "'",
                                &status);
  ASSERT_EQ(status, 0) << ndtest::read_file(log);
  // The script ran and reported no error; the console has no script error either.
  EXPECT_NE(dom.find("data-script=\"ran\""), std::string::npos) << dom.substr(0, 400);
  EXPECT_NE(dom.find("<div id=\"js-errors\"></div>"), std::string::npos);
  const std::string console = ndtest::read_file(log);
  EXPECT_EQ(console.find("Uncaught"), std::string::npos) << console;
  EXPECT_FALSE(std::regex_search(console, std::regex("CONSOLE.*(Error|error)"))) << console;
  // Every finding's rule id and layer are in the DOM.
  EXPECT_NE(dom.find("data-rule=\"ACT002\""), std::string::npos);
  EXPECT_NE(dom.find("layers.2.a.very.long.module.path.that.goes.on.and.on.and.on.fc"), std::string::npos);
  EXPECT_NE(dom.find("<svg"), std::string::npos);
  // A screenshot under the build folder, for people to look at.
  const std::string png = (out_dir / "report.png").string();
  fs::remove(png);
  shell("timeout 120 chromium " + flags + " --hide-scrollbars --window-size=1100,2400 --screenshot='" + png + "' '" +
            url + "' 2>/dev/null",
        &status);
  EXPECT_EQ(status, 0);
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 20000u);
}

// ------------------------------------------------------------ 4. README

TEST(CliReadme, OptionsTableMatchesCheckHelp) {
  const CliRun help = cli({"check", "--help"});
  ASSERT_EQ(help.code, 0);
  std::set<std::string> from_help;
  std::regex flag(R"((^|[ ,])(--?[a-zA-Z][-a-zA-Z0-9]*))");
  std::istringstream in(help.out);
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find_first_not_of(' ');
    if (first == std::string::npos || line[first] != '-') continue;  // option lines start with a flag
    const std::string names = line.substr(first, line.find("  ", first) - first);
    for (auto it = std::sregex_iterator(names.begin(), names.end(), flag); it != std::sregex_iterator(); ++it)
      from_help.insert((*it)[2]);
  }
  ASSERT_GE(from_help.size(), 25u) << help.out;
  const std::string readme = ndtest::read_file(ndtest::source_dir() / "README.md");
  const auto b = readme.find("<!-- options-table:begin -->"), e = readme.find("<!-- options-table:end -->");
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  const std::string table = readme.substr(b, e - b);
  std::set<std::string> from_table;
  std::regex code("`(--?[a-zA-Z][-a-zA-Z0-9]*)");
  std::istringstream tin(table);
  for (std::string line; std::getline(tin, line);) {
    if (line.rfind("| ", 0) != 0) continue;
    const std::string first_col = line.substr(2, line.find(" | ", 2) - 2);
    for (auto it = std::sregex_iterator(first_col.begin(), first_col.end(), code); it != std::sregex_iterator(); ++it)
      from_table.insert((*it)[1]);
  }
  for (const auto& f : from_help) EXPECT_TRUE(from_table.count(f)) << "README options table misses " << f;
  for (const auto& f : from_table) EXPECT_TRUE(from_help.count(f)) << "README options table lists " << f << ", which `check --help` does not have";
}

// `normdoctor rules --test`: the folder's case files through the runner
// (docs/rule-cases.md), failures with file:line, exit 1 when one fails.
TEST(CliRulesTest, RunsTheCaseFilesOfAFolder) {
  Env env;
  const std::string layer = "[[case.layers]]\npath = \"fc\"\nkind = \"Linear\"\nexec_order = 0\n";
  ndtest::write_file(fs::path(env.rules) / "ACT002.cases.toml",
                     "[[case]]\nname = \"grows\"\nexpect = \"catches\"\n" + layer +
                         "metrics = { \"act.growth\" = 2000 }\n[[case.finding]]\nlayer = \"fc\"\nseverity = \"warning\"\n"
                         "message = \"fc grows 2000x\"\n\n[[case]]\nname = \"flat\"\nexpect = \"clean\"\n" + layer +
                         "metrics = { \"act.growth\" = 2 }\n");
  CliRun r = cli({"rules", "--test", "--rules-dir", env.rules});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "2 cases of 1 rules: 2 passed, 0 failed\nno case file (ID.cases.toml) for: PREC001, REPLAY001, SEQ001\n");

  // A clean twin that fires: named with its file and line, exit 1.
  ndtest::write_file(fs::path(env.rules) / "SEQ001.cases.toml",
                     "[[case]]\nname = \"masked\"\nexpect = \"clean\"\n[[case.layers]]\npath = \"norm\"\n"
                     "metrics = { \"pad.changed\" = true }\n");
  r = cli({"rules", "--test", "--rules-dir", env.rules});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("FAIL " + env.rules + "/SEQ001.cases.toml:1: SEQ001, case 'masked'\n"
                       "  expected no finding, got layer 'norm', warning: norm reads padding\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("3 cases of 2 rules: 2 passed, 1 failed\n"), std::string::npos) << r.out;

  // A case file whose rule is not in the folder, and a bad one: exit 2.
  ndtest::write_file(fs::path(env.rules) / "SEQ002.cases.toml", "[[case]]\nname = \"x\"\nexpect = \"clean\"\n");
  r = cli({"rules", "--test", "--rules-dir", env.rules});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("SEQ002.cases.toml:1: no rule SEQ002 in " + env.rules + "; did you mean 'SEQ001'?"), std::string::npos)
      << r.err;
  ndtest::write_file(fs::path(env.rules) / "SEQ002.cases.toml", "[[case]]\nname = \"x\"\nexpect = \"dirty\"\n");
  r = cli({"rules", "--test", "--rules-dir", env.rules});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("SEQ002.cases.toml:3: key 'expect' in case 'x': 'dirty' is not one of catches, clean"), std::string::npos)
      << r.err;
  EXPECT_EQ(cli({"rules", "--test", "--format", "json", "--rules-dir", env.rules}).code, 2);
}

TEST(CliRulesTest, ShippedCasesPass) {
  const CliRun r = cli({"rules", "--test", "--rules-dir", (ndtest::source_dir() / "rules").string()});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("no case file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" passed, 0 failed\n"), std::string::npos) << r.out;
}

}  // namespace nd_test_cli_test
