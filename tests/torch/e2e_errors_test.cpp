// End to end: what a user sees when something is wrong. Each case runs the
// normdoctor binary and asserts the exit code (DESIGN.md: 2 usage, 3 model or
// inputs unusable), the message on stderr, and the JSON report a failed run
// still writes (status "error", error.kind, error.message). Then the exit
// code policy (--fail-on, --exit-zero) and byte-for-byte determinism.
//
// Bad models: fixtures/bad/ (written by fixtures/make_bad_models.py) and
// files made here at test time (random bytes, a truncated model). Bad batch
// files: fixtures/batches/ (README.md there lists the expected messages).
#include <gtest/gtest.h>

#include <caffe2/serialize/inline_container.h>
#include <torch/script.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "e2e_util.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_e2e_errors_test {

namespace {

using namespace nde2e;

/// A module with parameter w [3, 4] and the given forward, saved to `path`.
void save_module(const std::string& forward, const std::string& path) {
  torch::jit::Module m("__torch__.ErrorProbe");
  m.register_parameter("w", torch::ones({3, 4}).requires_grad_(), /*is_buffer=*/false);
  m.define(forward);
  m.eval();
  m.save(path);
}

// ------------------------------------------------------------ error table

struct ErrorCase {
  std::string name;
  /// Builds the argument list (after "check"); may write files into tmp.
  std::function<std::vector<std::string>(const TempDir& tmp)> args;
  int exit_code;
  std::string kind;  ///< error.kind of the JSON report
  std::vector<std::string> message_parts;  ///< each in error.message and on stderr
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

std::vector<std::string> model_with(const std::string& model_path, const std::string& input = bad("x.input.pt")) {
  return {model_path, "--input", input};
}

std::vector<ErrorCase> error_cases() {
  std::vector<ErrorCase> v;
  const auto fixed = [](std::vector<std::string> a) { return [a](const TempDir&) { return a; }; };

  // ---- the model file
  v.push_back({"missing_model", [](const TempDir& t) { return model_with(t.file("nothing_here.pt")); }, 3,
               "model_load", {"nothing_here.pt: no such file"}});
  v.push_back({"empty_model", fixed(model_with(batch("empty.pt"))), 3, "model_load",
               {batch("empty.pt") + ": is empty (0 bytes)"}});
  v.push_back({"random_bytes",
               [](const TempDir& t) {
                 std::mt19937 rng(1234);
                 std::string bytes(4096, '\0');
                 for (auto& b : bytes) b = static_cast<char>(rng() & 0xff);
                 bytes[0] = 'x';  // not a zip or pickle magic by chance
                 write_file(t.file("random.pt"), bytes);
                 return model_with(t.file("random.pt"));
               },
               3, "model_load", {"random.pt: is not a TorchScript model (not a zip archive)"}});
  v.push_back({"truncated_model",
               [](const TempDir& t) {
                 const std::string whole = read_file(model("growth20.pt"));
                 write_file(t.file("half.pt"), whole.substr(0, whole.size() / 2));
                 return model_with(t.file("half.pt"), model("growth20.input.pt"));
               },
               3, "model_load", {"half.pt: truncated or corrupt zip archive"}});
  v.push_back({"state_dict", fixed(model_with(bad("state_dict.pt"))), 3, "model_load",
               {bad("state_dict.pt") + ": is a state_dict", "torch.jit.script(model).save"}});
  v.push_back({"pickled_module", fixed(model_with(bad("pickled_module.pt"))), 3, "model_load",
               {bad("pickled_module.pt") + ": is a whole nn.Module pickled with torch.save (class __main__.Small)",
                "torch.jit.script(model).save"}});
  // torch.jit.save writes data.pkl first: a save that raised midway leaves
  // an archive whose data.pkl names __torch__ classes without constants.pkl
  // or code/ (eval19: read as "a whole nn.Module pickled" before).
  v.push_back({"incomplete_torchscript",
               [](const TempDir& t) {
                 caffe2::serialize::PyTorchStreamReader in(model("growth20.pt"));
                 caffe2::serialize::PyTorchStreamWriter out(t.file("incomplete.pt"));
                 for (const auto& name : in.getAllRecords()) {
                   if (name == "constants.pkl" || name.rfind("code/", 0) == 0 || name.rfind("constants/", 0) == 0 ||
                       name == "version" || name == ".data/version" || name == "byteorder")
                     continue;  // the writer adds its own version record
                   auto [data, size] = in.getRecord(name);
                   out.writeRecord(name, data.get(), size);
                 }
                 out.writeEndOfFile();
                 return model_with(t.file("incomplete.pt"), model("growth20.input.pt"));
               },
               3, "model_load",
               {"incomplete.pt: is an incomplete TorchScript archive: data.pkl names TorchScript class __torch__.",
                "constants.pkl and code/ are missing"}});
  v.push_back({"legacy_pickle_as_model", fixed(model_with(batch("legacy.pt"))), 3, "model_load",
               {batch("legacy.pt") + ": is a legacy (non-zip) torch.save pickle, not a TorchScript model"}});
  v.push_back({"batch_as_model", fixed(model_with(batch("tuple2.pt"))), 3, "model_load",
               {batch("tuple2.pt") + ": is a state_dict or other object saved with torch.save, not a TorchScript model"}});
  v.push_back({"no_forward", fixed(model_with(bad("no_forward.pt"))), 3, "model_load",
               {bad("no_forward.pt") + ": TorchScript module has no forward method"}});

  // ---- forward runs but fails, or returns no tensor
  v.push_back({"forward_raises", fixed(model_with(bad("raises.pt"))), 3, "model_run",
               {bad("raises.pt"), "normdoctor fixture: forward raises", "x=[4, 8] Float"}});
  v.push_back({"returns_none", fixed(model_with(bad("returns_none.pt"))), 3, "model_run",
               {"forward returned no tensor (None)"}});
  v.push_back({"returns_int", fixed(model_with(bad("returns_int.pt"))), 3, "model_run",
               {"forward returned no tensor (Int)"}});
  v.push_back({"wrong_shape", fixed(model_with(model("growth20.pt"), batch("tensor.pt"))), 3, "model_run",
               {model("growth20.pt"), "mat1 and mat2 shapes cannot be multiplied (2x3 and 32x32)", "x=[2, 3] Float"}});

  // ---- inputs that do not fit forward
  v.push_back({"too_many_arguments", fixed(model_with(model("growth20.pt"), batch("tuple2.pt"))), 3,
               "input_mismatch",
               {batch("tuple2.pt") + ": holds 2 tensors ([2, 3] Float, [4] Long)", "forward(x: Tensor) takes 1"}});
  v.push_back({"too_few_arguments",
               [](const TempDir& t) {
                 save_module("def forward(self, x, y):\n    return torch.mm(x, self.w) + y\n", t.file("two.pt"));
                 return model_with(t.file("two.pt"), batch("tensor.pt"));
               },
               2, "usage",
               {batch("tensor.pt") + ": holds 1 tensor ([2, 3] Float)", "forward(x: Tensor, y: Tensor) takes 2",
                "argument 'y'", "--input-shape y="}});
  v.push_back({"unknown_keyword", fixed(model_with(model("growth20.pt"), batch("dict2.pt"))), 3, "input_mismatch",
               {batch("dict2.pt") + ": key 'mask' is not an argument of the model's forward(x: Tensor)"}});
  v.push_back({"batches_disagree",
               fixed({model("growth20.pt"), "--input", model("growth20.input.pt"), "--input", model("nan_grad.input.pt")}),
               3, "input_mismatch", {model("nan_grad.input.pt") + ": argument 'x' is [8, 16] Float", "[8, 32] Float"}});

  // ---- bad checkpoints (--weights, --optimizer-state): weights_load, naming the file
  // (fixtures/checkpoints/, written by fixtures/make_checkpoints.py)
  const auto ckpt = [](const std::string& f) { return source_dir() + "/fixtures/checkpoints/" + f; };
  const auto mlp_with = [ckpt](std::vector<std::string> extra) {
    std::vector<std::string> a{ckpt("wrappers/mlp.pt"), "--input", ckpt("wrappers/mlp.input.pt")};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  v.push_back({"weights_missing_key", fixed(mlp_with({"--weights", ckpt("wrappers/missing_key.pt")})), 3, "weights_load",
               {ckpt("wrappers/missing_key.pt") + ": error(s) in loading state_dict into",
                "missing key(s) in state_dict: \"fc2.bias\"", "--weights-partial"}});
  v.push_back({"weights_unexpected_key", fixed(mlp_with({"--weights", ckpt("wrappers/unexpected_key.pt")})), 3,
               "weights_load", {"unexpected key(s) in state_dict: \"head.weight\""}});
  v.push_back({"weights_wrong_shape", fixed(mlp_with({"--weights", ckpt("wrappers/wrong_shape.pt")})), 3, "weights_load",
               {"size mismatch for fc2.weight: copying a param with shape [4, 12] from checkpoint, the shape in current "
                "model is [4, 16]"}});
  v.push_back({"weights_not_a_state_dict", fixed(mlp_with({"--weights", ckpt("wrappers/not_a_state_dict.pt")})), 3,
               "weights_load", {"not_a_state_dict.pt: holds no state_dict: a dict with keys 'epoch', 'lr', 'notes'"}});
  v.push_back({"weights_list", fixed(mlp_with({"--weights", ckpt("wrappers/list_of_tensors.pt")})), 3, "weights_load",
               {"list_of_tensors.pt: holds a list, not a state_dict"}});
  v.push_back({"weights_pickled_object", fixed(mlp_with({"--weights", ckpt("wrappers/pickled_object.ckpt")})), 3,
               "weights_load", {"pickled_object.ckpt", "contains a pickled Python object of class 'argparse.Namespace'"}});
  v.push_back({"weights_optimizer_state", fixed(mlp_with({"--weights", ckpt("lm/adamw/optim.pt")})), 3, "weights_load",
               {"is an optimizer state_dict ('state' and 'param_groups'), not model weights", "--optimizer-state"}});
  v.push_back({"weights_torchscript", fixed(mlp_with({"--weights", ckpt("wrappers/mlp.pt")})), 3, "weights_load",
               {"mlp.pt: is a TorchScript model (torch.jit.save), not a checkpoint"}});
  v.push_back({"weights_no_match", fixed(mlp_with({"--weights", ckpt("wrappers/step_*.pt")})), 3, "weights_load",
               {"wrappers/step_*.pt': no file matches the pattern"}});
  v.push_back({"weights_missing_file", fixed(mlp_with({"--weights", ckpt("wrappers/nothing.pt")})), 3, "weights_load",
               {"nothing.pt: no such file"}});
  v.push_back({"optimizer_state_mismatch",
               fixed(mlp_with({"--optimizer-state", ckpt("lm/adamw/optim.pt")})), 3, "weights_load",
               {"optim.pt: the optimizer state does not match", "its param_groups hold 37 parameters, the model 6"}});

  // ---- bad batch files: input_load, naming the file (fixtures/batches/README.md)
  const std::vector<std::pair<std::string, std::string>> bad_batches = {
      {"bad_json.safetensors", "safetensors header is not valid JSON"},
      {"truncated.safetensors", "tensor 'x': data_offsets end 12 is past the data region"},
      {"truncated.pt", "truncated"},
      {"custom_class.pt", "contains a pickled Python object of class '__main__.Batch'"},
      {"nested.pt", "element 1 of the list is a tuple: nested containers are not read"},
      {"non_tensor.pt", "dict value 'lr' is a float, not a tensor"},
      {"legacy.pt", "_use_new_zipfile_serialization=False"},
      {"legacy_protocol4.pt", "_use_new_zipfile_serialization=False"},
      {"plain_pickle.pkl", "is a plain Python pickle, not a torch.save archive"},
      {"torchscript.pt", "is a TorchScript model (torch.jit.save), not a batch"},
      {"numpy_array.pt", "torch.from_numpy"},
      {"empty.pt", "is empty (0 bytes)"},
      {"garbage.bin", "is neither a torch.save archive (zip) nor a .safetensors file"},
  };
  for (const auto& [file, part] : bad_batches) {
    std::string name = "bad_batch_" + file;
    for (auto& ch : name)
      if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
    v.push_back({name, fixed(model_with(model("growth20.pt"), batch(file))), 3, "input_load", {batch(file), part}});
  }
  v.push_back({"missing_batch", [](const TempDir& t) { return model_with(model("growth20.pt"), t.file("no_batch.pt")); },
               3, "input_load", {"no_batch.pt"}});

  // ---- more of issue 8's list (docs/bad-inputs.md)
  v.push_back({"wrong_dtype", fixed({model("growth20.pt"), "--input-shape", "8x32:int64:0..10"}), 3, "model_run",
               {model("growth20.pt"), "x=[8, 32] Long", "the model's parameters are Float"}});
  v.push_back({"empty_batch_shape", fixed({model("growth20.pt"), "--input-shape", "0x32"}), 2, "usage",
               {"--input-shape '0x32': dimension 0 must be at least 1"}});
  v.push_back({"empty_batch_file", fixed(model_with(model("growth20.pt"), batch("empty_batch.pt"))), 3, "input_mismatch",
               {batch("empty_batch.pt") + ": argument 'x' is [0, 32] Float, an empty batch (0 examples along axis 0)"}});
  v.push_back({"rule_file_syntax_error",
               [](const TempDir& t) {
                 fs::create_directories(t.file("rules"));
                 write_file(t.file("rules") + "/BAD001.toml", "id = \"BAD001\"\nseverity = \"warning\"\nwhen = [ { metric = \n");
                 return std::vector<std::string>{model("growth20.pt"), "--input", model("growth20.input.pt"),
                                                 "--rules-dir", t.file("rules")};
               },
               2, "rule_file", {"BAD001.toml:3", "TOML syntax error"}});
  v.push_back({"config_syntax_error",
               [](const TempDir& t) {
                 write_file(t.file("normdoctor.toml"), "fail_on = \"warning\"\n[rules\nseverity = 1\n");
                 return std::vector<std::string>{model("growth20.pt"), "--input", model("growth20.input.pt"),
                                                 "--config", t.file("normdoctor.toml")};
               },
               2, "config", {"normdoctor.toml:2", "TOML syntax error"}});
  v.push_back({"unknown_flag_value", fixed({model("growth20.pt"), "--input", model("growth20.input.pt"), "--fail-on", "bogus"}),
               2, "usage", {"--fail-on: bogus not in"}});
  v.push_back({"unknown_flag", fixed({model("growth20.pt"), "--input", model("growth20.input.pt"), "--no-such-flag"}), 2,
               "usage", {"--no-such-flag"}});
  v.push_back({"bad_input_shape_spec", fixed({model("growth20.pt"), "--input-shape", "8xbanana"}), 2, "usage",
               {"--input-shape"}});
  return v;
}

class ErrorRun : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ErrorRun, ExitCodeMessageAndErrorReport) {
  const ErrorCase& c = GetParam();
  TempDir tmp;
  std::vector<std::string> args{"check"};
  for (auto& a : c.args(tmp)) args.push_back(a);
  const NdRun r = run_nd(args, tmp.file("report.json"));
  EXPECT_EQ(r.exit_code, c.exit_code) << r.describe();
  for (const auto& part : c.message_parts)
    EXPECT_NE(r.err.find(part), std::string::npos) << "stderr lacks '" << part << "'\n" << r.describe();
  EXPECT_NE(r.err.find("normdoctor: error: "), std::string::npos) << r.describe();
  EXPECT_LT(r.err.size(), 3000u) << "a wall of text on stderr:\n" << r.err;
  EXPECT_EQ(r.err.find("Exception raised from"), std::string::npos) << "C++ frames leak to the user:\n" << r.err;
  EXPECT_TRUE(r.out.empty()) << "stdout: " << r.out;
  expect_error_report(r, c.kind, c.message_parts.empty() ? "" : c.message_parts.front());
  if (r.has_report) {
    for (const auto& part : c.message_parts)
      EXPECT_NE(r.report["error"].value("message", "").find(part), std::string::npos) << part;
    EXPECT_EQ(r.report.value("status", ""), "error");
  }
}

INSTANTIATE_TEST_SUITE_P(E2E, ErrorRun, ::testing::ValuesIn(error_cases()),
                         [](const ::testing::TestParamInfo<ErrorCase>& i) { return i.param.name; });

// Every model_run error names the model file, as the others name theirs
// (core/error.h: "The message names the file, layer or argument").
TEST(E2EErrors, ModelRunErrorsNameTheModel) {
  TempDir tmp;
  std::vector<std::string> missing;
  for (const char* f : {"raises.pt", "returns_none.pt", "returns_int.pt"}) {
    const NdRun r = check(bad(f), {bad("x.input.pt")}, {}, tmp.file(std::string(f) + ".json"));
    ASSERT_EQ(r.exit_code, 3) << r.describe();
    ASSERT_TRUE(r.has_report) << r.describe();
    if (r.report["error"].value("message", "").find(bad(f)) == std::string::npos) missing.push_back(f);
  }
  std::string list;
  for (const auto& m : missing) list += " " + m;
  EXPECT_TRUE(missing.empty()) << "model_run messages do not name the model file for:" << list;
}

// ------------------------------------------------------- other bad models

// Forward returns a tuple / list / dict: the loss takes the documented
// element, and the run is a normal one.
struct OutputCase {
  std::string file;
  std::string loss_on;  ///< the element named in probes.loss.description
};

class OutputContainer : public ::testing::TestWithParam<OutputCase> {};

TEST_P(OutputContainer, LossOnTheDocumentedElement) {
  const OutputCase& c = GetParam();
  TempDir tmp;
  const NdRun r = check(bad(c.file), {bad("x.input.pt")}, {}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report.value("status", ""), "ok") << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  const std::string desc = r.report.at("probes").at("loss").value("description", "");
  EXPECT_NE(desc.find(c.loss_on), std::string::npos) << desc;
  EXPECT_TRUE(r.report.at("findings").empty()) << r.report.at("findings").dump(2);
  const json* fc = find_layer(r.report, "fc");
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->at("metrics").value("grad.params_no_signal", -1), 0) << fc->dump(2);
  EXPECT_EQ(fc->at("metrics").value("act.calls", -1), 1);
}

INSTANTIATE_TEST_SUITE_P(E2E, OutputContainer,
                         ::testing::Values(OutputCase{"returns_tuple.pt", "output[0]"},
                                           OutputCase{"returns_list.pt", "output[0]"},
                                           OutputCase{"returns_dict.pt", "output[logits]"}),
                         [](const ::testing::TestParamInfo<OutputCase>& i) {
                           return i.param.file.substr(0, i.param.file.find('.'));
                         });

// A model without parameters: nothing to train, but nothing wrong with the
// run either: it completes (never an internal error), with no finding.
TEST(E2EErrors, NoParametersRunsCleanly) {
  TempDir tmp;
  const NdRun r = check(bad("no_params.pt"), {bad("x.input.pt")}, {}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_NE(r.exit_code, 4) << r.describe();
  ASSERT_EQ(r.report.value("status", ""), "ok") << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.report.at("model").value("parameters", -1), 0);
  EXPECT_TRUE(r.report.at("findings").empty()) << r.report.at("findings").dump(2);
}

// ------------------------------------------------------------ -o checks

// -o is checked before any work: with a missing model AND a bad -o, the
// usage error (2) wins over the model error (3), and nothing is loaded.
TEST(E2EOutput, UnwritableOutputFailsBeforeAnyWork) {
  TempDir tmp;
  const std::string out = tmp.file("no_such_dir") + "/report.json";
  const NdRun r = run_nd({"check", tmp.file("missing_model.pt"), "--input", bad("x.input.pt"), "--format", "json",
                        "-o", out});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("-o " + out + ": folder " + tmp.file("no_such_dir") + " does not exist"), std::string::npos)
      << r.describe();
  EXPECT_EQ(r.err.find("missing_model.pt"), std::string::npos) << "the model was looked at:\n" << r.describe();
  EXPECT_FALSE(fs::exists(out));
}

TEST(E2EOutput, UnwritableOutputWithARealModelReturnsFast) {
  const std::string big = real_models_dir() + "/tv_mobilenet_v3_small.pt";
  const std::string in = real_models_dir() + "/tv_mobilenet_v3_small.input.pt";
  const std::string pt = fs::exists(big) ? big : model("resnet_nonorm.pt");
  const std::string input = fs::exists(big) ? in : model("resnet_nonorm.input.pt");
  TempDir tmp;
  const NdRun bad_o = run_nd({"check", pt, "--input", input, "--format", "json", "-o", tmp.file("nodir") + "/r.json"});
  EXPECT_EQ(bad_o.exit_code, 2) << bad_o.describe();
  const NdRun version = run_nd({"--version"});
  ASSERT_EQ(version.exit_code, 0) << version.describe();
  // Start-up (loading LibTorch) is all it may cost: well under a full run.
  EXPECT_LT(bad_o.seconds, version.seconds + 3.0) << "bad -o took " << bad_o.seconds << " s, --version "
                                                  << version.seconds << " s";
}

TEST(E2EOutput, DirectoryAsOutput) {
  TempDir tmp;
  const NdRun r = run_nd({"check", model("growth20.pt"), "--input", model("growth20.input.pt"), "--format", "json",
                        "-o", tmp.path().string()});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find(": is a directory, expected a file path"), std::string::npos) << r.describe();
}

TEST(E2EUsage, BadFlagValuesExitTwo) {
  const NdRun r1 = run_nd({"check", model("growth20.pt"), "--input", model("growth20.input.pt"), "--fail-on", "bogus"});
  EXPECT_EQ(r1.exit_code, 2) << r1.describe();
  EXPECT_NE(r1.err.find("--fail-on"), std::string::npos) << r1.describe();
  const NdRun r2 = run_nd({"check", model("growth20.pt"), "--no-such-flag"});
  EXPECT_EQ(r2.exit_code, 2) << r2.describe();
  EXPECT_NE(r2.err.find("--no-such-flag"), std::string::npos) << r2.describe();
}

// ------------------------------------------------------ --fail-on policy

/// A model whose only finding is GRAD005 (info): its last layer's weight is
/// all zeros, so the layer before it gets exactly zero gradient.
std::string save_info_only_model(const TempDir& tmp) {
  auto sub = [](const std::string& name, at::Tensor w) {
    torch::jit::Module m("__torch__." + name);
    m.register_parameter("weight", w.requires_grad_(), false);
    m.define("def forward(self, x):\n    return torch.mm(x, self.weight)\n");
    return m;
  };
  torch::jit::Module root("__torch__.ZeroHead");
  root.register_module("body", sub("Body", torch::eye(3) * 0.5));
  root.register_module("head", sub("Head", torch::zeros({3, 2})));
  root.define("def forward(self, x):\n    return self.head.forward(self.body.forward(x))\n");
  root.eval();
  const std::string p = tmp.file("zero_head.pt");
  root.save(p);
  return p;
}

struct FailOnCase {
  std::string name;
  std::string fixture;  ///< "" = the info-only model built in the test
  std::vector<std::string> flags;
  int exit_code;
};

void PrintTo(const FailOnCase& c, std::ostream* os) { *os << c.name; }

class FailOn : public ::testing::TestWithParam<FailOnCase> {};

TEST_P(FailOn, ExitCode) {
  const FailOnCase& c = GetParam();
  TempDir tmp;
  const std::string pt = c.fixture.empty() ? save_info_only_model(tmp) : model(c.fixture + ".pt");
  const std::string in = c.fixture.empty() ? batch("tensor.pt") : model(c.fixture + ".input.pt");
  const NdRun r = check(pt, {in}, c.flags, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report.value("status", ""), "ok") << r.describe();
  EXPECT_EQ(r.exit_code, c.exit_code) << r.describe();
  EXPECT_EQ(r.report.value("exit_code", -1), c.exit_code);
  // What is reported does not depend on what fails the build.
  std::set<std::string> sev;
  for (const auto& f : r.report.at("findings")) sev.insert(f.value("severity", ""));
  if (c.fixture == "growth20") {
    EXPECT_EQ(sev, (std::set<std::string>{"warning"}));
  }
  if (c.fixture == "nan_forward") {
    EXPECT_TRUE(sev.count("error"));
  }
  if (c.fixture.empty()) {
    EXPECT_EQ(sev, (std::set<std::string>{"info"})) << r.report.at("findings").dump(2);
    ASSERT_EQ(r.report.at("findings").size(), 1u) << r.report.at("findings").dump(2);
    EXPECT_EQ(r.report["findings"][0].value("rule_id", ""), "GRAD005");
    EXPECT_EQ(r.report["findings"][0].at("evidence").value("grad.zero_weight_layer", ""), "head");
  }
  if (c.fixture.find("healthy") != std::string::npos) {
    EXPECT_TRUE(sev.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    E2E, FailOn,
    ::testing::Values(
        // warnings only (ACT002, ACT003, GRAD002)
        FailOnCase{"warnings_default", "growth20", {}, 1},  // --fail-on warning is the default
        FailOnCase{"warnings_info", "growth20", {"--fail-on", "info"}, 1},
        FailOnCase{"warnings_warning", "growth20", {"--fail-on", "warning"}, 1},
        FailOnCase{"warnings_error", "growth20", {"--fail-on", "error"}, 0},
        FailOnCase{"warnings_never", "growth20", {"--fail-on", "never"}, 0},
        FailOnCase{"warnings_info_exit_zero", "growth20", {"--fail-on", "info", "--exit-zero"}, 0},
        // an error finding (ACT001)
        FailOnCase{"error_default", "nan_forward", {}, 1},
        FailOnCase{"error_warning", "nan_forward", {"--fail-on", "warning"}, 1},
        FailOnCase{"error_never", "nan_forward", {"--fail-on", "never"}, 0},
        FailOnCase{"error_exit_zero", "nan_forward", {"--exit-zero"}, 0},
        // an info finding only (GRAD005)
        FailOnCase{"info_info", "", {"--fail-on", "info"}, 1},
        FailOnCase{"info_warning", "", {"--fail-on", "warning"}, 0},
        // nothing found
        FailOnCase{"healthy_info", "growth20_healthy", {"--fail-on", "info"}, 0}),
    [](const ::testing::TestParamInfo<FailOnCase>& i) { return i.param.name; });

// --exit-zero never hides a failure of the tool itself.
TEST(E2EFailOn, ExitZeroKeepsToolErrors) {
  TempDir tmp;
  const NdRun r = check(bad("state_dict.pt"), {bad("x.input.pt")}, {"--exit-zero"}, tmp.file("r.json"));
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  expect_error_report(r, "model_load", "state_dict");
}

// ----------------------------------------------------------- determinism

/// The report text before the top-level "timing" key (the last one).
std::string before_timing(const std::string& text) {
  const auto pos = text.find("\n  \"timing\":");
  return pos == std::string::npos ? text : text.substr(0, pos);
}

TEST(E2EDeterminism, SameSeedSameBytesApartFromTiming) {
  TempDir tmp;
  for (const std::string fixture : {"tiny_cnn", "growth20"}) {
    SCOPED_TRACE(fixture);
    const NdRun a = check(model(fixture + ".pt"), {model(fixture + ".input.pt")}, {"--seed", "7"}, tmp.file(fixture + "_a.json"));
    const NdRun b = check(model(fixture + ".pt"), {model(fixture + ".input.pt")}, {"--seed", "7"}, tmp.file(fixture + "_b.json"));
    ASSERT_TRUE(a.has_report && b.has_report) << a.describe() << b.describe();
    ASSERT_EQ(a.report.value("status", ""), "ok");
    EXPECT_EQ(a.exit_code, b.exit_code);
    const std::string ta = read_file(tmp.file(fixture + "_a.json")), tb = read_file(tmp.file(fixture + "_b.json"));
    const auto pa = ta.find("\n  \"timing\":");
    ASSERT_NE(pa, std::string::npos) << "no top-level timing key";
    // "timing" is the last top-level key (indent 2): everything else is before it.
    EXPECT_EQ(ta.find("\n  \"", pa + 1), std::string::npos) << "a top-level key after \"timing\"";
    EXPECT_EQ(before_timing(ta), before_timing(tb)) << "reports differ outside \"timing\"";
    json ja = a.report, jb = b.report;
    ja.erase("timing");
    jb.erase("timing");
    EXPECT_EQ(ja, jb);
    EXPECT_EQ(a.report.at("options").value("seed", -1), 7);
  }
}

// The seed is used: a different seed changes the random loss, not the
// forward measurements.
TEST(E2EDeterminism, SeedChangesOnlyTheRandomParts) {
  TempDir tmp;
  const NdRun a = check(model("tiny_cnn.pt"), {model("tiny_cnn.input.pt")}, {"--seed", "1"}, tmp.file("a.json"));
  const NdRun b = check(model("tiny_cnn.pt"), {model("tiny_cnn.input.pt")}, {"--seed", "2"}, tmp.file("b.json"));
  ASSERT_TRUE(a.has_report && b.has_report) << a.describe() << b.describe();
  const json& la = a.report.at("probes").at("loss");
  const json& lb = b.report.at("probes").at("loss");
  EXPECT_NE(la.at("value"), lb.at("value")) << "the seed does not reach the loss";
  const json* fa = find_layer(a.report, "features.0");
  const json* fb = find_layer(b.report, "features.0");
  ASSERT_TRUE(fa && fb);
  EXPECT_EQ(fa->at("metrics").at("act.rms"), fb->at("metrics").at("act.rms"));
  EXPECT_EQ(a.report.at("findings"), b.report.at("findings"));
}

// ------------------------------------------------- issue 8: reliability

// A model file that exists but cannot be read. Root reads any file, so as
// root (CI) the binary runs as the ordinary user nobody (setpriv, from
// util-linux, which the Debian machines have), in a folder it may write to.
TEST(E2EErrors, UnreadableModel) {
  TempDir tmp;
  std::string prefix;
  if (::geteuid() == 0) {
    if (std::system("setpriv --version >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "running as root without setpriv (util-linux) to run as an ordinary user";
    fs::permissions(tmp.path(), fs::perms::all);
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups";
    // The checkout must be one an ordinary user can reach (a clone under
    // /root is not): otherwise the case cannot be made here.
    const std::string probe = prefix + " " + nde2e::shell_quote(nde2e::binary()) + " --version >/dev/null 2>&1 && " +
                              prefix + " test -r " + nde2e::shell_quote(model("growth20.input.pt"));
    if (std::system(probe.c_str()) != 0)
      GTEST_SKIP() << "running as root in a checkout the user nobody cannot read (" << nde2e::binary()
                   << "): a chmod 000 file is still readable to root";
  }
  const std::string pt = tmp.file("locked.pt");
  write_file(pt, read_file(model("growth20.pt")));
  fs::permissions(pt, fs::perms::none);
  const NdRun r = run_nd({"check", pt, "--input", model("growth20.input.pt")}, tmp.file("r.json"), prefix);
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  expect_error_report(r, "model_load", "locked.pt: cannot be read");
}

// NaN/Inf in the batch is a finding (IN001, severity error), not an error of
// the tool: status ok, exit 1 (an error fails at the default --fail-on warning).
TEST(E2EErrors, NanInTheBatchIsAFinding) {
  TempDir tmp;
  const NdRun r = check(model("tiny_cnn.pt"), {model("tiny_cnn.nan.input.pt")}, {}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_EQ(r.report.value("status", ""), "ok") << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  bool in001 = false;
  for (const auto& f : r.report.at("findings"))
    if (f.value("rule_id", "") == "IN001" && f.value("failure_mode", "") == "nonfinite-input") in001 = true;
  EXPECT_TRUE(in001) << r.report.at("findings").dump(2);
}

// A batch of one runs: BatchNorm layers get the bn-batch-of-one finding
// (e2e_normalization_test: BN010 on this eval-mode checkpoint, BN006 with
// --train-batch-size 1), a model without BatchNorm a normal report.
TEST(E2EErrors, BatchOfOneRuns) {
  TempDir tmp;
  const NdRun r = check(model("growth20.pt"), {}, {"--input-shape", "1x32"}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_EQ(r.report.value("status", ""), "ok") << r.describe();
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe();
  const NdRun bn = check(model("bn_batch_of_one.pt"), {model("bn_batch_of_one.input.pt")}, {}, tmp.file("bn.json"));
  ASSERT_TRUE(bn.has_report) << bn.describe();
  EXPECT_EQ(bn.report.value("status", ""), "ok") << bn.describe();
  bool batch_of_one = false;
  for (const auto& f : bn.report.at("findings"))
    if (f.value("failure_mode", "") == "bn-batch-of-one") batch_of_one = true;
  EXPECT_TRUE(batch_of_one) << bn.report.at("findings").dump(2);
}

// Integer tensors out (class ids, token ids): no gradient can flow, but the
// model runs: the forward-only probes run, the gradients are skipped with
// the reason (issue 15), exit 0/1.
TEST(E2EErrors, IntegerTensorOutputRunsTheForwardProbes) {
  TempDir tmp;
  save_module("def forward(self, x):\n    return torch.mm(x, self.w).long()\n", tmp.file("int_out.pt"));
  const NdRun r = check(tmp.file("int_out.pt"), {batch("tensor.pt")}, {}, tmp.file("r.json"));
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe();
  ASSERT_TRUE(r.has_report) << r.describe();
  EXPECT_EQ(r.report.value("status", ""), "ok");
  const json& g = r.report.at("probes").at("gradients");
  EXPECT_EQ(g.value("status", ""), "skipped") << g.dump();
  EXPECT_NE(g.value("reason", "").find("forward returned only integer or bool tensors"), std::string::npos) << g.dump();
  EXPECT_NE(g.value("reason", "").find("no gradient can flow"), std::string::npos) << g.dump();
  EXPECT_EQ(r.report.at("probes").at("normalization").value("status", ""), "ok");
}

// An Adafactor state (factored second moments, T5 fine-tuning's optimizer)
// is no Adam or SGD state: the check runs without it, exit 0 as for the same
// model and target without the flag, and the optimizer_state probe is listed
// among those that could not run, naming the state's keys (exit 3 before:
// eval18). Fixture: make_fixtures_round3.py, adafactor_state.
TEST(E2EErrors, UnsupportedOptimizerStateIsSetAside) {
  const std::string dir = source_dir() + "/fixtures/models/round3/";
  const std::string name = "r19_bag_adafactor";
  const std::vector<std::string> flags = {"--optimizer-state", dir + name + ".optim.pt", "--target", dir + name + ".target.pt"};
  const FixtureRun run = run_fixture(dir + name + ".pt", dir + name + ".input.pt", flags, TORCH_VERSION_MAJOR < 2);
  if (!run.skip.empty()) GTEST_SKIP() << run.skip;
  const json& rep = run.report;
  EXPECT_EQ(rep.value("status", ""), "ok");
  EXPECT_TRUE(serious_findings(rep).empty()) << rep.at("findings").dump(1);
  const json& os = rep.at("probes").at("optimizer_state");
  EXPECT_EQ(os.value("status", ""), "error") << os.dump(1);
  EXPECT_EQ(os.at("error").value("kind", ""), "weights_load");
  const std::string msg = os.at("error").value("message", "");
  for (const std::string key : {"row_var", "col_var", "step", "is neither Adam's (exp_avg, exp_avg_sq) nor SGD's momentum_buffer"})
    EXPECT_NE(msg.find(key), std::string::npos) << msg;
  if (rep.at("probes").contains("update")) {
    EXPECT_EQ(rep.at("probes").at("update").value("formula", "").find("saved optimizer"), std::string::npos);
  }
  std::vector<std::string> args = {"check", dir + name + ".pt", "--input", dir + name + ".input.pt"};
  args.insert(args.end(), flags.begin(), flags.end());
  const NdRun text = run_nd(args);
  EXPECT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_NE(text.out.find("optimizer_state"), std::string::npos) << text.describe();
  EXPECT_NE(text.out.find("neither Adam's"), std::string::npos) << text.describe();
}

// A classifier that returns argmax ids and standardizes its features with the
// batch's statistics in eval mode too (a hand-written BatchNorm without
// running statistics): batch dependence is measured on the ids (the share
// that change when an example runs alone), not read as 0. Its twin
// standardizes each example by its own statistics: no ids change.
TEST(E2EErrors, IdOutputsStillShowBatchDependence) {
  TempDir tmp;
  save_module("def forward(self, x):\n"
              "    h = torch.cat([x, torch.mm(x, self.w)], 1)\n"
              "    h = (h - h.mean(0, keepdim=True)) / (h.std(0, keepdim=True) + 1e-05)\n"
              "    return torch.argmax(h, 1)\n",
              tmp.file("ids_batch.pt"));
  save_module("def forward(self, x):\n"
              "    h = torch.cat([x, torch.mm(x, self.w)], 1)\n"
              "    h = (h - h.mean(1, keepdim=True)) / (h.std(1, keepdim=True) + 1e-05)\n"
              "    return torch.argmax(h, 1)\n",
              tmp.file("ids_example.pt"));
  const NdRun r = check(tmp.file("ids_batch.pt"), {}, {"--input-shape", "8x3"}, tmp.file("r.json"));
  ASSERT_TRUE(r.has_report) << r.describe();
  const json& mm = r.report.at("probes").at("model_metrics");
  EXPECT_GT(nde2e::as_number(mm.at("batchdep.max_rel_diff")), 0.1) << mm.dump();
  bool bn005 = false;
  for (const auto& f : r.report.at("findings")) bn005 = bn005 || f.value("rule_id", "") == "BN005";
  EXPECT_TRUE(bn005) << r.report.at("findings").dump(1);
  const NdRun t = check(tmp.file("ids_example.pt"), {}, {"--input-shape", "8x3"}, tmp.file("t.json"));
  ASSERT_TRUE(t.has_report) << t.describe();
  EXPECT_EQ(nde2e::as_number(t.report.at("probes").at("model_metrics").at("batchdep.max_rel_diff")), 0.0);
  for (const auto& f : t.report.at("findings")) EXPECT_NE(f.value("rule_id", ""), "BN005") << f.dump();
}

/// A model whose forward runs for hours: a scripted loop over a tiny tensor.
std::string save_endless_model(const TempDir& tmp) {
  const std::string p = tmp.file("endless.pt");
  save_module(
      "def forward(self, x):\n"
      "    y = torch.mm(x, self.w)\n"
      "    for _ in range(2000000000):\n"
      "        y = y * 1.0\n"
      "    return y\n",
      p);
  return p;
}

// --timeout inside a pass that never returns: the watchdog ends the process
// at the deadline with exit 3 and every report asked for (JSON and SARIF),
// written whole (no temporary file left), naming the probe and the pass.
TEST(E2ETimeout, HardTimeoutInsideAForwardPass) {
  TempDir models, out;
  const std::string pt = save_endless_model(models);
  const NdRun r = check(pt, {batch("tensor.pt")}, {"--timeout", "1", "--format", "sarif", "-o", out.file("r.sarif")},
                        out.file("r.json"));
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  // Generous: start-up, loading, one second, writing. Not a timing test.
  EXPECT_LT(r.seconds, 30.0) << r.describe();
  expect_error_report(r, "timeout", "--timeout 1 s passed during the forward_backward probe (train pass");
  EXPECT_NE(r.err.find("--timeout 1 s passed"), std::string::npos) << r.describe();
  const json sarif = json::parse(read_file(out.file("r.sarif")));
  EXPECT_EQ(sarif.at("runs").at(0).at("invocations").at(0).value("executionSuccessful", true), false) << sarif.dump(2);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(out.path())) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"r.json", "r.sarif"})) << "half-written or temporary files left";
}

// A report on stdout is written whole too.
TEST(E2ETimeout, HardTimeoutWithTheReportOnStdout) {
  TempDir models;
  const std::string pt = save_endless_model(models);
  const NdRun r = run_nd({"check", pt, "--input", batch("tensor.pt"), "--timeout", "1", "--format", "json"});
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  EXPECT_LT(r.seconds, 30.0) << r.describe();
  json j;
  ASSERT_NO_THROW(j = json::parse(r.out)) << r.describe();
  EXPECT_EQ(j.value("status", ""), "error");
  EXPECT_EQ(j.at("error").value("kind", ""), "timeout");
}

// --timeout is a non-negative number of seconds.
TEST(E2ETimeout, NegativeTimeoutIsAUsageError) {
  const NdRun r = run_nd({"check", model("growth20.pt"), "--input", model("growth20.input.pt"), "--timeout", "-1"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("--timeout"), std::string::npos) << r.describe();
}

// A pass that cannot get its memory: out_of_memory (exit 3) naming the pass,
// the input shapes and what to do. The process runs under a 6 GiB address
// space limit (prlimit); the pass asks for 40 GB ([100000, 3] x [3, 100000]).
TEST(E2EOutOfMemory, PassThatCannotAllocate) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow memory: it cannot start under an address-space limit";
#endif
  if (std::system("prlimit --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "prlimit (util-linux) is not installed";
  TempDir tmp;
  const std::string pt = tmp.file("wide.pt");
  {
    torch::jit::Module m("__torch__.Wide");
    m.register_parameter("w", torch::ones({3, 100000}).requires_grad_(), false);
    m.define("def forward(self, x):\n    return torch.mm(x, self.w)\n");
    m.eval();
    m.save(pt);
  }
  const NdRun r = run_nd({"check", pt, "--input-shape", "100000x3"}, tmp.file("r.json"), "prlimit --as=6442450944");
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  expect_error_report(r, "out_of_memory", "out of memory in the train pass of the forward_backward probe");
  const std::string msg = r.has_report ? r.report["error"].value("message", "") : "";
  EXPECT_NE(msg.find("x=[100000, 3] Float"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--input-shape"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tried to allocate"), std::string::npos) << msg;
}

// ------------------------------------------- docs/bad-inputs.md stays true

/// The rows of the first Markdown table in docs/bad-inputs.md whose first
/// cell is not a header: the cells, trimmed.
std::vector<std::vector<std::string>> doc_rows(const std::string& heading) {
  std::istringstream in(read_file(source_dir() + "/docs/bad-inputs.md"));
  std::vector<std::vector<std::string>> rows;
  std::string line;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## " + heading;
    if (!in_section || line.rfind("|", 0) != 0 || line.rfind("|---", 0) == 0 || line.rfind("| bad input", 0) == 0) continue;
    std::vector<std::string> cells;
    std::string cell;
    for (size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '|' && line[i - 1] != '\\') {
        const auto b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
        cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
        cell.clear();
      } else if (line[i] != '\\' || i + 1 >= line.size() || line[i + 1] != '|') {
        cell += line[i];
      }
    }
    rows.push_back(cells);
  }
  return rows;
}

/// The `backticked` parts of a cell.
std::vector<std::string> code_spans(const std::string& cell) {
  std::vector<std::string> v;
  for (size_t a = cell.find('`'); a != std::string::npos; a = cell.find('`', a + 1)) {
    const size_t b = cell.find('`', a + 1);
    if (b == std::string::npos) break;
    v.push_back(cell.substr(a + 1, b - a - 1));
    a = b;
  }
  return v;
}

bool test_registered(const std::string& full) {
  const auto* ut = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < ut->total_test_suite_count(); ++i) {
    const auto* suite = ut->GetTestSuite(i);
    for (int j = 0; j < suite->total_test_count(); ++j) {
      const std::string name = std::string(suite->name()) + "." + suite->GetTestInfo(j)->name();
      if (name == full) return true;
    }
  }
  return false;
}

// Every bad input of issue 8 has a row; every row names a test of this file
// that exists and, for the ErrorRun table, asserts the row's exit code,
// error kind and message. The doc cannot drift from the tests.
TEST(E2EBadInputsDoc, EveryRowHasAMatchingTest) {
  const auto rows = doc_rows("Errors");
  ASSERT_GE(rows.size(), 30u) << "docs/bad-inputs.md: the Errors table is missing or short";
  const auto cases = error_cases();
  std::set<std::string> named;
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 5u) << "row needs 5 cells (bad input, exit, kind, message, test): " << row.at(0);
    SCOPED_TRACE(row[0]);
    named.insert(row[0].substr(0, row[0].find(" (")));
    const int exit_code = std::stoi(row[1]);
    EXPECT_TRUE(exit_code == 2 || exit_code == 3) << "an error row must exit 2 or 3, never 0 or by a signal";
    const std::string kind = code_spans(row[2]).empty() ? "" : code_spans(row[2]).front();
    const auto tests = code_spans(row[4]);
    ASSERT_FALSE(tests.empty()) << "no test named";
    for (const auto& t : tests) {
      if (t.rfind("ErrorRun/", 0) == 0) {
        const std::string name = t.substr(9);
        auto c = std::find_if(cases.begin(), cases.end(), [&](const ErrorCase& e) { return e.name == name; });
        ASSERT_NE(c, cases.end()) << "no ErrorRun case " << name;
        EXPECT_EQ(c->exit_code, exit_code) << t;
        EXPECT_EQ(c->kind, kind) << t;
        std::string parts;
        for (const auto& p : c->message_parts) parts += p + "\n";
        for (const auto& frag : code_spans(row[3]))
          EXPECT_NE(parts.find(frag), std::string::npos) << t << " does not assert the message part '" << frag << "'";
      } else {
        EXPECT_TRUE(test_registered(t)) << "no test " << t << " in " << __FILE__;
      }
    }
  }
  // The list, in its words (the first cell of a row, before " (").
  for (const char* item :
       {"model file missing", "model file unreadable", "model file empty", "model file of random bytes",
        "truncated zip", "zip that is not TorchScript", "state_dict saved with torch.save",
        "whole nn.Module pickled with torch.save", "TorchScript without a forward method", "forward raises",
        "forward returns None", "forward returns an integer",
        "wrong number of arguments", "wrong shape", "wrong dtype", "empty batch",
        "safetensors file with a corrupt header", "pickle with unsupported content", "unwritable -o path",
        "rule file with a syntax error", "config file with a syntax error", "unknown flag value",
        "--timeout passed", "out of memory in a pass"})
    EXPECT_EQ(named.count(item), 1u) << "docs/bad-inputs.md has no row '" << item << "'";

  // The inputs that are not errors: each row names a test of this file.
  const auto ok_rows = doc_rows("Not errors");
  ASSERT_GE(ok_rows.size(), 5u);
  for (const auto& row : ok_rows)
    for (const auto& t : code_spans(row.back())) EXPECT_TRUE(test_registered(t)) << "no test " << t;
}

}  // namespace

}  // namespace nd_test_e2e_errors_test
