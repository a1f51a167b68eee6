// Contraction as one loop over the joint index space [a's unshared, b's
// unshared, shared]: every output element accumulates a · b over the shared
// coordinates. Quadratic memory in the offset maps, which is fine for an oracle.
#include "runtime/kernels/reference/contract.h"

namespace dtl::rt::ref {

Shape contractShape(const Shape& a, const Shape& b) {
  Shape out;
  for (const Dim& d : a.dims) {
    int j = b.find(d.name);
    DTL_REF_CHECK(j < 0 || b.dims[j].size == d.size, "contraction of " + a.str() + " and " + b.str());
    if (j < 0) out.dims.push_back(d);
  }
  for (const Dim& d : b.dims)
    if (!a.has(d.name)) out.dims.push_back(d);
  return out;
}

Tensor contract(const Tensor& a, const Tensor& b) {
  DTL_REF_CHECK(a.floating() && a.dtype == b.dtype, "`@` needs two float tensors of one dtype");
  Shape out = contractShape(a.shape, b.shape);
  Shape space = out;  // [a rest, b rest, shared]
  for (const Dim& d : a.shape.dims)
    if (b.shape.has(d.name)) space.dims.push_back(d);
  std::vector<int64_t> oa = offsetsIn(a.shape, space), ob = offsetsIn(b.shape, space),
                       oy = offsetsIn(out, space);
  Tensor y = Tensor::zeros(out, a.dtype);
  for (size_t k = 0; k < oy.size(); ++k) y.f[oy[k]] += a.f[oa[k]] * b.f[ob[k]];
  return y;
}

ContractGrads contractBackward(const Tensor& a, const Tensor& b, const Tensor& dy) {
  DTL_REF_CHECK(dy.shape == contractShape(a.shape, b.shape), "contractBackward dy " + dy.shape.str());
  // dy [a rest, b rest] @ b [.., b rest] shares exactly b's rest, leaving
  // [a rest, shared]: a's names, possibly reordered.
  return {alignTo(contract(dy, b), a.shape), alignTo(contract(dy, a), b.shape)};
}

}  // namespace dtl::rt::ref
