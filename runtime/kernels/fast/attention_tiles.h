// Internal to the fused attention (attention.cc): the vectorised loops over
// its tiles — tile products, transposes, one query row's online softmax, the
// backward's probabilities — in attention_tiles.cc, built for the CPU's
// vector width (attention_tiles.cc, "Lane vectors").
#pragma once

#include <cstdint>
#include <limits>

namespace dtl::rt::fast::tiles {

// What a causal tile needs, relative to its row r: the columns j <= r + n_hi
// (the others are never read), and the terms p of each sum in
// [r + k_lo, r + k_hi] (the others are exact zeros: masked probabilities
// against finite operands). Skipping a zero term leaves the sum's value as
// it was (only the sign of a sum that is exactly zero could differ).
struct Band {
  static constexpr int64_t kAll = std::numeric_limits<int64_t>::max() / 4;
  int64_t n_hi = kAll, k_lo = -kAll, k_hi = kAll;
};

// Does the [rows, dim] view at x (row stride ld) hold a NaN or inf?
bool nonFinite(const float* x, int64_t rows, int64_t dim, int64_t ld);

// d [rows] = the row-wise dot products of two [rows, dim] views (row stride
// ld), each summed from 0 in column order as one of gemmTile's sums is.
void rowDots(const float* a, const float* b, int64_t rows, int64_t dim, int64_t ld, float* d);

// x [rows, dim] (row stride ld) = 0.
void zeroRows(float* x, int64_t rows, int64_t dim, int64_t ld);

// xt [dim, rows] = the [rows, dim] view at x (row stride ld) transposed.
void transposeRows(const float* x, int64_t ld, int64_t rows, int64_t dim, float* xt);

// dst [rows, dim] (dense) = the [rows, dim] view at src (row stride ld).
void packRows(const float* src, int64_t ld, int64_t rows, int64_t dim, float* dst);

// c [m, n] (row stride ldc) = scale · a·b, or c + a·b when `accumulate`:
// a [m, k] (row stride lda; with `trans_a` stored as [k, m], so the
// backward's Pᵀ·dy and dSᵀ·q read P and dS as they are, no transpose), b
// [k, n] (row stride ldb). Each element is its k products summed in order
// from 0, whatever the block it falls in — those outside `band` left out
// (per block of rows: a superset of each row's).
void gemmTile(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
              int64_t ldc, float scale, bool accumulate, Band band = {}, bool trans_a = false);

// One query row meets one key block: s [cols] (scores; `vis` of them
// visible) becomes its unnormalised probabilities against the row's running
// max m (masked ones 0), and the running sum and o [dim] (Σ_j p_j·v_j so
// far) are rescaled when the max grows; the caller then adds this block's
// p·v.
void onlineRow(float* s, int64_t vis, int64_t cols, float& m, float& sum, float* o, int64_t dim);

// One row of the backward's tiles: p = exp(s − lse) (masked 0) and, with
// `d`, dP in ds becomes dS = p·(dP − D)·scale (masked 0).
void probabilityRow(float* p, float* ds, int64_t vis, int64_t cols, float lse, float row_d, float scale, bool d);

}  // namespace dtl::rt::fast::tiles
