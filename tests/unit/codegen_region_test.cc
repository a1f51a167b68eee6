// The region IR: its builder's shape rules, printer, hash and kernel plan.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/codegen/jit_x86.h"
#include "compiler/codegen/kernel_plan.h"
#include "compiler/codegen/region.h"
#include "core/hash.h"

namespace dtl::codegen {
namespace {

Region biasRelu() {
  Region r("bias_relu");
  int x = r.input("x", Shape{{{"batch", 4}, {"hidden", 3}}});
  int b = r.input("bias", Shape{{{"hidden", 3}}});
  r.output("y", r.unary(UnaryFn::Relu, r.binary(BinaryFn::Add, x, b)));
  return r;
}

TEST(CodegenRegion, PrintsOneNodePerLine) {
  EXPECT_EQ(printRegion(biasRelu()),
            "region bias_relu\n"
            "  %0 = input x : [batch=4, hidden=3]\n"
            "  %1 = input bias : [hidden=3]\n"
            "  %2 = add %0 %1 : [batch=4, hidden=3]\n"
            "  %3 = relu %2 : [batch=4, hidden=3]\n"
            "  output y = %3\n");
}

TEST(CodegenRegion, SoftmaxIsMaxSubExpSumDiv) {
  Region r("softmax");
  r.output("y", r.softmax(r.input("x", Shape{{{"rows", 2}, {"classes", 5}}}), "classes"));
  EXPECT_EQ(printRegion(r),
            "region softmax\n"
            "  %0 = input x : [rows=2, classes=5]\n"
            "  %1 = max %0 over classes : [rows=2]\n"
            "  %2 = sub %0 %1 : [rows=2, classes=5]\n"
            "  %3 = exp %2 : [rows=2, classes=5]\n"
            "  %4 = sum %3 over classes : [rows=2]\n"
            "  %5 = div %3 %4 : [rows=2, classes=5]\n"
            "  output y = %5\n");
}

TEST(CodegenRegion, BroadcastsByNameAsTheReference) {
  Region r("broadcast");
  int a = r.input("a", Shape{{{"i", 2}, {"j", 3}}});
  int b = r.input("b", Shape{{{"k", 4}, {"j", 3}}});
  int c = r.input("c", Shape{{{"j", 3}, {"i", 2}}});
  EXPECT_EQ(r.node(r.binary(BinaryFn::Mul, a, b)).shape.str(), "[i=2, j=3, k=4]");
  EXPECT_EQ(r.node(r.binary(BinaryFn::Mul, c, a)).shape.str(), "[j=3, i=2]");  // equal names: a's order
  EXPECT_EQ(r.node(r.binary(BinaryFn::Lt, r.constant(1), a)).dtype, DType::Bool);
}

TEST(CodegenRegionDeathTest, BuilderRefusesAShapeConflict) {
  Region r("conflict");
  int a = r.input("a", Shape{{{"i", 2}}});
  int b = r.input("b", Shape{{{"i", 3}}});
  EXPECT_DEATH(r.binary(BinaryFn::Sub, a, b), "region `conflict`: sub of \\[i=2\\] and \\[i=3\\]");
  EXPECT_DEATH(r.reduce(ReduceFn::Sum, a, "j"), "sum over `j`, which \\[i=2\\] lacks");
  int flag = r.binary(BinaryFn::Eq, a, a);
  EXPECT_DEATH(r.unary(UnaryFn::Exp, flag), "operand %2 is Bool");
}

// Value numbering: building a node equal to an earlier one returns that one,
// so the composites share what they both compute (a layer norm's gradient
// region rebuilds x̂ for the gain's gradient and inside normalizeGrad).
TEST(CodegenRegion, AnEqualNodeIsTheEarlierOne) {
  Region r("equal");
  const Shape s{{{"rows", 2}, {"d", 4}}};
  const int x = r.input("x", s), y = r.input("y", s);
  EXPECT_NE(x, y);  // inputs are buffers, never equal
  const int mean = r.reduce(ReduceFn::Mean, x, "d");
  EXPECT_EQ(r.reduce(ReduceFn::Mean, x, "d"), mean);
  EXPECT_NE(r.reduce(ReduceFn::Sum, x, "d"), mean);
  EXPECT_NE(r.reduce(ReduceFn::Mean, y, "d"), mean);
  EXPECT_NE(r.reduce(ReduceFn::Mean, x, "rows"), mean);
  EXPECT_EQ(r.constant(1.0f), r.constant(1.0f));
  EXPECT_NE(r.constant(0.0f), r.constant(-0.0f));  // a constant is its bits
  const int e = r.unary(UnaryFn::Exp, x);
  EXPECT_EQ(r.unary(UnaryFn::Exp, x), e);
  EXPECT_NE(r.unary(UnaryFn::Log, x), e);
  EXPECT_NE(r.binary(BinaryFn::Sub, x, y), r.binary(BinaryFn::Sub, y, x));
  // Two outputs of one node: each has its buffer, and one phase stores both.
  r.output("a", mean);
  r.output("b", r.reduce(ReduceFn::Mean, x, "d"));
  const KernelPlan plan = planKernel(r);
  ASSERT_EQ(plan.outputs, 2);
  int stored = 0;
  for (const PlanPhase& phase : plan.phases)
    for (int b : phase.stores) stored += b == plan.inputs || b == plan.inputs + 1;
  EXPECT_EQ(stored, 2);

  Region ln("layer_norm_grad");
  const Shape t{{{"seq", 3}, {"d", 8}}};
  const int v = ln.input("x", t), dy = ln.input("dy", t);
  ln.output("dgain", ln.binary(BinaryFn::Mul, dy, ln.normalize(v, "d", 1e-5f)));
  ln.output("dx", ln.normalizeGrad(v, dy, "d", 1e-5f));
  int reductions = 0;
  for (const RegionNode& n : ln.nodes()) reductions += n.kind == Kind::Reduce;
  EXPECT_EQ(reductions, 4) << printRegion(ln);  // μ, σ², mean(dy), mean(dy·x̂): x̂ built once, not twice
}

TEST(CodegenRegion, HashIsStableAndSeesEveryDetail) {
  EXPECT_EQ(hex64(regionHash(biasRelu())), hex64(regionHash(biasRelu())));
  EXPECT_EQ(hex64(regionHash(biasRelu())), "6a8454176b8ee8c1");  // fixed: a cache key must not drift between builds
  Region renamed = biasRelu();
  Region other("other_name");
  int x = other.input("x", Shape{{{"batch", 4}, {"hidden", 3}}});
  int b = other.input("bias", Shape{{{"hidden", 3}}});
  other.output("y", other.unary(UnaryFn::Relu, other.binary(BinaryFn::Add, x, b)));
  EXPECT_EQ(regionHash(other), regionHash(biasRelu()));  // the name is not part of it
  Region bigger("bias_relu");
  x = bigger.input("x", Shape{{{"batch", 5}, {"hidden", 3}}});
  b = bigger.input("bias", Shape{{{"hidden", 3}}});
  bigger.output("y", bigger.unary(UnaryFn::Relu, bigger.binary(BinaryFn::Add, x, b)));
  EXPECT_NE(regionHash(bigger), regionHash(biasRelu()));
  Region gelu("bias_relu");
  x = gelu.input("x", Shape{{{"batch", 4}, {"hidden", 3}}});
  b = gelu.input("bias", Shape{{{"hidden", 3}}});
  gelu.output("y", gelu.unary(UnaryFn::Gelu, gelu.binary(BinaryFn::Add, x, b)));
  EXPECT_NE(regionHash(gelu), regionHash(biasRelu()));
  Region c1("c"), c2("c");
  c1.output("y", c1.constant(0.1f));
  c2.output("y", c2.constant(std::nextafter(0.1f, 1.0f)));
  EXPECT_NE(regionHash(c1), regionHash(c2));  // constants print with 9 digits: every f32 distinct
}

TEST(CodegenKernelPlan, BuffersAndPhasesOfASoftmax) {
  Region r("softmax");
  int x = r.input("x", Shape{{{"rows", 2}, {"classes", 5}}});
  int y = r.softmax(x, "classes");
  r.output("y", y);
  r.output("row_max", 1);
  KernelPlan p = planKernel(r);
  ASSERT_EQ(p.buffers.size(), 4u);  // x, y, row_max, scratch for the sum
  EXPECT_EQ(p.buffers[3].name, "scratch%4");
  EXPECT_EQ(p.home[1], 2);  // the max is read back from its output
  ASSERT_EQ(p.phases.size(), 3u);
  EXPECT_EQ(p.phases[0].reduction, 1);
  EXPECT_EQ(p.phases[1].reduction, 4);
  EXPECT_EQ(p.phases[2].reduction, -1);
  EXPECT_EQ(p.phases[2].space.str(), "[rows=2, classes=5]");
  EXPECT_EQ(p.inputs, 1);
  EXPECT_EQ(p.outputs, 2);
  EXPECT_EQ(p.scratch, 1);
}

// A norm's gradient that a bias gradient then sums over the batch: the
// gradient's phase runs before that sum, which loads it rather than
// computing the whole chain again.
TEST(CodegenKernelPlan, AReductionLoadsAnOutputStoredBeforeIt) {
  Region r("norm_grad_bias");
  // d leading: a sum over the leading dim would be deferred instead (below)
  const Shape s{{{"d", 8}, {"batch", 4}}};
  int x = r.input("x", s), dy = r.input("dy", s);
  int dx = r.normalizeGrad(x, dy, "d", 1e-5f);
  int bias = r.reduce(ReduceFn::Sum, dx, "batch");
  r.output("dx", dx);
  r.output("db", bias);
  r.output("x_total", r.reduce(ReduceFn::Sum, x, "batch"));
  KernelPlan p = planKernel(r);
  int stored = -1, summed = -1;
  for (size_t k = 0; k < p.phases.size(); ++k) {
    if (p.phases[k].reduction == -1) stored = static_cast<int>(k);
    if (p.phases[k].reduction == bias) summed = static_cast<int>(k);
    if (p.phases[k].reduction != bias) EXPECT_TRUE(p.phases[k].loads.empty()) << k;
  }
  ASSERT_GE(stored, 0);
  EXPECT_EQ(summed, stored + 1);
  EXPECT_EQ(p.phases[static_cast<size_t>(summed)].loads, std::vector<int>{dx});
  EXPECT_EQ(p.buffers[static_cast<size_t>(p.home[static_cast<size_t>(dx)])].name, "dx");
  EXPECT_EQ(p.phases.back().reduction, r.outputs()[2].node);  // x's sum: an input, read from its buffer
  EXPECT_EQ(p.split, "");  // the batch sum's space is [d], the d sums' [batch]
  EXPECT_TRUE(p.folded.empty());

  // A reduction of a value that reads no reduction keeping its dim (a
  // softmax's sum of exp(x − max)) recomputes it: nothing stored.
  Region c("softmax");
  c.output("y", c.softmax(c.input("x", s), "d"));
  KernelPlan q = planKernel(c);
  ASSERT_EQ(q.phases.size(), 3u);
  for (const PlanPhase& phase : q.phases) EXPECT_TRUE(phase.loads.empty());
  EXPECT_EQ(q.scratch, 2);  // the max and the sum

  // The bias gradient alone an output: dx goes to a scratch buffer of its own.
  Region b("bias_only");
  int bx = b.input("x", s), bdy = b.input("dy", s);
  int bdx = b.normalizeGrad(bx, bdy, "d", 1e-5f);
  b.output("db", b.reduce(ReduceFn::Sum, bdx, "batch"));
  KernelPlan t = planKernel(b);
  const PlanBuffer& home = t.buffers[static_cast<size_t>(t.home[static_cast<size_t>(bdx)])];
  EXPECT_EQ(home.role, PlanBuffer::Role::Scratch);
  EXPECT_EQ(home.shape, s);
}

// The x86 kernel visits the rows its phases share once: a layer norm's two
// reductions and its output phase run one [batch, seq] row after another
// inside one nest (the row is re-read from L1), not phase after phase over
// all rows. Its loops over d stay one per phase.
TEST(CodegenKernelPlan, X86PhasesShareTheirLeadingLoops) {
  Region r("layer_norm");
  const Shape s{{{"batch", 4}, {"seq", 3}, {"d", 8}}};
  r.output("y", r.normalize(r.binary(BinaryFn::Add, r.input("x", s), r.input("res", s)), "d", 1e-5f));
  ASSERT_EQ(planKernel(r).phases.size(), 3u);  // mean, variance, output
  const std::string ir = x86Ir(r, /*optimised=*/false);
  auto labels = [&](const std::string& loop) {  // blocks named `loop`, `loop1`, … (LLVM numbers repeats)
    int n = 0;
    for (size_t at = ir.find("\n" + loop); at != std::string::npos; at = ir.find("\n" + loop, at + 1)) {
      const std::string label = ir.substr(at + 1, ir.find(':', at) - at - 1);
      n += label.find_first_not_of("0123456789", loop.size()) == std::string::npos;
    }
    return n;
  };
  EXPECT_EQ(labels("batch.rows"), 1) << ir;
  EXPECT_EQ(labels("seq.loop"), 1) << ir;
  EXPECT_EQ(labels("d.loop"), 3) << ir;
}

// A bias gradient, Σ over the leading dim of relu'(x)·dy: deferred. The
// output phase stores dx and adds it into per-chunk partials, so dx is
// evaluated once and the region splits over batch; the tail combines.
TEST(CodegenKernelPlan, ASumOverTheLeadingDimIsDeferredIntoPartials) {
  Region r("relu_grad_bias");
  const Shape s{{{"batch", 3000}, {"d", 64}}};
  int x = r.input("x", s), dy = r.input("dy", s);
  int dx = r.unaryGrad(UnaryFn::Relu, x, dy);
  int db = r.reduce(ReduceFn::Sum, dx, "batch");
  r.output("dx", dx);
  r.output("db", db);
  r.output("db2", r.binary(BinaryFn::Mul, db, r.constant(2.0f)));  // reads the sum: the tail
  KernelPlan p = planKernel(r);
  EXPECT_EQ(p.split, "batch");
  ASSERT_EQ(p.folded.size(), 1u);
  EXPECT_EQ(p.folded[0].operand, dx);
  EXPECT_EQ(p.folded[0].dims, std::vector<std::string>{"batch"});
  EXPECT_GT(p.chunks, 1);
  EXPECT_EQ(p.chunks, (3000 + p.chunk_rows - 1) / p.chunk_rows);
  const PlanBuffer& partial = p.buffers[static_cast<size_t>(p.folded[0].partial)];
  EXPECT_EQ(partial.shape.str(), "[%chunk=" + std::to_string(p.chunks) + ", d=64]");
  ASSERT_EQ(p.phases.size(), 3u);
  EXPECT_EQ(p.phases[0].space, s);  // dx, stored and added up, in one nest
  EXPECT_EQ(p.phases[0].partials, std::vector<int>{db});
  EXPECT_FALSE(p.phases[0].tail);
  EXPECT_TRUE(p.phases[1].combine && p.phases[1].tail);
  EXPECT_EQ(p.phases[1].reduction, db);
  EXPECT_TRUE(p.phases[2].tail);  // db2
  EXPECT_TRUE(p.hasTail());

  // The same region with dx not an output: a phase of its own evaluates and adds it.
  Region q("bias_only");
  int qx = q.input("x", s), qdy = q.input("dy", s);
  q.output("db", q.reduce(ReduceFn::Sum, q.unaryGrad(UnaryFn::Relu, qx, qdy), "batch"));
  KernelPlan t = planKernel(q);
  EXPECT_EQ(t.split, "batch");
  ASSERT_EQ(t.phases.size(), 2u);
  EXPECT_TRUE(t.phases[0].stores.empty());
  EXPECT_EQ(t.phases[0].partials.size(), 1u);
  EXPECT_EQ(t.chunk_rows, p.chunk_rows);  // chunks from the nodes over the split dim, not from the outputs
}

// Sums over several names (a GPT bias gradient: batch then seq, or seq then
// batch) fold into one partial of the result's shape; an inner sum is not
// computed unless it is an output.
TEST(CodegenKernelPlan, AChainOfSumsFoldsIntoOnePartial) {
  for (bool batch_first : {true, false}) {
    Region r("gelu_grad_bias");
    const Shape s{{{"batch", 4}, {"seq", 16}, {"d", 32}}};
    int x = r.input("x", s), dy = r.input("dy", s);
    int dx = r.unaryGrad(UnaryFn::Gelu, x, dy);
    int inner = r.reduce(ReduceFn::Sum, dx, batch_first ? "batch" : "seq");
    int db = r.reduce(ReduceFn::Sum, inner, batch_first ? "seq" : "batch");
    r.output("dx", dx);
    r.output("db", db);
    KernelPlan p = planKernel(r);
    EXPECT_EQ(p.split, "batch") << batch_first;
    ASSERT_EQ(p.folded.size(), 1u);
    EXPECT_EQ(p.folded[0].operand, dx);
    EXPECT_EQ(p.folded[0].dims.size(), 2u);
    EXPECT_EQ(p.buffers[static_cast<size_t>(p.folded[0].partial)].shape.dims.back().name, "d");
    EXPECT_EQ(p.home[static_cast<size_t>(inner)], -1) << "the inner sum is not computed";
    EXPECT_EQ(p.phases.size(), 2u);

    // As an output (the oracle's probe), the inner sum is computed too, and db still folds.
    r.output("inner", inner);
    KernelPlan q = planKernel(r);
    EXPECT_EQ(q.split, "batch");
    EXPECT_EQ(q.chunk_rows, p.chunk_rows);
    ASSERT_NE(q.foldedSum(db), nullptr);
    EXPECT_EQ(q.foldedSum(db)->operand, dx);
    EXPECT_GE(q.home[static_cast<size_t>(inner)], 0);
  }
}

// A value downstream of the sum that has the summed dim again (a batch
// norm's x − mean over batch) needs the whole sum first: not deferred.
TEST(CodegenKernelPlan, ASumReadBackAlongItsDimIsNotDeferred) {
  Region r("batch_centre");
  const Shape s{{{"batch", 8}, {"d", 4}}};
  int x = r.input("x", s);
  r.output("y", r.binary(BinaryFn::Sub, x, r.reduce(ReduceFn::Mean, x, "batch")));
  KernelPlan p = planKernel(r);
  EXPECT_TRUE(p.folded.empty());
  EXPECT_EQ(p.split, "");
  EXPECT_FALSE(p.hasTail());
}

}  // namespace
}  // namespace dtl::codegen
