// Reductions over a list of dim names (empty = all dims): sum, mean, max with
// their gradients, and argmax. The result keeps x's other dims in order.
#pragma once

#include <string>
#include <vector>

#include "runtime/kernels/reference/tensor.h"

namespace dtl::rt::ref {

using Names = std::vector<std::string>;

// Sum and max also take integers (sum wraps to the dtype's width); mean needs
// floats. Max over an empty extent is an invariant failure (as PyTorch).
// NaN counts as larger than any number, so it propagates.
Tensor reduceSum(const Tensor& x, const Names& over);
Tensor reduceMean(const Tensor& x, const Names& over);
Tensor reduceMax(const Tensor& x, const Names& over);

// dx[x_shape] = dy broadcast back (sum) or that divided by the reduced count (mean).
Tensor reduceSumBackward(const Shape& x_shape, const Names& over, const Tensor& dy);
Tensor reduceMeanBackward(const Shape& x_shape, const Names& over, const Tensor& dy);
// All of dy goes to the first maximal element in x's storage order; with one
// reduced name that is the lowest index along it, as PyTorch's max(dim).
Tensor reduceMaxBackward(const Tensor& x, const Names& over, const Tensor& dy);

// The index along `over` of the first maximal element; dtype I32 or I64.
Tensor argmax(const Tensor& x, const std::string& over, DType out = DType::I32);

}  // namespace dtl::rt::ref
