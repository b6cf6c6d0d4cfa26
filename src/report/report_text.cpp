// The terminal report: header, findings as compiler-style diagnostics, a
// per-layer table with a depth profile, a summary line.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "report/report.h"
#include "report/report_common.h"

namespace nd {

namespace {

constexpr const char* kReset = "\x1b[0m";
constexpr const char* kBold = "\x1b[1m";
constexpr const char* kDim = "\x1b[2m";
constexpr const char* kRed = "\x1b[1;31m";
constexpr const char* kYellow = "\x1b[1;33m";
constexpr const char* kCyan = "\x1b[1;36m";

/// Leaf rows beyond which the layer table is elided, and how many rows it
/// keeps at each end (plus every row with a finding).
constexpr std::size_t kMaxTableRows = 60;
constexpr std::size_t kKeepEdgeRows = 10;
constexpr int kBarWidth = 20;

class Painter {
 public:
  explicit Painter(bool on) : on_(on) {}
  std::string operator()(const std::string& s, const char* code) const {
    return on_ && !s.empty() ? code + s + kReset : s;
  }

 private:
  bool on_;
};

const char* severity_color(Severity s) {
  switch (s) {
    case Severity::kError: return kRed;
    case Severity::kWarning: return kYellow;
    case Severity::kInfo: return kCyan;
  }
  return kBold;
}

/// Terminal cells of a UTF-8 string (one per code point; no wide characters here).
std::size_t cells(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

std::string pad_right(const std::string& s, std::size_t w) {
  const std::size_t n = cells(s);
  return n >= w ? s : s + std::string(w - n, ' ');
}

std::string pad_left(const std::string& s, std::size_t w) {
  const std::size_t n = cells(s);
  return n >= w ? s : std::string(w - n, ' ') + s;
}

/// Keeps the tail of a too-long string: "…ers.11.mlp.fc2".
std::string fit_tail(const std::string& s, std::size_t w) {
  if (cells(s) <= w || w < 2) return s;
  std::size_t drop = cells(s) - (w - 1), i = 0;
  while (drop > 0 && i < s.size()) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
    --drop;
  }
  return "\u2026" + s.substr(i);
}

std::string layer_name(const std::string& path) { return path.empty() ? "<root>" : path; }

/// The width of a module-path column: the longest path; on a terminal
/// (opt.fit_width) at most what is left of the line after `other` cells of
/// other columns (at least 16), so a row fits; in a file or a pipe never
/// cut, so every path can be pasted into a suppression.
std::size_t path_column(std::size_t longest, std::size_t other, const TextOptions& opt) {
  if (!opt.fit_width) return longest;
  const std::size_t width = static_cast<std::size_t>(std::max(40, opt.width));
  const std::size_t room = width > other + 16 ? width - other : 16;
  return std::min(longest, room);
}

std::string with_thousands(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string json_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : format_metric(v); }

std::string shape_text(const nlohmann::json& shape) {
  if (!shape.is_array()) return json_text(shape);
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + json_text(shape[i]);
  return s + "]";
}

/// Appends `tokens` joined by `sep` after `prefix` (which takes `prefix_cells`
/// terminal cells; it may hold ANSI codes), wrapping at `width` with
/// continuation lines indented to the prefix's width.
void wrap_tokens(std::ostringstream& out, const std::string& prefix, std::size_t prefix_cells,
                 const std::vector<std::string>& tokens, const std::string& sep, std::size_t width) {
  auto rtrim = [](std::string& s) { s.erase(s.find_last_not_of(' ') + 1); };
  const std::string indent(prefix_cells, ' ');
  std::string line = prefix;
  std::size_t col = prefix_cells;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string piece = tokens[i] + (i + 1 < tokens.size() ? sep : "");
    std::string visible = piece;
    rtrim(visible);
    if (i > 0 && col + cells(visible) > width) {
      rtrim(line);
      out << line << '\n';
      line = indent;
      col = prefix_cells;
    }
    line += piece;
    col += cells(piece);
  }
  rtrim(line);
  out << line << '\n';
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> words;
  std::istringstream in(s);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

void render_header(std::ostringstream& out, const MetricsDoc& doc, const ReportContext& ctx, const Painter& paint) {
  out << paint("normdoctor " + ctx.tool_version, kBold);
  if (!ctx.libtorch_version.empty()) out << " (libtorch " << ctx.libtorch_version << ")";
  out << '\n';

  const auto& m = doc.model;
  std::string model_line = m.contains("path") ? json_text(m["path"]) : std::string("(unknown)");
  std::vector<std::string> facts;
  if (m.contains("kind")) facts.push_back(json_text(m["kind"]));
  if (m.contains("parameters") && m["parameters"].is_number_integer())
    facts.push_back(with_thousands(m["parameters"].get<int64_t>()) + " parameters");
  if (!facts.empty()) {
    model_line += " (";
    for (std::size_t i = 0; i < facts.size(); ++i) model_line += (i ? ", " : "") + facts[i];
    model_line += ")";
  }
  out << "model   " << model_line << '\n';
  // The checkpoint measured (--weights): the numbers below are its, not the
  // file's own parameters.
  if (m.contains("weights") && m["weights"].is_object() && m["weights"].contains("measured")) {
    const auto& w = m["weights"];
    std::string line = json_text(w["measured"]);
    if (w.contains("checkpoints") && w["checkpoints"].is_array() && w["checkpoints"].size() > 1)
      line += " (the last of " + std::to_string(w["checkpoints"].size()) + " checkpoints)";
    out << "weights " << line << '\n';
  }

  for (std::size_t i = 0; i < doc.inputs.size(); ++i) {
    const auto& in = doc.inputs[i];
    std::string line = in.name + ":";
    if (in.info.contains("dtype")) line += " " + json_text(in.info["dtype"]);
    if (in.info.contains("shape")) line += " " + shape_text(in.info["shape"]);
    if (in.info.contains("source")) line += " (" + json_text(in.info["source"]) + ")";
    out << (i == 0 ? "inputs  " : "        ") << line << '\n';
  }

  if (doc.probes.is_object() && doc.probes.contains("loss")) {
    const auto& loss = doc.probes["loss"];
    std::string text;
    if (loss.is_object()) {
      for (const char* key : {"name", "kind", "description"})
        if (loss.contains(key)) {
          text = json_text(loss[key]);
          break;
        }
      if (text.empty()) text = loss.dump();
    } else {
      text = json_text(loss);
    }
    // The value first: "... lengths 'xs_lens' = -63" read as the lengths'
    // value (eval59).
    auto v = doc.model_metrics.find("loss.value");
    if (v != doc.model_metrics.end()) text = format_metric(v->second) + ": " + text;
    out << "loss    " << text << '\n';
  }

  if (ctx.config.is_object() && ctx.config.contains("file") && ctx.config["file"].is_string())
    out << "config  " << ctx.config["file"].get<std::string>()
        << (ctx.config.contains("section") && ctx.config["section"].is_string()
                ? " [" + ctx.config["section"].get<std::string>() + "]"
                : std::string())
        << '\n';

  if (!doc.passes.empty()) {
    std::string line;
    for (const auto& p : doc.passes) {
      std::string name = p.is_object() && p.contains("name") ? json_text(p["name"]) : json_text(p);
      if (p.is_object() && p.contains("mode")) name += " (" + json_text(p["mode"]) + ")";
      line += (line.empty() ? "" : ", ") + name;
    }
    out << "passes  " << line << '\n';
  }
  // What normdoctor assumed (a batch axis, an input's role, the lr of the
  // update ratio, a model judged as untrained): it qualifies the findings.
  for (std::size_t i = 0; i < doc.assumptions.size(); ++i)
    out << (i == 0 ? "assumed " : "        ") << doc.assumptions[i] << '\n';
}

void render_finding(std::ostringstream& out, const Finding& f, const Painter& paint, std::size_t width) {
  const std::string sev = severity_name(f.severity);
  out << paint(sev + "[" + f.rule_id + "]", severity_color(f.severity)) << ' ' << f.failure_mode;
  if (f.layer)
    out << " at " << paint(layer_name(*f.layer), kBold);
  else if (f.input)
    out << " at input " << paint(*f.input, kBold);
  out << ": " << f.message << '\n';

  if (f.evidence.is_object() && !f.evidence.empty()) {
    std::vector<std::string> items;
    for (const auto& [k, v] : f.evidence.items()) items.push_back(k + "=" + format_metric(v));
    wrap_tokens(out, "  " + paint("evidence:", kDim) + " ", 12, items, ", ", width);
  }
  // One fix: "  fix: text"; several: numbered, so a wrapped line is not read as the next fix.
  for (std::size_t i = 0; i < f.fix.size(); ++i) {
    const std::string number = f.fix.size() > 1 ? std::to_string(i + 1) + ". " : std::string();
    const std::string lead = i == 0 ? "  " + paint("fix:", kDim) + " " : std::string(7, ' ');
    wrap_tokens(out, lead + number, 7 + number.size(), split_words(f.fix[i]), " ", width);
  }
  out << "  " << paint("see:", kDim) << " normdoctor explain " << f.rule_id << '\n';
}

std::string metric_cell(const LayerMetrics& l, const char* name) {
  if (std::string nf = report_detail::nonfinite_cell(l, name); !nf.empty()) return nf;
  auto it = l.metrics.find(name);
  return it == l.metrics.end() ? std::string("-") : format_metric(it->second);
}

/// A horizontal bar of `eighths` eighth-cells, padded to kBarWidth cells.
std::string bar(int eighths) {
  static const char* kPartial[] = {"", "\u258f", "\u258e", "\u258d", "\u258c", "\u258b", "\u258a", "\u2589"};
  std::string s;
  for (int i = 0; i < eighths / 8; ++i) s += "\u2588";
  s += kPartial[eighths % 8];
  return pad_right(s, kBarWidth);
}

void render_layers(std::ostringstream& out, const MetricsDoc& doc, const std::vector<Finding>& findings,
                   const Painter& paint, const TextOptions& opt) {
  std::vector<const LayerMetrics*> rows;
  std::size_t not_run = 0;
  for (const auto& l : doc.layers) {
    if (!layer_table_row(l)) continue;
    if (l.exec_order < 0) {
      // nn.Identity computes nothing, so nothing of it runs (timm's
      // drop_path = nn.Identity() at rate 0): not a module that was skipped.
      if (l.kind != "Identity") ++not_run;
    } else
      rows.push_back(&l);
  }
  if (rows.empty()) return;
  std::stable_sort(rows.begin(), rows.end(),
                   [](const LayerMetrics* a, const LayerMetrics* b) { return a->exec_order < b->exec_order; });

  struct Mark {
    std::set<std::string> ids;
    Severity worst = Severity::kInfo;
  };
  std::map<std::string, Mark> marks;  // layer path -> rule ids of its findings
  for (const auto& f : findings) {
    if (!f.layer) continue;
    Mark& m = marks[*f.layer];
    m.ids.insert(f.rule_id);
    m.worst = std::max(m.worst, f.severity);
  }

  // log10(act.rms) scale for the bar column, whole decades.
  std::vector<double> logs(rows.size(), std::nan(""));
  double lo = INFINITY, hi = -INFINITY;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto it = rows[i]->metrics.find("act.rms");
    if (it == rows[i]->metrics.end() || !it->second.is_number()) continue;
    const double rms = it->second.get<double>();
    if (!(rms > 0) || !std::isfinite(rms)) continue;
    logs[i] = std::log10(rms);
    lo = std::min(lo, std::floor(logs[i]));
    hi = std::max(hi, std::ceil(logs[i]));
  }
  if (hi <= lo) hi = lo + 1;

  std::size_t w_idx = 1, w_path = 4, w_kind = 4;
  for (const auto* l : rows) {
    w_idx = std::max(w_idx, std::to_string(l->exec_order).size());
    w_path = std::max(w_path, cells(layer_name(l->path)));
    w_kind = std::max(w_kind, cells(l->kind));
  }
  const std::size_t w_num = 10, w_grad = 13;
  if (opt.fit_width) w_kind = std::min<std::size_t>(w_kind, 20);
  w_path = path_column(w_path, 2 + w_idx + 2 + 2 + w_kind + 2 + w_num + 2 + w_num + 2 + w_grad + 2 + kBarWidth, opt);

  // -v: every row; otherwise long tables keep their ends and the flagged rows.
  const bool elide = rows.size() > kMaxTableRows && opt.verbose < 1;
  std::vector<bool> keep(rows.size(), !elide);
  if (elide) {
    for (std::size_t i = 0; i < rows.size(); ++i)
      keep[i] = i < kKeepEdgeRows || i + kKeepEdgeRows >= rows.size() || marks.count(rows[i]->path) > 0;
  }

  const std::string pass = report_detail::layer_table_pass(doc);
  out << '\n' << paint("layers", kBold) << " (leaf modules in execution order"
      << (pass.empty() ? "" : "; measured in " + pass) << ")\n";
  std::string scale = std::isfinite(lo) ? "log10(act.rms) " + format_metric(lo) + ".." + format_metric(hi)
                                        : std::string("log10(act.rms)");
  std::string head = "  " + pad_left("#", w_idx) + "  " + pad_right("path", w_path) + "  " + pad_right("kind", w_kind) +
                     "  " + pad_left("act.absmax", w_num) + "  " + pad_left("act.rms", w_num) + "  " +
                     pad_left("grad.out_norm", w_grad) + "  " + scale;
  out << paint(head, kDim) << '\n';

  std::size_t elided_total = 0;
  for (std::size_t i = 0; i < rows.size();) {
    if (!keep[i]) {
      std::size_t j = i;
      while (j < rows.size() && !keep[j]) ++j;
      out << paint("  ... " + std::to_string(j - i) + " rows elided ...", kDim) << '\n';
      elided_total += j - i;
      i = j;
      continue;
    }
    const LayerMetrics& l = *rows[i];
    std::string line = "  " + pad_left(std::to_string(l.exec_order), w_idx) + "  " +
                       pad_right(fit_tail(layer_name(l.path), w_path), w_path) + "  " +
                       pad_right(fit_tail(l.kind, w_kind), w_kind) + "  " +
                       pad_left(metric_cell(l, "act.absmax"), w_num) + "  " + pad_left(metric_cell(l, "act.rms"), w_num) +
                       "  " + pad_left(metric_cell(l, "grad.out_norm"), w_grad) + "  ";
    if (std::isnan(logs[i])) {
      line += pad_right("-", kBarWidth);
    } else {
      // At least one eighth so the smallest value stays visible.
      const int eighths = 1 + static_cast<int>(std::lround((logs[i] - lo) / (hi - lo) * (kBarWidth * 8 - 1)));
      line += bar(eighths);
    }
    auto m = marks.find(l.path);
    if (m != marks.end()) {
      std::string ids;
      for (const auto& id : m->second.ids) ids += (ids.empty() ? "" : ",") + id;
      line += "  " + paint(ids, severity_color(m->second.worst));
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << '\n';
    ++i;
  }
  if (elided_total > 0)
    out << paint("  (" + std::to_string(elided_total) + " of " + std::to_string(rows.size()) +
                     " rows elided; kept the first and last " + std::to_string(kKeepEdgeRows) +
                     " and every row with a finding)",
                 kDim)
        << '\n';
  bool any_nonfinite = false;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (keep[i])
      for (const char* k : {"act.absmax", "act.rms", "grad.out_norm"})
        any_nonfinite = any_nonfinite || !report_detail::nonfinite_cell(*rows[i], k).empty();
  if (any_nonfinite)
    out << paint("  (inf, nan: the tensor held non-finite values; the JSON's act.* and grad.* statistics are over its "
                 "finite values, act.inf_count and act.nan_count count the others)",
                 kDim)
        << '\n';
  if (not_run > 0)
    out << paint("  (" + std::to_string(not_run) + " leaf module" + (not_run == 1 ? "" : "s") +
                     " did not run in the measurement pass)",
                 kDim)
        << '\n';
}

/// One row per BatchNorm layer that the normalization probe measured: how
/// its running statistics compare with the data and how noisy its batch
/// statistics are at the training batch size.
void render_batchnorm(std::ostringstream& out, const MetricsDoc& doc, const Painter& paint, const TextOptions& opt) {
  std::vector<const LayerMetrics*> rows;
  for (const auto& l : doc.layers)
    if (l.metrics.count("bn.channels")) rows.push_back(&l);
  if (rows.empty()) return;
  std::stable_sort(rows.begin(), rows.end(),
                   [](const LayerMetrics* a, const LayerMetrics* b) { return a->exec_order < b->exec_order; });
  std::size_t w = 4;
  for (const auto* l : rows) w = std::max(w, cells(layer_name(l->path)));
  w = path_column(w, 2 + 2 + 8 + 2 + 9 + 2 + 9 + 2 + 7 + 2 + 20, opt);
  out << '\n' << paint("batchnorm (eval-mode statistics of the sample vs running statistics)", kBold) << '\n';
  out << "  " << pad_right("path", w) << "  " << pad_left("mean z", 8) << "  " << pad_left("var ratio", 9) << "  "
      << pad_left("values/ch", 9) << "  " << pad_left("noise", 7) << "  state\n";
  for (const auto* l : rows) {
    std::string state;
    if (l->metrics.count("bn.has_running_stats") && l->metrics.at("bn.has_running_stats") == false)
      state = "no running stats";
    else if (l->metrics.count("bn.at_initial_values") && l->metrics.at("bn.at_initial_values") == true)
      state = "initial values (0/1)";
    else if (l->metrics.count("bn.num_batches_tracked"))
      state = format_metric(l->metrics.at("bn.num_batches_tracked")) + " batches tracked";
    out << "  " << pad_right(fit_tail(layer_name(l->path), w), w) << "  " << pad_left(metric_cell(*l, "bn.mean_z"), 8)
        << "  " << pad_left(metric_cell(*l, "bn.var_ratio"), 9) << "  "
        << pad_left(metric_cell(*l, "bn.values_per_channel"), 9) << "  " << pad_left(metric_cell(*l, "bn.mean_noise"), 7)
        << "  " << state << '\n';
  }
}

/// One row per normalization layer: the op, its input's axes by role and
/// the axes its statistics are taken over (probe `sequence`).
void render_norm_axes(std::ostringstream& out, const MetricsDoc& doc, const Painter& paint, const TextOptions& opt) {
  std::vector<const LayerMetrics*> rows;
  for (const auto& l : doc.layers)
    if (l.metrics.count("norm.op") && l.metrics.count("norm.reduced_axes")) rows.push_back(&l);
  if (rows.empty()) return;
  std::stable_sort(rows.begin(), rows.end(),
                   [](const LayerMetrics* a, const LayerMetrics* b) { return a->exec_order < b->exec_order; });
  std::size_t w = 4, wl = 6;
  for (const auto* l : rows) {
    w = std::max(w, cells(layer_name(l->path)));
    wl = std::max(wl, cells(json_text(l->metrics.at("norm.input_layout"))));
  }
  if (opt.fit_width) wl = std::min<std::size_t>(wl, 40);
  w = path_column(w, 2 + 2 + 16 + 2 + wl + 2 + 16, opt);
  out << '\n' << paint("normalization axes (input layout by role; statistics taken over)", kBold) << '\n';
  out << "  " << pad_right("path", w) << "  " << pad_right("op", 16) << "  " << pad_right("input", wl) << "  reduced over\n";
  for (const auto* l : rows) {
    std::string op = json_text(l->metrics.at("norm.op"));
    if (op == "rms_norm_pattern") op = "rms (pow/mean)";
    std::string red = json_text(l->metrics.at("norm.reduced_axes"));
    if (l->metrics.count("norm.eps") && l->metrics.at("norm.eps").is_number())
      red += "  eps " + format_metric(l->metrics.at("norm.eps"));
    out << "  " << pad_right(fit_tail(layer_name(l->path), w), w) << "  " << pad_right(op, 16) << "  "
        << pad_right(fit_tail(json_text(l->metrics.at("norm.input_layout")), wl), wl) << "  " << red << '\n';
  }
}

/// Per residual block: where the norm sits and the residual stream's RMS at
/// the block boundary (probe `architecture`).
void render_architecture(std::ostringstream& out, const MetricsDoc& doc, const Painter& paint, const TextOptions& opt) {
  if (!doc.probes.is_object() || !doc.probes.contains("architecture")) return;
  const auto& a = doc.probes["architecture"];
  const auto& blocks = a.value("blocks", nlohmann::json::array());
  if (blocks.empty()) return;
  std::size_t w = 5;
  for (const auto& b : blocks) w = std::max(w, cells(layer_name(b.value("block", std::string()))));
  w = path_column(w, 2 + 2 + 10 + 2 + 10 + 2 + 10 + 2 + 16, opt);
  const auto& mm = doc.model_metrics;
  auto get = [&](const char* k) { return mm.count(k) ? json_text(mm.at(k)) : std::string("-"); };
  out << '\n'
      << paint("residual blocks (" + get("arch.placement") + ", " + get("arch.blocks") + " in " +
                   (get("arch.stack").empty() ? std::string("<root>") : get("arch.stack")) +
                   // Blocks of other stacks are rows too (Flux's dual-stream blocks
                   // before its single-stream stack): say how many rows there are.
                   (get("arch.blocks_all") != "-" && get("arch.blocks_all") != get("arch.blocks")
                        ? ", " + get("arch.blocks_all") + " in all"
                        : std::string()) +
                   "; final norm: " + get("arch.final_norm") +
                   // Not a pre-norm question (in-branch or post-norm blocks), yet
                   // a norm before the head exists (timm ConvNeXt's head.norm):
                   // named, so "n/a" does not read as "none" (eval42).
                   (get("arch.final_norm") == "n/a" && get("arch.final_norm_layer") != "-" && !get("arch.final_norm_layer").empty()
                        ? ", " + get("arch.final_norm_layer") + " before the head"
                        : std::string()) +
                   ")",
               kBold)
      << '\n';
  out << "  " << pad_right("block", w) << "  " << pad_right("placement", 10) << "  " << pad_left("stream in", 10) << "  "
      << pad_left("stream out", 10) << "  norm\n";
  auto cell = [](const nlohmann::json& v) { return v.is_number() ? format_metric(v) : std::string("-"); };
  for (const auto& b : blocks) {
    std::string norms;
    for (const auto& n : b.value("norms", nlohmann::json::array()))
      norms += (norms.empty() ? "" : ", ") + n.get<std::string>();
    out << "  " << pad_right(fit_tail(layer_name(b.value("block", std::string())), w), w) << "  "
        << pad_right(b.value("placement", std::string()), 10) << "  " << pad_left(cell(b.value("stream_rms_in", nlohmann::json())), 10)
        << "  " << pad_left(cell(b.value("stream_rms_out", nlohmann::json())), 10) << "  " << norms << '\n';
  }
}

/// The precision section (--precision fp16|bf16): how the pass in the
/// format ran, where it first went non-finite or diverged, the loss-scale
/// range (fp16) and the LayerNorm/RMSNorm internals. Nothing when the model
/// metrics hold no prec.format (fp32 runs).
void render_precision(std::ostringstream& out, const MetricsDoc& doc, const Painter& paint, const TextOptions& opt) {
  const MetricMap& mm = doc.model_metrics;
  auto get = [&](const char* name) -> const MetricValue* {
    auto it = mm.find(name);
    return it == mm.end() ? nullptr : &it->second;
  };
  auto text = [&](const char* name) { return get(name) ? json_text(*get(name)) : std::string("n/a"); };
  if (!get("prec.format")) return;
  const std::string fmt = text("prec.format");
  out << '\n' << paint("precision " + fmt, kBold) << " (" << text("prec.mode") << " run";
  if (get("prec.native_error"))
    out << "; native " << fmt << " could not run: "
        << (get("prec.native_missing_op") ? text("prec.native_missing_op") : text("prec.native_error"))
        << (get("prec.native_failed_after") ? " after " + layer_name(text("prec.native_failed_after")) : std::string());
  out << ")\n";
  if (get("prec.first_nonfinite_layer"))
    out << "  first non-finite module: " << layer_name(text("prec.first_nonfinite_layer")) << " ("
        << text("prec.first_nonfinite_cause") << ")\n";
  else {
    // The comparison counts values non-finite in the format and finite in
    // fp32: where the fp32 forward is non-finite already (ACT001), "every
    // output stays finite" would be false (eval57 bert with a -inf mask).
    bool fp32_nonfinite = false;
    for (const auto& l : doc.layers) {
      auto it = l.metrics.find("fwd.first_nonfinite");
      fp32_nonfinite = fp32_nonfinite || (it != l.metrics.end() && it->second.is_boolean() && it->second.get<bool>());
    }
    if (fp32_nonfinite)
      out << "  no module output turns non-finite in " << fmt << " where it is finite in fp32 (the fp32 forward is non-finite already)\n";
    else
      out << "  every module output stays finite in " << fmt << '\n';
  }
  if (get("prec.first_divergent_layer")) {
    const std::string path = text("prec.first_divergent_layer");
    out << "  first module diverging from fp32 (relative error > " << text("prec.divergence_threshold")
        << "): " << layer_name(path);
    if (const LayerMetrics* l = doc.find_layer(path))
      out << " (relative error " << metric_cell(*l, "prec.rel_error") << ", fp32 absmax "
          << metric_cell(*l, "prec.ref_absmax") << ")";
    out << '\n';
  }
  out << "  model output relative error vs fp32: " << text("prec.output_rel_error");
  if (get("prec.real_positions_from"))
    out << " at the real positions, as every module's error (padding from " << text("prec.real_positions_from") << ")";
  if (get("prec.output_nonfinite_count") && text("prec.output_nonfinite_count") != "0")
    out << " over the finite elements; " << text("prec.output_nonfinite_count") << " output values are NaN/Inf in " << fmt
        << " and finite in fp32";
  out << '\n';
  if (get("prec.loss_scale_blocked_by")) {
    out << "  loss scale: none helps, the forward pass is already non-finite at "
        << layer_name(text("prec.loss_scale_blocked_by")) << '\n';
  } else if (get("prec.loss_scale_max")) {
    // Two bounds read as one range when one exists: "finite up to 2623,
    // all normal from 5.24e+05" left no scale satisfying both unexplained
    // (eval57 efficientnetv2). Underflow is to zero; below normal is
    // subnormal, reduced precision.
    const MetricValue* feasible = get("prec.loss_scale_feasible");
    if (feasible && feasible->is_boolean() && feasible->get<bool>())
      out << "  loss scale: every gradient is finite and normal in " << fmt << " at scales from " << text("prec.loss_scale_min")
          << " to " << text("prec.loss_scale_max");
    else
      out << "  loss scale: no scale keeps every gradient both finite and normal in " << fmt << " (finite up to "
          << text("prec.loss_scale_max") << ", all normal only from " << text("prec.loss_scale_min")
          << ": the gradients span more than the format's range)";
    out << "; at " << text("prec.loss_scale_used") << " " << text("prec.grad_underflow_fraction")
        << " of them underflow to 0 (at 1: " << text("prec.grad_underflow_fraction_scale1") << ")\n";
  }
  std::vector<const LayerMetrics*> norms;
  for (const auto& l : doc.layers)
    if (l.metrics.count("prec.norm_rows") || l.metrics.count("prec.eps_in_format")) norms.push_back(&l);
  if (norms.empty()) return;
  std::size_t w = 4;
  for (const auto* l : norms) w = std::max(w, cells(layer_name(l->path)));
  w = path_column(w, 2 + 2 + 9 + 2 + 9 + 2 + 9 + 2 + 10 + 2 + 14, opt);
  out << "  " << pad_right("norm", w) << "  " << pad_left("eps", 9) << "  " << pad_left("in " + fmt, 9) << "  "
      << pad_left("zero rows", 9) << "  " << pad_left("non-finite", 10) << "  " << pad_left("sumsq headroom", 14) << '\n';
  for (const auto* l : norms)
    out << "  " << pad_right(fit_tail(layer_name(l->path), w), w) << "  " << pad_left(metric_cell(*l, "norm.eps"), 9)
        << "  " << pad_left(metric_cell(*l, "prec.eps_in_format"), 9) << "  "
        << pad_left(metric_cell(*l, "prec.norm_zero_rows"), 9) << "  "
        << pad_left(metric_cell(*l, "prec.norm_nonfinite_count"), 10) << "  "
        << pad_left(metric_cell(*l, "prec.norm_sumsq_headroom"), 14) << '\n';
}

/// The replay's per-step table (--steps): loss, gradient norm, largest
/// update ratio, largest activation RMS and its growth over step 0, largest
/// norm gain, and where a value became non-finite. More than 40 steps: the
/// first 20 and the last 20 (every step is in the JSON report).
void render_replay(std::ostringstream& out, const MetricsDoc& doc, const Painter& paint) {
  if (!doc.probes.contains("replay") || !doc.probes["replay"].contains("steps")) return;
  const auto& rp = doc.probes["replay"];
  const auto& steps = rp["steps"];
  out << '\n'
      << paint("replay (" + json_text(rp.value("optimizer", nlohmann::json("sgd"))) + ", lr " +
                   json_text(rp.value("lr", nlohmann::json(0.0))) + ", " + std::to_string(steps.size()) + " of " +
                   json_text(rp.value("steps_requested", nlohmann::json(0))) + " steps; weights restored afterwards)",
               kBold)
      << '\n';
  auto cell = [](const nlohmann::json& row, const char* key) {
    return row.contains(key) && !row[key].is_null() ? json_text(row[key]) : std::string("-");
  };
  out << "  " << pad_left("step", 4) << "  " << pad_left("loss", 9) << "  " << pad_left("grad norm", 9) << "  "
      << pad_left("upd ratio", 9) << "  " << pad_left("act rms", 9) << "  " << pad_left("growth", 9) << "  "
      << pad_left("gain max", 8) << "  layer (largest growth) / non-finite\n";
  const std::size_t n = steps.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (n > 40 && i == 20) out << "  " << pad_left("...", 4) << "  (" << (n - 40) << " steps in the JSON report)\n";
    if (n > 40 && i >= 20 && i < n - 20) continue;
    const auto& row = steps[i];
    std::string where = row.contains("nonfinite") ? paint("non-finite: " + json_text(row["nonfinite"]), kRed)
                  : row.value("act_growth_layer", std::string()).empty() ? std::string("-")
                                                                          : row.value("act_growth_layer", std::string());
    out << "  " << pad_left(cell(row, "step"), 4) << "  " << pad_left(cell(row, "loss"), 9) << "  "
        << pad_left(cell(row, "grad_norm"), 9) << "  " << pad_left(cell(row, "update_ratio_max"), 9) << "  "
        << pad_left(cell(row, "act_rms_max"), 9) << "  " << pad_left(cell(row, "act_growth"), 9) << "  "
        << pad_left(cell(row, "gain_max"), 8) << "  " << where << '\n';
  }
  if (rp.contains("raised")) out << "  the forward raised at step " << json_text(rp["raised"]["step"]) << ": "
                                 << json_text(rp["raised"]["message"]) << '\n';
}

/// The probes that did not run or failed, and the rules that therefore were
/// not evaluated (src/policy/policy.h).
void render_probes_down(std::ostringstream& out, const ReportContext& ctx, const Painter& paint) {
  std::vector<std::string> lines;
  for (const auto& [name, st] : ctx.probe_statuses) {
    if (st.status == "ok") continue;
    std::string ids;
    for (const auto& s : ctx.skipped_rules)
      if (s.probe == name) ids += (ids.empty() ? "" : ", ") + s.rule_id;
    std::string why = st.describe();
    if (auto nl = why.find('\n'); nl != std::string::npos) why = why.substr(0, nl);
    lines.push_back("  " + name + " (" + st.status + "): " + why + (ids.empty() ? "" : "; not evaluated: " + ids));
  }
  if (lines.empty()) return;
  out << '\n' << paint("probes that could not run", kBold) << " (the other probes ran; their findings stand)\n";
  for (const auto& l : lines) out << l << '\n';
}

/// -vv: the passes with their seconds, and every metric of each finding's layer.
void render_verbose(std::ostringstream& out, const MetricsDoc& doc, const std::vector<Finding>& findings,
                    const Painter& paint) {
  if (!doc.passes.empty()) {
    out << '\n' << paint("passes (name, mode, seconds)", kBold) << '\n';
    for (const auto& p : doc.passes) {
      if (!p.is_object()) continue;
      out << "  " << pad_right(p.contains("name") ? json_text(p["name"]) : std::string("?"), 24) << "  "
          << pad_right(p.contains("mode") ? json_text(p["mode"]) : std::string("-"), 8) << "  "
          << (p.contains("seconds") ? format_metric(p["seconds"]) + " s" : std::string("-")) << '\n';
    }
  }
  std::set<std::string> shown;
  for (const auto& f : findings) {
    if (!f.layer || !shown.insert(*f.layer).second) continue;
    const LayerMetrics* l = doc.find_layer(*f.layer);
    if (!l) continue;
    out << '\n' << paint("metrics of " + layer_name(l->path), kBold) << " (" << l->kind << ")\n";
    for (const auto& [k, v] : l->metrics) out << "  " << k << " = " << format_metric(v) << '\n';
  }
}

std::string plural(int n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

}  // namespace

std::string render_text(const MetricsDoc& doc, const std::vector<Finding>& findings, const ReportContext& ctx,
                        const TextOptions& opt) {
  const Painter paint(opt.color);
  const std::size_t width = static_cast<std::size_t>(std::max(40, opt.width));
  std::ostringstream out;

  render_header(out, doc, ctx, paint);
  if (ctx.status == "error")
    out << '\n'
        << paint("normdoctor failed", kRed) << " (" << (ctx.error_kind.empty() ? "internal" : ctx.error_kind)
        << "): " << ctx.error_message << '\n';

  // Grouped by severity, error first; within a group the engine's order.
  std::vector<const Finding*> sorted;
  for (const auto& f : findings) sorted.push_back(&f);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Finding* a, const Finding* b) { return a->severity > b->severity; });
  if (sorted.empty() && ctx.status != "error") out << "\nno findings\n";
  for (const Finding* f : sorted) {
    out << '\n';
    render_finding(out, *f, paint, width);
  }

  render_precision(out, doc, paint, opt);
  if (opt.show_layers) {
    render_layers(out, doc, findings, paint, opt);
    render_batchnorm(out, doc, paint, opt);
    render_norm_axes(out, doc, paint, opt);
    render_architecture(out, doc, paint, opt);
  }
  render_probes_down(out, ctx, paint);
  if (opt.verbose >= 2) render_verbose(out, doc, findings, paint);
  render_replay(out, doc, paint);
  out << report_detail::render_timeline_text(doc);

  const SeverityCounts c = count_findings(findings);
  std::string also;
  if (ctx.hidden > 0) also += std::to_string(ctx.hidden) + " below --severity " + ctx.severity + " not shown";
  if (ctx.suppressed > 0) also += (also.empty() ? "" : ", ") + std::to_string(ctx.suppressed) + " suppressed by the config";
  out << '\n'
      << paint(plural(c.error, "error") + ", " + plural(c.warning, "warning") + ", " + std::to_string(c.info) + " info",
               kBold)
      << (also.empty() ? "" : " (" + also + ")") << '\n';
  for (const auto& n : ctx.notes) {
    out << paint("note:", kCyan) << ' ';
    if (!n.file.empty()) out << n.file << (n.line > 0 ? ":" + std::to_string(n.line) : "") << ": ";
    out << n.text << '\n';
  }
  if (!ctx.rerun_hint.empty()) out << ctx.rerun_hint << '\n';
  return out.str();
}

}  // namespace nd
