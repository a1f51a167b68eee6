// A contraction with an epilogue (ir::Node::epilogue): the bias through
// oneDNN's matmul post-op, in the GEMM's own pass over C (gemm.h
// matmulBias); a post-op oneDNN cannot run with the node's numerics (an
// activation: compiler/codegen/fold_epilogues.cc says why, a bias that is not
// one per column of C, a product whose C is permuted) after the product with
// this backend's kernel for that node, so the result is always the nodes'.
#include <cstring>

#include "runtime/kernels/fast/gemm.h"
#include "runtime/kernels/fast/kernels.h"

namespace dtl::rt::fast {

std::string contractEpilogue(const ir::Node& n, const std::vector<const TensorView*>& in, TensorView& out,
                             Scratch& s) {
  const TensorView& a = *in.at(0);
  const TensorView& b = *in.at(1);
  std::string err;
  size_t done = 0;  // post-ops the GEMM ran
  const ir::PostOp* first = n.epilogue.empty() ? nullptr : &n.epilogue[0];
  if (first && first->op == ir::Op::Binary && first->fn == "add" && first->operand >= 0 &&
      biasFits(a.shape, b.shape, out.shape, in.at(static_cast<size_t>(first->operand))->shape)) {
    const TensorView& bias = *in.at(static_cast<size_t>(first->operand));
    if (!contractBias(a.f(), a.shape, b.f(), b.shape, bias.f(), out.f(), out.shape, s.a, &err)) return err;
    done = 1;
  } else if (!contract(a.f(), a.shape, b.f(), b.shape, out.f(), out.shape, s.a, &err)) {
    return err;
  }
  for (size_t k = done; k < n.epilogue.size(); ++k) {  // the node's own kernel, from a copy of C (no aliasing)
    const ir::PostOp& o = n.epilogue[k];
    s.b.resize(static_cast<size_t>(out.elements));
    if (out.elements > 0) std::memcpy(s.b.data(), out.f(), static_cast<size_t>(out.elements) * 4);
    TensorView c = out;
    c.data = s.b.data();
    if (o.op == ir::Op::Unary && ref::parseUnary(o.fn)) {
      unary(*ref::parseUnary(o.fn), c, out);
    } else if (const auto bin = ref::parseBinary(o.fn);
               o.op == ir::Op::Binary && bin && !ref::isComparison(*bin) && o.operand >= 0) {
      binary(*bin, c, *in.at(static_cast<size_t>(o.operand)), out);
    } else {
      return "fast backend: contract node %" + std::to_string(n.id) + ": no kernel for its post-op " + o.fn;
    }
  }
  return "";
}

}  // namespace dtl::rt::fast
