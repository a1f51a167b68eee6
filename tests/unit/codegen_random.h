// Random valid regions for differential testing (in the spirit of Csmith):
// chains of elementwise ops and reductions over 1–3 random named dims
// (sizes 0, 1, odd and powers of two), inputs that broadcast and permute
// those dims, scalar constants, softmax and log-softmax shaped pieces, and
// input values with NaN, ±inf, ±0, denormals and huge magnitudes. The same
// seed gives the same region on every machine.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/codegen/region.h"
#include "tests/unit/codegen_check.h"

namespace dtl::codegen::testing {

struct RandomCase {
  Region region;
  std::vector<Values> inputs;  // one per region input
};

// At most `max_points` elements in any node (the product of all dims' sizes).
RandomCase randomCase(uint64_t seed, int64_t max_points = 4096);

}  // namespace dtl::codegen::testing
