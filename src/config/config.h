// Project configuration (normdoctor.toml) and how it changes a run: which
// rules run, their severities and thresholds, per-module suppressions, the
// default --fail-on. Format and precedence: docs/config.md.
//
// Torch-free; the rules engine applies a Config to the loaded rules before
// evaluation (apply_config) and to the findings after it (suppress_findings).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rules/rules.h"

namespace nd {

/// The file name looked for from the working directory upward.
inline constexpr const char* kConfigFileName = "normdoctor.toml";
/// Also looked for, in each folder after normdoctor.toml: its
/// [tool.normdoctor] table holds the same keys (a pyproject.toml without
/// that table is passed over).
inline constexpr const char* kPyprojectFileName = "pyproject.toml";

/// One [[suppress]] entry: findings of `rule` on modules matching `module`
/// in model files matching `model`.
struct Suppression {
  std::string rule;    ///< rule id or id prefix ("ACT002", "ACT"), upper case
  std::string module = "*";  ///< glob on the module path (fnmatch, '*' also crosses dots); "*" when not given
  std::string reason;  ///< why the finding does not apply (mandatory)
  int line = 0;        ///< line of the entry in the config file
  int matched = 0;     ///< findings it suppressed in this run (set by suppress_findings)
  /// Glob on the model file ("exports/*.pt", '*' also crosses '/'), matched
  /// against the path as given, relative to the config file's folder and
  /// absolute; "" = every model.
  std::string model;
};

/// One threshold override: the `value` of the rule's `when` condition on `metric`.
struct ThresholdOverride {
  std::string rule;
  std::string metric;
  nlohmann::json value;
};

/// A parsed config file, or the settings given by flags; every field
/// optional (absent = not set here).
struct Config {
  std::string file;                                   ///< path it was read from; "" = none
  std::string section;                                ///< "tool.normdoctor" for a pyproject.toml, else ""
  std::optional<std::vector<std::string>> select;     ///< ids or prefixes; absent = all rules
  std::optional<std::vector<std::string>> ignore;     ///< ids or prefixes
  std::optional<std::string> severity;                ///< lowest severity shown: info|warning|error
  std::optional<std::string> fail_on;                 ///< info|warning|error|never
  std::map<std::string, Severity> severity_overrides; ///< rule id -> severity
  std::vector<ThresholdOverride> thresholds;
  std::vector<Suppression> suppressions;
};

/// `file` with every setting that `flags` sets replacing it (precedence:
/// flags > config file > rule defaults). Overrides and suppressions come
/// from the file only.
Config with_flags(Config file, const Config& flags);

/// The nearest config file in `start` or one of its parents: in each folder
/// normdoctor.toml, else a pyproject.toml with a [tool.normdoctor] table
/// (normdoctor.toml wins when both are there); nullopt when there is none up
/// to the root. A pyproject.toml that is not valid TOML is passed over here
/// (load_config reports it when given with --config).
std::optional<std::string> find_config(const std::string& start);

/// Parses and validates a config file against the loaded rules: a
/// normdoctor.toml, or (file name pyproject.toml) the [tool.normdoctor]
/// table of one. Rule ids are case-insensitive and stored in upper case.
/// Throws nd::Error (kind config, exit 2) "FILE:LINE: ..." naming the key,
/// with a "did you mean" suggestion for unknown keys, rule ids and metric
/// names; a pyproject.toml without [tool.normdoctor] is an error too.
Config load_config(const std::string& path, const std::vector<Rule>& rules);

/// Checks a --select / --ignore list (`what` names the flag): each entry must
/// be a rule id or the prefix of one. Throws nd::Error (usage) otherwise.
void check_rule_patterns(const std::vector<std::string>& patterns, const std::vector<Rule>& rules,
                         const std::string& what);

/// Splits flag values on commas and drops empty pieces ("ACT,GRAD001").
std::vector<std::string> split_list(const std::vector<std::string>& values);

/// `s` in upper case (ASCII): rule ids are case-insensitive everywhere.
std::string upper(std::string s);

/// True when `pattern` (a rule id or an id prefix, any case) names `rule_id`.
bool rule_matches(const std::string& pattern, const std::string& rule_id);

/// The rules this run evaluates: selected (all when `select` is absent), not
/// ignored, with severity and threshold overrides applied. Keeps the order.
std::vector<Rule> apply_config(const std::vector<Rule>& rules, const Config& cfg);

/// Removes the findings a suppression covers and counts, in each
/// suppression's `matched`, how many it removed. Returns the number removed.
/// A finding without a module path (model or input scope) is matched as
/// the empty string, so only a pattern such as "*" covers it. `model` is
/// the model file as given on the command line and `config_file` the file
/// the suppressions come from (for `model` globs relative to its folder).
/// The removed findings go to `removed` (with the suppression's reason,
/// file and line) when it is not null.
int suppress_findings(std::vector<Finding>& findings, std::vector<Suppression>& suppressions,
                      const std::string& model = "", const std::string& config_file = "",
                      std::vector<SuppressedFinding>* removed = nullptr);

/// The suppressions that matched nothing, as "FILE:LINE: ..." sentences.
std::vector<std::string> unused_suppression_notes(const Config& cfg);

/// The effective configuration as written to the JSON report's `config` key
/// (docs/report.md). `rules` are the rules evaluated; `defaults` the loaded
/// rules before overrides.
nlohmann::ordered_json config_json(const Config& cfg, const std::vector<Rule>& rules,
                                   const std::vector<Rule>& defaults, const std::string& severity,
                                   const std::string& fail_on);

}  // namespace nd
