// Tensor helpers and name alignment: the offset map from one named shape into
// another is the single mechanism behind broadcasting, reductions and
// reordering in the reference kernels.
#include "runtime/kernels/reference/tensor.h"

#include <algorithm>

namespace dtl::rt::ref {

namespace {

int64_t elementsOf(const Shape& s) {
  auto n = s.elements();
  DTL_REF_CHECK(n.has_value(), "element count of " + s.str() + " overflows int64");
  return *n;
}

}  // namespace

Tensor Tensor::zeros(Shape s, DType t) {
  Tensor x;
  x.dtype = t;
  int64_t n = elementsOf(s);
  x.shape = std::move(s);
  if (isFloat(t))
    x.f.assign(n, 0.0);
  else
    x.i.assign(n, 0);
  return x;
}

Tensor Tensor::fromValues(Shape s, std::vector<double> v, DType t) {
  DTL_REF_CHECK(isFloat(t), std::string("fromValues needs a float dtype, got ") + dtypeName(t));
  DTL_REF_CHECK(static_cast<int64_t>(v.size()) == elementsOf(s),
                std::to_string(v.size()) + " values for shape " + s.str());
  return Tensor{std::move(s), t, std::move(v), {}};
}

Tensor Tensor::fromInts(Shape s, std::vector<int64_t> v, DType t) {
  DTL_REF_CHECK(!isFloat(t), std::string("fromInts needs an integer or bool dtype, got ") + dtypeName(t));
  DTL_REF_CHECK(static_cast<int64_t>(v.size()) == elementsOf(s),
                std::to_string(v.size()) + " values for shape " + s.str());
  return Tensor{std::move(s), t, {}, std::move(v)};
}

Tensor Tensor::scalar(double v, DType t) {
  if (isFloat(t)) return fromValues(Shape{}, {v}, t);
  return fromInts(Shape{}, {static_cast<int64_t>(v)}, t);
}

int64_t Tensor::numel() const { return elementsOf(shape); }

int64_t Tensor::flatIndex(std::initializer_list<int64_t> index) const {
  DTL_REF_CHECK(index.size() == shape.rank(), "index of rank " + std::to_string(index.size()) + " into " + shape.str());
  int64_t flat = 0;
  size_t d = 0;
  for (int64_t k : index) {
    DTL_REF_CHECK(k >= 0 && k < shape.dims[d].size, "index " + std::to_string(k) + " into " + shape.str());
    flat = flat * shape.dims[d++].size + k;
  }
  return flat;
}

double Tensor::at(std::initializer_list<int64_t> index) const {
  int64_t k = flatIndex(index);
  return floating() ? f[k] : static_cast<double>(i[k]);
}

std::vector<int64_t> stridesOf(const Shape& s) {
  std::vector<int64_t> st(s.rank(), 1);
  for (size_t d = s.rank(); d-- > 1;) st[d - 1] = st[d] * s.dims[d].size;
  return st;
}

std::vector<int64_t> offsetsIn(const Shape& part, const Shape& space) {
  std::vector<int64_t> pst = stridesOf(part), st(space.rank(), 0);
  for (size_t d = 0; d < part.rank(); ++d) {
    int j = space.find(part.dims[d].name);
    DTL_REF_CHECK(j >= 0 && space.dims[j].size == part.dims[d].size,
                  "dim `" + part.dims[d].name + "` of " + part.str() + " does not match " + space.str());
    st[j] = pst[d];
  }
  std::vector<int64_t> out(elementsOf(space));
  std::vector<int64_t> idx(space.rank(), 0);
  int64_t off = 0;
  for (int64_t& o : out) {
    o = off;
    // Odometer step: bump the fastest dim, carrying into slower ones.
    for (size_t d = space.rank(); d-- > 0;) {
      off += st[d];
      if (++idx[d] < space.dims[d].size) break;
      off -= st[d] * idx[d];
      idx[d] = 0;
    }
  }
  return out;
}

Shape without(const Shape& s, const std::vector<std::string>& names) {
  Shape out;
  for (const Dim& d : s.dims)
    if (std::find(names.begin(), names.end(), d.name) == names.end()) out.dims.push_back(d);
  return out;
}

Tensor alignTo(const Tensor& x, const Shape& target) {
  std::vector<int64_t> off = offsetsIn(x.shape, target);
  Tensor out = Tensor::zeros(target, x.dtype);
  for (size_t k = 0; k < off.size(); ++k) {
    if (x.floating())
      out.f[k] = x.f[off[k]];
    else
      out.i[k] = x.i[off[k]];
  }
  return out;
}

Tensor sumTo(const Tensor& x, const Shape& target) {
  DTL_REF_CHECK(x.floating(), "sumTo on integers");
  std::vector<int64_t> off = offsetsIn(target, x.shape);
  Tensor out = Tensor::zeros(target, x.dtype);
  for (size_t k = 0; k < off.size(); ++k) out.f[off[k]] += x.f[k];
  return out;
}

std::string positionStr(const Shape& s, int64_t flat) {
  std::vector<int64_t> st = stridesOf(s);
  std::string out = "(";
  for (size_t d = 0; d < s.rank(); ++d) {
    out += (d ? ", " : "") + s.dims[d].name + " " + std::to_string(flat / st[d]);
    flat %= st[d];
  }
  return out + ")";
}

}  // namespace dtl::rt::ref
