// A contraction with an epilogue (ir::Node::epilogue): the bias through
// oneDNN's matmul post-op, in the GEMM's own pass over C (gemm.h
// matmulBias), and a relu after it with our select (oneDNN's turns NaN into
// 0: compiler/codegen/fold_epilogues.cc), on each panel of C's rows right
// after the GEMM wrote it (gemm.h matmulBiasPanels), in place. Any other
// post-op (another activation, a bias that is not one per column of C, a
// product whose C is permuted) runs after the product with this backend's
// kernel for that node, so the result is always the nodes'.
#include <cstring>

#include "runtime/kernels/fast/gemm.h"
#include "runtime/kernels/fast/kernels.h"

namespace dtl::rt::fast {

namespace {

bool isRelu(const ir::PostOp& o) { return o.op == ir::Op::Unary && o.fn == "relu"; }

}  // namespace

std::string contractEpilogue(const ir::Node& n, const std::vector<const TensorView*>& in, TensorView& out,
                             Scratch& s) {
  const TensorView& a = *in.at(0);
  const TensorView& b = *in.at(1);
  std::string err;
  size_t done = 0;  // post-ops run with the GEMM
  const ir::PostOp* first = n.epilogue.empty() ? nullptr : &n.epilogue[0];
  if (first && first->op == ir::Op::Binary && first->fn == "add" && first->operand >= 0 &&
      biasFits(a.shape, b.shape, out.shape, in.at(static_cast<size_t>(first->operand))->shape)) {
    const TensorView& bias = *in.at(static_cast<size_t>(first->operand));
    size_t relus = 0;  // relu after the bias, on each panel of C as the GEMM finishes it
    while (1 + relus < n.epilogue.size() && isRelu(n.epilogue[1 + relus])) ++relus;
    PanelFn panel;
    if (relus > 0) panel = [](float* c, int64_t elements) { reluInPlace(c, elements); };
    if (!contractBias(a.f(), a.shape, b.f(), b.shape, bias.f(), out.f(), out.shape, s.a, &err, panel)) return err;
    done = 1 + relus;
  } else if (!contract(a.f(), a.shape, b.f(), b.shape, out.f(), out.shape, s.a, &err)) {
    return err;
  }
  for (size_t k = done; k < n.epilogue.size(); ++k) {  // the node's own kernel
    const ir::PostOp& o = n.epilogue[k];
    if (isRelu(o)) {  // elementwise in place: no copy
      reluInPlace(out.f(), out.elements);
      continue;
    }
    s.b.resize(static_cast<size_t>(out.elements));  // from a copy of C (the kernels' operands do not alias)
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
