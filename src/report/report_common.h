// Helpers shared by the renderers (internal to src/report, not a public header).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report.h"

namespace nd::report_detail {

/// The model path: doc->model.path, else ctx.model_path, else "".
std::string model_path(const MetricsDoc* doc, const ReportContext& ctx);

/// "fc2", "<root>" for the root module, "" without a layer.
std::string module_name(const Finding& f);

/// " at fc2", " at input x" or "".
std::string location_suffix(const Finding& f);

/// "warning[ACT002] activation-growth at fc2: message".
std::string finding_header(const Finding& f);

/// The lines after the header in finding_text(): evidence, fixes, "see:".
std::string finding_details(const Finding& f);

/// "act.absmax=1800, act.growth=1500" ("" without evidence).
std::string evidence_text(const Finding& f);

/// A JSON value with non-finite floats as "nan" / "inf" / "-inf" (how every
/// report writes them; JSON has no NaN).
nlohmann::ordered_json finite_json(const nlohmann::json& v);

/// `s` with invalid UTF-8 sequences replaced by U+FFFD.
std::string valid_utf8(const std::string& s);

/// A stable 16-hex-digit hash (FNV-1a, 64 bit) of the parts joined by NUL.
std::string fingerprint(const std::vector<std::string>& parts);

/// "1 error", "2 warnings": the summary counts as the text report writes them.
std::string counts_text(const SeverityCounts& c);

/// The layer table's text for act.absmax, act.rms or grad.out_norm when the
/// tensor held non-finite values ("inf", "nan"), "" otherwise: the JSON's
/// act.* statistics are over the finite values only (act.inf_count and
/// act.nan_count count the others), and a table showing a finite maximum
/// for an output full of -inf misleads (eval29 C01).
std::string nonfinite_cell(const LayerMetrics& l, const std::string& name);

/// Which pass the layer table describes (probes.layers.description, written
/// by the forward_backward probe), "" when the document does not say.
std::string layer_table_pass(const MetricsDoc& doc);

/// A row of the layer table: a leaf module, or a module whose own forward
/// runs a normalization op while it holds children (timm's BatchNormAct2d:
/// a BatchNorm2d with its activation as a child). `info.ops` lists the ops.
bool layer_table_row(const LayerMetrics& l);

/// Several models in one SARIF log (one run each) and one JUnit document
/// (one testsuite each); defined in report_sarif.cpp and report_junit.cpp.
std::string render_sarif_runs(const std::vector<ReportRun>& runs);
std::string render_junit_runs(const std::vector<ReportRun>& runs);

/// The text report's timeline table (report_timeline.cpp): layers x
/// checkpoints of the first mover's statistic (or act.rms), the loss row and
/// the first non-finite checkpoint; "" without probes.timeline.
std::string render_timeline_text(const MetricsDoc& doc, std::size_t max_layers = 40);

}  // namespace nd::report_detail
