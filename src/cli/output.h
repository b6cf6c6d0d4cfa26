// Where reports go: pairing --format with -o, atomic writes, rules folder lookup.
#pragma once

#include <string>
#include <vector>

#include "metrics/metrics.h"
#include "report/report.h"
#include "rules/rules.h"

namespace nd {

/// One report to write: a format and a path ("" = stdout).
struct OutputTarget {
  std::string format;
  std::string path;
};

/// Pairs formats with outputs in order: the i-th --format goes to the i-th -o.
/// No --format: "text", or by the only -o's extension: .json json, .sarif
/// sarif, .xml junit, .html html. One more
/// format than outputs: the last goes to stdout. Throws nd::Error (usage) for
/// more outputs than formats (when there are several), or two reports on stdout.
std::vector<OutputTarget> plan_outputs(const std::vector<std::string>& formats, const std::vector<std::string>& outputs);

/// Throws nd::Error (kind output, exit 2) when `path` cannot be created:
/// missing folder, not writable, a directory. Creates nothing.
void check_writable(const std::string& path);

/// Writes `text` to `path` atomically (temporary file in the same folder,
/// then rename), or to stdout when path is "". Throws nd::Error (output).
void write_output(const std::string& path, const std::string& text);

/// Renders and writes every target. `rules` are the rules evaluated.
void write_reports(const std::vector<OutputTarget>& targets, const MetricsDoc& doc,
                   const std::vector<Finding>& findings, const std::vector<Rule>& rules, const ReportContext& ctx,
                   const TextOptions& topt);

/// Writes the error report for a failed run: every format has one (JSON
/// status "error", SARIF executionSuccessful false, a JUnit <error>, a
/// GitHub ::error line) except text, which prints nothing (stderr already
/// has the message). Write errors are printed, not thrown.
void write_error_reports(const std::vector<OutputTarget>& targets, const MetricsDoc* doc,
                         const std::vector<Rule>& rules, const ReportContext& ctx);

/// The rules folder: `flag` if given, else $NORMDOCTOR_RULES_DIR, else the
/// installed folder (share/normdoctor/rules next to the binary's prefix),
/// else the source tree's rules/ (running from a build folder).
std::string resolve_rules_dir(const std::string& flag);

/// " (did you mean 'X'?)" or "" for an unknown rule id.
std::string did_you_mean_rule(const std::string& id, const std::vector<std::string>& ids);

}  // namespace nd
