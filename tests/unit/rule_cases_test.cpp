// Every case of every rules/ID.cases.toml, run by the one generic runner
// (src/rules/rule_cases.h), one gtest case per rule case: a failure names
// the rule and the case. Each shipped rule has at least one "catches" and
// one "clean" case (hadolint style; docs/rule-cases.md).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <set>

#include "core/error.h"
#include "rules/rule_cases.h"
#include "rules/rules.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_rule_cases_test {


std::string rules_dir() { return (ndtest::source_dir() / "rules").string(); }

const std::vector<nd::Rule>& shipped() {
  static const std::vector<nd::Rule> rules = nd::load_rules(rules_dir());
  return rules;
}

/// Every shipped case file, loaded once; a file that does not load is kept
/// as its error (ShippedCaseFilesLoad reports it).
struct Shipped {
  std::vector<nd::RuleCaseFile> files;
  std::vector<std::string> errors;
};

const Shipped& shipped_cases() {
  static const Shipped s = [] {
    Shipped out;
    for (const auto& path : nd::rule_case_files(rules_dir())) {
      try {
        out.files.push_back(nd::load_rule_cases(path));
      } catch (const std::exception& e) {
        out.errors.push_back(e.what());
      }
    }
    return out;
  }();
  return s;
}

struct CaseRef {
  std::size_t file = 0;
  std::size_t index = 0;
};

std::vector<CaseRef> all_cases() {
  std::vector<CaseRef> out;
  const auto& files = shipped_cases().files;
  for (std::size_t f = 0; f < files.size(); ++f)
    for (std::size_t i = 0; i < files[f].cases.size(); ++i) out.push_back({f, i});
  return out;
}

/// "BN002_catches_first_layer_in_execution_order": the rule, then the case
/// name with every other character as '_'.
std::string case_test_name(const testing::TestParamInfo<CaseRef>& info) {
  const auto& file = shipped_cases().files[info.param.file];
  std::string name = file.rule_id + "_" + file.cases[info.param.index].name;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

/// gtest prints a parameter with this (the test name says the rule and case already).
void PrintTo(const CaseRef& c, std::ostream* os) { *os << "file " << c.file << ", case " << c.index; }

class ShippedRuleCase : public testing::TestWithParam<CaseRef> {};

// (No anonymous namespace in this file: a test class deriving from a type
// with internal linkage draws -Wsubobject-linkage in a unity batch.)

TEST_P(ShippedRuleCase, Holds) {
  const nd::RuleCaseFile& file = shipped_cases().files[GetParam().file];
  const nd::RuleCase& c = file.cases[GetParam().index];
  const nd::Rule* rule = nd::find_rule(shipped(), file.rule_id);
  ASSERT_NE(rule, nullptr) << file.path << ": no shipped rule " << file.rule_id;
  std::string failures;
  for (const auto& f : nd::run_rule_case(*rule, c)) failures += "\n  " + f;
  EXPECT_TRUE(failures.empty()) << file.path << ":" << c.line << ": case '" << c.name << "':" << failures;
}

INSTANTIATE_TEST_SUITE_P(Rules, ShippedRuleCase, testing::ValuesIn(all_cases()), case_test_name);

TEST(RuleCases, ShippedCaseFilesLoad) {
  for (const auto& e : shipped_cases().errors) ADD_FAILURE() << e;
  EXPECT_FALSE(shipped_cases().files.empty());
}

TEST(RuleCases, ShippedRulesHaveCatchesAndCleanCases) {
  std::set<std::string> with_catches, with_clean;
  for (const auto& f : shipped_cases().files) {
    EXPECT_NE(nd::find_rule(shipped(), f.rule_id), nullptr) << f.path << " names no shipped rule";
    for (const auto& c : f.cases) (c.catches ? with_catches : with_clean).insert(f.rule_id);
  }
  for (const auto& r : shipped()) {
    EXPECT_TRUE(with_catches.count(r.id)) << "rules/" << r.id << ".cases.toml: add a case that catches " << r.id;
    EXPECT_TRUE(with_clean.count(r.id)) << "rules/" << r.id << ".cases.toml: add a clean case " << r.id << " leaves silent";
  }
}

// ---- the runner on small case files ----------------------------------------

namespace {

/// A layer rule: Linear layers whose act.growth exceeds 10.
std::string growth_rule() {
  return R"(id = "X001"
failure_mode = "activation-growth"
severity = "warning"
when = [ { metric = "act.growth", op = ">", value = 10 } ]
evidence = ["act.rms"]
kinds = ["Linear"]
message = "{layer} grows {act.growth}x"
fix = ["one", "two"]
)";
}

/// A case file for growth_rule(): one document that fires it at fc2, one that does not.
std::string growth_cases(const std::string& finding) {
  return R"(# a comment
[[case]]
name = "catches"
expect = "catches"

[[case.layers]]
path = "fc1"
kind = "Linear"
exec_order = 0
leaf = true
metrics = { "act.growth" = 1.0, "act.rms" = 0.5 }

[[case.layers]]
path = "fc2"
kind = "Linear"
exec_order = 1
leaf = true
[case.layers.metrics]
"act.growth" = 40
"act.rms" = 20.0
"act.note" = {}

[[case.finding]]
)" + finding + R"(

[[case]]
name = "clean"
expect = "clean"

[[case.layers]]
path = "fc2"
kind = "Linear"
metrics = { "act.growth" = 2 }
)";
}

struct Loaded {
  nd::Rule rule;
  nd::RuleCaseFile file;
};

Loaded load(const ndtest::TempDir& dir, const std::string& cases) {
  dir.write("X001.toml", growth_rule());
  const std::string path = dir.write("X001.cases.toml", cases);
  return {nd::load_rule_file((dir.path() / "X001.toml").string()), nd::load_rule_cases(path)};
}

std::vector<std::string> failures(const Loaded& l, std::size_t index) { return nd::run_rule_case(l.rule, l.file.cases.at(index)); }

/// The message of the nd::Error that loading `cases` as X001.cases.toml throws, the path replaced by "FILE".
std::string load_error(const std::string& cases) {
  ndtest::TempDir dir;
  const std::string path = dir.write("X001.cases.toml", cases);
  try {
    nd::load_rule_cases(path);
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kRuleFile);
    EXPECT_EQ(e.exit_code(), nd::ExitCode::kUsage);
    std::string m = e.what();
    if (m.rfind(path, 0) == 0) m = "FILE" + m.substr(path.size());
    return m;
  }
  return "no error";
}

}  // namespace

TEST(RuleCaseRunner, ReadsTheDocumentAndPasses) {
  ndtest::TempDir dir;
  const Loaded l = load(dir, growth_cases(R"(layer = "fc2"
severity = "warning"
synthetic_inputs = false
fixes = 2
message = "fc2 grows 40x"
evidence = { "act.growth" = 40.0, "act.rms" = 20 })"));
  EXPECT_EQ(l.file.rule_id, "X001");
  ASSERT_EQ(l.file.cases.size(), 2u);
  const nd::RuleCase& c = l.file.cases[0];
  EXPECT_EQ(c.name, "catches");
  EXPECT_TRUE(c.catches);
  EXPECT_EQ(c.line, 2);
  ASSERT_EQ(c.doc.layers.size(), 2u);
  EXPECT_EQ(c.doc.layers[1].path, "fc2");
  EXPECT_EQ(c.doc.layers[1].exec_order, 1);
  EXPECT_TRUE(c.doc.layers[1].metrics.at("act.note").is_null());
  EXPECT_TRUE(c.doc.layers[1].metrics.at("act.growth").is_number_integer());
  EXPECT_EQ(l.file.cases[1].doc.layers[0].exec_order, -1);  // the default
  EXPECT_FALSE(l.file.cases[1].catches);
  EXPECT_EQ(failures(l, 0), std::vector<std::string>{});
  EXPECT_EQ(failures(l, 1), std::vector<std::string>{});
}

TEST(RuleCaseRunner, SaysWhatDiffers) {
  ndtest::TempDir dir;
  const Loaded l = load(dir, growth_cases(R"(layer = "fc1"
severity = "error"
synthetic_inputs = true
fixes = 3
message = "fc2 grows 41x"
evidence = { "act.growth" = 40, "act.absmax" = 3 })"));
  EXPECT_EQ(failures(l, 0),
            (std::vector<std::string>{"layer is 'fc2', expected 'fc1'",
                                      "severity is warning, expected error",
                                      "message is\n    fc2 grows 40x\n  expected\n    fc2 grows 41x",
                                      "evidence lacks 'act.absmax' (expected 3)",
                                      "evidence has 'act.rms' = 20.0, not expected",
                                      "synthetic_inputs is false, expected true",
                                      "fixes: 2, expected 3"}));
}

TEST(RuleCaseRunner, PartialExpectations) {
  ndtest::TempDir dir;
  const Loaded ok = load(dir, growth_cases(R"(layer = "fc2"
severity = "warning"
message_contains = "grows"
evidence_includes = { "act.growth" = 40 })"));
  EXPECT_EQ(failures(ok, 0), std::vector<std::string>{});
  const Loaded bad = load(dir, growth_cases(R"(layer = "fc2"
severity = "warning"
message_contains = "shrinks"
evidence_includes = { "act.rms" = nan })"));
  EXPECT_EQ(failures(bad, 0), (std::vector<std::string>{"message\n    fc2 grows 40x\n  does not contain\n    shrinks",
                                                        "evidence 'act.rms' is 20.0, expected nan"}));
}

TEST(RuleCaseRunner, CountsAndCleanCases) {
  ndtest::TempDir dir;
  std::string cases = growth_cases("layer = \"fc2\"\nseverity = \"warning\"\n\n[[case.finding]]\nlayer = \"fc3\"\nseverity = \"warning\"");
  // The clean twin fires: its layer grows 50x.
  cases.replace(cases.rfind("\"act.growth\" = 2"), 16, "\"act.growth\" = 50");
  const Loaded l = load(dir, cases);
  EXPECT_EQ(failures(l, 0), (std::vector<std::string>{"expected 2 finding(s), got 1", "got layer 'fc2', warning: fc2 grows 40x"}));
  EXPECT_EQ(failures(l, 1), (std::vector<std::string>{"expected no finding, got layer 'fc2', warning: fc2 grows 50x"}));
}

TEST(RuleCaseRunner, NonFiniteValues) {
  ndtest::TempDir dir;
  const std::string path = dir.write("X001.cases.toml", R"([[case]]
name = "n"
expect = "clean"
[case.model_metrics]
"a.inf" = inf
"a.ninf" = -inf
"a.nan" = nan
)");
  const auto f = nd::load_rule_cases(path);
  const auto& m = f.cases.at(0).doc.model_metrics;
  EXPECT_TRUE(std::isinf(m.at("a.inf").get<double>()) && m.at("a.inf").get<double>() > 0);
  EXPECT_TRUE(std::isinf(m.at("a.ninf").get<double>()) && m.at("a.ninf").get<double>() < 0);
  EXPECT_TRUE(std::isnan(m.at("a.nan").get<double>()));
}

TEST(RuleCaseRunner, BadFilesNameFileAndLine) {
  EXPECT_EQ(load_error("[[case]]\nname = \"a\"\nexpect = \"catch\"\n"),
            "FILE:3: key 'expect' in case 'a': 'catch' is not one of catches, clean; did you mean 'catches'?");
  EXPECT_EQ(load_error("[[case]]\nname = \"a\"\nexpect = \"clean\"\nlayer = []\n"),
            "FILE:4: unknown key 'layer' in case 'a'; did you mean 'layers'?");
  EXPECT_EQ(load_error("[[case]]\nname = \"a\"\nexpect = \"catches\"\n"),
            "FILE:1: case 'a' expects catches but lists no [[case.finding]]");
  EXPECT_EQ(load_error("[[case]]\nname = \"a\"\nexpect = \"clean\"\n[[case.finding]]\nseverity = \"info\"\n"),
            "FILE:4: case 'a' expects clean but lists [[case.finding]]");
  EXPECT_EQ(load_error("[[case]]\nname = \"a\"\nexpect = \"clean\"\n[[case]]\nname = \"a\"\nexpect = \"clean\"\n"),
            "FILE:4: case 'a': duplicate case name (also at line 1)");
  EXPECT_EQ(load_error("[[case]]\nname = \"a\"\nexpect = \"clean\"\n[[case.layers]]\npath = \"x\"\nmetrics = { \"m.v\" = [1] }\n"),
            "FILE:6: 'm.v' in a layer in case 'a' must be a number, boolean, string or {} (null), not an array");
  EXPECT_EQ(load_error("[[case]]\nname = \"a\"\nexpect = \"clean\"\n[[case.layers]]\npath = \"x\"\nexec_order = \"1\"\n"),
            "FILE:6: key 'exec_order' in a layer in case 'a' must be an integer, not a string");
  EXPECT_EQ(load_error("[[case]]\nexpect = \"clean\"\n"), "FILE:1: missing required key 'name' in [[case]]");
  EXPECT_EQ(load_error("[[case]]\nname = \"a\"\nexpect = \"catches\"\n[[case.finding]]\nlayer = \"x\"\n"),
            "FILE:4: missing required key 'severity' in a finding in case 'a'");
  EXPECT_EQ(load_error("name = 1\n"), "FILE:1: unknown key 'name'; did you mean 'case'?");
  EXPECT_EQ(load_error("[[case]\n").rfind("FILE:1: TOML syntax error: ", 0), 0u);
}

TEST(RuleCaseRunner, FolderListsCaseFilesAndLoadRulesSkipsThem) {
  ndtest::TempDir dir;
  dir.write("X001.toml", growth_rule());
  dir.write("X001.cases.toml", growth_cases("layer = \"fc2\"\nseverity = \"warning\""));
  dir.write("notes.txt", "");
  EXPECT_EQ(nd::rule_case_files(dir.path().string()), std::vector<std::string>{(dir.path() / "X001.cases.toml").string()});
  const auto rules = nd::load_rules(dir.path().string());
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].id, "X001");
  EXPECT_TRUE(nd::is_rule_case_file("BN002.cases.toml"));
  EXPECT_FALSE(nd::is_rule_case_file("BN002.toml"));
  EXPECT_FALSE(nd::is_rule_case_file(".cases.toml"));
}

// The example of docs/rule-cases.md is a case file that passes on BN002.
TEST(RuleCaseRunner, DocsExamplePasses) {
  const std::string text = ndtest::read_file(ndtest::source_dir() / "docs" / "rule-cases.md");
  const auto b = text.find("```toml\n"), e = text.find("```\n", b + 8);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  ndtest::TempDir dir;
  const nd::RuleCaseFile f = nd::load_rule_cases(dir.write("BN002.cases.toml", text.substr(b + 8, e - b - 8)));
  ASSERT_EQ(f.cases.size(), 2u);
  for (const auto& c : f.cases) EXPECT_EQ(nd::run_rule_case(*nd::find_rule(shipped(), "BN002"), c), std::vector<std::string>{}) << c.name;
}

}  // namespace nd_test_rule_cases_test
