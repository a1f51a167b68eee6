// Reductions as one pass over x scattering into the output through an offset
// map (output position of each x element).
#include "runtime/kernels/reference/reduce.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/reference/convert.h"

namespace dtl::rt::ref {

namespace {

// x's shape without `over`; empty `over` means all names.
Shape reducedShape(const Shape& x, const Names& over) {
  if (over.empty()) return Shape{};
  for (size_t k = 0; k < over.size(); ++k) {
    DTL_REF_CHECK(x.has(over[k]), "reduction over `" + over[k] + "`, which " + x.str() + " lacks");
    DTL_REF_CHECK(std::count(over.begin(), over.end(), over[k]) == 1, "`" + over[k] + "` reduced twice");
  }
  return without(x, over);
}

bool greater(const Tensor& x, int64_t a, int64_t b) {
  if (!x.floating()) return x.i[a] > x.i[b];
  return (std::isnan(x.f[a]) && !std::isnan(x.f[b])) || x.f[a] > x.f[b];
}

// For each output position, the flat index in x of its first maximal element.
std::vector<int64_t> firstMax(const Tensor& x, const Shape& out) {
  std::vector<int64_t> off = offsetsIn(out, x.shape);
  std::vector<int64_t> best(out.elements().value(), -1);
  for (size_t k = 0; k < off.size(); ++k) {
    int64_t& b = best[off[k]];
    if (b < 0 || greater(x, static_cast<int64_t>(k), b)) b = static_cast<int64_t>(k);
  }
  DTL_REF_CHECK(std::find(best.begin(), best.end(), -1) == best.end(),
                "max over an empty extent of " + x.shape.str());
  return best;
}

}  // namespace

Tensor reduceSum(const Tensor& x, const Names& over) {
  Shape out = reducedShape(x.shape, over);
  std::vector<int64_t> off = offsetsIn(out, x.shape);
  Tensor y = Tensor::zeros(out, x.dtype);
  for (size_t k = 0; k < off.size(); ++k) {
    if (x.floating())
      y.f[off[k]] += x.f[k];
    else
      y.i[off[k]] = static_cast<int64_t>(static_cast<uint64_t>(y.i[off[k]]) + static_cast<uint64_t>(x.i[k]));
  }
  if (!x.floating())
    for (int64_t& v : y.i) v = wrapToInt(v, x.dtype);
  return y;
}

Tensor reduceMean(const Tensor& x, const Names& over) {
  DTL_REF_CHECK(x.floating(), "mean of integers");
  Tensor y = reduceSum(x, over);
  // An empty reduced extent gives 0/0 = NaN, as PyTorch's mean of nothing.
  double count = static_cast<double>(x.numel()) / static_cast<double>(y.numel());
  for (double& v : y.f) v /= count;
  return y;
}

Tensor reduceMax(const Tensor& x, const Names& over) {
  Shape out = reducedShape(x.shape, over);
  std::vector<int64_t> best = firstMax(x, out);
  Tensor y = Tensor::zeros(out, x.dtype);
  for (size_t o = 0; o < best.size(); ++o) {
    if (x.floating())
      y.f[o] = x.f[best[o]];
    else
      y.i[o] = x.i[best[o]];
  }
  return y;
}

Tensor reduceSumBackward(const Shape& x_shape, const Names& over, const Tensor& dy) {
  DTL_REF_CHECK(dy.shape == reducedShape(x_shape, over), "reduction backward dy " + dy.shape.str());
  return alignTo(dy, x_shape);
}

Tensor reduceMeanBackward(const Shape& x_shape, const Names& over, const Tensor& dy) {
  Tensor dx = reduceSumBackward(x_shape, over, dy);
  double count = static_cast<double>(dx.numel()) / static_cast<double>(dy.numel());
  for (double& v : dx.f) v /= count;
  return dx;
}

Tensor reduceMaxBackward(const Tensor& x, const Names& over, const Tensor& dy) {
  Shape out = reducedShape(x.shape, over);
  DTL_REF_CHECK(x.floating() && dy.shape == out, "max backward dy " + dy.shape.str() + " for " + out.str());
  std::vector<int64_t> best = firstMax(x, out);
  Tensor dx = Tensor::zeros(x.shape, x.dtype);
  for (size_t o = 0; o < best.size(); ++o) dx.f[best[o]] = dy.f[o];
  return dx;
}

Tensor argmax(const Tensor& x, const std::string& over, DType out_type) {
  DTL_REF_CHECK(out_type == DType::I32 || out_type == DType::I64, "argmax gives I32 or I64");
  Shape out = reducedShape(x.shape, {over});
  std::vector<int64_t> best = firstMax(x, out);
  int d = x.shape.find(over);
  int64_t stride = stridesOf(x.shape)[d], size = x.shape.dims[d].size;
  Tensor y = Tensor::zeros(out, out_type);
  for (size_t o = 0; o < best.size(); ++o) y.i[o] = best[o] / stride % size;
  return y;
}

}  // namespace dtl::rt::ref
