// Findings policy: which rules could not run (their probe did not run or
// failed), so reports show them as skipped instead of passed. Torch-free.
//
// The probe status contract (DESIGN.md, "Passes and probes"): in the metrics
// document `probes.<name>` is an object with `status` "ok" | "error" |
// "skipped", a `reason` (skipped), and for an error the `pass` and
// `error` {kind, message}. Documents without a status (written before the
// contract, or by probes that do not set it yet) are read by the rules
// below (probe_statuses): an optional probe that left no entry did not run.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "metrics/metrics.h"
#include "rules/rules.h"

namespace nd {

/// A probe that rule files may name in their `probe` key.
struct ProbeInfo {
  std::string name;      ///< "precision": also its key under `probes` in the metrics document
  bool optional = false; ///< runs only when asked for or when the model allows it
  std::string skipped;   ///< why an optional probe without an entry did not run
  /// The isolated probe this one is part of ("sequence" for "axes"): when
  /// the parent failed or was skipped, so was this one. Empty: isolated
  /// itself (src/probes/engine.cpp, Session::run_probe).
  std::string parent;
};

/// The probes rule files may name, in the order the pipeline runs them.
const std::vector<ProbeInfo>& known_probes();

/// True when `name` is one of known_probes().
bool is_known_probe(const std::string& name);

/// What became of one probe in a run.
struct ProbeStatus {
  std::string status = "ok";  ///< "ok" | "error" | "skipped"
  std::string reason;         ///< skipped: why (from the document or known_probes())
  std::string pass;           ///< error: the pass that failed ("train")
  std::string error_kind;     ///< error: the error kind (src/core/error.h), may be empty
  std::string error_message;  ///< error: the message
  /// One sentence for reports: "" for ok, the reason for skipped,
  /// "failed in pass train (model_run): message" for an error.
  std::string describe() const;
};

/// The status of every known probe, and of any other entry of doc.probes
/// that carries a `status`. An explicit `status` wins; without one: an
/// optional probe with no entry is skipped with known_probes()' reason
/// (padding and sequence_length say "the model has no sequence inputs" when
/// model metric layout.sequence is false); forward_backward and update with
/// an `error` entry (the train pass raised) are errors; a probe whose
/// parent (ProbeInfo::parent) is not ok has the parent's status; everything
/// else is ok.
std::map<std::string, ProbeStatus> probe_statuses(const MetricsDoc& doc);

/// A rule that did not run, and why.
struct SkippedRule {
  std::string rule_id;
  std::string probe;
  std::string reason;  ///< "probe precision did not run: runs only with --precision fp16 or bf16"
};

/// The rules among `rules` whose probe's status is not "ok", in `rules`
/// order. A rule with findings ran (its evidence exists) and is never
/// skipped; a rule without a `probe` key is never skipped.
std::vector<SkippedRule> skipped_rules(const std::vector<Rule>& rules, const std::vector<Finding>& findings,
                                       const std::map<std::string, ProbeStatus>& statuses);

/// The exit code of a run that measured (0 or 1): 1 when a finding is at or
/// above `fail_on` ("info" | "warning" | "error"; "never" never fails) and
/// `exit_zero` is false. Every finding the config kept counts, also those
/// below --severity. Throws nd::Error (usage) for an unknown level.
int findings_exit_code(const std::vector<Finding>& findings, const std::string& fail_on, bool exit_zero);

}  // namespace nd
