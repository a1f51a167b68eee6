// The choices a random test generator makes, from one of two sources: a
// seed (an endless splitmix64 stream) or a byte string (libFuzzer's input,
// read front to back as FuzzedDataProvider does, so the fuzzer steers each
// choice). Once the bytes run out the stream goes on with splitmix64 seeded
// by their hash rather than with zeros: a short input still gets varied data,
// and the same bytes always give the same choices. Written out (no <random>
// distributions) so a seed means the same case with every standard library.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/hash.h"
#include "runtime/data/loader_random.h"

namespace dtl::codegen::testing {

class ChoiceStream {
 public:
  explicit ChoiceStream(uint64_t seed) : state_(seed) {}
  ChoiceStream(const uint8_t* data, size_t size) : data_(data), size_(size), state_(fnv1a(data, size)) {}

  uint8_t byte() {
    if (at_ < size_) return data_[at_++];
    if (spare_ == 0) {
      word_ = next();
      spare_ = 8;
    }
    --spare_;
    return static_cast<uint8_t>(word_ >> (8 * spare_));
  }

  // `bytes` bytes, little-endian.
  uint64_t bits(int bytes) {
    uint64_t v = 0;
    for (int k = 0; k < bytes; ++k) v |= static_cast<uint64_t>(byte()) << (8 * k);
    return v;
  }

  // In [0, n), n ≥ 1: as few bytes as n needs (the small bias of `%` does not matter here).
  uint64_t below(uint64_t n) {
    int bytes = n <= 0x100 ? 1 : n <= 0x10000 ? 2 : 4;
    return bits(bytes) % n;
  }

  bool percent(int p) { return static_cast<int>(below(100)) < p; }

  template <class T, size_t N>
  const T& pick(const T (&options)[N]) {
    return options[below(N)];
  }

  // Uniform in (0, 1).
  double unit() { return (static_cast<double>(bits(3)) + 0.5) / 16777216.0; }

  // Standard normal (Box–Muller).
  double normal() { return std::sqrt(-2.0 * std::log(unit())) * std::cos(6.283185307179586 * unit()); }

  // Any 32-bit pattern: NaN payloads, denormals, both zeros.
  float rawFloat() {
    uint32_t u = static_cast<uint32_t>(bits(4));
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }

  size_t consumed() const { return at_; }

 private:
  uint64_t next() {  // splitmix64 (the data loader's mixer)
    const uint64_t z = rt::data::detail::mix64(state_);
    state_ += 0x9e3779b97f4a7c15ULL;
    return z;
  }

  const uint8_t* data_ = nullptr;
  size_t size_ = 0, at_ = 0;
  uint64_t state_;
  uint64_t word_ = 0;
  int spare_ = 0;
};

}  // namespace dtl::codegen::testing
