// normalize and rms_normalize. Statistics are reduced with reduce.h and
// broadcast back with alignTo, so every formula below is elementwise.
// Backward, with n the reduced count, xhat = (x − μ)·r, r = (var + eps)^−½:
//   normalize:     dx = r · (dy − mean(dy) − xhat · mean(dy · xhat))
//   rms_normalize: dx = r · dy − r³ · x · mean(dy · x)
#include "runtime/kernels/reference/normalize.h"

#include <cmath>

namespace dtl::rt::ref {

namespace {

// mean over `over`, broadcast back to x's shape.
Tensor laneMean(const Tensor& x, const Names& over) { return alignTo(reduceMean(x, over), x.shape); }

Tensor product(const Tensor& a, const Tensor& b) {
  Tensor p = a;
  for (size_t k = 0; k < p.f.size(); ++k) p.f[k] *= b.f[k];
  return p;
}

struct Moments {
  Tensor centered;  // x − μ, [x]
  Tensor rstd;      // (var + eps)^−½, [x]
};

Moments moments(const Tensor& x, const Names& over, double eps) {
  DTL_REF_CHECK(x.floating(), "normalize of integers");
  Tensor mu = laneMean(x, over);
  Moments m{x, Tensor{}};
  for (size_t k = 0; k < x.f.size(); ++k) m.centered.f[k] -= mu.f[k];
  m.rstd = laneMean(product(m.centered, m.centered), over);
  for (double& v : m.rstd.f) v = 1.0 / std::sqrt(v + eps);
  return m;
}

// (mean(x²) + eps)^−½, [x]
Tensor rmsScale(const Tensor& x, const Names& over, double eps) {
  DTL_REF_CHECK(x.floating(), "rms_normalize of integers");
  Tensor r = laneMean(product(x, x), over);
  for (double& v : r.f) v = 1.0 / std::sqrt(v + eps);
  return r;
}

}  // namespace

Tensor normalize(const Tensor& x, const Names& over, double eps) {
  Moments m = moments(x, over, eps);
  return product(m.centered, m.rstd);
}

Tensor normalizeBackward(const Tensor& x, const Names& over, double eps, const Tensor& dy) {
  DTL_REF_CHECK(dy.shape == x.shape, "normalize backward dy " + dy.shape.str() + " for " + x.shape.str());
  Moments m = moments(x, over, eps);
  Tensor xhat = product(m.centered, m.rstd);
  Tensor mean_dy = laneMean(dy, over), mean_dy_xhat = laneMean(product(dy, xhat), over);
  Tensor dx = dy;
  for (size_t k = 0; k < dx.f.size(); ++k)
    dx.f[k] = m.rstd.f[k] * (dy.f[k] - mean_dy.f[k] - xhat.f[k] * mean_dy_xhat.f[k]);
  return dx;
}

Tensor rmsNormalize(const Tensor& x, const Names& over, double eps) { return product(x, rmsScale(x, over, eps)); }

Tensor rmsNormalizeBackward(const Tensor& x, const Names& over, double eps, const Tensor& dy) {
  DTL_REF_CHECK(dy.shape == x.shape, "rms_normalize backward dy " + dy.shape.str() + " for " + x.shape.str());
  Tensor r = rmsScale(x, over, eps);
  Tensor mean_dy_x = laneMean(product(dy, x), over);
  Tensor dx = dy;
  for (size_t k = 0; k < dx.f.size(); ++k) {
    double rk = r.f[k];
    dx.f[k] = rk * dy.f[k] - rk * rk * rk * x.f[k] * mean_dy_x.f[k];
  }
  return dx;
}

}  // namespace dtl::rt::ref
