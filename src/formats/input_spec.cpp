#include "formats/input_spec.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "formats/text.h"

namespace nd::formats {

namespace {

constexpr const char* kGrammar =
    "expected [NAME=]DIMS[:DTYPE][:LOW..HIGH], e.g. 4x3x64x64 or input_ids=2x16:int64:0..1000";

[[noreturn]] void fail(std::string_view spec, const std::string& what) {
  throw usage_error(printable("--input-shape '" + std::string(spec) + "': " + what));
}

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s) {
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = s.find(sep, start);
    if (at == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, at - start));
    start = at + 1;
  }
}

// Limits of each dtype's values, as doubles; integer types are exact below 2^53.
struct Bounds {
  double min;
  double max;
};
Bounds bounds_of(DType t) {
  switch (t) {
    case DType::kBool: return {0, 1};
    case DType::kUInt8: return {0, 255};
    case DType::kInt8: return {-128, 127};
    case DType::kInt16: return {-32768, 32767};
    case DType::kInt32: return {-2147483648.0, 2147483647.0};
    case DType::kFloat16: return {-65504.0, 65504.0};
    case DType::kFloat32:
    case DType::kBFloat16: return {-3.4e38, 3.4e38};
    default: break;
  }
  // int64 (exact only up to 2^53 as a double) and float64
  constexpr double k53 = 9007199254740992.0;
  if (dtype_is_integral(t)) return {-k53, k53};
  return {-std::numeric_limits<double>::max(), std::numeric_limits<double>::max()};
}

double parse_bound(std::string_view spec, std::string_view text, bool integral, const char* which) {
  if (text.empty()) fail(spec, std::string("range has no ") + which + " bound; " + kGrammar);
  if (integral) {
    int64_t v = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || ptr != end) {
      fail(spec, std::string(which) + " bound '" + std::string(text) +
                     "' is not an integer (integer dtypes take integer ranges, e.g. 0..1000)");
    }
    if (v > (int64_t{1} << 53) || v < -(int64_t{1} << 53)) {
      fail(spec, std::string(which) + " bound '" + std::string(text) + "' is beyond +-2^53");
    }
    return static_cast<double>(v);
  }
  const std::string copy(text);
  // strtod accepts "inf", "nan" and hex floats; only plain decimal numbers are meant here.
  for (char c : copy) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')) {
      fail(spec, std::string(which) + " bound '" + copy + "' is not a number");
    }
  }
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || errno == ERANGE || !std::isfinite(v)) {
    fail(spec, std::string(which) + " bound '" + copy + "' is not a finite number");
  }
  return v;
}

std::string fmt_bound(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  return std::to_string(v);
}

}  // namespace

InputShapeSpec parse_input_shape_spec(std::string_view spec) {
  InputShapeSpec out;
  out.text = std::string(spec);
  if (spec.empty()) fail(spec, std::string("empty spec; ") + kGrammar);
  if (spec.size() > 1024) fail(spec.substr(0, 64), "spec longer than 1024 characters");

  std::vector<std::string_view> parts = split(spec, ':');
  if (parts.size() > 3) fail(spec, std::string("too many ':'-separated parts; ") + kGrammar);

  // NAME=DIMS
  std::string_view dims = parts[0];
  const std::size_t eq = dims.find('=');
  if (eq != std::string_view::npos) {
    const std::string_view name = dims.substr(0, eq);
    if (!is_identifier(name)) {
      fail(spec, "name '" + std::string(name) +
                     "' is not a parameter name (letters, digits, '_', not starting with a digit)");
    }
    out.name = std::string(name);
    dims = dims.substr(eq + 1);
  }
  if (dims.empty()) fail(spec, std::string("no dimensions; ") + kGrammar);
  int64_t numel = 1;
  for (std::string_view d : split(dims, 'x')) {
    int64_t v = 0;
    const char* end = d.data() + d.size();
    auto [ptr, ec] = std::from_chars(d.data(), end, v);
    if (d.empty() || ec != std::errc() || ptr != end) {
      fail(spec, "dimension '" + std::string(d) + "' is not a positive integer; dimensions are joined by 'x', e.g. 4x3x64x64");
    }
    if (v < 1) fail(spec, "dimension " + std::to_string(v) + " must be at least 1");
    if (out.dims.size() == 64) fail(spec, "more than 64 dimensions");
    if (v > kMaxSpecElements || numel > kMaxSpecElements / v) {
      fail(spec, "more than 2^30 elements; use a smaller sample batch");
    }
    numel *= v;
    out.dims.push_back(v);
  }

  // [:DTYPE][:LOW..HIGH]
  std::string_view dtype_text;
  std::string_view range_text;
  bool have_range = false;
  for (std::size_t k = 1; k < parts.size(); ++k) {
    const std::string_view part = parts[k];
    if (part.find("..") != std::string_view::npos) {
      if (have_range) fail(spec, std::string("two ranges; ") + kGrammar);
      have_range = true;
      range_text = part;
    } else {
      if (have_range) fail(spec, std::string("the dtype goes before the range; ") + kGrammar);
      if (!dtype_text.empty() || k != 1) fail(spec, std::string("two dtypes; ") + kGrammar);
      if (part.empty()) fail(spec, std::string("empty dtype after ':'; ") + kGrammar);
      dtype_text = part;
    }
  }
  if (!dtype_text.empty()) {
    const auto dt = dtype_from_torch_name(dtype_text);
    const bool supported = dt && (*dt == DType::kFloat32 || *dt == DType::kFloat64 ||
                                  *dt == DType::kFloat16 || *dt == DType::kBFloat16 ||
                                  *dt == DType::kInt64 || *dt == DType::kInt32 ||
                                  *dt == DType::kInt16 || *dt == DType::kInt8 ||
                                  *dt == DType::kUInt8 || *dt == DType::kBool);
    if (!supported) {
      fail(spec, "unknown dtype '" + std::string(dtype_text) +
                     "' (expected float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8 or bool)");
    }
    out.dtype = *dt;
  }
  if (have_range) {
    const std::size_t dots = range_text.find("..");
    const bool integral = dtype_is_integral(out.dtype);
    out.low = parse_bound(spec, range_text.substr(0, dots), integral, "low");
    out.high = parse_bound(spec, range_text.substr(dots + 2), integral, "high");
    out.has_range = true;
    if (out.low > out.high) {
      fail(spec, "range " + std::string(range_text) + " has LOW above HIGH (ranges are LOW..HIGH, HIGH excluded)");
    }
    const Bounds b = bounds_of(out.dtype);
    // Integer ranges exclude HIGH, so HIGH may be one past the dtype's maximum.
    const double high_max = integral ? b.max + 1 : b.max;
    if (out.low < b.min || out.high > high_max || (out.constant() && out.low > b.max)) {
      fail(spec, "range " + std::string(range_text) + " does not fit " + dtype_name(out.dtype) +
                     " (values " + fmt_bound(b.min) + " to " + fmt_bound(b.max) + ")");
    }
  }
  return out;
}

}  // namespace nd::formats
