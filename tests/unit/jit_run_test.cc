// `--kernels jit` in process: the samples' programs planned with fused
// regions and run by the executor with the x86 JIT's kernels must reach
// the reference backend's loss and gradients within the tolerance the fast
// backend is held to (backend_graph_test: 1e-4), bitwise the same on one
// thread or three; and the object cache: a second runner loads every kernel
// the first compiled and computes the same bits, and a cache file that is
// corrupt (a bad checksum, or a good checksum over bytes LLVM refuses) is
// compiled again, never trusted.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <fstream>
#include <map>
#include <thread>
#include <random>
#include <set>

#include "compiler/driver/frontend.h"
#include "compiler/program/plan_program.h"
#include "core/xxhash.h"
#include "runtime/exec/executor.h"
#include "runtime/jit/jit_regions.h"
#include "runtime/jit/jit_update.h"
#include "tests/unit/backend_test_util.h"
#include "tests/unit/scratch_dir.h"

namespace dtl::rt::testing {
namespace {

struct Sample {
  driver::Frontend fe;
  std::map<std::string, Buf> params, inputs;
};

// A GPT small enough for the reference kernels (char_gpt's take seconds).
const char* const kTinyGpt = R"(
model G {
  dim vocab = 16, seq = 8, d = 16, heads = 4, hidden = 32, layers = 2
  input tokens : i32[batch, seq]
  input targets : i32[batch, seq]
  tok = Embedding(vocab, d)
  param pos : [seq, d] init normal(std = 0.02)
  blocks = repeat(layers) TransformerBlock(d, heads, hidden)
  ln_f = LayerNorm(d)
  logits = ln_f(blocks(tok(tokens) + pos)) @ tok.table
  loss = cross_entropy(logits, targets, over = vocab) + 0.1 * mean(softmax(logits, over = vocab) * logits)
}
data { train { synthetic(seed = 5) } }
train {
  batch = 4
  steps = 1
  optimizer = sgd(lr = 0.1)
}
)";

// RMS norm, layer norm, log-softmax and the smooth activations: their
// forward, their gradients and the softmax gradient, fused.
const char* const kNorms = R"(
model N {
  dim f = 16, h = 32, c = 4
  input x : f32[batch, f]
  input y : i32[batch]
  l1 = Linear(f, h)
  n1 = RMSNorm(h)
  n2 = LayerNorm(h)
  l2 = Linear(h, c)
  a = n2(silu(n1(l1(x))))
  b = tanh(a) + sigmoid(a) + gelu(a) + sqrt(abs(a) + 1.0) - relu(-a)
  logits = l2(b)
  loss = cross_entropy(logits, y, over = c) + 0.1 * mean(log_softmax(logits, over = c) * softmax(logits, over = c))
}
data { train { synthetic(seed = 2) } }
train {
  batch = 24
  steps = 1
  optimizer = sgd(lr = 0.1)
}
)";

// A comparison in a region: its Bool output, widened to the executor's int32.
const char* const kCompare = R"(
model M {
  dim f = 16, h = 32, c = 4
  input x : f32[batch, f]
  input y : i32[batch]
  l1 = Linear(f, h)
  l2 = Linear(h, c)
  logits = l2(relu(l1(x)))
  loss = cross_entropy(logits, y, over = c)
  metric positive = mean(cast(logits > 0.5 * logits * logits, f32))
}
data { train { synthetic(seed = 1) } }
train {
  batch = 24
  steps = 1
  optimizer = sgd(lr = 0.1)
}
)";

// A sample (or, with `text`, that spec) at one rank, with random parameters
// and inputs (labels and tokens within their tables).
std::unique_ptr<Sample> load(const std::string& name, const std::string& batch, const char* text = nullptr) {
  auto s = std::make_unique<Sample>();
  driver::FrontendOptions o;
  o.sets.push_back("train.batch=" + batch);
  const std::string path = std::string(DTL_SOURCE_DIR) + "/samples/" + name;
  EXPECT_EQ(text ? s->fe.runText(name, text, o, driver::Stop::Grad) : s->fe.run(path, o, driver::Stop::Grad), 0)
      << s->fe.diagnostics().render();
  const ir::Graph& g = s->fe.graph();
  std::map<int, int> hi;
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Embed) hi[n.inputs[1]] = static_cast<int>(g[n.inputs[0]].shape.dims[0].size);
    if (n.op == ir::Op::CrossEntropy)
      hi[n.inputs[1]] = static_cast<int>(g[n.inputs[0]].shape.dims[static_cast<size_t>(g[n.inputs[0]].shape.find(n.names[0]))].size);
  }
  std::mt19937 rng(3);
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Param && !s->params.count(n.name)) s->params[n.name] = normal(n.shape, rng, 0.2f);
    if (n.op == ir::Op::Input && !s->inputs.count(n.name))
      s->inputs[n.name] = isFloat(n.dtype) ? normal(n.shape, rng, 1.0f) : ints(n.shape, rng, 0, hi.count(n.id) ? hi[n.id] - 1 : 1, n.dtype);
  }
  return s;
}

struct Result {
  Buf loss;
  std::map<std::string, Buf> grads;
  float eval_loss = 0;
  std::map<std::string, float> metrics;
};

// One training run and one evaluation run of the program.
Result runOnce(Sample& s, const prog::Program& p, Backend& be, RegionRunner* regions, int threads) {
  Result r;
  Executor ex(p, be, regions);
  for (auto& [path, b] : s.params) ex.bindParam(path, b.f.data());
  for (auto& [name, b] : s.inputs)
    ex.setInput(name, isFloat(b.dtype) ? static_cast<const void*>(b.f.data()) : static_cast<const void*>(b.i.data()), b.size());
  RunContext ctx;
  ctx.seed = 9;
  ctx.threads = threads;
  KernelStatus st = ex.run(true, ctx);
  EXPECT_TRUE(st.ok) << st.message;
  if (!st.ok) return r;
  const ir::Graph& g = s.fe.graph();
  r.loss = Buf(Shape{}, DType::F32);
  r.loss.f[0] = ex.value(g.loss);
  for (const auto& [path, id] : g.grads) {
    Buf& b = r.grads[path] = Buf(s.params[path].shape, DType::F32);
    const float* got = ex.grad(path);
    std::copy(got, got + b.size(), b.f.begin());
  }
  for (const auto& [name, id] : g.metrics) r.metrics[name] = ex.value(id);
  st = ex.run(false, ctx);
  EXPECT_TRUE(st.ok) << st.message;
  r.eval_loss = ex.value(g.loss);
  return r;
}

bool bitwise(const Result& a, const Result& b) {  // bit patterns: a NaN equals its own bits
  if (std::memcmp(a.loss.f.data(), b.loss.f.data(), 4) != 0 || std::memcmp(&a.eval_loss, &b.eval_loss, 4) != 0)
    return false;
  for (const auto& [path, g] : a.grads) {
    const std::vector<float>& h = b.grads.at(path).f;
    if (g.f.size() != h.size() || std::memcmp(g.f.data(), h.data(), g.f.size() * 4) != 0) return false;
  }
  return true;
}

// Within tol of want relative, or both NaN.
::testing::AssertionResult near(double got, double want, double tol) {
  if (std::isnan(want) ? std::isnan(got) : std::fabs(got - want) <= tol * std::fabs(want) + 1e-5)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got << " against " << want;
}

class JitRun : public dtl::testing::ScratchDirTest {};

// Counts what the executor hands the multi-tensor runner.
struct CountingUpdate : optim::MultiTensorUpdate {
  optim::MultiTensorUpdate* inner = nullptr;
  int calls = 0, tensors = 0;
  std::string run(const optim::Optimizer& opt, const std::vector<optim::TensorStep>& t, int64_t step, double lr,
                  int threads) override {
    ++calls;
    tensors += static_cast<int>(t.size());
    return inner->run(opt, t, step, lr, threads);
  }
};

// Three training steps of the sample's program, the update schedule run by
// `multi` (the generated multi-tensor kernel on `threads`) or, without it,
// by Optimizer::update tensor by tensor: the parameters and states reached.
struct Stepped {
  std::map<std::string, Buf> params;
  std::map<std::string, optim::ParamState> states;
};
Stepped trainSteps(const Sample& s, const prog::Program& p, const optim::OptimizerConfig& c,
                   optim::MultiTensorUpdate* multi, int threads) {
  Stepped out{s.params, {}};
  std::unique_ptr<Backend> fast = makeFastBackend();
  Executor ex(p, *fast);
  ex.setMultiTensorUpdate(multi);
  for (auto& [path, b] : out.params) ex.bindParam(path, b.f.data());
  for (const auto& [name, b] : s.inputs)
    ex.setInput(name, isFloat(b.dtype) ? static_cast<const void*>(b.f.data()) : static_cast<const void*>(b.i.data()), b.size());
  const optim::Optimizer opt(c);
  for (int64_t step = 1; step <= 3; ++step) {
    RunContext ctx;
    ctx.seed = 9;
    KernelStatus st = ex.run(true, ctx);
    EXPECT_TRUE(st.ok) << st.message;
    for (auto& [path, b] : out.params) {
      ex.bindStepGrad(path, ex.grad(path));
      ex.bindState(path, &out.states[path]);
    }
    st = ex.update(opt, step, c.lr * static_cast<double>(4 - step), threads);
    EXPECT_TRUE(st.ok) << st.message;
  }
  return out;
}

// The executor's update schedule through the generated multi-tensor kernel
// (--kernels jit) moves every parameter and state exactly as fast's
// tensor-by-tensor update does, on 1 and 2 threads.
TEST_F(JitRun, TheMultiTensorUpdateStepsLikeFastBitwise) {
  std::string tiny_adamw = kTinyGpt;
  tiny_adamw.replace(tiny_adamw.find("sgd(lr = 0.1)"), 13, "adamw(lr = 0.01, weight_decay = 0.1)");
  struct Case {
    const char* name;
    const char* text;
    optim::OptimizerConfig c;
  } cases[] = {{"synthetic_mlp.dtl", nullptr, {"sgd", 0.05, 0.9, 0, 0.01}},
               {"tiny_gpt", tiny_adamw.c_str(), {"adamw", 0.01, 0, 0, 0.1}},
               {"tiny_gpt", tiny_adamw.c_str(), {"sgd", 0.05, 0.9, 0, 0, 0.9, 0.999, 1e-8, true}}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.name) + " " + k.c.name);
    auto s = load(k.name, "4", k.text);
    const prog::Program p = program::planProgram(s->fe.graph());
    std::string error;
    jit::UpdateOptions o;
    o.chunk = 64;
    o.parallel_elements = 0;
    auto multi = jit::makeJitUpdate(k.c, o, &error);
    ASSERT_TRUE(multi) << error;
    const Stepped fast = trainSteps(*s, p, k.c, nullptr, 1);
    int updates = 0;
    for (const ir::Node& n : p.nodes) updates += n.op == ir::Op::Update;
    for (int threads : {1, 2}) {
      CountingUpdate counting;
      counting.inner = multi.get();
      const Stepped gen = trainSteps(*s, p, k.c, &counting, threads);
      EXPECT_EQ(counting.calls, 3) << "one multi-tensor call per step";
      EXPECT_EQ(counting.tensors, 3 * updates);
      for (const auto& [path, b] : fast.params) {
        EXPECT_EQ(b.f, gen.params.at(path).f) << path << " on " << threads << " threads";
        EXPECT_EQ(fast.states.at(path).a, gen.states.at(path).a) << path;
        EXPECT_EQ(fast.states.at(path).b, gen.states.at(path).b) << path;
      }
      int64_t moved = 0;
      for (const auto& [path, b] : gen.params)
        for (size_t i = 0; i < b.f.size(); ++i) moved += b.f[i] != s->params.at(path).f[i];
      EXPECT_GT(moved, 0) << "the update did not move the parameters";
    }
  }
}

// jit against the reference within fast's tolerance; or, where the
// reference kernels are too slow for a unit test, against fast within twice
// it (both are within it of the reference).
// `libm_gradients` false: the gradients whose derivative calls exp, erf or
// tanh left to fast (the rule's other setting; `--kernels jit` fuses them).
// `epilogue_activations`: the x86 rule (relu) unless given; `poison` edits
// the sample's parameters and inputs first.
void checkSample(const std::string& name, const std::string& batch, const std::string& cache, bool reference,
                 const char* text = nullptr, bool transcendentals = true, bool libm_gradients = true,
                 std::vector<codegen::UnaryFn> epilogue_activations = program::PlanOptions{}.epilogue_activations,
                 const std::function<void(Sample&)>& poison = {}) {
  auto s = load(name, batch, text);
  if (poison) poison(*s);
  const ir::Graph& g = s->fe.graph();
  const prog::Program plain = program::planProgram(g);
  program::PlanOptions o;
  o.fuse = true;
  o.fuse_transcendentals = transcendentals;
  o.fuse_libm_gradients = libm_gradients;
  o.epilogue_activations = std::move(epilogue_activations);
  const prog::Program fused = program::planProgram(g, layout::Layout{}, {}, o);
  ASSERT_FALSE(fused.fused.empty());
  std::string error;
  jit::JitStats stats;
  jit::JitOptions options;
  options.cache.dir = cache;
  options.parallel_work = 0;  // every region with a split runs its chunks on the threads given
  std::unique_ptr<RegionRunner> regions = jit::makeJitRegions(fused, options, &error, &stats);
  ASSERT_TRUE(regions) << error;
  EXPECT_EQ(stats.regions, static_cast<int>(fused.fused.size()));
  EXPECT_LE(stats.kernels, stats.regions);
  std::unique_ptr<Backend> ref = makeReferenceBackend(), fast = makeFastBackend();
  const Result f = runOnce(*s, plain, *fast, nullptr, 1);
  const Result want = reference ? runOnce(*s, plain, *ref, nullptr, 1) : f;
  const Result j = runOnce(*s, fused, *fast, regions.get(), 1);
  const double tol = reference ? 1e-4 : 2e-4;
  EXPECT_TRUE(close(f.loss, want.loss, 1e-4, 1e-5)) << name << " fast loss";
  EXPECT_TRUE(close(j.loss, want.loss, tol, 1e-5)) << name << " jit loss";
  EXPECT_TRUE(near(j.eval_loss, want.eval_loss, tol)) << name << " jit evaluation loss";
  for (const auto& [metric, v] : want.metrics) EXPECT_TRUE(near(j.metrics.at(metric), v, tol)) << metric;
  for (const auto& [path, grad] : want.grads) {
    EXPECT_TRUE(close(f.grads.at(path), grad, 1e-4, 1e-5)) << name << " fast " << path;
    EXPECT_TRUE(close(j.grads.at(path), grad, tol, 1e-5)) << name << " jit " << path;
  }
  // Chunks of rows are fixed by the region, not by the threads.
  const Result j4 = runOnce(*s, fused, *fast, regions.get(), 3);
  EXPECT_TRUE(bitwise(j, j4)) << name << ": jit on 3 threads differs from 1 thread";
}

TEST_F(JitRun, SyntheticMlpMatchesTheReferenceAsFastDoes) {
  // x86's rule: the hidden layer's relu in its GEMM's epilogue (the fast
  // backend's select on each panel of C), the logits' bias add in theirs.
  checkSample("synthetic_mlp.dtl", "64", path("cache"), true);
  // With relu left to a region after the epilogue's bias add.
  checkSample("synthetic_mlp.dtl", "64", path("cache"), true, nullptr, true, false, {});
}

// A NaN in one row of x reaches the hidden layer's relu through the GEMM and
// stays NaN there (a max-based relu would make the row's logits finite and
// the loss with them), and a −inf in a hidden bias column becomes 0 (its
// weights' gradient too): jit, with relu in the epilogue, as the reference.
TEST_F(JitRun, NonFiniteValuesThroughTheMlpsReluEpilogue) {
  auto poison = [](Sample& s) {
    s.inputs.at("x").f[2 * 16 + 5] = std::nanf("");
    int biases = 0;
    for (auto& [path, b] : s.params)
      if (b.shape.dims.size() == 1 && b.shape.dims[0].size == 64) {
        b.f[3] = -std::numeric_limits<float>::infinity();
        ++biases;
      }
    ASSERT_EQ(biases, 1) << "the hidden layer's bias";
  };
  checkSample("synthetic_mlp.dtl", "64", path("cache"), true, nullptr, true, true,
              program::PlanOptions{}.epilogue_activations, poison);
}

TEST_F(JitRun, TinyGptMatchesTheReferenceAsFastDoes) {
  checkSample("tiny_gpt.dtl", "4", path("cache"), true, kTinyGpt);
  // With the transcendentals (softmax, gelu) left to fast, the rule's other setting.
  checkSample("tiny_gpt.dtl", "4", path("cache"), true, kTinyGpt, false);
}

// The op kinds of every fused region's members.
std::set<std::string> fusedKinds(const char* name, const char* text, bool transcendentals, bool libm_gradients) {
  auto s = load(name, "24", text);
  program::PlanOptions o;
  o.fuse = true;
  o.fuse_transcendentals = transcendentals;
  o.fuse_libm_gradients = libm_gradients;
  const prog::Program p = program::planProgram(s->fe.graph(), layout::Layout{}, {}, o);
  std::set<std::string> kinds;
  for (const prog::Fused& f : p.fused)
    for (int v : f.nodes) kinds.insert(std::string(ir::opName(p.nodes[static_cast<size_t>(v)].op)) + " " + p.nodes[static_cast<size_t>(v)].fn);
  return kinds;
}

TEST_F(JitRun, NormsAndActivationGradientsMatchTheReference) {
  const std::set<std::string> none = fusedKinds("norms.dtl", kNorms, false, false),
                              no_gradients = fusedKinds("norms.dtl", kNorms, true, false),
                              jit = fusedKinds("norms.dtl", kNorms, true, true);
  for (const char* kind : {"normalize ", "rms_normalize ", "normalize_grad ", "rms_normalize_grad ", "unary_grad relu",
                           "unary_grad sqrt", "unary_grad abs", "softmax_grad "})
    EXPECT_TRUE(none.count(kind) && jit.count(kind)) << kind;
  EXPECT_FALSE(none.count("log_softmax_grad "));
  EXPECT_TRUE(jit.count("log_softmax_grad "));  // exp in f32 through libmvec
  for (const char* kind : {"unary_grad silu", "unary_grad tanh", "unary_grad gelu"}) {  // f32 over libmvec
    EXPECT_FALSE(no_gradients.count(kind)) << kind;
    EXPECT_TRUE(jit.count(kind)) << kind;
  }
  checkSample("norms.dtl", "24", path("cache"), true, kNorms, false, false);
  checkSample("norms.dtl", "24", path("cache"), true, kNorms, true, false);
  checkSample("norms.dtl", "24", path("cache"), true, kNorms);
}

TEST_F(JitRun, AComparisonsBoolOutputIsWidened) {
  checkSample("compare.dtl", "24", path("cache"), true, kCompare);
}

TEST_F(JitRun, CharGptMatchesFast) { checkSample("char_gpt.dtl", "2", path("cache"), false); }

TEST_F(JitRun, ObjectCacheLoadsWhatItCompiledAndRecompilesWhatIsCorrupt) {
  auto s = load("synthetic_mlp.dtl", "64");
  program::PlanOptions o;
  o.fuse = true;
  const prog::Program p = program::planProgram(s->fe.graph(), layout::Layout{}, {}, o);
  jit::JitOptions cache;
  cache.cache.dir = path("cache");
  std::unique_ptr<Backend> fast = makeFastBackend();
  auto build = [&](jit::JitStats& stats) {
    std::string error;
    auto r = jit::makeJitRegions(p, cache, &error, &stats);
    EXPECT_TRUE(r) << error;
    return r;
  };
  Result first;
  jit::JitStats cold, warm, mended;
  {
    auto r = build(cold);
    ASSERT_TRUE(r);
    first = runOnce(*s, p, *fast, r.get(), 1);
  }  // no runner of this process holds the kernels now: the next one reads the cache
  EXPECT_EQ(cold.compiled, cold.kernels);
  EXPECT_EQ(cold.loaded, 0);
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(path("cache")))
    if (e.path().extension() == ".o") files.push_back(e.path());
  ASSERT_EQ(static_cast<int>(files.size()), cold.kernels);
  {
    auto r = build(warm);
    ASSERT_TRUE(r);
    EXPECT_EQ(warm.loaded, warm.kernels);
    EXPECT_EQ(warm.compiled, 0);
    EXPECT_TRUE(bitwise(first, runOnce(*s, p, *fast, r.get(), 1))) << "loaded kernels compute other bits";
  }
  ASSERT_GE(files.size(), 2u);
  // One file with a flipped byte (its checksum fails), one whose header
  // vouches for bytes that are no object file (LLVM refuses them).
  std::string bytes;
  {
    std::ifstream in(files[0], std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 0x5a;
  std::ofstream(files[0], std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::string junk(200, 'x');
  std::string forged = bytes.substr(0, 8);
  for (uint64_t v : {static_cast<uint64_t>(junk.size()), xxh64(junk.data(), junk.size(), 0)})
    for (int k = 0; k < 8; ++k) forged.push_back(static_cast<char>(v >> (8 * k)));
  forged += junk;
  std::ofstream(files[1], std::ios::binary | std::ios::trunc).write(forged.data(), static_cast<std::streamsize>(forged.size()));
  {
    auto r = build(mended);
    ASSERT_TRUE(r);
    EXPECT_EQ(mended.compiled, 2);
    EXPECT_EQ(mended.loaded, mended.kernels - 2);
    EXPECT_TRUE(bitwise(first, runOnce(*s, p, *fast, r.get(), 1))) << "after mending the cache";
  }
  jit::JitStats again;
  auto r = build(again);
  EXPECT_EQ(again.loaded, again.kernels) << "the recompiled objects were not written back";
}

// Kernels compiled on several threads at once (each with its own LLVM
// context and target machine) are the kernels one thread compiles: the same
// count, each compiled once, and the same bits from a char GPT step; two
// runners made at once on two threads (which may both compile a kernel) give
// those bits too.
TEST_F(JitRun, KernelsCompiledOnThreadsAreOneThreadsKernels) {
  auto s = load("char_gpt.dtl", "2");
  program::PlanOptions o;
  o.fuse = true;
  const prog::Program p = program::planProgram(s->fe.graph(), layout::Layout{}, {}, o);
  std::unique_ptr<Backend> fast = makeFastBackend();
  auto build = [&](int threads, jit::JitStats& stats) {
    jit::JitOptions options;  // no cache folder: every kernel compiled
    options.compile_threads = threads;
    std::string error;
    auto r = jit::makeJitRegions(p, options, &error, &stats);
    EXPECT_TRUE(r) << error;
    return r;
  };
  Result one;
  jit::JitStats serial, parallel;
  {
    auto r = build(1, serial);
    ASSERT_TRUE(r);
    one = runOnce(*s, p, *fast, r.get(), 1);
  }
  ASSERT_GE(serial.kernels, 3);
  EXPECT_EQ(serial.compiled, serial.kernels);
  {
    auto r = build(3, parallel);
    ASSERT_TRUE(r);
    EXPECT_EQ(parallel.compiled, serial.kernels);
    EXPECT_EQ(parallel.kernels, serial.kernels);
    EXPECT_TRUE(bitwise(one, runOnce(*s, p, *fast, r.get(), 1))) << "kernels compiled on threads compute other bits";
  }
  jit::JitStats a, b;
  std::unique_ptr<RegionRunner> ra, rb;
  std::thread other([&] { ra = build(2, a); });
  rb = build(2, b);
  other.join();
  ASSERT_TRUE(ra && rb);
  EXPECT_EQ(a.kernels, serial.kernels);
  EXPECT_EQ(b.kernels, serial.kernels);
  EXPECT_TRUE(bitwise(one, runOnce(*s, p, *fast, ra.get(), 1)));
  EXPECT_TRUE(bitwise(one, runOnce(*s, p, *fast, rb.get(), 1)));
}

TEST(JitRunLimits, ACacheFolderPastItsBoundDropsTheLeastRecentlyUsed) {
  const std::string dir = std::filesystem::temp_directory_path() / ("dtl_jit_trim_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  codegen::ObjectCache cache{dir, 3000};
  const std::string kb(1000, 'o');
  codegen::writeCachedObject(cache, "a", kb);
  usleep(20000);  // file times tick in milliseconds
  codegen::writeCachedObject(cache, "b", kb);
  usleep(20000);
  EXPECT_TRUE(codegen::readCachedObject(cache, "a"));  // a is used: b is now the oldest
  usleep(20000);
  codegen::writeCachedObject(cache, "c", kb);  // 3 × (1000 + header) > 3000
  EXPECT_TRUE(codegen::readCachedObject(cache, "c"));
  EXPECT_FALSE(codegen::readCachedObject(cache, "b"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dtl::rt::testing
