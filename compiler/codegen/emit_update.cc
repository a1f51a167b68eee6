// Optimiser variant → LLVM IR (emit_update.h). The element step is written
// once and shared by both targets; only the loops around it differ: x86
// walks chunks [begin, end) and each chunk's elements 0…n-1 (a separate
// chunk function whose pointers are noalias, so LLVM vectorises it without
// run-time overlap checks); NVPTX strides chunks by block and elements by
// thread.
#include "compiler/codegen/emit_update.h"

#include <functional>
#include <vector>

#include "compiler/codegen/jit_x86.h"
#include "compiler/codegen/ptx.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/IntrinsicsNVPTX.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "runtime/optim/subnormal.h"

namespace dtl::codegen {

namespace {

using llvm::Value;
using optim_step::Variant;

class UpdateEmitter {
 public:
  UpdateEmitter(const Variant& v, Target target, llvm::Module& m)
      : v_(v), target_(target), m_(m), ctx_(m.getContext()), b_(ctx_) {}

  void emit() {
    llvm::Function* chunk = chunkFunction();
    if (target_ == Target::X86) {
      emitX86Entry(chunk);
    } else {
      emitNvptxKernel(chunk);
    }
  }

 private:
  llvm::Type* f32() { return b_.getFloatTy(); }
  llvm::Type* i64() { return b_.getInt64Ty(); }
  llvm::PointerType* ptr() { return llvm::PointerType::get(ctx_, 0); }
  int scalars() const {
    return v_.rule == Variant::Rule::Sgd ? int{optim_step::kSgdScalars} : int{optim_step::kAdamScalars};
  }
  // core/optim_step.h's Chunk: { float* param; const float* grad; float* a; float* b; int64_t n; }
  llvm::StructType* chunkType() { return llvm::StructType::get(ctx_, {ptr(), ptr(), ptr(), ptr(), i64()}); }

  Value* fma(Value* a, Value* b, Value* c) { return b_.CreateIntrinsic(llvm::Intrinsic::fma, {f32()}, {a, b, c}); }
  Value* load(Value* base, Value* i) { return b_.CreateLoad(f32(), b_.CreateInBoundsGEP(f32(), base, i)); }
  void store(Value* x, Value* base, Value* i) { b_.CreateStore(x, b_.CreateInBoundsGEP(f32(), base, i)); }

  // runtime/optim/optimizer.cc's sgdLoop body, operation for operation.
  void sgdElement(Value* p, Value* g, Value* buf, Value* i, const std::vector<Value*>& s) {
    Value* d = load(g, i);
    Value* pv = load(p, i);
    if (v_.weight_decay) d = fma(pv, s[optim_step::kSgdWeightDecay], d);  // d_p.add(param, alpha=weight_decay)
    if (v_.momentum) {
      Value* mom = s[optim_step::kSgdMomentum];
      Value* bv = v_.first ? d  // buf = torch.clone(d_p)
                           : fma(d, s[optim_step::kSgdOneMinusDampening], b_.CreateFMul(load(buf, i), mom));
      store(bv, buf, i);
      d = v_.nesterov ? fma(bv, mom, d) : bv;  // d_p.add(buf, alpha=momentum), or buf
    }
    store(fma(d, s[optim_step::kSgdNegLr], pv), p, i);  // param.add_(d_p, alpha=-lr)
  }

  // runtime/optim/optimizer.cc's adamElement, operation for operation.
  void adamElement(Value* p, Value* g, Value* m, Value* v, Value* i, const std::vector<Value*>& s) {
    using namespace optim_step;
    Value* gi = load(g, i);
    Value* pi = load(p, i);
    if (v_.l2) gi = fma(pi, s[kAdamWeightDecay], gi);
    if (v_.decoupled) pi = b_.CreateFMul(pi, s[kAdamDecay]);
    Value* mi = fma(gi, s[kAdamOneMinusBeta1], b_.CreateFMul(load(m, i), s[kAdamBeta1]));
    Value* vi = fma(b_.CreateFMul(s[kAdamOneMinusBeta2], gi), gi, b_.CreateFMul(load(v, i), s[kAdamBeta2]));
    Value* denom = adamDenom(vi, s);
    store(mi, m, i);
    store(vi, v, i);
    store(b_.CreateFAdd(pi, b_.CreateFDiv(b_.CreateFMul(s[kAdamNegStepSize], mi), denom)), p, i);
  }

  Value* adamDenom(Value* vi, const std::vector<Value*>& s) {
    Value* root = b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {f32()}, {vi});
    return b_.CreateFAdd(b_.CreateFDiv(root, s[optim_step::kAdamBiasCorrection2Sqrt]), s[optim_step::kAdamEps]);
  }

  Value* i32(uint32_t x) { return b_.getInt32(x); }
  Value* bitsOf(Value* x) { return b_.CreateBitCast(x, b_.getInt32Ty()); }
  Value* floatOf(Value* x) { return b_.CreateBitCast(x, f32()); }
  Value* f64(double x) { return llvm::ConstantFP::get(b_.getDoubleTy(), x); }
  Value* f32c(float x) { return llvm::ConstantFP::get(f32(), x); }
  // (x & ~mask) | (y & mask) on the bits: a select LLVM cannot speculate an operation through
  Value* blend(Value* x, Value* y, Value* mask) {
    return floatOf(b_.CreateOr(b_.CreateAnd(bitsOf(x), b_.CreateNot(mask)), b_.CreateAnd(bitsOf(y), mask)));
  }

  // runtime/optim/optimizer.cc's adamBlockSubnormal (runtime/optim/subnormal.h:
  // the rule) as its two passes over a block [lo, hi): the moments and what
  // the parameter's step needs into the block's scratch, then the parameter.
  // One pass held too many vectors at once: 0.72 ms against fast's 0.60 on
  // update_bench's late Fashion step. `bound` is subnormal::vanishBound.
  struct BlockScratch {
    Value *p, *denom, *exact;  // [kBlock] f32, f32, i32 on the stack
  };

  BlockScratch blockScratch() {
    llvm::IRBuilder<>::InsertPointGuard guard(b_);
    llvm::BasicBlock& entry = b_.GetInsertBlock()->getParent()->getEntryBlock();
    b_.SetInsertPoint(&entry, entry.begin());
    auto* floats = llvm::ArrayType::get(f32(), rt::optim::subnormal::kBlock);
    auto* words = llvm::ArrayType::get(b_.getInt32Ty(), rt::optim::subnormal::kBlock);
    return {b_.CreateAlloca(floats), b_.CreateAlloca(floats), b_.CreateAlloca(words)};
  }

  void adamMomentsSubnormal(Value* p, Value* g, Value* m, Value* v, Value* i, Value* k, const std::vector<Value*>& s,
                            const BlockScratch& t) {
    using namespace optim_step;
    Value* gi = load(g, i);
    Value* pi = load(p, i);
    if (v_.l2) gi = fma(pi, s[kAdamWeightDecay], gi);
    if (v_.decoupled) pi = b_.CreateFMul(pi, s[kAdamDecay]);
    Value* exact = nullptr;
    Value* mi = decayedState(load(m, i), gi, s[kAdamBeta1], s[kAdamOneMinusBeta1], &exact);
    Value* vi = fma(b_.CreateFMul(s[kAdamOneMinusBeta2], gi), gi, b_.CreateFMul(load(v, i), s[kAdamBeta2]));
    store(mi, m, i);
    store(vi, v, i);
    store(pi, t.p, k);
    store(adamDenom(vi, s), t.denom, k);
    b_.CreateStore(b_.CreateSExt(exact, b_.getInt32Ty()), b_.CreateInBoundsGEP(b_.getInt32Ty(), t.exact, k));
  }

  void adamParamSubnormal(Value* p, Value* m, Value* i, Value* k, const std::vector<Value*>& s, Value* bound,
                          const BlockScratch& t) {
    Value* pi = load(t.p, k);
    Value* denom = load(t.denom, k);
    Value* exact = b_.CreateLoad(b_.getInt32Ty(), b_.CreateInBoundsGEP(b_.getInt32Ty(), t.exact, k));
    Value* same_mask = b_.CreateAnd(exact, b_.CreateSExt(updateVanishes(pi, denom, bound), b_.getInt32Ty()));
    Value* mi_step = floatOf(b_.CreateAnd(bitsOf(load(m, i)), b_.CreateNot(same_mask)));
    Value* pn = b_.CreateFAdd(pi, b_.CreateFDiv(b_.CreateFMul(s[optim_step::kAdamNegStepSize], mi_step), denom));
    store(blend(pn, pi, same_mask), p, i);
  }

  // The state's decay fma(d, c, x·beta) for an element whose x is subnormal
  // and d is ±0, on the integer grid (subnormal.h); the float arithmetic,
  // with x as 0 where it is emulated, elsewhere. *exact: where it is. The
  // caller runs it only for a finite c (subnormalBlocks' `emulates`).
  Value* decayedState(Value* x, Value* d, Value* beta, Value* c, Value** exact) {
    Value* x_bits = bitsOf(x);
    // subnormal::decayedMantissa: fma(M, beta, 2^23) rounds M·beta once onto
    // the integers of [2^23, 2^24); its bits less 2^23's are rint(M·beta)
    Value* mantissa = b_.CreateSIToFP(b_.CreateAnd(x_bits, i32(0x007fffff)), f32());
    Value* decayed = b_.CreateSub(bitsOf(fma(mantissa, beta, f32c(0x1p23f))), i32(rt::optim::subnormal::kShiftBits));
    Value* is_subnormal = b_.CreateICmpULT(b_.CreateSub(b_.CreateAnd(x_bits, i32(0x7fffffff)), i32(1)), i32(0x007fffff));
    Value* in_grid = b_.CreateICmpULT(b_.CreateSub(decayed, i32(1)), i32(0x007fffff));  // 0 < decayed < 2^23
    *exact = b_.CreateAnd(b_.CreateAnd(is_subnormal, b_.CreateFCmpOEQ(d, llvm::ConstantFP::get(f32(), 0.0))), in_grid);
    Value* exact_mask = b_.CreateSExt(*exact, b_.getInt32Ty());
    Value* x_in = floatOf(b_.CreateAnd(x_bits, b_.CreateNot(exact_mask)));
    Value* fp = fma(d, c, b_.CreateFMul(x_in, beta));
    return blend(fp, floatOf(b_.CreateOr(b_.CreateAnd(x_bits, i32(0x80000000u)), decayed)), exact_mask);
  }

  // runtime/optim/optimizer.cc's sgdBlockSubnormal for one element.
  void sgdElementSubnormal(Value* p, Value* g, Value* buf, Value* i, const std::vector<Value*>& s, Value* bound) {
    using namespace optim_step;
    Value* pi = load(p, i);
    Value* d = load(g, i);
    if (v_.weight_decay) d = fma(pi, s[kSgdWeightDecay], d);
    Value* exact = nullptr;
    Value* b = decayedState(load(buf, i), d, s[kSgdMomentum], s[kSgdOneMinusDampening], &exact);
    store(b, buf, i);
    Value* same_mask =
        b_.CreateSExt(b_.CreateAnd(exact, updateVanishes(pi, f32c(1.0f), bound)), b_.getInt32Ty());
    Value* pn = fma(floatOf(b_.CreateAnd(bitsOf(b), b_.CreateNot(same_mask))), s[kSgdNegLr], pi);
    store(blend(pn, pi, same_mask), p, i);
  }

  // subnormal::updateVanishes, as an i1
  Value* updateVanishes(Value* pi, Value* denom, Value* bound) {
    Value* mag = b_.CreateAnd(bitsOf(pi), i32(0x7fffffff));
    Value* usable = b_.CreateAnd(b_.CreateICmpUGE(mag, i32(0x00800000)), b_.CreateICmpULE(mag, i32(0x7f800000)));
    Value* capped = b_.CreateSelect(b_.CreateICmpULT(mag, i32(0x5a800000)), mag, i32(0x5a800000));  // 2^54
    Value* magnitude = floatOf(b_.CreateAnd(capped, b_.CreateSExt(usable, b_.getInt32Ty())));
    Value* lhs = b_.CreateFAdd(bound, b_.CreateFMul(f32c(0x1p-49f), denom));
    Value* rhs = b_.CreateFMul(b_.CreateFMul(magnitude, f32c(0x1p73f)), denom);
    return b_.CreateFCmpOLT(lhs, rhs);
  }

  // subnormal::vanishBound
  Value* vanishBound(Value* neg_step) {
    Value* a = b_.CreateIntrinsic(llvm::Intrinsic::fabs, {b_.getDoubleTy()}, {b_.CreateFPExt(neg_step, b_.getDoubleTy())});
    Value* q = b_.CreateFMul(b_.CreateFAdd(b_.CreateFMul(a, f64(0x1p-26)), f64(0x1p-50)), f64(1 + 0x1p-20));
    return b_.CreateFPTrunc(q, f32());
  }

  // optimizer.cc's adamLoop and sgdLoop: 64-element blocks; one with a
  // subnormal state x runs `emulating`, the others `plain`. fma(±0, c, y) =
  // y needs a finite c (SGD's 1 - dampening is not checked): with another c
  // every block runs `plain`, subnormal operands and all. A scalar test,
  // so the vector loop carries no mask for it.
  // `emulating` is one or more passes over the block, each called with the
  // element's index i and its place in the block k = i - lo.
  using BlockPass = std::function<void(Value* i, Value* k)>;
  void subnormalBlocks(Value* x, Value* n, Value* c, const std::function<void(Value*)>& plain,
                       const std::vector<BlockPass>& emulating) {
    Value* emulates = b_.CreateFCmpOLT(b_.CreateIntrinsic(llvm::Intrinsic::fabs, {f32()}, {c}),
                                       llvm::ConstantFP::getInfinity(f32()));
    Value* block = b_.getInt64(rt::optim::subnormal::kBlock);
    stridedLoop(b_.getInt64(0), n, block, "b", [&](Value* lo) {
      Value* end = b_.CreateAdd(lo, block);
      Value* hi = b_.CreateSelect(b_.CreateICmpSLT(end, n), end, n);
      Value* any = b_.CreateAnd(emulates, anySubnormal(x, lo, hi));
      llvm::Function* fn = b_.GetInsertBlock()->getParent();
      auto* plain_bb = llvm::BasicBlock::Create(ctx_, "plain", fn);
      auto* emulating_bb = llvm::BasicBlock::Create(ctx_, "emulating", fn);
      auto* join = llvm::BasicBlock::Create(ctx_, "block.end", fn);
      b_.CreateCondBr(any, emulating_bb, plain_bb);
      b_.SetInsertPoint(plain_bb);
      stridedLoop(lo, hi, b_.getInt64(1), "i", plain);
      b_.CreateBr(join);
      b_.SetInsertPoint(emulating_bb);
      for (const BlockPass& pass : emulating)
        stridedLoop(lo, hi, b_.getInt64(1), "j", [&](Value* i) { pass(i, b_.CreateSub(i, lo)); });
      b_.CreateBr(join);
      b_.SetInsertPoint(join);
    });
  }

  // subnormal::anySubnormal over m[lo, hi): an or-reduction the vectoriser takes
  Value* anySubnormal(Value* m, Value* lo, Value* hi) {
    llvm::Function* f = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(ctx_, "any.loop", f);
    auto* exit = llvm::BasicBlock::Create(ctx_, "any.end", f);
    b_.CreateBr(head);  // lo < hi: a block is never empty
    b_.SetInsertPoint(head);
    llvm::PHINode* i = b_.CreatePHI(i64(), 2, "k");
    llvm::PHINode* acc = b_.CreatePHI(b_.getInt32Ty(), 2, "any");
    i->addIncoming(lo, pre);
    acc->addIncoming(i32(0), pre);
    Value* mag = b_.CreateAnd(bitsOf(load(m, i)), i32(0x7fffffff));
    Value* sub = b_.CreateZExt(b_.CreateICmpULT(b_.CreateSub(mag, i32(1)), i32(0x007fffff)), b_.getInt32Ty());
    Value* next_acc = b_.CreateOr(acc, sub);
    Value* next = b_.CreateAdd(i, b_.getInt64(1), "k.next", true, true);
    i->addIncoming(next, head);
    acc->addIncoming(next_acc, head);
    b_.CreateCondBr(b_.CreateICmpSLT(next, hi), head, exit);
    b_.SetInsertPoint(exit);
    llvm::PHINode* result = b_.CreatePHI(b_.getInt32Ty(), 1, "any.result");
    result->addIncoming(next_acc, head);
    return b_.CreateICmpNE(result, i32(0));
  }

  // for (i = lo; i < hi; i += step) body(i)
  void stridedLoop(Value* lo, Value* hi, Value* step, const std::string& name, const std::function<void(Value*)>& body) {
    llvm::Function* f = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(ctx_, name + ".loop", f);
    auto* exit = llvm::BasicBlock::Create(ctx_, name + ".end", f);
    b_.CreateCondBr(b_.CreateICmpSLT(lo, hi), head, exit);
    b_.SetInsertPoint(head);
    llvm::PHINode* i = b_.CreatePHI(i64(), 2, name);
    i->addIncoming(lo, pre);
    body(i);
    Value* next = b_.CreateAdd(i, step, name + ".next", /*HasNUW=*/true, /*HasNSW=*/true);
    i->addIncoming(next, b_.GetInsertBlock());
    b_.CreateCondBr(b_.CreateICmpSLT(next, hi), head, exit);
    b_.SetInsertPoint(exit);
  }

  // SYMBOL.chunk(ptr noalias p, ptr noalias g, ptr noalias a, ptr noalias b, i64 n, float s0, …):
  // one chunk's elements (x86: all of them; NVPTX: this thread's).
  llvm::Function* chunkFunction() {
    std::vector<llvm::Type*> params = {ptr(), ptr(), ptr(), ptr(), i64()};
    params.insert(params.end(), static_cast<size_t>(scalars()), f32());
    auto* f = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), params, false),
                                     llvm::GlobalValue::InternalLinkage, updateSymbol(v_) + ".chunk", m_);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    // x86: kept out of line so its noalias pointers reach the vectoriser as they are
    f->addFnAttr(target_ == Target::X86 ? llvm::Attribute::NoInline : llvm::Attribute::AlwaysInline);
    // 256-bit vectors even where AVX-512 is present: update_bench's MLP step
    // (cache-resident) ran 0.86x of fast's AVX2 loop with 512-bit vectors
    // and 1.09x with 256 on Zen 4; the bits are the same either way.
    if (target_ == Target::X86) f->addFnAttr("prefer-vector-width", "256");
    const char* names[] = {"param", "grad", "a", "b", "n"};
    for (unsigned k = 0; k < 5; ++k) f->getArg(k)->setName(names[k]);
    for (unsigned k = 0; k < 4; ++k) {
      f->getArg(k)->addAttr(llvm::Attribute::NoAlias);  // Chunk's slices never overlap (the runner's tables)
      f->getArg(k)->addAttr(llvm::Attribute::NoCapture);
    }
    f->getArg(1)->addAttr(llvm::Attribute::ReadOnly);
    std::vector<Value*> s;
    for (int k = 0; k < scalars(); ++k) s.push_back(f->getArg(5 + static_cast<unsigned>(k)));
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", f));
    Value *lo = b_.getInt64(0), *step = b_.getInt64(1);
    if (target_ == Target::NVPTX) {
      lo = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x);
      step = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x);
    }
    Value *p = f->getArg(0), *g = f->getArg(1), *a = f->getArg(2), *bv = f->getArg(3), *n = f->getArg(4);
    // x86 pays a microcode assist per subnormal operand; GPUs do not
    const bool sgd_momentum = v_.rule == Variant::Rule::Sgd && v_.momentum && !v_.first && !v_.nesterov;
    if (target_ == Target::X86 && v_.rule == Variant::Rule::Adam) {
      Value* bound = vanishBound(s[optim_step::kAdamNegStepSize]);
      BlockScratch t = blockScratch();
      subnormalBlocks(a, n, s[optim_step::kAdamOneMinusBeta1], [&](Value* i) { adamElement(p, g, a, bv, i, s); },
                      {[&](Value* i, Value* k) { adamMomentsSubnormal(p, g, a, bv, i, k, s, t); },
                       [&](Value* i, Value* k) { adamParamSubnormal(p, a, i, k, s, bound, t); }});
    } else if (target_ == Target::X86 && sgd_momentum) {
      Value* bound = vanishBound(s[optim_step::kSgdNegLr]);
      subnormalBlocks(a, n, s[optim_step::kSgdOneMinusDampening], [&](Value* i) { sgdElement(p, g, a, i, s); },
                      {[&](Value* i, Value*) { sgdElementSubnormal(p, g, a, i, s, bound); }});
    } else {
      stridedLoop(lo, f->getArg(4), step, "i", [&](Value* i) {
        if (v_.rule == Variant::Rule::Sgd) {
          sgdElement(f->getArg(0), f->getArg(1), f->getArg(2), i, s);
        } else {
          adamElement(f->getArg(0), f->getArg(1), f->getArg(2), f->getArg(3), i, s);
        }
      });
    }
    b_.CreateRetVoid();
    return f;
  }

  Value* sreg(llvm::Intrinsic::ID id) { return b_.CreateZExt(b_.CreateCall(llvm::Intrinsic::getDeclaration(&m_, id)), i64()); }

  // Calls `chunk` for table[c]: its pointers, length and the scalars.
  void callChunk(llvm::Function* chunk, Value* table, Value* c, const std::vector<Value*>& s) {
    Value* at = b_.CreateInBoundsGEP(chunkType(), table, c);
    std::vector<Value*> args;
    for (unsigned k = 0; k < 5; ++k)
      args.push_back(b_.CreateLoad(k < 4 ? static_cast<llvm::Type*>(ptr()) : i64(), b_.CreateStructGEP(chunkType(), at, k)));
    args.insert(args.end(), s.begin(), s.end());
    b_.CreateCall(chunk, args);
  }

  std::vector<Value*> loadScalars(Value* scalars_ptr) {
    std::vector<Value*> s;
    for (int k = 0; k < scalars(); ++k) s.push_back(load(scalars_ptr, b_.getInt64(k)));
    return s;
  }

  void emitX86Entry(llvm::Function* chunk) {
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {ptr(), i64(), i64(), ptr()}, false);
    auto* f = llvm::Function::Create(fty, llvm::GlobalValue::ExternalLinkage, updateSymbol(v_), m_);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", f));
    std::vector<Value*> s = loadScalars(f->getArg(3));
    stridedLoop(f->getArg(1), f->getArg(2), b_.getInt64(1), "c", [&](Value* c) { callChunk(chunk, f->getArg(0), c, s); });
    b_.CreateRetVoid();
  }

  void emitNvptxKernel(llvm::Function* chunk) {
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {ptr(), i64(), ptr()}, false);
    auto* f = llvm::Function::Create(fty, llvm::GlobalValue::ExternalLinkage, updateSymbol(v_), m_);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::Metadata* md[] = {llvm::ValueAsMetadata::get(f), llvm::MDString::get(ctx_, "kernel"),
                            llvm::ValueAsMetadata::get(b_.getInt32(1))};
    m_.getOrInsertNamedMetadata("nvvm.annotations")->addOperand(llvm::MDNode::get(ctx_, md));
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", f));
    std::vector<Value*> s = loadScalars(f->getArg(2));
    Value* block = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x);
    Value* blocks = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x);
    stridedLoop(block, f->getArg(1), blocks, "c", [&](Value* c) { callChunk(chunk, f->getArg(0), c, s); });
    b_.CreateRetVoid();
  }

  const Variant& v_;
  Target target_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
};

ModuleEmitter updateEmitter(const Variant& v, Target target) {
  return [v, target](llvm::LLVMContext& ctx) { return emitUpdate(v, target, ctx); };
}

}  // namespace

std::string updateSymbol(const Variant& v) { return "dtl_update_" + v.name(); }

std::unique_ptr<llvm::Module> emitUpdate(const Variant& v, Target target, llvm::LLVMContext& ctx) {
  auto m = std::make_unique<llvm::Module>(updateSymbol(v), ctx);
  UpdateEmitter(v, target, *m).emit();
  return m;
}

// The kernel is fixed by its variant (the scalars are arguments), so the
// variant's name is the text its key hashes, with this file's own version:
// bump it whenever the code emitted here changes.
// 2: 256-bit vectors; 3: subnormal first moments; 4: and momentum buffers; 5: review fixes;
// 6: the decayed mantissa by one f32 fma; 7: Adam's subnormal block in two passes
constexpr int kUpdateVersion = 7;
std::string updateCacheKey(const Variant& v) {
  return hostCacheKey("multi-tensor update v" + std::to_string(kUpdateVersion) + " " + v.name());
}

UpdateKernel::~UpdateKernel() = default;
bool UpdateKernel::cached() const { return code_->cached(); }
double UpdateKernel::ms() const { return code_->ms(); }

std::unique_ptr<UpdateKernel> compileUpdateX86(const Variant& v, std::string* error, const ObjectCache* cache) {
  std::unique_ptr<UpdateKernel> k(new UpdateKernel);
  k->code_ = jitObject(cache ? updateCacheKey(v) : "", updateSymbol(v), updateEmitter(v, Target::X86), cache, error);
  if (!k->code_) return nullptr;
  k->fn_ = reinterpret_cast<UpdateKernel::Fn>(k->code_->address());
  return k;
}

std::string updateX86Ir(const Variant& v, bool optimised) { return hostIr(updateEmitter(v, Target::X86), optimised); }

bool updatePtx(const Variant& v, std::string* ptx, std::string* error) {
  return modulePtx(updateEmitter(v, Target::NVPTX), ptx, error);
}

}  // namespace dtl::codegen
