// The reference backend: every node through the double-precision kernels of
// runtime/kernels/reference, results rounded to the executor's f32 / int32
// storage. Slow by design; it is the oracle the fast backend is tested against.
#include <cstring>
#include <optional>

#include "runtime/exec/backend.h"
#include "runtime/kernels/reference/kernels.h"

namespace dtl::rt {

uint64_t dropoutSeed(uint64_t step_seed, int64_t forward_node_id) {
  return ref::splitmix64(step_seed ^ ref::splitmix64(static_cast<uint64_t>(forward_node_id)));
}

namespace {

using ir::Node;
using ir::Op;

ref::Tensor toRef(const TensorView& v) {
  ref::Tensor t = ref::Tensor::zeros(v.shape, v.dtype);
  if (v.isFloat())
    for (int64_t k = 0; k < v.elements; ++k) t.f[k] = v.f()[k];
  else
    for (int64_t k = 0; k < v.elements; ++k) t.i[k] = v.i()[k];
  return t;
}

// Writes t into out's storage. The executor prepared out from the node, so a
// shape disagreement here is a kernel/graph bug, reported rather than hidden.
KernelStatus store(const ref::Tensor& t, TensorView& out) {
  if (t.numel() != out.elements || t.floating() != out.isFloat())
    return {false, "reference backend: result " + t.shape.str() + " does not fit the node's " + out.shape.str()};
  if (out.isFloat())
    for (int64_t k = 0; k < out.elements; ++k) out.f()[k] = static_cast<float>(t.f[k]);
  else
    for (int64_t k = 0; k < out.elements; ++k) out.i()[k] = static_cast<int32_t>(t.i[k]);
  return {};
}

// Flat offset in `full` of each element of copy `index` along dim `name`
// (the copy's elements in row-major order of `full` without that dim).
std::vector<int64_t> copyOffsets(const Shape& full, const std::string& name, int64_t index) {
  int d = full.find(name);
  DTL_REF_CHECK(d >= 0 && index >= 0 && index < full.dims[d].size, "slice " + name + " of " + full.str());
  std::vector<int64_t> off(static_cast<size_t>(ref::without(full, {name}).elements().value()));
  for (size_t k = 0; k < off.size(); ++k) off[k] = static_cast<int64_t>(k);
  std::vector<int64_t> st = ref::stridesOf(full);
  int64_t inner = st[d], outer_stride = st[d] * full.dims[d].size;
  for (int64_t& o : off) o = (o / inner) * outer_stride + index * inner + o % inner;
  return off;
}

ref::Tensor slice(const ref::Tensor& x, const Node& n) {
  ref::Tensor y = ref::Tensor::zeros(n.shape, x.dtype);
  std::vector<int64_t> off = copyOffsets(x.shape, n.names.at(0), n.index);
  for (size_t k = 0; k < off.size(); ++k) {
    if (x.floating()) y.f[k] = x.f[off[k]];
    else y.i[k] = x.i[off[k]];
  }
  return y;
}

// Copies index … index+k-1 from the k inputs; zeros elsewhere.
ref::Tensor sliceGrad(const std::vector<ref::Tensor>& g, const Node& n) {
  DTL_REF_CHECK(!g.empty(), "slice_grad without inputs");
  ref::Tensor y = ref::Tensor::zeros(n.shape, g[0].dtype);
  for (size_t c = 0; c < g.size(); ++c) {
    std::vector<int64_t> off = copyOffsets(n.shape, n.names.at(0), n.index + static_cast<int64_t>(c));
    DTL_REF_CHECK(static_cast<int64_t>(off.size()) == g[c].numel(), "slice_grad input " + g[c].shape.str());
    for (size_t k = 0; k < off.size(); ++k) y.f[off[k]] = g[c].f[k];
  }
  return y;
}

ref::Tensor reduce(const ref::Tensor& x, const Node& n) {
  if (n.fn == "sum") return ref::reduceSum(x, n.names);
  if (n.fn == "mean") return ref::reduceMean(x, n.names);
  DTL_REF_CHECK(n.fn == "max", "reduce." + n.fn);
  return ref::reduceMax(x, n.names);
}

ref::Unary unaryOf(const Node& n) {
  auto u = ref::parseUnary(n.fn);
  DTL_REF_CHECK(u.has_value(), "unary." + n.fn);
  return *u;
}

ref::Tensor binary(const ref::Tensor& a, const ref::Tensor& b, const Node& n) {
  auto op = ref::parseBinary(n.fn);
  DTL_REF_CHECK(op.has_value(), "binary." + n.fn);
  ref::Tensor y = ref::binary(*op, a, b);
  return y.shape == n.shape ? y : ref::alignTo(y, n.shape);
}

ref::Tensor contract(const ref::Tensor& a, const ref::Tensor& b, const Node& n) {
  ref::Tensor y = ref::contract(a, b);
  return y.shape == n.shape ? y : ref::alignTo(y, n.shape);
}

// base + a @ b (the accumulate-into-contraction pass) with the rounding of the
// two nodes it replaces: the product stored as f32, then add(base, product).
ref::Tensor contractInto(const ref::Tensor& a, const ref::Tensor& b, const ref::Tensor& base, const Node& n) {
  DTL_REF_CHECK(base.shape == n.shape, "contract's base " + base.shape.str() + " is not its " + n.shape.str());
  ref::Tensor y = contract(a, b, n);
  for (double& v : y.f) v = static_cast<float>(v);
  return ref::binary(ref::Binary::Add, base, y);
}

ref::Tensor reshape(const ref::Tensor& x, const Node& n) {
  ref::Tensor y = x;
  y.shape = n.shape;
  DTL_REF_CHECK(y.numel() == x.numel(), "reshape of " + x.shape.str() + " to " + n.shape.str());
  return y;
}

// The ops whose kernels can fail on user data (ids, labels) return a Status.
ref::Status runFallible(const Node& n, const std::vector<ref::Tensor>& x, ref::Tensor* y) {
  switch (n.op) {
    case Op::Embed: return ref::embed(x[0], x[1], y, n.offset, n.index);
    case Op::EmbedGrad:
      if (x.size() == 3) return ref::embedBackwardInto(x[2], x[0], x[1], y, n.offset, n.index);
      return ref::embedBackward(n.shape, x[0], x[1], y, n.offset, n.index);
    case Op::PickClass: return ref::pickClass(x[0], x[1], n.names.at(0), y, n.offset, n.index);
    case Op::PickClassGrad: return ref::pickClassGrad(n.shape, x[0], n.names.at(0), y, n.offset, n.index);
    case Op::CrossEntropy: return ref::crossEntropy(x[0], x[1], n.names.at(0), y);
    case Op::CrossEntropyGrad: return ref::crossEntropyBackward(x[0], x[1], n.names.at(0), x[2], y);
    default: DTL_REF_FAIL("not a fallible op");
  }
}

ref::Tensor runPlain(const Node& n, const std::vector<ref::Tensor>& x, const RunContext& ctx) {
  switch (n.op) {
    case Op::Const: return ref::alignTo(ref::Tensor::scalar(n.scalar, n.dtype), n.shape);
    case Op::Slice: return slice(x[0], n);
    case Op::SliceGrad: return sliceGrad(x, n);
    case Op::Align: return ref::alignTo(x[0], n.shape);
    case Op::ReduceTo: return ref::sumTo(x[0], n.shape);
    case Op::Unary: return ref::unary(unaryOf(n), x[0]);
    case Op::UnaryGrad: return ref::unaryBackward(unaryOf(n), x[0], x[1]);
    case Op::Binary: return binary(x[0], x[1], n);
    case Op::Contract: return x.size() == 3 ? contractInto(x[0], x[1], x[2], n) : contract(x[0], x[1], n);
    case Op::Reduce: return reduce(x[0], n);
    case Op::MaxGrad: return ref::reduceMaxBackward(x[0], n.names, x[1]);
    case Op::Softmax: return ref::softmax(x[0], n.names.at(0));
    case Op::LogSoftmax: return ref::logSoftmax(x[0], n.names.at(0));
    case Op::SoftmaxGrad: return ref::softmaxBackward(x[0], x[1], n.names.at(0));
    case Op::LogSoftmaxGrad: return ref::logSoftmaxBackward(x[0], x[1], n.names.at(0));
    case Op::Normalize: return ref::normalize(x[0], n.names, n.scalar);
    case Op::RmsNormalize: return ref::rmsNormalize(x[0], n.names, n.scalar);
    case Op::NormalizeGrad: return ref::normalizeBackward(x[0], n.names, n.scalar, x[1]);
    case Op::RmsNormalizeGrad: return ref::rmsNormalizeBackward(x[0], n.names, n.scalar, x[1]);
    case Op::Dropout:
      if (!n.block.empty()) return ref::dropoutBlock(x[0], n.scalar, dropoutSeed(ctx.seed, n.index), ctx.training, n.block);
      return ref::dropout(x[0], n.scalar, dropoutSeed(ctx.seed, n.index), ctx.training, static_cast<uint64_t>(n.offset));
    case Op::DropoutGrad:
      if (!n.block.empty()) return ref::dropoutBlock(x[0], n.scalar, dropoutSeed(ctx.seed, n.index), ctx.training, n.block);
      return ref::dropoutBackward(x[0], n.scalar, dropoutSeed(ctx.seed, n.index), ctx.training,
                                  static_cast<uint64_t>(n.offset));
    case Op::Argmax: return ref::argmax(x[0], n.names.at(0), n.dtype == DType::I64 ? DType::I64 : DType::I32);
    case Op::Reshape: return reshape(x[0], n);
    case Op::Cast: return ref::cast(x[0], n.dtype);
    case Op::Arange: return ref::arange(n.shape.dims.at(0));
    default: DTL_REF_FAIL(std::string("no reference kernel for ") + ir::opName(n.op));
  }
}

bool fallible(Op op) {
  return op == Op::Embed || op == Op::EmbedGrad || op == Op::CrossEntropy || op == Op::CrossEntropyGrad ||
         op == Op::PickClass || op == Op::PickClassGrad;
}

KernelStatus runNode(const Node& n, const std::vector<ref::Tensor>& x, ref::Tensor* y, const RunContext& ctx) {
  if (fallible(n.op)) {
    ref::Status st = runFallible(n, x, y);
    return st.ok ? KernelStatus{} : KernelStatus{false, st.message};
  }
  *y = runPlain(n, x, ctx);
  return {};
}

// A node with an epilogue (ir::Node::epilogue): the node on its first two
// inputs, then each node it absorbed on the stored f32 value (or, a
// cross-entropy's gradient, on the node's logits and labels), as those nodes
// ran alone. out[0] is the node's value, then one per post-op into its own
// storage (PostOp::own; null where the schedule does not compute it).
KernelStatus runWithEpilogue(const Node& n, const std::vector<const TensorView*>& in,
                             const std::vector<TensorView*>& out, const RunContext& ctx) {
  Node plain = n;
  plain.inputs.resize(2);
  plain.epilogue.clear();
  const std::vector<ref::Tensor> operands = {toRef(*in.at(0)), toRef(*in.at(1))};
  ref::Tensor y;
  if (KernelStatus st = runNode(plain, operands, &y, ctx); !st.ok) return st;
  if (KernelStatus st = store(y, *out.at(0)); !st.ok) return st;
  size_t own = 1;
  for (const ir::PostOp& o : n.epilogue) {
    TensorView* dst = o.own ? out.at(own++) : out[0];
    if (!dst) continue;
    Node step;
    step.id = o.node;
    step.op = o.op;
    step.fn = o.fn;
    step.names = n.names;
    step.shape = dst->shape;
    step.dtype = dst->dtype;
    std::vector<ref::Tensor> x = o.op == Op::CrossEntropyGrad ? operands : std::vector<ref::Tensor>{toRef(*out[0])};
    if (o.operand >= 0) x.push_back(toRef(*in.at(static_cast<size_t>(o.operand))));
    ref::Tensor r;
    if (KernelStatus st = runNode(step, x, &r, ctx); !st.ok) return st;
    if (KernelStatus st = store(r, *dst); !st.ok) return st;
  }
  return {};
}

class ReferenceBackend final : public Backend {
 public:
  const char* name() const override { return "reference"; }

  KernelStatus runResults(const Node& n, const std::vector<const TensorView*>& in, const std::vector<TensorView*>& out,
                          const RunContext& ctx) override {
    if (!n.epilogue.empty()) return runWithEpilogue(n, in, out, ctx);
    std::vector<ref::Tensor> x;
    for (const TensorView* v : in) x.push_back(toRef(*v));
    std::vector<ref::Tensor> y;
    if (n.op == Op::Attention && x.size() == 3) {
      ref::AttentionResults r = ref::attentionResults(x[0], x[1], x[2], n.flag);
      y = {r.out, r.lse};
    } else if (n.op == Op::AttentionGrad && x.size() == 6) {  // from q, k, v and dy alone (ref::attentionBackward)
      ref::AttentionGrads g = ref::attentionBackward(x[0], x[1], x[2], n.flag, x[5]);
      y = {g.dq, g.dk, g.dv};
    }
    if (y.empty() || y.size() != out.size())
      return {false, std::string("reference backend: no kernel for ") + ir::opName(n.op) + " with " +
                         std::to_string(out.size()) + " results"};
    for (size_t k = 0; k < y.size(); ++k)
      if (KernelStatus st = store(y[k], *out[k]); !st.ok) return st;
    return {};
  }

  KernelStatus run(const Node& n, const std::vector<const TensorView*>& in, TensorView& out,
                   const RunContext& ctx) override {
    if (!n.results.empty())
      return {false, std::string("reference backend: ") + ir::opName(n.op) + " has several results (runResults)"};
    if (n.op == Op::Input || n.op == Op::Param || n.op == Op::Update)
      return {false, std::string("reference backend: ") + ir::opName(n.op) + " is not a kernel"};
    for (const ir::PostOp& o : n.epilogue)
      if (o.own)
        return {false, std::string("reference backend: ") + ir::opName(n.op) + "'s epilogue writes %" +
                           std::to_string(o.node) + " (runResults)"};
    if (!n.epilogue.empty()) return runWithEpilogue(n, in, {&out}, ctx);
    std::vector<ref::Tensor> x;
    x.reserve(in.size());
    for (const TensorView* v : in) x.push_back(toRef(*v));
    ref::Tensor y;
    if (KernelStatus st = runNode(n, x, &y, ctx); !st.ok) return st;
    return store(y, out);
  }
};

}  // namespace

std::unique_ptr<Backend> makeReferenceBackend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace dtl::rt
