// Picking the next token from a language model's logits (`dtlc generate`):
// greedy at temperature 0, else a seeded draw from the softmax of the
// logits / temperature over the top-k classes. Deterministic for a seed:
// the generator is std::mt19937_64 (its sequence is fixed by the C++
// standard) and the uniform draw is made here, not by a library distribution.
#pragma once

#include <cstdint>
#include <random>

namespace dtl::cli {

struct SampleOptions {
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 0;         // keep the k largest logits (and any equal to the k-th); 0: all
};

// A double in [0, 1) from the top 53 bits of one draw.
double uniform01(std::mt19937_64& rng);

// The next token among `n` classes; -1 when a logit is NaN. Greedy picks
// the first of equal maxima and draws nothing from `rng`.
int64_t sampleToken(const float* logits, int64_t n, const SampleOptions& o, std::mt19937_64& rng);

}  // namespace dtl::cli
