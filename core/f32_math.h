// e^x and erf(x) in f32 as straight-line polynomials: no call, no table, no
// branch, so a vectorised loop keeps every lane in registers. glibc's
// libmvec erff took 9.8 ns per 16 lanes and expf 4.9 on a Zen 4 core (its
// gathers are slow there), and a loop calling them spills every live vector
// around each call; char GPT's GELU gradient spent most of its time so.
//
// One formula, two implementations that agree bit for bit: these C++
// functions (the fast kernels' gelu, attention and cross-entropy) and the x86 JIT's IR (compiler/codegen/
// emit_f32_math.cc) take the constants below and do the same operations in
// the same order, every multiply-add an explicit fused one (std::fma,
// llvm.fma), so no compiler's contraction choice can tell them apart.
// Errors against the correctly rounded result, measured over every f32
// (tests/unit/f32_math_test.cc checks a sweep; docs/compiler.md "Exp and
// erf"): exp within 1 ulp; erf within 1.92 u absolute (u = 2⁻²⁴; erf's
// value is what GELU adds to 1, so its absolute error is what counts).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace dtl::f32math {

// e^x = 2ⁿ · e^r with n = round(x / ln 2) and r = x − n · ln 2, |r| ≤ ln 2 / 2.
inline constexpr float kExpLowest = -104.0f;  // below: 0 (e^x < 2⁻¹⁵⁰ rounds to 0)
inline constexpr float kExpHighest = 89.0f;   // above: inf (e^x > FLT_MAX)
inline constexpr float kLog2e = 1.44269502f;
inline constexpr float kRoundingShift = 12582912.0f;  // 1.5 · 2²³: adding it rounds to an integer
inline constexpr float kLn2Hi = 0.693359375f;         // 9 significant bits: n · kLn2Hi is exact
inline constexpr float kLn2Lo = -2.12194440e-4f;      // ln 2 − kLn2Hi
// e^r ≈ 1 + r + r² · (c2 + r · (c3 + …)): a least-maximum-relative-error fit on
// [−ln 2/2, ln 2/2] (3.3e-9 before rounding), coefficients from degree 6 down.
inline constexpr float kExpPoly[] = {0.001381314592435956f, 0.008369410410523415f, 0.04166845604777336f,
                                     0.16666515171527863f,  0.4999999403953552f,   1.0f,
                                     1.0f};

// erf on t = |x|: below kErfSplit, t + t · A(t²) (A fits erf(t)/t − 1 to
// 1.3e-8 absolute in t · A); from there 1 − B(t − kErfMid) with B fitting
// erfc on [kErfSplit, 4] (3.8e-9); t is capped at 4, where erf rounds to 1.
inline constexpr float kErfSplit = 1.25f;
inline constexpr float kErfMid = 2.625f;
inline constexpr float kErfCap = 4.0f;
inline constexpr float kErfSmall[] = {5.966965909465216e-05f, -0.0007304835598915815f, 0.005085908807814121f,
                                      -0.026781858876347542f, 0.1128111481666565f,     -0.3761226236820221f,
                                      0.12837901711463928f};
inline constexpr float kErfLarge[] = {-1.8445630303176586e-06f, 7.64544620324159e-06f,   3.369526893948205e-06f,
                                      -7.390740211121738e-05f,  0.00016319099813699722f, -3.6077588447369635e-05f,
                                      -0.0006895344704389572f,  0.0022482145577669144f,  -0.004214219283312559f,
                                      0.005413797218352556f,    -0.004891112446784973f,  0.003013232722878456f,
                                      -0.001147837727330625f,   0.00020537461386993527f};

// Unrolled by the fold (no loop for a vectoriser to see inside its own).
template <size_t N, size_t... I>
[[gnu::always_inline]] inline float hornerSteps(const float (&c)[N], float x, std::index_sequence<I...>) {
  float p = c[0];
  ((p = std::fma(p, x, c[I + 1])), ...);
  return p;
}

template <size_t N>
[[gnu::always_inline]] inline float horner(const float (&c)[N], float x) {
  return hornerSteps(c, x, std::make_index_sequence<N - 1>{});
}

// NaN stays NaN (it passes the selects and poisons r); −inf gives 0, +inf inf.
[[gnu::always_inline]] inline float expF32(float x) {
  const float xc = x < kExpLowest ? kExpLowest : (x > kExpHighest ? kExpHighest : x);
  const float k = std::fma(xc, kLog2e, kRoundingShift);
  const int32_t n = std::bit_cast<int32_t>(k) - std::bit_cast<int32_t>(kRoundingShift);  // in [−150, 128]
  const float kf = k - kRoundingShift;
  const float r = std::fma(kf, -kLn2Lo, std::fma(kf, -kLn2Hi, xc));
  const float p = horner(kExpPoly, r);
  // 2ⁿ as two normal factors: the first product is exact, the second rounds
  // once, into the denormals or to inf where e^x goes there.
  const int32_t n1 = n >> 1, n2 = n - n1;
  const float s1 = std::bit_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(n1 + 127) << 23));
  const float s2 = std::bit_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(n2 + 127) << 23));
  return p * s1 * s2;
}

// erf(±inf) = ±1, erf(±0) = ±0, NaN stays NaN.
[[gnu::always_inline]] inline float erfF32(float x) {
  const float t = std::fabs(x);
  const float small = std::fma(t, horner(kErfSmall, t * t), t);
  const float capped = t > kErfCap ? kErfCap : t;  // not fmin: NaN must stay
  const float large = 1.0f - horner(kErfLarge, capped - kErfMid);
  return std::copysign(t < kErfSplit ? small : large, x);
}

}  // namespace dtl::f32math
