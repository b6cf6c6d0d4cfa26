// Rule files: parsing and validation (rules/ID.toml, docs/rules.md).
#include "rules/rules.h"
#include "rules/toml_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <map>
#include <stdexcept>

#include <toml++/toml.h>

#include "core/error.h"
#include "rules/catalog.h"
#include "rules/rule_cases.h"
#include "rules/suggest.h"

namespace nd {

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kTopKeys = {
    "id",    "failure_mode", "severity", "scope",   "select",     "kinds",      "when",  "layer_from",     "evidence",
    "title", "message",      "explain",  "fix",     "references", "lifecycle",  "since", "data_dependent",
    "probe", "rank_by",
};
const std::vector<std::string> kWhenKeys = {"metric", "op", "value"};
const std::vector<std::string> kSeverities = {"info", "warning", "error"};
const std::vector<std::string> kScopes = {"model", "layer", "input"};
const std::vector<std::string> kSelects = {"all", "first", "group"};
const std::vector<std::string> kOps = {"<", "<=", ">", ">=", "==", "!="};
const std::vector<std::string> kLifecycles = {"stable", "preview", "deprecated"};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

bool is_metric_name(const std::string& s) {
  return !s.empty() && s.front() != '.' && s.back() != '.' && std::all_of(s.begin(), s.end(), is_name_char);
}

bool is_rule_id(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size() && s[i] >= 'A' && s[i] <= 'Z') ++i;
  if (i < 1 || s.size() != i + 3) return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(i), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_version(const std::string& s) {
  int dots = 0;
  bool digit = false;
  for (char c : s) {
    if (c == '.') {
      if (!digit) return false;
      ++dots;
      digit = false;
    } else if (c >= '0' && c <= '9') {
      digit = true;
    } else {
      return false;
    }
  }
  return dots == 2 && digit;
}


/// Reads one parsed rule file, throwing nd::Error "FILE:LINE: ..." on the first problem.
class RuleReader {
 public:
  RuleReader(std::string file, const toml::table& root) : file_(std::move(file)), root_(root) {}

  Rule read() {
    check_keys(root_, kTopKeys, "");
    Rule r;
    r.source_file = file_;

    r.id = string_at("id", true);
    r.source_line = static_cast<int>(line_of("id"));
    if (!is_rule_id(r.id))
      fail(line_of("id"), "key 'id': '" + r.id + "' is not a rule id (capital letters, then 3 digits: 'BN002')");

    r.failure_mode = string_at("failure_mode", true);
    if (!is_failure_mode(r.failure_mode))
      fail(line_of("failure_mode"), "key 'failure_mode': '" + r.failure_mode +
                                        "' is not a slug of the failure-mode catalog" +
                                        did_you_mean(r.failure_mode, failure_mode_slugs()));

    r.severity = static_cast<Severity>(choice_index("severity", kSeverities, true, 1));
    r.scope = kScopes[choice_index("scope", kScopes, false, 1)];
    r.select = kSelects[choice_index("select", kSelects, false, 0)];
    r.kinds = string_list_at("kinds");
    r.rank_by = string_at("rank_by", false);
    r.when = read_when();
    r.layer_from = string_at("layer_from", false);
    r.evidence = string_list_at("evidence");
    r.title = string_at("title", false);
    r.message = string_at("message", true);
    r.explain = string_at("explain", false);
    read_fix(r);
    r.references = string_list_at("references");
    r.lifecycle = kLifecycles[choice_index("lifecycle", kLifecycles, false, 0)];
    if (root_.contains("since")) {
      r.since = string_at("since", false);
      if (!is_version(r.since))
        fail(line_of("since"), "key 'since': '" + r.since + "' is not a version (MAJOR.MINOR.PATCH)");
    }
    if (const toml::node* n = root_.get("data_dependent")) {
      if (n->is_string()) {
        // A metric name: data-dependent where that metric is true.
        r.data_dependent_metric = n->as_string()->get();
        static const std::regex metric_name("^[a-z][a-z0-9_]*(\\.[a-z0-9_]+)+$");
        if (!std::regex_match(r.data_dependent_metric, metric_name))
          fail(line(*n), "key 'data_dependent': '" + r.data_dependent_metric +
                             "' is neither a boolean nor a metric name (e.g. \"grad.zero_from_values\")");
      } else if (n->is_boolean()) {
        r.data_dependent = n->as_boolean()->get();
      } else {
        fail(line(*n), "key 'data_dependent' must be a boolean or a metric name, not " + std::string(toml_type_name(*n)));
      }
    }

    r.probe = string_at("probe", false);
    if (!r.probe.empty() && !std::all_of(r.probe.begin(), r.probe.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; }))
      fail(line_of("probe"), "key 'probe': '" + r.probe + "' is not a probe name (lowercase letters and '_', e.g. \"precision\")");

    check_consistency(r);
    return r;
  }

 private:
  [[noreturn]] void fail(uint32_t line, const std::string& msg) const {
    throw Error(error_kind::kRuleFile, ExitCode::kUsage, file_ + ":" + std::to_string(line) + ": " + msg);
  }

  static uint32_t line(const toml::node& n) { return std::max<uint32_t>(1, n.source().begin.line); }
  uint32_t line_of(const std::string& key) const {
    const toml::node* n = root_.get(key);
    return n ? line(*n) : 1;
  }

  void check_keys(const toml::table& t, const std::vector<std::string>& known, const std::string& where) const {
    for (auto&& [k, v] : t) {
      const std::string key(k.str());
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      fail(std::max<uint32_t>(1, k.source().begin.line),
           "unknown key '" + key + "'" + where + did_you_mean(key, known));
    }
  }

  std::string string_at(const std::string& key, bool required) const {
    const toml::node* n = root_.get(key);
    if (!n) {
      if (required) fail(1, "missing required key '" + key + "'");
      return {};
    }
    if (!n->is_string()) fail(line(*n), "key '" + key + "' must be a string, not " + toml_type_name(*n));
    return n->as_string()->get();
  }

  std::vector<std::string> string_list_at(const std::string& key) const {
    std::vector<std::string> out;
    const toml::node* n = root_.get(key);
    if (!n) return out;
    const toml::array* a = n->as_array();
    if (!a) fail(line(*n), "key '" + key + "' must be an array of strings, not " + toml_type_name(*n));
    for (const toml::node& e : *a) {
      if (!e.is_string())
        fail(line(e), "key '" + key + "' must be an array of strings; found " + toml_type_name(e));
      out.push_back(e.as_string()->get());
    }
    return out;
  }

  /// Index of the key's value in `options`; `dflt` when the key is absent and optional.
  std::size_t choice_index(const std::string& key, const std::vector<std::string>& options, bool required,
                           std::size_t dflt) const {
    if (!root_.contains(key) && !required) return dflt;
    const std::string v = string_at(key, required);
    auto it = std::find(options.begin(), options.end(), v);
    if (it == options.end()) fail(line_of(key), bad_choice(key, v, options));
    return static_cast<std::size_t>(it - options.begin());
  }

  static std::string bad_choice(const std::string& key, const std::string& v, const std::vector<std::string>& options) {
    std::string list;
    for (std::size_t i = 0; i < options.size(); ++i) list += (i ? ", " : "") + options[i];
    return "key '" + key + "': '" + v + "' is not one of " + list + did_you_mean(v, options);
  }

  /// `fix`: an array whose entries are strings (always shown) or tables
  /// {text, when} (shown when the conditions hold on the finding's metrics).
  void read_fix(Rule& r) const {
    const toml::node* n = root_.get("fix");
    if (!n) return;
    const toml::array* a = n->as_array();
    if (!a) fail(line(*n), "key 'fix' must be an array of strings or tables {text, when}, not " + std::string(toml_type_name(*n)));
    for (std::size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      if (e.is_string()) {
        r.fix.push_back(e.as_string()->get());
        r.fix_when.emplace_back();
        continue;
      }
      const toml::table* t = e.as_table();
      const std::string where = "fix[" + std::to_string(i) + "]";
      if (!t) fail(line(e), "key '" + where + "' must be a string or a table {text, when}, not " + toml_type_name(e));
      check_keys(*t, {"text", "when"}, " in " + where);
      const toml::node* text = t->get("text");
      if (!text || !text->is_string()) fail(line(e), "key '" + where + ".text' must be a string");
      const toml::node* when = t->get("when");
      if (!when) fail(line(e), "key '" + where + "' misses 'when' (a fix shown always is a plain string)");
      r.fix.push_back(text->as_string()->get());
      r.fix_when.push_back(read_conditions(*when, where + ".when"));
    }
  }

  std::vector<Condition> read_when() const {
    const toml::node* n = root_.get("when");
    if (!n) fail(1, "missing required key 'when'");
    return read_conditions(*n, "when");
  }

  /// An array of tables {metric, op, value} at `key` (for messages).
  std::vector<Condition> read_conditions(const toml::node& node, const std::string& key) const {
    const toml::node* n = &node;
    const toml::array* a = n->as_array();
    if (!a) fail(line(*n), "key '" + key + "' must be an array of tables {metric, op, value}, not " + std::string(toml_type_name(*n)));
    if (a->empty())
      fail(line(*n), "key '" + key + "' is empty; " + (key == "when" ? std::string("a rule") : std::string("a conditional fix")) +
                         " needs at least one condition");
    std::vector<Condition> out;
    for (std::size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      const std::string where = key + "[" + std::to_string(i) + "]";
      const toml::table* t = e.as_table();
      if (!t) fail(line(e), "key '" + where + "' must be a table {metric, op, value}, not " + toml_type_name(e));
      check_keys(*t, kWhenKeys, " in " + where);
      Condition c;
      for (const std::string& k : kWhenKeys)
        if (!t->contains(k)) fail(line(e), "key '" + where + "' misses '" + k + "'");
      const toml::node& metric = *t->get("metric");
      const toml::node& op = *t->get("op");
      const toml::node& value = *t->get("value");
      if (!metric.is_string()) fail(line(metric), "key '" + where + ".metric' must be a string, not " + toml_type_name(metric));
      c.metric = metric.as_string()->get();
      if (!is_metric_name(c.metric))
        fail(line(metric), "key '" + where + ".metric': '" + c.metric + "' is not a metric name (letters, digits, _ and .)");
      if (!op.is_string()) fail(line(op), "key '" + where + ".op' must be a string, not " + toml_type_name(op));
      c.op = op.as_string()->get();
      if (std::find(kOps.begin(), kOps.end(), c.op) == kOps.end())
        fail(line(op), bad_choice(where + ".op", c.op, kOps));
      if (value.is_integer()) {
        c.value = value.as_integer()->get();
      } else if (value.is_floating_point()) {
        c.value = value.as_floating_point()->get();
      } else if (value.is_boolean()) {
        c.value = value.as_boolean()->get();
      } else if (value.is_string()) {
        c.value = value.as_string()->get();
      } else {
        fail(line(value), "key '" + where + ".value' must be a number, boolean or string, not " + toml_type_name(value));
      }
      if (!c.value.is_number() && c.op != "==" && c.op != "!=")
        fail(line(op), "key '" + where + ".op': '" + c.op + "' compares numbers only; use == or != for a " +
                           (c.value.is_boolean() ? "boolean" : "string"));
      out.push_back(std::move(c));
    }
    return out;
  }

  void check_consistency(const Rule& r) const {
    if (!r.kinds.empty() && r.scope != "layer")
      fail(line_of("kinds"), "key 'kinds' applies to scope 'layer' only (this rule has scope '" + r.scope + "')");
    if (r.select != "all" && r.scope != "layer")
      fail(line_of("select"), "key 'select' applies to scope 'layer' only (this rule has scope '" + r.scope + "')");
    if (!r.rank_by.empty() && r.select == "all")
      fail(line_of("rank_by"), "key 'rank_by' applies to select 'first' or 'group' only (this rule has select 'all')");
    if (root_.contains("rank_by") && !is_metric_name(r.rank_by))
      fail(line_of("rank_by"), "key 'rank_by': '" + r.rank_by + "' is not a metric name");
    if (!r.layer_from.empty() && r.scope != "model")
      fail(line_of("layer_from"), "key 'layer_from' applies to scope 'model' only (this rule has scope '" + r.scope + "')");
    if (root_.contains("layer_from") && !is_metric_name(r.layer_from))
      fail(line_of("layer_from"), "key 'layer_from': '" + r.layer_from + "' is not a metric name");
    for (const auto& e : r.evidence)
      if (!is_metric_name(e)) fail(line_of("evidence"), "key 'evidence': '" + e + "' is not a metric name");
    if (r.title.find('\n') != std::string::npos) fail(line_of("title"), "key 'title' must be one line");

    std::vector<std::string> names;
    try {
      names = message_placeholders(r.message);
    } catch (const std::invalid_argument& e) {
      fail(line_of("message"), std::string("key 'message': ") + e.what());
    }
    const bool has_layer = r.scope == "layer" || !r.layer_from.empty();
    for (const auto& n : names) {
      if (n == "layer" && !has_layer)
        fail(line_of("message"), "key 'message': {layer} needs scope 'layer' or a 'layer_from' metric");
      if (n == "input" && r.scope != "input")
        fail(line_of("message"), "key 'message': {input} needs scope 'input'");
    }
  }

  std::string file_;
  const toml::table& root_;
};

}  // namespace

Severity parse_severity(const std::string& text, const std::string& what) {
  for (std::size_t i = 0; i < kSeverities.size(); ++i)
    if (text == kSeverities[i]) return static_cast<Severity>(i);
  throw usage_error(what + ": unknown severity '" + text + "' (expected info, warning or error)" +
                    did_you_mean(text, kSeverities));
}

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "warning";
}

std::string format_metric(const MetricValue& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() || v.is_number_unsigned()) {
    const double d = v.get<double>();
    if (std::fabs(d) < 1e15) return v.dump();
  }
  if (!v.is_number()) return v.dump();
  const double d = v.get<double>();
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return "0";
  const double a = std::fabs(d);
  char buf[64];
  if (a >= 1e5 || a < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.2e", d);
    std::string s(buf);
    // 1.00e+05 -> 1e+05, 1.20e+05 -> 1.2e+05
    const std::size_t e = s.find('e');
    std::string mant = s.substr(0, e);
    while (!mant.empty() && mant.back() == '0') mant.pop_back();
    if (!mant.empty() && mant.back() == '.') mant.pop_back();
    return mant + s.substr(e);
  }
  const int decimals = std::max(0, 2 - static_cast<int>(std::floor(std::log10(a))));
  std::snprintf(buf, sizeof buf, "%.*f", decimals, d);
  std::string s(buf);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string render_template(const std::string& tmpl, const std::function<std::string(const std::string&)>& fill) {
  std::string out;
  for (std::size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '}') throw std::invalid_argument("'}' without '{' at offset " + std::to_string(i));
    if (tmpl[i] != '{') {
      out += tmpl[i];
      continue;
    }
    const std::size_t close = tmpl.find('}', i + 1);
    if (close == std::string::npos) throw std::invalid_argument("'{' without '}' at offset " + std::to_string(i));
    const std::string name = tmpl.substr(i + 1, close - i - 1);
    if (!is_metric_name(name))
      throw std::invalid_argument("'{" + name + "}' is not a placeholder ({layer}, {input} or {metric.name})");
    out += fill(name);
    i = close;
  }
  return out;
}

std::vector<std::string> message_placeholders(const std::string& tmpl) {
  std::vector<std::string> out;
  render_template(tmpl, [&](const std::string& name) {
    out.push_back(name);
    return std::string();
  });
  return out;
}

const Rule* find_rule(const std::vector<Rule>& rules, const std::string& id) {
  for (const auto& r : rules)
    if (r.id == id) return &r;
  return nullptr;
}

Rule load_rule_file(const std::string& path) {
  const toml::table root = parse_toml_file(path, error_kind::kRuleFile, "rule file", path + ":1: ");
  return RuleReader(path, root).read();
}

std::vector<Rule> load_rules(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw usage_error("rules folder '" + dir + "' does not exist");
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".toml" && !is_rule_case_file(entry.path().filename().string()) &&
        entry.is_regular_file(ec))
      files.push_back(entry.path().filename().string());
  if (ec) throw usage_error("rules folder '" + dir + "' cannot be read: " + ec.message());
  if (files.empty()) throw usage_error("rules folder '" + dir + "' holds no rule files (*.toml)");
  std::sort(files.begin(), files.end());

  std::vector<Rule> rules;
  std::map<std::string, std::string> seen;  // id -> file
  for (const auto& name : files) {
    const std::string path = (fs::path(dir) / name).string();
    Rule r = load_rule_file(path);
    auto [it, fresh] = seen.emplace(r.id, path);
    if (!fresh)
      throw Error(error_kind::kRuleFile, ExitCode::kUsage,
                  path + ":" + std::to_string(r.source_line) + ": key 'id': duplicate rule id '" + r.id + "' (also in " +
                      it->second + ")");
    rules.push_back(std::move(r));
  }
  std::sort(rules.begin(), rules.end(), [](const Rule& a, const Rule& b) { return a.id < b.id; });
  return rules;
}

}  // namespace nd
