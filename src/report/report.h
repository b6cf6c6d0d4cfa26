// Report renderers: findings + metrics -> text | json (more formats later).
// No LibTorch header here.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/metrics.h"
#include "rules/rules.h"

namespace nd {

/// Current JSON report schema version (docs/report.md). Bump on any
/// incompatible change; additions bump the minor part.
inline constexpr const char* kReportSchemaVersion = "1.0";

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
  int width = 100;      ///< target line width
  bool show_layers = true;  ///< print the per-layer table
};

/// The terminal report: header, findings by severity with evidence and fix,
/// per-layer table with a depth profile.
std::string render_text(const MetricsDoc& doc, const std::vector<Finding>& findings,
                        const ReportContext& ctx, const TextOptions& opt);

}  // namespace nd
