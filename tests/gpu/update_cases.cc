#include "tests/gpu/update_cases.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "runtime/optim/optimizer.h"
#include "tests/support/optimizer_configs.h"

namespace dtl::codegen::testing {
namespace {

using rt::optim::Optimizer;
using rt::optim::OptimizerConfig;
using rt::optim::ParamState;

constexpr int64_t kChunk = 1000;
const std::vector<int64_t> kSizes = {0, 1, 7, 1000, 33, 4097};

using dtl::testing::optimizerValues;

struct Tensor {
  std::vector<float> param, grad;
  ParamState state;
};

std::vector<float> slice(const std::vector<float>& v, int64_t at, int64_t n) {
  if (v.empty()) return {};
  return std::vector<float>(v.begin() + at, v.begin() + at + n);
}

// One step of `opt` over the tensors as the jit runner does it (state
// prepared, one variant per tensor), recorded as one case per variant.
void recordStep(const std::string& name, const Optimizer& opt, int64_t step, double lr, std::vector<Tensor>& tensors,
                std::vector<UpdateCase>* out) {
  const optim_step::Scalars s = opt.scalars(step, lr);
  std::vector<UpdateCase> by_variant;
  for (Tensor& t : tensors) {
    const auto n = static_cast<int64_t>(t.param.size());
    const optim_step::Variant v = opt.variant(opt.prepareState(t.state, n));
    auto c = std::find_if(by_variant.begin(), by_variant.end(), [&](const UpdateCase& u) { return u.variant == v; });
    if (c == by_variant.end()) {
      by_variant.push_back({name + " step " + std::to_string(step) + " " + v.name(), v, s, {}, {}});
      c = by_variant.end() - 1;
    }
    for (int64_t at = 0; at == 0 || at < n; at += kChunk) {
      const int64_t len = std::min(kChunk, n - at);
      UpdateChunk in{slice(t.param, at, len), slice(t.grad, at, len), slice(t.state.a, at, len),
                     slice(t.state.b, at, len)};
      optim_step::Chunk row{t.param.data() + at, t.grad.data() + at, t.state.a.empty() ? nullptr : t.state.a.data() + at,
                            t.state.b.empty() ? nullptr : t.state.b.data() + at, len};
      Optimizer::runLoop(v, s, row);
      c->in.push_back(std::move(in));
      c->want.push_back({slice(t.param, at, len), {}, slice(t.state.a, at, len), slice(t.state.b, at, len)});
    }
  }
  for (UpdateCase& c : by_variant) out->push_back(std::move(c));
}

std::vector<Tensor> model(uint64_t seed, bool specials) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> m;
  for (int64_t n : kSizes) m.push_back({optimizerValues(n, rng, specials), optimizerValues(n, rng, specials), {}});
  return m;
}

// optim_jit_test's subnormal first moments: blocks of tensors whose grad is
// ±0 and whose first moment is a random subnormal.
void subnormalMoments(std::vector<Tensor>& m, const Optimizer& opt, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (Tensor& t : m) {
    const auto n = static_cast<int64_t>(t.param.size());
    opt.prepareState(t.state, n);
    t.state.a = optimizerValues(n, rng, true);
    if (!t.state.b.empty()) t.state.b = optimizerValues(n, rng, false);
    for (int64_t i = 0; i < n; ++i) {
      if ((i / 64) % 3 == 1 || rng() % 4 == 0) continue;
      uint32_t bits = (1 + static_cast<uint32_t>(rng() % 0x7fffff)) | (rng() % 2 ? 0x80000000u : 0u);
      std::memcpy(&t.state.a[static_cast<size_t>(i)], &bits, 4);
      t.grad[static_cast<size_t>(i)] = rng() % 2 ? 0.0f : -0.0f;
      if (!t.state.b.empty()) t.state.b[static_cast<size_t>(i)] = std::fabs(t.state.b[static_cast<size_t>(i)]);
      if (rng() % 8 == 0) t.param[static_cast<size_t>(i)] = rng() % 2 ? 0.0f : 1e-41f;
    }
  }
}

}  // namespace

std::vector<UpdateCase> updateCases() {
  std::vector<UpdateCase> cases;
  uint64_t seed = 1;
  for (const OptimizerConfig& c : dtl::testing::everyOptimizerConfig())
    for (bool specials : {false, true}) {
      Optimizer opt(c);
      std::vector<Tensor> m = model(seed++, specials);
      for (int64_t step = 1; step <= 3; ++step) {
        const double lr = c.lr * (1.0 - 0.1 * static_cast<double>(step));
        recordStep(c.name + (specials ? " specials" : ""), opt, step, lr, m, &cases);
        std::mt19937_64 rng(100 + seed + static_cast<uint64_t>(step));
        for (Tensor& t : m) t.grad = optimizerValues(static_cast<int64_t>(t.grad.size()), rng, specials);
      }
    }
  for (const OptimizerConfig& c : dtl::testing::extremeOptimizerConfigs()) {
    Optimizer opt(c);
    std::vector<Tensor> m = model(seed++, true);
    subnormalMoments(m, opt, seed++);
    for (int64_t step = 2; step <= 3; ++step) recordStep(c.name + " subnormal moments", opt, step, c.lr, m, &cases);
  }
  return cases;
}

}  // namespace dtl::codegen::testing
