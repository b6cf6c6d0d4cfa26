#include "cli/cli.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "build_info.h"
#include "cli/output.h"
#include "cli/watchdog.h"
#include "config/config.h"
#include "core/error.h"
#include "policy/policy.h"
#include "probes/engine.h"
#include "report/report.h"
#include "rules/rule_cases.h"
#include "rules/rules.h"
#include "rules/suggest.h"

namespace nd {
namespace fs = std::filesystem;

namespace {

struct CheckArgs {
  CheckOptions engine;
  std::vector<std::string> models;  ///< model files or folders, in the order given
  std::vector<std::string> formats;
  std::vector<std::string> outputs;
  std::string fail_on = "warning";
  bool exit_zero = false;
  std::string color = "auto";
  std::string rules_dir;
  bool quiet = false;
  int verbose = 0;
  int64_t seed = 0;
  int64_t output_index = -1;
  std::string loss_scale = "dynamic";  ///< --loss-scale dynamic|none|N
  std::vector<std::string> select;  ///< --select (comma-separated, repeatable)
  std::vector<std::string> ignore;  ///< --ignore
  std::string severity = "info";    ///< --severity: lowest severity shown
  std::string config_file;          ///< --config FILE
  bool no_config = false;           ///< --no-config
  // Which of the settings a config file can hold were given as flags
  // (precedence: flags > config file > rule defaults).
  bool fail_on_given = false;
  bool severity_given = false;
  bool select_given = false;
  bool ignore_given = false;
};

/// Color decision (STYLE.md): auto = stream is a TTY, NO_COLOR unset or
/// empty, TERM is not "dumb".
bool use_color(const std::string& mode, int fd) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;
  const char* term = std::getenv("TERM");
  if (term && std::string(term) == "dumb") return false;
  return ::isatty(fd) != 0;
}

void setup_logging(const CheckArgs& a) {
  // spdlog ignores NO_COLOR by itself: the sink gets the same decision as the report.
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(
      use_color(a.color, STDERR_FILENO) ? spdlog::color_mode::always : spdlog::color_mode::never);
  auto logger = std::make_shared<spdlog::logger>("normdoctor", sink);
  logger->set_pattern("%^normdoctor: %l:%$ %v");
  logger->set_level(a.quiet ? spdlog::level::err : a.verbose >= 2 ? spdlog::level::trace : a.verbose == 1 ? spdlog::level::debug : spdlog::level::info);
  spdlog::set_default_logger(logger);
}

int run_rules_list(const std::string& dir, const std::string& format) {
  const auto rules = load_rules(resolve_rules_dir(dir));
  if (format == "json") {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& r : rules) {
      nlohmann::ordered_json when = nlohmann::ordered_json::array();
      for (const auto& c : r.when) when.push_back({{"metric", c.metric}, {"op", c.op}, {"value", c.value}});
      arr.push_back({{"id", r.id}, {"failure_mode", r.failure_mode}, {"severity", severity_name(r.severity)},
                     {"scope", r.scope}, {"lifecycle", r.lifecycle}, {"since", r.since}, {"title", r.title},
                     {"when", when}, {"message", r.message}, {"fix", fix_texts(r)}, {"references", r.references},
                     {"explain", r.explain}});
    }
    std::cout << arr.dump(2) << "\n";
    return 0;
  }
  // Column widths from the longest entry (REPLAY001, the longest slug).
  int w_id = 2, w_mode = 12;
  for (const auto& r : rules) {
    w_id = std::max(w_id, static_cast<int>(r.id.size()));
    w_mode = std::max(w_mode, static_cast<int>(r.failure_mode.size()));
  }
  std::printf("%-*s  %-8s  %-10s  %-7s  %-*s  %s\n", w_id, "ID", "SEVERITY", "LIFECYCLE", "SINCE", w_mode, "FAILURE MODE",
              "TITLE");
  for (const auto& r : rules)
    std::printf("%-*s  %-8s  %-10s  %-7s  %-*s  %s\n", w_id, r.id.c_str(), severity_name(r.severity), r.lifecycle.c_str(),
                r.since.c_str(), w_mode, r.failure_mode.c_str(), r.title.c_str());
  std::printf("\n%zu rules; `normdoctor explain ID` explains one\n", rules.size());
  return 0;
}

/// `normdoctor rules --test`: every case file of the folder (ID.cases.toml)
/// through the runner. Prints the failing cases and a summary; 1 when a case
/// fails, 0 otherwise. A bad case file or one without its rule is exit 2.
int run_rules_test(const std::string& dir) {
  const std::string folder = resolve_rules_dir(dir);
  const auto rules = load_rules(folder);
  std::vector<std::string> ids;
  for (const auto& r : rules) ids.push_back(r.id);
  std::size_t cases = 0, failed = 0;
  std::set<std::string> tested;
  for (const auto& path : rule_case_files(folder)) {
    const RuleCaseFile file = load_rule_cases(path);
    const Rule* rule = find_rule(rules, file.rule_id);
    if (!rule)
      throw Error(error_kind::kRuleFile, ExitCode::kUsage,
                  path + ":1: no rule " + file.rule_id + " in " + folder + did_you_mean(file.rule_id, ids));
    tested.insert(file.rule_id);
    for (const auto& c : file.cases) {
      ++cases;
      const auto failures = run_rule_case(*rule, c);
      if (failures.empty()) continue;
      ++failed;
      std::printf("FAIL %s:%d: %s, case '%s'\n", path.c_str(), c.line, file.rule_id.c_str(), c.name.c_str());
      for (std::string f : failures) {
        for (std::size_t at = f.find('\n'); at != std::string::npos; at = f.find('\n', at + 1)) f.insert(at + 1, "  ");
        std::printf("  %s\n", f.c_str());
      }
    }
  }
  std::printf("%zu cases of %zu rules: %zu passed, %zu failed\n", cases, tested.size(), cases - failed, failed);
  std::string untested;
  for (const auto& id : ids)
    if (!tested.count(id)) untested += (untested.empty() ? "" : ", ") + id;
  if (!untested.empty()) std::printf("no case file (ID.cases.toml) for: %s\n", untested.c_str());
  return failed ? static_cast<int>(ExitCode::kFindings) : 0;
}

int run_explain(const std::string& dir, const std::string& id) {
  const auto rules = load_rules(resolve_rules_dir(dir));
  std::string wanted = id;
  for (char& c : wanted) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::vector<std::string> ids;
  for (const auto& r : rules) {
    ids.push_back(r.id);
    if (r.id != wanted) continue;
    std::cout << r.id << ": " << (r.title.empty() ? r.failure_mode : r.title) << "\n"
              << "failure mode " << r.failure_mode << ", default severity " << severity_name(r.severity) << ", scope "
              << r.scope << ", " << r.lifecycle << " since " << r.since << "\n"
              << "fires when " << conditions_text(r.when) << "\n";
    if (!r.explain.empty()) std::cout << "\n" << r.explain << (r.explain.back() == '\n' ? "" : "\n");
    if (!r.fix.empty()) {
      std::cout << "\nFixes\n";
      const auto fixes = fix_texts(r);
      for (std::size_t i = 0; i < fixes.size(); ++i) std::cout << "  " << i + 1 << ". " << fixes[i] << "\n";
    }
    if (!r.references.empty()) {
      std::cout << "\nReferences\n";
      for (const auto& f : r.references) std::cout << "  - " << f << "\n";
    }
    std::cout << "\nTune it in normdoctor.toml: [rules." << r.id << "] severity = ... or thresholds = { \""
              << (r.when.empty() ? std::string("metric") : r.when.front().metric) << "\" = ... }\n";
    return 0;
  }
  std::string hint = did_you_mean_rule(wanted, ids);
  throw usage_error("unknown rule id '" + id + "'" + hint + " (`normdoctor rules` lists them)");
}

/// The configuration of this run: the config file (--config, else the
/// nearest normdoctor.toml, or pyproject.toml with [tool.normdoctor],
/// upward from the working directory, unless --no-config), with the
/// settings given as flags replacing it.
Config resolve_config(const CheckArgs& a, const std::vector<Rule>& rules) {
  Config file;
  if (!a.no_config) {
    std::optional<std::string> path;
    if (!a.config_file.empty())
      path = a.config_file;
    else
      path = find_config(fs::current_path().string());
    if (path) {
      file = load_config(*path, rules);
      spdlog::debug("config file {}", *path);
    }
  }
  Config flags;
  if (a.select_given) {
    flags.select = split_list(a.select);
    for (auto& p : *flags.select) p = upper(p);
    check_rule_patterns(*flags.select, rules, "--select");
  }
  if (a.ignore_given) {
    flags.ignore = split_list(a.ignore);
    for (auto& p : *flags.ignore) p = upper(p);
    check_rule_patterns(*flags.ignore, rules, "--ignore");
  }
  if (a.severity_given) flags.severity = a.severity;
  if (a.fail_on_given) flags.fail_on = a.fail_on;
  return with_flags(std::move(file), flags);
}

/// The width of the terminal on `fd`: TIOCGWINSZ, else $COLUMNS, else 100.
int terminal_width(int fd) {
  struct winsize ws {};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS"); c && *c) {
    const int n = std::atoi(c);
    if (n > 0) return n;
  }
  return 100;
}

/// The models to check: each argument, a folder standing for every .pt and
/// .pt2 file in it (not recursive, sorted by name). Throws nd::Error (usage)
/// for a folder with none.
std::vector<std::string> expand_models(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& m : args) {
    std::error_code ec;
    if (!fs::is_directory(m, ec)) {
      out.push_back(m);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(m, ec)) {
      const std::string ext = e.path().extension().string();
      if ((ext == ".pt" || ext == ".pt2") && e.is_regular_file(ec)) found.push_back(e.path().string());
    }
    if (found.empty()) throw usage_error("model folder " + m + " holds no .pt or .pt2 file");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

/// Progress on stderr. On a terminal: one line rewritten in place. Not on a
/// terminal (CI logs): one line per finished pass, "normdoctor: PROBE: PASS
/// (SECONDS s)". Nothing with -q.
class Progress {
 public:
  Progress(bool quiet, std::string prefix)
      : tty_(!quiet && ::isatty(STDERR_FILENO)), lines_(!quiet && !tty_), prefix_(std::move(prefix)),
        t0_(std::chrono::steady_clock::now()) {}
  bool tty() const { return tty_; }
  void stage(const std::string& probe, const std::string& pass) {
    finish();
    probe_ = probe;
    pass_ = pass;
    started_ = std::chrono::steady_clock::now();
    const double el = std::chrono::duration<double>(started_ - t0_).count();
    if (tty_) std::fprintf(stderr, "\r\033[K[%6.1fs] %s%s: %s", el, prefix_.c_str(), probe.c_str(), pass.c_str());
    spdlog::debug("{}{}: {} ({:.1f}s)", prefix_, probe, pass, el);
  }
  /// Ends the stage in progress: prints its line (not a terminal) or clears the line (terminal).
  void finish() {
    if (probe_.empty()) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    if (lines_) std::fprintf(stderr, "normdoctor: %s%s: %s (%.2f s)\n", prefix_.c_str(), probe_.c_str(), pass_.c_str(), s);
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    probe_.clear();
  }

 private:
  bool tty_, lines_;
  std::string prefix_, probe_, pass_;
  std::chrono::steady_clock::time_point t0_, started_;
};

/// The command to re-run with a real batch instead of made-up inputs: the
/// same options, --input batch.pt in place of --input-shape.
std::string rerun_hint(const CheckArgs& a, const CheckOptions& opt, const MetricsDoc& doc) {
  auto quote = [](const std::string& w) {
    if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
                          std::string::npos)
      return w;
    std::string q = "'";
    for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  std::string names;
  for (const auto& in : doc.inputs) names += (names.empty() ? "" : ", ") + in.name;
  std::ostringstream hint;
  hint << "inputs were made by normdoctor, not read from your data; for a diagnosis of real batches save one with\n"
       << "  torch.save((" << names << (doc.inputs.size() == 1 ? "," : "") << "), \"batch.pt\")\n"
       << "and run:\n  normdoctor check " << quote(opt.model_path) << " --input batch.pt";
  if (!opt.target_file.empty()) hint << " --target " << quote(opt.target_file);
  if (opt.loss != "auto") hint << " --loss " << opt.loss;
  if (opt.output_index) hint << " --output-index " << *opt.output_index;
  if (opt.precision != "fp32") hint << " --precision " << opt.precision;
  if (a.loss_scale != "dynamic") hint << " --loss-scale " << a.loss_scale;
  if (opt.train_batch_size > 0) hint << " --train-batch-size " << opt.train_batch_size;
  if (a.seed != 0) hint << " --seed " << a.seed;
  if (a.fail_on != "warning") hint << " --fail-on " << a.fail_on;
  return hint.str();
}

/// Writes every target with all runs (render_reports). Write errors are
/// printed, not thrown, when `lenient` (error paths).
void write_all(const std::vector<OutputTarget>& targets, const std::vector<ReportRun>& runs, int code,
               const TextOptions& topt, bool lenient) {
  for (const auto& t : targets) {
    TextOptions o = topt;
    if (!t.path.empty()) {
      o.color = false;
      o.fit_width = false;
    }
    try {
      const std::string text = render_reports(t.format, runs, code, o);
      if (t.format == "text" && text.empty()) continue;  // a failed run: stderr has the message
      write_output(t.path, text);
    } catch (const Error& e) {
      if (!lenient) throw;
      std::fprintf(stderr, "normdoctor: error: %s\n", e.what());
    }
  }
}

void fail_run(ReportRun& run, const std::string& kind, const std::string& message, int code) {
  run.ctx.status = "error";
  run.ctx.error_kind = kind;
  run.ctx.error_message = message;
  run.ctx.exit_code = code;
}

int run_check_command(CheckArgs& a, const Engine& engine) {
  setup_logging(a);
  // Output targets are checked before any work (a typo in -o must not cost a
  // full run).
  const auto targets = plan_outputs(a.formats, a.outputs);
  for (const auto& t : targets)
    if (!t.path.empty()) check_writable(t.path);
  a.engine.seed = static_cast<uint64_t>(a.seed);
  if (a.output_index >= 0) a.engine.output_index = a.output_index;
  if (a.loss_scale == "none") a.engine.loss_scale = 1.0;
  else if (a.loss_scale != "dynamic") a.engine.loss_scale = std::stod(a.loss_scale);  // checked by the option's validator
  const std::vector<std::string> models = expand_models(a.models);
  const bool many = models.size() > 1;

  TextOptions topt;
  topt.color = use_color(a.color, STDOUT_FILENO);
  topt.fit_width = ::isatty(STDOUT_FILENO) != 0;
  topt.width = topt.fit_width ? terminal_width(STDOUT_FILENO) : 100;
  topt.verbose = a.verbose;

  ReportContext base;
  base.tool_version = build::kVersion;
  base.libtorch_version = engine.libtorch_version();
  std::error_code ec;
  base.working_dir = fs::current_path(ec).string();
  auto options_of = [&](const CheckOptions& o) {
    nlohmann::json opts = {{"inputs", o.input_files}, {"input_shapes", o.input_shapes}, {"loss", o.loss},
                           {"seed", a.seed}, {"precision", o.precision}, {"fail_on", a.fail_on},
                           {"severity", a.severity}, {"rules_dir", resolve_rules_dir(a.rules_dir)}};
    if (o.output_index) opts["output_index"] = *o.output_index;
    if (o.loss_scale) opts["loss_scale"] = *o.loss_scale == 1.0 && a.loss_scale == "none" ? nlohmann::json("none") : nlohmann::json(*o.loss_scale);
    if (o.lr) opts["lr"] = *o.lr;
    if (o.lr || o.steps > 0 || !o.optimizer_state.empty()) opts["optimizer"] = o.optimizer;
    if (o.steps > 0) opts["steps"] = o.steps;
    if (!o.weights.empty()) opts["weights"] = o.weights;
    if (o.weights_partial) opts["weights_partial"] = true;
    if (o.causal) opts["causal"] = true;
    if (!o.optimizer_state.empty()) opts["optimizer_state"] = o.optimizer_state;
    // Every flag that changes what is measured, so that a report says how to rerun it.
    if (!o.target_file.empty()) opts["target"] = o.target_file;
    if (o.train_batch_size > 0) opts["train_batch_size"] = o.train_batch_size;
    if (o.seq_dim) opts["seq_dim"] = *o.seq_dim;
    if (o.batch_dim) opts["batch_dim"] = *o.batch_dim;
    if (!o.mask_input.empty()) opts["mask_input"] = o.mask_input;
    if (o.pad_value) opts["pad_value"] = *o.pad_value;
    if (o.timeout_seconds > 0) opts["timeout"] = o.timeout_seconds;
    if (many) opts["models"] = models;
    return opts;
  };

  std::vector<Rule> all_rules;  // as loaded
  std::vector<Rule> rules;      // evaluated: selected, with the config's overrides
  Config cfg;
  try {
    all_rules = load_rules(resolve_rules_dir(a.rules_dir));
    cfg = resolve_config(a, all_rules);
    a.fail_on = cfg.fail_on.value_or("warning");
    a.severity = cfg.severity.value_or("info");
    rules = apply_config(all_rules, cfg);
    base.severity = a.severity;
    for (const auto& [id, sev] : cfg.severity_overrides)
      if (const Rule* d = find_rule(all_rules, id)) base.default_severity[id] = d->severity;
    base.config = config_json(cfg, rules, all_rules, a.severity, a.fail_on);
    if (rules.empty()) spdlog::warn("no rule is selected (--select/--ignore or the config file); nothing will be found");
  } catch (const Error& e) {
    // Rule files or config broken: every model gets the error report.
    spdlog::error("{}", e.what());
    std::vector<ReportRun> runs;
    for (const auto& m : models) {
      ReportRun run;
      run.rules = rules;
      run.ctx = base;
      run.ctx.model_path = m;
      CheckOptions o = a.engine;
      o.model_path = m;
      run.ctx.options = options_of(o);
      fail_run(run, e.kind(), e.what(), static_cast<int>(e.exit_code()));
      runs.push_back(std::move(run));
    }
    write_all(targets, runs, static_cast<int>(e.exit_code()), topt, true);
    return static_cast<int>(e.exit_code());
  }

  std::vector<std::unique_ptr<MetricsDoc>> docs;
  std::vector<ReportRun> runs;
  int worst = 0;
  for (const std::string& model : models) {
    CheckOptions opt = a.engine;
    opt.model_path = model;
    ReportRun run;
    run.rules = rules;
    run.ctx = base;
    run.ctx.model_path = model;
    run.ctx.options = options_of(opt);
    const std::string who = many ? model + ": " : std::string();
    Progress progress(a.quiet, who);
    const auto started = std::chrono::steady_clock::now();  // --timeout counts from here, per model
    std::unique_ptr<MetricsDoc> doc;
    // The hard --timeout: the engine checks the deadline between passes, and
    // this watchdog ends the process when one pass runs past it (a forward
    // cannot be interrupted). It writes the error reports itself (with the
    // models already checked); the main thread disarms it before writing its
    // own, so only one of them writes.
    const double timeout_s = opt.timeout_seconds;
    const bool tty = progress.tty();
    auto watchdog = std::make_unique<Watchdog>(
        timeout_s, started, static_cast<int>(ExitCode::kLoad),
        [targets, runs, run, timeout_s, tty, topt, worst](const std::string& probe, const std::string& pass, double el) {
          std::vector<ReportRun> all = runs;
          ReportRun r = run;
          std::ostringstream m;
          m << "--timeout " << timeout_s << " s passed ";
          if (probe == "load" || probe == "instrument")
            m << "while " << (probe == "load" ? "loading the " : "instrumenting the ") << pass << " (";
          else
            m << "during the " << probe << " probe (" << pass << " pass, ";
          m << std::fixed << std::setprecision(1) << el
            << " s elapsed); a forward or backward pass cannot be interrupted, so normdoctor stopped there: raise "
               "--timeout, or use a smaller batch (--input, --input-shape)";
          fail_run(r, error_kind::kTimeout, m.str(), static_cast<int>(ExitCode::kLoad));
          all.push_back(r);
          if (tty) std::fprintf(stderr, "\r\033[K");
          std::fprintf(stderr, "normdoctor: error: %s%s\n", r.ctx.model_path.c_str(), (": " + m.str()).c_str());
          std::fflush(stderr);
          write_all(targets, all, std::max(worst, static_cast<int>(ExitCode::kLoad)), topt, true);
          std::fflush(stdout);
        });
    ProgressFn on_progress = [&](const std::string& probe, const std::string& pass) {
      watchdog->set_stage(probe, pass);
      progress.stage(probe, pass);
    };
    try {
      doc = std::make_unique<MetricsDoc>(engine.run(opt, on_progress));
      watchdog->disarm();
      progress.finish();
    } catch (const Error& e) {
      watchdog->disarm();
      progress.finish();
      fail_run(run, e.kind(), e.what(), static_cast<int>(e.exit_code()));
      spdlog::error("{}{}", who, e.what());
    } catch (const std::exception& e) {
      watchdog->disarm();
      progress.finish();
      fail_run(run, error_kind::kInternal,
               std::string("internal error (a bug in normdoctor, please report it): ") + e.what(),
               static_cast<int>(ExitCode::kInternal));
      spdlog::error("{}{}", who, run.ctx.error_message);
    }
    watchdog.reset();
    if (!doc) {
      worst = std::max(worst, run.ctx.exit_code);
      runs.push_back(std::move(run));
      continue;
    }

    std::vector<Finding> all_findings = evaluate_rules(rules, *doc);
    run.ctx.probe_statuses = probe_statuses(*doc);
    run.ctx.skipped_rules = skipped_rules(rules, all_findings, run.ctx.probe_statuses);
    std::vector<Suppression> sups = cfg.suppressions;  // `matched` counts per model
    run.ctx.suppressed = suppress_findings(all_findings, sups, model, cfg.file, &run.ctx.suppressed_findings);
    Config model_cfg = cfg;
    model_cfg.suppressions = sups;
    for (const auto& sup : sups) {
      if (sup.matched > 0) continue;
      ReportNote note{cfg.file, sup.line,
                      "suppression of " + sup.rule + " on modules '" + sup.module + "'" +
                          (sup.model.empty() ? "" : " of models '" + sup.model + "'") +
                          " matched no finding; remove it if the problem is gone"};
      if (!many) spdlog::warn("{}:{}: {}", note.file, note.line, note.text);
      run.ctx.notes.push_back(std::move(note));
    }
    run.ctx.config = config_json(model_cfg, rules, all_rules, a.severity, a.fail_on);

    // What fails (--fail-on) counts every finding the config kept, also those
    // below --severity, which only decides what is shown.
    const int code = findings_exit_code(all_findings, a.fail_on, a.exit_zero);
    const Severity fail_on = a.fail_on == "never" ? Severity::kError : parse_severity(a.fail_on, "--fail-on");
    const Severity shown_from = parse_severity(a.severity, "--severity");
    for (auto& f : all_findings) {
      if (f.severity >= shown_from) {
        run.findings.push_back(std::move(f));
        continue;
      }
      ++run.ctx.hidden;
      if (std::find(run.ctx.hidden_rules.begin(), run.ctx.hidden_rules.end(), f.rule_id) == run.ctx.hidden_rules.end())
        run.ctx.hidden_rules.push_back(f.rule_id);
    }
    const bool shown_fails = std::any_of(run.findings.begin(), run.findings.end(),
                                         [&](const Finding& f) { return f.severity >= fail_on; });
    if (run.ctx.hidden > 0 && code == 1 && !shown_fails)
      spdlog::warn("{}the run fails (--fail-on {}) on {} finding(s) below --severity {}, which the report does not show",
                   who, a.fail_on, run.ctx.hidden, a.severity);
    run.ctx.exit_code = code;
    if (doc->model_metrics.count("run.synthetic_inputs") && doc->model_metrics["run.synthetic_inputs"] == true)
      run.ctx.rerun_hint = rerun_hint(a, opt, *doc);
    run.doc = doc.get();
    docs.push_back(std::move(doc));
    worst = std::max(worst, code);
    runs.push_back(std::move(run));
  }
  write_all(targets, runs, worst, topt, worst > 1);
  return worst;
}

/// Prints "SUBCOMMAND -x" / "SUBCOMMAND --name" for every visible option of
/// the app ("normdoctor") and of each subcommand.
void print_option_list(CLI::App& app) {
  auto print = [](const std::string& where, const CLI::App& owner) {
    for (const CLI::Option* opt : owner.get_options()) {
      if (opt->get_group().empty()) continue;  // hidden
      for (const auto& n : opt->get_snames()) std::printf("%s -%s\n", where.c_str(), n.c_str());
      for (const auto& n : opt->get_lnames()) std::printf("%s --%s\n", where.c_str(), n.c_str());
    }
  };
  print("normdoctor", app);
  for (const CLI::App* sub : app.get_subcommands(std::function<bool(CLI::App*)>())) print(sub->get_name(), *sub);
}

/// A flag error of `check` (bad value, unknown flag): CLI11 stops before any
/// option is stored, so the report options are read again from argv by a
/// lenient parser, and the error reports the user asked for are written
/// (JSON status "error", kind usage unless told). Also used for errors that
/// end `check` before any model ran (a model folder holding no model file).
/// Best effort: nothing is written when the report options are what is broken.
void write_flag_error_reports(int argc, char** argv, const std::string& message, const Engine& engine,
                              const std::string& kind = error_kind::kUsage, ExitCode code = ExitCode::kUsage) {
  CLI::App again;
  again.allow_extras();
  auto* check = again.add_subcommand("check");
  check->allow_extras();
  check->positionals_at_end(false);
  std::vector<std::string> formats, outputs;
  check->add_option("--format", formats)->check(CLI::IsMember(report_formats()));
  check->add_option("-o,--output", outputs);
  try {
    again.parse(argc, argv);
    if (!*check || (formats.empty() && outputs.empty())) return;
    const auto targets = plan_outputs(formats, outputs);
    for (const auto& t : targets)
      if (!t.path.empty()) check_writable(t.path);
    ReportContext ctx;
    ctx.tool_version = build::kVersion;
    ctx.libtorch_version = engine.libtorch_version();
    ctx.status = "error";
    ctx.error_kind = kind;
    ctx.error_message = message;
    ctx.exit_code = static_cast<int>(code);
    write_error_reports(targets, nullptr, {}, ctx);
  } catch (const std::exception&) {
    // The report options themselves are wrong: stderr has the message.
  }
}

/// A CLI11 validator for a fixed set of values that suggests the nearest one
/// ("--fail-on: warn not in {info, warning, error, never}; did you mean 'warning'?").
CLI::Validator one_of(std::vector<std::string> values) {
  std::string desc;
  for (const auto& v : values) desc += (desc.empty() ? "{" : ",") + v;
  desc += "}";
  return CLI::Validator(
      [values, desc](std::string& v) -> std::string {
        if (std::find(values.begin(), values.end(), v) != values.end()) return {};
        std::string lower = v;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (std::find(values.begin(), values.end(), lower) != values.end()) {
          v = lower;
          return {};
        }
        return v + " not in " + desc + did_you_mean(lower, values);
      },
      desc);
}

/// Every long and short flag name of `app` ("--input", "-o").
std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_group().empty()) continue;
    for (const auto& n : opt->get_lnames()) out.push_back("--" + n);
    for (const auto& n : opt->get_snames()) out.push_back("-" + n);
  }
  return out;
}

/// " (did you mean '--input'?)" hints for the unknown flags in a CLI11
/// "arguments were not expected" message.
std::string suggest_flags(const std::string& message, const CLI::App& owner) {
  const auto colon = message.find(": ");
  if (colon == std::string::npos) return {};
  std::istringstream in(message.substr(colon + 2));
  const std::vector<std::string> names = flag_names(owner);
  std::string out;
  for (std::string w; in >> w;) {
    if (w.size() < 2 || w[0] != '-') continue;
    const std::string name = w.substr(0, w.find('='));
    const std::string best = closest_name(name, names);
    if (!best.empty()) out += "\n  " + name + ": did you mean '" + best + "'?";
  }
  return out;
}

}  // namespace

int cli_main(int argc, char** argv, const Engine& engine) {
  CLI::App app{"normdoctor: diagnose neural-network training instability in TorchScript models"};
  app.require_subcommand(1);
  app.set_version_flag(
      "-V,--version",
      [&engine] { return std::string("normdoctor ") + build::kVersion + " (libtorch " + engine.libtorch_version() + ")"; },
      "Print the normdoctor and LibTorch versions and exit");

  CheckArgs a;
  auto* check = app.add_subcommand("check", "Measure models on sample batches and report known failure modes");
  check->add_option("model", a.models,
                    "TorchScript (.pt) or torch.export (.pt2) model files, or folders of them (every .pt/.pt2 inside, "
                    "sorted); one check each")
      ->required();
  check->add_option("--input", a.engine.input_files,
                    "Sample batch: torch.save of a tensor, tuple, list or dict of tensors, or .safetensors (repeatable; "
                    "applies to every model)");
  check->add_option("--input-shape", a.engine.input_shapes,
                    "Synthesize an argument: [NAME=]DIMS[:DTYPE][:LOW..HIGH], e.g. 8x3x32x32 or input_ids=2x16:int64:0..1000 (repeatable)");
  check->add_option("--target", a.engine.target_file, "Targets for the loss (torch.save of a tensor); says the model will be trained, as --lr and --optimizer-state do (rules about training a saved file apply)");
  check->add_option("--loss", a.engine.loss, "Loss for the backward pass (ce: cross_entropy)")
      // transform() puts each validator first: the alias runs before one_of.
      ->transform(one_of({"auto", "projection", "mse", "cross_entropy", "sum"}))
      ->transform(CLI::Transformer(std::map<std::string, std::string>{{"ce", "cross_entropy"}}))
      ->capture_default_str();
  check->add_option("--output-index", a.output_index, "Which tensor of a tuple/list/dict output feeds the loss");
  check->add_option("--seed", a.seed, "Seed for every random choice")->capture_default_str();
  check->add_option("--precision", a.engine.precision, "Precision the model trains or serves in")
      ->transform(one_of({"fp32", "fp16", "bf16"}))->capture_default_str();
  check->add_option("--loss-scale", a.loss_scale,
                    "How fp16 training scales the loss: dynamic (torch.amp.GradScaler), none (no scaler: .half() "
                    "training, autocast without GradScaler) or a static scale N")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "dynamic" || v == "none") return {};
            try {
              size_t used = 0;
              const double d = std::stod(v, &used);
              if (used == v.size() && std::isfinite(d) && d > 0) return {};
            } catch (const std::exception&) {
            }
            return "expected dynamic, none or a positive number, got '" + v + "'";
          },
          "dynamic|none|N"))
      ->capture_default_str();
  check->add_option("--train-batch-size", a.engine.train_batch_size, "True per-step batch size in training (default: the sample batch size)");
  check->add_option("--timeout", a.engine.timeout_seconds,
                    "Give up on a model after this many seconds, also inside a pass (exit 3; 0 = none)")
      ->check(CLI::NonNegativeNumber);
  check->add_option("--seq-dim", a.engine.seq_dim, "Time (sequence) axis of the sequence inputs (default: inferred, axis 1)");
  check->add_option("--batch-dim", a.engine.batch_dim,
                    "Batch axis of the inputs, e.g. 1 for [time, batch, feature] (default: inferred, axis 0)")
      ->check(CLI::NonNegativeNumber);
  check->add_option("--mask-input", a.engine.mask_input, "The padding-mask argument, by name or index (default: inferred)");
  check->add_flag("--causal", a.engine.causal,
                  "The model is autoregressive (a decoder LM, a causal TCN): an output may not depend on later positions");
  check->add_option("--pad-value", a.engine.pad_value,
                    "Token id or feature value used for padding (default: the value the sample's padded positions hold, "
                    "else an Embedding's padding_idx, else 0)");
  check->add_option("--threads", a.engine.threads, "Intra-op threads (default: LibTorch's)");
  check->add_option_function<double>("--lr", [&a](const double& v) { a.engine.lr = v; },
                                     "Learning rate: update ratio per parameter, and the replay's step size");
  check->add_option("--optimizer", a.engine.optimizer, "Optimizer of the update ratio and the replay")
      ->transform(one_of({"sgd", "adam", "adamw"}))->capture_default_str();
  check->add_option("--steps", a.engine.steps, "Replay: take this many optimizer steps on the sample batch (needs --lr)")
      ->check(CLI::NonNegativeNumber);
  check->add_option("--weights", a.engine.weights,
                    "Checkpoint to load into the model's parameters and buffers by name (repeatable; globs such as "
                    "'ckpts/step_*.pt' are expanded by normdoctor; several give a timeline)");
  check->add_flag("--weights-partial", a.engine.weights_partial,
                  "Load the checkpoint keys that match and list the rest, instead of failing on any mismatch");
  check->add_option("--optimizer-state", a.engine.optimizer_state,
                    "torch.save(optimizer.state_dict()) of Adam/AdamW/SGD: the update ratio and the replay start from it");
  check->add_option("--format", a.formats,
                    "Report format: text | json | sarif | junit | github | html (repeatable, one -o each)")
      ->transform(one_of(report_formats()));
  check->add_option("-o,--output", a.outputs, "Write the report to FILE (atomically) instead of stdout (repeatable)");
  auto* fail_on_opt = check->add_option("--fail-on", a.fail_on, "Exit 1 when a finding is at or above this severity")
      ->transform(one_of({"info", "warning", "error", "never"}))->capture_default_str();
  check->add_flag("--exit-zero", a.exit_zero, "Exit 0 even with findings (errors of the tool still exit 2/3/4)");
  auto* severity_opt = check->add_option("--severity", a.severity,
                                         "Lowest severity shown in the report (what fails is --fail-on)")
      ->transform(one_of({"info", "warning", "error"}))->capture_default_str();
  auto* select_opt = check->add_option("--select", a.select,
                                       "Evaluate only these rules: ids or id prefixes, any case, comma-separated (repeatable)");
  auto* ignore_opt = check->add_option("--ignore", a.ignore,
                                       "Do not evaluate these rules: ids or id prefixes, any case, comma-separated (repeatable)");
  auto* config_opt = check->add_option("--config", a.config_file,
                                       "Read this config file (normdoctor.toml or pyproject.toml) instead of the nearest one");
  check->add_flag("--no-config", a.no_config, "Read no config file")->excludes(config_opt);
  check->add_option("--color", a.color, "Colors on the terminal")->transform(one_of({"auto", "always", "never"}))->capture_default_str();
  check->add_option("--rules-dir", a.rules_dir, "Folder of rule files (default: the installed rules)");
  check->add_flag("-q,--quiet", a.quiet, "Only errors on stderr (no progress)");
  check->add_flag("-v,--verbose", a.verbose,
                  "More detail: -v every layer in the table and debug logs; -vv also the passes with their seconds and "
                  "every metric of each finding's layer");

  std::string rules_dir, rules_format = "text", explain_id;
  auto* rules = app.add_subcommand("rules", "List the rules");
  rules->add_option("--format", rules_format, "Output: text (a table) | json")
      ->transform(one_of({"text", "json"}))->capture_default_str();
  rules->add_option("--rules-dir", rules_dir, "Folder of rule files");
  bool rules_test = false;
  rules->add_flag("--test", rules_test,
                  "Run the folder's rule cases (ID.cases.toml, docs/rule-cases.md); exit 1 when one fails")
      ->excludes(rules->get_option("--format"));
  auto* explain = app.add_subcommand("explain", "Explain a rule: what it detects, why, how to fix");
  explain->add_option("id", explain_id, "Rule id, any case, e.g. ACT002")->required();
  explain->add_option("--rules-dir", rules_dir, "Folder of rule files");

  // Hidden: every documented option, one "SUBCOMMAND OPTION" per line, for the
  // test that checks the man page documents each of them.
  app.add_flag_callback("--list-options", [&app] {
       print_option_list(app);
       throw CLI::Success();
     })->group("");

  // An unknown command ("chek"): CLI11 would only say that a subcommand is required.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands(std::function<bool(CLI::App*)>())) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), word) == names.end()) {
      std::string hint = did_you_mean(word, names);
      std::fprintf(stderr, "normdoctor: error: unknown command '%s'%s (commands: check, rules, explain)\n"
                   "Run with --help for more information.\n", word.c_str(), hint.c_str());
      return static_cast<int>(ExitCode::kUsage);
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string message = e.what();
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
      const CLI::App* owner = *check ? check : *rules ? rules : *explain ? explain : &app;
      message += suggest_flags(e.what(), *owner);
    }
    std::fprintf(stderr, "normdoctor: error: %s\nRun with --help for more information.\n", message.c_str());
    if (*check) write_flag_error_reports(argc, argv, message, engine);
    return static_cast<int>(ExitCode::kUsage);
  }
  a.fail_on_given = fail_on_opt->count() > 0;
  a.severity_given = severity_opt->count() > 0;
  a.select_given = select_opt->count() > 0;
  a.ignore_given = ignore_opt->count() > 0;

  try {
    if (*check) return run_check_command(a, engine);
    if (*rules) return rules_test ? run_rules_test(rules_dir) : run_rules_list(rules_dir, rules_format);
    if (*explain) return run_explain(rules_dir, explain_id);
  } catch (const Error& e) {
    std::fprintf(stderr, "normdoctor: error: %s\n", e.what());
    if (*check && e.kind() != error_kind::kOutput)
      write_flag_error_reports(argc, argv, e.what(), engine, e.kind(), e.exit_code());
    return static_cast<int>(e.exit_code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "normdoctor: internal error (a bug, please report it): %s\n", e.what());
    return static_cast<int>(ExitCode::kInternal);
  }
  return static_cast<int>(ExitCode::kUsage);
}

}  // namespace nd
