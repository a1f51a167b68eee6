// XXH64, the 64-bit xxHash (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md),
// written from its specification: the checksum of every checkpoint tensor.
// Several GB/s on one core (FNV-1a in core/hash.h runs at ~1 GB/s), so
// checksumming a checkpoint costs a small fraction of writing it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dtl {

// The seed is not optional here, so xxh64("text", 5) cannot mean 5 bytes.
uint64_t xxh64(const void* data, size_t bytes, uint64_t seed);
inline uint64_t xxh64(std::string_view s) { return xxh64(s.data(), s.size(), 0); }

}  // namespace dtl
