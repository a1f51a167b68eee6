// The generated multi-tensor optimiser update (compiler/codegen/emit_update.h,
// runtime/jit/jit_update.h) against `fast`'s hand-written loops
// (Optimizer::update, itself bitwise equal to PyTorch 1.13: optim_test):
// every variant, several steps, tensors of 0, 1, odd and many-chunk sizes,
// NaN, ±inf, ±0, denormals and huge values in params and grads, bit for
// bit (a NaN matches any NaN: its payload may differ); 1 and 2 threads bit
// for bit; refused steps change nothing; every variant's PTX through ptxas.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "compiler/codegen/emit_update.h"
#include "runtime/jit/jit_update.h"
#include "tests/support/optimizer_configs.h"
#include "tests/unit/codegen_check.h"

namespace dtl::jit {
namespace {

using rt::optim::Optimizer;
using rt::optim::OptimizerConfig;
using rt::optim::ParamState;
using rt::optim::TensorStep;

using dtl::testing::everyOptimizerConfig;
using dtl::testing::optimizerConfig;
using dtl::testing::optimizerValues;

// Bit for bit, but any NaN matches any NaN (x86 keeps an operand's payload,
// and which operand LLVM puts first is its own choice).
::testing::AssertionResult sameBits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << what << ": " << a.size() << " vs " << b.size() << " elements";
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], 4) != 0)
      return ::testing::AssertionFailure() << what << "[" << i << "]: " << a[i] << " vs " << b[i];
  }
  return ::testing::AssertionSuccess();
}

struct Model {
  std::vector<std::vector<float>> params, grads;
  std::vector<ParamState> states;
};

Model makeModel(const std::vector<int64_t>& sizes, uint64_t seed, bool specials) {
  std::mt19937_64 rng(seed);
  Model m;
  for (int64_t n : sizes) {
    m.params.push_back(optimizerValues(n, rng, specials));
    m.grads.push_back(optimizerValues(n, rng, specials));
  }
  m.states.resize(sizes.size());
  return m;
}

std::vector<TensorStep> steps(Model& m) {
  std::vector<TensorStep> t;
  for (size_t k = 0; k < m.params.size(); ++k)
    t.push_back({"p" + std::to_string(k), m.params[k].data(), m.grads[k].data(),
                 static_cast<int64_t>(m.params[k].size()), &m.states[k]});
  return t;
}

void newGrads(Model& m, uint64_t seed, bool specials) {
  std::mt19937_64 rng(seed);
  for (std::vector<float>& g : m.grads) g = optimizerValues(static_cast<int64_t>(g.size()), rng, specials);
}

void expectSame(const Model& a, const Model& b, const std::string& what) {
  for (size_t k = 0; k < a.params.size(); ++k) {
    const std::string t = what + " tensor " + std::to_string(k);
    EXPECT_TRUE(sameBits(a.params[k], b.params[k], t + " param"));
    EXPECT_TRUE(sameBits(a.states[k].a, b.states[k].a, t + " state a"));
    EXPECT_TRUE(sameBits(a.states[k].b, b.states[k].b, t + " state b"));
  }
}

std::unique_ptr<rt::optim::MultiTensorUpdate> runner(const OptimizerConfig& c, int64_t chunk = kUpdateChunk) {
  std::string error;
  UpdateOptions o;
  o.chunk = chunk;
  o.parallel_elements = 0;  // two threads means two threads, however small the step
  auto r = makeJitUpdate(c, o, &error);
  EXPECT_TRUE(r) << error;
  return r;
}

// Four steps with a changing rate and fresh gradients, fast and generated side by side.
void compareWithFast(const OptimizerConfig& c, const std::vector<int64_t>& sizes, int64_t chunk, int threads,
                     bool specials) {
  Model fast = makeModel(sizes, 7, specials), gen = fast;
  Optimizer opt(c);
  auto r = runner(c, chunk);
  ASSERT_TRUE(r);
  for (int64_t step = 1; step <= 4; ++step) {
    const double lr = c.lr * (1.0 - 0.1 * static_cast<double>(step));
    for (size_t k = 0; k < fast.params.size(); ++k)
      opt.update(fast.params[k].data(), fast.grads[k].data(), static_cast<int64_t>(fast.params[k].size()),
                 fast.states[k], step, lr);
    ASSERT_EQ(r->run(opt, steps(gen), step, lr, threads), "");
    expectSame(fast, gen, c.name + " step " + std::to_string(step));
    newGrads(fast, 100 + static_cast<uint64_t>(step), specials);
    newGrads(gen, 100 + static_cast<uint64_t>(step), specials);
  }
}

const std::vector<int64_t> kSizes = {0, 1, 7, 1000, 33, 4097};

TEST(OptimJit, EveryVariantEqualsFastBitwise) {
  for (const OptimizerConfig& c : everyOptimizerConfig()) {
    SCOPED_TRACE(c.name + " momentum " + std::to_string(c.momentum) + " wd " + std::to_string(c.weight_decay) +
                 (c.nesterov ? " nesterov" : ""));
    compareWithFast(c, kSizes, kUpdateChunk, 1, /*specials=*/false);
    compareWithFast(c, kSizes, 64, 1, false);  // every tensor but the smallest in several chunks
  }
}

TEST(OptimJit, NonFiniteValuesEqualFastBitwise) {
  for (const OptimizerConfig& c : everyOptimizerConfig()) {
    SCOPED_TRACE(c.name + " momentum " + std::to_string(c.momentum) + " wd " + std::to_string(c.weight_decay));
    compareWithFast(c, kSizes, 64, 1, /*specials=*/true);
  }
}

// Subnormal first moments and momentum buffers with zero gradients (runtime/optim/subnormal.h):
// the generated kernel's emulation and fast's give the same bits, in blocks
// with and without one, over parameters it keeps and ones it must move.
TEST(OptimJit, SubnormalFirstMomentsEqualFastBitwise) {
  const std::vector<int64_t> sizes = {1, 63, 64, 65, 1000, 4097};
  std::vector<OptimizerConfig> configs = dtl::testing::extremeOptimizerConfigs();
  for (const OptimizerConfig& c : {optimizerConfig("sgd", 0.05, 0.9, std::numeric_limits<double>::infinity()),
                                   optimizerConfig("adam", 100), optimizerConfig("adam", 1e30)})
    configs.push_back(c);
  for (const OptimizerConfig& c : configs) {
    SCOPED_TRACE(c.name + " lr " + std::to_string(c.lr) + " wd " + std::to_string(c.weight_decay));
    Model fast = makeModel(sizes, 21, true);
    std::mt19937_64 rng(5);
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<float>& g = fast.grads[k];
      fast.states[k].a = optimizerValues(sizes[k], rng, true);
      fast.states[k].b = optimizerValues(sizes[k], rng, false);
      for (size_t i = 0; i < g.size(); ++i) {
        if ((i / 64) % 3 == 1 || rng() % 4 == 0) continue;  // some blocks without one
        uint32_t bits = (1 + static_cast<uint32_t>(rng() % 0x7fffff)) | (rng() % 2 ? 0x80000000u : 0u);
        std::memcpy(&fast.states[k].a[i], &bits, 4);
        g[i] = rng() % 2 ? 0.0f : -0.0f;
        fast.states[k].b[i] = std::fabs(fast.states[k].b[i]);
        if (rng() % 8 == 0) fast.params[k][i] = rng() % 2 ? 0.0f : 1e-41f;  // a step that moves it
        if (rng() % 16 == 0) fast.params[k][i] = rng() % 2 ? 0x1p56f : -std::numeric_limits<float>::infinity();
      }
    }
    Model gen = fast;
    OptimizerConfig cfg = c;
    if (cfg.name == "adam" && cfg.lr >= 100) cfg.eps = cfg.lr > 1e6 ? 0 : 0x1p-149;  // denom 0 or subnormal
    Optimizer opt(cfg);
    auto r = runner(cfg, 1000);
    ASSERT_TRUE(r);
    for (int64_t step = 1; step <= 3; ++step) {
      for (size_t k = 0; k < fast.params.size(); ++k)
        opt.update(fast.params[k].data(), fast.grads[k].data(), sizes[k], fast.states[k], step, c.lr);
      ASSERT_EQ(r->run(opt, steps(gen), step, c.lr, 2), "");
      expectSame(fast, gen, c.name + " step " + std::to_string(step));
    }
  }
}

TEST(OptimJit, DefaultChunksSplitALargeTensorOverTwoThreads) {
  const std::vector<int64_t> sizes = {3 * kUpdateChunk + 17, 5, kUpdateChunk};
  for (const OptimizerConfig& c :
       {optimizerConfig("sgd", 0.05, 0.9, 0, 0.01, true), optimizerConfig("adamw", 1e-3, 0, 0, 0.1)}) {
    compareWithFast(c, sizes, kUpdateChunk, 2, true);
  }
}

TEST(OptimJit, OneAndTwoThreadsAreBitwiseAlike) {
  for (const OptimizerConfig& c : everyOptimizerConfig()) {
    Model one = makeModel(kSizes, 11, true), two = one;
    Optimizer opt(c);
    auto r = runner(c, 64);
    ASSERT_TRUE(r);
    for (int64_t step = 1; step <= 3; ++step) {
      ASSERT_EQ(r->run(opt, steps(one), step, c.lr, 1), "");
      ASSERT_EQ(r->run(opt, steps(two), step, c.lr, 2), "");
    }
    auto bytes = [](const std::vector<float>& x) { return std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4); };
    for (size_t k = 0; k < one.params.size(); ++k) {  // exact bits, NaN payloads included: the same code
      EXPECT_EQ(bytes(one.params[k]), bytes(two.params[k])) << c.name;
      EXPECT_EQ(bytes(one.states[k].a), bytes(two.states[k].a)) << c.name;
      EXPECT_EQ(bytes(one.states[k].b), bytes(two.states[k].b)) << c.name;
    }
  }
}

// The generated kernel really is what runs: a variant other than the
// optimiser's (sgd's later steps on its first) gives other bits.
TEST(OptimJit, TheWrongVariantIsCaught) {
  Model fast = makeModel({1000}, 3, false), gen = fast;
  const OptimizerConfig c = optimizerConfig("sgd", 0.05, 0.9, 0.5);
  Optimizer opt(c);
  opt.update(fast.params[0].data(), fast.grads[0].data(), 1000, fast.states[0], 1, c.lr);
  std::string error;
  auto k = codegen::compileUpdateX86(opt.variant(false), &error);  // the first step's variant is `first`
  ASSERT_TRUE(k) << error;
  gen.states[0].a.assign(1000, 0.0f);
  optim_step::Chunk chunk{gen.params[0].data(), gen.grads[0].data(), gen.states[0].a.data(), nullptr, 1000};
  k->run(&chunk, 0, 1, opt.scalars(1, c.lr));
  EXPECT_FALSE(sameBits(fast.params[0], gen.params[0], "param"));
}

TEST(OptimJit, ARefusedStepChangesNothing) {
  const OptimizerConfig c = optimizerConfig("sgd", 0.1, 0.9);
  Optimizer opt(c);
  auto r = runner(c);
  ASSERT_TRUE(r);
  Model m = makeModel({4, 3}, 5, false);
  const std::vector<std::vector<float>> before = m.params;
  m.states[1].a.assign(2, 0.0f);  // the wrong size for 3 elements
  const std::string why = r->run(opt, steps(m), 1, c.lr, 1);
  EXPECT_NE(why.find("update of `p1`: optimizer: momentum_buffer has 2 elements, tensor has 3"), std::string::npos) << why;
  EXPECT_EQ(m.params, before);
  EXPECT_TRUE(m.states[0].a.empty());  // created for this step, dropped with it

  const OptimizerConfig a = optimizerConfig("adam", 1e-3);
  auto ra = runner(a);
  ASSERT_TRUE(ra);
  Model n = makeModel({4}, 5, false);
  EXPECT_NE(ra->run(Optimizer(a), steps(n), 0, a.lr, 1).find("step counts from 1"), std::string::npos);
  EXPECT_TRUE(n.states[0].a.empty());
}

TEST(OptimJit, VariantsOfAnOptimizer) {
  EXPECT_EQ(updateVariants(Optimizer(optimizerConfig("sgd", 0.1))).size(), 1u);
  EXPECT_EQ(updateVariants(Optimizer(optimizerConfig("sgd", 0.1, 0.9))).size(), 2u);  // its first step and the rest
  EXPECT_EQ(updateVariants(Optimizer(optimizerConfig("adamw", 0.1))).size(), 1u);
  EXPECT_EQ(updateVariants(Optimizer(optimizerConfig("adamw", 0.1)))[0].name(), "adamw");
}

// O3 vectorises every variant's element loop (its pointers are noalias),
// with vector fma where the loop has fma: what makes one core stream at
// memory speed.
TEST(OptimJit, TheX86KernelsAreVectorised) {
  for (const OptimizerConfig& c : everyOptimizerConfig()) {
    for (const optim_step::Variant& v : updateVariants(Optimizer(c))) {
      const std::string ir = codegen::updateX86Ir(v, /*optimised=*/true);
      EXPECT_NE(ir.find("x float> @llvm.fma.v"), std::string::npos) << v.name() << "\n" << ir;
      for (const char* flag : {" fast ", " reassoc ", " contract ", " nnan ", " ninf ", " nsz ", " arcp ", " afn "})
        EXPECT_EQ(ir.find(flag), std::string::npos) << v.name() << ": fast-math flag" << flag;
    }
  }
}

// Every variant's PTX for sm_90 assembles; fma.rn where the loop has fma,
// no flush-to-zero arithmetic (denormals kept, as on x86).
TEST(OptimJit, PtxOfEveryVariantAssembles) {
  namespace fs = std::filesystem;
  const std::string ptxas = codegen::testing::ptxasPath();
  const fs::path dir = fs::temp_directory_path() / ("dtl_optim_ptx_" + std::to_string(getpid()));
  fs::create_directories(dir);
  int assembled = 0;
  for (const OptimizerConfig& c : everyOptimizerConfig()) {
    for (const optim_step::Variant& v : updateVariants(Optimizer(c))) {
      std::string ptx, error;
      ASSERT_TRUE(codegen::updatePtx(v, &ptx, &error)) << error;
      EXPECT_NE(ptx.find(".entry " + codegen::updateSymbol(v)), std::string::npos) << ptx;
      EXPECT_NE(ptx.find("fma.rn.f32"), std::string::npos) << v.name();
      EXPECT_EQ(ptx.find(".ftz"), std::string::npos) << v.name();
      if (v.rule == optim_step::Variant::Rule::Adam) {
        EXPECT_NE(ptx.find("sqrt.rn.f32"), std::string::npos) << v.name();
        EXPECT_NE(ptx.find("div.rn.f32"), std::string::npos) << v.name();
      }
      if (ptxas.empty()) continue;
      const fs::path in = dir / (v.name() + ".ptx"), log = dir / (v.name() + ".log");
      std::ofstream(in) << ptx;
      const std::string cmd = "'" + ptxas + "' -arch=sm_90 -o '" + (dir / (v.name() + ".cubin")).string() + "' '" +
                              in.string() + "' > '" + log.string() + "' 2>&1";
      std::stringstream text;
      const int rc = std::system(cmd.c_str());
      text << std::ifstream(log).rdbuf();
      EXPECT_EQ(rc, 0) << v.name() << ": " << text.str() << ptx;
      ++assembled;
    }
  }
  fs::remove_all(dir);
  if (ptxas.empty()) GTEST_SKIP() << "PTX generated and checked, but not assembled: no ptxas";
  EXPECT_EQ(assembled, 14);
}

}  // namespace
}  // namespace dtl::jit
