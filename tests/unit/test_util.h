// Helpers shared by the torch-free unit tests (not a test file itself).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "metrics/metrics.h"

namespace ndtest {

namespace fs = std::filesystem;

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << text;
}

/// A fresh, empty folder under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("nd_unit_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  /// Writes `text` to NAME inside the folder and returns its path as a string.
  std::string write(const std::string& name, const std::string& text) const {
    write_file(path_ / name, text);
    return (path_ / name).string();
  }

 private:
  fs::path path_;
};

inline fs::path source_dir() { return fs::path(ND_SOURCE_DIR); }

/// Compares `actual` with tests/golden/NAME; with ND_UPDATE_GOLDEN=1 in the
/// environment, rewrites the golden file instead (and still passes).
inline void expect_golden(const std::string& name, const std::string& actual) {
  const fs::path p = source_dir() / "tests" / "golden" / name;
  const char* update = std::getenv("ND_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    write_file(p, actual);
    return;
  }
  ASSERT_TRUE(fs::exists(p)) << p << " is missing; run with ND_UPDATE_GOLDEN=1 to create it";
  EXPECT_EQ(read_file(p), actual) << "golden file " << p
                                  << " differs; if the change is intended, rerun with ND_UPDATE_GOLDEN=1";
}

/// A layer with metrics, for synthetic documents.
inline nd::LayerMetrics layer(const std::string& path, const std::string& kind, int64_t exec_order, bool leaf,
                              nd::MetricMap metrics = {}) {
  nd::LayerMetrics l;
  l.path = path;
  l.kind = kind;
  l.exec_order = exec_order;
  l.leaf = leaf;
  l.metrics = std::move(metrics);
  return l;
}

inline nd::InputMetrics input(const std::string& name, int64_t index, nd::MetricMap metrics = {}) {
  nd::InputMetrics in;
  in.name = name;
  in.index = index;
  in.metrics = std::move(metrics);
  return in;
}

}  // namespace ndtest
