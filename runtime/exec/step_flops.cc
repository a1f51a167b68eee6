#include "runtime/exec/step_flops.h"

#include <set>
#include <string>

namespace dtl::rt {

namespace {

double elements(const Shape& s) {
  double n = 1;
  for (const Dim& d : s.dims) n *= static_cast<double>(d.size);
  return n;
}

// A contraction sums the names its operands share: M·N·K is the product of
// every name of either operand, each once.
double contractFlops(const Shape& a, const Shape& b) {
  std::set<std::string> seen;
  double n = 1;
  for (const Shape* s : {&a, &b})
    for (const Dim& d : s->dims)
      if (seen.insert(d.name).second) n *= static_cast<double>(d.size);
  return 2 * n;
}

}  // namespace

double trainMatmulFlops(const prog::Program& p) {
  double total = 0;
  for (const prog::Instr& in : p.train.instrs) {
    if (in.kind != prog::Instr::Run) continue;
    const ir::Node& n = p[in.id];
    if (n.op == ir::Op::Contract && n.inputs.size() >= 2) {
      total += contractFlops(p[n.inputs[0]].shape, p[n.inputs[1]].shape);
    } else if ((n.op == ir::Op::Attention || n.op == ir::Op::AttentionGrad) && n.inputs.size() >= 2) {
      // q [lead…, seq_q, heads, dim], k [lead…, seq_k, heads, dim]: each product of a [seq_q, dim] and a
      // [dim, seq_k] view is 2·elements(q)·seq_k. The forward makes S = q·kᵀ and P·v; the backward
      // dP = dy·vᵀ, dv, dq and dk (its recomputed S is not counted).
      const Shape& q = p[n.inputs[0]].shape;
      const Shape& k = p[n.inputs[1]].shape;
      const double products = n.op == ir::Op::Attention ? 2 : 4;
      if (q.rank() >= 3 && k.rank() == q.rank())
        total += 2 * products * elements(q) * static_cast<double>(k.dims[k.rank() - 3].size);
    }
  }
  return total;
}

}  // namespace dtl::rt
