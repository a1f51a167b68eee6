// Internal to runtime/optim (and mirrored by compiler/codegen/emit_update.cc):
// Adam's subnormal first moments and SGD's subnormal momentum buffers,
// computed exactly without a subnormal operand.
//
// Why: a weight whose gradient stays exactly zero (the weights in and out
// of a ReLU unit that stopped firing, fc1's for a pixel that is 0 in every
// image) keeps multiplying its exp_avg by beta1 until
// the moment is subnormal, and it stays so for hundreds of steps. Each x86
// SSE/AVX operation with a subnormal operand or result takes a microcode
// assist of ~150 cycles: the Fashion sample's steps went from 3.6 to 6.0 ms
// once 5% of its moments were subnormal. Flushing them to zero (FTZ/DAZ)
// would change the answer; this computes the same bits as IEEE arithmetic.
//
// The rule, for one element whose gradient (after L2 or weight decay) is ±0
// and whose exp_avg m = ±M·2^-149 is subnormal (0 < M < 2^23):
//  - exp_avg' = fma(±0, 1-beta1, m·beta1) = fl(m·beta1) = ±rint(M·beta1)·2^-149,
//    rint rounding half to even as the float product does on the subnormal
//    grid; one f32 fma computes it with normal operands (decayedMantissa,
//    checked against the product itself in optim_subnormal_test). Where it rounds to 0
//    the sign of the zero depends on the gradient's, so that element takes
//    the floating-point path. SGD's momentum buffer (buf' = fma(±0,
//    1-dampening, buf·momentum), without Nesterov) is the same rule with
//    beta = momentum, taken only while rint stays below 2^23 and 1-dampening
//    is finite (0·inf is NaN, not 0; PyTorch does not check dampening).
//  - param' = p + fl(fl(-step_size·exp_avg') / denom) is p itself when
//    that quotient u is below half the gap to p's neighbours: |u| ≤ Q/denom
//    + 2^-150 with Q = (|step_size|·2^-126 + 2^-150)(1 + 2^-20) (both
//    roundings' worst case, with margin), and a normal or infinite p with
//    exponent E has no neighbour nearer than 2^(E-24) (updateVanishes: the
//    test, in floats scaled so no operand is subnormal). SGD's param' =
//    fma(buf', -lr, p) rounds once, |u| ≤ lr·2^-126: the same test with
//    denom = 1.
// Otherwise the element takes the floating-point path, subnormal and all:
// slower, never different.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace dtl::rt::optim::subnormal {

// Elements per block: a block with no subnormal first moment runs the
// plain loop.
inline constexpr int64_t kBlock = 64;

inline uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

inline float fromBits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// Nonzero and below the smallest normal: 0 < |bits| < 0x00800000.
inline bool isSubnormal(uint32_t b) { return (b & 0x7fffffffu) - 1u < 0x007fffffu; }

inline bool anySubnormal(const float* x, int64_t n) {
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) any |= isSubnormal(bits(x[i])) ? 1u : 0u;
  return any != 0;
}

// fl(M·beta + 2^23)'s bits less 2^23's: the float fma rounds M·beta once
// onto the integers of [2^23, 2^24), so for 0 <= M·beta < 2^23 this is
// rint(M·beta), half to even as the float product rounds on the subnormal
// grid (2^23 is even). Callers take it only in (0, 2^23); a negative, NaN or
// infinite product, or one of 2^23 - 1/2 or more, gives a value outside (0
// for a product in [-1/2, 0], a wrap past 2^31 below that, 2^23 and above
// for the rest). Every operand is normal or 0 for a normal beta.
inline constexpr uint32_t kShiftBits = 0x4b000000u;  // the bits of 2^23

inline uint32_t decayedMantissa(uint32_t m_bits, float beta) {
  const float mantissa = static_cast<float>(static_cast<int32_t>(m_bits & 0x007fffffu));
  return bits(std::fma(mantissa, beta, 0x1p23f)) - kShiftBits;
}

// 0 < decayed < 2^23: a subnormal mantissa, not 0
inline bool onGrid(uint32_t decayed) { return decayed - 1u < 0x007fffffu; }

// Q·2^100 as a float (normal for any step size above 2^-100, and at least
// 2^-50), rounded up by the margin: NaN or inf where the step size is,
// which fails every test below.
inline float vanishBound(float neg_step_size) {
  return static_cast<float>((std::fabs(static_cast<double>(neg_step_size)) * 0x1p-26 + 0x1p-50) * (1 + 0x1p-20));
}

// All ones when p + u rounds to p for every |u| ≤ Q/denom + 2^-150, else 0
// (a mask: the loops that use it stay branch-free). In floats scaled by
// 2^100 and multiplied by denom > 0, so every operand is normal:
// Q·2^100 + 2^-49·denom < |p|·2^73·denom, with p normal or infinite (not
// zero, subnormal or NaN; p's bits are masked before any arithmetic).
// |p|·2^-27 is a quarter of p's smallest gap 2^(E-24): below the half gap by
// more than the test's three roundings. |p| is taken as at most 2^54 (a
// smaller allowance than its gap gives): |p|·2^73 stays finite, so an
// overflow on the right is denom ≥ 2 against a left side below 2^103, a
// true "far below"; and an infinite p is kept only for a finite step.
inline uint32_t updateVanishes(float p, float denom, float bound) {
  const uint32_t mag = bits(p) & 0x7fffffffu;
  const uint32_t usable = 0u - static_cast<uint32_t>((mag >= 0x00800000u) & (mag <= 0x7f800000u));
  const uint32_t capped = mag < 0x5a800000u ? mag : 0x5a800000u;  // 2^54
  const float magnitude = fromBits(capped & usable);
  return 0u - static_cast<uint32_t>(bound + 0x1p-49f * denom < magnitude * 0x1p73f * denom);
}

}  // namespace dtl::rt::optim::subnormal
