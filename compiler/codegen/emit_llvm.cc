// The IR emitter. One point of a phase is evaluated by value(): a node at
// named coordinates (dim name → i64 index), memoised per point, loading
// inputs and reduction results through their buffers' strides (a missing
// name is a broadcast: stride 0). The targets differ only in how points are
// produced (nested loops on x86, a grid-stride loop per kernel on NVPTX) and
// in the names of the f32 math functions.
#include "compiler/codegen/emit_llvm.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string_view>
#include <unordered_map>

#include "compiler/codegen/emit_f32_math.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/IntrinsicsNVPTX.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Target/TargetMachine.h"

namespace dtl::codegen {

namespace {

using llvm::Value;

// The f32 range of x where the reference's double e^x is finite and not 0:
// ln 2⁻¹⁰⁷⁵ ≈ −745.1332191 and ln DBL_MAX ≈ 709.7827129 lie just outside.
constexpr float kLeastPositiveExpArgument = -745.13318f, kLargestFiniteExpArgument = 709.78265f;

class Emitter {
 public:
  Emitter(const Region& r, const KernelPlan& plan, Target target, llvm::Module& m)
      : r_(r), plan_(plan), target_(target), m_(m), ctx_(m.getContext()), b_(ctx_) {}

  void emitX86(const std::string& symbol);
  void emitNvptx(const std::string& symbol);

 private:
  using Coords = std::unordered_map<std::string, Value*>;
  using Memo = std::unordered_map<int, Value*>;

  llvm::Type* f32() { return b_.getFloatTy(); }
  llvm::Type* f64() { return b_.getDoubleTy(); }
  llvm::Type* i64() { return b_.getInt64Ty(); }
  llvm::Type* ptr() { return b_.getPtrTy(); }
  Value* dbl(double v) { return llvm::ConstantFP::get(f64(), v); }

  llvm::Function* bodyFunction(const std::string& name, llvm::GlobalValue::LinkageTypes linkage);
  Value* loop(int64_t n, const std::string& name, Value* init, const std::function<Value*(Value*, Value*)>& body,
              llvm::MDNode* hints = nullptr);
  llvm::MDNode* orderedSumHints();
  void loopNest(const Shape& s, size_t d, Coords& c, const std::function<void(const Coords&)>& body);
  void loopRange(Value* lo, Value* hi, const std::string& name, const std::function<void(Value*)>& body);
  void point(const PlanPhase& phase, const Coords& c);
  void phaseNest(bool tail);
  void x86Entry(const std::string& symbol, bool tail);
  void chunkedRows();
  void addTo(Value* p, Value* v) { b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f32(), p), v), p); }
  Value* combine(int id, const Coords& c);
  void gridStride(llvm::Function* f, const Shape& space, bool warps, const std::function<void(Coords&)>& body);
  Value* warpReduction(int id, const Coords& c);
  void partialKernel(const FoldedSum& f, Coords& at);
  Value* elementPtr(int buffer, const Coords& c);
  Value* value(int id, const Coords& c, Memo& memo);
  Value* reduction(int id, const Coords& c);
  Value* unaryOp(UnaryFn fn, Value* x);
  Value* math(const char* fn, Value* x);  // float fn(float)
  Value* flt(double v);                   // an f32 constant
  Value* sigmoid(Value* x);
  Value* silu(Value* x);
  Value* unaryGradOp(UnaryFn fn, Value* x, Value* dy);
  Value* derivative(UnaryFn fn, Value* d);
  Value* derivativeF32(UnaryFn fn, Value* x);
  Value* expGrad(Value* x, Value* dy);
  Value* intrinsic(llvm::Intrinsic::ID id, Value* x);

  const Region& r_;
  const KernelPlan& plan_;
  Target target_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  std::vector<Value*> bufs_;  // the buffer pointers inside the function being emitted
  const std::vector<int>* loads_ = nullptr;  // the phase being emitted: elementwise nodes it loads
  Value* begin_ = nullptr;    // x86: the rows of the split this call computes
  Value* end_ = nullptr;
  bool rows_ = false;         // x86: the nest's outer loop runs over [begin_, end_) of the split
  Value* chunk_ = nullptr;    // x86: the chunk of rows whose partials a point adds to
  Value* lane_ = nullptr;     // NVPTX, a warp-reduced phase: the thread's lane (0-31)
};

// A function over all buffers, `ptr noalias` each (the ABI promises they are
// distinct), with its entry block as the insert point.
llvm::Function* Emitter::bodyFunction(const std::string& name, llvm::GlobalValue::LinkageTypes linkage) {
  std::vector<llvm::Type*> params(plan_.buffers.size(), ptr());
  if (target_ == Target::X86) params.insert(params.end(), {i64(), i64()});  // begin, end
  auto* fty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
  auto* f = llvm::Function::Create(fty, linkage, name, m_);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  bufs_.clear();
  for (size_t k = 0; k < plan_.buffers.size(); ++k) {
    llvm::Argument* a = f->getArg(static_cast<unsigned>(k));
    a->addAttr(llvm::Attribute::NoAlias);
    a->addAttr(llvm::Attribute::NoCapture);
    if (plan_.buffers[k].role == PlanBuffer::Role::Input) a->addAttr(llvm::Attribute::ReadOnly);
    a->setName(plan_.buffers[k].name);
    bufs_.push_back(a);
  }
  if (target_ == Target::X86) {
    begin_ = f->getArg(static_cast<unsigned>(plan_.buffers.size()));
    end_ = f->getArg(static_cast<unsigned>(plan_.buffers.size() + 1));
    begin_->setName("begin");
    end_->setName("end");
  }
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", f));
  return f;
}

// for (i = 0; i < n; ++i) acc = body(i, acc); returns the last acc (init when
// n is 0). `init` may be null for a loop without an accumulator. `hints`:
// the loop's llvm.loop metadata (orderedSumHints), or none.
Value* Emitter::loop(int64_t n, const std::string& name, Value* init,
                     const std::function<Value*(Value*, Value*)>& body, llvm::MDNode* hints) {
  if (n == 0) return init;
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx_, name + ".loop", f);
  auto* exit = llvm::BasicBlock::Create(ctx_, name + ".end", f);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::PHINode* i = b_.CreatePHI(i64(), 2, name);
  i->addIncoming(b_.getInt64(0), pre);
  llvm::PHINode* acc = init ? b_.CreatePHI(init->getType(), 2, name + ".acc") : nullptr;
  if (acc) acc->addIncoming(init, pre);
  Value* next_acc = body(i, acc);
  Value* next = b_.CreateAdd(i, b_.getInt64(1), name + ".next", /*HasNUW=*/true, /*HasNSW=*/true);
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  i->addIncoming(next, latch);
  if (acc) acc->addIncoming(next_acc, latch);
  llvm::BranchInst* back = b_.CreateCondBr(b_.CreateICmpULT(next, b_.getInt64(n)), head, exit);
  if (hints) back->setMetadata(llvm::LLVMContext::MD_loop, hints);
  b_.SetInsertPoint(exit);
  return next_acc;  // defined in the latch, exit's only predecessor
}

// A sum's loop on x86: the vectoriser must widen it exactly kSumLanes, one
// accumulator, and may not unroll it first; its adds carry no reassoc. So
// its order is the sum's alone, whatever the body (docs/compiler.md, "Sums
// in a fixed order"): forcing the width is what lets the vectoriser reorder
// an f32 sum without the flag.
llvm::MDNode* Emitter::orderedSumHints() {
  auto flag = [&](const char* name, llvm::Metadata* value) -> llvm::Metadata* {
    llvm::SmallVector<llvm::Metadata*, 2> ops{llvm::MDString::get(ctx_, name)};
    if (value) ops.push_back(value);
    return llvm::MDNode::get(ctx_, ops);
  };
  auto i32 = [&](int v) { return llvm::ConstantAsMetadata::get(b_.getInt32(v)); };
  // Once vectorised, its loops may be unrolled (each still adds into one
  // accumulator, in order); before, unrolling would leave no loop to vectorise.
  llvm::MDNode* after = llvm::MDNode::get(ctx_, {flag("llvm.loop.isvectorized", i32(1))});
  llvm::Metadata* enable = flag("llvm.loop.vectorize.enable", llvm::ConstantAsMetadata::get(b_.getTrue()));
  llvm::SmallVector<llvm::Metadata*, 6> ops{nullptr,  // the loop's own node, filled in below
                                            enable,
                                            flag("llvm.loop.vectorize.width", i32(kSumLanes)),
                                            flag("llvm.loop.interleave.count", i32(1)),
                                            flag("llvm.loop.unroll.disable", nullptr),
                                            flag("llvm.loop.vectorize.followup_all", after)};
  llvm::MDNode* loop = llvm::MDNode::getDistinct(ctx_, ops);
  loop->replaceOperandWith(0, loop);
  return loop;
}

// for (i = lo; i < hi; ++i) body(i), bounds known only at run time.
void Emitter::loopRange(Value* lo, Value* hi, const std::string& name, const std::function<void(Value*)>& body) {
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx_, name + ".rows", f);
  auto* exit = llvm::BasicBlock::Create(ctx_, name + ".rows.end", f);
  b_.CreateCondBr(b_.CreateICmpSLT(lo, hi), head, exit);
  b_.SetInsertPoint(head);
  llvm::PHINode* i = b_.CreatePHI(i64(), 2, name);
  i->addIncoming(lo, pre);
  body(i);
  Value* next = b_.CreateAdd(i, b_.getInt64(1), name + ".next", true, true);
  i->addIncoming(next, b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateICmpSLT(next, hi), head, exit);
  b_.SetInsertPoint(exit);
}

void Emitter::loopNest(const Shape& s, size_t d, Coords& c, const std::function<void(const Coords&)>& body) {
  if (d == s.rank()) {
    body(c);
    return;
  }
  const Dim& dim = s.dims[d];
  if (d == 0 && rows_) {  // rows [begin, end) of the split
    loopRange(begin_, end_, dim.name, [&](Value* i) {
      c[dim.name] = i;
      loopNest(s, d + 1, c, body);
    });
    return;
  }
  loop(dim.size, dim.name, nullptr, [&](Value* i, Value*) -> Value* {
    c[dim.name] = i;
    loopNest(s, d + 1, c, body);
    return nullptr;
  });
}

Value* Emitter::elementPtr(int buffer, const Coords& c) {
  const PlanBuffer& buf = plan_.buffers[static_cast<size_t>(buffer)];
  Value* off = b_.getInt64(0);
  int64_t stride = 1;
  for (size_t k = buf.shape.rank(); k-- > 0;) {
    const Dim& d = buf.shape.dims[k];
    off = b_.CreateAdd(off, b_.CreateMul(c.at(d.name), b_.getInt64(stride), "", true, true), "", true, true);
    stride *= d.size;
  }
  llvm::Type* elem = buf.dtype == DType::Bool ? static_cast<llvm::Type*>(b_.getInt8Ty()) : f32();
  return b_.CreateInBoundsGEP(elem, bufs_[static_cast<size_t>(buffer)], off);
}

void Emitter::point(const PlanPhase& phase, const Coords& c) {
  loads_ = &phase.loads;
  Memo memo;
  Value* reduced = phase.combine ? combine(phase.reduction, c)
                  : lane_              ? warpReduction(phase.reduction, c)
                  : phase.reduction >= 0 ? reduction(phase.reduction, c)
                                         : nullptr;
  llvm::BasicBlock* after = nullptr;
  if (lane_) {  // every lane holds the result; lane 0 stores it (a max's lanes may differ in a zero's sign)
    llvm::Function* f = b_.GetInsertBlock()->getParent();
    auto* store = llvm::BasicBlock::Create(ctx_, "lane0", f);
    after = llvm::BasicBlock::Create(ctx_, "stored", f);
    b_.CreateCondBr(b_.CreateICmpEQ(lane_, b_.getInt64(0)), store, after);
    b_.SetInsertPoint(store);
  }
  for (int buffer : phase.stores) {
    const PlanBuffer& buf = plan_.buffers[static_cast<size_t>(buffer)];
    Value* v = reduced ? reduced : value(buf.node, c, memo);
    if (buf.dtype == DType::Bool) v = b_.CreateZExt(v, b_.getInt8Ty());
    b_.CreateStore(v, elementPtr(buffer, c));
  }
  if (after) {
    b_.CreateBr(after);
    b_.SetInsertPoint(after);
  }
  if (target_ != Target::X86) return;  // NVPTX: partialKernel, a kernel of its own
  for (int node : phase.partials) {
    const FoldedSum& f = *plan_.foldedSum(node);
    Value* v = phase.reduction == f.operand ? reduced : value(f.operand, c, memo);
    Coords at = c;
    at[kChunkDim] = chunk_;
    addTo(elementPtr(f.partial, at), v);
  }
}

// A deferred sum: its partials added in chunk order (never reassociated:
// the order is what makes the result independent of the threads).
Value* Emitter::combine(int id, const Coords& at) {
  const RegionNode& n = r_.node(id);
  const FoldedSum& f = *plan_.foldedSum(id);
  Coords c = at;
  Value* acc = loop(plan_.chunks, kChunkDim, flt(0.0), [&](Value* i, Value* acc) -> Value* {
    c[kChunkDim] = i;
    return b_.CreateFAdd(acc, b_.CreateLoad(f32(), elementPtr(f.partial, c)));
  });
  if (n.reduce == ReduceFn::Mean) {
    const Shape& in = r_.node(n.a).shape;
    acc = b_.CreateFDiv(acc, flt(static_cast<double>(in.dims[static_cast<size_t>(in.find(n.dim))].size)));
  }
  return acc;
}

Value* Emitter::reduction(int id, const Coords& at) {
  const RegionNode& n = r_.node(id);
  const Shape& in = r_.node(n.a).shape;
  int64_t extent = in.dims[static_cast<size_t>(in.find(n.dim))].size;
  float identity = n.reduce == ReduceFn::Max ? -std::numeric_limits<float>::infinity() : 0.0f;
  // In lanes only along the operand's last dim, whose terms lie next to each
  // other; along another dim each vector of lanes would be gathered from
  // terms a row apart: those sums add in order, one term after another, as
  // do sums of fewer than kSumLanes terms (in lanes, the same order).
  const bool lanes = target_ == Target::X86 && n.reduce != ReduceFn::Max && in.dims.back().name == n.dim &&
                     extent >= kSumLanes;
  Coords c = at;
  Value* acc = loop(extent, n.dim, llvm::ConstantFP::get(f32(), identity), [&](Value* i, Value* acc) -> Value* {
    c[n.dim] = i;
    Memo memo;
    Value* x = value(n.a, c, memo);
    if (n.reduce == ReduceFn::Max) {
      // the reference's first maximal element: x replaces acc when larger, or NaN over a number
      Value* larger = b_.CreateFCmpOGT(x, acc);
      Value* nan_over_number = b_.CreateAnd(b_.CreateFCmpUNO(x, x), b_.CreateFCmpORD(acc, acc));
      return b_.CreateSelect(b_.CreateOr(larger, nan_over_number), x, acc);
    }
    return b_.CreateFAdd(acc, x);
  }, lanes ? orderedSumHints() : nullptr);
  if (n.reduce == ReduceFn::Mean) acc = b_.CreateFDiv(acc, llvm::ConstantFP::get(f32(), static_cast<double>(extent)));
  return acc;
}

// NVPTX, one warp per result point: lane l combines terms l, l + 32, … of
// the reduced dim (adjacent lanes read adjacent terms), then five butterfly
// shuffles leave the total in every lane. A fixed order for the lane count
// (not the grid); a sum's error stays within γₙ·Σ|xᵢ|.
Value* Emitter::warpReduction(int id, const Coords& at) {
  const RegionNode& n = r_.node(id);
  const Shape& in = r_.node(n.a).shape;
  const int64_t extent = in.dims[static_cast<size_t>(in.find(n.dim))].size;
  auto op = [&](Value* acc, Value* x) -> Value* {
    if (n.reduce != ReduceFn::Max) return b_.CreateFAdd(acc, x);
    Value* larger = b_.CreateFCmpOGT(x, acc);  // as reduction(): x replaces acc when larger, or NaN over a number
    Value* nan_over_number = b_.CreateAnd(b_.CreateFCmpUNO(x, x), b_.CreateFCmpORD(acc, acc));
    return b_.CreateSelect(b_.CreateOr(larger, nan_over_number), x, acc);
  };
  Value* identity = flt(n.reduce == ReduceFn::Max ? -std::numeric_limits<double>::infinity() : 0.0);
  // for (j = lane; j < extent; j += 32) acc = op(acc, x[j])
  llvm::Function* f = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx_, n.dim + ".lanes", f);
  auto* exit = llvm::BasicBlock::Create(ctx_, n.dim + ".lanes.end", f);
  b_.CreateCondBr(b_.CreateICmpULT(lane_, b_.getInt64(extent)), head, exit);
  b_.SetInsertPoint(head);
  llvm::PHINode* j = b_.CreatePHI(i64(), 2, n.dim);
  llvm::PHINode* acc = b_.CreatePHI(f32(), 2, n.dim + ".acc");
  j->addIncoming(lane_, pre);
  acc->addIncoming(identity, pre);
  Coords c = at;
  c[n.dim] = j;
  Memo memo;
  Value* next_acc = op(acc, value(n.a, c, memo));
  Value* next = b_.CreateAdd(j, b_.getInt64(32), "", true, true);
  j->addIncoming(next, b_.GetInsertBlock());
  acc->addIncoming(next_acc, b_.GetInsertBlock());
  llvm::BasicBlock* last = b_.GetInsertBlock();
  b_.CreateCondBr(b_.CreateICmpULT(next, b_.getInt64(extent)), head, exit);
  b_.SetInsertPoint(exit);
  llvm::PHINode* total = b_.CreatePHI(f32(), 2, n.dim + ".lane");
  total->addIncoming(identity, pre);
  total->addIncoming(next_acc, last);
  Value* v = total;
  llvm::Function* shfl = llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::nvvm_shfl_sync_bfly_f32);
  for (int offset = 16; offset >= 1; offset /= 2)
    v = op(v, b_.CreateCall(shfl, {b_.getInt32(-1), v, b_.getInt32(offset), b_.getInt32(31)}));
  if (n.reduce == ReduceFn::Mean) v = b_.CreateFDiv(v, flt(static_cast<double>(extent)));
  return v;
}

Value* Emitter::value(int id, const Coords& c, Memo& memo) {
  if (auto it = memo.find(id); it != memo.end()) return it->second;
  const RegionNode& n = r_.node(id);
  Value* v = nullptr;
  if (loads_ && std::find(loads_->begin(), loads_->end(), id) != loads_->end()) {  // an output stored before
    v = b_.CreateLoad(f32(), elementPtr(plan_.home[static_cast<size_t>(id)], c));
    memo[id] = v;
    return v;
  }
  switch (n.kind) {
    case Kind::Input:
    case Kind::Reduce: v = b_.CreateLoad(f32(), elementPtr(plan_.home[static_cast<size_t>(id)], c)); break;
    case Kind::Const: v = llvm::ConstantFP::get(f32(), static_cast<double>(n.value)); break;
    case Kind::Unary: v = unaryOp(n.unary, value(n.a, c, memo)); break;
    case Kind::Binary: {
      Value* a = value(n.a, c, memo);
      Value* b = value(n.b, c, memo);
      switch (n.binary) {
        case BinaryFn::Add: v = b_.CreateFAdd(a, b); break;
        case BinaryFn::Sub: v = b_.CreateFSub(a, b); break;
        case BinaryFn::Mul: v = b_.CreateFMul(a, b); break;
        case BinaryFn::Div: v = b_.CreateFDiv(a, b); break;
        case BinaryFn::Eq: v = b_.CreateFCmpOEQ(a, b); break;
        case BinaryFn::Ne: v = b_.CreateFCmpUNE(a, b); break;  // NaN != NaN, as C++
        case BinaryFn::Lt: v = b_.CreateFCmpOLT(a, b); break;
        case BinaryFn::Le: v = b_.CreateFCmpOLE(a, b); break;
        case BinaryFn::Gt: v = b_.CreateFCmpOGT(a, b); break;
        case BinaryFn::Ge: v = b_.CreateFCmpOGE(a, b); break;
      }
      break;
    }
    case Kind::UnaryGrad: v = unaryGradOp(n.unary, value(n.a, c, memo), value(n.b, c, memo)); break;
    case Kind::Select:  // the condition is a comparison's i1
      v = b_.CreateSelect(value(n.a, c, memo), value(n.b, c, memo), value(n.c, c, memo));
      break;
  }
  memo[id] = v;
  return v;
}

Value* Emitter::intrinsic(llvm::Intrinsic::ID id, Value* x) {
  llvm::Function* f = llvm::Intrinsic::getDeclaration(&m_, id, {x->getType()});
  return b_.CreateCall(f, {x});
}

// f32 fn(f32): on x86 expf and erff inline (core/f32_math.h's polynomials,
// emit_f32_math.h), logf and tanhf from libm (jit_x86.cc may route them
// through libmvec's vector variants, vector_math.h); on NVPTX libdevice's
// (`__nv_expf` …).
Value* Emitter::math(const char* fn, Value* x) {
  if (target_ == Target::X86 && std::string_view(fn) == "expf") return emitExpF32(b_, x);
  if (target_ == Target::X86 && std::string_view(fn) == "erff") return emitErfF32(b_, x);
  std::string name = target_ == Target::NVPTX ? std::string("__nv_") + fn : std::string(fn);
  llvm::Type* type = f32();
  if (name == "__nv_tanhf") {  // libdevice's tanhf divides with rcp.approx.ftz: its double tanh keeps denormals
    name = "__nv_tanh";
    type = f64();
    x = b_.CreateFPExt(x, f64());
  }
  llvm::FunctionCallee callee = m_.getOrInsertFunction(name, llvm::FunctionType::get(type, {type}, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee()); f && f->isDeclaration()) {
    f->setDoesNotAccessMemory();  // errno is of no interest here
    f->setDoesNotThrow();
    f->setWillReturn();
  }
  auto* call = b_.CreateCall(callee, {x});
  call->setDoesNotAccessMemory();
  return type == f32() ? static_cast<Value*>(call) : b_.CreateFPTrunc(call, f32());
}

Value* Emitter::flt(double v) { return llvm::ConstantFP::get(f32(), v); }

// 1/(1 + e^−x) without overflow: e = exp(−|x|) ≤ 1, then s = 1/(1 + e) for
// x ≥ 0 and e·s for x < 0, so a very negative x gives e^x (a denormal, as the
// reference) instead of 1/inf = 0. NaN fails x ≥ 0 and stays NaN through e·s.
Value* Emitter::sigmoid(Value* x) {
  Value* e = math("expf", b_.CreateFNeg(intrinsic(llvm::Intrinsic::fabs, x)));
  Value* s = b_.CreateFDiv(flt(1.0), b_.CreateFAdd(flt(1.0), e));
  return b_.CreateSelect(b_.CreateFCmpOGE(x, flt(0.0)), s, b_.CreateFMul(e, s));
}

// x·sigmoid(x) with e^−|x| as h·h, h = e^−|x|/2: for x < 0 the result is
// ((x·h)·h)·s, so where e^x is a denormal (x < −87) but x·e^x is not, no
// precision is lost to the denormal (x·(e·s) would lose up to |x|/2 ulps).
Value* Emitter::silu(Value* x) {
  Value* h = math("expf", b_.CreateFMul(intrinsic(llvm::Intrinsic::fabs, x), flt(-0.5)));
  Value* s = b_.CreateFDiv(flt(1.0), b_.CreateFAdd(flt(1.0), b_.CreateFMul(h, h)));
  Value* negative = b_.CreateFMul(b_.CreateFMul(b_.CreateFMul(x, h), h), s);
  return b_.CreateSelect(b_.CreateFCmpOGE(x, flt(0.0)), b_.CreateFMul(x, s), negative);
}

// f32 versions of the reference's formulas (runtime/kernels/reference/
// elementwise.cc), in the fast backend's order of operations; their measured
// error against the reference is region_oracle.cc's bound per fn.
Value* Emitter::unaryOp(UnaryFn fn, Value* x) {
  switch (fn) {
    case UnaryFn::Relu:  // x ≤ 0 ? 0 : x, so NaN stays NaN
      return b_.CreateSelect(b_.CreateFCmpOLE(x, flt(0.0)), flt(0.0), x);
    case UnaryFn::Neg: return b_.CreateFNeg(x);
    case UnaryFn::Abs: return intrinsic(llvm::Intrinsic::fabs, x);
    case UnaryFn::Sqrt: return intrinsic(llvm::Intrinsic::sqrt, x);
    case UnaryFn::Rsqrt: {  // no libm call: the double formula vectorises and rounds once
      Value* d = b_.CreateFPExt(x, f64());
      return b_.CreateFPTrunc(b_.CreateFDiv(dbl(1.0), intrinsic(llvm::Intrinsic::sqrt, d)), f32());
    }
    case UnaryFn::Exp: return math("expf", x);
    case UnaryFn::Log: return math("logf", x);
    case UnaryFn::Tanh: return math("tanhf", x);
    case UnaryFn::Sigmoid: return sigmoid(x);
    case UnaryFn::Silu: return silu(x);
    case UnaryFn::Gelu:  // 0.5 · x · (1 + erf(x · 1/√2))
      return b_.CreateFMul(b_.CreateFMul(flt(0.5), x),
                           b_.CreateFAdd(flt(1.0), math("erff", b_.CreateFMul(x, flt(1.0 / std::numbers::sqrt2)))));
    case UnaryFn::GeluTanh: {  // 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x · x · x)))
      Value* cube = b_.CreateFMul(b_.CreateFMul(b_.CreateFMul(flt(0.044715), x), x), x);
      Value* t = math("tanhf", b_.CreateFMul(flt(std::sqrt(2.0 / std::numbers::pi)), b_.CreateFAdd(x, cube)));
      return b_.CreateFMul(b_.CreateFMul(flt(0.5), x), b_.CreateFAdd(flt(1.0), t));
    }
  }
  return x;
}

// The reference's unaryBackward (runtime/kernels/reference/elementwise.cc):
// relu selects; gelu gelu_tanh silu tanh sigmoid exp are dy · f'(x) in f32
// over the same expf/tanhf/erff calls as the forward (vectorised through
// libmvec on x86, libdevice on NVPTX); the others are dy · f'(x) in double,
// rounded once (IEEE ops without a call: exact, and they vectorise).
Value* Emitter::unaryGradOp(UnaryFn fn, Value* x, Value* dy) {
  if (fn == UnaryFn::Relu)  // x ≤ 0 ? 0 : dy, so dy at a NaN x and 0 for any dy at x ≤ 0
    return b_.CreateSelect(b_.CreateFCmpOLE(x, llvm::ConstantFP::get(f32(), 0.0)), llvm::ConstantFP::get(f32(), 0.0), dy);
  if (fn == UnaryFn::Exp) return expGrad(x, dy);
  if (gradNeedsLibm(fn)) return b_.CreateFMul(dy, derivativeF32(fn, x));
  Value* d = b_.CreateFPExt(x, f64());
  return b_.CreateFPTrunc(b_.CreateFMul(b_.CreateFPExt(dy, f64()), derivative(fn, d)), f32());
}

// f'(x) in f32, the fast backend's formulas (runtime/kernels/fast/
// elementwise.cc, unaryGradLoop) operation for operation. Where 1 − t² or
// 1 − s cancels, f' has an absolute error of a few u, not a relative one:
// region_oracle.h bounds dy · f'(x) in units of u·|dy|.
Value* Emitter::derivativeF32(UnaryFn fn, Value* x) {
  auto mul = [&](Value* a, Value* b) { return b_.CreateFMul(a, b); };
  auto add = [&](Value* a, Value* b) { return b_.CreateFAdd(a, b); };
  auto sub = [&](Value* a, Value* b) { return b_.CreateFSub(a, b); };
  // fast's sigmoid, 1/(1 + e^−x): 0 below x ≈ −88.7, where the true s is
  // below the gradient's absolute bound anyway
  auto sigmoidF32 = [&](Value* v) { return b_.CreateFDiv(flt(1.0), add(flt(1.0), math("expf", b_.CreateFNeg(v)))); };
  const float kC = 0.044715f, kSqrt2OverPi = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));
  switch (fn) {
    case UnaryFn::Gelu:  // 0.5 · (1 + erf(x · 1/√2)) + x · 1/√(2π) · e^(−0.5 · x · x)
      return add(mul(flt(0.5), add(flt(1.0), math("erff", mul(x, flt(1.0 / std::numbers::sqrt2))))),
                 mul(mul(x, flt(1.0 / std::sqrt(2.0 * std::numbers::pi))), math("expf", mul(mul(flt(-0.5), x), x))));
    case UnaryFn::GeluTanh: {  // 0.5 · (1 + t) + 0.5 · x · (1 − t²) · √(2/π) · (1 + 3 · 0.044715 · x · x)
      Value* t = math("tanhf", mul(flt(kSqrt2OverPi), add(x, mul(mul(mul(flt(kC), x), x), x))));
      // The slope overflows past |x| ≈ 5e19, where 1 − t² is long 0 (t = ±1
      // from |x| ≈ 10): |x| capped at 1e4 keeps 0 · slope = 0, not 0 · inf =
      // NaN (the reference's double slope is finite); NaN stays NaN through t.
      Value* xc = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, intrinsic(llvm::Intrinsic::fabs, x), flt(1e4));
      Value* slope = add(flt(1.0), mul(mul(flt(3.0f * kC), xc), xc));
      return add(mul(flt(0.5), add(flt(1.0), t)),
                 mul(mul(mul(mul(flt(0.5), x), sub(flt(1.0), mul(t, t))), flt(kSqrt2OverPi)), slope));
    }
    case UnaryFn::Silu: {  // s · (1 + x · (1 − s))
      Value* s = sigmoidF32(x);
      return mul(s, add(flt(1.0), mul(x, sub(flt(1.0), s))));
    }
    case UnaryFn::Tanh: {  // 1 − t²
      Value* t = math("tanhf", x);
      return sub(flt(1.0), mul(t, t));
    }
    case UnaryFn::Sigmoid: {  // s · (1 − s)
      Value* s = sigmoidF32(x);
      return mul(s, sub(flt(1.0), s));
    }
    default: break;  // exp: expGrad; the rest: derivative()
  }
  return flt(0.0);
}

// dy · e^x with expf as the fast backend, but without its overflow: for
// |x| ≤ 87 (e^x normal and finite) dy · e^x; up to |x| ≤ 174, (dy · h) · h
// with h = e^(x/2); beyond, dy · q · q · q · q with q = e^(x/4) (x/2 and x/4
// are exact), so a dy · e^x that is finite in the reference's double (x up
// to 192 with a denormal dy) is finite here too, and one that is normal (x
// down to −174 with a large dy) keeps its precision. A dy of ±0 or ±inf is
// the result itself wherever the reference's double e^x is finite and not 0
// (0 · q and inf · q would be NaN where q is inf, from x ≈ 355, or 0, from
// x ≈ −416); beyond, NaN as the reference's 0 · inf and inf · 0 (q is inf
// or 0 there too).
Value* Emitter::expGrad(Value* x, Value* dy) {
  Value* abs_x = intrinsic(llvm::Intrinsic::fabs, x);
  Value* near = b_.CreateFCmpOLE(abs_x, flt(87.0));
  Value* middle = b_.CreateFCmpOLE(abs_x, flt(174.0));
  Value* scale = b_.CreateSelect(near, flt(1.0), b_.CreateSelect(middle, flt(0.5), flt(0.25)));
  Value* e = math("expf", b_.CreateFMul(x, scale));
  Value* once = b_.CreateFMul(dy, e);
  Value* twice = b_.CreateFMul(once, e);
  Value* four = b_.CreateFMul(b_.CreateFMul(twice, e), e);
  Value* y = b_.CreateSelect(near, once, b_.CreateSelect(middle, twice, four));
  Value* abs_dy = intrinsic(llvm::Intrinsic::fabs, dy);
  Value* zero_or_infinite = b_.CreateOr(b_.CreateFCmpOEQ(abs_dy, flt(0.0)),
                                        b_.CreateFCmpOEQ(abs_dy, flt(std::numeric_limits<double>::infinity())));
  Value* double_exp_normal = b_.CreateAnd(b_.CreateFCmpOGE(x, flt(kLeastPositiveExpArgument)),
                                          b_.CreateFCmpOLE(x, flt(kLargestFiniteExpArgument)));
  return b_.CreateSelect(b_.CreateAnd(zero_or_infinite, double_exp_normal), dy, y);
}

// f'(x) in double, the reference's `derivative`, operation for operation
// (log sqrt rsqrt neg abs: no libm call).
Value* Emitter::derivative(UnaryFn fn, Value* d) {
  auto mul = [&](Value* a, Value* b) { return b_.CreateFMul(a, b); };
  switch (fn) {
    case UnaryFn::Log: return b_.CreateFDiv(dbl(1.0), d);
    case UnaryFn::Sqrt: return b_.CreateFDiv(dbl(0.5), intrinsic(llvm::Intrinsic::sqrt, d));
    case UnaryFn::Rsqrt: return b_.CreateFDiv(dbl(-0.5), mul(d, intrinsic(llvm::Intrinsic::sqrt, d)));
    case UnaryFn::Neg: return dbl(-1.0);
    case UnaryFn::Abs:  // 1, −1, or 0 (NaN included)
      return b_.CreateSelect(b_.CreateFCmpOGT(d, dbl(0.0)), dbl(1.0),
                             b_.CreateSelect(b_.CreateFCmpOLT(d, dbl(0.0)), dbl(-1.0), dbl(0.0)));
    default: break;  // relu: a select; the transcendentals: derivativeF32
  }
  return dbl(0.0);
}

void Emitter::emitX86(const std::string& symbol) {
  x86Entry(symbol, false);
  if (plan_.hasTail()) x86Entry(symbol + "_tail", true);  // run once, after every chunk's rows
}

// Rows [begin, end) chunk by chunk: each chunk's partials start at 0, then
// every row phase runs over the chunk's rows, adding into them.
void Emitter::chunkedRows() {
  Value *begin = begin_, *end = end_;
  Value* rows = b_.getInt64(plan_.chunk_rows);
  Value* first = b_.CreateUDiv(begin, rows);
  Value* last = b_.CreateUDiv(b_.CreateAdd(end, b_.getInt64(plan_.chunk_rows - 1)), rows);
  loopRange(first, last, "chunk", [&](Value* chunk) {
    chunk_ = chunk;
    Value* lo = b_.CreateMul(chunk, rows);
    begin_ = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, begin, lo);
    end_ = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, end, b_.CreateAdd(lo, rows));
    for (const FoldedSum& f : plan_.folded) {
      rows_ = false;
      Coords c;
      c[kChunkDim] = chunk;
      loopNest(r_.node(f.node).shape, 0, c, [&](const Coords& at) { b_.CreateStore(flt(0.0), elementPtr(f.partial, at)); });
    }
    rows_ = true;
    phaseNest(false);
  });
  begin_ = begin;
  end_ = end;
}

// The phases (the tail's, or the rest) in one loop nest over the dims their
// spaces share in front, each phase's own dims inside: a layer norm's two
// reductions and its output phase then visit one [batch, seq] row after
// another and re-read that row from L1, where phase after phase over a whole
// chunk would re-read it from L2 or beyond (char GPT's [2048, 128] layer
// norms took 1.4-1.7x as long in a step, docs/compiler.md). Always legal: a
// phase stores only buffers of its own space's shape (its additions into
// partials aside: only the tail reads them), so at a point of the shared
// dims it writes every element a later phase reads there. Each phase's
// points and each sum's order are as before, so are the bits.
void Emitter::phaseNest(bool tail) {
  std::vector<const PlanPhase*> phases;
  for (const PlanPhase& phase : plan_.phases)
    if (phase.tail == tail) phases.push_back(&phase);
  if (phases.empty()) return;
  Shape shared = phases.front()->space;
  for (const PlanPhase* phase : phases) {
    size_t k = 0;
    while (k < shared.rank() && k < phase->space.rank() && shared.dims[k] == phase->space.dims[k]) ++k;
    shared.dims.resize(k);
  }
  Coords c;
  loopNest(shared, 0, c, [&](const Coords& at) {
    for (const PlanPhase* phase : phases) {
      Coords inner = at;
      loopNest(phase->space, shared.rank(), inner, [&](const Coords& p) { point(*phase, p); });
    }
  });
}

void Emitter::x86Entry(const std::string& symbol, bool tail) {
  // The phases in an internal always-inline body whose parameters are noalias
  // (inlining turns that into alias scopes, so loops vectorise without runtime
  // checks), called from the entry point with the pointers from the array.
  llvm::Function* body = bodyFunction(symbol + ".body", llvm::GlobalValue::InternalLinkage);
  body->addFnAttr(llvm::Attribute::AlwaysInline);
  if (!tail && !plan_.folded.empty()) {
    chunkedRows();
  } else {
    rows_ = !tail && !plan_.split.empty();
    phaseNest(tail);
  }
  b_.CreateRetVoid();

  auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {ptr(), i64(), i64()}, false);
  auto* entry = llvm::Function::Create(fty, llvm::GlobalValue::ExternalLinkage, symbol, m_);
  entry->addFnAttr(llvm::Attribute::NoUnwind);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entry));
  std::vector<Value*> args;
  for (size_t k = 0; k < plan_.buffers.size(); ++k)
    args.push_back(b_.CreateLoad(ptr(), b_.CreateConstInBoundsGEP1_64(ptr(), entry->getArg(0), k)));
  args.push_back(entry->getArg(1));
  args.push_back(entry->getArg(2));
  b_.CreateCall(body, args);
  b_.CreateRetVoid();
}

// for (i = gid; i < points; i += grid size) body(the point's coordinates), i
// in the space's row-major order; with `warps`, i counts warps (gid / 32,
// the grid's warps), every lane of one visits the same point, and lane_ is
// set (blocks must hold a multiple of 32 threads).
void Emitter::gridStride(llvm::Function* f, const Shape& space, bool warps, const std::function<void(Coords&)>& body) {
  int64_t points = space.elements().value_or(0);
  if (points <= 0) return;
  auto sreg = [&](llvm::Intrinsic::ID id) {
    return b_.CreateZExt(b_.CreateCall(llvm::Intrinsic::getDeclaration(&m_, id)), i64());
  };
  // The block products as PTX's mul.wide.u32, opaque to LLVM: where a
  // coordinate is the point's low bit (a dim of size 2: i & 1), LLVM 16's
  // DAG combiner narrows (ctaid * ntid) & 1 to an i1 mul the NVPTX back end
  // cannot select, and aborts the process.
  auto* wide_mul = llvm::InlineAsm::get(llvm::FunctionType::get(i64(), {b_.getInt32Ty(), b_.getInt32Ty()}, false),
                                        "mul.wide.u32 $0, $1, $2;", "=l,r,r", false);
  auto sreg32 = [&](llvm::Intrinsic::ID id) { return b_.CreateCall(llvm::Intrinsic::getDeclaration(&m_, id)); };
  Value* ntid = sreg32(llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x);
  Value* gid = b_.CreateAdd(b_.CreateCall(wide_mul, {sreg32(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x), ntid}),
                            sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x), "gid");
  Value* step = b_.CreateCall(wide_mul, {sreg32(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x), ntid}, "gridsize");
  lane_ = nullptr;
  if (warps) {
    lane_ = b_.CreateAnd(gid, b_.getInt64(31), "lane");
    gid = b_.CreateLShr(gid, b_.getInt64(5), "warp");
    step = b_.CreateLShr(step, b_.getInt64(5), "warps");
  }
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx_, "point", f);
  auto* exit = llvm::BasicBlock::Create(ctx_, "done", f);
  b_.CreateCondBr(b_.CreateICmpULT(gid, b_.getInt64(points)), head, exit);
  b_.SetInsertPoint(head);
  llvm::PHINode* i = b_.CreatePHI(i64(), 2, "i");
  i->addIncoming(gid, pre);
  Coords c;
  Value* rest = i;
  for (size_t d = space.rank(); d-- > 0;) {
    const Dim& dim = space.dims[d];
    c[dim.name] = d == 0 ? rest : b_.CreateURem(rest, b_.getInt64(dim.size), dim.name);
    if (d > 0) rest = b_.CreateUDiv(rest, b_.getInt64(dim.size));
  }
  body(c);
  Value* next = b_.CreateAdd(i, step, "next", true, true);
  i->addIncoming(next, b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateICmpULT(next, b_.getInt64(points)), head, exit);
  b_.SetInsertPoint(exit);
  lane_ = nullptr;
}

// One partial element (a chunk, a point of the sum's result) per thread: the
// chunk's rows and the other summed dims in the order of the x86 nest
// (row-major over the operand's shape), so the sum is the x86 kernel's.
void Emitter::partialKernel(const FoldedSum& f, Coords& at) {
  const Shape& x = r_.node(f.operand).shape;
  const Shape& kept = r_.node(f.node).shape;
  Value* p = elementPtr(f.partial, at);
  b_.CreateStore(flt(0.0), p);
  Value* lo = b_.CreateMul(at.at(kChunkDim), b_.getInt64(plan_.chunk_rows));
  Value* hi = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(lo, b_.getInt64(plan_.chunk_rows)),
                                       b_.getInt64(plan_.rows));
  std::function<void(size_t)> nest = [&](size_t d) {
    if (d == x.rank()) {
      Memo memo;
      addTo(p, value(f.operand, at, memo));
      return;
    }
    if (kept.has(x.dims[d].name)) return nest(d + 1);
    loop(x.dims[d].size, x.dims[d].name, nullptr, [&](Value* i, Value*) -> Value* {
      at[x.dims[d].name] = i;
      nest(d + 1);
      return nullptr;
    });
  };
  loopRange(lo, hi, x.dims[0].name, [&](Value* row) {
    at[x.dims[0].name] = row;
    nest(1);
  });
}

void Emitter::emitNvptx(const std::string& symbol) {
  llvm::NamedMDNode* annotations = m_.getOrInsertNamedMetadata("nvvm.annotations");
  auto kernel = [&](const std::string& name) {
    llvm::Function* f = bodyFunction(name, llvm::GlobalValue::ExternalLinkage);
    llvm::Metadata* md[] = {llvm::ValueAsMetadata::get(f), llvm::MDString::get(ctx_, "kernel"),
                            llvm::ValueAsMetadata::get(b_.getInt32(1))};
    annotations->addOperand(llvm::MDNode::get(ctx_, md));
    return f;
  };
  for (size_t k = 0; k < plan_.phases.size(); ++k) {
    const PlanPhase& phase = plan_.phases[k];
    llvm::Function* f = kernel(phaseKernelName(symbol, k));
    gridStride(f, phase.space, warpReduced(r_, phase), [&](Coords& c) { point(phase, c); });
    b_.CreateRetVoid();
    for (size_t j = 0; j < phase.partials.size(); ++j) {  // launched after the phase, before the next
      const FoldedSum& sum = *plan_.foldedSum(phase.partials[j]);
      llvm::Function* g = kernel(partialKernelName(symbol, k, j));
      loads_ = nullptr;
      gridStride(g, plan_.buffers[static_cast<size_t>(sum.partial)].shape, false,
                 [&](Coords& c) { partialKernel(sum, c); });
      b_.CreateRetVoid();
    }
  }
}

// The vectoriser ends an f32 sum's loop with one ordered reduction of its
// lanes (no reassoc on our adds: orderedSumHints), 16 dependent scalar adds
// per sum — char GPT's last layer-norm backward region ran 2-3x slower so
// (0.44 against 0.18 ms in jit_bench's profile). Allowed to
// reassociate, the call lowers to the target's halving tree (lane l + lane
// l + 8, then + 4, + 2, + 1): a fixed order for the vector type, whatever
// the loop's body, as the lanes' own order is.
void treeReductions(llvm::Module& m) {
  for (llvm::Function& f : m)
    for (llvm::Instruction& inst : llvm::instructions(f))
      if (auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&inst);
          call && call->getIntrinsicID() == llvm::Intrinsic::vector_reduce_fadd)
        call->setHasAllowReassoc(true);
}

}  // namespace

std::string keepSumsInOrder() {
  static const std::string why = [] {
    llvm::cl::Option* o = llvm::cl::getRegisteredOptions().lookup("enable-epilogue-vectorization");
    if (!o) return std::string("LLVM has no enable-epilogue-vectorization option: sums would lose their fixed order");
    // The option parses the value as its own type: no cast to guess it.
    if (o->addOccurrence(0, "enable-epilogue-vectorization", "false"))
      return std::string("LLVM refused enable-epilogue-vectorization=false");
    return std::string();
  }();
  return why;
}

void optimiseModule(llvm::Module& m, llvm::TargetMachine& tm) {
  keepSumsInOrder();  // the x86 engine refuses to start where it fails (jit_x86.cc)
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, tuning);  // registers the target's own passes
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
  treeReductions(m);
}

std::string phaseKernelName(const std::string& symbol, size_t k) { return symbol + "_p" + std::to_string(k); }

std::string partialKernelName(const std::string& symbol, size_t k, size_t j) {
  return phaseKernelName(symbol, k) + "_s" + std::to_string(j);
}

bool warpReduced(const Region& r, const PlanPhase& phase) {
  if (phase.reduction < 0 || phase.combine) return false;
  const RegionNode& n = r.node(phase.reduction);
  const Shape& in = r.node(n.a).shape;
  return in.dims.back().name == n.dim && in.dims.back().size >= 32;
}

std::vector<std::pair<std::string, int64_t>> nvptxKernels(const Region& r, const KernelPlan& plan,
                                                          const std::string& symbol) {
  std::vector<std::pair<std::string, int64_t>> kernels;
  for (size_t k = 0; k < plan.phases.size(); ++k) {
    const int64_t points = plan.phases[k].space.elements().value_or(0);
    kernels.emplace_back(phaseKernelName(symbol, k), warpReduced(r, plan.phases[k]) ? 32 * points : points);
    for (size_t j = 0; j < plan.phases[k].partials.size(); ++j) {
      const FoldedSum& f = *plan.foldedSum(plan.phases[k].partials[j]);
      kernels.emplace_back(partialKernelName(symbol, k, j), plan.buffers[static_cast<size_t>(f.partial)].elements());
    }
  }
  return kernels;
}

std::unique_ptr<llvm::Module> emitRegion(const Region& r, const KernelPlan& plan, Target target,
                                         const std::string& symbol, llvm::LLVMContext& ctx) {
  auto m = std::make_unique<llvm::Module>(symbol, ctx);
  Emitter e(r, plan, target, *m);
  if (target == Target::X86)
    e.emitX86(symbol);
  else
    e.emitNvptx(symbol);
  return m;
}

}  // namespace dtl::codegen
