// Internal to the fast kernels: a tensor seen as rows [outer, n] with a set of
// reduced names last, used in place when already so laid out, otherwise
// through a permuted copy in scratch.
#pragma once

#include <vector>

#include "runtime/kernels/fast/kernels.h"

namespace dtl::rt::fast {

struct RowLayout {
  Shape rows_shape;    // x's kept dims (x's order), then the reduced ones (x's order)
  bool direct = true;  // x's storage already is rows_shape (size-1 dims aside)
  int64_t rows = 0, n = 1;
};

RowLayout rowLayout(const Shape& x, const Names& over);
// t's data in row layout: t itself, or a permuted copy in buf.
const float* inRows(const TensorView& t, const RowLayout& l, std::vector<float>& buf);
// Where to write rows for t: t itself, or buf (then call finishRows).
float* outRows(TensorView& t, const RowLayout& l, std::vector<float>& buf);
void finishRows(TensorView& t, const RowLayout& l, const float* rows);

}  // namespace dtl::rt::fast
