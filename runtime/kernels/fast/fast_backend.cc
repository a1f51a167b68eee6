// The fast backend: f32 kernels on executor memory, contractions through
// oneDNN's SGEMM (gemm.h). Dispatch only; the kernels are in this folder.
// Threading: GEMMs, attention and cross-entropy use ctx.threads OpenMP
// threads; every other kernel runs on the calling thread.
#include <cstring>
#include <optional>

#include "runtime/exec/backend.h"
#include "runtime/kernels/fast/gemm.h"
#include "runtime/kernels/fast/kernels.h"
#include "runtime/kernels/fast/strided.h"

namespace dtl::rt {

namespace {

using ir::Node;
using ir::Op;

KernelStatus fail(const Node& n, const std::string& why) {
  return {false, std::string("fast backend: ") + ir::opName(n.op) + " node %" + std::to_string(n.id) + ": " + why};
}

// The kernels that can fail on user data or in the GEMM library.
std::optional<std::string> runFallible(const Node& n, const std::vector<const TensorView*>& in, TensorView& out,
                                       int threads, fast::Scratch& s) {
  auto x = [&](size_t k) -> const TensorView& { return *in.at(k); };
  switch (n.op) {
    case Op::Contract: {
      if (!n.epilogue.empty()) return fast::contractEpilogue(n, in, {&out}, s);
      std::string err;
      if (in.size() == 3) {  // base + a @ b (the accumulate-into-contraction pass)
        if (!(x(2).shape == out.shape))
          return "fast backend: contract node %" + std::to_string(n.id) + ": its base " + x(2).shape.str() +
                 " is not laid out as its " + out.shape.str();
        if (!fast::contractInto(x(0).f(), x(0).shape, x(1).f(), x(1).shape, x(2).f(), out.f(), out.shape, s.a, &err))
          return err;
        return "";
      }
      if (!fast::contract(x(0).f(), x(0).shape, x(1).f(), x(1).shape, out.f(), out.shape, s.a, &err)) return err;
      return "";
    }
    case Op::Embed: return fast::embed(x(0), x(1), out, n.offset, n.index);
    case Op::EmbedGrad:
      if (in.size() == 3) return fast::embedGradInto(x(2), x(0), x(1), out, n.offset, n.index, s);
      return fast::embedGrad(x(0), x(1), out, n.offset, n.index);
    case Op::PickClass: return fast::pickClass(x(0), x(1), n.names.at(0), out, n.offset, n.index, s);
    case Op::PickClassGrad: return fast::pickClassGrad(x(0), n.names.at(0), out, n.offset, n.index, s);
    case Op::CrossEntropy: return fast::crossEntropy(x(0), x(1), n.names.at(0), out, threads, s);
    case Op::CrossEntropyGrad: return fast::crossEntropyGrad(x(0), x(1), n.names.at(0), x(2), out, threads, s);
    default: return std::nullopt;
  }
}

// Everything else; false for an op (or fn) this backend does not know.
bool runPlain(const Node& n, const std::vector<const TensorView*>& in, TensorView& out, const RunContext& ctx,
              fast::Scratch& s) {
  auto x = [&](size_t k) -> const TensorView& { return *in.at(k); };
  auto unaryOp = [&] { return ref::parseUnary(n.fn); };
  switch (n.op) {
    case Op::Const: fast::fill(n.scalar, out); return true;
    case Op::Slice: fast::sliceCopy(x(0).data, x(0).shape, n.names.at(0), n.index, out.data); return true;
    case Op::SliceGrad: fast::sliceGather(in, out.shape, n.names.at(0), n.index, out.data); return true;
    case Op::Align: fast::alignCopy(x(0).data, x(0).shape, out.data, out.shape); return true;
    case Op::ReduceTo: fast::sumTo(x(0).f(), x(0).shape, out.f(), out.shape); return true;
    case Op::Reshape:  // same data, new names
      std::memcpy(out.data, x(0).data, static_cast<size_t>(out.elements) * 4);
      return true;
    case Op::Cast: fast::cast(x(0), out); return true;
    case Op::Arange: fast::arange(out); return true;
    case Op::Unary:
      if (!unaryOp()) return false;
      fast::unary(*unaryOp(), x(0), out);
      return true;
    case Op::UnaryGrad:
      if (!unaryOp()) return false;
      fast::unaryGrad(*unaryOp(), x(0), x(1), out);
      return true;
    case Op::Binary: {
      auto op = ref::parseBinary(n.fn);
      if (!op) return false;
      fast::binary(*op, x(0), x(1), out);
      return true;
    }
    case Op::Reduce:
      if (n.fn == "sum") fast::reduceSum(x(0), out);
      else if (n.fn == "mean") fast::reduceMean(x(0), out);
      else if (n.fn == "max") fast::reduceMax(x(0), out);
      else return false;
      return true;
    case Op::MaxGrad: fast::maxGrad(x(0), x(1), out); return true;
    case Op::Argmax: fast::argmax(x(0), n.names.at(0), out); return true;
    case Op::Softmax:
    case Op::LogSoftmax: fast::softmax(x(0), n.names.at(0), n.op == Op::LogSoftmax, out, s); return true;
    case Op::SoftmaxGrad:
    case Op::LogSoftmaxGrad:
      fast::softmaxGrad(x(0), x(1), n.names.at(0), n.op == Op::LogSoftmaxGrad, out, s);
      return true;
    case Op::Normalize:
    case Op::RmsNormalize: fast::normalize(x(0), n.names, n.scalar, n.op == Op::RmsNormalize, out, s); return true;
    case Op::NormalizeGrad:
    case Op::RmsNormalizeGrad:
      fast::normalizeGrad(x(0), x(1), n.names, n.scalar, n.op == Op::RmsNormalizeGrad, out, s);
      return true;
    case Op::Dropout:
    case Op::DropoutGrad:
      if (!n.block.empty()) {
        fast::dropoutBlock(x(0), n.scalar, dropoutSeed(ctx.seed, n.index), n.block, ctx.training, out);
        return true;
      }
      fast::dropout(x(0), n.scalar, dropoutSeed(ctx.seed, n.index), static_cast<uint64_t>(n.offset), ctx.training, out);
      return true;
    default: return false;
  }
}

class FastBackend final : public Backend {
 public:
  const char* name() const override { return "fast"; }

  KernelStatus runResults(const Node& n, const std::vector<const TensorView*>& in, const std::vector<TensorView*>& out,
                          const RunContext& ctx) override {
    auto x = [&](size_t k) -> const TensorView& { return *in.at(k); };
    std::string err;
    fast::setGemmThreads(ctx.threads);
    if (n.op == Op::Contract && !n.epilogue.empty())
      err = fast::contractEpilogue(n, in, out, scratch_, ctx.threads);
    else if (n.op == Op::CrossEntropy && n.epilogue.size() == 1 && n.epilogue[0].op == Op::CrossEntropyGrad &&
             out.size() == 2)
      err = fast::crossEntropyWithGrad(x(0), x(1), n.names.at(0), x(static_cast<size_t>(n.epilogue[0].operand)),
                                       *out[0], out[1], ctx.threads, scratch_);
    else if (n.op == Op::Attention && out.size() == 2)
      err = fast::attention(x(0), x(1), x(2), n.flag, *out[0], *out[1], ctx.threads, scratch_);
    else if (n.op == Op::AttentionGrad && out.size() == 3)
      err = fast::attentionGrad(x(0), x(1), x(2), x(3), x(4), x(5), n.flag, *out[0], *out[1], *out[2], ctx.threads,
                                scratch_);
    else
      return fail(n, "no kernel for this op with " + std::to_string(out.size()) + " results");
    if (!err.empty()) return {false, err};
    return {};
  }

  KernelStatus run(const Node& n, const std::vector<const TensorView*>& in, TensorView& out,
                   const RunContext& ctx) override {
    if (!n.results.empty()) return fail(n, "it has several results (runResults)");
    for (const ir::PostOp& o : n.epilogue)
      if (o.own) return fail(n, "its epilogue writes %" + std::to_string(o.node) + " (runResults)");
    fast::setGemmThreads(ctx.threads);
    if (std::optional<std::string> err = runFallible(n, in, out, ctx.threads, scratch_)) {
      if (!err->empty()) return {false, *err};
      return {};
    }
    if (!runPlain(n, in, out, ctx, scratch_)) return fail(n, "no kernel for this op" + (n.fn.empty() ? "" : " ." + n.fn));
    return {};
  }

 private:
  fast::Scratch scratch_;  // reused between nodes: one node at a time per backend
};

}  // namespace

std::unique_ptr<Backend> makeFastBackend() { return std::make_unique<FastBackend>(); }

}  // namespace dtl::rt
