// A small parser for the two header languages data files use: JSON
// (safetensors) and Python literals (the dict in a .npy header). Untrusted
// input: nesting depth and value count are capped, and nothing throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtl::rt::data {

struct Literal {
  enum class Type { Null, Bool, Int, Float, String, List, Dict };
  Type type = Type::Null;
  bool b = false;
  int64_t i = 0;  // Int: integers that fit int64; larger ones become Float
  double f = 0;
  std::string s;
  std::vector<Literal> items;     // List elements, or Dict values in source order
  std::vector<std::string> keys;  // Dict: keys[k] names items[k]. Parallel vectors rather than
                                  // pair<string, Literal>, which needs Literal complete (clang)

  const Literal* get(std::string_view key) const;  // nullptr when absent or not a Dict
};

enum class Syntax { Json, Python };

struct LiteralLimits {
  int max_depth = 64;
  int64_t max_values = 2'000'000;  // ~110 bytes each: bounds memory for a 100 MiB header
};

// Parses one value, optionally surrounded by whitespace. On failure returns
// false and sets `error` to e.g. "at byte 17: expected ',' or '}'".
bool parseLiteral(std::string_view text, Syntax syntax, Literal& out, std::string& error,
                  const LiteralLimits& limits = {});

}  // namespace dtl::rt::data
