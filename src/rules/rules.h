// Rules as data: loading rules/*.toml and evaluating them on a MetricsDoc.
//
// A rule is a comparison a user can read and tune (DESIGN.md, "Rules are
// data"); logic a threshold cannot express lives in a probe as a derived
// metric. Rules never run the model. No LibTorch header here.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/metrics.h"

namespace nd {

/// Finding severity, ordered: info < warning < error.
enum class Severity { kInfo = 0, kWarning = 1, kError = 2 };

/// "info" | "warning" | "error". Throws nd::Error (usage) for anything else,
/// naming `what` (the flag or file:key that held the text).
Severity parse_severity(const std::string& text, const std::string& what);
const char* severity_name(Severity s);

/// One `when` entry: metric OP value. op is one of < <= > >= == !=.
/// Numbers compare numerically, strings and bools with == and != only.
struct Condition {
  std::string metric;
  std::string op;
  MetricValue value;
};

/// One rule file (rules/ID.toml). See docs/rules.md for every field.
struct Rule {
  std::string id;                     ///< stable id, "BN002"; never reused
  std::string failure_mode;           ///< slug from failure-modes.md
  Severity severity = Severity::kWarning;  ///< default severity
  std::string scope = "layer";        ///< "model" | "layer" | "input"
  std::string select = "all";         ///< "all" | "first": first matching layer in execution order only | "group": the same, naming the other matching layers
  /// With select "first"/"group": the metric whose largest value picks the
  /// finding's layer among the matching ones (execution order breaks ties,
  /// and picks when empty): the noisiest BatchNorm, not the first (BN007).
  std::string rank_by;
  std::vector<std::string> kinds;     ///< layer kinds (glob, "BatchNorm*"); empty = any
  std::vector<Condition> when;        ///< all must hold
  std::string layer_from;             ///< model scope: metric whose string value names the finding's layer
  std::vector<std::string> evidence;  ///< metric names copied into the finding (plus every `when` metric)
  std::string title;                  ///< one-line summary (also the first sentence of explain)
  std::string message;                ///< template: {layer}, {input}, {metric.name}
  std::string explain;                ///< long text: detects / why / example / fix / when to ignore
  std::vector<std::string> fix;       ///< concrete fixes, most effective first
  /// Per entry of `fix`: conditions (on the finding's metrics, as `when`)
  /// under which that fix applies; empty = always. A fix written as a table
  /// {text, when} fits only some of the models the rule fires on (a router's
  /// softmax, not an attention's), and is left out of findings where its
  /// conditions do not hold.
  std::vector<std::vector<Condition>> fix_when;
  std::vector<std::string> references;///< sources of the thresholds (papers, bug threads)
  std::string lifecycle = "stable";   ///< "stable" | "preview" | "deprecated"
  std::string since = "0.1.0";        ///< normdoctor version that introduced it
  bool data_dependent = false;        ///< depends on the input distribution (lower severity on synthetic inputs)
  /// `data_dependent = "METRIC"`: only the findings whose entity (the layer,
  /// input or model) has that metric true depend on the input distribution
  /// (GRAD004: zero gradients that autograd does compute are the batch's
  /// values, a missing gradient is structure). "" when data_dependent is a boolean.
  std::string data_dependent_metric;
  /// The probe whose metrics the rule reads ("precision"; "" = one of the
  /// probes that always run). When that probe's status in the metrics
  /// document is not "ok" the rule is reported as skipped with the probe's
  /// reason (src/policy/policy.h), not as passed.
  std::string probe;
  std::string source_file;            ///< where it was read from (for error messages)
  int source_line = 1;                ///< line of the `id` key in source_file
};

/// One diagnosed problem. Sorted deterministically by the engine.
struct Finding {
  std::string rule_id;
  std::string failure_mode;
  Severity severity = Severity::kWarning;
  std::optional<std::string> layer;   ///< module path; nullopt for model-level findings
  std::optional<std::string> input;   ///< forward argument name for input-scope findings
  std::string message;                ///< rendered template, lowercase start, no final period
  nlohmann::json evidence = nlohmann::json::object();  ///< metric name -> value
  std::vector<std::string> fix;
  bool synthetic_inputs = false;      ///< measured on synthesized inputs (data_dependent rule)
};

/// A finding a suppression of the config removed: shown by SARIF as a
/// suppressed result, counted by the others.
struct SuppressedFinding {
  Finding finding;
  std::string reason;  ///< the suppression's `reason`
  std::string file;    ///< the config file that holds the suppression
  int line = 0;        ///< its line there
};

/// Parses one rule file. Throws nd::Error (kind rule_file, exit 2) naming the
/// file, line and key on a syntax error, a missing field or a bad value.
Rule load_rule_file(const std::string& path);

/// Loads every *.toml in `dir` but the case files (*.cases.toml, rule_cases.h), sorted by id. Throws nd::Error (rule_file) on
/// a bad file or a duplicate id, and (usage) when the folder does not exist
/// or holds no *.toml file.
std::vector<Rule> load_rules(const std::string& dir);

/// Evaluates the rules on the document (semantics: docs/rules.md).
/// Deterministic: findings sorted by severity (error first), then rule id,
/// then layer execution order, then path, then input index.
std::vector<Finding> evaluate_rules(const std::vector<Rule>& rules, const MetricsDoc& doc);

/// Formats a metric value for messages: numbers with 3 significant digits
/// (1.23e+05 style beyond 1e5 or below 1e-3), bools as true/false, strings as is.
/// Integers below 1e15 print exactly (counts stay exact); NaN/Inf print as
/// nan, inf, -inf; null as null.
std::string format_metric(const MetricValue& v);

/// Conditions as text: "METRIC OP VALUE and ..." (explain's "fires when",
/// a conditional fix's "(when ...)").
std::string conditions_text(const std::vector<Condition>& when);

/// The rule's fixes as listed with the rule itself (explain, rules --list,
/// SARIF rule help): a conditional fix ends in " (when METRIC OP VALUE and
/// ...)"; findings carry only the fixes whose conditions hold, without it.
std::vector<std::string> fix_texts(const Rule& r);

/// The placeholder names of a message template, in order of appearance
/// ("{layer} reaches {act.absmax}" -> {"layer", "act.absmax"}). Throws
/// std::invalid_argument on an unbalanced brace or an empty/invalid name.
std::vector<std::string> message_placeholders(const std::string& tmpl);

/// Renders a message template: each {name} replaced by fill(name). Throws
/// std::invalid_argument on a malformed template, like message_placeholders.
std::string render_template(const std::string& tmpl, const std::function<std::string(const std::string&)>& fill);

/// The rule with this id, or nullptr.
const Rule* find_rule(const std::vector<Rule>& rules, const std::string& id);

}  // namespace nd
