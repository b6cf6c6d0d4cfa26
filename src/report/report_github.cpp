// GitHub Actions workflow commands ("::warning file=...,line=1,title=...::msg"):
// findings become annotations on the pull request and in the job summary.
// docs/report.md, "GitHub annotations".
#include <sstream>

#include "report/report.h"
#include "report/report_common.h"

namespace nd {

namespace {

using namespace report_detail;

/// Escaping of the workflow-command message (data).
std::string escape_data(const std::string& s) {
  std::string out;
  for (char c : valid_utf8(s)) {
    if (c == '%')
      out += "%25";
    else if (c == '\r')
      out += "%0D";
    else if (c == '\n')
      out += "%0A";
    else
      out += c;
  }
  return out;
}

/// Escaping of a workflow-command property value (file, title): also ':' and ','.
std::string escape_property(const std::string& s) {
  std::string out;
  for (char c : escape_data(s)) {
    if (c == ':')
      out += "%3A";
    else if (c == ',')
      out += "%2C";
    else
      out += c;
  }
  return out;
}

const char* command(Severity s) {
  switch (s) {
    case Severity::kError: return "error";
    case Severity::kWarning: return "warning";
    case Severity::kInfo: return "notice";
  }
  return "warning";
}

}  // namespace

std::string render_github(const MetricsDoc* doc, const std::vector<Finding>& findings, const ReportContext& ctx) {
  const std::string model = model_path(doc, ctx);
  std::ostringstream out;
  if (ctx.status == "error") {
    const std::string kind = ctx.error_kind.empty() ? std::string("internal") : ctx.error_kind;
    out << "::error title=" << escape_property("normdoctor failed (" + kind + ")") << "::"
        << escape_data(ctx.error_message) << "\n";
  }
  for (const auto& f : findings) {
    std::string props;
    if (!model.empty()) props += "file=" + escape_property(model) + ",line=1,";
    props += "title=" + escape_property(f.rule_id + " " + f.failure_mode + location_suffix(f));
    // The message: the finding's text without its header line (the title holds it).
    std::string body = f.message + "\n" + finding_details(f);
    while (!body.empty() && body.back() == '\n') body.pop_back();
    out << "::" << command(f.severity) << " " << props << "::" << escape_data(body) << "\n";
  }
  for (const auto& n : ctx.notes) {
    std::string props;
    if (!n.file.empty()) {
      props += "file=" + escape_property(n.file);
      if (n.line > 0) props += ",line=" + std::to_string(n.line);
      props += ",";
    }
    props += "title=normdoctor";
    out << "::notice " << props << "::" << escape_data(n.text) << "\n";
  }
  if (ctx.status != "error") {
    out << "normdoctor: " << counts_text(count_findings(findings));
    if (ctx.hidden > 0) out << ", " << ctx.hidden << " below --severity " << ctx.severity << " not shown";
    if (ctx.suppressed > 0) out << ", " << ctx.suppressed << " suppressed by the config";
    out << " (exit code " << ctx.exit_code << ")\n";
  }
  return out.str();
}

}  // namespace nd
