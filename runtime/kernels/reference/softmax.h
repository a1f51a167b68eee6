// softmax and log_softmax along one dim, with their gradients.
#pragma once

#include <string>

#include "runtime/kernels/reference/tensor.h"

namespace dtl::rt::ref {

// Max-subtracted, so large logits do not overflow.
Tensor softmax(const Tensor& x, const std::string& over);
Tensor logSoftmax(const Tensor& x, const std::string& over);

// From the forward output y: dx = y · (dy − Σ dy·y).
Tensor softmaxBackward(const Tensor& y, const Tensor& dy, const std::string& over);
// From the forward output y: dx = dy − exp(y) · Σ dy.
Tensor logSoftmaxBackward(const Tensor& y, const Tensor& dy, const std::string& over);

}  // namespace dtl::rt::ref
