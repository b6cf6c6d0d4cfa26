// Checkpoint structure without LibTorch. See checkpoint.h for the contract.
#include "formats/checkpoint.h"

#include <glob.h>

#include <algorithm>
#include <cctype>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/text.h"

namespace nd::formats {

namespace {

using K = PickleValue::Kind;

[[noreturn]] void fail_checkpoint(std::string_view source, const std::string& what) { throw_load_error(error_kind::kWeightsLoad, source, what); }

const PickleValue* dict_get(const PickleValue& d, std::string_view key) {
  if (d.kind != K::kDict) return nullptr;
  for (std::size_t i = 0; i < d.keys.size() && i < d.items.size(); ++i)
    if (d.keys[i].kind == K::kString && d.keys[i].str == key) return &d.items[i];
  return nullptr;
}

std::string key_list(const PickleValue& d, std::size_t max = 8) {
  std::string s;
  for (std::size_t i = 0; i < d.keys.size() && i < max; ++i) {
    if (i) s += ", ";
    const PickleValue& k = d.keys[i];
    s += k.kind == K::kString ? "'" + k.str + "'" : k.kind == K::kInt ? std::to_string(k.integer)
                                                                       : std::string(pickle_kind_name(k.kind));
  }
  if (d.keys.size() > max) s += ", ... (" + std::to_string(d.keys.size()) + " keys)";
  return s;
}

std::size_t tensor_values(const PickleValue& d) {
  std::size_t n = 0;
  for (const auto& v : d.items) n += v.kind == K::kTensor ? 1 : 0;
  return n;
}

bool has_container_value(const PickleValue& d) {
  for (const auto& v : d.items)
    if (v.kind == K::kDict || v.kind == K::kList || v.kind == K::kTuple) return true;
  return false;
}

// A state_dict: str keys, tensors, no nested containers.
bool is_state_dict(const PickleValue& d) {
  return d.kind == K::kDict && tensor_values(d) > 0 && !has_container_value(d);
}

constexpr const char* kWrapperKeys[] = {"state_dict", "model_state_dict", "model", "module"};

const PickleValue* find_in(const PickleValue& d, int depth, std::string& where) {
  if (is_state_dict(d)) return &d;
  if (d.kind != K::kDict || depth >= 3) return nullptr;
  for (const char* key : kWrapperKeys) {
    const PickleValue* v = dict_get(d, key);
    if (!v || v->kind != K::kDict) continue;
    std::string sub;
    if (const PickleValue* r = find_in(*v, depth + 1, sub)) {
      where = "dict['" + std::string(key) + "']" + sub;
      return r;
    }
  }
  return nullptr;
}

bool is_lightning(const PickleValue& root) {
  return dict_get(root, "pytorch-lightning_version") != nullptr || dict_get(root, "lightning_version") != nullptr ||
         (dict_get(root, "state_dict") && dict_get(root, "global_step") && dict_get(root, "epoch"));
}

std::optional<double> as_number(const PickleValue& v) {
  if (v.kind == K::kFloat) return v.floating;
  if (v.kind == K::kInt) return static_cast<double>(v.integer);
  if (v.kind == K::kBool) return v.boolean ? 1.0 : 0.0;
  return std::nullopt;
}

bool is_optimizer_state(const PickleValue& d) {
  const PickleValue* st = dict_get(d, "state");
  const PickleValue* pg = dict_get(d, "param_groups");
  return st && pg && st->kind == K::kDict && pg->kind == K::kList;
}

}  // namespace

StateDictView find_state_dict(const PickleValue& root, std::string_view source) {
  if (root.kind != K::kDict) {
    fail_checkpoint(source, std::string("holds a ") + pickle_kind_name(root.kind) +
                     ", not a state_dict (expected a dict of parameter name -> tensor saved with "
                     "torch.save(model.state_dict()), or a checkpoint dict holding one under 'state_dict', "
                     "'model_state_dict', 'model' or 'module')");
  }
  StateDictView out;
  std::string where;
  const PickleValue* sd = find_in(root, 0, where);
  if (!sd) {
    if (is_optimizer_state(root)) {
      fail_checkpoint(source, "is an optimizer state_dict ('state' and 'param_groups'), not model weights; give it with "
                   "--optimizer-state");
    }
    fail_checkpoint(source, "holds no state_dict: a dict with keys " + key_list(root) +
                     " and no str -> tensor dict at the root or under 'state_dict', 'model_state_dict', 'model' "
                     "or 'module'");
  }
  if (sd == &root) {
    out.container = "the file's root (a state_dict)";
  } else {
    out.container = where + (where == "dict['state_dict']" && is_lightning(root) ? " (Lightning checkpoint)" : "");
    for (const auto& k : root.keys)
      if (k.kind == K::kString) out.wrapper_keys.push_back(k.str);
  }
  for (std::size_t i = 0; i < sd->keys.size() && i < sd->items.size(); ++i) {
    const PickleValue& k = sd->keys[i];
    if (k.kind != K::kString) {
      fail_checkpoint(source, "state_dict key " + std::to_string(i) + " is a " + pickle_kind_name(k.kind) +
                       ", not a parameter name (str)");
    }
    const PickleValue& v = sd->items[i];
    if (v.kind == K::kTensor) {
      out.tensors.push_back({k.str, v.tensor});
    } else {
      out.skipped.push_back(k.str + " (" + pickle_kind_name(v.kind) + ")");
    }
  }
  return out;
}

OptimizerStateDict find_optimizer_state(const PickleValue& root, std::string_view source) {
  OptimizerStateDict out;
  const PickleValue* d = nullptr;
  if (is_optimizer_state(root)) {
    d = &root;
    out.container = "the file's root";
  } else if (root.kind == K::kDict) {
    for (const char* key : {"optimizer", "optimizer_state_dict", "optim", "optimizer_state"}) {
      const PickleValue* v = dict_get(root, key);
      if (v && is_optimizer_state(*v)) {
        d = v;
        out.container = "dict['" + std::string(key) + "']";
        break;
      }
    }
    if (!d) {
      const PickleValue* v = dict_get(root, "optimizer_states");
      if (v && (v->kind == K::kList || v->kind == K::kTuple) && !v->items.empty() && is_optimizer_state(v->items[0])) {
        d = &v->items[0];
        out.container = "dict['optimizer_states'][0] (Lightning checkpoint)";
      }
    }
  }
  if (!d) {
    if (root.kind == K::kDict && is_state_dict(root))
      fail_checkpoint(source, "is a model state_dict, not an optimizer state_dict; give it with --weights");
    fail_checkpoint(source, std::string("holds no optimizer state_dict (expected torch.save(optimizer.state_dict()): a dict with "
                             "'state' and 'param_groups', or a checkpoint holding one under 'optimizer', "
                             "'optimizer_state_dict' or 'optimizer_states'); found a ") +
                     pickle_kind_name(root.kind) + (root.kind == K::kDict ? " with keys " + key_list(root) : ""));
  }
  const PickleValue& groups = *dict_get(*d, "param_groups");
  for (std::size_t gi = 0; gi < groups.items.size(); ++gi) {
    const PickleValue& g = groups.items[gi];
    const std::string gw = "param_groups[" + std::to_string(gi) + "]";
    if (g.kind != K::kDict) fail_checkpoint(source, gw + " is a " + pickle_kind_name(g.kind) + ", not a dict");
    OptimizerGroup og;
    for (std::size_t i = 0; i < g.keys.size() && i < g.items.size(); ++i) {
      if (g.keys[i].kind != K::kString) continue;
      const std::string& name = g.keys[i].str;
      const PickleValue& v = g.items[i];
      if (name == "params") {
        if (v.kind != K::kList && v.kind != K::kTuple) fail_checkpoint(source, gw + "['params'] is not a list");
        for (const auto& p : v.items) {
          if (p.kind != K::kInt || p.integer < 0)
            fail_checkpoint(source, gw + "['params'] holds a " + std::string(pickle_kind_name(p.kind)) +
                             ", not a parameter index (int >= 0)");
          og.params.push_back(p.integer);
        }
      } else if (name == "betas") {
        if ((v.kind == K::kTuple || v.kind == K::kList) && v.items.size() == 2) {
          og.beta1 = as_number(v.items[0]);
          og.beta2 = as_number(v.items[1]);
        }
        if (!og.beta1 || !og.beta2) fail_checkpoint(source, gw + "['betas'] is not a pair of numbers");
      } else if (v.kind == K::kBool) {
        og.flags[name] = v.boolean;
      } else if (auto x = as_number(v)) {
        og.numbers[name] = *x;
      } else if (v.kind == K::kTensor && v.tensor.sizes.empty()) {
        // lr as a 0-d tensor (capturable schedulers): not read, the report says so
        og.flags[name + "_is_tensor"] = true;
      }
    }
    out.groups.push_back(std::move(og));
  }
  const PickleValue& state = *dict_get(*d, "state");
  bool adam = false, momentum = false, other = false;
  for (std::size_t i = 0; i < state.keys.size() && i < state.items.size(); ++i) {
    const PickleValue& k = state.keys[i];
    if (k.kind != K::kInt || k.integer < 0)
      fail_checkpoint(source, "optimizer 'state' key " + std::to_string(i) + " is a " + pickle_kind_name(k.kind) +
                       ", not a parameter index (int >= 0)");
    const PickleValue& v = state.items[i];
    if (v.kind != K::kDict)
      fail_checkpoint(source, "optimizer state of parameter " + std::to_string(k.integer) + " is a " + pickle_kind_name(v.kind) +
                       ", not a dict");
    OptimizerParamState ps;
    ps.index = k.integer;
    for (std::size_t j = 0; j < v.keys.size() && j < v.items.size(); ++j) {
      if (v.keys[j].kind != K::kString) continue;
      const std::string& name = v.keys[j].str;
      if (v.items[j].kind == K::kTensor) ps.tensors[name] = v.items[j].tensor;
      else if (auto x = as_number(v.items[j])) ps.numbers[name] = *x;
    }
    if (ps.tensors.count("exp_avg") && ps.tensors.count("exp_avg_sq")) adam = true;
    else if (ps.tensors.count("momentum_buffer")) momentum = true;
    else other = true;
    out.state.push_back(std::move(ps));
  }
  std::sort(out.state.begin(), out.state.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  for (std::size_t i = 1; i < out.state.size(); ++i)
    if (out.state[i].index == out.state[i - 1].index)
      fail_checkpoint(source, "optimizer 'state' holds parameter " + std::to_string(out.state[i].index) + " twice");
  out.kind = out.state.empty() ? "stateless" : (adam && !momentum && !other) ? "adam"
                                           : (momentum && !adam && !other) ? "sgd_momentum"
                                                                           : "unknown";
  return out;
}

std::map<std::string, std::string> parse_shard_index(std::string_view text, std::string_view source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    fail_checkpoint(source, std::string("is not valid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail_checkpoint(source, "is not a sharded checkpoint index: no \"weight_map\" object");
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) fail_checkpoint(source, "weight_map entry '" + name + "' is not a file name (string)");
    const std::string f = file.get<std::string>();
    if (f.empty() || f.front() == '/' || f.find("..") != std::string::npos || f.find('\\') != std::string::npos)
      fail_checkpoint(source, "weight_map entry '" + name + "' names '" + f + "', outside the index's folder");
    out[name] = f;
  }
  if (out.empty()) fail_checkpoint(source, "weight_map is empty: the index names no tensors");
  return out;
}

std::optional<int64_t> step_from_name(std::string_view path) {
  std::string name(path);
  if (auto slash = name.find_last_of('/'); slash != std::string::npos) name = name.substr(slash + 1);
  // The stem: cut known extensions (".pt", ".ckpt", ".safetensors", ".bin", ".pth", ".index.json").
  for (const char* ext : {".index.json", ".safetensors", ".ckpt", ".pth", ".pt", ".bin", ".tar"}) {
    const std::string e(ext);
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) {
      name.resize(name.size() - e.size());
      break;
    }
  }
  auto number_at = [&](std::size_t i) -> std::optional<int64_t> {
    int64_t v = 0;
    std::size_t n = 0;
    while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return std::nullopt;
      v = v * 10 + (name[i] - '0');
      ++i;
      ++n;
    }
    if (n == 0) return std::nullopt;
    return v;
  };
  std::string lower = name;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // "step" followed by separators, then digits.
  for (std::size_t at = lower.rfind("step"); at != std::string::npos; at = at ? lower.rfind("step", at - 1) : std::string::npos) {
    std::size_t i = at + 4;
    while (i < name.size() && (name[i] == '_' || name[i] == '-' || name[i] == '=' || name[i] == '.')) ++i;
    if (auto v = number_at(i)) return v;
    if (at == 0) break;
  }
  // The run of digits that ends the stem, after a separator or a word that
  // names a step ("checkpoint-500", "iter_0300", "ckpt1000", "epoch5"): not
  // digits inside a name ("resnet18_weights", "c03_frozenbn_fault.ckpt",
  // eval35 C03 was given step 3).
  std::size_t end = name.size();
  if (end == 0 || !std::isdigit(static_cast<unsigned char>(name[end - 1]))) return std::nullopt;
  std::size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
  if (begin > 0 && std::isalpha(static_cast<unsigned char>(name[begin - 1]))) {
    bool named = false;
    for (const char* w : {"checkpoint", "ckpt", "epoch", "iter", "it"}) {
      const std::string ws(w);
      named = named || (begin >= ws.size() && lower.compare(begin - ws.size(), ws.size(), ws) == 0 &&
                        (begin == ws.size() || !std::isalpha(static_cast<unsigned char>(name[begin - ws.size() - 1]))));
    }
    if (!named) return std::nullopt;
  }
  return number_at(begin);
}

std::vector<std::string> expand_weight_paths(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    if (a.find_first_of("*?[") == std::string::npos) {
      out.push_back(a);
      continue;
    }
    glob_t g{};
    const int rc = ::glob(a.c_str(), 0, nullptr, &g);
    std::vector<std::string> found;
    if (rc == 0)
      for (std::size_t i = 0; i < g.gl_pathc; ++i) found.emplace_back(g.gl_pathv[i]);
    ::globfree(&g);
    if (found.empty())
      throw load_error(error_kind::kWeightsLoad, printable("--weights '" + a + "': no file matches the pattern"));
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

std::vector<std::string> order_by_step(const std::vector<std::string>& paths) {
  std::vector<std::pair<int64_t, std::string>> keyed;
  for (const auto& p : paths) {
    auto s = step_from_name(p);
    if (!s) return paths;
    keyed.push_back({*s, p});
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (auto& [s, p] : keyed) out.push_back(p);
  return out;
}

}  // namespace nd::formats
