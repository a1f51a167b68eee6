#include "tools/dtlc/sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace dtl::cli {

double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

int64_t sampleToken(const float* logits, int64_t n, const SampleOptions& o, std::mt19937_64& rng) {
  int64_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(logits[i])) return -1;
    if (logits[i] > logits[best]) best = i;
  }
  if (o.temperature == 0 || n == 1) return best;
  // The k-th largest logit: classes below it are out (nanoGPT's top-k).
  float floor = -INFINITY;
  if (o.top_k > 0 && o.top_k < n) {
    std::vector<float> sorted(logits, logits + n);
    std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(), std::greater<float>());
    floor = sorted[static_cast<size_t>(o.top_k - 1)];
  }
  // softmax((l - max) / T) over the kept classes, in double.
  std::vector<double> w(static_cast<size_t>(n), 0.0);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (logits[i] < floor) continue;
    w[static_cast<size_t>(i)] = std::exp((static_cast<double>(logits[i]) - logits[best]) / o.temperature);
    total += w[static_cast<size_t>(i)];
  }
  const double u = uniform01(rng) * total;
  double cumulative = 0;
  int64_t last = best;
  for (int64_t i = 0; i < n; ++i) {
    if (w[static_cast<size_t>(i)] == 0) continue;
    cumulative += w[static_cast<size_t>(i)];
    last = i;
    if (u < cumulative) return i;
  }
  return last;  // rounding left u at the very top
}

}  // namespace dtl::cli
