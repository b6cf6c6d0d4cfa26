// Element types named in user files (torch.save storages, safetensors headers,
// --input-shape specs), without LibTorch. src/model maps them to at::ScalarType.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace nd::formats {

/// Every element type the parsers can name. The ones after kComplex128 exist
/// only in newer PyTorch (2.1+) and are reported as unsupported by the loader.
enum class DType {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat8E4M3FN,
  kFloat8E5M2,
};

/// PyTorch's name without "torch.": "float32", "int64", "bool", "bfloat16".
const char* dtype_name(DType t);

/// Bytes per element.
std::size_t dtype_itemsize(DType t);

/// True for bool and the integer types.
bool dtype_is_integral(DType t);

/// Parses a PyTorch dtype name, with or without "torch.": "float32", "float",
/// "half", "int64", "long", "bool", "torch.bfloat16", ... Empty when unknown.
std::optional<DType> dtype_from_torch_name(std::string_view name);

/// Maps a legacy storage class name ("FloatStorage", "BFloat16Storage") to its
/// element type. Empty when unknown (quantized storages among them).
std::optional<DType> dtype_from_storage_class(std::string_view name);

/// Maps a safetensors dtype ("F32", "BF16", "I64", "BOOL", ...). Empty when unknown.
std::optional<DType> dtype_from_safetensors(std::string_view name);

}  // namespace nd::formats
