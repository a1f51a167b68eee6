// The float sum and copy behind the shared-memory collectives: memory-bandwidth bound,
// so it walks the inputs once in L1-sized blocks and writes each result once
// per destination. Cloned for AVX-512, AVX2 and baseline x86-64.
#pragma once

#include <cstddef>

namespace dtl::rt::comm {

// out[i] = own[i] + Σ_k srcs[k][i] for i < n; the same values also go to
// out2 when it is not null. `out` may be `own`.
void reduceSum(float* out, float* out2, const float* own, const float* const* srcs, int nsrc, size_t n);

// dst[i] = src[i] for i < n (no overlap).
void copyFloats(float* dst, const float* src, size_t n);

}  // namespace dtl::rt::comm
