// The two functions Box–Muller needs, for synthetic data: log of a uniform in
// (0, 1] and the sine and cosine of a fraction of a turn, in f32 as
// straight-line polynomials. They replace libm's logf and sincosf, which made
// a batch cost ~8 ns per value on the loader thread (2.1 ms for the MLP
// benchmark's 256×784 inputs, taken from the step's two cores); these
// vectorise. Every multiply-add is an explicit std::fma and the file that
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

namespace dtl::rt::data::detail {

// ln x for a normal x > 0 (the loader passes (k + 1) · 2⁻²⁴, k < 2²⁴): x = 2ᵉ · m
// with m in [√½, √2), ln m = 2 atanh(s) with s = (m − 1) / (m + 1), |s| ≤ 0.172:
// 2s + s³ · (2/3 + s² · (2/5 + s² · (2/7 + s² · 2/9))); the next term,
// 2s¹¹/11, is below 7e-10.
[[gnu::always_inline]] inline float logPositive(float x) {
  constexpr int32_t kSqrtHalfBits = 0x3f3504f3;       // √½ rounded to f32
  constexpr float kLn2Hi = 0.693359375f;              // 9 significant bits: e · kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;           // ln 2 − kLn2Hi
  const int32_t bits = std::bit_cast<int32_t>(x);
  const int32_t e = (bits - kSqrtHalfBits) >> 23;     // arithmetic: floor
  const float m = std::bit_cast<float>(bits - static_cast<int32_t>(static_cast<uint32_t>(e) << 23));
  const float s = (m - 1.0f) / (m + 1.0f);            // m − 1 exact (Sterbenz)
  const float s2 = s * s;
  float p = std::fma(0.222222224f, s2, 0.285714298f);
  p = std::fma(p, s2, 0.400000006f);
  p = std::fma(p, s2, 0.666666687f);
  const float ln_m = std::fma(s * s2, p, 2.0f * s);
  const auto ef = static_cast<float>(e);
  return std::fma(ef, kLn2Hi, std::fma(ef, kLn2Lo, ln_m));
}

// sin and cos of 2π · t / 2²⁴ for t < 2²⁴: the top two bits pick the quarter
// turn, the other 22 give x in [0, 1) exactly, and sin(πx/2), cos(πx/2) are
// their Taylor series to x¹³ and x¹⁴ (the next terms are below 7e-10 and
// 9e-11 on [0, 1]), so no argument is ever reduced inexactly.
struct SinCos {
  float sin, cos;
};
[[gnu::always_inline]] inline SinCos sinCosTurn24(uint32_t t) {
  const uint32_t quarter = (t >> 22) & 3u;
  const float x = static_cast<float>(static_cast<int32_t>(t & 0x3fffffu)) * 0x1p-22f;
  const float y = x * x;
  float sp = std::fma(5.69217278e-08f, y, -3.59884325e-06f);
  sp = std::fma(sp, y, 0.000160441181f);
  sp = std::fma(sp, y, -0.00468175393f);
  sp = std::fma(sp, y, 0.0796926245f);
  sp = std::fma(sp, y, -0.645964086f);
  sp = std::fma(sp, y, 1.57079637f);
  float cp = std::fma(-6.38660325e-09f, y, 4.71087475e-07f);
  cp = std::fma(cp, y, -2.52020418e-05f);
  cp = std::fma(cp, y, 0.000919260259f);
  cp = std::fma(cp, y, -0.0208634809f);
  cp = std::fma(cp, y, 0.2536695f);
  cp = std::fma(cp, y, -1.23370051f);
  cp = std::fma(cp, y, 1.0f);
  const float s = x * sp, c = cp;
  // A quarter turn q adds qπ/2: (sin, cos) → (cos, −sin) → (−sin, −cos) → (−cos, sin).
  const bool odd = (quarter & 1u) != 0;
  const float a = odd ? c : s, b = odd ? s : c;
  const bool sin_negative = quarter >= 2u, cos_negative = quarter == 1u || quarter == 2u;
  return {sin_negative ? -a : a, cos_negative ? -b : b};
}

}  // namespace dtl::rt::data::detail
