// The fused attention kernels (runtime/kernels/fast/attention.cc: tiled,
// online softmax, the forward's log-sum-exp saved for the one backward node)
// against the reference's plain loops: random shapes across the tile
// boundaries, causal and not, seq_q ≠ seq_k, several leading dims, NaN and
// ±inf in each operand; bitwise the same on 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "compiler/program/plan_program.h"
#include "runtime/exec/executor.h"
#include "runtime/kernels/fast/kernels.h"
#include "runtime/kernels/reference/attention.h"
#include "tests/unit/backend_test_util.h"

namespace dtl::rt::testing {
namespace {

using ir::Node;
using ir::Op;

struct Case {
  std::vector<Dim> lead;
  int64_t sq, sk, heads, dim;
};

Shape headsShape(const Case& c, int64_t seq, bool with_dim = true) {
  Shape s{c.lead};
  s.dims.push_back({"seq", seq});
  s.dims.push_back({"heads", c.heads});
  if (with_dim) s.dims.push_back({"head_dim", c.dim});
  return s;
}

Node forwardNode(const Case& c, bool causal) {
  Node n;
  n.id = 7;
  n.op = Op::Attention;
  n.shape = headsShape(c, c.sq);
  n.flag = causal;
  n.results = {ir::Result{headsShape(c, c.sq, false), DType::F32}};
  return n;
}

Node backwardNode(const Case& c, bool causal) {
  Node n;
  n.id = 8;
  n.op = Op::AttentionGrad;
  n.shape = headsShape(c, c.sq);
  n.flag = causal;
  n.results = {ir::Result{headsShape(c, c.sk), DType::F32}, ir::Result{headsShape(c, c.sk), DType::F32}};
  return n;
}

struct Operands {
  Buf q, k, v, dy;
};

// Forward and backward on one backend: out, lse, dq, dk, dv (the backward
// reads this backend's own out and lse). `fill` pre-fills every output.
std::vector<Buf> runBoth(Backend& be, const Case& c, bool causal, Operands& x, const RunContext& ctx, float fill = 0) {
  Outcomes f = runResults(be, forwardNode(c, causal), {&x.q, &x.k, &x.v}, ctx, fill);
  EXPECT_TRUE(f.status.ok) << be.name() << ": " << f.status.message;
  Outcomes b = runResults(be, backwardNode(c, causal), {&x.q, &x.k, &x.v, &f.out[0], &f.out[1], &x.dy}, ctx, fill);
  EXPECT_TRUE(b.status.ok) << be.name() << ": " << b.status.message;
  std::vector<Buf> all = std::move(f.out);
  for (Buf& g : b.out) all.push_back(std::move(g));
  return all;
}

bool sameBits(const Buf& a, const Buf& b) {
  return a.f.size() == b.f.size() && (a.f.empty() || std::memcmp(a.f.data(), b.f.data(), a.f.size() * sizeof(float)) == 0);
}

class AttentionTest : public ::testing::Test {
 protected:
  Operands operands(const Case& c) {
    return {normal(headsShape(c, c.sq), rng_), normal(headsShape(c, c.sk), rng_), normal(headsShape(c, c.sk), rng_),
            normal(headsShape(c, c.sq), rng_)};
  }

  // Fast (1 and 2 threads, 8- and 16-lane vectors, one and two column blocks at a time: bitwise the same;
  // every element written)
  // against the reference.
  void check(const Case& c, bool causal, Operands& x, const std::string& what, bool every_width = true) {
    static const char* const kNames[] = {"out", "lse", "dq", "dk", "dv"};
    RunContext one, two;
    two.threads = 2;
    std::vector<Buf> want = runBoth(*ref_, c, causal, x, one);
    std::vector<Buf> got = runBoth(*fast_, c, causal, x, one);
    std::vector<Buf> got2 = runBoth(*fast_, c, causal, x, two, std::nanf(""));
    ASSERT_EQ(got.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_TRUE(close(got[k], want[k], 1e-5)) << what << ": " << kNames[k] << (causal ? " causal " : " full ")
                                                 << headsShape(c, c.sq).str() << " keys " << c.sk;
      EXPECT_TRUE(sameBits(got[k], got2[k])) << what << ": " << kNames[k] << " differs on 2 threads";
    }
    if (!every_width) return;
    // The host's rule is one of these; each must give the host's bits.
    using fast::AttentionVectors;
    const std::pair<AttentionVectors, const char*> kWidths[] = {{AttentionVectors::kLanes8, "8 lanes"},
                                                                {AttentionVectors::kLanes16, "16 lanes"},
                                                                {AttentionVectors::kLanes16TwoBlocks, "16 lanes, 2 blocks"}};
    for (const auto& [width, name] : kWidths) {
      fast::setAttentionVectors(width);
      std::vector<Buf> forced = runBoth(*fast_, c, causal, x, one);
      fast::setAttentionVectors(std::nullopt);
      for (size_t k = 0; k < 5; ++k)
        EXPECT_TRUE(sameBits(forced[k], got[k])) << what << ": " << kNames[k] << " differs with " << name;
    }
  }

  std::unique_ptr<Backend> ref_ = makeReferenceBackend(), fast_ = makeFastBackend();
  std::mt19937 rng_{2024};
};

const std::vector<Case>& shapes() {
  static const std::vector<Case> k = {
      {{}, 1, 1, 1, 1},                          // seq 1
      {{{"b", 2}}, 7, 7, 3, 8},                  // within one tile
      {{{"b", 2}}, 5, 9, 3, 8},                  // seq_q < seq_k
      {{{"b", 2}}, 9, 4, 3, 8},                  // seq_q > seq_k
      {{{"a", 2}, {"b", 3}}, 70, 70, 2, 5},      // two leading dims, past one tile
      {{{"b", 1}}, 130, 67, 2, 16},              // three query tiles, two key tiles
      {{{"b", 1}}, 67, 131, 1, 7},               // keys past the last query
      {{}, 1, 150, 2, 4},                        // one query
      {{}, 150, 1, 2, 4},                        // one key
      {{{"b", 2}}, 64, 64, 4, 32},               // char GPT's heads: whole 16×16 transpose blocks
      {{}, 83, 83, 2, 40},                       // 16×16 blocks and their edges
      {{{"b", 2}}, 70, 75, 4, 66},               // rows 264 floats apart: q, k, v, dy packed (kPackStride)
  };
  return k;
}

TEST_F(AttentionTest, FastMatchesReference) {
  for (const Case& c : shapes())
    for (bool causal : {false, true}) {
      Operands x = operands(c);
      check(c, causal, x, "random");
    }
}

// NaN and ±inf in each operand, early and late in the sequence: with
// causal masking a late one is in a key block the early queries skip, yet
// the reference's 0·inf spreads it there.
TEST_F(AttentionTest, NonFiniteSpreadsAsTheReference) {
  const float kNan = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  // dim 6: the scan's scalar tail; dim 33: its 16-lane part (column 20) and tail (column 32); 8 heads of 33:
  // rows 264 floats apart, packed.
  for (auto [c, column] : {std::pair{Case{{{"b", 2}}, 140, 140, 2, 6}, 2}, {Case{{{"b", 2}}, 140, 140, 2, 33}, 20},
                           {Case{{{"b", 2}}, 140, 140, 2, 33}, 32}, {Case{{{"b", 2}}, 140, 140, 8, 33}, 32}})
    for (int operand = 0; operand < 4; ++operand)
      for (float bad : {kNan, kInf, -kInf})
        for (int64_t row : {3, 135})
          for (bool causal : {false, true}) {
            Operands x = operands(c);
            Buf* t[] = {&x.q, &x.k, &x.v, &x.dy};
            // batch 1, head 0, that column of that row
            t[operand]->f[static_cast<size_t>(((1 * c.sq + row) * c.heads + 0) * c.dim + column)] = bad;
            check(c, causal, x,
                  "dim " + std::to_string(c.dim) + ", operand " + std::to_string(operand) + " = " + std::to_string(bad) +
                      " at row " + std::to_string(row) + ", column " + std::to_string(column),
                  /*every_width=*/row == 135);
          }
}

// One key: every query's only probability is 1, out = v, and D = Σ dy·out
// must equal dP = dy·vᵀ bit for bit (both summed the way the tile products
// sum), so dS = P·(dP − D) and with it dq and dk are exactly 0, as the
// reference's. dim 32: the columns vectorise; 150 queries: not a multiple
// of the four rows D takes at a time.
TEST_F(AttentionTest, OneKeyGivesExactlyZeroQueryAndKeyGradients) {
  const Case c{{{"b", 2}}, 150, 1, 2, 32};
  for (bool causal : {false, true}) {
    Operands x = operands(c);
    RunContext two;
    two.threads = 2;
    std::vector<Buf> got = runBoth(*fast_, c, causal, x, two);
    ASSERT_EQ(got.size(), 5u);
    for (size_t k : {2, 3}) {
      int64_t nonzero = 0;
      for (float g : got[k].f) nonzero += g != 0.0f;
      EXPECT_EQ(nonzero, 0) << (k == 2 ? "dq" : "dk") << (causal ? " causal" : " full");
    }
  }
}

// A query whose every visible score is −inf: out NaN, as torch's softmax;
// the log-sum-exp NaN too (docs: the reference's rule).
TEST_F(AttentionTest, AllScoresMinusInfinity) {
  const Case c{{}, 3, 3, 1, 2};
  Operands x = operands(c);
  const float kInf = std::numeric_limits<float>::infinity();
  x.q.f[0] = 1, x.q.f[1] = 0;   // query 0 sees key 0 only
  x.k.f[0] = -kInf, x.k.f[1] = 0;
  check(c, true, x, "query 0 sees −inf");
}

TEST_F(AttentionTest, NoKeys) {
  const Case c{{{"b", 2}}, 3, 0, 2, 4};
  Operands x = operands(c);
  for (bool causal : {false, true}) check(c, causal, x, "no keys");
  std::vector<Buf> got = runBoth(*fast_, c, true, x, RunContext{});
  for (float v : got[0].f) EXPECT_EQ(v, 0.0f);
  for (float v : got[1].f) EXPECT_EQ(v, -std::numeric_limits<float>::infinity());
}

// The log-sum-exp on a case worked by hand: scores q_i·k_j (head_dim 1).
TEST(AttentionReference, LogSumExp) {
  using ref::Tensor;
  const Shape qs{{{"seq", 2}, {"heads", 1}, {"head_dim", 1}}};
  Tensor q = Tensor::zeros(qs, DType::F32), k = Tensor::zeros(qs, DType::F32);
  q.f = {1, 2};
  k.f = {0, 1};
  ref::AttentionResults full = ref::attentionResults(q, k, k, false), causal = ref::attentionResults(q, k, k, true);
  EXPECT_NEAR(full.lse.f[0], std::log(1 + std::exp(1.0)), 1e-12);
  EXPECT_NEAR(full.lse.f[1], std::log(1 + std::exp(2.0)), 1e-12);
  EXPECT_NEAR(causal.lse.f[0], 0.0, 1e-12);  // query 0 sees key 0 only
  EXPECT_NEAR(causal.lse.f[1], std::log(1 + std::exp(2.0)), 1e-12);
}

// Many pairs over more threads than cores: still the 1-thread bits.
TEST_F(AttentionTest, BitwiseOnAnyThreadCount) {
  const Case c{{{"b", 3}}, 100, 100, 3, 8};
  Operands x = operands(c);
  RunContext one;
  std::vector<Buf> base = runBoth(*fast_, c, true, x, one);
  for (int threads : {2, 3, 5}) {
    RunContext ctx;
    ctx.threads = threads;
    std::vector<Buf> got = runBoth(*fast_, c, true, x, ctx);
    for (size_t k = 0; k < base.size(); ++k) EXPECT_TRUE(sameBits(base[k], got[k])) << k << " on " << threads;
  }
}

// A graph of q, k, v inputs → attention → a view of its log-sum-exp, read
// by a sum (the loss).
ir::Graph resultGraph(const Case& c) {
  ir::Graph g;
  for (const char* name : {"q", "k", "v"}) {
    Node in;
    in.op = Op::Input;
    in.name = name;
    in.shape = headsShape(c, c.sq);
    g.add(in);
  }
  Node att = forwardNode(c, true);
  att.inputs = {0, 1, 2};
  const int a = g.add(att);
  Node view;
  view.op = Op::Result;
  view.inputs = {a};
  view.index = 1;
  view.shape = att.results[0].shape;
  const int lse = g.add(view);
  Node sum;
  sum.op = Op::Reduce;
  sum.fn = "sum";
  sum.inputs = {lse};
  for (const Dim& d : view.shape.dims) sum.names.push_back(d.name);
  g.loss = g.add(sum);
  g.forward_end = static_cast<int>(g.nodes.size());
  return g;
}

TEST(Results, CheckFindsBadViews) {
  const Case c{{{"b", 2}}, 5, 5, 3, 4};
  ir::Graph g = resultGraph(c);
  EXPECT_EQ(ir::checkResults(g), "");
  EXPECT_NE(ir::printNode(g[3]).find(": f32[b=2, seq=5, heads=3, head_dim=4], f32[b=2, seq=5, heads=3]"),
            std::string::npos)
      << ir::printNode(g[3]);
  g.nodes[4].index = 2;
  EXPECT_NE(ir::checkResults(g).find("reads result 2 of %3, which has 2"), std::string::npos) << ir::checkResults(g);
  g.nodes[4].index = 1;
  g.nodes[4].shape = headsShape(c, c.sq);
  EXPECT_NE(ir::checkResults(g).find("its result is f32[b=2, seq=5, heads=3]"), std::string::npos);
}

// The node's results share one slot, the view is an alias at result 1's
// offset, and the executor computes through it what the reference does.
TEST(Results, PlannedAsOneSlotAndAView) {
  const Case c{{{"b", 2}}, 5, 5, 3, 4};
  const ir::Graph g = resultGraph(c);
  const prog::Program p = program::planProgram(g);
  const prog::Storage& node = p.train.storage[3];
  const prog::Storage& view = p.train.storage[4];
  EXPECT_EQ(node.kind, prog::Storage::Slot);
  EXPECT_EQ(view.kind, prog::Storage::Alias);
  EXPECT_EQ(view.index, 3);
  EXPECT_EQ(view.offset, 2 * 5 * 3 * 4);
  EXPECT_GE(p.train.slot_words[static_cast<size_t>(node.index)], 2 * 5 * 3 * 4 + 2 * 5 * 3);
  std::mt19937 rng(3);
  Buf q = normal(headsShape(c, c.sq), rng), k = normal(headsShape(c, c.sq), rng), v = normal(headsShape(c, c.sq), rng);
  std::unique_ptr<Backend> fast = makeFastBackend(), ref = makeReferenceBackend();
  Outcomes want = runResults(*ref, forwardNode(c, true), {&q, &k, &v}, RunContext{});
  double total = 0;
  for (float x : want.out[1].f) total += x;
  for (Backend* be : {fast.get(), ref.get()}) {
    Executor ex(p, *be);
    ex.setInput("q", q.f.data(), static_cast<int64_t>(q.f.size()));
    ex.setInput("k", k.f.data(), static_cast<int64_t>(k.f.size()));
    ex.setInput("v", v.f.data(), static_cast<int64_t>(v.f.size()));
    KernelStatus st = ex.run(false, RunContext{});
    ASSERT_TRUE(st.ok) << st.message;
    EXPECT_NEAR(ex.value(g.loss), total, 1e-4 * std::fabs(total) + 1e-4) << be->name();
  }
}

}  // namespace
}  // namespace dtl::rt::testing
