// normdoctor.toml (docs/config.md): parsing, validation with suggestions,
// discovery, precedence, and how a config changes rules and findings.
#include <gtest/gtest.h>

#include "config/config.h"
#include "core/error.h"
#include "rules/rules.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_config_test {

using ndtest::layer;

namespace {

const std::vector<nd::Rule>& shipped() {
  static const std::vector<nd::Rule> rules = nd::load_rules((ndtest::source_dir() / "rules").string());
  return rules;
}

/// The nd::Error message of loading `text` as a config (the file path cut to
/// "normdoctor.toml"); fails the test when it loads.
std::string config_error(const std::string& text) {
  ndtest::TempDir dir;
  const std::string path = dir.write("normdoctor.toml", text);
  try {
    nd::load_config(path, shipped());
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kConfig);
    EXPECT_EQ(e.exit_code(), nd::ExitCode::kUsage);
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path + ":", 0), 0u) << msg;
    return "normdoctor.toml" + msg.substr(path.size());
  }
  ADD_FAILURE() << "loaded without error:\n" << text;
  return {};
}

nd::Config load(const std::string& text) {
  ndtest::TempDir dir;
  return nd::load_config(dir.write("normdoctor.toml", text), shipped());
}

std::vector<std::string> ids(const std::vector<nd::Rule>& rules) {
  std::vector<std::string> out;
  for (const auto& r : rules) out.push_back(r.id);
  return out;
}

const char* kFull = R"(# a project config
select = ["ACT", "GRAD002"]
ignore = ["ACT004"]
severity = "warning"
fail-on = "warning"

[rules.ACT003]
severity = "error"
thresholds = { "act.fp16_headroom" = 4 }

[rules.ACT002.thresholds]
act.growth = 100.5

[[suppress]]
rule = "ACT002"
module = "blocks.*"
reason = "the blocks are rescaled by the optimizer warm-up"
)";

}  // namespace

TEST(Config, ParsesEveryKey) {
  const nd::Config c = load(kFull);
  ASSERT_TRUE(c.select);
  EXPECT_EQ(*c.select, (std::vector<std::string>{"ACT", "GRAD002"}));
  EXPECT_EQ(*c.ignore, std::vector<std::string>{"ACT004"});
  EXPECT_EQ(c.severity, "warning");
  EXPECT_EQ(c.fail_on, "warning");
  ASSERT_EQ(c.severity_overrides.size(), 1u);
  EXPECT_EQ(c.severity_overrides.at("ACT003"), nd::Severity::kError);
  ASSERT_EQ(c.thresholds.size(), 2u);
  EXPECT_EQ(c.thresholds[0].rule, "ACT002");  // [rules] tables in id order
  EXPECT_EQ(c.thresholds[0].metric, "act.growth");  // a dotted key, flattened
  EXPECT_EQ(c.thresholds[0].value, nlohmann::json(100.5));
  EXPECT_EQ(c.thresholds[1].rule, "ACT003");
  EXPECT_EQ(c.thresholds[1].metric, "act.fp16_headroom");
  EXPECT_EQ(c.thresholds[1].value, nlohmann::json(4));
  ASSERT_EQ(c.suppressions.size(), 1u);
  EXPECT_EQ(c.suppressions[0].rule, "ACT002");
  EXPECT_EQ(c.suppressions[0].module, "blocks.*");
  EXPECT_EQ(c.suppressions[0].reason, "the blocks are rescaled by the optimizer warm-up");
  EXPECT_EQ(c.suppressions[0].line, 14);
}

TEST(Config, EmptyFileChangesNothing) {
  const nd::Config c = load("# nothing\n");
  EXPECT_FALSE(c.select);
  EXPECT_FALSE(c.ignore);
  EXPECT_FALSE(c.fail_on);
  EXPECT_EQ(ids(nd::apply_config(shipped(), c)), ids(shipped()));
}

TEST(Config, TyposNameFileLineKeyAndSuggestion) {
  EXPECT_EQ(config_error("select = [\"ACT\"]\nignor = [\"ACT002\"]\n"),
            "normdoctor.toml:2: unknown key 'ignor'; did you mean 'ignore'? (known keys: select, ignore, severity, "
            "fail-on, rules, suppress)");
  EXPECT_EQ(config_error("fail_on = \"warning\"\n"),
            "normdoctor.toml:1: unknown key 'fail_on'; did you mean 'fail-on'? (known keys: select, ignore, severity, "
            "fail-on, rules, suppress)");
  EXPECT_EQ(config_error("[rules.ACT02]\nseverity = \"error\"\n"),
            "normdoctor.toml:1: unknown rule id 'ACT02' in key 'rules.ACT02'; did you mean 'ACT002'? (`normdoctor "
            "rules` lists them)");
  EXPECT_EQ(config_error("[rules.ACT002]\nseverty = \"error\"\n"),
            "normdoctor.toml:2: unknown key 'rules.ACT002.severty'; did you mean 'severity'? (known keys in "
            "rules.ACT002: severity, thresholds)");
  EXPECT_EQ(config_error("[rules.ACT002]\nthresholds = { \"act.grwth\" = 10 }\n"),
            "normdoctor.toml:2: key 'rules.ACT002.thresholds': rule ACT002 has no condition on metric 'act.grwth'; "
            "did you mean 'act.growth'? (its conditions: act.growth, act.growth_only_at_output)");
  EXPECT_EQ(config_error("ignore = [\"ACT0002\"]\n"),
            "normdoctor.toml:1: key 'ignore': 'ACT0002' is neither a rule id nor the prefix of one; did you mean "
            "'ACT002'? (`normdoctor rules` lists them)");
  EXPECT_EQ(config_error("severity = \"warn\"\n"),
            "normdoctor.toml:1: key 'severity': 'warn' is not one of info, warning, error; did you mean 'warning'?");
  EXPECT_EQ(config_error("fail-on = \"nevr\"\n"),
            "normdoctor.toml:1: key 'fail-on': 'nevr' is not one of info, warning, error, never; did you mean 'never'?");
  EXPECT_EQ(config_error("[[suppress]]\nrule = \"ACT002\"\nmodul = \"fc\"\nreason = \"x\"\n"),
            "normdoctor.toml:3: unknown key 'suppress[0].modul'; did you mean 'module'? (known keys in suppress[0]: "
            "rule, module, model, reason)");
}

TEST(Config, TypeAndValueErrors) {
  EXPECT_EQ(config_error("select = \"ACT\"\n"),
            "normdoctor.toml:1: key 'select' must be an array of rule ids or prefixes, not a string");
  EXPECT_EQ(config_error("[rules.ACT002]\nthresholds = { \"act.growth\" = \"big\" }\n"),
            "normdoctor.toml:2: key 'rules.ACT002.thresholds.act.growth' must be a number like the rule's threshold "
            "(1000), not a string");
  const std::string syntax = config_error("select = [\"ACT\"\nignore = 3\n");
  EXPECT_EQ(syntax.rfind("normdoctor.toml:", 0), 0u);
  EXPECT_NE(syntax.find(": TOML syntax error: "), std::string::npos) << syntax;
}

TEST(Config, SuppressionsNeedAReason) {
  EXPECT_EQ(config_error("[[suppress]]\nrule = \"ACT002\"\nmodule = \"fc\"\n"),
            "normdoctor.toml:1: key 'suppress[0]' misses 'reason' (a suppression must say why the finding does not "
            "apply)");
  EXPECT_EQ(config_error("[[suppress]]\nrule = \"ACT002\"\nmodule = \"fc\"\nreason = \"  \"\n"),
            "normdoctor.toml:4: key 'suppress[0].reason' is empty; say why the finding does not apply");
  EXPECT_EQ(config_error("[[suppress]]\nrule = \"XYZ\"\nmodule = \"fc\"\nreason = \"r\"\n"),
            "normdoctor.toml:2: key 'suppress[0].rule': 'XYZ' is neither a rule id nor the prefix of one (`normdoctor "
            "rules` lists them)");
}

TEST(Config, MissingFileIsAConfigError) {
  try {
    nd::load_config("/nonexistent/normdoctor.toml", shipped());
    FAIL();
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kConfig);
    EXPECT_EQ(std::string(e.what()), "/nonexistent/normdoctor.toml: cannot read config file (no such file)");
  }
}

TEST(Config, FoundFromTheWorkingDirectoryUpward) {
  ndtest::TempDir dir;
  ndtest::fs::create_directories(dir.path() / "a" / "b");
  const auto before = nd::find_config((dir.path() / "a" / "b").string());  // maybe one above the temp dir
  EXPECT_TRUE(!before || before->rfind(dir.path().string(), 0) != 0);
  const std::string top = dir.write("normdoctor.toml", "");
  EXPECT_EQ(nd::find_config((dir.path() / "a" / "b").string()), top);
  const std::string nearer = dir.write("a/normdoctor.toml", "");
  EXPECT_EQ(nd::find_config((dir.path() / "a" / "b").string()), nearer);
  EXPECT_EQ(nd::find_config(dir.path().string()), top);
}

TEST(Config, FlagsWinOverTheFile) {
  nd::Config file = load(kFull);
  nd::Config flags;
  flags.fail_on = "error";
  flags.ignore = std::vector<std::string>{};
  const nd::Config c = nd::with_flags(file, flags);
  EXPECT_EQ(c.fail_on, "error");
  EXPECT_EQ(c.severity, "warning");                 // from the file
  EXPECT_EQ(*c.select, file.select.value());        // from the file
  EXPECT_TRUE(c.ignore && c.ignore->empty());       // the flag replaced the list
  EXPECT_EQ(c.severity_overrides.size(), 1u);       // file only
}

TEST(Config, RulePatterns) {
  EXPECT_TRUE(nd::rule_matches("ACT", "ACT002"));
  EXPECT_TRUE(nd::rule_matches("ACT002", "ACT002"));
  EXPECT_FALSE(nd::rule_matches("ACT0021", "ACT002"));
  EXPECT_FALSE(nd::rule_matches("", "ACT002"));
  EXPECT_EQ(nd::split_list({"ACT, GRAD001", "IN,", ""}), (std::vector<std::string>{"ACT", "GRAD001", "IN"}));
  EXPECT_NO_THROW(nd::check_rule_patterns({"ACT", "GRAD005"}, shipped(), "--select"));
  try {
    nd::check_rule_patterns({"GRAD9"}, shipped(), "--ignore");
    FAIL();
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kUsage);
    EXPECT_EQ(std::string(e.what()).rfind("--ignore: 'GRAD9' is neither a rule id nor the prefix of one", 0), 0u)
        << e.what();
  }
}

TEST(Config, SelectionAndOverridesChangeTheRules) {
  const nd::Config c = load(kFull);
  const auto rules = nd::apply_config(shipped(), c);
  EXPECT_EQ(ids(rules), (std::vector<std::string>{"ACT001", "ACT002", "ACT003", "ACT005", "ACT006", "ACT007", "ACT008", "ACT009", "ACT010", "ACT011", "ACT012", "ACT013",
                                                  "GRAD002"}));
  const nd::Rule* act3 = nd::find_rule(rules, "ACT003");
  ASSERT_NE(act3, nullptr);
  EXPECT_EQ(act3->severity, nd::Severity::kError);
  EXPECT_EQ(act3->when[0].value, nlohmann::json(4));
  EXPECT_EQ(nd::find_rule(rules, "ACT002")->when[0].value, nlohmann::json(100.5));
  // The loaded rules are not touched.
  EXPECT_EQ(nd::find_rule(shipped(), "ACT003")->severity, nd::Severity::kWarning);
}

TEST(Config, ThresholdOverrideChangesWhatFires) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("fc1", "Linear", 0, true, {{"act.growth", 1.0}, {"act.rms", 1.0}}));
  doc.layers.push_back(layer("fc2", "Linear", 1, true, {{"act.growth", 150.0}, {"act.rms", 150.0}}));
  doc.model_metrics["act.growth_only_at_output"] = false;
  nd::Config none;
  none.select = std::vector<std::string>{"ACT002"};
  EXPECT_TRUE(nd::evaluate_rules(nd::apply_config(shipped(), none), doc).empty());
  nd::Config lower = none;
  lower.thresholds.push_back({"ACT002", "act.growth", 100});
  const auto findings = nd::evaluate_rules(nd::apply_config(shipped(), lower), doc);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].layer, "fc2");
}

TEST(Config, SuppressionsByRuleAndModuleGlob) {
  auto finding = [](const std::string& id, std::optional<std::string> layer, std::optional<std::string> input = {}) {
    nd::Finding f;
    f.rule_id = id;
    f.layer = std::move(layer);
    f.input = std::move(input);
    return f;
  };
  std::vector<nd::Finding> findings = {finding("ACT002", "blocks.3.mlp.fc2"), finding("ACT002", "head"),
                                       finding("ACT003", "blocks.3.mlp.fc2"), finding("IN002", std::nullopt, "x"),
                                       finding("GRAD002", "blocks.0.fc")};
  std::vector<nd::Suppression> sups = {
      {"ACT002", "blocks.*", "rescaled", 3, 0, ""},  // '*' crosses dots
      {"IN", "*", "raw pixels on purpose", 7, 0, ""},  // prefix; "*" covers findings without a module
      {"GRAD003", "*", "never fires here", 11, 0, ""},
  };
  EXPECT_EQ(nd::suppress_findings(findings, sups), 2);
  ASSERT_EQ(findings.size(), 3u);
  EXPECT_EQ(findings[0].layer, "head");
  EXPECT_EQ(findings[1].rule_id, "ACT003");
  EXPECT_EQ(findings[2].rule_id, "GRAD002");
  EXPECT_EQ(sups[0].matched, 1);
  EXPECT_EQ(sups[1].matched, 1);
  EXPECT_EQ(sups[2].matched, 0);

  nd::Config cfg;
  cfg.file = "proj/normdoctor.toml";
  cfg.suppressions = sups;
  EXPECT_EQ(nd::unused_suppression_notes(cfg),
            std::vector<std::string>{"proj/normdoctor.toml:11: suppression of GRAD003 on modules '*' matched no "
                                     "finding; remove it if the problem is gone"});
}

TEST(Config, ModulePatternDoesNotMatchFindingsWithoutModule) {
  nd::Finding f;
  f.rule_id = "GRAD002";  // model-level, no layer
  std::vector<nd::Finding> findings = {f};
  std::vector<nd::Suppression> sups = {{"GRAD002", "fc*", "r", 1, 0, ""}};
  EXPECT_EQ(nd::suppress_findings(findings, sups), 0);
  EXPECT_EQ(findings.size(), 1u);
}

TEST(Config, EffectiveConfigurationForTheReport) {
  nd::Config c = load(kFull);
  c.suppressions[0].matched = 2;
  const auto rules = nd::apply_config(shipped(), c);
  const auto j = nd::config_json(c, rules, shipped(), "warning", "warning");
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"file", "section", "select", "ignore", "severity", "fail_on", "rules",
                                            "severity_overrides", "threshold_overrides", "suppressions"}));
  EXPECT_EQ(j["rules"],
            nlohmann::ordered_json({"ACT001", "ACT002", "ACT003", "ACT005", "ACT006", "ACT007", "ACT008", "ACT009", "ACT010", "ACT011", "ACT012", "ACT013", "GRAD002"}));
  EXPECT_EQ(j["severity_overrides"][0],
            (nlohmann::ordered_json{{"rule", "ACT003"}, {"severity", "error"}, {"default", "warning"}}));
  EXPECT_EQ(j["threshold_overrides"][0], (nlohmann::ordered_json{{"rule", "ACT002"},
                                                                {"metric", "act.growth"},
                                                                {"op", ">"},
                                                                {"value", 100.5},
                                                                {"default", 1000}}));
  EXPECT_EQ(j["suppressions"][0]["matched"], 2);
  EXPECT_EQ(j["suppressions"][0]["unused"], false);
}

}  // namespace nd_test_config_test
