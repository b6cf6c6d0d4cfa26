#include <gtest/gtest.h>

#include "metrics/metrics.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_metrics_test {

TEST(Metrics, LookupPrefersLocalThenModel) {
  nd::MetricMap local{{"act.absmax", 3.0}};
  nd::MetricMap model{{"act.absmax", 5.0}, {"run.precision", "fp32"}};
  ASSERT_NE(nd::lookup_metric(&local, model, "act.absmax"), nullptr);
  EXPECT_EQ(nd::lookup_metric(&local, model, "act.absmax")->get<double>(), 3.0);
  EXPECT_EQ(nd::lookup_metric(&local, model, "run.precision")->get<std::string>(), "fp32");
  EXPECT_EQ(nd::lookup_metric(&local, model, "missing"), nullptr);
  EXPECT_EQ(nd::lookup_metric(nullptr, model, "act.absmax")->get<double>(), 5.0);
}

TEST(Metrics, FindLayerByPath) {
  nd::MetricsDoc doc;
  nd::LayerMetrics root; root.kind = "Net"; doc.layers.push_back(root);
  nd::LayerMetrics ln; ln.path = "blocks.0.ln"; ln.kind = "LayerNorm"; doc.layers.push_back(ln);
  ASSERT_NE(doc.find_layer("blocks.0.ln"), nullptr);
  EXPECT_EQ(doc.find_layer("blocks.0.ln")->kind, "LayerNorm");
  EXPECT_EQ(doc.find_layer("blocks.1"), nullptr);
}

TEST(Metrics, ModulePathParentsAndSubtrees) {
  EXPECT_EQ(nd::parent_module("layers.0.attn"), "layers.0");
  EXPECT_EQ(nd::parent_module("head"), "");
  EXPECT_EQ(nd::parent_module(""), "");
  EXPECT_TRUE(nd::within_module("layers.0.attn", "layers.0"));
  EXPECT_TRUE(nd::within_module("layers.0", "layers.0"));
  EXPECT_TRUE(nd::within_module("head", ""));              // everything is under the root
  EXPECT_FALSE(nd::within_module("layers.01.attn", "layers.0"));  // a name prefix is no parent
  EXPECT_FALSE(nd::within_module("layers", "layers.0"));
}

}  // namespace nd_test_metrics_test
