// Lowering (compiler/ir/lower_model.cc) over what sema recorded: a stack is
// checked once but lowered copy by copy, a stacked layer's binding is lowered
// at each use, and a stack too large to unroll is an error, not a hang.
#include <gtest/gtest.h>

#include <string>

#include "compiler/driver/frontend.h"

namespace dtl {
namespace {

const char* const kStack = R"(
layer Scale(d: dim) {
  param w : [d] init ones
  twice = w * 2
  forward(x) = x * twice + twice
}
model M {
  dim d = 4, layers = 3
  input x     : f32[batch, d]
  input label : i32[batch]
  blocks = repeat(layers) Scale(d)
  loss = cross_entropy(blocks(x), label, over = d)
}
data { train { synthetic(seed = 1) } }
train { batch = 2  steps = 1  optimizer = sgd(lr = 0.1) }
)";

std::vector<const ir::Node*> nodesOf(const ir::Graph& g, ir::Op op) {
  std::vector<const ir::Node*> out;
  for (const ir::Node& n : g.nodes)
    if (n.op == op) out.push_back(&n);
  return out;
}

TEST(LowerModel, StackIsRecordedOnceAndLoweredPerCopy) {
  driver::Frontend fe;
  ASSERT_EQ(fe.runText("m.dtl", kStack, {}, driver::Stop::Ir), 0) << fe.diagnostics().render();
  // Sema checked one copy: one call step, its block holds one copy's work.
  const sema::OpTrace& ops = fe.spec().model.ops;
  int calls = 0;
  for (const sema::TraceBlock& b : ops.blocks)
    for (const sema::TraceStep& s : b.steps)
      if (s.kind == sema::TraceStep::Kind::Call) {
        ++calls;
        ASSERT_EQ(s.stack.size(), 1u);
        EXPECT_EQ(s.stack[0].name, "layers");
      }
  EXPECT_EQ(calls, 1);
  // Lowering made three copies, each reading its own slice of the whole `w`.
  const ir::Graph& g = fe.graph();
  std::vector<const ir::Node*> slices = nodesOf(g, ir::Op::Slice);
  ASSERT_EQ(slices.size(), 3u);
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_EQ(slices[static_cast<size_t>(c)]->index, c);
    EXPECT_EQ(slices[static_cast<size_t>(c)]->names, std::vector<std::string>{"layers"});
  }
  EXPECT_EQ(nodesOf(g, ir::Op::Param).size(), 3u);  // one per copy, each sliced
  for (const ir::Node* p : nodesOf(g, ir::Op::Param)) EXPECT_EQ(p->shape.str(), "[layers=3, d=4]");
  // `twice` is used twice per copy and lowered at each use: 2 muls by 2 and
  // the x * twice mul per copy.
  EXPECT_EQ(nodesOf(g, ir::Op::Binary).size(), 3u * 4u);
  // Copy 0 reads the input, copy c + 1 copy c's result.
  std::vector<const ir::Node*> adds, xmuls;
  for (const ir::Node* n : nodesOf(g, ir::Op::Binary)) {
    if (n->fn == "add") adds.push_back(n);
    if (n->fn == "mul" && n->shape.dims.size() == 2) xmuls.push_back(n);
  }
  ASSERT_EQ(adds.size(), 3u);
  ASSERT_EQ(xmuls.size(), 3u);
  EXPECT_EQ(g[xmuls[0]->inputs[0]].op, ir::Op::Input);
  EXPECT_EQ(xmuls[1]->inputs[0], adds[0]->id);
  EXPECT_EQ(xmuls[2]->inputs[0], adds[1]->id);
  EXPECT_EQ(g.loss, static_cast<int>(g.nodes.size()) - 1);
  EXPECT_EQ(g.forward_end, static_cast<int>(g.nodes.size()));
}

TEST(LowerModel, StackTooLargeToUnrollIsAnError) {
  std::string spec = kStack;
  spec.replace(spec.find("layers = 3"), 10, "layers = 1000000");
  driver::Frontend fe;
  ASSERT_EQ(fe.runText("m.dtl", spec, {}, driver::Stop::Sema), 0) << fe.diagnostics().render();
  driver::Frontend lowered;
  EXPECT_EQ(lowered.runText("m.dtl", spec, {}, driver::Stop::Grad), 1);
  EXPECT_EQ(lowered.diagnostics().render(),
            "m.dtl:12:24: error: lowering the model takes more than 50000 steps\n"
            "    loss = cross_entropy(blocks(x), label, over = d)\n"
            "                         ^~~~~~~~~\n"
            "hint: `repeat(n)` lowers n copies of its layer's forward; stacks inside stacks multiply the work\n"
            "1 error generated.\n");
}

}  // namespace
}  // namespace dtl
