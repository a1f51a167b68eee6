// Synthetic values and the linear teacher. Everything is a pure function of
// its key, built on the counter hash of loader_random.h.
#include "runtime/data/sources_synthetic.h"

#include <algorithm>
#include <cmath>

#include "runtime/data/box_muller.h"
#include "runtime/data/loader_random.h"
#include "runtime/kernels/fast/simd.h"

namespace dtl::rt::data::detail {

namespace {

// Distinct streams so that inputs, P and A never share a key.
constexpr uint64_t kInputStream = 0x1000, kProjectionStream = 0x2000, kClassStream = 0x3000;

uint64_t baseKey(uint64_t seed, uint64_t field, uint64_t stream, int64_t sample) {
  return hashKey(seed ^ stream, field, static_cast<uint64_t>(sample));
}

// Box–Muller pairs first .. first + count − 1 under `base`: pair p's one
// counter hash gives u in (0, 1] (its top 24 bits) and the angle (the next 24),
// so its cos half goes to c and its sin half to s. 24-bit uniforms cut the
// tails at 5.8 sigma.
DTL_FAST_CLONES void boxMullerPairs(uint64_t base, int64_t first, int count, float* DTL_RESTRICT c,
                                    float* DTL_RESTRICT s) {
  DTL_SIMD
  for (int i = 0; i < count; ++i) {
    const uint64_t h = mix64(base ^ static_cast<uint64_t>(first + i));
    const float u = static_cast<float>(static_cast<int32_t>(h >> 40) + 1) * 0x1p-24f;
    const float r = std::sqrt(-2.0f * logPositive(u));
    const SinCos turn = sinCosTurn24(static_cast<uint32_t>(h >> 16) & 0xffffffu);
    c[i] = r * turn.cos;
    s[i] = r * turn.sin;
  }
}

// out[j] ~ N(0, 1) for j < n: elements 2p and 2p + 1 are pair p's halves.
void normals(uint64_t base, float* out, int64_t n) {
  constexpr int kBlock = 128;  // pairs made in one vectorised call, then interleaved
  float c[kBlock], s[kBlock];
  for (int64_t first = 0; 2 * first < n; first += kBlock) {
    const int count = static_cast<int>(std::min<int64_t>(kBlock, (n - 2 * first + 1) / 2));
    boxMullerPairs(base, first, count, c, s);
    float* to = out + 2 * first;
    const int whole = static_cast<int>(std::min<int64_t>(count, (n - 2 * first) / 2));
    for (int i = 0; i < whole; ++i) {
      to[2 * i] = c[i];
      to[2 * i + 1] = s[i];
    }
    if (whole < count) to[2 * whole] = c[whole];  // n odd: the last pair's cos half alone
  }
}

// z[k] = Σ P[k][d] · x[d] over d in order, in double: the same sums on every
// CPU (no contraction in this file), kRank of them side by side in vectors.
DTL_FAST_CLONES void project(const double* DTL_RESTRICT pt, const float* DTL_RESTRICT x, int64_t inputs,
                             double* DTL_RESTRICT z) {
  constexpr int kRank = Teacher::kRank;
  double acc[kRank] = {};  // a local array stays in registers: the d loop is a chain of adds
  for (int64_t d = 0; d < inputs; ++d) {
    const double* col = pt + d * kRank;
    const double xd = x[d];
#pragma GCC unroll 16
    for (int k = 0; k < kRank; ++k) acc[k] += col[k] * xd;
  }
  for (int k = 0; k < kRank; ++k) z[k] = acc[k];
}

}  // namespace

void syntheticNormals(uint64_t seed, uint64_t field, int64_t sample, float* out, int64_t n) {
  normals(baseKey(seed, field, kInputStream, sample), out, n);
}

void syntheticInts(uint64_t seed, uint64_t field, int64_t sample, int32_t* out, int64_t n, int64_t range) {
  uint64_t base = baseKey(seed, field, kInputStream, sample);
  for (int64_t j = 0; j < n; ++j)
    out[j] = static_cast<int32_t>(scaleTo(mix64(base ^ static_cast<uint64_t>(j)), static_cast<uint64_t>(range)));
}

Teacher::Teacher(uint64_t seed, uint64_t field, int64_t inputs, int64_t classes) : inputs_(inputs), classes_(classes) {
  std::vector<float> pt(static_cast<size_t>(inputs * kRank));
  a_.resize(static_cast<size_t>(classes * kRank));
  normals(baseKey(seed, field, kProjectionStream, 0), pt.data(), inputs * kRank);
  normals(baseKey(seed, field, kClassStream, 0), a_.data(), classes * kRank);
  auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(inputs > 0 ? inputs : 1)));
  pt_.resize(pt.size());
  for (size_t i = 0; i < pt.size(); ++i) pt_[i] = pt[i] * scale;  // scaled in f32, held in double for the sums
}

void Teacher::label(const float* x, int32_t* out, int64_t elements) const {
  double z[kRank];
  project(pt_.data(), x, inputs_, z);
  for (int64_t j = 0; j < elements; ++j) {
    int64_t best = 0;
    double best_score = 0;
    for (int64_t c = 0; c < classes_; ++c) {
      const float* a = a_.data() + c * kRank;
      double score = 0;
      for (int64_t k = 0; k < kRank; ++k) score += static_cast<double>(a[k]) * z[(k + j) % kRank];
      if (c == 0 || score > best_score) {
        best = c;
        best_score = score;
      }
    }
    out[j] = static_cast<int32_t>(best);
  }
}

}  // namespace dtl::rt::data::detail
