// End to end, issue 14 "Pass cache": each distinct pass runs once per check
// and the probes that ask for it share its result. On real models (corpus/):
// no two passes the report lists are the same pass (probes.passes[].key), the
// requests a shared pass served are listed with it (requested_by), and the
// findings, model metrics and per-layer metrics are those of a run in which every request runs its own
// pass (NORMDOCTOR_NO_PASS_CACHE=1).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "torch_version.h"

#include <iostream>

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_pass_cache_test {

namespace {

using nde2e::json;

std::string corpus(const std::string& name) { return nde2e::real_models_dir() + "/" + name; }

nde2e::NdRun check_corpus(const std::string& name, const nde2e::TempDir& tmp, const std::string& report,
                          const std::string& prefix = "") {
  std::vector<std::string> args{"check", corpus(name + ".pt"), "--input", corpus(name + ".input.pt")};
  return nde2e::run_nd(args, tmp.file(report), prefix);
}

/// The pass entry named `name` in probes.passes (null json when absent).
json pass_named(const json& rep, const std::string& name) {
  for (const auto& p : rep.at("probes").at("passes"))
    if (p.value("name", "") == name) return p;
  return json();
}

bool requested(const json& pass, const std::string& who) {
  if (!pass.is_object() || !pass.contains("requested_by")) return false;
  for (const auto& r : pass["requested_by"])
    if (r == who) return true;
  return false;
}

void expect_each_pass_once(const json& rep, const std::string& model) {
  std::map<std::string, std::string> seen;
  for (const auto& p : rep.at("probes").at("passes")) {
    const std::string key = p.value("key", "");
    if (key.empty()) continue;  // a pass no cache may share (edited batch, hooks)
    auto [it, fresh] = seen.insert({key, p.value("name", "")});
    EXPECT_TRUE(fresh) << model << ": passes " << it->second << " and " << p.value("name", "") << " are the same pass ("
                       << key << ") and both ran";
  }
}

// Every finding whole: rule, layer, severity, message, evidence numbers.
std::multiset<std::string> findings_text(const json& rep) {
  std::multiset<std::string> out;
  for (const auto& f : rep.at("findings")) out.insert(f.dump());
  return out;
}

TEST(PassCache, EvalPassServesDriftAndSequenceReference) {
  // GPT-2 (traced, dropout ops, token ids): the eval pass as a user runs it,
  // the dropout-free eval pass of the drift and the sequence probe's
  // reference are one pass; the train pass and the dropout-free train pass
  // differ (dropout is on in the train pass).
  nde2e::TempDir tmp;
  const auto r = check_corpus("hf_gpt2_lm_tiny", tmp, "r.json");
  ASSERT_TRUE(r.has_report) << r.describe();
  const json eval = pass_named(r.report, "eval");
  ASSERT_TRUE(eval.is_object()) << r.report["probes"]["passes"].dump(1);
  EXPECT_TRUE(requested(eval, "normalization:eval")) << eval.dump();
  EXPECT_TRUE(requested(eval, "normalization:eval-nodropout")) << eval.dump();
  EXPECT_TRUE(requested(eval, "sequence:eval-seq-reference")) << eval.dump();
  EXPECT_FALSE(pass_named(r.report, "eval-nodropout").is_object());
  EXPECT_FALSE(pass_named(r.report, "eval-seq-reference").is_object());
  EXPECT_TRUE(pass_named(r.report, "train-nodropout").is_object());
  expect_each_pass_once(r.report, "hf_gpt2_lm_tiny");
}

TEST(PassCache, TrainPassServesDropoutFreeTrainWithoutDropoutOps) {
  // torchvision RegNet: no dropout op, so the train pass is the dropout-free
  // train forward of the drift comparison. (timm's ResNet is not: its head's
  // F.dropout takes p from an attribute, so the graph cannot tell it is 0.)
  nde2e::TempDir tmp;
  const auto r = check_corpus("tv_regnet_y_tiny", tmp, "r.json");
  ASSERT_TRUE(r.has_report) << r.describe();
  const json train = pass_named(r.report, "train");
  ASSERT_TRUE(train.is_object());
  EXPECT_TRUE(requested(train, "normalization:train-nodropout")) << train.dump();
  EXPECT_FALSE(pass_named(r.report, "train-nodropout").is_object());
  expect_each_pass_once(r.report, "tv_regnet_y_tiny");
}

TEST(PassCache, SharedPassesGiveTheFindingsOfSeparatePasses) {
  // Sharing must never change a number: the same check with every request
  // running its own pass gives the same findings, messages included, and the
  // same model metrics.
  std::vector<std::string> names{"hf_gpt2_lm_tiny", "timm_resnet_tiny", "tv_regnet_y_tiny", "tv_mobilenet_v3_small",
                                 "hf_wav2vec2_tiny"};
  for (const std::string& name : names) {
    nde2e::TempDir tmp;
    const auto shared = check_corpus(name, tmp, "shared.json");
    const auto separate = check_corpus(name, tmp, "separate.json", "env NORMDOCTOR_NO_PASS_CACHE=1");
    ASSERT_TRUE(shared.has_report && separate.has_report) << shared.describe() << separate.describe();
    EXPECT_EQ(shared.exit_code, separate.exit_code) << name;
    EXPECT_EQ(findings_text(shared.report), findings_text(separate.report)) << name;
    json a = shared.report["probes"]["model_metrics"], b = separate.report["probes"]["model_metrics"];
    EXPECT_EQ(a, b) << name;
    EXPECT_EQ(shared.report["layers"], separate.report["layers"]) << name << ": per-layer metrics differ";
    EXPECT_LT(shared.report["probes"]["passes"].size(), separate.report["probes"]["passes"].size()) << name;
    expect_each_pass_once(shared.report, name);
  }
}

}  // namespace

}  // namespace nd_test_pass_cache_test
