// The ordered integer distance between two floats, for tests that bound a
// function's error in ulps: ±0 are one point and inf is one past FLT_MAX.
#pragma once

#include <bit>
#include <cstdint>
#include <cstdlib>

namespace dtl::testing {

inline int64_t ulps(float a, float b) {
  auto key = [](float f) {
    const int32_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return std::llabs(key(a) - key(b));
}

}  // namespace dtl::testing
