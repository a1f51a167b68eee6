// The loader's own random numbers, written out so that the epoch order and
// synthetic data do not depend on the standard library: splitmix64 as a
// stream (shuffles) and its mixer as a counter hash (synthetic values).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/hash.h"

namespace dtl::rt::data::detail {

// splitmix64's output function: a bijective 64-bit mixer.
inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A counter-based value: the same key gives the same bits, in any order.
inline uint64_t hashKey(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

// FNV-1a, to key streams by field name.
inline uint64_t nameHash(std::string_view s) { return fnv1a(s); }

// [0, n) from 64 random bits (multiply-shift; bias below 2^-40 for n < 2^24).
inline uint64_t scaleTo(uint64_t bits, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * n) >> 64);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), unbiased (Lemire's multiply-and-reject), n > 0.
  uint64_t below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    auto low = static_cast<uint64_t>(m);
    if (low < n) {
      uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace dtl::rt::data::detail
