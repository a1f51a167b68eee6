// The region IR: its builder's shape rules, printer, hash and kernel plan.
#include <gtest/gtest.h>

#include <cmath>

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
  const Shape s{{{"batch", 4}, {"d", 8}}};
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
  EXPECT_EQ(p.split, "");  // the batch sum's space starts with d

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

}  // namespace
}  // namespace dtl::codegen
