// The text report's timeline table (--weights with 2+ checkpoints): layers x
// checkpoints of the first mover's statistic, or of the activation RMS when
// nothing moved. Reads probes.timeline (docs/metrics.md "Checkpoints and
// timeline"); the JSON report carries every series.
#include <algorithm>
#include <sstream>

#include "report/report_common.h"
#include "rules/rules.h"

namespace nd::report_detail {

namespace {

std::string cell(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return format_metric(v);
}

std::string pad(const std::string& s, std::size_t w) { return s.size() >= w ? s : std::string(w - s.size(), ' ') + s; }

std::string short_label(const nlohmann::json& ck, std::size_t i) {
  if (ck.contains("step") && ck["step"].is_number()) return std::to_string(ck["step"].get<int64_t>());
  return "#" + std::to_string(i + 1);
}

}  // namespace

std::string render_timeline_text(const MetricsDoc& doc, std::size_t max_layers) {
  if (!doc.probes.contains("timeline")) return "";
  const auto& tl = doc.probes["timeline"];
  const auto& cks = tl["checkpoints"];
  const bool mover = tl.contains("first_mover");
  const std::string metric = mover ? tl["first_mover"]["metric"].get<std::string>() : "act.rms";
  std::ostringstream out;
  out << "\ntimeline (" << cks.size() << " checkpoints, " << metric
      << (mover ? " of every layer; first mover " + tl["first_mover"]["layer"].get<std::string>() + " marked *"
                : " of every layer; no layer left its early range")
      << ")\n";
  // Columns: at most 12 checkpoints (first 6 and last 6).
  std::vector<std::size_t> cols;
  const std::size_t n = cks.size();
  for (std::size_t i = 0; i < n; ++i)
    if (n <= 12 || i < 6 || i >= n - 6) cols.push_back(i);
  std::size_t name_w = 5;
  std::vector<std::string> rows;
  for (const auto& l : doc.layers)
    if (tl["layers"].contains(l.path) && tl["layers"][l.path].contains(metric)) rows.push_back(l.path);
  // The column is as wide as the longest path: module paths are never cut
  // (README; eval41 read four attention projections cut to one name).
  for (const auto& r : rows) name_w = std::max(name_w, r.size() + 2);
  out << "  " << std::string(name_w, ' ');
  for (std::size_t k = 0; k < cols.size(); ++k) {
    if (n > 12 && k == 6) out << "  ...";
    out << pad(short_label(cks[cols[k]], cols[k]), 9);
  }
  out << "   (step)\n";
  // Without --target the loss is a random projection of the output, which
  // grows with the output's size, not with the training loss (eval50: a
  // healthy run's row climbed 1.67 -> 45.5 while its next-token loss fell
  // 6.28 -> 0.87): the row says so.
  const bool projection = doc.probes.contains("loss") && doc.probes["loss"].is_object() &&
                          doc.probes["loss"].value("description", "").rfind("random projection", 0) == 0;
  const std::string loss_label = projection ? "loss*" : "loss";
  out << "  " << pad(loss_label, name_w);
  for (std::size_t k = 0; k < cols.size(); ++k) {
    if (n > 12 && k == 6) out << "     ";
    out << pad(cell(tl["loss"][cols[k]]), 9);
  }
  out << '\n';
  std::size_t shown = 0;
  for (const auto& r : rows) {
    if (++shown > max_layers) {
      out << "  ... " << (rows.size() - max_layers) << " more layers in the JSON report (probes.timeline)\n";
      break;
    }
    const bool star = mover && tl["first_mover"]["layer"] == r;
    std::string name = (star ? "* " : "  ") + (r.empty() ? std::string("<root>") : r);
    out << "  " << name << std::string(name_w - name.size(), ' ');
    const auto& xs = tl["layers"][r][metric];
    for (std::size_t k = 0; k < cols.size(); ++k) {
      if (n > 12 && k == 6) out << "     ";
      out << pad(cell(xs[cols[k]]), 9);
    }
    out << '\n';
  }
  if (tl.contains("first_nonfinite"))
    out << "  first non-finite: " << tl["first_nonfinite"]["what"].get<std::string>() << " of "
        << tl["first_nonfinite"]["checkpoint"].get<std::string>() << " at "
        << (tl["first_nonfinite"]["layer"].get<std::string>().empty() ? std::string("<root>")
                                                                       : tl["first_nonfinite"]["layer"].get<std::string>())
        << '\n';
  if (projection)
    out << "  (loss*: a random projection of the output, which grows with the output's size; not the training loss: "
           "give --target for that)\n";
  return out.str();
}

}  // namespace nd::report_detail
