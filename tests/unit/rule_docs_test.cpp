// Rules as documentation: every shipped rule file has a unique id, sits in
// the "Shipped rules" table of docs/rules.md with its failure mode and
// severity, and carries what `normdoctor rules` and `explain` print.
// (Fields, explain parts, references and metric names: shipped_rules_test.cpp.)
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include "rules/catalog.h"
#include "rules/rules.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_rule_docs_test {

namespace {

std::vector<nd::Rule> shipped() { return nd::load_rules((ndtest::source_dir() / "rules").string()); }

/// Rows of the "Shipped rules" table: id -> the whole row.
std::map<std::string, std::string> doc_table() {
  const std::string text = ndtest::read_file(ndtest::source_dir() / "docs" / "rules.md");
  const auto start = text.find("## Shipped rules");
  EXPECT_NE(start, std::string::npos);
  const std::string table = text.substr(start, text.find("\n## ", start + 1) - start);
  std::map<std::string, std::string> rows;
  std::istringstream in(table);
  const std::regex row(R"(^\| ([A-Z]+[0-9]{3}) \|)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) rows[m[1]] = line;
  }
  return rows;
}

}  // namespace

TEST(RuleDocs, IdsAreUniqueAcrossFiles) {
  std::set<std::string> ids, files;
  for (const auto& r : shipped()) {
    EXPECT_TRUE(ids.insert(r.id).second) << "duplicate id " << r.id;
    EXPECT_TRUE(files.insert(r.source_file).second);
  }
  // The loader refuses a duplicate id in another file (ids are never reused).
  ndtest::TempDir dir;
  const std::string a = ndtest::read_file(ndtest::source_dir() / "rules" / "ACT002.toml");
  dir.write("ACT002.toml", a);
  dir.write("ACT002_copy.toml", a);
  EXPECT_THROW(nd::load_rules(dir.path().string()), std::exception);
}

TEST(RuleDocs, EveryRuleIsInTheDocsTable) {
  const auto rows = doc_table();
  const auto rules = shipped();
  for (const auto& r : rules) {
    SCOPED_TRACE(r.id);
    auto it = rows.find(r.id);
    ASSERT_NE(it, rows.end()) << "docs/rules.md, Shipped rules: add a row for " << r.id;
    EXPECT_NE(it->second.find("| " + r.failure_mode + " |"), std::string::npos) << it->second;
    EXPECT_NE(it->second.find(std::string("| ") + nd::severity_name(r.severity)), std::string::npos) << it->second;
  }
  EXPECT_EQ(rows.size(), rules.size()) << "the table lists a rule that has no file";
}

TEST(RuleDocs, WhatRulesAndExplainPrint) {
  for (const auto& r : shipped()) {
    SCOPED_TRACE(r.id);
    EXPECT_TRUE(nd::is_failure_mode(r.failure_mode));
    EXPECT_FALSE(r.title.empty());
    EXPECT_TRUE(r.lifecycle == "stable" || r.lifecycle == "preview" || r.lifecycle == "deprecated");
    EXPECT_TRUE(std::regex_match(r.since, std::regex(R"([0-9]+\.[0-9]+\.[0-9]+)")));
    EXPECT_FALSE(r.explain.empty());
    EXPECT_FALSE(r.references.empty());
    EXPECT_FALSE(r.when.empty());
  }
}

}  // namespace nd_test_rule_docs_test
