// Helpers for the end-to-end tests (tests/torch/e2e_*_test.cpp), not a test
// file itself: run the normdoctor binary as a user would (a shell command,
// stdout/stderr captured, exit status), read the JSON report it wrote, and
// look numbers up in fixtures/models/manifest.json (what Python measured).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nde2e {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline std::string source_dir() { return ND_SOURCE_DIR; }
/// The binary under test: ND_BINARY from the build, or $ND_E2E_BINARY when set
/// (to run the same cases against another build).
inline std::string binary() {
  const char* env = std::getenv("ND_E2E_BINARY");
  return env && *env ? env : ND_BINARY;
}
inline std::string model(const std::string& name) { return source_dir() + "/fixtures/models/" + name; }
inline std::string batch(const std::string& name) { return source_dir() + "/fixtures/batches/" + name; }
inline std::string bad(const std::string& name) { return source_dir() + "/fixtures/bad/" + name; }
/// The real-model corpus (corpus/, with the files of ../shared/real-models folded in).
inline std::string real_models_dir() { return source_dir() + "/corpus"; }

inline std::string read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::string& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary);
  out << data;
}

/// fixtures/models/manifest.json, read once.
inline const json& manifest() {
  static const json m = json::parse(read_file(source_dir() + "/fixtures/models/manifest.json"));
  return m;
}

/// A value of the manifest by JSON pointer ("/growth20/faults/0/numbers/rms").
inline const json& mf(const std::string& pointer) { return manifest().at(json::json_pointer(pointer)); }

/// A fresh, empty folder under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() / ("nd_e2e_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    // Undo chmod done by a test so the folder can be removed.
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

struct NdRun {
  int exit_code = -1;
  std::string out, err;
  std::string command;
  double seconds = 0;
  json report;          ///< the JSON report (-o FILE), when one was asked for and written
  bool has_report = false;

  /// Everything a failure message needs.
  std::string describe() const {
    std::ostringstream s;
    s << "command: " << command << "\nexit code: " << exit_code << "\n--- stderr ---\n" << err.substr(0, 4000)
      << "\n--- stdout ---\n" << out.substr(0, 4000);
    return s.str();
  }
};

/// Runs `normdoctor ARGS...` (stdout and stderr captured, stdin /dev/null).
/// With `json_report` non-empty, adds `--format json -o json_report` and
/// parses the file when it exists. `prefix` goes before the binary in the
/// shell command (e.g. "prlimit --as=N" to run it under a memory limit).
inline NdRun run_nd(const std::vector<std::string>& args, const std::string& json_report = "",
                    const std::string& prefix = "") {
  TempDir tmp;
  const std::string err_path = tmp.file("stderr");
  std::string cmd = (prefix.empty() ? "" : prefix + " ") + shell_quote(binary());
  for (const auto& a : args) cmd += " " + shell_quote(a);
  if (!json_report.empty()) cmd += " --format json -o " + shell_quote(json_report);
  NdRun r;
  r.command = cmd;
  cmd += " </dev/null 2>" + shell_quote(err_path);
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    r.err = "popen failed";
    return r;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.err = read_file(err_path);
  if (!json_report.empty() && fs::exists(json_report)) {
    try {
      r.report = json::parse(read_file(json_report));
      r.has_report = true;
    } catch (const std::exception& e) {
      r.err += std::string("\n[test] report is not valid JSON: ") + e.what();
    }
  }
  return r;
}

/// The `check` command with the usual report options; `extra` after the inputs.
inline NdRun check(const std::string& model_path, const std::vector<std::string>& inputs,
                 const std::vector<std::string>& extra, const std::string& json_report) {
  std::vector<std::string> args{"check", model_path};
  for (const auto& i : inputs) {
    args.push_back("--input");
    args.push_back(i);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return run_nd(args, json_report);
}

/// A report metric as a double; "nan"/"inf" strings as such.
inline double as_number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan") return std::nan("");
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  return std::nan("");
}

/// |actual - expected| <= rel * |expected| (+ a tiny absolute floor).
inline ::testing::AssertionResult near_rel(const char* what, double actual, double expected, double rel) {
  const double tol = rel * std::fabs(expected) + 1e-12;
  if (std::fabs(actual - expected) <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << actual << " differs from expected " << expected
                                       << " by more than " << rel * 100 << "%";
}

/// The report's findings as (rule id, layer) pairs; "" for model-level findings.
inline std::set<std::pair<std::string, std::string>> finding_pairs(const json& report) {
  std::set<std::pair<std::string, std::string>> got;
  for (const auto& f : report.at("findings"))
    got.insert({f.at("rule_id").get<std::string>(), f.at("layer").is_null() ? "" : f.at("layer").get<std::string>()});
  return got;
}

/// (rule, layer) of every warning or error finding; layer "" for a model-level one.
inline std::set<std::pair<std::string, std::string>> serious_findings(const json& report) {
  std::set<std::pair<std::string, std::string>> out;
  if (!report.contains("findings")) return out;
  for (const auto& f : report.at("findings"))
    if (f.value("severity", "") != "info")
      out.insert({f.value("rule_id", ""), f.contains("layer") && f["layer"].is_string() ? f["layer"].get<std::string>() : ""});
  return out;
}

/// The first finding of rule `id`, or nullptr.
inline const json* first_finding(const json& report, const std::string& id) {
  if (!report.contains("findings")) return nullptr;
  for (const auto& f : report.at("findings"))
    if (f.value("rule_id", "") == id) return &f;
  return nullptr;
}

/// A fixture's check: its report, or why this LibTorch 1.x build cannot run
/// the PyTorch 2.x file (an operator it lacks), for the caller to skip with.
struct FixtureRun {
  json report = json::object();
  std::string skip;
};

/// `normdoctor check MODEL --input INPUT EXTRA...`, expecting exit 0 or 1 and
/// a report that declares every metric it wrote.
inline FixtureRun run_fixture(const std::string& model_path, const std::string& input_path,
                              const std::vector<std::string>& extra, bool major_below_2) {
  TempDir tmp;
  std::vector<std::string> args = {"check", model_path, "--input", input_path};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_nd(args, tmp.file("report.json"));
  FixtureRun out;
  if (major_below_2 && r.exit_code == 3 && r.has_report && r.report.contains("error") &&
      r.report["error"].value("kind", "") == "missing_operator") {
    out.skip = "this LibTorch 1.x cannot run this PyTorch 2.x file: " + r.report["error"].value("message", "");
    return out;
  }
  EXPECT_TRUE(r.has_report) << r.describe();
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe();
  if (r.has_report) {
    EXPECT_FALSE(r.report.at("probes").contains("undeclared_metrics")) << r.report.at("probes").at("undeclared_metrics");
    out.report = r.report;
  }
  return out;
}

/// The layers[].path list of a report, in report order.
inline std::vector<std::string> layer_paths(const json& report) {
  std::vector<std::string> v;
  for (const auto& l : report.at("layers")) v.push_back(l.at("path").get<std::string>());
  return v;
}

/// The layer object with this path, or nullptr.
inline const json* find_layer(const json& report, const std::string& path) {
  for (const auto& l : report.at("layers"))
    if (l.at("path") == path) return &l;
  return nullptr;
}

/// The report's layers[] are the fixture's named_modules() (manifest
/// "modules": path and class name, root first, in named_modules() order),
/// and the model facts match the manifest.
inline void expect_modules_match_manifest(const json& report, const std::string& fixture) {
  SCOPED_TRACE("modules of " + fixture);
  std::vector<std::string> want_paths, want_kinds, got_paths, got_kinds;
  for (const auto& m : mf("/" + fixture + "/modules")) {
    want_paths.push_back(m.at(0).get<std::string>());
    want_kinds.push_back(m.at(1).get<std::string>());
  }
  for (const auto& l : report.at("layers")) {
    got_paths.push_back(l.at("path").get<std::string>());
    got_kinds.push_back(l.at("kind").get<std::string>());
  }
  EXPECT_EQ(got_paths, want_paths);
  EXPECT_EQ(got_kinds, want_kinds);
  EXPECT_EQ(report.at("model").value("modules", -1), static_cast<int>(want_paths.size()));
  EXPECT_EQ(report.at("model").value("training", json()), mf("/" + fixture + "/training"));
  // A traced graph must be reported as traced (its mode flags are baked in).
  // Scripted fixtures: E2EModelKind in e2e_paths_test.cpp.
  if (mf("/" + fixture + "/kind") == "traced") {
    EXPECT_EQ(report.at("model").value("kind", ""), "traced");
  }
}

/// Asserts the shape every failed run's JSON report has.
inline void expect_error_report(const NdRun& r, const std::string& kind, const std::string& message_part) {
  ASSERT_TRUE(r.has_report) << "no JSON report written\n" << r.describe();
  const json& j = r.report;
  EXPECT_EQ(j.value("status", ""), "error") << r.describe();
  ASSERT_TRUE(j.contains("error") && j["error"].is_object()) << j.dump(2);
  EXPECT_EQ(j["error"].value("kind", ""), kind) << j["error"].dump();
  EXPECT_NE(j["error"].value("message", "").find(message_part), std::string::npos)
      << "error.message lacks '" << message_part << "': " << j["error"].dump();
  EXPECT_EQ(j.value("exit_code", -1), r.exit_code) << "report's exit_code differs from the process's";
  EXPECT_TRUE(j.at("findings").empty()) << j["findings"].dump(2);
  EXPECT_TRUE(j.contains("schema_version"));
}

}  // namespace nde2e
