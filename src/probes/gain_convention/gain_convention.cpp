// Norm-gain convention: does a LayerNorm/RMSNorm module multiply its
// normalized output by `weight` (PyTorch, Llama) or by `1 + weight` (Gemma,
// some T5/Mamba ports), and do the gains loaded from the checkpoint
// (--weights) look stored for the other formula? Without --weights the
// model file's own gains are read (norm.gain_from_checkpoint false): only
// gains of exactly 1 in a 1 + weight norm are judged there (CKPT003, the
// ones-initialization of a weight-style norm: transformers#40224).
//
// The formula is found by what the module computes, not by its class name:
// run it alone on a seeded input with weight = 0 and with weight = 1 (bias,
// if any, = 0). Output 0 at weight 0: it multiplies by weight. Output at
// weight 1 twice the output at weight 0: it multiplies by 1 + weight.
// Anything else: not judged. The module's tensors are restored afterwards.
//
// Judged facts (docs/metrics.md "Norm-gain convention"), for rules CKPT001
// and CKPT002: gains stored for 1 + weight are centred near 0 with both signs
// (Gemma's initialization is zeros); trained gains for `weight` are centred
// near 1 and almost never negative (a negative gain flips a feature), though
// some trained layers do have small positive gains (early input norms of
// Llama-2), which is why the sign mix is part of the evidence.
#include <cmath>

#include "core/error.h"
#include "probes/gain_convention/gain_convention.h"
#include "probes/session.h"

namespace nd {

namespace {

bool normalizes_last_dim(const std::string& kind) {
  return kind.find("LayerNorm") != std::string::npos || kind.find("RMSNorm") != std::string::npos ||
         kind.find("RmsNorm") != std::string::npos;
}

}  // namespace

void probe_gain_convention(Session& s) {
  const bool from_checkpoint = !s.opt.weights.empty();
  at::NoGradGuard ng;
  for (const auto& mi : s.model.modules) {
    if (!normalizes_last_dim(mi.kind) || !mi.module.hasattr("weight")) continue;
    const c10::IValue wv = mi.module.attr("weight");
    if (!wv.isTensor() || !wv.toTensor().defined() || wv.toTensor().dim() != 1 || wv.toTensor().numel() < 2) continue;
    at::Tensor w = wv.toTensor();
    at::Tensor b;
    if (mi.module.hasattr("bias")) {
      const c10::IValue bv = mi.module.attr("bias");
      if (bv.isTensor() && bv.toTensor().defined() && bv.toTensor().sizes() == w.sizes()) b = bv.toTensor();
    }
    const at::Tensor w_saved = w.detach().clone();
    const at::Tensor b_saved = b.defined() ? b.detach().clone() : at::Tensor();
    // A norm that writes its buffers when called (a running statistic) must
    // not keep what the seeded input left there: every later pass reads them.
    std::vector<std::pair<at::Tensor, at::Tensor>> buffers;
    for (const auto& nb : mi.module.named_buffers(/*recurse=*/true))
      if (nb.value.defined()) buffers.push_back({nb.value, nb.value.detach().clone()});
    std::string formula;
    torch::jit::Module m = mi.module;
    const bool sub_mode = m.is_training();
    try {
      at::Generator gen = at::detail::createCPUGenerator(s.opt.seed + 11);
      const at::Tensor x = at::randn({4, w.numel()}, gen, at::TensorOptions().dtype(at::kFloat)).to(w.dtype()).to(w.device());
      m.eval();
      if (b.defined()) b.detach().zero_();
      w.detach().fill_(0);
      const c10::IValue y0v = m.forward({x});
      w.detach().fill_(1);
      const c10::IValue y1v = m.forward({x});
      // The normalized output: the one tensor of x's shape that the weight
      // changes. A traced norm can return more (HF Gemma's decoder layers
      // traced: (hidden_states, x), the upcast input the residual reads;
      // eval19), a scripted one returns one tensor.
      const std::vector<at::Tensor> o0 = Session::output_tensors(y0v), o1 = Session::output_tensors(y1v);
      at::Tensor y0t, y1t;
      int candidates = 0;
      for (size_t i = 0; o0.size() == o1.size() && i < o0.size(); ++i)
        if (o0[i].defined() && o1[i].defined() && o0[i].sizes() == x.sizes() && o1[i].sizes() == x.sizes() &&
            o0[i].is_floating_point() && !o0[i].to(at::kDouble).equal(o1[i].to(at::kDouble))) {
          y0t = o0[i];
          y1t = o1[i];
          ++candidates;
        }
      if (candidates == 1) {
        const at::Tensor y0 = y0t.to(at::kDouble), y1 = y1t.to(at::kDouble);
        const double n0 = y0.norm().item<double>(), n1 = y1.norm().item<double>();
        if (n1 > 0 && std::isfinite(n1) && n0 <= 1e-6 * n1) formula = "weight";
        else if (n1 > 0 && std::isfinite(n1) && (y1 - 2 * y0).norm().item<double>() <= 1e-4 * n1) formula = "1 + weight";
      }
    } catch (const std::exception&) {
      formula.clear();  // a module that does not run alone on [4, C]: not judged
    }
    m.train(sub_mode);
    w.detach().copy_(w_saved);
    if (b.defined()) b.detach().copy_(b_saved);
    for (auto& [live, copy] : buffers) live.detach().copy_(copy);
    if (formula.empty()) continue;
    LayerMetrics* lm = s.doc.find_layer(mi.path);
    if (!lm) continue;
    const at::Tensor g = w_saved.to(at::kDouble);
    if (!at::isfinite(g).all().item<bool>()) continue;  // a diverged checkpoint: nothing to judge
    auto& mm = lm->metrics;
    mm["norm.gain_formula"] = formula;
    mm["norm.gain_from_checkpoint"] = from_checkpoint;
    mm["norm.gain_loaded_mean"] = g.mean().item<double>();
    mm["norm.gain_loaded_std"] = g.std().item<double>();
    mm["norm.gain_loaded_absmean"] = g.abs().mean().item<double>();
    mm["norm.gain_negative_fraction"] = (g < 0).to(at::kDouble).mean().item<double>();
    mm["norm.gain_effective_mean"] = (formula == "weight" ? g : g + 1).mean().item<double>();
  }
}

const std::vector<std::string>& gain_convention_writes() {
  static const std::vector<std::string> names = {
      "norm.gain_effective_mean", "norm.gain_formula", "norm.gain_from_checkpoint", "norm.gain_loaded_absmean", "norm.gain_loaded_mean",
      "norm.gain_loaded_std", "norm.gain_negative_fraction"};
  return names;
}

}  // namespace nd
