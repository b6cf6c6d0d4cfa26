// The text report's timeline table (src/report/report_timeline.cpp) on a
// hand-made probes.timeline (docs/report.md "Checkpoints and the timeline").
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metrics/metrics.h"
#include "report/report_common.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_report_timeline_test {

namespace {

nd::MetricsDoc timeline_doc(bool mover) {
  nd::MetricsDoc doc;
  for (const char* p : {"wte", "h.0.mlp", "lm_head"}) {
    nd::LayerMetrics l;
    l.path = p;
    doc.layers.push_back(l);
  }
  nlohmann::json tl = {
      {"checkpoints", {{{"path", "c/step_0.pt"}, {"step", 0}}, {{"path", "c/step_5.pt"}, {"step", 5}},
                       {{"path", "c/step_10.pt"}, {"step", 10}}, {{"path", "c/step_15.pt"}, {"step", 15}}}},
      {"loss", {3.46, 1.65, 0.73, "nan"}},
      {"layers",
       {{"wte", {{"act.rms", {1.0, 1.01, 1.02, "inf"}}}},
        {"h.0.mlp", {{"act.rms", {0.5, 0.52, 0.55, 9.1}}, {"grad.out_norm", {0.1, 0.1, 0.2, nullptr}}}},
        {"lm_head", {{"act.rms", {2.0, 2.1, 2.2, "nan"}}}}}}};
  if (mover) tl["first_mover"] = {{"layer", "h.0.mlp"}, {"metric", "act.rms"}};
  tl["first_nonfinite"] = {{"checkpoint", "c/step_15.pt"}, {"what", "forward"}, {"layer", "wte"}};
  doc.probes["timeline"] = tl;
  return doc;
}

}  // namespace

TEST(TimelineText, TableOfTheMovingMetric) {
  const std::string t = nd::report_detail::render_timeline_text(timeline_doc(true));
  EXPECT_NE(t.find("timeline (4 checkpoints, act.rms of every layer; first mover h.0.mlp marked *)"), std::string::npos) << t;
  EXPECT_NE(t.find("* h.0.mlp"), std::string::npos) << t;
  EXPECT_NE(t.find("9.1"), std::string::npos) << t;
  EXPECT_NE(t.find("first non-finite: forward of c/step_15.pt at wte"), std::string::npos) << t;
  // The header row carries the steps; the loss row comes first.
  EXPECT_LT(t.find("loss"), t.find("wte")) << t;
  EXPECT_NE(t.find("15   (step)"), std::string::npos) << t;
}

// Without --target the loss row is a random projection of the output: it
// is marked and says so, since it grows with the output's size while a
// healthy run's training loss falls (eval50 hf_vaultgemma_weights_series).
TEST(TimelineText, ARandomProjectionLossIsMarked) {
  nd::MetricsDoc doc = timeline_doc(true);
  EXPECT_EQ(nd::report_detail::render_timeline_text(doc).find("loss*"), std::string::npos);
  doc.probes["loss"] = {{"description", "random projection of output, sum(y * r) / N with r ~ N(0, 1) (seed 0)"}};
  const std::string t = nd::report_detail::render_timeline_text(doc);
  EXPECT_NE(t.find("  loss*"), std::string::npos) << t;
  EXPECT_NE(t.find("not the training loss: give --target"), std::string::npos) << t;
}

TEST(TimelineText, NoMover) {
  const std::string t = nd::report_detail::render_timeline_text(timeline_doc(false));
  EXPECT_NE(t.find("no layer left its early range"), std::string::npos) << t;
  EXPECT_EQ(t.find("* "), std::string::npos) << t;
}

// Module paths are never cut: four attention projections of DistilBERT,
// cut to 38 characters, read as one name (eval41 hf_distilbert_ckpts).
TEST(TimelineText, LongPathsAreWhole) {
  nd::MetricsDoc doc;
  const std::vector<std::string> paths = {"distilbert.transformer.layer.0.attention.q_lin",
                                          "distilbert.transformer.layer.0.attention.k_lin"};
  nlohmann::json layers = nlohmann::json::object();
  for (const auto& p : paths) {
    nd::LayerMetrics l;
    l.path = p;
    doc.layers.push_back(l);
    layers[p] = {{"act.rms", {1.0, 1.1, 1.2}}};
  }
  doc.probes["timeline"] = {
      {"checkpoints", {{{"path", "a.pt"}, {"step", 1}}, {{"path", "b.pt"}, {"step", 2}}, {{"path", "c.pt"}, {"step", 3}}}},
      {"loss", {1.0, 1.0, 1.0}},
      {"layers", layers}};
  const std::string t = nd::report_detail::render_timeline_text(doc);
  for (const auto& p : paths) EXPECT_NE(t.find(p), std::string::npos) << t;
}

TEST(TimelineText, AbsentWithoutTimeline) { EXPECT_EQ(nd::report_detail::render_timeline_text(nd::MetricsDoc{}), ""); }

}  // namespace nd_test_report_timeline_test
