// Reading a TOML file (rule files, normdoctor.toml) with errors that name the
// file and line. Torch-free.
#pragma once

#include <string>

#include <toml++/toml.h>

namespace nd {

/// Parses `path`. Throws nd::Error(kind, exit 2): "<missing_prefix>cannot read
/// <what> (no such file)" when the file is absent, "PATH:LINE: TOML syntax
/// error: ..." on a parse error.
toml::table parse_toml_file(const std::string& path, const char* kind, const std::string& what,
                            const std::string& missing_prefix);

/// "a string", "an integer", ... for a node's TOML type (error messages).
const char* toml_type_name(const toml::node& n);

}  // namespace nd
