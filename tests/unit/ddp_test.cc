// Data parallelism with ranks as threads: the program the layout pass and
// the planner derive for each of N ranks (per-rank batch B/N), run by N executors over a shared-memory
// communicator, gives every rank the one-rank gradients of the whole batch B;
// and its gradient buckets start while the backward pass is still running.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "compiler/driver/frontend.h"
#include "compiler/program/plan_program.h"
#include "runtime/comm/communicator.h"
#include "runtime/exec/executor.h"

namespace dtl::rt {
namespace {

// Bucket cap 1 KiB: the MLP's gradients make several buckets.
std::string mlpSpec(const std::string& parallel_extra) {
  return "model M {\n  dim f = 16, h = 32, h2 = 24, c = 5\n  input x : f32[batch, f]\n  input y : i32[batch]\n"
         "  l1 = Linear(f, h)\n  l2 = Linear(h, h2)\n  l3 = Linear(h2, c)\n"
         "  logits = l3(relu(l2(gelu(l1(x)))))\n  loss = cross_entropy(logits, y, over = c)\n}\n"
         "data { train { synthetic(seed = 1) } }\n"
         "train {\n  batch = 12\n  steps = 1\n  optimizer = sgd(lr = 0.1)\n}\n"
         "parallel { mesh dp = auto; split batch over dp; bucket = 1 KiB" + parallel_extra + " }\n";
}

// A stack of stacks (`blocks.inner.w` is [depth, width, f, hid]) under a
// linear head: each copy of every stacked parameter is reduced on its own.
std::string stackedSpec() {
  return "layer Inner(d: dim, e: dim) {\n  param w : [d, e] init normal(std = 0.3)\n  param v : [e, d] init normal(std = 0.3)\n"
         "  param b : [d] init zeros\n  forward(x) = tanh(tanh(x @ w) @ v + b)\n}\n"
         "layer Outer(d: dim, e: dim, k: dim) {\n  inner = repeat(k) Inner(d, e)\n  param s : [d] init ones\n"
         "  forward(x) = inner(x) * s + x\n}\n"
         "model M {\n  dim f = 16, hid = 8, depth = 3, width = 2, c = 5\n  input x : f32[batch, f]\n  input y : i32[batch]\n"
         "  blocks = repeat(depth) Outer(f, hid, width)\n  head = Linear(f, c)\n"
         "  loss = cross_entropy(head(blocks(x)), y, over = c)\n}\n"
         "data { train { synthetic(seed = 1) } }\n"
         "train {\n  batch = 12\n  steps = 1\n  optimizer = sgd(lr = 0.1)\n}\n"
         "parallel { mesh dp = auto; split batch over dp; bucket = 1 KiB }\n";
}

struct Compiled {
  driver::Frontend fe;
};

std::unique_ptr<Compiled> compile(const std::string& text, int world) {
  auto c = std::make_unique<Compiled>();
  driver::FrontendOptions o;
  o.world = world;
  o.sets.push_back("train.batch=" + std::to_string(12 / world));
  int rc = c->fe.runText("ddp.dtl", text, o, world > 1 ? driver::Stop::Plan : driver::Stop::Grad);
  EXPECT_EQ(rc, 0) << c->fe.diagnostics().render();
  EXPECT_TRUE(c->fe.layoutErrors().empty());
  return c;
}

// The same parameters and global batch for every run.
struct Problem {
  std::map<std::string, std::vector<float>> params;
  std::vector<float> x;
  std::vector<int32_t> y;
};

Problem problem(const ir::Graph& g) {
  Problem p;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::Param) continue;
    auto& v = p.params[n.name];
    v.resize(static_cast<size_t>(n.shape.elements().value_or(0)));
    for (float& e : v) e = normal(rng);
  }
  p.x.resize(12 * 16);
  for (float& e : p.x) e = normal(rng);
  for (int i = 0; i < 12; ++i) p.y.push_back(static_cast<int32_t>(rng() % 5));
  return p;
}

struct RankResult {
  float loss = 0;
  std::map<std::string, std::vector<float>> grads;
  std::vector<Executor::BucketEvent> events;
  int64_t held_bytes = 0, planned_bytes = 0;  // what the executor allocated; what the program says it needs
  std::string error;
};

// One rank: its slice of the global batch through the executor.
RankResult runRank(const driver::Frontend& fe, Problem p, int rank, int world, comm::Communicator* c) {
  RankResult r;
  const ir::Graph& g = fe.graph();
  const prog::Program program = program::planProgram(g, fe.layout(), layout::meshCoords(fe.layout().mesh, rank));
  std::unique_ptr<Backend> backend = makeFastBackend();
  Executor ex(program, *backend);
  if (c) ex.setCommunicator("dp", c);
  for (auto& [path, v] : p.params) ex.bindParam(path, v.data());
  int64_t b = 12 / world;
  ex.setInput("x", p.x.data() + rank * b * 16, b * 16);
  ex.setInput("y", p.y.data() + rank * b, b);
  RunContext ctx;
  KernelStatus s = ex.run(true, ctx);
  if (!s.ok) {
    r.error = s.message;
    return r;
  }
  r.loss = ex.value(g.loss);
  for (const auto& [path, id] : g.grads) {
    const float* gr = ex.grad(path);
    r.grads[path].assign(gr, gr + p.params[path].size());
  }
  r.events = ex.bucketEvents();
  r.held_bytes = ex.peakBytes();
  // Slots and buckets, and the gradients nobody bound (this test binds none).
  r.planned_bytes = program.arenaBytes() + program.groupBytes();
  for (const auto& [path, id] : program.grads)
    if (program.train.storage[static_cast<size_t>(id)].kind == prog::Storage::Output)
      r.planned_bytes += program[id].shape.elements().value_or(0) * 4;
  return r;
}

std::vector<RankResult> runWorld(const driver::Frontend& fe, const Problem& p, int world) {
  std::vector<RankResult> out(static_cast<size_t>(world));
  auto store = comm::makeMemoryStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      comm::Status s;
      auto c = comm::makeShmCommunicator(comm::GroupOptions{store, "dp/0/", r, world, std::chrono::seconds(60)}, s);
      if (!s.ok) {
        out[static_cast<size_t>(r)].error = s.message;
        return;
      }
      out[static_cast<size_t>(r)] = runRank(fe, p, r, world, c.get());
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

double relDiff(float a, float b) { return std::fabs(a - b) / std::max(1e-6, static_cast<double>(std::fabs(b))); }

class Ddp : public ::testing::TestWithParam<int> {};

// `world` ranks of `spec` against one rank of the same global batch.
void expectOneRankGradients(const std::string& spec, int world) {
  auto one = compile(spec, 1);
  auto many = compile(spec, world);
  Problem p = problem(one->fe.graph());
  RankResult ref = runRank(one->fe, p, 0, 1, nullptr);
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  std::vector<RankResult> ranks = runWorld(many->fe, p, world);
  for (int r = 0; r < world; ++r) {
    const RankResult& got = ranks[static_cast<size_t>(r)];
    ASSERT_TRUE(got.error.empty()) << "rank " << r << ": " << got.error;
    EXPECT_LT(relDiff(got.loss, ref.loss), 1e-5) << "rank " << r << " loss " << got.loss << " vs " << ref.loss;
    EXPECT_EQ(got.held_bytes, got.planned_bytes) << "rank " << r << ": the executor holds what its program plans";
    ASSERT_EQ(got.grads.size(), ref.grads.size());
    for (const auto& [path, want] : ref.grads) {
      const std::vector<float>& have = got.grads.at(path);
      // Summation order differs (ranks sum their halves first): relative to the tensor's scale.
      double worst = 0, scale = 1e-12;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(have[i] - want[i])));
        scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
      }
      EXPECT_LT(worst / scale, 1e-5) << "rank " << r << ", gradient of " << path;
    }
  }
}

TEST_P(Ddp, EveryRankGetsTheOneRankGradientsOfTheGlobalBatch) { expectOneRankGradients(mlpSpec(""), GetParam()); }

TEST_P(Ddp, StackedParametersToo) { expectOneRankGradients(stackedSpec(), GetParam()); }

// Each rank draws the dropout mask bits of its own samples' global elements:
// the same mask one process draws for the whole batch.
TEST_P(Ddp, DropoutDropsWhatOneProcessDrops) {
  std::string spec = mlpSpec("");
  const std::string at = "l2(gelu(l1(x)))";
  ASSERT_NE(spec.find(at), std::string::npos);
  spec.replace(spec.find(at), at.size(), "l2(dropout(gelu(l1(x)), p = 0.3))");
  expectOneRankGradients(spec, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Ranks, Ddp, ::testing::Values(2, 3, 4), [](const auto& info) {
  return std::to_string(info.param) + "ranks";
});

// The last node that produces a parameter gradient (the end of the backward pass).
int lastGradientNode(const ir::Graph& g) {
  int last = -1;
  for (const ir::Bucket& b : g.buckets)
    for (int m : b.members) last = std::max(last, g.nodes[static_cast<size_t>(m)].inputs[0]);
  return last;
}

TEST(DdpOverlap, FirstBucketStartsBeforeTheBackwardPassEnds) {
  auto many = compile(mlpSpec(""), 2);
  const ir::Graph& g = many->fe.graph();
  ASSERT_GE(g.buckets.size(), 2u) << "the 1 KiB cap should make several buckets";
  std::vector<RankResult> ranks = runWorld(many->fe, problem(g), 2);
  int backward_end = lastGradientNode(g);
  for (const RankResult& r : ranks) {
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_EQ(r.events.size(), g.buckets.size()) << "every bucket launched once";
    const Executor::BucketEvent& first = r.events.front();
    EXPECT_LT(first.after_node, backward_end)
        << "bucket " << first.bucket << " launched after node " << first.after_node
        << ", but gradients are produced until node " << backward_end;
    EXPECT_GT(first.nodes_left, 0);
    // Launches follow the backward pass: each bucket after the one before.
    for (size_t k = 1; k < r.events.size(); ++k) EXPECT_GE(r.events[k].after_node, r.events[k - 1].after_node);
  }
}

// A stacked parameter's gradient is not reduced whole after the last layer's
// backward pass: each copy's partial sum is, in buckets, as it is produced.
TEST(DdpOverlap, EachLayerOfAStackIsReducedAsItsBackwardPassEnds) {
  auto many = compile(stackedSpec(), 2);
  const ir::Graph& g = many->fe.graph();
  int per_copy = 0;  // all-reduces a gather of copies reads
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::AllReduce)
      EXPECT_NE(g[n.inputs[0]].op, ir::Op::SliceGrad) << "%" << n.id << " reduces a whole stack";
    if (n.op == ir::Op::SliceGrad)
      for (int x : n.inputs) per_copy += g[x].op == ir::Op::AllReduce;
  }
  EXPECT_EQ(per_copy, 3 * 2 * 3 + 3);  // w, v, b of the 3 × 2 inner copies; s of the 3 outer ones
  std::vector<RankResult> ranks = runWorld(many->fe, problem(g), 2);
  int backward_end = lastGradientNode(g);
  for (const RankResult& r : ranks) {
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_EQ(r.events.size(), g.buckets.size());
    ASSERT_GE(r.events.size(), 3u);
    EXPECT_LT(r.events[1].after_node, backward_end) << "the second bucket waited for the whole backward pass";
  }
}

TEST(DdpOverlap, OverlapOffKeepsEveryBucketToTheEnd) {
  auto many = compile(mlpSpec("; overlap = false"), 2);
  const ir::Graph& g = many->fe.graph();
  std::vector<RankResult> ranks = runWorld(many->fe, problem(g), 2);
  int backward_end = lastGradientNode(g);
  for (const RankResult& r : ranks) {
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_EQ(r.events.size(), g.buckets.size());
    for (const Executor::BucketEvent& e : r.events) EXPECT_GE(e.after_node, backward_end) << "bucket " << e.bucket;
  }
}

}  // namespace
}  // namespace dtl::rt
