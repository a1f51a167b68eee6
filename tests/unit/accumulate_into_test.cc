// compiler/passes/accumulate_into_contraction.h: where it fires and where it
// must not (hand-built graphs), that the planner computes each base in place
// and runs no unread product (a toy graph, a GPT at one rank, over data
// parallel and over tensor parallel ranks), and that a training run with it
// gives the run without it: bit for bit on the reference kernels (the same
// roundings), within a GEMM's rounding on the fast ones.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "compiler/driver/frontend.h"
#include "compiler/passes/accumulate_into_contraction.h"
#include "compiler/program/plan_program.h"
#include "runtime/exec/executor.h"
#include "tests/unit/backend_test_util.h"
#include "tests/unit/mesh_threads.h"

namespace dtl::passes {
namespace {

using ir::Node;
using ir::Op;

const Dim kB{"b", 2}, kK{"k", 3}, kN{"n", 4};
const Shape kBN{{kB, kN}};

int add(ir::Graph& g, Op op, Shape s, std::vector<int> in, std::string fn = "") {
  Node n;
  n.op = op;
  n.shape = std::move(s);
  n.inputs = std::move(in);
  n.fn = std::move(fn);
  n.name = n.fn;
  return g.add(std::move(n));
}

// Forward: inputs a [b, k], w [k, n], v [b, n]. Backward: x = exp(v) (a
// value a kernel computes), c = a @ w, s = add(x, c), the caller's output.
struct Toy {
  ir::Graph g;
  int a, w, v, x, c, s;
};

Toy toy() {
  Toy t;
  t.a = add(t.g, Op::Input, Shape{{kB, kK}}, {});
  t.w = add(t.g, Op::Input, Shape{{kK, kN}}, {});
  t.v = add(t.g, Op::Input, kBN, {});
  t.g.forward_end = 3;
  t.x = add(t.g, Op::Unary, kBN, {t.v}, "exp");
  t.c = add(t.g, Op::Contract, kBN, {t.a, t.w});
  t.s = add(t.g, Op::Binary, kBN, {t.x, t.c}, "add");
  t.g.outputs = {t.s};
  return t;
}

TEST(AccumulateIntoContraction, AnAddOfAProductBecomesAContractionIntoTheOtherSummand) {
  for (bool product_first : {false, true}) {
    Toy t = toy();
    if (product_first) std::swap(t.g.nodes[static_cast<size_t>(t.s)].inputs[0], t.g.nodes[static_cast<size_t>(t.s)].inputs[1]);
    ASSERT_EQ(accumulateIntoContraction(t.g, nullptr), 1);
    const Node& s = t.g[t.s];
    EXPECT_EQ(s.op, Op::Contract);
    EXPECT_TRUE(s.fn.empty());
    EXPECT_EQ(s.inputs, (std::vector<int>{t.a, t.w, t.x}));
    EXPECT_EQ(ir::accumulationBase(s), t.x);
    // The planner computes the base in the contraction's storage and leaves
    // the unread product out.
    const prog::Program p = program::planProgram(t.g);
    const prog::Storage& base = p.train.storage[static_cast<size_t>(t.x)];
    EXPECT_EQ(base.kind, prog::Storage::Alias);
    EXPECT_EQ(base.index, t.s);
    for (const prog::Instr& in : p.train.instrs) EXPECT_FALSE(in.kind == prog::Instr::Run && in.id == t.c);
  }
}

TEST(AccumulateIntoContraction, ASumOfProductsIsAChain) {
  ir::Graph g;
  const int a = add(g, Op::Input, Shape{{kB, kK}}, {});
  std::vector<int> w;
  for (int k = 0; k < 3; ++k) w.push_back(add(g, Op::Input, Shape{{kK, kN}}, {}));
  g.forward_end = static_cast<int>(g.nodes.size());
  const int c1 = add(g, Op::Contract, kBN, {a, w[0]}), c2 = add(g, Op::Contract, kBN, {a, w[1]});
  const int s12 = add(g, Op::Binary, kBN, {c1, c2}, "add");
  const int c3 = add(g, Op::Contract, kBN, {a, w[2]});
  const int s = add(g, Op::Binary, kBN, {s12, c3}, "add");
  g.outputs = {s};
  ASSERT_EQ(accumulateIntoContraction(g, nullptr), 2);
  // The later product accumulates into the earlier one (its operands stay
  // live no longer than before), the third into that sum.
  EXPECT_EQ(g[s12].inputs, (std::vector<int>{a, w[1], c1}));
  EXPECT_EQ(g[s].inputs, (std::vector<int>{a, w[2], s12}));
  const prog::Program p = program::planProgram(g);
  EXPECT_EQ(p.train.storage[static_cast<size_t>(c1)].index, s12);
  EXPECT_EQ(p.train.storage[static_cast<size_t>(s12)].index, s);
  for (const prog::Instr& in : p.train.instrs) EXPECT_FALSE(in.kind == prog::Instr::Run && (in.id == c2 || in.id == c3));
}

// Each case breaks one condition of the toy; the add stays an add.
TEST(AccumulateIntoContraction, DoesNotFireWhereTheBaseCannotBeComputedOver) {
  struct Case {
    const char* why;
    void (*edit)(Toy&);
  } cases[] = {
      {"the base has another reader", [](Toy& t) { t.g.outputs.push_back(add(t.g, Op::Unary, kBN, {t.x}, "neg")); }},
      {"the caller keeps the base", [](Toy& t) { t.g.grads.push_back({"p", t.x}); }},
      {"the product has another reader", [](Toy& t) { t.g.outputs.push_back(t.c); }},
      {"the base is a forward value", [](Toy& t) { t.g.nodes[static_cast<size_t>(t.s)].inputs[0] = t.v; }},
      {"the add is in the forward pass", [](Toy& t) { t.g.forward_end = t.s + 1; }},
      {"the base is a view", [](Toy& t) { t.g.nodes[static_cast<size_t>(t.x)].op = Op::Reshape; }},
      {"the base is another order (the add permutes it)",
       [](Toy& t) { t.g.nodes[static_cast<size_t>(t.x)].shape = Shape{{kN, kB}}; }},
      {"the product is another order",
       [](Toy& t) { t.g.nodes[static_cast<size_t>(t.c)].shape = Shape{{kN, kB}}; }},
      {"the base is broadcast", [](Toy& t) { t.g.nodes[static_cast<size_t>(t.x)].shape = Shape{{kN}}; }},
      {"not f32", [](Toy& t) { t.g.nodes[static_cast<size_t>(t.s)].dtype = DType::BF16; }},
      {"a subtraction", [](Toy& t) { t.g.nodes[static_cast<size_t>(t.s)].fn = "sub"; }},
  };
  for (const Case& k : cases) {
    Toy t = toy();
    k.edit(t);
    EXPECT_EQ(accumulateIntoContraction(t.g, nullptr), 0) << k.why;
    EXPECT_EQ(t.g[t.s].op, Op::Binary) << k.why;
  }
}

// On a laid-out graph only where the three values are placed alike on every
// axis: a partial product into a partial base is the partial sum of the add.
TEST(AccumulateIntoContraction, LaidOutOnlyWherePlacedAlike) {
  const layout::Placement rep, partial{layout::Placement::Partial, "", false};
  for (bool alike : {true, false}) {
    Toy t = toy();
    layout::Layout l;
    l.mesh = {{"tp", 2}};
    l.of.assign(t.g.nodes.size(), {rep});
    l.of[static_cast<size_t>(t.c)] = l.of[static_cast<size_t>(t.s)] = {partial};
    if (alike) l.of[static_cast<size_t>(t.x)] = {partial};
    EXPECT_EQ(accumulateIntoContraction(t.g, &l), alike ? 1 : 0);
  }
}

// Rank 0's program: how many contractions add into a base; each base
// computed in place, placed as its contraction; no product left unread runs.
int expectInPlace(const driver::Frontend& fe, int world, const std::string& what) {
  SCOPED_TRACE(what);
  const prog::Program p = world > 1 ? program::planProgram(fe.graph(), fe.layout(), layout::meshCoords(fe.layout().mesh, 0))
                                    : program::planProgram(fe.graph());
  std::vector<int> readers(p.nodes.size(), 0);
  for (const Node& n : p.nodes)
    for (int x : n.inputs) ++readers[static_cast<size_t>(x)];
  int into = 0;
  for (const prog::Instr& in : p.train.instrs) {
    if (in.kind != prog::Instr::Run) continue;
    const Node& n = p[in.id];
    EXPECT_FALSE(n.op == Op::Contract && readers[static_cast<size_t>(n.id)] == 0 && p.train.storage[static_cast<size_t>(n.id)].kind == prog::Storage::Slot)
        << "%" << n.id << ": an unread product runs";
    const int base = ir::accumulationBase(n);
    if (n.op != Op::Contract || base < 0) continue;
    ++into;
    const prog::Storage& st = p.train.storage[static_cast<size_t>(base)];
    EXPECT_EQ(st.kind, prog::Storage::Alias) << "%" << base;
    EXPECT_EQ(st.index, n.id) << "%" << base;
    EXPECT_EQ(p.placement[static_cast<size_t>(base)], p.placement[static_cast<size_t>(n.id)]) << "%" << base;
  }
  return into;
}

TEST(AccumulateIntoContraction, AGptsInputGradientsAccumulateInPlace) {
  {
    driver::Frontend fe;
    driver::FrontendOptions o;
    o.world = 1;
    ASSERT_EQ(fe.run(std::string(DTL_SOURCE_DIR) + "/samples/char_gpt.dtl", o, driver::Stop::Grad), 0)
        << fe.diagnostics().render();
    // Per block: dq·Wqᵀ + dk·Wkᵀ + dv·Wvᵀ, two accumulations.
    EXPECT_GE(expectInPlace(fe, 1, "char_gpt, one process"), 2 * 2);  // 2 blocks
  }
  {
    driver::Frontend fe;
    driver::FrontendOptions o;
    o.world = 2;
    ASSERT_EQ(fe.run(std::string(DTL_SOURCE_DIR) + "/samples/char_gpt.dtl", o, driver::Stop::Plan), 0)
        << fe.diagnostics().render();
    EXPECT_GE(expectInPlace(fe, 2, "char_gpt, two data-parallel ranks"), 2 * 2);
  }
  // Heads split over tp: the input gradient of q, k and v's projections is a
  // partial sum on each rank, accumulated as one before its all-reduce.
  auto fe = rt::testing_mesh::compile(rt::testing_mesh::gptSpec("mesh tp = 2; split heads over tp; split hidden over tp", 8, 1), 2);
  EXPECT_GE(expectInPlace(*fe, 2, "tensor parallel"), 2 * 2);
}

// One training run of the tiny GPT's program: loss and gradients.
struct Trained {
  rt::testing::Buf loss;
  std::map<std::string, rt::testing::Buf> grads;
};

Trained train(const ir::Graph& g, rt::Backend& be, const std::map<std::string, rt::testing::Buf>& params,
          const std::map<std::string, rt::testing::Buf>& inputs) {
  Trained r;
  const prog::Program p = program::planProgram(g);
  rt::Executor ex(p, be);
  std::map<std::string, rt::testing::Buf> own = params;
  for (auto& [path, b] : own) ex.bindParam(path, b.f.data());
  for (const auto& [name, b] : inputs)
    ex.setInput(name, isFloat(b.dtype) ? static_cast<const void*>(b.f.data()) : static_cast<const void*>(b.i.data()), b.size());
  rt::RunContext ctx;
  ctx.seed = 3;
  const rt::KernelStatus st = ex.run(true, ctx);
  EXPECT_TRUE(st.ok) << st.message;
  if (!st.ok) return r;
  r.loss = rt::testing::Buf(Shape{}, DType::F32);
  r.loss.f[0] = ex.value(g.loss);
  for (const auto& [path, id] : g.grads) {
    rt::testing::Buf& b = r.grads[path] = rt::testing::Buf(own.at(path).shape, DType::F32);
    const float* got = ex.grad(path);
    std::copy(got, got + b.size(), b.f.begin());
  }
  return r;
}

TEST(AccumulateIntoContraction, TrainingGivesWhatItGaveWithoutThePass) {
  const std::string spec = rt::testing_mesh::gptSpec("", 4, 1);
  driver::Frontend with, without;
  driver::FrontendOptions o;
  ASSERT_EQ(with.runText("g.dtl", spec, o, driver::Stop::Grad), 0) << with.diagnostics().render();
  o.accumulate_into_contraction = false;
  ASSERT_EQ(without.runText("g.dtl", spec, o, driver::Stop::Grad), 0) << without.diagnostics().render();
  int fired = 0;
  for (const Node& n : with.graph().nodes) fired += n.op == Op::Contract && ir::accumulationBase(n) >= 0;
  for (const Node& n : without.graph().nodes) EXPECT_FALSE(n.op == Op::Contract && n.inputs.size() == 3) << "%" << n.id;
  ASSERT_GE(fired, 4);
  std::mt19937 rng(17);
  std::map<std::string, rt::testing::Buf> params, inputs;
  for (const Node& n : with.graph().nodes) {
    if (n.op == Op::Param && !params.count(n.name)) params[n.name] = rt::testing::normal(n.shape, rng, 0.3f);
    if (n.op == Op::Input && !inputs.count(n.name)) inputs[n.name] = rt::testing::ints(n.shape, rng, 0, 15, n.dtype);
  }
  std::unique_ptr<rt::Backend> ref = rt::makeReferenceBackend(), fast = rt::makeFastBackend();
  const Trained ref_with = train(with.graph(), *ref, params, inputs), ref_without = train(without.graph(), *ref, params, inputs);
  const Trained fast_with = train(with.graph(), *fast, params, inputs), fast_without = train(without.graph(), *fast, params, inputs);
  ASSERT_FALSE(ref_with.grads.empty());
  EXPECT_EQ(ref_with.loss.f, ref_without.loss.f);
  EXPECT_TRUE(rt::testing::close(fast_with.loss, ref_with.loss, 1e-4, 1e-5));
  for (const auto& [path, grad] : ref_without.grads) {
    EXPECT_EQ(ref_with.grads.at(path).f, grad.f) << path << ": the reference's roundings differ";
    EXPECT_TRUE(rt::testing::close(fast_with.grads.at(path), fast_without.grads.at(path), 1e-5, 1e-6)) << path;
    EXPECT_TRUE(rt::testing::close(fast_with.grads.at(path), grad, 1e-4, 1e-5)) << path;
  }
}

}  // namespace
}  // namespace dtl::passes
