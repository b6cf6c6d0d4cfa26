#include "model/pt2_model.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>

#include <torch/version.h>

#include "core/error.h"
#include "formats/pt2_archive.h"
#include "model/op_fallbacks.h"

#if TORCH_VERSION_MAJOR >= 2
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>
#endif

namespace nd {

namespace {

[[noreturn]] void fail_pt2_model(const std::string& path, const std::string& what) {
  throw load_error(error_kind::kModelLoad, path + ": " + what);
}

// The file, read at offsets (the archive can be large: weights are read record by record).
class FileReader {
 public:
  explicit FileReader(const std::string& path) : in_(path, std::ios::binary) {
    if (in_) {
      in_.seekg(0, std::ios::end);
      const auto end = in_.tellg();
      size_ = end < 0 ? 0 : static_cast<uint64_t>(end);
    }
  }
  bool ok() const { return static_cast<bool>(in_); }
  uint64_t size() const { return size_; }
  formats::ReadAt reader() {
    return [this](uint64_t off, void* out, std::size_t n) -> std::size_t {
      if (off > size_) return 0;
      in_.clear();
      in_.seekg(static_cast<std::streamoff>(off));
      in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
      return static_cast<std::size_t>(in_.gcount());
    };
  }

 private:
  std::ifstream in_;
  uint64_t size_ = 0;
};

}  // namespace

bool is_pt2_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 22) return false;
  FileReader f(path);
  if (!f.ok()) return false;
  char magic[4] = {};
  if (f.reader()(0, magic, 4) != 4 || std::memcmp(magic, "PK\x03\x04", 4) != 0) return false;
  try {
    return formats::is_pt2_layout(formats::read_zip_index(f.reader(), f.size(), path));
  } catch (const Error&) {
    return false;
  }
}

#if TORCH_VERSION_MAJOR < 2

LoadedModel load_pt2_model(const std::string& path) {
  fail_pt2_model(path, "is a torch.export .pt2 archive; reading it needs normdoctor built against LibTorch 2.x (this one "
             "uses LibTorch " + libtorch_version() + "): rebuild it against a PyTorch 2.x install (see README), or "
             "export TorchScript with torch.jit.script(model).save('model.pt')");
}

#else

namespace {

using formats::PickleValue;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;
using Json = nlohmann::json;

at::ScalarType pt2_scalar_type(formats::DType t, const std::string& path, const std::string& where) {
  if (auto st = scalar_type_of(t)) return *st;
  fail_pt2_model(path, where + " has dtype " + formats::dtype_name(t) + ", which normdoctor does not read");
}

const Json* member(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string str_member(const Json& j, const char* key) {
  const Json* v = member(j, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

// Tensors of a torch.save archive held in memory (pickled payloads, legacy
// weight files, the sample inputs).
at::Tensor materialize(const formats::TorchSaveBytes& ts, const std::vector<uint8_t>& buf, const formats::TensorRef& ref,
                       std::map<std::string, at::Tensor>& storages, const std::string& path, const std::string& where) {
  const at::ScalarType st = pt2_scalar_type(ref.dtype, path, where);
  auto it = storages.find(ref.storage_key);
  if (it == storages.end()) {
    const auto& [off, size] = ts.storages.at(ref.storage_key);
    const int64_t numel = static_cast<int64_t>(size / formats::dtype_itemsize(ref.dtype));
    at::Tensor s = at::empty({numel}, at::TensorOptions().dtype(st));
    if (numel) std::memcpy(s.data_ptr(), buf.data() + off, static_cast<std::size_t>(numel) * formats::dtype_itemsize(ref.dtype));
    it = storages.emplace(ref.storage_key, s).first;
  }
  if (it->second.scalar_type() != st) fail_pt2_model(path, where + ": one storage viewed with two dtypes is not supported");
  return it->second.as_strided(ref.sizes, ref.strides, ref.storage_offset);
}

// ---------------------------------------------------------------------------
// The translation of an ExportedProgram graph into a TorchScript graph.

class Builder {
 public:
  Builder(const formats::Pt2Archive& a, FileReader& file, const std::string& path) : a_(a), file_(file), path_(path) {}

  LoadedModel build();
  /// Fills lm.sample_inputs (or the note why not); needs lm.args.
  void read_sample_inputs(LoadedModel& lm);

 private:
  struct ModNode {
    std::string type;  // Python qualified class name from nn_module_stack, "" = unknown
    std::vector<std::string> children;  // names, in first-seen order
  };

  std::vector<uint8_t> record(const std::string& name) {
    return formats::read_zip_record(file_.reader(), file_.size(), a_.entries.at(name), path_);
  }
  void load_tensors();
  void collect_modules();
  void add_module_path(const std::string& p, const std::string& type);
  torch::jit::Module make_module(const std::string& path);
  Value* getattr_chain(const std::string& fqn);
  std::vector<std::string> scope_of(const Json& node);
  void set_scope(Node* n, const std::vector<std::string>& chain);
  Value* constant(const c10::IValue& v);
  Value* argument(const Json& arg, const c10::Argument& formal, const std::string& where);
  void translate_node(const Json& node);
  bool translate_decomposed(const Json& node, const std::string& op, const std::string& where);
  bool translate_sym_arith(const Json& node, const std::string& op, const std::string& where);
  void collect_uses();
  Value* tensor_value(const std::string& name, const std::string& where);
  void add_facts();

  const formats::Pt2Archive& a_;
  FileReader& file_;
  std::string path_;
  std::map<std::string, at::Tensor> tensors_;    // fqn -> weight/buffer/constant
  std::set<std::string> params_;                 // fqns that are parameters
  std::set<std::string> from_meta_;              // fqns whose requires_grad the payload config gave
  std::map<std::string, ModNode> mods_;          // path -> node ("" = root)
  std::vector<std::string> mod_order_;           // paths in first-seen order
  std::map<std::string, torch::jit::Module> built_;
  std::shared_ptr<Graph> g_;
  Value* self_ = nullptr;
  std::map<std::string, Value*> values_;         // graph value name -> value
  std::vector<std::string> cur_scope_;
  std::map<std::string, Value*> attr_cache_;
  int mangle_ = 0;
  std::set<std::string> node_uses_;              // value names some node reads
  // Ops seen per module (for module facts): module path -> (op name, node JSON).
  std::map<std::string, std::vector<std::pair<std::string, const Json*>>> ops_by_module_;
};

void Builder::load_tensors() {
  if (!a_.custom_objects.empty())
    fail_pt2_model(path_, "holds script-object constants (" + a_.custom_objects.front() +
                    "): torchbind classes and opaque objects are not supported");
  std::map<std::string, at::Tensor> files;  // raw records: one storage per file (aliases share it)
  std::map<std::string, at::Tensor> views;  // record + view -> tensor
  auto load = [&](const std::vector<formats::Pt2Payload>& list, const char* what) {
    for (const auto& p : list) {
      const std::string where = std::string(what) + " '" + p.fqn + "'";
      at::Tensor t;
      if (p.use_pickle) {
        const std::vector<uint8_t> b = record(p.record);
        const auto ts = formats::parse_torch_save_bytes(b.data(), b.size(), path_ + " (" + p.record + ")");
        if (ts.root.kind != PickleValue::Kind::kTensor)
          fail_pt2_model(path_, where + ": record '" + p.record + "' holds a " + formats::pickle_kind_name(ts.root.kind) +
                          ", not a tensor (a tensor subclass?)");
        std::map<std::string, at::Tensor> storages;
        t = materialize(ts, b, ts.root.tensor, storages, path_, where);
      } else {
        const at::ScalarType st = pt2_scalar_type(p.dtype, path_, where);
        auto it = files.find(p.record);
        if (it == files.end()) {
          const std::vector<uint8_t> b = record(p.record);
          const int64_t numel = static_cast<int64_t>(b.size() / formats::dtype_itemsize(p.dtype));
          at::Tensor s = at::empty({numel}, at::TensorOptions().dtype(st));
          if (numel) std::memcpy(s.data_ptr(), b.data(), b.size());
          it = files.emplace(p.record, s).first;
        }
        if (it->second.scalar_type() != st) fail_pt2_model(path_, where + ": one record viewed with two dtypes is not supported");
        // The same view of the same record is one tensor (tied weights stay one parameter).
        std::ostringstream key;
        key << p.record << '|' << c10::IntArrayRef(p.sizes) << '|' << c10::IntArrayRef(p.strides) << '|' << p.storage_offset;
        auto tied = views.find(key.str());
        if (tied != views.end()) {
          tensors_[p.fqn] = tied->second;
          from_meta_.insert(p.fqn);
          if (p.is_param) params_.insert(p.fqn);
          continue;
        }
        if (it->second.numel() == 0) {
          t = at::zeros(p.sizes, at::TensorOptions().dtype(st));
        } else {
          t = it->second.as_strided(p.sizes, p.strides, p.storage_offset);
        }
        if (p.is_param) t = t.detach().requires_grad_(p.requires_grad && t.is_floating_point());
        from_meta_.insert(p.fqn);
        views[key.str()] = t;
      }
      tensors_[p.fqn] = t;
      if (p.is_param) params_.insert(p.fqn);
    }
  };
  load(a_.weights, "weight");
  load(a_.constants, "constant");
  for (const std::string& legacy : {a_.legacy_weights, a_.legacy_constants}) {
    if (legacy.empty()) continue;
    const std::vector<uint8_t> b = record(legacy);
    const auto ts = formats::parse_torch_save_bytes(b.data(), b.size(), path_ + " (" + legacy + ")");
    if (ts.root.kind != PickleValue::Kind::kDict)
      fail_pt2_model(path_, legacy + " holds a " + std::string(formats::pickle_kind_name(ts.root.kind)) + ", expected a dict of tensors");
    std::map<std::string, at::Tensor> storages;
    for (std::size_t i = 0; i < ts.root.items.size(); ++i) {
      const auto& k = ts.root.keys[i];
      const auto& v = ts.root.items[i];
      if (k.kind != PickleValue::Kind::kString || v.kind != PickleValue::Kind::kTensor)
        fail_pt2_model(path_, legacy + ": entry " + std::to_string(i) + " is not a named tensor");
      tensors_[k.str] = materialize(ts, b, v.tensor, storages, path_, legacy + " entry '" + k.str + "'");
    }
  }
}

void Builder::add_module_path(const std::string& p, const std::string& type) {
  if (!mods_.count("")) {
    mods_[""];
    mod_order_.push_back("");
  }
  std::string parent;
  std::size_t pos = 0;
  while (true) {
    const std::size_t dot = p.find('.', pos);
    const std::string cur = p.substr(0, dot);
    if (!cur.empty() && !mods_.count(cur)) {
      mods_[cur];
      mod_order_.push_back(cur);
      mods_[parent].children.push_back(cur.substr(parent.empty() ? 0 : parent.size() + 1));
    }
    if (dot == std::string::npos) break;
    parent = cur;
    pos = dot + 1;
  }
  if (!type.empty() && mods_[p].type.empty()) mods_[p].type = type;
}

void Builder::collect_modules() {
  add_module_path("", "");
  const Json& gm = a_.program["graph_module"];
  // named_modules() order: module_call_graph lists the modules in that order.
  if (const Json* mcg = member(gm, "module_call_graph"); mcg && mcg->is_array())
    for (const Json& e : *mcg) {
      const std::string fqn = str_member(e, "fqn");
      if (!fqn.empty()) add_module_path(fqn, "");
    }
  for (const Json& n : gm["graph"]["nodes"]) {
    const Json* md = member(n, "metadata");
    const std::string stack = md ? str_member(*md, "nn_module_stack") : std::string();
    for (const auto& [p, type] : formats::parse_nn_module_stack(stack)) add_module_path(p, type);
  }
  for (const auto& [fqn, t] : tensors_) {
    (void)t;
    const auto dot = fqn.rfind('.');
    if (dot != std::string::npos) add_module_path(fqn.substr(0, dot), "");
  }
}

torch::jit::Module Builder::make_module(const std::string& path) {
  const ModNode& mn = mods_.at(path);
  std::string type = mn.type;
  if (type.empty()) {
    // Never called, so absent from every nn_module_stack: a container. One
    // whose children are named 0, 1, ... is a ModuleList (a Sequential is
    // called and would be named); anything else stays an unnamed Module.
    bool indexed = !mn.children.empty();
    for (const std::string& c : mn.children)
      indexed = indexed && std::all_of(c.begin(), c.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
    type = indexed ? "torch.nn.modules.container.ModuleList" : "torch.nn.modules.module.Module";
  }
  // "__main__.M" -> "__torch__.__main__.___torch_mangle_N.M": a class per
  // instance (attributes differ), named like TorchScript's classes so that
  // short_class_name gives the Python class name.
  std::string prefix, name = type;
  if (auto dot = type.rfind('.'); dot != std::string::npos) {
    prefix = type.substr(0, dot);
    name = type.substr(dot + 1);
  }
  for (char& c : prefix)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_')) c = '_';
  for (char& c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) c = '_';
  const std::string qn = "__torch__." + (prefix.empty() ? std::string() : prefix + ".") + "___torch_mangle_" +
                         std::to_string(mangle_++) + "." + name;
  static auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module m(c10::QualifiedName(qn), cu, /*shouldMangle=*/true);
  m.register_attribute("training", c10::BoolType::get(), false);
  for (const std::string& child : mn.children) {
    const std::string cp = path.empty() ? child : path + "." + child;
    m.register_module(child, make_module(cp));
  }
  for (const auto& [fqn, t] : tensors_) {
    const auto dot = fqn.rfind('.');
    const std::string owner = dot == std::string::npos ? std::string() : fqn.substr(0, dot);
    if (owner != path) continue;
    std::string attr = dot == std::string::npos ? fqn : fqn.substr(dot + 1);
    if (m.hasattr(attr)) continue;
    if (params_.count(fqn)) {
      m.register_parameter(attr, t, /*is_buffer=*/false);
    } else {
      m.register_buffer(attr, t);
    }
  }
  built_[path] = m;
  return m;
}

// self.a.b.c as prim::GetAttr nodes at the top of the graph (shared by every use).
Value* Builder::getattr_chain(const std::string& fqn) {
  auto hit = attr_cache_.find(fqn);
  if (hit != attr_cache_.end()) return hit->second;
  const auto dot = fqn.rfind('.');
  const std::string owner = dot == std::string::npos ? std::string() : fqn.substr(0, dot);
  const std::string name = dot == std::string::npos ? fqn : fqn.substr(dot + 1);
  Value* base = owner.empty() ? self_ : getattr_chain(owner);
  torch::jit::Module& om = built_.at(owner);
  Node* n = g_->createGetAttr(base, name);
  if (mods_.count(fqn)) n->output()->setType(built_.at(fqn).type());
  else n->output()->setType(om.type()->getAttribute(name));
  g_->insertNode(n);
  attr_cache_[fqn] = n->output();
  return n->output();
}

std::vector<std::string> Builder::scope_of(const Json& node) {
  std::vector<std::string> chain;
  const Json* md = member(node, "metadata");
  const std::string stack = md ? str_member(*md, "nn_module_stack") : std::string();
  for (const auto& [p, type] : formats::parse_nn_module_stack(stack)) {
    (void)type;
    if (p.empty()) continue;
    // Containers missing from the stack (ModuleList) are scopes too.
    std::size_t pos = 0;
    while ((pos = p.find('.', pos)) != std::string::npos) {
      const std::string mid = p.substr(0, pos);
      if (mods_.count(mid) && std::find(chain.begin(), chain.end(), mid) == chain.end()) chain.push_back(mid);
      ++pos;
    }
    if (std::find(chain.begin(), chain.end(), p) == chain.end()) chain.push_back(p);
  }
  return chain;
}

void Builder::set_scope(Node* n, const std::vector<std::string>& chain) {
  n->ss_(c10::Symbol::attr(kModuleScopeAttr), chain);
}

Value* Builder::constant(const c10::IValue& v) {
  Value* c = g_->insertConstant(v);
  set_scope(c->node(), cur_scope_);
  return c;
}

Value* Builder::tensor_value(const std::string& name, const std::string& where) {
  auto it = values_.find(name);
  if (it == values_.end()) fail_pt2_model(path_, where + " uses value '" + name + "', which no earlier node defines (a corrupt graph?)");
  return it->second;
}

int64_t scalar_type_code(int64_t schema_code, const std::string& path, const std::string& where) {
  auto d = formats::dtype_from_pt2_scalar_type(schema_code);
  if (!d) fail_pt2_model(path, where + " names dtype code " + std::to_string(schema_code) + ", which normdoctor does not read");
  return static_cast<int64_t>(pt2_scalar_type(*d, path, where));
}

Value* Builder::argument(const Json& arg, const c10::Argument& formal, const std::string& where) {
  if (!arg.is_object() || arg.size() != 1) fail_pt2_model(path_, where + " is not a serialized Argument");
  const std::string kind = arg.begin().key();
  const Json& v = arg.begin().value();
  auto sym_int = [&](const Json& s) -> Value* {
    if (const Json* i = member(s, "as_int")) return constant(i->get<int64_t>());
    if (const Json* nm = member(s, "as_name")) return tensor_value(nm->get<std::string>(), where);
    fail_pt2_model(path_, where + " is a malformed SymInt");
  };
  try {
    // A Python number where the schema wants a Tensor (aten.mul.Tensor(x, 2)):
    // torch.ops wraps it as a 0-dim "wrapped number" tensor, which type
    // promotion treats like a scalar. The same here.
    if (formal.type()->kind() == c10::TypeKind::TensorType &&
        (kind == "as_int" || kind == "as_float" || kind == "as_bool")) {
      at::Tensor t = kind == "as_int"    ? at::scalar_tensor(v.get<int64_t>(), at::kLong)
                     : kind == "as_float" ? at::scalar_tensor(v.get<double>(), at::kDouble)
                                          : at::scalar_tensor(v.get<bool>(), at::kBool);
      t.unsafeGetTensorImpl()->set_wrapped_number(true);
      return constant(t);
    }
    if (kind == "as_none") return constant(c10::IValue());
    if (kind == "as_tensor") return tensor_value(str_member(v, "name"), where);
    if (kind == "as_optional_tensor") {
      if (member(v, "as_none")) return constant(c10::IValue());
      return tensor_value(str_member(v.at("as_tensor"), "name"), where);
    }
    if (kind == "as_tensors" || kind == "as_optional_tensors") {
      std::vector<Value*> xs;
      const bool optional = kind == "as_optional_tensors";
      // The list's element type is the schema's: `Tensor?[] indices` of
      // aten::index.Tensor / index_put_ is serialized as_tensors when no
      // index is None, and a Tensor[] would resolve to the registry's
      // `hacked_twin` overload instead of the one the program names.
      const auto list_type = formal.type()->cast<c10::ListType>();
      const bool optional_elems =
          optional || (list_type && list_type->getElementType()->kind() == c10::TypeKind::OptionalType);
      for (const Json& e : v) {
        if (optional && member(e, "as_none")) xs.push_back(constant(c10::IValue()));
        else xs.push_back(tensor_value(str_member(optional ? e.at("as_tensor") : e, "name"), where));
      }
      const c10::TypePtr elem = optional_elems ? c10::TypePtr(c10::OptionalType::create(c10::TensorType::get()))
                                               : c10::TypePtr(c10::TensorType::get());
      Node* l = g_->insertNode(g_->createList(elem, xs));
      set_scope(l, cur_scope_);
      return l->output();
    }
    if (kind == "as_int") return constant(v.get<int64_t>());
    if (kind == "as_float") return constant(v.get<double>());
    if (kind == "as_bool") return constant(v.get<bool>());
    if (kind == "as_string") return constant(v.get<std::string>());
    if (kind == "as_ints") return constant(c10::IValue(v.get<std::vector<int64_t>>()));
    if (kind == "as_floats") return constant(c10::IValue(v.get<std::vector<double>>()));
    if (kind == "as_bools") {
      c10::List<bool> l;
      for (const Json& e : v) l.push_back(e.get<bool>());
      return constant(l);
    }
    if (kind == "as_strings") return constant(c10::IValue(v.get<std::vector<std::string>>()));
    if (kind == "as_sym_int") return sym_int(v);
    if (kind == "as_sym_ints") {
      bool all_const = true;
      for (const Json& e : v) all_const = all_const && member(e, "as_int");
      if (all_const) {
        std::vector<int64_t> xs;
        for (const Json& e : v) xs.push_back(e.at("as_int").get<int64_t>());
        return constant(c10::IValue(xs));
      }
      std::vector<Value*> xs;
      for (const Json& e : v) xs.push_back(sym_int(e));
      Node* l = g_->insertNode(g_->createList(c10::IntType::get(), xs));
      set_scope(l, cur_scope_);
      return l->output();
    }
    if (kind == "as_sym_float") {
      if (const Json* f = member(v, "as_float")) return constant(f->get<double>());
      return tensor_value(str_member(v, "as_name"), where);
    }
    if (kind == "as_sym_bool") {
      if (const Json* b = member(v, "as_bool")) return constant(b->get<bool>());
      return tensor_value(str_member(v, "as_name"), where);
    }
    if (kind == "as_scalar_type") return constant(scalar_type_code(v.get<int64_t>(), path_, where));
    if (kind == "as_memory_format") {
      // schema: Contiguous=1, ChannelsLast=2, ChannelsLast3d=3, Preserve=4; c10: Contiguous=0, Preserve=1, ...
      const int64_t c = v.get<int64_t>();
      const c10::MemoryFormat mf = c == 2 ? c10::MemoryFormat::ChannelsLast
                                   : c == 3 ? c10::MemoryFormat::ChannelsLast3d
                                   : c == 4 ? c10::MemoryFormat::Preserve
                                            : c10::MemoryFormat::Contiguous;
      return constant(static_cast<int64_t>(mf));
    }
    if (kind == "as_layout") {
      if (v.get<int64_t>() != 7) fail_pt2_model(path_, where + " asks for a non-strided layout");
      return constant(static_cast<int64_t>(c10::kStrided));
    }
    if (kind == "as_device") {
      // normdoctor runs the model on the CPU (like torch::jit::load(path, kCPU)).
      return constant(c10::Device(c10::kCPU));
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail_pt2_model(path_, where + " (" + kind + ") is malformed: " + e.what());
  }
  fail_pt2_model(path_, where + " is an argument of kind '" + kind + "', which normdoctor does not support" +
                  (kind == "as_graph" ? " (a higher-order op's subgraph: control flow is not supported)" : ""));
}

void Builder::translate_node(const Json& node) {
  const std::string target = str_member(node, "target");
  const std::string name = str_member(node, "name");
  const std::string where = "node '" + name + "' (" + target + ")";
  cur_scope_ = scope_of(node);
  // "torch.ops.aten.conv2d.default" -> ("aten::conv2d", "")
  const std::string pre = "torch.ops.";
  if (target.rfind("_operator.", 0) == 0 && translate_sym_arith(node, target.substr(10), where)) return;
  if (target.rfind(pre, 0) != 0) {
    fail_pt2_model(path_, where + ": a call of the Python function " + target +
                    ", which only Python can run (dynamic-shape arithmetic or a graph break); re-export with static "
                    "shapes (no dynamic_shapes=) or rewrite that part of forward in torch ops");
  }
  std::string rest = target.substr(pre.size());
  if (rest.rfind("higher_order.", 0) == 0)
    fail_pt2_model(path_, where + ": higher-order op " + rest.substr(13) +
                    " (control flow, wrapped subgraphs) is not supported; export a model without torch.cond/map or set_grad_enabled regions");
  const auto d1 = rest.find('.');
  const auto d2 = rest.rfind('.');
  if (d1 == std::string::npos || d2 == d1) fail_pt2_model(path_, where + ": target is not torch.ops.<ns>.<op>.<overload>");
  const std::string ns = rest.substr(0, d1);
  const std::string op = rest.substr(d1 + 1, d2 - d1 - 1);
  std::string overload = rest.substr(d2 + 1);
  if (overload == "default") overload = "";
  const std::string qual = ns + "::" + op;
  const std::string full = overload.empty() ? qual : qual + "." + overload;
  if (ns == "aten" && translate_decomposed(node, op, where)) return;
  auto handle = c10::Dispatcher::singleton().findSchema({qual, overload});
  if (!handle) {
    if (ns == "aten" || ns == "prim")
      throw load_error(error_kind::kMissingOperator, missing_operator_message(path_, full));
    throw load_error(error_kind::kMissingOperator,
                     path_ + " calls operator " + full + ", a custom operator (torch.library / TORCH_LIBRARY) that LibTorch " +
                         libtorch_version() + " in normdoctor does not have: normdoctor can run only the operators "
                         "registered in its own LibTorch; export the model without it (its composite definition), or "
                         "load its C++ library into normdoctor's build");
  }
  const c10::FunctionSchema& schema = handle->schema();
  if (schema.is_vararg()) fail_pt2_model(path_, where + ": vararg operators are not supported");

  // Arguments in schema order (the graph's named inputs may omit defaults).
  std::map<std::string, const Json*> given;
  for (const Json& in : node.at("inputs")) given[str_member(in, "name")] = member(in, "arg");
  std::vector<Value*> inputs;
  for (const auto& formal : schema.arguments()) {
    auto it = given.find(formal.name());
    if (it != given.end() && it->second) {
      inputs.push_back(argument(*it->second, formal, where + " argument '" + formal.name() + "'"));
    } else if (formal.default_value()) {
      inputs.push_back(constant(*formal.default_value()));
    } else {
      fail_pt2_model(path_, where + ": no value for argument '" + formal.name() + "' of " + full);
    }
  }
  Node* n = g_->create(c10::Symbol::fromQualString(qual), inputs, schema.returns().size());
  for (size_t i = 0; i < schema.returns().size(); ++i) n->output(i)->setType(schema.returns()[i].type());
  g_->insertNode(n);
  set_scope(n, cur_scope_);
  const c10::FunctionSchema* matched = n->maybeSchema();
  if (!matched || matched->overload_name() != schema.overload_name()) {
    // The registry matches overloads by argument types; ours must be the one the program names.
    fail_pt2_model(path_, where + ": the TorchScript operator registry does not resolve these arguments to " + full +
                    (matched ? " (it picks " + matched->name() + "." + matched->overload_name() + ")" : ""));
  }
  // Outputs: one serialized Argument per return.
  const Json& outs = node.at("outputs");
  if (outs.size() != schema.returns().size() && !(outs.empty() && schema.returns().empty()))
    fail_pt2_model(path_, where + " has " + std::to_string(outs.size()) + " outputs, " + full + " returns " +
                    std::to_string(schema.returns().size()));
  for (size_t i = 0; i < outs.size(); ++i) {
    const Json& o = outs[i];
    if (!o.is_object() || o.empty()) continue;
    const std::string kind = o.begin().key();
    const Json& v = o.begin().value();
    if (kind == "as_tensor" || kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") {
      const std::string vn = kind == "as_tensor" ? str_member(v, "name") : str_member(v, "as_name");
      if (!vn.empty()) values_[vn] = n->output(i);
    } else if (kind == "as_tensors") {
      Node* un = g_->createListUnpack(n->output(i), v.size());
      g_->insertNode(un);
      set_scope(un, cur_scope_);
      for (size_t k = 0; k < v.size(); ++k) values_[str_member(v[k], "name")] = un->output(k);
    } else if (kind == "as_optional_tensors") {
      fail_pt2_model(path_, where + ": optional-tensor list outputs are not supported");
    }
  }
  if (ns == "aten") ops_by_module_[cur_scope_.empty() ? std::string() : cur_scope_.back()].push_back({op, &node});
}

// Every value name that a node reads (graph outputs excluded).
void Builder::collect_uses() {
  std::vector<const Json*> todo;
  for (const Json& n : a_.program["graph_module"]["graph"]["nodes"])
    if (const Json* in = member(n, "inputs")) todo.push_back(in);
  while (!todo.empty()) {
    const Json* j = todo.back();
    todo.pop_back();
    if (j->is_object()) {
      for (auto it = j->begin(); it != j->end(); ++it) {
        if ((it.key() == "name" || it.key() == "as_name") && it.value().is_string()) node_uses_.insert(it.value().get<std::string>());
        else if (it.value().is_structured()) todo.push_back(&it.value());
      }
    } else if (j->is_array()) {
      for (const Json& e : *j)
        if (e.is_structured()) todo.push_back(&e);
    }
  }
}

// Size arithmetic of programs exported with dynamic shapes: Python's
// operator.mul/add/... on SymInts, as TorchScript's int ops
// (aten::mul.int, ...). Returns false for other Python functions.
bool Builder::translate_sym_arith(const Json& node, const std::string& op, const std::string& where) {
  static const std::map<std::string, std::pair<const char*, const char*>> kOps = {
      {"mul", {"aten::mul", "int"}},           {"add", {"aten::add", "int"}},
      {"sub", {"aten::sub", "int"}},           {"floordiv", {"aten::floordiv", "int"}},
      {"mod", {"aten::remainder", "int"}},     {"neg", {"aten::neg", "int"}},
      {"eq", {"aten::eq", "int"}},             {"ne", {"aten::ne", "int"}},
      {"ge", {"aten::ge", "int"}},             {"gt", {"aten::gt", "int"}},
      {"le", {"aten::le", "int"}},             {"lt", {"aten::lt", "int"}},
  };
  auto it = kOps.find(op);
  if (it == kOps.end()) return false;
  auto handle = c10::Dispatcher::singleton().findSchema({it->second.first, it->second.second});
  std::optional<c10::FunctionSchema> schema;
  if (handle) schema = handle->schema();
  if (!schema) {
    // Not dispatcher ops in every LibTorch: TorchScript's own int operators.
    for (const auto& o : torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(it->second.first)))
      if (o->schema().overload_name() == it->second.second) schema = o->schema();
  }
  if (!schema) return false;
  std::vector<Value*> inputs;
  const Json& ins = node.at("inputs");
  if (ins.size() != schema->arguments().size()) return false;
  for (size_t i = 0; i < ins.size(); ++i) {
    const Json* a = member(ins[i], "arg");
    if (!a) return false;
    inputs.push_back(argument(*a, schema->arguments()[i], where));
  }
  Node* n = g_->create(c10::Symbol::fromQualString(it->second.first), inputs, 1);
  n->output()->setType(schema->returns()[0].type());
  g_->insertNode(n);
  set_scope(n, cur_scope_);
  if (!n->maybeSchema()) fail_pt2_model(path_, where + ": " + it->second.first + " does not accept these arguments");
  const Json& outs = node.at("outputs");
  if (outs.size() == 1 && outs[0].is_object() && !outs[0].empty()) {
    const Json& v = outs[0].begin().value();
    const std::string nm = str_member(v, "as_name");
    if (!nm.empty()) values_[nm] = n->output();
  }
  return true;
}

// Decomposed programs (ep.run_decompositions(), core ATen) spell batch_norm
// and dropout as _native_batch_norm_legit_functional / _no_training and
// native_dropout. When their extra outputs are unused (the usual case), they
// run as aten::batch_norm / aten::dropout, which compute the same values, so
// the mode switch and the normalization analysis see them as in any graph;
// the functional variant's new running statistics are then the running
// buffers themselves, updated in place (the write-back of buffers_to_mutate
// becomes a no-op). Returns false to translate the node as it is.
bool Builder::translate_decomposed(const Json& node, const std::string& op, const std::string& where) {
  const bool bn_fn = op == "_native_batch_norm_legit_functional";
  const bool bn_eval = op == "_native_batch_norm_legit_no_training";
  const bool drop = op == "native_dropout";
  if (!bn_fn && !bn_eval && !drop) return false;
  const Json& outs = node.at("outputs");
  auto out_name = [&](size_t i) -> std::string {
    if (i >= outs.size() || !outs[i].is_object()) return "";
    const Json* t = member(outs[i], "as_tensor");
    return t ? str_member(*t, "name") : std::string();
  };
  auto unused = [&](size_t i) { const std::string n = out_name(i); return n.empty() || !node_uses_.count(n); };
  std::map<std::string, const Json*> given;
  for (const Json& in : node.at("inputs")) given[str_member(in, "name")] = member(in, "arg");
  auto arg = [&](const char* nm) -> const Json& {
    auto it = given.find(nm);
    if (it == given.end() || !it->second) fail_pt2_model(path_, where + ": no value for argument '" + nm + "'");
    return *it->second;
  };
  const char* target = drop ? "aten::dropout" : "aten::batch_norm";
  auto handle = c10::Dispatcher::singleton().findSchema({target, ""});
  if (!handle) return false;
  const c10::FunctionSchema& schema = handle->schema();
  std::vector<Value*> inputs;
  if (drop) {
    if (outs.size() != 2 || !unused(1)) return false;
    inputs = {argument(arg("input"), schema.arguments()[0], where), argument(arg("p"), schema.arguments()[1], where),
              argument(arg("train"), schema.arguments()[2], where)};
  } else {
    if (outs.size() != (bn_fn ? 5u : 3u) || !unused(1) || !unused(2)) return false;
    if (bn_fn && (!unused(3) || !unused(4))) return false;
    const auto& f = schema.arguments();
    inputs = {argument(arg("input"), f[0], where),        argument(arg("weight"), f[1], where),
              argument(arg("bias"), f[2], where),         argument(arg("running_mean"), f[3], where),
              argument(arg("running_var"), f[4], where),  bn_fn ? argument(arg("training"), f[5], where) : constant(false),
              argument(arg("momentum"), f[6], where),     argument(arg("eps"), f[7], where),
              constant(false)};
  }
  Node* n = g_->create(c10::Symbol::fromQualString(target), inputs, 1);
  n->output()->setType(c10::TensorType::get());
  g_->insertNode(n);
  set_scope(n, cur_scope_);
  if (!n->maybeSchema()) fail_pt2_model(path_, where + ": " + target + " does not accept these arguments");
  values_[out_name(0)] = n->output();
  if (bn_fn) {
    values_[out_name(3)] = inputs[3];
    values_[out_name(4)] = inputs[4];
  }
  ops_by_module_[cur_scope_.empty() ? std::string() : cur_scope_.back()].push_back({drop ? "dropout" : "batch_norm", &node});
  return true;
}

// Inventory facts module_facts reads (eps, momentum, features...), from the
// constant arguments of the op that a leaf module runs, where TorchScript
// would have had them as module attributes.
void Builder::add_facts() {
  auto arg_of = [](const Json& node, const char* nm) -> const Json* {
    for (const Json& in : node.at("inputs"))
      if (str_member(in, "name") == nm) return member(in, "arg");
    return nullptr;
  };
  for (const auto& [path, ops] : ops_by_module_) {
    auto bm = built_.find(path);
    if (bm == built_.end() || path.empty() || !mods_[path].children.empty()) continue;
    torch::jit::Module& m = bm->second;
    auto put = [&](const char* attr, const c10::IValue& v) {
      if (m.hasattr(attr)) return;
      m.register_attribute(attr, v.type(), v);
    };
    auto fl = [&](const Json& node, const char* nm) -> std::optional<double> {
      const Json* a = arg_of(node, nm);
      if (!a) return std::nullopt;
      if (const Json* f = member(*a, "as_float")) return f->get<double>();
      if (const Json* i = member(*a, "as_int")) return static_cast<double>(i->get<int64_t>());
      return std::nullopt;
    };
    auto weight_size = [&](int64_t dim) -> std::optional<int64_t> {
      if (!m.hasattr("weight") || !m.attr("weight").isTensor()) return std::nullopt;
      const at::Tensor w = m.attr("weight").toTensor();
      if (w.dim() <= dim) return std::nullopt;
      return w.size(dim);
    };
    std::map<std::string, int> count;
    for (const auto& [op, node] : ops) count[op]++;
    for (const auto& [op, node] : ops) {
      if (count[op] != 1) continue;
      if (op == "batch_norm" || op == "_native_batch_norm_legit_no_training" || op == "_native_batch_norm_legit_functional") {
        if (auto e = fl(*node, "eps")) put("eps", *e);
        if (auto mo = fl(*node, "momentum")) put("momentum", *mo);
        put("affine", m.hasattr("weight"));
        put("track_running_stats", m.hasattr("running_mean"));
        if (m.hasattr("running_mean") && m.attr("running_mean").isTensor())
          put("num_features", m.attr("running_mean").toTensor().numel());
      } else if (op == "layer_norm" || op == "rms_norm") {
        if (auto e = fl(*node, "eps")) put("eps", *e);
        if (const Json* ns = arg_of(*node, "normalized_shape")) {
          std::vector<int64_t> xs;
          const Json* v = member(*ns, "as_ints");
          if (v) xs = v->get<std::vector<int64_t>>();
          if (!xs.empty()) put("normalized_shape", c10::IValue(xs));
        }
        put("elementwise_affine", m.hasattr("weight"));
      } else if (op == "group_norm") {
        if (auto e = fl(*node, "eps")) put("eps", *e);
        if (auto g = fl(*node, "num_groups")) put("num_groups", static_cast<int64_t>(*g));
        if (auto c = weight_size(0)) put("num_channels", *c);
        put("affine", m.hasattr("weight"));
      } else if (op == "linear") {
        if (auto o = weight_size(0)) put("out_features", *o);
        if (auto i = weight_size(1)) put("in_features", *i);
      } else if (op.rfind("conv", 0) == 0) {
        if (auto o = weight_size(0)) put("out_channels", *o);
        if (auto i = weight_size(1)) {
          const auto g = fl(*node, "groups");
          put("in_channels", *i * static_cast<int64_t>(g ? *g : 1));
        }
      } else if (op == "embedding") {
        if (auto n = weight_size(0)) put("num_embeddings", *n);
        if (auto d = weight_size(1)) put("embedding_dim", *d);
      } else if (op == "dropout" || op == "feature_dropout" || op == "alpha_dropout") {
        if (auto p = fl(*node, "p")) put("p", *p);
      }
    }
  }
}

void Builder::read_sample_inputs(LoadedModel& lm) {
  if (a_.sample_inputs.empty()) {
    lm.sample_inputs_note = "the archive holds no sample inputs";
    return;
  }
  const std::string src = path_ + ":" + a_.sample_inputs;
  try {
    const std::vector<uint8_t> b = record(a_.sample_inputs);
    const auto ts = formats::parse_torch_save_bytes(b.data(), b.size(), src);
    // torch.save((args, kwargs)) (torch/_export/serde/serialize.py serialize_torch_artifact).
    const PickleValue& r = ts.root;
    if (r.kind != PickleValue::Kind::kTuple || r.items.size() != 2 || r.items[0].kind != PickleValue::Kind::kTuple ||
        r.items[1].kind != PickleValue::Kind::kDict) {
      lm.sample_inputs_note = src + " is not an (args, kwargs) pair";
      return;
    }
    BatchFile bf;
    bf.path = src;
    bf.container = "tuple";
    std::map<std::string, at::Tensor> storages;
    for (size_t i = 0; i < r.items[0].items.size(); ++i) {
      const PickleValue& v = r.items[0].items[i];
      if (v.kind != PickleValue::Kind::kTensor) {
        lm.sample_inputs_note = src + ": positional argument " + std::to_string(i) + " is a " +
                                formats::pickle_kind_name(v.kind) + ", not a tensor";
        return;
      }
      bf.positional.push_back(materialize(ts, b, v.tensor, storages, path_, src));
    }
    const PickleValue& kw = r.items[1];
    for (size_t i = 0; i < kw.items.size(); ++i) {
      if (kw.keys[i].kind != PickleValue::Kind::kString || kw.items[i].kind != PickleValue::Kind::kTensor) {
        lm.sample_inputs_note = src + ": keyword argument " + std::to_string(i) + " is not a named tensor";
        return;
      }
      bf.keyword.emplace_back(kw.keys[i].str, materialize(ts, b, kw.items[i].tensor, storages, path_, src));
    }
    if (!bf.keyword.empty() && !bf.positional.empty()) {
      // Both: positional ones take the first arguments, in order.
      for (size_t i = 0; i < bf.positional.size() && i < lm.args.size(); ++i)
        bf.keyword.insert(bf.keyword.begin() + static_cast<long>(i), {lm.args[i].name, bf.positional[i]});
      bf.positional.clear();
      bf.container = "dict";
    } else if (!bf.keyword.empty()) {
      bf.container = "dict";
    }
    if (bf.positional.empty() && bf.keyword.empty()) {
      lm.sample_inputs_note = src + " holds no tensors";
      return;
    }
    lm.sample_inputs = std::move(bf);
  } catch (const Error& e) {
    lm.sample_inputs_note = e.what();
  }
}

LoadedModel Builder::build() {
  load_tensors();
  collect_modules();
  collect_uses();
  const Json& gm = a_.program["graph_module"];
  const Json& graph = gm["graph"];
  const Json& sig = gm["signature"];

  // Which graph inputs are parameters, buffers, constants, user inputs.
  std::map<std::string, std::string> state_of;  // placeholder name -> fqn
  std::vector<std::string> user_inputs;
  std::map<std::string, c10::IValue> const_inputs;
  for (const Json& spec : sig["input_specs"]) {
    if (!spec.is_object() || spec.empty()) fail_pt2_model(path_, "graph signature: malformed input spec");
    const std::string kind = spec.begin().key();
    const Json& v = spec.begin().value();
    if (kind == "parameter" || kind == "buffer" || kind == "tensor_constant") {
      const std::string ph = str_member(v.at("arg"), "name");
      const std::string fqn = str_member(v, kind == "parameter" ? "parameter_name" : kind == "buffer" ? "buffer_name" : "tensor_constant_name");
      if (!tensors_.count(fqn)) fail_pt2_model(path_, "graph signature: " + kind + " '" + fqn + "' is not in the archive's weights or constants");
      state_of[ph] = fqn;
      if (kind == "parameter") {
        // Pickled and legacy weights carry no is_param flag of their own: the signature decides.
        params_.insert(fqn);
        at::Tensor& t = tensors_[fqn];
        if (!from_meta_.count(fqn) && !t.requires_grad() && t.is_floating_point()) t = t.detach().requires_grad_(true);
      }
    } else if (kind == "user_input") {
      const Json& arg = v.at("arg");
      if (const Json* t = member(arg, "as_tensor")) {
        user_inputs.push_back(str_member(*t, "name"));
      } else if (member(arg, "as_none")) {
        user_inputs.push_back("");
      } else {
        fail_pt2_model(path_, "graph signature: a user input of kind '" + (arg.empty() ? std::string("?") : arg.begin().key()) +
                        "' (only tensor inputs are supported; re-export with static shapes)");
      }
    } else if (kind == "constant_input") {
      const std::string nm = str_member(v, "name");
      const Json& cv = v.at("value");
      c10::IValue iv;
      if (const Json* i = member(cv, "as_int")) iv = i->get<int64_t>();
      else if (const Json* f = member(cv, "as_float")) iv = f->get<double>();
      else if (const Json* b = member(cv, "as_bool")) iv = b->get<bool>();
      else if (const Json* s = member(cv, "as_string")) iv = s->get<std::string>();
      const_inputs[nm] = iv;
    } else {
      fail_pt2_model(path_, "graph signature: input of kind '" + kind + "' (effect tokens, script objects) is not supported");
    }
  }

  torch::jit::Module root = make_module("");
  g_ = std::make_shared<Graph>();
  self_ = g_->addInput("self");
  self_->setType(root.type());
  cur_scope_.clear();
  for (const std::string& u : user_inputs) {
    if (u.empty()) continue;
    Value* in = g_->addInput();
    if (!u.empty() && !std::isdigit(static_cast<unsigned char>(u[0]))) in->setDebugName(u);
    in->setType(c10::TensorType::get());
    values_[u] = in;
  }
  // The graph's input list, in order: placeholders map to state or user inputs.
  for (const Json& in : graph["inputs"]) {
    std::string nm;
    if (const Json* t = member(in, "as_tensor")) nm = str_member(*t, "name");
    else if (const Json* c = member(in, "as_custom_obj")) fail_pt2_model(path_, "graph input '" + str_member(*c, "name") + "' is a script object: not supported");
    else if (const Json* tk = member(in, "as_token")) fail_pt2_model(path_, "graph input '" + str_member(*tk, "name") + "' is an effect token: not supported");
    if (nm.empty()) continue;
    auto st = state_of.find(nm);
    if (st != state_of.end()) values_[nm] = getattr_chain(st->second);
  }
  for (const auto& [nm, iv] : const_inputs) values_[nm] = constant(iv);
  for (const Json& node : graph["nodes"]) translate_node(node);

  // Outputs: user outputs returned; mutated buffers and inputs written back in place.
  cur_scope_.clear();
  std::vector<Value*> outs;
  const Json& gouts = graph["outputs"];
  const Json& ospecs = sig["output_specs"];
  if (gouts.size() != ospecs.size())
    fail_pt2_model(path_, "graph has " + std::to_string(gouts.size()) + " outputs but its signature describes " + std::to_string(ospecs.size()));
  for (size_t i = 0; i < ospecs.size(); ++i) {
    const Json& spec = ospecs[i];
    if (!spec.is_object() || spec.empty()) fail_pt2_model(path_, "graph signature: malformed output spec");
    const std::string kind = spec.begin().key();
    const Json& v = spec.begin().value();
    const Json& out = gouts[i];
    auto out_value = [&]() -> Value* {
      if (const Json* t = member(out, "as_tensor")) return tensor_value(str_member(*t, "name"), "graph output " + std::to_string(i));
      if (member(out, "as_none")) return constant(c10::IValue());
      if (const Json* n = member(out, "as_int")) return constant(n->get<int64_t>());
      if (const Json* f = member(out, "as_float")) return constant(f->get<double>());
      fail_pt2_model(path_, "graph output " + std::to_string(i) + " has a kind normdoctor does not support");
    };
    if (kind == "user_output" || kind == "loss_output") {
      outs.push_back(out_value());
    } else if (kind == "buffer_mutation" || kind == "user_input_mutation" || kind == "parameter_mutation") {
      Value* nv = out_value();
      Value* dst = nullptr;
      if (kind == "user_input_mutation") dst = tensor_value(str_member(v, "user_input_name"), "graph output " + std::to_string(i));
      else {
        const std::string fqn = str_member(v, kind == "buffer_mutation" ? "buffer_name" : "parameter_name");
        if (!tensors_.count(fqn)) fail_pt2_model(path_, "graph signature: mutated state '" + fqn + "' is not in the archive");
        dst = getattr_chain(fqn);
      }
      if (dst == nv) continue;  // updated in place already (translate_decomposed)
      // The write-back belongs to the module that owns the state (a BatchNorm
      // updating num_batches_tracked), so the new value does not count as an
      // output of that module.
      std::vector<std::string> owner_chain;
      if (kind != "user_input_mutation") {
        const std::string fqn = str_member(v, kind == "buffer_mutation" ? "buffer_name" : "parameter_name");
        std::size_t pos = 0;
        while ((pos = fqn.find('.', pos)) != std::string::npos) {
          if (mods_.count(fqn.substr(0, pos))) owner_chain.push_back(fqn.substr(0, pos));
          ++pos;
        }
      }
      // The new value (running statistics) must not make the buffer part of the autograd graph.
      Node* det = g_->create(c10::Symbol::fromQualString("aten::detach"), {nv}, 1);
      det->output()->setType(c10::TensorType::get());
      g_->insertNode(det);
      set_scope(det, owner_chain);
      Node* c = g_->create(c10::Symbol::fromQualString("aten::copy_"), {dst, det->output(), constant(false)}, 1);
      c->output()->setType(c10::TensorType::get());
      g_->insertNode(c);
      set_scope(c, owner_chain);
    } else {
      fail_pt2_model(path_, "graph signature: output of kind '" + kind + "' (a joint forward-backward graph?) is not supported");
    }
  }
  if (outs.size() == 1) {
    g_->registerOutput(outs.front());
  } else {
    Node* t = g_->insertNode(g_->createTuple(outs));
    set_scope(t, {});
    g_->registerOutput(t->output());
  }
  g_->lint();

  add_facts();
  auto fn = root.type()->compilation_unit()->create_function(
      c10::QualifiedName(*root.type()->name(), "forward"), g_, /*shouldMangle=*/false);
  root.type()->addMethod(fn);

  LoadedModel lm;
  lm.path = path_;
  lm.format = "pt2";
  lm.module = root;
  lm.kind = "exported";
  lm.kind_reason = "a torch.export ExportedProgram (" + a_.root + "models/" + a_.model_name + ".json, schema " +
                   std::to_string(a_.schema_major) + "." + std::to_string(a_.schema_minor) +
                   (a_.torch_version.empty() ? "" : ", torch " + a_.torch_version) +
                   "): no control flow, batch_norm/dropout modes fixed at export time like a traced graph";
  // An ExportedProgram has no training flag; the graph's ops carry the mode.
  // A program with batch_norm/dropout run in training mode was exported from
  // a module in train(): its modules count as saved in training mode, as a
  // traced TorchScript module of the same model would be.
  bool train_ops = false;
  for (const Json& node : graph["nodes"]) {
    const std::string t = str_member(node, "target");
    const char* flag = (t == "torch.ops.aten.batch_norm.default" || t == "torch.ops.aten._native_batch_norm_legit_functional.default")
                           ? "training"
                       : (t == "torch.ops.aten.dropout.default" || t == "torch.ops.aten.native_dropout.default") ? "train"
                                                                                                                 : nullptr;
    if (!flag) continue;
    for (const Json& in : node.at("inputs")) {
      if (str_member(in, "name") != flag) continue;
      const Json* a = member(in, "arg");
      const Json* b = a ? member(*a, "as_bool") : nullptr;
      if (b && b->is_boolean() && b->get<bool>()) train_ops = true;
    }
  }
  root.train(train_ops);
  lm.saved_training = train_ops;
  if (train_ops) lm.kind_reason += "; batch_norm/dropout run in training mode: exported from a module in train()";
  return lm;
}

}  // namespace

LoadedModel load_pt2_model(const std::string& path) {
  FileReader file(path);
  if (!file.ok()) fail_pt2_model(path, "cannot be read (permission denied?)");
  const formats::Pt2Archive a = formats::read_pt2_archive(file.reader(), file.size(), path);
  register_missing_op_fallbacks();
  apply_kernel_workarounds();
  Builder b(a, file, path);
  LoadedModel lm;
  try {
    lm = b.build();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    fail_pt2_model(path, "the exported program could not be translated: " + what.substr(0, what.find('\n')));
  }
  lm.sha256 = sha256_file(path);
  describe_forward_and_modules(lm);
  b.read_sample_inputs(lm);
  return lm;
}

#endif

}  // namespace nd
