// A restricted pickle virtual machine for the data.pkl record of torch.save
// archives (PyTorch 1.6 to 2.x, pickle protocol 2 by default; protocols up to
// 5 are read too). No LibTorch: tensors come back as TensorRef records that
// src/model materializes from the archive's data/<key> records.
//
// Only the Python globals torch.save emits for tensors and plain containers
// are accepted; anything else (a pickled nn.Module, a numpy array, a custom
// class) is an nd::Error (kind input_load) naming the Python class. Malformed
// input of any kind is an nd::Error too, never a crash: lengths are bounded by
// the bytes left, the memo is a map, nesting and the expanded tree are capped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/dtype.h"

namespace nd::formats {

/// A tensor as torch.save describes it: where its elements live and how it views them.
struct TensorRef {
  std::string storage_key;     ///< record name under data/ ("0", "1", ...)
  DType dtype = DType::kFloat32;  ///< element type (from the storage class or v3's dtype)
  std::string device;          ///< location it was saved from ("cpu", "cuda:0")
  int64_t storage_numel = 0;   ///< elements of `dtype` in the storage
  int64_t storage_offset = 0;  ///< in elements
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  ///< in elements
  bool requires_grad = false;
};

/// One node of the unpickled value tree.
struct PickleValue {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,  ///< str (UTF-8 in `str`)
    kBytes,   ///< bytes (raw in `str`)
    kTuple,   ///< elements in `items`
    kList,    ///< elements in `items`
    kDict,    ///< keys in `keys`, values in `items`, insertion order
    kTensor,  ///< `tensor`
    kDtype,   ///< a torch dtype object (torch.float32), in `dtype`
    kDevice,  ///< a torch.device, its string ("cuda:0") in `str`
  };
  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double floating = 0.0;
  std::string str;
  DType dtype = DType::kFloat32;
  bool ordered_dict = false;  ///< kDict built by collections.OrderedDict
  std::vector<PickleValue> items;
  std::vector<PickleValue> keys;
  TensorRef tensor;
};

/// Python-style name of a kind for messages: "None", "bool", "int", "str", "tuple", "Tensor", ...
const char* pickle_kind_name(PickleValue::Kind kind);

/// Limits that keep hostile input cheap. The defaults fit any real batch file
/// (torch.save writes about 30 objects per tensor).
struct PickleLimits {
  std::size_t max_depth = 100;          ///< nesting of containers in the result
  std::size_t max_objects = 1u << 20;   ///< objects, stack entries and memo entries while running
  std::size_t max_nodes = 1u << 17;     ///< nodes in the result (memo references expanded)
  std::size_t max_bytes = 16u << 20;    ///< string/bytes payload in the result (expanded)
};

/// Runs the pickle in [data, data+size). `source` names it in messages
/// ("batch.pt (data.pkl)"). Throws nd::Error (kind input_load, exit 3).
PickleValue parse_torch_pickle(const uint8_t* data, std::size_t size, std::string_view source,
                               const PickleLimits& limits = {});

/// Checks that a tensor's view fits in its storage: sizes and strides
/// non-negative, offset + sum((size-1)*stride) < storage_numel, no overflow.
/// Throws nd::Error naming `source`. parse_torch_pickle calls it for every tensor.
void validate_tensor_ref(const TensorRef& ref, std::string_view source);

}  // namespace nd::formats
