// softmax and log_softmax: per lane (all elements sharing the other dims'
// coordinates) a max, then a sum of exponentials, via reduce.h's kernels.
#include "runtime/kernels/reference/softmax.h"

#include <cmath>

#include "runtime/kernels/reference/reduce.h"

namespace dtl::rt::ref {

namespace {

// x − max along `over`, and Σ exp of that broadcast back: [x] each. Working
// from the shifted values keeps both results accurate for large logits.
struct Shifted {
  Tensor shifted, total;
};

Shifted shift(const Tensor& x, const std::string& over) {
  DTL_REF_CHECK(x.floating(), "softmax of integers");
  if (x.numel() == 0) return {x, x};  // no lanes with elements; max of an empty lane is undefined
  Tensor m = alignTo(reduceMax(x, {over}), x.shape);
  Shifted s{x, x};
  for (size_t k = 0; k < x.f.size(); ++k) {
    s.shifted.f[k] -= m.f[k];
    s.total.f[k] = std::exp(s.shifted.f[k]);
  }
  s.total = alignTo(reduceSum(s.total, {over}), x.shape);
  return s;
}

// Σ along `over` of a, broadcast back to a's shape.
Tensor laneSum(const Tensor& a, const std::string& over) { return alignTo(reduceSum(a, {over}), a.shape); }

}  // namespace

Tensor logSoftmax(const Tensor& x, const std::string& over) {
  Shifted s = shift(x, over);
  for (size_t k = 0; k < x.f.size(); ++k) s.shifted.f[k] -= std::log(s.total.f[k]);
  return s.shifted;
}

Tensor softmax(const Tensor& x, const std::string& over) {
  Shifted s = shift(x, over);
  for (size_t k = 0; k < x.f.size(); ++k) s.shifted.f[k] = std::exp(s.shifted.f[k]) / s.total.f[k];
  return s.shifted;
}

Tensor softmaxBackward(const Tensor& y, const Tensor& dy, const std::string& over) {
  DTL_REF_CHECK(dy.shape == y.shape, "softmax backward dy " + dy.shape.str() + " for " + y.shape.str());
  Tensor prod = y;
  for (size_t k = 0; k < prod.f.size(); ++k) prod.f[k] *= dy.f[k];
  Tensor s = laneSum(prod, over);
  Tensor dx = y;
  for (size_t k = 0; k < dx.f.size(); ++k) dx.f[k] = y.f[k] * (dy.f[k] - s.f[k]);
  return dx;
}

Tensor logSoftmaxBackward(const Tensor& y, const Tensor& dy, const std::string& over) {
  DTL_REF_CHECK(dy.shape == y.shape, "log_softmax backward dy " + dy.shape.str() + " for " + y.shape.str());
  Tensor s = laneSum(dy, over);
  Tensor dx = dy;
  for (size_t k = 0; k < dx.f.size(); ++k) dx.f[k] = dy.f[k] - std::exp(y.f[k]) * s.f[k];
  return dx;
}

}  // namespace dtl::rt::ref
