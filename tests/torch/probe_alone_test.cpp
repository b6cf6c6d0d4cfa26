// Issue 14, "Self-contained probes": each probe runs alone on a recorded
// check. A check is prepared and run once with its passes kept (the
// recording: Session::keep_captures); then, for every probe that ran, its
// metrics and its probes.<name> entry are removed from the document and the
// probe runs again alone with Session::replay_only set, so every shareable
// pass it asks for must come from the recording (a miss raises instead of
// running). It must write exactly what it wrote in the full check: the same
// metrics with the same values, the same report entry. Passes that are never
// shared (an edited batch such as one example alone, a precision-emulating
// graph, the zero-init lift) run again; they are deterministic on the CPU.
//
// This shows a probe depends only on the passes and on the metrics other
// probes wrote before it (which the document keeps), not on any state a
// probe left behind.
#include <gtest/gtest.h>

#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "probes/session.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_probe_alone_test {

namespace {

using nlohmann::json;

struct AloneCase {
  std::string name;
  std::string model;  ///< relative to the source dir
  std::string input;
  double lr = 0;      ///< > 0: --lr (the update probe runs)
  int64_t steps = 0;  ///< --steps (the replay runs)
  std::string precision = "fp32";
};

void PrintTo(const AloneCase& c, std::ostream* os) { *os << c.name; }

std::string src(const std::string& rel) { return std::string(ND_SOURCE_DIR) + "/" + rel; }

/// Whether a probe other than `probe` declares `metric` (shared names such as
/// norm.eps stay in the document; the rerun overwrites them).
bool declared_elsewhere(const std::string& probe, const std::string& metric) {
  for (const auto& kv : nd::probe_declared_metrics())
    if (kv.first != probe && nd::probe_declares(kv.first, metric)) return true;
  return false;
}

void erase_own(nd::MetricMap& m, const std::string& probe) {
  for (auto it = m.begin(); it != m.end();)
    it = nd::probe_declares(probe, it->first) && !declared_elsewhere(probe, it->first) ? m.erase(it) : std::next(it);
}

json metrics_json(const nd::MetricsDoc& d) {
  json j;
  j["model"] = d.model_metrics;
  for (const auto& l : d.layers) j["layers"][l.path.empty() ? "<root>" : l.path] = l.metrics;
  for (const auto& i : d.inputs) j["inputs"][i.name] = i.metrics;
  j["probes"] = d.probes;
  return j;
}

class ProbeAlone : public ::testing::TestWithParam<AloneCase> {};

TEST_P(ProbeAlone, EachProbeAloneOnTheRecordingWritesWhatItWroteInTheCheck) {
  const AloneCase& c = GetParam();
  nd::CheckOptions opt;
  opt.model_path = src(c.model);
  opt.input_files = {src(c.input)};
  opt.threads = 1;
  opt.precision = c.precision;
  if (c.lr > 0) opt.lr = c.lr;
  opt.steps = c.steps;
  auto s = nd::prepare_check(opt, {});
  s->keep_captures = true;
  nd::run_probes(*s);
  const nd::MetricsDoc full = s->doc;
  const json full_j = metrics_json(full);
  ASSERT_TRUE(s->undeclared_writes.empty()) << s->undeclared_writes.front();

  int probes_checked = 0;
  for (const nd::ProbeEntry& p : nd::probe_pipeline()) {
    if (!p.applies(*s) || !full.probes.contains(p.name)) continue;
    SCOPED_TRACE(c.name + ": probe " + p.name);
    s->doc = full;
    s->doc.probes.erase(p.name);
    erase_own(s->doc.model_metrics, p.name);
    for (auto& l : s->doc.layers) erase_own(l.metrics, p.name);
    s->replay_only = true;
    s->run_probe(p.name, [&] { p.run(*s); });
    s->replay_only = false;
    const json after_j = metrics_json(s->doc);
    // The whole document, so a missing, extra or changed metric shows by name.
    EXPECT_EQ(after_j["model"].dump(1), full_j["model"].dump(1));
    EXPECT_EQ(after_j["layers"].dump(1), full_j["layers"].dump(1));
    EXPECT_EQ(after_j["inputs"].dump(1), full_j["inputs"].dump(1));
    EXPECT_EQ(after_j["probes"][p.name].dump(1), full_j["probes"][p.name].dump(1));
    // The same assumptions (a rerun may state one again).
    EXPECT_EQ(std::set<std::string>(s->doc.assumptions.begin(), s->doc.assumptions.end()),
              std::set<std::string>(full.assumptions.begin(), full.assumptions.end()));
    // Only passes no cache may share ran again.
    for (size_t i = 0; i < s->doc.passes.size(); ++i) {
      if (static_cast<int64_t>(i) < static_cast<int64_t>(full.passes.size())) continue;
      EXPECT_EQ(s->doc.passes[i].value("key", ""), "") << "probe " << p.name << " ran the shareable pass "
                                                       << s->doc.passes[i].dump() << " again";
    }
    ++probes_checked;
  }
  EXPECT_GE(probes_checked, 7) << "the case should exercise most probes";
  // The recording is a real check: its passes ran and its layers were measured.
  EXPECT_GE(full.passes.size(), 3u);
  int64_t measured = 0;
  for (const auto& l : full.layers) measured += l.metrics.count("act.rms");
  EXPECT_GT(measured, 3);
  std::cout << c.name << ": " << probes_checked << " probes rerun alone on a recording of " << full.passes.size()
            << " passes; " << s->passes_run << " passes run in all\n";
}

INSTANTIATE_TEST_SUITE_P(
    Models, ProbeAlone,
    ::testing::Values(
        // BatchNorm with stale statistics: drift, BatchNorm statistics, batch dependence.
        AloneCase{"bn_stale", "fixtures/models/bn_stale.pt", "fixtures/models/bn_stale.input.pt"},
        // GPT-2 (Hugging Face): attention, sequence and padding passes, features.
        AloneCase{"hf_gpt2_lm_tiny", "corpus/hf_gpt2_lm_tiny.pt", "corpus/hf_gpt2_lm_tiny.input.pt"},
        // timm ResNet: zero-initialized residual gains (the zero-init lift), BatchNorm.
        AloneCase{"timm_resnet_tiny", "corpus/timm_resnet_tiny.pt", "corpus/timm_resnet_tiny.input.pt"},
        // Update ratio and replay (--lr, --steps), fp16 emulation (precision passes).
        AloneCase{"example_lr_steps_fp16", "fixtures/example.pt", "fixtures/example.input.pt", 1e-3, 2, "fp16"}),
    [](const ::testing::TestParamInfo<AloneCase>& i) { return i.param.name; });

}  // namespace

}  // namespace nd_test_probe_alone_test
