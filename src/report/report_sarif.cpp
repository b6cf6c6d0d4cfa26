// SARIF 2.1.0 (OASIS), the subset GitHub code scanning reads: rule metadata
// in tool.driver.rules, results with ruleId, level, message.text, one
// location (the model file, line 1, the module as a logical location) and
// partialFingerprints. docs/report.md, "SARIF".
#include <filesystem>
#include <sstream>

#include "report/report.h"
#include "report/report_common.h"

namespace nd {

namespace {

using oj = nlohmann::ordered_json;
using namespace report_detail;

const char* sarif_level(Severity s) {
  switch (s) {
    case Severity::kError: return "error";
    case Severity::kWarning: return "warning";
    case Severity::kInfo: return "note";
  }
  return "warning";
}

/// Percent-encodes everything outside RFC 3986 unreserved characters and '/'.
std::string uri_escape(const std::string& path) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '.' || c == '_' || c == '~' || c == '/';
    if (keep) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

constexpr const char* kSrcRoot = "%SRCROOT%";

/// An artifactLocation for `path`: inside the working tree (`root`, an
/// absolute folder), a URI relative to the uriBaseId %SRCROOT%; elsewhere
/// (or without a root) an absolute file:// URI.
oj artifact_location(const std::string& path, const std::string& root) {
  namespace fs = std::filesystem;
  if (root.empty() && !fs::path(path).is_absolute()) return oj{{"uri", uri_escape(path)}};
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec).lexically_normal();
  if (ec) return oj{{"uri", uri_escape(path)}};
  if (!root.empty()) {
    const fs::path rel = abs.lexically_relative(fs::path(root).lexically_normal());
    if (!rel.empty() && *rel.begin() != ".." && rel.is_relative())
      return oj{{"uri", uri_escape(rel.generic_string())}, {"uriBaseId", kSrcRoot}};
  }
  return oj{{"uri", "file://" + uri_escape(abs.generic_string())}};
}

/// The explain text split into its parts: {"What it detects", text}, ...
std::vector<std::pair<std::string, std::string>> explain_parts(const std::string& explain) {
  static const std::vector<std::string> kParts = {"What it detects", "Why it matters", "Example", "How to fix",
                                                  "When to ignore"};
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(explain);
  for (std::string line; std::getline(in, line);) {
    bool heading = false;
    for (const auto& p : kParts) heading |= line == p;
    if (heading) {
      out.emplace_back(line, "");
    } else if (!out.empty()) {
      out.back().second += line + "\n";
    } else if (!line.empty()) {
      out.emplace_back("", line + "\n");
    }
  }
  for (auto& [h, t] : out) {
    while (!t.empty() && t.back() == '\n') t.pop_back();
  }
  return out;
}

/// The first part of the explanation as one paragraph ("" when there is none).
std::string detects_paragraph(const Rule& r) {
  for (const auto& [heading, text] : explain_parts(r.explain)) {
    if (heading != "What it detects" && !heading.empty()) continue;
    std::string para;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) break;
      para += (para.empty() ? "" : " ") + line;
    }
    return para;
  }
  return {};
}

std::string help_text(const Rule& r) {
  std::string s = r.explain;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  if (!r.fix.empty()) {
    s += "\n\nFixes\n";
    for (const auto& f : fix_texts(r)) s += "- " + f + "\n";
  }
  if (!r.references.empty()) {
    s += (r.fix.empty() ? "\n\n" : "\n") + std::string("References\n");
    for (const auto& f : r.references) s += "- " + f + "\n";
  }
  return s;
}

std::string help_markdown(const Rule& r) {
  std::string s;
  for (const auto& [heading, text] : explain_parts(r.explain)) {
    if (!heading.empty()) s += "**" + heading + "**\n\n";
    s += text + "\n\n";
  }
  if (!r.fix.empty()) {
    s += "**Fixes**\n\n";
    for (const auto& f : fix_texts(r)) s += "- " + f + "\n";
    s += "\n";
  }
  if (!r.references.empty()) {
    s += "**References**\n\n";
    for (const auto& f : r.references) s += "- " + f + "\n";
    s += "\n";
  }
  s += "Run `normdoctor explain " + r.id + "` for this text in a terminal.";
  return s;
}

oj rule_descriptor(const Rule& r, const ReportContext& ctx) {
  auto it = ctx.default_severity.find(r.id);
  const Severity def = it == ctx.default_severity.end() ? r.severity : it->second;
  const std::string title = r.title.empty() ? r.id + " (" + r.failure_mode + ")" : r.title;
  const std::string full = detects_paragraph(r);
  oj d = oj::object();
  d["id"] = r.id;
  d["name"] = r.failure_mode;
  d["shortDescription"] = oj{{"text", title}};
  d["fullDescription"] = oj{{"text", full.empty() ? title : full}};
  d["defaultConfiguration"] = oj{{"level", sarif_level(def)}};
  d["help"] = oj{{"text", help_text(r)}, {"markdown", help_markdown(r)}};
  d["properties"] = oj{{"tags", oj::array({"normdoctor", r.failure_mode})},
                       {"failure_mode", r.failure_mode},
                       {"scope", r.scope},
                       {"lifecycle", r.lifecycle},
                       {"since", r.since}};
  return d;
}

std::string message_text(const Finding& f) {
  std::string s = f.message;
  const std::string ev = evidence_text(f);
  if (!ev.empty()) s += "\n\nEvidence: " + ev;
  if (!f.fix.empty()) {
    s += "\n\nFix:";
    for (std::size_t i = 0; i < f.fix.size(); ++i) s += "\n" + std::to_string(i + 1) + ". " + f.fix[i];
  }
  s += "\n\nMore: normdoctor explain " + f.rule_id;
  return s;
}

oj result(const Finding& f, const std::vector<Rule>& rules, const std::string& model, const std::string& root) {
  oj r = oj::object();
  r["ruleId"] = f.rule_id;
  for (std::size_t i = 0; i < rules.size(); ++i)
    if (rules[i].id == f.rule_id) r["ruleIndex"] = static_cast<int64_t>(i);
  r["level"] = sarif_level(f.severity);
  r["message"] = oj{{"text", message_text(f)}};

  oj loc = oj::object();
  loc["physicalLocation"] = oj{{"artifactLocation", artifact_location(model, root)}, {"region", oj{{"startLine", 1}}}};
  if (f.layer) {
    const std::string path = module_name(f);
    const auto dot = path.rfind('.');
    loc["logicalLocations"] = oj::array({oj{{"name", dot == std::string::npos ? path : path.substr(dot + 1)},
                                            {"fullyQualifiedName", path},
                                            {"kind", "module"}}});
  } else if (f.input) {
    loc["logicalLocations"] = oj::array({oj{{"name", *f.input}, {"fullyQualifiedName", "input:" + *f.input},
                                            {"kind", "parameter"}}});
  }
  r["locations"] = oj::array({std::move(loc)});

  // Stable identity across runs: rule, model, module (or input). Also given as
  // primaryLocationLineHash so code scanning does not hash lines of the
  // (binary) model file itself.
  const std::string where = f.layer ? "module:" + *f.layer : f.input ? "input:" + *f.input : std::string("model");
  const std::string fp = fingerprint({f.rule_id, model, where});
  r["partialFingerprints"] = oj{{"normdoctor/v1", fp}, {"primaryLocationLineHash", fp + ":1"}};

  oj props = oj::object();
  props["failure_mode"] = f.failure_mode;
  props["severity"] = severity_name(f.severity);
  if (f.layer) props["module"] = *f.layer;
  if (f.input) props["input"] = *f.input;
  props["evidence"] = finite_json(f.evidence);
  props["fix"] = f.fix;
  props["synthetic_inputs"] = f.synthetic_inputs;
  r["properties"] = std::move(props);
  return r;
}

/// The SARIF run of one model.
oj sarif_run(const MetricsDoc* doc, const std::vector<Finding>& findings, const std::vector<Rule>& rules,
             const ReportContext& ctx) {
  const std::string model = model_path(doc, ctx);
  const std::string& root = ctx.working_dir;
  bool relative = false;  // some location uses %SRCROOT%
  auto location = [&](const std::string& path) {
    oj l = artifact_location(path, root);
    relative |= l.contains("uriBaseId");
    return l;
  };
  oj driver = oj::object();
  driver["name"] = "normdoctor";
  driver["version"] = ctx.tool_version;
  driver["semanticVersion"] = ctx.tool_version;
  driver["shortDescription"] = oj{{"text", "Diagnoses neural-network training instability in TorchScript models"}};
  oj descriptors = oj::array();
  for (const auto& r : rules) descriptors.push_back(rule_descriptor(r, ctx));
  driver["rules"] = std::move(descriptors);

  oj invocation = oj::object();
  invocation["executionSuccessful"] = ctx.status != "error";
  invocation["exitCode"] = ctx.exit_code;
  oj overrides = oj::array();
  for (const auto& [id, def] : ctx.default_severity) {
    for (std::size_t i = 0; i < rules.size(); ++i) {
      if (rules[i].id != id) continue;
      overrides.push_back(oj{{"descriptor", oj{{"id", id}, {"index", static_cast<int64_t>(i)}}},
                             {"configuration", oj{{"level", sarif_level(rules[i].severity)}}}});
    }
  }
  if (!overrides.empty()) invocation["ruleConfigurationOverrides"] = std::move(overrides);
  oj exec_notes = oj::array();
  if (ctx.status == "error") {
    const std::string kind = ctx.error_kind.empty() ? std::string("internal") : ctx.error_kind;
    exec_notes.push_back(oj{{"level", "error"}, {"message", oj{{"text", ctx.error_message}}}, {"descriptor", oj{{"id", kind}}}});
  }
  // Probes that failed or did not run: the rules they feed were not evaluated.
  for (const auto& [name, st] : ctx.probe_statuses) {
    if (st.status == "ok") continue;
    exec_notes.push_back(oj{{"level", st.status == "error" ? "warning" : "note"},
                            {"message", oj{{"text", "probe " + name + " " + (st.status == "error" ? "" : "did not run: ") +
                                                        st.describe()}}},
                            {"descriptor", oj{{"id", "probe." + name}}}});
  }
  if (!exec_notes.empty()) invocation["toolExecutionNotifications"] = std::move(exec_notes);
  if (!ctx.notes.empty()) {
    oj notes = oj::array();
    for (const auto& n : ctx.notes) {
      oj note{{"level", "note"}, {"message", oj{{"text", n.text}}}};
      if (!n.file.empty()) {
        oj region = oj::object();
        if (n.line > 0) region["startLine"] = n.line;
        oj phys{{"artifactLocation", location(n.file)}};
        if (!region.empty()) phys["region"] = std::move(region);
        note["locations"] = oj::array({oj{{"physicalLocation", std::move(phys)}}});
      }
      notes.push_back(std::move(note));
    }
    invocation["toolConfigurationNotifications"] = std::move(notes);
  }

  oj results = oj::array();
  for (const auto& f : findings) results.push_back(result(f, rules, model, root));
  if (ctx.status != "error")
    for (const auto& sf : ctx.suppressed_findings) {
      oj r = result(sf.finding, rules, model, root);
      oj sup{{"kind", "external"}, {"justification", sf.reason}};
      if (!sf.file.empty()) {
        oj phys{{"artifactLocation", location(sf.file)}};
        if (sf.line > 0) phys["region"] = oj{{"startLine", sf.line}};
        sup["location"] = oj{{"physicalLocation", std::move(phys)}};
      }
      r["suppressions"] = oj::array({std::move(sup)});
      results.push_back(std::move(r));
    }
  if (!model.empty()) location(model);

  oj run = oj::object();
  run["tool"] = oj{{"driver", std::move(driver)}};
  run["invocations"] = oj::array({std::move(invocation)});
  if (relative) {
    std::string base = "file://" + uri_escape(std::filesystem::path(root).lexically_normal().generic_string());
    if (base.back() != '/') base += '/';
    run["originalUriBaseIds"] = oj{{kSrcRoot, oj{{"uri", base}}}};
  }
  if (!model.empty())
    run["artifacts"] = oj::array({oj{{"location", artifact_location(model, root)}, {"roles", oj::array({"analysisTarget"})}}});
  run["results"] = std::move(results);
  run["columnKind"] = "unicodeCodePoints";
  return run;
}

std::string sarif_log(oj runs) {
  oj log = oj::object();
  log["$schema"] = "https://json.schemastore.org/sarif-2.1.0.json";
  log["version"] = "2.1.0";
  log["runs"] = std::move(runs);
  return log.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string render_sarif(const MetricsDoc* doc, const std::vector<Finding>& findings, const std::vector<Rule>& rules,
                         const ReportContext& ctx) {
  return sarif_log(oj::array({sarif_run(doc, findings, rules, ctx)}));
}

std::string report_detail::render_sarif_runs(const std::vector<ReportRun>& runs) {
  oj all = oj::array();
  for (const auto& r : runs)
    all.push_back(sarif_run(r.doc, r.ctx.status == "error" ? std::vector<Finding>{} : r.findings, r.rules, r.ctx));
  return sarif_log(std::move(all));
}

}  // namespace nd
