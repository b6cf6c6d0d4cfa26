// safetensors header parsing (src/formats/safetensors.h): valid files and the
// ways a header can lie about the data.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "formats/safetensors.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_formats_safetensors_test {

namespace {

using nd::formats::DType;
using nd::formats::parse_safetensors;
using nd::formats::SafetensorsHeader;

// 8-byte little-endian length + header + data.
std::string file_with(const std::string& header, std::size_t data_bytes) {
  std::string out;
  for (int k = 0; k < 8; ++k) out.push_back(static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * k)));
  out += header;
  out += std::string(data_bytes, '\0');
  return out;
}

SafetensorsHeader parse(const std::string& bytes) {
  return parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "batch.safetensors");
}

void expect_error(const std::string& bytes, const std::string& needle) {
  try {
    parse(bytes);
    FAIL() << "no error; expected one containing: " << needle;
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kInputLoad);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("batch.safetensors"), std::string::npos) << e.what();
  }
}

TEST(FormatsSafetensors, ValidHeaderInHeaderOrder) {
  const std::string h =
      R"({"__metadata__":{"format":"pt"},"input_ids":{"dtype":"I64","shape":[2,4],"data_offsets":[0,64]},)"
      R"("attention_mask":{"dtype":"BOOL","shape":[2,4],"data_offsets":[64,72]},)"
      R"("pixels":{"dtype":"BF16","shape":[3],"data_offsets":[72,78]}}  )";
  const auto bytes = file_with(h, 78);
  const SafetensorsHeader s = parse(bytes);
  EXPECT_EQ(s.data_start, 8 + h.size());
  ASSERT_EQ(s.tensors.size(), 3u);
  EXPECT_EQ(s.tensors[0].name, "input_ids");
  EXPECT_EQ(s.tensors[0].dtype, DType::kInt64);
  EXPECT_EQ(s.tensors[0].shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(s.tensors[1].name, "attention_mask");
  EXPECT_EQ(s.tensors[1].dtype, DType::kBool);
  EXPECT_EQ(s.tensors[1].begin, 64u);
  EXPECT_EQ(s.tensors[2].dtype, DType::kBFloat16);
  EXPECT_EQ(s.tensors[2].end, 78u);
  EXPECT_EQ(s.metadata.at("format"), "pt");
  EXPECT_TRUE(nd::formats::looks_like_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), 16,
                                                  bytes.size()));
}

TEST(FormatsSafetensors, OffsetsOutOfHeaderOrderStillTile) {
  const std::string h =
      R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("empty":{"dtype":"F32","shape":[0,5],"data_offsets":[8,8]},"scalar":{"dtype":"U8","shape":[],"data_offsets":[8,9]}})";
  const SafetensorsHeader s = parse(file_with(h, 9));
  ASSERT_EQ(s.tensors.size(), 4u);
  EXPECT_EQ(s.tensors[0].name, "b");
  EXPECT_TRUE(s.tensors[3].shape.empty());
}

TEST(FormatsSafetensors, HeaderLengthProblems) {
  expect_error("", "shorter than its 8-byte header length");
  expect_error(std::string("\x05\0\0\0\0\0\0\0{}", 10), "exceeds the file size");
  expect_error(std::string("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10), "exceeds the file size");
  expect_error(std::string("\x01\0\0\0\0\0\0\0{", 9), "too short");
}

TEST(FormatsSafetensors, HeaderJsonProblems) {
  expect_error(file_with(R"({"x": {"dtype": "F32", )", 0), "not valid JSON");
  expect_error(file_with(R"([1, 2])", 0), "not an object");
  expect_error(file_with(R"({"x": 3})", 0), "tensor 'x': entry is not an object");
  expect_error(file_with(std::string(100, '[') + std::string(100, ']'), 0), "deeper than");
  expect_error(file_with(R"({"__metadata__": [1]})", 0), "__metadata__");
  // Invalid UTF-8 inside a JSON string.
  expect_error(file_with("{\"\xff\": {}}", 0), "not valid JSON");
}

TEST(FormatsSafetensors, EntryProblemsNameTheTensor) {
  expect_error(file_with(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4), "tensor 'w': missing \"dtype\"");
  expect_error(file_with(R"({"w":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}})", 4),
               "tensor 'w': unknown dtype \"F99\"");
  expect_error(file_with(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4), "tensor 'w': missing \"shape\"");
  expect_error(file_with(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
               "not a non-negative integer");
  expect_error(file_with(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
               "not a non-negative integer");
  expect_error(file_with(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4), "data_offsets");
  expect_error(file_with(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4), "begin 4 > end 0");
  expect_error(file_with(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4),
               "tensor 'w': shape and dtype need 8 bytes but data_offsets span 4");
  expect_error(file_with(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
               "tensor 'w': data_offsets end 8 is past the data region");
  expect_error(
      file_with(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
      "tensor 'w'");
}

TEST(FormatsSafetensors, TensorsMustTileTheData) {
  expect_error(file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "leaving a gap");
  expect_error(file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
               "overlap");
  expect_error(file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 6), "trailing bytes");
}

TEST(FormatsSafetensors, LooksLikeSafetensors) {
  const auto bytes = file_with(R"({})", 0);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  EXPECT_TRUE(nd::formats::looks_like_safetensors(p, bytes.size(), bytes.size()));
  EXPECT_FALSE(nd::formats::looks_like_safetensors(p, 8, bytes.size()));
  EXPECT_FALSE(nd::formats::looks_like_safetensors(reinterpret_cast<const uint8_t*>("PK\3\4xxxxxxxx"), 12, 12));
}

TEST(FormatsSafetensors, GarbageNeverCrashes) {
  const std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})";
  const std::string valid = file_with(h, 16);
  ASSERT_NO_THROW(parse(valid));
  uint64_t state = 88172645463325252ull;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes = valid;
    const int edits = 1 + static_cast<int>(next() % 3);
    for (int e = 0; e < edits; ++e) bytes[next() % bytes.size()] = static_cast<char>(next());
    if (iter % 5 == 0) bytes.resize(next() % bytes.size());
    try {
      parse(bytes);
    } catch (const nd::Error&) {
    }
  }
}

}  // namespace

}  // namespace nd_test_formats_safetensors_test
