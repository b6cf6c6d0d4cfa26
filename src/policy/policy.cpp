#include "policy/policy.h"

#include <algorithm>
#include <set>

namespace nd {

const std::vector<ProbeInfo>& known_probes() {
  // The isolated probes (Session::run_probe in src/probes/engine.cpp) and
  // the parts of them that rules name separately.
  static const std::vector<ProbeInfo> kProbes = {
      {"inputs", false, "", ""},
      {"timeline", true, "runs with two or more --weights checkpoints", ""},
      {"gain_convention", true, "runs only with --weights", ""},
      {"forward_backward", false, "", ""},
      {"gradients", true, "the backward pass did not run", "forward_backward"},
      {"update", true, "runs only with --lr or --optimizer-state", ""},
      {"normalization", false, "", ""},
      {"batch_dependence", false, "", "normalization"},
      {"fast_path", false, "", ""},
      {"architecture", false, "", ""},
      {"features", false, "", ""},
      {"sequence", false, "", ""},
      {"axes", false, "", "sequence"},
      {"padding", true, "the padding probe did not run (it runs on models with sequence inputs)", "sequence"},
      {"sequence_length", true, "the sequence-length probe did not run (it runs on models with sequence inputs)",
       "sequence"},
      {"precision", true, "runs only with --precision fp16 or bf16", ""},
      {"replay", true, "runs only with --lr and --steps N", ""},
  };
  return kProbes;
}

bool is_known_probe(const std::string& name) {
  const auto& p = known_probes();
  return std::any_of(p.begin(), p.end(), [&](const ProbeInfo& i) { return i.name == name; });
}

std::string ProbeStatus::describe() const {
  if (status == "skipped") return reason.empty() ? std::string("skipped") : reason;
  if (status != "error") return {};
  std::string s = "failed";
  if (!pass.empty()) s += " in pass " + pass;
  if (!error_kind.empty()) s += " (" + error_kind + ")";
  if (!error_message.empty()) s += ": " + error_message;
  return s;
}

namespace {

std::string text_of(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return {};
  return v.dump();
}

/// An explicit status object (the contract).
ProbeStatus from_contract(const nlohmann::json& p) {
  ProbeStatus s;
  s.status = text_of(p["status"]);
  if (s.status != "ok" && s.status != "error" && s.status != "skipped") s.status = "error";
  if (p.contains("reason")) s.reason = text_of(p["reason"]);
  if (p.contains("pass")) s.pass = text_of(p["pass"]);
  if (p.contains("error")) {
    const auto& e = p["error"];
    if (e.is_object()) {
      if (e.contains("kind")) s.error_kind = text_of(e["kind"]);
      if (e.contains("message")) s.error_message = text_of(e["message"]);
    } else {
      s.error_message = text_of(e);
    }
  }
  return s;
}

}  // namespace

std::map<std::string, ProbeStatus> probe_statuses(const MetricsDoc& doc) {
  std::map<std::string, ProbeStatus> out;
  const nlohmann::json& probes = doc.probes.is_object() ? doc.probes : nlohmann::json::object();
  auto seq = doc.model_metrics.find("layout.sequence");
  const bool no_sequence = seq != doc.model_metrics.end() && seq->second.is_boolean() && !seq->second.get<bool>();
  for (const auto& info : known_probes()) {
    ProbeStatus s;
    auto it = probes.find(info.name);
    if (it != probes.end() && it->is_object() && it->contains("status")) {
      s = from_contract(*it);
    } else if (it == probes.end()) {
      if (info.optional) {
        s.status = "skipped";
        s.reason = (info.name == "padding" || info.name == "sequence_length") && no_sequence
                       ? "the model has no sequence inputs (layout.sequence is false; --seq-dim names the time axis)"
                       : info.skipped;
      }
    } else if ((info.name == "forward_backward" || info.name == "update") && it->is_object() && it->contains("error") &&
               !(*it)["error"].is_null()) {
      s.status = "error";
      s.pass = it->contains("pass") ? text_of((*it)["pass"]) : std::string("train");
      s.error_message = text_of((*it)["error"]);
    }
    if (!info.parent.empty()) {
      auto p = out.find(info.parent);  // parents come first in known_probes()
      if (p != out.end() && p->second.status != "ok" && s.status != "error") s = p->second;
    }
    out[info.name] = s;
  }
  for (const auto& [name, p] : probes.items())
    if (!out.count(name) && p.is_object() && p.contains("status")) out[name] = from_contract(p);
  return out;
}

std::vector<SkippedRule> skipped_rules(const std::vector<Rule>& rules, const std::vector<Finding>& findings,
                                       const std::map<std::string, ProbeStatus>& statuses) {
  std::set<std::string> fired;
  for (const auto& f : findings) fired.insert(f.rule_id);
  std::vector<SkippedRule> out;
  for (const auto& r : rules) {
    if (r.probe.empty() || fired.count(r.id)) continue;
    auto it = statuses.find(r.probe);
    if (it == statuses.end() || it->second.status == "ok") continue;
    const std::string what = it->second.status == "skipped" ? " did not run: " : " ";
    out.push_back({r.id, r.probe, "probe " + r.probe + what + it->second.describe()});
  }
  return out;
}

int findings_exit_code(const std::vector<Finding>& findings, const std::string& fail_on, bool exit_zero) {
  if (exit_zero || fail_on == "never") return 0;
  const Severity level = parse_severity(fail_on, "--fail-on");
  return std::any_of(findings.begin(), findings.end(), [&](const Finding& f) { return f.severity >= level; }) ? 1 : 0;
}

}  // namespace nd
