// Differential test of the x86 JIT: random regions (tests/support/
// random_region.h), each checked op by op against the reference kernels
// (region_oracle.h). ctest runs seeds 1–500 in five tests (ctest -j spreads
// them) and every fuzz/seeds/region and fuzz/regressions/region input (the
// libFuzzer target's bytes, fuzz/fuzz_region.cc). For a longer hunt:
// DTL_CODEGEN_DIFF_CASES=5000 DTL_CODEGEN_DIFF_SEED=1000 build/bin/codegen_test
// --gtest_filter=CodegenDiff.SeedsFromTheEnvironment.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "tests/support/random_region.h"
#include "tests/unit/codegen_check.h"

namespace dtl::codegen::testing {
namespace {

uint64_t envNumber(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// Seeds [first, first + cases); stops at the first failing region (the one to read).
void checkSeeds(uint64_t first, uint64_t cases) {
  Stats stats;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t seed = first; seed < first + cases; ++seed) {
    RandomCase c = randomCase(seed);
    std::string report;
    compareWithReference(c.region, c.inputs, &stats, &report);
    if (!report.empty()) {
      ADD_FAILURE() << "seed " << seed << " (rerun: DTL_CODEGEN_DIFF_SEED=" << seed
                    << " DTL_CODEGEN_DIFF_CASES=1 build/bin/codegen_test"
                       " --gtest_filter=CodegenDiff.SeedsFromTheEnvironment)\n"
                    << report;
      return;
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("seeds %llu-%llu: %llu random regions in %.1f s:\n%s", static_cast<unsigned long long>(first),
              static_cast<unsigned long long>(first + cases - 1), static_cast<unsigned long long>(cases), s,
              formatStats(stats).c_str());
}

TEST(CodegenDiff, Seeds1To100) { checkSeeds(1, 100); }
TEST(CodegenDiff, Seeds101To200) { checkSeeds(101, 100); }
TEST(CodegenDiff, Seeds201To300) { checkSeeds(201, 100); }
TEST(CodegenDiff, Seeds301To400) { checkSeeds(301, 100); }
TEST(CodegenDiff, Seeds401To500) { checkSeeds(401, 100); }

// The f32 gradients of the transcendentals (randomGradientCase): 300 regions.
TEST(CodegenDiff, TranscendentalGradientSeeds) {
  Stats stats;
  std::map<std::string, int> grads;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    RandomCase c = randomGradientCase(seed);
    EXPECT_EQ(c.region.validate(), "") << seed;
    for (const RegionNode& n : c.region.nodes())
      if (n.kind == Kind::UnaryGrad) grads[fnName(n.unary)]++;
    std::string report;
    compareWithReference(c.region, c.inputs, &stats, &report);
    if (!report.empty()) {
      ADD_FAILURE() << "gradient seed " << seed << "\n" << report;
      return;
    }
  }
  for (const char* fn : {"exp", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh"}) EXPECT_GE(grads[fn], 50) << fn;
  std::printf("300 gradient regions:\n%s", formatStats(stats).c_str());
}

TEST(CodegenDiff, SeedsFromTheEnvironment) {
  uint64_t cases = envNumber("DTL_CODEGEN_DIFF_CASES", 0);
  if (cases == 0) GTEST_SKIP() << "set DTL_CODEGEN_DIFF_CASES (and DTL_CODEGEN_DIFF_SEED, default 1) for a longer hunt";
  checkSeeds(envNumber("DTL_CODEGEN_DIFF_SEED", 1), cases);
}

// The fuzz target's inputs, through the same generator and oracle: every
// region the fuzzer ever broke stays fixed in this build too (no clang needed).
TEST(CodegenDiff, FuzzSeedsAndRegressionsMatch) {
  namespace fs = std::filesystem;
  int files = 0;
  for (const char* folder : {"fuzz/seeds/region", "fuzz/regressions/region"}) {
    fs::path dir = fs::path(DTL_SOURCE_DIR) / folder;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      if (e.path().filename().string()[0] == '.') continue;  // .gitkeep (scripts/fuzz.sh skips it too)
      std::ifstream in(e.path(), std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      RandomCase c = randomCaseFromBytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      std::string report;
      compareWithReference(c.region, c.inputs, nullptr, &report);
      EXPECT_EQ(report, "") << e.path();
      ++files;
    }
  }
  EXPECT_GE(files, 4) << "fuzz/seeds/region holds the target's seeds";
}

// The oracle notices an error just past each bound (a test that could not fail proves nothing).
TEST(CodegenDiff, OracleCatchesWhatIsJustPastTheBound) {
  Region r("tampered");
  int x = r.input("x", Shape{{{"rows", 3}, {"cols", 5}}});
  int e = r.unary(UnaryFn::Exp, x);
  int a = r.binary(BinaryFn::Add, e, x);
  int s = r.reduce(ReduceFn::Sum, a, "cols");
  int m = r.reduce(ReduceFn::Max, a, "cols");
  r.output("s", s);
  r.output("m", m);
  r.output("lt", r.binary(BinaryFn::Lt, x, r.constant(0.5f)));
  Values in = {0.1f, -2, 3, 0.25f, 1, -0.5f, 2, 7, -1, 0.5f, 4, 4, -3, 1.5f, 0};
  std::string report;
  compareWithReference(r, {in}, nullptr, &report);
  ASSERT_EQ(report, "");

  auto expectCaught = [&](const char* what, int node, auto change, const char* needle) {
    OracleOptions o;
    o.tamper = [&](int id, Values& v) {
      if (id == node) change(v);
    };
    compareWithReference(r, {in}, nullptr, &report, o);
    EXPECT_NE(report.find(needle), std::string::npos) << what << ":\n" << report;
  };
  // the JIT's exp is within ulpBound of the reference: 2·bound + 1 from it is past the bound
  expectCaught("exp past its bound", e,
               [](Values& v) {
                 for (int64_t k = 0; k <= 2 * ulpBound(UnaryFn::Exp); ++k) v[4] = std::nextafter(v[4], 1e9f);
               },
               "%1 (exp) element 4");
  expectCaught("add 1 ulp off", a, [](Values& v) { v[2] = std::nextafter(v[2], 1e9f); }, "%2 (add) element 2");
  expectCaught("NaN for a number", a, [](Values& v) { v[0] = NAN; }, "%2 (add) element 0");
  // Row 0's Σ|x| is ~40; γ₅·40 ≈ 1.2e-5, so 1e-4 is past the bound.
  expectCaught("sum past γₙ·Σ|x|", s, [](Values& v) { v[0] += 1e-4f; }, "%3 (sum) element 0");
  expectCaught("max 1 ulp off", m, [](Values& v) { v[1] = std::nextafter(v[1], 1e9f); }, "%4 (max) element 1");
}

TEST(CodegenDiff, GeneratorIsDeterministicAndCoversTheEdges) {
  EXPECT_EQ(printRegion(randomCase(42).region), printRegion(randomCase(42).region));
  EXPECT_NE(printRegion(randomCase(42).region), printRegion(randomCase(43).region));
  const uint8_t bytes[] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
  RandomCase b1 = randomCaseFromBytes(bytes, sizeof bytes), b2 = randomCaseFromBytes(bytes, sizeof bytes);
  EXPECT_EQ(printRegion(b1.region), printRegion(b2.region));
  EXPECT_EQ(b1.inputs.size(), b2.inputs.size());
  for (size_t k = 0; k < b1.inputs.size() && k < b2.inputs.size(); ++k)
    EXPECT_EQ(0, std::memcmp(b1.inputs[k].data(), b2.inputs[k].data(), b1.inputs[k].size() * sizeof(float)));

  bool empty = false, unit = false, odd = false, broadcast = false, scalar_input = false, flag = false;
  bool softmax = false, nan = false, inf = false, denormal = false;
  std::map<std::string, int> ops;
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    RandomCase c = randomCase(seed);
    const Region& r = c.region;
    EXPECT_EQ(r.validate(), "");
    for (const RegionNode& n : r.nodes()) {
      for (const Dim& d : n.shape.dims) empty |= d.size == 0, unit |= d.size == 1, odd |= d.size > 1 && d.size % 2;
      scalar_input |= n.kind == Kind::Input && n.shape.scalar();
      flag |= n.dtype == DType::Bool;
      if (n.kind == Kind::Unary) ops[fnName(n.unary)]++;
      if (n.kind == Kind::Binary) {
        ops[fnName(n.binary)]++;
        broadcast |= r.node(n.a).shape != n.shape || r.node(n.b).shape != n.shape;
      }
      if (n.kind == Kind::Reduce) ops[fnName(n.reduce)]++;
      if (n.kind == Kind::UnaryGrad) ops[std::string(fnName(n.unary)) + "_grad"]++;
      if (n.kind == Kind::Select) ops["select"]++;
      // a normalization's signature: an rsqrt of a mean plus eps
      if (n.kind == Kind::Unary && n.unary == UnaryFn::Rsqrt && r.node(n.a).kind == Kind::Binary &&
          r.node(r.node(n.a).a).kind == Kind::Reduce)
        ops["norm"]++;
      // softmax's signature: a max whose result a sub then an exp consume
      softmax |= n.kind == Kind::Binary && n.binary == BinaryFn::Sub && r.node(n.b).kind == Kind::Reduce &&
                 r.node(n.b).reduce == ReduceFn::Max;
    }
    for (const Values& v : c.inputs)
      for (float f : v) nan |= std::isnan(f), inf |= std::isinf(f), denormal |= std::fpclassify(f) == FP_SUBNORMAL;
  }
  EXPECT_TRUE(empty && unit && odd && broadcast && scalar_input && flag && softmax && nan && inf && denormal)
      << "empty " << empty << " unit " << unit << " odd " << odd << " broadcast " << broadcast << " scalar input "
      << scalar_input << " flag " << flag << " softmax " << softmax << " nan " << nan << " inf " << inf << " denormal "
      << denormal;
  for (UnaryFn fn : kAllUnaryFns) EXPECT_GE(ops[fnName(fn)], 10) << fnName(fn);
  for (BinaryFn fn : kAllBinaryFns) EXPECT_GE(ops[fnName(fn)], 10) << fnName(fn);
  for (ReduceFn fn : kAllReduceFns) EXPECT_GE(ops[fnName(fn)], 10) << fnName(fn);
  for (UnaryFn fn : kAllUnaryFns) EXPECT_GE(ops[std::string(fnName(fn)) + "_grad"], 5) << fnName(fn) << "_grad";
  EXPECT_GE(ops["select"], 10);
  EXPECT_GE(ops["norm"], 10);
}

}  // namespace
}  // namespace dtl::codegen::testing
