// man/normdoctor.1: lints clean with groff and mandoc, has the sections of
// STYLE.md in order, and documents every report format. (That it documents
// every option the CLI accepts is checked against the binary in
// tests/torch/cli_formats_test.cpp.)
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <regex>

#include "report/report.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_man_page_test {

namespace {

std::string man_path() { return (ndtest::source_dir() / "man" / "normdoctor.1").string(); }

struct Shell {
  int status = -1;
  std::string output;  ///< stdout and stderr
};

Shell run(const std::string& cmd) {
  Shell r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

bool have(const std::string& tool) { return run("command -v " + tool).status == 0; }

/// The roff source as plain words: escapes for '-' and fonts removed.
std::string plain_source() {
  std::string s = ndtest::read_file(man_path());
  s = std::regex_replace(s, std::regex(R"(\\-)"), "-");
  s = std::regex_replace(s, std::regex(R"(\\f[BIRP])"), "");
  return s;
}

}  // namespace

TEST(ManPage, GroffLintsClean) {
  if (!have("groff")) GTEST_SKIP() << "groff is not installed (Debian package groff-base)";
  const Shell r = run("groff -man -ww -z " + man_path());
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, "") << "groff warnings";
}

TEST(ManPage, MandocLintsClean) {
  if (!have("mandoc")) GTEST_SKIP() << "mandoc is not installed (Debian package mandoc)";
  const Shell r = run("mandoc -T lint -W warning " + man_path());
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, "") << "mandoc warnings";
}

TEST(ManPage, Renders) {
  if (!have("groff")) GTEST_SKIP() << "groff is not installed (Debian package groff-base)";
  const Shell r = run("groff -man -Tascii -P-cbou " + man_path());
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("EXIT STATUS"), std::string::npos);
  EXPECT_NE(r.output.find("normdoctor check model.pt --input batch.pt"), std::string::npos);
}

TEST(ManPage, ManDashLRenders) {
  if (!have("man")) GTEST_SKIP() << "man is not installed (Debian package man-db)";
  const Shell r = run("MANWIDTH=80 MANPAGER=cat PAGER=cat man -l " + man_path());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("NORMDOCTOR(1)"), std::string::npos) << r.output.substr(0, 400);
  EXPECT_NE(r.output.find("CONFIGURATION"), std::string::npos);
}

TEST(ManPage, SectionsInOrder) {
  const std::string src = ndtest::read_file(man_path());
  const std::vector<std::string> sections = {"NAME",    "SYNOPSIS",      "DESCRIPTION", "OPTIONS",
                                             "OUTPUT FORMATS", "RULES", "CONFIGURATION", "ENVIRONMENT",
                                             "FILES",   "EXIT STATUS",   "EXAMPLES",    "SEE ALSO"};
  std::size_t previous = 0;
  for (const auto& s : sections) {
    const std::size_t at = src.find("\n.SH " + s + "\n");
    ASSERT_NE(at, std::string::npos) << "missing section " << s;
    EXPECT_GT(at, previous) << s << " out of order";
    previous = at;
  }
}

TEST(ManPage, DocumentsFormatsExitCodesAndEnvironment) {
  const std::string src = plain_source();
  const std::string formats = src.substr(src.find(".SH OUTPUT FORMATS"));
  for (const auto& f : nd::report_formats()) EXPECT_NE(formats.find("\n.B " + f + "\n"), std::string::npos) << f;
  const std::string exits = src.substr(src.find(".SH EXIT STATUS"));
  for (int code = 0; code <= 4; ++code)
    EXPECT_NE(exits.find("\n.B " + std::to_string(code) + "\n"), std::string::npos) << code;
  for (const char* env : {"NO_COLOR", "TERM", "NORMDOCTOR_RULES_DIR"})
    EXPECT_NE(src.find(".B " + std::string(env)), std::string::npos) << env;
}

}  // namespace nd_test_man_page_test
