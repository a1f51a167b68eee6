// Reductions over the names the output lacks, walking x once through a
// strided space whose second operand is the output position (stride 0 along
// reduced names). Sum and mean vectorise (sumTo); max, its gradient and
// argmax keep the reference's first-maximum / NaN rules with scalar loops,
// as they are rare in training graphs.
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/kernels/fast/kernels.h"
#include "runtime/kernels/fast/strided.h"
#include "runtime/kernels/reference/convert.h"

namespace dtl::rt::fast {

namespace {

// x's space with operand 0 = position in `out`, operand 1 = x (row-major).
Space reduceSpace(const Shape& x, const Shape& out) { return makeSpace(x, {stridesIn(out, x), rowMajor(x)}); }

// NaN counts as larger than any number, and the first maximum wins.
inline bool greater(float a, float b) { return (std::isnan(a) && !std::isnan(b)) || a > b; }

// Flat index in x of the first maximal element for each output position.
std::vector<int64_t> firstMax(const TensorView& x, const Shape& out) {
  std::vector<int64_t> best(static_cast<size_t>(count(out)), -1);
  forEachRun(reduceSpace(x.shape, out), [&](const Offsets& off, int64_t n, const Offsets& in) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t& b = best[static_cast<size_t>(off[0] + i * in[0])];
      int64_t k = off[1] + i;
      bool better = x.isFloat() ? greater(x.f()[k], x.f()[b < 0 ? k : b]) : x.i()[k] > x.i()[b < 0 ? k : b];
      if (b < 0 || better) b = k;
    }
  });
  return best;
}

}  // namespace

void reduceSum(const TensorView& x, TensorView& y) {
  if (x.isFloat()) return sumTo(x.f(), x.shape, y.f(), y.shape);
  std::vector<int64_t> acc(static_cast<size_t>(y.elements), 0);
  forEachRun(reduceSpace(x.shape, y.shape), [&](const Offsets& off, int64_t n, const Offsets& in) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t& a = acc[static_cast<size_t>(off[0] + i * in[0])];
      a = static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(int64_t{x.i()[off[1] + i]}));
    }
  });
  for (int64_t o = 0; o < y.elements; ++o) y.i()[o] = static_cast<int32_t>(ref::wrapToInt(acc[o], x.dtype));
}

void reduceMean(const TensorView& x, TensorView& y) {
  sumTo(x.f(), x.shape, y.f(), y.shape);
  // An empty extent gives 0/0 = NaN, as the reference.
  const float n = static_cast<float>(static_cast<double>(x.elements) / static_cast<double>(y.elements));
  for (int64_t o = 0; o < y.elements; ++o) y.f()[o] /= n;
}

void reduceMax(const TensorView& x, TensorView& y) {
  std::vector<int64_t> best = firstMax(x, y.shape);
  for (int64_t o = 0; o < y.elements; ++o) {
    int64_t k = best[static_cast<size_t>(o)];
    if (x.isFloat()) y.f()[o] = k < 0 ? -std::numeric_limits<float>::infinity() : x.f()[k];
    else y.i()[o] = k < 0 ? 0 : x.i()[k];
  }
}

void maxGrad(const TensorView& x, const TensorView& dy, TensorView& dx) {
  std::vector<int64_t> best = firstMax(x, dy.shape);
  std::memset(dx.f(), 0, static_cast<size_t>(dx.elements) * sizeof(float));
  for (int64_t o = 0; o < dy.elements; ++o)
    if (best[static_cast<size_t>(o)] >= 0) dx.f()[best[static_cast<size_t>(o)]] = dy.f()[o];
}

void argmax(const TensorView& x, const std::string& over, TensorView& y) {
  std::vector<int64_t> best = firstMax(x, y.shape);
  int d = x.shape.find(over);
  const int64_t stride = rowMajor(x.shape)[static_cast<size_t>(d)], size = x.shape.dims[static_cast<size_t>(d)].size;
  for (int64_t o = 0; o < y.elements; ++o) y.i()[o] = static_cast<int32_t>(best[static_cast<size_t>(o)] / stride % size);
}

}  // namespace dtl::rt::fast
