// Text helpers shared by the parsers.
#pragma once

#include <string>
#include <string_view>

namespace nd::formats {

/// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code
/// points above U+10FFFF).
bool valid_utf8(std::string_view s);

/// `s` with every byte that is not part of well-formed UTF-8, and every ASCII
/// control character, written as \xNN. Error messages go through it: they end
/// up in JSON reports, which must be valid UTF-8, and on terminals.
std::string printable(std::string_view s);

}  // namespace nd::formats
