// `normdoctor check model.pt` without --input (issue 9): inputs from the
// archive's traced_inputs record or inferred from the graph, honestly
// labelled; --input-shape end to end; the exit-2 message when nothing can be
// inferred. Fixtures: fixtures/models (make_fixtures.py and, for
// traced_with_inputs*.pt / no_input_hint.pt, make_traced_inputs_fixture.py)
// and the real-model corpus in corpus/.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "probes/inputs/inputs.h"
#include "probes/session.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_infer_inputs_test {

namespace {

// ------------------------------------------------------------------ running the binary

namespace nde2e {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string model(const std::string& name) { return std::string(ND_SOURCE_DIR) + "/fixtures/models/" + name; }
std::string real_models_dir() { return std::string(ND_SOURCE_DIR) + "/corpus"; }

std::string read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A fresh folder under the temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() / ("nd_infer_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Run {
  int exit_code = -1;
  std::string out, err, command;
  json report;  ///< the JSON report, when one was asked for and written
  bool has_report = false;
  std::string describe() const {
    return "command: " + command + "\nexit code: " + std::to_string(exit_code) + "\n--- stderr ---\n" +
           err.substr(0, 4000) + "\n--- stdout ---\n" + out.substr(0, 4000);
  }
};

/// `normdoctor ARGS...`; with `json_report`, adds `--format json -o json_report` and parses it.
Run run_nd(const std::vector<std::string>& args, const std::string& json_report = "") {
  TempDir tmp;
  std::string cmd = shell_quote(ND_BINARY);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  if (!json_report.empty()) cmd += " --format json -o " + shell_quote(json_report);
  Run r;
  r.command = cmd;
  const std::string err_path = tmp.file("stderr");
  FILE* p = ::popen((cmd + " </dev/null 2>" + shell_quote(err_path)).c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.err = read_file(err_path);
  if (!json_report.empty() && fs::exists(json_report)) {
    try {
      r.report = json::parse(read_file(json_report));
      r.has_report = true;
    } catch (const std::exception& e) {
      r.err += std::string("\n[test] report is not valid JSON: ") + e.what();
    }
  }
  return r;
}

Run check(const std::string& model_path, const std::vector<std::string>& inputs, const std::vector<std::string>& extra,
          const std::string& json_report) {
  std::vector<std::string> args{"check", model_path};
  for (const auto& i : inputs) {
    args.push_back("--input");
    args.push_back(i);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return run_nd(args, json_report);
}

double as_number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  return std::nan("");
}

/// A failed run: exit code, JSON error report of `kind` whose message holds `message_part`.
void expect_error_report(const Run& r, const std::string& kind, const std::string& message_part) {
  ASSERT_TRUE(r.has_report) << "no JSON report written\n" << r.describe();
  EXPECT_EQ(r.report.value("status", ""), "error") << r.describe();
  ASSERT_TRUE(r.report.contains("error") && r.report["error"].is_object()) << r.report.dump(2);
  EXPECT_EQ(r.report["error"].value("kind", ""), kind) << r.report["error"].dump();
  EXPECT_NE(r.report["error"].value("message", "").find(message_part), std::string::npos)
      << "error.message lacks '" << message_part << "': " << r.report["error"].dump();
}

}  // namespace nde2e

using nde2e::json;
namespace fs = std::filesystem;

std::vector<int64_t> shape_of(const json& in) { return in.at("shape").get<std::vector<int64_t>>(); }
std::string source_of(const json& in) { return in.at("source").get<std::string>(); }
double metric(const json& in, const std::string& name) { return nde2e::as_number(in.at("metrics").at(name)); }

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

/// `check MODEL --format json` with `extra` flags; asserts it ran (exit 0 or 1, status ok).
nde2e::Run check_ok(const std::string& model, const std::vector<std::string>& extra = {}) {
  nde2e::TempDir tmp;
  nde2e::Run r = nde2e::check(model, {}, extra, tmp.file("report.json"));
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe();
  EXPECT_TRUE(r.has_report) << r.describe();
  if (r.has_report) {
    EXPECT_EQ(r.report.value("status", ""), "ok") << r.describe();
    EXPECT_EQ(r.report.at("probes").at("model_metrics").value("run.synthetic_inputs", false), true)
        << r.report.at("probes").at("model_metrics").dump();
  }
  return r;
}

/// Every input says it was inferred, and the assumptions say how, one sentence each.
void expect_inferred(const nde2e::Run& r) {
  ASSERT_TRUE(r.has_report);
  const json& inputs = r.report.at("inputs");
  ASSERT_FALSE(inputs.empty());
  const auto assumptions = r.report.at("probes").at("assumptions").get<std::vector<std::string>>();
  for (const auto& in : inputs) {
    EXPECT_EQ(source_of(in).rfind("inferred: ", 0), 0u) << in.dump();
    EXPECT_EQ(in.at("metrics").value("input.synthetic", false), true) << in.dump();
    const std::string who = "input '" + in.at("name").get<std::string>() + "'";
    EXPECT_TRUE(std::any_of(assumptions.begin(), assumptions.end(), [&](const std::string& a) { return contains(a, who); }))
        << who << " has no assumption sentence: " << json(assumptions).dump(2);
  }
}

const json& input_named(const nde2e::Run& r, const std::string& name) {
  for (const auto& in : r.report.at("inputs"))
    if (in.at("name") == name) return in;
  static const json none = json::object({{"name", "(missing)"}, {"shape", json::array()}, {"source", ""}});
  ADD_FAILURE() << "no input '" << name << "' in " << r.report.at("inputs").dump(2);
  return none;
}

std::string real_model(const std::string& name) { return nde2e::real_models_dir() + "/" + name; }

#define SKIP_IF_ABSENT(path) \
  if (!fs::exists(path)) GTEST_SKIP() << (path) << " is absent"

// ------------------------------------------------------------------ real models

TEST(InferInputsReal, MobilenetGetsImagesFromItsFirstConv) {
  const std::string m = real_model("tv_mobilenet_v3_small.pt");
  SKIP_IF_ABSENT(m);
  auto r = check_ok(m);
  expect_inferred(r);
  ASSERT_EQ(r.report.at("inputs").size(), 1u);
  const json& x = r.report.at("inputs")[0];
  EXPECT_EQ(shape_of(x), (std::vector<int64_t>{4, 3, 224, 224})) << x.dump();
  EXPECT_EQ(x.at("dtype"), "Float");
  EXPECT_TRUE(contains(source_of(x), "Conv2d features.0.0 in_channels=3")) << source_of(x);
  EXPECT_TRUE(contains(source_of(x), "size 224 from ladder")) << source_of(x);
}

TEST(InferInputsReal, VitImageSizeComesFromTheLadder) {
  // VisionTransformer(image_size=32) asserts the image size: 224, 128, 64 fail, 32 runs.
  const std::string m = real_model("tv_vit_tiny.pt");
  SKIP_IF_ABSENT(m);
  auto r = check_ok(m);
  expect_inferred(r);
  const json& x = r.report.at("inputs")[0];
  EXPECT_EQ(shape_of(x), (std::vector<int64_t>{4, 3, 32, 32})) << x.dump();
  EXPECT_TRUE(contains(source_of(x), "Conv2d conv_proj in_channels=3")) << source_of(x);
  EXPECT_TRUE(contains(source_of(x), "size 32 from ladder 224/128/64/32/16")) << source_of(x);
}

void expect_hf_tokens(const std::string& file) {
  const std::string m = real_model(file);
  if (!fs::exists(m)) GTEST_SKIP() << m << " is absent";
  auto r = check_ok(m);
  expect_inferred(r);
  ASSERT_EQ(r.report.at("inputs").size(), 2u);
  const json& ids = input_named(r, "input_ids");
  const json& mask = input_named(r, "attention_mask");
  // Shapes and dtypes from the traced_inputs record (PyTorch 2.11 stores no values).
  EXPECT_EQ(shape_of(ids), (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(ids.at("dtype"), "Long");
  EXPECT_TRUE(contains(source_of(ids), "traced_inputs record")) << source_of(ids);
  EXPECT_TRUE(contains(source_of(ids), "num_embeddings=1000")) << source_of(ids);
  EXPECT_GE(metric(ids, "input.min"), 0);
  EXPECT_LT(metric(ids, "input.max"), 1000);
  EXPECT_GT(metric(ids, "input.max"), 100);  // spread over the vocabulary, not 0/1
  EXPECT_EQ(shape_of(mask), (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(mask.at("dtype"), "Long");
  EXPECT_TRUE(contains(source_of(mask), "traced_inputs record")) << source_of(mask);
  EXPECT_EQ(metric(mask, "input.min"), 0);  // the last row is padded
  EXPECT_EQ(metric(mask, "input.max"), 1);
  EXPECT_NEAR(metric(mask, "input.mean"), 28.0 / 32.0, 1e-9);
}

TEST(InferInputsReal, BertTokenIdsAndMaskFromTracedInputs) { expect_hf_tokens("hf_bert_tiny.pt"); }
TEST(InferInputsReal, LlamaTokenIdsAndMaskFromTracedInputs) { expect_hf_tokens("hf_llama_tiny.pt"); }

// ------------------------------------------------------------------ fixtures

struct FixtureCase {
  const char* model;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  const char* source_part;  ///< in the first input's source
};

class InferInputsFixture : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(InferInputsFixture, RunsAndSaysHowEachInputWasObtained) {
  const FixtureCase& c = GetParam();
  auto r = check_ok(nde2e::model(c.model));
  expect_inferred(r);
  ASSERT_EQ(r.report.at("inputs").size(), c.shapes.size()) << r.report.at("inputs").dump(2);
  for (const auto& [name, shape] : c.shapes) EXPECT_EQ(shape_of(input_named(r, name)), shape) << name;
  EXPECT_TRUE(contains(source_of(r.report.at("inputs")[0]), c.source_part)) << source_of(r.report.at("inputs")[0]);
}

INSTANTIATE_TEST_SUITE_P(
    Models, InferInputsFixture,
    ::testing::Values(
        FixtureCase{"tiny_cnn.pt", {{"x", {4, 3, 224, 224}}}, "Conv2d features.0 in_channels=3"},
        // torch.jit.trace in PyTorch 2.x stores the example inputs' shapes
        // (traced_inputs): the traced fixtures' inputs come from there.
        FixtureCase{"tiny_cnn_traced.pt", {{"x", {8, 3, 16, 16}}}, "traced_inputs record"},
        FixtureCase{"growth20.pt", {{"x", {4, 32}}}, "Linear layers.0 in_features=32"},
        FixtureCase{"nested_scripted.pt", {{"x", {4, 8}}}, "in_features=8"},
        FixtureCase{"nested_traced.pt", {{"x", {4, 8}}}, "traced_inputs record"},
        // A mask argument means a sequence model: [N, T, F] and a mask [N, T].
        FixtureCase{"seq_ln.pt", {{"x", {4, 128, 16}}, {"mask", {4, 128}}}, "in_features=16"},
        FixtureCase{"seq_bn_padding.pt", {{"x", {4, 128, 16}}, {"mask", {4, 128}}}, "in_features=16"},
        // [N, F] fails (transpose of a 2-D tensor), [N, T, F] needs T == 16 (LayerNorm over time).
        FixtureCase{"ln_over_time.pt", {{"x", {4, 16, 16}}}, "length 16 from ladder 128/64/32/16"},
        // RMSNorm written out (pow/mean/rsqrt) before `proj`: found through elementwise ops.
        FixtureCase{"norm_gain.pt", {{"x", {4, 64}}}, "64"},
        FixtureCase{"bn_batch_of_one.pt", {{"x", {4, 3, 224, 224}}}, "in_channels=3"}),
    [](const ::testing::TestParamInfo<FixtureCase>& i) {
      std::string n = i.param.model;
      n = n.substr(0, n.find('.'));
      return n;
    });

TEST(InferInputs, MaskOfASequenceModelIsPaddedLikeTheOtherInputs) {
  auto r = check_ok(nde2e::model("seq_ln.pt"));
  const json& mask = input_named(r, "mask");
  EXPECT_EQ(mask.at("dtype"), "Float");  // no token ids: the mask multiplies float features
  EXPECT_EQ(metric(mask, "input.min"), 0);
  EXPECT_EQ(metric(mask, "input.max"), 1);
  EXPECT_NEAR(metric(mask, "input.mean"), (4 * 128 - 32) / (4.0 * 128), 1e-9);  // last row padded from 96
  EXPECT_TRUE(contains(source_of(mask), "name 'mask'")) << source_of(mask);
  EXPECT_TRUE(contains(source_of(mask), "shaped like the other inputs")) << source_of(mask);
}

// ------------------------------------------------------------------ traced_inputs record

// make_traced_inputs_fixture.py: input_ids = (arange(21).reshape(3, 7) * 7) % 50,
// attention_mask = ones(3, 7) with row 2 zero from column 5.
std::vector<int64_t> expected_ids() {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < 21; ++i) v.push_back((i * 7) % 50);
  return v;
}
std::vector<int64_t> expected_mask() {
  std::vector<int64_t> v(21, 1);
  v[2 * 7 + 5] = v[2 * 7 + 6] = 0;
  return v;
}

std::vector<int64_t> values_of(const at::Tensor& t) {
  const at::Tensor c = t.contiguous().to(at::kLong);
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

/// load_arguments in process (no flags): the tensors themselves.
std::vector<nd::ArgValue> load_in_process(const std::string& model, uint64_t seed = 0) {
  nd::CheckOptions opt;
  opt.model_path = model;
  opt.seed = seed;
  nd::Session s(opt, {});
  s.model = nd::load_model(model);
  nd::load_arguments(s);
  return s.args;
}

TEST(InferInputsTraced, StoredValuesAreUsedExactly) {
  const auto args = load_in_process(nde2e::model("traced_with_input_values.pt"));
  ASSERT_EQ(args.size(), 2u);
  EXPECT_EQ(args[0].name, "input_ids");
  EXPECT_EQ(args[1].name, "attention_mask");
  const at::Tensor ids = args[0].value.toTensor(), mask = args[1].value.toTensor();
  EXPECT_EQ(ids.sizes(), at::IntArrayRef({3, 7}));
  EXPECT_EQ(ids.scalar_type(), at::kLong);
  EXPECT_EQ(values_of(ids), expected_ids());
  EXPECT_EQ(mask.sizes(), at::IntArrayRef({3, 7}));
  EXPECT_EQ(mask.scalar_type(), at::kLong);
  EXPECT_EQ(values_of(mask), expected_mask());
  for (const auto& a : args) EXPECT_EQ(a.source, "inferred: traced_inputs record (the example inputs torch.jit.trace stored)");
}

TEST(InferInputsTraced, PyTorchLayoutGivesShapesAndDtypesValuesFromTheGraph) {
  // PyTorch writes the record's storages empty: shapes and dtypes only.
  const auto args = load_in_process(nde2e::model("traced_with_inputs.pt"));
  ASSERT_EQ(args.size(), 2u);
  const at::Tensor ids = args[0].value.toTensor(), mask = args[1].value.toTensor();
  EXPECT_EQ(ids.sizes(), at::IntArrayRef({3, 7}));
  EXPECT_EQ(ids.scalar_type(), at::kLong);
  EXPECT_GE(ids.min().item<int64_t>(), 0);
  EXPECT_LT(ids.max().item<int64_t>(), 50);  // Embedding(50, 16)
  EXPECT_TRUE(contains(args[0].source, "traced_inputs record (shape and dtype")) << args[0].source;
  EXPECT_TRUE(contains(args[0].source, "Embedding embed num_embeddings=50")) << args[0].source;
  EXPECT_EQ(mask.sizes(), at::IntArrayRef({3, 7}));
  EXPECT_EQ(mask.scalar_type(), at::kLong);
  std::vector<int64_t> want(21, 1);
  want[20] = 0;  // last row padded from position 7 - 7 / 4 = 6
  EXPECT_EQ(values_of(mask), want);
}

TEST(InferInputsTraced, EndToEndReportNamesTheRecord) {
  auto r = check_ok(nde2e::model("traced_with_input_values.pt"));
  expect_inferred(r);
  const json& ids = input_named(r, "input_ids");
  EXPECT_EQ(shape_of(ids), (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(metric(ids, "input.max"), 49);
  EXPECT_EQ(metric(ids, "input.min"), 0);
  EXPECT_TRUE(contains(source_of(ids), "traced_inputs record")) << source_of(ids);
}

TEST(InferInputsTraced, SameSeedSameInputs) {
  const auto a = load_in_process(nde2e::model("traced_with_inputs.pt"), 3);
  const auto b = load_in_process(nde2e::model("traced_with_inputs.pt"), 3);
  const auto c = load_in_process(nde2e::model("traced_with_inputs.pt"), 4);
  EXPECT_TRUE(a[0].value.toTensor().equal(b[0].value.toTensor()));
  EXPECT_FALSE(a[0].value.toTensor().equal(c[0].value.toTensor()));
}

// ------------------------------------------------------------------ not inferable

TEST(InferInputs, NoHintExitsTwoNamingTheArgumentAndTheFlags) {
  nde2e::TempDir tmp;
  auto r = nde2e::check(nde2e::model("no_input_hint.pt"), {}, {}, tmp.file("report.json"));
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  nde2e::expect_error_report(r, "input_inference", "cannot infer input 'x'");
  const std::string msg = r.report.at("error").value("message", "");
  for (const char* part : {"forward(x: Tensor)", "aten::sum", "--input batch.pt", "--input-shape x="})
    EXPECT_TRUE(contains(msg, part)) << "message lacks '" << part << "': " << msg;
  EXPECT_TRUE(contains(r.err, "cannot infer input 'x'")) << r.describe();
}

TEST(InferInputs, NoHintTextReportToo) {
  auto r = nde2e::run_nd({"check", nde2e::model("no_input_hint.pt")});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(contains(r.out + r.err, "--input-shape")) << r.describe();
}

// ------------------------------------------------------------------ text report

TEST(InferInputs, TextReportHeaderAndRerunCommand) {
  const std::string model = nde2e::model("tiny_cnn.pt");
  auto r = nde2e::run_nd({"check", model, "--color", "never", "--seed", "5"});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe();
  EXPECT_TRUE(contains(r.out, "x: Float [4, 3, 224, 224] (inferred: Conv2d features.0 in_channels=3")) << r.out;
  // The report ends with the exact command to re-run with a real batch.
  std::string out = r.out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const std::string last = out.substr(out.rfind('\n') + 1);
  EXPECT_EQ(last, "  normdoctor check " + model + " --input batch.pt --seed 5") << r.out;
  EXPECT_TRUE(contains(r.out, "torch.save((x,), \"batch.pt\")")) << r.out;
}

TEST(InferInputs, InputsFromAFileAreNotSynthetic) {
  nde2e::TempDir tmp;
  auto r = nde2e::check(nde2e::model("tiny_cnn.pt"), {nde2e::model("tiny_cnn.input.pt")}, {}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_EQ(r.report.at("probes").at("model_metrics").value("run.synthetic_inputs", true), false);
  EXPECT_EQ(source_of(r.report.at("inputs")[0]).rfind("file:", 0), 0u);
  for (const auto& f : r.report.at("findings")) EXPECT_FALSE(f.value("synthetic_inputs", true)) << f.dump();
  auto t = nde2e::run_nd({"check", nde2e::model("tiny_cnn.pt"), "--input", nde2e::model("tiny_cnn.input.pt")});
  EXPECT_FALSE(contains(t.out, "--input batch.pt")) << t.out;
}

TEST(InferInputs, DataDependentFindingsAreLabelled) {
  // fp16_overflow's ffn.fc2 overflows fp16 on any normal input (absmax ~7e4 at
  // scale 1): ACT/fp16 findings are data dependent, so inferred inputs mark them.
  auto r = check_ok(nde2e::model("fp16_overflow.pt"));
  ASSERT_TRUE(r.has_report);
  bool any = false;
  for (const auto& f : r.report.at("findings")) {
    if (!f.value("synthetic_inputs", false)) continue;
    any = true;
    EXPECT_TRUE(contains(f.value("message", ""), "(measured on synthetic inputs)")) << f.dump();
    EXPECT_NE(f.value("severity", ""), "error") << f.dump();
  }
  EXPECT_TRUE(any) << r.report.at("findings").dump(2);
}

// ------------------------------------------------------------------ --input-shape

TEST(InputShape, ByNameAndPositional) {
  auto r = check_ok(nde2e::model("seq_ln.pt"), {"--input-shape", "mask=2x12:float32:1..1", "--input-shape", "2x12x16"});
  const json& x = input_named(r, "x");
  const json& mask = input_named(r, "mask");
  EXPECT_EQ(shape_of(x), (std::vector<int64_t>{2, 12, 16}));
  EXPECT_EQ(source_of(x), "synthetic:2x12x16");
  EXPECT_EQ(shape_of(mask), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(source_of(mask), "synthetic:mask=2x12:float32:1..1");
  EXPECT_EQ(metric(mask, "input.min"), 1);
  EXPECT_EQ(metric(mask, "input.max"), 1);
  EXPECT_EQ(x.at("metrics").value("input.synthetic", false), true);
}

TEST(InputShape, IntegerRanges) {
  auto r = check_ok(nde2e::model("traced_with_inputs.pt"),
                    {"--input-shape", "input_ids=2x9:int64:0..50", "--input-shape", "attention_mask=2x9:int64:1..1"});
  const json& ids = input_named(r, "input_ids");
  EXPECT_EQ(shape_of(ids), (std::vector<int64_t>{2, 9}));
  EXPECT_EQ(ids.at("dtype"), "Long");
  EXPECT_GE(metric(ids, "input.min"), 0);
  EXPECT_LT(metric(ids, "input.max"), 50);
  EXPECT_GT(metric(ids, "input.max"), 5);
  const json& mask = input_named(r, "attention_mask");
  EXPECT_EQ(metric(mask, "input.min"), 1);
  EXPECT_EQ(metric(mask, "input.max"), 1);
}

/// The JSON report without its `timing` key.
std::string without_timing(const std::string& model, const std::vector<std::string>& flags) {
  nde2e::TempDir tmp;
  auto r = nde2e::check(model, {}, flags, tmp.file("r.json"));
  EXPECT_TRUE(r.has_report) << r.describe();
  json j = r.report;
  j.erase("timing");
  return j.dump(1);
}

TEST(InputShape, SameSeedGivesTheSameReport) {
  const std::string m = nde2e::model("growth20.pt");
  const std::vector<std::string> flags{"--input-shape", "x=8x32:-2..2", "--seed", "11"};
  const std::string a = without_timing(m, flags), b = without_timing(m, flags);
  EXPECT_EQ(a, b);
  auto other = flags;
  other.back() = "12";
  EXPECT_NE(a, without_timing(m, other));
}

TEST(InputShape, InferredInputsAreRepeatableToo) {
  const std::string m = nde2e::model("seq_ln.pt");
  EXPECT_EQ(without_timing(m, {"--seed", "2"}), without_timing(m, {"--seed", "2"}));
}

TEST(InputShape, ErrorsExitTwo) {
  struct Case {
    std::vector<std::string> flags;
    const char* message;
  };
  const std::vector<Case> cases{
      {{"--input-shape", "y=4x32"}, "'y' is not an argument of the model's forward(x: Tensor)"},
      {{"--input-shape", "4x32", "--input-shape", "4x32"}, "more specs than the model's forward(x: Tensor) takes"},
      {{"--input-shape", "x=4x32", "--input-shape", "x=4x16"}, "argument 'x' is already given by 'x=4x32'"},
      {{"--input-shape", "4xq"}, "--input-shape '4xq'"},
  };
  for (const auto& c : cases) {
    nde2e::TempDir tmp;
    auto r = nde2e::check(nde2e::model("growth20.pt"), {}, c.flags, tmp.file("r.json"));
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    nde2e::expect_error_report(r, "usage", c.message);
  }
  nde2e::TempDir tmp;
  auto r = nde2e::check(nde2e::model("seq_ln.pt"), {}, {"--input-shape", "x=2x12x16"}, tmp.file("r.json"));
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  nde2e::expect_error_report(r, "usage", "no spec for argument 'mask'");
}

}  // namespace

}  // namespace nd_test_infer_inputs_test
