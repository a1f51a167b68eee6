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
// attention"): the online softmax's running max and rescaling, the causal
// block skipping and the non-finite rules below are control flow the
// elementwise kernel generator does not express, and these tiles are small
// enough that vectorised loops over them need no GEMM library (which would
// also bring its own threads inside ours).
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
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include <omp.h>

#include "core/f32_math.h"
#include "runtime/kernels/fast/kernels.h"
#include "runtime/kernels/fast/simd.h"
#include "runtime/kernels/fast/vmath.h"

namespace dtl::rt::fast {

namespace {

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

// 16 floats as one GCC vector: one zmm register in the AVX-512 clone, two
// ymm in the AVX2 one, four xmm otherwise; named accumulators stay in
// registers where a float array would live on the stack.
typedef float V16 __attribute__((vector_size(64)));
constexpr int kW = 16;

// Does the [rows, dim] view at x (row stride ld) hold a NaN or inf? x·0
// is ±0 for finite x and NaN otherwise, summed in 16 lanes across rows (a
// horizontal sum per row cost more than the products: char GPT's dim 32),
// into four accumulators in turn: one chain of dependent adds was 10 % of
// char GPT's attention, waiting on each add's latency.
DTL_FAST_CLONES bool nonFinite(const float* DTL_RESTRICT x, int64_t rows, int64_t dim, int64_t ld) {
  V16 acc[4] = {};
  float tail = 0;
  int n = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = x + i * ld;
    int64_t d = 0;
    for (; d + kW <= dim; d += kW, n = (n + 1) & 3) {
      V16 v;
      std::memcpy(&v, row + d, sizeof v);
      acc[n] += v * 0.0f;
    }
    for (; d < dim; ++d) tail += row[d] * 0.0f;
  }
  const V16 all = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (int j = 0; j < kW; ++j) tail += all[j];
  return tail != 0.0f;
}

// d [rows] = the row-wise dot products of two [rows, dim] views (row stride
// ld), each summed from 0 in column order as one of gemmTile's sums is, and
// compiled as they are (GCC fuses a·b + s in the AVX2 and AVX-512 clones, as
// gemmTile's products; the default clone fuses neither): with one key, out
// = v and dP − D is then exactly 0, as the reference's. Always four rows at
// a time, the last group's missing rows a repeat of the last row (computed,
// not stored): one row alone compiled otherwise — GCC vectorised its columns
// as products rounded and then added in order, and dP − D was not 0 there.
DTL_FAST_CLONES void rowDots(const float* DTL_RESTRICT a, const float* DTL_RESTRICT b, int64_t rows, int64_t dim,
                             int64_t ld, float* DTL_RESTRICT d) {
  for (int64_t i = 0; i < rows; i += 4) {
    int64_t row[4];
    for (int r = 0; r < 4; ++r) row[r] = std::min(i + r, rows - 1);
    float sum[4] = {};
    for (int64_t c = 0; c < dim; ++c)
      for (int r = 0; r < 4; ++r) sum[r] += a[row[r] * ld + c] * b[row[r] * ld + c];
    for (int r = 0; r < 4 && i + r < rows; ++r) d[i + r] = sum[r];
  }
}

// x [from, to) = 0, in whole 16-lane stores where it can (this file is
// built without GCC's loop-to-memset: runtime/CMakeLists.txt).
__attribute__((always_inline)) inline void zeroSpan(float* DTL_RESTRICT x, int64_t from, int64_t to) {
  const V16 zero = {};
  for (; from + kW <= to; from += kW) std::memcpy(x + from, &zero, sizeof zero);
  for (; from < to; ++from) x[from] = 0.0f;
}

// x [rows, dim] (row stride ld) = 0 in whole 16-lane stores: a memset call
// per row of char GPT's 32 floats cost more than its stores.
DTL_FAST_CLONES void zeroRows(float* DTL_RESTRICT x, int64_t rows, int64_t dim, int64_t ld) {
  for (int64_t i = 0; i < rows; ++i) zeroSpan(x + i * ld, 0, dim);
}

// One stage of a 16×16 transpose held in 16 vectors: with blocks of B, the
// off-diagonal B×B blocks of every 2B×2B block trade places (after the
// stages B = 1, 2, 4, 8 row r holds column r). Row r keeps its columns
// without bit B and takes row r + B's; row r + B takes row r's columns with
// bit B and keeps its own.
template <int B, int... C>
__attribute__((always_inline)) inline void transposeStage(V16* m, std::integer_sequence<int, C...>) {
#pragma GCC unroll 16
  for (int r = 0; r < kW; ++r) {
    if (r & B) continue;
    const V16 a = m[r], b = m[r + B];
    m[r] = __builtin_shufflevector(a, b, ((C & B) ? kW + C - B : C)...);
    m[r + B] = __builtin_shufflevector(a, b, ((C & B) ? kW + C : C + B)...);
  }
}

// xt [dim, rows] = the [rows, dim] view at x transposed: 16×16 blocks in
// registers, the edges one element at a time.
DTL_FAST_CLONES void transposeRows(const float* DTL_RESTRICT x, int64_t ld, int64_t rows, int64_t dim,
                                   float* DTL_RESTRICT xt) {
  const int64_t full_r = rows / kW * kW, full_d = dim / kW * kW;
  for (int64_t r0 = 0; r0 < full_r; r0 += kW)
    for (int64_t d0 = 0; d0 < full_d; d0 += kW) {
      V16 m[kW];
#pragma GCC unroll 16
      for (int r = 0; r < kW; ++r) std::memcpy(&m[r], x + (r0 + r) * ld + d0, sizeof(V16));
      constexpr auto lanes = std::make_integer_sequence<int, kW>{};
      transposeStage<1>(m, lanes);
      transposeStage<2>(m, lanes);
      transposeStage<4>(m, lanes);
      transposeStage<8>(m, lanes);
#pragma GCC unroll 16
      for (int d = 0; d < kW; ++d) std::memcpy(xt + (d0 + d) * rows + r0, &m[d], sizeof(V16));
    }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = r < full_r ? full_d : 0; d < dim; ++d) xt[d * rows + r] = x[r * ld + d];
}

// One register block of gemmTile: R rows × B blocks of 16 columns of c
// (`width` columns of one block when not Full), summed over k in order; a's
// element (r, p) at a[r · lda + p], or at a[p · lda + r] when TransA.
// B = 2 keeps 2R accumulators and uses each broadcast element of a for both
// blocks (half the loads per product): with R = 8 that is 16, only where
// the CPU has AVX-512's 32 vector registers (gemmRows' `wide`). Each
// element's sum is the same whatever B. Inlined into gemmTile's clones.
template <int R, int B, bool Full, bool TransA>
__attribute__((always_inline)) inline void gemmBlock(int64_t k, const float* DTL_RESTRICT a, int64_t lda,
                                                     const float* DTL_RESTRICT b, int64_t ldb, float* DTL_RESTRICT c,
                                                     int64_t ldc, float scale, bool accumulate, int64_t width) {
  static_assert(Full || B == 1, "a partial block is a single one");
  V16 acc[B][R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < B; ++q) acc[q][r] = V16{};
  for (int64_t p = 0; p < k; ++p) {
    V16 bv[B];
    if constexpr (Full) {
      for (int q = 0; q < B; ++q) std::memcpy(&bv[q], b + p * ldb + q * kW, sizeof bv[q]);
    } else {
      float part[kW] = {};
      std::memcpy(part, b + p * ldb, static_cast<size_t>(width) * sizeof(float));
      std::memcpy(&bv[0], part, sizeof bv[0]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float x = TransA ? a[p * lda + r] : a[r * lda + p];
      for (int q = 0; q < B; ++q) acc[q][r] += x * bv[q];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* row = c + r * ldc;
    if constexpr (Full) {
      for (int q = 0; q < B; ++q) {
        V16 old;
        std::memcpy(&old, row + q * kW, sizeof old);
        const V16 next = accumulate ? old + acc[q][r] : scale * acc[q][r];
        std::memcpy(row + q * kW, &next, sizeof next);
      }
    } else {
      float out[kW];
      std::memcpy(out, &acc[0][r], sizeof out);
      for (int64_t w = 0; w < width; ++w) row[w] = accumulate ? row[w] + out[w] : scale * out[w];
    }
  }
}

// setAttentionWideBlocks: -1 the host's rule, else 0 or 1.
std::atomic<int> wide_blocks{-1};

// Whether gemmRows takes two blocks at a time: where the CPU has AVX-512
// (32 vector registers), unless a test forced it.
bool wideRegisters() {
#if defined(__x86_64__)
  static const bool host = __builtin_cpu_supports("avx512f");
#else
  constexpr bool host = false;
#endif
  const int forced = wide_blocks.load(std::memory_order_relaxed);
  return forced < 0 ? host : forced == 1;
}

// What a causal tile needs, relative to its row r: the columns j <= r + n_hi
// (the others are never read), and the terms p of each sum in
// [r + k_lo, r + k_hi] (the others are exact zeros: masked probabilities
// against finite operands). Skipping a zero term leaves the sum's value as
// it was (only the sign of a sum that is exactly zero could differ).
struct Band {
  static constexpr int64_t kAll = std::numeric_limits<int64_t>::max() / 4;
  int64_t n_hi = kAll, k_lo = -kAll, k_hi = kAll;
};

// Rows [i, i + R) of gemmTile: the columns up to the band's last row's
// (whole blocks of 16 where there are), the terms [from, to) of the sum
// that any of the R rows needs. Inlined into gemmTile's clones.
template <int R, bool TransA>
__attribute__((always_inline)) inline void gemmRows(int64_t i, int64_t n, int64_t k, const float* DTL_RESTRICT a,
                                                    int64_t lda, const float* DTL_RESTRICT b, int64_t ldb,
                                                    float* DTL_RESTRICT c, int64_t ldc, float scale, bool accumulate,
                                                    const Band& band, bool wide) {
  const int64_t last = i + R - 1;
  const int64_t cols = std::min(n, (std::clamp<int64_t>(last + band.n_hi + 1, 0, n) + kW - 1) / kW * kW);
  const int64_t from = std::clamp<int64_t>(i + band.k_lo, 0, k);
  const int64_t to = std::clamp<int64_t>(last + band.k_hi + 1, from, k);
  const float* ai = TransA ? a + from * lda + i : a + i * lda + from;
  const float* bk = b + from * ldb;
  float* ci = c + i * ldc;
  int64_t j = 0;
  if (wide)
    for (; j + 2 * kW <= cols; j += 2 * kW)
      gemmBlock<R, 2, true, TransA>(to - from, ai, lda, bk + j, ldb, ci + j, ldc, scale, accumulate, 2 * kW);
  for (; j + kW <= cols; j += kW)
    gemmBlock<R, 1, true, TransA>(to - from, ai, lda, bk + j, ldb, ci + j, ldc, scale, accumulate, kW);
  if (j < cols)
    gemmBlock<R, 1, false, TransA>(to - from, ai, lda, bk + j, ldb, ci + j, ldc, scale, accumulate, cols - j);
}

// c [m, n] (row stride ldc) = scale · a·b, or c + a·b when `accumulate`:
// a [m, k] (row stride lda; with `trans_a` stored as [k, m], so the
// backward's Pᵀ·dy and dSᵀ·q read P and dS as they are, no transpose), b
// [k, n] (row stride ldb). Each element is its k products summed in order
// from 0, whatever the block it falls in — those outside `band` left out
// (per block of rows: a superset of each row's).
template <bool TransA>
__attribute__((always_inline)) inline void gemmAllRows(int64_t m, int64_t n, int64_t k, const float* DTL_RESTRICT a,
                                                       int64_t lda, const float* DTL_RESTRICT b, int64_t ldb,
                                                       float* DTL_RESTRICT c, int64_t ldc, float scale, bool accumulate,
                                                       const Band& band) {
  constexpr int R = 8;
  const bool wide = wideRegisters();
  int64_t i = 0;
  for (; i + R <= m; i += R) gemmRows<R, TransA>(i, n, k, a, lda, b, ldb, c, ldc, scale, accumulate, band, wide);
  for (; i < m; ++i) gemmRows<1, TransA>(i, n, k, a, lda, b, ldb, c, ldc, scale, accumulate, band, wide);
}
DTL_FAST_CLONES void gemmTile(int64_t m, int64_t n, int64_t k, const float* DTL_RESTRICT a, int64_t lda,
                              const float* DTL_RESTRICT b, int64_t ldb, float* DTL_RESTRICT c, int64_t ldc, float scale,
                              bool accumulate, Band band = {}, bool trans_a = false) {
  if (trans_a)
    gemmAllRows<true>(m, n, k, a, lda, b, ldb, c, ldc, scale, accumulate, band);
  else
    gemmAllRows<false>(m, n, k, a, lda, b, ldb, c, ldc, scale, accumulate, band);
}

// The largest of 16 lanes, none NaN, by halving.
template <int... C>
__attribute__((always_inline)) inline float maxOfLanes(V16 v, std::integer_sequence<int, C...>) {
  V16 h = __builtin_shufflevector(v, v, ((C + 8) % kW)...);
  v = h > v ? h : v;
  h = __builtin_shufflevector(v, v, ((C + 4) % kW)...);
  v = h > v ? h : v;
  h = __builtin_shufflevector(v, v, ((C + 2) % kW)...);
  v = h > v ? h : v;
  h = __builtin_shufflevector(v, v, ((C + 1) % kW)...);
  v = h > v ? h : v;
  return v[0];
}
// always_inline: a 64-byte vector passed by value between a target clone and
// a function compiled for the default target would disagree on its ABI.
__attribute__((always_inline)) inline float maxOfLanes(V16 v) {
  return maxOfLanes(v, std::make_integer_sequence<int, kW>{});
}

// The sum of 16 lanes by halving: lane l + 8 onto l, then + 4, + 2, + 1 (a
// fixed order; four dependent adds where a lane-by-lane sum takes sixteen).
template <int... C>
__attribute__((always_inline)) inline float sumOfLanes(V16 v, std::integer_sequence<int, C...>) {
  v += __builtin_shufflevector(v, v, ((C + 8) % kW)...);
  v += __builtin_shufflevector(v, v, ((C + 4) % kW)...);
  v += __builtin_shufflevector(v, v, ((C + 2) % kW)...);
  v += __builtin_shufflevector(v, v, ((C + 1) % kW)...);
  return v[0];
}
__attribute__((always_inline)) inline float sumOfLanes(V16 v) {
  return sumOfLanes(v, std::make_integer_sequence<int, kW>{});
}

// 0, 1, …, 15: lane numbers, to mask a block's lanes past a row's end.
constexpr V16 kLane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// The first `vis` of a row's `cols` entries rounded up to whole 16-lane
// blocks (within the row): an exp loop over them, the masked lanes of its
// last block zeroed by a select, makes only vector calls — the scalar calls
// of a vectorised loop's remainder took 4 % of char GPT's attention, whose
// causal rows mostly end inside a block. Entries past `vis` hold scores
// (gemmTile computes whole blocks), never read as more than the select's
// discarded lane.
inline int64_t wholeBlocks(int64_t vis, int64_t cols) { return std::min((vis + kW - 1) / kW * kW, cols / kW * kW); }

// One query row meets one key block: s [cols] (scores; `vis` of them
// visible) becomes its unnormalised probabilities against the row's running
// max m (masked ones 0), and the running sum and o [dim] (Σ_j p_j·v_j so
// far) are rescaled when the max grows; the caller then adds this block's
// p·v. While every score so far is −inf the exponents use 0, not −inf
// (exp(−inf + inf) would be NaN): a row that later sees a finite score is
// unharmed; one that never does ends with sum 0 and out NaN, as the reference.
DTL_FAST_CLONES void onlineRow(float* DTL_RESTRICT s, int64_t vis, int64_t cols, float& m, float& sum,
                               float* DTL_RESTRICT o, int64_t dim) {
  // The block's max, skipping NaN (exp(NaN) still spreads it): 16 lanes,
  // then across them (a max is exact in any order).
  // Whole blocks are loaded whole, their lanes past `vis` masked by a
  // compare (a copy of a variable length went through the stack: rep movs
  // and a stalled reload, 18 % of this function in char GPT's forward).
  const V16 minus_inf = V16{} - kInf;
  V16 lanes = minus_inf;
  const int64_t whole = wholeBlocks(vis, cols);
  int64_t j0 = 0;
  for (; j0 < whole; j0 += kW) {
    V16 v;
    std::memcpy(&v, s + j0, sizeof v);
    v = kLane < static_cast<float>(vis - j0) ? v : minus_inf;
    lanes = v > lanes ? v : lanes;
  }
  for (; j0 < vis; j0 += kW) {  // a row's last, partial block
    V16 v = minus_inf;
    std::memcpy(&v, s + j0, static_cast<size_t>(std::min<int64_t>(kW, vis - j0)) * sizeof(float));
    lanes = v > lanes ? v : lanes;
  }
  const float block = maxOfLanes(lanes);
  const float next = block > m ? block : m;
  const float base = next == -kInf ? 0.0f : next;
  const float keep = m == -kInf ? 0.0f : f32math::expF32(m - base);  // exp(−inf) is +0
  DTL_SIMD for (int64_t j = 0; j < whole; ++j) s[j] = j < vis ? f32math::expF32(s[j] - base) : 0.0f;
  // Summed as 16 lanes (lane l: entries l, l + 16, …) and then by halving.
  V16 acc = {};
  for (int64_t j = 0; j < whole; j += kW) {
    V16 e;
    std::memcpy(&e, s + j, sizeof e);
    acc += e;
  }
  float added = sumOfLanes(acc);
  for (int64_t j = whole; j < vis; ++j) added += s[j] = f32math::expF32(s[j] - base);
  zeroSpan(s, std::max(whole, vis), cols);  // still multiplied by v: 0·inf = NaN as the reference's
  sum = sum * keep + added;
  DTL_SIMD for (int64_t d = 0; d < dim; ++d) o[d] *= keep;
  m = next;
}

// Rows at least this many floats apart (and not contiguous) are copied into
// dense tiles before the tile products read them — the forward's q and v,
// the backward's k, q and dy: at GPT-2's 12 heads × 64 (3 KiB apart) a
// tile's 64 rows fall into a quarter of L1's sets and evict each other (the
// products stalled on those loads); char GPT's rows (512 bytes apart) stay
// where they are. The products are the same, and so are the bits.
constexpr int64_t kPackStride = 256;

// dst [rows, dim] (dense) = the [rows, dim] view at src (row stride ld).
DTL_FAST_CLONES void packRows(const float* DTL_RESTRICT src, int64_t ld, int64_t rows, int64_t dim,
                              float* DTL_RESTRICT dst) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* from = src + i * ld;
    float* to = dst + i * dim;
    int64_t c = 0;
    for (; c + kW <= dim; c += kW) std::memcpy(to + c, from + c, sizeof(V16));
    for (; c < dim; ++c) to[c] = from[c];
  }
}

// packRows into `tile`, which is returned.
const float* packed(const float* src, int64_t ld, int64_t rows, int64_t dim, float* tile) {
  packRows(src, ld, rows, dim, tile);
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

// One row of probabilityTiles: p = exp(s − lse) (masked 0) and, with `d`,
// dP in ds becomes dS = p·(dP − D)·scale (masked 0).
DTL_FAST_CLONES void probabilityRow(float* DTL_RESTRICT p, float* DTL_RESTRICT ds, int64_t vis, int64_t cols,
                                    float lse, float row_d, float scale, bool d) {
  const int64_t whole = wholeBlocks(vis, cols);
  DTL_SIMD for (int64_t j = 0; j < whole; ++j) p[j] = j < vis ? f32math::expF32(p[j] - lse) : 0.0f;
  for (int64_t j = whole; j < vis; ++j) p[j] = f32math::expF32(p[j] - lse);
  zeroSpan(p, std::max(whole, vis), cols);
  if (!d) return;
  DTL_SIMD for (int64_t j = 0; j < whole; ++j) ds[j] = j < vis ? p[j] * (ds[j] - row_d) * scale : 0.0f;
  for (int64_t j = whole; j < vis; ++j) ds[j] = p[j] * (ds[j] - row_d) * scale;
  zeroSpan(ds, std::max(whole, vis), cols);
}

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

void setAttentionWideBlocks(std::optional<bool> on) { wide_blocks = on ? static_cast<int>(*on) : -1; }

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
