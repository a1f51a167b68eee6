// See shm_reduce.h.
#include "runtime/comm/shm_reduce.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DTL_COMM_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DTL_COMM_CLONES
#endif

namespace dtl::rt::comm {
namespace {

constexpr size_t kBlock = 2048;  // floats: 8 KiB, so the partial sums stay in L1

DTL_COMM_CLONES void add(float* o, const float* a, const float* b, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
}

DTL_COMM_CLONES void addTwice(float* o, float* o2, const float* a, const float* b, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    float v = a[i] + b[i];
    o[i] = v;
    o2[i] = v;
  }
}

}  // namespace

// A plain vector loop: glibc's memcpy (rep movsb below the L2 size on this
// AMD Zen 3, a vector loop above) was slower at every size in the
// all-reduce, measured side by side. GCC would turn the loop back into a
// memcpy call without the attribute.
DTL_COMM_CLONES __attribute__((optimize("no-tree-loop-distribute-patterns", "unroll-loops"))) void copyFloats(
    float* __restrict__ dst, const float* __restrict__ src, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}

void reduceSum(float* out, float* out2, const float* own, const float* const* srcs, int nsrc, size_t n) {
  for (size_t at = 0; at < n; at += kBlock) {
    size_t len = std::min(kBlock, n - at);
    if (nsrc == 0) {
      if (out != own) std::memmove(out + at, own + at, len * sizeof(float));
      if (out2) std::memcpy(out2 + at, own + at, len * sizeof(float));
      continue;
    }
    for (int k = 0; k < nsrc; ++k) {
      const float* a = (k == 0 ? own : out) + at;
      if (k + 1 == nsrc && out2)
        addTwice(out + at, out2 + at, a, srcs[k] + at, len);
      else
        add(out + at, a, srcs[k] + at, len);
    }
  }
}

}  // namespace dtl::rt::comm
