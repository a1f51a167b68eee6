// Test support for the kernel generator: the oracle of
// tests/support/region_oracle.h (a region's JIT kernel against the reference
// kernels, op by op, and the bounds it allows) with its problems reported as
// gtest failures.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compiler/codegen/jit_x86.h"
#include "compiler/codegen/region.h"
#include "tests/support/random_region.h"
#include "tests/support/region_oracle.h"

namespace dtl::codegen::testing {

// Every output's values as float (a Bool output as 0 or 1). Fails the test
// (and returns empty) when the region does not compile.
std::vector<Values> runJit(const Region& r, const std::vector<Values>& inputs, Stats* stats = nullptr);

// compareWithReference; its report, if any, is a gtest failure. Returns the outputs.
std::vector<Values> checkRegion(const Region& r, const std::vector<Values>& inputs, Stats* stats);

// The ptxas to assemble PTX with: the one CMake found (DTL_PTXAS), else the
// first on PATH, else /usr/local/cuda/bin's; "" when there is none.
std::string ptxasPath();

}  // namespace dtl::codegen::testing
