#include "rules/toml_file.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"

namespace nd {

toml::table parse_toml_file(const std::string& path, const char* kind, const std::string& what,
                            const std::string& missing_prefix) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(kind, ExitCode::kUsage, missing_prefix + "cannot read " + what + " (no such file)");
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw Error(kind, ExitCode::kUsage,
                path + ":" + std::to_string(std::max<uint32_t>(1, e.source().begin.line)) +
                    ": TOML syntax error: " + std::string(e.description()));
  }
}

}  // namespace nd
