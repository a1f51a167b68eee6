// Parameter initialisation from the spec's `init` (zeros, ones,
// normal(std, mean), uniform(lo, hi), xavier(gain), kaiming(a)), seeded per
// parameter path so adding a parameter does not change the others. Fan-in is
// the first dim after the repeat dims, fan-out the product of the rest.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/exec/trainer.h"

namespace dtl::rt {

std::vector<float> initParam(const ParamSpec& p, uint64_t seed);

}  // namespace dtl::rt
