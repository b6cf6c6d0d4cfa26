// A minimal JSON Schema (draft-07) validator for the tests, not a test file
// itself. Debian ships no C++ JSON Schema validator (checked: no
// libnlohmann-json-schema-validator-dev in bookworm), so this implements the
// keywords the two schemas in this repository use: the SARIF 2.1.0 schema
// (tests/schemas/sarif-schema-2.1.0.json) and the JSON report schema
// (docs/report.schema.json):
//
//   type, enum, const, required, properties, additionalProperties (boolean or
//   schema), items (one schema), minItems, maxItems, uniqueItems, minimum,
//   maximum, minLength, pattern (ECMAScript, unanchored), $ref to "#" and
//   "#/definitions/...", anyOf, oneOf, allOf.
//
// Annotations ($schema, $id, title, description, default, definitions,
// $comment, examples) are skipped; `format` is an annotation in draft-07 and
// is skipped too. Any other keyword throws, so a schema that needs more than
// this subset fails loudly instead of passing silently.
#pragma once

#include <cmath>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ndtest {

class JsonSchema {
 public:
  explicit JsonSchema(nlohmann::json schema) : root_(std::move(schema)) {}

  /// Every violation as "POINTER: problem" ("" pointer = the document); empty when valid.
  std::vector<std::string> validate(const nlohmann::json& doc) const {
    std::vector<std::string> errors;
    check(root_, doc, "", errors, 0);
    return errors;
  }

 private:
  using json = nlohmann::json;

  const json& resolve(const std::string& ref) const {
    if (ref == "#") return root_;
    if (ref.rfind("#/", 0) != 0) throw std::runtime_error("json_schema.h: unsupported $ref '" + ref + "'");
    return root_.at(json::json_pointer(ref.substr(1)));
  }

  static bool has_type(const json& v, const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "number") return v.is_number();
    if (t == "integer") {
      if (v.is_number_integer() || v.is_number_unsigned()) return true;
      if (!v.is_number_float()) return false;
      const double d = v.get<double>();
      return std::isfinite(d) && std::floor(d) == d;
    }
    throw std::runtime_error("json_schema.h: unknown type '" + t + "'");
  }

  /// JSON equality with 1 == 1.0 (nlohmann compares them equal already).
  static bool equal(const json& a, const json& b) { return a == b; }

  static std::string short_dump(const json& v) {
    std::string s = v.dump();
    return s.size() > 60 ? s.substr(0, 57) + "..." : s;
  }

  bool valid(const json& s, const json& v, const std::string& at, int depth) const {
    std::vector<std::string> scratch;
    check(s, v, at, scratch, depth);
    return scratch.empty();
  }

  void check(const json& s, const json& v, const std::string& at, std::vector<std::string>& err, int depth) const {
    if (depth > 200) throw std::runtime_error("json_schema.h: $ref recursion too deep at " + at);
    if (s.is_boolean()) {
      if (!s.get<bool>()) err.push_back(at + ": not allowed here (schema false)");
      return;
    }
    if (!s.is_object()) throw std::runtime_error("json_schema.h: a schema must be an object or boolean at " + at);
    if (s.contains("$ref")) {  // draft-07: $ref ignores its siblings
      check(resolve(s["$ref"].get<std::string>()), v, at, err, depth + 1);
      return;
    }
    static const std::set<std::string> kKnown = {
        "$schema", "$id", "title", "description", "default", "definitions", "$comment", "examples", "format",
        "type", "enum", "const", "required", "properties", "additionalProperties", "items", "minItems", "maxItems",
        "uniqueItems", "minimum", "maximum", "minLength", "pattern", "anyOf", "oneOf", "allOf"};
    for (const auto& [k, x] : s.items())
      if (!kKnown.count(k)) throw std::runtime_error("json_schema.h: keyword '" + k + "' is not implemented (at " + at + ")");

    if (s.contains("type")) {
      const json& t = s["type"];
      bool ok = false;
      if (t.is_string()) ok = has_type(v, t.get<std::string>());
      for (const auto& e : t.is_array() ? t : json::array()) ok |= has_type(v, e.get<std::string>());
      if (!ok) {
        err.push_back(at + ": " + short_dump(v) + " is not of type " + t.dump());
        return;
      }
    }
    if (s.contains("enum")) {
      bool ok = false;
      for (const auto& e : s["enum"]) ok |= equal(e, v);
      if (!ok) err.push_back(at + ": " + short_dump(v) + " is not one of " + short_dump(s["enum"]));
    }
    if (s.contains("const") && !equal(s["const"], v))
      err.push_back(at + ": " + short_dump(v) + " is not " + short_dump(s["const"]));

    if (v.is_object()) {
      for (const auto& r : s.value("required", json::array()))
        if (!v.contains(r.get<std::string>())) err.push_back(at + ": missing required property '" + r.get<std::string>() + "'");
      const json props = s.value("properties", json::object());
      for (const auto& [k, x] : v.items()) {
        const std::string where = at + "/" + k;
        if (props.contains(k)) {
          check(props[k], x, where, err, depth + 1);
        } else if (s.contains("additionalProperties")) {
          const json& ap = s["additionalProperties"];
          if (ap.is_boolean() && !ap.get<bool>())
            err.push_back(at + ": property '" + k + "' is not allowed");
          else
            check(ap, x, where, err, depth + 1);
        }
      }
    }
    if (v.is_array()) {
      if (s.contains("minItems") && v.size() < s["minItems"].get<std::size_t>())
        err.push_back(at + ": fewer than " + s["minItems"].dump() + " items");
      if (s.contains("maxItems") && v.size() > s["maxItems"].get<std::size_t>())
        err.push_back(at + ": more than " + s["maxItems"].dump() + " items");
      if (s.value("uniqueItems", false))
        for (std::size_t i = 0; i < v.size(); ++i)
          for (std::size_t j = i + 1; j < v.size(); ++j)
            if (equal(v[i], v[j])) err.push_back(at + ": items " + std::to_string(i) + " and " + std::to_string(j) + " are equal");
      if (s.contains("items")) {
        if (!s["items"].is_object() && !s["items"].is_boolean())
          throw std::runtime_error("json_schema.h: tuple-form 'items' is not implemented (at " + at + ")");
        for (std::size_t i = 0; i < v.size(); ++i) check(s["items"], v[i], at + "/" + std::to_string(i), err, depth + 1);
      }
    }
    if (v.is_number()) {
      const double x = v.get<double>();
      if (s.contains("minimum") && x < s["minimum"].get<double>()) err.push_back(at + ": " + v.dump() + " < minimum " + s["minimum"].dump());
      if (s.contains("maximum") && x > s["maximum"].get<double>()) err.push_back(at + ": " + v.dump() + " > maximum " + s["maximum"].dump());
    }
    if (v.is_string()) {
      const std::string& str = v.get_ref<const std::string&>();
      if (s.contains("minLength")) {
        std::size_t cps = 0;
        for (unsigned char c : str) cps += (c & 0xC0) != 0x80;
        if (cps < s["minLength"].get<std::size_t>()) err.push_back(at + ": shorter than " + s["minLength"].dump());
      }
      if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>(), std::regex::ECMAScript)))
        err.push_back(at + ": '" + str + "' does not match " + s["pattern"].get<std::string>());
    }
    if (s.contains("allOf"))
      for (const auto& sub : s["allOf"]) check(sub, v, at, err, depth + 1);
    if (s.contains("anyOf")) {
      bool ok = false;
      for (const auto& sub : s["anyOf"]) ok = ok || valid(sub, v, at, depth + 1);
      if (!ok) err.push_back(at + ": matches none of anyOf " + short_dump(s["anyOf"]));
    }
    if (s.contains("oneOf")) {
      int n = 0;
      for (const auto& sub : s["oneOf"]) n += valid(sub, v, at, depth + 1);
      if (n != 1) err.push_back(at + ": matches " + std::to_string(n) + " of oneOf (exactly one needed)");
    }
  }

  json root_;
};

/// The errors joined by newlines, for test messages.
inline std::string join_errors(const std::vector<std::string>& errors) {
  std::string s;
  for (const auto& e : errors) s += e + "\n";
  return s;
}

}  // namespace ndtest
