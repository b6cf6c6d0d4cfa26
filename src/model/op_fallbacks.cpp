// Runtime fallbacks for ATen operators missing from older LibTorch (see
// op_fallbacks.h).
//
// How it works: a fallback is a plain C++ function composed of ATen ops,
// registered for DispatchKey::CompositeImplicitAutograd under PyTorch 2.x's
// schema through a torch::Library fragment of namespace "aten" that is created
// at run time (never at static-init time), and only for operators that neither
// the dispatcher nor the TorchScript operator registry knows. Registering with
// the dispatcher fires the JIT's c10 registration listener
// (torch/csrc/jit/runtime/register_c10_ops.cpp), which adds a JIT Operator, so
// the TorchScript compiler resolves torch.<op>(...) in a loaded model's code.
// Being CompositeImplicitAutograd, the function runs under Autograd with its
// ATen calls recorded, so backward works without a derivative formula.
#include "model/op_fallbacks.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <regex>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/library.h>

#if defined(__has_include)
#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif
#endif

namespace nd {
namespace {

// ---------------------------------------------------------------------------
// aten::scaled_dot_product_attention
//
// Follows PyTorch 2.x's math backend (_scaled_dot_product_attention_math in
// aten/src/ATen/native/transformers/attention.cpp): half/bfloat16 computed in
// float, q and k each scaled by sqrt(scale), boolean mask -> additive -inf
// mask, is_causal -> tril(ones(L, S)) (top-left aligned), GQA by
// repeat_interleave on dim -3, "safe" softmax (a row masked out entirely gives
// zeros, not NaN, as since PyTorch 2.5), dropout on the attention weights.

constexpr const char* kSdpaName = "aten::scaled_dot_product_attention";
constexpr const char* kSdpaSchema =
    "scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, "
    "Tensor? attn_mask=None, float dropout_p=0.0, bool is_causal=False, *, "
    "float? scale=None, bool enable_gqa=False) -> Tensor";

std::atomic<bool> g_sdpa_called{false};

at::Tensor in_accumulate_type(const at::Tensor& t) {
  const auto st = t.scalar_type();
  return (st == at::kHalf || st == at::kBFloat16) ? t.to(at::kFloat) : t;
}

// Boolean mask (True = takes part) -> additive mask of 0 / -inf.
at::Tensor additive_mask(const at::Tensor& mask, const at::TensorOptions& options) {
  if (mask.scalar_type() != at::kBool) {
    return mask;
  }
  return at::zeros(mask.sizes(), options.device(mask.device()))
      .masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
}

// softmax over the last dim where a row that is -inf throughout gives zeros
// (PyTorch's _safe_softmax). The row is set to 0 before softmax so neither the
// forward nor the backward sees a NaN.
at::Tensor safe_softmax(const at::Tensor& scores) {
  const int64_t last = -1;
  const at::Tensor dead_rows =
      scores.eq(-std::numeric_limits<double>::infinity()).all(last, /*keepdim=*/true);
  return at::softmax(scores.masked_fill(dead_rows, 0.0), last).masked_fill(dead_rows, 0.0);
}

at::Tensor scaled_dot_product_attention_fallback(const at::Tensor& query,
                                                 const at::Tensor& key,
                                                 const at::Tensor& value,
                                                 const c10::optional<at::Tensor>& attn_mask,
                                                 double dropout_p, bool is_causal,
                                                 c10::optional<double> scale, bool enable_gqa) {
  g_sdpa_called.store(true, std::memory_order_relaxed);

  TORCH_CHECK(query.scalar_type() == key.scalar_type() && query.scalar_type() == value.scalar_type(),
              "Expected query, key, and value to have the same dtype, but got query.dtype: ",
              query.dtype(), " key.dtype: ", key.dtype(), " and value.dtype: ", value.dtype(),
              " instead.");
  TORCH_CHECK(query.device() == key.device() && query.device() == value.device(),
              "Expected query, key, and value to have the same device type, but got query.device: ",
              query.device(), " key.device: ", key.device(), " and value.device: ", value.device(),
              " instead.");
  TORCH_CHECK(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2,
              "Expected query, key, and value to all be at least 2 dimensional, but got query.dim: ",
              query.dim(), " key.dim: ", key.dim(), " and value.dim: ", value.dim(), " instead.");
  if (attn_mask.has_value() && attn_mask->defined()) {
    TORCH_CHECK(attn_mask->scalar_type() == at::kBool || at::isFloatingType(attn_mask->scalar_type()),
                "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                "attn_mask.dtype: ",
                attn_mask->dtype(), " and query.dtype: ", query.dtype(), " instead.");
  }
  const bool has_mask = attn_mask.has_value() && attn_mask->defined();
  TORCH_CHECK(!(is_causal && has_mask),
              "_scaled_dot_product_attention: Explicit attn_mask should not be set when "
              "is_causal=True");

  const auto origin_dtype = query.scalar_type();
  const at::Tensor q = in_accumulate_type(query);
  at::Tensor k = in_accumulate_type(key);
  at::Tensor v = in_accumulate_type(value);

  // Scale q and k by sqrt(scale) each before the matmul, as PyTorch does.
  const double full_scale =
      scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
  const double sqrt_scale = std::sqrt(std::abs(full_scale));
  const at::Tensor q_scaled = q * (full_scale < 0.0 ? -sqrt_scale : sqrt_scale);

  c10::optional<at::Tensor> mask;
  if (is_causal) {
    const int64_t L = q.size(-2);
    const int64_t S = k.size(-2);
    mask = additive_mask(at::ones({L, S}, q.options().dtype(at::kBool)).tril(), q.options());
  } else if (has_mask) {
    mask = additive_mask(*attn_mask, q.options());
  }

  if (enable_gqa && q.dim() >= 3 && k.dim() >= 3 && v.dim() >= 3) {
    const int64_t hq = q.size(-3);
    const int64_t hk = k.size(-3);
    const int64_t hv = v.size(-3);
    if (!(hq == hk && hk == hv)) {
      TORCH_CHECK(hk > 0 && hv > 0 && hq % hk == 0 && hq % hv == 0,
                  "Number of heads in key and value must divide the number of heads in query");
      const int64_t dim = -3;
      k = k.repeat_interleave(hq / hk, dim);
      v = v.repeat_interleave(hq / hv, dim);
    }
  }

  at::Tensor scores = at::matmul(q_scaled, k.transpose(-2, -1) * sqrt_scale);
  if (mask.has_value()) {
    scores = scores.add(*mask);
  }
  at::Tensor weights = safe_softmax(scores);
  if (dropout_p > 0.0) {
    weights = at::dropout(weights, dropout_p, /*train=*/true);
  }
  return at::matmul(weights, v).to(origin_dtype);
}

void define_scaled_dot_product_attention(torch::Library& m) {
  m.def(torch::schema(kSdpaSchema, c10::AliasAnalysisKind::FROM_SCHEMA));
  m.impl("scaled_dot_product_attention",
         torch::dispatch(c10::DispatchKey::CompositeImplicitAutograd,
                         TORCH_FN(scaled_dot_product_attention_fallback)));
}

// ---------------------------------------------------------------------------
// The table.

struct Fallback {
  const char* name;      ///< qualified, "aten::..."
  const char* overload;  ///< "" for the default overload
  void (*define)(torch::Library&);
  std::atomic<bool>* called;
};

const Fallback kFallbacks[] = {
    {kSdpaName, "", &define_scaled_dot_product_attention, &g_sdpa_called},
};

std::string qualified_name(const Fallback& f) {
  std::string out = f.name;
  if (f.overload[0] != '\0') {
    out += '.';
    out += f.overload;
  }
  return out;
}

// True when the dispatcher has the schema, or the TorchScript registry has an
// operator of that name and overload (JIT-only operators bypass the dispatcher).
bool operator_exists(const char* name, const char* overload) {
  if (c10::Dispatcher::singleton().findSchema(c10::OperatorName(name, overload)).has_value()) {
    return true;
  }
  for (const auto& op : torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(name))) {
    if (op->schema().overload_name() == overload) {
      return true;
    }
  }
  return false;
}

struct Registry {
  std::mutex mutex;
  bool done = false;
  std::vector<std::string> registered;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::vector<std::string> register_missing_op_fallbacks() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.done) {
    return r.registered;
  }
  r.done = true;
  // Created on first need, never destroyed: destroying a Library deregisters
  // its operators, which at process exit could run after the JIT registry is
  // gone.
  torch::Library* lib = nullptr;
  for (const Fallback& f : kFallbacks) {
    if (operator_exists(f.name, f.overload)) {
      continue;
    }
    if (lib == nullptr) {
      lib = new torch::Library(torch::Library::FRAGMENT, "aten", c10::nullopt, __FILE__, __LINE__);
    }
    f.define(*lib);
    r.registered.push_back(qualified_name(f));
  }
  return r.registered;
}

std::vector<std::string> apply_kernel_workarounds() {
  static const std::vector<std::string> applied = [] {
    std::vector<std::string> out;
#if defined(TORCH_VERSION_MAJOR) && TORCH_VERSION_MAJOR < 2
    if (at::globalContext().userEnabledMkldnn()) {
      at::globalContext().setUserEnabledMkldnn(false);
      out.push_back("oneDNN switched off: LibTorch " + libtorch_version() +
                    "'s gelu backward reads a non-contiguous output gradient as contiguous there");
    }
#endif
    return out;
  }();
  return applied;
}

std::vector<std::string> fallbacks_in_use() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.registered;
}

std::vector<std::string> fallbacks_called() {
  std::vector<std::string> in_use = fallbacks_in_use();
  std::vector<std::string> out;
  for (const Fallback& f : kFallbacks) {
    const std::string name = qualified_name(f);
    if (f.called->load(std::memory_order_relaxed) &&
        std::find(in_use.begin(), in_use.end(), name) != in_use.end()) {
      out.push_back(name);
    }
  }
  return out;
}

std::vector<std::string> fallback_table() {
  std::vector<std::string> out;
  for (const Fallback& f : kFallbacks) {
    out.push_back(qualified_name(f));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Reading load errors.

std::optional<std::string> missing_operator_in(const std::string& what) {
  // ns::name or ns::name.overload; a '.' not followed by an identifier (end of
  // sentence) is not part of the name.
  static const std::string kOp =
      R"(([A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?))";
  struct Wording {
    const char* phrase;  ///< literal the message contains, where the regex starts
    std::regex re;
  };
  static const Wording kWordings[] = {
      // TorchScript compiler (ir_emitter.cpp / schema_matching.cpp), 1.x and 2.x;
      // old releases wrote it in lower case and without the final period.
      {"Unknown builtin op:", std::regex("^Unknown builtin op:\\s*" + kOp)},
      {"unknown builtin op:", std::regex("^unknown builtin op:\\s*" + kOp)},
      {"Could not find any similar ops to", std::regex("^Could not find any similar ops to\\s*" + kOp)},
      // Node::getOperator (ir.cpp): "Node: %3 : Tensor = aten::foo(%1, %2)".
      {"Schema not found for node",
       std::regex("^Schema not found for node[^\\n]*\\n\\s*Node:[^\\n]*?=\\s*" + kOp + "\\s*[\\[(]")},
      // Dispatcher::findSchemaOrThrow: "Could not find schema for aten::foo."
      {"Could not find schema for", std::regex("^Could not find schema for\\s*" + kOp)},
      // schema_matching.cpp: a call whose saved arguments match none of the
      // operator's signatures here (a newer PyTorch added an argument:
      // 2.x's torch.stft passes align_to_window, which 1.13's aten::stft
      // lacks): "Arguments for call are not valid.\nThe following variants
      // are available:\n  \n  aten::stft(Tensor self, ...".
      {"Arguments for call are not valid",
       std::regex("^Arguments for call are not valid\\.?\\s*The following variants are available:\\s*" + kOp +
                  "\\s*\\(")},
      // Mobile / bytecode loader: "Following ops cannot be found: [aten::foo, ...]"
      // or "... for the fix.{aten::foo, }".
      {"Following ops cannot be found",
       std::regex("^Following ops cannot be found[^\\[{\\n]*[\\[{]\\s*" + kOp)},
  };
  // Look only near each phrase: messages can carry long graph dumps.
  constexpr size_t kWindow = 2048;
  for (const Wording& w : kWordings) {
    for (size_t pos = what.find(w.phrase); pos != std::string::npos;
         pos = what.find(w.phrase, pos + 1)) {
      const std::string window = what.substr(pos, kWindow);
      std::smatch m;
      if (std::regex_search(window, m, w.re)) {
        return m[1].str();
      }
    }
  }
  return std::nullopt;
}

std::string missing_operator_message(const std::string& model_path, const std::string& op) {
  std::ostringstream out;
  const std::string ns = op.substr(0, op.find("::"));
  if (ns != op && ns != "aten" && ns != "prim" && ns != "quantized" && ns != "_caffe2") {
    // A library's own C++ operator (torchvision::roi_align, torchaudio::...):
    // LibTorch never has it, whatever its version.
    out << model_path << " calls operator " << op << " from the " << ns
        << " library's C++ extension, which normdoctor does not load (LibTorch " << libtorch_version()
        << " has only aten/prim operators); export the part of the model without it (a detection model's "
           "backbone and heads without the " << op.substr(ns.size() + 2) << " step) and check that";
    return out.str();
  }
  out << model_path << " calls operator " << op << ", which LibTorch " << libtorch_version()
      << " (the one normdoctor was built with) does not have; rebuild normdoctor against a "
         "newer LibTorch (see README) or re-export the model with an older PyTorch";
  return out.str();
}

std::string libtorch_version() {
#if defined(TORCH_VERSION)
  return TORCH_VERSION;
#elif defined(TORCH_VERSION_MAJOR) && defined(TORCH_VERSION_MINOR) && defined(TORCH_VERSION_PATCH)
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
#else
  return "unknown";
#endif
}

}  // namespace nd
