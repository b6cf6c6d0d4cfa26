#include "model/model.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>
#include <sys/stat.h>

#include <caffe2/serialize/inline_container.h>
#include <openssl/evp.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "core/error.h"
#include "model/op_fallbacks.h"
#include "model/pt2_model.h"

namespace nd {

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

namespace {

std::string read_prefix(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

const char* kExportHint =
    "export TorchScript from Python with torch.jit.script(model).save('model.pt') "
    "(or torch.jit.trace(model, example_inputs).save('model.pt')) after model.eval()";

// Checks the file before handing it to torch::jit::load, so that every
// common mistake gets a message that names it. Throws nd::Error.
void precheck_archive(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw load_error(error_kind::kModelLoad, path + ": no such file (expected a TorchScript model, model.pt)");
  if (S_ISDIR(st.st_mode))
    throw load_error(error_kind::kModelLoad, path + ": is a directory, expected a TorchScript model file");
  std::ifstream probe(path, std::ios::binary);
  if (!probe)
    throw load_error(error_kind::kModelLoad, path + ": cannot be read (permission denied?)");
  if (st.st_size == 0)
    throw load_error(error_kind::kModelLoad, path + ": is empty (0 bytes), expected a TorchScript model");
  const std::string head = read_prefix(path, 4);
  if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x80 && head[1] >= 2 && head[1] <= 5)
    throw load_error(error_kind::kModelLoad,
                     path + ": is a legacy (non-zip) torch.save pickle, not a TorchScript model; " + kExportHint);
  if (head.size() < 4 || head.substr(0, 4) != std::string("PK\x03\x04", 4))
    throw load_error(error_kind::kModelLoad,
                     path + ": is not a TorchScript model (not a zip archive); " + kExportHint);

  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  } catch (const std::exception& e) {
    throw load_error(error_kind::kModelLoad,
                     path + ": truncated or corrupt zip archive (" +
                         std::string(e.what()).substr(0, std::string(e.what()).find('\n')) + ")");
  }
  const bool has_constants = reader->hasRecord("constants.pkl");
  const bool has_data = reader->hasRecord("data.pkl");
  if (!has_constants && has_data) {
    // torch.save output: a state_dict, or a whole nn.Module pickled by class.
    std::string what = "a state_dict or other object saved with torch.save";
    try {
      auto rec = reader->getRecord("data.pkl");
      const char* p = static_cast<const char*>(std::get<0>(rec).get());
      std::string pkl(p, std::get<1>(rec));
      // GLOBAL opcode 'c' + "module\nname\n": a class other than torch's own
      // containers means a pickled Python object (usually a whole nn.Module).
      std::regex global_re("c([A-Za-z_][\\w\\.]*)\\n([A-Za-z_]\\w*)\\n");
      for (std::sregex_iterator it(pkl.begin(), pkl.end(), global_re), end; it != end; ++it) {
        const std::string mod = (*it)[1], cls = (*it)[2];
        if (mod == "collections" || mod == "torch._utils" || mod == "torch" || mod == "builtins" ||
            mod.rfind("torch.storage", 0) == 0 || mod.rfind("torch._tensor", 0) == 0)
          continue;
        if (mod.rfind("__torch__", 0) == 0) {
          // TorchScript's own classes: torch.jit.save writes data.pkl before
          // constants.pkl and code/, so a save that raised or was killed
          // midway leaves this (eval19: a Bloom model whose save failed).
          throw load_error(error_kind::kModelLoad,
                           path + ": is an incomplete TorchScript archive: data.pkl names TorchScript class " + mod +
                               "." + cls +
                               " but constants.pkl and code/ are missing (a torch.jit.save that failed or was "
                               "interrupted); save the model again and check that the save completes");
        }
        what = "a whole nn.Module pickled with torch.save (class " + mod + "." + cls + ")";
        break;
      }
    } catch (const nd::Error&) {
      throw;
    } catch (const std::exception&) {
    }
    throw load_error(error_kind::kModelLoad,
                     path + ": is " + what + ", not a TorchScript model; " + kExportHint);
  }
  if (!has_constants && !reader->hasRecord("code/__torch__.py") && !has_data)
    throw load_error(error_kind::kModelLoad,
                     path + ": is a zip archive but not a TorchScript model (no constants.pkl, code/ or data.pkl); " +
                         kExportHint);
}

// Scripted code compiles Python functions (F.dropout, F.batch_norm, user
// helpers) that show up in inlined call stacks as entries without a module;
// a traced graph records aten ops directly, so only module methods appear.
bool calls_free_function(const torch::jit::Node* n) {
  auto cs = n->callstack();
  if (!cs) return false;
  for (const auto& e : (*cs)->vec())
    if (!std::get<2>(e)) return true;
  return false;
}

bool graph_reads_training(const torch::jit::Block* b, bool& has_control_flow) {
  bool reads = false;
  for (const torch::jit::Node* n : b->nodes()) {
    if (calls_free_function(n)) has_control_flow = true;  // counts as scripted evidence
    if (n->kind() == c10::prim::If || n->kind() == c10::prim::Loop) has_control_flow = true;
    if (n->kind() == c10::prim::GetAttr && n->s(c10::attr::name) == "training") reads = true;
    for (const torch::jit::Block* sb : n->blocks()) reads = graph_reads_training(sb, has_control_flow) || reads;
  }
  return reads;
}

/// Shape arithmetic as scripted code writes it: an aten::size whose int
/// result is read by anything but prim::NumToTensor (`x.shape[0]` compiles
/// to aten::size + aten::__getitem__), or aten::len / aten::dim / prim::dtype
/// / prim::device, which a trace never records (it records sizes as tensors,
/// aten::size -> prim::NumToTensor, and everything else as constants).
/// Returns the op found, "" when none.
std::string scripted_shape_op(const torch::jit::Block* b) {
  for (const torch::jit::Node* n : b->nodes()) {
    const std::string k = n->kind().toQualString();
    if (k == "aten::len" || k == "aten::dim" || k == "prim::dtype" || k == "prim::device") return k;
    if (k == "aten::size")
      for (const torch::jit::Value* o : n->outputs())
        for (const auto& u : o->uses())
          if (u.user->kind() != c10::prim::NumToTensor) return "aten::size read as an integer by " + std::string(u.user->kind().toQualString());
    for (const torch::jit::Block* sb : n->blocks())
      if (auto r = scripted_shape_op(sb); !r.empty()) return r;
  }
  return "";
}

/// Evidence of how a TorchScript module was made, from its module types.
/// torch.jit.script compiles a class's constants (`__constants__`, Final
/// attributes such as nn.Linear's in_features) and its helper methods
/// (Sequential.__len__, Conv2d._conv_forward) into the module type;
/// torch.jit.trace records only forward, with no constants, and names the
/// arguments of submodule forwards it cannot name from a Python variable
/// `argument_1`, `argument_2`, ... (torch/csrc/jit/frontend/tracer.cpp).
struct KindEvidence {
  std::string scripted;  ///< the first scripted sign found, "" if none
  std::string traced;    ///< the first traced sign found, "" if none
};

KindEvidence module_type_evidence(const torch::jit::Module& root) {
  KindEvidence ev;
  static const std::regex traced_arg("^argument_[0-9]+$");
  for (const auto& nm : root.named_modules()) {
    const auto t = nm.value.type();
    const std::string where = nm.name.empty() ? std::string("the root module") : "module '" + nm.name + "'";
    if (ev.scripted.empty() && t->numConstants() > 0)
      ev.scripted = where + " has compiled constants (" + t->getConstantName(0) + ")";
    if (ev.scripted.empty())
      for (const auto* f : t->methods())
        if (f->name() != "forward") {
          ev.scripted = where + " has a compiled method besides forward (" + f->name() + ")";
          break;
        }
    if (ev.traced.empty())
      if (auto fwd = nm.value.find_method("forward")) {
        const auto& args = fwd->function().getSchema().arguments();
        for (size_t i = 1; i < args.size(); ++i)
          if (std::regex_match(args[i].name(), traced_arg)) {
            ev.traced = where + "'s forward takes '" + args[i].name() + "' (an argument named by the tracer)";
            break;
          }
      }
  }
  return ev;
}

int64_t direct_parameter_elements(const torch::jit::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.named_parameters(/*recurse=*/false)) n += p.value.numel();
  return n;
}

}  // namespace

std::string short_class_name(const std::string& qualified) {
  auto pos = qualified.rfind('.');
  return pos == std::string::npos ? qualified : qualified.substr(pos + 1);
}

bool is_norm_kind(const std::string& kind) {
  static const std::regex re("^(BatchNorm[123]d|SyncBatchNorm|LayerNorm|GroupNorm|InstanceNorm[123]d|.*RMSNorm.*|.*LayerNorm.*|.*RmsNorm.*)$");
  return std::regex_match(kind, re);
}

LoadedModel load_model(const std::string& path) {
  // The format comes from the archive's contents, not its extension.
  if (is_pt2_file(path)) return load_pt2_model(path);
  precheck_archive(path);
  register_missing_op_fallbacks();
  apply_kernel_workarounds();
  LoadedModel lm;
  lm.path = path;
  try {
    lm.module = torch::jit::load(path, c10::Device(c10::kCPU));
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (auto op = missing_operator_in(what)) {
      std::string message = missing_operator_message(path, *op);
      if (what.find("Arguments for call are not valid") != std::string::npos)
        message += " (in the form it was saved with: the call's arguments match none of " + *op +
                   "'s signatures in this LibTorch, as when a newer PyTorch added an argument)";
      throw load_error(error_kind::kMissingOperator, message);
    }
    throw load_error(error_kind::kModelLoad,
                     path + ": TorchScript archive could not be loaded: " + what.substr(0, what.find("\nException raised")));
  }
  if (!lm.module.find_method("forward"))
    throw load_error(error_kind::kModelLoad, path + ": TorchScript module has no forward method; " + kExportHint);

  lm.sha256 = sha256_file(path);
  lm.saved_training = lm.module.is_training();

  infer_model_kind(lm);
  describe_forward_and_modules(lm);
  return lm;
}

void infer_model_kind(LoadedModel& lm) {
  auto graph = lm.module.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  bool control_flow = false;
  const bool reads_training = graph_reads_training(graph->block(), control_flow);
  const KindEvidence ev = module_type_evidence(lm.module);
  if (!ev.traced.empty()) {
    // A traced model may call scripted submodules (their flags stay live);
    // its own ops have their training flags baked in.
    lm.kind = "traced";
    lm.kind_reason = ev.traced;
    if (reads_training || control_flow || !ev.scripted.empty())
      lm.kind_reason += "; some submodules were scripted (" +
                        (!ev.scripted.empty() ? ev.scripted
                                              : std::string(reads_training ? "training flags are read"
                                                                           : "control flow or compiled functions")) +
                        ")";
  } else if (reads_training || control_flow) {
    lm.kind = "scripted";
    lm.kind_reason = reads_training ? "forward reads module training flags"
                                    : "forward has control flow or calls compiled Python functions";
  } else if (!ev.scripted.empty()) {
    lm.kind = "scripted";
    lm.kind_reason = ev.scripted + " (a trace records only forward, without constants)";
  } else if (const std::string op = scripted_shape_op(graph->block()); !op.empty()) {
    // Straight-line code without submodules that say how it was made (a
    // hand-written MLP of parameters: eval38 C01 read it as traced).
    lm.kind = "scripted";
    lm.kind_reason = "forward computes with shapes as scripted code does (" + op +
                     "; a trace records sizes as tensors and the rest as constants)";
  } else {
    lm.kind = "traced";
    lm.kind_reason = "forward has no control flow, calls no compiled function and never reads a training flag (a traced graph)";
  }

}

void describe_forward_and_modules(LoadedModel& lm) {
  const auto& schema = lm.module.get_method("forward").function().getSchema();
  for (size_t i = 1; i < schema.arguments().size(); ++i) {
    const auto& a = schema.arguments()[i];
    lm.args.push_back({a.name(), a.type()->annotation_str(), a.default_value().has_value()});
  }
  // A parameter two modules hold (a language model's head tied to its token
  // embedding) is one tensor: the model's total counts it once, as
  // model.parameters() does; each module's own count keeps it.
  // (torch.jit.load gives the two attributes one storage, not one tensor.)
  std::set<std::tuple<const void*, int64_t, int64_t>> counted;  // storage, offset, elements
  for (const auto& nm : lm.module.named_modules()) {
    for (const auto& p : nm.value.named_parameters(/*recurse=*/false)) {
      const void* storage = p.value.has_storage() ? static_cast<const void*>(p.value.storage().unsafeGetStorageImpl())
                                                  : static_cast<const void*>(p.value.unsafeGetTensorImpl());
      if (counted.emplace(storage, p.value.storage_offset(), p.value.numel()).second) lm.parameters += p.value.numel();
    }
    ModuleInfo mi;
    mi.path = nm.name;
    mi.module = nm.value;
    mi.qualified = nm.value.type()->name() ? nm.value.type()->name()->qualifiedName() : "";
    mi.kind = short_class_name(mi.qualified);
    mi.training = nm.value.is_training();
    mi.parameters = direct_parameter_elements(nm.value);
    // A module whose children are only parameter containers
    // (nn.ParameterList / nn.ParameterDict, never called: torchrec's
    // LowRankCrossNet holds its W and V kernels so) computes with them in
    // its own forward: a leaf (eval51 dcn_dense_scale_fault's crossnet was
    // missing from the layer table).
    bool only_parameter_containers = true;
    for (const auto& c : nm.value.children()) {
      const std::string q = c.type()->name() ? c.type()->name()->qualifiedName() : "";
      const std::string k = short_class_name(q);
      if (k != "ParameterList" && k != "ParameterDict") only_parameter_containers = false;
    }
    mi.leaf = only_parameter_containers;
    lm.modules.push_back(std::move(mi));
  }
}

ParamTraining param_training(const torch::jit::Module& m, bool recurse) {
  ParamTraining t;
  for (const auto& p : m.named_parameters(recurse)) {
    t.any = true;
    t.trainable = t.trainable || p.value.requires_grad();
  }
  return t;
}

nlohmann::json module_facts(const ModuleInfo& m) {
  nlohmann::json f = nlohmann::json::object();
  const auto type = m.module.type();
  auto get = [&](const char* name) -> c10::optional<c10::IValue> {
    if (type->hasAttribute(name)) return m.module.attr(name);
    if (type->hasConstant(name)) return type->getConstant(name);
    return c10::nullopt;
  };
  auto put_scalar = [&](const char* name, const char* as) {
    auto v = get(name);
    if (!v) return;
    if (v->isDouble()) f[as] = v->toDouble();
    else if (v->isInt()) f[as] = v->toInt();
    else if (v->isBool()) f[as] = v->toBool();
    else if (v->isNone()) f[as] = nullptr;
    else if (v->isIntList()) f[as] = v->toIntVector();
    else if (v->isTuple()) {
      std::vector<int64_t> xs;
      for (const auto& e : v->toTupleRef().elements())
        if (e.isInt()) xs.push_back(e.toInt());
      f[as] = xs;
    }
  };
  put_scalar("eps", "eps");
  put_scalar("variance_epsilon", "eps");  // Hugging Face RMSNorm
  put_scalar("momentum", "momentum");
  put_scalar("affine", "affine");
  put_scalar("elementwise_affine", "affine");
  put_scalar("track_running_stats", "track_running_stats");
  put_scalar("normalized_shape", "normalized_shape");
  put_scalar("num_groups", "num_groups");
  put_scalar("num_channels", "num_channels");
  put_scalar("num_features", "num_features");
  put_scalar("in_features", "in_features");
  put_scalar("out_features", "out_features");
  put_scalar("in_channels", "in_channels");
  put_scalar("out_channels", "out_channels");
  put_scalar("num_embeddings", "num_embeddings");
  put_scalar("embedding_dim", "embedding_dim");
  put_scalar("p", "p");
  if (type->hasAttribute("running_mean") && type->hasAttribute("running_var")) {
    auto rm = m.module.attr("running_mean");
    auto rv = m.module.attr("running_var");
    if (rm.isTensor() && rv.isTensor()) {
      auto mean = rm.toTensor().to(torch::kDouble);
      auto var = rv.toTensor().to(torch::kDouble);
      nlohmann::json rs;
      rs["channels"] = mean.numel();
      rs["mean_of_running_mean"] = mean.mean().item<double>();
      rs["mean_of_running_var"] = var.mean().item<double>();
      rs["at_initial_values"] = mean.eq(0).all().item<bool>() && var.eq(1).all().item<bool>();
      if (type->hasAttribute("num_batches_tracked")) {
        auto nbt = m.module.attr("num_batches_tracked");
        if (nbt.isTensor()) rs["num_batches_tracked"] = nbt.toTensor().item<int64_t>();
      }
      f["running_stats"] = rs;
    }
  }
  return f;
}

}  // namespace nd
