// --optimizer-state: the optimizer's saved state mapped onto the module, and
// Adam's next step from it (session.h documents both). The update ratio and
// the replay (training.cpp) use them; the Adam probe here writes the
// adam-second-moment-lag metrics (docs/metrics.md "Optimizer state").
#include <cmath>
#include <set>

#include "core/error.h"
#include "model/weights.h"
#include "probes/training/training.h"
#include "probes/session.h"

namespace nd {

namespace {

std::string shape_str(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

void load_optimizer_state(Session& s) {
  if (s.opt.optimizer_state.empty()) return;
  if (s.progress) s.progress("load", "optimizer state");
  OptimizerState os = read_optimizer_state(s.opt.optimizer_state);
  const std::string& path = s.opt.optimizer_state;

  // A state normdoctor cannot read as Adam's or SGD's (Adafactor's factored
  // exp_avg_sq_row/exp_avg_sq_col, Adagrad's sum, RMSprop's square_avg,
  // Lion's exp_avg alone): a well-formed file of an optimizer the update and
  // Adam checks do not model. The rest of the check runs without it; the
  // probe is listed among those that could not run (text, SARIF
  // notification, JUnit skipped) and the exit code is the findings'.
  if (os.dict.kind == "unknown") {
    std::set<std::string> keys;
    for (const auto& st : os.dict.state) {
      for (const auto& kv : st.tensors) keys.insert(kv.first);
      for (const auto& kv : st.numbers) keys.insert(kv.first);
    }
    std::string names;
    for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
    const std::string msg = path + ": its per-parameter state (" + names +
                            ") is neither Adam's (exp_avg, exp_avg_sq) nor SGD's momentum_buffer; the checks that read "
                            "an optimizer state (ADAM001, ADAM002, the saved learning rate, the replay from the "
                            "saved state) ran without it";
    s.doc.probes["optimizer_state"] = {{"status", "error"},
                                       {"pass", "none"},
                                       {"error", {{"kind", error_kind::kWeightsLoad}, {"message", msg}}},
                                       {"path", path},
                                       {"container", os.dict.container},
                                       {"kind", "unknown"},
                                       {"state_keys", keys},
                                       {"params_with_state", os.dict.state.size()}};
    s.doc.assumptions.push_back("--optimizer-state " + path + " holds state of an optimizer that is neither Adam nor SGD (" +
                                names + "); it was not used");
    return;
  }

  // model.parameters() order: named_modules() pre-order, each module's own
  // parameters, a tensor shared by two modules once (PyTorch removes duplicates).
  std::vector<std::pair<std::string, at::Tensor>> params;
  std::set<const void*> seen;
  for (const auto& mi : s.model.modules)
    for (const auto& p : mi.module.named_parameters(/*recurse=*/false))
      if (seen.insert(p.value.unsafeGetTensorImpl()).second)
        params.push_back({mi.path.empty() ? p.name : mi.path + "." + p.name, p.value});

  std::vector<std::string> problems;
  std::map<int64_t, size_t> group_of;
  size_t n_indices = 0;
  for (size_t gi = 0; gi < os.dict.groups.size(); ++gi)
    for (int64_t idx : os.dict.groups[gi].params) {
      group_of[idx] = gi;
      ++n_indices;
    }
  // Which model parameter each optimizer index is. The state_dict numbers
  // parameters in param_groups order; an optimizer over model.parameters()
  // is that order. Fine-tuning recipes pass filtered lists instead (weight
  // decay off for biases and norms, only the trainable parameters of a
  // frozen backbone or LoRA adapters): each group is then a subsequence of
  // model.parameters() in model order, recovered by matching each index, in
  // order, to the next model parameter of its state tensors' shape.
  auto state_shape = [&](int64_t idx) -> std::optional<std::vector<int64_t>> {
    if (auto it = os.tensors.find(idx); it != os.tensors.end())
      for (const auto& [name, t] : it->second)
        if (name == "exp_avg" || name == "exp_avg_sq" || name == "momentum_buffer") return t.sizes().vec();
    return std::nullopt;
  };
  std::map<int64_t, size_t> param_of;  // optimizer index -> position in params
  bool identity = n_indices == params.size();
  for (const auto& [idx, gi] : group_of) {
    (void)gi;
    if (idx < 0 || static_cast<size_t>(idx) >= params.size()) identity = false;
    else if (auto sh = state_shape(idx); sh && *sh != params[static_cast<size_t>(idx)].second.sizes().vec()) identity = false;
  }
  std::string mapping = "model.parameters() order";
  if (identity) {
    for (const auto& [idx, gi] : group_of) param_of[idx] = static_cast<size_t>(idx);
  } else {
    std::vector<bool> taken(params.size(), false);
    bool ok = true;
    size_t unchecked = 0;
    for (const auto& g : os.dict.groups) {
      size_t at = 0;
      for (int64_t idx : g.params) {
        const auto sh = state_shape(idx);
        if (!sh) ++unchecked;
        while (at < params.size() &&
               (taken[at] || (sh && *sh != params[at].second.sizes().vec()) || (!sh && !params[at].second.requires_grad())))
          ++at;
        if (at == params.size()) {
          ok = false;
          break;
        }
        taken[at] = true;
        param_of[idx] = at++;
      }
      if (!ok) break;
    }
    if (ok && !param_of.empty()) {
      mapping = "param_groups in order, each a subsequence of model.parameters() matched by the shapes of its state (" +
                std::to_string(param_of.size()) + " of the model's " + std::to_string(params.size()) + " parameters" +
                (unchecked ? ", " + std::to_string(unchecked) + " without state placed by order alone" : std::string()) + ")";
      s.doc.assumptions.push_back("the optimizer state's " + std::to_string(param_of.size()) +
                                  " parameters were matched to the model's " + std::to_string(params.size()) +
                                  " by param_groups order, model order and shape (an optimizer built from filtered "
                                  "parameter lists); the model's other parameters are not in this optimizer");
    } else {
      param_of.clear();
      problems.push_back("its param_groups hold " + std::to_string(n_indices) + " parameters, the model " +
                         std::to_string(params.size()) +
                         " (model.parameters() order), and no subsequence of model.parameters() in model order has "
                         "the shapes of its state");
    }
  }
  SavedOptimizer so;
  so.path = path;
  so.kind = os.dict.kind;
  so.decoupled = s.opt.optimizer == "adamw";
  for (const auto& g : os.dict.groups)
    if (auto it = g.flags.find("decoupled_weight_decay"); it != g.flags.end() && it->second) so.decoupled = true;
  for (const auto& [idx, gi] : group_of) {
    auto pos = param_of.find(idx);
    if (pos == param_of.end()) continue;  // no mapping: reported above
    const auto& [pname, p] = params[pos->second];
    const formats::OptimizerGroup& g = os.dict.groups[gi];
    SavedParamState st;
    st.path = pname;
    st.index = idx;
    auto num = [&](const char* k, double def) {
      auto it = g.numbers.find(k);
      return it == g.numbers.end() ? def : it->second;
    };
    st.lr = num("lr", 0);
    if (auto it = g.numbers.find("initial_lr"); it != g.numbers.end()) st.initial_lr = it->second;
    st.eps = num("eps", 1e-8);
    st.weight_decay = num("weight_decay", 0);
    st.momentum = num("momentum", 0);
    st.dampening = num("dampening", 0);
    if (auto it = g.flags.find("nesterov"); it != g.flags.end()) st.nesterov = it->second;
    if (g.beta1) st.beta1 = *g.beta1;
    if (g.beta2) st.beta2 = *g.beta2;
    if (auto it = os.step.find(idx); it != os.step.end()) st.step = it->second;
    if (auto it = os.tensors.find(idx); it != os.tensors.end()) {
      for (const auto& [name, t] : it->second) {
        if (name != "exp_avg" && name != "exp_avg_sq" && name != "momentum_buffer") continue;
        if (t.sizes() != p.sizes()) {
          problems.push_back("state[" + std::to_string(idx) + "]['" + name + "'] has shape " + shape_str(t.sizes()) +
                             ", parameter " + std::to_string(idx) + " (" + pname + ") is " + shape_str(p.sizes()));
          continue;
        }
        at::Tensor v = t.to(at::kFloat).to(p.device());
        if (name == "exp_avg") st.exp_avg = v;
        else if (name == "exp_avg_sq") st.exp_avg_sq = v;
        else st.momentum_buffer = v;
      }
    }
    so.by_param[p.unsafeGetTensorImpl()] = std::move(st);
  }
  if (!problems.empty()) {
    std::string msg = "the optimizer state does not match " + s.model.path + ":";
    for (size_t i = 0; i < problems.size() && i < 20; ++i) msg += "\n  " + problems[i];
    if (problems.size() > 20) msg += "\n  ... (" + std::to_string(problems.size()) + " problems in all)";
    msg += "\n  (indices are matched to model.parameters() in order, or each param group to a subsequence of "
           "model.parameters() by the shapes of its state; a reordered parameter list cannot be mapped)";
    throw load_error(error_kind::kWeightsLoad, path + ": " + msg);
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : os.dict.groups) {
    nlohmann::json jg = {{"params", g.params.size()}};
    for (const auto& [k, v] : g.numbers) jg[k] = v;
    if (g.beta1) jg["betas"] = {*g.beta1, *g.beta2};
    groups.push_back(jg);
  }
  s.doc.probes["optimizer_state"] = {{"path", path},           {"container", os.dict.container}, {"mapping", mapping},
                                     {"kind", so.kind},        {"decoupled_weight_decay", so.decoupled},
                                     {"param_groups", groups}, {"params_with_state", os.dict.state.size()},
                                     {"model_params", params.size()}};
  s.optimizer = std::move(so);
}

AdamStep adam_step(const SavedParamState& st, const at::Tensor& m0, const at::Tensor& v0, double step,
                   const at::Tensor& w, const at::Tensor& g0, double lr, bool decoupled) {
  at::NoGradGuard ng;
  const at::Tensor wd = w.detach().to(at::kFloat);
  at::Tensor g = g0.detach().to(at::kFloat);
  if (!decoupled && st.weight_decay != 0) g = g + st.weight_decay * wd;
  AdamStep r;
  const at::Tensor m = m0.defined() ? m0 : at::zeros_like(g);
  const at::Tensor v = v0.defined() ? v0 : at::zeros_like(g);
  r.m = m * st.beta1 + g * (1 - st.beta1);
  r.v = v * st.beta2 + g * g * (1 - st.beta2);
  const double t = step + 1;
  const at::Tensor mh = r.m / (1 - std::pow(st.beta1, t));
  const at::Tensor vh = r.v / (1 - std::pow(st.beta2, t));
  const at::Tensor denom = vh.sqrt();
  r.update = lr * mh / (denom + st.eps);
  if (decoupled && st.weight_decay != 0) r.update = r.update + lr * st.weight_decay * wd;
  const at::Tensor ok = vh > 0;
  const int64_t n = ok.sum().item<int64_t>();
  r.rms_ratio = n > 0 ? std::sqrt((g * g / vh).masked_select(ok).to(at::kDouble).mean().item<double>()) : 0.0;
  // Over the elements with a second moment: where v_hat is exactly 0 the
  // element has never had a gradient (a depthwise tap that only ever sees
  // zero padding, an unused embedding row); eps there changes nothing.
  r.eps_fraction = n > 0 ? static_cast<double>(((denom < st.eps) & ok).sum().item<int64_t>()) / static_cast<double>(n) : 0.0;
  return r;
}

}  // namespace nd
