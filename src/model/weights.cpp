// Checkpoints into a TorchScript module. See weights.h for the contract.
#include "model/weights.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "formats/text.h"
#include "model/batch_file.h"

namespace nd {

namespace {

[[noreturn]] void fail_weights(const std::string& path, const std::string& what) {
  formats::throw_load_error(error_kind::kWeightsLoad, path, what, 8000);
}

const char* const kExpectedCheckpoint =
    "expected a checkpoint: torch.save(model.state_dict()), a dict holding one (Lightning .ckpt, "
    "'model_state_dict', 'model', 'module'), a .safetensors file or a sharded *.index.json";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape_str(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The state_dict of one file (not an index).
Checkpoint read_one(const std::string& path) {
  SavedFile f = read_saved_file(path, error_kind::kWeightsLoad, kExpectedCheckpoint);
  Checkpoint ck;
  ck.path = path;
  ck.format = f.format;
  if (f.format == "safetensors") {
    ck.container = "safetensors";
    ck.tensors = std::move(f.named);
    if (ck.tensors.empty()) fail_weights(path, "safetensors file holds no tensors");
    return ck;
  }
  const formats::StateDictView v = formats::find_state_dict(f.root, path);
  ck.container = v.container;
  ck.skipped = v.skipped;
  for (const auto& t : v.tensors) ck.tensors.emplace_back(t.key, f.tensor(t.ref, "tensor '" + t.key + "'"));
  return ck;
}

Checkpoint read_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_weights(path, "no such file or not readable");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.size() > (64u << 20)) fail_weights(path, "is larger than 64 MiB: not a shard index");
  const auto map = formats::parse_shard_index(text, path);
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::map<std::string, std::vector<std::string>> by_shard;  // shard -> names the index puts there
  for (const auto& [name, shard] : map) by_shard[shard].push_back(name);
  Checkpoint ck;
  ck.path = path;
  ck.container = "sharded (" + std::to_string(by_shard.size()) + " shard files)";
  std::string fmt;
  for (const auto& [shard, names] : by_shard) {
    const std::string sp = (dir / shard).string();
    Checkpoint part = read_one(sp);
    fmt = part.format;
    std::set<std::string> have;
    for (auto& [k, t] : part.tensors) {
      have.insert(k);
      if (map.count(k) && map.at(k) == shard) ck.tensors.emplace_back(k, t);
    }
    for (const auto& n : names)
      if (!have.count(n)) fail_weights(path, "the index puts tensor '" + n + "' in " + shard + ", which does not hold it");
  }
  ck.format = "sharded " + fmt + " (" + std::to_string(by_shard.size()) + " files)";
  return ck;
}

// Running statistics are state the model's behaviour depends on: a missing
// one is an error like a missing parameter.
bool is_running_stat(const std::string& name) {
  for (const char* s : {"running_mean", "running_var", "num_batches_tracked"})
    if (ends_with(name, std::string(".") + s) || name == s) return true;
  return false;
}

constexpr const char* kPrefixes[] = {"module.", "_orig_mod.", "model."};

std::string list(const std::vector<std::string>& names, size_t max = 20) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < max; ++i) s += (i ? ", \"" : "\"") + names[i] + "\"";
  if (names.size() > max) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

// The pickle VM reports as input_load (its contract for batch files): a
// checkpoint's errors are weights_load, with the same message.
template <class F>
auto as_weights_error(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    if (e.kind() == error_kind::kInputLoad) throw load_error(error_kind::kWeightsLoad, e.what());
    throw;
  }
}

}  // namespace

Checkpoint read_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail_weights(path, "no such file");
  if (std::filesystem::is_directory(path, ec))
    fail_weights(path, "is a directory; give the checkpoint file (or its *.index.json when sharded)");
  Checkpoint ck = as_weights_error([&] { return ends_with(path, ".json") ? read_index(path) : read_one(path); });
  ck.step = formats::step_from_name(path);
  return ck;
}

WeightsLoad load_weights(torch::jit::Module& module, const Checkpoint& ck, bool partial, const std::string& model_path) {
  WeightsLoad r;
  r.path = ck.path;
  r.step = ck.step;
  r.format = ck.format;
  r.container = ck.container;
  r.skipped = ck.skipped;
  std::map<std::string, at::Tensor> params, buffers;
  std::vector<std::string> order;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    if (!params.count(p.name)) order.push_back(p.name);
    params[p.name] = p.value;
  }
  for (const auto& b : module.named_buffers(/*recurse=*/true)) {
    if (!b.value.defined()) continue;
    if (!params.count(b.name) && !buffers.count(b.name)) order.push_back(b.name);
    buffers[b.name] = b.value;
  }
  r.module_tensors = static_cast<int64_t>(order.size());
  auto target = [&](const std::string& n) -> at::Tensor* {
    if (auto it = params.find(n); it != params.end()) return &it->second;
    if (auto it = buffers.find(n); it != buffers.end()) return &it->second;
    return nullptr;
  };

  std::vector<std::pair<at::Tensor*, const at::Tensor*>> copies;
  std::set<std::string> filled, mismatched;  // a size mismatch is not also a missing key (as in PyTorch)
  for (const auto& [key, t] : ck.tensors) {
    std::string name = key, stripped;
    while (!target(name)) {
      bool cut = false;
      for (const char* p : kPrefixes) {
        const std::string pre(p);
        if (name.rfind(pre, 0) == 0 && name.size() > pre.size()) {
          name = name.substr(pre.size());
          stripped += pre;
          cut = true;
          break;
        }
      }
      if (!cut) break;
    }
    at::Tensor* dst = target(name);
    if (!dst) {
      r.unexpected.push_back(key);
      continue;
    }
    if (!stripped.empty()) ++r.prefixes[stripped];
    if (filled.count(name)) {
      r.unexpected.push_back(key + " (a second key for " + name + ")");
      continue;
    }
    if (dst->sizes() != t.sizes()) {
      r.mismatched.push_back("size mismatch for " + name + ": copying a param with shape " + shape_str(t.sizes()) +
                             " from checkpoint, the shape in current model is " + shape_str(dst->sizes()));
      mismatched.insert(name);
      continue;
    }
    filled.insert(name);
    copies.push_back({dst, &t});
  }
  // Tied weights: a module tensor the checkpoint lacks that shares storage
  // with one it has (HF drops lm_head.weight when tied to the embedding).
  std::set<const void*> filled_ptrs;
  for (const auto& n : filled) filled_ptrs.insert(target(n)->data_ptr());
  for (const auto& n : order) {
    if (filled.count(n) || mismatched.count(n)) continue;
    at::Tensor* t = target(n);
    if (t->numel() > 0 && filled_ptrs.count(t->data_ptr())) {
      r.tied.push_back(n);
    } else if (!params.count(n) && !is_running_stat(n)) {
      r.kept_buffers.push_back(n);
    } else {
      r.missing.push_back(n);
    }
  }
  if (!partial && (!r.missing.empty() || !r.unexpected.empty() || !r.mismatched.empty())) {
    std::string msg = "error(s) in loading state_dict into " + model_path + " (from " + ck.container + "):";
    if (!r.missing.empty()) msg += "\n  missing key(s) in state_dict: " + list(r.missing);
    if (!r.unexpected.empty()) msg += "\n  unexpected key(s) in state_dict: " + list(r.unexpected);
    size_t shown = 0;
    for (const auto& m : r.mismatched) {
      if (++shown > 20) {
        msg += "\n  ... (" + std::to_string(r.mismatched.size()) + " size mismatches in all)";
        break;
      }
      msg += "\n  " + m;
    }
    msg += "\n  --weights-partial loads the " + std::to_string(copies.size()) + " tensors that match and lists the rest";
    fail_weights(ck.path, msg);
  }
  if (copies.empty())
    fail_weights(ck.path, "no tensor of the checkpoint matches a parameter or buffer of " + model_path + " (checkpoint keys: " +
                      list(r.unexpected, 5) + "; model: " + list(order, 5) + ")");
  torch::NoGradGuard ng;
  for (auto& [dst, src] : copies) {
    if (src->scalar_type() != dst->scalar_type())
      ++r.conversions[std::string(c10::toString(src->scalar_type())) + " -> " + c10::toString(dst->scalar_type())];
    dst->detach().copy_(*src);
    ++r.loaded;
  }
  return r;
}

nlohmann::json WeightsLoad::to_json() const {
  nlohmann::json j = {{"path", path},           {"step", step ? nlohmann::json(*step) : nlohmann::json()},
                      {"format", format},       {"container", container},
                      {"loaded", loaded},       {"module_tensors", module_tensors},
                      {"missing", missing},     {"unexpected", unexpected},
                      {"mismatched", mismatched}, {"tied", tied},
                      {"kept_buffers", kept_buffers}, {"skipped", skipped}};
  j["prefixes_stripped"] = prefixes;
  j["dtype_conversions"] = conversions;
  return j;
}

std::vector<std::string> WeightsLoad::sentences() const {
  std::vector<std::string> s;
  for (const auto& [conv, n] : conversions)
    s.push_back(path + ": " + std::to_string(n) + " tensors converted " + conv + " to match the model's dtypes");
  for (const auto& [pre, n] : prefixes)
    s.push_back(path + ": prefix '" + pre + "' removed from " + std::to_string(n) + " keys" +
                (pre.find("module.") != std::string::npos ? " (DistributedDataParallel)" : "") +
                (pre.find("_orig_mod.") != std::string::npos ? " (torch.compile)" : ""));
  if (!kept_buffers.empty())
    s.push_back(path + ": " + std::to_string(kept_buffers.size()) + " buffers not in the checkpoint keep the model file's values (" +
                list(kept_buffers, 5) + ")");
  if (!tied.empty()) s.push_back(path + ": tied weights filled through the tensor they share: " + list(tied, 5));
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty())
    s.push_back(path + ": --weights-partial loaded " + std::to_string(loaded) + " of " + std::to_string(module_tensors) +
                " tensors; " + std::to_string(missing.size()) + " missing keep the model file's values, " +
                std::to_string(unexpected.size()) + " unexpected and " + std::to_string(mismatched.size()) +
                " mismatched were not loaded");
  return s;
}

OptimizerState read_optimizer_state(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail_weights(path, "no such file");
  SavedFile f = as_weights_error([&] {
    return read_saved_file(path, error_kind::kWeightsLoad,
                           "expected torch.save(optimizer.state_dict()) of Adam, AdamW or SGD");
  });
  if (f.format != "torch.save") fail_weights(path, "is a safetensors file; an optimizer state_dict is saved with torch.save");
  OptimizerState o;
  o.path = path;
  o.dict = formats::find_optimizer_state(f.root, path);
  for (const auto& ps : o.dict.state) {
    for (const auto& [name, ref] : ps.tensors) {
      at::Tensor t = f.tensor(ref, "state[" + std::to_string(ps.index) + "]['" + name + "']");
      if (name == "step") {
        if (t.numel() != 1) fail_weights(path, "state[" + std::to_string(ps.index) + "]['step'] is not a scalar");
        o.step[ps.index] = t.to(at::kDouble).item<double>();
      } else {
        o.tensors[ps.index][name] = t;
      }
    }
    if (auto it = ps.numbers.find("step"); it != ps.numbers.end()) o.step[ps.index] = it->second;
  }
  return o;
}

}  // namespace nd
