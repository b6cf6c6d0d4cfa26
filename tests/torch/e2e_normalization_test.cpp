// End to end: the normalization probes (train/eval drift, BatchNorm
// statistics, batch dependence, small batches, mode problems) on fixtures
// with one known fault each, and their healthy twins.
#include <gtest/gtest.h>

#include <set>

#include "e2e_util.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_e2e_normalization_test {

namespace {

using nde2e::json;

struct Case {
  const char* name;
  const char* model;
  const char* input;
  std::vector<std::string> extra;
  // Expected findings: rule id -> layer ("" = model-level, no layer).
  std::vector<std::pair<std::string, std::string>> findings;
};

std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.name; }

class Normalization : public ::testing::TestWithParam<Case> {};

json run(const Case& c) {
  nde2e::TempDir tmp;
  std::vector<std::string> args = {"check", nde2e::model(c.model), "--input", nde2e::model(c.input)};
  args.insert(args.end(), c.extra.begin(), c.extra.end());
  const auto r = nde2e::run_nd(args, tmp.file("report.json"));
  EXPECT_TRUE(r.has_report) << r.describe();
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe();
  return r.report;
}

TEST_P(Normalization, FindingsAreExactlyTheFault) {
  const Case& c = GetParam();
  const json rep = run(c);
  ASSERT_EQ(rep.at("status"), "ok");
  const std::set<std::pair<std::string, std::string>> want(c.findings.begin(), c.findings.end());
  EXPECT_EQ(nde2e::finding_pairs(rep), want) << rep.at("findings").dump(2);
}

INSTANTIATE_TEST_SUITE_P(
    E2E, Normalization,
    ::testing::Values(
        Case{"tiny_cnn_healthy", "tiny_cnn.pt", "tiny_cnn.input.pt", {}, {}},
        // One cause, one finding: the never-estimated statistics carry the drift they cause (no BN004).
        Case{"bn_stale", "bn_stale.pt", "bn_stale.input.pt", {}, {{"BN001", "features.1"}}},
        // Data shifted away from the statistics: one finding (BN002) naming the mean shift,
        // the variance ratio and the drift they cause, not three with the same fix.
        Case{"shifted_data", "tiny_cnn.pt", "tiny_cnn.shifted.input.pt", {}, {{"BN002", "features.1"}}},
        Case{"eval_uses_batch_stats", "eval_uses_batch_stats.pt", "eval_uses_batch_stats.input.pt", {},
             {{"BN005", "features.1"}}},
        // Saved in eval mode and no --train-batch-size: the batch of one is only
        // assumed to be the training batch (BN010, info); given, it is BN006.
        Case{"bn_batch_of_one", "bn_batch_of_one.pt", "bn_batch_of_one.input.pt", {}, {{"BN010", "head.bn"}}},
        Case{"bn_batch_of_one_given", "bn_batch_of_one.pt", "bn_batch_of_one.input.pt", {"--train-batch-size", "1"},
             {{"BN006", "head.bn"}}},
        Case{"bn_batch_of_one_healthy", "bn_batch_of_one_healthy.pt", "bn_batch_of_one_healthy.input.pt", {}, {}},
        // Without --train-batch-size the sample's batch size is assumed: info (BN008).
        Case{"bn_small_batch", "bn_small_batch.pt", "bn_small_batch.input.pt", {}, {{"BN008", "features.7"}}},
        Case{"bn_small_batch_given", "bn_small_batch.pt", "bn_small_batch.input.pt", {"--train-batch-size", "2"},
             {{"BN007", "features.7"}}},
        Case{"bn_small_batch_healthy", "bn_small_batch_healthy.pt", "bn_small_batch_healthy.input.pt", {}, {}},
        Case{"saved_in_train_mode", "tiny_cnn_trainmode.pt", "tiny_cnn.input.pt", {}, {{"MODE001", ""}}},
        // The same file given a learning rate: a file to be trained is in
        // train mode by design (eval29 C06), MODE008's note, not MODE001.
        Case{"saved_in_train_mode_to_train", "tiny_cnn_trainmode.pt", "tiny_cnn.input.pt", {"--lr", "1e-3"},
             {{"MODE008", ""}}},
        Case{"traced_eval_frozen", "tiny_cnn_traced.pt", "tiny_cnn.input.pt", {}, {{"MODE003", ""}}},
        // The same traced file given a learning rate: it is to be trained, so the
        // baked eval mode is a warning (MODE006); the scripted twin follows train().
        Case{"traced_eval_frozen_to_train", "tiny_cnn_traced.pt", "tiny_cnn.input.pt", {"--lr", "1e-3"},
             {{"MODE006", ""}}},
        Case{"scripted_to_train", "tiny_cnn.pt", "tiny_cnn.input.pt", {"--lr", "1e-3"}, {}},
        // The trace baked dropout on: MODE002 says eval() cannot switch it;
        // MODE004 would repeat that with "written into the forward" (eval31),
        // and MODE001's "call eval()" would change nothing (every flag baked).
        Case{"traced_train_baked", "traced_dropout_bn.pt", "traced_dropout_bn.input.pt", {},
             {{"BN005", "features.1"}, {"MODE002", ""}}},
        Case{"functional_dropout", "functional_dropout.pt", "functional_dropout.input.pt", {},
             {{"MODE004", "drop_block"}}},
        Case{"functional_dropout_healthy", "functional_dropout_healthy.pt", "functional_dropout_healthy.input.pt", {}, {}},
        Case{"dropout_only_is_not_drift", "dropout_only.pt", "dropout_only.input.pt", {}, {}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(NormalizationEvidence, StaleStatisticsNameLayersAndDistance) {
  const json rep = run({"bn_stale", "bn_stale.pt", "bn_stale.input.pt", {}, {}});
  const json& mm = rep.at("probes").at("model_metrics");
  EXPECT_EQ(mm.at("bn.layers_at_init"), 3);
  EXPECT_EQ(mm.at("bn.layers_at_init_names"), "features.1, features.4, features.7");
  EXPECT_GT(mm.at("drift.rel_output_diff").get<double>(), 1.0);  // 1.18 measured
  for (const auto& l : rep.at("layers"))
    if (l.at("path") == "features.1") {
      EXPECT_EQ(l.at("metrics").at("bn.at_initial_values"), true);
      EXPECT_EQ(l.at("metrics").at("bn.num_batches_tracked"), 0);
      EXPECT_EQ(l.at("metrics").at("bn.values_per_channel"), 2048);  // 8 examples x 16 x 16
    }
}

TEST(NormalizationEvidence, SmallBatchNoiseAtTheTrainingBatchSize) {
  // The healthy model at its own batch of 8 is fine; at --train-batch-size 2
  // the deepest BatchNorm (4x4 maps) wanders by more than 0.1 std per step.
  const json healthy = run({"b8", "tiny_cnn.pt", "tiny_cnn.input.pt", {}, {}});
  EXPECT_TRUE(healthy.at("findings").empty());
  const json small = run({"b2", "tiny_cnn.pt", "tiny_cnn.input.pt", {"--train-batch-size", "2"}, {}});
  bool fired = false;
  for (const auto& f : small.at("findings"))
    if (f.at("rule_id") == "BN007") {
      fired = true;
      EXPECT_EQ(f.at("evidence").at("bn.examples_per_pass"), 2);
      EXPECT_GT(f.at("evidence").at("bn.mean_noise").get<double>(), 0.1);
    }
  EXPECT_TRUE(fired) << small.at("findings").dump(2);
}

TEST(NormalizationEvidence, BatchDependenceNamesCause) {
  const json rep = run({"ebs", "eval_uses_batch_stats.pt", "eval_uses_batch_stats.input.pt", {}, {}});
  const json& mm = rep.at("probes").at("model_metrics");
  EXPECT_GT(mm.at("batchdep.max_rel_diff").get<double>(), 0.1);  // 0.33 measured
  EXPECT_EQ(mm.at("batchdep.first_layer"), "features.1");
  EXPECT_NE(mm.at("batchdep.cause").get<std::string>().find("track_running_stats=False"), std::string::npos);
}

}  // namespace

}  // namespace nd_test_e2e_normalization_test
