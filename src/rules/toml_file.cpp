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

const char* toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

}  // namespace nd
