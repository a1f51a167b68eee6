// ZeRO (`zero = 1|2|3`) with ranks as threads and in the plan: each rank's
// gradient is its flat piece of the one-process gradient on every mesh, the
// pieces tile each parameter (each layer's copy on its own), and the plan's
// bytes and memory per rank follow the formulas of docs/plan.md.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "compiler/plan/plan.h"
#include "compiler/program/plan_program.h"
#include "tests/unit/mesh_threads.h"

namespace dtl::rt {
namespace {

using namespace testing_mesh;

std::string zeroGpt(int zero, const std::string& mesh, int dp, int global_batch = 12) {
  return gptSpec(mesh + "; split batch over dp; zero = " + std::to_string(zero), global_batch, dp);
}

TEST(Zero, EveryLevelGivesEachRankItsPieceOfTheOneProcessGradient) {
  for (int zero : {1, 2, 3})
    for (int dp : {2, 3, 4}) {
      SCOPED_TRACE("zero = " + std::to_string(zero) + ", dp = " + std::to_string(dp));
      expectOneProcessResults(gptSpec("", 12, 1), zeroGpt(zero, "mesh dp = " + std::to_string(dp), dp), dp, 16);
    }
}

TEST(Zero, ComposesWithTensorParallelism) {
  for (int zero : {1, 3}) {
    SCOPED_TRACE("zero = " + std::to_string(zero));
    expectOneProcessResults(gptSpec("", 12, 1),
                            zeroGpt(zero, "mesh dp = 2, tp = 2; split heads over tp; split hidden over tp", 2), 4, 16);
  }
}

// The pieces of every rank tile each parameter's elements exactly once:
// each layer's copy cut on its own, the first E mod n ranks one longer.
TEST(Zero, FlatPiecesTileEachLayersCopy) {
  for (int dp : {2, 3, 4}) {
    auto fe = compile(zeroGpt(3, "mesh dp = " + std::to_string(dp), dp), dp);
    std::map<std::string, int64_t> held;
    for (int r = 0; r < dp; ++r) {
      const prog::Program p = program::planProgram(fe->graph(), fe->layout(), layout::meshCoords(fe->layout().mesh, r));
      std::set<std::string> seen;  // a parameter read in both passes has a node in each
      for (const ir::Node& n : p.nodes) {
        if (n.op != ir::Op::Param || !seen.insert(n.name).second) continue;
        const Shape& global = fe->graph()[n.id].shape;
        const int64_t copies = global.dims[0].name == "layers" ? global.dims[0].size : 1;
        const int64_t whole = global.elements().value_or(0) / copies;
        ASSERT_EQ(n.shape.elements().value_or(-1), copies * layout::pieceSize(whole, dp, r)) << n.name << " rank " << r;
        held[n.name] += n.shape.elements().value_or(0);
      }
    }
    for (const ir::Node& n : fe->graph().nodes)
      if (n.op == ir::Op::Param) EXPECT_EQ(held[n.name], n.shape.elements().value_or(-1)) << n.name << " dp " << dp;
  }
}

// The test's GPT with AdamW, laid out on `world` ranks: its collectives and
// rank 0's memory as the plan shows them.
struct Planned {
  std::vector<plan::Collective> collectives;
  plan::Memory memory;
  double gradient_bytes = 0;  // what the parameters' collectives send per step (n = 2)
};

Planned planOf(const std::string& parallel, int world, int dp, int accumulate = 1) {
  std::string spec = gptSpec(parallel, 12, dp);
  spec.replace(spec.find("sgd(lr = 0.1)"), 13, "adamw(lr = 0.01)");
  if (accumulate > 1) spec.replace(spec.find("steps = 1"), 9, "steps = 1\n  accumulate = " + std::to_string(accumulate));
  auto fe = compile(spec, world);
  const prog::Program p = program::planProgram(fe->graph(), fe->layout(), layout::meshCoords(fe->layout().mesh, 0));
  Planned out;
  out.collectives = plan::collectives(fe->graph(), p, fe->spec().parallel.zero);
  out.memory = plan::memoryPerRank(p, fe->spec());
  for (const plan::Collective& c : out.collectives)
    if (c.bucket >= 0 || c.op != "all_reduce")  // not the loss's
      out.gradient_bytes += plan::sent(c, 2) * (c.per_step ? 1 : accumulate);
  return out;
}

// Bytes of each parameter (whole) and which of them the backward pass reads.
struct Params {
  double all = 0, read_backward = 0;
  std::vector<int64_t> elements, copies;
};

Params params() {
  auto fe = compile(gptSpec("", 12, 1), 1);
  const ir::Graph& g = fe->graph();
  // A parameter's node (one per pass that reads it) and its layers' slices,
  // by name: "blocks.attn.wq", "blocks.attn.wq[1]".
  std::map<int, std::string> name;
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Param) name[n.id] = n.name;
    if (n.op == ir::Op::Slice && name.count(n.inputs[0])) name[n.id] = name[n.inputs[0]] + "[" + std::to_string(n.index) + "]";
  }
  std::map<std::string, int64_t> backward;  // what a backward node reads → its elements
  for (const ir::Node& n : g.nodes)
    if (n.id >= g.forward_end && n.op != ir::Op::Update)
      for (int x : n.inputs)
        if (name.count(x)) backward[name[x]] = g[x].shape.elements().value_or(0);
  Params p;
  std::set<std::string> seen;
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::Param || !seen.insert(n.name).second) continue;
    p.all += static_cast<double>(n.shape.elements().value_or(0)) * 4;
    p.elements.push_back(n.shape.elements().value_or(0));
    p.copies.push_back(n.shape.dims[0].name == "layers" ? n.shape.dims[0].size : 1);
  }
  for (const auto& [what, elements] : backward) p.read_backward += static_cast<double>(elements) * 4;
  return p;
}

// DP all-reduces Ψ: 2(n−1)/n·Ψ. ZeRO-1/2 reduce-scatter and gather it: the
// same. ZeRO-3 gathers what each pass reads, once per pass, and
// reduce-scatters the gradients: (n−1)/n·(Ψ + forward reads + backward reads).
TEST(Zero, PlanBytesFollowTheFormulas) {
  const Params p = params();
  const double dp = planOf("mesh dp = 2; split batch over dp", 2, 2).gradient_bytes;
  EXPECT_DOUBLE_EQ(dp, p.all);  // 2 (n − 1) / n = 1 at n = 2
  for (int zero : {1, 2})
    EXPECT_NEAR(planOf("mesh dp = 2; split batch over dp; zero = " + std::to_string(zero), 2, 2).gradient_bytes, dp, 1)
        << "zero = " << zero;
  const double three = planOf("mesh dp = 2; split batch over dp; zero = 3", 2, 2).gradient_bytes;
  EXPECT_NEAR(three, 0.5 * (p.all + p.all + p.read_backward), 1);
  EXPECT_GT(three, dp);
  EXPECT_LE(three, 1.5 * dp);
}

// `dtlc plan` numbers its collectives 1, 2, … in the order it lists them,
// from the program's groups (prog::collectiveNumbers, which a failed
// collective's error names): every listed collective is a group, even where
// ZeRO-3's prefetch starts gathers earlier than their inputs.
TEST(Zero, PlanNumbersEveryCollectiveInListOrder) {
  for (const char* parallel : {"mesh dp = 2; split batch over dp", "mesh dp = 2; split batch over dp; zero = 1",
                               "mesh dp = 2; split batch over dp; zero = 3",
                               "mesh dp = 2; split batch over dp; zero = 3; prefetch = 2"}) {
    const std::vector<plan::Collective> cs = planOf(parallel, 2, 2, 2).collectives;
    ASSERT_GE(cs.size(), 2u) << parallel;
    for (size_t i = 0; i < cs.size(); ++i) EXPECT_EQ(cs[i].number, static_cast<int>(i) + 1) << parallel;
  }
}

// With accumulation ZeRO-1 reduces once per step, ZeRO-2 and 3 every micro-batch.
TEST(Zero, AccumulationScattersOncePerStepOnlyAtLevelOne) {
  for (int zero : {1, 2, 3}) {
    int scatters = 0;
    for (const plan::Collective& c : planOf("mesh dp = 2; split batch over dp; zero = " + std::to_string(zero), 2, 2, 4).collectives) {
      if (c.op != "reduce_scatter") continue;
      EXPECT_EQ(c.per_step, zero == 1) << "zero = " << zero;
      ++scatters;
    }
    EXPECT_GT(scatters, 0);
  }
}

// Model-state bytes per rank (AdamW, f32): parameters 4Ψ, or at level 3
// their pieces; gradients and the optimiser's two moments of the pieces.
TEST(Zero, PlanMemoryFollowsTheFormulas) {
  const Params p = params();
  double pieces = 0;  // rank 0's: the largest piece of each layer's copy
  for (size_t i = 0; i < p.elements.size(); ++i)
    pieces += static_cast<double>(p.copies[i] * layout::pieceSize(p.elements[i] / p.copies[i], 2, 0)) * 4;
  for (int zero : {0, 1, 2, 3}) {
    const plan::Memory m = planOf("mesh dp = 2; split batch over dp; zero = " + std::to_string(zero), 2, 2).memory;
    SCOPED_TRACE("zero = " + std::to_string(zero));
    EXPECT_EQ(m.parameters, zero == 3 ? pieces : p.all);
    EXPECT_EQ(m.gradients, zero == 0 ? p.all : pieces);
    EXPECT_EQ(m.optimizer_state, 2 * (zero == 0 ? p.all : pieces));
    // ZeRO-1 keeps its buckets' blocks for the step (the full gradient);
    // ZeRO-2 and 3 hold bucket blocks only while they are in flight.
    if (zero == 1) EXPECT_GE(m.communication, p.all);
    if (zero >= 2) EXPECT_EQ(m.communication, 0);
  }
}

// Without a rule splitting `batch` there is no data-parallel axis to shard over.
TEST(Zero, WithoutADataParallelAxisIsRefusedAtTheSetting) {
  driver::Frontend fe;
  driver::FrontendOptions o;
  o.world = 2;
  std::string spec = gptSpec("mesh tp = 2; split heads over tp\n  zero = 2", 8, 1);
  EXPECT_EQ(fe.runText("z.dtl", spec, o, driver::Stop::Plan), 1);
  const std::string d = fe.diagnostics().render();
  EXPECT_NE(d.find("error: `zero = 2` shards over the data-parallel axis, and no rule splits `batch`"), std::string::npos) << d;
  EXPECT_NE(d.find("hint: add `split batch over dp`"), std::string::npos) << d;
}

}  // namespace
}  // namespace dtl::rt
