// Rule-file parsing and validation (rules/ID.toml, docs/rules.md).
#include <gtest/gtest.h>

#include "core/error.h"
#include "rules/rules.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_rule_file_test {

namespace {

const char* kGood = R"(id = "BN002"
failure_mode = "bn-small-batch-noise"
severity = "warning"
scope = "layer"
select = "first"
kinds = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]
when = [
  { metric = "bn.values_per_channel", op = "<", value = 256 },
  { metric = "run.precision", op = "==", value = "fp32" },
]
evidence = ["bn.batch_size"]
title = "BatchNorm estimates its statistics from few values"
message = "{layer} estimates each channel's statistics from {bn.values_per_channel} values per pass"
explain = """
What it detects
BatchNorm estimates its statistics from few values.
"""
fix = ["increase the batch", "GroupNorm"]
references = ["seed notes"]
lifecycle = "preview"
since = "0.2.0"
data_dependent = true
)";

/// Loads `text` as rules/ID.toml in a temp folder and returns the nd::Error
/// message (fails the test when it loads).
std::string load_error(const std::string& text, const std::string& name = "X001.toml") {
  ndtest::TempDir dir;
  const std::string path = dir.write(name, text);
  try {
    nd::load_rule_file(path);
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kRuleFile);
    EXPECT_EQ(e.exit_code(), nd::ExitCode::kUsage);
    const std::string msg = e.what();
    // Every message starts with FILE:LINE:.
    EXPECT_EQ(msg.rfind(path + ":", 0), 0u) << msg;
    return msg.substr(path.size());
  }
  ADD_FAILURE() << "loaded without error:\n" << text;
  return {};
}

std::string minimal(const std::string& extra = "") {
  return "id = \"X001\"\nfailure_mode = \"input-scale\"\nseverity = \"info\"\nscope = \"model\"\n"
         "when = [ { metric = \"a.b\", op = \">\", value = 1 } ]\nmessage = \"a is {a.b}\"\n" +
         extra;
}

}  // namespace

TEST(RuleFile, ParsesEveryField) {
  ndtest::TempDir dir;
  const nd::Rule r = nd::load_rule_file(dir.write("BN002.toml", kGood));
  EXPECT_EQ(r.id, "BN002");
  EXPECT_EQ(r.failure_mode, "bn-small-batch-noise");
  EXPECT_EQ(r.severity, nd::Severity::kWarning);
  EXPECT_EQ(r.scope, "layer");
  EXPECT_EQ(r.select, "first");
  EXPECT_EQ(r.kinds, (std::vector<std::string>{"BatchNorm1d", "BatchNorm2d", "BatchNorm3d"}));
  ASSERT_EQ(r.when.size(), 2u);
  EXPECT_EQ(r.when[0].metric, "bn.values_per_channel");
  EXPECT_EQ(r.when[0].op, "<");
  EXPECT_EQ(r.when[0].value, nlohmann::json(256));
  EXPECT_TRUE(r.when[0].value.is_number_integer());
  EXPECT_EQ(r.when[1].value, nlohmann::json("fp32"));
  EXPECT_EQ(r.evidence, std::vector<std::string>{"bn.batch_size"});
  EXPECT_EQ(r.title, "BatchNorm estimates its statistics from few values");
  EXPECT_EQ(r.message, "{layer} estimates each channel's statistics from {bn.values_per_channel} values per pass");
  EXPECT_EQ(r.explain, "What it detects\nBatchNorm estimates its statistics from few values.\n");
  EXPECT_EQ(r.fix, (std::vector<std::string>{"increase the batch", "GroupNorm"}));
  EXPECT_EQ(r.references, std::vector<std::string>{"seed notes"});
  EXPECT_EQ(r.lifecycle, "preview");
  EXPECT_EQ(r.since, "0.2.0");
  EXPECT_TRUE(r.data_dependent);
  EXPECT_EQ(r.source_file, (dir.path() / "BN002.toml").string());
  EXPECT_EQ(r.source_line, 1);
}

TEST(RuleFile, Defaults) {
  ndtest::TempDir dir;
  const nd::Rule r = nd::load_rule_file(dir.write("X001.toml", minimal()));
  EXPECT_EQ(r.scope, "model");
  EXPECT_EQ(r.select, "all");
  EXPECT_TRUE(r.kinds.empty());
  EXPECT_EQ(r.lifecycle, "stable");
  EXPECT_EQ(r.since, "0.1.0");
  EXPECT_FALSE(r.data_dependent);
  EXPECT_TRUE(r.when[0].value.is_number_integer());
}

TEST(RuleFile, FloatBoolAndArrayOfTablesConditions) {
  ndtest::TempDir dir;
  const nd::Rule r = nd::load_rule_file(dir.write(
      "X001.toml", "id = \"X001\"\nfailure_mode = \"input-scale\"\nseverity = \"error\"\nscope = \"input\"\n"
                   "message = \"{input} off\"\n"
                   "[[when]]\nmetric = \"input.scale\"\nop = \">=\"\nvalue = 0.5\n"
                   "[[when]]\nmetric = \"input.is_float\"\nop = \"!=\"\nvalue = false\n"));
  ASSERT_EQ(r.when.size(), 2u);
  EXPECT_TRUE(r.when[0].value.is_number_float());
  EXPECT_EQ(r.when[0].value.get<double>(), 0.5);
  EXPECT_EQ(r.when[1].value, nlohmann::json(false));
  EXPECT_EQ(r.when[1].op, "!=");
  EXPECT_EQ(r.severity, nd::Severity::kError);
}

// A fix written as a table {text, when} holds its conditions; a plain
// string has none. fix_texts() shows the conditions where the rule is listed.
TEST(RuleFile, ConditionalFixes) {
  ndtest::TempDir dir;
  const nd::Rule r = nd::load_rule_file(dir.write(
      "X001.toml", minimal("fix = [\n  { text = \"router z-loss\", when = [ { metric = \"softmax.attention_sites\", op = \"==\", "
                           "value = 0 } ] },\n  \"smaller init\",\n]\n")));
  ASSERT_EQ(r.fix.size(), 2u);
  ASSERT_EQ(r.fix_when.size(), 2u);
  EXPECT_EQ(r.fix[0], "router z-loss");
  ASSERT_EQ(r.fix_when[0].size(), 1u);
  EXPECT_EQ(r.fix_when[0][0].metric, "softmax.attention_sites");
  EXPECT_TRUE(r.fix_when[1].empty());
  EXPECT_EQ(nd::fix_texts(r), (std::vector<std::string>{"router z-loss (when softmax.attention_sites == 0)", "smaller init"}));
}

TEST(RuleFile, ConditionalFixNeedsTextAndConditions) {
  EXPECT_EQ(load_error(minimal("fix = [ { text = \"x\" } ]\n")),
            ":7: key 'fix[0]' misses 'when' (a fix shown always is a plain string)");
  EXPECT_EQ(load_error(minimal("fix = [ { text = \"x\", when = [] } ]\n")),
            ":7: key 'fix[0].when' is empty; a conditional fix needs at least one condition");
  EXPECT_NE(load_error(minimal("fix = [ { txt = \"x\", when = [ { metric = \"a.b\", op = \"==\", value = 1 } ] } ]\n"))
                .find("unknown key 'txt' in fix[0]"),
            std::string::npos);
  EXPECT_NE(load_error(minimal("fix = [ 3 ]\n")).find("key 'fix[0]' must be a string or a table {text, when}"),
            std::string::npos);
}

TEST(RuleFile, SyntaxErrorNamesLine) {
  const std::string msg = load_error(minimal("title = \"ok\"\nfix = [\"a\",\nreferences = 3\n"));
  EXPECT_EQ(msg.rfind(":9: TOML syntax error: ", 0), 0u) << msg;
}

TEST(RuleFile, UnknownKeySuggestsClosest) {
  const std::string msg = load_error(minimal("severty = \"error\"\n"));
  EXPECT_EQ(msg, ":7: unknown key 'severty'; did you mean 'severity'?");
}

TEST(RuleFile, UnknownKeyWithoutCloseMatch) {
  EXPECT_EQ(load_error(minimal("zzzzzzzzzz = 1\n")), ":7: unknown key 'zzzzzzzzzz'");
}

TEST(RuleFile, UnknownKeyInsideWhen) {
  const std::string msg = load_error(
      "id = \"X001\"\nfailure_mode = \"input-scale\"\nseverity = \"info\"\nscope = \"model\"\nmessage = \"m\"\n"
      "when = [\n  { metric = \"a.b\", op = \">\", value = 1 },\n  { metrc = \"a.c\", op = \">\", value = 1 },\n]\n");
  EXPECT_EQ(msg, ":8: unknown key 'metrc' in when[1]; did you mean 'metric'?");
}

TEST(RuleFile, BadSlugSuggestsClosest) {
  std::string text = minimal();
  text.replace(text.find("input-scale"), 11, "input-scales");
  EXPECT_EQ(load_error(text),
            ":2: key 'failure_mode': 'input-scales' is not a slug of the failure-mode catalog; did you mean "
            "'input-scale'?");
}

TEST(RuleFile, BadSeverityAndScopeAndOp) {
  std::string sev = minimal();
  sev.replace(sev.find("\"info\""), 6, "\"warn\"");
  EXPECT_EQ(load_error(sev), ":3: key 'severity': 'warn' is not one of info, warning, error; did you mean 'warning'?");

  std::string scope = minimal();
  scope.replace(scope.find("\"model\""), 7, "\"layers\"");
  EXPECT_EQ(load_error(scope), ":4: key 'scope': 'layers' is not one of model, layer, input; did you mean 'layer'?");

  std::string op = minimal();
  op.replace(op.find("\">\""), 3, "\"=>\"");
  EXPECT_EQ(load_error(op), ":5: key 'when[0].op': '=>' is not one of <, <=, >, >=, ==, !=; did you mean '>'?");
}

TEST(RuleFile, OrderingOpNeedsANumber) {
  std::string text = minimal();
  text.replace(text.find("value = 1"), 9, "value = true");
  EXPECT_EQ(load_error(text), ":5: key 'when[0].op': '>' compares numbers only; use == or != for a boolean");
}

TEST(RuleFile, MissingRequiredKey) {
  std::string text = minimal();
  text.erase(text.find("message"));
  EXPECT_EQ(load_error(text), ":1: missing required key 'message'");
}

TEST(RuleFile, WrongType) {
  EXPECT_EQ(load_error(minimal("fix = \"one fix\"\n")), ":7: key 'fix' must be an array of strings or tables {text, when}, not a string");
  EXPECT_EQ(load_error(minimal("data_dependent = \"yes\"\n")),
            ":7: key 'data_dependent': 'yes' is neither a boolean nor a metric name (e.g. \"grad.zero_from_values\")");
  EXPECT_EQ(load_error(minimal("data_dependent = 3\n")), ":7: key 'data_dependent' must be a boolean or a metric name, not an integer");
}

TEST(RuleFile, BadId) {
  std::string text = minimal();
  text.replace(text.find("X001"), 4, "x-1");
  EXPECT_EQ(load_error(text), ":1: key 'id': 'x-1' is not a rule id (capital letters, then 3 digits: 'BN002')");
}

TEST(RuleFile, EmptyWhen) {
  std::string text = minimal();
  text.replace(text.find("[ {"), text.find("]\n") + 1 - text.find("[ {"), "[]");
  EXPECT_EQ(load_error(text), ":5: key 'when' is empty; a rule needs at least one condition");
}

TEST(RuleFile, PlaceholdersMustFitScope) {
  std::string layer = minimal();
  layer.replace(layer.find("a is {a.b}"), 10, "{layer} is {a.b}");
  EXPECT_EQ(load_error(layer), ":6: key 'message': {layer} needs scope 'layer' or a 'layer_from' metric");
  std::string input = minimal();
  input.replace(input.find("a is {a.b}"), 10, "{input} is {a.b}");
  EXPECT_EQ(load_error(input), ":6: key 'message': {input} needs scope 'input'");
  std::string unbalanced = minimal();
  unbalanced.replace(unbalanced.find("a is {a.b}"), 10, "a is {a.b");
  EXPECT_EQ(load_error(unbalanced), ":6: key 'message': '{' without '}' at offset 5");
}

TEST(RuleFile, KeysThatNeedAnotherScope) {
  EXPECT_EQ(load_error(minimal("kinds = [\"Linear\"]\n")),
            ":7: key 'kinds' applies to scope 'layer' only (this rule has scope 'model')");
  EXPECT_EQ(load_error(minimal("select = \"first\"\n")),
            ":7: key 'select' applies to scope 'layer' only (this rule has scope 'model')");
  std::string layer_rule = minimal("rank_by = \"a.b\"\n");
  layer_rule.replace(layer_rule.find("scope = \"model\""), 15, "scope = \"layer\"");
  EXPECT_EQ(load_error(layer_rule), ":7: key 'rank_by' applies to select 'first' or 'group' only (this rule has select 'all')");
  std::string bad_name = minimal("select = \"first\"\nrank_by = \"a b\"\n");
  bad_name.replace(bad_name.find("scope = \"model\""), 15, "scope = \"layer\"");
  EXPECT_EQ(load_error(bad_name), ":8: key 'rank_by': 'a b' is not a metric name");
}

TEST(RuleFile, MissingFile) {
  try {
    nd::load_rule_file("/nonexistent/X001.toml");
    FAIL() << "no error";
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kRuleFile);
    EXPECT_STREQ(e.what(), "/nonexistent/X001.toml:1: cannot read rule file (no such file)");
  }
}

TEST(RuleFolder, LoadsSortedById) {
  ndtest::TempDir dir;
  std::string b = minimal();
  b.replace(b.find("X001"), 4, "B001");
  std::string a = minimal();
  a.replace(a.find("X001"), 4, "A001");
  dir.write("b.toml", b);
  dir.write("a_second.toml", a);
  dir.write("notes.txt", "not a rule");
  const auto rules = nd::load_rules(dir.path().string());
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].id, "A001");
  EXPECT_EQ(rules[1].id, "B001");
}

TEST(RuleFolder, DuplicateIdsNameBothFiles) {
  ndtest::TempDir dir;
  const std::string first = dir.write("X001.toml", minimal());
  const std::string second = dir.write("X001_copy.toml", minimal());
  try {
    nd::load_rules(dir.path().string());
    FAIL() << "no error";
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kRuleFile);
    EXPECT_EQ(e.exit_code(), nd::ExitCode::kUsage);
    EXPECT_EQ(std::string(e.what()), second + ":1: key 'id': duplicate rule id 'X001' (also in " + first + ")");
  }
}

TEST(RuleFolder, MissingOrEmptyFolderIsAUsageError) {
  try {
    nd::load_rules("/nonexistent/rules");
    FAIL() << "no error";
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kUsage);
    EXPECT_STREQ(e.what(), "rules folder '/nonexistent/rules' does not exist");
  }
  ndtest::TempDir empty;
  try {
    nd::load_rules(empty.path().string());
    FAIL() << "no error";
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kUsage);
    EXPECT_EQ(std::string(e.what()), "rules folder '" + empty.path().string() + "' holds no rule files (*.toml)");
  }
}

TEST(Severity, ParseAndName) {
  EXPECT_EQ(nd::parse_severity("error", "--fail-on"), nd::Severity::kError);
  EXPECT_EQ(nd::parse_severity("info", "--fail-on"), nd::Severity::kInfo);
  EXPECT_STREQ(nd::severity_name(nd::Severity::kWarning), "warning");
  try {
    nd::parse_severity("warn", "--fail-on");
    FAIL() << "no error";
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kUsage);
    EXPECT_STREQ(e.what(), "--fail-on: unknown severity 'warn' (expected info, warning or error); did you mean 'warning'?");
  }
}

}  // namespace nd_test_rule_file_test
