#include "formats/pt2_archive.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <zlib.h>

#include "core/error.h"
#include "formats/text.h"

namespace nd::formats {

namespace {

[[noreturn]] void fail_pt2(std::string_view source, const std::string& what) { throw_load_error(error_kind::kModelLoad, source, what); }

const char* const kExportHint =
    "export with ep = torch.export.export(model.eval(), example_args); torch.export.save(ep, 'model.pt2')";

// The zip index, with its errors as model_load errors.
std::vector<ZipEntry> index_of(const ReadAt& read, uint64_t size, std::string_view source) {
  try {
    return read_zip_index(read, size, source);
  } catch (const Error& e) {
    throw load_error(error_kind::kModelLoad, e.what());
  }
}

// The root folder of the archive: the prefix before "archive_format".
std::optional<std::string> pt2_root(const std::vector<ZipEntry>& entries) {
  for (const auto& e : entries) {
    if (e.name == "archive_format") return std::string();
    const auto slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash + 1, std::string::npos, "archive_format") == 0)
      return e.name.substr(0, slash + 1);
  }
  return std::nullopt;
}

const nlohmann::json* member(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

// A SymInt ({"as_int": n}); symbolic sizes ({"as_expr": ...}) are refused:
// the payload configs of real tensors hold concrete sizes.
int64_t sym_int(const nlohmann::json& j, std::string_view source, const std::string& where) {
  const nlohmann::json* v = member(j, "as_int");
  if (v && v->is_number_integer()) return v->get<int64_t>();
  if (j.is_number_integer()) return j.get<int64_t>();
  fail_pt2(source, where + " is not a concrete integer");
}

std::vector<int64_t> sym_ints(const nlohmann::json* j, std::string_view source, const std::string& where) {
  if (!j || !j->is_array()) fail_pt2(source, where + " is missing or not a list");
  if (j->size() > 64) fail_pt2(source, where + " has " + std::to_string(j->size()) + " dimensions");
  std::vector<int64_t> out;
  for (const auto& e : *j) out.push_back(sym_int(e, source, where));
  return out;
}

std::vector<Pt2Payload> read_payload_config(const nlohmann::json& cfg, const std::string& dir,
                                            const Pt2Archive& a, std::string_view source, const std::string& file,
                                            std::vector<std::string>* custom_objects) {
  std::vector<Pt2Payload> out;
  const nlohmann::json* config = member(cfg, "config");
  if (!config || !config->is_object()) fail_pt2(source, file + " has no \"config\" object");
  for (auto it = config->begin(); it != config->end(); ++it) {
    const std::string where = file + " entry '" + it.key() + "'";
    const nlohmann::json& m = it.value();
    const nlohmann::json* path = member(m, "path_name");
    if (!path || !path->is_string()) fail_pt2(source, where + " has no path_name");
    Pt2Payload p;
    p.fqn = it.key();
    p.record = dir + path->get<std::string>();
    if (const auto* v = member(m, "is_param"); v && v->is_boolean()) p.is_param = v->get<bool>();
    if (const auto* v = member(m, "use_pickle"); v && v->is_boolean()) p.use_pickle = v->get<bool>();
    const std::string name = path->get<std::string>();
    if (custom_objects && (name.rfind("custom_obj_", 0) == 0 || name.rfind("opaque_obj_", 0) == 0)) {
      custom_objects->push_back(p.fqn);
      continue;
    }
    auto rec = a.entries.find(p.record);
    if (rec == a.entries.end()) fail_pt2(source, where + ": the archive has no record '" + p.record + "'");
    p.record_bytes = rec->second.uncompressed_size;
    const nlohmann::json* meta = member(m, "tensor_meta");
    if (!meta || !meta->is_object()) {
      if (p.use_pickle) {  // a pickled tensor subclass: its torch.save bytes say everything
        out.push_back(std::move(p));
        continue;
      }
      fail_pt2(source, where + " has no tensor_meta");
    }
    const nlohmann::json* dt = member(*meta, "dtype");
    if (!dt || !dt->is_number_integer()) fail_pt2(source, where + " has no dtype");
    auto d = dtype_from_pt2_scalar_type(dt->get<int64_t>());
    if (!d) fail_pt2(source, where + " has dtype code " + std::to_string(dt->get<int64_t>()) + ", which normdoctor does not read");
    p.dtype = *d;
    p.sizes = sym_ints(member(*meta, "sizes"), source, where + " sizes");
    p.strides = sym_ints(member(*meta, "strides"), source, where + " strides");
    if (p.strides.size() != p.sizes.size()) fail_pt2(source, where + " has " + std::to_string(p.sizes.size()) +
                                                          " sizes but " + std::to_string(p.strides.size()) + " strides");
    if (const auto* so = member(*meta, "storage_offset")) p.storage_offset = sym_int(*so, source, where + " storage_offset");
    if (const auto* rg = member(*meta, "requires_grad"); rg && rg->is_boolean()) p.requires_grad = rg->get<bool>();
    if (const auto* dev = member(*meta, "device")) {
      const auto* t = member(*dev, "type");
      if (t && t->is_string() && t->get<std::string>() == "meta")
        fail_pt2(source, where + " is a meta tensor (no data): the program was exported without real weights");
    }
    if (const auto* layout = member(*meta, "layout"); layout && layout->is_number_integer() && layout->get<int64_t>() != 7 &&
                                                     layout->get<int64_t>() != 0)
      fail_pt2(source, where + " has a sparse or mkldnn layout (code " + std::to_string(layout->get<int64_t>()) +
                       "); normdoctor reads strided tensors");
    if (!p.use_pickle) {
      // The view must lie inside the record (an empty record is a zero tensor, as torch does).
      const uint64_t item = dtype_itemsize(p.dtype);
      if (p.record_bytes % item != 0)
        fail_pt2(source, where + ": record '" + p.record + "' has " + std::to_string(p.record_bytes) +
                         " bytes, not a multiple of the element size " + std::to_string(item));
      TensorRef ref;
      ref.storage_key = p.record;
      ref.dtype = p.dtype;
      ref.storage_numel = static_cast<int64_t>(p.record_bytes / item);
      ref.storage_offset = p.storage_offset;
      ref.sizes = p.sizes;
      ref.strides = p.strides;
      bool empty_view = false;
      for (int64_t s : p.sizes) empty_view = empty_view || s == 0;
      if (p.record_bytes != 0 || empty_view) {
        try {
          validate_tensor_ref(ref, source);
        } catch (const Error& e) {
          throw load_error(error_kind::kModelLoad, std::string(e.what()) + " (" + where + ")");
        }
      } else {
        for (int64_t s : p.sizes)
          if (s < 0) fail_pt2(source, where + " has a negative size");
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string trimmed(const std::vector<uint8_t>& b) {
  std::string s(b.begin(), b.end());
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// "L['self'].layers[0]" / "getattr(L['self'].layers, '0')" / "layers.0" -> "layers.0".
std::string module_path_spelling(std::string p) {
  // getattr(X, 'name') -> X.name, innermost first.
  for (;;) {
    const auto g = p.rfind("getattr(");
    if (g == std::string::npos) break;
    const auto comma = p.find(", ", g);
    const auto close = comma == std::string::npos ? std::string::npos : p.find(')', comma);
    if (close == std::string::npos) break;
    std::string inner = p.substr(g + 8, comma - g - 8);
    std::string name = p.substr(comma + 2, close - comma - 2);
    if (name.size() >= 2 && (name.front() == '\'' || name.front() == '"')) name = name.substr(1, name.size() - 2);
    p = p.substr(0, g) + inner + "." + name + p.substr(close + 1);
  }
  for (const char* self : {"L['self']", "L[\"self\"]", "L__self__", "self"}) {
    if (p.rfind(self, 0) == 0) {
      p = p.substr(std::strlen(self));
      break;
    }
  }
  std::string out;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '[') {
      const auto close = p.find(']', i);
      if (close == std::string::npos) break;
      std::string key = p.substr(i + 1, close - i - 1);
      if (key.size() >= 2 && (key.front() == '\'' || key.front() == '"')) key = key.substr(1, key.size() - 2);
      if (!out.empty()) out += '.';
      out += key;
      i = close;
    } else if (c == '.') {
      if (!out.empty()) out += '.';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::optional<DType> dtype_from_pt2_scalar_type(int64_t v) {
  switch (v) {
    case 1: return DType::kUInt8;
    case 2: return DType::kInt8;
    case 3: return DType::kInt16;
    case 4: return DType::kInt32;
    case 5: return DType::kInt64;
    case 6: return DType::kFloat16;
    case 7: return DType::kFloat32;
    case 8: return DType::kFloat64;
    case 10: return DType::kComplex64;
    case 11: return DType::kComplex128;
    case 12: return DType::kBool;
    case 13: return DType::kBFloat16;
    case 28: return DType::kUInt16;
    case 29: return DType::kFloat8E4M3FN;
    case 30: return DType::kFloat8E5M2;
    case 34: return DType::kUInt32;
    case 35: return DType::kUInt64;
    default: return std::nullopt;
  }
}

std::vector<std::pair<std::string, std::string>> parse_nn_module_stack(std::string_view s) {
  std::vector<std::pair<std::string, std::string>> out;
  // Entries are ';'-separated; each is "key,path,type" with commas inside
  // brackets/parentheses belonging to the field (serialize.py metadata_split).
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find(';', start);
    if (end == std::string_view::npos) end = s.size();
    const std::string_view entry = s.substr(start, end - start);
    std::vector<std::string> fields;
    int depth = 0;
    std::size_t f0 = 0;
    for (std::size_t i = 0; i < entry.size(); ++i) {
      const char c = entry[i];
      if (c == '[' || c == '(') ++depth;
      else if ((c == ']' || c == ')') && depth > 0) --depth;
      else if (c == ',' && depth == 0) {
        fields.emplace_back(entry.substr(f0, i - f0));
        f0 = i + 1;
      }
    }
    fields.emplace_back(entry.substr(f0));
    // torch.export's placeholder for nodes it made without a module (the
    // sym_size nodes of dynamic shapes) is no module of the model.
    if (fields.size() == 3 && fields[0].rfind("_empty_nn_module_stack", 0) != 0 &&
        fields[1].rfind("_empty_nn_module_stack", 0) != 0)
      out.emplace_back(module_path_spelling(fields[1]), fields[2]);
    if (end == s.size()) break;
    start = end + 1;
  }
  return out;
}

bool is_pt2_layout(const std::vector<ZipEntry>& entries) { return pt2_root(entries).has_value(); }

uint64_t zip_record_data_offset(const ReadAt& read, uint64_t file_size, const ZipEntry& entry, std::string_view source) {
  const std::string where = "zip entry '" + entry.name + "'";
  if (entry.local_header_offset > file_size || file_size - entry.local_header_offset < 30)
    fail_pt2(source, where + ": its local header lies outside the file (truncated archive?)");
  uint8_t h[30];
  if (read(entry.local_header_offset, h, 30) != 30) fail_pt2(source, where + ": cannot read its local header");
  if (little_endian(h, 4) != 0x04034b50) fail_pt2(source, where + ": corrupt local header");
  const uint64_t data = entry.local_header_offset + 30 + little_endian(h + 26, 2) + little_endian(h + 28, 2);
  if (data > file_size || entry.compressed_size > file_size - data)
    fail_pt2(source, where + ": its data lies outside the file (truncated archive?)");
  return data;
}

std::vector<uint8_t> read_zip_record(const ReadAt& read, uint64_t file_size, const ZipEntry& entry,
                                     std::string_view source, uint64_t max_bytes) {
  const std::string where = "zip entry '" + entry.name + "'";
  if (entry.method != 0 && entry.method != 8)
    fail_pt2(source, where + " uses zip compression method " + std::to_string(entry.method) +
                     "; normdoctor reads stored and deflated records (torch.export.save stores them): re-save the "
                     "archive with torch.export.save");
  if (entry.uncompressed_size > max_bytes)
    fail_pt2(source, where + " is larger (" + std::to_string(entry.uncompressed_size) + " bytes) than this record may be");
  const uint64_t data = zip_record_data_offset(read, file_size, entry, source);
  std::vector<uint8_t> out(static_cast<std::size_t>(entry.uncompressed_size));
  if (entry.method == 0) {
    if (!out.empty() && read(data, out.data(), out.size()) != out.size())
      fail_pt2(source, where + ": cannot read its data (truncated archive?)");
    return out;
  }
  // Deflated: raw deflate (no zlib header), inflated in one go into the size
  // the central directory records; anything else is a corrupt archive.
  std::vector<uint8_t> in(static_cast<std::size_t>(entry.compressed_size));
  if (!in.empty() && read(data, in.data(), in.size()) != in.size())
    fail_pt2(source, where + ": cannot read its data (truncated archive?)");
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail_pt2(source, where + ": zlib cannot start inflating");
  zs.next_in = in.data();
  zs.avail_in = static_cast<uInt>(std::min<std::size_t>(in.size(), std::numeric_limits<uInt>::max()));
  std::size_t in_done = 0, out_done = 0;
  int rc = Z_OK;
  uint8_t spill = 0;  // one byte past the recorded size: more output means a lying header
  while (rc == Z_OK) {
    const bool room = out_done < out.size();
    zs.next_out = room ? out.data() + out_done : &spill;
    zs.avail_out = room ? static_cast<uInt>(std::min<std::size_t>(out.size() - out_done, std::numeric_limits<uInt>::max())) : 1;
    const uInt avail_out0 = zs.avail_out, avail_in0 = zs.avail_in;
    rc = inflate(&zs, Z_NO_FLUSH);
    if (!room && zs.avail_out == 0) {
      rc = Z_DATA_ERROR;
      break;
    }
    out_done += avail_out0 - zs.avail_out;
    in_done += avail_in0 - zs.avail_in;
    if (zs.avail_in == 0 && in_done < in.size()) {
      zs.next_in = in.data() + in_done;
      zs.avail_in = static_cast<uInt>(std::min<std::size_t>(in.size() - in_done, std::numeric_limits<uInt>::max()));
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;  // input ended before the stream did
    if (rc == Z_BUF_ERROR) rc = Z_OK;
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || out_done != out.size())
    fail_pt2(source, where + ": its deflated data is corrupt (inflates to " + std::to_string(out_done) +
                     " bytes, the archive records " + std::to_string(out.size()) + ")");
  uLong crc = ::crc32(0L, Z_NULL, 0);
  for (std::size_t off = 0; off < out.size();) {
    const std::size_t n = std::min<std::size_t>(out.size() - off, 1u << 30);
    crc = ::crc32(crc, out.data() + off, static_cast<uInt>(n));
    off += n;
  }
  if (static_cast<uint32_t>(crc) != entry.crc32)
    fail_pt2(source, where + ": its CRC-32 does not match the archive's record (a corrupt archive)");
  return out;
}

Pt2Archive read_pt2_archive(const ReadAt& read, uint64_t file_size, std::string_view source, const std::string& model) {
  Pt2Archive a;
  a.source = std::string(source);
  const auto entries = index_of(read, file_size, source);
  const auto root = pt2_root(entries);
  if (!root) fail_pt2(source, "is a zip archive without an archive_format record: not a torch.export .pt2 archive");
  a.root = *root;
  for (const auto& e : entries)
    if (e.name.compare(0, a.root.size(), a.root) == 0) a.entries[e.name.substr(a.root.size())] = e;
  auto record = [&](const std::string& name, uint64_t max = uint64_t(1) << 34) {
    return read_zip_record(read, file_size, a.entries.at(name), source, max);
  };
  auto text = [&](const std::string& name) { return trimmed(record(name, 1 << 20)); };

  const std::string format = text("archive_format");
  if (format != "pt2")
    fail_pt2(source, "has archive_format '" + format + "', expected 'pt2' (a torch.export.save archive)");
  if (a.entries.count("archive_version")) a.archive_version = text("archive_version");
  if (a.entries.count("byteorder")) {
    const std::string order = text("byteorder");
    if (order != "little")
      fail_pt2(source, "was saved on a big-endian machine (byteorder '" + order + "'); re-save it on a little-endian one");
  }

  bool aoti = false, executorch = false;
  for (const auto& [name, e] : a.entries) {
    (void)e;
    if (name.rfind("data/aotinductor/", 0) == 0) aoti = true;
    if (name.rfind("data/executorch/", 0) == 0) executorch = true;
    if (name.rfind("models/", 0) == 0 && name.size() > 12 && name.compare(name.size() - 5, 5, ".json") == 0 &&
        name.find('/', 7) == std::string::npos)
      a.models.push_back(name.substr(7, name.size() - 12));
  }
  if (a.models.empty()) {
    if (aoti)
      fail_pt2(source, "is an AOTInductor package (compiled code under data/aotinductor/, no exported graph): normdoctor "
                   "needs the graph to instrument it; save the ExportedProgram itself with torch.export.save(ep, "
                   "'model.pt2') (or torch._inductor.aoti_compile_and_package's input program)");
    if (executorch)
      fail_pt2(source, "is an ExecuTorch package (data/executorch/, no exported graph); " + std::string(kExportHint));
    fail_pt2(source, "is a .pt2 archive without a models/<name>.json program; " + std::string(kExportHint));
  }
  std::sort(a.models.begin(), a.models.end());
  if (!model.empty()) {
    if (std::find(a.models.begin(), a.models.end(), model) == a.models.end())
      fail_pt2(source, "has no program named '" + model + "'");
    a.model_name = model;
  } else if (std::find(a.models.begin(), a.models.end(), "model") != a.models.end()) {
    a.model_name = "model";
  } else {
    a.model_name = a.models.front();
  }
  const std::string json_name = "models/" + a.model_name + ".json";
  const std::vector<uint8_t> js = record(json_name, uint64_t(1) << 30);
  a.program = nlohmann::json::parse(js.begin(), js.end(), nullptr, /*allow_exceptions=*/false);
  if (a.program.is_discarded() || !a.program.is_object())
    fail_pt2(source, json_name + " is not valid JSON (a corrupt archive?)");

  const nlohmann::json* sv = member(a.program, "schema_version");
  const nlohmann::json* major = sv ? member(*sv, "major") : nullptr;
  const nlohmann::json* minor = sv ? member(*sv, "minor") : nullptr;
  if (!major || !major->is_number_integer())
    fail_pt2(source, json_name + " has no schema_version.major: not a serialized ExportedProgram");
  a.schema_major = major->get<int>();
  a.schema_minor = minor && minor->is_number_integer() ? minor->get<int>() : 0;
  if (const auto* tv = member(a.program, "torch_version"); tv && tv->is_string()) a.torch_version = tv->get<std::string>();
  if (a.schema_major != kPt2SchemaMajor)
    fail_pt2(source, "ExportedProgram schema version " + std::to_string(a.schema_major) + "." +
                     std::to_string(a.schema_minor) + (a.torch_version.empty() ? "" : " (saved by torch " + a.torch_version + ")") +
                     " is not supported: normdoctor reads schema major version " + std::to_string(kPt2SchemaMajor) +
                     " (PyTorch 2.6 to 2.13); re-export with such a PyTorch");
  const nlohmann::json* gm = member(a.program, "graph_module");
  const nlohmann::json* graph = gm ? member(*gm, "graph") : nullptr;
  const nlohmann::json* sig = gm ? member(*gm, "signature") : nullptr;
  if (!graph || !graph->is_object() || !member(*graph, "nodes") || !member(*graph, "nodes")->is_array() ||
      !member(*graph, "inputs") || !member(*graph, "outputs"))
    fail_pt2(source, json_name + " has no graph_module.graph with inputs, outputs and nodes");
  if (!sig || !member(*sig, "input_specs") || !member(*sig, "input_specs")->is_array() || !member(*sig, "output_specs") ||
      !member(*sig, "output_specs")->is_array())
    fail_pt2(source, json_name + " has no graph_module.signature with input_specs and output_specs");

  const std::string legacy_w = "data/weights/" + a.model_name + ".pt";
  const std::string legacy_c = "data/constants/" + a.model_name + ".pt";
  if (a.entries.count(legacy_w)) a.legacy_weights = legacy_w;
  if (a.entries.count(legacy_c)) a.legacy_constants = legacy_c;
  auto config = [&](const std::string& name) -> nlohmann::json {
    const std::vector<uint8_t> b = record(name, uint64_t(1) << 30);
    nlohmann::json j = nlohmann::json::parse(b.begin(), b.end(), nullptr, false);
    if (j.is_discarded()) fail_pt2(source, name + " is not valid JSON (a corrupt archive?)");
    return j;
  };
  const std::string wcfg = "data/weights/" + a.model_name + "_weights_config.json";
  const std::string ccfg = "data/constants/" + a.model_name + "_constants_config.json";
  if (a.entries.count(wcfg)) {
    a.weights = read_payload_config(config(wcfg), "data/weights/", a, source, wcfg, nullptr);
  } else if (a.legacy_weights.empty()) {
    fail_pt2(source, "has neither " + wcfg + " nor " + legacy_w + ": the weights are missing");
  }
  if (a.entries.count(ccfg)) a.constants = read_payload_config(config(ccfg), "data/constants/", a, source, ccfg, &a.custom_objects);
  const std::string si = "data/sample_inputs/" + a.model_name + ".pt";
  if (auto it = a.entries.find(si); it != a.entries.end() && it->second.uncompressed_size > 0) a.sample_inputs = si;
  return a;
}

Pt2Archive read_pt2_archive(const uint8_t* data, std::size_t size, std::string_view source, const std::string& model) {
  ReadAt read = [data, size](uint64_t offset, void* out, std::size_t n) -> std::size_t {
    if (offset > size) return 0;
    const std::size_t k = std::min<std::size_t>(n, size - static_cast<std::size_t>(offset));
    if (k != 0) std::memcpy(out, data + offset, k);
    return k;
  };
  return read_pt2_archive(read, size, source, model);
}

TorchSaveBytes parse_torch_save_bytes(const uint8_t* data, std::size_t size, std::string_view source) {
  ReadAt read = [data, size](uint64_t offset, void* out, std::size_t n) -> std::size_t {
    if (offset > size) return 0;
    const std::size_t k = std::min<std::size_t>(n, size - static_cast<std::size_t>(offset));
    if (k != 0) std::memcpy(out, data + offset, k);
    return k;
  };
  const auto entries = index_of(read, size, source);
  std::string prefix;
  bool found = false;
  for (const auto& e : entries) {
    const auto slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash + 1, std::string::npos, "data.pkl") == 0) {
      prefix = e.name.substr(0, slash + 1);
      found = true;
      break;
    }
  }
  if (!found) fail_pt2(source, "is not a torch.save archive (no data.pkl record)");
  TorchSaveBytes out;
  const ZipEntry* pkl = nullptr;
  for (const auto& e : entries) {
    if (e.name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = e.name.substr(prefix.size());
    if (rest == "data.pkl") pkl = &e;
    if (rest.rfind("data/", 0) == 0) {
      if (e.method != 0) fail_pt2(source, "record '" + rest + "' is compressed; torch.save stores its records");
      const uint64_t off = zip_record_data_offset(read, size, e, source);
      out.storages[rest.substr(5)] = {static_cast<std::size_t>(off), static_cast<std::size_t>(e.uncompressed_size)};
    }
  }
  const std::vector<uint8_t> p = read_zip_record(read, size, *pkl, source, 64u << 20);
  try {
    out.root = parse_torch_pickle(p.data(), p.size(), std::string(source) + " (data.pkl)");
  } catch (const Error& e) {
    throw load_error(error_kind::kModelLoad, e.what());
  }
  // Every tensor's storage must exist and be large enough.
  std::vector<const PickleValue*> todo{&out.root};
  while (!todo.empty()) {
    const PickleValue* v = todo.back();
    todo.pop_back();
    if (v->kind == PickleValue::Kind::kTensor) {
      auto it = out.storages.find(v->tensor.storage_key);
      if (it == out.storages.end()) fail_pt2(source, "has no record 'data/" + v->tensor.storage_key + "' for a tensor's data");
      const uint64_t need = static_cast<uint64_t>(v->tensor.storage_numel) * dtype_itemsize(v->tensor.dtype);
      if (it->second.second < need)
        fail_pt2(source, "record 'data/" + v->tensor.storage_key + "' holds " + std::to_string(it->second.second) +
                         " bytes but its storage needs " + std::to_string(need));
    }
    for (const auto& c : v->items) todo.push_back(&c);
    for (const auto& c : v->keys) todo.push_back(&c);
  }
  return out;
}

}  // namespace nd::formats
