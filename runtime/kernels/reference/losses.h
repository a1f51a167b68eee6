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

// The pieces of a cross-entropy whose classes are split over ranks. Logits
// hold classes [first, first + held) of `whole` (0: all of them); labels
// index all classes and must be in [0, whole).
// pick_class: per row (the logits without `classes`), logits[…, label], or
// 0 where another rank holds the label's class.
Status pickClass(const Tensor& logits, const Tensor& labels, const std::string& classes, Tensor* out,
                 int64_t first = 0, int64_t whole = 0);
// pick_class_grad: the one-hot of the labels in `shape` (the logits' shape).
Status pickClassGrad(const Shape& shape, const Tensor& labels, const std::string& classes, Tensor* out,
                     int64_t first = 0, int64_t whole = 0);

}  // namespace dtl::rt::ref
