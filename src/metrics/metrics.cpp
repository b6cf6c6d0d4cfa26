#include "metrics/metrics.h"

#include <cmath>

namespace nd {

const LayerMetrics* MetricsDoc::find_layer(const std::string& path) const {
  for (const auto& l : layers)
    if (l.path == path) return &l;
  return nullptr;
}

LayerMetrics* MetricsDoc::find_layer(const std::string& path) {
  for (auto& l : layers)
    if (l.path == path) return &l;
  return nullptr;
}

const MetricValue* lookup_metric(const MetricMap* local, const MetricMap& model, const std::string& name) {
  if (local) {
    auto it = local->find(name);
    if (it != local->end()) return &it->second;
  }
  auto it = model.find(name);
  return it == model.end() ? nullptr : &it->second;
}

MetricValue metric_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

MetricValue finite_or_null(double v) { return std::isfinite(v) ? MetricValue(v) : MetricValue(nullptr); }

std::string parent_module(const std::string& path) {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

bool within_module(const std::string& path, const std::string& root) {
  return root.empty() || path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                                          path[root.size()] == '.');
}

}  // namespace nd
