// Element type changes (cast), the rounding to f32/bf16/f16 they imply, the
// integer wrapping every integer kernel applies, and arange.
#pragma once

#include <cstdint>

#include "runtime/kernels/reference/tensor.h"

namespace dtl::rt::ref {

// v rounded to the nearest value of float type t (F32, BF16 or F16), ties to
// even, with subnormals; beyond the largest finite value it becomes ±inf.
double roundToFloat(double v, DType t);

// v wrapped to the width of integer type t (two's complement, as an integer
// cast does); for Bool, v != 0.
int64_t wrapToInt(int64_t v, DType t);

// float → int truncates toward zero (PyTorch's .to(int)); NaN gives 0 and
// values beyond int64 saturate before wrapping to the target width.
// bool → 0/1; anything → bool is `!= 0`. Float targets round (roundToFloat);
// int64 → float is exact up to 2^53, beyond that rounded twice.
Tensor cast(const Tensor& x, DType to);

// i32 [d] = 0 … size−1.
Tensor arange(const Dim& d);

}  // namespace dtl::rt::ref
