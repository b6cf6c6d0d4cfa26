// Text helpers shared by the parsers.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace nd::formats {

/// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code
/// points above U+10FFFF).
bool valid_utf8(std::string_view s);

/// `s` with every byte that is not part of well-formed UTF-8, and every ASCII
/// control character but newline, written as \xNN, and cut after `max_bytes`
/// bytes of output (marked "..."). Error messages go through it: they end up
/// in JSON reports, which must be valid UTF-8, and on terminals.
std::string printable(std::string_view s, std::size_t max_bytes = 2000);

/// Throws load_error(kind, "SOURCE: WHAT") (core/error.h) through printable():
/// the one form of a file's parse error, naming the file (or argument) first.
/// `kind` is an error_kind constant (input_load, model_load, weights_load).
[[noreturn]] void throw_load_error(const char* kind, std::string_view source, const std::string& what,
                                   std::size_t max_bytes = 2000);

}  // namespace nd::formats
