// The embedded failure-mode slugs against ../shared/failure-modes.md, and the
// "did you mean" helper.
#include <gtest/gtest.h>

#include "rules/catalog.h"
#include "rules/suggest.h"
#include "test_util.h"

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

TEST(Catalog, EmbeddedSlugsEqualFailureModesMd) {
  const ndtest::fs::path p = ndtest::fs::path(ND_SHARED_DIR) / "failure-modes.md";
  if (!ndtest::fs::exists(p)) GTEST_SKIP() << p << " not found (the shared folder is not beside this checkout)";
  const auto from_file = slugs_in_catalog(ndtest::read_file(p));
  ASSERT_GE(from_file.size(), 30u) << "the table parser found too few slugs in " << p;
  EXPECT_EQ(nd::failure_mode_slugs(), from_file)
      << "src/rules/catalog.cpp and failure-modes.md disagree; copy the slug list from the catalog";
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
