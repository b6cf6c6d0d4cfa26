// Rule case files: parsing (rules/ID.cases.toml, docs/rule-cases.md) and the
// one runner that checks a rule against them.
#include "rules/rule_cases.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <toml++/toml.h>

#include "core/error.h"
#include "rules/suggest.h"
#include "rules/toml_file.h"

namespace nd {

namespace {

namespace fs = std::filesystem;

constexpr const char* kSuffix = ".cases.toml";

const std::vector<std::string> kCaseFileKeys = {"case"};
const std::vector<std::string> kCaseKeys = {"name", "expect", "model_metrics", "inputs", "layers", "finding"};
const std::vector<std::string> kInputKeys = {"name", "index", "info", "metrics"};
const std::vector<std::string> kLayerKeys = {"path", "kind", "exec_order", "leaf", "parameters", "info", "metrics"};
const std::vector<std::string> kFindingKeys = {"layer",    "input",    "severity",          "message",          "message_contains",
                                               "evidence", "evidence_includes", "synthetic_inputs", "fixes"};
const std::vector<std::string> kExpects = {"catches", "clean"};

/// Reads one parsed case file, throwing nd::Error "FILE:LINE: ..." on the first problem.
class CaseReader {
 public:
  CaseReader(std::string file, const toml::table& root) : file_(std::move(file)), root_(root) {}

  std::vector<RuleCase> read() {
    check_keys(root_, kCaseFileKeys, "");
    const toml::node* n = root_.get("case");
    if (!n) fail(1, "no [[case]]; a case file needs at least one");
    const toml::array* a = n->as_array();
    if (!a || !a->is_array_of_tables()) fail(line(*n), "key 'case' must be an array of tables ([[case]])");
    std::vector<RuleCase> out;
    std::map<std::string, int> seen;  // name -> line
    for (const toml::node& e : *a) {
      RuleCase c = read_case(*e.as_table());
      auto [it, fresh] = seen.emplace(c.name, c.line);
      if (!fresh)
        fail(static_cast<uint32_t>(c.line),
             "case '" + c.name + "': duplicate case name (also at line " + std::to_string(it->second) + ")");
      out.push_back(std::move(c));
    }
    return out;
  }

 private:
  [[noreturn]] void fail(uint32_t line, const std::string& msg) const {
    throw Error(error_kind::kRuleFile, ExitCode::kUsage, file_ + ":" + std::to_string(line) + ": " + msg);
  }

  static uint32_t line(const toml::node& n) { return std::max<uint32_t>(1, n.source().begin.line); }

  void check_keys(const toml::table& t, const std::vector<std::string>& known, const std::string& where) const {
    for (auto&& [k, v] : t) {
      const std::string key(k.str());
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      fail(std::max<uint32_t>(1, k.source().begin.line), "unknown key '" + key + "'" + where + did_you_mean(key, known));
    }
  }

  const toml::node* typed(const toml::table& t, const std::string& key, toml::node_type type, const char* type_name,
                          const std::string& where) const {
    const toml::node* n = t.get(key);
    if (n && n->type() != type)
      fail(line(*n), "key '" + key + "'" + where + " must be " + type_name + ", not " + toml_type_name(*n));
    return n;
  }

  std::optional<std::string> opt_string(const toml::table& t, const std::string& key, const std::string& where) const {
    const toml::node* n = typed(t, key, toml::node_type::string, "a string", where);
    if (!n) return std::nullopt;
    return n->as_string()->get();
  }

  std::string req_string(const toml::table& t, const std::string& key, const std::string& where) const {
    auto s = opt_string(t, key, where);
    if (!s) fail(line(t), "missing required key '" + key + "'" + where);
    return *s;
  }

  std::optional<int64_t> opt_int(const toml::table& t, const std::string& key, const std::string& where) const {
    const toml::node* n = typed(t, key, toml::node_type::integer, "an integer", where);
    if (!n) return std::nullopt;
    return n->as_integer()->get();
  }

  std::optional<bool> opt_bool(const toml::table& t, const std::string& key, const std::string& where) const {
    const toml::node* n = typed(t, key, toml::node_type::boolean, "a boolean", where);
    if (!n) return std::nullopt;
    return n->as_boolean()->get();
  }

  /// A metric value: integer, float (inf and nan too), boolean, string, or
  /// `{}` for null (measured, no value).
  MetricValue metric_value(const toml::node& n, const std::string& what) const {
    if (n.is_integer()) return n.as_integer()->get();
    if (n.is_floating_point()) return n.as_floating_point()->get();
    if (n.is_boolean()) return n.as_boolean()->get();
    if (n.is_string()) return n.as_string()->get();
    if (n.is_table() && n.as_table()->empty()) return nullptr;
    fail(line(n), what + " must be a number, boolean, string or {} (null), not " + toml_type_name(n));
  }

  /// A table of metric name -> value (a `metrics` or `evidence` table).
  MetricMap metric_table(const toml::table& t, const std::string& key, const std::string& where) const {
    MetricMap out;
    const toml::node* n = typed(t, key, toml::node_type::table, "a table", where);
    if (!n) return out;
    for (auto&& [k, v] : *n->as_table()) out[std::string(k.str())] = metric_value(v, "'" + std::string(k.str()) + "'" + where);
    return out;
  }

  /// An `info` table as JSON (nested tables and arrays allowed).
  nlohmann::json info_table(const toml::table& t, const std::string& where) const {
    const toml::node* n = typed(t, "info", toml::node_type::table, "a table", where);
    return n ? to_json(*n) : nlohmann::json::object();
  }

  nlohmann::json to_json(const toml::node& n) const {
    if (const toml::table* t = n.as_table()) {
      nlohmann::json o = nlohmann::json::object();
      for (auto&& [k, v] : *t) o[std::string(k.str())] = to_json(v);
      return o;
    }
    if (const toml::array* a = n.as_array()) {
      nlohmann::json o = nlohmann::json::array();
      for (const toml::node& e : *a) o.push_back(to_json(e));
      return o;
    }
    return metric_value(n, "a value in 'info'");
  }

  const toml::array* table_array(const toml::table& t, const std::string& key, const std::string& where) const {
    const toml::node* n = t.get(key);
    if (!n) return nullptr;
    const toml::array* a = n->as_array();
    if (!a || !a->is_array_of_tables())
      fail(line(*n), "key '" + key + "'" + where + " must be an array of tables ([[case." + key + "]])");
    return a;
  }

  RuleCase read_case(const toml::table& t) {
    RuleCase c;
    c.line = static_cast<int>(line(t));
    c.name = req_string(t, "name", " in [[case]]");
    const std::string where = " in case '" + c.name + "'";
    check_keys(t, kCaseKeys, where);
    const std::string expect = req_string(t, "expect", where);
    if (std::find(kExpects.begin(), kExpects.end(), expect) == kExpects.end())
      fail(line(*t.get("expect")), "key 'expect'" + where + ": '" + expect + "' is not one of catches, clean" +
                                      did_you_mean(expect, kExpects));
    c.catches = expect == "catches";
    c.doc.model_metrics = metric_table(t, "model_metrics", where);

    std::set<std::string> input_names;
    if (const toml::array* a = table_array(t, "inputs", where)) {
      for (std::size_t i = 0; i < a->size(); ++i) {
        const toml::table& it = *a->get(i)->as_table();
        const std::string w = " in an input" + where;
        check_keys(it, kInputKeys, w);
        InputMetrics in;
        in.name = req_string(it, "name", w);
        if (!input_names.insert(in.name).second) fail(line(it), "input '" + in.name + "'" + where + " appears twice");
        in.index = opt_int(it, "index", w).value_or(static_cast<int64_t>(i));
        in.info = info_table(it, w);
        in.metrics = metric_table(it, "metrics", w);
        c.doc.inputs.push_back(std::move(in));
      }
    }
    std::set<std::string> paths;
    if (const toml::array* a = table_array(t, "layers", where)) {
      for (const toml::node& e : *a) {
        const toml::table& lt = *e.as_table();
        const std::string w = " in a layer" + where;
        check_keys(lt, kLayerKeys, w);
        LayerMetrics l;
        l.path = req_string(lt, "path", w);
        if (!paths.insert(l.path).second) fail(line(lt), "layer '" + l.path + "'" + where + " appears twice");
        l.kind = opt_string(lt, "kind", w).value_or("");
        l.exec_order = opt_int(lt, "exec_order", w).value_or(-1);
        l.leaf = opt_bool(lt, "leaf", w).value_or(false);
        l.parameters = opt_int(lt, "parameters", w).value_or(0);
        l.info = info_table(lt, w);
        l.metrics = metric_table(lt, "metrics", w);
        c.doc.layers.push_back(std::move(l));
      }
    }
    if (const toml::array* a = table_array(t, "finding", where)) {
      if (!c.catches) fail(line(*t.get("finding")), "case '" + c.name + "' expects clean but lists [[case.finding]]");
      for (const toml::node& e : *a) c.findings.push_back(read_finding(*e.as_table(), where));
    }
    if (c.catches && c.findings.empty())
      fail(static_cast<uint32_t>(c.line), "case '" + c.name + "' expects catches but lists no [[case.finding]]");
    return c;
  }

  ExpectedFinding read_finding(const toml::table& t, const std::string& case_where) const {
    const std::string where = " in a finding" + case_where;
    check_keys(t, kFindingKeys, where);
    ExpectedFinding f;
    f.line = static_cast<int>(line(t));
    f.layer = opt_string(t, "layer", where);
    f.input = opt_string(t, "input", where);
    if (auto s = opt_string(t, "severity", where)) {
      try {
        f.severity = parse_severity(*s, file_ + ":" + std::to_string(line(*t.get("severity"))) + ": key 'severity'");
      } catch (const Error& e) {
        throw Error(error_kind::kRuleFile, ExitCode::kUsage, e.what());
      }
    } else {
      fail(line(t), "missing required key 'severity'" + where);
    }
    f.message = opt_string(t, "message", where);
    f.message_contains = opt_string(t, "message_contains", where);
    if (f.message && f.message_contains) fail(line(t), "give 'message' or 'message_contains'" + where + ", not both");
    if (t.contains("evidence") && t.contains("evidence_includes"))
      fail(line(t), "give 'evidence' or 'evidence_includes'" + where + ", not both");
    if (t.contains("evidence")) f.evidence = nlohmann::json(metric_table(t, "evidence", where));
    if (t.contains("evidence_includes")) f.evidence_includes = nlohmann::json(metric_table(t, "evidence_includes", where));
    f.synthetic_inputs = opt_bool(t, "synthetic_inputs", where);
    f.fixes = opt_int(t, "fixes", where);
    return f;
  }

  std::string file_;
  const toml::table& root_;
};

/// JSON equality where NaN equals NaN and numbers compare by value (2 == 2.0).
bool same_value(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    return (std::isnan(x) && std::isnan(y)) || x == y;
  }
  return a == b;
}

/// A value as TOML would write it (failure messages).
std::string shown(const nlohmann::json& v) {
  if (v.is_null()) return "{} (null)";
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  }
  return v.dump();
}

std::string shown(const std::optional<std::string>& s) { return s ? "'" + *s + "'" : "none"; }

/// One line per finding: "[layer] severity: message".
std::string brief(const Finding& f) {
  std::string where = f.layer ? "layer '" + *f.layer + "'" : f.input ? "input '" + *f.input + "'" : "model";
  return where + ", " + severity_name(f.severity) + ": " + f.message;
}

void compare_evidence(const nlohmann::json& got, const nlohmann::json& want, bool exact, const std::string& at,
                      std::vector<std::string>& out) {
  for (const auto& [k, v] : want.items()) {
    if (!got.contains(k))
      out.push_back(at + "evidence lacks '" + k + "' (expected " + shown(v) + ")");
    else if (!same_value(got[k], v))
      out.push_back(at + "evidence '" + k + "' is " + shown(got[k]) + ", expected " + shown(v));
  }
  if (!exact) return;
  for (const auto& [k, v] : got.items())
    if (!want.contains(k)) out.push_back(at + "evidence has '" + k + "' = " + shown(v) + ", not expected");
}

}  // namespace

bool is_rule_case_file(const std::string& filename) {
  const std::string suffix = kSuffix;
  return filename.size() > suffix.size() && filename.compare(filename.size() - suffix.size(), suffix.size(), suffix) == 0;
}

RuleCaseFile load_rule_cases(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  if (!is_rule_case_file(name))
    throw Error(error_kind::kRuleFile, ExitCode::kUsage, path + ":1: a case file is named RULE_ID.cases.toml");
  const toml::table root = parse_toml_file(path, error_kind::kRuleFile, "rule case file", path + ":1: ");
  RuleCaseFile f;
  f.path = path;
  f.rule_id = name.substr(0, name.size() - std::string(kSuffix).size());
  f.cases = CaseReader(path, root).read();
  return f;
}

std::vector<std::string> rule_case_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (is_rule_case_file(entry.path().filename().string()) && entry.is_regular_file(ec)) out.push_back(entry.path().string());
  if (ec) throw usage_error("rules folder '" + dir + "' cannot be read: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> run_rule_case(const Rule& rule, const RuleCase& c) {
  const std::vector<Finding> got = evaluate_rules({rule}, c.doc);
  std::vector<std::string> out;
  if (!c.catches) {
    for (const Finding& f : got) out.push_back("expected no finding, got " + brief(f));
    return out;
  }
  if (got.size() != c.findings.size()) {
    out.push_back("expected " + std::to_string(c.findings.size()) + " finding(s), got " + std::to_string(got.size()));
    for (const Finding& f : got) out.push_back("got " + brief(f));
    return out;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const Finding& f = got[i];
    const ExpectedFinding& e = c.findings[i];
    const std::string at = c.findings.size() > 1 ? "finding " + std::to_string(i + 1) + ": " : "";
    if (f.layer != e.layer) out.push_back(at + "layer is " + shown(f.layer) + ", expected " + shown(e.layer));
    if (f.input != e.input) out.push_back(at + "input is " + shown(f.input) + ", expected " + shown(e.input));
    if (e.severity && f.severity != *e.severity)
      out.push_back(at + "severity is " + severity_name(f.severity) + ", expected " + severity_name(*e.severity));
    if (e.message && f.message != *e.message)
      out.push_back(at + "message is\n    " + f.message + "\n  expected\n    " + *e.message);
    if (e.message_contains && f.message.find(*e.message_contains) == std::string::npos)
      out.push_back(at + "message\n    " + f.message + "\n  does not contain\n    " + *e.message_contains);
    if (e.evidence) compare_evidence(f.evidence, *e.evidence, true, at, out);
    if (e.evidence_includes) compare_evidence(f.evidence, *e.evidence_includes, false, at, out);
    if (e.synthetic_inputs && f.synthetic_inputs != *e.synthetic_inputs)
      out.push_back(at + "synthetic_inputs is " + (f.synthetic_inputs ? "true" : "false") + ", expected " +
                    (*e.synthetic_inputs ? "true" : "false"));
    if (e.fixes && static_cast<int64_t>(f.fix.size()) != *e.fixes)
      out.push_back(at + "fixes: " + std::to_string(f.fix.size()) + ", expected " + std::to_string(*e.fixes));
  }
  return out;
}

}  // namespace nd
