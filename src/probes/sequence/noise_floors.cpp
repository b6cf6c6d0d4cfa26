// The noise_floors step (issue 16.11): the sequence comparisons judged against
// the floor measured in the same run. Runs after probe_sequence.
#include <cmath>
#include <string>

#include "probes/sequence/sequence.h"

namespace nd {

void apply_noise_floors(Session& s) {
  // The floor of the sequence comparisons (issue 16.11): the same eval pass
  // with the batch reordered (batchdep.noise_floor), measured in this run
  // with dropout off like the sequence passes. 0 (deterministic kernels) or
  // not measured (a batch of one): every difference is above it.
  auto& mm = s.doc.model_metrics;
  double floor = 0;
  std::string from = "not measured (a batch of one example): 0 assumed";
  auto it = mm.find("batchdep.noise_floor");
  if (it != mm.end() && it->second.is_number()) {
    floor = it->second.get<double>();
    from = "the eval pass with the batch reordered";
  }
  for (const char* p : {"pad", "seqlen"}) {
    auto d = mm.find(std::string(p) + ".rel_diff");
    if (d == mm.end() || !d->second.is_number()) continue;
    const double diff = d->second.get<double>();
    mm[std::string(p) + ".noise_floor"] = floor;
    mm[std::string(p) + ".noise_floor_from"] = from;
    mm[std::string(p) + ".over_floor"] = floor > 0 ? metric_number(diff / floor) : MetricValue(diff > 0 ? "inf" : "nan");
  }
}

const std::vector<std::string>& noise_floors_writes() {
  static const std::vector<std::string> names = {
      "pad.noise_floor", "pad.noise_floor_from", "pad.over_floor", "seqlen.noise_floor",
      "seqlen.noise_floor_from", "seqlen.over_floor"};
  return names;
}

}  // namespace nd
