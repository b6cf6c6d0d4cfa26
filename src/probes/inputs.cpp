// Forward arguments: batch files (--input), synthesized tensors
// (--input-shape), and their metrics.
#include <sstream>

#include "core/error.h"
#include "instrument/stats.h"
#include "model/batch_file.h"
#include "probes/session.h"

namespace nd {
namespace {

std::string arg_list(const LoadedModel& m) {
  std::ostringstream ss;
  ss << "forward(";
  for (size_t i = 0; i < m.args.size(); ++i) {
    if (i) ss << ", ";
    ss << m.args[i].name << ": " << m.args[i].type << (m.args[i].has_default ? " = default" : "");
  }
  ss << ")";
  return ss.str();
}

std::string describe(const at::Tensor& t) {
  std::ostringstream ss;
  ss << t.sizes() << " " << c10::toString(t.scalar_type());
  return ss.str();
}

// Maps one batch file onto forward's arguments.
std::vector<ArgValue> bind(const LoadedModel& m, const BatchFile& b) {
  std::vector<ArgValue> out;
  const std::string src = "file:" + b.path;
  if (!b.keyword.empty()) {
    std::vector<std::optional<at::Tensor>> slot(m.args.size());
    for (const auto& [k, t] : b.keyword) {
      size_t i = 0;
      while (i < m.args.size() && m.args[i].name != k) ++i;
      if (i == m.args.size())
        throw load_error(error_kind::kInputMismatch,
                         b.path + ": key '" + k + "' is not an argument of the model's " + arg_list(m));
      slot[i] = t;
    }
    for (size_t i = 0; i < slot.size(); ++i) {
      if (slot[i]) {
        out.push_back({m.args[i].name, *slot[i], src});
      } else if (!m.args[i].has_default) {
        throw load_error(error_kind::kInputMismatch,
                         b.path + ": no tensor for argument '" + m.args[i].name + "' of " + arg_list(m));
      } else {
        break;  // later arguments take their defaults
      }
    }
    return out;
  }
  size_t required = 0;
  for (const auto& a : m.args) required += a.has_default ? 0 : 1;
  if (b.positional.size() < required || b.positional.size() > m.args.size()) {
    std::ostringstream ss;
    ss << b.path << ": holds " << b.positional.size() << " tensor" << (b.positional.size() == 1 ? "" : "s") << " (";
    for (size_t i = 0; i < b.positional.size(); ++i) ss << (i ? ", " : "") << describe(b.positional[i]);
    ss << ") but the model's " << arg_list(m) << " takes "
       << (required == m.args.size() ? std::to_string(required) : std::to_string(required) + " to " + std::to_string(m.args.size()));
    throw load_error(error_kind::kInputMismatch, ss.str());
  }
  for (size_t i = 0; i < b.positional.size(); ++i) out.push_back({m.args[i].name, b.positional[i], src});
  return out;
}

}  // namespace

void load_arguments(Session& s) {
  const auto& opt = s.opt;
  if (!opt.input_files.empty()) {
    std::vector<std::vector<ArgValue>> batches;
    for (const auto& f : opt.input_files) batches.push_back(bind(s.model, read_batch_file(f)));
    s.args = batches.front();
    // Several batches: concatenated along the batch axis (0) when they agree.
    for (size_t b = 1; b < batches.size(); ++b) {
      if (batches[b].size() != s.args.size())
        throw load_error(error_kind::kInputMismatch, opt.input_files[b] + ": holds " + std::to_string(batches[b].size()) +
                                                     " arguments, the first batch " + std::to_string(s.args.size()));
      for (size_t i = 0; i < s.args.size(); ++i) {
        const auto a = s.args[i].value.toTensor(), c = batches[b][i].value.toTensor();
        if (a.dim() == 0 || a.dim() != c.dim() || a.sizes().slice(1) != c.sizes().slice(1) || a.scalar_type() != c.scalar_type())
          throw load_error(error_kind::kInputMismatch,
                           opt.input_files[b] + ": argument '" + s.args[i].name + "' is " + describe(c) + ", the first batch's is " +
                               describe(a) + "; batches are joined along axis 0 and must agree elsewhere");
        s.args[i].value = at::cat({a, c}, 0);
        s.args[i].source += "+" + opt.input_files[b];
      }
    }
    if (batches.size() > 1)
      s.doc.assumptions.push_back(std::to_string(batches.size()) + " batch files joined along axis 0 into one batch");
  } else if (!opt.input_shapes.empty()) {
    throw usage_error("--input-shape is not wired yet");
  } else {
    std::ostringstream ss;
    ss << "no inputs: give a sample batch with --input FILE (torch.save of a tensor, tuple, list or dict, or .safetensors) "
          "or shapes with --input-shape, for the model's "
       << arg_list(s.model);
    throw Error(error_kind::kInputInference, ExitCode::kUsage, ss.str());
  }

  bool any_nonfinite = false, synthetic = false;
  for (size_t i = 0; i < s.args.size(); ++i) {
    const ArgValue& a = s.args[i];
    InputMetrics im;
    im.name = a.name;
    im.index = static_cast<int64_t>(i);
    im.info["source"] = a.source;
    if (a.value.isTensor()) {
      const at::Tensor t = a.value.toTensor();
      im.info["shape"] = t.sizes().vec();
      im.info["dtype"] = std::string(c10::toString(t.scalar_type()));
      const TensorStats st = compute_stats(t);
      const bool is_float = t.is_floating_point();
      im.metrics["input.is_float"] = is_float;
      im.metrics["input.numel"] = st.numel;
      im.metrics["input.min"] = st.finite() ? st.min : 0.0;
      im.metrics["input.max"] = st.finite() ? st.max : 0.0;
      im.metrics["input.absmax"] = st.absmax();
      im.metrics["input.mean"] = st.mean();
      im.metrics["input.std"] = st.std();
      im.metrics["input.nan_count"] = st.nan;
      im.metrics["input.inf_count"] = st.inf;
      im.metrics["input.nonfinite_count"] = st.nonfinite();
      if (is_float) im.metrics["input.scale"] = std::max(std::fabs(st.mean()), st.std());
      im.metrics["input.synthetic"] = a.source.rfind("synthetic", 0) == 0;
      any_nonfinite = any_nonfinite || st.nonfinite() > 0;
      synthetic = synthetic || a.source.rfind("synthetic", 0) == 0;
    }
    s.doc.inputs.push_back(std::move(im));
  }
  s.doc.model_metrics["input.any_nonfinite"] = any_nonfinite;
  s.doc.model_metrics["run.synthetic_inputs"] = synthetic;
}

}  // namespace nd
