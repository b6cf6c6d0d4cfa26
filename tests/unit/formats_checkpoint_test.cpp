// The checkpoint reader (src/formats/checkpoint.h) on the data.pkl records of
// the checkpoint fixtures (fixtures/make_checkpoints.py, copied to the fuzz
// seed corpus tests/fuzz/corpus/fuzz_checkpoint), shard indexes and names.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "formats/checkpoint.h"
#include "formats/pickle.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_formats_checkpoint_test {

namespace {

namespace fs = std::filesystem;
using namespace nd::formats;

PickleValue corpus(const std::string& name) {
  const std::string bytes = ndtest::read_file(ndtest::source_dir() / "tests" / "fuzz" / "corpus" / "fuzz_checkpoint" / name);
  return parse_torch_pickle(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name);
}

std::vector<std::string> keys(const StateDictView& v) {
  std::vector<std::string> k;
  for (const auto& t : v.tensors) k.push_back(t.key);
  return k;
}

const std::vector<std::string> kMlpKeys = {"fc1.weight", "fc1.bias", "norm.weight", "norm.bias", "fc2.weight", "fc2.bias"};

std::string error_of(const std::function<void()>& f, std::string* kind = nullptr) {
  try {
    f();
  } catch (const nd::Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CheckpointFormat, PlainStateDict) {
  const auto v = find_state_dict(corpus("wrappers_state_dict_pt.pkl"), "state_dict.pt");
  EXPECT_EQ(v.container, "the file's root (a state_dict)");
  EXPECT_EQ(keys(v), kMlpKeys);
  EXPECT_EQ(v.tensors[0].ref.sizes, (std::vector<int64_t>{16, 8}));
  EXPECT_TRUE(v.skipped.empty());
}

TEST(CheckpointFormat, Wrappers) {
  const auto l = find_state_dict(corpus("wrappers_lightning_ckpt.pkl"), "lightning.ckpt");
  EXPECT_EQ(l.container, "dict['state_dict'] (Lightning checkpoint)");
  EXPECT_EQ(l.tensors.front().key, "model.fc1.weight");  // prefixes are resolved against the model (src/model)
  EXPECT_EQ(find_state_dict(corpus("wrappers_model_state_dict_pt.pkl"), "m").container, "dict['model_state_dict']");
  EXPECT_EQ(find_state_dict(corpus("wrappers_model_key_pt.pkl"), "m").container, "dict['model']");
  EXPECT_EQ(find_state_dict(corpus("wrappers_module_key_pt.pkl"), "m").container, "dict['module']");
  EXPECT_EQ(find_state_dict(corpus("wrappers_ddp_pt.pkl"), "m").tensors.front().key, "module.fc1.weight");
  EXPECT_EQ(find_state_dict(corpus("wrappers_compiled_pt.pkl"), "m").tensors.front().key, "_orig_mod.fc1.weight");
  EXPECT_EQ(find_state_dict(corpus("wrappers_bf16_pt.pkl"), "m").tensors.front().ref.dtype, DType::kBFloat16);
  // A real training state_dict, with BatchNorm-free LayerNorms and an OrderedDict's _metadata.
  EXPECT_EQ(find_state_dict(corpus("diverge_step_0005_pt.pkl"), "m").tensors.size(), 37u);
}

TEST(CheckpointFormat, NotAStateDict) {
  std::string kind;
  EXPECT_NE(error_of([] { find_state_dict(corpus("wrappers_not_a_state_dict_pt.pkl"), "x.pt"); }, &kind)
                .find("x.pt: holds no state_dict: a dict with keys 'epoch', 'lr', 'notes'"),
            std::string::npos);
  EXPECT_EQ(kind, "weights_load");
  EXPECT_NE(error_of([] { find_state_dict(corpus("wrappers_list_of_tensors_pt.pkl"), "l.pt"); }).find("holds a list, not a state_dict"),
            std::string::npos);
  EXPECT_NE(error_of([] { find_state_dict(corpus("adamw_optim_pt.pkl"), "o.pt"); }).find("is an optimizer state_dict"),
            std::string::npos);
  EXPECT_NE(error_of([] { find_optimizer_state(corpus("wrappers_state_dict_pt.pkl"), "w.pt"); }).find("is a model state_dict"),
            std::string::npos);
}

TEST(CheckpointFormat, AdamWState) {
  const auto o = find_optimizer_state(corpus("adamw_optim_pt.pkl"), "optim.pt");
  EXPECT_EQ(o.container, "the file's root");
  EXPECT_EQ(o.kind, "adam");
  ASSERT_EQ(o.groups.size(), 1u);
  EXPECT_EQ(o.groups[0].params.size(), 37u);
  EXPECT_DOUBLE_EQ(o.groups[0].numbers.at("lr"), 1e-3);
  EXPECT_DOUBLE_EQ(o.groups[0].numbers.at("eps"), 1e-8);
  EXPECT_DOUBLE_EQ(o.groups[0].numbers.at("weight_decay"), 0.1);
  EXPECT_DOUBLE_EQ(*o.groups[0].beta2, 0.95);
  ASSERT_EQ(o.state.size(), 37u);
  EXPECT_EQ(o.state[0].index, 0);
  EXPECT_TRUE(o.state[0].tensors.count("exp_avg_sq"));
  EXPECT_TRUE(o.state[0].tensors.at("step").sizes.empty());  // a 0-d tensor since PyTorch 1.12
  const auto m = find_optimizer_state(corpus("diverge_optim_last_finite_pt.pkl"), "optim.pt");
  EXPECT_EQ(m.kind, "sgd_momentum");
  EXPECT_DOUBLE_EQ(m.groups[0].numbers.at("momentum"), 0.9);
}

TEST(CheckpointFormat, ShardIndex) {
  const auto map = parse_shard_index(ndtest::read_file(ndtest::source_dir() / "tests/fuzz/corpus/fuzz_checkpoint/model_safetensors_index.json"), "i.json");
  EXPECT_EQ(map.size(), 6u);
  EXPECT_EQ(map.at("fc1.weight"), "model-00001-of-00002.safetensors");
  EXPECT_EQ(map.at("fc2.bias"), "model-00002-of-00002.safetensors");
  EXPECT_NE(error_of([] { parse_shard_index(R"({"weight_map": {"a": "../etc/passwd"}})", "i.json"); }).find("outside the index's folder"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_shard_index(R"({"metadata": {}})", "i.json"); }).find("no \"weight_map\""), std::string::npos);
  EXPECT_NE(error_of([] { parse_shard_index("{", "i.json"); }).find("is not valid JSON"), std::string::npos);
}

TEST(CheckpointFormat, StepFromName) {
  EXPECT_EQ(step_from_name("ckpts/step_400.pt"), 400);
  EXPECT_EQ(step_from_name("lightning_logs/epoch=3-step=1200.ckpt"), 1200);
  EXPECT_EQ(step_from_name("out/checkpoint-500/model.safetensors"), std::nullopt);
  EXPECT_EQ(step_from_name("checkpoint-500.pt"), 500);
  EXPECT_EQ(step_from_name("iter_0300.pth"), 300);
  EXPECT_EQ(step_from_name("model.pt"), std::nullopt);
  EXPECT_EQ(step_from_name("ckpt1000.pt"), 1000);
  EXPECT_EQ(step_from_name("run/epoch5.pth"), 5);
  // Digits inside a name are no step (eval35 C03: "c03_..." read as step 3).
  EXPECT_EQ(step_from_name("cases/c03_frozenbn_fault.ckpt.pt"), std::nullopt);
  EXPECT_EQ(step_from_name("resnet18.pth"), std::nullopt);
  EXPECT_EQ(order_by_step({"s/step_20.pt", "s/step_5.pt", "s/step_100.pt"}),
            (std::vector<std::string>{"s/step_5.pt", "s/step_20.pt", "s/step_100.pt"}));
  // One name without a step: the order given.
  EXPECT_EQ(order_by_step({"b.pt", "s/step_5.pt"}), (std::vector<std::string>{"b.pt", "s/step_5.pt"}));
}

TEST(CheckpointFormat, Globs) {
  const std::string dir = (ndtest::source_dir() / "fixtures/checkpoints/lm/healthy").string();
  const auto paths = expand_weight_paths({dir + "/step_00[0-2]0.pt"});
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_EQ(fs::path(paths[2]).filename(), "step_0020.pt");
  std::string kind;
  EXPECT_NE(error_of([&] { expand_weight_paths({dir + "/nothing_*.pt"}); }, &kind).find("no file matches the pattern"),
            std::string::npos);
  EXPECT_EQ(kind, "weights_load");
  EXPECT_EQ(expand_weight_paths({"plain.pt"}), (std::vector<std::string>{"plain.pt"}));
}

}  // namespace nd_test_formats_checkpoint_test
