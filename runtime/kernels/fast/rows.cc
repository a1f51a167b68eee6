// Row kernels: softmax, log_softmax, normalize, rms_normalize and their
// gradients all work on "rows" — the elements sharing every coordinate but
// the reduced names. When those names are already x's trailing dims the rows
// are contiguous and used in place; otherwise (softmax over a middle dim,
// say) the operands are permuted into scratch, computed, and permuted back.
#include <cmath>

#include "runtime/kernels/fast/kernels.h"
#include "runtime/kernels/fast/rows.h"
#include "runtime/kernels/fast/simd.h"
#include "runtime/kernels/fast/strided.h"
#include "runtime/kernels/fast/vmath.h"

namespace dtl::rt::fast {

namespace {

bool contains(const Names& names, const std::string& n) {
  for (const std::string& s : names)
    if (s == n) return true;
  return false;
}

}  // namespace

RowLayout rowLayout(const Shape& x, const Names& over) {
  RowLayout l;
  Shape kept, reduced;
  for (const Dim& d : x.dims) (contains(over, d.name) ? reduced : kept).dims.push_back(d);
  l.rows_shape = kept;
  l.rows_shape.dims.insert(l.rows_shape.dims.end(), reduced.dims.begin(), reduced.dims.end());
  l.n = count(reduced);
  l.rows = count(kept);
  // Size-1 dims do not move data: compare the layouts without them.
  Names a, b;
  for (const Dim& d : x.dims)
    if (d.size != 1) a.push_back(d.name);
  for (const Dim& d : l.rows_shape.dims)
    if (d.size != 1) b.push_back(d.name);
  l.direct = a == b;
  return l;
}

const float* inRows(const TensorView& t, const RowLayout& l, std::vector<float>& buf) {
  if (l.direct) return t.f();
  buf.resize(static_cast<size_t>(t.elements));
  alignCopy(t.f(), t.shape, buf.data(), l.rows_shape);
  return buf.data();
}

float* outRows(TensorView& t, const RowLayout& l, std::vector<float>& buf) {
  if (l.direct) return t.f();
  buf.resize(static_cast<size_t>(t.elements));
  return buf.data();
}

void finishRows(TensorView& t, const RowLayout& l, const float* rows) {
  if (!l.direct) alignCopy(rows, l.rows_shape, t.f(), t.shape);
}

namespace {

// The vector max may skip a NaN (maxps returns its second operand); callers
// only shift by it, and the NaN still reaches their exp sum, so the row comes
// out NaN as torch's does (tests/golden/nonfinite).
DTL_FAST_CLONES float rowMax(const float* DTL_RESTRICT x, int64_t n) {
  float m = -INFINITY;
  DTL_SIMD_MAX(m)
  for (int64_t i = 0; i < n; ++i) m = m > x[i] ? m : x[i];
  return m;
}

DTL_FAST_CLONES float rowDot(const float* DTL_RESTRICT a, const float* DTL_RESTRICT b, int64_t n) {
  float s = 0;
  DTL_SIMD_SUM(s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

DTL_FAST_CLONES float rowSum(const float* DTL_RESTRICT a, int64_t n) {
  float s = 0;
  DTL_SIMD_SUM(s)
  for (int64_t i = 0; i < n; ++i) s += a[i];
  return s;
}

// Max-subtracted so large logits do not overflow.
DTL_FAST_CLONES void softmaxRow(float* DTL_RESTRICT y, const float* DTL_RESTRICT x, int64_t n, bool log) {
  const float m = rowMax(x, n);
  float s = 0;
  DTL_SIMD_SUM(s)
  for (int64_t i = 0; i < n; ++i) s += y[i] = std::exp(x[i] - m);
  if (log) {
    const float shift = m + std::log(s);
    DTL_SIMD for (int64_t i = 0; i < n; ++i) y[i] = x[i] - shift;
  } else {
    DTL_SIMD for (int64_t i = 0; i < n; ++i) y[i] /= s;
  }
}

// softmax: dx = y · (dy − Σ dy·y); log_softmax: dx = dy − exp(y) · Σ dy.
DTL_FAST_CLONES void softmaxGradRow(float* DTL_RESTRICT dx, const float* DTL_RESTRICT y, const float* DTL_RESTRICT dy,
                                    int64_t n, bool log) {
  if (log) {
    const float s = rowSum(dy, n);
    DTL_SIMD for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] - std::exp(y[i]) * s;
  } else {
    const float s = rowDot(dy, y, n);
    DTL_SIMD for (int64_t i = 0; i < n; ++i) dx[i] = y[i] * (dy[i] - s);
  }
}

struct RowStats {
  float mean = 0, rstd = 0;  // rms: mean = 0, rstd = (mean(x²) + eps)^−½
};

DTL_FAST_CLONES RowStats rowStats(const float* DTL_RESTRICT x, int64_t n, double eps, bool rms) {
  RowStats st;
  const float inv_n = 1.0f / static_cast<float>(n);
  if (!rms) st.mean = rowSum(x, n) * inv_n;
  float var = 0;
  const float mu = st.mean;
  DTL_SIMD_SUM(var)
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mu) * (x[i] - mu);
  st.rstd = 1.0f / std::sqrt(var * inv_n + static_cast<float>(eps));
  return st;
}

DTL_FAST_CLONES void normalizeRow(float* DTL_RESTRICT y, const float* DTL_RESTRICT x, int64_t n, double eps, bool rms) {
  const RowStats st = rowStats(x, n, eps, rms);
  DTL_SIMD for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - st.mean) * st.rstd;
}

// normalize:     dx = r · (dy − mean(dy) − x̂ · mean(dy · x̂)), x̂ = (x − μ)·r
// rms_normalize: dx = r · dy − r³ · x · mean(dy · x)
DTL_FAST_CLONES void normalizeGradRow(float* DTL_RESTRICT dx, const float* DTL_RESTRICT x,
                                      const float* DTL_RESTRICT dy, int64_t n, double eps, bool rms) {
  const RowStats st = rowStats(x, n, eps, rms);
  const float inv_n = 1.0f / static_cast<float>(n), r = st.rstd, mu = st.mean;
  if (rms) {
    const float c = r * r * r * rowDot(dy, x, n) * inv_n;
    DTL_SIMD for (int64_t i = 0; i < n; ++i) dx[i] = r * dy[i] - c * x[i];
    return;
  }
  float sdy = 0, sdyx = 0;
  DTL_PRAGMA(omp simd reduction(+ : sdy, sdyx))
  for (int64_t i = 0; i < n; ++i) {
    sdy += dy[i];
    sdyx += dy[i] * (x[i] - mu) * r;
  }
  const float mdy = sdy * inv_n, mdyx = sdyx * inv_n;
  DTL_SIMD for (int64_t i = 0; i < n; ++i) dx[i] = r * (dy[i] - mdy - (x[i] - mu) * r * mdyx);
}

}  // namespace

void softmax(const TensorView& x, const std::string& over, bool log, TensorView& y, Scratch& s) {
  RowLayout l = rowLayout(x.shape, {over});
  const float* in = inRows(x, l, s.a);
  float* out = outRows(y, l, s.b);
  for (int64_t r = 0; r < l.rows && l.n > 0; ++r) softmaxRow(out + r * l.n, in + r * l.n, l.n, log);
  finishRows(y, l, out);
}

void softmaxGrad(const TensorView& y, const TensorView& dy, const std::string& over, bool log, TensorView& dx,
                 Scratch& s) {
  RowLayout l = rowLayout(y.shape, {over});
  const float* yr = inRows(y, l, s.a);
  const float* dyr = inRows(dy, l, s.b);
  float* out = outRows(dx, l, s.c);
  for (int64_t r = 0; r < l.rows && l.n > 0; ++r) softmaxGradRow(out + r * l.n, yr + r * l.n, dyr + r * l.n, l.n, log);
  finishRows(dx, l, out);
}

void normalize(const TensorView& x, const Names& over, double eps, bool rms, TensorView& y, Scratch& s) {
  RowLayout l = rowLayout(x.shape, over);
  const float* in = inRows(x, l, s.a);
  float* out = outRows(y, l, s.b);
  for (int64_t r = 0; r < l.rows && l.n > 0; ++r) normalizeRow(out + r * l.n, in + r * l.n, l.n, eps, rms);
  finishRows(y, l, out);
}

void normalizeGrad(const TensorView& x, const TensorView& dy, const Names& over, double eps, bool rms, TensorView& dx,
                   Scratch& s) {
  RowLayout l = rowLayout(x.shape, over);
  const float* xr = inRows(x, l, s.a);
  const float* dyr = inRows(dy, l, s.b);
  float* out = outRows(dx, l, s.c);
  for (int64_t r = 0; r < l.rows && l.n > 0; ++r)
    normalizeGradRow(out + r * l.n, xr + r * l.n, dyr + r * l.n, l.n, eps, rms);
  finishRows(dx, l, out);
}

}  // namespace dtl::rt::fast
