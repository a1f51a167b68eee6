// dropout forward and backward are one masking function of the same
// (seed, index) stream; the backward differs only in what it masks.
#include "runtime/kernels/reference/dropout.h"

namespace dtl::rt::ref {

uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool dropoutKeep(uint64_t seed, uint64_t index, double p) {
  double u = static_cast<double>(splitmix64(splitmix64(seed) + index) >> 11) * 0x1.0p-53;
  return u >= p;
}

Tensor dropout(const Tensor& x, double p, uint64_t seed, bool training, uint64_t first) {
  DTL_REF_CHECK(x.floating() && p >= 0 && p < 1, "dropout with p = " + std::to_string(p));
  if (!training) return x;
  Tensor y = x;
  const double scale = 1.0 / (1.0 - p);
  // Multiplied by the mask, as torch does, so a dropped NaN or inf gives NaN.
  for (size_t k = 0; k < y.f.size(); ++k) y.f[k] *= dropoutKeep(seed, first + k, p) ? scale : 0.0;
  return y;
}

Tensor dropoutBackward(const Tensor& dy, double p, uint64_t seed, bool training, uint64_t first) {
  return dropout(dy, p, seed, training, first);
}

Tensor dropoutBlock(const Tensor& x, double p, uint64_t seed, bool training, const std::vector<int64_t>& block) {
  DTL_REF_CHECK(x.floating() && p >= 0 && p < 1, "dropout with p = " + std::to_string(p));
  if (!training) return x;
  Tensor y = x;
  const double scale = 1.0 / (1.0 - p);
  forEachGlobalRun(x.shape, block, [&](int64_t local, int64_t global, int64_t n) {
    for (int64_t k = 0; k < n; ++k)
      y.f[static_cast<size_t>(local + k)] *= dropoutKeep(seed, static_cast<uint64_t>(global + k), p) ? scale : 0.0;
  });
  return y;
}

}  // namespace dtl::rt::ref
