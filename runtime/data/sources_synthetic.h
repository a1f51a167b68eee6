// synthetic(seed = s): values computed from (seed, field, sample, element)
// alone, so any sample is reproducible by itself, and the fixed random linear
// teacher that labels them (the rules are documented on Dataset in loader.h).
#pragma once

#include <cstdint>
#include <vector>

namespace dtl::rt::data::detail {

// Float fields: N(0, 1); out[j] is element j of the sample. `field` is
// nameHash(field name). Elements 2p and 2p+1 are the cos and sin halves of
// one Box–Muller pair (box_muller.h), so a sample costs one hash, one log and
// one sincos per two values.
void syntheticNormals(uint64_t seed, uint64_t field, int64_t sample, float* out, int64_t n);
// Integer input fields: uniform in [0, range).
void syntheticInts(uint64_t seed, uint64_t field, int64_t sample, int32_t* out, int64_t n, int64_t range);
// Integer fields derived from an integer input (language modelling).
inline int32_t lmTarget(int64_t token, int64_t range) { return static_cast<int32_t>((token * 7 + 3) % range); }

// label[j] = argmax_c (A · rotate(P · x, j))_c with P: [kRank, inputs] ~ N(0, 1/inputs)
// and A: [classes, kRank] ~ N(0, 1); ties go to the lower class.
class Teacher {
 public:
  static constexpr int kRank = 16;
  Teacher(uint64_t seed, uint64_t field, int64_t inputs, int64_t classes);
  void label(const float* x, int32_t* out, int64_t elements) const;  // x: [inputs]

 private:
  int64_t inputs_, classes_;
  std::vector<double> pt_;  // P transposed: [inputs, kRank], so z accumulates in kRank lanes (f32 values)
  std::vector<float> a_;   // [classes, kRank]
};

}  // namespace dtl::rt::data::detail
