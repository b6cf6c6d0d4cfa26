// The HTML report (--format html): one self-contained static page, readable
// offline. No network access (no CDN, fonts or images from elsewhere), no
// script framework: the plots are inline SVG drawn here, and a few lines of
// plain JavaScript expand and collapse the findings. docs/report.md, "HTML".
//
// Layout, per model: the verdict (counts by severity, exit status), the
// findings (evidence, fixes; each links to its layer's row and plot point),
// depth plots (activation RMS and absmax on a log scale with the fp16
// maximum 65504 drawn; gradient norms), the layer table, the
// normalization-axes, residual-block and BatchNorm tables, the probes that
// could not run and the rules they feed, and the checkpoint timeline when
// the metrics document has one (`probes.timeline`, below).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "report/report.h"
#include "report/report_common.h"

namespace nd {

namespace {

using namespace report_detail;
using json = nlohmann::json;

constexpr double kFp16Max = 65504.0;  // largest finite IEEE 754 binary16 value

/// Text for HTML element content and attribute values.
std::string esc(const std::string& raw) {
  const std::string s = valid_utf8(raw);
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

/// A fragment id for a layer: "m0-layer-layers.13" (characters outside
/// [A-Za-z0-9._-] as _XX hex, the root module as "<root>" -> "_root_").
std::string layer_anchor(int run, const std::string& path) {
  std::string id = "m" + std::to_string(run) + "-layer-";
  if (path.empty()) return id + "_root_";
  static const char* kHex = "0123456789abcdef";
  for (unsigned char c : path) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-')
      id += static_cast<char>(c);
    else {
      id += '_';
      id += kHex[c >> 4];
      id += kHex[c & 15];
    }
  }
  return id;
}

std::string layer_label(const std::string& path) { return path.empty() ? "<root>" : path; }

std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : format_metric(v); }

/// A number from a metric value; NaN when absent or not a number ("inf"
/// strings of the report encoding count as infinite).
double number_of(const json* v) {
  if (!v) return std::nan("");
  if (v->is_number()) return v->get<double>();
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  return std::nan("");
}

const json* metric(const LayerMetrics& l, const char* name) {
  auto it = l.metrics.find(name);
  return it == l.metrics.end() ? nullptr : &it->second;
}

std::string fmt(double v) { return format_metric(json(v)); }

/// One line of a plot: a name, a CSS class, y values by x position (NaN = no point).
struct Series {
  std::string name;
  std::string css;
  std::vector<double> y;
};

/// An inline SVG line plot on a log10 y axis. `labels[i]` names point i
/// (tooltip), `links[i]` is its fragment ("" = none), `marked[i]` draws a
/// ring (a layer with a finding). `hline` > 0 draws a dashed horizontal line
/// labelled `hline_label`. Non-finite values are drawn as red crosses at the
/// top edge; zeros and negatives are left out (no place on a log axis).
std::string log_plot(const std::string& title, const std::vector<Series>& series, const std::vector<std::string>& labels,
                     const std::vector<std::string>& links, const std::vector<bool>& marked, double hline,
                     const std::string& hline_label, const std::string& x_title) {
  const double W = 760, H = 260, L = 64, R = 16, T = 28, B = 40;
  std::size_t n = labels.size();
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& s : series)
    for (double v : s.y)
      if (std::isfinite(v) && v > 0) {
        lo = std::min(lo, std::log10(v));
        hi = std::max(hi, std::log10(v));
      }
  if (hline > 0) {
    lo = std::min(lo, std::log10(hline));
    hi = std::max(hi, std::log10(hline));
  }
  std::ostringstream o;
  o << "<figure class=\"plot\"><figcaption>" << esc(title) << "</figcaption>";
  if (!std::isfinite(lo) || n == 0) {
    o << "<p class=\"muted\">no positive values to plot</p></figure>\n";
    return o.str();
  }
  lo = std::floor(lo);
  hi = std::ceil(hi);
  if (hi <= lo) hi = lo + 1;
  auto X = [&](std::size_t i) { return n <= 1 ? L + (W - L - R) / 2 : L + (W - L - R) * static_cast<double>(i) / (n - 1); };
  auto Y = [&](double v) { return T + (H - T - B) * (1.0 - (std::log10(v) - lo) / (hi - lo)); };
  char buf[160];
  o << "<svg viewBox=\"0 0 " << W << " " << H << "\" role=\"img\" aria-label=\"" << esc(title) << "\">";
  // Decade grid and labels.
  const int step = std::max(1, static_cast<int>(std::ceil((hi - lo) / 8)));
  for (int d = static_cast<int>(lo); d <= static_cast<int>(hi); d += step) {
    const double y = Y(std::pow(10.0, d));
    std::snprintf(buf, sizeof buf, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", L, y, W - R, y);
    o << buf;
    std::snprintf(buf, sizeof buf, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>", L - 6, y + 4, d);
    o << buf;
  }
  std::snprintf(buf, sizeof buf, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", L, H - B, W - R, H - B);
  o << buf;
  std::snprintf(buf, sizeof buf, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", L, T, L, H - B);
  o << buf;
  // X ticks: about ten.
  const std::size_t xstep = std::max<std::size_t>(1, (n + 9) / 10);
  for (std::size_t i = 0; i < n; i += xstep) {
    std::snprintf(buf, sizeof buf, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%zu</text>", X(i),
                  H - B + 16, i);
    o << buf;
  }
  std::snprintf(buf, sizeof buf, "<text class=\"axis-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (L + W - R) / 2,
                H - 6);
  o << buf << esc(x_title) << "</text>";
  if (hline > 0) {
    const double y = Y(hline);
    std::snprintf(buf, sizeof buf, "<line class=\"limit\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", L, y, W - R, y);
    o << buf;
    std::snprintf(buf, sizeof buf, "<text class=\"limit-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"start\">", L + 8, y - 5);
    o << buf << esc(hline_label) << "</text>";
  }
  for (const auto& s : series) {
    std::string path;
    bool pen = false;
    for (std::size_t i = 0; i < n && i < s.y.size(); ++i) {
      const double v = s.y[i];
      if (!(std::isfinite(v) && v > 0)) {
        pen = false;
        continue;
      }
      std::snprintf(buf, sizeof buf, "%s%.1f %.1f ", pen ? "L" : "M", X(i), Y(v));
      path += buf;
      pen = true;
    }
    if (!path.empty()) o << "<path class=\"line " << s.css << "\" d=\"" << path << "\"/>";
    for (std::size_t i = 0; i < n && i < s.y.size(); ++i) {
      const double v = s.y[i];
      if (std::isnan(v)) continue;  // not measured here
      const bool finite = std::isfinite(v);
      if ((finite && !(v > 0)) || v < 0) continue;
      const std::string tip = esc(labels[i] + ": " + s.name + " = " + (finite ? fmt(v) : std::string("inf")));
      const bool link = i < links.size() && !links[i].empty();
      if (link) o << "<a href=\"#" << links[i] << "\">";
      if (finite) {
        std::snprintf(buf, sizeof buf, "<circle class=\"pt %s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%s\">", s.css.c_str(), X(i), Y(v),
                      i < marked.size() && marked[i] ? "5" : "2.5");
        o << buf << "<title>" << tip << "</title></circle>";
        if (i < marked.size() && marked[i]) {
          std::snprintf(buf, sizeof buf, "<circle class=\"ring\" cx=\"%.1f\" cy=\"%.1f\" r=\"8\"/>", X(i), Y(v));
          o << buf;
        }
      } else {
        std::snprintf(buf, sizeof buf, "<text class=\"nonfinite\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">\u00d7<title>",
                      X(i), T + 4);
        o << buf << tip << "</title></text>";
      }
      if (link) o << "</a>";
    }
  }
  o << "</svg><div class=\"legend\">";
  for (const auto& s : series) o << "<span class=\"key " << s.css << "\"></span>" << esc(s.name) << " ";
  if (std::any_of(marked.begin(), marked.end(), [](bool b) { return b; }))
    o << "<span class=\"key ring-key\"></span>layer with a finding (click: its row)";
  o << "</div></figure>\n";
  return o.str();
}

/// The checkpoint timeline (issue: several checkpoints of one run). The
/// hook: `probes.timeline` = {"steps": [s0, s1, ...], "series": [{"name":
/// "layers.3 act.absmax", "values": [v0, v1, ...]}, ...]} (or "series" as an
/// object name -> values); every series is drawn as a line over the steps on
/// a log axis. Nothing when the document has no such entry.
/// The timeline probe's own document (src/probes/timeline/timeline.cpp: checkpoints,
/// layers PATH -> metric -> values, loss, first_mover) in that shape: the
/// loss, and every series of the first mover's layer.
json timeline_series(const json& t) {
  json out = {{"steps", json::array()}, {"series", json::array()}};
  if (t.contains("checkpoints") && t["checkpoints"].is_array())
    for (const auto& c : t["checkpoints"])
      out["steps"].push_back(c.is_object() && c.contains("step") && !c["step"].is_null() ? c["step"] : json(out["steps"].size()));
  if (t.contains("loss") && t["loss"].is_array()) out["series"].push_back({{"name", "loss"}, {"values", t["loss"]}});
  if (t.contains("first_mover") && t["first_mover"].is_object() && t.contains("layers") && t["layers"].is_object()) {
    const std::string layer = t["first_mover"].value("layer", std::string());
    if (t["layers"].contains(layer) && t["layers"][layer].is_object())
      for (const auto& [metric, values] : t["layers"][layer].items())
        out["series"].push_back({{"name", layer + " " + metric}, {"values", values}});
  }
  return out;
}

std::string render_timeline(const MetricsDoc& doc) {
  if (!doc.probes.is_object() || !doc.probes.contains("timeline")) return {};
  const json& t0 = doc.probes["timeline"];
  if (!t0.is_object()) return {};
  const json t = t0.contains("series") ? t0 : timeline_series(t0);
  if (!t.contains("series") || t["series"].empty()) return {};
  std::vector<Series> series;
  auto add = [&](const std::string& name, const json& values) {
    if (!values.is_array()) return;
    Series s{name, "s" + std::to_string(series.size() % 6), {}};
    for (const auto& v : values) s.y.push_back(number_of(&v));
    series.push_back(std::move(s));
  };
  const json& sj = t["series"];
  if (sj.is_array()) {
    for (const auto& e : sj)
      if (e.is_object()) add(e.value("name", std::string("series")), e.contains("values") ? e["values"] : json());
  } else if (sj.is_object()) {
    for (const auto& [k, v] : sj.items()) add(k, v);
  }
  if (series.empty()) return {};
  std::size_t n = 0;
  for (const auto& s : series) n = std::max(n, s.y.size());
  std::vector<std::string> labels(n);
  for (std::size_t i = 0; i < n; ++i) {
    const json* step = t.contains("steps") && t["steps"].is_array() && i < t["steps"].size() ? &t["steps"][i] : nullptr;
    labels[i] = "step " + (step ? value_text(*step) : std::to_string(i));
  }
  std::string steps_text;
  if (t.contains("steps") && t["steps"].is_array())
    for (const auto& s : t["steps"]) steps_text += (steps_text.empty() ? "" : ", ") + value_text(s);
  std::ostringstream o;
  o << "<section class=\"block\"><h3>Checkpoint timeline</h3>";
  if (!steps_text.empty()) o << "<p class=\"muted\">steps: " << esc(steps_text) << "</p>";
  o << log_plot("timeline: the series over checkpoints (log scale)", series, labels, {}, {}, 0, "",
                "checkpoint (in step order)");
  o << "</section>\n";
  return o.str();
}

void table_head(std::ostringstream& o, std::initializer_list<const char*> cols) {
  o << "<div class=\"scroll\"><table><thead><tr>";
  for (const char* c : cols) o << "<th>" << esc(c) << "</th>";
  o << "</tr></thead><tbody>\n";
}

std::string cell(const LayerMetrics& l, const char* name) {
  if (std::string nf = report_detail::nonfinite_cell(l, name); !nf.empty()) return nf;
  const json* v = metric(l, name);
  return v ? esc(value_text(*v)) : std::string("&ndash;");
}

void render_run(std::ostringstream& o, const ReportRun& run, int index, int count) {
  const ReportContext& ctx = run.ctx;
  const MetricsDoc* doc = run.doc;
  const bool failed = ctx.status == "error" || !doc;
  const std::string model = model_path(doc, ctx);
  const std::string mid = "m" + std::to_string(index);
  o << "<section class=\"run\" id=\"" << mid << "\">\n";
  o << "<h1>" << esc(model.empty() ? std::string("(no model)") : model);
  if (count > 1) o << " <span class=\"muted\">(" << index + 1 << " of " << count << ")</span>";
  o << "</h1>\n";

  // Verdict first.
  const SeverityCounts c = count_findings(failed ? std::vector<Finding>{} : run.findings);
  o << "<div class=\"verdict " << (failed ? "v-error" : ctx.exit_code ? "v-fail" : "v-pass") << "\">";
  if (failed) {
    o << "<div class=\"big\">normdoctor could not check this model</div><p class=\"errmsg\">"
      << esc(ctx.error_kind.empty() ? std::string("internal") : ctx.error_kind) << ": " << esc(ctx.error_message)
      << "</p>";
  } else {
    o << "<div class=\"counts\">"
      << "<span class=\"badge error\">" << c.error << " error" << (c.error == 1 ? "" : "s") << "</span>"
      << "<span class=\"badge warning\">" << c.warning << " warning" << (c.warning == 1 ? "" : "s") << "</span>"
      << "<span class=\"badge info\">" << c.info << " info</span></div>";
    std::string fail_on = ctx.options.is_object() && ctx.options.contains("fail_on") ? value_text(ctx.options["fail_on"])
                                                                                     : std::string();
    o << "<div class=\"big\">exit status " << ctx.exit_code << ": "
      << (ctx.exit_code ? "findings at or above --fail-on " + esc(fail_on) : std::string("passes --fail-on ") + esc(fail_on))
      << "</div>";
    std::string also;
    if (ctx.hidden > 0) also += std::to_string(ctx.hidden) + " below --severity " + ctx.severity + " not shown";
    if (ctx.suppressed > 0) also += (also.empty() ? "" : "; ") + std::to_string(ctx.suppressed) + " suppressed by the config";
    if (!ctx.skipped_rules.empty())
      also += (also.empty() ? "" : "; ") + std::to_string(ctx.skipped_rules.size()) + " rules could not run";
    if (!also.empty()) o << "<p class=\"muted\">" << esc(also) << "</p>";
  }
  o << "</div>\n";

  // Facts.
  o << "<dl class=\"facts\"><dt>tool</dt><dd>normdoctor " << esc(ctx.tool_version);
  if (!ctx.libtorch_version.empty()) o << " (libtorch " << esc(ctx.libtorch_version) << ")";
  o << "</dd>";
  if (doc) {
    const auto& m = doc->model;
    if (m.contains("kind")) o << "<dt>model</dt><dd>" << esc(value_text(m["kind"]));
    if (m.contains("parameters")) o << ", " << esc(value_text(m["parameters"])) << " parameters";
    if (m.contains("kind")) o << "</dd>";
    for (const auto& in : doc->inputs) {
      std::string line = in.name;
      if (in.info.contains("dtype")) line += " " + value_text(in.info["dtype"]);
      if (in.info.contains("shape")) line += " " + in.info["shape"].dump();
      if (in.info.contains("source")) line += " (" + value_text(in.info["source"]) + ")";
      o << "<dt>input</dt><dd>" << esc(line) << "</dd>";
    }
    if (doc->probes.is_object() && doc->probes.contains("loss") && doc->probes["loss"].is_object() &&
        doc->probes["loss"].contains("description"))
      o << "<dt>loss</dt><dd>" << esc(value_text(doc->probes["loss"]["description"])) << "</dd>";
  }
  if (ctx.config.is_object() && ctx.config.contains("file") && ctx.config["file"].is_string()) {
    o << "<dt>config</dt><dd>" << esc(ctx.config["file"].get<std::string>());
    if (ctx.config.contains("section") && ctx.config["section"].is_string())
      o << " [" << esc(ctx.config["section"].get<std::string>()) << "]";
    o << "</dd>";
  }
  o << "</dl>\n";
  if (failed) {
    o << "</section>\n";
    return;
  }

  // Findings.
  std::map<std::string, std::vector<std::size_t>> by_layer;  // layer path -> finding indices
  o << "<section class=\"block\"><h2>Findings</h2>";
  if (run.findings.empty()) o << "<p>No findings.</p>";
  else
    o << "<p class=\"tools\"><button type=\"button\" data-open=\"1\">expand all</button> "
         "<button type=\"button\" data-open=\"0\">collapse all</button></p>";
  std::vector<std::size_t> order(run.findings.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return run.findings[a].severity > run.findings[b].severity; });
  for (std::size_t k : order) {
    const Finding& f = run.findings[k];
    if (f.layer) by_layer[*f.layer].push_back(k);
    const std::string fid = mid + "-finding-" + std::to_string(k);
    o << "<details open class=\"finding " << severity_name(f.severity) << "\" id=\"" << fid << "\" data-rule=\"" << esc(f.rule_id)
      << "\"><summary><span class=\"sev " << severity_name(f.severity) << "\">" << severity_name(f.severity) << "</span> "
      << "<code class=\"rule\">" << esc(f.rule_id) << "</code> <span class=\"slug\">" << esc(f.failure_mode) << "</span>";
    if (f.layer)
      o << " at <a class=\"layer\" href=\"#" << layer_anchor(index, *f.layer) << "\"><code>" << esc(layer_label(*f.layer))
        << "</code></a>";
    else if (f.input)
      o << " at input <code>" << esc(*f.input) << "</code>";
    o << "<div class=\"msg\">" << esc(f.message) << "</div></summary>";
    if (f.evidence.is_object() && !f.evidence.empty()) {
      o << "<table class=\"evidence\"><tbody>";
      for (const auto& [key, v] : f.evidence.items())
        o << "<tr><th><code>" << esc(key) << "</code></th><td>" << esc(value_text(v)) << "</td></tr>";
      o << "</tbody></table>";
    }
    if (!f.fix.empty()) {
      o << "<div class=\"fixes\"><b>Fix</b><ol>";
      for (const auto& fx : f.fix) o << "<li>" << esc(fx) << "</li>";
      o << "</ol></div>";
    }
    if (f.synthetic_inputs) o << "<p class=\"muted\">measured on inputs normdoctor synthesized; severity lowered one level</p>";
    o << "<p class=\"muted\">more: <code>normdoctor explain " << esc(f.rule_id) << "</code></p></details>\n";
  }
  o << "</section>\n";

  // Depth plots over the leaf layers in execution order.
  std::vector<const LayerMetrics*> rows;
  for (const auto& l : doc->layers)
    if (layer_table_row(l) && l.exec_order >= 0) rows.push_back(&l);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const LayerMetrics* a, const LayerMetrics* b) { return a->exec_order < b->exec_order; });
  // Layers with findings that are not leaves still get a row (their anchor).
  std::set<std::string> in_rows;
  for (const auto* l : rows) in_rows.insert(l->path);
  std::vector<const LayerMetrics*> extra;
  for (const auto& [path, ks] : by_layer)
    if (!in_rows.count(path))
      if (const LayerMetrics* l = doc->find_layer(path)) extra.push_back(l);

  if (!rows.empty()) {
    std::vector<std::string> labels, links;
    std::vector<bool> marked;
    Series rms{"act.rms", "s0", {}}, absmax{"act.absmax", "s1", {}}, grad{"grad.out_norm", "s2", {}};
    for (const auto* l : rows) {
      labels.push_back(layer_label(l->path) + " (" + l->kind + ")");
      links.push_back(layer_anchor(index, l->path));
      marked.push_back(by_layer.count(l->path) > 0);
      rms.y.push_back(number_of(metric(*l, "act.rms")));
      absmax.y.push_back(number_of(metric(*l, "act.absmax")));
      grad.y.push_back(number_of(metric(*l, "grad.out_norm")));
    }
    o << "<section class=\"block\"><h2>Depth profiles</h2>";
    o << log_plot("Activations through depth (log scale); dashed: the fp16 maximum", {rms, absmax}, labels, links, marked,
                  kFp16Max, "fp16 max 65504", "leaf module, execution order");
    if (std::any_of(grad.y.begin(), grad.y.end(), [](double v) { return std::isfinite(v) && v > 0; }))
      o << log_plot("Gradient norm of each module's output through depth (log scale)", {grad}, labels, links, marked, 0, "",
                    "leaf module, execution order");
    o << "</section>\n";
  }
  o << render_timeline(*doc);

  // Layer table.
  if (!rows.empty() || !extra.empty()) {
    o << "<section class=\"block\"><h2>Layers</h2><p class=\"muted\">leaf modules in execution order";
    if (!extra.empty()) o << ", then the containers a finding names";
    if (const std::string pass = layer_table_pass(*doc); !pass.empty()) o << "; measured in " << esc(pass);
    o << "</p>";
    table_head(o, {"#", "path", "kind", "act.absmax", "act.rms", "grad.out_norm", "findings"});
    auto row = [&](const LayerMetrics* l) {
      auto f = by_layer.find(l->path);
      o << "<tr id=\"" << layer_anchor(index, l->path) << "\"" << (f != by_layer.end() ? " class=\"flagged\"" : "") << "><td>"
        << l->exec_order << "</td><td><code>" << esc(layer_label(l->path)) << "</code></td><td>" << esc(l->kind)
        << "</td><td class=\"num\">" << cell(*l, "act.absmax") << "</td><td class=\"num\">" << cell(*l, "act.rms")
        << "</td><td class=\"num\">" << cell(*l, "grad.out_norm") << "</td><td>";
      if (f != by_layer.end())
        for (std::size_t k : f->second)
          o << "<a class=\"sev " << severity_name(run.findings[k].severity) << "\" href=\"#" << mid << "-finding-" << k << "\">"
            << esc(run.findings[k].rule_id) << "</a> ";
      o << "</td></tr>\n";
    };
    for (const auto* l : rows) row(l);
    for (const auto* l : extra) row(l);
    o << "</tbody></table></div></section>\n";
  }

  // Normalization axes.
  std::vector<const LayerMetrics*> norms;
  for (const auto& l : doc->layers)
    if (l.metrics.count("norm.op") && l.metrics.count("norm.reduced_axes")) norms.push_back(&l);
  if (!norms.empty()) {
    o << "<section class=\"block\"><h2>Normalization axes</h2><p class=\"muted\">input layout by role; the axes the "
         "statistics are taken over</p>";
    table_head(o, {"path", "op", "input", "reduced over", "eps"});
    for (const auto* l : norms)
      o << "<tr><td><a href=\"#" << layer_anchor(index, l->path) << "\"><code>" << esc(layer_label(l->path))
        << "</code></a></td><td>" << cell(*l, "norm.op") << "</td><td>" << cell(*l, "norm.input_layout") << "</td><td>"
        << cell(*l, "norm.reduced_axes") << "</td><td class=\"num\">" << cell(*l, "norm.eps") << "</td></tr>\n";
    o << "</tbody></table></div></section>\n";
  }

  // Residual blocks.
  if (doc->probes.is_object() && doc->probes.contains("architecture") && doc->probes["architecture"].is_object()) {
    const json blocks = doc->probes["architecture"].value("blocks", json::array());
    if (blocks.is_array() && !blocks.empty()) {
      auto mm = [&](const char* k) {
        auto it = doc->model_metrics.find(k);
        return it == doc->model_metrics.end() ? std::string("-") : value_text(it->second);
      };
      o << "<section class=\"block\"><h2>Residual blocks</h2><p class=\"muted\">" << esc(mm("arch.placement")) << ", "
        << esc(mm("arch.blocks")) << " blocks; final norm: " << esc(mm("arch.final_norm"))
        << (mm("arch.final_norm") == "n/a" && mm("arch.final_norm_layer") != "-" && !mm("arch.final_norm_layer").empty()
                ? ", " + esc(mm("arch.final_norm_layer")) + " before the head"
                : std::string())
        << "</p>";
      table_head(o, {"block", "placement", "stream RMS in", "stream RMS out", "norms"});
      for (const auto& b : blocks) {
        if (!b.is_object()) continue;
        std::string ns;
        for (const auto& n : b.value("norms", json::array())) ns += (ns.empty() ? "" : ", ") + value_text(n);
        const std::string path = b.value("block", std::string());
        o << "<tr><td><a href=\"#" << layer_anchor(index, path) << "\"><code>" << esc(layer_label(path))
          << "</code></a></td><td>" << esc(b.value("placement", std::string())) << "</td><td class=\"num\">"
          << esc(b.contains("stream_rms_in") ? value_text(b["stream_rms_in"]) : "-") << "</td><td class=\"num\">"
          << esc(b.contains("stream_rms_out") ? value_text(b["stream_rms_out"]) : "-") << "</td><td>" << esc(ns)
          << "</td></tr>\n";
      }
      o << "</tbody></table></div></section>\n";
    }
  }

  // BatchNorm statistics.
  std::vector<const LayerMetrics*> bns;
  for (const auto& l : doc->layers)
    if (l.metrics.count("bn.channels")) bns.push_back(&l);
  if (!bns.empty()) {
    o << "<section class=\"block\"><h2>BatchNorm statistics</h2><p class=\"muted\">the sample's eval-mode statistics "
         "against the running statistics</p>";
    table_head(o, {"path", "mean z", "var ratio", "values/channel", "noise", "batches tracked"});
    for (const auto* l : bns)
      o << "<tr><td><a href=\"#" << layer_anchor(index, l->path) << "\"><code>" << esc(layer_label(l->path))
        << "</code></a></td><td class=\"num\">" << cell(*l, "bn.mean_z") << "</td><td class=\"num\">"
        << cell(*l, "bn.var_ratio") << "</td><td class=\"num\">" << cell(*l, "bn.values_per_channel")
        << "</td><td class=\"num\">" << cell(*l, "bn.mean_noise") << "</td><td class=\"num\">"
        << cell(*l, "bn.num_batches_tracked") << "</td></tr>\n";
    o << "</tbody></table></div></section>\n";
  }

  // Probes that could not run, and the rules they feed.
  std::vector<std::pair<std::string, const ProbeStatus*>> down;
  for (const auto& [name, st] : ctx.probe_statuses)
    if (st.status != "ok") down.emplace_back(name, &st);
  o << "<section class=\"block\"><h2>Probes that could not run</h2>";
  if (down.empty()) {
    o << "<p>Every probe ran.</p>";
  } else {
    table_head(o, {"probe", "status", "why", "rules not evaluated"});
    for (const auto& [name, st] : down) {
      std::string ids;
      for (const auto& s : ctx.skipped_rules)
        if (s.probe == name) ids += (ids.empty() ? "" : ", ") + s.rule_id;
      o << "<tr class=\"probe-" << esc(st->status) << "\"><td><code>" << esc(name) << "</code></td><td>" << esc(st->status)
        << "</td><td>" << esc(st->describe()) << "</td><td>" << esc(ids) << "</td></tr>\n";
    }
    o << "</tbody></table></div>";
  }
  o << "</section>\n";

  if (!ctx.notes.empty()) {
    o << "<section class=\"block\"><h2>Notes</h2><ul>";
    for (const auto& n : ctx.notes)
      o << "<li>" << esc((n.file.empty() ? "" : n.file + (n.line > 0 ? ":" + std::to_string(n.line) : "") + ": ") + n.text)
        << "</li>";
    o << "</ul></section>\n";
  }
  if (!ctx.rerun_hint.empty()) o << "<section class=\"block\"><h2>With real data</h2><pre>" << esc(ctx.rerun_hint) << "</pre></section>\n";
  o << "</section>\n";
}

const char* kStyle = R"CSS(
:root{--fg:#1d2330;--muted:#5c6473;--bg:#fff;--line:#d9dde5;--err:#b3261e;--warn:#a15c00;--info:#1b6ca8;--ok:#1e7d32}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:#f4f6f9;margin:0;padding:24px}
main{max-width:1000px;margin:0 auto}
h1{font-size:22px;margin:0 0 12px;word-break:break-all}
h2{font-size:18px;margin:0 0 10px}
h3{font-size:16px;margin:0 0 8px}
code,pre{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:13px}
.run{background:var(--bg);border:1px solid var(--line);border-radius:10px;padding:20px 24px;margin-bottom:28px}
.muted{color:var(--muted);font-size:13px}
.verdict{border-radius:8px;padding:14px 18px;margin-bottom:14px;border-left:6px solid}
.v-pass{background:#eaf6ec;border-color:var(--ok)}
.v-fail{background:#fdf1e3;border-color:var(--warn)}
.v-error{background:#fde9e7;border-color:var(--err)}
.big{font-size:17px;font-weight:600;margin-top:6px}
.errmsg{font-family:monospace;white-space:pre-wrap}
.counts .badge{display:inline-block;padding:2px 10px;border-radius:12px;margin-right:8px;color:#fff;font-weight:600}
.badge.error,.sev.error{background:var(--err)}
.badge.warning,.sev.warning{background:var(--warn)}
.badge.info,.sev.info{background:var(--info)}
.sev{color:#fff;border-radius:4px;padding:0 6px;font-size:12px;font-weight:600;text-decoration:none}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0 0 16px;font-size:14px}
.facts dt{color:var(--muted)}.facts dd{margin:0;word-break:break-all}
.block{margin-top:22px}
.finding{border:1px solid var(--line);border-left:5px solid;border-radius:6px;padding:8px 12px;margin:10px 0;background:#fcfcfd}
.finding.error{border-left-color:var(--err)}.finding.warning{border-left-color:var(--warn)}.finding.info{border-left-color:var(--info)}
.finding summary{cursor:pointer}
.finding .msg{margin:4px 0 2px 0}
.finding .rule{font-weight:700}
.finding .slug{color:var(--muted)}
a.layer{color:var(--info)}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f6;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums;font-family:monospace}
table.evidence{width:auto;margin:6px 0}
table.evidence th{background:none;font-weight:normal}
.scroll{overflow-x:auto;max-height:560px;overflow-y:auto;border:1px solid var(--line);border-radius:6px}
tr.flagged td{background:#fff7e8}
tr:target td{background:#ffe9a8}
details:target{box-shadow:0 0 0 3px #ffd166}
.fixes ol{margin:4px 0 4px 18px;padding:0}
.tools button{font:inherit;font-size:13px;padding:2px 10px;border:1px solid var(--line);border-radius:5px;background:#fff;cursor:pointer}
figure.plot{margin:10px 0 18px}
figure.plot figcaption{font-weight:600;font-size:14px;margin-bottom:4px}
svg{width:100%;height:auto;background:#fff;border:1px solid var(--line);border-radius:6px}
svg .grid{stroke:#e6e9ef;stroke-width:1}
svg .axis{stroke:#8a93a3;stroke-width:1}
svg .tick{font-size:11px;fill:var(--muted)}
svg .axis-title{font-size:12px;fill:var(--muted)}
svg .limit{stroke:var(--err);stroke-width:1.5;stroke-dasharray:6 4}
svg .limit-label{font-size:12px;fill:var(--err)}
svg .line{fill:none;stroke-width:2}
svg .ring{fill:none;stroke:var(--err);stroke-width:2}
svg .nonfinite{fill:var(--err);font-size:16px;font-weight:700}
.s0{stroke:#1b6ca8;fill:#1b6ca8}.s1{stroke:#e07b00;fill:#e07b00}.s2{stroke:#2e8b57;fill:#2e8b57}
.s3{stroke:#8e44ad;fill:#8e44ad}.s4{stroke:#c0392b;fill:#c0392b}.s5{stroke:#555;fill:#555}
.legend{font-size:12px;color:var(--muted);margin-top:4px}
.legend .key{display:inline-block;width:14px;height:4px;margin:0 4px 2px 10px;vertical-align:middle}
.legend .key.s0{background:#1b6ca8}.legend .key.s1{background:#e07b00}.legend .key.s2{background:#2e8b57}
.legend .key.s3{background:#8e44ad}.legend .key.s4{background:#c0392b}.legend .key.s5{background:#555}
.legend .ring-key{width:10px;height:10px;border:2px solid var(--err);border-radius:50%;background:none}
#js-errors:empty{display:none}
#js-errors{color:var(--err);font-family:monospace}
footer{color:var(--muted);font-size:12px;text-align:center}
)CSS";

// Expand/collapse all findings; script errors are written into #js-errors
// (the browser test reads the DOM).
const char* kScript = R"JS(
window.addEventListener('error', function (e) {
  var box = document.getElementById('js-errors');
  if (box) box.textContent += 'script error: ' + e.message + '\n';
});
document.addEventListener('click', function (e) {
  var b = e.target.closest ? e.target.closest('button[data-open]') : null;
  if (!b) return;
  var open = b.getAttribute('data-open') === '1';
  var run = b.closest('section.run');
  run.querySelectorAll('details.finding').forEach(function (d) { d.open = open; });
});
document.documentElement.setAttribute('data-script', 'ran');
)JS";

}  // namespace

std::string render_html(const std::vector<ReportRun>& runs) {
  std::ostringstream o;
  std::string title = "normdoctor report";
  if (runs.size() == 1) title += ": " + model_path(runs[0].doc, runs[0].ctx);
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
       "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
       "script-src 'unsafe-inline'; img-src data:\">"
    << "<title>" << esc(title) << "</title><style>" << kStyle << "</style></head>\n<body><main>\n";
  o << "<div id=\"js-errors\"></div>\n";
  if (runs.size() > 1) {
    o << "<section class=\"run\"><h1>normdoctor: " << runs.size() << " models</h1><ul>";
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const auto& r = runs[i];
      const bool failed = r.ctx.status == "error" || !r.doc;
      o << "<li><a href=\"#m" << i << "\">" << esc(model_path(r.doc, r.ctx)) << "</a>: "
        << (failed ? "could not be checked (" + esc(r.ctx.error_kind) + ")" : esc(counts_text(count_findings(r.findings))))
        << ", exit " << r.ctx.exit_code << "</li>";
    }
    o << "</ul></section>\n";
  }
  for (std::size_t i = 0; i < runs.size(); ++i) render_run(o, runs[i], static_cast<int>(i), static_cast<int>(runs.size()));
  o << "<footer>normdoctor " << esc(runs.empty() ? std::string() : runs[0].ctx.tool_version)
    << " &middot; this page is self-contained: no network access</footer>\n";
  o << "</main><script>" << kScript << "</script></body></html>\n";
  return o.str();
}

}  // namespace nd
