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
  // An eval forward that draws random numbers beyond dropout (a baked
  // drop-path): batch dependence was measured on copies with the same draws
  // (floor: the precision), but the sequence passes change shapes and so the
  // draws; the reordered batch, whose draws moved too, is their floor.
  auto rnd = mm.find("batchdep.random_eval");
  auto rr = mm.find("batchdep.reorder_rel_diff");
  if (rnd != mm.end() && rnd->second == true && rr != mm.end() && rr->second.is_number() && rr->second.get<double>() > floor) {
    floor = rr->second.get<double>();
    from = "the eval pass with the batch reordered (eval mode draws random numbers)";
  }
  // No floor at all where the eval forward draws random numbers and the
  // reordered batch could not be compared (its outputs took other shapes):
  // VITS samples durations and noise whose layout follows the length, so
  // padding changes the draws at the real positions too (eval55: SEQ004 on
  // a change of 1.18 that is 7e-7 with the noise off). No padding or length
  // change is told from the draws then: "nan" over the floor, and said.
  bool unmeasurable = false;
  const bool compared = mm.count("pad.rel_diff") > 0 || mm.count("seqlen.rel_diff") > 0;
  if (compared && it != mm.end() && it->second.is_string() && s.inst && !s.inst->unswitched_random_ops().empty()) {
    unmeasurable = true;
    const auto& r = s.inst->unswitched_random_ops().front();
    from = "not measurable: the eval forward draws random numbers (" + r.second.substr(0, r.second.find(' ')) + " in " +
           (r.first.empty() ? std::string("the model's") : r.first + "'s") +
           " forward) and the reordered batch gave outputs of other shapes";
    s.doc.assumptions.push_back(
        "padding and sequence-length changes are not judged: the eval forward draws random numbers (" +
        r.second.substr(0, r.second.find(' ')) + " in " + (r.first.empty() ? std::string("the model's") : r.first + "'s") +
        " forward) whose draws move with the length, and no floor for them could be measured (the reordered batch gave outputs "
        "of other shapes)");
  }
  // A difference over the floor ("inf" over a floor of 0).
  auto over = [&](double diff) {
    if (unmeasurable) return MetricValue("nan");
    return floor > 0 ? metric_number(diff / floor) : MetricValue(diff > 0 ? "inf" : "nan");
  };
  for (const char* p : {"pad", "seqlen"}) {
    auto d = mm.find(std::string(p) + ".rel_diff");
    if (d == mm.end() || !d->second.is_number()) continue;
    mm[std::string(p) + ".noise_floor"] = floor;
    mm[std::string(p) + ".noise_floor_from"] = from;
    mm[std::string(p) + ".over_floor"] = over(d->second.get<double>());
  }
  // The train-mode change alone (SEQ009: the route the train pass takes
  // when the eval pass's larger change names another).
  if (auto d = mm.find("pad.rel_diff_train"); d != mm.end() && d->second.is_number())
    mm["pad.train_over_floor"] = over(d->second.get<double>());
  // And the eval-mode change alone (SEQ010: the route inference takes when
  // the train pass's larger change names a BatchNorm).
  if (auto d = mm.find("pad.rel_diff_eval"); d != mm.end() && d->second.is_number())
    mm["pad.eval_over_floor"] = over(d->second.get<double>());
  // A traced file with the sample's length baked in (seq.trace_baked_length,
  // probe_sequence): the largest change the padding or length comparison
  // measured above its floor where no normalization, pooling or
  // convolution over time is where it enters (those are structural, and
  // keep their rules): SEQ008 reports it at info instead of SEQ004, SEQ005
  // and SEQ007.
  auto baked = mm.find("seq.trace_baked_length");
  if (baked != mm.end() && baked->second == true) {
    double effect = 0;
    std::string how;
    auto is_true = [&](const char* k) {
      auto f = mm.find(k);
      return f != mm.end() && f->second == true;
    };
    for (const char* p : {"pad", "seqlen"}) {
      const bool structural = std::string(p) == "pad" ? is_true("pad.via_norm") || is_true("pad.via_pooling_or_conv")
                                                      : is_true("seqlen.via_norm");
      if (structural) continue;
      auto d = mm.find(std::string(p) + ".rel_diff");
      auto o = mm.find(std::string(p) + ".over_floor");
      if (d == mm.end() || !d->second.is_number() || o == mm.end()) continue;
      const bool above = o->second.is_number() ? o->second.get<double>() > 10 : o->second == "inf";
      if (!above || !(d->second.get<double>() > effect)) continue;
      effect = d->second.get<double>();
      how = std::string(p) == "pad" ? "the batch is padded" : "the sequence is shortened";
    }
    mm["seq.baked_length_effect"] = effect;
    mm["seq.baked_length_how"] = how.empty() ? std::string("the length changes") : how;
  }
}

const std::vector<std::string>& noise_floors_writes() {
  static const std::vector<std::string> names = {
      "pad.noise_floor", "pad.noise_floor_from", "pad.over_floor", "pad.train_over_floor", "pad.eval_over_floor", "seqlen.noise_floor",
      "seqlen.noise_floor_from", "seqlen.over_floor", "seq.baked_length_effect", "seq.baked_length_how"};
  return names;
}

}  // namespace nd
