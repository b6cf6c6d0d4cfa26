// normdoctor.toml: discovery, parsing and validation (docs/config.md).
#include "config/config.h"
#include "rules/toml_file.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <toml++/toml.h>

#include "core/error.h"
#include "rules/suggest.h"

namespace nd {

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kTopKeys = {"select", "ignore", "severity", "fail-on", "rules", "suppress"};
const std::vector<std::string> kRuleKeys = {"severity", "thresholds"};
const std::vector<std::string> kSuppressKeys = {"rule", "module", "model", "reason"};
const std::vector<std::string> kSeverities = {"info", "warning", "error"};
const std::vector<std::string> kFailOn = {"info", "warning", "error", "never"};


std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

/// Rule ids and their letter prefixes ("ACT", "GRAD"): candidates for suggestions.
std::vector<std::string> pattern_candidates(const std::vector<Rule>& rules) {
  std::vector<std::string> out;
  std::set<std::string> families;
  for (const auto& r : rules) {
    out.push_back(r.id);
    std::size_t i = 0;
    while (i < r.id.size() && r.id[i] >= 'A' && r.id[i] <= 'Z') ++i;
    families.insert(r.id.substr(0, i));
  }
  out.insert(out.end(), families.begin(), families.end());
  return out;
}

/// "" when `pattern` names at least one rule, else the complaint (with a suggestion).
std::string pattern_problem(const std::string& pattern, const std::vector<Rule>& rules) {
  if (pattern.empty()) return "an empty rule pattern matches every rule; leave the entry out instead";
  for (const auto& r : rules)
    if (rule_matches(pattern, r.id)) return {};
  return "'" + pattern + "' is neither a rule id nor the prefix of one" + did_you_mean(pattern, pattern_candidates(rules)) +
         " (`normdoctor rules` lists them)";
}

/// Reads one parsed config file, throwing nd::Error "FILE:LINE: ..." on the first problem.
class ConfigReader {
 public:
  ConfigReader(std::string file, const toml::table& root, const std::vector<Rule>& rules)
      : file_(std::move(file)), root_(root), rules_(rules) {}

  Config read() {
    Config c;
    c.file = file_;
    check_keys(root_, kTopKeys, "");
    if (const toml::node* n = root_.get("select")) c.select = patterns(*n, "select");
    if (const toml::node* n = root_.get("ignore")) c.ignore = patterns(*n, "ignore");
    if (const toml::node* n = root_.get("severity")) c.severity = choice(*n, "severity", kSeverities);
    if (const toml::node* n = root_.get("fail-on")) c.fail_on = choice(*n, "fail-on", kFailOn);
    if (const toml::node* n = root_.get("rules")) read_rules(*n, c);
    if (const toml::node* n = root_.get("suppress")) read_suppressions(*n, c);
    return c;
  }

 private:
  [[noreturn]] void fail(uint32_t line, const std::string& msg) const {
    throw Error(error_kind::kConfig, ExitCode::kUsage, file_ + ":" + std::to_string(std::max<uint32_t>(1, line)) + ": " + msg);
  }
  static uint32_t line(const toml::node& n) { return n.source().begin.line; }
  static uint32_t line(const toml::key& k) { return k.source().begin.line; }

  void check_keys(const toml::table& t, const std::vector<std::string>& known, const std::string& where) const {
    for (auto&& [k, v] : t) {
      const std::string key(k.str());
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      fail(line(k), "unknown key '" + where + key + "'" + did_you_mean(key, known) + " (known keys" +
                        (where.empty() ? "" : " in " + where.substr(0, where.size() - 1)) + ": " + join(known) + ")");
    }
  }

  std::string string_of(const toml::node& n, const std::string& key) const {
    if (!n.is_string()) fail(line(n), "key '" + key + "' must be a string, not " + toml_type_name(n));
    return n.as_string()->get();
  }

  std::string choice(const toml::node& n, const std::string& key, const std::vector<std::string>& options) const {
    const std::string v = string_of(n, key);
    if (std::find(options.begin(), options.end(), v) == options.end())
      fail(line(n), "key '" + key + "': '" + v + "' is not one of " + join(options) + did_you_mean(v, options));
    return v;
  }

  std::vector<std::string> patterns(const toml::node& n, const std::string& key) const {
    const toml::array* a = n.as_array();
    if (!a) fail(line(n), "key '" + key + "' must be an array of rule ids or prefixes, not " + toml_type_name(n));
    std::vector<std::string> out;
    for (const toml::node& e : *a) {
      const std::string p = upper(string_of(e, key + "[]"));
      if (std::string problem = pattern_problem(p, rules_); !problem.empty()) fail(line(e), "key '" + key + "': " + problem);
      out.push_back(p);
    }
    return out;
  }

  void read_rules(const toml::node& n, Config& c) const {
    const toml::table* t = n.as_table();
    if (!t) fail(line(n), "key 'rules' must be a table of [rules.ID] tables, not " + std::string(toml_type_name(n)));
    std::vector<std::string> ids;
    for (const auto& r : rules_) ids.push_back(r.id);
    for (auto&& [k, v] : *t) {
      const std::string id = upper(std::string(k.str()));
      const Rule* rule = find_rule(rules_, id);
      if (!rule)
        fail(line(k), "unknown rule id '" + std::string(k.str()) + "' in key 'rules." + std::string(k.str()) + "'" + did_you_mean(id, ids) +
                          " (`normdoctor rules` lists them)");
      const std::string where = "rules." + id;
      const toml::table* rt = v.as_table();
      if (!rt) fail(line(v), "key '" + where + "' must be a table (severity, thresholds), not " + toml_type_name(v));
      check_keys(*rt, kRuleKeys, where + ".");
      if (const toml::node* s = rt->get("severity"))
        c.severity_overrides[id] = parse_severity(choice(*s, where + ".severity", kSeverities), where);
      if (const toml::node* th = rt->get("thresholds")) read_thresholds(*th, *rule, where + ".thresholds", c);
    }
  }

  /// Flattens nested tables: `act.growth = 1` (a dotted key) and `"act.growth" = 1` both give "act.growth".
  static void flatten(const toml::table& t, const std::string& prefix,
                      std::vector<std::pair<std::string, const toml::node*>>& out) {
    for (auto&& [k, v] : t) {
      const std::string name = prefix + std::string(k.str());
      if (const toml::table* sub = v.as_table())
        flatten(*sub, name + ".", out);
      else
        out.emplace_back(name, &v);
    }
  }

  void read_thresholds(const toml::node& n, const Rule& rule, const std::string& where, Config& c) const {
    const toml::table* t = n.as_table();
    if (!t) fail(line(n), "key '" + where + "' must be a table of metric = value, not " + std::string(toml_type_name(n)));
    std::vector<std::string> metrics;
    for (const auto& cond : rule.when) metrics.push_back(cond.metric);
    std::vector<std::pair<std::string, const toml::node*>> entries;
    flatten(*t, "", entries);
    for (const auto& [metric, node] : entries) {
      const auto count = std::count(metrics.begin(), metrics.end(), metric);
      if (count == 0)
        fail(line(*node), "key '" + where + "': rule " + rule.id + " has no condition on metric '" + metric + "'" +
                              did_you_mean(metric, metrics) + " (its conditions: " + join(metrics) + ")");
      if (count > 1)
        fail(line(*node), "key '" + where + "': rule " + rule.id + " compares '" + metric + "' in " +
                              std::to_string(count) + " conditions; a threshold override needs exactly one");
      const Condition& cond = *std::find_if(rule.when.begin(), rule.when.end(),
                                            [&m = metric](const Condition& x) { return x.metric == m; });
      nlohmann::json value;
      if (node->is_integer())
        value = node->as_integer()->get();
      else if (node->is_floating_point())
        value = node->as_floating_point()->get();
      else if (node->is_boolean())
        value = node->as_boolean()->get();
      else if (node->is_string())
        value = node->as_string()->get();
      else
        fail(line(*node), "key '" + where + "." + metric + "' must be a number, boolean or string, not " + toml_type_name(*node));
      const bool same_kind = (cond.value.is_number() && value.is_number()) ||
                             (cond.value.is_boolean() && value.is_boolean()) ||
                             (cond.value.is_string() && value.is_string());
      if (!same_kind)
        fail(line(*node), "key '" + where + "." + metric + "' must be " +
                              (cond.value.is_number() ? "a number" : cond.value.is_boolean() ? "a boolean" : "a string") +
                              " like the rule's threshold (" + cond.value.dump() + "), not " + toml_type_name(*node));
      c.thresholds.push_back({rule.id, metric, std::move(value)});
    }
  }

  void read_suppressions(const toml::node& n, Config& c) const {
    const toml::array* a = n.as_array();
    if (!a) fail(line(n), "key 'suppress' must be an array of tables ([[suppress]] with rule, module, reason), not " +
                              std::string(toml_type_name(n)));
    for (std::size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      const std::string where = "suppress[" + std::to_string(i) + "]";
      const toml::table* t = e.as_table();
      if (!t) fail(line(e), "key '" + where + "' must be a table with rule, module, reason, not " + toml_type_name(e));
      check_keys(*t, kSuppressKeys, where + ".");
      Suppression s;
      s.line = static_cast<int>(std::max<uint32_t>(1, line(e)));
      for (const std::string& k : kSuppressKeys) {
        const toml::node* v = t->get(k);
        if (!v) {
          if (k == "module" || k == "model") continue;
          fail(line(e), "key '" + where + "' misses '" + k + "'" +
                            (k == "reason" ? " (a suppression must say why the finding does not apply)" : ""));
        }
        std::string text = string_of(*v, where + "." + k);
        if (k == "reason" && text.find_first_not_of(" \t\r\n") == std::string::npos)
          fail(line(*v), "key '" + where + ".reason' is empty; say why the finding does not apply");
        if (k == "rule") {
          text = upper(text);
          if (std::string problem = pattern_problem(text, rules_); !problem.empty())
            fail(line(*v), "key '" + where + ".rule': " + problem);
          s.rule = text;
        } else if (k == "module") {
          s.module = text;
        } else if (k == "model") {
          if (text.empty()) fail(line(*v), "key '" + where + ".model' is empty; give a glob such as \"exports/*.pt\" or leave it out");
          s.model = text;
        } else {
          s.reason = text;
        }
      }
      if (!t->get("module") && !t->get("model"))
        fail(line(e), "key '" + where + "' misses 'module' (a glob on module paths) or 'model' (a glob on model files)");
      c.suppressions.push_back(std::move(s));
    }
  }

  std::string file_;
  const toml::table& root_;
  const std::vector<Rule>& rules_;
};

}  // namespace

std::string upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

bool rule_matches(const std::string& pattern, const std::string& rule_id) {
  return !pattern.empty() && pattern.size() <= rule_id.size() && upper(rule_id.substr(0, pattern.size())) == upper(pattern);
}

std::vector<std::string> split_list(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const auto& v : values) {
    std::size_t start = 0;
    while (start <= v.size()) {
      std::size_t end = v.find(',', start);
      if (end == std::string::npos) end = v.size();
      std::string piece = v.substr(start, end - start);
      piece.erase(0, piece.find_first_not_of(" \t"));
      piece.erase(piece.find_last_not_of(" \t") + 1);
      if (!piece.empty()) out.push_back(piece);
      start = end + 1;
    }
  }
  return out;
}

void check_rule_patterns(const std::vector<std::string>& patterns, const std::vector<Rule>& rules,
                         const std::string& what) {
  for (const auto& p : patterns)
    if (std::string problem = pattern_problem(p, rules); !problem.empty()) throw usage_error(what + ": " + problem);
}

Config with_flags(Config file, const Config& flags) {
  if (flags.select) file.select = flags.select;
  if (flags.ignore) file.ignore = flags.ignore;
  if (flags.severity) file.severity = flags.severity;
  if (flags.fail_on) file.fail_on = flags.fail_on;
  return file;
}

namespace {

/// True when `path` is a pyproject.toml that parses and has [tool.normdoctor].
bool has_tool_table(const fs::path& path) {
  try {
    const toml::table root = toml::parse_file(path.string());
    return root["tool"]["normdoctor"].is_table();
  } catch (const std::exception&) {
    return false;
  }
}

bool is_pyproject(const std::string& path) { return fs::path(path).filename() == kPyprojectFileName; }

}  // namespace

std::optional<std::string> find_config(const std::string& start) {
  std::error_code ec;
  fs::path dir = fs::absolute(start.empty() ? fs::path(".") : fs::path(start), ec).lexically_normal();
  if (ec) return std::nullopt;
  while (true) {
    const fs::path candidate = dir / kConfigFileName;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
    const fs::path pyproject = dir / kPyprojectFileName;
    if (fs::is_regular_file(pyproject, ec) && has_tool_table(pyproject)) return pyproject.string();
    if (!dir.has_parent_path() || dir.parent_path() == dir) return std::nullopt;
    dir = dir.parent_path();
  }
}

Config load_config(const std::string& path, const std::vector<Rule>& rules) {
  const toml::table root = parse_toml_file(path, error_kind::kConfig, "config file", path + ": ");
  if (!is_pyproject(path)) return ConfigReader(path, root, rules).read();
  const toml::table* tool = root["tool"]["normdoctor"].as_table();
  if (!tool)
    throw Error(error_kind::kConfig, ExitCode::kUsage,
                path + ":1: no [tool.normdoctor] table; normdoctor reads its settings from that table of a pyproject.toml");
  Config c = ConfigReader(path, *tool, rules).read();
  c.section = "tool.normdoctor";
  return c;
}

}  // namespace nd
