// cross_entropy and its gradient. Labels come from user data, so a label out
// of range is a Status naming the position and value, never an abort.
#pragma once

#include <string>

#include "runtime/kernels/reference/tensor.h"

namespace dtl::rt::ref {

// logits [..., classes, ...] (float), labels [the other dims, any order]
// (integer) → loss, an F32 scalar: the mean over all label positions of
// −log_softmax(logits, classes)[label]. No positions gives NaN, as PyTorch.
Status crossEntropy(const Tensor& logits, const Tensor& labels, const std::string& classes, Tensor* loss);

// dlogits [logits] = dloss · (softmax(logits) − onehot(label)) / positions.
Status crossEntropyBackward(const Tensor& logits, const Tensor& labels, const std::string& classes,
                            const Tensor& dloss, Tensor* dlogits);

}  // namespace dtl::rt::ref
