// scatter_into_gradient.h: add(dense, embed_grad) → embed_grad(…, dense).
#include "compiler/passes/scatter_into_gradient.h"

#include <vector>

namespace dtl::passes {

int scatterIntoGradient(ir::Graph& g, const layout::Layout* layout) {
  std::vector<int> readers(g.nodes.size(), 0);
  for (const ir::Node& n : g.nodes)
    for (int x : n.inputs) ++readers[static_cast<size_t>(x)];
  for (int id : g.outputs) ++readers[static_cast<size_t>(id)];
  for (const auto& [path, id] : g.grads) ++readers[static_cast<size_t>(id)];
  auto placement = [&](int id) {
    return layout ? layout->of.at(static_cast<size_t>(id)) : std::vector<layout::Placement>{};
  };
  int rewritten = 0;
  for (ir::Node& add : g.nodes) {
    if (add.op != ir::Op::Binary || add.fn != "add" || add.dtype != DType::F32) continue;
    for (int side = 0; side < 2; ++side) {
      const ir::Node& scatter = g[add.inputs[static_cast<size_t>(side)]];
      const int dense = add.inputs[static_cast<size_t>(1 - side)];
      if (scatter.op != ir::Op::EmbedGrad || scatter.inputs.size() != 2 || readers[static_cast<size_t>(scatter.id)] != 1 ||
          scatter.shape != add.shape || g[dense].shape != add.shape || g[dense].dtype != DType::F32 ||
          placement(scatter.id) != placement(add.id) || placement(dense) != placement(add.id))
        continue;
      const int ids = scatter.inputs[0], dy = scatter.inputs[1];
      add.op = ir::Op::EmbedGrad;
      add.fn.clear();
      add.inputs = {ids, dy, dense};
      ++rewritten;
      break;
    }
  }
  return rewritten;
}

}  // namespace dtl::passes
