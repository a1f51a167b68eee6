// The fused attention's tile loops (attention_tiles.h), hand-vectorised.
//
// Lane vectors. The loops hold GCC vectors of 16 floats (one zmm) where the
// CPU has AVX-512 and of 8 (one ymm) elsewhere, chosen once at run time: a
// 16-float vector in the AVX2 clone has no machine register of its size, so
// GCC kept every one in memory and moved it through general registers —
// char GPT's attention ran 10× slower on a Zen 3 (AVX2) than on a Zen 4. The
// width changes no result: a tile product's element is its k products summed
// in order whatever the vectors, and a row's sum is defined in 16 lanes
// (entry j into lane j mod 16, then lane l + 8 onto l, + 4, + 2, + 1), which
// two 8-lane accumulators reproduce exactly (their sum is the first halving).
// Tests run every width on the same inputs and compare bits.
#include "runtime/kernels/fast/attention_tiles.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/f32_math.h"
#include "runtime/kernels/fast/kernels.h"
#include "runtime/kernels/fast/simd.h"

// Vectors pass by value only between always_inline helpers, never across a
// call, so GCC's note that their ABI differs between clones does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace dtl::rt::fast {

namespace {

typedef float V16 __attribute__((vector_size(64)));
typedef float V8 __attribute__((vector_size(32)));
constexpr int kW = 16;  // a tile product's column block, a row sum's lanes: the same on every CPU
constexpr float kInf = std::numeric_limits<float>::infinity();

template <typename V>
constexpr int kLanes = static_cast<int>(sizeof(V) / sizeof(float));

template <typename V>
__attribute__((always_inline)) inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V>
__attribute__((always_inline)) inline void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// setAttentionVectors: -1 the host's rule, else an AttentionVectors.
std::atomic<int> forced_vectors{-1};

AttentionVectors vectorsNow() {
#if defined(__x86_64__)
  // The level the x86-64-v4 clone is chosen by (simd.h): a CPU with part of
  // AVX-512 runs the AVX2 clone, where 16 lanes live in memory.
  static const AttentionVectors host =
      __builtin_cpu_supports("x86-64-v4") ? AttentionVectors::kLanes16TwoBlocks : AttentionVectors::kLanes8;
#else
  constexpr AttentionVectors host = AttentionVectors::kLanes8;
#endif
  const int forced = forced_vectors.load(std::memory_order_relaxed);
  return forced < 0 ? host : static_cast<AttentionVectors>(forced);
}
bool lanes16() { return vectorsNow() != AttentionVectors::kLanes8; }

// x·0 is ±0 for finite x and NaN otherwise, summed in lanes across rows (a
// horizontal sum per row cost more than the products: char GPT's dim 32),
// into four accumulators in turn: one chain of dependent adds was 10 % of
// char GPT's attention, waiting on each add's latency.
template <typename V>
__attribute__((always_inline)) inline bool nonFiniteIn(const float* DTL_RESTRICT x, int64_t rows, int64_t dim,
                                                       int64_t ld) {
  constexpr int L = kLanes<V>;
  V acc[4] = {};
  float tail = 0;
  int n = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = x + i * ld;
    int64_t d = 0;
    for (; d + L <= dim; d += L, n = (n + 1) & 3) acc[n] += load<V>(row + d) * 0.0f;
    for (; d < dim; ++d) tail += row[d] * 0.0f;
  }
  const V all = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (int j = 0; j < L; ++j) tail += all[j];
  return tail != 0.0f;
}

// x [from, to) = 0, in whole vector stores where it can (this file is built
// without GCC's loop-to-memset: runtime/CMakeLists.txt).
template <typename V>
__attribute__((always_inline)) inline void zeroSpan(float* DTL_RESTRICT x, int64_t from, int64_t to) {
  for (; from + kLanes<V> <= to; from += kLanes<V>) store(x + from, V{});
  for (; from < to; ++from) x[from] = 0.0f;
}

// One stage of an L×L transpose held in L vectors: with blocks of B, the
// off-diagonal B×B blocks of every 2B×2B block trade places (after the
// stages B = 1, 2, 4 (, 8) row r holds column r). Row r keeps its columns
// without bit B and takes row r + B's; row r + B takes row r's columns with
// bit B and keeps its own.
template <int B, typename V, int... C>
__attribute__((always_inline)) inline void transposeStage(V* m, std::integer_sequence<int, C...>) {
  constexpr int L = kLanes<V>;
#pragma GCC unroll 16
  for (int r = 0; r < L; ++r) {
    if (r & B) continue;
    const V a = m[r], b = m[r + B];
    m[r] = __builtin_shufflevector(a, b, ((C & B) ? L + C - B : C)...);
    m[r + B] = __builtin_shufflevector(a, b, ((C & B) ? L + C : C + B)...);
  }
}

// L×L blocks in registers, the edges one element at a time.
template <typename V>
__attribute__((always_inline)) inline void transposeIn(const float* DTL_RESTRICT x, int64_t ld, int64_t rows,
                                                       int64_t dim, float* DTL_RESTRICT xt) {
  constexpr int L = kLanes<V>;
  const int64_t full_r = rows / L * L, full_d = dim / L * L;
  for (int64_t r0 = 0; r0 < full_r; r0 += L)
    for (int64_t d0 = 0; d0 < full_d; d0 += L) {
      V m[L];
#pragma GCC unroll 16
      for (int r = 0; r < L; ++r) m[r] = load<V>(x + (r0 + r) * ld + d0);
      constexpr auto lanes = std::make_integer_sequence<int, L>{};
      transposeStage<1>(m, lanes);
      transposeStage<2>(m, lanes);
      transposeStage<4>(m, lanes);
      if constexpr (L == 16) transposeStage<8>(m, lanes);
#pragma GCC unroll 16
      for (int d = 0; d < L; ++d) store(xt + (d0 + d) * rows + r0, m[d]);
    }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = r < full_r ? full_d : 0; d < dim; ++d) xt[d * rows + r] = x[r * ld + d];
}

template <typename V>
__attribute__((always_inline)) inline void packIn(const float* DTL_RESTRICT src, int64_t ld, int64_t rows, int64_t dim,
                                                  float* DTL_RESTRICT dst) {
  constexpr int L = kLanes<V>;
  for (int64_t i = 0; i < rows; ++i) {
    const float* from = src + i * ld;
    float* to = dst + i * dim;
    int64_t c = 0;
    for (; c + L <= dim; c += L) store(to + c, load<V>(from + c));
    for (; c < dim; ++c) to[c] = from[c];
  }
}

// One register block of gemmTile: R rows × B blocks of 16 columns of c
// (`width` columns of one block when not Full), each block as 16 / L
// vectors, summed over k in order; a's element (r, p) at a[r · lda + p], or
// at a[p · lda + r] when TransA. B = 2 uses each broadcast element of a for
// both blocks (half the loads per product): 16 accumulators of 16 lanes at
// R = 8, only where the CPU has AVX-512's 32 vector registers. With 8 lanes
// R = 6 keeps 12 of AVX2's 16 registers. Each element's sum is the same
// whatever L, R and B. Inlined into gemmTile's clones.
template <typename V, int R, int B, bool Full, bool TransA>
__attribute__((always_inline)) inline void gemmBlock(int64_t k, const float* DTL_RESTRICT a, int64_t lda,
                                                     const float* DTL_RESTRICT b, int64_t ldb, float* DTL_RESTRICT c,
                                                     int64_t ldc, float scale, bool accumulate, int64_t width) {
  static_assert(Full || B == 1, "a partial block is a single one");
  constexpr int L = kLanes<V>, N = B * kW / L;
  V acc[N][R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int q = 0; q < N; ++q) acc[q][r] = V{};
  for (int64_t p = 0; p < k; ++p) {
    V bv[N];
    if constexpr (Full) {
#pragma GCC unroll 4
      for (int q = 0; q < N; ++q) bv[q] = load<V>(b + p * ldb + q * L);
    } else {
      float part[kW] = {};
      std::memcpy(part, b + p * ldb, static_cast<size_t>(width) * sizeof(float));
#pragma GCC unroll 4
      for (int q = 0; q < N; ++q) bv[q] = load<V>(part + q * L);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float x = TransA ? a[p * lda + r] : a[r * lda + p];
#pragma GCC unroll 4
      for (int q = 0; q < N; ++q) acc[q][r] += x * bv[q];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* row = c + r * ldc;
    if constexpr (Full) {
#pragma GCC unroll 4
      for (int q = 0; q < N; ++q) {
        const V old = load<V>(row + q * L);
        store(row + q * L, accumulate ? old + acc[q][r] : scale * acc[q][r]);
      }
    } else {
      float out[kW];
#pragma GCC unroll 4
      for (int q = 0; q < N; ++q) store(out + q * L, acc[q][r]);
      for (int64_t w = 0; w < width; ++w) row[w] = accumulate ? row[w] + out[w] : scale * out[w];
    }
  }
}

// Rows [i, i + R) of gemmTile: the columns up to the band's last row's
// (whole blocks of 16 where there are), the terms [from, to) of the sum
// that any of the R rows needs. Inlined into gemmTile's clones.
template <typename V, int R, bool TransA>
__attribute__((always_inline)) inline void gemmRows(int64_t i, int64_t n, int64_t k, const float* DTL_RESTRICT a,
                                                    int64_t lda, const float* DTL_RESTRICT b, int64_t ldb,
                                                    float* DTL_RESTRICT c, int64_t ldc, float scale, bool accumulate,
                                                    const tiles::Band& band, bool wide) {
  const int64_t last = i + R - 1;
  const int64_t cols = std::min(n, (std::clamp<int64_t>(last + band.n_hi + 1, 0, n) + kW - 1) / kW * kW);
  const int64_t from = std::clamp<int64_t>(i + band.k_lo, 0, k);
  const int64_t to = std::clamp<int64_t>(last + band.k_hi + 1, from, k);
  const float* ai = TransA ? a + from * lda + i : a + i * lda + from;
  const float* bk = b + from * ldb;
  float* ci = c + i * ldc;
  int64_t j = 0;
  if constexpr (kLanes<V> == 16)
    if (wide)
      for (; j + 2 * kW <= cols; j += 2 * kW)
        gemmBlock<V, R, 2, true, TransA>(to - from, ai, lda, bk + j, ldb, ci + j, ldc, scale, accumulate, 2 * kW);
  for (; j + kW <= cols; j += kW)
    gemmBlock<V, R, 1, true, TransA>(to - from, ai, lda, bk + j, ldb, ci + j, ldc, scale, accumulate, kW);
  if (j < cols)
    gemmBlock<V, R, 1, false, TransA>(to - from, ai, lda, bk + j, ldb, ci + j, ldc, scale, accumulate, cols - j);
}

template <typename V, bool TransA>
__attribute__((always_inline)) inline void gemmAllRows(int64_t m, int64_t n, int64_t k, const float* DTL_RESTRICT a,
                                                       int64_t lda, const float* DTL_RESTRICT b, int64_t ldb,
                                                       float* DTL_RESTRICT c, int64_t ldc, float scale, bool accumulate,
                                                       const tiles::Band& band, bool wide) {
  constexpr int R = kLanes<V> == 16 ? 8 : 6;
  int64_t i = 0;
  for (; i + R <= m; i += R) gemmRows<V, R, TransA>(i, n, k, a, lda, b, ldb, c, ldc, scale, accumulate, band, wide);
  for (; i + 2 <= m; i += 2) gemmRows<V, 2, TransA>(i, n, k, a, lda, b, ldb, c, ldc, scale, accumulate, band, wide);
  for (; i < m; ++i) gemmRows<V, 1, TransA>(i, n, k, a, lda, b, ldb, c, ldc, scale, accumulate, band, wide);
}

template <typename V>
__attribute__((always_inline)) inline void gemmIn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                                  const float* b, int64_t ldb, float* c, int64_t ldc, float scale,
                                                  bool accumulate, const tiles::Band& band, bool trans_a, bool wide) {
  if (trans_a)
    gemmAllRows<V, true>(m, n, k, a, lda, b, ldb, c, ldc, scale, accumulate, band, wide);
  else
    gemmAllRows<V, false>(m, n, k, a, lda, b, ldb, c, ldc, scale, accumulate, band, wide);
}

// The largest of L lanes, none NaN, by halving.
template <typename V, int... C>
__attribute__((always_inline)) inline float maxOfLanes(V v, std::integer_sequence<int, C...>) {
  constexpr int L = kLanes<V>;
  V h;
  if constexpr (L == 16) {
    h = __builtin_shufflevector(v, v, ((C + 8) % L)...);
    v = h > v ? h : v;
  }
  h = __builtin_shufflevector(v, v, ((C + 4) % L)...);
  v = h > v ? h : v;
  h = __builtin_shufflevector(v, v, ((C + 2) % L)...);
  v = h > v ? h : v;
  h = __builtin_shufflevector(v, v, ((C + 1) % L)...);
  v = h > v ? h : v;
  return v[0];
}

// The sum of a row's 16 lanes, held as 16 / L vectors, by halving: lane l +
// 8 onto l (with 8-lane vectors, the two vectors' sum), then + 4, + 2, + 1
// (a fixed order; four dependent adds where a lane-by-lane sum takes 16).
template <typename V, int... C>
__attribute__((always_inline)) inline float sumOfLanes(const V* acc, std::integer_sequence<int, C...>) {
  constexpr int L = kLanes<V>;
  V v = acc[0];
  if constexpr (L == 16)
    v += __builtin_shufflevector(v, v, ((C + 8) % L)...);
  else
    v += acc[1];
  v += __builtin_shufflevector(v, v, ((C + 4) % L)...);
  v += __builtin_shufflevector(v, v, ((C + 2) % L)...);
  v += __builtin_shufflevector(v, v, ((C + 1) % L)...);
  return v[0];
}

// 0, 1, …, 15: lane numbers, to mask a vector's lanes past a row's end.
constexpr float kLaneNumbers[kW] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// The first `vis` of a row's `cols` entries rounded up to whole 16-lane
// blocks (within the row): an exp loop over them, the masked lanes of its
// last block zeroed by a select, makes only vector calls — the scalar calls
// of a vectorised loop's remainder took 4 % of char GPT's attention, whose
// causal rows mostly end inside a block. Entries past `vis` hold scores
// (gemmTile computes whole blocks), never read as more than the select's
// discarded lane.
inline int64_t wholeBlocks(int64_t vis, int64_t cols) { return std::min((vis + kW - 1) / kW * kW, cols / kW * kW); }

// While every score so far is −inf the exponents use 0, not −inf
// (exp(−inf + inf) would be NaN): a row that later sees a finite score is
// unharmed; one that never does ends with sum 0 and out NaN, as the reference.
template <typename V>
__attribute__((always_inline)) inline void onlineRowIn(float* DTL_RESTRICT s, int64_t vis, int64_t cols, float& m,
                                                       float& sum, float* DTL_RESTRICT o, int64_t dim) {
  constexpr int L = kLanes<V>;
  constexpr auto lane_seq = std::make_integer_sequence<int, L>{};
  // The block's max, skipping NaN (exp(NaN) still spreads it): L lanes,
  // then across them (a max is exact in any order). Whole vectors are
  // loaded whole, their lanes past `vis` masked by a compare (a copy of a
  // variable length went through the stack: rep movs and a stalled reload,
  // 18 % of this function in char GPT's forward).
  const V minus_inf = V{} - kInf, lane = load<V>(kLaneNumbers);
  V lanes = minus_inf;
  const int64_t whole = wholeBlocks(vis, cols);
  int64_t j0 = 0;
  for (; j0 < whole; j0 += L) {
    V v = load<V>(s + j0);
    v = lane < static_cast<float>(vis - j0) ? v : minus_inf;
    lanes = v > lanes ? v : lanes;
  }
  for (; j0 < vis; j0 += L) {  // a row's last, partial vector
    V v = minus_inf;
    std::memcpy(&v, s + j0, static_cast<size_t>(std::min<int64_t>(L, vis - j0)) * sizeof(float));
    lanes = v > lanes ? v : lanes;
  }
  const float block = maxOfLanes(lanes, lane_seq);
  const float next = block > m ? block : m;
  const float base = next == -kInf ? 0.0f : next;
  const float keep = m == -kInf ? 0.0f : f32math::expF32(m - base);  // exp(−inf) is +0
  DTL_SIMD for (int64_t j = 0; j < whole; ++j) s[j] = j < vis ? f32math::expF32(s[j] - base) : 0.0f;
  // Summed as 16 lanes (lane l: entries l, l + 16, …) and then by halving.
  V acc[kW / L] = {};
  for (int64_t j = 0; j < whole; j += kW)
    for (int q = 0; q < kW / L; ++q) acc[q] += load<V>(s + j + q * L);
  float added = sumOfLanes(acc, lane_seq);
  for (int64_t j = whole; j < vis; ++j) added += s[j] = f32math::expF32(s[j] - base);
  zeroSpan<V>(s, std::max(whole, vis), cols);  // still multiplied by v: 0·inf = NaN as the reference's
  sum = sum * keep + added;
  DTL_SIMD for (int64_t d = 0; d < dim; ++d) o[d] *= keep;
  m = next;
}

template <typename V>
__attribute__((always_inline)) inline void probabilityRowIn(float* DTL_RESTRICT p, float* DTL_RESTRICT ds, int64_t vis,
                                                            int64_t cols, float lse, float row_d, float scale, bool d) {
  const int64_t whole = wholeBlocks(vis, cols);
  DTL_SIMD for (int64_t j = 0; j < whole; ++j) p[j] = j < vis ? f32math::expF32(p[j] - lse) : 0.0f;
  for (int64_t j = whole; j < vis; ++j) p[j] = f32math::expF32(p[j] - lse);
  zeroSpan<V>(p, std::max(whole, vis), cols);
  if (!d) return;
  DTL_SIMD for (int64_t j = 0; j < whole; ++j) ds[j] = j < vis ? p[j] * (ds[j] - row_d) * scale : 0.0f;
  for (int64_t j = whole; j < vis; ++j) ds[j] = p[j] * (ds[j] - row_d) * scale;
  zeroSpan<V>(ds, std::max(whole, vis), cols);
}

}  // namespace

void setAttentionVectors(std::optional<AttentionVectors> v) { forced_vectors = v ? static_cast<int>(*v) : -1; }

namespace tiles {

// Each entry point is cloned per instruction set (simd.h) and takes the
// lane width's instantiation inline: a template called from a clone and
// not inlined would be compiled for the baseline only.

DTL_FAST_CLONES bool nonFinite(const float* x, int64_t rows, int64_t dim, int64_t ld) {
  return lanes16() ? nonFiniteIn<V16>(x, rows, dim, ld) : nonFiniteIn<V8>(x, rows, dim, ld);
}

// Compiled as gemmTile's sums are (GCC fuses a·b + s in the AVX2 and
// AVX-512 clones, as gemmTile's products; the default clone fuses neither):
// with one key, out = v and dP − D is then exactly 0, as the reference's.
// Always four rows at a time, the last group's missing rows a repeat of the
// last row (computed, not stored): one row alone compiled otherwise — GCC
// vectorised its columns as products rounded and then added in order, and
// dP − D was not 0 there.
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

// In whole vector stores: a memset call per row of char GPT's 32 floats
// cost more than its stores.
DTL_FAST_CLONES void zeroRows(float* x, int64_t rows, int64_t dim, int64_t ld) {
  if (lanes16())
    for (int64_t i = 0; i < rows; ++i) zeroSpan<V16>(x + i * ld, 0, dim);
  else
    for (int64_t i = 0; i < rows; ++i) zeroSpan<V8>(x + i * ld, 0, dim);
}

DTL_FAST_CLONES void transposeRows(const float* x, int64_t ld, int64_t rows, int64_t dim, float* xt) {
  if (lanes16())
    transposeIn<V16>(x, ld, rows, dim, xt);
  else
    transposeIn<V8>(x, ld, rows, dim, xt);
}

DTL_FAST_CLONES void packRows(const float* src, int64_t ld, int64_t rows, int64_t dim, float* dst) {
  if (lanes16())
    packIn<V16>(src, ld, rows, dim, dst);
  else
    packIn<V8>(src, ld, rows, dim, dst);
}

DTL_FAST_CLONES void gemmTile(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                              int64_t ldb, float* c, int64_t ldc, float scale, bool accumulate, Band band,
                              bool trans_a) {
  switch (vectorsNow()) {
    case AttentionVectors::kLanes8:
      return gemmIn<V8>(m, n, k, a, lda, b, ldb, c, ldc, scale, accumulate, band, trans_a, false);
    case AttentionVectors::kLanes16:
      return gemmIn<V16>(m, n, k, a, lda, b, ldb, c, ldc, scale, accumulate, band, trans_a, false);
    case AttentionVectors::kLanes16TwoBlocks:
      return gemmIn<V16>(m, n, k, a, lda, b, ldb, c, ldc, scale, accumulate, band, trans_a, true);
  }
}

DTL_FAST_CLONES void onlineRow(float* s, int64_t vis, int64_t cols, float& m, float& sum, float* o, int64_t dim) {
  if (lanes16())
    onlineRowIn<V16>(s, vis, cols, m, sum, o, dim);
  else
    onlineRowIn<V8>(s, vis, cols, m, sum, o, dim);
}

DTL_FAST_CLONES void probabilityRow(float* p, float* ds, int64_t vis, int64_t cols, float lse, float row_d, float scale,
                                    bool d) {
  if (lanes16())
    probabilityRowIn<V16>(p, ds, vis, cols, lse, row_d, scale, d);
  else
    probabilityRowIn<V8>(p, ds, vis, cols, lse, row_d, scale, d);
}

}  // namespace tiles

}  // namespace dtl::rt::fast
