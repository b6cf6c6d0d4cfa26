// End to end through the binary: SARIF from a real model validated against
// the SARIF 2.1.0 schema, JUnit well-formed with every finding distinct, the
// JSON report against its schema, several formats at once, a config that
// ignores a rule, overrides a severity and suppresses a module (report and
// exit code change), config typos (exit 2 naming file, key, suggestion),
// --select/--severity/--fail-on, `explain` for every rule, and a man page that
// documents every option the CLI accepts.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../unit/json_schema.h"
#include "../unit/mini_xml.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_cli_formats_test {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string src(const std::string& rel) { return std::string(ND_SOURCE_DIR) + "/" + rel; }
const std::string kModel = src("fixtures/models/growth20.pt");
const std::string kInput = src("fixtures/models/growth20.input.pt");

std::string read(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const std::string& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> n{0};
    path_ = fs::temp_directory_path() / ("nd_cli_formats_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

struct Result {
  int status = -1;
  std::string out;
  std::string err;
};

/// Runs the binary with `args` (already quoted) in folder `cwd`, NO_COLOR set.
Result run(const std::string& args, const std::string& cwd) {
  TempDir capture;
  const std::string cmd = "cd " + quote(cwd) + " && NO_COLOR=1 " + quote(ND_BINARY) + " " + args + " >" +
                          quote(capture.file("out")) + " 2>" + quote(capture.file("err")) + " </dev/null";
  const int st = std::system(cmd.c_str());
  Result r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = read(capture.file("out"));
  r.err = read(capture.file("err"));
  return r;
}

std::string check_args(const std::string& extra) {
  return "check " + quote(kModel) + " --input " + quote(kInput) + " " + extra;
}

const ndtest::JsonSchema& sarif_schema() {
  static const ndtest::JsonSchema s(json::parse(read(src("tests/schemas/sarif-schema-2.1.0.json"))));
  return s;
}

const ndtest::JsonSchema& report_schema() {
  static const ndtest::JsonSchema s(json::parse(read(src("docs/report.schema.json"))));
  return s;
}

std::set<std::string> rule_ids(const json& report) {
  std::set<std::string> out;
  for (const auto& f : report["findings"]) out.insert(f["rule_id"].get<std::string>());
  return out;
}

/// The JSON report of growth20 with `extra` flags, run in `cwd`; the exit status in `status`.
json report_of(const std::string& extra, const std::string& cwd, int* status, std::string* err = nullptr) {
  TempDir out;
  const Result r = run(check_args("--format json -o " + quote(out.file("r.json")) + " " + extra), cwd);
  if (status) *status = r.status;
  if (err) *err = r.err;
  EXPECT_TRUE(fs::exists(out.file("r.json"))) << r.err;
  const json report = json::parse(read(out.file("r.json")));
  const auto errors = report_schema().validate(report);
  EXPECT_TRUE(errors.empty()) << ndtest::join_errors(errors);
  return report;
}

}  // namespace

TEST(CliFormats, SarifJunitAndJsonFromARealModel) {
  TempDir dir;
  const std::string sarif = dir.file("report.sarif"), junit = dir.file("report.xml"), report = dir.file("report.json");
  const Result r = run(check_args("--no-config --format sarif -o " + quote(sarif) + " --format junit -o " + quote(junit) +
                                  " --format json -o " + quote(report)),
                       dir.path());
  ASSERT_EQ(r.status, 1) << r.err;  // warnings, and --fail-on defaults to warning
  EXPECT_EQ(r.out, "") << "every report went to a file";

  // SARIF: valid, and what code scanning needs.
  const json log = json::parse(read(sarif));
  const auto errors = sarif_schema().validate(log);
  EXPECT_TRUE(errors.empty()) << ndtest::join_errors(errors);
  const json& run0 = log["runs"][0];
  const json& rules = run0["tool"]["driver"]["rules"];
  EXPECT_GE(rules.size(), 13u);
  std::set<std::string> rule_set;
  for (const auto& d : rules) {
    rule_set.insert(d["id"].get<std::string>());
    EXPECT_FALSE(d["shortDescription"]["text"].get<std::string>().empty()) << d["id"];
    EXPECT_NE(d["help"]["text"].get<std::string>().find("What it detects"), std::string::npos) << d["id"];
  }
  const json& results = run0["results"];
  ASSERT_FALSE(results.empty());
  std::set<std::string> fingerprints;
  bool growth = false;
  for (const auto& res : results) {
    EXPECT_TRUE(rule_set.count(res["ruleId"].get<std::string>()));
    EXPECT_EQ(res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "file://" + kModel);
    EXPECT_EQ(res["locations"][0]["physicalLocation"]["region"]["startLine"], 1);
    fingerprints.insert(res["partialFingerprints"]["normdoctor/v1"].get<std::string>());
    if (res["ruleId"] == "ACT002") {
      growth = true;
      EXPECT_EQ(res["level"], "warning");
      EXPECT_EQ(res["locations"][0]["logicalLocations"][0]["fullyQualifiedName"], "layers.13");
    }
  }
  EXPECT_TRUE(growth) << "growth20 shows activation growth at layers.13";
  EXPECT_EQ(fingerprints.size(), results.size());
  EXPECT_EQ(run0["invocations"][0]["exitCode"], 1);  // warnings fail by default (--fail-on warning)

  // JSON: valid, the same findings.
  const json j = json::parse(read(report));
  EXPECT_TRUE(report_schema().validate(j).empty()) << ndtest::join_errors(report_schema().validate(j));
  EXPECT_EQ(j["findings"].size(), results.size());
  EXPECT_EQ(j["config"]["file"], nullptr);

  // JUnit: well formed, one failing testcase per finding, names unique.
  const auto root = ndtest::xml::parse(read(junit));
  const auto* suite = root->first("testsuite");
  ASSERT_NE(suite, nullptr);
  std::set<std::string> names;
  std::size_t failures = 0;
  for (const auto* c : suite->all("testcase")) {
    EXPECT_TRUE(names.insert(c->attr("name")).second) << c->attr("name");
    if (const auto* f = c->first("failure")) {
      ++failures;
      EXPECT_NE(f->text.find("see: normdoctor explain "), std::string::npos);
    }
  }
  EXPECT_EQ(failures, results.size());
  EXPECT_EQ(names.size(), rules.size() - rule_ids(j).size() + results.size());
  EXPECT_TRUE(names.count("ACT002 layers.13"));
}

TEST(CliFormats, TextAndGithubOnStdoutBesideFiles) {
  TempDir dir;
  // The n-th --format goes to the n-th -o; the one left over to stdout.
  Result r = run(check_args("--no-config --format json -o " + quote(dir.file("r.json")) + " --format github"), dir.path());
  ASSERT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.out.rfind("::warning file=" + kModel + ",line=1,title=ACT002 activation-growth at layers.13::", 0), 0u) << r.out;
  EXPECT_TRUE(fs::exists(dir.file("r.json")));
  r = run(check_args("--no-config"), dir.path());
  EXPECT_NE(r.out.find("warning[ACT002] activation-growth at layers.13: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  see: normdoctor explain ACT002\n"), std::string::npos);
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "no colors off a terminal";
  r = run(check_args("--no-config --color always"), dir.path());
  EXPECT_NE(r.out.find("\x1b[1;33mwarning[ACT002]"), std::string::npos);
  // Two reports on stdout are a usage error, before any work.
  r = run(check_args("--no-config --format text --format json"), dir.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("only one report can go to stdout"), std::string::npos) << r.err;
}

TEST(CliFormats, ConfigChangesReportAndExitCode) {
  TempDir dir;
  int status = -1;
  // Without a config: warnings; with --fail-on warning the run fails.
  const json base = report_of("--no-config --fail-on warning", dir.path(), &status);
  EXPECT_EQ(status, 1);
  const auto base_ids = rule_ids(base);
  ASSERT_TRUE(base_ids.count("ACT002"));
  ASSERT_GE(base_ids.size(), 2u) << base["findings"].dump();
  std::string other;  // a second rule that fires, to ignore
  for (const auto& id : base_ids)
    if (id != "ACT002") other = id;

  // A config that ignores that rule, rates ACT002 an error and fails on
  // errors: the run still fails, on the overridden severity.
  write(dir.file("normdoctor.toml"), "ignore = [\"" + other + "\"]\nfail-on = \"error\"\n\n[rules.ACT002]\nseverity = \"error\"\n");
  const json rated = report_of("", dir.path(), &status);
  EXPECT_EQ(status, 1);
  EXPECT_FALSE(rule_ids(rated).count(other));
  EXPECT_EQ(rated["findings"][0]["rule_id"], "ACT002");
  EXPECT_EQ(rated["findings"][0]["severity"], "error");
  EXPECT_EQ(rated["config"]["file"], dir.file("normdoctor.toml"));
  EXPECT_EQ(rated["config"]["severity_overrides"][0]["default"], "warning");

  // The same plus a suppression of ACT002 on its module: nothing at error
  // level is left, the run passes; the suppression is recorded as used.
  write(dir.file("normdoctor.toml"),
        "ignore = [\"" + other + "\"]\nfail-on = \"error\"\n\n[rules.ACT002]\nseverity = \"error\"\n\n"
        "[[suppress]]\nrule = \"ACT002\"\nmodule = \"layers.1?\"\nreason = \"growth is the point of this fixture\"\n\n"
        "[[suppress]]\nrule = \"GRAD\"\nmodule = \"decoder.*\"\nreason = \"an old decoder\"\n");
  std::string err;
  const json suppressed = report_of("", dir.path(), &status, &err);
  EXPECT_EQ(status, 0) << err;
  EXPECT_FALSE(rule_ids(suppressed).count("ACT002"));
  EXPECT_EQ(suppressed["summary"]["suppressed"], 1);
  EXPECT_EQ(suppressed["config"]["suppressions"][0]["matched"], 1);
  EXPECT_EQ(suppressed["config"]["suppressions"][1]["unused"], true);
  EXPECT_NE(err.find("normdoctor.toml:12: suppression of GRAD on modules 'decoder.*' matched no finding"),
            std::string::npos)
      << err;

  // Flags beat the file: --fail-on info fails again on what is left.
  report_of("--fail-on info", dir.path(), &status);
  EXPECT_EQ(status, suppressed["findings"].empty() ? 0 : 1);
  // Found from a subfolder too.
  fs::create_directories(dir.file("sub/deeper"));
  const json found = report_of("", dir.file("sub/deeper"), &status);
  EXPECT_EQ(found["config"]["file"], dir.file("normdoctor.toml"));
  // --no-config ignores it; --config names another file.
  EXPECT_EQ(report_of("--no-config", dir.path(), &status)["config"]["file"], nullptr);
  write(dir.file("other.toml"), "select = [\"ACT002\"]\n");
  const json other_cfg = report_of("--config " + quote(dir.file("other.toml")), dir.file("sub"), &status);
  EXPECT_EQ(rule_ids(other_cfg), std::set<std::string>{"ACT002"});
  EXPECT_EQ(other_cfg["config"]["rules"], json::array({"ACT002"}));
}

TEST(CliFormats, ConfigTypoExits2WithFileKeyAndSuggestion) {
  TempDir dir;
  write(dir.file("normdoctor.toml"), "select = [\"ACT\"]\nfail-on = \"warning\"\n\n[rules.ACT002]\nthreshold = 10\n");
  const Result r = run(check_args("--format json -o " + quote(dir.file("r.json"))), dir.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(dir.file("normdoctor.toml") + ":5: unknown key 'rules.ACT002.threshold'; did you mean 'thresholds'?"),
            std::string::npos)
      << r.err;
  const json report = json::parse(read(dir.file("r.json")));
  EXPECT_EQ(report["status"], "error");
  EXPECT_EQ(report["error"]["kind"], "config");
  EXPECT_EQ(report["exit_code"], 2);
  EXPECT_TRUE(report_schema().validate(report).empty()) << ndtest::join_errors(report_schema().validate(report));

  write(dir.file("normdoctor.toml"), "[rules.ACT02]\nseverity = \"error\"\n");
  const Result r2 = run(check_args("--format sarif -o " + quote(dir.file("r.sarif"))), dir.path());
  EXPECT_EQ(r2.status, 2);
  EXPECT_NE(r2.err.find("normdoctor.toml:1: unknown rule id 'ACT02' in key 'rules.ACT02'; did you mean 'ACT002'?"),
            std::string::npos)
      << r2.err;
  const json log = json::parse(read(dir.file("r.sarif")));
  EXPECT_TRUE(sarif_schema().validate(log).empty());
  EXPECT_EQ(log["runs"][0]["invocations"][0]["executionSuccessful"], false);

  const Result r3 = run(check_args("--no-config --select ACT0002"), dir.path());
  EXPECT_EQ(r3.status, 2);
  EXPECT_NE(r3.err.find("--select: 'ACT0002' is neither a rule id nor the prefix of one; did you mean 'ACT002'?"),
            std::string::npos)
      << r3.err;
  const Result r4 = run(check_args("--config " + quote(dir.file("missing.toml"))), dir.path());
  EXPECT_EQ(r4.status, 2);
  EXPECT_NE(r4.err.find("missing.toml: cannot read config file"), std::string::npos) << r4.err;
}

TEST(CliFormats, SelectSeverityAndFailOnAreSeparate) {
  TempDir dir;
  int status = -1;
  const json grad_only = report_of("--no-config --select GRAD,IN", dir.path(), &status);
  for (const auto& id : rule_ids(grad_only)) EXPECT_TRUE(id.rfind("GRAD", 0) == 0 || id.rfind("IN", 0) == 0) << id;
  for (const auto& id : grad_only["config"]["rules"]) EXPECT_NE(id.get<std::string>().rfind("ACT", 0), 0u);

  // --severity error hides the warnings, --fail-on warning still fails on them.
  std::string err;
  const json hidden = report_of("--no-config --severity error --fail-on warning", dir.path(), &status, &err);
  EXPECT_EQ(status, 1);
  EXPECT_TRUE(hidden["findings"].empty());
  EXPECT_GE(hidden["summary"]["hidden"].get<int>(), 1);
  EXPECT_NE(err.find("below --severity error"), std::string::npos) << err;
  const Result text = run(check_args("--no-config --severity error"), dir.path());
  EXPECT_EQ(text.status, 1);  // hidden warnings still fail at the default --fail-on warning
  EXPECT_NE(text.out.find("below --severity error not shown"), std::string::npos) << text.out;
  // --exit-zero wins over --fail-on.
  report_of("--no-config --fail-on warning --exit-zero", dir.path(), &status);
  EXPECT_EQ(status, 0);
}

TEST(CliFormats, ExplainWorksForEveryRule) {
  TempDir dir;
  const Result list = run("rules --format json", dir.path());
  ASSERT_EQ(list.status, 0) << list.err;
  const json rules = json::parse(list.out);
  ASSERT_GE(rules.size(), 13u);
  for (const auto& r : rules) {
    const std::string id = r["id"];
    const Result e = run("explain " + id, dir.path());
    EXPECT_EQ(e.status, 0) << id << ": " << e.err;
    EXPECT_EQ(e.out.rfind(id + ": ", 0), 0u) << e.out;
    for (const char* part : {"What it detects", "Why it matters", "Example", "How to fix", "When to ignore", "Fixes",
                             "References"})
      EXPECT_NE(e.out.find(std::string("\n") + part + "\n"), std::string::npos) << id << " misses " << part;
  }
  const Result table = run("rules", dir.path());
  EXPECT_EQ(table.status, 0);
  EXPECT_EQ(table.out.rfind("ID         SEVERITY  LIFECYCLE   SINCE    FAILURE MODE", 0), 0u) << table.out;
  const Result lower = run("explain act002", dir.path());
  EXPECT_EQ(lower.status, 0);
  const Result typo = run("explain ACT02", dir.path());
  EXPECT_EQ(typo.status, 2);
  EXPECT_NE(typo.err.find("unknown rule id 'ACT02'; did you mean 'ACT002'?"), std::string::npos) << typo.err;
}

TEST(CliFormats, ManPageDocumentsEveryOption) {
  TempDir dir;
  const Result r = run("--list-options", dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  std::string man = read(src("man/normdoctor.1"));
  man = std::regex_replace(man, std::regex(R"(\\-)"), "-");
  man = std::regex_replace(man, std::regex(R"(\\f[BIRP])"), "");
  std::istringstream in(r.out);
  std::set<std::string> subcommands;
  int options = 0;
  for (std::string line; std::getline(in, line);) {
    const auto space = line.find(' ');
    ASSERT_NE(space, std::string::npos) << line;
    const std::string sub = line.substr(0, space), opt = line.substr(space + 1);
    subcommands.insert(sub);
    ++options;
    // As a word of its own: "--input" must not be satisfied by "--input-shape".
    const std::regex word("(^|[^-a-z0-9])" + std::regex_replace(opt, std::regex("-"), "\\-") + "($|[^-a-z0-9])");
    EXPECT_TRUE(std::regex_search(man, word)) << "man/normdoctor.1 does not document `" << sub << " " << opt
                                              << "`; add it to OPTIONS";
  }
  EXPECT_GE(options, 25) << r.out;
  for (const char* s : {"check", "rules", "explain"}) {
    EXPECT_TRUE(subcommands.count(s)) << s;
    EXPECT_NE(man.find(std::string(".B normdoctor ") + s), std::string::npos) << s << " missing from SYNOPSIS";
  }
  // The hidden dump itself is not listed.
  EXPECT_EQ(r.out.find("--list-options"), std::string::npos);
}

// README: the sample command's output, as a real run prints it. The model
// line, the loss description and the first finding's line must match word for
// word; numbers may differ (they are replaced by N on both sides).
TEST(CliFormats, ReadmeSampleOutputMatchesARealRun) {
  const std::string readme = read(src("README.md"));
  const auto b = readme.find("<!-- sample-output:begin"), e = readme.find("<!-- sample-output:end -->");
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  std::istringstream in(readme.substr(b, e - b));
  std::string command;
  std::vector<std::string> sample;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("$ normdoctor ", 0) == 0) command = line.substr(std::string("$ normdoctor ").size());
    else if (!command.empty() && line != "```" && line != "...") sample.push_back(line);
  }
  ASSERT_FALSE(command.empty());
  const Result real = run(command + " -q --no-config", ND_SOURCE_DIR);
  ASSERT_EQ(real.status, 1) << real.err;  // the example's warnings fail at the default --fail-on warning
  auto norm = [](const std::string& s) { return std::regex_replace(s, std::regex(R"([0-9][0-9.,e+\-]*x?)"), "N"); };
  auto line_starting = [](const std::string& text, const std::string& prefix) {
    std::istringstream t(text);
    for (std::string l; std::getline(t, l);)
      if (l.rfind(prefix, 0) == 0) return l;
    return std::string();
  };
  auto first_finding = [](const std::vector<std::string>& lines) {
    for (const auto& l : lines)
      if (std::regex_search(l, std::regex(R"(^(error|warning|info)\[)"))) return l;
    return std::string();
  };
  std::vector<std::string> real_lines;
  std::istringstream rl(real.out);
  for (std::string l; std::getline(rl, l);) real_lines.push_back(l);
  const std::string sample_text = [&] {
    std::string t;
    for (const auto& l : sample) t += l + "\n";
    return t;
  }();
  for (const char* prefix : {"model   ", "loss    ", "inputs  "}) {
    const std::string want = line_starting(sample_text, prefix), got = line_starting(real.out, prefix);
    ASSERT_FALSE(want.empty()) << "README sample has no '" << prefix << "' line";
    EXPECT_EQ(norm(want), norm(got)) << "README: " << want << "\nrun:    " << got;
  }
  const std::string want = first_finding(sample), got = first_finding(real_lines);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(norm(want), norm(got)) << "README: " << want << "\nrun:    " << got;
}

}  // namespace nd_test_cli_formats_test
