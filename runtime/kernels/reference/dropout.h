// dropout with a counter-based mask: whether element k is kept depends only on
// (seed, k, p), so forward, backward and any fast kernel agree without
// storing the mask.
#pragma once

#include <cstdint>

#include "runtime/kernels/reference/tensor.h"

namespace dtl::rt::ref {

// splitmix64's finaliser (Steele, Lea, Flood 2014), the mixing step used here.
uint64_t splitmix64(uint64_t z);

// The mask bit of flat element `index`: u = top 53 bits of
// splitmix64(splitmix64(seed) + index) as a double in [0, 1); kept iff u ≥ p.
bool dropoutKeep(uint64_t seed, uint64_t index, double p);

// Identity when !training; otherwise x · mask/(1 − p): kept elements scaled by
// 1/(1 − p), the rest multiplied by 0 (so NaN and ±inf give NaN, as torch's
// dropout). p in [0, 1).
// Element k's mask bit is that of flat element first + k (a rank's block of
// a larger tensor draws the bits one process would).
Tensor dropout(const Tensor& x, double p, uint64_t seed, bool training, uint64_t first = 0);
// The same mask and scale applied to dy.
Tensor dropoutBackward(const Tensor& dy, double p, uint64_t seed, bool training, uint64_t first = 0);

}  // namespace dtl::rt::ref
