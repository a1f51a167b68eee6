// FNV-1a, 64-bit: the project's one small non-cryptographic hash, for names
// (stream keys, seeds per parameter path) and for fingerprints that ranks
// compare. Written out so results never depend on the standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace dtl {

inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;

inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = kFnvOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}
inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnvOffset) { return fnv1a(s.data(), s.size(), h); }

// 16 hex digits.
inline std::string hex64(uint64_t h) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace dtl
