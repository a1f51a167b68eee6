// XXH64 as the specification describes it: four accumulators over 32-byte
// stripes, merged; the tail in 8-, 4- and 1-byte steps; a final avalanche.
// Lanes are read little-endian whatever the host (memcpy, then a swap on a
// big-endian one), so a checksum means the same on every machine.
#include "core/xxhash.h"

#include <cstring>

namespace dtl {

namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

inline uint32_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  return v;
}

inline uint64_t round(uint64_t acc, uint64_t lane) { return rotl(acc + lane * kPrime2, 31) * kPrime1; }

inline uint64_t merge(uint64_t acc, uint64_t lane_acc) { return (acc ^ round(0, lane_acc)) * kPrime1 + kPrime4; }

}  // namespace

uint64_t xxh64(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* end = p + bytes;
  uint64_t acc;
  if (bytes >= 32) {
    uint64_t v1 = seed + kPrime1 + kPrime2, v2 = seed + kPrime2, v3 = seed, v4 = seed - kPrime1;
    for (const unsigned char* limit = end - 32; p <= limit; p += 32) {
      v1 = round(v1, read64(p));
      v2 = round(v2, read64(p + 8));
      v3 = round(v3, read64(p + 16));
      v4 = round(v4, read64(p + 24));
    }
    acc = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    acc = merge(merge(merge(merge(acc, v1), v2), v3), v4);
  } else {
    acc = seed + kPrime5;
  }
  acc += static_cast<uint64_t>(bytes);
  for (; end - p >= 8; p += 8) acc = rotl(acc ^ round(0, read64(p)), 27) * kPrime1 + kPrime4;
  if (end - p >= 4) {
    acc = rotl(acc ^ (static_cast<uint64_t>(read32(p)) * kPrime1), 23) * kPrime2 + kPrime3;
    p += 4;
  }
  for (; p < end; ++p) acc = rotl(acc ^ (*p * kPrime5), 11) * kPrime1;
  acc ^= acc >> 33;
  acc *= kPrime2;
  acc ^= acc >> 29;
  acc *= kPrime3;
  acc ^= acc >> 32;
  return acc;
}

}  // namespace dtl
