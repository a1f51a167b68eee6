#include "core/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace dtl::json {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  if (v == std::floor(v) && std::fabs(v) < 9e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  char buf[32];
  for (int prec = 6; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

void Writer::newline() {
  if (!pretty_) return;
  out_ += '\n';
  out_.append(first_.size() * 2, ' ');
}

void Writer::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
    newline();
  }
}

Writer& Writer::beginObject() {
  separate();
  out_ += '{';
  first_.push_back(true);
  return *this;
}

Writer& Writer::endObject() {
  bool empty = first_.back();
  first_.pop_back();
  if (!empty) newline();
  out_ += '}';
  return *this;
}

Writer& Writer::beginArray() {
  separate();
  out_ += '[';
  first_.push_back(true);
  return *this;
}

Writer& Writer::endArray() {
  bool empty = first_.back();
  first_.pop_back();
  if (!empty) newline();
  out_ += ']';
  return *this;
}

Writer& Writer::key(const std::string& k) {
  separate();
  out_ += quote(k);
  out_ += pretty_ ? ": " : ":";
  after_key_ = true;
  return *this;
}

Writer& Writer::value(const std::string& s) {
  separate();
  out_ += quote(s);
  return *this;
}

Writer& Writer::value(int64_t v) {
  separate();
  out_ += std::to_string(v);
  return *this;
}

Writer& Writer::value(double v) {
  separate();
  out_ += number(v);
  return *this;
}

Writer& Writer::value(bool v) {
  separate();
  out_ += v ? "true" : "false";
  return *this;
}

Writer& Writer::null() {
  separate();
  out_ += "null";
  return *this;
}

}  // namespace dtl::json
