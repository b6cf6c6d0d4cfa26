// Report renderers: findings + metrics -> text | json | sarif | junit | github.
// No LibTorch header here.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/metrics.h"
#include "policy/policy.h"
#include "rules/rules.h"

namespace nd {

/// Current JSON report schema version (docs/report.md). Bump on any
/// incompatible change; additions bump the minor part.
inline constexpr const char* kReportSchemaVersion = "1.3";

/// A remark for the reader about the run, not about the model (an unused
/// suppression): where it points (file and line, may be empty) and the text.
struct ReportNote {
  std::string file;
  int line = 0;
  std::string text;
};

/// What the report needs besides metrics and findings.
struct ReportContext {
  std::string tool_version;        ///< normdoctor version
  std::string libtorch_version;    ///< LibTorch the binary runs on ("1.13.1")
  std::string status = "ok";       ///< "ok" | "error"
  std::string error_kind;          ///< when status == "error"
  std::string error_message;       ///< when status == "error"
  int exit_code = 0;               ///< the exit code this run ends with
  nlohmann::json options = nlohmann::json::object();  ///< effective options (flags)
  std::string rerun_hint;          ///< command to re-run with real batches (synthetic inputs)
  std::string model_path;          ///< the model as given on the command line (when doc has none)
  /// Effective configuration (config file + flags), the JSON report's `config`.
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  std::string severity = "info";   ///< lowest severity shown (--severity)
  int hidden = 0;                  ///< findings below `severity`, not shown
  int suppressed = 0;              ///< findings removed by suppressions of the config
  /// Rules whose severity the config changed: id -> their default severity.
  std::map<std::string, Severity> default_severity;
  /// Rules with findings below `severity` (JUnit marks them skipped).
  std::vector<std::string> hidden_rules;
  std::vector<ReportNote> notes;   ///< remarks for the reader (unused suppressions, ...)
  /// Findings the config's suppressions removed, with their reasons.
  std::vector<SuppressedFinding> suppressed_findings;
  /// Rules evaluated that could not run (their probe was skipped or failed):
  /// JUnit <skipped>, the HTML and text reports list them.
  std::vector<SkippedRule> skipped_rules;
  /// Every probe's status (src/policy/policy.h), for the reports that show
  /// the probes that could not run.
  std::map<std::string, ProbeStatus> probe_statuses;
  /// The working directory the run started in (absolute), for SARIF's
  /// %SRCROOT%-relative artifact URIs; "" = do not relativize.
  std::string working_dir;
};

/// One model's check as the renderers see it (several per run with
/// `normdoctor check a.pt b.pt`).
struct ReportRun {
  const MetricsDoc* doc = nullptr;   ///< null when the model failed before measuring
  std::vector<Finding> findings;     ///< the findings shown
  std::vector<Rule> rules;           ///< the rules evaluated
  ReportContext ctx;
};

/// A JSON report document. Insertion-ordered, so the keys keep the order of
/// docs/report.md (nlohmann::json would sort them alphabetically). Keep it
/// as ReportJson (or auto) until it is written: converting it to
/// nlohmann::json compiles but loses the key order.
using ReportJson = nlohmann::ordered_json;

/// The JSON report (DESIGN.md contract, docs/report.md). Keys in fixed order,
/// findings as given (evaluate_rules sorts them); everything time-dependent
/// sits under the single `timing` key. Non-finite numbers are written as the
/// strings "nan", "inf", "-inf" (JSON has no NaN/Inf).
ReportJson build_json_report(const MetricsDoc& doc, const std::vector<Finding>& findings,
                             const ReportContext& ctx);

/// A JSON report for a run that failed before or while measuring:
/// status "error", error {kind, message}, and whatever of `doc` exists
/// (nullptr: empty model, inputs, layers, probes). No findings.
ReportJson build_error_report(const MetricsDoc* doc, const ReportContext& ctx);

/// The report as written to a file or stdout: 2-space indent, trailing
/// newline, invalid UTF-8 in names replaced by U+FFFD instead of throwing.
std::string dump_json_report(const ReportJson& report);

/// Findings per severity (summary line, JSON `summary`, --fail-on).
struct SeverityCounts {
  int error = 0;
  int warning = 0;
  int info = 0;
  int total() const { return error + warning + info; }
};
SeverityCounts count_findings(const std::vector<Finding>& findings);

/// Text rendering options.
struct TextOptions {
  bool color = false;   ///< ANSI colors
  int width = 100;      ///< target line width (wrapping of evidence and fixes)
  bool show_layers = true;  ///< print the per-layer table
  /// Cut long module paths in tables to fit `width` (a terminal). Off for
  /// files and pipes, so every path can be pasted into a suppression.
  bool fit_width = false;
  /// -v: every leaf layer in the table (no elision); -vv also: the passes
  /// with their seconds, and every metric of each finding's layer.
  int verbose = 0;
};

/// The terminal report: header, findings by severity with evidence and fix,
/// per-layer table with a depth profile.
std::string render_text(const MetricsDoc& doc, const std::vector<Finding>& findings,
                        const ReportContext& ctx, const TextOptions& opt);

/// One finding as plain text, the way the text report shows it without
/// colors or wrapping: "SEVERITY[ID] slug at MODULE: message", then the
/// evidence, the fixes and "see: normdoctor explain ID", one per line.
std::string finding_text(const Finding& f);

/// SARIF 2.1.0 for GitHub code scanning (docs/report.md, "SARIF"): the rules
/// evaluated as tool.driver.rules, one result per finding located at the
/// model file (line 1) with the module path as a logical location. A failed
/// run (ctx.status "error") gives no results and a tool execution
/// notification. `doc` may be null for a failed run.
std::string render_sarif(const MetricsDoc* doc, const std::vector<Finding>& findings,
                         const std::vector<Rule>& rules, const ReportContext& ctx);

/// JUnit XML: one testcase per rule evaluated that found nothing (passed) and
/// one failing testcase per finding, named "RULE MODULE" (unique), the
/// finding's whole text in the failure body. A failed run gives one testcase
/// with an <error>.
std::string render_junit(const MetricsDoc* doc, const std::vector<Finding>& findings,
                         const std::vector<Rule>& rules, const ReportContext& ctx);

/// GitHub Actions workflow commands: one "::error", "::warning" or "::notice"
/// line per finding (file = the model), then a summary line.
std::string render_github(const MetricsDoc* doc, const std::vector<Finding>& findings, const ReportContext& ctx);

/// A self-contained HTML page (docs/report.md, "HTML"): verdict, findings
/// linked to their layers, inline SVG depth plots, the tables, the probes
/// that could not run, the checkpoint timeline when the document has one.
/// No network access, no script framework. Several runs: one section each.
std::string render_html(const std::vector<ReportRun>& runs);

/// The --format names, in the order the help lists them.
const std::vector<std::string>& report_formats();

/// Renders `format` (one of report_formats()). With ctx.status "error" the
/// failure report of that format ("" for text: stderr has the message).
/// `doc` may be null only for a failed run.
std::string render_report(const std::string& format, const MetricsDoc* doc, const std::vector<Finding>& findings,
                          const std::vector<Rule>& rules, const ReportContext& ctx, const TextOptions& topt);

/// One report of `format` for every run: a single run gives exactly
/// render_report(); several give JSON {schema_version, tool, reports: [...],
/// summary, exit_code}, SARIF one run per model, JUnit one testsuite per
/// model, text and GitHub one section per model. `exit_code` is the run's
/// (the worst of all models).
std::string render_reports(const std::string& format, const std::vector<ReportRun>& runs, int exit_code,
                           const TextOptions& topt);

}  // namespace nd
