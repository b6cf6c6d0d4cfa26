// The torch-free .pt2 reader (src/formats/pt2_archive.h) on archives built in
// memory, and on the fixtures of fixtures/make_pt2.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "formats/pt2_archive.h"
#include "zip_builder.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_formats_pt2_archive_test {

namespace {

using nd::formats::Pt2Archive;

using ndtest::make_zip;

const char* kProgram = R"({"graph_module": {"graph": {"inputs": [{"as_tensor": {"name": "p_w"}}, {"as_tensor": {"name": "x"}}],
  "outputs": [{"as_tensor": {"name": "y"}}], "nodes": [], "tensor_values": {}},
  "signature": {"input_specs": [{"parameter": {"arg": {"name": "p_w"}, "parameter_name": "fc.weight"}},
                                 {"user_input": {"arg": {"as_tensor": {"name": "x"}}}}],
                "output_specs": [{"user_output": {"arg": {"as_tensor": {"name": "y"}}}}]},
  "module_call_graph": []},
  "schema_version": {"major": 8, "minor": 20}, "torch_version": "2.13.0+cpu"})";

std::string weights_config(const std::string& sizes = "[{\"as_int\": 2}, {\"as_int\": 3}]",
                           const std::string& strides = "[{\"as_int\": 3}, {\"as_int\": 1}]") {
  return R"({"config": {"fc.weight": {"path_name": "weight_0", "is_param": true, "use_pickle": false,
     "tensor_meta": {"dtype": 7, "sizes": )" + sizes + R"(, "requires_grad": true, "device": {"type": "cpu", "index": null},
     "strides": )" + strides + R"(, "storage_offset": {"as_int": 0}, "layout": 7}}}})";
}

std::vector<std::pair<std::string, std::string>> files(const std::string& program = kProgram,
                                                       const std::string& wcfg = weights_config()) {
  return {{"m/archive_format", "pt2"},
          {"m/archive_version", "0"},
          {"m/byteorder", "little"},
          {"m/models/model.json", program},
          {"m/data/weights/model_weights_config.json", wcfg},
          {"m/data/weights/weight_0", std::string(24, '\0')},
          {"m/data/constants/model_constants_config.json", "{\"config\": {}}"}};
}

Pt2Archive read(const std::string& zip) {
  return nd::formats::read_pt2_archive(reinterpret_cast<const uint8_t*>(zip.data()), zip.size(), "m.pt2");
}

std::string error_of(const std::string& zip) {
  try {
    read(zip);
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), "model_load");
    EXPECT_EQ(e.exit_code(), nd::ExitCode::kLoad);
    return e.what();
  }
  return "(no error)";
}

TEST(Pt2Archive, ReadsLayoutProgramAndPayloads) {
  const Pt2Archive a = read(make_zip(files()));
  EXPECT_EQ(a.root, "m/");
  EXPECT_EQ(a.model_name, "model");
  EXPECT_EQ(a.schema_major, 8);
  EXPECT_EQ(a.schema_minor, 20);
  EXPECT_EQ(a.torch_version, "2.13.0+cpu");
  ASSERT_EQ(a.weights.size(), 1u);
  EXPECT_EQ(a.weights[0].fqn, "fc.weight");
  EXPECT_EQ(a.weights[0].record, "data/weights/weight_0");
  EXPECT_TRUE(a.weights[0].is_param);
  EXPECT_EQ(a.weights[0].sizes, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.weights[0].strides, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(a.weights[0].dtype, nd::formats::DType::kFloat32);
  EXPECT_EQ(a.weights[0].record_bytes, 24u);
  EXPECT_TRUE(a.sample_inputs.empty());
}

// A .pt2 re-packed by a zip tool (every record deflated) reads like the
// stored archive torch.export.save writes; PyTorch's own reader accepts both.
TEST(Pt2Archive, DeflatedRecordsReadLikeStoredOnes) {
  auto f = files();
  f[5].second = std::string("\x01\x02\x03\x04", 4) + std::string(20, '\x7f');
  const std::string zip = make_zip(f, /*deflated=*/true);
  const Pt2Archive a = read(zip);
  EXPECT_EQ(a.model_name, "model");
  ASSERT_EQ(a.weights.size(), 1u);
  EXPECT_EQ(a.weights[0].record_bytes, 24u);
  const auto& e = a.entries.at("data/weights/weight_0");
  EXPECT_EQ(e.method, 8);
  nd::formats::ReadAt at = [&zip](uint64_t off, void* out, std::size_t n) -> std::size_t {
    if (off > zip.size()) return 0;
    const std::size_t k = std::min<std::size_t>(n, zip.size() - off);
    std::memcpy(out, zip.data() + off, k);
    return k;
  };
  const std::vector<uint8_t> bytes = nd::formats::read_zip_record(at, zip.size(), e, "m.pt2");
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), f[5].second);
}

// Damaged deflate streams and CRC mismatches are corrupt archives, named.
TEST(Pt2Archive, CorruptDeflatedRecordsAreNamed) {
  const std::string zip = make_zip(files(), /*deflated=*/true);
  // The program's stream: flip bytes inside it (its local header precedes the name).
  const std::string name = "m/models/model.json";
  const auto at = zip.find(name) + name.size();
  std::string broken = zip;
  for (std::size_t k = 2; k < 12; ++k) broken[at + k] = static_cast<char>(~broken[at + k]);
  const std::string msg = error_of(broken);
  EXPECT_NE(msg.find("zip entry 'm/models/model.json'"), std::string::npos) << msg;
  EXPECT_TRUE(msg.find("deflated data is corrupt") != std::string::npos || msg.find("CRC-32") != std::string::npos) << msg;
  // A wrong CRC in the central directory only.
  std::string bad_crc = zip;
  const auto cd_name = bad_crc.find(name, zip.find(name) + 1);  // the central directory's copy of the name
  ASSERT_NE(cd_name, std::string::npos);
  const auto cd = cd_name - 46;  // its central header (46 bytes before the name)
  bad_crc[cd + 16] = static_cast<char>(bad_crc[cd + 16] ^ 0x5a);
  const std::string crc_msg = error_of(bad_crc);
  EXPECT_NE(crc_msg.find("CRC-32 does not match"), std::string::npos) << crc_msg;
}

TEST(Pt2Archive, UnknownSchemaMajorNamesBothVersions) {
  std::string p = kProgram;
  p.replace(p.find("\"major\": 8"), 10, "\"major\": 9");
  const std::string msg = error_of(make_zip(files(p)));
  EXPECT_NE(msg.find("schema version 9.20"), std::string::npos) << msg;
  EXPECT_NE(msg.find("major version 8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("torch 2.13.0+cpu"), std::string::npos) << msg;
}

TEST(Pt2Archive, AotInductorPackageWithoutGraphIsSaidSo) {
  const std::string zip = make_zip({{"p/archive_format", "pt2"},
                                    {"p/data/aotinductor/model/model.wrapper.so", "ELF"}});
  const std::string msg = error_of(zip);
  EXPECT_NE(msg.find("AOTInductor package"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no exported graph"), std::string::npos) << msg;
}

TEST(Pt2Archive, CorruptPiecesAreNamed) {
  EXPECT_NE(error_of(make_zip(files("{\"graph_module\": "))).find("models/model.json is not valid JSON"), std::string::npos);
  // A view larger than its record.
  const std::string big = error_of(make_zip(files(kProgram, weights_config("[{\"as_int\": 4}, {\"as_int\": 3}]"))));
  EXPECT_NE(big.find("fc.weight"), std::string::npos) << big;
  // The weights config names a record the archive lacks.
  auto f = files();
  f.erase(f.begin() + 5);
  EXPECT_NE(error_of(make_zip(f)).find("no record 'data/weights/weight_0'"), std::string::npos);
  // Not a .pt2 at all / truncated.
  EXPECT_NE(error_of(make_zip({{"a/data.pkl", "x"}})).find("without an archive_format record"), std::string::npos);
  const std::string whole = make_zip(files());
  EXPECT_NE(error_of(whole.substr(0, whole.size() / 2)).find("truncated or corrupt"), std::string::npos);
  // Another archive format.
  f = files();
  f[0].second = "pt3";
  EXPECT_NE(error_of(make_zip(f)).find("archive_format 'pt3'"), std::string::npos);
}

TEST(Pt2Archive, NnModuleStackSpellings) {
  using nd::formats::parse_nn_module_stack;
  const auto s = parse_nn_module_stack(
      "L__self__,,__main__.M;L__self___layers_0,layers.0,torch.nn.modules.linear.Linear");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].first, "");
  EXPECT_EQ(s[0].second, "__main__.M");
  EXPECT_EQ(s[1].first, "layers.0");
  EXPECT_EQ(s[1].second, "torch.nn.modules.linear.Linear");
  // torch.export's placeholder entry for nodes made outside any module (dynamic-shape sym_size).
  EXPECT_TRUE(parse_nn_module_stack("_empty_nn_module_stack_from_metadata_hook,_empty_nn_module_stack_from_metadata_hook,"
                                    "torch.nn.modules.module.Module")
                  .empty());
  // Older spellings (PyTorch 2.1-2.4): L['self'].layers[0], getattr(L['self'].h, '1').ln_1.
  const auto old = parse_nn_module_stack(
      "a,L['self'].layers[0],x.Linear;b,getattr(L['self'].h, '1').ln_1,torch.nn.modules.normalization.LayerNorm");
  ASSERT_EQ(old.size(), 2u);
  EXPECT_EQ(old[0].first, "layers.0");
  EXPECT_EQ(old[1].first, "h.1.ln_1");
}

TEST(Pt2Archive, ScalarTypeCodes) {
  using nd::formats::DType;
  using nd::formats::dtype_from_pt2_scalar_type;
  EXPECT_EQ(dtype_from_pt2_scalar_type(7), DType::kFloat32);
  EXPECT_EQ(dtype_from_pt2_scalar_type(5), DType::kInt64);
  EXPECT_EQ(dtype_from_pt2_scalar_type(12), DType::kBool);
  EXPECT_EQ(dtype_from_pt2_scalar_type(13), DType::kBFloat16);
  EXPECT_FALSE(dtype_from_pt2_scalar_type(9).has_value());
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Pt2Archive, FixturesFromTorch213) {
  const std::string dir = std::string(ND_SOURCE_DIR) + "/fixtures/pt2/";
  const Pt2Archive a = read(slurp(dir + "tiny_cnn.pt2"));
  EXPECT_EQ(a.schema_major, 8);
  EXPECT_FALSE(a.sample_inputs.empty());
  EXPECT_EQ(a.weights.size(), 20u);  // 3 conv weights, 3 x (bn weight, bias, running mean, var, batches), head w+b
  EXPECT_NE(error_of(slurp(dir + "bad_truncated.pt2")).find("truncated or corrupt"), std::string::npos);
  EXPECT_NE(error_of(slurp(dir + "bad_schema_v99.pt2")).find("schema version 99.0"), std::string::npos);
  EXPECT_NE(error_of(slurp(dir + "bad_json.pt2")).find("is not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(slurp(dir + "bad_aoti_only.pt2")).find("AOTInductor package"), std::string::npos);
}

}  // namespace

}  // namespace nd_test_formats_pt2_archive_test
