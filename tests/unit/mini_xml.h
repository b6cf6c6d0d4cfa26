// A small, strict XML 1.0 reader for the tests (JUnit reports), not a test
// file itself: well-formedness (one root, nesting, quoting, entity and
// character references, no duplicate attributes, valid UTF-8, no characters
// XML 1.0 forbids) and a tree to inspect. No DTDs, no namespaces processing.
// Throws std::runtime_error("xml: offset N: ...") on the first problem.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ndtest::xml {

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<std::unique_ptr<Element>> children;
  std::string text;  ///< all character data directly inside, concatenated

  std::string attr(const std::string& k) const {
    auto it = attrs.find(k);
    return it == attrs.end() ? std::string() : it->second;
  }
  /// Direct children named `n`.
  std::vector<const Element*> all(const std::string& n) const {
    std::vector<const Element*> out;
    for (const auto& c : children)
      if (c->name == n) out.push_back(c.get());
    return out;
  }
  const Element* first(const std::string& n) const {
    for (const auto& c : children)
      if (c->name == n) return c.get();
    return nullptr;
  }
};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  std::unique_ptr<Element> parse() {
    check_chars();
    if (s_.compare(0, 3, "\xEF\xBB\xBF") == 0) i_ = 3;
    if (s_.compare(i_, 5, "<?xml") == 0) {
      const auto end = s_.find("?>", i_);
      if (end == std::string::npos) fail("unterminated XML declaration");
      i_ = end + 2;
    }
    misc();
    if (i_ >= s_.size() || s_[i_] != '<') fail("expected the root element");
    auto root = element();
    misc();
    if (i_ != s_.size()) fail("content after the root element");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& m) const {
    throw std::runtime_error("xml: offset " + std::to_string(i_) + ": " + m);
  }

  /// UTF-8 validity and the XML 1.0 Char production.
  void check_chars() {
    const auto* p = reinterpret_cast<const unsigned char*>(s_.data());
    for (std::size_t k = 0; k < s_.size();) {
      const unsigned char c = p[k];
      std::size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
      if (len == 0 || k + len > s_.size()) {
        i_ = k;
        fail("invalid UTF-8");
      }
      uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
      for (std::size_t j = 1; j < len; ++j) {
        if ((p[k + j] & 0xC0) != 0x80) {
          i_ = k;
          fail("invalid UTF-8");
        }
        cp = (cp << 6) | (p[k + j] & 0x3F);
      }
      const bool ok = cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                      (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
      if (!ok) {
        i_ = k;
        fail("character U+" + std::to_string(cp) + " is not allowed in XML 1.0");
      }
      k += len;
    }
  }

  static bool name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || static_cast<unsigned char>(c) >= 0x80;
  }
  static bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.'; }

  void spaces() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  /// Comments, processing instructions and white space outside the root.
  void misc() {
    while (true) {
      spaces();
      if (s_.compare(i_, 4, "<!--") == 0) {
        comment();
      } else if (s_.compare(i_, 2, "<?") == 0) {
        const auto end = s_.find("?>", i_);
        if (end == std::string::npos) fail("unterminated processing instruction");
        i_ = end + 2;
      } else {
        return;
      }
    }
  }

  void comment() {
    const auto end = s_.find("-->", i_ + 4);
    if (end == std::string::npos) fail("unterminated comment");
    if (s_.find("--", i_ + 4) < end) fail("'--' inside a comment");
    i_ = end + 3;
  }

  std::string name() {
    const std::size_t start = i_;
    if (i_ >= s_.size() || !name_start(s_[i_])) fail("expected a name");
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    return s_.substr(start, i_ - start);
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  /// At '&': appends the referenced text.
  void reference(std::string& out) {
    const auto end = s_.find(';', i_);
    if (end == std::string::npos || end - i_ > 12) fail("unterminated reference");
    const std::string ref = s_.substr(i_ + 1, end - i_ - 1);
    if (ref == "amp") out += '&';
    else if (ref == "lt") out += '<';
    else if (ref == "gt") out += '>';
    else if (ref == "quot") out += '"';
    else if (ref == "apos") out += '\'';
    else if (ref.size() > 1 && ref[0] == '#') {
      const bool hex = ref[1] == 'x';
      const std::string digits = ref.substr(hex ? 2 : 1);
      if (digits.empty() || digits.find_first_not_of(hex ? "0123456789abcdefABCDEF" : "0123456789") != std::string::npos)
        fail("bad character reference &" + ref + ";");
      const unsigned long cp = std::stoul(digits, nullptr, hex ? 16 : 10);
      const bool ok = cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                      (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
      if (!ok) fail("character reference &" + ref + "; names a character XML 1.0 forbids");
      append_utf8(out, static_cast<uint32_t>(cp));
    } else {
      fail("unknown entity &" + ref + ";");
    }
    i_ = end + 1;
  }

  std::unique_ptr<Element> element() {
    ++i_;  // '<'
    auto e = std::make_unique<Element>();
    e->name = name();
    while (true) {
      const std::size_t before = i_;
      spaces();
      if (i_ >= s_.size()) fail("unterminated start tag <" + e->name + ">");
      if (s_.compare(i_, 2, "/>") == 0) {
        i_ += 2;
        return e;
      }
      if (s_[i_] == '>') {
        ++i_;
        break;
      }
      if (i_ == before) fail("expected white space before an attribute");
      const std::string key = name();
      spaces();
      if (i_ >= s_.size() || s_[i_] != '=') fail("expected '=' after attribute " + key);
      ++i_;
      spaces();
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) fail("attribute values must be quoted");
      const char q = s_[i_++];
      std::string value;
      while (i_ < s_.size() && s_[i_] != q) {
        if (s_[i_] == '<') fail("'<' in an attribute value");
        if (s_[i_] == '&')
          reference(value);
        else
          value += s_[i_++];
      }
      if (i_ >= s_.size()) fail("unterminated attribute value");
      ++i_;
      if (!e->attrs.emplace(key, value).second) fail("duplicate attribute " + key);
    }
    // Content.
    while (true) {
      if (i_ >= s_.size()) fail("element <" + e->name + "> is not closed");
      if (s_.compare(i_, 2, "</") == 0) {
        i_ += 2;
        const std::string closing = name();
        if (closing != e->name) fail("</" + closing + "> closes <" + e->name + ">");
        spaces();
        if (i_ >= s_.size() || s_[i_] != '>') fail("expected '>'");
        ++i_;
        return e;
      }
      if (s_.compare(i_, 4, "<!--") == 0) {
        comment();
      } else if (s_.compare(i_, 9, "<![CDATA[") == 0) {
        const auto end = s_.find("]]>", i_);
        if (end == std::string::npos) fail("unterminated CDATA");
        e->text += s_.substr(i_ + 9, end - i_ - 9);
        i_ = end + 3;
      } else if (s_.compare(i_, 2, "<?") == 0) {
        const auto end = s_.find("?>", i_);
        if (end == std::string::npos) fail("unterminated processing instruction");
        i_ = end + 2;
      } else if (s_[i_] == '<') {
        e->children.push_back(element());
      } else if (s_[i_] == '&') {
        reference(e->text);
      } else {
        if (s_.compare(i_, 3, "]]>") == 0) fail("']]>' in character data");
        e->text += s_[i_++];
      }
    }
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

inline std::unique_ptr<Element> parse(const std::string& text) { return Parser(text).parse(); }

}  // namespace ndtest::xml
