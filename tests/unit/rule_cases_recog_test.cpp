// Catches / catches-not cases for the rules of recognition by what the ops
// compute (SEQ003, PREC005, PREC006), as in rule_cases_test.cpp.
#include <gtest/gtest.h>

#include "rules/rules.h"
#include "test_util.h"

using ndtest::layer;

namespace {

const std::vector<nd::Rule>& shipped() {
  static const std::vector<nd::Rule> rules = nd::load_rules((ndtest::source_dir() / "rules").string());
  return rules;
}

std::vector<nd::Finding> run(const std::string& id, const nd::MetricsDoc& doc) {
  const nd::Rule* r = nd::find_rule(shipped(), id);
  EXPECT_NE(r, nullptr) << id << " is not shipped";
  if (!r) return {};
  return nd::evaluate_rules({*r}, doc);
}

nd::MetricsDoc seq003_doc(bool via, double rel) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("frontend", "Sequential", 0, false));
  doc.layers.push_back(layer("pool", "StatsPool", 1, true));
  doc.layers.push_back(layer("classifier", "Linear", 2, true));
  doc.model_metrics = {{"layout.sequence", true},         {"layout.seq_len", 16},
                       {"layout.padding_input", "lengths"}, {"pad.rel_diff", rel},
                       {"pad.rel_diff_eval", rel},         {"pad.rel_diff_train", nullptr},
                       {"pad.mode", "eval"},              {"pad.padded_to", 24},
                       {"pad.first_layer", "pool"},       {"pad.via_norm", false},
                       {"pad.via_pooling_or_conv", via},  {"pad.over_floor", "inf"}};
  if (via) {
    doc.model_metrics["pad.entry_kind"] = "pooling";
    doc.model_metrics["pad.entry_op"] = "aten::mean over the time axis";
    doc.model_metrics["pad.entry_layer"] = "pool";
  }
  return doc;
}

TEST(SEQ003, Catches) {
  const auto f = run("SEQ003", seq003_doc(true, 0.184));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "padding-contamination");
  EXPECT_EQ(f[0].layer, "pool");
  EXPECT_EQ(f[0].evidence["pad.entry_kind"], "pooling");
  EXPECT_EQ(f[0].evidence["pad.padded_to"], 24);
  EXPECT_NE(f[0].message.find("aten::mean over the time axis (pooling)"), std::string::npos) << f[0].message;
}

TEST(SEQ003, CatchesNot) {
  EXPECT_TRUE(run("SEQ003", seq003_doc(true, 3e-8)).empty());  // masked pooling: float noise
  EXPECT_TRUE(run("SEQ003", seq003_doc(false, 0.2)).empty());  // enters elsewhere (SEQ001's case or none)
}

nd::MetricsDoc prec005_doc(bool nonfinite) {
  nd::MetricsDoc doc;
  nd::MetricMap m = {{"prec.nonfinite_count", nonfinite ? 40 : 0}, {"prec.ref_absmax", 3.1}};
  if (nonfinite) {
    m["prec.nonfinite_in_format"] = true;
    m["prec.first_nonfinite_cause"] = "other";
    m["prec.producer"] = "aten::exp in pool";
    m["prec.propagator"] = "aten::div in pool";
  }
  doc.layers.push_back(layer("pool", "ExpAttentionPool", 0, true, m));
  doc.model_metrics = {{"prec.format", "fp16"}, {"prec.mode", "emulated"}};
  return doc;
}

TEST(PREC005, Catches) {
  const auto f = run("PREC005", prec005_doc(true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "nonfinite-forward");
  EXPECT_EQ(f[0].layer, "pool");
  EXPECT_EQ(f[0].evidence["prec.producer"], "aten::exp in pool");
  EXPECT_EQ(f[0].evidence["prec.propagator"], "aten::div in pool");
  EXPECT_NE(f[0].message.find("40 NaN/Inf values in fp16 (emulated run)"), std::string::npos) << f[0].message;
}

TEST(PREC005, CatchesNot) {
  EXPECT_TRUE(run("PREC005", prec005_doc(false)).empty());
  // An output that overflows is PREC001's, an eps that vanished PREC002's.
  for (const char* cause : {"overflow", "norm-eps"}) {
    nd::MetricsDoc d = prec005_doc(true);
    d.layers[0].metrics["prec.first_nonfinite_cause"] = cause;
    EXPECT_TRUE(run("PREC005", d).empty()) << cause;
  }
}

nd::MetricsDoc prec006_doc(bool overflow) {
  nd::MetricsDoc doc;
  nd::MetricMap m = {{"norm.eps", 1e-5}, {"norm.computing_dtype", "float32"}, {"norm.statistic", "var"}};
  if (overflow) {
    m["prec.norm_internal_overflow"] = true;
    m["prec.norm_internal_overflow_op"] = "aten::var";
  }
  doc.layers.push_back(layer("norm1", "ViewGroupNorm", 0, true, m));
  doc.model_metrics = {{"prec.format", "fp16"}};
  return doc;
}

TEST(PREC006, Catches) {
  const auto f = run("PREC006", prec006_doc(true));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].failure_mode, "norm-eps-precision");
  EXPECT_EQ(f[0].layer, "norm1");
  EXPECT_EQ(f[0].evidence["prec.norm_internal_overflow_op"], "aten::var");
}

TEST(PREC006, CatchesNot) { EXPECT_TRUE(run("PREC006", prec006_doc(false)).empty()); }

}  // namespace
