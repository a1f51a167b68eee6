// The reference tensor: a named shape and values held in double (floats) or
// int64 (integers and bools), so it can serve as a precise oracle for the fast
// kernels. Also the name-alignment machinery every other kernel builds on.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "runtime/kernels/reference/status.h"

namespace dtl::rt::ref {

struct Tensor {
  Shape shape;
  DType dtype = DType::F32;  // logical type; values are not rounded to it (cast does that)
  std::vector<double> f;     // the values when dtype is a float type
  std::vector<int64_t> i;    // the values when dtype is an integer type or bool (0/1)

  static Tensor zeros(Shape s, DType t = DType::F32);
  static Tensor fromValues(Shape s, std::vector<double> v, DType t = DType::F32);
  static Tensor fromInts(Shape s, std::vector<int64_t> v, DType t = DType::I32);
  static Tensor scalar(double v, DType t = DType::F32);

  bool floating() const { return isFloat(dtype); }
  int64_t numel() const;
  // Element at a multi-index given in the shape's order; floats and ints alike.
  double at(std::initializer_list<int64_t> index) const;
  int64_t flatIndex(std::initializer_list<int64_t> index) const;
};

// Row-major strides of `s`, last dim fastest.
std::vector<int64_t> stridesOf(const Shape& s);

// For every element of `space` (row-major), the flat index of the element of a
// tensor shaped `part` at the same named coordinates. Every name of `part` must
// be in `space` with the same size; names only in `space` broadcast (stride 0).
std::vector<int64_t> offsetsIn(const Shape& part, const Shape& space);

// `s` without the dims named in `names`, order kept.
Shape without(const Shape& s, const std::vector<std::string>& names);

// Reorders/broadcasts x to `target`'s names (every name of x must be in target
// with the same size).
Tensor alignTo(const Tensor& x, const Shape& target);

// The adjoint of alignTo: sums x over the names `target` lacks and orders the
// rest as `target` (every name of target must be in x). The backward of
// broadcasting.
Tensor sumTo(const Tensor& x, const Shape& target);

// "(batch 1, seq 3)": the coordinates of flat index `flat` in `s`, for messages.
std::string positionStr(const Shape& s, int64_t flat);

}  // namespace dtl::rt::ref
