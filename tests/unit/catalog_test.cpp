// The embedded failure-mode slugs against ../shared/failure-modes.md, and the
// "did you mean" helper.
#include <gtest/gtest.h>

#include <iostream>
#include <set>

#include "rules/catalog.h"
#include "rules/rules.h"
#include "rules/suggest.h"
#include "test_util.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_catalog_test {

namespace {

/// Slugs of the catalog file: the first backticked word of each table row.
std::vector<std::string> slugs_in_catalog(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const std::size_t end = line.find('`', 3);
    if (end != std::string::npos) out.push_back(line.substr(3, end - 3));
  }
  return out;
}

}  // namespace

TEST(Catalog, EmbeddedSlugsEqualDocsFailureModesMd) {
  const ndtest::fs::path p = ndtest::fs::path(ND_SOURCE_DIR) / "docs" / "failure-modes.md";
  const auto from_file = slugs_in_catalog(ndtest::read_file(p));
  ASSERT_EQ(from_file.size(), 40u) << "the table parser found the wrong number of slugs in " << p;
  EXPECT_EQ(nd::failure_mode_slugs(), from_file)
      << "src/rules/catalog.cpp and docs/failure-modes.md disagree; copy the slug list from the catalog";
}

// docs/failure-modes.md is the project's copy of the team's catalog
// (../shared/failure-modes.md beside a developer's checkout). CI's clone has
// the shared folder too; a checkout without it has only the project's copy,
// which the test above checks.
TEST(Catalog, DocsCopyEqualsSharedCatalogWhenPresent) {
  const ndtest::fs::path shared = ndtest::fs::path(ND_SHARED_DIR) / "failure-modes.md";
  const ndtest::fs::path docs = ndtest::fs::path(ND_SOURCE_DIR) / "docs" / "failure-modes.md";
  if (!ndtest::fs::exists(shared)) {
    std::cout << "note: " << shared << " not beside this checkout; compared docs/failure-modes.md only\n";
    return;
  }
  EXPECT_EQ(slugs_in_catalog(ndtest::read_file(shared)), slugs_in_catalog(ndtest::read_file(docs)))
      << "docs/failure-modes.md is out of date: copy ../shared/failure-modes.md";
}

TEST(Catalog, EveryShippedRuleNamesACatalogSlug) {
  const auto slugs = slugs_in_catalog(ndtest::read_file(ndtest::source_dir() / "docs" / "failure-modes.md"));
  const std::set<std::string> known(slugs.begin(), slugs.end());
  const auto rules = nd::load_rules((ndtest::source_dir() / "rules").string());
  ASSERT_FALSE(rules.empty());
  for (const auto& r : rules)
    EXPECT_TRUE(known.count(r.failure_mode)) << r.id << " (" << r.source_file << ") names '" << r.failure_mode
                                             << "', which is not a slug of docs/failure-modes.md";
}

TEST(Catalog, KnowsSlugs) {
  EXPECT_TRUE(nd::is_failure_mode("activation-growth"));
  EXPECT_TRUE(nd::is_failure_mode("no-normalization"));
  EXPECT_FALSE(nd::is_failure_mode("activation_growth"));
  EXPECT_FALSE(nd::is_failure_mode(""));
}

TEST(Suggest, EditDistance) {
  EXPECT_EQ(nd::edit_distance("", ""), 0u);
  EXPECT_EQ(nd::edit_distance("abc", ""), 3u);
  EXPECT_EQ(nd::edit_distance("severty", "severity"), 1u);
  EXPECT_EQ(nd::edit_distance("kitten", "sitting"), 3u);
}

TEST(Suggest, ClosestNameWithinLimit) {
  const std::vector<std::string> keys = {"severity", "scope", "select", "message"};
  EXPECT_EQ(nd::closest_name("severty", keys), "severity");
  EXPECT_EQ(nd::closest_name("scop", keys), "scope");
  EXPECT_EQ(nd::closest_name("zzzzzzzz", keys), "");
  EXPECT_EQ(nd::did_you_mean("mesage", keys), "; did you mean 'message'?");
  EXPECT_EQ(nd::did_you_mean("qqq", keys), "");
  EXPECT_EQ(nd::closest_name("mess", keys), "message");  // abbreviation
}

}  // namespace nd_test_catalog_test
