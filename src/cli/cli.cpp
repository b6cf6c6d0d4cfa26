#include "cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "build_info.h"
#include "cli/output.h"
#include "cli/watchdog.h"
#include "config/config.h"
#include "core/error.h"
#include "probes/engine.h"
#include "report/report.h"
#include "rules/rules.h"

namespace nd {
namespace fs = std::filesystem;

namespace {

struct CheckArgs {
  CheckOptions engine;
  std::vector<std::string> formats;
  std::vector<std::string> outputs;
  std::string fail_on = "error";
  bool exit_zero = false;
  std::string color = "auto";
  std::string rules_dir;
  bool quiet = false;
  int verbose = 0;
  int64_t seed = 0;
  int64_t output_index = -1;
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

std::string conditions_text(const Rule& r) {
  std::string s;
  for (const auto& c : r.when) s += (s.empty() ? "" : " and ") + c.metric + " " + c.op + " " + format_metric(c.value);
  return s;
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
                     {"when", when}, {"message", r.message}, {"fix", r.fix}, {"references", r.references},
                     {"explain", r.explain}});
    }
    std::cout << arr.dump(2) << "\n";
    return 0;
  }
  std::printf("%-8s %-8s %-9s %-7s %-24s %s\n", "ID", "SEVERITY", "LIFECYCLE", "SINCE", "FAILURE MODE", "TITLE");
  for (const auto& r : rules)
    std::printf("%-8s %-8s %-9s %-7s %-24s %s\n", r.id.c_str(), severity_name(r.severity), r.lifecycle.c_str(),
                r.since.c_str(), r.failure_mode.c_str(), r.title.c_str());
  std::printf("\n%zu rules; `normdoctor explain ID` explains one\n", rules.size());
  return 0;
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
              << "fires when " << conditions_text(r) << "\n";
    if (!r.explain.empty()) std::cout << "\n" << r.explain << (r.explain.back() == '\n' ? "" : "\n");
    if (!r.fix.empty()) {
      std::cout << "\nFixes\n";
      for (std::size_t i = 0; i < r.fix.size(); ++i) std::cout << "  " << i + 1 << ". " << r.fix[i] << "\n";
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
/// nearest normdoctor.toml upward from the working directory, unless
/// --no-config), with the settings given as flags replacing it.
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
    check_rule_patterns(*flags.select, rules, "--select");
  }
  if (a.ignore_given) {
    flags.ignore = split_list(a.ignore);
    check_rule_patterns(*flags.ignore, rules, "--ignore");
  }
  if (a.severity_given) flags.severity = a.severity;
  if (a.fail_on_given) flags.fail_on = a.fail_on;
  return with_flags(std::move(file), flags);
}

int run_check_command(CheckArgs& a) {
  setup_logging(a);
  // Output targets are checked before any work (a typo in -o must not cost a
  // full run).
  const auto targets = plan_outputs(a.formats, a.outputs);
  for (const auto& t : targets)
    if (!t.path.empty()) check_writable(t.path);
  a.engine.seed = static_cast<uint64_t>(a.seed);
  if (a.output_index >= 0) a.engine.output_index = a.output_index;

  ReportContext ctx;
  ctx.tool_version = build::kVersion;
  ctx.libtorch_version = engine_libtorch_version();
  ctx.model_path = a.engine.model_path;
  auto record_options = [&] {
    ctx.options = {{"inputs", a.engine.input_files}, {"input_shapes", a.engine.input_shapes}, {"loss", a.engine.loss},
                   {"seed", a.seed}, {"precision", a.engine.precision}, {"fail_on", a.fail_on},
                   {"severity", a.severity}, {"rules_dir", resolve_rules_dir(a.rules_dir)}};
    if (a.engine.output_index) ctx.options["output_index"] = *a.engine.output_index;
    if (a.engine.lr) ctx.options["lr"] = *a.engine.lr;
    if (a.engine.lr || a.engine.steps > 0) ctx.options["optimizer"] = a.engine.optimizer;
    if (a.engine.steps > 0) ctx.options["steps"] = a.engine.steps;
  };
  record_options();
  const auto started = std::chrono::steady_clock::now();  // --timeout counts from here

  std::vector<Rule> all_rules;  // as loaded
  std::vector<Rule> rules;      // evaluated: selected, with the config's overrides
  Config cfg;
  MetricsDoc doc;
  bool have_doc = false;
  std::unique_ptr<Watchdog> watchdog;
  try {
    all_rules = load_rules(resolve_rules_dir(a.rules_dir));
    cfg = resolve_config(a, all_rules);
    a.fail_on = cfg.fail_on.value_or("error");
    a.severity = cfg.severity.value_or("info");
    rules = apply_config(all_rules, cfg);
    ctx.severity = a.severity;
    for (const auto& [id, sev] : cfg.severity_overrides)
      if (const Rule* d = find_rule(all_rules, id)) ctx.default_severity[id] = d->severity;
    ctx.config = config_json(cfg, rules, all_rules, a.severity, a.fail_on);
    record_options();
    if (rules.empty()) spdlog::warn("no rule is selected (--select/--ignore or the config file); nothing will be found");

    const bool progress_on = !a.quiet && ::isatty(STDERR_FILENO);
    const auto t0 = std::chrono::steady_clock::now();
    // The hard --timeout: the engine checks the deadline between passes, and
    // this watchdog ends the process when one pass runs past it (a forward
    // cannot be interrupted). It writes the error reports itself; the main
    // thread disarms it before writing its own, so only one of them writes.
    const double timeout_s = a.engine.timeout_seconds;
    watchdog = std::make_unique<Watchdog>(
        timeout_s, started, static_cast<int>(ExitCode::kLoad),
        [targets, rules, ctx, timeout_s, progress_on](const std::string& probe, const std::string& pass, double el) {
          ReportContext c = ctx;
          c.status = "error";
          c.error_kind = error_kind::kTimeout;
          std::ostringstream m;
          m << "--timeout " << timeout_s << " s passed ";
          if (probe == "load" || probe == "instrument")
            m << "while " << (probe == "load" ? "loading the " : "instrumenting the ") << pass << " (";
          else
            m << "during the " << probe << " probe (" << pass << " pass, ";
          m << std::fixed << std::setprecision(1) << el
            << " s elapsed); a forward or backward pass cannot be interrupted, so normdoctor stopped there: raise "
               "--timeout, or use a smaller batch (--input, --input-shape)";
          c.error_message = m.str();
          c.exit_code = static_cast<int>(ExitCode::kLoad);
          if (progress_on) std::fprintf(stderr, "\r\033[K");
          std::fprintf(stderr, "normdoctor: error: %s\n", c.error_message.c_str());
          std::fflush(stderr);
          write_error_reports(targets, nullptr, rules, c);
          std::fflush(stdout);
        });
    ProgressFn progress = [&](const std::string& probe, const std::string& pass) {
      watchdog->set_stage(probe, pass);
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (progress_on) std::fprintf(stderr, "\r\033[K[%6.1fs] %s: %s", el, probe.c_str(), pass.c_str());
      spdlog::debug("{}: {} ({:.1f}s)", probe, pass, el);
    };
    doc = run_check(a.engine, progress);
    watchdog->disarm();
    if (progress_on) std::fprintf(stderr, "\r\033[K");
    have_doc = true;
  } catch (const Error& e) {
    if (watchdog) watchdog->disarm();
    if (::isatty(STDERR_FILENO) && !a.quiet) std::fprintf(stderr, "\r\033[K");
    ctx.status = "error";
    ctx.error_kind = e.kind();
    ctx.error_message = e.what();
    ctx.exit_code = static_cast<int>(e.exit_code());
    spdlog::error("{}", e.what());
    write_error_reports(targets, have_doc ? &doc : nullptr, rules, ctx);
    return ctx.exit_code;
  } catch (const std::exception& e) {
    if (watchdog) watchdog->disarm();
    if (::isatty(STDERR_FILENO) && !a.quiet) std::fprintf(stderr, "\r\033[K");
    ctx.status = "error";
    ctx.error_kind = error_kind::kInternal;
    ctx.error_message = std::string("internal error (a bug in normdoctor, please report it): ") + e.what();
    ctx.exit_code = static_cast<int>(ExitCode::kInternal);
    spdlog::error("{}", ctx.error_message);
    write_error_reports(targets, have_doc ? &doc : nullptr, rules, ctx);
    return ctx.exit_code;
  }

  std::vector<Finding> all_findings = evaluate_rules(rules, doc);
  ctx.suppressed = suppress_findings(all_findings, cfg.suppressions);
  for (const auto& sup : cfg.suppressions) {
    if (sup.matched > 0) continue;
    ReportNote note{cfg.file, sup.line,
                    "suppression of " + sup.rule + " on modules '" + sup.module +
                        "' matched no finding; remove it if the problem is gone"};
    spdlog::warn("{}:{}: {}", note.file, note.line, note.text);
    ctx.notes.push_back(std::move(note));
  }
  ctx.config = config_json(cfg, rules, all_rules, a.severity, a.fail_on);

  // What fails (--fail-on) counts every finding the config kept, also those
  // below --severity, which only decides what is shown.
  const Severity fail_on = a.fail_on == "never" ? Severity::kError : parse_severity(a.fail_on, "--fail-on");
  const bool never_fail = a.fail_on == "never" || a.exit_zero;
  int code = 0;
  for (const auto& f : all_findings)
    if (!never_fail && f.severity >= fail_on) code = 1;
  const Severity shown_from = parse_severity(a.severity, "--severity");
  std::vector<Finding> findings;
  for (auto& f : all_findings) {
    if (f.severity >= shown_from) {
      findings.push_back(std::move(f));
      continue;
    }
    ++ctx.hidden;
    if (std::find(ctx.hidden_rules.begin(), ctx.hidden_rules.end(), f.rule_id) == ctx.hidden_rules.end())
      ctx.hidden_rules.push_back(f.rule_id);
  }
  const bool shown_fails =
      std::any_of(findings.begin(), findings.end(), [&](const Finding& f) { return f.severity >= fail_on; });
  if (ctx.hidden > 0 && code == 1 && !shown_fails)
    spdlog::warn("the run fails (--fail-on {}) on {} finding(s) below --severity {}, which the report does not show",
                 a.fail_on, ctx.hidden, a.severity);
  ctx.exit_code = code;
  if (doc.model_metrics.count("run.synthetic_inputs") && doc.model_metrics["run.synthetic_inputs"] == true) {
    // The exact command with a real batch instead of made-up inputs: the
    // same options, --input batch.pt in place of --input-shape.
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
         << "and run:\n  normdoctor check " << quote(a.engine.model_path) << " --input batch.pt";
    if (!a.engine.target_file.empty()) hint << " --target " << quote(a.engine.target_file);
    if (a.engine.loss != "auto") hint << " --loss " << a.engine.loss;
    if (a.engine.output_index) hint << " --output-index " << *a.engine.output_index;
    if (a.engine.precision != "fp32") hint << " --precision " << a.engine.precision;
    if (a.engine.train_batch_size > 0) hint << " --train-batch-size " << a.engine.train_batch_size;
    if (a.seed != 0) hint << " --seed " << a.seed;
    if (a.fail_on != "error") hint << " --fail-on " << a.fail_on;
    ctx.rerun_hint = hint.str();
  }
  TextOptions topt;
  topt.color = use_color(a.color, STDOUT_FILENO);
  write_reports(targets, doc, findings, rules, ctx, topt);
  return code;
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
/// (JSON status "error", kind usage). Best effort: nothing is written when
/// the report options are what is broken.
void write_flag_error_reports(int argc, char** argv, const std::string& message) {
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
    ctx.libtorch_version = engine_libtorch_version();
    ctx.status = "error";
    ctx.error_kind = error_kind::kUsage;
    ctx.error_message = message;
    ctx.exit_code = static_cast<int>(ExitCode::kUsage);
    write_error_reports(targets, nullptr, {}, ctx);
  } catch (const std::exception&) {
    // The report options themselves are wrong: stderr has the message.
  }
}

}  // namespace

int cli_main(int argc, char** argv) {
  CLI::App app{"normdoctor: diagnose neural-network training instability in TorchScript models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("normdoctor ") + build::kVersion);

  CheckArgs a;
  auto* check = app.add_subcommand("check", "Measure a model on sample batches and report known failure modes");
  check->add_option("model", a.engine.model_path, "TorchScript model file (torch.jit.script/trace(...).save)")->required();
  check->add_option("--input", a.engine.input_files,
                    "Sample batch: torch.save of a tensor, tuple, list or dict of tensors, or .safetensors (repeatable)");
  check->add_option("--input-shape", a.engine.input_shapes,
                    "Synthesize an argument: [NAME=]DIMS[:DTYPE][:LOW..HIGH], e.g. 8x3x32x32 or input_ids=2x16:int64:0..1000 (repeatable)");
  check->add_option("--target", a.engine.target_file, "Targets for the loss (torch.save of a tensor)");
  check->add_option("--loss", a.engine.loss, "Loss for the backward pass")
      ->check(CLI::IsMember({"auto", "projection", "mse", "cross_entropy", "sum"}))->capture_default_str();
  check->add_option("--output-index", a.output_index, "Which tensor of a tuple/list/dict output feeds the loss");
  check->add_option("--seed", a.seed, "Seed for every random choice")->capture_default_str();
  check->add_option("--precision", a.engine.precision, "Precision the model trains or serves in")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))->capture_default_str();
  check->add_option("--train-batch-size", a.engine.train_batch_size, "True per-step batch size in training (default: the sample batch size)");
  check->add_option("--timeout", a.engine.timeout_seconds,
                    "Give up after this many seconds for the whole check, also inside a pass (exit 3; 0 = none)")
      ->check(CLI::NonNegativeNumber);
  check->add_option("--seq-dim", a.engine.seq_dim, "Time (sequence) axis of the sequence inputs (default: inferred, axis 1)");
  check->add_option("--batch-dim", a.engine.batch_dim,
                    "Batch axis of the inputs, e.g. 1 for [time, batch, feature] (default: inferred, axis 0)")
      ->check(CLI::NonNegativeNumber);
  check->add_option("--mask-input", a.engine.mask_input, "The padding-mask argument, by name or index (default: inferred)");
  check->add_option("--pad-value", a.engine.pad_value, "Token id or feature value used for padding")->capture_default_str();
  check->add_option("--threads", a.engine.threads, "Intra-op threads (default: LibTorch's)");
  check->add_option_function<double>("--lr", [&a](const double& v) { a.engine.lr = v; },
                                     "Learning rate: update ratio per parameter, and the replay's step size");
  check->add_option("--optimizer", a.engine.optimizer, "Optimizer of the update ratio and the replay")
      ->check(CLI::IsMember({"sgd", "adam"}))->capture_default_str();
  check->add_option("--steps", a.engine.steps, "Replay: take this many optimizer steps on the sample batch (needs --lr)")
      ->check(CLI::NonNegativeNumber);
  check->add_option("--format", a.formats,
                    "Report format: text | json | sarif | junit | github (repeatable, one -o each)")
      ->check(CLI::IsMember(report_formats()));
  check->add_option("-o,--output", a.outputs, "Write the report to FILE (atomically) instead of stdout (repeatable)");
  auto* fail_on_opt = check->add_option("--fail-on", a.fail_on, "Exit 1 when a finding is at or above this severity")
      ->check(CLI::IsMember({"info", "warning", "error", "never"}))->capture_default_str();
  check->add_flag("--exit-zero", a.exit_zero, "Exit 0 even with findings (errors of the tool still exit 2/3/4)");
  auto* severity_opt = check->add_option("--severity", a.severity,
                                         "Lowest severity shown in the report (what fails is --fail-on)")
      ->check(CLI::IsMember({"info", "warning", "error"}))->capture_default_str();
  auto* select_opt = check->add_option("--select", a.select,
                                       "Evaluate only these rules: ids or id prefixes, comma-separated (repeatable)");
  auto* ignore_opt = check->add_option("--ignore", a.ignore,
                                       "Do not evaluate these rules: ids or id prefixes, comma-separated (repeatable)");
  auto* config_opt = check->add_option("--config", a.config_file,
                                       "Read this config file instead of the nearest normdoctor.toml");
  check->add_flag("--no-config", a.no_config, "Read no config file")->excludes(config_opt);
  check->add_option("--color", a.color, "Colors on the terminal")->check(CLI::IsMember({"auto", "always", "never"}))->capture_default_str();
  check->add_option("--rules-dir", a.rules_dir, "Folder of rule files (default: the installed rules)");
  check->add_flag("-q,--quiet", a.quiet, "Only errors on stderr");
  check->add_flag("-v,--verbose", a.verbose, "More logging on stderr (-vv: trace)");

  std::string rules_dir, rules_format = "text", explain_id;
  auto* rules = app.add_subcommand("rules", "List the rules");
  rules->add_option("--format", rules_format, "Output: text (a table) | json")
      ->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  rules->add_option("--rules-dir", rules_dir, "Folder of rule files");
  auto* explain = app.add_subcommand("explain", "Explain a rule: what it detects, why, how to fix");
  explain->add_option("id", explain_id, "Rule id, e.g. ACT002")->required();
  explain->add_option("--rules-dir", rules_dir, "Folder of rule files");

  // Hidden: every documented option, one "SUBCOMMAND OPTION" per line, for the
  // test that checks the man page documents each of them.
  app.add_flag_callback("--list-options", [&app] {
       print_option_list(app);
       throw CLI::Success();
     })->group("");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "normdoctor: error: %s\nRun with --help for more information.\n", e.what());
    if (*check) write_flag_error_reports(argc, argv, e.what());
    return static_cast<int>(ExitCode::kUsage);
  }
  a.fail_on_given = fail_on_opt->count() > 0;
  a.severity_given = severity_opt->count() > 0;
  a.select_given = select_opt->count() > 0;
  a.ignore_given = ignore_opt->count() > 0;

  try {
    if (*check) return run_check_command(a);
    if (*rules) return run_rules_list(rules_dir, rules_format);
    if (*explain) return run_explain(rules_dir, explain_id);
  } catch (const Error& e) {
    std::fprintf(stderr, "normdoctor: error: %s\n", e.what());
    return static_cast<int>(e.exit_code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "normdoctor: internal error (a bug, please report it): %s\n", e.what());
    return static_cast<int>(ExitCode::kInternal);
  }
  return static_cast<int>(ExitCode::kUsage);
}

}  // namespace nd
