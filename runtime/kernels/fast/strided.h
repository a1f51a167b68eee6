// Strided iteration over a named shape, the one mechanism behind broadcasting,
// permutation and reduction in the fast kernels. Size-1 dims are dropped and
// neighbouring dims merged wherever every operand is contiguous across them,
// so "same shape", "scalar operand" and "bias over leading dims" all collapse
// into one or two loops whose innermost run has unit or zero stride, which is
// what the vectorised inner kernels are written for.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"
#include "runtime/exec/backend.h"

namespace dtl::rt::fast {

inline constexpr int kMaxOperands = 3;
using Offsets = std::array<int64_t, kMaxOperands>;

// Row-major strides of `s`.
std::vector<int64_t> rowMajor(const Shape& s);
// For each dim of `space`, the stride of the same-named dim of a row-major
// tensor shaped `part`, or 0 where `part` lacks the name (broadcast).
std::vector<int64_t> stridesIn(const Shape& part, const Shape& space);
int64_t count(const Shape& s);

// An iteration space with one stride per dim per operand (outer → inner).
struct Space {
  int operands = 0;
  std::vector<int64_t> size;
  std::vector<Offsets> stride;
  bool empty = false;  // some dim has size 0: nothing to visit
};

// `strides[k]` are operand k's strides over `shape`'s dims.
Space makeSpace(const Shape& shape, const std::vector<std::vector<int64_t>>& strides);

// Calls run(offsets, n, inner) for every innermost run of the space: n
// elements whose operand k starts at offsets[k] and steps by inner[k].
template <class Run>
void forEachRun(const Space& s, Run&& run) {
  if (s.empty) return;
  Offsets off{}, inner{};
  if (s.size.empty()) {  // a scalar space: one element
    run(off, int64_t{1}, inner);
    return;
  }
  const size_t r = s.size.size();
  inner = s.stride[r - 1];
  std::vector<int64_t> idx(r - 1, 0);
  for (;;) {
    run(off, s.size[r - 1], inner);
    // Odometer over the outer dims, innermost of them fastest.
    size_t d = r - 1;
    for (; d-- > 0;) {
      for (int k = 0; k < s.operands; ++k) off[k] += s.stride[d][k];
      if (++idx[d] < s.size[d]) break;
      for (int k = 0; k < s.operands; ++k) off[k] -= s.stride[d][k] * idx[d];
      idx[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

// dst[dst_shape] = src aligned by name (permuted, broadcast where src lacks a
// name). 4-byte elements: f32 and int32 storage alike.
void alignCopy(const void* src, const Shape& src_shape, void* dst, const Shape& dst_shape);

// dst[dst_shape] = src summed over the names dst lacks (dst's names ⊆ src's).
void sumTo(const float* src, const Shape& src_shape, float* dst, const Shape& dst_shape);

// Copy `index` along dim `name` of the stacked tensor `full` ↔ the copy.
void sliceCopy(const void* full, const Shape& full_shape, const std::string& name, int64_t index, void* copy);
void sliceScatter(const void* copy, const Shape& full_shape, const std::string& name, int64_t index, void* full);
// The stacked tensor from copies first … first+k-1 (`copies`, in order); the
// other copies are zero. Copies already in place (a copy's data at its own
// block of `full`, as the executor arranges for a leading dim) are not moved.
void sliceGather(const std::vector<const TensorView*>& copies, const Shape& full_shape, const std::string& name,
                 int64_t first, void* full);

}  // namespace dtl::rt::fast
