// Shared renderer helpers and the --format dispatcher.
#include <cmath>
#include <cstdio>

#include "report/report.h"
#include "report/report_common.h"

namespace nd {

namespace report_detail {

std::string model_path(const MetricsDoc* doc, const ReportContext& ctx) {
  if (doc && doc->model.is_object() && doc->model.contains("path") && doc->model["path"].is_string())
    return doc->model["path"].get<std::string>();
  return ctx.model_path;
}

std::string module_name(const Finding& f) {
  if (!f.layer) return {};
  return f.layer->empty() ? std::string("<root>") : *f.layer;
}

std::string location_suffix(const Finding& f) {
  if (f.layer) return " at " + module_name(f);
  if (f.input) return " at input " + *f.input;
  return {};
}

std::string finding_header(const Finding& f) {
  return std::string(severity_name(f.severity)) + "[" + f.rule_id + "] " + f.failure_mode + location_suffix(f) + ": " +
         f.message;
}

std::string evidence_text(const Finding& f) {
  std::string s;
  if (!f.evidence.is_object()) return s;
  for (const auto& [k, v] : f.evidence.items()) s += (s.empty() ? "" : ", ") + k + "=" + format_metric(v);
  return s;
}

nlohmann::ordered_json finite_json(const nlohmann::json& v) {
  using oj = nlohmann::ordered_json;
  switch (v.type()) {
    case nlohmann::json::value_t::object: {
      oj o = oj::object();
      for (const auto& [k, e] : v.items()) o[k] = finite_json(e);
      return o;
    }
    case nlohmann::json::value_t::array: {
      oj a = oj::array();
      for (const auto& e : v) a.push_back(finite_json(e));
      return a;
    }
    case nlohmann::json::value_t::number_float: {
      const double d = v.get<double>();
      if (std::isnan(d)) return "nan";
      if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
      return d;
    }
    case nlohmann::json::value_t::number_integer: return v.get<int64_t>();
    case nlohmann::json::value_t::number_unsigned: return v.get<uint64_t>();
    case nlohmann::json::value_t::boolean: return v.get<bool>();
    case nlohmann::json::value_t::string: return v.get<std::string>();
    case nlohmann::json::value_t::null: return nullptr;
    default: return v.dump();
  }
}

std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    std::size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and values beyond U+10FFFF are invalid too.
    if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
               (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF))
      ok = false;
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string fingerprint(const std::vector<std::string>& parts) {
  uint64_t h = 14695981039346656037ull;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) h = (h ^ 0u) * 1099511628211ull;  // separator: a NUL byte
    for (unsigned char c : parts[i]) h = (h ^ c) * 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string finding_details(const Finding& f) {
  std::string s;
  const std::string ev = evidence_text(f);
  if (!ev.empty()) s += "evidence: " + ev + "\n";
  for (std::size_t i = 0; i < f.fix.size(); ++i) {
    const std::string number = f.fix.size() > 1 ? std::to_string(i + 1) + ". " : std::string();
    s += (i == 0 ? "fix: " : "     ") + number + f.fix[i] + "\n";
  }
  s += "see: normdoctor explain " + f.rule_id + "\n";
  return s;
}

bool layer_table_row(const LayerMetrics& l) {
  if (l.leaf) return true;
  auto ops = l.info.find("ops");
  if (ops == l.info.end() || !ops->is_array()) return false;
  for (const auto& o : *ops) {
    const std::string op = o.is_object() ? o.value("op", "") : std::string();
    if (op == "batch_norm" || op == "layer_norm" || op == "group_norm" || op == "instance_norm" || op == "rms_norm")
      return true;
  }
  return false;
}

std::string counts_text(const SeverityCounts& c) {
  auto plural = [](int n, const char* w) { return std::to_string(n) + " " + w + (n == 1 ? "" : "s"); };
  return plural(c.error, "error") + ", " + plural(c.warning, "warning") + ", " + std::to_string(c.info) + " info";
}

std::string nonfinite_cell(const LayerMetrics& l, const std::string& name) {
  auto count = [&](const char* k) -> double {
    auto it = l.metrics.find(k);
    return it != l.metrics.end() && it->second.is_number() ? it->second.get<double>() : 0.0;
  };
  if (name == "act.absmax" || name == "act.rms") {
    const double inf = count("act.inf_count"), nan = count("act.nan_count");
    if (name == "act.absmax" && inf > 0) return "inf";
    if (nan > 0) return "nan";
    if (inf > 0) return "inf";
  } else if (name == "grad.out_norm" && count("grad.out_nonfinite_count") > 0) {
    return "nan";
  }
  return "";
}

std::string layer_table_pass(const MetricsDoc& doc) {
  if (!doc.probes.is_object() || !doc.probes.contains("layers")) return "";
  const auto& l = doc.probes["layers"];
  if (!l.is_object() || !l.contains("description") || !l["description"].is_string()) return "";
  return l["description"].get<std::string>();
}

}  // namespace report_detail

std::string finding_text(const Finding& f) { return report_detail::finding_header(f) + "\n" + report_detail::finding_details(f); }

const std::vector<std::string>& report_formats() {
  static const std::vector<std::string> kFormats = {"text", "json", "sarif", "junit", "github", "html"};
  return kFormats;
}

std::string render_report(const std::string& format, const MetricsDoc* doc, const std::vector<Finding>& findings,
                          const std::vector<Rule>& rules, const ReportContext& ctx, const TextOptions& topt) {
  const bool failed = ctx.status == "error";
  if (format == "json")
    return dump_json_report(failed || !doc ? build_error_report(doc, ctx) : build_json_report(*doc, findings, ctx));
  if (format == "sarif") return render_sarif(doc, failed ? std::vector<Finding>{} : findings, rules, ctx);
  if (format == "junit") return render_junit(doc, failed ? std::vector<Finding>{} : findings, rules, ctx);
  if (format == "github") return render_github(doc, failed ? std::vector<Finding>{} : findings, ctx);
  if (format == "html") return render_html({ReportRun{doc, failed ? std::vector<Finding>{} : findings, rules, ctx}});
  if (failed || !doc) {
    // Text: the message stderr shows, for a -o FILE that would otherwise not
    // be written (eval54 C3).
    if (!failed) return {};
    std::string t = "normdoctor: error";
    if (!ctx.error_kind.empty()) t += " (" + ctx.error_kind + ", exit " + std::to_string(ctx.exit_code) + ")";
    if (!ctx.model_path.empty() && ctx.error_message.find(ctx.model_path) == std::string::npos) t += ": " + ctx.model_path;
    return t + ": " + ctx.error_message + "\n";
  }
  return render_text(*doc, findings, ctx, topt);
}

std::string render_reports(const std::string& format, const std::vector<ReportRun>& runs, int exit_code,
                           const TextOptions& topt) {
  if (runs.size() == 1) {
    const ReportRun& r = runs.front();
    return render_report(format, r.doc, r.findings, r.rules, r.ctx, topt);
  }
  using oj = ReportJson;
  if (format == "json") {
    oj reports = oj::array();
    SeverityCounts total;
    int failed = 0;
    for (const auto& r : runs) {
      const bool err = r.ctx.status == "error" || !r.doc;
      reports.push_back(err ? build_error_report(r.doc, r.ctx) : build_json_report(*r.doc, r.findings, r.ctx));
      failed += err;
      if (err) continue;
      const SeverityCounts c = count_findings(r.findings);
      total.error += c.error;
      total.warning += c.warning;
      total.info += c.info;
    }
    const ReportContext& c0 = runs.front().ctx;
    oj doc = oj::object();
    doc["schema_version"] = kReportSchemaVersion;
    doc["tool"] = oj{{"name", "normdoctor"}, {"version", c0.tool_version}, {"libtorch", c0.libtorch_version}};
    doc["status"] = failed > 0 ? "error" : "ok";
    doc["reports"] = std::move(reports);
    doc["summary"] = oj{{"models", runs.size()}, {"failed", failed}, {"error", total.error},
                        {"warning", total.warning}, {"info", total.info}, {"total", total.total()}};
    doc["exit_code"] = exit_code;
    return dump_json_report(doc);
  }
  if (format == "sarif") return report_detail::render_sarif_runs(runs);
  if (format == "junit") return report_detail::render_junit_runs(runs);
  if (format == "html") return render_html(runs);
  std::string out;
  SeverityCounts total;
  int failed = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const ReportRun& r = runs[i];
    const bool err = r.ctx.status == "error" || !r.doc;
    failed += err;
    if (!err) {
      const SeverityCounts c = count_findings(r.findings);
      total.error += c.error;
      total.warning += c.warning;
      total.info += c.info;
    }
    if (format == "github") {
      out += render_report(format, r.doc, err ? std::vector<Finding>{} : r.findings, r.rules, r.ctx, topt);
      continue;
    }
    // text: one section per model
    const std::string model = report_detail::model_path(r.doc, r.ctx);
    out += (i ? "\n" : "") + std::string("==> ") + model + " (" + std::to_string(i + 1) + " of " +
           std::to_string(runs.size()) + ") <==\n";
    if (err)
      out += "normdoctor failed (" + (r.ctx.error_kind.empty() ? std::string("internal") : r.ctx.error_kind) +
             "): " + r.ctx.error_message + "\n";
    else
      out += render_text(*r.doc, r.findings, r.ctx, topt);
  }
  const std::string line = std::to_string(runs.size()) + " models: " + report_detail::counts_text(total) +
                           (failed ? ", " + std::to_string(failed) + " could not be checked" : std::string()) +
                           "; exit code " + std::to_string(exit_code) + "\n";
  out += format == "github" ? "normdoctor: " + line : "\n" + line;
  return out;
}

}  // namespace nd
