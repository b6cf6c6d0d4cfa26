// The JSON report (docs/report.md): fixed key order, no NaN/Inf, timings
// only under `timing`.
#include <cmath>

#include "report/report.h"
#include "report/report_common.h"

namespace nd {

namespace {

using oj = ReportJson;

/// A metrics-document value as report JSON (non-finite floats as strings).
oj to_report_value(const nlohmann::json& v) { return report_detail::finite_json(v); }

/// An object with the `first` keys (those present) in that order, then the
/// others in the document's (alphabetical) order, minus `skip`.
oj with_key_order(const nlohmann::json& v, std::initializer_list<const char*> first,
                  std::initializer_list<const char*> skip = {}) {
  if (!v.is_object()) return to_report_value(v);
  oj o = oj::object();
  for (const char* k : first)
    if (v.contains(k)) o[k] = to_report_value(v.at(k));
  for (const auto& [k, e] : v.items()) {
    bool skipped = false;
    for (const char* s : skip) skipped |= k == s;
    if (!skipped && !o.contains(k)) o[k] = to_report_value(e);
  }
  return o;
}

oj metrics_value(const MetricMap& m) {
  oj o = oj::object();
  for (const auto& [k, v] : m) o[k] = to_report_value(v);
  return o;
}

oj inputs_value(const MetricsDoc& doc) {
  oj a = oj::array();
  for (const auto& in : doc.inputs) {
    oj o = oj::object();
    o["name"] = in.name;
    o["index"] = in.index;
    if (in.info.is_object()) {
      oj info = with_key_order(in.info, {"shape", "dtype", "source"}, {"name", "index", "metrics"});
      for (auto& [k, v] : info.items()) o[k] = std::move(v);
    }
    o["metrics"] = metrics_value(in.metrics);
    a.push_back(std::move(o));
  }
  return a;
}

oj layers_value(const MetricsDoc& doc) {
  oj a = oj::array();
  for (const auto& l : doc.layers) {
    a.push_back(oj{{"path", l.path},
                   {"kind", l.kind},
                   {"exec_order", l.exec_order},
                   {"leaf", l.leaf},
                   {"parameters", l.parameters},
                   {"info", to_report_value(l.info)},
                   {"metrics", metrics_value(l.metrics)}});
  }
  return a;
}

/// doc.probes, then model_metrics, passes (without "seconds") and assumptions.
oj probes_value(const MetricsDoc& doc) {
  oj o = oj::object();
  if (doc.probes.is_object()) {
    for (const auto& [k, v] : doc.probes.items())
      if (k != "model_metrics" && k != "passes" && k != "assumptions") o[k] = to_report_value(v);
  }
  o["model_metrics"] = metrics_value(doc.model_metrics);
  oj passes = oj::array();
  for (const auto& p : doc.passes) passes.push_back(with_key_order(p, {"name", "mode"}, {"seconds"}));
  o["passes"] = std::move(passes);
  o["assumptions"] = doc.assumptions;
  return o;
}

oj timing_value(const MetricsDoc* doc) {
  oj passes = oj::array();
  double total = 0.0;
  if (doc) {
    total = doc->seconds_total;
    for (const auto& p : doc->passes) {
      if (!p.is_object() || !p.contains("seconds")) continue;
      passes.push_back(oj{{"name", p.contains("name") ? to_report_value(p["name"]) : oj(nullptr)},
                          {"seconds", to_report_value(p["seconds"])}});
    }
  }
  return oj{{"seconds_total", to_report_value(nlohmann::json(total))}, {"passes", std::move(passes)}};
}

oj findings_value(const std::vector<Finding>& findings) {
  oj a = oj::array();
  for (const auto& f : findings) {
    oj o = oj::object();
    o["rule_id"] = f.rule_id;
    o["failure_mode"] = f.failure_mode;
    o["severity"] = severity_name(f.severity);
    o["layer"] = f.layer ? oj(*f.layer) : oj(nullptr);
    if (f.input) o["input"] = *f.input;
    o["message"] = f.message;
    o["evidence"] = to_report_value(f.evidence);
    o["fix"] = f.fix;
    o["synthetic_inputs"] = f.synthetic_inputs;
    a.push_back(std::move(o));
  }
  return a;
}

oj build(const MetricsDoc* doc, const std::vector<Finding>& findings, const ReportContext& ctx, bool failed) {
  const std::string status = failed ? "error" : ctx.status;
  oj r = oj::object();
  r["schema_version"] = kReportSchemaVersion;
  r["tool"] = oj{{"name", "normdoctor"}, {"version", ctx.tool_version}, {"libtorch", ctx.libtorch_version}};
  r["status"] = status;
  if (status == "error")
    r["error"] = oj{{"kind", ctx.error_kind.empty() ? std::string("internal") : ctx.error_kind},
                    {"message", ctx.error_message}};
  r["model"] = doc ? with_key_order(doc->model, {"path", "sha256", "kind", "training", "parameters"}) : oj::object();
  r["inputs"] = doc ? inputs_value(*doc) : oj::array();
  r["layers"] = doc ? layers_value(*doc) : oj::array();
  r["probes"] = doc ? probes_value(*doc) : oj::object();
  r["findings"] = findings_value(findings);
  oj skipped = oj::array();
  if (!failed)
    for (const auto& sr : ctx.skipped_rules)
      skipped.push_back(oj{{"rule_id", sr.rule_id}, {"probe", sr.probe}, {"reason", sr.reason}});
  r["skipped_rules"] = std::move(skipped);
  const SeverityCounts c = count_findings(findings);
  r["summary"] = oj{{"error", c.error}, {"warning", c.warning}, {"info", c.info}, {"total", c.total()},
                    {"hidden", failed ? 0 : ctx.hidden}, {"suppressed", failed ? 0 : ctx.suppressed}};
  r["options"] = to_report_value(ctx.options);
  r["config"] = ctx.config.is_object() ? ctx.config : oj::object();
  r["exit_code"] = ctx.exit_code;
  r["timing"] = timing_value(doc);
  return r;
}

}  // namespace

SeverityCounts count_findings(const std::vector<Finding>& findings) {
  SeverityCounts c;
  for (const auto& f : findings) {
    switch (f.severity) {
      case Severity::kError: ++c.error; break;
      case Severity::kWarning: ++c.warning; break;
      case Severity::kInfo: ++c.info; break;
    }
  }
  return c;
}

ReportJson build_json_report(const MetricsDoc& doc, const std::vector<Finding>& findings, const ReportContext& ctx) {
  return build(&doc, findings, ctx, false);
}

ReportJson build_error_report(const MetricsDoc* doc, const ReportContext& ctx) { return build(doc, {}, ctx, true); }

std::string dump_json_report(const ReportJson& report) {
  return report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace nd
