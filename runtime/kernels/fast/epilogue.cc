// A contraction with an epilogue (ir::Node::epilogue): the bias through
// oneDNN's matmul post-op, in the GEMM's own pass over C (gemm.h
// matmulBias), and a relu after it with our select (oneDNN's turns NaN into
// 0: compiler/codegen/fold_epilogues.cc), on each panel of C's rows right
// after the GEMM wrote it (gemm.h matmulBiasPanels), in place; an activation
// into its own storage (PostOp::own: a gelu whose gradient reads C) from the
// same panel with the unary node's loop, C keeping its value. Any other
// post-op (another activation, a bias that is not one per column of C, a
// product whose C is permuted) runs after the product with this backend's
// kernel for that node, so the result is always the nodes'.
#include <algorithm>
#include <cstring>

#include "runtime/kernels/fast/gemm.h"
#include "runtime/kernels/fast/kernels.h"

namespace dtl::rt::fast {

namespace {

bool isRelu(const ir::PostOp& o) { return o.op == ir::Op::Unary && o.fn == "relu"; }

// Runs on a panel of C (and, for a post-op into its own storage, the same elements of that output).
bool panelOp(const ir::PostOp& o) { return isRelu(o) || (o.own && o.op == ir::Op::Unary && ref::parseUnary(o.fn)); }

// Vector boundaries of the unary node's loop over all of C: see contractEpilogue.
constexpr int64_t kAligned = 64;

// y[from, to) = op(c[from, to)), `from` a multiple of kAligned, on up to
// `threads` threads in pieces that start at multiples of kAligned (the
// elements' bits do not depend on the split).
void activate(ref::Unary op, const float* c, float* y, int64_t from, int64_t to, int threads) {
  constexpr int64_t kPiece = 1 << 15;  // below this, one thread
  const int64_t pieces = std::clamp<int64_t>((to - from) / kPiece, 1, std::max(threads, 1));
#pragma omp parallel for num_threads(static_cast<int>(pieces)) schedule(static) if (pieces > 1)
  for (int64_t q = 0; q < pieces; ++q) {
    const int64_t lo = from + (to - from) * q / pieces / kAligned * kAligned;
    const int64_t hi = q + 1 == pieces ? to : from + (to - from) * (q + 1) / pieces / kAligned * kAligned;
    unaryArray(op, c + lo, y + lo, hi - lo);
  }
}

}  // namespace

std::string contractEpilogue(const ir::Node& n, const std::vector<const TensorView*>& in,
                             const std::vector<TensorView*>& outs, Scratch& s, int threads) {
  const TensorView& a = *in.at(0);
  const TensorView& b = *in.at(1);
  TensorView& out = *outs.at(0);
  std::vector<TensorView*> own;  // per post-op: its own output, or null
  for (size_t k = 0, next = 1; k < n.epilogue.size(); ++k) own.push_back(n.epilogue[k].own ? outs.at(next++) : nullptr);
  std::string err;
  size_t done = 0;  // post-ops run with the GEMM
  const ir::PostOp* first = n.epilogue.empty() ? nullptr : &n.epilogue[0];
  if (first && first->op == ir::Op::Binary && first->fn == "add" && first->operand >= 0 &&
      biasFits(a.shape, b.shape, out.shape, in.at(static_cast<size_t>(first->operand))->shape)) {
    const TensorView& bias = *in.at(static_cast<size_t>(first->operand));
    size_t after = 1;  // relus in place and activations into their own storage, on each panel of C as the GEMM finishes it
    while (after < n.epilogue.size() && panelOp(n.epilogue[after])) ++after;
    PanelFn panel;
    // An activation into its own storage runs over ranges that start and end
    // where the unary node's one loop over all of C has a vector boundary
    // (multiples of kAligned elements from C's start; the last range ends
    // with C, where that loop's tail is): libmvec's narrower tail variants
    // differ in the last bit, so every element then takes the node's path.
    // A range may reach back into the panel before, still in cache.
    int64_t activated = 0;  // C's elements the activations have run over (panels come in order)
    if (after > 1)
      panel = [&, after](float* c, int64_t elements) {
        const int64_t end = c - out.f() + elements;
        const int64_t upto = end == out.elements ? end : end / kAligned * kAligned;
        for (size_t k = 1; k < after; ++k) {
          if (isRelu(n.epilogue[k])) {
            reluInPlace(c, elements);
          } else if (own[k] && upto > activated) {
            activate(*ref::parseUnary(n.epilogue[k].fn), out.f(), own[k]->f(), activated, upto, threads);
          }
        }
        activated = std::max(activated, upto);
      };
    if (!contractBias(a.f(), a.shape, b.f(), b.shape, bias.f(), out.f(), out.shape, s.a, &err, panel)) return err;
    done = after;
  } else if (!contract(a.f(), a.shape, b.f(), b.shape, out.f(), out.shape, s.a, &err)) {
    return err;
  }
  for (size_t k = done; k < n.epilogue.size(); ++k) {  // the node's own kernel
    const ir::PostOp& o = n.epilogue[k];
    if (o.own) {  // from C, which keeps its value
      if (!own[k]) continue;
      if (o.op != ir::Op::Unary || !ref::parseUnary(o.fn))
        return "fast backend: contract node %" + std::to_string(n.id) + ": no kernel for its post-op " + o.fn;
      activate(*ref::parseUnary(o.fn), out.f(), own[k]->f(), 0, out.elements, threads);
      continue;
    }
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
