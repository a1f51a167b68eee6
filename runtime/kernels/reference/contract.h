// `a @ b`: contraction over every dim name the operands share (language.md §5).
#pragma once

#include "runtime/kernels/reference/tensor.h"

namespace dtl::rt::ref {

// (a's unshared dims in order, then b's unshared dims in order). Sizes of
// shared names must agree. No shared name is an outer product: the language
// rejects it, but gradients of contractions need it.
Shape contractShape(const Shape& a, const Shape& b);
Tensor contract(const Tensor& a, const Tensor& b);

// da = dy @ b and db = dy @ a (each a contraction over the other's unshared
// names), aligned to the operand's dim order.
struct ContractGrads {
  Tensor da, db;
};
ContractGrads contractBackward(const Tensor& a, const Tensor& b, const Tensor& dy);

}  // namespace dtl::rt::ref
