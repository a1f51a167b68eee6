// Differential test of the x86 JIT: random regions (codegen_random.h), each
// checked op by op against the reference kernels (codegen_check.h). ctest
// runs a fixed set of seeds in a few seconds; for a longer hunt set
// DTL_CODEGEN_DIFF_CASES (count) and DTL_CODEGEN_DIFF_SEED (first seed).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "tests/unit/codegen_check.h"
#include "tests/unit/codegen_random.h"

namespace dtl::codegen::testing {
namespace {

uint64_t envNumber(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

TEST(CodegenDiff, RandomRegionsMatchTheReference) {
  uint64_t first = envNumber("DTL_CODEGEN_DIFF_SEED", 1);
  uint64_t cases = envNumber("DTL_CODEGEN_DIFF_CASES", 60);
  Stats stats;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t seed = first; seed < first + cases; ++seed) {
    RandomCase c = randomCase(seed);
    SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun: DTL_CODEGEN_DIFF_SEED=" + std::to_string(seed) +
                 " DTL_CODEGEN_DIFF_CASES=1)");
    checkRegion(c.region, c.inputs, &stats);
    if (::testing::Test::HasFailure()) break;  // the first failing region is the one to read
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%llu random regions in %.1f s:\n%s", static_cast<unsigned long long>(cases), s, formatStats(stats).c_str());
}

TEST(CodegenDiff, GeneratorIsDeterministicAndCoversTheEdges) {
  EXPECT_EQ(printRegion(randomCase(42).region), printRegion(randomCase(42).region));
  EXPECT_NE(printRegion(randomCase(42).region), printRegion(randomCase(43).region));
  bool empty = false, unit = false, reduce = false, broadcast = false, flag = false;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    RandomCase c = randomCase(seed);
    for (const RegionNode& n : c.region.nodes()) {
      for (const Dim& d : n.shape.dims) empty |= d.size == 0, unit |= d.size == 1;
      reduce |= n.kind == Kind::Reduce;
      flag |= n.dtype == DType::Bool;
      if (n.kind == Kind::Binary)
        broadcast |= c.region.node(n.a).shape != n.shape || c.region.node(n.b).shape != n.shape;
    }
  }
  EXPECT_TRUE(empty && unit && reduce && broadcast && flag)
      << "empty " << empty << " unit " << unit << " reduce " << reduce << " broadcast " << broadcast << " flag " << flag;
}

}  // namespace
}  // namespace dtl::codegen::testing
