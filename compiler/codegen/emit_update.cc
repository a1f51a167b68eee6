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

  // runtime/optim/optimizer.cc's adamLoop body, operation for operation.
  void adamElement(Value* p, Value* g, Value* m, Value* v, Value* i, const std::vector<Value*>& s) {
    using namespace optim_step;
    Value* gi = load(g, i);
    Value* pi = load(p, i);
    if (v_.l2) gi = fma(pi, s[kAdamWeightDecay], gi);
    if (v_.decoupled) pi = b_.CreateFMul(pi, s[kAdamDecay]);
    Value* mi = fma(gi, s[kAdamOneMinusBeta1], b_.CreateFMul(load(m, i), s[kAdamBeta1]));
    Value* vi = fma(b_.CreateFMul(s[kAdamOneMinusBeta2], gi), gi, b_.CreateFMul(load(v, i), s[kAdamBeta2]));
    Value* root = b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {f32()}, {vi});
    Value* denom = b_.CreateFAdd(b_.CreateFDiv(root, s[kAdamBiasCorrection2Sqrt]), s[kAdamEps]);
    store(mi, m, i);
    store(vi, v, i);
    store(b_.CreateFAdd(pi, b_.CreateFDiv(b_.CreateFMul(s[kAdamNegStepSize], mi), denom)), p, i);
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
    stridedLoop(lo, f->getArg(4), step, "i", [&](Value* i) {
      if (v_.rule == Variant::Rule::Sgd) {
        sgdElement(f->getArg(0), f->getArg(1), f->getArg(2), i, s);
      } else {
        adamElement(f->getArg(0), f->getArg(1), f->getArg(2), f->getArg(3), i, s);
      }
    });
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
constexpr int kUpdateVersion = 2;  // 2: 256-bit vectors
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
