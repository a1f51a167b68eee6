// compiler/codegen/traffic.h: the non-GEMM bytes of a step, node by node and
// fused, counted by hand on a small program.
#include <gtest/gtest.h>

#include "compiler/codegen/traffic.h"
#include "compiler/program/plan_program.h"

namespace dtl::codegen {
namespace {

using ir::Graph;
using ir::Node;
using ir::Op;

int add(Graph& g, Op op, Shape shape, std::vector<int> in, std::string fn = "") {
  Node n;
  n.op = op;
  n.shape = std::move(shape);
  n.inputs = std::move(in);
  n.fn = std::move(fn);
  return g.add(std::move(n));
}

TEST(StepTraffic, CountsEachKernelsOperandsAndEachRegionsInputsAndOutputsOnce) {
  Graph g;
  const Shape bh{{{"batch", 4}, {"hidden", 5}}};
  int x = add(g, Op::Input, Shape{{{"batch", 4}, {"in", 3}}}, {});
  g.nodes[static_cast<size_t>(x)].name = "x";
  int w = add(g, Op::Param, Shape{{{"in", 3}, {"hidden", 5}}}, {});
  g.nodes[static_cast<size_t>(w)].name = "w";
  int mm = add(g, Op::Contract, bh, {x, w});                      // 2·4·3·5 = 120 FLOP
  int b = add(g, Op::Param, Shape{{{"hidden", 5}}}, {});
  g.nodes[static_cast<size_t>(b)].name = "b";
  int biased = add(g, Op::Binary, bh, {mm, b}, "add");           // 80 + 20 in, 80 out
  int relu = add(g, Op::Unary, bh, {biased}, "relu");            // 80 in, 80 out
  int two = add(g, Op::Const, Shape{}, {});                      // 4 out
  g.nodes[static_cast<size_t>(two)].scalar = 2;
  int scaled = add(g, Op::Binary, bh, {relu, two}, "mul");       // 80 + 4 in, 80 out
  int w2 = add(g, Op::Param, Shape{{{"hidden", 5}, {"out", 2}}}, {});
  g.nodes[static_cast<size_t>(w2)].name = "w2";
  int mm2 = add(g, Op::Contract, Shape{{{"batch", 4}, {"out", 2}}}, {scaled, w2});  // 2·4·5·2 = 80 FLOP
  int loss = add(g, Op::Reduce, Shape{}, {mm2}, "sum");         // 32 in, 4 out
  g.nodes[static_cast<size_t>(loss)].names = {"batch", "out"};
  g.loss = loss;
  g.forward_end = static_cast<int>(g.nodes.size());

  program::PlanOptions fused;
  fused.fuse = true;
  prog::Program p = program::planProgram(g, layout::Layout{}, {}, fused);
  StepTraffic t = stepTraffic(p, 1);
  EXPECT_EQ(t.node_by_node, 180 + 160 + 4 + 164 + 36);
  EXPECT_EQ(t.kernels_node_by_node, 5);
  EXPECT_EQ(t.contraction_flops, 200);
  // The bias, relu and scaling fuse into one region reading mm and b, writing
  // `scaled`; the two-dim sum is not one region reduction, so it runs alone.
  ASSERT_EQ(p.fused.size(), 1u);
  EXPECT_EQ(t.fused, (80 + 20 + 80) + 36);
  EXPECT_EQ(t.kernels_fused, 2);
  EXPECT_EQ(t.update, 0);  // no Update nodes: a forward-only graph

  const StepTraffic alone = stepTraffic(program::planProgram(g), 1);  // planned without fusion
  EXPECT_EQ(alone.node_by_node, t.node_by_node);
  EXPECT_EQ(alone.fused, t.node_by_node);
  EXPECT_EQ(alone.kernels_fused, 5);
  EXPECT_NE(printTraffic(t).find("node by node 0.0 MiB in 5 kernels, fused 0.0 MiB in 2 kernels (0.40x)"),
            std::string::npos)
      << printTraffic(t);
}

}  // namespace
}  // namespace dtl::codegen
