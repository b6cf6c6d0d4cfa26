// Evaluation semantics of rules on hand-built rules and documents:
// conditions, lookup, kinds, select=first, synthetic inputs, ordering,
// message rendering.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "rules/rules.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_evaluate_test {

using ndtest::input;
using ndtest::layer;
using nlohmann::json;

namespace {

nd::Rule rule(const std::string& id, const std::string& scope, std::vector<nd::Condition> when,
              nd::Severity sev = nd::Severity::kWarning) {
  nd::Rule r;
  r.id = id;
  r.failure_mode = "activation-growth";
  r.severity = sev;
  r.scope = scope;
  r.when = std::move(when);
  r.message = scope == "layer" ? "{layer} has {m.x}" : scope == "input" ? "{input} has {m.x}" : "model has {m.x}";
  return r;
}

nd::Condition cond(const std::string& metric, const std::string& op, json value) { return {metric, op, std::move(value)}; }

std::vector<std::string> layers_of(const std::vector<nd::Finding>& f) {
  std::vector<std::string> out;
  for (const auto& x : f) out.push_back(x.layer.value_or("-"));
  return out;
}

}  // namespace

TEST(Evaluate, OperatorsOnNumbers) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("a", "L", 0, true, {{"m.x", 5}}));
  const std::vector<std::pair<std::string, bool>> cases = {{"<", false}, {"<=", true}, {">", false},
                                                           {">=", true}, {"==", true}, {"!=", false}};
  for (const auto& [op, fires] : cases)
    EXPECT_EQ(nd::evaluate_rules({rule("T001", "layer", {cond("m.x", op, 5.0)})}, doc).size(), fires ? 1u : 0u) << op;
}

TEST(Evaluate, MissingNullNanAndMismatchedTypesAreFalse) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("missing", "L", 0, true));
  doc.layers.push_back(layer("null", "L", 1, true, {{"m.x", nullptr}}));
  doc.layers.push_back(layer("nan", "L", 2, true, {{"m.x", std::nan("")}}));
  doc.layers.push_back(layer("bool", "L", 3, true, {{"m.x", true}}));
  doc.layers.push_back(layer("text", "L", 4, true, {{"m.x", "big"}}));
  for (const char* op : {">", "<", "==", "!="})
    EXPECT_TRUE(nd::evaluate_rules({rule("T001", "layer", {cond("m.x", op, 1)})}, doc).empty()) << op;
  // A boolean value only ever compares with the boolean metric.
  EXPECT_EQ(layers_of(nd::evaluate_rules({rule("T001", "layer", {cond("m.x", "!=", false)})}, doc)),
            std::vector<std::string>{"bool"});
}

TEST(Evaluate, BoolsStringsAndNonFiniteNumbers) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("flag", "L", 0, true, {{"m.x", true}, {"m.s", "fp16"}}));
  doc.layers.push_back(layer("inf", "L", 1, true, {{"m.x", std::numeric_limits<double>::infinity()}}));
  doc.layers.push_back(layer("inf_text", "L", 2, true, {{"m.x", "inf"}}));
  EXPECT_EQ(layers_of(nd::evaluate_rules({rule("T001", "layer", {cond("m.x", "==", true)})}, doc)),
            std::vector<std::string>{"flag"});
  EXPECT_EQ(layers_of(nd::evaluate_rules({rule("T001", "layer", {cond("m.s", "!=", "fp32")})}, doc)),
            std::vector<std::string>{"flag"});
  // inf compares as a number, also when written as the report's string "inf".
  EXPECT_EQ(layers_of(nd::evaluate_rules({rule("T001", "layer", {cond("m.x", ">", 1e300)})}, doc)),
            (std::vector<std::string>{"inf", "inf_text"}));
}

TEST(Evaluate, AllConditionsMustHold) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("both", "L", 0, true, {{"m.x", 5}, {"m.y", 1}}));
  doc.layers.push_back(layer("one", "L", 1, true, {{"m.x", 5}, {"m.y", 0}}));
  const auto f = nd::evaluate_rules({rule("T001", "layer", {cond("m.x", ">", 1), cond("m.y", "==", 1)})}, doc);
  EXPECT_EQ(layers_of(f), std::vector<std::string>{"both"});
}

// A finding lists the fixes whose conditions hold on its own metrics (the
// layer's, else the model's), in the rule's order.
TEST(Evaluate, ConditionalFixesFollowTheFindingsMetrics) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("attn", "L", 0, true, {{"m.x", 5}, {"softmax.attention_sites", 2}}));
  doc.layers.push_back(layer("router", "L", 1, true, {{"m.x", 5}, {"softmax.attention_sites", 0}}));
  doc.layers.push_back(layer("unknown", "L", 2, true, {{"m.x", 5}}));
  nd::Rule r = rule("T001", "layer", {cond("m.x", ">", 1)});
  r.fix = {"attention fix", "router fix", "any"};
  r.fix_when = {{cond("softmax.attention_sites", ">", 0)}, {cond("softmax.attention_sites", "==", 0)}, {}};
  const auto f = nd::evaluate_rules({r}, doc);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].fix, (std::vector<std::string>{"attention fix", "any"}));
  EXPECT_EQ(f[1].fix, (std::vector<std::string>{"router fix", "any"}));
  EXPECT_EQ(f[2].fix, (std::vector<std::string>{"any"}));  // a missing metric holds no condition
}

TEST(Evaluate, LayerRuleFallsBackToModelMetrics) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("a", "L", 0, true, {{"m.x", 5}}));
  doc.layers.push_back(layer("b", "L", 1, true, {{"m.x", 5}, {"run.precision", "fp32"}}));  // local wins
  doc.model_metrics["run.precision"] = "fp16";
  const auto f = nd::evaluate_rules({rule("T001", "layer", {cond("run.precision", "==", "fp16")})}, doc);
  EXPECT_EQ(layers_of(f), std::vector<std::string>{"a"});
  EXPECT_EQ(f[0].evidence, (json{{"run.precision", "fp16"}}));
}

TEST(Evaluate, KindsAreGlobs) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("bn", "BatchNorm2d", 0, true, {{"m.x", 1}}));
  doc.layers.push_back(layer("ln", "LayerNorm", 1, true, {{"m.x", 1}}));
  doc.layers.push_back(layer("rms", "LlamaRMSNorm", 2, true, {{"m.x", 1}}));
  doc.layers.push_back(layer("fc", "Linear", 3, true, {{"m.x", 1}}));
  nd::Rule r = rule("T001", "layer", {cond("m.x", "==", 1)});
  r.kinds = {"BatchNorm*", "*RMSNorm"};
  EXPECT_EQ(layers_of(nd::evaluate_rules({r}, doc)), (std::vector<std::string>{"bn", "rms"}));
}

TEST(Evaluate, SelectFirstTakesSmallestExecOrderAndCountsMatches) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("never_ran", "L", -1, true, {{"m.x", 9}}));
  doc.layers.push_back(layer("late", "L", 7, true, {{"m.x", 9}}));
  doc.layers.push_back(layer("early", "L", 2, true, {{"m.x", 9}}));
  doc.layers.push_back(layer("healthy", "L", 0, true, {{"m.x", 0}}));
  nd::Rule r = rule("T001", "layer", {cond("m.x", ">", 1)});
  r.select = "first";
  const auto f = nd::evaluate_rules({r}, doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].layer, "early");
  EXPECT_EQ(f[0].evidence, (json{{"m.x", 9}, {"matched_layers", 3}}));
}

TEST(Evaluate, SelectFirstUsesANeverRunLayerOnlyWhenNothingElseMatches) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("ran", "L", 0, true, {{"m.x", 0}}));
  doc.layers.push_back(layer("never_a", "L", -1, true, {{"m.x", 9}}));
  doc.layers.push_back(layer("never_b", "L", -1, true, {{"m.x", 9}}));
  nd::Rule r = rule("T001", "layer", {cond("m.x", ">", 1)});
  r.select = "first";
  const auto f = nd::evaluate_rules({r}, doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].layer, "never_a");  // document order among layers that never ran
  EXPECT_EQ(f[0].evidence["matched_layers"], 2);
}

// rank_by: the matching layer with the largest value names the finding (the
// noisiest BatchNorm, eval25's resnest at batch 2), execution order among
// equals (within 1e-6 relative); a layer without a number for it comes last.
TEST(Evaluate, RankByPicksTheLargestValue) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("stem", "L", 0, true, {{"m.x", 0.107}}));
  doc.layers.push_back(layer("split_a", "L", 5, true, {{"m.x", 0.69}}));
  doc.layers.push_back(layer("split_b", "L", 3, true, {{"m.x", 0.69}}));
  doc.layers.push_back(layer("split_c", "L", 4, true, {{"m.x", 0.69 * (1 + 5e-7)}}));  // last bits of a reduction
  doc.layers.push_back(layer("unknown", "L", 1, true, {{"m.x", "nan"}}));
  nd::Rule r = rule("T001", "layer", {cond("m.x", ">", 0.1)});
  r.select = "group";
  r.rank_by = "m.x";
  auto f = nd::evaluate_rules({r}, doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].layer, "split_b");
  EXPECT_EQ(f[0].evidence["matched_layers"], 4);
  r.rank_by.clear();
  f = nd::evaluate_rules({r}, doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].layer, "stem");
}

TEST(Evaluate, InputScopeIteratesInputs) {
  nd::MetricsDoc doc;
  doc.inputs.push_back(input("input_ids", 0, {{"m.x", 1}}));
  doc.inputs.push_back(input("pixel_values", 1, {{"m.x", 300}}));
  const auto f = nd::evaluate_rules({rule("T001", "input", {cond("m.x", ">", 10)})}, doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].input, "pixel_values");
  EXPECT_EQ(f[0].layer, std::nullopt);
  EXPECT_EQ(f[0].message, "pixel_values has 300");
}

TEST(Evaluate, ModelScopeOnceWithOptionalLayerFrom) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("a", "L", 0, true, {{"m.x", 100}}));  // layer metrics are not model metrics
  doc.model_metrics = {{"m.x", 5}, {"m.where", "a"}};
  nd::Rule r = rule("T001", "model", {cond("m.x", "==", 5)});
  auto f = nd::evaluate_rules({r}, doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].layer, std::nullopt);
  EXPECT_EQ(f[0].message, "model has 5");
  r.layer_from = "m.where";
  r.message = "{layer} has {m.x}";
  f = nd::evaluate_rules({r}, doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].layer, "a");
  EXPECT_EQ(f[0].message, "a has 5");
  r.layer_from = "m.absent";
  f = nd::evaluate_rules({r}, doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].layer, std::nullopt);
  EXPECT_EQ(f[0].message, "n/a has 5");
}

TEST(Evaluate, EvidenceIsWhenPlusEvidenceSkippingAbsent) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("a", "L", 0, true, {{"m.x", 5}, {"m.y", "relu"}}));
  doc.model_metrics["m.z"] = 0.5;
  nd::Rule r = rule("T001", "layer", {cond("m.x", ">", 1)});
  r.evidence = {"m.y", "m.z", "m.absent"};
  r.fix = {"do this", "or that"};
  const auto f = nd::evaluate_rules({r}, doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].evidence, (json{{"m.x", 5}, {"m.y", "relu"}, {"m.z", 0.5}}));
  EXPECT_EQ(f[0].fix, (std::vector<std::string>{"do this", "or that"}));
  EXPECT_EQ(f[0].rule_id, "T001");
  EXPECT_EQ(f[0].failure_mode, "activation-growth");
}

TEST(Evaluate, MessagePlaceholders) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("", "Net", 0, false, {{"m.x", 123456.0}, {"m.flag", true}}));
  nd::Rule r = rule("T001", "layer", {cond("m.x", ">", 1)});
  r.message = "{layer}: x={m.x} flag={m.flag} absent={m.absent}";
  const auto f = nd::evaluate_rules({r}, doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].message, "<root>: x=1.23e+05 flag=true absent=n/a");
}

// A module path metric (*_layer) that is empty names the root module, as
// {layer} does (eval19: SEQ003 said "and  is the first module").
TEST(Evaluate, EmptyModulePathMetricIsTheRoot) {
  nd::MetricsDoc doc;
  doc.model_metrics["m.x"] = 5.0;
  doc.model_metrics["pad.first_layer"] = "";
  doc.model_metrics["pad.entry_layer"] = "enc.conv";
  doc.model_metrics["pad.how"] = "";
  nd::Rule r = rule("T001", "model", {cond("m.x", ">", 1)});
  r.message = "{pad.first_layer} first, {pad.entry_layer} entry, how '{pad.how}'";
  const auto f = nd::evaluate_rules({r}, doc);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].message, "<root> first, enc.conv entry, how ''");
}

TEST(Evaluate, SyntheticInputsLowerDataDependentRulesOneStep) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("a", "L", 0, true, {{"m.x", 5}}));
  doc.model_metrics["run.synthetic_inputs"] = true;
  nd::Rule err = rule("T001", "layer", {cond("m.x", ">", 1)}, nd::Severity::kError);
  nd::Rule warn = rule("T002", "layer", {cond("m.x", ">", 1)}, nd::Severity::kWarning);
  nd::Rule info = rule("T003", "layer", {cond("m.x", ">", 1)}, nd::Severity::kInfo);
  nd::Rule steady = rule("T004", "layer", {cond("m.x", ">", 1)}, nd::Severity::kError);
  err.data_dependent = warn.data_dependent = info.data_dependent = true;
  const auto f = nd::evaluate_rules({err, warn, info, steady}, doc);
  ASSERT_EQ(f.size(), 4u);
  // Sorted by the lowered severity: T004 error, T001 warning, T002 info, T003 info.
  EXPECT_EQ(f[0].rule_id, "T004");
  EXPECT_EQ(f[0].severity, nd::Severity::kError);
  EXPECT_FALSE(f[0].synthetic_inputs);
  EXPECT_EQ(f[0].message, "a has 5");
  EXPECT_EQ(f[1].rule_id, "T001");
  EXPECT_EQ(f[1].severity, nd::Severity::kWarning);
  EXPECT_TRUE(f[1].synthetic_inputs);
  EXPECT_EQ(f[1].message, "a has 5 (measured on synthetic inputs)");
  EXPECT_EQ(f[2].rule_id, "T002");
  EXPECT_EQ(f[2].severity, nd::Severity::kInfo);
  EXPECT_EQ(f[3].rule_id, "T003");
  EXPECT_EQ(f[3].severity, nd::Severity::kInfo);
  EXPECT_TRUE(f[3].synthetic_inputs);

  doc.model_metrics["run.synthetic_inputs"] = false;
  const auto real = nd::evaluate_rules({err}, doc);
  ASSERT_EQ(real.size(), 1u);
  EXPECT_EQ(real[0].severity, nd::Severity::kError);
  EXPECT_FALSE(real[0].synthetic_inputs);
}

TEST(Evaluate, SortedBySeverityRuleExecOrderPathInput) {
  nd::MetricsDoc doc;
  doc.layers.push_back(layer("z_never", "L", -1, true, {{"m.x", 5}}));
  doc.layers.push_back(layer("b", "L", 4, true, {{"m.x", 5}}));
  doc.layers.push_back(layer("a", "L", 4, true, {{"m.x", 5}}));  // same exec order as b: path decides
  doc.layers.push_back(layer("c", "L", 1, true, {{"m.x", 5}}));
  doc.inputs.push_back(input("second", 1, {{"m.x", 5}}));
  doc.inputs.push_back(input("first", 0, {{"m.x", 5}}));
  const auto f = nd::evaluate_rules({rule("W002", "layer", {cond("m.x", ">", 1)}),
                                     rule("W001", "input", {cond("m.x", ">", 1)}),
                                     rule("E001", "model", {cond("m.x", ">", 100)}, nd::Severity::kError),
                                     rule("E002", "layer", {cond("m.x", ">", 1)}, nd::Severity::kError),
                                     rule("I001", "layer", {cond("m.x", "==", 5)}, nd::Severity::kInfo)},
                                    doc);
  std::vector<std::string> order;
  for (const auto& x : f) order.push_back(x.rule_id + "@" + x.layer.value_or(x.input.value_or("-")));
  EXPECT_EQ(order, (std::vector<std::string>{"E002@c", "E002@a", "E002@b", "E002@z_never", "W001@first",
                                             "W001@second", "W002@c", "W002@a", "W002@b", "W002@z_never", "I001@c",
                                             "I001@a", "I001@b", "I001@z_never"}));
}

TEST(FormatMetric, Numbers) {
  EXPECT_EQ(nd::format_metric(json(12)), "12");
  EXPECT_EQ(nd::format_metric(json(1234567)), "1234567");  // counts stay exact
  EXPECT_EQ(nd::format_metric(json(0.3)), "0.3");
  EXPECT_EQ(nd::format_metric(json(1.0)), "1");
  EXPECT_EQ(nd::format_metric(json(0.0)), "0");
  EXPECT_EQ(nd::format_metric(json(3.14159)), "3.14");
  EXPECT_EQ(nd::format_metric(json(-2.71828)), "-2.72");
  EXPECT_EQ(nd::format_metric(json(80000.0)), "80000");
  EXPECT_EQ(nd::format_metric(json(99999.4)), "99999");
  EXPECT_EQ(nd::format_metric(json(123456.0)), "1.23e+05");
  EXPECT_EQ(nd::format_metric(json(1e5)), "1e+05");
  EXPECT_EQ(nd::format_metric(json(0.00123)), "0.00123");
  EXPECT_EQ(nd::format_metric(json(0.000999)), "9.99e-04");
  EXPECT_EQ(nd::format_metric(json(-4.5e-7)), "-4.5e-07");
  EXPECT_EQ(nd::format_metric(json(std::nan(""))), "nan");
  EXPECT_EQ(nd::format_metric(json(std::numeric_limits<double>::infinity())), "inf");
  EXPECT_EQ(nd::format_metric(json(-std::numeric_limits<double>::infinity())), "-inf");
}

TEST(FormatMetric, OtherTypes) {
  EXPECT_EQ(nd::format_metric(json(true)), "true");
  EXPECT_EQ(nd::format_metric(json(false)), "false");
  EXPECT_EQ(nd::format_metric(json("blocks.3.fc")), "blocks.3.fc");
  EXPECT_EQ(nd::format_metric(json(nullptr)), "null");
  EXPECT_EQ(nd::format_metric(json::array({1, 2})), "[1,2]");
}

TEST(MessagePlaceholders, ParsesAndRejects) {
  EXPECT_EQ(nd::message_placeholders("{layer} reaches {act.absmax}x"),
            (std::vector<std::string>{"layer", "act.absmax"}));
  EXPECT_TRUE(nd::message_placeholders("no placeholders").empty());
  EXPECT_THROW(nd::message_placeholders("open {act.rms"), std::invalid_argument);
  EXPECT_THROW(nd::message_placeholders("close }"), std::invalid_argument);
  EXPECT_THROW(nd::message_placeholders("empty {}"), std::invalid_argument);
  EXPECT_THROW(nd::message_placeholders("space {act rms}"), std::invalid_argument);
}

}  // namespace nd_test_evaluate_test
