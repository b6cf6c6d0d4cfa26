// Rule evaluation: rules x metrics document -> sorted findings (docs/rules.md).
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <unordered_map>

#include "rules/rules.h"

namespace nd {

namespace {

/// A metric as a number: JSON numbers, and the strings "nan", "inf", "-inf"
/// (how the JSON report writes non-finite values) so a document read back
/// from a report compares the same.
std::optional<double> as_number(const MetricValue& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

/// One condition on one metric value. Missing, null, NaN and type mismatches are false.
bool holds(const Condition& c, const MetricValue* v) {
  if (!v || v->is_null()) return false;
  if (c.value.is_number()) {
    const auto x = as_number(*v);
    if (!x || std::isnan(*x)) return false;
    const double t = c.value.get<double>();
    if (c.op == "<") return *x < t;
    if (c.op == "<=") return *x <= t;
    if (c.op == ">") return *x > t;
    if (c.op == ">=") return *x >= t;
    if (c.op == "==") return *x == t;
    if (c.op == "!=") return *x != t;
    return false;
  }
  const bool same_type = (c.value.is_boolean() && v->is_boolean()) || (c.value.is_string() && v->is_string());
  if (!same_type) return false;
  if (c.op == "==") return *v == c.value;
  if (c.op == "!=") return *v != c.value;
  return false;
}

bool all_hold(const std::vector<Condition>& when, const MetricMap* local, const MetricMap& model) {
  for (const auto& c : when)
    if (!holds(c, lookup_metric(local, model, c.metric))) return false;
  return true;
}

bool kind_matches(const Rule& r, const std::string& kind) {
  if (r.kinds.empty()) return true;
  for (const auto& pattern : r.kinds)
    if (fnmatch(pattern.c_str(), kind.c_str(), 0) == 0) return true;
  return false;
}

/// Every `when` metric, then every `evidence` metric, that the entity has.
nlohmann::json collect_evidence(const Rule& r, const MetricMap* local, const MetricMap& model) {
  nlohmann::json ev = nlohmann::json::object();
  auto add = [&](const std::string& name) {
    const MetricValue* v = lookup_metric(local, model, name);
    // An empty *_note is a sentence part that does not apply: no evidence
    // (eval54: BN001 printed "drift.stale_note=").
    const bool note = name.size() > 5 && name.compare(name.size() - 5, 5, "_note") == 0;
    if (v && !(note && v->is_string() && v->get<std::string>().empty())) ev[name] = *v;
  };
  for (const auto& c : r.when) add(c.metric);
  for (const auto& e : r.evidence) add(e);
  return ev;
}

/// The rule's message with its placeholders filled (the template was checked at load).
std::string render_message(const Rule& r, const MetricMap* local, const MetricMap& model,
                           const std::optional<std::string>& layer, const std::optional<std::string>& input) {
  return render_template(r.message, [&](const std::string& name) -> std::string {
    if (name == "layer") return layer ? (layer->empty() ? "<root>" : *layer) : "n/a";
    if (name == "input") return input ? *input : "n/a";
    const MetricValue* v = lookup_metric(local, model, name);
    // A *_note metric is an optional part of a sentence ("; this is also what
    // makes ..."): absent, it adds nothing.
    const bool note = name.size() > 5 && name.compare(name.size() - 5, 5, "_note") == 0;
    // A module path metric (*_layer) that is empty names the root module,
    // as {layer} does: "and <root> is the first module", not "and  is".
    const bool layer_path = name.size() > 6 && name.compare(name.size() - 6, 6, "_layer") == 0;
    if (v && layer_path && v->is_string() && v->get<std::string>().empty()) return std::string("<root>");
    return v ? format_metric(*v) : note ? std::string() : std::string("n/a");
  });
}

Severity lower(Severity s) { return s == Severity::kError ? Severity::kWarning : Severity::kInfo; }

struct Keyed {
  Finding f;
  int64_t exec;         ///< layer's exec_order; -1 without layer; max for layers that never ran
  int64_t input_index;  ///< -1 unless input scope
};

}  // namespace

std::string conditions_text(const std::vector<Condition>& when) {
  std::string s;
  for (const auto& c : when) s += (s.empty() ? "" : " and ") + c.metric + " " + c.op + " " + format_metric(c.value);
  return s;
}

std::vector<std::string> fix_texts(const Rule& r) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < r.fix.size(); ++i)
    out.push_back(i < r.fix_when.size() && !r.fix_when[i].empty() ? r.fix[i] + " (when " + conditions_text(r.fix_when[i]) + ")"
                                                                  : r.fix[i]);
  return out;
}

std::vector<Finding> evaluate_rules(const std::vector<Rule>& rules, const MetricsDoc& doc) {
  const MetricMap& model = doc.model_metrics;
  const MetricValue* syn = lookup_metric(nullptr, model, "run.synthetic_inputs");
  const bool synthetic = syn && syn->is_boolean() && syn->get<bool>();

  std::unordered_map<std::string, int64_t> exec_of;
  for (const auto& l : doc.layers)
    exec_of.emplace(l.path, l.exec_order < 0 ? std::numeric_limits<int64_t>::max() : l.exec_order);

  std::vector<Keyed> found;
  auto emit = [&](const Rule& r, const MetricMap* local, std::optional<std::string> layer,
                  std::optional<std::string> input, int64_t input_index, nlohmann::json extra) {
    Finding f;
    f.rule_id = r.id;
    f.failure_mode = r.failure_mode;
    f.severity = r.severity;
    f.message = render_message(r, local, model, layer, input);
    f.evidence = collect_evidence(r, local, model);
    for (auto& [k, v] : extra.items()) f.evidence[k] = v;
    // Conditional fixes: only those whose conditions hold on this finding's metrics.
    for (std::size_t i = 0; i < r.fix.size(); ++i)
      if (i >= r.fix_when.size() || all_hold(r.fix_when[i], local, model)) f.fix.push_back(r.fix[i]);
    bool depends = r.data_dependent;
    if (!r.data_dependent_metric.empty()) {
      const MetricValue* d = lookup_metric(local, model, r.data_dependent_metric);
      depends = d && d->is_boolean() && d->get<bool>();
    }
    if (depends && synthetic) {
      f.synthetic_inputs = true;
      f.severity = lower(f.severity);
      f.message += " (measured on synthetic inputs)";
    }
    int64_t exec = -1;
    if (layer) {
      auto it = exec_of.find(*layer);
      exec = it == exec_of.end() ? std::numeric_limits<int64_t>::max() : it->second;
    }
    f.layer = std::move(layer);
    f.input = std::move(input);
    found.push_back({std::move(f), exec, input_index});
  };

  for (const Rule& r : rules) {
    if (r.scope == "model") {
      if (!all_hold(r.when, nullptr, model)) continue;
      std::optional<std::string> layer;
      if (!r.layer_from.empty()) {
        const MetricValue* v = lookup_metric(nullptr, model, r.layer_from);
        if (v && v->is_string()) layer = v->get<std::string>();
      }
      emit(r, nullptr, layer, std::nullopt, -1, nlohmann::json::object());
    } else if (r.scope == "input") {
      for (const auto& in : doc.inputs)
        if (all_hold(r.when, &in.metrics, model)) emit(r, &in.metrics, std::nullopt, in.name, in.index, nlohmann::json::object());
    } else {  // layer
      std::vector<const LayerMetrics*> matched;
      for (const auto& l : doc.layers)
        if (kind_matches(r, l.kind) && all_hold(r.when, &l.metrics, model)) matched.push_back(&l);
      if (matched.empty()) continue;
      if (r.select == "first" || r.select == "group") {
        // Smallest exec_order among layers that ran; a layer that never ran
        // (-1) only when no matching layer ran; doc order breaks ties.
        // With rank_by: the largest value of that metric first (a layer
        // without a number for it last; values within 1e-6 relative tie).
        auto rank = [&](const LayerMetrics* l) {
          if (r.rank_by.empty()) return 0.0;
          const MetricValue* v = lookup_metric(&l->metrics, model, r.rank_by);
          return v && v->is_number() && !std::isnan(v->get<double>()) ? v->get<double>()
                                                                      : -std::numeric_limits<double>::infinity();
        };
        const LayerMetrics* best = nullptr;
        for (const LayerMetrics* l : matched) {
          if (!best) { best = l; continue; }
          const double rl = rank(l), rb = rank(best);
          // Values within 1e-6 relative are a tie: a reduction's last bits
          // vary with the thread count, and the earlier layer should win
          // on every machine.
          const bool tie = rl == rb || (std::isfinite(rl) && std::isfinite(rb) &&
                                        std::fabs(rl - rb) <= 1e-6 * std::max(std::fabs(rl), std::fabs(rb)));
          if (!tie) {
            if (rl > rb) best = l;
            continue;
          }
          const bool l_ran = l->exec_order >= 0, b_ran = best->exec_order >= 0;
          if (l_ran && (!b_ran || l->exec_order < best->exec_order)) best = l;
        }
        nlohmann::json extra{{"matched_layers", static_cast<int64_t>(matched.size())}};
        if (r.select == "group" && matched.size() > 1) {
          // One cause, one finding: the others are named in it, in
          // execution order (never-run layers last, then document order).
          std::vector<const LayerMetrics*> rest;
          for (const LayerMetrics* l : matched)
            if (l != best) rest.push_back(l);
          std::stable_sort(rest.begin(), rest.end(), [](const LayerMetrics* a, const LayerMetrics* b) {
            const int64_t ea = a->exec_order < 0 ? std::numeric_limits<int64_t>::max() : a->exec_order;
            const int64_t eb = b->exec_order < 0 ? std::numeric_limits<int64_t>::max() : b->exec_order;
            return ea < eb;
          });
          std::string names, list;
          for (size_t i = 0; i < rest.size(); ++i) {
            const std::string path = rest[i]->path.empty() ? "<root>" : rest[i]->path;
            names += (i ? ", " : "") + path;
            if (i < 6) list += (i ? ", " : "") + path;
          }
          if (rest.size() > 6) list += ", ...";
          extra["also_layers"] = names;
          emit(r, &best->metrics, best->path, std::nullopt, -1, extra);
          Keyed& k = found.back();
          k.f.message += "; the same holds for " + std::to_string(rest.size()) + " more layer" +
                         (rest.size() == 1 ? "" : "s") + " (" + list + ")";
        } else {
          emit(r, &best->metrics, best->path, std::nullopt, -1, extra);
        }
      } else {
        for (const LayerMetrics* l : matched) emit(r, &l->metrics, l->path, std::nullopt, -1, nlohmann::json::object());
      }
    }
  }

  static const std::string kNoLayer;
  std::stable_sort(found.begin(), found.end(), [](const Keyed& a, const Keyed& b) {
    const int sa = -static_cast<int>(a.f.severity), sb = -static_cast<int>(b.f.severity);
    const bool la = a.f.layer.has_value(), lb = b.f.layer.has_value();
    return std::tie(sa, a.f.rule_id, a.exec, la, la ? *a.f.layer : kNoLayer, a.input_index) <
           std::tie(sb, b.f.rule_id, b.exec, lb, lb ? *b.f.layer : kNoLayer, b.input_index);
  });
  std::vector<Finding> out;
  out.reserve(found.size());
  for (auto& k : found) out.push_back(std::move(k.f));
  return out;
}

}  // namespace nd
