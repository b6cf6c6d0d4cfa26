// The metrics document: everything the probes measured, in plain C++ types.
//
// Probes write it; rules read it; the report serializes it (the JSON report's
// `model`, `inputs`, `layers` and `probes` parts). No LibTorch header here, so
// rules, report and CLI compile and test without a model.
//
// Metric names are dotted ("act.absmax", "bn.values_per_channel"); the full
// list, with units and the probe that writes each, is docs/metrics.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nd {

/// A metric value: a JSON number, bool or string (null = measured, no value).
using MetricValue = nlohmann::json;
/// Flat metric map, ordered by name (deterministic output).
using MetricMap = std::map<std::string, MetricValue>;

/// A measured number as a metric value: finite values as JSON numbers, NaN as
/// "nan" and infinities as "inf"/"-inf" (JSON has no non-finite numbers; the
/// rules compare these strings, docs/metrics.md).
MetricValue metric_number(double v);
/// A measured number, or null (measured, no value) when it is not finite:
/// for values where NaN or Inf only means "could not be computed".
MetricValue finite_or_null(double v);

/// One module of named_modules() (path "" is the root module).
struct LayerMetrics {
  std::string path;        ///< module path exactly as named_modules() prints it
  std::string kind;        ///< class name without namespace: "BatchNorm2d", "LlamaRMSNorm"
  int64_t exec_order = -1; ///< index of its first output tap in the forward pass; -1: never ran
  bool leaf = false;       ///< no child modules
  int64_t parameters = 0;  ///< number of elements in its direct parameters
  nlohmann::json info = nlohmann::json::object();  ///< inventory facts (eps, momentum, normalized_shape, ...)
  MetricMap metrics;       ///< measured metrics, see docs/metrics.md
};

/// One forward argument (a sample batch tensor).
struct InputMetrics {
  std::string name;        ///< forward's parameter name ("x", "input_ids")
  int64_t index = 0;       ///< position in forward's argument list (self excluded)
  nlohmann::json info = nlohmann::json::object();  ///< shape, dtype, source
  MetricMap metrics;       ///< "input.absmax", "input.nan_count", ...
};

/// The whole measurement of one `normdoctor check` run.
struct MetricsDoc {
  nlohmann::json model = nlohmann::json::object();   ///< path, sha256, kind, training, parameters
  std::vector<InputMetrics> inputs;                  ///< in forward's argument order
  std::vector<LayerMetrics> layers;                  ///< in named_modules() order
  MetricMap model_metrics;                           ///< model-scope metrics ("grad.input_output_ratio")
  nlohmann::json probes = nlohmann::json::object();  ///< per-probe details and tables
  nlohmann::json passes = nlohmann::json::array();   ///< passes run: name, mode, seconds
  std::vector<std::string> assumptions;              ///< what was inferred or assumed, in words
  double seconds_total = 0.0;                        ///< wall time of the measurement

  /// The layer with this path, or nullptr.
  const LayerMetrics* find_layer(const std::string& path) const;
  LayerMetrics* find_layer(const std::string& path);
};

/// Looks a metric up: first in `local` (a layer's or input's map), then in
/// the model-scope map. Returns nullptr when absent.
const MetricValue* lookup_metric(const MetricMap* local, const MetricMap& model, const std::string& name);

/// The parent of a named_modules() path: "layers.0.attn" -> "layers.0";
/// "" for a top-level module (its parent is the root) and for the root.
std::string parent_module(const std::string& path);

/// Whether the module at `path` is `root` itself or lies under it ("" is
/// the root: every path lies under it).
bool within_module(const std::string& path, const std::string& root);

}  // namespace nd
