// Zip central directory reading (src/formats/zip_index.h) on archives built in memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "formats/zip_index.h"
#include "zip_builder.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_formats_zip_index_test {

namespace {

using ndtest::make_zip;

std::vector<nd::formats::ZipEntry> index(const std::string& zip) {
  return nd::formats::read_zip_index(reinterpret_cast<const uint8_t*>(zip.data()), zip.size(), "batch.pt");
}

void expect_error(const std::string& zip, const std::string& needle) {
  try {
    index(zip);
    FAIL() << "no error; expected one containing: " << needle;
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kInputLoad);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("batch.pt"), std::string::npos) << e.what();
  }
}

TEST(FormatsZipIndex, ListsEntries) {
  const std::string zip = make_zip({{"archive/data.pkl", "abc"}, {"archive/data/0", std::string(24, 'x')}});
  const auto entries = index(zip);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].name, "archive/data.pkl");
  EXPECT_EQ(entries[0].uncompressed_size, 3u);
  EXPECT_EQ(entries[1].name, "archive/data/0");
  EXPECT_EQ(entries[1].uncompressed_size, 24u);
  EXPECT_EQ(entries[1].method, 0);
}

TEST(FormatsZipIndex, TruncatedOrCorrupt) {
  const std::string zip = make_zip({{"archive/data.pkl", "abc"}, {"archive/data/0", std::string(24, 'x')}});
  for (std::size_t n = 0; n < zip.size(); ++n) {
    EXPECT_THROW(index(zip.substr(0, n)), nd::Error) << n;
  }
  expect_error(zip.substr(0, zip.size() / 2), "truncated");
  expect_error("PK\3\4 not really a zip at all, just text", "truncated or corrupt");

  // An entry that claims more bytes than the archive holds.
  std::string lying = zip;
  const auto cd = lying.find("PK\1\2", 0);
  ASSERT_NE(cd, std::string::npos);
  lying[cd + 20] = '\xff'; lying[cd + 21] = '\xff'; lying[cd + 24] = '\xff'; lying[cd + 25] = '\xff';
  expect_error(lying, "zip entry 'archive/data.pkl' lies outside the archive data");

  // Stored entry whose sizes disagree.
  std::string mismatch = zip;
  mismatch[cd + 24] = 9;
  expect_error(mismatch, "sizes disagree");

  // An unknown compression method.
  std::string method = zip;
  method[cd + 10] = 14;
  expect_error(method, "compression method 14");
}

TEST(FormatsZipIndex, GarbageNeverCrashes) {
  const std::string zip = make_zip({{"a/data.pkl", "abc"}, {"a/data/0", "12345678"}});
  uint64_t state = 42;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes = zip;
    const int edits = 1 + static_cast<int>(next() % 3);
    for (int e = 0; e < edits; ++e) bytes[next() % bytes.size()] = static_cast<char>(next());
    try {
      index(bytes);
    } catch (const nd::Error&) {
    }
  }
}

}  // namespace

}  // namespace nd_test_formats_zip_index_test
