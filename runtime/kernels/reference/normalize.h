// normalize (the core of layer norm) and rms_normalize over a list of dims,
// with their gradients. No affine scale or shift: the stdlib adds those.
#pragma once

#include "runtime/kernels/reference/reduce.h"

namespace dtl::rt::ref {

// (x − mean) / sqrt(var + eps), biased variance (divided by the count).
Tensor normalize(const Tensor& x, const Names& over, double eps);
Tensor normalizeBackward(const Tensor& x, const Names& over, double eps, const Tensor& dy);

// x / sqrt(mean(x²) + eps).
Tensor rmsNormalize(const Tensor& x, const Names& over, double eps);
Tensor rmsNormalizeBackward(const Tensor& x, const Names& over, double eps, const Tensor& dy);

}  // namespace dtl::rt::ref
