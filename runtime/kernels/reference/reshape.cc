// Reshapes rewrite the shape and check the result has no repeated name.
#include "runtime/kernels/reference/reshape.h"

namespace dtl::rt::ref {

namespace {

Tensor withShape(const Tensor& x, Shape s) {
  for (size_t i = 0; i < s.rank(); ++i)
    for (size_t j = i + 1; j < s.rank(); ++j)
      DTL_REF_CHECK(s.dims[i].name != s.dims[j].name, "reshape would give two dims named `" + s.dims[i].name + "`");
  Tensor y = x;
  y.shape = std::move(s);
  return y;
}

}  // namespace

Tensor splitDim(const Tensor& x, const std::string& d, const Dim& a, const Dim& b) {
  int at = x.shape.find(d);
  DTL_REF_CHECK(at >= 0 && a.size * b.size == x.shape.dims[at].size,
                "split of `" + d + "` in " + x.shape.str() + " into " + a.name + " " + std::to_string(a.size) +
                    " × " + b.name + " " + std::to_string(b.size));
  Shape s = x.shape;
  s.dims[at] = a;
  s.dims.insert(s.dims.begin() + at + 1, b);
  return withShape(x, std::move(s));
}

Tensor mergeDims(const Tensor& x, const std::string& a, const std::string& b, const Dim& d) {
  int ia = x.shape.find(a), ib = x.shape.find(b);
  DTL_REF_CHECK(ia >= 0 && ib == ia + 1, "merge of non-adjacent `" + a + "`, `" + b + "` in " + x.shape.str());
  DTL_REF_CHECK(x.shape.dims[ia].size * x.shape.dims[ib].size == d.size,
                "merge of " + x.shape.str() + " into " + d.name + " " + std::to_string(d.size));
  Shape s = x.shape;
  s.dims[ia] = d;
  s.dims.erase(s.dims.begin() + ib);
  return withShape(x, std::move(s));
}

Tensor renameDim(const Tensor& x, const std::string& from, const std::string& to) {
  int at = x.shape.find(from);
  DTL_REF_CHECK(at >= 0, "rename of `" + from + "`, which " + x.shape.str() + " lacks");
  Shape s = x.shape;
  s.dims[at].name = to;
  return withShape(x, std::move(s));
}

}  // namespace dtl::rt::ref
