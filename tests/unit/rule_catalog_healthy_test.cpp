// The whole shipped catalog at once on one healthy model: no rule fires.
// (Each rule alone on its own documents: rules/ID.cases.toml, run by
// rule_cases_test.cpp.)
#include <gtest/gtest.h>

#include "rules/rules.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_rule_catalog_healthy_test {

using ndtest::input;
using ndtest::layer;

TEST(RuleCatalog, HealthyModelHasNoFindings) {
  nd::MetricsDoc doc;
  doc.inputs.push_back(input("x", 0, {{"input.is_float", true}, {"input.scale", 1.0}, {"input.nonfinite_count", 0}}));
  doc.layers.push_back(layer("", "Net", 3, false));
  doc.layers.push_back(layer("fc1", "Linear", 0, true,
                             {{"act.growth", 1.0}, {"act.fp16_headroom", 3000.0}, {"fwd.first_nonfinite", false},
                              {"grad.first_nonfinite", false}, {"grad.params_no_signal", 0}}));
  doc.layers.push_back(layer("norm", "LayerNorm", 1, true,
                             {{"act.growth", 1.2}, {"norm.gain_p99", 1.0}, {"grad.params_no_signal", 0}}));
  doc.layers.push_back(layer("attn", "Attention", 2, true,
                             {{"softmax.onehot_fraction", 0.0}, {"softmax.rows", 64}, {"sat.fraction", 0.01}}));
  doc.layers.push_back(layer("bn", "BatchNorm1d", 4, true,
                             {{"bn.at_initial_values", false}, {"bn.mean_z", 0.05}, {"bn.var_ratio", 1.02},
                              {"bn.var_ratio_off", 1.02}, {"bn.examples_per_pass", 32}, {"bn.values_per_channel", 32},
                              {"bn.mean_noise", 0.03}, {"bn.batch_of_one", false}}));
  doc.model_metrics = {{"grad.input_output_ratio", 1.7},
                       {"grad.first_layer", "fc1"},
                       {"run.synthetic_inputs", false},
                       {"bn.layers", 1},
                       {"bn.layers_at_init", 0},
                       {"drift.rel_output_diff", 0.02},
                       {"drift.rel_output_diff_with_dropout", 0.4},
                       {"batchdep.max_rel_diff", 3e-7},
                       {"batchdep.reorder_rel_diff", 0.0},
                       {"evalrep.rel_diff", 0.0},
                       {"mode.saved_training", false},
                       {"mode.dependent_ops", 2},
                       {"mode.baked_training_true", 0},
                       {"mode.baked_training_false", 0}};
  EXPECT_TRUE(nd::evaluate_rules(nd::load_rules((ndtest::source_dir() / "rules").string()), doc).empty());
}

}  // namespace nd_test_rule_catalog_healthy_test
