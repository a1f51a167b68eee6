// reference.h: the optimiser rules of optimizer.h, in plain double.
#include "runtime/optim/reference.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace dtl::rt::optim::ref {

void update(const OptimizerConfig& c, double* p, const double* g, int64_t n, RefState& st, int64_t step,
            double lr) {
  const Optimizer validate(c);  // same acceptance rules
  (void)validate;
  const size_t un = static_cast<size_t>(n);
  if (c.name == "sgd") {
    const bool momentum = c.momentum != 0;
    const bool first = momentum && st.a.empty();
    if (first) st.a.resize(un);
    if (momentum && st.a.size() != un) throw std::invalid_argument("reference: momentum_buffer size");
    for (size_t i = 0; i < un; ++i) {
      double d = g[i];
      if (c.weight_decay != 0) d += c.weight_decay * p[i];
      if (momentum) {
        const double b = first ? d : c.momentum * st.a[i] + (1 - c.dampening) * d;
        st.a[i] = b;
        d = c.nesterov ? d + c.momentum * b : b;
      }
      p[i] -= lr * d;
    }
    return;
  }
  if (step < 1) throw std::invalid_argument("reference: step counts from 1");
  if (st.a.empty() && st.b.empty()) {
    st.a.assign(un, 0.0);
    st.b.assign(un, 0.0);
  }
  if (st.a.size() != un || st.b.size() != un) throw std::invalid_argument("reference: adam state size");
  const bool decoupled = c.name == "adamw";
  const double bc1 = 1 - std::pow(c.beta1, static_cast<double>(step));
  const double bc2 = 1 - std::pow(c.beta2, static_cast<double>(step));
  for (size_t i = 0; i < un; ++i) {
    double gi = g[i];
    if (!decoupled && c.weight_decay != 0) gi += c.weight_decay * p[i];
    if (decoupled) p[i] *= 1 - lr * c.weight_decay;
    st.a[i] = c.beta1 * st.a[i] + (1 - c.beta1) * gi;
    st.b[i] = c.beta2 * st.b[i] + (1 - c.beta2) * gi * gi;
    const double m_hat = st.a[i] / bc1;
    const double denom = std::sqrt(st.b[i]) / std::sqrt(bc2) + c.eps;
    p[i] -= lr * m_hat / denom;
  }
}

double clipGradNorm(const std::vector<std::pair<double*, int64_t>>& grads, double max_norm) {
  double sum = 0;
  for (const auto& [g, n] : grads)
    for (int64_t i = 0; i < n; ++i) sum += g[i] * g[i];
  const double total = std::sqrt(sum);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1)
    for (const auto& [g, n] : grads)
      for (int64_t i = 0; i < n; ++i) g[i] *= coef;
  return total;
}

}  // namespace dtl::rt::optim::ref
