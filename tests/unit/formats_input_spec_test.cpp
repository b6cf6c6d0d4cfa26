// --input-shape spec parsing (src/formats/input_spec.h).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "formats/input_spec.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_formats_input_spec_test {

namespace {

using nd::formats::DType;
using nd::formats::InputShapeSpec;
using nd::formats::parse_input_shape_spec;

void expect_usage_error(const std::string& spec, const std::string& needle) {
  try {
    parse_input_shape_spec(spec);
    FAIL() << "no error for '" << spec << "'; expected one containing: " << needle;
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kUsage);
    EXPECT_EQ(e.exit_code(), nd::ExitCode::kUsage);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--input-shape '" + spec.substr(0, 64)), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

TEST(FormatsInputSpec, PositionalDefaults) {
  const InputShapeSpec s = parse_input_shape_spec("4x3x64x64");
  EXPECT_EQ(s.text, "4x3x64x64");
  EXPECT_TRUE(s.name.empty());
  EXPECT_EQ(s.dims, (std::vector<int64_t>{4, 3, 64, 64}));
  EXPECT_EQ(s.dtype, DType::kFloat32);
  EXPECT_FALSE(s.has_range);  // standard normal
  EXPECT_FALSE(s.constant());
}

TEST(FormatsInputSpec, NamedWithDtypeAndRange) {
  const InputShapeSpec x = parse_input_shape_spec("x=4x3x64x64:float32:0..1");
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.dtype, DType::kFloat32);
  EXPECT_TRUE(x.has_range);
  EXPECT_EQ(x.low, 0.0);
  EXPECT_EQ(x.high, 1.0);

  const InputShapeSpec ids = parse_input_shape_spec("input_ids=2x16:int64:0..1000");
  EXPECT_EQ(ids.name, "input_ids");
  EXPECT_EQ(ids.dims, (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(ids.dtype, DType::kInt64);
  EXPECT_EQ(ids.high, 1000.0);
  EXPECT_FALSE(ids.constant());

  const InputShapeSpec mask = parse_input_shape_spec("attention_mask=2x16:int64:1..1");
  EXPECT_TRUE(mask.constant());
  EXPECT_EQ(mask.low, 1.0);
}

TEST(FormatsInputSpec, RangeWithoutDtypeAndOtherForms) {
  const InputShapeSpec s = parse_input_shape_spec("x=8x16:-1.5..2.5e1");
  EXPECT_EQ(s.dtype, DType::kFloat32);
  EXPECT_EQ(s.low, -1.5);
  EXPECT_EQ(s.high, 25.0);
  EXPECT_EQ(parse_input_shape_spec("8").dims, (std::vector<int64_t>{8}));
  EXPECT_EQ(parse_input_shape_spec("x=2x2:half").dtype, DType::kFloat16);
  EXPECT_EQ(parse_input_shape_spec("x=2x2:long").dtype, DType::kInt64);
  EXPECT_EQ(parse_input_shape_spec("x=2x2:bfloat16").dtype, DType::kBFloat16);
  EXPECT_EQ(parse_input_shape_spec("m=2x2:bool:1..1").dtype, DType::kBool);
  EXPECT_EQ(parse_input_shape_spec("m=2x2:uint8:0..256").high, 256.0);
  EXPECT_EQ(parse_input_shape_spec("m=2x2:int8:-128..128").low, -128.0);
  EXPECT_TRUE(parse_input_shape_spec("x=2:float64:0.5..0.5").constant());
}

TEST(FormatsInputSpec, Errors) {
  expect_usage_error("", "empty spec");
  expect_usage_error("x=", "no dimensions");
  expect_usage_error("4x", "dimension '' is not a positive integer");
  expect_usage_error("4x3xa", "dimension 'a'");
  expect_usage_error("4,3", "dimension '4,3'");
  expect_usage_error("4x0", "dimension 0 must be at least 1");
  expect_usage_error("4x-3", "dimension -3 must be at least 1");
  expect_usage_error("99999999999999999999", "dimension");
  expect_usage_error("65536x65536", "more than 2^30 elements");
  expect_usage_error("1x2=4", "name '1x2'");
  expect_usage_error("my-x=4", "name 'my-x'");
  expect_usage_error("x=4:float128", "unknown dtype 'float128'");
  expect_usage_error("x=4:uint16", "unknown dtype 'uint16'");
  expect_usage_error("x=4:", "empty dtype");
  expect_usage_error("x=4:float32:int64", "two dtypes");
  expect_usage_error("x=4:0..1:float32", "the dtype goes before the range");
  expect_usage_error("x=4:0..1:0..2", "two ranges");
  expect_usage_error("x=4:a:b:c", "too many");
  expect_usage_error("x=4:1..0", "LOW above HIGH");
  expect_usage_error("x=4:..1", "no low bound");
  expect_usage_error("x=4:0..", "no high bound");
  expect_usage_error("x=4:0..inf", "high bound 'inf' is not a number");
  expect_usage_error("x=4:nan..1", "is not a number");
  expect_usage_error("x=4:1e999..1e999", "not a finite number");
  expect_usage_error("ids=4:int64:0..1.5", "is not an integer");
  expect_usage_error("ids=4:int64:0..99999999999999999999", "is not an integer");
  expect_usage_error("ids=4:int8:0..200", "does not fit int8 (values -128 to 127)");
  expect_usage_error("ids=4:uint8:-1..3", "does not fit uint8");
  expect_usage_error("m=4:bool:0..3", "does not fit bool");
  expect_usage_error("m=4:bool:2..2", "does not fit bool");
  expect_usage_error("h=4:float16:0..70000", "does not fit float16");
  expect_usage_error(std::string(2000, '4'), "longer than 1024");
}

TEST(FormatsInputSpec, GarbageNeverCrashes) {
  const std::string alphabet = "0123456789x=:.-+eE_abfloatintbool ";
  uint64_t state = 1234567;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s(next() % 24, ' ');
    for (auto& c : s) c = alphabet[next() % alphabet.size()];
    try {
      parse_input_shape_spec(s);
    } catch (const nd::Error& e) {
      EXPECT_EQ(e.kind(), nd::error_kind::kUsage);
    }
  }
}

}  // namespace

}  // namespace nd_test_formats_input_spec_test
