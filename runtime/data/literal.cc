// Recursive-descent parser for JSON and Python literals. One grammar with a
// few switches: Python adds single quotes, tuples, trailing commas,
// True/False/None and the Python 2 'L' integer suffix seen in old .npy files.
#include "runtime/data/literal.h"

#include <locale.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_set>

namespace dtl::rt::data {

const Literal* Literal::get(std::string_view key) const {
  if (type != Type::Dict) return nullptr;
  for (size_t k = 0; k < keys.size(); ++k)
    if (keys[k] == key) return &items[k];
  return nullptr;
}

namespace {

class Parser {
 public:
  Parser(std::string_view text, Syntax syntax, const LiteralLimits& limits)
      : t_(text), py_(syntax == Syntax::Python), limits_(limits) {}

  bool parseAll(Literal& out, std::string& error) {
    bool ok = value(out, 0);
    if (ok) {
      skipSpace();
      if (p_ != t_.size()) ok = fail("unexpected '" + printable(t_[p_]) + "' after the value");
    }
    if (!ok) error = "at byte " + std::to_string(err_pos_) + ": " + err_;
    return ok;
  }

 private:
  static std::string printable(char c) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string(1, c);
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", u);
    return buf;
  }

  bool fail(const std::string& why) {
    if (err_.empty()) {
      err_ = why;
      err_pos_ = p_;
    }
    return false;
  }

  void skipSpace() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
  }

  bool word(std::string_view w) {
    if (t_.substr(p_, w.size()) != w) return false;
    p_ += w.size();
    return true;
  }

  bool value(Literal& out, int depth) {
    if (depth > limits_.max_depth) return fail("nested deeper than " + std::to_string(limits_.max_depth) + " levels");
    if (++values_ > limits_.max_values) return fail("more than " + std::to_string(limits_.max_values) + " values");
    skipSpace();
    if (p_ >= t_.size()) return fail("unexpected end of text, expected a value");
    char c = t_[p_];
    if (c == '{') return dict(out, depth);
    if (c == '[') return list(out, depth, ']');
    if (py_ && c == '(') return list(out, depth, ')');
    if (c == '"' || (py_ && c == '\'')) {
      out.type = Literal::Type::String;
      return string(out.s);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number(out);
    if (word(py_ ? "True" : "true")) {
      out.type = Literal::Type::Bool;
      out.b = true;
      return true;
    }
    if (word(py_ ? "False" : "false")) {
      out.type = Literal::Type::Bool;
      return true;
    }
    if (word(py_ ? "None" : "null")) {
      out.type = Literal::Type::Null;
      return true;
    }
    return fail("unexpected '" + printable(c) + "', expected a value");
  }

  // Shared by arrays and tuples; `close` is ']' or ')'.
  bool list(Literal& out, int depth, char close) {
    out.type = Literal::Type::List;
    ++p_;
    skipSpace();
    if (p_ < t_.size() && t_[p_] == close) return ++p_, true;
    for (;;) {
      out.items.emplace_back();
      if (!value(out.items.back(), depth + 1)) return false;
      skipSpace();
      if (p_ < t_.size() && t_[p_] == ',') {
        ++p_;
        skipSpace();
        if (py_ && p_ < t_.size() && t_[p_] == close) return ++p_, true;
        continue;
      }
      if (p_ < t_.size() && t_[p_] == close) return ++p_, true;
      return fail(std::string("expected ',' or '") + close + "'");
    }
  }

  bool dict(Literal& out, int depth) {
    out.type = Literal::Type::Dict;
    ++p_;
    skipSpace();
    if (p_ < t_.size() && t_[p_] == '}') return ++p_, true;
    std::unordered_set<std::string> seen;
    for (;;) {
      skipSpace();
      if (p_ >= t_.size() || !(t_[p_] == '"' || (py_ && t_[p_] == '\''))) return fail("expected a string key");
      std::string key;
      size_t key_pos = p_;
      if (!string(key)) return false;
      // Duplicate keys make "which tensor?" ambiguous; refuse rather than guess.
      if (!seen.insert(key).second) {
        p_ = key_pos;
        return fail("duplicate key \"" + key + "\"");
      }
      skipSpace();
      if (p_ >= t_.size() || t_[p_] != ':') return fail("expected ':' after a key");
      ++p_;
      out.keys.push_back(std::move(key));
      out.items.emplace_back();
      if (!value(out.items.back(), depth + 1)) return false;
      skipSpace();
      if (p_ < t_.size() && t_[p_] == ',') {
        ++p_;
        skipSpace();
        if (py_ && p_ < t_.size() && t_[p_] == '}') return ++p_, true;
        continue;
      }
      if (p_ < t_.size() && t_[p_] == '}') return ++p_, true;
      return fail("expected ',' or '}'");
    }
  }

  static void appendUtf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool hex4(uint32_t& v) {
    if (t_.size() - p_ < 4) return fail("truncated \\u escape");
    v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = t_[p_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<uint32_t>(c - 'A' + 10);
      else
        return fail("bad hex digit in \\u escape");
    }
    return true;
  }

  bool string(std::string& out) {
    char quote = t_[p_++];
    for (;;) {
      if (p_ >= t_.size()) return fail("unterminated string");
      char c = t_[p_++];
      if (c == quote) return true;
      if (static_cast<unsigned char>(c) < 0x20 && !py_) return fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p_ >= t_.size()) return fail("unterminated string");
      char e = t_[p_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && t_.substr(p_, 2) == "\\u") {
            p_ += 2;
            uint32_t lo = 0;
            if (!hex4(lo)) return false;
            if (lo < 0xDC00 || lo > 0xDFFF) return fail("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xD800 && cp <= 0xDFFF) {
            return fail("unpaired surrogate in \\u escape");
          }
          appendUtf8(out, cp);
          break;
        }
        default:
          if (!py_ && e != '"' && e != '\\' && e != '/') return fail("bad escape '\\" + printable(e) + "'");
          out += e;  // Python: keep the character; exactness does not matter for dict keys
      }
    }
  }

  bool number(Literal& out) {
    size_t start = p_;
    if (t_[p_] == '-') ++p_;
    size_t digits = p_;
    while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
    if (p_ == digits) return fail("expected digits after '-'");
    bool integral = true;
    if (p_ < t_.size() && t_[p_] == '.') {
      integral = false;
      ++p_;
      size_t frac = p_;
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
      if (p_ == frac) return fail("expected digits after '.'");
    }
    if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      integral = false;
      ++p_;
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
      size_t exp = p_;
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
      if (p_ == exp) return fail("expected digits in the exponent");
    }
    const char* b = t_.data() + start;
    const char* e = t_.data() + p_;
    if (py_ && integral && p_ < t_.size() && (t_[p_] == 'L' || t_[p_] == 'l')) ++p_;
    if (integral) {
      auto [ptr, ec] = std::from_chars(b, e, out.i);
      if (ec == std::errc() && ptr == e) {
        out.type = Literal::Type::Int;
        return true;
      }
    }
    out.type = Literal::Type::Float;
    auto [ptr, ec] = std::from_chars(b, e, out.f);
    if (ec == std::errc::result_out_of_range && ptr == e) {
      // Saturate like strtod: "1e999" is inf but "1e-999" is 0, not inf.
      static locale_t c_locale = newlocale(LC_ALL_MASK, "C", nullptr);
      out.f = strtod_l(std::string(b, e).c_str(), nullptr, c_locale);
    } else if (ec != std::errc() || ptr != e)
      return fail("bad number");
    return true;
  }

  std::string_view t_;
  size_t p_ = 0;
  bool py_;
  LiteralLimits limits_;
  int64_t values_ = 0;
  std::string err_;
  size_t err_pos_ = 0;
};

}  // namespace

bool parseLiteral(std::string_view text, Syntax syntax, Literal& out, std::string& error, const LiteralLimits& limits) {
  out = Literal{};
  error.clear();
  try {
    Parser p(text, syntax, limits);
    return p.parseAll(out, error);
  } catch (const std::exception& e) {  // bad_alloc is the only realistic one
    error = std::string("cannot parse: ") + e.what();
    out = Literal{};
    return false;
  }
}

}  // namespace dtl::rt::data
