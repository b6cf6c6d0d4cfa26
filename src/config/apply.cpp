// Applying a Config: rule selection, severity and threshold overrides,
// suppressions, and the effective configuration for the report.
#include <fnmatch.h>

#include <algorithm>
#include <filesystem>

#include "config/config.h"

namespace nd {

namespace {

bool matches_any(const std::optional<std::vector<std::string>>& patterns, const std::string& id) {
  if (!patterns) return false;
  return std::any_of(patterns->begin(), patterns->end(), [&](const std::string& p) { return rule_matches(p, id); });
}

bool glob(const std::string& pattern, const std::string& text) { return fnmatch(pattern.c_str(), text.c_str(), 0) == 0; }

/// The model file in the spellings a `model` glob is matched against: as
/// given, relative to the config file's folder, absolute.
std::vector<std::string> model_spellings(const std::string& model, const std::string& config_file) {
  namespace fs = std::filesystem;
  std::vector<std::string> out = {model};
  std::error_code ec;
  const fs::path abs = fs::absolute(model, ec).lexically_normal();
  if (ec) return out;
  out.push_back(abs.string());
  if (!config_file.empty()) {
    const fs::path base = fs::absolute(config_file, ec).parent_path().lexically_normal();
    if (!ec) {
      const fs::path rel = abs.lexically_relative(base);
      if (!rel.empty() && *rel.begin() != "..") out.push_back(rel.string());
    }
  }
  if (model.rfind("./", 0) == 0) out.push_back(model.substr(2));
  return out;
}

bool suppression_covers(const Suppression& s, const Finding& f, const std::vector<std::string>& models) {
  if (!rule_matches(s.rule, f.rule_id)) return false;
  const std::string module = f.layer ? *f.layer : std::string();
  if (!glob(s.module, module)) return false;
  if (s.model.empty()) return true;
  return std::any_of(models.begin(), models.end(), [&](const std::string& m) { return glob(s.model, m); });
}

}  // namespace

std::vector<Rule> apply_config(const std::vector<Rule>& rules, const Config& cfg) {
  std::vector<Rule> out;
  for (const Rule& r : rules) {
    if (cfg.select && !matches_any(cfg.select, r.id)) continue;
    if (matches_any(cfg.ignore, r.id)) continue;
    Rule copy = r;
    if (auto it = cfg.severity_overrides.find(r.id); it != cfg.severity_overrides.end()) copy.severity = it->second;
    for (const auto& t : cfg.thresholds) {
      if (t.rule != r.id) continue;
      for (auto& c : copy.when)
        if (c.metric == t.metric) c.value = t.value;
    }
    out.push_back(std::move(copy));
  }
  return out;
}

int suppress_findings(std::vector<Finding>& findings, std::vector<Suppression>& suppressions,
                      const std::string& model, const std::string& config_file, std::vector<SuppressedFinding>* out) {
  int removed = 0;
  std::vector<Finding> kept;
  kept.reserve(findings.size());
  const std::vector<std::string> models = model_spellings(model, config_file);
  for (auto& f : findings) {
    Suppression* hit = nullptr;
    for (auto& s : suppressions)
      if (suppression_covers(s, f, models)) {
        hit = &s;
        break;
      }
    if (hit) {
      ++hit->matched;
      ++removed;
      if (out) out->push_back(SuppressedFinding{f, hit->reason, config_file, hit->line});
    } else {
      kept.push_back(std::move(f));
    }
  }
  findings = std::move(kept);
  return removed;
}

std::vector<std::string> unused_suppression_notes(const Config& cfg) {
  std::vector<std::string> out;
  for (const auto& s : cfg.suppressions)
    if (s.matched == 0)
      out.push_back(cfg.file + ":" + std::to_string(s.line) + ": suppression of " + s.rule + " on modules '" + s.module +
                    "'" + (s.model.empty() ? "" : " of models '" + s.model + "'") +
                    " matched no finding; remove it if the problem is gone");
  return out;
}

nlohmann::ordered_json config_json(const Config& cfg, const std::vector<Rule>& rules,
                                   const std::vector<Rule>& defaults, const std::string& severity,
                                   const std::string& fail_on) {
  using oj = nlohmann::ordered_json;
  oj o = oj::object();
  o["file"] = cfg.file.empty() ? oj(nullptr) : oj(cfg.file);
  o["section"] = cfg.section.empty() ? oj(nullptr) : oj(cfg.section);
  o["select"] = cfg.select ? oj(*cfg.select) : oj(nullptr);
  o["ignore"] = cfg.ignore ? oj(*cfg.ignore) : oj::array();
  o["severity"] = severity;
  o["fail_on"] = fail_on;
  oj ids = oj::array();
  for (const auto& r : rules) ids.push_back(r.id);
  o["rules"] = std::move(ids);

  oj sev = oj::array();
  for (const auto& [id, s] : cfg.severity_overrides) {
    const Rule* d = find_rule(defaults, id);
    sev.push_back(oj{{"rule", id}, {"severity", severity_name(s)},
                     {"default", d ? oj(severity_name(d->severity)) : oj(nullptr)}});
  }
  o["severity_overrides"] = std::move(sev);

  oj th = oj::array();
  for (const auto& t : cfg.thresholds) {
    oj e{{"rule", t.rule}, {"metric", t.metric}, {"op", nullptr}, {"value", t.value}, {"default", nullptr}};
    if (const Rule* d = find_rule(defaults, t.rule))
      for (const auto& c : d->when)
        if (c.metric == t.metric) {
          e["op"] = c.op;
          e["default"] = c.value;
        }
    th.push_back(std::move(e));
  }
  o["threshold_overrides"] = std::move(th);

  oj sup = oj::array();
  for (const auto& s : cfg.suppressions)
    sup.push_back(oj{{"rule", s.rule}, {"module", s.module}, {"model", s.model.empty() ? oj(nullptr) : oj(s.model)},
                     {"reason", s.reason}, {"line", s.line},
                     {"matched", s.matched}, {"unused", s.matched == 0}});
  o["suppressions"] = std::move(sup);
  return o;
}

}  // namespace nd
