// Synthetic values and the linear teacher. Everything is a pure function of
// its key, built on the counter hash of loader_random.h.
#include "runtime/data/sources_synthetic.h"

#include <cmath>

#include "runtime/data/loader_random.h"

namespace dtl::rt::data::detail {

namespace {

// Distinct streams so that inputs, P and A never share a key.
constexpr uint64_t kInputStream = 0x1000, kProjectionStream = 0x2000, kClassStream = 0x3000;

uint64_t baseKey(uint64_t seed, uint64_t field, uint64_t stream, int64_t sample) {
  return hashKey(seed ^ stream, field, static_cast<uint64_t>(sample));
}

// out[j] ~ N(0, 1) for j < n: pair p from the counter hashes of 2p and 2p+1
// under `base` (Box-Muller). In float: the samples are f32 anyway, and the
// float log and sincos halve the cost of a batch (it is made on every step);
// 24-bit uniforms cut the tails at 5.8 sigma.
void normals(uint64_t base, float* out, int64_t n) {
  for (int64_t p = 0; 2 * p < n; ++p) {
    uint64_t h1 = mix64(base ^ static_cast<uint64_t>(2 * p)), h2 = mix64(base ^ static_cast<uint64_t>(2 * p + 1));
    float u1 = (static_cast<float>(h1 >> 40) + 1.0f) * 0x1.0p-24f;  // (0, 1]
    float theta = 6.28318531f * static_cast<float>(h2 >> 40) * 0x1.0p-24f;
    float r = std::sqrt(-2.0f * std::log(u1)), s, c;
    ::sincosf(theta, &s, &c);
    out[2 * p] = r * c;
    if (2 * p + 1 < n) out[2 * p + 1] = r * s;
  }
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
  pt_.resize(static_cast<size_t>(inputs * kRank));
  a_.resize(static_cast<size_t>(classes * kRank));
  normals(baseKey(seed, field, kProjectionStream, 0), pt_.data(), inputs * kRank);
  normals(baseKey(seed, field, kClassStream, 0), a_.data(), classes * kRank);
  auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(inputs > 0 ? inputs : 1)));
  for (float& v : pt_) v *= scale;
}

void Teacher::label(const float* x, int32_t* out, int64_t elements) const {
  double z[kRank] = {};
  for (int64_t d = 0; d < inputs_; ++d) {  // kRank independent sums: vectorisable without reordering
    const float* col = pt_.data() + d * kRank;
    double xd = x[d];
    for (int k = 0; k < kRank; ++k) z[k] += static_cast<double>(col[k]) * xd;
  }
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
