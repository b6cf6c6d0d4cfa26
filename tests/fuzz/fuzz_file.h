// Helper of the file-based fuzz targets (rule files, normdoctor.toml): the
// parsers take a path, so each input is written to one scratch file per
// process (in /dev/shm when it exists: no disk I/O per execution).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ndfuzz {

/// Writes `data` to this process's scratch file named `name` and returns its path.
inline std::string write_scratch(const uint8_t* data, size_t size, const std::string& name) {
  static const std::string dir = [] {
    const std::string d = "/dev/shm/nd_fuzz_" + std::to_string(::getpid());
    if (::access("/dev/shm", W_OK) == 0 && (::mkdir(d.c_str(), 0700) == 0 || ::access(d.c_str(), W_OK) == 0)) return d;
    const std::string t = "/tmp/nd_fuzz_" + std::to_string(::getpid());
    ::mkdir(t.c_str(), 0700);
    return t;
  }();
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();  // the harness itself failed
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

}  // namespace ndfuzz
