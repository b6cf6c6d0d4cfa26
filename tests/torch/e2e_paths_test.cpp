// End to end: the JSON report names every module by its exact
// named_modules() path, in named_modules() order, with its class name, for
// every fixture (manifest.json "modules", taken from Python before export),
// scripted and traced; the nested fixtures' call counts and execution order
// match Python's; the real models in corpus/ report every
// path LibTorch itself lists. Also: every valid batch container of
// fixtures/batches reaches a model's forward (models built here with
// torch::jit::Module::define).
#include <gtest/gtest.h>

#include <torch/script.h>

#include <algorithm>
#include <future>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "model/op_fallbacks.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_e2e_paths_test {

namespace {

using namespace nde2e;

std::vector<std::string> fixture_names() {
  std::vector<std::string> v;
  for (const auto& [name, entry] : manifest().items()) v.push_back(name);
  return v;
}

struct Paths {
  std::vector<std::string> paths, kinds;
};

Paths manifest_modules(const std::string& fixture) {
  Paths p;
  for (const auto& m : mf("/" + fixture + "/modules")) {
    p.paths.push_back(m.at(0).get<std::string>());
    p.kinds.push_back(m.at(1).get<std::string>());
  }
  return p;
}

Paths report_modules(const json& report) {
  Paths p;
  for (const auto& l : report.at("layers")) {
    p.paths.push_back(l.at("path").get<std::string>());
    p.kinds.push_back(l.at("kind").get<std::string>());
  }
  return p;
}

// ----------------------------------------------------------- every fixture

// Fixtures whose runs other cases already make, asserting the same paths:
// RuleCase (e2e_rules_test.cpp) and NestedPaths below. Every other fixture
// runs here, two at a time (each run is mostly LibTorch start-up).
const std::set<std::string> kCoveredElsewhere = {
    "growth20", "nan_forward", "nan_grad", "fp16_overflow", "norm_gain", "saturated", "softmax_collapse",
    "exploding", "vanishing", "no_grad_path", "growth20_healthy", "nan_forward_healthy", "nan_grad_healthy",
    "fp16_overflow_healthy", "norm_gain_healthy", "saturated_healthy", "softmax_collapse_healthy",
    "exploding_healthy", "vanishing_healthy", "no_grad_path_healthy", "tiny_cnn", "nested_scripted",
    "nested_traced"};

TEST(E2EPaths, EveryOtherFixtureReportsItsNamedModules) {
  std::vector<std::string> names;
  for (const auto& n : fixture_names())
    if (!kCoveredElsewhere.count(n)) names.push_back(n);
  ASSERT_GT(names.size(), 20u);
  for (const auto& n : kCoveredElsewhere) EXPECT_TRUE(manifest().contains(n)) << n << " is not a fixture";
  TempDir tmp;
  for (size_t i = 0; i < names.size(); i += 2) {
    auto run = [&](const std::string& name) {
      return check(model(name + ".pt"), {model(name + ".input.pt")}, {"--fail-on", "never"}, tmp.file(name + ".json"));
    };
    auto second = i + 1 < names.size() ? std::async(std::launch::async, run, names[i + 1]) : std::future<NdRun>();
    std::vector<std::pair<std::string, NdRun>> runs{{names[i], run(names[i])}};
    if (second.valid()) runs.push_back({names[i + 1], second.get()});
    for (const auto& [name, r] : runs) {
      SCOPED_TRACE(name);
      if (!r.has_report) {
        ADD_FAILURE() << r.describe();
        continue;
      }
      if (r.report.value("status", "") != "ok") {
        ADD_FAILURE() << r.report.value("error", json()).dump() << "\n" << r.describe();
        continue;
      }
      EXPECT_EQ(r.exit_code, 0) << r.describe();
      expect_modules_match_manifest(r.report, name);
    }
  }
}

// ----------------------------------------------------- nested, in detail

class NestedPaths : public ::testing::TestWithParam<std::string> {};

// ModuleList of Sequentials inside a custom block, a custom Residual inside a
// Sequential, `shared` called twice, a loop over a ModuleList, a ModuleDict:
// call counts, execution order and activations per path equal Python's.
TEST_P(NestedPaths, CallsOrderAndActivationsMatchPython) {
  const std::string name = GetParam();
  TempDir tmp;
  const NdRun r = check(model(name + ".pt"), {model(name + ".input.pt")}, {}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report.value("status", ""), "ok") << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(r.report.at("findings").empty()) << r.report.at("findings").dump(2);

  const Paths want = manifest_modules(name), got = report_modules(r.report);
  ASSERT_EQ(got.paths, want.paths);
  EXPECT_EQ(got.kinds, want.kinds);
  if (mf("/" + name + "/kind") == "traced") {
    EXPECT_EQ(r.report.at("model").value("kind", ""), "traced");
  }

  const json& calls = mf("/" + name + "/numbers/calls");
  const json& order = mf("/" + name + "/numbers/execution_order");
  const json& never = mf("/" + name + "/numbers/never_called");
  const json& profile = mf("/" + name + "/profile");
  // exec_order ranks modules by their first output: the same ranking as Python's.
  std::vector<std::pair<int64_t, std::string>> ranked;
  std::vector<std::string> phantom;  // never called in Python, yet measured
  for (const auto& l : r.report.at("layers")) {
    const std::string path = l.at("path");
    SCOPED_TRACE("module '" + path + "'");
    const json& m = l.at("metrics");
    if (std::find(never.begin(), never.end(), path) != never.end()) {
      // ModuleList / ModuleDict: no forward, never run (docs/metrics.md:
      // act.calls = "times the module ran in the pass").
      if (l.at("exec_order") != -1 || m.contains("act.calls"))
        phantom.push_back(path + " (" + l.at("kind").get<std::string>() + ": exec_order " + l.at("exec_order").dump() +
                          ", act.calls " + m.value("act.calls", json()).dump() + ")");
      continue;
    }
    ASSERT_TRUE(calls.contains(path));
    ASSERT_TRUE(m.contains("act.calls")) << m.dump();
    EXPECT_EQ(m.at("act.calls"), calls.at(path));
    ranked.push_back({l.at("exec_order").get<int64_t>(), path});
    ASSERT_TRUE(profile.contains(path));
    EXPECT_TRUE(near_rel("act.rms", as_number(m.at("act.rms")), profile[path]["rms"].get<double>(), 1e-3));
    EXPECT_TRUE(near_rel("act.absmax", as_number(m.at("act.absmax")), profile[path]["absmax"].get<double>(), 1e-3));
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> got_order;
  for (const auto& [o, p] : ranked) got_order.push_back(p);
  EXPECT_EQ(json(got_order), order);
  std::string list;
  for (const auto& p : phantom) list += "\n  " + p;
  EXPECT_TRUE(phantom.empty()) << "containers Python never calls (ModuleList/ModuleDict) got activation metrics:" << list;
}

INSTANTIATE_TEST_SUITE_P(E2E, NestedPaths, ::testing::Values("nested_scripted", "nested_traced"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// ------------------------------------------------------------ model kind

// model.kind is a user-facing fact (DESIGN.md: kind scripted|traced); the
// manifest records how each fixture was exported. A sample of both export
// paths: nested_* and tiny_cnn* are the same models exported both ways;
// growth20 and saturated are scripted models without control flow.
TEST(E2EModelKind, ExportPathIsReported) {
  TempDir tmp;
  std::vector<std::string> wrong;
  for (const std::string name :
       {"nested_scripted", "nested_traced", "tiny_cnn", "tiny_cnn_traced", "growth20", "saturated"}) {
    const NdRun r = check(model(name + ".pt"), {model(name + ".input.pt")}, {"--fail-on", "never"},
                          tmp.file(name + ".json"));
    ASSERT_TRUE(r.has_report) << r.describe();
    ASSERT_EQ(r.report.value("status", ""), "ok") << r.describe();
    const std::string want = mf("/" + name + "/kind"), got = r.report.at("model").value("kind", "");
    EXPECT_FALSE(r.report.at("model").value("kind_reason", "").empty());
    // Traced reported as scripted would hide baked-in mode flags: always a failure.
    if (want == "traced") {
      EXPECT_EQ(got, "traced") << name;
    }
    if (got != want) wrong.push_back(name + " (" + want + ", reported " + got + ": " +
                                     r.report.at("model").value("kind_reason", "") + ")");
  }
  std::string list;
  for (const auto& w : wrong) list += "\n  " + w;
  EXPECT_TRUE(wrong.empty()) << "model.kind differs from how the fixture was exported:" << list;
}

// ---------------------------------------------------------- real models

class RealModelPaths : public ::testing::TestWithParam<std::string> {};

TEST_P(RealModelPaths, EveryNamedModuleIsReported) {
  const std::string dir = real_models_dir();
  const std::string pt = dir + "/" + GetParam() + ".pt", in = dir + "/" + GetParam() + ".input.pt";
  if (!fs::exists(pt) || !fs::exists(in)) GTEST_SKIP() << "real model not present: " << pt;

  std::vector<std::string> want;
  {
    // tv_vit_tiny calls aten::scaled_dot_product_attention, which LibTorch
    // 1.13 lacks: load it as normdoctor does, with its fallback registered.
    nd::register_missing_op_fallbacks();
    torch::jit::Module m = torch::jit::load(pt);
    for (const auto& nm : m.named_modules()) want.push_back(nm.name);
  }
  ASSERT_FALSE(want.empty());

  TempDir tmp;
  const NdRun r = check(pt, {in}, {}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report.value("status", ""), "ok") << r.report.value("error", json()).dump() << "\n" << r.describe();
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe();
  const std::vector<std::string> got = layer_paths(r.report);
  const std::set<std::string> got_set(got.begin(), got.end());
  for (const auto& p : want) {
    EXPECT_TRUE(got_set.count(p)) << "module '" << p << "' missing from the report";
  }
  EXPECT_EQ(got, want) << "layers[] differ from named_modules() in order or extra entries";
  // Every finding's layer is one of the model's modules.
  for (const auto& f : r.report.at("findings"))
    if (f.at("layer").is_string()) {
      EXPECT_TRUE(got_set.count(f.at("layer").get<std::string>())) << f.dump();
    }
}

INSTANTIATE_TEST_SUITE_P(E2E, RealModelPaths,
                         ::testing::Values("tv_mobilenet_v3_small", "hf_bert_tiny", "hf_llama_tiny", "tv_vit_tiny"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// ------------------------------------------------------ input containers

/// One valid batch file of fixtures/batches and a model whose forward takes
/// what it holds, with the inputs[] the report must show.
struct ContainerCase {
  std::string file;
  std::string forward;  ///< TorchScript source of forward (parameter w: [3, 4] float, ones)
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::string> dtypes;
  std::vector<double> means;  ///< input.mean per argument (NaN: not checked)
};

void PrintTo(const ContainerCase& c, std::ostream* os) { *os << c.file; }

const double kSkip = std::nan("");

// a = arange(6.).reshape(2, 3), b = arange(4) * 10 (fixtures/batches/README.md)
std::vector<ContainerCase> container_cases() {
  const std::string fa = "def forward(self, x):\n    return torch.mm(x, self.w)\n";
  const std::string fab =
      "def forward(self, x, y):\n    return torch.mm(x, self.w) + y.float().sum()\n";
  return {
      {"tensor.pt", fa, {"x"}, {{2, 3}}, {"Float"}, {2.5}},
      {"tuple2.pt", fab, {"x", "y"}, {{2, 3}, {4}}, {"Float", "Long"}, {2.5, 15}},
      {"list2.pt", fab, {"x", "y"}, {{2, 3}, {4}}, {"Float", "Long"}, {2.5, 15}},
      {"list1.pt", fa, {"x"}, {{2, 3}}, {"Float"}, {2.5}},
      {"list1_protocol4.pt", fa, {"x"}, {{2, 3}}, {"Float"}, {2.5}},
      {"dict2.pt",
       "def forward(self, x, mask):\n    return torch.mm(x * mask.float(), self.w)\n",
       {"x", "mask"}, {{2, 3}, {2, 3}}, {"Float", "Bool"}, {2.5, kSkip}},
      {"dict1.pt", fa, {"x"}, {{2, 3}}, {"Float"}, {2.5}},
      // keys in the file: second, first; bound by name, not position
      {"ordereddict.pt",
       "def forward(self, first, second):\n    return torch.mm(first, self.w) + second.float().sum()\n",
       {"first", "second"}, {{2, 3}, {4}}, {"Float", "Long"}, {2.5, 15}},
      {"dtypes.pt",
       "def forward(self, f32, f64, f16, bf16, i8, i16, i32, i64, u8, bool):\n"
       "    s = f64.float() + f16.float() + bf16.float() + i8.float()\n"
       "    s = s + i16.float() + i32.float() + i64.float() + u8.float()\n"
       "    s = s + bool.float()\n"
       "    return torch.mm((f32 + s).unsqueeze(0)[:, :1].expand(1, 3), self.w)\n",
       {"f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "bool"},
       {{2}, {2}, {2}, {2}, {2}, {2}, {2}, {2}, {2}, {2}},
       {"Float", "Double", "Half", "BFloat16", "Char", "Short", "Int", "Long", "Byte", "Bool"},
       {-0.25, -0.25, -0.25, -0.25, 2, 2, 2, 2, 126.5, kSkip}},
      // base = arange(12.).reshape(3, 4): base.t() [4, 3], base[1:, 1:3] [2, 2]
      {"strided.pt",
       "def forward(self, x, y):\n    return torch.mm(x, self.w) + y.sum()\n",
       {"x", "y"}, {{4, 3}, {2, 2}}, {"Float", "Float"}, {5.5, 7.5}},
      {"edge_shapes.pt",
       "def forward(self, s, e):\n    return torch.mm(s * torch.ones(2, 3), self.w) + e.sum()\n",
       {"s", "e"}, {{}, {0, 3}}, {"Float", "Float"}, {3.5, kSkip}},
      {"parameter.pt",
       "def forward(self, x):\n    return torch.mm(torch.cat([x, x[:, :1]], 1), self.w)\n",
       {"x"}, {{2, 2}}, {"Float"}, {1.0}},
      {"batch.safetensors",
       "def forward(self, input_ids, attention_mask, pixels):\n"
       "    h = (input_ids * attention_mask).float().sum(1, keepdim=True) * pixels.unsqueeze(0)\n"
       "    return torch.mm(h, self.w)\n",
       {"input_ids", "attention_mask", "pixels"}, {{2, 4}, {2, 4}, {3}}, {"Long", "Long", "Float"},
       {8.5, 0.75, 0.5}},
  };
}

/// Saves a one-parameter TorchScript module with the given forward.
void save_module(const std::string& forward, const std::string& path) {
  torch::jit::Module m("__torch__.ContainerProbe");
  m.register_parameter("w", torch::ones({3, 4}).requires_grad_(), /*is_buffer=*/false);
  m.define(forward);
  m.eval();
  m.save(path);
}

class InputContainer : public ::testing::TestWithParam<ContainerCase> {};

TEST_P(InputContainer, ReachesForward) {
  const ContainerCase& c = GetParam();
  TempDir tmp;
  const std::string pt = tmp.file("probe.pt");
  ASSERT_NO_THROW(save_module(c.forward, pt));
  const NdRun r = check(pt, {batch(c.file)}, {"--fail-on", "never"}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report.value("status", ""), "ok") << r.report.value("error", json()).dump() << "\n" << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  const json& inputs = r.report.at("inputs");
  ASSERT_EQ(inputs.size(), c.names.size()) << inputs.dump(2);
  for (size_t i = 0; i < c.names.size(); ++i) {
    SCOPED_TRACE("argument " + c.names[i]);
    EXPECT_EQ(inputs[i].value("name", ""), c.names[i]);
    EXPECT_EQ(inputs[i].value("index", -1), static_cast<int>(i));
    EXPECT_EQ(inputs[i].at("shape"), json(c.shapes[i]));
    EXPECT_EQ(inputs[i].value("dtype", ""), c.dtypes[i]);
    EXPECT_NE(inputs[i].value("source", "").find(c.file), std::string::npos) << inputs[i].dump();
    if (!std::isnan(c.means[i])) {
      EXPECT_TRUE(near_rel("input.mean", as_number(inputs[i].at("metrics").at("input.mean")), c.means[i], 1e-6));
    }
    EXPECT_EQ(inputs[i].at("metrics").value("input.synthetic", true), false);
  }
  // The backward pass ran: the parameter got a gradient.
  const json* root = find_layer(r.report, "");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->at("metrics").value("grad.params_no_signal", -1), 0) << root->dump(2);
}

INSTANTIATE_TEST_SUITE_P(E2E, InputContainer, ::testing::ValuesIn(container_cases()),
                         [](const ::testing::TestParamInfo<ContainerCase>& i) {
                           std::string n = i.param.file;
                           for (auto& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// Every file of fixtures/batches is either a case above or a bad file
// (e2e_errors_test.cpp): a new file must be added to one of the two.
TEST(InputContainer, EveryBatchFixtureIsCovered) {
  std::set<std::string> covered;
  for (const auto& c : container_cases()) covered.insert(c.file);
  for (const char* bad : {"bad_json.safetensors", "truncated.safetensors", "truncated.pt", "custom_class.pt",
                          "nested.pt", "non_tensor.pt", "legacy.pt", "legacy_protocol4.pt", "plain_pickle.pkl",
                          "torchscript.pt", "numpy_array.pt", "empty.pt", "garbage.bin",
                          "empty_batch.pt"})  // e2e_errors_test.cpp empty_batch_file
    covered.insert(bad);
  for (const auto& e : fs::directory_iterator(source_dir() + "/fixtures/batches")) {
    const std::string n = e.path().filename().string();
    if (n == "README.md") continue;
    EXPECT_TRUE(covered.count(n)) << "fixtures/batches/" << n << " is not covered by an end-to-end case";
  }
}

}  // namespace

}  // namespace nd_test_e2e_paths_test
