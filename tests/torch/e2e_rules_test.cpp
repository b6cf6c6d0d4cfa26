// End to end: every issue-2 rule fires on its faulty fixture, at the right
// layer, with evidence that matches what Python measured
// (fixtures/models/manifest.json), and each healthy twin gives no finding at
// all. The normdoctor binary runs as a user runs it:
//
//   normdoctor check fixtures/models/NAME.pt --input fixtures/models/NAME.input.pt --format json -o REPORT
//
// In the style of include-what-you-use's tests: one table of cases (fixture,
// input, expected exit code, expected findings, the extra rule ids a faulty
// fixture may legitimately trip too) and one generic runner.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "e2e_util.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_e2e_rules_test {

namespace {

using namespace nde2e;

/// One number or string of a finding's evidence (or of a layer's metrics).
/// The expected value is either a manifest value (a JSON pointer into
/// manifest.json: what Python measured) or a literal. A manifest array is
/// compared by its length (a list of parameter names vs a count).
struct Ev {
  std::string metric;
  std::string manifest_ptr;  ///< "" = use `literal`
  json literal;
  double rel = 1e-3;   ///< relative tolerance for numbers
  double factor = 0;   ///< > 0: only the order of magnitude (within this factor) is checked
};

Ev M(std::string metric, std::string ptr, double rel = 1e-3) { return {std::move(metric), std::move(ptr), nullptr, rel, 0}; }
Ev L(std::string metric, json value, double rel = 1e-9) { return {std::move(metric), "", std::move(value), rel, 0}; }
/// Order of magnitude only: the measured value is within `factor` of the manifest's.
Ev MF(std::string metric, std::string ptr, double factor) { return {std::move(metric), std::move(ptr), nullptr, 0, factor}; }

struct LayerCheck {
  std::string layer;
  Ev ev;
};

struct ExpectedFinding {
  std::string rule_id;
  std::string failure_mode;
  std::string severity;
  json layer;                 ///< module path, or null
  json input;                 ///< input argument name (input-scope rules), or null
  std::string manifest_fault; ///< pointer to the manifest fault this finding is (its slug must be failure_mode)
  std::vector<Ev> evidence;
};

struct Case {
  std::string name;  ///< test name
  std::string fixture;
  std::string input;  ///< file name under fixtures/models
  int exit_code;
  std::vector<ExpectedFinding> findings;
  /// Rule ids the fixture may also trip; each one's failure mode must be in
  /// the manifest's python_audit.flags for the fixture (so it is explained).
  std::vector<std::string> allowed_extra;
  std::vector<LayerCheck> layer_checks;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string healthy_twin_of(const std::string& faulty) { return faulty + "_healthy"; }

Case healthy(const std::string& fixture) { return {fixture, fixture, fixture + ".input.pt", 0, {}, {}, {}}; }

std::vector<Case> cases() {
  std::vector<Case> v;

  // growth20: 20 orthogonal Linear(32,32), x1.93 per layer; ACT002 names the
  // first layer over 1000x the reference (the largest RMS among layers.0-2).
  {
    Case c{"growth20", "growth20", "growth20.input.pt", 0, {}, {"ACT003", "GRAD002"}, {}};
    c.findings.push_back({"ACT002", "activation-growth", "warning", "layers.13", nullptr, "/growth20/faults/0",
                          {M("act.rms", "/growth20/faults/0/numbers/rms"),
                           M("act.growth", "/growth20/faults/0/numbers/growth"),
                           M("act.growth_reference_rms", "/growth20/faults/0/numbers/reference_rms"),
                           M("act.growth_max", "/growth20/faults/0/numbers/growth_last"),
                           M("act.growth_max_layer", "/growth20/faults/0/numbers/last_layer"),
                           M("act.absmax", "/growth20/numbers/layer_rms_absmax/layers.13/absmax")}});
    // Every layer's RMS, through the whole stack.
    for (int i = 0; i < 20; ++i) {
      const std::string l = "layers." + std::to_string(i);
      c.layer_checks.push_back({l, M("act.rms", "/growth20/numbers/layer_rms_absmax/" + l + "/rms")});
      c.layer_checks.push_back({l, M("act.absmax", "/growth20/numbers/layer_rms_absmax/" + l + "/absmax")});
    }
    v.push_back(c);
  }

  // nan_forward: blocks.3.act = log(x) on inputs with negatives.
  {
    Case c{"nan_forward", "nan_forward", "nan_forward.input.pt", 1, {}, {}, {}};
    c.findings.push_back({"ACT001", "nonfinite-forward", "error", "blocks.3.act", nullptr, "/nan_forward/faults/0",
                          {L("fwd.first_nonfinite", true),
                           M("act.nan_count", "/nan_forward/faults/0/numbers/nan_count"),
                           M("act.inf_count", "/nan_forward/faults/0/numbers/inf_count"),
                           M("fwd.input_absmax", "/nan_forward/faults/0/numbers/input_absmax"),
                           M("fwd.input_nonfinite_count", "/nan_forward/faults/0/numbers/input_nonfinite_count")}});
    c.layer_checks = {{"blocks.3.act", M("fwd.input_min", "/nan_forward/faults/0/numbers/input_min")},
                      {"blocks.3.act", M("fwd.input_max", "/nan_forward/faults/0/numbers/input_max")},
                      {"blocks.3.act", M("act.numel", "/nan_forward/faults/0/numbers/output_numel")}};
    // No GRAD001 although Python's audit flags nonfinite-gradient: the rule
    // is only about gradients that go non-finite with a finite forward pass.
    v.push_back(c);
  }

  // nan_grad: blocks.2.act = sqrt(x * (x > 0)): finite forward, NaN backward.
  {
    Case c{"nan_grad", "nan_grad", "nan_grad.input.pt", 1, {}, {}, {}};
    c.findings.push_back(
        {"GRAD001", "nonfinite-gradient", "error", "blocks.2.act", nullptr, "/nan_grad/faults/0",
         {L("grad.first_nonfinite", true),
          M("grad.nonfinite_from", "/nan_grad/faults/0/numbers/first_module_with_nonfinite_output_grad"),
          M("grad.nonfinite_count", "/nan_grad/faults/0/numbers/grad_in_nonfinite")}});
    c.layer_checks = {
        {"blocks.2.act", M("grad.out_nonfinite_count", "/nan_grad/faults/0/numbers/grad_out_nonfinite")},
        {"blocks.2.fc",
         M("grad.out_nonfinite_count", "/nan_grad/numbers/leaf_grad_finiteness_backward_order/blocks.2.fc/grad_out_nonfinite")},
        {"blocks.3.fc",
         M("grad.out_nonfinite_count", "/nan_grad/numbers/leaf_grad_finiteness_backward_order/blocks.3.fc/grad_out_nonfinite")},
        // manifest params_nonfinite_grad_counts: blocks.0.fc.weight 256 + blocks.0.fc.bias 16
        {"blocks.0.fc", L("grad.param_nonfinite_count", 256 + 16)}};
    v.push_back(c);
  }

  // fp16_overflow: ffn.fc2 reaches 7.0e4 > 65504 in fp32.
  {
    Case c{"fp16_overflow", "fp16_overflow", "fp16_overflow.input.pt", 0, {}, {"GRAD002"}, {}};
    c.findings.push_back({"ACT003", "fp16-overflow-risk", "warning", "ffn.fc2", nullptr, "/fp16_overflow/faults/0",
                          {M("act.absmax", "/fp16_overflow/faults/0/numbers/absmax"),
                           M("act.beyond_fp16_count", "/fp16_overflow/faults/0/numbers/beyond_fp16_count"),
                           M("act.fp16_headroom", "/fp16_overflow/faults/0/numbers/fp16_headroom")}});
    // The same outputs as logits (the check's loss is cross-entropy): log Z of
    // 2.8e4 per row, ACT008 at the head; not a fault of the manifest, a
    // second true finding of the same fault.
    c.findings.push_back({"ACT008", "output-logit-divergence", "warning", "ffn.fc2", nullptr, "",
                          {M("logits.absmax", "/fp16_overflow/faults/0/numbers/absmax"), L("logits.classes", 32)}});
    c.layer_checks = {{"ffn.fc2", M("act.rms", "/fp16_overflow/numbers/fc2_rms")}};
    v.push_back(c);
  }

  // norm_gain: RMSNorm gain 400, then proj overflows fp16.
  {
    Case c{"norm_gain", "norm_gain", "norm_gain.input.pt", 0, {}, {}, {}};
    c.findings.push_back({"NORM001", "norm-gain-growth", "warning", "norm", nullptr, "/norm_gain/faults/0",
                          {M("norm.gain_absmax", "/norm_gain/faults/0/numbers/gain_absmax"),
                           M("norm.gain_p99", "/norm_gain/faults/0/numbers/gain_p99"),
                           M("norm.gain_mean", "/norm_gain/faults/0/numbers/gain_mean")}});
    c.findings.push_back({"ACT003", "fp16-overflow-risk", "warning", "proj", nullptr, "/norm_gain/faults/1",
                          {M("act.absmax", "/norm_gain/faults/1/numbers/absmax"),
                           M("act.beyond_fp16_count", "/norm_gain/faults/1/numbers/beyond_fp16_count")}});
    c.layer_checks = {{"norm", M("act.rms", "/norm_gain/numbers/norm_out_rms")},
                      {"norm", M("act.absmax", "/norm_gain/numbers/norm_out_absmax")},
                      {"proj", M("act.rms", "/norm_gain/numbers/proj_rms")}};
    v.push_back(c);
  }

  // saturated: Linear fc with large weights -> Tanh act.
  {
    Case c{"saturated", "saturated", "saturated.input.pt", 0, {}, {}, {}};
    c.findings.push_back({"ACT004", "saturated-activation", "warning", "act", nullptr, "/saturated/faults/0",
                          {M("sat.fraction", "/saturated/faults/0/numbers/fraction"),
                           M("sat.op", "/saturated/faults/0/numbers/op"),
                           M("sat.numel", "/saturated/measured/saturation/act/numel")}});
    c.layer_checks = {{"fc", M("act.rms", "/saturated/numbers/tanh_input_rms")},
                      {"fc", M("act.absmax", "/saturated/numbers/tanh_input_absmax")}};
    v.push_back(c);
  }

  // softmax_collapse: q/k weights x24, near one-hot attention rows.
  {
    Case c{"softmax_collapse", "softmax_collapse", "softmax_collapse.input.pt", 0, {}, {}, {}};
    c.findings.push_back({"ACT005", "softmax-collapse", "warning", "attn", nullptr, "/softmax_collapse/faults/0",
                          {M("softmax.onehot_fraction", "/softmax_collapse/numbers/onehot_fraction"),
                           M("softmax.rows", "/softmax_collapse/numbers/rows"),
                           M("softmax.max_prob_mean", "/softmax_collapse/numbers/max_prob_mean"),
                           M("softmax.entropy_mean", "/softmax_collapse/numbers/entropy_mean", 1e-2),
                           M("softmax.entropy_max", "/softmax_collapse/numbers/entropy_max"),
                           M("softmax.logit_absmax", "/softmax_collapse/numbers/logit_absmax")}});
    c.findings.push_back({"ATTN001", "attention-logit-growth", "warning", "attn", nullptr, "/softmax_collapse/faults/1",
                          {M("attn.logit_absmax", "/softmax_collapse/faults/1/numbers/logit_absmax"),
                           M("attn.onehot_fraction", "/softmax_collapse/numbers/onehot_fraction")}});
    v.push_back(c);
  }

  // exploding: 15 orthogonal Linear(32,32), gain 1.8: the output-gradient
  // norm grows 1.8x per layer toward the input whatever the loss is.
  {
    Case c{"exploding", "exploding", "exploding.input.pt", 0, {}, {"ACT002"}, {}};
    c.findings.push_back(
        {"GRAD002", "exploding-gradients", "warning", "layers.0", nullptr, "/exploding/faults/0",
         {M("grad.input_output_ratio", "/exploding/faults/0/numbers/first_last_output_grad_ratio"),
          M("grad.last_layer", "/exploding/faults/0/numbers/last_layer")}});
    for (int i = 0; i < 15; ++i) {
      const std::string l = "layers." + std::to_string(i);
      c.layer_checks.push_back({l, M("act.rms", "/exploding/numbers/activation_rms/" + l)});
    }
    v.push_back(c);
  }

  // vanishing: 12 x (Linear + Sigmoid). normdoctor's loss (a random
  // projection) is not Python's mean(output**2), so only the order of
  // magnitude of the ratio can match.
  {
    Case c{"vanishing", "vanishing", "vanishing.input.pt", 0, {}, {}, {}};
    c.findings.push_back(
        {"GRAD003", "vanishing-gradients", "warning", "layers.0", nullptr, "/vanishing/faults/0",
         {MF("grad.input_output_ratio", "/vanishing/faults/0/numbers/first_last_output_grad_ratio", 10),
          M("grad.last_layer", "/vanishing/faults/0/numbers/last_layer")}});
    v.push_back(c);
  }

  // no_grad_path: aux(x).detach() added to the output.
  {
    Case c{"no_grad_path", "no_grad_path", "no_grad_path.input.pt", 0, {}, {}, {}};
    c.findings.push_back({"GRAD004", "no-gradient-path", "warning", "aux", nullptr, "/no_grad_path/faults/0",
                          {M("grad.params", "/no_grad_path/faults/0/numbers/params"),
                           M("grad.params_without_grad", "/no_grad_path/faults/0/numbers/params_without_grad"),
                           L("grad.params_zero_grad", 0),
                           M("grad.params_no_signal", "/no_grad_path/faults/0/numbers/params_without_grad")}});
    c.layer_checks = {{"body", L("grad.params_no_signal", 0)}, {"head", L("grad.params_no_signal", 0)}};
    v.push_back(c);
  }

  // tiny_cnn on raw 0..255 pixels: IN002 on input x.
  {
    // Raw pixels also move every BatchNorm input far from its running
    // statistics (and so train vs eval output): the failure modes the
    // manifest lists for tiny_cnn's shifted batch, here ~100x stronger.
    Case c{"tiny_cnn_pixels", "tiny_cnn", "tiny_cnn.pixels.input.pt", 0, {}, {"BN002", "BN003", "BN004"}, {}};
    c.findings.push_back({"IN002", "input-scale", "warning", nullptr, "x", "/tiny_cnn/faults_by_input/0",
                          {L("input.is_float", true),
                           M("input.scale", "/tiny_cnn/faults_by_input/0/numbers/scale"),
                           M("input.mean", "/tiny_cnn/faults_by_input/0/numbers/mean"),
                           M("input.std", "/tiny_cnn/faults_by_input/0/numbers/std"),
                           M("input.absmax", "/tiny_cnn/faults_by_input/0/numbers/absmax")}});
    v.push_back(c);
  }

  // tiny_cnn with NaN and Inf in the batch: IN001, and no ACT001 (the
  // forward's NaN came in with the data).
  {
    Case c{"tiny_cnn_nan", "tiny_cnn", "tiny_cnn.nan.input.pt", 1, {}, {}, {}};
    c.findings.push_back({"IN001", "nonfinite-input", "error", nullptr, "x", "/tiny_cnn/faults_by_input/1",
                          {M("input.nan_count", "/tiny_cnn/faults_by_input/1/numbers/nan_count"),
                           M("input.inf_count", "/tiny_cnn/faults_by_input/1/numbers/inf_count"),
                           M("input.nonfinite_count", "/tiny_cnn/faults_by_input/1/numbers/positions")}});
    v.push_back(c);
  }

  // Healthy twins: no finding of any kind, exit 0.
  for (const char* f : {"growth20", "nan_forward", "nan_grad", "fp16_overflow", "norm_gain", "saturated",
                        "softmax_collapse", "exploding", "vanishing", "no_grad_path"})
    v.push_back(healthy(healthy_twin_of(f)));
  v.push_back(healthy("tiny_cnn"));
  return v;
}

/// Compares one evidence/metric value with its expectation.
void check_value(const std::string& where, const json& actual, const Ev& e) {
  SCOPED_TRACE(where + " " + e.metric);
  json expected = e.literal;
  if (!e.manifest_ptr.empty()) {
    ASSERT_TRUE(manifest().contains(json::json_pointer(e.manifest_ptr))) << "manifest has no " << e.manifest_ptr;
    expected = mf(e.manifest_ptr);
    if (expected.is_array()) expected = expected.size();
  }
  if (expected.is_string()) {
    EXPECT_EQ(actual, expected) << e.metric << " (manifest " << e.manifest_ptr << ")";
  } else if (expected.is_boolean()) {
    EXPECT_EQ(actual, expected) << e.metric;
  } else if (expected.is_number()) {
    ASSERT_TRUE(actual.is_number()) << e.metric << " is " << actual.dump() << ", expected a number near " << expected;
    const double a = actual.get<double>(), x = expected.get<double>();
    if (e.factor > 0) {
      EXPECT_TRUE(a > 0 && x > 0 && std::fabs(std::log(a / x)) <= std::log(e.factor))
          << e.metric << " = " << a << ", manifest " << x << ": not within a factor " << e.factor;
    } else {
      EXPECT_TRUE(near_rel(e.metric.c_str(), a, x, e.rel)) << "(manifest " << e.manifest_ptr << ")";
    }
  } else {
    ADD_FAILURE() << "bad expectation for " << e.metric;
  }
}

class RuleCase : public ::testing::TestWithParam<Case> {};

TEST_P(RuleCase, FindingsMatchManifest) {
  const Case& c = GetParam();
  TempDir tmp;
  const std::string report = tmp.file("report.json");
  const NdRun r = check(model(c.fixture + ".pt"), {model(c.input)}, {}, report);
  ASSERT_TRUE(r.has_report) << r.describe();
  const json& j = r.report;
  ASSERT_EQ(j.value("status", ""), "ok") << j.value("error", json()).dump() << "\n" << r.describe();
  // The default gate is --fail-on warning: any warning or error fails.
  bool gating = false;
  for (const auto& f : j.at("findings")) gating = gating || f.value("severity", "") != "info";
  EXPECT_EQ(r.exit_code, std::max(c.exit_code, gating ? 1 : 0)) << r.describe();
  if (c.findings.empty() && c.allowed_extra.empty()) {
    EXPECT_EQ(r.exit_code, 0) << r.describe();
  }
  EXPECT_EQ(j.value("exit_code", -1), r.exit_code);
  EXPECT_EQ(j.at("model").value("path", ""), model(c.fixture + ".pt"));
  // Every probe wrote only the metrics it declares (src/probes/registry.cpp).
  EXPECT_FALSE(j.at("probes").contains("undeclared_metrics")) << j["probes"]["undeclared_metrics"].dump(1);
  expect_modules_match_manifest(j, c.fixture);

  const json& findings = j.at("findings");
  // summary agrees with the findings list
  int n_error = 0, n_warning = 0, n_info = 0;
  for (const auto& f : findings) {
    const std::string s = f.value("severity", "");
    n_error += s == "error";
    n_warning += s == "warning";
    n_info += s == "info";
  }
  EXPECT_EQ(j.at("summary").value("error", -1), n_error);
  EXPECT_EQ(j.at("summary").value("warning", -1), n_warning);
  EXPECT_EQ(j.at("summary").value("info", -1), n_info);
  EXPECT_EQ(j.at("summary").value("total", -1), static_cast<int>(findings.size()));

  if (c.findings.empty()) {
    EXPECT_TRUE(findings.empty()) << c.fixture << " is healthy (manifest: healthy="
                                  << mf("/" + c.fixture + "/healthy") << ") but normdoctor found:\n"
                                  << findings.dump(2);
    // The manifest agrees this input is healthy.
    if (c.input == c.fixture + ".input.pt") {
      EXPECT_TRUE(mf("/" + c.fixture + "/python_audit/flags").empty());
    }
  }

  std::vector<bool> used(findings.size(), false);
  for (const auto& e : c.findings) {
    SCOPED_TRACE(e.rule_id + " at " + e.layer.dump());
    // The manifest says this fault is there, with this slug and layer.
    // (An empty manifest_fault: a true finding the manifest's faults do not
    // list, such as a second failure mode of the same fault; its layer and
    // evidence are checked below all the same.)
    if (!e.manifest_fault.empty()) {
      const json& fault = mf(e.manifest_fault);
      EXPECT_EQ(fault.value("slug", ""), e.failure_mode) << e.manifest_fault;
      if (!fault.at("layer").is_null()) {
        EXPECT_EQ(fault.at("layer"), e.layer) << e.manifest_fault;
      }
      if (fault.contains("input")) {
        EXPECT_EQ(fault.at("input"), c.input) << e.manifest_fault;
      }
    }

    size_t k = 0;
    for (; k < findings.size(); ++k)
      if (!used[k] && findings[k].value("rule_id", "") == e.rule_id && findings[k].at("layer") == e.layer &&
          (e.input.is_null() || findings[k].value("input", "") == e.input))
        break;
    if (k == findings.size()) {
      ADD_FAILURE() << "no " << e.rule_id << " finding at layer " << e.layer.dump() << "; findings:\n"
                    << findings.dump(2);
      continue;
    }
    used[k] = true;
    const json& f = findings[k];
    EXPECT_EQ(f.value("failure_mode", ""), e.failure_mode);
    EXPECT_EQ(f.value("severity", ""), e.severity);
    const std::string msg = f.value("message", "");
    if (e.layer.is_string()) {
      EXPECT_NE(msg.find(e.layer.get<std::string>()), std::string::npos) << msg;
    }
    if (e.input.is_string()) {
      EXPECT_NE(msg.find(e.input.get<std::string>()), std::string::npos) << msg;
    }
    EXPECT_EQ(msg.find("n/a"), std::string::npos) << "unfilled placeholder: " << msg;
    EXPECT_FALSE(f.at("fix").empty());
    EXPECT_EQ(f.value("synthetic_inputs", true), false);
    const json& ev = f.at("evidence");
    if (e.rule_id == "GRAD002" || e.rule_id == "GRAD003") {
      // The ratio is that of the output-gradient norms of the two named
      // layers (the fixtures' design: manifest first_last_output_grad_ratio).
      const json* first = find_layer(j, ev.value("grad.first_layer", ""));
      const json* last = find_layer(j, ev.value("grad.last_layer", ""));
      ASSERT_TRUE(first && last) << ev.dump();
      const double fo = as_number(first->at("metrics").at("grad.out_norm"));
      const double lo = as_number(last->at("metrics").at("grad.out_norm"));
      EXPECT_TRUE(near_rel("grad.first_norm", as_number(ev.at("grad.first_norm")), fo, 1e-9));
      EXPECT_TRUE(near_rel("grad.last_norm", as_number(ev.at("grad.last_norm")), lo, 1e-9));
      EXPECT_TRUE(near_rel("grad.input_output_ratio", as_number(ev.at("grad.input_output_ratio")), fo / lo, 1e-9));
    }
    for (const auto& x : e.evidence) {
      if (!ev.contains(x.metric)) {
        ADD_FAILURE() << "evidence lacks " << x.metric << ": " << ev.dump();
        continue;
      }
      check_value(e.rule_id, ev.at(x.metric), x);
    }
  }

  // Every other finding is one the case allows, and explained by the manifest:
  // Python's own audit flags it, or the manifest lists it as a fault of the
  // fixture on one of its batches.
  json flags = mf("/" + c.fixture + "/python_audit/flags");
  if (mf("/" + c.fixture).contains("faults_by_input") && mf("/" + c.fixture + "/faults_by_input").is_array())
    for (const auto& f : mf("/" + c.fixture + "/faults_by_input")) flags.push_back(f.at("slug"));
  for (size_t k = 0; k < findings.size(); ++k) {
    if (used[k]) continue;
    const json& f = findings[k];
    const std::string id = f.value("rule_id", "");
    const bool allowed = std::find(c.allowed_extra.begin(), c.allowed_extra.end(), id) != c.allowed_extra.end();
    EXPECT_TRUE(allowed) << "unexpected finding on " << c.fixture << ":\n" << f.dump(2);
    if (allowed) {
      EXPECT_NE(std::find(flags.begin(), flags.end(), f.at("failure_mode")), flags.end())
          << id << " (" << f.at("failure_mode") << ") is allowed but the manifest does not explain it: "
          << flags.dump();
    }
  }

  for (const auto& lc : c.layer_checks) {
    const json* l = find_layer(j, lc.layer);
    ASSERT_NE(l, nullptr) << "no layer " << lc.layer;
    const json& m = l->at("metrics");
    if (!m.contains(lc.ev.metric)) {
      ADD_FAILURE() << lc.layer << " has no metric " << lc.ev.metric;
      continue;
    }
    check_value("layer " + lc.layer, m.at(lc.ev.metric), lc.ev);
  }
}

INSTANTIATE_TEST_SUITE_P(E2E, RuleCase, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

}  // namespace

}  // namespace nd_test_e2e_rules_test
