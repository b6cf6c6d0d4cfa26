#include "formats/dtype.h"

#include <string_view>

namespace nd::formats {

namespace {

struct DTypeInfo {
  DType type;
  const char* name;         // torch name
  std::size_t itemsize;
  const char* storage;      // legacy storage class, or nullptr
  const char* safetensors;  // safetensors code, or nullptr
};

constexpr DTypeInfo kTable[] = {
    {DType::kBool, "bool", 1, "BoolStorage", "BOOL"},
    {DType::kUInt8, "uint8", 1, "ByteStorage", "U8"},
    {DType::kInt8, "int8", 1, "CharStorage", "I8"},
    {DType::kInt16, "int16", 2, "ShortStorage", "I16"},
    {DType::kInt32, "int32", 4, "IntStorage", "I32"},
    {DType::kInt64, "int64", 8, "LongStorage", "I64"},
    {DType::kFloat16, "float16", 2, "HalfStorage", "F16"},
    {DType::kBFloat16, "bfloat16", 2, "BFloat16Storage", "BF16"},
    {DType::kFloat32, "float32", 4, "FloatStorage", "F32"},
    {DType::kFloat64, "float64", 8, "DoubleStorage", "F64"},
    {DType::kComplex64, "complex64", 8, "ComplexFloatStorage", "C64"},
    {DType::kComplex128, "complex128", 16, "ComplexDoubleStorage", nullptr},
    {DType::kUInt16, "uint16", 2, nullptr, "U16"},
    {DType::kUInt32, "uint32", 4, nullptr, "U32"},
    {DType::kUInt64, "uint64", 8, nullptr, "U64"},
    {DType::kFloat8E4M3FN, "float8_e4m3fn", 1, nullptr, "F8_E4M3"},
    {DType::kFloat8E5M2, "float8_e5m2", 1, nullptr, "F8_E5M2"},
};

const DTypeInfo& info(DType t) {
  for (const auto& row : kTable) {
    if (row.type == t) return row;
  }
  return kTable[0];  // unreachable: every enumerator has a row
}

// PyTorch's aliases (torch.float is torch.float32, ...).
struct Alias {
  const char* alias;
  DType type;
};
constexpr Alias kAliases[] = {
    {"float", DType::kFloat32},     {"double", DType::kFloat64}, {"half", DType::kFloat16},
    {"long", DType::kInt64},        {"int", DType::kInt32},      {"short", DType::kInt16},
    {"cfloat", DType::kComplex64},  {"cdouble", DType::kComplex128},
};

}  // namespace

const char* dtype_name(DType t) { return info(t).name; }

std::size_t dtype_itemsize(DType t) { return info(t).itemsize; }

bool dtype_is_integral(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      return true;
    default:
      return false;
  }
}

std::optional<DType> dtype_from_torch_name(std::string_view name) {
  constexpr std::string_view kPrefix = "torch.";
  if (name.substr(0, kPrefix.size()) == kPrefix) name.remove_prefix(kPrefix.size());
  for (const auto& row : kTable) {
    if (name == row.name) return row.type;
  }
  for (const auto& a : kAliases) {
    if (name == a.alias) return a.type;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_storage_class(std::string_view name) {
  for (const auto& row : kTable) {
    if (row.storage != nullptr && name == row.storage) return row.type;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& row : kTable) {
    if (row.safetensors != nullptr && name == row.safetensors) return row.type;
  }
  return std::nullopt;
}

}  // namespace nd::formats
