// normdoctor's performance benchmark (README, "Performance").
//
//   build/bench/normdoctor_bench DIR [--reps N] [--check-reps N] [--warmup N] [--threads N] [--only MODEL] [--no-depth]
//
// DIR holds the models written by fixtures/make_bench_models.py. For each of
// resnet18, transformer, deep_narrow and (when DIR has it) gpt2_small, in this
// one process:
//   plain         train-mode forward + backward through LibTorch, uninstrumented;
//   instrumented  the same pass through normdoctor's instrumented graph, every
//                 module measured (activations and gradients);
//   check         the whole `normdoctor check` (cli_main in-process: load, instrument,
//                 probes, rules, JSON report) against the sum of the plain passes its
//                 probes ran (the report lists them);
//   memory        peak resident set size (VmHWM) of a fresh child process running
//                 `check` against one running the plain pass.
// Times are medians of repeated runs after warm-up; plain and instrumented
// passes alternate, and each check is followed by the plain equivalents of
// its passes, so that load from other processes hits both alike. A second
// table compares eval-mode forwards; a third times `check` at 12, 24 and 48
// transformer blocks. Last, one line per model:
// `MODEL overhead=X check_vs_passes=Y memory=Z`.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/script.h>

#include "cli/cli.h"
#include "instrument/instrument.h"
#include "model/batch_file.h"
#include "model/model.h"
#include "model/op_fallbacks.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// A field of /proc/self/status in kB ("VmHWM", "VmRSS"); -1 if absent.
long proc_status_kb(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + ":", 0) == 0) return std::strtol(line.c_str() + key.size() + 1, nullptr, 10);
  return -1;
}

/// The model and its sample batch.
struct Bench {
  std::string name, model_path, input_path;
  nd::LoadedModel model;
  std::vector<c10::IValue> args;
  /// forward's graph, inlined, without taps, run op by op by the same
  /// interpreter as the instrumented copy (eager PyTorch's execution model).
  /// TorchScript's default profiling executor is not the baseline: it
  /// re-specializes and re-optimizes whenever the mode or grad state changes.
  std::unique_ptr<torch::jit::GraphFunction> plain;
};

void make_plain(Bench& b) {
  auto g = b.model.module.get_method("forward").graph()->copy();
  torch::jit::Inline(*g);
  b.plain = std::make_unique<torch::jit::GraphFunction>("plain_forward", g, nullptr,
                                                        torch::jit::ExecutorExecutionMode::SIMPLE);
}

c10::IValue plain_forward(Bench& b, const std::vector<c10::IValue>& args) {
  torch::jit::Stack stack;
  stack.emplace_back(b.model.module._ivalue());
  for (const auto& a : args) stack.push_back(a);
  b.plain->run(stack);
  return stack.front();
}

std::vector<c10::IValue> load_args(const std::string& input_path) {
  nd::BatchFile b = nd::read_batch_file(input_path);
  std::vector<c10::IValue> a;
  for (const auto& t : b.positional) a.emplace_back(t);
  return a;
}

/// The first floating-point tensor of an output (the loss input).
at::Tensor first_float(const c10::IValue& out) {
  if (out.isTensor()) return out.toTensor();
  if (out.isTuple())
    for (const auto& e : out.toTupleRef().elements())
      if (e.isTensor() && e.toTensor().is_floating_point()) return e.toTensor();
  throw std::runtime_error("forward returned no tensor");
}

/// The same loss for every pass: a fixed random projection sum(y * r) / N.
at::Tensor projection_loss(const at::Tensor& y) {
  static std::map<std::vector<int64_t>, at::Tensor> cache;
  auto& r = cache[y.sizes().vec()];
  if (!r.defined()) {
    at::Generator g = at::detail::createCPUGenerator(7);
    r = at::randn(y.sizes(), g, at::TensorOptions().dtype(at::kFloat));
  }
  return (y * r).sum() / static_cast<double>(y.dim() ? y.size(0) : 1);
}

/// First `n` examples of every tensor argument (axis 0).
std::vector<c10::IValue> first_examples(const std::vector<c10::IValue>& args, int64_t n) {
  std::vector<c10::IValue> out;
  for (const auto& a : args) out.emplace_back(a.isTensor() ? a.toTensor().narrow(0, 0, n).contiguous() : a);
  return out;
}

/// One uninstrumented pass; returns seconds.
double plain_pass(Bench& b, const std::vector<c10::IValue>& args, bool train, bool backward) {
  const auto t0 = Clock::now();
  b.model.module.train(train);
  if (backward) {
    torch::AutoGradMode g(true);
    c10::IValue out = plain_forward(b, args);
    projection_loss(first_float(out)).backward();
  } else {
    torch::NoGradGuard ng;
    plain_forward(b, args);
  }
  return seconds_since(t0);
}

/// One instrumented train pass (activations and gradients of every module); returns seconds.
double instrumented_pass(Bench& b, nd::InstrumentedModel& im) {
  const auto t0 = Clock::now();
  b.model.module.train(true);
  nd::Collector c(im.taps().size());
  nd::PassConfig cfg;
  cfg.training = true;
  cfg.record_grad = true;
  torch::AutoGradMode g(true);
  c10::IValue out = im.run(b.args, cfg, c);
  projection_loss(first_float(out)).backward();
  return seconds_since(t0);
}

/// One instrumented eval-mode forward without gradient (the normalization probe's passes); returns seconds.
double instrumented_eval(Bench& b, nd::InstrumentedModel& im) {
  const auto t0 = Clock::now();
  b.model.module.train(false);
  nd::Collector c(im.taps().size());
  nd::PassConfig cfg;
  torch::NoGradGuard ng;
  im.run(b.args, cfg, c);
  return seconds_since(t0);
}

/// `normdoctor check` in-process; returns the JSON report.
nlohmann::json run_cli_check(const std::string& model, const std::string& input, const std::string& report, int threads) {
  std::vector<std::string> argv_s = {"normdoctor", "check", model, "--input", input, "--format", "json", "-o", report,
                                     "--exit-zero", "-q"};
  if (threads > 0) {
    argv_s.push_back("--threads");
    argv_s.push_back(std::to_string(threads));
  }
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  const int rc = nd::cli_main(static_cast<int>(argv.size()), argv.data());
  if (rc != 0) throw std::runtime_error("normdoctor check " + model + " exited " + std::to_string(rc));
  std::ifstream f(report);
  return nlohmann::json::parse(f);
}

/// Peak RSS (kB) of a fresh process: this program run as `--child MODE MODEL INPUT`.
std::pair<long, long> child_peak(const std::string& mode, const Bench& b, int threads) {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return {-1, -1};
  exe[n] = 0;
  std::string cmd = std::string(exe) + " --child " + mode + " " + b.model_path + " " + b.input_path +
                    " --threads " + std::to_string(threads);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, -1};
  long hwm = -1, base = -1;
  if (std::fscanf(p, "%ld %ld", &hwm, &base) != 2) hwm = base = -1;
  pclose(p);
  return {hwm, base};
}

int child_main(const std::string& mode, const std::string& model, const std::string& input, int threads) {
  if (threads > 0) at::set_num_threads(threads);
  const long base = proc_status_kb("VmRSS");  // LibTorch loaded, nothing run
  if (mode == "plain") {
    Bench b;
    b.model = nd::load_model(model);
    b.args = load_args(input);
    make_plain(b);
    for (int i = 0; i < 3; ++i) plain_pass(b, b.args, true, true);
  } else {
    const std::string report = "/tmp/normdoctor_bench_" + std::to_string(getpid()) + ".json";
    run_cli_check(model, input, report, threads);
    std::remove(report.c_str());
  }
  std::printf("%ld %ld\n", proc_status_kb("VmHWM"), base);
  return 0;
}


struct Row {
  std::string name;
  size_t modules = 0, taps = 0;
  double load = 0, jit_load = 0, rewrite = 0, plain = 0, instr = 0, eval_plain = 0, eval_instr = 0, check = 0, passes_plain = 0, passes_in_check = 0;
  size_t passes = 0;
  long rss_plain = 0, rss_check = 0, rss_base = 0;
};

struct Options {
  std::string dir;
  int reps = 5, check_reps = 3, warmup = 2, threads = 0;
  std::string only;
  bool depth = true;
};

Bench open_bench(const Options& o, const std::string& name) {
  Bench b;
  b.name = name;
  b.model_path = o.dir + "/" + name + ".pt";
  b.input_path = o.dir + "/" + name + ".input.pt";
  b.model = nd::load_model(b.model_path);
  b.args = load_args(b.input_path);
  make_plain(b);
  return b;
}

/// Median time of `check` and of the plain passes it ran; fills r.check,
/// r.passes*. Each repetition runs `check` and then the plain equivalent of
/// every pass it reported, so that load from other processes hits both alike.
void measure_check(const Options& o, Bench& b, Row& r) {
  const std::string report = "/tmp/normdoctor_bench_" + std::to_string(getpid()) + ".json";
  const int64_t batch = b.args.front().toTensor().size(0);
  std::vector<double> tc, tp, tin;
  for (int i = 0; i < o.check_reps + 1; ++i) {  // the first is warm-up
    const auto t0 = Clock::now();
    nlohmann::json rep = run_cli_check(b.model_path, b.input_path, report, o.threads);
    const double tcheck = seconds_since(t0);
    double plain = 0, in_pass = 0;
    size_t passes = 0;
    for (const auto& p : rep["probes"]["passes"]) {
      const std::string name = p.value("name", "");
      const bool train = p.value("mode", "") == "train";
      const bool backward = p.value("backward", false);
      // eval-example0 / eval-example-last run one example (normalization probe).
      const int64_t examples = name.rfind("eval-example", 0) == 0 ? 1 : batch;
      const auto args = examples == batch ? b.args : first_examples(b.args, examples);
      if (i == 0) plain_pass(b, args, train, backward);  // warm-up
      plain += plain_pass(b, args, train, backward);
      ++passes;
    }
    for (const auto& p : rep["timing"]["passes"]) in_pass += p.value("seconds", 0.0);
    if (i == 0) continue;
    tc.push_back(tcheck);
    tp.push_back(plain);
    tin.push_back(in_pass);
    r.passes = passes;
  }
  std::remove(report.c_str());
  r.check = median(tc);
  r.passes_plain = median(tp);
  r.passes_in_check = median(tin);
}

Row measure_model(const Options& o0, const std::string& name) {
  Row r;
  // A model of about 100M parameters (gpt2_small) costs seconds per pass:
  // one warm-up, two passes and one check keep the run to minutes.
  Options o = o0;
  if (name == "gpt2_small") {
    o.warmup = std::min(o.warmup, 1);
    o.reps = std::min(o.reps, 2);
    o.check_reps = 1;
  }
  r.name = name;
  std::cerr << "bench: " << name << "\n";
  {
    std::vector<double> t, tj;
    for (int i = 0; i < 3; ++i) {
      auto t0 = Clock::now();
      nd::LoadedModel m = nd::load_model(o.dir + "/" + name + ".pt");
      t.push_back(seconds_since(t0));
      t0 = Clock::now();
      torch::jit::Module jm = torch::jit::load(o.dir + "/" + name + ".pt");
      tj.push_back(seconds_since(t0));
    }
    r.load = median(t);
    r.jit_load = median(tj);
  }
  Bench b = open_bench(o, name);
  r.modules = b.model.modules.size();
  std::unique_ptr<nd::InstrumentedModel> im;
  {
    std::vector<double> t;
    for (int i = 0; i < 3; ++i) {
      const auto t0 = Clock::now();
      im = std::make_unique<nd::InstrumentedModel>(b.model);
      t.push_back(seconds_since(t0));
    }
    r.rewrite = median(t);
  }
  r.taps = im->taps().size();
  // Plain and instrumented alternate (warm-up first).
  std::vector<double> tp, ti;
  for (int i = 0; i < o.warmup + o.reps; ++i) {
    const double p = plain_pass(b, b.args, true, true);
    const double q = instrumented_pass(b, *im);
    if (i >= o.warmup) {
      tp.push_back(p);
      ti.push_back(q);
    }
  }
  r.plain = median(tp);
  r.instr = median(ti);
  std::vector<double> ep, ei;
  for (int i = 0; i < o.warmup + o.reps; ++i) {
    const double p = plain_pass(b, b.args, false, false);
    const double q = instrumented_eval(b, *im);
    if (i >= o.warmup) {
      ep.push_back(p);
      ei.push_back(q);
    }
  }
  r.eval_plain = median(ep);
  r.eval_instr = median(ei);
  measure_check(o, b, r);
  const auto [hp, bp] = child_peak("plain", b, o.threads);
  const auto [hc, bc] = child_peak("check", b, o.threads);
  r.rss_plain = hp;
  r.rss_check = hc;
  r.rss_base = std::max(bp, bc);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if (a.size() >= 4 && a[0] == "--child") {
      int threads = 0;
      if (a.size() >= 6 && a[4] == "--threads") threads = std::stoi(a[5]);
      return child_main(a[1], a[2], a[3], threads);
    }
    for (size_t i = 0; i < a.size(); ++i) {
      auto next = [&]() -> std::string {
        if (i + 1 >= a.size()) throw std::runtime_error(a[i] + " needs a value");
        return a[++i];
      };
      if (a[i] == "--reps") o.reps = std::stoi(next());
      else if (a[i] == "--check-reps") o.check_reps = std::stoi(next());
      else if (a[i] == "--warmup") o.warmup = std::stoi(next());
      else if (a[i] == "--threads") o.threads = std::stoi(next());
      else if (a[i] == "--only") o.only = next();
      else if (a[i] == "--no-depth") o.depth = false;
      else if (a[i] == "-h" || a[i] == "--help") {
        std::cout << "usage: normdoctor_bench DIR [--reps N] [--check-reps N] [--warmup N] [--threads N] [--only MODEL] "
                     "[--no-depth]\n  DIR: models from .venv/bin/python fixtures/make_bench_models.py DIR [--large]\n";
        return 0;
      } else if (o.dir.empty() && a[i][0] != '-') o.dir = a[i];
      else throw std::runtime_error("unknown argument " + a[i]);
    }
    if (o.dir.empty()) throw std::runtime_error("usage: normdoctor_bench DIR (models from .venv/bin/python fixtures/make_bench_models.py DIR)");
    if (o.threads > 0) at::set_num_threads(o.threads);
      o.threads = at::get_num_threads();

    std::vector<Row> rows;
    for (const char* m : {"resnet18", "transformer", "deep_narrow", "gpt2_small"}) {
      if (!o.only.empty() && o.only != m) continue;
      // gpt2_small (make_bench_models.py --large) is optional: about 450 MB.
      if (std::string(m) == "gpt2_small" && o.only.empty() && !std::ifstream(o.dir + "/gpt2_small.pt")) {
        std::cerr << "bench: no " << o.dir << "/gpt2_small.pt (make_bench_models.py --large): skipped\n";
        continue;
      }
      rows.push_back(measure_model(o, m));
    }

    std::cout << "normdoctor benchmark: libtorch " << nd::libtorch_version() << ", " << o.threads
              << " intra-op threads, median of " << o.reps << " passes / " << o.check_reps << " checks after warm-up\n\n";
    std::printf("%-12s %7s %5s %8s %8s %8s %9s %9s %9s %6s %9s %9s %9s %8s %8s %8s\n", "model", "modules", "taps",
                "jit_ld_s", "load_s", "graph_s", "plain_ms", "instr_ms", "check_s", "passes", "plain_s", "in_pass_s", "overhead", "chk/pass",
                "rss_MB", "rss_chk");
    for (const auto& r : rows)
      std::printf("%-12s %7zu %5zu %8.3f %8.3f %8.3f %9.1f %9.1f %9.3f %6zu %9.3f %9.3f %9.2f %8.2f %8.0f %8.0f\n",
                  r.name.c_str(), r.modules, r.taps, r.jit_load, r.load, r.rewrite, r.plain * 1e3, r.instr * 1e3, r.check, r.passes,
                  r.passes_plain, r.passes_in_check, r.instr / r.plain, r.check / r.passes_plain, r.rss_plain / 1024.0,
                  r.rss_check / 1024.0);
    std::printf("\n%-12s %12s %12s %9s   (eval-mode forward without gradient, every module measured)\n", "model",
                "eval_plain_ms", "eval_instr_ms", "eval_ovh");
    for (const auto& r : rows)
      std::printf("%-12s %12.1f %12.1f %9.2f\n", r.name.c_str(), r.eval_plain * 1e3, r.eval_instr * 1e3,
                  r.eval_instr / r.eval_plain);
    std::cout << "\n(jit_ld_s: torch::jit::load alone; load_s: normdoctor's model loading (the same plus inventory and "
                 "SHA-256); graph_s: building the instrumented graph;\n plain_s: sum of the plain passes equivalent to those check ran; in_pass_s: the pass times check "
                 "itself reported; rss: peak of a fresh process, LibTorch alone ~"
              << (rows.empty() ? 0 : rows.front().rss_base / 1024) << " MB)\n";

    if (o.depth && o.only.empty()) {
      std::cout << "\ncheck time against depth (transformer, hidden 256, 4 heads, sequence 128, batch 8)\n";
      std::printf("%-8s %7s %8s %8s %9s %9s %8s %13s\n", "blocks", "modules", "load_s", "graph_s", "plain_s", "check_s",
                  "chk/pass", "check_s/block");
      std::vector<std::pair<int, double>> pts, plain_pts;
      for (int d : {12, 24, 48}) {
        const std::string name = "transformer_d" + std::to_string(d);
        std::cerr << "bench: " << name << "\n";
        Bench b = open_bench(o, name);
        Row r;
        auto t0 = Clock::now();
        nd::LoadedModel m = nd::load_model(b.model_path);
        r.load = seconds_since(t0);
        t0 = Clock::now();
        nd::InstrumentedModel im(b.model);
        r.rewrite = seconds_since(t0);
        Options oc = o;
        oc.check_reps = std::max(1, o.check_reps - 1);
        measure_check(oc, b, r);
        pts.push_back({d, r.check});
        plain_pts.push_back({d, r.passes_plain});
        std::printf("%-8d %7zu %8.3f %8.3f %9.3f %9.3f %8.2f %13.4f\n", d, b.model.modules.size(), r.load, r.rewrite,
                    r.passes_plain, r.check, r.check / r.passes_plain, r.check / d);
      }
      if (pts.size() == 3) {
        auto marginal = [](const std::vector<std::pair<int, double>>& v, size_t i) {
          return (v[i + 1].second - v[i].second) / (v[i + 1].first - v[i].first);
        };
        std::printf("marginal cost per block, check: %.4f s (12->24), %.4f s (24->48); plain passes: %.4f s, %.4f s\n",
                    marginal(pts, 0), marginal(pts, 1), marginal(plain_pts, 0), marginal(plain_pts, 1));
      }
    }
    std::cout << "\n";
    for (const auto& r : rows)
      std::printf("%s overhead=%.2f check_vs_passes=%.2f memory=%.2f\n", r.name.c_str(), r.instr / r.plain,
                  r.check / r.passes_plain, static_cast<double>(r.rss_check) / static_cast<double>(r.rss_plain));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "normdoctor_bench: " << e.what() << "\n";
    if (!o.dir.empty() && access((o.dir + "/resnet18.pt").c_str(), R_OK) != 0)
      std::cerr << "  make the models first: python fixtures/make_bench_models.py (torch and torchvision; corpus/requirements.txt) " << o.dir << "\n";
    return 2;
  }
}
