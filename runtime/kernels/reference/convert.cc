// cast and arange. Rounding to a narrower float format is done on the double
// directly (not via float) so bf16/f16 casts round once, to nearest even.
#include "runtime/kernels/reference/convert.h"

#include <cfloat>
#include <cmath>
#include <limits>

namespace dtl::rt::ref {

namespace {

struct FloatFormat {
  int precision;  // significand bits, the implicit one included
  int min_exp;    // exponent of the smallest normal number
  double max_finite;
};

FloatFormat formatOf(DType t) {
  switch (t) {
    case DType::F32: return {24, -126, static_cast<double>(FLT_MAX)};
    case DType::BF16: return {8, -126, std::ldexp(2.0 - std::ldexp(1.0, -7), 127)};
    case DType::F16: return {11, -14, 65504.0};
    default: break;
  }
  DTL_REF_FAIL(std::string("roundToFloat to ") + dtypeName(t));
}

int64_t floatToInt(double v) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  // 2^63 is exactly representable; anything at or past it saturates.
  if (t >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (t < -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(t);
}

}  // namespace

double roundToFloat(double v, DType t) {
  FloatFormat fmt = formatOf(t);
  if (v == 0 || !std::isfinite(v)) return v;
  // The spacing of representable values near v; fixed below the smallest
  // normal, which is what makes subnormals come out right.
  int e = std::max(std::ilogb(v), fmt.min_exp);
  double quantum = std::ldexp(1.0, e - (fmt.precision - 1));
  double r = std::nearbyint(v / quantum) * quantum;  // default rounding mode: ties to even
  if (std::fabs(r) > fmt.max_finite) return std::copysign(INFINITY, v);
  return r;
}

int64_t wrapToInt(int64_t v, DType t) {
  switch (t) {
    case DType::I64: return v;
    case DType::I32: return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
    case DType::U16: return static_cast<uint16_t>(static_cast<uint64_t>(v));
    case DType::U8: return static_cast<uint8_t>(static_cast<uint64_t>(v));
    case DType::Bool: return v != 0;
    default: break;
  }
  DTL_REF_FAIL(std::string("wrapToInt to ") + dtypeName(t));
}

Tensor cast(const Tensor& x, DType to) {
  Tensor out = Tensor::zeros(x.shape, to);
  int64_t n = x.numel();
  for (int64_t k = 0; k < n; ++k) {
    if (isFloat(to))
      out.f[k] = roundToFloat(x.floating() ? x.f[k] : static_cast<double>(x.i[k]), to);
    else if (to == DType::Bool)
      out.i[k] = x.floating() ? x.f[k] != 0 : x.i[k] != 0;
    else
      out.i[k] = wrapToInt(x.floating() ? floatToInt(x.f[k]) : x.i[k], to);
  }
  return out;
}

Tensor arange(const Dim& d) {
  Tensor out = Tensor::zeros(Shape{{d}}, DType::I32);
  for (int64_t k = 0; k < d.size; ++k) out.i[k] = k;
  return out;
}

}  // namespace dtl::rt::ref
