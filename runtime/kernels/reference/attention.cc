// Attention as explicit loops per (leading index, head), materialising the
// probabilities P [seq_q, seq_k]. Backward, with S the scaled scores:
//   dv = Pᵀ·dy,  dP = dy·vᵀ,  dS = P ⊙ (dP − Σ_j P·dP),  dq = dS·k/√D,  dk = dSᵀ·q/√D
#include "runtime/kernels/reference/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dtl::rt::ref {

namespace {

// Flattened view of [lead, seq, heads, head_dim] tensors.
struct Layout {
  int64_t lead = 1, sq = 0, sk = 0, heads = 0, dim = 0;
  int64_t q(int64_t b, int64_t i, int64_t h, int64_t d) const { return ((b * sq + i) * heads + h) * dim + d; }
  int64_t k(int64_t b, int64_t j, int64_t h, int64_t d) const { return ((b * sk + j) * heads + h) * dim + d; }
};

Layout layoutOf(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Shape &qs = q.shape, &ks = k.shape;
  size_t r = qs.rank();
  bool ok = r >= 3 && ks.rank() == r && k.shape == v.shape && q.floating() && q.dtype == k.dtype && k.dtype == v.dtype;
  for (size_t d = 0; ok && d < r; ++d)
    if (d != r - 3 && !(qs.dims[d] == ks.dims[d])) ok = false;
  DTL_REF_CHECK(ok, "attention of q " + qs.str() + ", k " + ks.str() + ", v " + v.shape.str());
  Layout l;
  for (size_t d = 0; d + 3 < r; ++d) l.lead *= qs.dims[d].size;
  l.sq = qs.dims[r - 3].size;
  l.sk = ks.dims[r - 3].size;
  l.heads = qs.dims[r - 2].size;
  l.dim = qs.dims[r - 1].size;
  return l;
}

// P [sq, sk] for one (b, h); masked entries are exactly 0. `lse` (when given) gets each row's
// log-sum-exp of its visible scores.
std::vector<double> probabilities(const Layout& l, const Tensor& q, const Tensor& k, bool causal, int64_t b,
                                  int64_t h, std::vector<double>* lse = nullptr) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(l.dim));
  std::vector<double> p(l.sq * l.sk, 0.0);
  if (lse) lse->assign(static_cast<size_t>(l.sq), 0.0);
  for (int64_t i = 0; i < l.sq; ++i) {
    int64_t visible = causal ? std::min(i + 1, l.sk) : l.sk;
    double m = -std::numeric_limits<double>::infinity(), total = 0;
    for (int64_t j = 0; j < visible; ++j) {
      double s = 0;
      for (int64_t d = 0; d < l.dim; ++d) s += q.f[l.q(b, i, h, d)] * k.f[l.k(b, j, h, d)];
      p[i * l.sk + j] = s * scale;
      m = std::max(m, s * scale);  // may skip a NaN score; exp(NaN − m) still makes the row NaN
    }
    for (int64_t j = 0; j < visible; ++j) total += p[i * l.sk + j] = std::exp(p[i * l.sk + j] - m);
    for (int64_t j = 0; j < visible; ++j) p[i * l.sk + j] /= total;
    // m = −inf with keys: every score −inf, total NaN (exp(−inf + inf)), so lse NaN.
    if (lse) (*lse)[static_cast<size_t>(i)] = visible == 0 ? -std::numeric_limits<double>::infinity() : m + std::log(total);
  }
  return p;
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  return attentionResults(q, k, v, causal).out;
}

AttentionResults attentionResults(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  Layout l = layoutOf(q, k, v);
  Shape lse_shape = q.shape;
  lse_shape.dims.pop_back();
  AttentionResults r{Tensor::zeros(q.shape, q.dtype), Tensor::zeros(lse_shape, q.dtype)};
  std::vector<double> lse;
  for (int64_t b = 0; b < l.lead; ++b)
    for (int64_t h = 0; h < l.heads; ++h) {
      std::vector<double> p = probabilities(l, q, k, causal, b, h, &lse);
      for (int64_t i = 0; i < l.sq; ++i) {
        r.lse.f[(b * l.sq + i) * l.heads + h] = lse[static_cast<size_t>(i)];
        for (int64_t j = 0; j < l.sk; ++j)
          for (int64_t d = 0; d < l.dim; ++d) r.out.f[l.q(b, i, h, d)] += p[i * l.sk + j] * v.f[l.k(b, j, h, d)];
      }
    }
  return r;
}

AttentionGrads attentionBackward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                 const Tensor& dy) {
  Layout l = layoutOf(q, k, v);
  DTL_REF_CHECK(dy.shape == q.shape, "attention backward dy " + dy.shape.str() + " for " + q.shape.str());
  const double scale = 1.0 / std::sqrt(static_cast<double>(l.dim));
  AttentionGrads g{Tensor::zeros(q.shape, q.dtype), Tensor::zeros(k.shape, k.dtype), Tensor::zeros(v.shape, v.dtype)};
  for (int64_t b = 0; b < l.lead; ++b)
    for (int64_t h = 0; h < l.heads; ++h) {
      std::vector<double> p = probabilities(l, q, k, causal, b, h);
      for (int64_t i = 0; i < l.sq; ++i) {
        std::vector<double> dp(l.sk, 0.0);  // dP[i, :]
        double row = 0;                     // Σ_j P·dP
        for (int64_t j = 0; j < l.sk; ++j) {
          for (int64_t d = 0; d < l.dim; ++d) {
            dp[j] += dy.f[l.q(b, i, h, d)] * v.f[l.k(b, j, h, d)];
            g.dv.f[l.k(b, j, h, d)] += p[i * l.sk + j] * dy.f[l.q(b, i, h, d)];
          }
          row += p[i * l.sk + j] * dp[j];
        }
        // A masked score's gradient is exactly 0 (torch: masked_fill's backward), even
        // where P·(dP − row) is 0·inf = NaN; `row` spans every key and the 0 still
        // multiplies k and q (0·NaN = NaN), as torch's matmuls do.
        const int64_t visible = causal ? std::min(i + 1, l.sk) : l.sk;
        for (int64_t j = 0; j < l.sk; ++j) {
          double ds = j < visible ? p[i * l.sk + j] * (dp[j] - row) * scale : 0.0;
          for (int64_t d = 0; d < l.dim; ++d) {
            g.dq.f[l.q(b, i, h, d)] += ds * k.f[l.k(b, j, h, d)];
            g.dk.f[l.k(b, j, h, d)] += ds * q.f[l.q(b, i, h, d)];
          }
        }
      }
    }
  return g;
}

}  // namespace dtl::rt::ref
