// Scaled dot-product attention, FlashAttention-2 style: per (leading index,
// head) pair, blocks of kBlockQ queries against blocks of kBlockK keys with
// an online softmax, so no [seq_q, seq_k] buffer exists; each thread's
// scratch is a few tiles (O(block² + block·dim), plus seq_q row terms in the
// backward). The forward saves each row's log-sum-exp (lse); the backward
// recomputes a tile's probabilities from it, P = exp(S − lse), and with
// D_i = Σ_d dy_i·out_i (= Σ_j P_ij·dP_ij):
//   dv = Pᵀ·dy,  dP = dy·vᵀ,  dS = P ⊙ (dP − D) / √dim,  dq = dS·k,  dk = dSᵀ·q
// accumulating dk and dv per key block and dq per query row, each in the
// pair's own rows of the outputs.
//
// Hand-written loops rather than generated ones (docs/compiler.md, "Fused
// attention"; the vectorised tile loops are in attention_tiles.cc): the
// online softmax's running max and rescaling, the causal block skipping and
// the non-finite rules below are control flow the elementwise kernel
// generator does not express, and these tiles are small enough that
// vectorised loops over them need no GEMM library (which would also bring
// its own threads inside ours).
//
// Threads: the pairs are shared out over `threads` OpenMP threads; each pair
// is computed by one thread, in one fixed order, with no atomics, so results
// are bitwise the same for any thread count.
//
// Causal: a key block no query of the block sees is skipped. Masked entries
// are exactly 0, as the reference's; but the reference (and torch) still
// multiply them, 0·inf = NaN: a NaN or inf in a pair's q, k, v (or dy) then
// spreads to rows that never see it. A pair holding one is computed without
// skipping, and its backward's D_i = Σ_j P_ij·dP_ij over every key as the
// reference's, so NaN lands where the reference puts it. (Scores that
// overflow from finite inputs are not looked for.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <omp.h>

#include "runtime/kernels/fast/attention_tiles.h"
#include "runtime/kernels/fast/kernels.h"

namespace dtl::rt::fast {

namespace {

using tiles::Band;
using tiles::gemmTile;
using tiles::nonFinite;
using tiles::onlineRow;
using tiles::probabilityRow;
using tiles::rowDots;
using tiles::transposeRows;
using tiles::zeroRows;

constexpr int64_t kBlockQ = 64, kBlockK = 64;
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Heads {
  int64_t lead = 1, sq = 0, sk = 0, heads = 0, dim = 0;
  int64_t ld() const { return heads * dim; }  // row stride of one head's [seq, dim] view
  int64_t qOffset(int64_t b, int64_t h) const { return b * sq * ld() + h * dim; }
  int64_t kOffset(int64_t b, int64_t h) const { return b * sk * ld() + h * dim; }
  int64_t lseOffset(int64_t b, int64_t h) const { return b * sq * heads + h; }  // stride `heads`
  int64_t visible(int64_t i, bool causal) const { return causal ? std::min(i + 1, sk) : sk; }
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

// Rows at least this many floats apart (and not contiguous) are copied into
// dense tiles before the tile products read them — the forward's q and v,
// the backward's k, q and dy: at GPT-2's 12 heads × 64 (3 KiB apart) a
// tile's 64 rows fall into a quarter of L1's sets and evict each other (the
// products stalled on those loads); char GPT's rows (512 bytes apart) stay
// where they are. The products are the same, and so are the bits.
constexpr int64_t kPackStride = 256;

// packRows into `tile`, which is returned.
const float* packed(const float* src, int64_t ld, int64_t rows, int64_t dim, float* tile) {
  tiles::packRows(src, ld, rows, dim, tile);
  return tile;
}

bool packs(const Heads& l) { return l.ld() >= kPackStride && l.ld() != l.dim; }

struct ForwardTiles {
  float *kt, *s, *o, *m, *sum, *qp, *vp;  // qp, vp: q's and v's blocks, dense (kPackStride)
  static int64_t words(int64_t dim) {
    return dim * kBlockK + kBlockQ * kBlockK + kBlockQ * dim + 2 * kBlockQ + kBlockQ * dim + kBlockK * dim;
  }
  ForwardTiles(float* w, int64_t dim)
      : kt(w), s(kt + dim * kBlockK), o(s + kBlockQ * kBlockK), m(o + kBlockQ * dim), sum(m + kBlockQ),
        qp(sum + kBlockQ), vp(qp + kBlockQ * dim) {}
};

void forwardPair(const Heads& l, const float* q, const float* k, const float* v, bool causal, int64_t b, int64_t h,
                 float* y, float* lse, float* work) {
  ForwardTiles t(work, l.dim);
  const int64_t ld = l.ld(), qo = l.qOffset(b, h), ko = l.kOffset(b, h);
  const float scale = 1.0f / std::sqrt(static_cast<float>(l.dim));
  const bool skip = causal && !nonFinite(q + qo, l.sq, l.dim, ld) && !nonFinite(k + ko, l.sk, l.dim, ld) &&
                    !nonFinite(v + ko, l.sk, l.dim, ld);
  const bool pack = packs(l);
  const int64_t lp = pack ? l.dim : ld;  // the row stride the products read q and v at
  for (int64_t q0 = 0; q0 < l.sq; q0 += kBlockQ) {
    const int64_t rows = std::min(kBlockQ, l.sq - q0);
    std::fill(t.m, t.m + rows, -kInf);
    std::fill(t.sum, t.sum + rows, 0.0f);
    std::fill(t.o, t.o + rows * l.dim, 0.0f);
    const float* qb = q + qo + q0 * ld;
    if (pack) qb = packed(qb, ld, rows, l.dim, t.qp);
    const int64_t kend = skip ? l.visible(q0 + rows - 1, true) : l.sk;
    for (int64_t k0 = 0; k0 < kend; k0 += kBlockK) {
      const int64_t cols = std::min(kBlockK, l.sk - k0);
      transposeRows(k + ko + k0 * ld, ld, cols, l.dim, t.kt);
      // With `skip`, a row's masked keys are neither scored nor summed (exact zeros).
      gemmTile(rows, cols, l.dim, qb, lp, t.kt, cols, t.s, cols, scale, false, skip ? Band{.n_hi = q0 - k0} : Band{});
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t vis = std::clamp<int64_t>(l.visible(q0 + i, causal) - k0, 0, cols);
        onlineRow(t.s + i * cols, vis, cols, t.m[i], t.sum[i], t.o + i * l.dim, l.dim);
      }
      const float* vb = v + ko + k0 * ld;
      if (pack) vb = packed(vb, ld, cols, l.dim, t.vp);
      gemmTile(rows, l.dim, cols, t.s, cols, vb, lp, t.o, l.dim, 1.0f, true, skip ? Band{.k_hi = q0 - k0} : Band{});
    }
    for (int64_t i = 0; i < rows; ++i) {
      float* out = y + qo + (q0 + i) * ld;
      for (int64_t d = 0; d < l.dim; ++d) out[d] = t.o[i * l.dim + d] / t.sum[i];
      lse[l.lseOffset(b, h) + (q0 + i) * l.heads] = t.sum[i] == 0.0f ? NAN : t.m[i] + std::log(t.sum[i]);
    }
  }
}

struct BackwardTiles {
  float *kt, *vt, *p, *ds, *kp, *qp, *dyp, *rowterm;  // kp, qp, dyp: k's, q's and dy's blocks, dense (kPackStride)
  static int64_t words(int64_t dim, int64_t sq) {
    return 2 * dim * kBlockK + 2 * kBlockQ * kBlockK + kBlockK * dim + 2 * kBlockQ * dim + sq;
  }
  BackwardTiles(float* w, int64_t dim)
      : kt(w), vt(kt + dim * kBlockK), p(vt + dim * kBlockK), ds(p + kBlockQ * kBlockK), kp(ds + kBlockQ * kBlockK),
        qp(kp + kBlockK * dim), dyp(qp + kBlockQ * dim), rowterm(dyp + kBlockQ * dim) {}
};

// A query block's q and dy rows as the tile products read them: in place
// (row stride ld) or packed (stride dim).
struct QueryRows {
  const float *q, *dy;
  int64_t ld;
};

// The query block [q0, q0 + rows) against the key block whose transposed k
// and v are in t.kt, t.vt: t.p = P, t.ds = dS (masked entries 0). Without
// `d` (D_i still to find), t.ds holds dP.
void probabilityTiles(const Heads& l, const QueryRows& r, const float* lse, bool causal, int64_t b, int64_t h,
                      int64_t q0, int64_t rows, int64_t k0, int64_t cols, BackwardTiles& t, bool d, bool skip) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(l.dim));
  const Band masked = skip ? Band{.n_hi = q0 - k0} : Band{};  // masked scores are not read
  gemmTile(rows, cols, l.dim, r.q, r.ld, t.kt, cols, t.p, cols, scale, false, masked);
  gemmTile(rows, cols, l.dim, r.dy, r.ld, t.vt, cols, t.ds, cols, 1.0f, false, masked);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t vis = std::clamp<int64_t>(l.visible(q0 + i, causal) - k0, 0, cols);
    const float row_lse = lse[l.lseOffset(b, h) + (q0 + i) * l.heads], row_d = d ? t.rowterm[q0 + i] : 0.0f;
    probabilityRow(t.p + i * cols, t.ds + i * cols, vis, cols, row_lse, row_d, scale, d);
  }
}

// D_i = Σ_j P_ij·dP_ij over every key, masked P = 0 included, as the
// reference's (only for a pair holding a NaN or inf: the products with
// masked entries are what spread them).
void rowTermsOverAllKeys(const Heads& l, const float* q, const float* k, const float* v, const float* dy,
                         const float* lse, bool causal, int64_t b, int64_t h, BackwardTiles& t) {
  const int64_t ld = l.ld(), qo = l.qOffset(b, h), ko = l.kOffset(b, h);
  std::fill(t.rowterm, t.rowterm + l.sq, 0.0f);
  for (int64_t k0 = 0; k0 < l.sk; k0 += kBlockK) {
    const int64_t cols = std::min(kBlockK, l.sk - k0);
    transposeRows(k + ko + k0 * ld, ld, cols, l.dim, t.kt);
    transposeRows(v + ko + k0 * ld, ld, cols, l.dim, t.vt);
    for (int64_t q0 = 0; q0 < l.sq; q0 += kBlockQ) {
      const int64_t rows = std::min(kBlockQ, l.sq - q0);
      const QueryRows r{q + qo + q0 * ld, dy + qo + q0 * ld, ld};
      probabilityTiles(l, r, lse, causal, b, h, q0, rows, k0, cols, t, false, false);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) t.rowterm[q0 + i] += t.p[i * cols + j] * t.ds[i * cols + j];
    }
  }
}

void backwardPair(const Heads& l, const float* q, const float* k, const float* v, const float* y, const float* lse,
                  const float* dy, bool causal, int64_t b, int64_t h, float* dq, float* dk, float* dv, float* work) {
  BackwardTiles t(work, l.dim);
  const int64_t ld = l.ld(), qo = l.qOffset(b, h), ko = l.kOffset(b, h);
  const bool finite = !nonFinite(q + qo, l.sq, l.dim, ld) && !nonFinite(k + ko, l.sk, l.dim, ld) &&
                      !nonFinite(v + ko, l.sk, l.dim, ld) && !nonFinite(dy + qo, l.sq, l.dim, ld);
  if (finite) {
    rowDots(dy + qo, y + qo, l.sq, l.dim, ld, t.rowterm);
  } else {
    rowTermsOverAllKeys(l, q, k, v, dy, lse, causal, b, h, t);
  }
  // dq, dk and dv are summed in place, in the pair's own rows of the
  // outputs: each sum's first block writes them (dq's at key block 0, which
  // every query block meets; dk's and dv's at their key block's first query
  // block), so no pass zeroes them first (1 MiB each in char GPT; 0 + x is
  // x, the same bits). Keys no query sees are zeroed.
  const bool skip = causal && finite, pack = packs(l);
  for (int64_t k0 = 0; k0 < l.sk; k0 += kBlockK) {
    const int64_t cols = std::min(kBlockK, l.sk - k0);
    float *dk_block = dk + ko + k0 * ld, *dv_block = dv + ko + k0 * ld;
    // Queries before k0 see none of these keys: start at the block holding query k0.
    const int64_t first_q0 = skip ? k0 / kBlockQ * kBlockQ : 0;
    if (first_q0 >= l.sq) {
      zeroRows(dk_block, cols, l.dim, ld);
      zeroRows(dv_block, cols, l.dim, ld);
      continue;
    }
    transposeRows(k + ko + k0 * ld, ld, cols, l.dim, t.kt);
    transposeRows(v + ko + k0 * ld, ld, cols, l.dim, t.vt);
    const float* kb = k + ko + k0 * ld;
    if (pack) kb = packed(kb, ld, cols, l.dim, t.kp);
    const int64_t lk = pack ? l.dim : ld;
    for (int64_t q0 = first_q0; q0 < l.sq; q0 += kBlockQ) {
      const int64_t rows = std::min(kBlockQ, l.sq - q0);
      QueryRows r{q + qo + q0 * ld, dy + qo + q0 * ld, ld};
      if (pack) r = {packed(r.q, ld, rows, l.dim, t.qp), packed(r.dy, ld, rows, l.dim, t.dyp), l.dim};
      probabilityTiles(l, r, lse, causal, b, h, q0, rows, k0, cols, t, true, skip);
      // With `skip`, a key's sums start at the first query that sees it, a
      // query's end at the last key it sees (the rest: exact zeros).
      const Band seen_by = skip ? Band{.k_lo = k0 - q0} : Band{}, sees = skip ? Band{.k_hi = q0 - k0} : Band{};
      const bool onto_kv = q0 != first_q0, onto_q = k0 != 0;
      gemmTile(cols, l.dim, rows, t.p, cols, r.dy, r.ld, dv_block, ld, 1.0f, onto_kv, seen_by, true);  // Pᵀ·dy
      gemmTile(cols, l.dim, rows, t.ds, cols, r.q, r.ld, dk_block, ld, 1.0f, onto_kv, seen_by, true);  // dSᵀ·q
      gemmTile(rows, l.dim, cols, t.ds, cols, kb, lk, dq + qo + q0 * ld, ld, 1.0f, onto_q, sees);
    }
  }
}

// Runs pair(b, h, work) for every pair on up to `threads` threads, each with
// `words` floats of its own scratch.
template <typename Pair>
void eachPair(const Heads& l, int threads, int64_t words, Scratch& s, Pair pair) {
  const int64_t pairs = l.lead * l.heads;
  const int team = static_cast<int>(std::clamp<int64_t>(threads, 1, std::max<int64_t>(pairs, 1)));
  s.c.resize(static_cast<size_t>(words * team));
  float* scratch = s.c.data();
#pragma omp parallel for num_threads(team) schedule(static)
  for (int64_t x = 0; x < pairs; ++x) pair(x / l.heads, x % l.heads, scratch + omp_get_thread_num() * words);
}

}  // namespace

int64_t attentionScratchBytes(const Shape& q, const Shape& k, bool backward, int threads) {
  const Heads l = headsOf(q, k);
  const int64_t per = backward ? BackwardTiles::words(l.dim, l.sq) : ForwardTiles::words(l.dim);
  return per * std::clamp<int64_t>(threads, 1, std::max<int64_t>(l.lead * l.heads, 1)) * 4;
}

std::string attention(const TensorView& q, const TensorView& k, const TensorView& v, bool causal, TensorView& y,
                      TensorView& lse, int threads, Scratch& s) {
  const Heads l = headsOf(q.shape, k.shape);
  if (l.sq == 0 || l.sk == 0 || l.dim == 0) {  // no key to attend to: 0, as the reference
    if (y.elements > 0) std::memset(y.f(), 0, static_cast<size_t>(y.elements) * sizeof(float));
    std::fill(lse.f(), lse.f() + lse.elements, l.sk == 0 ? -kInf : NAN);  // dim 0: scores 0·inf, as the reference
    return "";
  }
  eachPair(l, threads, ForwardTiles::words(l.dim), s, [&](int64_t b, int64_t h, float* work) {
    forwardPair(l, q.f(), k.f(), v.f(), causal, b, h, y.f(), lse.f(), work);
  });
  return "";
}

std::string attentionGrad(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& y,
                          const TensorView& lse, const TensorView& dy, bool causal, TensorView& dq, TensorView& dk,
                          TensorView& dv, int threads, Scratch& s) {
  const Heads l = headsOf(q.shape, k.shape);
  if (l.sq == 0 || l.sk == 0 || l.dim == 0) {
    for (TensorView* g : {&dq, &dk, &dv})  // an empty one may have no memory at all
      if (g->elements > 0) std::memset(g->f(), 0, static_cast<size_t>(g->elements) * sizeof(float));
    return "";
  }
  eachPair(l, threads, BackwardTiles::words(l.dim, l.sq), s, [&](int64_t b, int64_t h, float* work) {
    backwardPair(l, q.f(), k.f(), v.f(), y.f(), lse.f(), dy.f(), causal, b, h, dq.f(), dk.f(), dv.f(), work);
  });
  return "";
}

}  // namespace dtl::rt::fast
