// JUnit XML (the dialect Jenkins, GitLab and most CI test views read): one
// testsuite for the model, one testcase per rule evaluated and per finding.
// docs/report.md, "JUnit".
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "report/report.h"
#include "report/report_common.h"

namespace nd {

namespace {

using namespace report_detail;

/// XML text or attribute value: escaped, valid UTF-8, and no characters
/// XML 1.0 cannot hold (C0 controls other than tab, newline, carriage return
/// become U+FFFD). In attributes tab/newline/CR are written as character
/// references so parsers keep them.
std::string xml(const std::string& raw, bool attribute) {
  const std::string s = valid_utf8(raw);
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += attribute ? "&quot;" : "\""; break;
      case '\'': out += attribute ? "&apos;" : "'"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\r': out += "&#13;"; break;
      default:
        if (c < 0x20 || c == 0x7F)
          out += "\xEF\xBF\xBD";
        else
          out += ch;
    }
  }
  return out;
}

std::string attr(const char* name, const std::string& value) { return std::string(" ") + name + "=\"" + xml(value, true) + "\""; }

/// "ACT002 fc2", "IN002 input x", "GRAD002 (model)".
std::string case_name(const Finding& f) {
  if (f.layer) return f.rule_id + " " + module_name(f);
  if (f.input) return f.rule_id + " input " + *f.input;
  return f.rule_id + " (model)";
}

struct Case {
  std::string name;
  std::string classname;
  const Finding* finding = nullptr;  ///< failing case
  std::string skipped;               ///< skip message (findings hidden by --severity)
};


/// One <testsuite> for one model, and its counts.
struct Suite {
  std::string xml;
  int tests = 0, failures = 0, errors = 0, skipped = 0;
};

Suite junit_suite(const MetricsDoc* doc, const std::vector<Finding>& findings, const std::vector<Rule>& rules,
                  const ReportContext& ctx) {
  const std::string model = model_path(doc, ctx);
  std::vector<Case> cases;
  std::set<std::string> names;
  auto add = [&](Case c) {
    std::string name = c.name;
    for (int k = 2; !names.insert(name).second; ++k) name = c.name + " (" + std::to_string(k) + ")";
    c.name = std::move(name);
    cases.push_back(std::move(c));
  };

  std::map<std::string, std::vector<const Finding*>> by_rule;
  for (const auto& f : findings) by_rule[f.rule_id].push_back(&f);
  const std::set<std::string> hidden(ctx.hidden_rules.begin(), ctx.hidden_rules.end());
  std::map<std::string, std::string> not_run;  // rule -> why it did not run
  for (const auto& s : ctx.skipped_rules) not_run[s.rule_id] = s.reason;
  std::set<std::string> done;
  for (const auto& r : rules) {
    done.insert(r.id);
    auto it = by_rule.find(r.id);
    if (it == by_rule.end()) {
      Case c{r.id, "normdoctor." + r.id, nullptr, ""};
      if (auto nr = not_run.find(r.id); nr != not_run.end())
        c.skipped = nr->second;
      else if (hidden.count(r.id))
        c.skipped = "findings below --severity " + ctx.severity + " are not shown";
      if (ctx.status != "error") add(std::move(c));
      continue;
    }
    for (const Finding* f : it->second) add(Case{case_name(*f), "normdoctor." + r.id, f, ""});
  }
  for (const auto& f : findings)  // findings of rules not in `rules` (never in a normal run)
    if (!done.count(f.rule_id)) add(Case{case_name(f), "normdoctor." + f.rule_id, &f, ""});

  Suite s;
  for (const auto& c : cases) {
    s.failures += c.finding != nullptr;
    s.skipped += !c.skipped.empty();
  }
  const bool failed = ctx.status == "error";
  s.errors = failed ? 1 : 0;
  s.tests = static_cast<int>(cases.size()) + s.errors;
  const std::string suite = "normdoctor " + (model.empty() ? std::string("(no model)") : model);

  std::ostringstream out;
  // Attributes of the Jenkins junit-10 XSD (tests/schemas/junit-10.xsd):
  // testsuite may carry `skipped` and `file`, testcase only name, classname, time.
  out << "  <testsuite" << attr("name", suite) << attr("tests", std::to_string(s.tests))
      << attr("failures", std::to_string(s.failures)) << attr("errors", std::to_string(s.errors))
      << attr("skipped", std::to_string(s.skipped));
  if (!model.empty()) out << attr("file", model);
  out << ">\n";
  out << "    <properties>\n";
  out << "      <property" << attr("name", "normdoctor.version") << attr("value", ctx.tool_version) << "/>\n";
  if (!ctx.libtorch_version.empty())
    out << "      <property" << attr("name", "libtorch.version") << attr("value", ctx.libtorch_version) << "/>\n";
  out << "      <property" << attr("name", "model") << attr("value", model) << "/>\n";
  out << "      <property" << attr("name", "status") << attr("value", ctx.status) << "/>\n";
  out << "      <property" << attr("name", "exit_code") << attr("value", std::to_string(ctx.exit_code)) << "/>\n";
  for (const auto& [name, st] : ctx.probe_statuses)
    if (st.status != "ok")
      out << "      <property" << attr("name", "probe." + name) << attr("value", st.status + ": " + st.describe())
          << "/>\n";
  out << "    </properties>\n";

  if (failed) {
    const std::string kind = ctx.error_kind.empty() ? std::string("internal") : ctx.error_kind;
    out << "    <testcase" << attr("name", "normdoctor") << attr("classname", "normdoctor") << ">\n";
    out << "      <error" << attr("type", kind) << attr("message", ctx.error_message) << ">"
        << xml("normdoctor failed (" + kind + "): " + ctx.error_message + "\n", false) << "</error>\n";
    out << "    </testcase>\n";
  }
  for (const auto& c : cases) {
    out << "    <testcase" << attr("name", c.name) << attr("classname", c.classname);
    if (c.finding) {
      const Finding& f = *c.finding;
      out << ">\n      <failure" << attr("type", severity_name(f.severity)) << attr("message", f.message) << ">"
          << xml(finding_text(f), false) << "</failure>\n    </testcase>\n";
    } else if (!c.skipped.empty()) {
      out << ">\n      <skipped" << attr("message", c.skipped) << "/>\n    </testcase>\n";
    } else {
      out << "/>\n";
    }
  }
  if (!ctx.notes.empty()) {
    std::string text;
    for (const auto& n : ctx.notes)
      text += "note: " + (n.file.empty() ? "" : n.file + (n.line > 0 ? ":" + std::to_string(n.line) : "") + ": ") +
              n.text + "\n";
    out << "    <system-out>" << xml(text, false) << "</system-out>\n";
  }
  out << "  </testsuite>\n";
  s.xml = out.str();
  return s;
}

std::string junit_document(const std::vector<Suite>& suites) {
  int tests = 0, failures = 0, errors = 0;
  for (const auto& s : suites) {
    tests += s.tests;
    failures += s.failures;
    errors += s.errors;
  }
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  // junit-10 allows no `skipped` on <testsuites>: each <testsuite> has it.
  out << "<testsuites" << attr("name", "normdoctor") << attr("tests", std::to_string(tests))
      << attr("failures", std::to_string(failures)) << attr("errors", std::to_string(errors)) << ">\n";
  for (const auto& s : suites) out << s.xml;
  out << "</testsuites>\n";
  return out.str();
}

}  // namespace

std::string render_junit(const MetricsDoc* doc, const std::vector<Finding>& findings, const std::vector<Rule>& rules,
                         const ReportContext& ctx) {
  return junit_document({junit_suite(doc, findings, rules, ctx)});
}

std::string report_detail::render_junit_runs(const std::vector<ReportRun>& runs) {
  std::vector<Suite> suites;
  for (const auto& r : runs)
    suites.push_back(junit_suite(r.doc, r.ctx.status == "error" ? std::vector<Finding>{} : r.findings, r.rules, r.ctx));
  return junit_document(suites);
}

}  // namespace nd
