// The two functions Box–Muller needs, for synthetic data: log of a uniform in
// (0, 1] and the sine and cosine of a fraction of a turn, in f32 as
// straight-line polynomials. They replace libm's logf and sincosf, which made
// a batch cost ~8 ns per value on the loader thread (2.1 ms for the MLP
// benchmark's 256×784 inputs, taken from the step's two cores); these
// vectorise. Their polynomials run through core/f32_math.h's horner (an
// explicit std::fma at each step), ln 2 is its split, and the file that
// uses them is built without contraction, so every CPU and every libm gives
// the same bits (libm's results may differ between versions and between
// its FMA and non-FMA variants).
//
// Errors, measured over every input the loader can pass (2²⁴ each;
// tests/unit/box_muller_test.cc): see the test's bounds.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "core/f32_math.h"

namespace dtl::rt::data::detail {

// ln x for a normal x > 0 (the loader passes (k + 1) · 2⁻²⁴, k < 2²⁴): x = 2ᵉ · m
// with m in [√½, √2), ln m = 2 atanh(s) with s = (m − 1) / (m + 1), |s| ≤ 0.172:
// 2s + s³ · (2/3 + s² · (2/5 + s² · (2/7 + s² · 2/9))); the next term,
// 2s¹¹/11, is below 7e-10.
inline constexpr float kLogAtanh[] = {0.222222224f, 0.285714298f, 0.400000006f, 0.666666687f};  // 2/9 … 2/3
[[gnu::always_inline]] inline float logPositive(float x) {
  constexpr int32_t kSqrtHalfBits = 0x3f3504f3;  // √½ rounded to f32
  const int32_t bits = std::bit_cast<int32_t>(x);
  const int32_t e = (bits - kSqrtHalfBits) >> 23;  // arithmetic: floor
  const float m = std::bit_cast<float>(bits - static_cast<int32_t>(static_cast<uint32_t>(e) << 23));
  const float s = (m - 1.0f) / (m + 1.0f);  // m − 1 exact (Sterbenz)
  const float s2 = s * s;
  const float ln_m = std::fma(s * s2, f32math::horner(kLogAtanh, s2), 2.0f * s);
  const auto ef = static_cast<float>(e);  // e · kLn2Hi is exact (kLn2Hi has 9 significant bits)
  return std::fma(ef, f32math::kLn2Hi, std::fma(ef, f32math::kLn2Lo, ln_m));
}

// sin and cos of 2π · t / 2²⁴ for t < 2²⁴: the top two bits pick the quarter
// turn, the other 22 give x in [0, 1) exactly, and sin(πx/2), cos(πx/2) are
// their Taylor series to x¹³ and x¹⁴ (the next terms are below 7e-10 and
// 9e-11 on [0, 1]), so no argument is ever reduced inexactly.
struct SinCos {
  float sin, cos;
};
// (π/2)^(2j+1)/(2j+1)! and (π/2)^(2j)/(2j)! with alternating signs, highest power first.
inline constexpr float kSinQuarter[] = {5.69217278e-08f, -3.59884325e-06f, 0.000160441181f, -0.00468175393f,
                                        0.0796926245f,   -0.645964086f,    1.57079637f};
inline constexpr float kCosQuarter[] = {-6.38660325e-09f, 4.71087475e-07f, -2.52020418e-05f, 0.000919260259f,
                                        -0.0208634809f,   0.2536695f,      -1.23370051f,     1.0f};
[[gnu::always_inline]] inline SinCos sinCosTurn24(uint32_t t) {
  const uint32_t quarter = (t >> 22) & 3u;
  const float x = static_cast<float>(static_cast<int32_t>(t & 0x3fffffu)) * 0x1p-22f;
  const float y = x * x;
  const float sp = f32math::horner(kSinQuarter, y), cp = f32math::horner(kCosQuarter, y);
  const float s = x * sp, c = cp;
  // A quarter turn q adds qπ/2: (sin, cos) → (cos, −sin) → (−sin, −cos) → (−cos, sin).
  const bool odd = (quarter & 1u) != 0;
  const float a = odd ? c : s, b = odd ? s : c;
  const bool sin_negative = quarter >= 2u, cos_negative = quarter == 1u || quarter == 2u;
  return {sin_negative ? -a : a, cos_negative ? -b : b};
}

}  // namespace dtl::rt::data::detail
