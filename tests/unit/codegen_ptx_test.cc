// The NVPTX target without a GPU: every op class, a softmax, a bias + relu
// and random regions become PTX for sm_90 that the CUDA toolkit's ptxas
// assembles (skipped, saying so, where ptxas is absent); libdevice is linked
// and inlined, denormals are kept (no .ftz arithmetic of ours). Nothing here
// runs the kernels: tests/gpu/ptx_check.cc does, where a GPU is.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/codegen/ptx.h"
#include "core/hash.h"
#include "tests/support/random_region.h"
#include "tests/unit/codegen_check.h"

namespace dtl::codegen::testing {
namespace {

namespace fs = std::filesystem;

class CodegenPtx : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtl_codegen_ptx_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // "" when ptxas accepts the module, else its messages.
  std::string assemble(const std::string& ptxas, const PtxModule& m, const std::string& name) {
    std::string in = (dir_ / (name + ".ptx")).string(), log = (dir_ / (name + ".log")).string();
    std::ofstream(in) << m.ptx;
    std::string cmd = "'" + ptxas + "' -arch=sm_90 -o '" + (dir_ / (name + ".cubin")).string() + "' '" + in + "' > '" +
                      log + "' 2>&1";
    if (std::system(cmd.c_str()) == 0) return "";
    std::stringstream text;
    text << std::ifstream(log).rdbuf();
    return "ptxas failed: " + text.str();
  }
  fs::path dir_;
};

void expectWellFormed(const Region& r, const PtxModule& m) {
  EXPECT_NE(m.ptx.find(".version 7.8"), std::string::npos);
  EXPECT_NE(m.ptx.find(".target sm_90"), std::string::npos);
  size_t partial_kernels = 0;  // one per deferred sum, after its phase's (emit_llvm.h)
  for (const PlanPhase& phase : m.plan.phases) partial_kernels += phase.partials.size();
  ASSERT_EQ(m.kernels.size(), m.plan.phases.size() + partial_kernels);
  for (const PtxKernel& k : m.kernels) EXPECT_NE(m.ptx.find(".entry " + k.name), std::string::npos) << k.name;
  EXPECT_EQ(m.ptx.find("__nv_"), std::string::npos) << "libdevice calls left in " << r.name();
  // No f32 arithmetic of ours flushes denormals. libdevice's double functions
  // seed with ex2.approx.ftz.f32 / rcp.approx.ftz.f64 (only .ftz forms exist)
  // and refine in double, where an f32 value is never denormal.
  std::istringstream lines(m.ptx);
  for (std::string line; std::getline(lines, line);)
    if (line.find(".ftz") != std::string::npos && line.find("ex2.approx.ftz.f32") == std::string::npos &&
        line.find("rcp.approx.ftz.f64") == std::string::npos)
      ADD_FAILURE() << "denormals flushed in " << r.name() << ": " << line;
}

TEST_F(CodegenPtx, EveryOpClassAssemblesForSm90) {
  std::string ptxas = ptxasPath();
  for (const Region& r : opClassRegions()) {
    PtxModule m;
    std::string error;
    ASSERT_TRUE(compilePtx(r, &m, &error)) << error;
    expectWellFormed(r, m);
    if (!ptxas.empty()) EXPECT_EQ(assemble(ptxas, m, r.name()), "") << r.name() << "\n" << m.ptx;
  }
  if (ptxas.empty()) GTEST_SKIP() << "PTX generated and checked, but not assembled: no ptxas on PATH or in /usr/local/cuda/bin";
}

TEST_F(CodegenPtx, RandomRegionsAssembleForSm90) {
  std::string ptxas = ptxasPath();
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    RandomCase c = randomCase(seed);
    PtxModule m;
    std::string error;
    ASSERT_TRUE(compilePtx(c.region, &m, &error)) << error;
    expectWellFormed(c.region, m);
    if (!ptxas.empty()) EXPECT_EQ(assemble(ptxas, m, c.region.name()), "") << printRegion(c.region) << m.ptx;
  }
  if (ptxas.empty()) GTEST_SKIP() << "PTX generated and checked, but not assembled: no ptxas on PATH or in /usr/local/cuda/bin";
}

TEST_F(CodegenPtx, KernelsFollowThePhasesAndTheirPoints) {
  Region r("softmax");
  r.output("y", r.softmax(r.input("x", Shape{{{"rows", 4}, {"classes", 10}}}), "classes"));
  PtxModule m;
  std::string error;
  ASSERT_TRUE(compilePtx(r, &m, &error)) << error;
  ASSERT_EQ(m.kernels.size(), 3u);  // max, sum, then the output
  EXPECT_EQ(m.kernels[0].threads, 4);
  EXPECT_EQ(m.kernels[1].threads, 4);
  EXPECT_EQ(m.kernels[2].threads, 40);
  EXPECT_EQ(m.kernels[2].name, "dtl_" + hex64(regionHash(r)) + "_p2");
}

// A bias gradient over batch and seq (deferred, kernel_plan.h step 5): the
// output phase, then one thread per (chunk, d) summing its chunk's rows into
// the partial, then the tail's combine; assembled by ptxas.
TEST_F(CodegenPtx, DeferredSumsGetAPartialKernelAndATail) {
  Region r("gelu_grad_bias");
  const Shape s{{{"batch", 300}, {"seq", 13}, {"d", 64}}};
  int dx = r.unaryGrad(UnaryFn::Gelu, r.input("x", s), r.input("dy", s));
  r.output("dx", dx);
  r.output("db", r.reduce(ReduceFn::Sum, r.reduce(ReduceFn::Sum, dx, "batch"), "seq"));
  PtxModule m;
  std::string error;
  ASSERT_TRUE(compilePtx(r, &m, &error)) << error;
  expectWellFormed(r, m);
  ASSERT_GT(m.plan.chunks, 1);
  ASSERT_EQ(m.kernels.size(), 3u);
  const std::string symbol = "dtl_" + hex64(regionHash(r));
  EXPECT_EQ(m.kernels[0].threads, 300 * 13 * 64);
  EXPECT_EQ(m.kernels[1].name, symbol + "_p0_s0");
  EXPECT_EQ(m.kernels[1].threads, m.plan.chunks * 64);
  EXPECT_EQ(m.kernels[2].name, symbol + "_p1");  // the combine
  EXPECT_EQ(m.kernels[2].threads, 64);
  std::string ptxas = ptxasPath();
  if (ptxas.empty()) GTEST_SKIP() << "no ptxas";
  EXPECT_EQ(assemble(ptxas, m, r.name()), "") << m.ptx;
}

// A row statistic over the last dim (a layer norm's mean over d = 768):
// a warp per row (32 threads per point), lanes combined by shuffles; a row
// shorter than a warp keeps one thread per point.
TEST_F(CodegenPtx, LongRowsAreReducedByAWarpEach) {
  Region r("row_stats");
  int x = r.input("x", Shape{{{"rows", 40}, {"d", 768}}});
  r.output("mean", r.reduce(ReduceFn::Mean, x, "d"));
  r.output("max", r.reduce(ReduceFn::Max, x, "d"));
  Region short_rows("short_rows");
  short_rows.output("s", short_rows.reduce(ReduceFn::Sum, short_rows.input("x", Shape{{{"rows", 40}, {"d", 31}}}), "d"));
  PtxModule m, s;
  std::string error;
  ASSERT_TRUE(compilePtx(r, &m, &error)) << error;
  ASSERT_TRUE(compilePtx(short_rows, &s, &error)) << error;
  expectWellFormed(r, m);
  ASSERT_EQ(m.kernels.size(), 2u);
  EXPECT_EQ(m.kernels[0].threads, 32 * 40);
  EXPECT_EQ(m.kernels[1].threads, 32 * 40);
  EXPECT_NE(m.ptx.find("shfl.sync.bfly"), std::string::npos);
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].threads, 40);
  EXPECT_EQ(s.ptx.find("shfl.sync"), std::string::npos);
  std::string ptxas = ptxasPath();
  if (ptxas.empty()) GTEST_SKIP() << "no ptxas";
  EXPECT_EQ(assemble(ptxas, m, r.name()), "") << m.ptx;
}

// A coordinate that is the point's low bit (a dim of size 2, i & 1): LLVM
// 16's NVPTX back end aborted the process on the i1 mul its DAG combiner made
// of (ctaid * ntid) & 1 (emit_llvm.cc, gridStride); found by running random
// regions' PTX on a GPU (tests/gpu/ptx_check.cc).
TEST_F(CodegenPtx, ADimOfTwoInnermostCompiles) {
  Region r("max_over_batch_seq2");
  r.output("y", r.reduce(ReduceFn::Max, r.input("x", Shape{{{"hidden", 62}, {"batch", 32}, {"seq", 2}}}), "batch"));
  PtxModule m;
  std::string error;
  ASSERT_TRUE(compilePtx(r, &m, &error)) << error;
  expectWellFormed(r, m);
  EXPECT_NE(m.ptx.find("mul.wide.u32"), std::string::npos);  // the products LLVM cannot see into
  std::string ptxas = ptxasPath();
  if (ptxas.empty()) GTEST_SKIP() << "no ptxas";
  EXPECT_EQ(assemble(ptxas, m, r.name()), "") << m.ptx;
}

TEST(CodegenPtxLibdevice, OnlyARegionWithTranscendentalsNeedsIt) {
  Region relu("relu");
  relu.output("y", relu.unary(UnaryFn::Relu, relu.input("x", Shape{{{"n", 5}}})));
  PtxModule m;
  std::string error;
  EXPECT_TRUE(compilePtx(relu, &m, &error, "/nonexistent/libdevice.10.bc")) << error;
  Region e("exp");
  e.output("y", e.unary(UnaryFn::Exp, e.input("x", Shape{{{"n", 5}}})));
  EXPECT_FALSE(compilePtx(e, &m, &error, "/nonexistent/libdevice.10.bc"));
  EXPECT_EQ(error, "cannot read /nonexistent/libdevice.10.bc: No such file or directory");
}

}  // namespace
}  // namespace dtl::codegen::testing
