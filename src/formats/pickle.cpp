// Restricted pickle VM for torch.save's data.pkl. See pickle.h for the contract.
//
// The VM keeps every object in an arena of small nodes addressed by index, so
// memo references (BINGET) and in-place mutation (APPEND on a memoized list)
// behave as in Python without reference-counting cycles. The arena grows by at
// most one node per opcode, so its size is bounded by the input. The result is
// then copied into an owned PickleValue tree, with caps on depth, node count
// and payload bytes (a memo reference can be expanded many times).
#include "formats/pickle.h"

#include <cstring>
#include <limits>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "formats/text.h"

namespace nd::formats {

const char* pickle_kind_name(PickleValue::Kind kind) {
  using K = PickleValue::Kind;
  switch (kind) {
    case K::kNone: return "None";
    case K::kBool: return "bool";
    case K::kInt: return "int";
    case K::kFloat: return "float";
    case K::kString: return "str";
    case K::kBytes: return "bytes";
    case K::kTuple: return "tuple";
    case K::kList: return "list";
    case K::kDict: return "dict";
    case K::kTensor: return "Tensor";
    case K::kDtype: return "torch.dtype";
    case K::kDevice: return "torch.device";
  }
  return "?";
}

namespace {

[[noreturn]] void fail_pickle(std::string_view source, const std::string& what) { throw_load_error(error_kind::kInputLoad, source, what); }

// Overflow-checked arithmetic on non-negative int64.
bool mul_ok(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) return false;
  *out = a * b;
  return true;
}
bool add_ok(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  if (b > std::numeric_limits<int64_t>::max() - a) return false;
  *out = a + b;
  return true;
}

// Callables and classes the VM accepts (the torch.save vocabulary).
enum class GlobalId : uint8_t {
  kRebuildTensor,
  kRebuildTensorV2,
  kRebuildTensorV3,
  kRebuildParameter,
  kRebuildParameterWithState,
  kRebuildFromTypeV2,
  kOrderedDict,
  kStorageClass,    // typed legacy storage class; element type in Node::i
  kUntypedStorage,  // torch.UntypedStorage (bytes)
  kDevice,
  kTorchSize,
  kTensorClass,     // torch.Tensor
  kParameterClass,  // torch.nn.parameter.Parameter
  kCodecsEncode,    // _codecs.encode (bytes in protocol 2)
  kRestoreTypeTag,  // torch.jit._pickle.restore_type_tag(value, type_str): TorchScript's
                    // type annotation on a container (traced_inputs.pkl); returns value
};

enum class NKind : uint8_t {
  kNone, kBool, kInt, kFloat, kString, kBytes, kTuple, kList, kDict, kTensor, kDtype, kDevice,
  kGlobal,   // flag = GlobalId, ref = qualified name in strings_, i = dtype for storage classes
  kStorage,  // ref = index in storages_
};

struct Node {
  NKind kind = NKind::kNone;
  uint8_t flag = 0;   // bool value; ordered dict; GlobalId
  uint32_t ref = 0;   // index into a side table
  union {
    int64_t i;
    double f;
  };
  Node() : i(0) {}
};

struct DictData {
  std::vector<uint32_t> keys;
  std::vector<uint32_t> values;
  std::unordered_map<std::string, std::size_t> index;  // hashable keys -> position
};

struct StorageData {
  std::string key;
  std::string device;
  DType dtype = DType::kUInt8;
  int64_t numel = 0;  // elements of dtype
  std::string class_name;
};

struct GlobalName {
  const char* module;
  const char* name;
  GlobalId id;
};

constexpr GlobalName kGlobals[] = {
    {"torch._utils", "_rebuild_tensor", GlobalId::kRebuildTensor},
    {"torch._utils", "_rebuild_tensor_v2", GlobalId::kRebuildTensorV2},
    {"torch._utils", "_rebuild_tensor_v3", GlobalId::kRebuildTensorV3},
    {"torch._utils", "_rebuild_parameter", GlobalId::kRebuildParameter},
    {"torch._utils", "_rebuild_parameter_with_state", GlobalId::kRebuildParameterWithState},
    {"torch._tensor", "_rebuild_from_type_v2", GlobalId::kRebuildFromTypeV2},
    {"collections", "OrderedDict", GlobalId::kOrderedDict},
    {"torch", "UntypedStorage", GlobalId::kUntypedStorage},
    {"torch.storage", "UntypedStorage", GlobalId::kUntypedStorage},
    {"torch", "device", GlobalId::kDevice},
    {"torch", "Size", GlobalId::kTorchSize},
    {"torch", "Tensor", GlobalId::kTensorClass},
    {"torch._tensor", "Tensor", GlobalId::kTensorClass},
    {"torch.nn.parameter", "Parameter", GlobalId::kParameterClass},
    {"_codecs", "encode", GlobalId::kCodecsEncode},
    {"torch.jit._pickle", "restore_type_tag", GlobalId::kRestoreTypeTag},
};

// Pickle opcodes (Python's Lib/pickle.py names).
namespace op {
constexpr uint8_t MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', BININT = 'J',
                  BININT1 = 'K', BININT2 = 'M', NONE = 'N', BINPERSID = 'Q', REDUCE = 'R',
                  BINSTRING = 'T', SHORT_BINSTRING = 'U', BINUNICODE = 'X', APPEND = 'a',
                  BUILD = 'b', GLOBAL = 'c', DICT = 'd', EMPTY_DICT = '}', APPENDS = 'e',
                  GET = 'g', BINGET = 'h', INST = 'i', LONG_BINGET = 'j', LIST = 'l',
                  EMPTY_LIST = ']', OBJ = 'o', PUT = 'p', BINPUT = 'q', LONG_BINPUT = 'r',
                  SETITEM = 's', TUPLE = 't', EMPTY_TUPLE = ')', SETITEMS = 'u', BINFLOAT = 'G',
                  PROTO = 0x80, NEWOBJ = 0x81, TUPLE1 = 0x85, TUPLE2 = 0x86, TUPLE3 = 0x87,
                  NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b, BINBYTES = 'B',
                  SHORT_BINBYTES = 'C', SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d,
                  BINBYTES8 = 0x8e, NEWOBJ_EX = 0x92, STACK_GLOBAL = 0x93, MEMOIZE = 0x94,
                  FRAME = 0x95, BYTEARRAY8 = 0x96;
}  // namespace op

class Machine {
 public:
  Machine(const uint8_t* data, std::size_t size, std::string_view source, const PickleLimits& limits)
      : p_(data), size_(size), source_(source), limits_(limits) {}

  PickleValue run() {
    const uint32_t result = execute();
    std::size_t nodes = 0;
    std::size_t bytes = 0;
    return convert(result, 0, nodes, bytes);
  }

 private:
  // ---- input ----
  [[noreturn]] void malformed(const std::string& what) const {
    fail_pickle(source_, "malformed pickle at byte " + std::to_string(op_pos_) + ": " + what);
  }
  void need(std::size_t n, const char* what) const {
    if (size_ - pos_ < n) {
      malformed(std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes, " +
                std::to_string(size_ - pos_) + " left");
    }
  }
  uint64_t read_le(std::size_t n, const char* what) {
    need(n, what);
    uint64_t v = 0;
    for (std::size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(p_[pos_ + k]) << (8 * k);
    pos_ += n;
    return v;
  }
  std::string read_bytes(uint64_t n, const char* what) {
    if (n > size_ - pos_) {
      malformed(std::string("truncated: ") + what + " of " + std::to_string(n) + " bytes, " +
                std::to_string(size_ - pos_) + " left");
    }
    std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  std::string read_line(const char* what) {
    const void* nl = std::memchr(p_ + pos_, '\n', size_ - pos_);
    if (nl == nullptr) malformed(std::string("truncated: ") + what + " has no end of line");
    const auto end = static_cast<std::size_t>(static_cast<const uint8_t*>(nl) - p_);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), end - pos_);
    pos_ = end + 1;
    if (!s.empty() && s.back() == '\r') s.pop_back();
    return s;
  }

  // ---- arena ----
  uint32_t new_node(NKind kind) {
    if (nodes_.size() >= limits_.max_objects) {
      malformed("more than " + std::to_string(limits_.max_objects) + " objects");
    }
    nodes_.emplace_back();
    nodes_.back().kind = kind;
    return static_cast<uint32_t>(nodes_.size() - 1);
  }
  uint32_t new_int(int64_t v) {
    const uint32_t n = new_node(NKind::kInt);
    nodes_[n].i = v;
    return n;
  }
  uint32_t new_string(NKind kind, std::string s) {
    const uint32_t n = new_node(kind);
    nodes_[n].ref = static_cast<uint32_t>(strings_.size());
    strings_.push_back(std::move(s));
    return n;
  }
  uint32_t new_seq(NKind kind, std::vector<uint32_t> items) {
    const uint32_t n = new_node(kind);
    nodes_[n].ref = static_cast<uint32_t>(seqs_.size());
    seqs_.push_back(std::move(items));
    return n;
  }
  uint32_t new_dict(bool ordered) {
    const uint32_t n = new_node(NKind::kDict);
    nodes_[n].ref = static_cast<uint32_t>(dicts_.size());
    nodes_[n].flag = ordered ? 1 : 0;
    dicts_.emplace_back();
    return n;
  }
  uint32_t new_global(GlobalId id, std::string qualified, int64_t extra = 0) {
    const uint32_t n = new_string(NKind::kGlobal, std::move(qualified));
    nodes_[n].flag = static_cast<uint8_t>(id);
    nodes_[n].i = extra;
    return n;
  }
  const std::string& str_of(uint32_t n) const { return strings_[nodes_[n].ref]; }

  // ---- stack ----
  void push(uint32_t n) {
    if (stack_.size() >= limits_.max_objects) {
      malformed("stack holds more than " + std::to_string(limits_.max_objects) + " objects");
    }
    stack_.push_back(n);
  }
  void memo_put(uint32_t key, uint32_t n) {
    if (memo_.size() >= limits_.max_objects && memo_.count(key) == 0) {
      malformed("memo holds more than " + std::to_string(limits_.max_objects) + " objects");
    }
    memo_[key] = n;
  }
  uint32_t pop() {
    if (stack_.size() <= floor()) malformed("stack underflow");
    const uint32_t n = stack_.back();
    stack_.pop_back();
    return n;
  }
  uint32_t top() const {
    if (stack_.size() <= floor()) malformed("stack underflow");
    return stack_.back();
  }
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) malformed("no MARK to pop to");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }

  // ---- helpers on nodes ----
  std::string describe(uint32_t n) const {
    const Node& x = nodes_[n];
    switch (x.kind) {
      case NKind::kNone: return "None";
      case NKind::kBool: return "a bool";
      case NKind::kInt: return "an int";
      case NKind::kFloat: return "a float";
      case NKind::kString: return "a str";
      case NKind::kBytes: return "bytes";
      case NKind::kTuple: return "a tuple";
      case NKind::kList: return "a list";
      case NKind::kDict: return "a dict";
      case NKind::kTensor: return "a Tensor";
      case NKind::kDtype: return "a torch.dtype";
      case NKind::kDevice: return "a torch.device";
      case NKind::kGlobal: return "'" + str_of(n) + "'";
      case NKind::kStorage: return "a storage";
    }
    return "?";
  }
  const std::vector<uint32_t>& tuple_items(uint32_t n, const char* what) const {
    if (nodes_[n].kind != NKind::kTuple) {
      malformed(std::string(what) + " expects a tuple, got " + describe(n));
    }
    return seqs_[nodes_[n].ref];
  }
  int64_t as_int(uint32_t n, const char* what) const {
    if (nodes_[n].kind == NKind::kInt) return nodes_[n].i;
    if (nodes_[n].kind == NKind::kBool) return nodes_[n].flag;
    malformed(std::string(what) + " must be an int, got " + describe(n));
  }
  bool as_bool(uint32_t n, const char* what) const {
    if (nodes_[n].kind == NKind::kBool) return nodes_[n].flag != 0;
    if (nodes_[n].kind == NKind::kInt) return nodes_[n].i != 0;
    malformed(std::string(what) + " must be a bool, got " + describe(n));
  }
  const std::string& as_str(uint32_t n, const char* what) const {
    if (nodes_[n].kind != NKind::kString) {
      malformed(std::string(what) + " must be a str, got " + describe(n));
    }
    return str_of(n);
  }
  std::vector<int64_t> as_int_tuple(uint32_t n, const char* what) const {
    const NKind k = nodes_[n].kind;
    if (k != NKind::kTuple && k != NKind::kList) {
      malformed(std::string(what) + " must be a tuple of ints, got " + describe(n));
    }
    std::vector<int64_t> out;
    for (uint32_t e : seqs_[nodes_[n].ref]) out.push_back(as_int(e, what));
    return out;
  }
  // Key under which a dict remembers a hashable key (str/int/bool/None), or "".
  std::string hash_key(uint32_t n) const {
    const Node& x = nodes_[n];
    switch (x.kind) {
      case NKind::kString: return "s" + str_of(n);
      case NKind::kBytes: return "b" + str_of(n);
      case NKind::kInt: return "i" + std::to_string(x.i);
      case NKind::kBool: return "i" + std::to_string(x.flag);  // True == 1 in Python
      case NKind::kNone: return "n";
      default: return {};
    }
  }
  void dict_set(uint32_t dict, uint32_t key, uint32_t value) {
    if (nodes_[dict].kind != NKind::kDict) {
      malformed("SETITEM on " + describe(dict) + ", not a dict");
    }
    DictData& d = dicts_[nodes_[dict].ref];
    const std::string hk = hash_key(key);
    if (!hk.empty()) {
      auto it = d.index.find(hk);
      if (it != d.index.end()) {
        d.values[it->second] = value;
        return;
      }
      d.index.emplace(hk, d.keys.size());
    }
    d.keys.push_back(key);
    d.values.push_back(value);
  }

  // ---- globals ----
  uint32_t resolve_global(const std::string& module, const std::string& name) {
    const std::string qualified = module + "." + name;
    for (const auto& g : kGlobals) {
      if (module == g.module && name == g.name) return new_global(g.id, qualified);
    }
    if (module == "torch" || module == "torch.cuda") {
      if (auto dt = dtype_from_storage_class(name)) {
        return new_global(GlobalId::kStorageClass, qualified, static_cast<int64_t>(*dt));
      }
      if (module == "torch") {
        if (auto dt = dtype_from_torch_name(name)) {
          const uint32_t n = new_node(NKind::kDtype);
          nodes_[n].i = static_cast<int64_t>(*dt);
          return n;
        }
      }
    }
    unsupported_global(module, name);
  }

  [[noreturn]] void unsupported_global(const std::string& module, const std::string& name) const {
    const std::string qualified = module + "." + name;
    std::string hint;
    if (module == "numpy" || module.rfind("numpy.", 0) == 0) {
      hint = ": numpy arrays are not read; convert them with torch.from_numpy() before torch.save";
    } else if (name == "_rebuild_sparse_tensor" || qualified == "torch.serialization._get_layout" ||
               name == "_rebuild_sparse_csr_tensor") {
      hint = ": sparse tensors are not read; save x.to_dense()";
    } else if (name == "_rebuild_qtensor" || (module == "torch" && name.rfind("Q", 0) == 0 &&
                                              name.size() > 7 &&
                                              name.compare(name.size() - 7, 7, "Storage") == 0)) {
      hint = ": quantized tensors are not read; save x.dequantize()";
    } else if (name == "_rebuild_meta_tensor_no_storage") {
      hint = ": meta tensors hold no data; save a real tensor";
    } else if (name == "_rebuild_nested_tensor") {
      hint = ": nested tensors are not read; save a padded tensor and a mask";
    } else if (module.rfind("torch", 0) == 0 && name.find("Storage") != std::string::npos) {
      hint = ": this storage type is not read";
    } else {
      hint = ": normdoctor reads tensors, tuples, lists and dicts of tensors";
    }
    fail_pickle(source_, "contains a pickled Python object of class '" + qualified + "'" + hint);
  }

  // ---- REDUCE / NEWOBJ ----
  uint32_t call(uint32_t callable, uint32_t args_node) {
    if (nodes_[callable].kind != NKind::kGlobal) {
      malformed("REDUCE on " + describe(callable) + ", not a callable");
    }
    // Copies: the arena's tables may grow (and move) while this call builds objects.
    const std::string fname = str_of(callable);
    const std::vector<uint32_t> args = tuple_items(args_node, fname.c_str());
    const auto id = static_cast<GlobalId>(nodes_[callable].flag);
    auto want = [&](std::size_t lo, std::size_t hi) {
      if (args.size() < lo || args.size() > hi) {
        malformed(fname + " takes " + std::to_string(lo) +
                  (hi != lo ? " to " + std::to_string(hi) : std::string()) + " arguments, got " +
                  std::to_string(args.size()));
      }
    };
    switch (id) {
      case GlobalId::kRebuildTensor:
        want(4, 4);
        return make_tensor(args, false, nullptr);
      case GlobalId::kRebuildTensorV2:
        want(6, 7);
        return make_tensor(args, true, nullptr);
      case GlobalId::kRebuildTensorV3: {
        want(7, 8);
        if (nodes_[args[6]].kind != NKind::kDtype) {
          malformed(fname + ": dtype argument is " + describe(args[6]));
        }
        const auto dt = static_cast<DType>(nodes_[args[6]].i);
        return make_tensor(args, true, &dt);
      }
      case GlobalId::kRebuildParameter:
      case GlobalId::kRebuildParameterWithState: {
        want(3, 4);
        if (nodes_[args[0]].kind != NKind::kTensor) {
          malformed(fname + ": data argument is " + describe(args[0]));
        }
        const uint32_t n = new_node(NKind::kTensor);
        nodes_[n].ref = static_cast<uint32_t>(tensors_.size());
        TensorRef t = tensors_[nodes_[args[0]].ref];
        t.requires_grad = as_bool(args[1], "requires_grad");
        tensors_.push_back(std::move(t));
        return n;
      }
      case GlobalId::kRebuildFromTypeV2: {
        // (func, new_type, args, state): a tensor with Python attributes.
        want(4, 4);
        const uint32_t type = args[1];
        const bool plain = nodes_[type].kind == NKind::kGlobal &&
                           (static_cast<GlobalId>(nodes_[type].flag) == GlobalId::kTensorClass ||
                            static_cast<GlobalId>(nodes_[type].flag) == GlobalId::kParameterClass);
        if (!plain) {
          fail_pickle(source_, "contains a tensor subclass " + describe(type) +
                            ": normdoctor reads plain torch.Tensor objects");
        }
        const uint32_t result = call(args[0], args[2]);
        if (nodes_[result].kind != NKind::kTensor) {
          malformed(fname + " rebuilt " + describe(result) + ", not a tensor");
        }
        return result;
      }
      case GlobalId::kOrderedDict: {
        want(0, 1);
        const uint32_t d = new_dict(true);
        if (args.size() == 1) {
          const NKind k = nodes_[args[0]].kind;
          if (k != NKind::kList && k != NKind::kTuple) {
            malformed("OrderedDict argument is " + describe(args[0]));
          }
          const std::vector<uint32_t> pairs = seqs_[nodes_[args[0]].ref];
          for (uint32_t pair : pairs) {
            const NKind pk = nodes_[pair].kind;
            if ((pk != NKind::kList && pk != NKind::kTuple) || seqs_[nodes_[pair].ref].size() != 2) {
              malformed("OrderedDict item is " + describe(pair) + ", not a (key, value) pair");
            }
            const auto kv = seqs_[nodes_[pair].ref];
            dict_set(d, kv[0], kv[1]);
          }
        }
        return d;
      }
      case GlobalId::kDevice: {
        want(1, 2);
        std::string dev = as_str(args[0], "torch.device type");
        if (args.size() == 2 && nodes_[args[1]].kind != NKind::kNone) {
          dev += ":" + std::to_string(as_int(args[1], "torch.device index"));
        }
        return new_string(NKind::kDevice, std::move(dev));
      }
      case GlobalId::kTorchSize: {
        want(0, 1);
        std::vector<uint32_t> dims;
        if (args.size() == 1) {
          for (int64_t v : as_int_tuple(args[0], "torch.Size")) dims.push_back(new_int(v));
        }
        return new_seq(NKind::kTuple, std::move(dims));
      }
      case GlobalId::kCodecsEncode: {
        want(1, 2);
        const std::string& text = as_str(args[0], "_codecs.encode text");
        const std::string enc = args.size() == 2 ? as_str(args[1], "_codecs.encode encoding") : "utf-8";
        if (enc == "utf-8" || enc == "utf8") return new_string(NKind::kBytes, text);
        if (enc != "latin1" && enc != "latin-1") malformed("_codecs.encode with encoding " + enc);
        std::string out;
        for (std::size_t k = 0; k < text.size(); ++k) {
          const auto c = static_cast<unsigned char>(text[k]);
          if (c < 0x80) {
            out.push_back(static_cast<char>(c));
          } else if ((c & 0xE0) == 0xC0 && k + 1 < text.size() && c <= 0xC3) {
            out.push_back(static_cast<char>(((c & 0x1F) << 6) | (static_cast<unsigned char>(text[k + 1]) & 0x3F)));
            ++k;
          } else {
            malformed("_codecs.encode: character beyond latin-1");
          }
        }
        return new_string(NKind::kBytes, std::move(out));
      }
      case GlobalId::kRestoreTypeTag: {
        want(2, 2);
        as_str(args[1], "restore_type_tag type");
        return args[0];
      }
      case GlobalId::kStorageClass:
      case GlobalId::kUntypedStorage:
      case GlobalId::kTensorClass:
      case GlobalId::kParameterClass:
        fail_pickle(source_, "contains a pickled Python object of class '" + fname +
                          "' built directly: normdoctor reads tensors saved with torch.save");
    }
    malformed("unknown callable");
  }

  uint32_t make_tensor(const std::vector<uint32_t>& args, bool has_grad, const DType* v3_dtype) {
    if (nodes_[args[0]].kind != NKind::kStorage) {
      malformed("tensor storage argument is " + describe(args[0]) + ", not a persistent storage");
    }
    const StorageData& st = storages_[nodes_[args[0]].ref];
    TensorRef t;
    t.storage_key = st.key;
    t.device = st.device;
    t.dtype = st.dtype;
    t.storage_numel = st.numel;
    if (v3_dtype != nullptr && *v3_dtype != st.dtype) {
      // v3 reinterprets the storage's bytes with the given dtype.
      int64_t bytes = 0;
      if (!mul_ok(st.numel, static_cast<int64_t>(dtype_itemsize(st.dtype)), &bytes)) {
        malformed("storage size overflows");
      }
      t.dtype = *v3_dtype;
      t.storage_numel = bytes / static_cast<int64_t>(dtype_itemsize(*v3_dtype));
    }
    t.storage_offset = as_int(args[1], "storage_offset");
    t.sizes = as_int_tuple(args[2], "size");
    t.strides = as_int_tuple(args[3], "stride");
    if (has_grad) t.requires_grad = as_bool(args[4], "requires_grad");
    validate_tensor_ref(t, source_);
    const uint32_t n = new_node(NKind::kTensor);
    nodes_[n].ref = static_cast<uint32_t>(tensors_.size());
    tensors_.push_back(std::move(t));
    return n;
  }

  // BINPERSID: ('storage', storage_type, key, location, numel)
  uint32_t persistent_load(uint32_t pid) {
    const std::vector<uint32_t> items = tuple_items(pid, "persistent id");
    if (items.size() != 5 || nodes_[items[0]].kind != NKind::kString || str_of(items[0]) != "storage") {
      malformed("persistent id is not ('storage', type, key, location, size)");
    }
    StorageData st;
    const Node& type = nodes_[items[1]];
    int64_t itemsize = 1;
    if (type.kind == NKind::kGlobal && static_cast<GlobalId>(type.flag) == GlobalId::kStorageClass) {
      st.dtype = static_cast<DType>(type.i);
      st.class_name = str_of(items[1]);
    } else if (type.kind == NKind::kGlobal &&
               static_cast<GlobalId>(type.flag) == GlobalId::kUntypedStorage) {
      st.dtype = DType::kUInt8;  // size counts bytes
      st.class_name = str_of(items[1]);
    } else if (type.kind == NKind::kDtype) {
      st.dtype = static_cast<DType>(type.i);
      st.class_name = std::string("torch.") + dtype_name(st.dtype);
    } else {
      malformed("storage type is " + describe(items[1]));
    }
    itemsize = static_cast<int64_t>(dtype_itemsize(st.dtype));
    if (nodes_[items[2]].kind == NKind::kInt) {
      st.key = std::to_string(nodes_[items[2]].i);
    } else {
      st.key = as_str(items[2], "storage key");
    }
    if (st.key.empty() || st.key.find('/') != std::string::npos || st.key.find("..") != std::string::npos) {
      malformed("storage key '" + st.key + "' is not a record name");
    }
    st.device = as_str(items[3], "storage location");
    st.numel = as_int(items[4], "storage size");
    int64_t bytes = 0;
    if (st.numel < 0 || !mul_ok(st.numel, itemsize, &bytes)) {
      malformed("storage size " + std::to_string(st.numel) + " is out of range");
    }
    const uint32_t n = new_node(NKind::kStorage);
    nodes_[n].ref = static_cast<uint32_t>(storages_.size());
    storages_.push_back(std::move(st));
    return n;
  }

  void build(uint32_t obj, uint32_t state) {
    const NKind sk = nodes_[state].kind;
    const bool empty_state =
        sk == NKind::kNone || (sk == NKind::kDict && dicts_[nodes_[state].ref].keys.empty());
    switch (nodes_[obj].kind) {
      case NKind::kTensor:
        return;  // Python attributes of a tensor (hooks, metadata): not needed
      case NKind::kDict:
        if (empty_state) return;
        // An OrderedDict's instance attributes: state_dict() sets
        // `_metadata` (per-module versions). Not needed to read the tensors.
        if (nodes_[obj].flag != 0 && sk == NKind::kDict) return;
        break;
      default:
        break;
    }
    malformed("BUILD sets state on " + describe(obj));
  }

  // ---- main loop ----
  uint32_t execute() {
    while (true) {
      op_pos_ = pos_;
      if (pos_ >= size_) malformed("truncated: no STOP opcode");
      const uint8_t code = p_[pos_++];
      switch (code) {
        case op::PROTO: {
          const auto v = read_le(1, "PROTO");
          if (v > 5) malformed("pickle protocol " + std::to_string(v) + " is newer than 5");
          break;
        }
        case op::FRAME: {
          const uint64_t n = read_le(8, "FRAME");
          if (n > size_ - pos_) malformed("FRAME of " + std::to_string(n) + " bytes overruns the data");
          break;
        }
        case op::STOP:
          if (stack_.size() <= floor()) malformed("STOP with an empty stack");
          return stack_.back();
        case op::MARK:
          if (marks_.size() >= limits_.max_objects) malformed("too many open MARKs");
          marks_.push_back(stack_.size());
          break;
        case op::POP:
          if (!marks_.empty() && stack_.size() == floor()) {
            pop_mark();  // Python pops a mark when the stack top is one
          } else {
            pop();
          }
          break;
        case op::POP_MARK:
          pop_mark();
          break;
        case op::DUP:
          push(top());
          break;
        case op::NONE:
          push(new_node(NKind::kNone));
          break;
        case op::NEWTRUE:
        case op::NEWFALSE: {
          const uint32_t n = new_node(NKind::kBool);
          nodes_[n].flag = code == op::NEWTRUE ? 1 : 0;
          push(n);
          break;
        }
        case op::BININT:
          push(new_int(static_cast<int32_t>(static_cast<uint32_t>(read_le(4, "BININT")))));
          break;
        case op::BININT1:
          push(new_int(static_cast<int64_t>(read_le(1, "BININT1"))));
          break;
        case op::BININT2:
          push(new_int(static_cast<int64_t>(read_le(2, "BININT2"))));
          break;
        case op::LONG1:
        case op::LONG4: {
          const uint64_t n = code == op::LONG1 ? read_le(1, "LONG1")
                                               : static_cast<uint32_t>(read_le(4, "LONG4"));
          if (code == op::LONG4 && static_cast<int32_t>(static_cast<uint32_t>(n)) < 0) {
            malformed("LONG4 with a negative length");
          }
          if (n > 8) malformed("integer of " + std::to_string(n) + " bytes does not fit in 64 bits");
          uint64_t v = n == 0 ? 0 : read_le(static_cast<std::size_t>(n), "LONG");
          if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
          push(new_int(static_cast<int64_t>(v)));
          break;
        }
        case op::BINFLOAT: {
          need(8, "BINFLOAT");
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | p_[pos_ + k];  // big-endian
          pos_ += 8;
          const uint32_t n = new_node(NKind::kFloat);
          std::memcpy(&nodes_[n].f, &bits, sizeof(double));
          push(n);
          break;
        }
        case op::BINUNICODE:
        case op::SHORT_BINUNICODE:
        case op::BINUNICODE8: {
          const std::size_t w = code == op::SHORT_BINUNICODE ? 1 : code == op::BINUNICODE ? 4 : 8;
          const uint64_t n = read_le(w, "string length");
          std::string s = read_bytes(n, "string");
          if (!valid_utf8(s)) malformed("string is not valid UTF-8");
          push(new_string(NKind::kString, std::move(s)));
          break;
        }
        case op::BINSTRING:
        case op::SHORT_BINSTRING: {
          const uint64_t n = code == op::SHORT_BINSTRING
                                 ? read_le(1, "string length")
                                 : static_cast<uint32_t>(read_le(4, "string length"));
          std::string s = read_bytes(n, "string");
          if (!valid_utf8(s)) malformed("string is not valid UTF-8");
          push(new_string(NKind::kString, std::move(s)));
          break;
        }
        case op::BINBYTES:
        case op::SHORT_BINBYTES:
        case op::BINBYTES8:
        case op::BYTEARRAY8: {
          const std::size_t w = code == op::SHORT_BINBYTES ? 1 : code == op::BINBYTES ? 4 : 8;
          const uint64_t n = read_le(w, "bytes length");
          push(new_string(NKind::kBytes, read_bytes(n, "bytes")));
          break;
        }
        case op::EMPTY_TUPLE:
          push(new_seq(NKind::kTuple, {}));
          break;
        case op::TUPLE1:
        case op::TUPLE2:
        case op::TUPLE3: {
          const std::size_t n = code - op::TUPLE1 + 1u;
          std::vector<uint32_t> items(n);
          for (std::size_t k = n; k-- > 0;) items[k] = pop();
          push(new_seq(NKind::kTuple, std::move(items)));
          break;
        }
        case op::TUPLE:
          push(new_seq(NKind::kTuple, pop_mark()));
          break;
        case op::EMPTY_LIST:
          push(new_seq(NKind::kList, {}));
          break;
        case op::LIST:
          push(new_seq(NKind::kList, pop_mark()));
          break;
        case op::APPEND: {
          const uint32_t v = pop();
          const uint32_t l = top();
          if (nodes_[l].kind != NKind::kList) malformed("APPEND to " + describe(l) + ", not a list");
          seqs_[nodes_[l].ref].push_back(v);
          break;
        }
        case op::APPENDS: {
          std::vector<uint32_t> items = pop_mark();
          const uint32_t l = top();
          if (nodes_[l].kind != NKind::kList) malformed("APPENDS to " + describe(l) + ", not a list");
          auto& dst = seqs_[nodes_[l].ref];
          dst.insert(dst.end(), items.begin(), items.end());
          break;
        }
        case op::EMPTY_DICT:
          push(new_dict(false));
          break;
        case op::DICT: {
          std::vector<uint32_t> items = pop_mark();
          if (items.size() % 2 != 0) malformed("DICT with an odd number of items");
          const uint32_t d = new_dict(false);
          for (std::size_t k = 0; k < items.size(); k += 2) dict_set(d, items[k], items[k + 1]);
          push(d);
          break;
        }
        case op::SETITEM: {
          const uint32_t v = pop();
          const uint32_t k = pop();
          dict_set(top(), k, v);
          break;
        }
        case op::SETITEMS: {
          std::vector<uint32_t> items = pop_mark();
          if (items.size() % 2 != 0) malformed("SETITEMS with an odd number of items");
          const uint32_t d = top();
          for (std::size_t k = 0; k < items.size(); k += 2) dict_set(d, items[k], items[k + 1]);
          break;
        }
        case op::GLOBAL: {
          const std::string module = read_line("GLOBAL module");
          const std::string name = read_line("GLOBAL name");
          push(resolve_global(module, name));
          break;
        }
        case op::STACK_GLOBAL: {
          const uint32_t name = pop();
          const uint32_t module = pop();
          const std::string module_name = as_str(module, "STACK_GLOBAL module");
          const std::string global_name = as_str(name, "STACK_GLOBAL name");
          push(resolve_global(module_name, global_name));
          break;
        }
        case op::INST: {
          const std::string module = read_line("INST module");
          const std::string name = read_line("INST name");
          resolve_global(module, name);  // throws for classes we do not know
          malformed("INST opcode (protocol 0 object) is not supported");
        }
        case op::OBJ: {
          std::vector<uint32_t> items = pop_mark();
          if (!items.empty() && nodes_[items[0]].kind == NKind::kGlobal) {
            fail_pickle(source_, "contains a pickled Python object of class '" + str_of(items[0]) +
                              "': normdoctor reads tensors, tuples, lists and dicts of tensors");
          }
          malformed("OBJ opcode without a class");
        }
        case op::REDUCE: {
          const uint32_t args = pop();
          const uint32_t f = pop();
          push(call(f, args));
          break;
        }
        case op::NEWOBJ: {
          const uint32_t args = pop();
          const uint32_t cls = pop();
          push(call(cls, args));
          break;
        }
        case op::NEWOBJ_EX: {
          const uint32_t kwargs = pop();
          const uint32_t args = pop();
          const uint32_t cls = pop();
          if (nodes_[kwargs].kind != NKind::kDict || !dicts_[nodes_[kwargs].ref].keys.empty()) {
            malformed("NEWOBJ_EX with keyword arguments");
          }
          push(call(cls, args));
          break;
        }
        case op::BUILD: {
          const uint32_t state = pop();
          build(top(), state);
          break;
        }
        case op::BINPERSID:
          push(persistent_load(pop()));
          break;
        case op::BINPUT:
        case op::LONG_BINPUT:
        case op::PUT: {
          const uint32_t key = code == op::BINPUT        ? static_cast<uint32_t>(read_le(1, "BINPUT"))
                               : code == op::LONG_BINPUT ? static_cast<uint32_t>(read_le(4, "LONG_BINPUT"))
                                                         : parse_memo_index(read_line("PUT index"));
          memo_put(key, top());
          break;
        }
        case op::MEMOIZE:
          memo_put(static_cast<uint32_t>(memo_.size()), top());
          break;
        case op::BINGET:
          push(memo_get(static_cast<uint32_t>(read_le(1, "BINGET"))));
          break;
        case op::LONG_BINGET:
          push(memo_get(static_cast<uint32_t>(read_le(4, "LONG_BINGET"))));
          break;
        case op::GET:
          push(memo_get(parse_memo_index(read_line("GET index"))));
          break;
        default: {
          static const char* hex = "0123456789abcdef";
          std::string name = "0x";
          name += hex[code >> 4];
          name += hex[code & 15];
          if (code >= 0x20 && code < 0x7f) name += std::string(" '") + static_cast<char>(code) + "'";
          malformed("unsupported pickle opcode " + name);
        }
      }
    }
  }

  uint32_t parse_memo_index(const std::string& s) const {
    if (s.empty() || s.size() > 9) malformed("bad memo index '" + s.substr(0, 16) + "'");
    uint32_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') malformed("bad memo index '" + s + "'");
      v = v * 10 + static_cast<uint32_t>(c - '0');
    }
    return v;
  }
  uint32_t memo_get(uint32_t key) const {
    auto it = memo_.find(key);
    if (it == memo_.end()) malformed("memo key " + std::to_string(key) + " was never stored");
    return it->second;
  }

  // ---- conversion to the owned tree ----
  PickleValue convert(uint32_t n, std::size_t depth, std::size_t& count, std::size_t& bytes) const {
    if (depth > limits_.max_depth) {
      fail_pickle(source_, "objects nested deeper than " + std::to_string(limits_.max_depth) +
                        " levels (or a container that holds itself)");
    }
    if (++count > limits_.max_nodes) {
      fail_pickle(source_, "more than " + std::to_string(limits_.max_nodes) + " objects once expanded");
    }
    using K = PickleValue::Kind;
    const Node& x = nodes_[n];
    PickleValue v;
    auto take_bytes = [&](std::size_t b) {
      bytes += b;
      if (bytes > limits_.max_bytes) {
        fail_pickle(source_, "more than " + std::to_string(limits_.max_bytes) + " bytes of strings once expanded");
      }
    };
    switch (x.kind) {
      case NKind::kNone: v.kind = K::kNone; break;
      case NKind::kBool: v.kind = K::kBool; v.boolean = x.flag != 0; break;
      case NKind::kInt: v.kind = K::kInt; v.integer = x.i; break;
      case NKind::kFloat: v.kind = K::kFloat; v.floating = x.f; break;
      case NKind::kString:
      case NKind::kBytes:
      case NKind::kDevice:
        v.kind = x.kind == NKind::kString ? K::kString : x.kind == NKind::kBytes ? K::kBytes : K::kDevice;
        take_bytes(str_of(n).size());
        v.str = str_of(n);
        break;
      case NKind::kTuple:
      case NKind::kList:
        v.kind = x.kind == NKind::kTuple ? K::kTuple : K::kList;
        for (uint32_t e : seqs_[x.ref]) v.items.push_back(convert(e, depth + 1, count, bytes));
        break;
      case NKind::kDict: {
        v.kind = K::kDict;
        v.ordered_dict = x.flag != 0;
        const DictData& d = dicts_[x.ref];
        for (std::size_t k = 0; k < d.keys.size(); ++k) {
          v.keys.push_back(convert(d.keys[k], depth + 1, count, bytes));
          v.items.push_back(convert(d.values[k], depth + 1, count, bytes));
        }
        break;
      }
      case NKind::kTensor:
        v.kind = K::kTensor;
        v.tensor = tensors_[x.ref];
        take_bytes(v.tensor.storage_key.size() + 8 * (v.tensor.sizes.size() + v.tensor.strides.size()));
        break;
      case NKind::kDtype:
        v.kind = K::kDtype;
        v.dtype = static_cast<DType>(x.i);
        break;
      case NKind::kGlobal:
        fail_pickle(source_, "contains the Python object '" + str_of(n) +
                          "' itself: normdoctor reads tensors, tuples, lists and dicts of tensors");
      case NKind::kStorage:
        fail_pickle(source_, "contains a bare storage (" + storages_[x.ref].class_name +
                          "): save tensors, not storages");
    }
    return v;
  }

  const uint8_t* p_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::size_t op_pos_ = 0;
  std::string_view source_;
  PickleLimits limits_;

  std::vector<Node> nodes_;
  std::vector<std::string> strings_;
  std::vector<std::vector<uint32_t>> seqs_;
  std::vector<DictData> dicts_;
  std::vector<TensorRef> tensors_;
  std::vector<StorageData> storages_;
  std::vector<uint32_t> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<uint32_t, uint32_t> memo_;
};

}  // namespace

void validate_tensor_ref(const TensorRef& ref, std::string_view source) {
  auto bad = [&](const std::string& what) {
    fail_pickle(source, "tensor on storage '" + ref.storage_key + "' " + what);
  };
  constexpr std::size_t kMaxDims = 64;
  if (ref.sizes.size() != ref.strides.size()) {
    bad("has " + std::to_string(ref.sizes.size()) + " sizes but " +
        std::to_string(ref.strides.size()) + " strides");
  }
  if (ref.sizes.size() > kMaxDims) bad("has more than 64 dimensions");
  if (ref.storage_numel < 0) bad("has a negative storage size");
  if (ref.storage_offset < 0) bad("has a negative storage offset");
  int64_t numel = 1;
  int64_t last = ref.storage_offset;  // largest element index touched
  for (std::size_t d = 0; d < ref.sizes.size(); ++d) {
    if (ref.sizes[d] < 0) bad("has a negative size in dimension " + std::to_string(d));
    if (ref.strides[d] < 0) bad("has a negative stride in dimension " + std::to_string(d));
    if (!mul_ok(numel, ref.sizes[d], &numel)) bad("has more elements than fit in 64 bits");
  }
  if (numel == 0) {
    if (ref.storage_offset > ref.storage_numel) bad("starts beyond the end of its storage");
    return;
  }
  for (std::size_t d = 0; d < ref.sizes.size(); ++d) {
    int64_t span = 0;
    if (!mul_ok(ref.sizes[d] - 1, ref.strides[d], &span) || !add_ok(last, span, &last)) {
      bad("reaches beyond 64-bit offsets");
    }
  }
  if (last >= ref.storage_numel) {
    bad("reads element " + std::to_string(last) + " of a storage of " +
        std::to_string(ref.storage_numel) + " elements");
  }
}

PickleValue parse_torch_pickle(const uint8_t* data, std::size_t size, std::string_view source,
                               const PickleLimits& limits) {
  if (data == nullptr && size != 0) fail_pickle(source, "no data");
  Machine m(data, size, source, limits);
  return m.run();
}

}  // namespace nd::formats
