// dropout with a counter-based mask: whether element k is kept depends only on
// (seed, k, p), so forward, backward and any fast kernel agree without
// storing the mask.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kernels/reference/tensor.h"

namespace dtl::rt::ref {

// splitmix64's finaliser (Steele, Lea, Flood 2014), the mixing step used here.
uint64_t splitmix64(uint64_t z);

// The mask bit of flat element `index`: u = top 53 bits of
// splitmix64(splitmix64(seed) + index) as a double in [0, 1); kept iff u ≥ p.
bool dropoutKeep(uint64_t seed, uint64_t index, double p);

// Identity when !training; otherwise x · mask/(1 − p): kept elements scaled by
// 1/(1 − p), the rest multiplied by 0 (so NaN and ±inf give NaN, as torch's
// dropout). p in [0, 1).
// Element k's mask bit is that of flat element first + k (a rank's block of
// a larger tensor draws the bits one process would).
Tensor dropout(const Tensor& x, double p, uint64_t seed, bool training, uint64_t first = 0);
// The same mask and scale applied to dy.
Tensor dropoutBackward(const Tensor& dy, double p, uint64_t seed, bool training, uint64_t first = 0);

// A block of a larger tensor: `block` = (start, global size) per dim of
// `local`. Calls run(local index, global index, n) for each run of
// elements contiguous in both (a row of the last dim), so a mask drawn by
// global index is the one one process draws.
template <typename Run>
void forEachGlobalRun(const Shape& local, const std::vector<int64_t>& block, Run run) {
  const size_t rank = local.dims.size();
  if (rank == 0 || block.size() != 2 * rank) return;
  const int64_t row = local.dims[rank - 1].size;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= local.dims[d].size;
  std::vector<int64_t> at(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t global = 0;
    for (size_t d = 0; d < rank; ++d) global = global * block[2 * d + 1] + block[2 * d] + at[d];
    run(r * row, global, row);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++at[d] < local.dims[d].size) break;
      at[d] = 0;
    }
  }
}

// dropout / its backward of such a block.
Tensor dropoutBlock(const Tensor& x, double p, uint64_t seed, bool training, const std::vector<int64_t>& block);

}  // namespace dtl::rt::ref
