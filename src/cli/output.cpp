#include "cli/output.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "build_info.h"
#include "core/error.h"
#include "rules/suggest.h"

namespace nd {
namespace fs = std::filesystem;

namespace {
Error output_error(const std::string& msg) { return Error(error_kind::kOutput, ExitCode::kUsage, msg); }

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}
}  // namespace

std::vector<OutputTarget> plan_outputs(const std::vector<std::string>& formats, const std::vector<std::string>& outputs) {
  std::vector<OutputTarget> t;
  if (formats.empty()) {
    if (outputs.size() > 1) throw usage_error("several -o given without --format: give one --format per -o");
    if (outputs.empty()) return {{"text", ""}};
    const std::string& o = outputs[0];
    const char* format = ends_with(o, ".json")    ? "json"
                         : ends_with(o, ".sarif") ? "sarif"
                         : ends_with(o, ".xml")   ? "junit"
                         : ends_with(o, ".html")  ? "html"
                                                  : "text";
    return {{format, o}};
  }
  if (outputs.size() > formats.size())
    throw usage_error("more -o (" + std::to_string(outputs.size()) + ") than --format (" + std::to_string(formats.size()) +
                      "): give one --format per -o");
  if (formats.size() > outputs.size() + 1)
    throw usage_error("only one report can go to stdout: give -o FILE for all but one --format");
  for (size_t i = 0; i < formats.size(); ++i) t.push_back({formats[i], i < outputs.size() ? outputs[i] : ""});
  return t;
}

void check_writable(const std::string& path) {
  if (path == "-") return;
  fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) throw output_error("-o " + path + ": is a directory, expected a file path");
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) throw output_error("-o " + path + ": folder " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    throw output_error("-o " + path + ": folder " + dir.string() + " is not writable (" + std::strerror(errno) + ")");
  if (fs::exists(p, ec) && ::access(p.c_str(), W_OK) != 0)
    throw output_error("-o " + path + ": file exists and is not writable");
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    return;
  }
  fs::path p(path);
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + p.filename().string() + ".tmpXXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const int fd = ::mkstemp(buf.data());
  if (fd < 0) throw output_error("-o " + path + ": cannot create a temporary file in " + dir.string() + " (" + std::strerror(errno) + ")");
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n <= 0) {
      ::close(fd);
      ::unlink(buf.data());
      throw output_error("-o " + path + ": write failed (" + std::strerror(errno) + ")");
    }
    off += static_cast<size_t>(n);
  }
  ::fchmod(fd, 0644);
  ::close(fd);
  if (std::rename(buf.data(), path.c_str()) != 0) {
    ::unlink(buf.data());
    throw output_error("-o " + path + ": rename failed (" + std::strerror(errno) + ")");
  }
}

void write_reports(const std::vector<OutputTarget>& targets, const MetricsDoc& doc,
                   const std::vector<Finding>& findings, const std::vector<Rule>& rules, const ReportContext& ctx,
                   const TextOptions& topt) {
  for (const auto& t : targets) {
    TextOptions o = topt;
    if (!t.path.empty()) o.color = false;
    write_output(t.path, render_report(t.format, &doc, findings, rules, ctx, o));
  }
}

void write_error_reports(const std::vector<OutputTarget>& targets, const MetricsDoc* doc,
                         const std::vector<Rule>& rules, const ReportContext& ctx) {
  for (const auto& t : targets) {
    if (t.format == "text" && t.path.empty()) continue;  // stderr has the message
    try {
      write_output(t.path, render_report(t.format, doc, {}, rules, ctx, TextOptions{}));
    } catch (const Error& e) {
      std::fprintf(stderr, "normdoctor: error: %s\n", e.what());
    }
  }
}

std::string resolve_rules_dir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("NORMDOCTOR_RULES_DIR"); env && *env) return env;
  std::error_code ec;
  // Next to the binary: PREFIX/bin/normdoctor -> PREFIX/share/normdoctor/rules.
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path installed = exe.parent_path().parent_path() / "share" / "normdoctor" / "rules";
    if (fs::is_directory(installed, ec)) return installed.string();
  }
  if (fs::is_directory(build::kRulesDirSource, ec)) return build::kRulesDirSource;
  return build::kRulesDirInstall;
}

std::string did_you_mean_rule(const std::string& id, const std::vector<std::string>& ids) {
  return did_you_mean(id, ids);
}

}  // namespace nd
