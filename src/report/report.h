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

/// The JSON report (DESIGN.md contract). Keys in fixed order, findings sorted;
/// everything time-dependent sits under the single `timing` key.
nlohmann::json build_json_report(const MetricsDoc& doc, const std::vector<Finding>& findings,
                                 const ReportContext& ctx);

/// A JSON report for a run that failed before or while measuring:
/// status "error", error {kind, message}, and whatever of `doc` exists.
nlohmann::json build_error_report(const MetricsDoc* doc, const ReportContext& ctx);

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
