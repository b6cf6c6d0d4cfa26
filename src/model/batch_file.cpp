// Reading sample batches: torch.save zip archives through a restricted pickle
// VM (src/formats/pickle.h) plus LibTorch's zip reader, and .safetensors files
// through src/formats/safetensors.h. See batch_file.h for the contract.
#include "model/batch_file.h"

#include <caffe2/serialize/inline_container.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "formats/pickle.h"
#include "formats/safetensors.h"
#include "formats/text.h"
#include "formats/zip_index.h"

namespace nd {

namespace {

using formats::PickleValue;
using formats::TensorRef;

// The error kind of the file being read: input_load for batches,
// weights_load for checkpoints (read_saved_file sets it for its call).
thread_local const char* g_kind = error_kind::kInputLoad;

[[noreturn]] void fail_batch(const std::string& path, const std::string& what) { formats::throw_load_error(g_kind, path, what); }

struct KindScope {
  const char* saved;
  explicit KindScope(const char* k) : saved(g_kind) { g_kind = k; }
  ~KindScope() { g_kind = saved; }
};

const char* const kExpected =
    "expected a tensor, or a tuple, list or dict of tensors saved with torch.save, or a .safetensors file";

// First line of a LibTorch exception, without its C++ backtrace or its plea
// for better messages.
std::string first_line(const char* what) {
  std::string s(what);
  const auto nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  const auto plea = s.find("  (Could this error message be improved?");
  if (plea != std::string::npos) s.resize(plea);
  return s;
}

class File {
 public:
  explicit File(const std::string& path) : path_(path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) fail_batch(path, "no such file");
    if (std::filesystem::is_directory(status)) fail_batch(path, "is a directory, not a batch file");
    in_.open(path, std::ios::binary);
    if (!in_) fail_batch(path, "cannot be opened for reading");
    in_.seekg(0, std::ios::end);
    const auto end = in_.tellg();
    if (end < 0) fail_batch(path, "cannot be read (not a regular file?)");
    size_ = static_cast<uint64_t>(end);
  }
  uint64_t size() const { return size_; }
  std::size_t read_at(uint64_t offset, void* out, std::size_t n) {
    if (offset > size_) return 0;
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
    return static_cast<std::size_t>(in_.gcount());
  }
  void read_exact(uint64_t offset, void* out, std::size_t n, const std::string& what) {
    if (read_at(offset, out, n) != n) fail_batch(path_, "could not read " + what + " (file truncated?)");
  }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t size_ = 0;
};

at::ScalarType scalar_type_or_fail(formats::DType t, const std::string& path, const std::string& where) {
  if (auto st = scalar_type_of(t)) return *st;
  fail_batch(path, where + " has dtype " + formats::dtype_name(t) +
                 ", which normdoctor does not read (supported: float32, float64, float16, bfloat16, "
                 "int8, int16, int32, int64, uint8, bool, complex64, complex128)");
}

// ---------------------------------------------------------------- torch.save

class ZipBatch {
 public:
  ZipBatch(std::string path, File& file) : path_(std::move(path)), file_(file) {}

  BatchFile read() { return to_batch(open(kExpected)); }

  /// Checks the archive and runs its data.pkl; `expected` ends messages about
  /// files that are not torch.save archives.
  PickleValue open(const std::string& expected) {
    const auto entries = formats::read_zip_index(
        [this](uint64_t off, void* out, std::size_t n) { return file_.read_at(off, out, n); },
        file_.size(), path_);
    find_prefix(entries, expected);
    if (!has("version") && !has(".data/version")) {
      fail_batch(path_, "is a zip archive without a version record: not a torch.save file (" + expected + ")");
    }

    try {
      reader_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path_);
    } catch (const std::exception& e) {
      fail_batch(path_, "is not a readable torch.save archive: " + first_line(e.what()));
    }
    if (has("byteorder")) {
      const std::string order = record_text("byteorder");
      if (order != "little") {
        fail_batch(path_, "was saved on a big-endian machine (byteorder '" + order +
                        "'); re-save it on a little-endian one");
      }
    }
    auto [pkl, pkl_size] = record("data.pkl");
    return formats::parse_torch_pickle(static_cast<const uint8_t*>(pkl.get()), pkl_size, path_ + " (data.pkl)");
  }

  at::Tensor tensor(const TensorRef& ref, const std::string& where) { return materialize(ref, where); }

 private:
  void find_prefix(const std::vector<formats::ZipEntry>& entries, const std::string& expected) {
    // torch.save names every record "<archive>/<record>"; the archive name is
    // "archive" or the file stem depending on the PyTorch version.
    for (const auto& e : entries) {
      const auto slash = e.name.find('/');
      if (slash == std::string::npos) continue;
      const std::string prefix = e.name.substr(0, slash + 1);
      const std::string rest = e.name.substr(slash + 1);
      if (rest == "constants.pkl" || rest.rfind("code/", 0) == 0) {
        if (g_kind == error_kind::kWeightsLoad)
          fail_batch(path_, "is a TorchScript model (torch.jit.save), not a checkpoint: give it as the model, or save "
                      "the weights with torch.save(model.state_dict(), ...)");
        fail_batch(path_, "is a TorchScript model (torch.jit.save), not a batch of inputs: give it as the "
                    "model and save the inputs with torch.save(...)");
      }
      if (rest == "data.pkl" && prefix_.empty()) prefix_ = prefix;
    }
    if (prefix_.empty()) {
      fail_batch(path_, "is a zip archive without a data.pkl record: not a torch.save file (" + expected + ")");
    }
    for (const auto& e : entries) {
      if (e.name.rfind(prefix_, 0) == 0) sizes_[e.name.substr(prefix_.size())] = e.uncompressed_size;
    }
  }

  bool has(const std::string& name) const { return sizes_.count(name) != 0; }

  std::tuple<at::DataPtr, std::size_t> record(const std::string& name) {
    auto it = sizes_.find(name);
    if (it == sizes_.end()) fail_batch(path_, "archive has no record '" + name + "'");
    try {
      auto rec = reader_->getRecord(name);
      if (std::get<1>(rec) != it->second) {
        fail_batch(path_, "record '" + name + "' has " + std::to_string(std::get<1>(rec)) +
                        " bytes, its zip entry says " + std::to_string(it->second));
      }
      return rec;
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail_batch(path_, "cannot read record '" + name + "' of the archive: " + first_line(e.what()));
    }
  }

  std::string record_text(const std::string& name) {
    auto [data, size] = record(name);
    std::string s(static_cast<const char*>(data.get()), size);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    return s;
  }

  at::Tensor materialize(const TensorRef& ref, const std::string& where) {
    const at::ScalarType st = scalar_type_or_fail(ref.dtype, path_, where);
    auto it = storages_.find(ref.storage_key);
    if (it == storages_.end()) {
      const std::string name = "data/" + ref.storage_key;
      if (!has(name)) fail_batch(path_, where + ": the archive has no record '" + name + "' for its data");
      const uint64_t need = static_cast<uint64_t>(ref.storage_numel) * formats::dtype_itemsize(ref.dtype);
      if (sizes_[name] < need) {
        fail_batch(path_, where + ": record '" + name + "' holds " + std::to_string(sizes_[name]) +
                        " bytes but its storage needs " + std::to_string(need));
      }
      auto [data, size] = record(name);
      at::Tensor storage = at::empty({ref.storage_numel}, at::TensorOptions().dtype(st));
      if (need != 0) std::memcpy(storage.data_ptr(), data.get(), static_cast<std::size_t>(need));
      (void)size;
      it = storages_.emplace(ref.storage_key, storage).first;
    }
    at::Tensor storage = it->second;
    if (storage.scalar_type() != st || storage.numel() < ref.storage_numel) {
      // The same storage viewed with another dtype (v3): reinterpret its bytes.
      const auto bytes = storage.numel() * static_cast<int64_t>(storage.element_size());
      const auto itemsize = static_cast<int64_t>(formats::dtype_itemsize(ref.dtype));
      if (bytes / itemsize < ref.storage_numel) {
        fail_batch(path_, where + ": storage '" + ref.storage_key + "' is too small for its view");
      }
      at::Tensor copy = at::empty({bytes / itemsize}, at::TensorOptions().dtype(st));
      std::memcpy(copy.data_ptr(), storage.data_ptr(), static_cast<std::size_t>((bytes / itemsize) * itemsize));
      storage = copy;
    }
    // validate_tensor_ref has checked that the view stays inside the storage.
    return storage.as_strided(ref.sizes, ref.strides, ref.storage_offset);
  }

  BatchFile to_batch(const PickleValue& root) {
    using K = PickleValue::Kind;
    BatchFile out;
    out.path = path_;
    auto element = [&](const PickleValue& v, const std::string& where) -> at::Tensor {
      if (v.kind == K::kTensor) return materialize(v.tensor, where);
      if (v.kind == K::kTuple || v.kind == K::kList || v.kind == K::kDict) {
        fail_batch(path_, where + " is a " + formats::pickle_kind_name(v.kind) +
                        ": nested containers are not read; " + kExpected);
      }
      fail_batch(path_, where + " is a " + std::string(formats::pickle_kind_name(v.kind)) +
                      ", not a tensor; " + kExpected);
    };
    switch (root.kind) {
      case K::kTensor:
        out.container = "tensor";
        out.positional.push_back(materialize(root.tensor, "the tensor"));
        return out;
      case K::kTuple:
      case K::kList: {
        const std::string kind = root.kind == K::kTuple ? "tuple" : "list";
        out.container = kind;
        if (root.items.empty()) fail_batch(path_, "holds an empty " + kind + ": no tensors to use as inputs");
        for (std::size_t i = 0; i < root.items.size(); ++i) {
          out.positional.push_back(element(root.items[i], "element " + std::to_string(i) + " of the " + kind));
        }
        return out;
      }
      case K::kDict: {
        out.container = "dict";
        if (root.items.empty()) fail_batch(path_, "holds an empty dict: no tensors to use as inputs");
        for (std::size_t i = 0; i < root.items.size(); ++i) {
          const PickleValue& key = root.keys[i];
          if (key.kind != K::kString) {
            fail_batch(path_, "dict key " + std::to_string(i) + " is a " + formats::pickle_kind_name(key.kind) +
                            ": keys must be forward's parameter names (str)");
          }
          out.keyword.emplace_back(key.str, element(root.items[i], "dict value '" + key.str + "'"));
        }
        return out;
      }
      default:
        fail_batch(path_, std::string("holds a ") + formats::pickle_kind_name(root.kind) + ", not tensors; " +
                        kExpected);
    }
  }

  std::string path_;
  File& file_;
  std::string prefix_;
  std::map<std::string, uint64_t> sizes_;  // record name (without prefix) -> bytes
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader_;
  std::map<std::string, at::Tensor> storages_;
};

// ---------------------------------------------------------------- safetensors

BatchFile read_safetensors(const std::string& path, File& file) {
  std::array<uint8_t, 8> len{};
  const std::size_t got = file.read_at(0, len.data(), len.size());
  const uint64_t n = formats::safetensors_header_length(len.data(), got, file.size(), path);
  std::vector<uint8_t> json(static_cast<std::size_t>(n));
  file.read_exact(8, json.data(), json.size(), "the safetensors header");
  const auto header = formats::parse_safetensors_header(json.data(), json.size(), file.size(), path);
  if (header.tensors.empty()) fail_batch(path, "safetensors file holds no tensors");

  BatchFile out;
  out.path = path;
  out.container = "safetensors";
  for (const auto& e : header.tensors) {
    const std::string where = "tensor '" + e.name + "'";
    const at::ScalarType st = scalar_type_or_fail(e.dtype, path, where);
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(st));
    const uint64_t bytes = e.end - e.begin;
    if (bytes != 0) file.read_exact(header.data_start + e.begin, t.data_ptr(), static_cast<std::size_t>(bytes), where);
    out.keyword.emplace_back(e.name, t);
  }
  return out;
}

// ---------------------------------------------------------------- dispatch

// torch.save's legacy format starts with a pickled magic number: LONG1 of
// 0x1950a86a20f9469cfc6c, after PROTO (and FRAME for protocol 4 and up).
constexpr uint8_t kLegacyMagic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

bool has_legacy_magic(const uint8_t* head, std::size_t n) {
  for (std::size_t i = 0; i + sizeof(kLegacyMagic) <= n; ++i) {
    if (std::memcmp(head + i, kLegacyMagic, sizeof(kLegacyMagic)) == 0) return true;
  }
  return false;
}

bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::optional<at::ScalarType> scalar_type_of(formats::DType t) {
  using formats::DType;
  switch (t) {
    case DType::kBool: return at::kBool;
    case DType::kUInt8: return at::kByte;
    case DType::kInt8: return at::kChar;
    case DType::kInt16: return at::kShort;
    case DType::kInt32: return at::kInt;
    case DType::kInt64: return at::kLong;
    case DType::kFloat16: return at::kHalf;
    case DType::kBFloat16: return at::kBFloat16;
    case DType::kFloat32: return at::kFloat;
    case DType::kFloat64: return at::kDouble;
    case DType::kComplex64: return at::kComplexFloat;
    case DType::kComplex128: return at::kComplexDouble;
    default: return std::nullopt;  // uint16/32/64 and float8: not in LibTorch 1.13
  }
}

namespace {

// Reads one file of either format: torch.save archives go to on_zip, safetensors to
// on_safetensors. `expected` ends the messages about other files; `what`
// names the file's role in the "plain pickle" message ("the batch").
template <class R, class Zip, class Safe>
R read_either(const std::string& path, const std::string& expected, const std::string& what, Zip on_zip,
              Safe on_safetensors) {
  File file(path);
  if (file.size() == 0) fail_batch(path, std::string("is empty (0 bytes); ") + expected);
  std::array<uint8_t, 32> head{};
  const std::size_t got = file.read_at(0, head.data(), head.size());

  if (got >= 4 && head[0] == 'P' && head[1] == 'K' &&
      ((head[2] == 3 && head[3] == 4) || (head[2] == 5 && head[3] == 6))) {
    try {
      return on_zip(file);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {  // c10::Error and friends from LibTorch
      fail_batch(path, "cannot be read as a torch.save archive: " + first_line(e.what()));
    }
  }
  if (got >= 1 && head[0] == 0x80) {
    if (has_legacy_magic(head.data(), got)) {
      fail_batch(path, "was saved with _use_new_zipfile_serialization=False (the legacy format); re-save it "
                 "with torch.save in PyTorch >= 1.6");
    }
    fail_batch(path, "is a plain Python pickle, not a torch.save archive; save " + what + " with torch.save(...)");
  }
  if (got >= 6 && std::memcmp(head.data(), "\x93NUMPY", 6) == 0) {
    fail_batch(path, "is a numpy .npy file; convert it with torch.from_numpy() and save it with torch.save(...)");
  }
  if (formats::looks_like_safetensors(head.data(), got, file.size()) || has_suffix(path, ".safetensors")) {
    try {
      return on_safetensors(file);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail_batch(path, "cannot be read as a safetensors file: " + first_line(e.what()));
    }
  }
  fail_batch(path, std::string("is neither a torch.save archive (zip) nor a .safetensors file; ") + expected);
}

}  // namespace

BatchFile read_batch_file(const std::string& path) {
  KindScope kind(error_kind::kInputLoad);
  return read_either<BatchFile>(
      path, kExpected, "the batch", [&](File& f) { return ZipBatch(path, f).read(); },
      [&](File& f) { return read_safetensors(path, f); });
}

SavedFile read_saved_file(const std::string& path, const char* kind_of_error, const std::string& expected) {
  const char* error_kind = kind_of_error;
  KindScope kind(error_kind);
  return read_either<SavedFile>(
      path, expected, "it",
      [&](File& f) {
        auto zip = std::make_shared<ZipBatch>(path, f);
        SavedFile out;
        out.path = path;
        out.format = "torch.save";
        out.root = zip->open(expected);
        // After open() the archive reads through its own PyTorchStreamReader
        // (opened by path), not through `f`, which goes out of scope here.
        out.tensor = [zip, error_kind](const formats::TensorRef& ref, const std::string& where) {
          KindScope k(error_kind);
          return zip->tensor(ref, where);
        };
        return out;
      },
      [&](File& f) {
        SavedFile out;
        out.path = path;
        out.format = "safetensors";
        BatchFile b = read_safetensors(path, f);
        out.named = std::move(b.keyword);
        return out;
      });
}

}  // namespace nd
