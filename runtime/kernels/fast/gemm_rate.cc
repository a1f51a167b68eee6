// The GEMM probe: a warm-up product, then 512³ products until ~50 ms have
// passed (at least two), keeping the fastest. The best, not the mean: a
// busy machine slows some products, and MFU is against what the cores can do.
#include "runtime/kernels/fast/gemm_rate.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/kernels/fast/gemm.h"

namespace dtl::rt::fast {

double measuredGemmRate(int threads) {
  static std::mutex mu;
  static std::map<int, double> cache;
  std::lock_guard<std::mutex> hold(mu);
  if (auto it = cache.find(threads); it != cache.end()) return it->second;
  constexpr int64_t n = 512;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  setGemmThreads(threads);
  using Clock = std::chrono::steady_clock;
  double best = 0;
  const Clock::time_point begin = Clock::now();
  for (int i = 0; i < 1000; ++i) {
    const Clock::time_point t0 = Clock::now();
    if (!sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n, nullptr)) return cache[threads] = 0;
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i > 0 && s > 0) best = std::max(best, 2.0 * n * n * n / s);  // the first warms up
    if (i >= 2 && std::chrono::duration<double>(Clock::now() - begin).count() > 0.05) break;
  }
  return cache[threads] = best;
}

}  // namespace dtl::rt::fast
