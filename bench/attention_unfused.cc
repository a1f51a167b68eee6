// Attention as the fast backend ran it before the fused kernels (commit
// f56cf35, runtime/kernels/fast/attention.cc), kept for bench/attention_bench.cc
// only: per (leading index, head), P [seq_q, seq_k] materialised in scratch
// by oneDNN GEMMs on strided views, single-threaded outside them; the
// backward was three nodes (which = 0|1|2: dq, dk, dv) each recomputing P.
#include "bench/attention_unfused.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/kernels/fast/gemm.h"
#include "runtime/kernels/fast/simd.h"
#include "runtime/kernels/fast/vmath.h"

namespace dtl::rt::fast {

namespace {

struct Heads {
  int64_t lead = 1, sq = 0, sk = 0, heads = 0, dim = 0;
  int64_t ld() const { return heads * dim; }  // row stride of one head's [seq, dim] view
  int64_t qOffset(int64_t b, int64_t h) const { return b * sq * ld() + h * dim; }
  int64_t kOffset(int64_t b, int64_t h) const { return b * sk * ld() + h * dim; }
};

Heads headsOf(const Shape& q, const Shape& k) {
  Heads l;
  const size_t r = q.rank();
  for (size_t d = 0; d + 3 < r; ++d) l.lead *= q.dims[d].size;
  l.sq = q.dims[r - 3].size;
  l.sk = k.dims[r - 3].size;
  l.heads = q.dims[r - 2].size;
  l.dim = q.dims[r - 1].size;
  return l;
}

// Row i of P: softmax over the visible keys j < min(i + 1, sk) (all when not
// causal); masked entries exactly 0.
DTL_FAST_CLONES void maskedSoftmaxRows(float* DTL_RESTRICT p, int64_t sq, int64_t sk, bool causal) {
  for (int64_t i = 0; i < sq; ++i) {
    float* row = p + i * sk;
    const int64_t visible = causal ? std::min(i + 1, sk) : sk;
    float m = -INFINITY;
    DTL_SIMD_MAX(m)
    for (int64_t j = 0; j < visible; ++j) m = m > row[j] ? m : row[j];
    float total = 0;
    DTL_SIMD_SUM(total)
    for (int64_t j = 0; j < visible; ++j) total += row[j] = std::exp(row[j] - m);
    const float inv = 1.0f / total;
    DTL_SIMD for (int64_t j = 0; j < visible; ++j) row[j] *= inv;
    for (int64_t j = visible; j < sk; ++j) row[j] = 0.0f;
  }
}

// dP becomes dS = P ⊙ (dP − Σ_j P·dP) · scale, row by row; masked entries exactly
// 0 (as the reference and torch, even where P·(dP − row) would be 0·inf = NaN).
DTL_FAST_CLONES void softmaxBackRows(float* DTL_RESTRICT dp, const float* DTL_RESTRICT p, int64_t sq, int64_t sk,
                                     float scale, bool causal) {
  for (int64_t i = 0; i < sq; ++i) {
    float* d = dp + i * sk;
    const float* pr = p + i * sk;
    const int64_t visible = causal ? std::min(i + 1, sk) : sk;
    float row = 0;
    DTL_SIMD_SUM(row)
    for (int64_t j = 0; j < sk; ++j) row += pr[j] * d[j];
    DTL_SIMD for (int64_t j = 0; j < visible; ++j) d[j] = pr[j] * (d[j] - row) * scale;
    for (int64_t j = visible; j < sk; ++j) d[j] = 0.0f;
  }
}

// P for head (b, h) into p [sq, sk].
bool probabilities(const Heads& l, const float* q, const float* k, bool causal, int64_t b, int64_t h, float* p,
                   std::string* err) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(l.dim));
  if (!sgemm('N', 'T', l.sq, l.sk, l.dim, scale, q + l.qOffset(b, h), l.ld(), k + l.kOffset(b, h), l.ld(), 0.0f, p,
             l.sk, err))
    return false;
  maskedSoftmaxRows(p, l.sq, l.sk, causal);
  return true;
}

}  // namespace

std::string attentionUnfused(const TensorView& q, const TensorView& k, const TensorView& v, bool causal, TensorView& y,
                      Scratch& s) {
  const Heads l = headsOf(q.shape, k.shape);
  if (l.sq == 0 || l.sk == 0 || l.dim == 0) {  // no key to attend to: 0, as the reference
    std::memset(y.f(), 0, static_cast<size_t>(y.elements) * sizeof(float));
    return "";
  }
  s.c.resize(static_cast<size_t>(l.sq * l.sk));
  std::string err;
  for (int64_t b = 0; b < l.lead; ++b)
    for (int64_t h = 0; h < l.heads; ++h) {
      if (!probabilities(l, q.f(), k.f(), causal, b, h, s.c.data(), &err)) return err;
      if (!sgemm('N', 'N', l.sq, l.dim, l.sk, 1.0f, s.c.data(), l.sk, v.f() + l.kOffset(b, h), l.ld(), 0.0f,
                 y.f() + l.qOffset(b, h), l.ld(), &err))
        return err;
    }
  return "";
}

std::string attentionGradUnfused(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& dy,
                          bool causal, int which, TensorView& dx, Scratch& s) {
  const Heads l = headsOf(q.shape, k.shape);
  if (l.sq == 0 || l.sk == 0 || l.dim == 0) {
    std::memset(dx.f(), 0, static_cast<size_t>(dx.elements) * sizeof(float));
    return "";
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(l.dim));
  s.c.resize(static_cast<size_t>(l.sq * l.sk));
  s.d.resize(static_cast<size_t>(l.sq * l.sk));
  float *p = s.c.data(), *dp = s.d.data();
  const int64_t ld = l.ld();
  std::string err;
  for (int64_t b = 0; b < l.lead; ++b)
    for (int64_t h = 0; h < l.heads; ++h) {
      const int64_t qo = l.qOffset(b, h), ko = l.kOffset(b, h);
      if (!probabilities(l, q.f(), k.f(), causal, b, h, p, &err)) return err;
      bool ok;
      if (which == 2) {  // dv = Pᵀ·dy
        ok = sgemm('T', 'N', l.sk, l.dim, l.sq, 1.0f, p, l.sk, dy.f() + qo, ld, 0.0f, dx.f() + ko, ld, &err);
      } else {
        ok = sgemm('N', 'T', l.sq, l.sk, l.dim, 1.0f, dy.f() + qo, ld, v.f() + ko, ld, 0.0f, dp, l.sk, &err);
        if (ok) softmaxBackRows(dp, p, l.sq, l.sk, scale, causal);
        if (ok && which == 0)  // dq = dS·k
          ok = sgemm('N', 'N', l.sq, l.dim, l.sk, 1.0f, dp, l.sk, k.f() + ko, ld, 0.0f, dx.f() + qo, ld, &err);
        else if (ok)  // dk = dSᵀ·q
          ok = sgemm('T', 'N', l.sk, l.dim, l.sq, 1.0f, dp, l.sk, q.f() + qo, ld, 0.0f, dx.f() + ko, ld, &err);
      }
      if (!ok) return err;
    }
  return "";
}

}  // namespace dtl::rt::fast
