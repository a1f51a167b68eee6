// Elementwise kernels: unary functions and their gradients, name-broadcast
// binary arithmetic and comparisons, fill, cast, arange and dropout.
// Every float loop vectorises: gelu's erf and exp as core/f32_math.h's
// polynomials (the JIT's bits), the other transcendental functions through
// libmvec (vmath.h); conditions are written as selects or 0/1 factors, never as
// branches, which GCC would keep (a mispredicted branch per element).
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include "core/f32_math.h"
#include "runtime/kernels/fast/kernels.h"
#include "runtime/kernels/fast/simd.h"
#include "runtime/kernels/fast/strided.h"
#include "runtime/kernels/fast/vmath.h"
#include "runtime/kernels/reference/convert.h"
#include "runtime/kernels/reference/dropout.h"

namespace dtl::rt::fast {

using ref::Binary;
using ref::Unary;

namespace {

constexpr float kGeluTanhC = 0.044715f;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

DTL_FAST_CLONES void unaryLoop(Unary op, float* DTL_RESTRICT y, const float* DTL_RESTRICT x, int64_t n) {
#define DTL_UNARY(EXPR) \
  DTL_SIMD for (int64_t i = 0; i < n; ++i) { \
    const float v = x[i];                    \
    y[i] = (EXPR);                           \
  }                                          \
  return;
  switch (op) {
    case Unary::Relu: DTL_UNARY(v <= 0.0f ? 0.0f : v)  // NaN stays NaN; not a max, which would drop it
    case Unary::Gelu: DTL_UNARY(0.5f * v * (1.0f + f32math::erfF32(v * kInvSqrt2)))
    case Unary::GeluTanh: DTL_UNARY(0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + kGeluTanhC * v * v * v))))
    case Unary::Silu: DTL_UNARY(v * sigmoid(v))
    case Unary::Tanh: DTL_UNARY(std::tanh(v))
    case Unary::Sigmoid: DTL_UNARY(sigmoid(v))
    case Unary::Exp: DTL_UNARY(std::exp(v))
    case Unary::Log: DTL_UNARY(std::log(v))
    case Unary::Sqrt: DTL_UNARY(std::sqrt(v))
    case Unary::Rsqrt: DTL_UNARY(1.0f / std::sqrt(v))
    case Unary::Neg: DTL_UNARY(-v)
    case Unary::Abs: DTL_UNARY(std::fabs(v))
  }
#undef DTL_UNARY
}

// dx = dy · f'(x), the derivatives of ref::unaryBackward in f32.
DTL_FAST_CLONES void unaryGradLoop(Unary op, float* DTL_RESTRICT dx, const float* DTL_RESTRICT x,
                                   const float* DTL_RESTRICT dy, int64_t n) {
#define DTL_DERIV(EXPR) \
  DTL_SIMD for (int64_t i = 0; i < n; ++i) { \
    const float v = x[i];                    \
    (void)v;                                 \
    dx[i] = dy[i] * (EXPR);                  \
  }                                          \
  return;
  switch (op) {
    case Unary::Relu:  // a select, as the reference: dy at NaN, 0 where x ≤ 0 even for a NaN dy
      DTL_SIMD for (int64_t i = 0; i < n; ++i) dx[i] = x[i] <= 0.0f ? 0.0f : dy[i];
      return;
    case Unary::Gelu:
      DTL_DERIV(0.5f * (1.0f + f32math::erfF32(v * kInvSqrt2)) + v * kInvSqrt2Pi * f32math::expF32(-0.5f * v * v))
    case Unary::GeluTanh: {
      DTL_SIMD for (int64_t i = 0; i < n; ++i) {
        const float v = x[i], t = std::tanh(kSqrt2OverPi * (v + kGeluTanhC * v * v * v));
        dx[i] = dy[i] * (0.5f * (1.0f + t) +
                         0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluTanhC * v * v));
      }
      return;
    }
    case Unary::Silu: DTL_DERIV(sigmoid(v) * (1.0f + v * (1.0f - sigmoid(v))))
    case Unary::Tanh: DTL_DERIV(1.0f - std::tanh(v) * std::tanh(v))
    case Unary::Sigmoid: DTL_DERIV(sigmoid(v) * (1.0f - sigmoid(v)))
    case Unary::Exp: DTL_DERIV(std::exp(v))
    case Unary::Log: DTL_DERIV(1.0f / v)
    case Unary::Sqrt: DTL_DERIV(0.5f / std::sqrt(v))
    case Unary::Rsqrt: DTL_DERIV(-0.5f / (v * std::sqrt(v)))
    case Unary::Neg: DTL_DERIV(-1.0f)
    case Unary::Abs: DTL_DERIV(static_cast<float>(v > 0.0f) - static_cast<float>(v < 0.0f))
  }
#undef DTL_DERIV
}

// One run of a binary op; the operand strides are loop-invariant, so the
// unit/zero-stride cases get their own vector loops.
#define DTL_BINARY_RUN(OUT_T, EXPR)                                                        \
  if (sa == 1 && sb == 1) {                                                                \
    DTL_SIMD for (int64_t i = 0; i < n; ++i) {                                             \
      const float x = a[i], z = b[i];                                                      \
      o[i] = static_cast<OUT_T>(EXPR);                                                     \
    }                                                                                      \
  } else if (sb == 0) {                                                                    \
    const float z = *b;                                                                    \
    DTL_SIMD for (int64_t i = 0; i < n; ++i) {                                             \
      const float x = a[i * sa];                                                           \
      o[i] = static_cast<OUT_T>(EXPR);                                                     \
    }                                                                                      \
  } else if (sa == 0) {                                                                    \
    const float x = *a;                                                                    \
    DTL_SIMD for (int64_t i = 0; i < n; ++i) {                                             \
      const float z = b[i * sb];                                                           \
      o[i] = static_cast<OUT_T>(EXPR);                                                     \
    }                                                                                      \
  } else {                                                                                 \
    for (int64_t i = 0; i < n; ++i) {                                                      \
      const float x = a[i * sa], z = b[i * sb];                                            \
      o[i] = static_cast<OUT_T>(EXPR);                                                     \
    }                                                                                      \
  }                                                                                        \
  return;

DTL_FAST_CLONES void arithRun(Binary op, float* DTL_RESTRICT o, const float* a, int64_t sa, const float* b, int64_t sb,
                              int64_t n) {
  switch (op) {
    case Binary::Add: DTL_BINARY_RUN(float, x + z)
    case Binary::Sub: DTL_BINARY_RUN(float, x - z)
    case Binary::Mul: DTL_BINARY_RUN(float, x * z)
    case Binary::Div: DTL_BINARY_RUN(float, x / z)
    default: return;
  }
}

DTL_FAST_CLONES void compareRun(Binary op, int32_t* DTL_RESTRICT o, const float* a, int64_t sa, const float* b,
                                int64_t sb, int64_t n) {
  switch (op) {
    case Binary::Eq: DTL_BINARY_RUN(int32_t, x == z)
    case Binary::Ne: DTL_BINARY_RUN(int32_t, x != z)
    case Binary::Lt: DTL_BINARY_RUN(int32_t, x < z)
    case Binary::Le: DTL_BINARY_RUN(int32_t, x <= z)
    case Binary::Gt: DTL_BINARY_RUN(int32_t, x > z)
    case Binary::Ge: DTL_BINARY_RUN(int32_t, x >= z)
    default: return;
  }
}
#undef DTL_BINARY_RUN

// Integer arithmetic as the reference does it: wrapping, x / 0 = 0. Rare in
// training graphs (index arithmetic), so a plain scalar loop.
int64_t intOp(Binary op, int64_t a, int64_t b) {
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case Binary::Add: return static_cast<int64_t>(ua + ub);
    case Binary::Sub: return static_cast<int64_t>(ua - ub);
    case Binary::Mul: return static_cast<int64_t>(ua * ub);
    case Binary::Div: return b == 0 ? 0 : b == -1 ? static_cast<int64_t>(0 - ua) : a / b;
    case Binary::Eq: return a == b;
    case Binary::Ne: return a != b;
    case Binary::Lt: return a < b;
    case Binary::Le: return a <= b;
    case Binary::Gt: return a > b;
    case Binary::Ge: return a >= b;
  }
  return 0;
}

}  // namespace

void unaryArray(Unary op, const float* x, float* y, int64_t n) { unaryLoop(op, y, x, n); }

void unary(Unary op, const TensorView& x, TensorView& y) {
  if (x.isFloat()) return unaryLoop(op, y.f(), x.f(), x.elements);
  for (int64_t i = 0; i < x.elements; ++i) {  // neg / abs of integers, wrapping
    uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(x.i()[i]));
    bool flip = op == Unary::Neg || x.i()[i] < 0;
    y.i()[i] = static_cast<int32_t>(ref::wrapToInt(static_cast<int64_t>(flip ? 0 - u : u), x.dtype));
  }
}

DTL_FAST_CLONES void reluInPlace(float* x, int64_t n) {
  DTL_SIMD for (int64_t i = 0; i < n; ++i) x[i] = x[i] <= 0.0f ? 0.0f : x[i];
}

void unaryGrad(Unary op, const TensorView& x, const TensorView& dy, TensorView& dx) {
  unaryGradLoop(op, dx.f(), x.f(), dy.f(), x.elements);
}

void binary(Binary op, const TensorView& a, const TensorView& b, TensorView& y) {
  Space s = makeSpace(y.shape, {rowMajor(y.shape), stridesIn(a.shape, y.shape), stridesIn(b.shape, y.shape)});
  if (a.isFloat()) {
    bool cmp = ref::isComparison(op);
    forEachRun(s, [&](const Offsets& off, int64_t n, const Offsets& in) {
      if (cmp) compareRun(op, y.i() + off[0], a.f() + off[1], in[1], b.f() + off[2], in[2], n);
      else arithRun(op, y.f() + off[0], a.f() + off[1], in[1], b.f() + off[2], in[2], n);
    });
    return;
  }
  const DType wrap = ref::isComparison(op) ? DType::Bool : a.dtype;
  forEachRun(s, [&](const Offsets& off, int64_t n, const Offsets& in) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t r = intOp(op, a.i()[off[1] + i * in[1]], b.i()[off[2] + i * in[2]]);
      y.i()[off[0] + i] = static_cast<int32_t>(ref::wrapToInt(r, wrap));
    }
  });
}

void fill(double value, TensorView& y) {
  if (y.isFloat()) {
    const float v = static_cast<float>(value);
    for (int64_t i = 0; i < y.elements; ++i) y.f()[i] = v;
  } else {
    const auto v = static_cast<int32_t>(static_cast<int64_t>(value));
    for (int64_t i = 0; i < y.elements; ++i) y.i()[i] = v;
  }
}

// Casts are rare and mostly int ↔ float at the data boundary, so they reuse
// the reference's per-element rules (truncation, saturation, wrapping,
// bf16/f16 rounding) instead of restating them.
void cast(const TensorView& x, TensorView& y) {
  const int64_t n = x.elements;
  if (x.isFloat() && y.dtype == DType::F32) {
    std::memcpy(y.f(), x.f(), static_cast<size_t>(n) * sizeof(float));
  } else if (y.isFloat()) {
    for (int64_t i = 0; i < n; ++i)
      y.f()[i] = static_cast<float>(ref::roundToFloat(x.isFloat() ? x.f()[i] : x.i()[i], y.dtype));
  } else if (!x.isFloat()) {
    for (int64_t i = 0; i < n; ++i) y.i()[i] = static_cast<int32_t>(ref::wrapToInt(x.i()[i], y.dtype));
  } else if (y.dtype == DType::Bool) {
    for (int64_t i = 0; i < n; ++i) y.i()[i] = x.f()[i] != 0.0f;
  } else {  // truncation toward zero; NaN → 0; saturate to int64, then wrap
    for (int64_t i = 0; i < n; ++i) {
      const double t = std::trunc(static_cast<double>(x.f()[i]));
      const int64_t v = std::isnan(t) ? 0
                        : t >= 9223372036854775808.0 ? std::numeric_limits<int64_t>::max()
                        : t < -9223372036854775808.0 ? std::numeric_limits<int64_t>::min()
                                                     : static_cast<int64_t>(t);
      y.i()[i] = static_cast<int32_t>(ref::wrapToInt(v, y.dtype));
    }
  }
}

void arange(TensorView& y) {
  for (int64_t i = 0; i < y.elements; ++i) y.i()[i] = static_cast<int32_t>(i);
}

// The mask is ref::dropoutKeep written out so the loop stays branch-free:
// keep iff (h >> 11) · 2⁻⁵³ ≥ p, with h = splitmix64(splitmix64(seed) + k).
DTL_FAST_CLONES void dropoutLoop(float* DTL_RESTRICT y, const float* DTL_RESTRICT x, uint64_t base, double p,
                                 float scale, int64_t n) {
  DTL_SIMD for (int64_t k = 0; k < n; ++k) {
    uint64_t z = base + static_cast<uint64_t>(k) + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    y[k] = x[k] * (u >= p ? scale : 0.0f);  // a dropped NaN or inf gives NaN, as the reference
  }
}

void dropout(const TensorView& x, double p, uint64_t seed, uint64_t first, bool training, TensorView& y) {
  if (!training) {
    std::memcpy(y.f(), x.f(), static_cast<size_t>(x.elements) * sizeof(float));
    return;
  }
  // The reference scales in double then rounds; 1/(1−p) rounded to f32 first
  // can differ in the last bit, well inside the kernels' tolerance.
  dropoutLoop(y.f(), x.f(), ref::splitmix64(seed) + first, p, static_cast<float>(1.0 / (1.0 - p)), x.elements);
}

void dropoutBlock(const TensorView& x, double p, uint64_t seed, const std::vector<int64_t>& block, bool training,
                  TensorView& y) {
  if (!training) {
    std::memcpy(y.f(), x.f(), static_cast<size_t>(x.elements) * sizeof(float));
    return;
  }
  const uint64_t base = ref::splitmix64(seed);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  ref::forEachGlobalRun(x.shape, block, [&](int64_t local, int64_t global, int64_t n) {
    dropoutLoop(y.f() + local, x.f() + local, base + static_cast<uint64_t>(global), p, scale, n);
  });
}

}  // namespace dtl::rt::fast
