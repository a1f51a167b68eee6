// accumulate_into_contraction.h: add(x, contract(a, b)) → contract(a, b, x).
#include "compiler/passes/accumulate_into_contraction.h"

#include <vector>

namespace dtl::passes {

namespace {

using ir::Node;
using ir::Op;

// A value a kernel writes, which the planner may therefore place in another
// node's storage (compiler/program/plan_program.cc, computed()): not a feed,
// a view, an update or a collective, and not one of several results.
bool computedByAKernel(const Node& n) {
  switch (n.op) {
    case Op::Input: case Op::Param: case Op::Reshape: case Op::Slice: case Op::Result: case Op::Update:
      return false;
    default: break;
  }
  return !ir::isConversion(n.op) && n.results.empty() && n.dtype == DType::F32;
}

}  // namespace

int accumulateIntoContraction(ir::Graph& g, const layout::Layout* layout) {
  // Readers of each value; the caller's reads (loss, metrics, outputs,
  // gradients) count, so a kept value is never computed over.
  std::vector<int> readers(g.nodes.size(), 0);
  for (const Node& n : g.nodes)
    for (int x : n.inputs) ++readers[static_cast<size_t>(x)];
  if (g.loss >= 0) ++readers[static_cast<size_t>(g.loss)];
  for (const auto& [name, id] : g.metrics) ++readers[static_cast<size_t>(id)];
  for (int id : g.outputs) ++readers[static_cast<size_t>(id)];
  for (const auto& [path, id] : g.grads) ++readers[static_cast<size_t>(id)];
  auto placement = [&](int id) {
    return layout ? layout->of.at(static_cast<size_t>(id)) : std::vector<layout::Placement>{};
  };
  auto onlyRead = [&](int id) { return readers[static_cast<size_t>(id)] == 1; };
  int rewritten = 0;
  for (Node& add : g.nodes) {
    if (add.id < g.forward_end || add.op != Op::Binary || add.fn != "add" || add.dtype != DType::F32 ||
        add.inputs.size() != 2 || add.inputs[0] == add.inputs[1])
      continue;
    // The later operand first as the product: its operands then stay live
    // the least beyond where they were read before.
    const int later = add.inputs[0] > add.inputs[1] ? 0 : 1;
    for (int side : {later, 1 - later}) {
      const Node& product = g[add.inputs[static_cast<size_t>(side)]];
      const Node& base = g[add.inputs[static_cast<size_t>(1 - side)]];
      if (product.op != Op::Contract || product.inputs.size() != 2 || !product.results.empty() ||
          product.dtype != DType::F32 || product.shape != add.shape || !onlyRead(product.id))
        continue;
      if (base.id < g.forward_end || !computedByAKernel(base) || base.shape != add.shape || !onlyRead(base.id))
        continue;
      if (placement(product.id) != placement(add.id) || placement(base.id) != placement(add.id)) continue;
      const std::vector<int> operands = product.inputs;
      add.op = Op::Contract;
      add.fn.clear();
      add.inputs = {operands[0], operands[1], base.id};
      ++rewritten;
      break;
    }
  }
  return rewritten;
}

}  // namespace dtl::passes
