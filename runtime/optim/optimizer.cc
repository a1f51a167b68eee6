// Fast f32 updates for sgd, adam and adamw, following PyTorch 1.13's
// _single_tensor_sgd / _single_tensor_adam / _single_tensor_adamw step by step;
// each step's comment quotes the PyTorch line it reproduces.
#include "runtime/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "runtime/optim/simd.h"
#include "runtime/optim/subnormal.h"

namespace dtl::rt::optim {

namespace {

using detail::withBools;

[[noreturn]] void fail(const std::string& m) { throw std::invalid_argument("optimizer: " + m); }

// ---------------------------------------------------------------- sgd

struct SgdArgs {
  float* p;
  const float* g;
  float* buf;
  int64_t n;
  float wd, momentum, one_minus_dampening, neg_lr;
};

template <bool kWd, bool kMomentum, bool kFirst, bool kNesterov>
DTL_OPTIM_INLINE void sgdElements(const SgdArgs& s, int64_t begin, int64_t end) {
  float* DTL_OPTIM_RESTRICT p = s.p;
  const float* DTL_OPTIM_RESTRICT g = s.g;
  float* DTL_OPTIM_RESTRICT buf = s.buf;
  const float wd = s.wd, mom = s.momentum, omd = s.one_minus_dampening, neg_lr = s.neg_lr;
  for (int64_t i = begin; i < end; ++i) {
    float d = g[i];
    if constexpr (kWd) d = std::fma(p[i], wd, d);  // d_p = d_p.add(param, alpha=weight_decay)
    if constexpr (kMomentum) {
      float b;
      if constexpr (kFirst) {
        b = d;  // buf = torch.clone(d_p)
      } else {
        b = std::fma(d, omd, buf[i] * mom);  // buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
      }
      buf[i] = b;
      if constexpr (kNesterov) {
        d = std::fma(b, mom, d);  // d_p = d_p.add(buf, alpha=momentum)
      } else {
        d = b;  // d_p = buf
      }
    }
    p[i] = std::fma(d, neg_lr, p[i]);  // param.add_(d_p, alpha=-lr)
  }
}

// sgdElements with momentum (not its first step, no Nesterov) over a block
// with a subnormal momentum buffer, without a subnormal operand where
// subnormal.h's rule holds: the buffer's decay on the integer grid, a
// parameter its step cannot move kept. Selects on integer masks, as Adam's.
template <bool kWd>
DTL_OPTIM_INLINE void sgdBlockSubnormal(const SgdArgs& s, float vanish_bound, int64_t begin, int64_t end) {
  using subnormal::bits;
  using subnormal::fromBits;
  float* DTL_OPTIM_RESTRICT p = s.p;
  const float* DTL_OPTIM_RESTRICT g = s.g;
  float* DTL_OPTIM_RESTRICT buf = s.buf;
  for (int64_t i = begin; i < end; ++i) {
    const float pi = p[i];
    float d = g[i];
    if constexpr (kWd) d = std::fma(pi, s.wd, d);
    const uint32_t b_bits = bits(buf[i]);
    const uint32_t decayed = subnormal::decayedMantissa(b_bits, s.momentum);
    const uint32_t x =
        (subnormal::isSubnormal(b_bits) & (d == 0.0f) & subnormal::onGrid(decayed)) ? ~0u : 0u;
    const float b_in = fromBits(b_bits & ~x);  // 0 where the buffer is emulated
    const float b_fp = std::fma(d, s.one_minus_dampening, b_in * s.momentum);
    const float b = fromBits((bits(b_fp) & ~x) | (((b_bits & 0x80000000u) | decayed) & x));
    buf[i] = b;
    const uint32_t same = subnormal::updateVanishes(pi, 1.0f, vanish_bound) & x;
    const float pn = std::fma(fromBits(bits(b) & ~same), s.neg_lr, pi);
    p[i] = fromBits((bits(pn) & ~same) | (bits(pi) & same));
  }
}

template <bool kWd, bool kMomentum, bool kFirst, bool kNesterov>
DTL_OPTIM_INLINE void sgdLoop(const SgdArgs& s) {
  if constexpr (!kMomentum || kFirst || kNesterov) {
    sgdElements<kWd, kMomentum, kFirst, kNesterov>(s, 0, s.n);
  } else {
    const float vanish_bound = subnormal::vanishBound(s.neg_lr);
    // fma(±0, c, y) = y needs a finite c = 1 - dampening (PyTorch does not
    // check dampening): with another, the plain loop, subnormals and all
    const bool emulates = std::isfinite(s.one_minus_dampening);
    for (int64_t b = 0; b < s.n; b += subnormal::kBlock) {
      const int64_t e = std::min(s.n, b + subnormal::kBlock);
      if (emulates && subnormal::anySubnormal(s.buf + b, e - b)) {
        sgdBlockSubnormal<kWd>(s, vanish_bound, b, e);
      } else {
        sgdElements<kWd, kMomentum, kFirst, kNesterov>(s, b, e);
      }
    }
  }
}

template <bool... B>
void sgdBaseline(const SgdArgs& s) {
  sgdLoop<B...>(s);
}
template <bool... B>
DTL_OPTIM_TARGET_FMA void sgdFma(const SgdArgs& s) {
  sgdLoop<B...>(s);
}

// ---------------------------------------------------------------- adam, adamw

struct AdamArgs {
  float* p;
  const float* g;
  float* m;
  float* v;
  int64_t n;
  float wd, decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
};

// One element of Adam/AdamW as PyTorch computes it: param, exp_avg, exp_avg_sq in, the same out.
struct AdamElement {
  float p, m, v;
};

template <bool kL2, bool kDecoupled>
DTL_OPTIM_INLINE AdamElement adamElement(const AdamArgs& s, float pi, float gi, float m, float v) {
  if constexpr (kL2) gi = std::fma(pi, s.wd, gi);                 // grad = grad.add(param, alpha=weight_decay)
  if constexpr (kDecoupled) pi = pi * s.decay;                    // param.mul_(1 - lr * weight_decay)
  const float mi = std::fma(gi, s.one_minus_beta1, m * s.beta1);  // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
  const float vi = std::fma(s.one_minus_beta2 * gi, gi, v * s.beta2);  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
  const float denom = std::sqrt(vi) / s.bc2_sqrt + s.eps;        // (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
  return {pi + s.neg_step_size * mi / denom, mi, vi};            // param.addcdiv_(exp_avg, denom, value=-step_size)
}

// A block of elements, some with a subnormal first moment, handled
// without a subnormal operand (subnormal.h: the rule and why it is exact).
// Each choice is a select on integer masks, so no branch can be speculated
// back into a subnormal operation; two passes because GCC 12 vectorises
// each but not the two as one loop (one pass ran 20 ns an element).
template <bool kL2, bool kDecoupled>
DTL_OPTIM_INLINE void adamBlockSubnormal(const AdamArgs& s, float vanish_bound, int64_t b, int64_t e) {
  using subnormal::bits;
  using subnormal::fromBits;
  float* DTL_OPTIM_RESTRICT p = s.p;
  const float* DTL_OPTIM_RESTRICT g = s.g;
  float* DTL_OPTIM_RESTRICT m = s.m;
  float* DTL_OPTIM_RESTRICT v = s.v;
  float decayed_p[subnormal::kBlock], denoms[subnormal::kBlock];
  uint32_t exact[subnormal::kBlock];
  for (int64_t i = b; i < e; ++i) {  // the moments, and what the parameter's step needs
    float gi = g[i];
    float pi = p[i];
    if constexpr (kL2) gi = std::fma(pi, s.wd, gi);
    if constexpr (kDecoupled) pi = pi * s.decay;
    const uint32_t m_bits = bits(m[i]);
    const uint32_t decayed = subnormal::decayedMantissa(m_bits, s.beta1);
    const uint32_t x =
        (subnormal::isSubnormal(m_bits) & (gi == 0.0f) & subnormal::onGrid(decayed)) ? ~0u : 0u;
    const float m_in = fromBits(m_bits & ~x);  // 0 where the moment is emulated
    const float mi_fp = std::fma(gi, s.one_minus_beta1, m_in * s.beta1);
    const float vi = std::fma(s.one_minus_beta2 * gi, gi, v[i] * s.beta2);
    m[i] = fromBits((bits(mi_fp) & ~x) | (((m_bits & 0x80000000u) | decayed) & x));
    v[i] = vi;
    decayed_p[i - b] = pi;
    denoms[i - b] = std::sqrt(vi) / s.bc2_sqrt + s.eps;
    exact[i - b] = x;
  }
  for (int64_t i = b; i < e; ++i) {  // the parameter
    const float pi = decayed_p[i - b], denom = denoms[i - b];
    const uint32_t same = subnormal::updateVanishes(pi, denom, vanish_bound) & exact[i - b];
    const float mi_step = fromBits(bits(m[i]) & ~same);  // 0 where the step cannot move p
    const float pn = pi + s.neg_step_size * mi_step / denom;
    p[i] = fromBits((bits(pn) & ~same) | (bits(pi) & same));
  }
}

// Blocks whose first moments are all normal (or zero) run the plain loop;
// a block with a subnormal one runs adamBlockSubnormal. Both give PyTorch's
// bits; the second only avoids x86's ~150-cycle microcode assist per
// subnormal operand (the Fashion sample late in training: 3% of its
// moments, in 63% of the blocks).
template <bool kL2, bool kDecoupled>
DTL_OPTIM_INLINE void adamLoop(const AdamArgs& s) {
  float* DTL_OPTIM_RESTRICT p = s.p;
  const float* DTL_OPTIM_RESTRICT g = s.g;
  float* DTL_OPTIM_RESTRICT m = s.m;
  float* DTL_OPTIM_RESTRICT v = s.v;
  const float vanish_bound = subnormal::vanishBound(s.neg_step_size);
  for (int64_t b = 0; b < s.n; b += subnormal::kBlock) {
    const int64_t e = std::min(s.n, b + subnormal::kBlock);
    if (subnormal::anySubnormal(m + b, e - b)) {
      adamBlockSubnormal<kL2, kDecoupled>(s, vanish_bound, b, e);
      continue;
    }
    for (int64_t i = b; i < e; ++i) {
      const AdamElement r = adamElement<kL2, kDecoupled>(s, p[i], g[i], m[i], v[i]);
      p[i] = r.p;
      m[i] = r.m;
      v[i] = r.v;
    }
  }
}

template <bool... B>
void adamBaseline(const AdamArgs& s) {
  adamLoop<B...>(s);
}
template <bool... B>
DTL_OPTIM_TARGET_FMA void adamFma(const AdamArgs& s) {
  adamLoop<B...>(s);
}

}  // namespace

std::vector<std::string> stateNames(const OptimizerConfig& c) {
  if (c.name == "sgd") {
    if (c.momentum != 0) return {"momentum_buffer"};
    return {};
  }
  return {"exp_avg", "exp_avg_sq"};
}

Optimizer::Optimizer(OptimizerConfig c) : config_(std::move(c)) {
  const OptimizerConfig& k = config_;
  const bool sgd = k.name == "sgd";
  if (!sgd && k.name != "adam" && k.name != "adamw") fail("unknown optimizer '" + k.name + "'");
  // PyTorch's own constructor checks (NaN fails them too).
  if (!(k.lr >= 0)) fail("Invalid learning rate: " + std::to_string(k.lr));
  if (!(k.weight_decay >= 0)) fail("Invalid weight_decay value: " + std::to_string(k.weight_decay));
  if (sgd) {
    if (!(k.momentum >= 0)) fail("Invalid momentum value: " + std::to_string(k.momentum));
    if (k.nesterov && (k.momentum <= 0 || k.dampening != 0))
      fail("Nesterov momentum requires a momentum and zero dampening");
  } else {
    if (!(k.eps >= 0)) fail("Invalid epsilon value: " + std::to_string(k.eps));
    if (!(k.beta1 >= 0 && k.beta1 < 1)) fail("Invalid beta parameter at index 0: " + std::to_string(k.beta1));
    if (!(k.beta2 >= 0 && k.beta2 < 1)) fail("Invalid beta parameter at index 1: " + std::to_string(k.beta2));
  }
}

void Optimizer::update(float* param, const float* grad, int64_t n, ParamState& state, int64_t step,
                       double lr) const {
  if (n < 0) fail("negative tensor size");
  const optim_step::Scalars s = scalars(step, lr);  // first: a bad step leaves the state as it was
  const bool first = prepareState(state, n);
  runLoop(variant(first), s, {param, grad, state.a.data(), state.b.data(), n});
}

bool Optimizer::prepareState(ParamState& state, int64_t n) const {
  const OptimizerConfig& k = config_;
  if (n < 0) fail("negative tensor size");
  if (k.name == "sgd") {
    if (k.momentum == 0) return false;
    if (state.a.empty()) {  // PyTorch: momentum_buffer is None
      state.a.resize(static_cast<size_t>(n));
      return true;
    }
    if (static_cast<int64_t>(state.a.size()) != n)
      fail("momentum_buffer has " + std::to_string(state.a.size()) + " elements, tensor has " + std::to_string(n));
    return false;
  }
  if (state.a.empty() && state.b.empty()) {
    state.a.assign(static_cast<size_t>(n), 0.0f);  // exp_avg = zeros_like(p)
    state.b.assign(static_cast<size_t>(n), 0.0f);  // exp_avg_sq = zeros_like(p)
  } else if (static_cast<int64_t>(state.a.size()) != n || static_cast<int64_t>(state.b.size()) != n) {
    fail("adam state has " + std::to_string(state.a.size()) + "/" + std::to_string(state.b.size()) +
         " elements, tensor has " + std::to_string(n));
  }
  return false;
}

optim_step::Variant Optimizer::variant(bool first) const {
  const OptimizerConfig& k = config_;
  optim_step::Variant v;
  if (k.name == "sgd") {
    v.weight_decay = k.weight_decay != 0;
    v.momentum = k.momentum != 0;
    v.first = v.momentum && first;
    v.nesterov = v.momentum && k.nesterov;
    return v;
  }
  v.rule = optim_step::Variant::Rule::Adam;
  v.decoupled = k.name == "adamw";
  v.l2 = !v.decoupled && k.weight_decay != 0;
  return v;
}

optim_step::Scalars Optimizer::scalars(int64_t step, double lr) const {
  const OptimizerConfig& k = config_;
  optim_step::Scalars s;
  if (k.name == "sgd") {
    s.v[optim_step::kSgdWeightDecay] = static_cast<float>(k.weight_decay);
    s.v[optim_step::kSgdMomentum] = static_cast<float>(k.momentum);
    s.v[optim_step::kSgdOneMinusDampening] = static_cast<float>(1 - k.dampening);
    s.v[optim_step::kSgdNegLr] = static_cast<float>(-lr);
    return s;
  }
  if (step < 1) fail("step counts from 1, got " + std::to_string(step));
  // Python floats, as PyTorch computes them (step is a float there: step_t.item()).
  const double s_d = static_cast<double>(step);
  const double bias_correction1 = 1 - std::pow(k.beta1, s_d);
  const double bias_correction2 = 1 - std::pow(k.beta2, s_d);
  const double step_size = lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  s.v[optim_step::kAdamWeightDecay] = static_cast<float>(k.weight_decay);
  s.v[optim_step::kAdamDecay] = static_cast<float>(1 - lr * k.weight_decay);
  s.v[optim_step::kAdamBeta1] = static_cast<float>(k.beta1);
  s.v[optim_step::kAdamOneMinusBeta1] = static_cast<float>(1 - k.beta1);
  s.v[optim_step::kAdamBeta2] = static_cast<float>(k.beta2);
  s.v[optim_step::kAdamOneMinusBeta2] = static_cast<float>(1 - k.beta2);
  s.v[optim_step::kAdamBiasCorrection2Sqrt] = static_cast<float>(bias_correction2_sqrt);
  s.v[optim_step::kAdamEps] = static_cast<float>(k.eps);
  s.v[optim_step::kAdamNegStepSize] = static_cast<float>(-step_size);
  return s;
}

void Optimizer::runLoop(const optim_step::Variant& v, const optim_step::Scalars& sc, const optim_step::Chunk& c) {
  const bool fma_build = detail::useFmaBuild();
  const float* x = sc.v;
  if (v.rule == optim_step::Variant::Rule::Sgd) {
    SgdArgs s{c.param, c.grad, c.a, c.n, x[optim_step::kSgdWeightDecay], x[optim_step::kSgdMomentum],
              x[optim_step::kSgdOneMinusDampening], x[optim_step::kSgdNegLr]};
    withBools(
        [&]<bool W, bool M, bool F, bool N>() {
          if (fma_build) {
            sgdFma<W, M, F, N>(s);
          } else {
            sgdBaseline<W, M, F, N>(s);
          }
        },
        v.weight_decay, v.momentum, v.first, v.nesterov);
    return;
  }
  AdamArgs s{c.param,
             c.grad,
             c.a,
             c.b,
             c.n,
             x[optim_step::kAdamWeightDecay],
             x[optim_step::kAdamDecay],
             x[optim_step::kAdamBeta1],
             x[optim_step::kAdamOneMinusBeta1],
             x[optim_step::kAdamBeta2],
             x[optim_step::kAdamOneMinusBeta2],
             x[optim_step::kAdamBiasCorrection2Sqrt],
             x[optim_step::kAdamEps],
             x[optim_step::kAdamNegStepSize]};
  withBools(
      [&]<bool L2, bool D>() {
        if (fma_build) {
          adamFma<L2, D>(s);
        } else {
          adamBaseline<L2, D>(s);
        }
      },
      v.l2, v.decoupled);
}

}  // namespace dtl::rt::optim
