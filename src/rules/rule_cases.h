// Rule cases as data: rules/ID.cases.toml beside rules/ID.toml holds the
// metrics documents that must fire the rule ("catches", with the findings it
// must report) and the healthy twins that must leave it silent ("clean").
// One generic runner evaluates the rule alone on each document and says what
// differs (docs/rule-cases.md). Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/metrics.h"
#include "rules/rules.h"

namespace nd {

/// What one case expects of one finding. Unset optionals are not checked.
struct ExpectedFinding {
  std::optional<std::string> layer;   ///< module path; nullopt: the finding has no layer
  std::optional<std::string> input;   ///< forward argument; nullopt: the finding has no input
  std::optional<Severity> severity;
  std::optional<std::string> failure_mode;
  std::optional<std::string> message;           ///< the whole message
  std::optional<std::string> message_contains;  ///< a part of it
  std::optional<nlohmann::json> evidence;           ///< the whole evidence object
  std::optional<nlohmann::json> evidence_includes;  ///< these keys with these values, others allowed
  std::optional<bool> synthetic_inputs;
  std::optional<int64_t> fixes;  ///< number of fix lines
  int line = 1;                  ///< line of its [[case.finding]] header
};

/// One [[case]] of a case file.
struct RuleCase {
  std::string name;
  bool catches = true;  ///< expect = "catches" (else "clean": no finding)
  MetricsDoc doc;
  std::vector<ExpectedFinding> findings;  ///< catches: exactly these, in report order
  int line = 1;                           ///< line of its [[case]] header
};

/// One case file: the rule it tests (from the file name) and its cases.
struct RuleCaseFile {
  std::string path;
  std::string rule_id;  ///< "BN002" for BN002.cases.toml
  std::vector<RuleCase> cases;
};

/// True for a file name that ends in ".cases.toml" (load_rules skips them).
bool is_rule_case_file(const std::string& filename);

/// Parses one case file. Throws nd::Error (kind rule_file, exit 2) as
/// "PATH:LINE: ..." on a syntax error, an unknown key, a wrong type, a
/// case without a name or two cases with the same name.
RuleCaseFile load_rule_cases(const std::string& path);

/// The *.cases.toml files of `dir`, sorted by name (none: empty).
std::vector<std::string> rule_case_files(const std::string& dir);

/// Evaluates `rule` alone on the case's document and compares the findings
/// with the expectation. Returns what differs, one sentence each; empty when
/// the case passes.
std::vector<std::string> run_rule_case(const Rule& rule, const RuleCase& c);

}  // namespace nd
