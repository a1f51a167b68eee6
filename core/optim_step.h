// One optimiser step of one tensor as its per-element loop sees it: which
// variant of the loop runs, the f32 scalars it reads, and the slice of
// memory it updates. Shared by the hand-written loops (runtime/optim,
// `fast`) and the generated multi-tensor kernel (compiler/codegen/
// emit_update.h, `--kernels jit`), so both read the same scalars, computed
// once on the host by Optimizer::scalars, and cannot drift apart.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

namespace dtl::optim_step {

// The loop's options, resolved before the loop (each is a distinct kernel).
struct Variant {
  enum class Rule : uint8_t { Sgd, Adam };
  Rule rule = Rule::Sgd;
  // sgd
  bool weight_decay = false;  // d_p = d_p.add(param, alpha=weight_decay)
  bool momentum = false;
  bool first = false;     // the momentum buffer starts as a copy of d_p (PyTorch's lazy init)
  bool nesterov = false;
  // adam, adamw
  bool l2 = false;         // adam's weight decay: grad = grad.add(param, alpha=weight_decay)
  bool decoupled = false;  // adamw: param.mul_(1 - lr * weight_decay)

  auto key() const { return std::tie(rule, weight_decay, momentum, first, nesterov, l2, decoupled); }
  bool operator==(const Variant& o) const { return key() == o.key(); }
  bool operator<(const Variant& o) const { return key() < o.key(); }

  // "sgd", "sgd_wd_momentum_first_nesterov", "adam_l2", "adamw", …: the kernel's name.
  std::string name() const {
    if (rule == Rule::Adam) return decoupled ? "adamw" : l2 ? "adam_l2" : "adam";
    std::string s = "sgd";
    if (weight_decay) s += "_wd";
    if (momentum) s += "_momentum";
    if (first) s += "_first";
    if (nesterov) s += "_nesterov";
    return s;
  }
};

// The scalars' places in Scalars::v, by rule.
enum SgdScalar : int { kSgdWeightDecay, kSgdMomentum, kSgdOneMinusDampening, kSgdNegLr, kSgdScalars };
enum AdamScalar : int {
  kAdamWeightDecay,
  kAdamDecay,  // 1 - lr * weight_decay (adamw)
  kAdamBeta1,
  kAdamOneMinusBeta1,
  kAdamBeta2,
  kAdamOneMinusBeta2,
  kAdamBiasCorrection2Sqrt,
  kAdamEps,
  kAdamNegStepSize,  // -lr / bias_correction1
  kAdamScalars
};
inline constexpr int kMaxScalars = 9;
static_assert(kSgdScalars <= kMaxScalars && kAdamScalars <= kMaxScalars);

struct Scalars {
  float v[kMaxScalars] = {};
};

// One tensor (or a slice of one): n elements of param, grad and the state
// vectors a, b (null where the variant has none). The generated kernel reads
// a table of these with exactly this layout (emit_update.cc).
struct Chunk {
  float* param = nullptr;
  const float* grad = nullptr;
  float* a = nullptr;  // sgd: momentum_buffer; adam: exp_avg
  float* b = nullptr;  // adam: exp_avg_sq
  int64_t n = 0;
};
static_assert(sizeof(Chunk) == 40, "emit_update.cc's { ptr, ptr, ptr, ptr, i64 }");

}  // namespace dtl::optim_step
