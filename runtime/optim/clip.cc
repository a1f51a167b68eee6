// clip.h: PyTorch's 2-norm reduction order and clip_grad_norm_ arithmetic.
#include "runtime/optim/clip.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/optim/simd.h"

namespace dtl::rt::optim {

namespace {

DTL_OPTIM_INLINE float normTwoLoop(const float* DTL_OPTIM_RESTRICT x, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t d = 0;
  const int64_t main = n - n % 8;
  for (; d < main; d += 8) {
    for (int j = 0; j < 8; ++j) acc[j] = std::fma(x[d + j], x[d + j], acc[j]);  // acc_vec += v * v
  }
  float s = acc[0];
  for (int j = 1; j < 8; ++j) s = s + acc[j];
  if (n - d >= 4) {  // GCC's 4-wide vectorised epilogue: squares rounded, added in order
    for (int j = 0; j < 4; ++j) s = s + x[d + j] * x[d + j];
    d += 4;
  }
  for (; d < n; ++d) s = std::fma(x[d], x[d], s);  // the scalar tail, contracted
  return std::sqrt(s);
}

float normTwoBaseline(const float* x, int64_t n) { return normTwoLoop(x, n); }
DTL_OPTIM_TARGET_FMA float normTwoFma(const float* x, int64_t n) { return normTwoLoop(x, n); }

void scaleBaseline(float* DTL_OPTIM_RESTRICT g, int64_t n, float c) {
  for (int64_t i = 0; i < n; ++i) g[i] = g[i] * c;
}
DTL_OPTIM_TARGET_FMA void scaleFma(float* DTL_OPTIM_RESTRICT g, int64_t n, float c) {
  for (int64_t i = 0; i < n; ++i) g[i] = g[i] * c;
}

// The largest exponent field in x[0, n), over 8 independent lanes (so the
// compiler keeps them in one vector register).
DTL_OPTIM_INLINE uint32_t maxExponentLoop(const float* DTL_OPTIM_RESTRICT x, int64_t n) {
  uint32_t lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      uint32_t bits;
      std::memcpy(&bits, x + i + j, 4);
      lane[j] = std::max(lane[j], bits & 0x7f800000u);
    }
  }
  uint32_t worst = 0;
  for (int j = 0; j < 8; ++j) worst = std::max(worst, lane[j]);
  for (; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, 4);
    worst = std::max(worst, bits & 0x7f800000u);
  }
  return worst;
}

uint32_t maxExponentBaseline(const float* x, int64_t n) { return maxExponentLoop(x, n); }
DTL_OPTIM_TARGET_FMA uint32_t maxExponentFma(const float* x, int64_t n) { return maxExponentLoop(x, n); }

}  // namespace

bool allFinite(const float* x, int64_t n) {
  if (n <= 0) return true;
  const uint32_t worst = detail::useFmaBuild() ? maxExponentFma(x, n) : maxExponentBaseline(x, n);
  return worst != 0x7f800000u;
}

float normTwo(const float* x, int64_t n) {
  if (n <= 0) return 0.0f;
  return detail::useFmaBuild() ? normTwoFma(x, n) : normTwoBaseline(x, n);
}

double clipGradNorm(const std::vector<std::pair<float*, int64_t>>& grads, double max_norm) {
  if (grads.empty()) return 0.0;  // torch.tensor(0.)
  std::vector<float> norms;
  norms.reserve(grads.size());
  for (const auto& [g, n] : grads) norms.push_back(normTwo(g, n));
  return clipGradNormFrom(grads, norms, max_norm);
}

double clipGradNormFrom(const std::vector<std::pair<float*, int64_t>>& grads, const std::vector<float>& norms,
                        double max_norm) {
  if (grads.empty()) return 0.0;
  const float total = normTwo(norms.data(), static_cast<int64_t>(norms.size()));
  // clip_coef = max_norm / (total_norm + 1e-6): Tensor.__rtruediv__ is
  // reciprocal() * other, all f32.
  const float denom = total + static_cast<float>(1e-6);
  float coef = (1.0f / denom) * static_cast<float>(max_norm);
  if (coef > 1.0f) coef = 1.0f;  // torch.clamp(clip_coef, max=1.0); NaN passes through
  if (coef != 1.0f) {
    const bool fma_build = detail::useFmaBuild();
    for (const auto& [g, n] : grads) {
      if (fma_build) {
        scaleFma(g, n, coef);
      } else {
        scaleBaseline(g, n, coef);
      }
    }
  }
  return static_cast<double>(total);
}

}  // namespace dtl::rt::optim
