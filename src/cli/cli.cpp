#include "cli/cli.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "build_info.h"
#include "cli/output.h"
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
    for (const auto& r : rules)
      arr.push_back({{"id", r.id}, {"failure_mode", r.failure_mode}, {"severity", severity_name(r.severity)},
                     {"scope", r.scope}, {"lifecycle", r.lifecycle}, {"since", r.since}, {"title", r.title}});
    std::cout << arr.dump(2) << "\n";
    return 0;
  }
  std::printf("%-8s %-8s %-28s %s\n", "ID", "SEVERITY", "FAILURE MODE", "TITLE");
  for (const auto& r : rules)
    std::printf("%-8s %-8s %-28s %s\n", r.id.c_str(), severity_name(r.severity), r.failure_mode.c_str(), r.title.c_str());
  return 0;
}

int run_explain(const std::string& dir, const std::string& id) {
  const auto rules = load_rules(resolve_rules_dir(dir));
  std::vector<std::string> ids;
  for (const auto& r : rules) {
    ids.push_back(r.id);
    if (r.id == id) {
      std::cout << r.id << " (" << r.failure_mode << ", " << severity_name(r.severity) << ", " << r.lifecycle
                << " since " << r.since << ")\n" << r.title << "\n\n" << r.explain << "\n";
      if (!r.fix.empty()) {
        std::cout << "\nFixes:\n";
        for (const auto& f : r.fix) std::cout << "  - " << f << "\n";
      }
      if (!r.references.empty()) {
        std::cout << "\nReferences:\n";
        for (const auto& f : r.references) std::cout << "  - " << f << "\n";
      }
      return 0;
    }
  }
  std::string hint = did_you_mean_rule(id, ids);
  throw usage_error("unknown rule id '" + id + "'" + hint + "; `normdoctor rules` lists them");
}

int run_check_command(CheckArgs& a) {
  setup_logging(a);
  // Output targets are checked before any work (a typo in -o must not cost a
  // full run).
  const auto targets = plan_outputs(a.formats, a.outputs);
  for (const auto& t : targets)
    if (!t.path.empty()) check_writable(t.path);
  const Severity fail_on = a.fail_on == "never" ? Severity::kError : parse_severity(a.fail_on, "--fail-on");
  const bool never_fail = a.fail_on == "never" || a.exit_zero;
  a.engine.seed = static_cast<uint64_t>(a.seed);
  if (a.output_index >= 0) a.engine.output_index = a.output_index;

  ReportContext ctx;
  ctx.tool_version = build::kVersion;
  ctx.libtorch_version = engine_libtorch_version();
  ctx.options = {{"inputs", a.engine.input_files}, {"input_shapes", a.engine.input_shapes}, {"loss", a.engine.loss},
                 {"seed", a.seed}, {"precision", a.engine.precision}, {"fail_on", a.fail_on},
                 {"rules_dir", resolve_rules_dir(a.rules_dir)}};
  if (a.engine.output_index) ctx.options["output_index"] = *a.engine.output_index;

  std::vector<Rule> rules;
  MetricsDoc doc;
  bool have_doc = false;
  try {
    rules = load_rules(resolve_rules_dir(a.rules_dir));
    const bool progress_on = !a.quiet && ::isatty(STDERR_FILENO);
    const auto t0 = std::chrono::steady_clock::now();
    ProgressFn progress = [&](const std::string& probe, const std::string& pass) {
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (progress_on) std::fprintf(stderr, "\r\033[K[%6.1fs] %s: %s", el, probe.c_str(), pass.c_str());
      spdlog::debug("{}: {} ({:.1f}s)", probe, pass, el);
    };
    doc = run_check(a.engine, progress);
    if (progress_on) std::fprintf(stderr, "\r\033[K");
    have_doc = true;
  } catch (const Error& e) {
    if (::isatty(STDERR_FILENO) && !a.quiet) std::fprintf(stderr, "\r\033[K");
    ctx.status = "error";
    ctx.error_kind = e.kind();
    ctx.error_message = e.what();
    ctx.exit_code = static_cast<int>(e.exit_code());
    spdlog::error("{}", e.what());
    write_error_reports(targets, have_doc ? &doc : nullptr, ctx);
    return ctx.exit_code;
  } catch (const std::exception& e) {
    if (::isatty(STDERR_FILENO) && !a.quiet) std::fprintf(stderr, "\r\033[K");
    ctx.status = "error";
    ctx.error_kind = error_kind::kInternal;
    ctx.error_message = std::string("internal error (a bug in normdoctor, please report it): ") + e.what();
    ctx.exit_code = static_cast<int>(ExitCode::kInternal);
    spdlog::error("{}", ctx.error_message);
    write_error_reports(targets, have_doc ? &doc : nullptr, ctx);
    return ctx.exit_code;
  }

  const auto findings = evaluate_rules(rules, doc);
  int code = 0;
  for (const auto& f : findings)
    if (!never_fail && f.severity >= fail_on) code = 1;
  ctx.exit_code = code;
  if (doc.model_metrics.count("run.synthetic_inputs") && doc.model_metrics["run.synthetic_inputs"] == true) {
    std::ostringstream hint;
    hint << "normdoctor check " << a.engine.model_path << " --input batch.pt";
    ctx.rerun_hint = hint.str();
  }
  TextOptions topt;
  topt.color = use_color(a.color, STDOUT_FILENO);
  write_reports(targets, doc, findings, ctx, topt);
  return code;
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
  check->add_option("--timeout", a.engine.timeout_seconds, "Give up after this many seconds (exit 3)");
  check->add_option("--threads", a.engine.threads, "Intra-op threads (default: LibTorch's)");
  check->add_option("--format", a.formats, "Report format: text | json (repeatable, one -o each)")
      ->check(CLI::IsMember({"text", "json"}));
  check->add_option("-o,--output", a.outputs, "Write the report to FILE (atomically) instead of stdout (repeatable)");
  check->add_option("--fail-on", a.fail_on, "Exit 1 when a finding is at or above this severity")
      ->check(CLI::IsMember({"info", "warning", "error", "never"}))->capture_default_str();
  check->add_flag("--exit-zero", a.exit_zero, "Exit 0 even with findings (errors of the tool still exit 2/3/4)");
  check->add_option("--color", a.color, "Colors on the terminal")->check(CLI::IsMember({"auto", "always", "never"}))->capture_default_str();
  check->add_option("--rules-dir", a.rules_dir, "Folder of rule files (default: the installed rules)");
  check->add_flag("-q,--quiet", a.quiet, "Only errors on stderr");
  check->add_flag("-v,--verbose", a.verbose, "More logging on stderr (-vv: trace)");

  std::string rules_dir, rules_format = "text", explain_id;
  auto* rules = app.add_subcommand("rules", "List the rules");
  rules->add_option("--format", rules_format)->check(CLI::IsMember({"text", "json"}));
  rules->add_option("--rules-dir", rules_dir, "Folder of rule files");
  auto* explain = app.add_subcommand("explain", "Explain a rule: what it detects, why, how to fix");
  explain->add_option("id", explain_id, "Rule id, e.g. ACT002")->required();
  explain->add_option("--rules-dir", rules_dir, "Folder of rule files");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : static_cast<int>(ExitCode::kUsage);
  }

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
