// Reading batch files (src/model/batch_file.h) and synthesizing inputs
// (src/model/synth_inputs.h). Fixtures: fixtures/batches/ (written by
// fixtures/make_batches.py, see its README.md) and the real models' sample
// batches in corpus/ (saved by PyTorch 2.11).
#include <gtest/gtest.h>

#include <caffe2/serialize/inline_container.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/input_spec.h"
#include "model/batch_file.h"
#include "model/synth_inputs.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_model_batch_file_test {

namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  return std::string(ND_SOURCE_DIR) + "/fixtures/batches/" + name;
}

nd::BatchFile read(const std::string& name) { return nd::read_batch_file(fixture(name)); }

template <typename T>
std::vector<T> values(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
}

std::vector<float> arange6() { return {0, 1, 2, 3, 4, 5}; }

void expect_a(const at::Tensor& t) {  // torch.arange(6.).reshape(2, 3)
  EXPECT_EQ(t.sizes(), at::IntArrayRef({2, 3}));
  EXPECT_EQ(t.scalar_type(), at::kFloat);
  EXPECT_EQ(values<float>(t), arange6());
  EXPECT_FALSE(t.requires_grad());
}

void expect_b(const at::Tensor& t) {  // torch.arange(4) * 10
  EXPECT_EQ(t.sizes(), at::IntArrayRef({4}));
  EXPECT_EQ(t.scalar_type(), at::kLong);
  EXPECT_EQ(values<int64_t>(t), (std::vector<int64_t>{0, 10, 20, 30}));
}

// The file's load must fail with kind input_load, naming the file and `needle`.
void expect_load_error(const std::string& path, const std::string& needle) {
  try {
    nd::read_batch_file(path);
    FAIL() << path << ": no error; expected one containing: " << needle;
  } catch (const nd::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.kind(), nd::error_kind::kInputLoad) << msg;
    EXPECT_EQ(e.exit_code(), nd::ExitCode::kLoad) << msg;
    EXPECT_EQ(msg.rfind(path, 0), 0u) << "message does not start with the path: " << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

// ------------------------------------------------------------ container shapes

TEST(BatchFile, BareTensor) {
  const auto b = read("tensor.pt");
  EXPECT_EQ(b.path, fixture("tensor.pt"));
  EXPECT_EQ(b.container, "tensor");
  ASSERT_EQ(b.positional.size(), 1u);
  EXPECT_TRUE(b.keyword.empty());
  expect_a(b.positional[0]);
}

TEST(BatchFile, TupleOfTwo) {
  const auto b = read("tuple2.pt");
  EXPECT_EQ(b.container, "tuple");
  ASSERT_EQ(b.positional.size(), 2u);
  expect_a(b.positional[0]);
  expect_b(b.positional[1]);
}

TEST(BatchFile, ListOfTwo) {
  const auto b = read("list2.pt");
  EXPECT_EQ(b.container, "list");
  ASSERT_EQ(b.positional.size(), 2u);
  expect_a(b.positional[0]);
  expect_b(b.positional[1]);
}

TEST(BatchFile, OneElementList) {  // APPEND: LibTorch 1.13's pickle_load rejects it
  for (const char* name : {"list1.pt", "list1_protocol4.pt"}) {
    SCOPED_TRACE(name);
    const auto b = read(name);
    EXPECT_EQ(b.container, "list");
    ASSERT_EQ(b.positional.size(), 1u);
    expect_a(b.positional[0]);
  }
}

TEST(BatchFile, DictOfTwo) {
  const auto b = read("dict2.pt");
  EXPECT_EQ(b.container, "dict");
  EXPECT_TRUE(b.positional.empty());
  ASSERT_EQ(b.keyword.size(), 2u);
  EXPECT_EQ(b.keyword[0].first, "x");
  expect_a(b.keyword[0].second);
  EXPECT_EQ(b.keyword[1].first, "mask");
  const at::Tensor& mask = b.keyword[1].second;
  EXPECT_EQ(mask.scalar_type(), at::kBool);
  EXPECT_EQ(mask.sizes(), at::IntArrayRef({2, 3}));
  EXPECT_EQ(values<bool>(mask), (std::vector<bool>{true, false, true, false, true, true}));
}

TEST(BatchFile, OneKeyDict) {  // SETITEM: LibTorch 1.13's pickle_load rejects it
  const auto b = read("dict1.pt");
  EXPECT_EQ(b.container, "dict");
  ASSERT_EQ(b.keyword.size(), 1u);
  EXPECT_EQ(b.keyword[0].first, "x");
  expect_a(b.keyword[0].second);
}

TEST(BatchFile, OrderedDictKeepsItsOrder) {
  const auto b = read("ordereddict.pt");
  EXPECT_EQ(b.container, "dict");
  ASSERT_EQ(b.keyword.size(), 2u);
  EXPECT_EQ(b.keyword[0].first, "second");
  expect_b(b.keyword[0].second);
  EXPECT_EQ(b.keyword[1].first, "first");
  expect_a(b.keyword[1].second);
}

// ------------------------------------------------------------ dtypes and views

TEST(BatchFile, EveryDtype) {
  const auto b = read("dtypes.pt");
  ASSERT_EQ(b.keyword.size(), 10u);
  std::map<std::string, at::Tensor> by;
  for (const auto& [k, v] : b.keyword) by[k] = v;
  EXPECT_EQ(by["f32"].scalar_type(), at::kFloat);
  EXPECT_EQ(values<float>(by["f32"]), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(by["f64"].scalar_type(), at::kDouble);
  EXPECT_EQ(values<double>(by["f64"]), (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(by["f16"].scalar_type(), at::kHalf);
  EXPECT_EQ(values<float>(by["f16"].to(at::kFloat)), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(by["bf16"].scalar_type(), at::kBFloat16);
  EXPECT_EQ(values<float>(by["bf16"].to(at::kFloat)), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(by["i8"].scalar_type(), at::kChar);
  EXPECT_EQ(values<int8_t>(by["i8"]), (std::vector<int8_t>{-3, 7}));
  EXPECT_EQ(by["i16"].scalar_type(), at::kShort);
  EXPECT_EQ(values<int16_t>(by["i16"]), (std::vector<int16_t>{-3, 7}));
  EXPECT_EQ(by["i32"].scalar_type(), at::kInt);
  EXPECT_EQ(values<int32_t>(by["i32"]), (std::vector<int32_t>{-3, 7}));
  EXPECT_EQ(by["i64"].scalar_type(), at::kLong);
  EXPECT_EQ(values<int64_t>(by["i64"]), (std::vector<int64_t>{-3, 7}));
  EXPECT_EQ(by["u8"].scalar_type(), at::kByte);
  EXPECT_EQ(values<uint8_t>(by["u8"]), (std::vector<uint8_t>{3, 250}));
  EXPECT_EQ(by["bool"].scalar_type(), at::kBool);
  EXPECT_EQ(values<bool>(by["bool"]), (std::vector<bool>{true, false}));
}

TEST(BatchFile, StridedViewsShareOneStorage) {
  // base = arange(12.).reshape(3, 4); saved (base.t(), base[1:, 1:3])
  const auto b = read("strided.pt");
  ASSERT_EQ(b.positional.size(), 2u);
  const at::Tensor& t = b.positional[0];
  EXPECT_EQ(t.sizes(), at::IntArrayRef({4, 3}));
  EXPECT_EQ(t.strides(), at::IntArrayRef({1, 4}));
  EXPECT_EQ(values<float>(t), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  const at::Tensor& s = b.positional[1];
  EXPECT_EQ(s.sizes(), at::IntArrayRef({2, 2}));
  EXPECT_EQ(s.strides(), at::IntArrayRef({4, 1}));
  EXPECT_EQ(s.storage_offset(), 5);
  EXPECT_EQ(values<float>(s), (std::vector<float>{5, 6, 9, 10}));
  EXPECT_TRUE(t.is_alias_of(s));
}

TEST(BatchFile, ScalarEmptyAndParameter) {
  const auto e = read("edge_shapes.pt");
  ASSERT_EQ(e.positional.size(), 2u);
  EXPECT_EQ(e.positional[0].dim(), 0);
  EXPECT_EQ(e.positional[0].item<float>(), 3.5f);
  EXPECT_EQ(e.positional[1].sizes(), at::IntArrayRef({0, 3}));

  const auto p = read("parameter.pt");
  ASSERT_EQ(p.positional.size(), 1u);
  EXPECT_EQ(values<float>(p.positional[0]), (std::vector<float>{1, 1, 1, 1}));
  EXPECT_FALSE(p.positional[0].requires_grad());  // inputs never carry autograd state
}

TEST(BatchFile, Safetensors) {
  const auto b = read("batch.safetensors");
  EXPECT_EQ(b.container, "safetensors");
  EXPECT_TRUE(b.positional.empty());
  ASSERT_EQ(b.keyword.size(), 3u);
  EXPECT_EQ(b.keyword[0].first, "input_ids");
  EXPECT_EQ(b.keyword[0].second.sizes(), at::IntArrayRef({2, 4}));
  EXPECT_EQ(values<int64_t>(b.keyword[0].second), (std::vector<int64_t>{5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(b.keyword[1].first, "attention_mask");
  EXPECT_EQ(values<int64_t>(b.keyword[1].second), (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(b.keyword[2].first, "pixels");
  EXPECT_EQ(b.keyword[2].second.scalar_type(), at::kFloat);
  EXPECT_EQ(values<float>(b.keyword[2].second), (std::vector<float>{0.5f, -1.0f, 2.0f}));
}

// ------------------------------------------------------------ bad files

TEST(BatchFile, BadFixturesAreClearErrors) {
  expect_load_error(fixture("bad_json.safetensors"), "safetensors header is not valid JSON");
  expect_load_error(fixture("truncated.safetensors"), "tensor 'x': data_offsets end 12 is past the data region");
  expect_load_error(fixture("truncated.pt"), "truncated");
  expect_load_error(fixture("custom_class.pt"), "contains a pickled Python object of class '__main__.Batch'");
  expect_load_error(fixture("nested.pt"), "element 1 of the list is a tuple: nested containers are not read");
  expect_load_error(fixture("non_tensor.pt"), "dict value 'lr' is a float, not a tensor");
  expect_load_error(fixture("legacy.pt"), "_use_new_zipfile_serialization=False");
  expect_load_error(fixture("legacy.pt"), "re-save it with torch.save in PyTorch >= 1.6");
  expect_load_error(fixture("legacy_protocol4.pt"), "_use_new_zipfile_serialization=False");
  expect_load_error(fixture("plain_pickle.pkl"), "is a plain Python pickle, not a torch.save archive");
  expect_load_error(fixture("torchscript.pt"), "is a TorchScript model (torch.jit.save), not a batch");
  expect_load_error(fixture("empty.pt"), "is empty (0 bytes)");
  expect_load_error(fixture("garbage.bin"), "is neither a torch.save archive (zip) nor a .safetensors file");
  expect_load_error(fixture("does_not_exist.pt"), "no such file");
  expect_load_error(std::string(ND_SOURCE_DIR) + "/fixtures/batches", "is a directory");
  if (fs::exists(fixture("numpy_array.pt"))) {
    expect_load_error(fixture("numpy_array.pt"), "torch.from_numpy");
  }
}

// ------------------------------------------------------------ hand-made archives

// Writes a torch.save-style archive with the given data.pkl and data records.
std::string write_archive(const std::string& name, const std::string& pkl,
                          const std::vector<std::pair<std::string, std::string>>& records) {
  const std::string path = ::testing::TempDir() + "/" + name;
  caffe2::serialize::PyTorchStreamWriter w(path);
  w.writeRecord("data.pkl", pkl.data(), pkl.size());
  for (const auto& [rec, bytes] : records) w.writeRecord(rec, bytes.data(), bytes.size());
  w.writeEndOfFile();
  return path;
}

// Pickle of _rebuild_tensor_v3(UntypedStorage(key "0", nbytes), 0, (n,), (1,), False, OrderedDict(), torch.<dtype>)
std::string v3_pickle(const std::string& dtype, uint8_t nbytes, uint8_t n) {
  using namespace std::string_literals;
  std::string p = "\x80\x02"s;                                       // PROTO 2
  p += "ctorch._utils\n_rebuild_tensor_v3\n("s;                       // GLOBAL, MARK
  p += "(X\x07\x00\x00\x00storage"s + "ctorch\nUntypedStorage\n"s;  // MARK 'storage' class
  p += "X\x01\x00\x00\x00"s + "0"s + "X\x03\x00\x00\x00"s + "cpu"s;  // key, location
  p += "K"s + static_cast<char>(nbytes) + "tQ"s;                       // size, TUPLE, BINPERSID
  p += "K\x00"s + "K"s + static_cast<char>(n) + "\x85"s + "K\x01\x85"s + "\x89"s;  // 0, (n,), (1,), False
  p += "ccollections\nOrderedDict\n)R"s;                               // OrderedDict()
  p += "ctorch\n"s + dtype + "\n"s;                                   // torch.<dtype>
  p += "tR."s;                                                         // TUPLE, REDUCE, STOP
  return p;
}

TEST(BatchFile, RebuildTensorV3FromPyTorch2) {
  const std::string data("\x01\x00\x00\x00\xfe\xff\xff\xff\x03\x00\x00\x00\x04\x00\x00\x00", 16);
  const auto path = write_archive("v3.pt", v3_pickle("int32", 16, 4), {{"data/0", data}});
  const auto b = nd::read_batch_file(path);
  ASSERT_EQ(b.positional.size(), 1u);
  EXPECT_EQ(b.positional[0].scalar_type(), at::kInt);
  EXPECT_EQ(values<int32_t>(b.positional[0]), (std::vector<int32_t>{1, -2, 3, 4}));

  const auto u16 = write_archive("v3_uint16.pt", v3_pickle("uint16", 8, 4), {{"data/0", data.substr(0, 8)}});
  expect_load_error(u16, "has dtype uint16, which normdoctor does not read");
}

TEST(BatchFile, ArchiveRecordsThatDoNotMatchThePickle) {
  const auto missing = write_archive("missing_data.pt", v3_pickle("int32", 16, 4), {});
  expect_load_error(missing, "the archive has no record 'data/0'");
  const auto small = write_archive("small_data.pt", v3_pickle("int32", 16, 4), {{"data/0", "12345678"}});
  expect_load_error(small, "record 'data/0' holds 8 bytes but its storage needs 16");
  const auto not_pickle = write_archive("not_pickle.pt", "hello", {});
  expect_load_error(not_pickle, "(data.pkl): malformed pickle");
}

TEST(BatchFile, CorruptCopiesOfGoodFilesNeverCrash) {
  // Random byte edits and truncations of good files: a batch or nd::Error,
  // never a LibTorch exception, a crash or a huge allocation.
  uint64_t state = 0x2545F4914F6CDD1Dull;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const std::string out = ::testing::TempDir() + "/corrupt.bin";
  for (const char* name : {"list2.pt", "strided.pt", "batch.safetensors"}) {
    std::ifstream in(fixture(name), std::ios::binary);
    const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(good.empty()) << name;
    for (int iter = 0; iter < 150; ++iter) {
      std::string bytes = good;
      const int edits = 1 + static_cast<int>(next() % 4);
      for (int e = 0; e < edits; ++e) bytes[next() % bytes.size()] = static_cast<char>(next());
      if (iter % 5 == 0) bytes.resize(next() % bytes.size());
      std::ofstream(out, std::ios::binary | std::ios::trunc) << bytes;
      try {
        nd::read_batch_file(out);
      } catch (const nd::Error& e) {
        EXPECT_EQ(e.kind(), nd::error_kind::kInputLoad);
      }
    }
  }
}

// ------------------------------------------------------------ real models (PyTorch 2.11)

std::string real_input(const std::string& name) {
  return std::string(ND_SOURCE_DIR) + "/corpus/" + name + ".input.pt";
}

TEST(BatchFile, RealModelInputsFromPyTorch211) {
  if (!fs::exists(real_input("tv_mobilenet_v3_small"))) GTEST_SKIP() << "no " << ND_SOURCE_DIR << "/corpus";

  const auto mobilenet = nd::read_batch_file(real_input("tv_mobilenet_v3_small"));
  EXPECT_EQ(mobilenet.container, "list");
  ASSERT_EQ(mobilenet.positional.size(), 1u);
  EXPECT_EQ(mobilenet.positional[0].sizes(), at::IntArrayRef({4, 3, 64, 64}));
  EXPECT_EQ(mobilenet.positional[0].scalar_type(), at::kFloat);
  EXPECT_TRUE(mobilenet.positional[0].isfinite().all().item<bool>());

  for (const char* name : {"hf_bert_tiny", "hf_llama_tiny"}) {
    SCOPED_TRACE(name);
    const auto b = nd::read_batch_file(real_input(name));
    EXPECT_EQ(b.container, "list");
    ASSERT_EQ(b.positional.size(), 2u);
    for (const auto& t : b.positional) {
      EXPECT_EQ(t.sizes(), at::IntArrayRef({2, 16}));
      EXPECT_EQ(t.scalar_type(), at::kLong);
    }
    // attention_mask: row 0 all ones, row 1 padded from position 10
    const at::Tensor mask = b.positional[1];
    EXPECT_EQ(mask[0].sum().item<int64_t>(), 16);
    EXPECT_EQ(mask[1].sum().item<int64_t>(), 10);
    EXPECT_GE(b.positional[0].min().item<int64_t>(), 0);
  }

  const auto vit = nd::read_batch_file(real_input("tv_vit_tiny"));
  ASSERT_EQ(vit.positional.size(), 1u);
  EXPECT_EQ(vit.positional[0].sizes(), at::IntArrayRef({4, 3, 32, 32}));
  EXPECT_EQ(vit.positional[0].scalar_type(), at::kFloat);
}

TEST(BatchFile, RealModelIsNotABatch) {
  const std::string model = std::string(ND_SOURCE_DIR) + "/corpus/hf_bert_tiny.pt";
  if (!fs::exists(model)) GTEST_SKIP() << "no " << model;
  expect_load_error(model, "TorchScript model");
}

// ------------------------------------------------------------ synthesized inputs

TEST(SynthInputs, ShapesDtypesAndRanges) {
  using nd::formats::parse_input_shape_spec;
  const at::Tensor x = nd::synthesize_input(parse_input_shape_spec("x=4x3x8x8:float32:0..1"), 0);
  EXPECT_EQ(x.sizes(), at::IntArrayRef({4, 3, 8, 8}));
  EXPECT_EQ(x.scalar_type(), at::kFloat);
  EXPECT_GE(x.min().item<float>(), 0.0f);
  EXPECT_LT(x.max().item<float>(), 1.0f);

  const at::Tensor n = nd::synthesize_input(parse_input_shape_spec("64x64"), 1);
  EXPECT_NEAR(n.mean().item<float>(), 0.0f, 0.1f);  // standard normal
  EXPECT_NEAR(n.std().item<float>(), 1.0f, 0.1f);

  const at::Tensor ids = nd::synthesize_input(parse_input_shape_spec("input_ids=2x16:int64:0..1000"), 2);
  EXPECT_EQ(ids.scalar_type(), at::kLong);
  EXPECT_GE(ids.min().item<int64_t>(), 0);
  EXPECT_LT(ids.max().item<int64_t>(), 1000);

  const at::Tensor mask = nd::synthesize_input(parse_input_shape_spec("attention_mask=2x16:int64:1..1"), 3);
  EXPECT_TRUE((mask == 1).all().item<bool>());

  const at::Tensor dflt = nd::synthesize_input(parse_input_shape_spec("8x8:int32"), 4);
  EXPECT_EQ(dflt.scalar_type(), at::kInt);
  EXPECT_EQ(dflt.min().item<int32_t>(), 0);
  EXPECT_EQ(dflt.max().item<int32_t>(), 1);

  EXPECT_EQ(nd::synthesize_input(parse_input_shape_spec("x=4:float16:-1..1"), 5).scalar_type(), at::kHalf);
  EXPECT_EQ(nd::synthesize_input(parse_input_shape_spec("x=4:bfloat16"), 5).scalar_type(), at::kBFloat16);
  EXPECT_EQ(nd::synthesize_input(parse_input_shape_spec("x=4:float64"), 5).scalar_type(), at::kDouble);
  const at::Tensor b = nd::synthesize_input(parse_input_shape_spec("m=64:bool"), 6);
  EXPECT_EQ(b.scalar_type(), at::kBool);
  EXPECT_TRUE(b.any().item<bool>());
  EXPECT_FALSE(b.all().item<bool>());
}

TEST(SynthInputs, SeedMakesThemRepeatable) {
  const auto spec = nd::formats::parse_input_shape_spec("x=4x3x16x16");
  EXPECT_TRUE(nd::synthesize_input(spec, 7).equal(nd::synthesize_input(spec, 7)));
  EXPECT_FALSE(nd::synthesize_input(spec, 7).equal(nd::synthesize_input(spec, 8)));
  // Drawing several inputs from one generator is repeatable as a whole.
  at::Generator g1 = nd::make_input_generator(11);
  at::Generator g2 = nd::make_input_generator(11);
  const at::Tensor a1 = nd::synthesize_input(spec, g1);
  const at::Tensor b1 = nd::synthesize_input(spec, g1);
  EXPECT_TRUE(a1.equal(nd::synthesize_input(spec, g2)));
  EXPECT_TRUE(b1.equal(nd::synthesize_input(spec, g2)));
  EXPECT_FALSE(a1.equal(b1));
}

}  // namespace

}  // namespace nd_test_model_batch_file_test
