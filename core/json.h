// A small streaming JSON writer shared by every printer (check summary, plan,
// diagnostics, metrics). Keys are written in the order given, so output is
// deterministic. Not a parser.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtl::json {

std::string quote(const std::string& s);  // "…" with JSON escapes
std::string number(double v);             // shortest round-trip form; null for NaN/Inf

class Writer {
 public:
  explicit Writer(bool pretty = false) : pretty_(pretty) {}
  Writer& beginObject();
  Writer& endObject();
  Writer& beginArray();
  Writer& endArray();
  Writer& key(const std::string& k);
  Writer& value(const std::string& s);
  Writer& value(const char* s) { return value(std::string(s)); }
  Writer& value(int64_t v);
  Writer& value(int v) { return value(static_cast<int64_t>(v)); }
  Writer& value(double v);
  Writer& value(bool v);
  Writer& null();
  const std::string& str() const { return out_; }

 private:
  void separate();
  void newline();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
  bool pretty_;
};

}  // namespace dtl::json
