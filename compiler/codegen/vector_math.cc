// libmvec for the x86 kernels (vector_math.h).
#include "compiler/codegen/vector_math.h"

#include <cstdlib>

#include "compiler/codegen/emit_llvm.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/Analysis/VectorUtils.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

namespace dtl::codegen {

namespace {

// The libm calls the emitter still makes (exp and erf are inline, emit_f32_math.h).
constexpr const char* kFunctions[] = {"logf", "tanhf"};

// The vectoriser's register width in bits for a function with these attributes.
unsigned vectorBits(llvm::TargetMachine& tm, const std::string& cpu, const std::string& features) {
  llvm::LLVMContext ctx;
  llvm::Module m("probe", ctx);
  auto* f = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), false),
                                   llvm::GlobalValue::ExternalLinkage, "probe", m);
  f->addFnAttr("target-cpu", cpu);
  f->addFnAttr("target-features", features);
  return static_cast<unsigned>(
      tm.getTargetTransformInfo(*f).getRegisterBitWidth(llvm::TargetTransformInfo::RGK_FixedWidthVector).getFixedValue());
}

}  // namespace

std::string VectorMath::describe() const { return lanes ? "libmvec " + prefix : "libm"; }

VectorMath chooseVectorMath(llvm::TargetMachine& tm, const std::string& cpu, const std::string& features, bool avx2) {
  VectorMath vm;
  if (const char* off = std::getenv("DTL_JIT_LIBMVEC"); off && std::string(off) == "0") {
    vm.why = "DTL_JIT_LIBMVEC=0";  // to test the fallback on a host that has libmvec
    return vm;
  }
  unsigned bits = vectorBits(tm, cpu, features);
  // libmvec's x86_64 ISA letters: b SSE, c AVX, d AVX2, e AVX-512.
  if (bits >= 512)
    vm.prefix = "_ZGVeN16v_";
  else if (bits >= 256)
    vm.prefix = avx2 ? "_ZGVdN8v_" : "_ZGVcN8v_";
  else if (bits >= 128)
    vm.prefix = "_ZGVbN4v_";
  else {
    vm.why = "no vector registers";
    return vm;
  }
  std::string error;
  if (llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1", &error)) {
    vm.why = "libmvec.so.1 does not load: " + error;
    vm.prefix.clear();
    return vm;
  }
  for (const char* fn : kFunctions)
    if (!llvm::sys::DynamicLibrary::SearchForAddressOfSymbol(vm.prefix + fn)) {
      vm.why = "libmvec has no " + vm.prefix + fn;
      vm.prefix.clear();
      return vm;
    }
  vm.lanes = static_cast<int>(bits >= 512 ? 16 : bits / 32);
  return vm;
}

namespace {

// <16 x float> NAME(<16 x float>) = `lane` on each piece of `width` lanes
// (width 1: a scalar float each): the sums' 16-lane variant, built from
// the host's own, so each element gets the very function it gets elsewhere.
llvm::Function* sixteenLanes(llvm::Module& m, const std::string& name, llvm::FunctionCallee lane, unsigned width) {
  llvm::LLVMContext& ctx = m.getContext();
  auto* v16 = llvm::FixedVectorType::get(llvm::Type::getFloatTy(ctx), kSumLanes);
  auto* f = llvm::Function::Create(llvm::FunctionType::get(v16, {v16}, false), llvm::GlobalValue::InternalLinkage,
                                   name, m);
  f->addFnAttr(llvm::Attribute::NoInline);  // kept whole, as the vectoriser expects a call
  f->setDoesNotAccessMemory();
  f->setDoesNotThrow();
  f->setWillReturn();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", f));
  llvm::Value* in = f->getArg(0);
  llvm::Value* out = llvm::PoisonValue::get(v16);
  for (unsigned at = 0; at < kSumLanes; at += width) {
    llvm::SmallVector<int, 16> piece, back(kSumLanes);
    for (unsigned l = 0; l < width; ++l) piece.push_back(static_cast<int>(at + l));
    llvm::Value* x = width == 1 ? b.CreateExtractElement(in, uint64_t{at}) : b.CreateShuffleVector(in, piece);
    llvm::CallInst* y = b.CreateCall(lane, {x});
    y->setDoesNotAccessMemory();
    if (width == 1) {
      out = b.CreateInsertElement(out, y, uint64_t{at});
      continue;
    }
    // out's lanes [at, at + width) from y, the others kept
    llvm::Value* wide = b.CreateShuffleVector(y, llvm::PoisonValue::get(y->getType()), [&] {
      llvm::SmallVector<int, 16> grow(kSumLanes, -1);
      for (unsigned l = 0; l < width; ++l) grow[at + l] = static_cast<int>(l);
      return grow;
    }());
    for (unsigned l = 0; l < kSumLanes; ++l)
      back[l] = l >= at && l < at + width ? static_cast<int>(kSumLanes + l) : static_cast<int>(l);
    out = b.CreateShuffleVector(out, wide, back);
  }
  b.CreateRet(out);
  return f;
}

}  // namespace

namespace {

// An internal, never inlined float NAME(float) that calls `vector` on a
// splat and returns lane 0, in the place of every call of `scalar` (which
// goes): the scalar calls the vectoriser leaves get the vector function too.
llvm::Function* laneZeroShim(llvm::Module& m, llvm::Function* scalar, llvm::Function* vector, unsigned lanes) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::Type* f32 = llvm::Type::getFloatTy(ctx);
  auto* shim = llvm::Function::Create(llvm::FunctionType::get(f32, {f32}, false), llvm::GlobalValue::InternalLinkage,
                                      "dtl_vm_" + scalar->getName().str(), m);
  shim->addFnAttr(llvm::Attribute::NoInline);  // inlined, the loop would hold a vector call it cannot widen
  shim->setDoesNotAccessMemory();
  shim->setDoesNotThrow();
  shim->setWillReturn();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", shim));
  llvm::CallInst* lane = b.CreateCall(vector, {b.CreateVectorSplat(lanes, shim->getArg(0))});
  lane->setDoesNotAccessMemory();
  b.CreateRet(b.CreateExtractElement(lane, uint64_t{0}));
  scalar->replaceAllUsesWith(shim);
  scalar->eraseFromParent();
  return shim;
}

}  // namespace

void useVectorMath(llvm::Module& m, const VectorMath& vm) {
  llvm::Type* f32 = llvm::Type::getFloatTy(m.getContext());
  for (const char* fn : kFunctions) {
    llvm::Function* callee = m.getFunction(fn);  // what the kernel's calls call: libm's, or the shim
    if (!callee || callee->use_empty()) continue;
    // The variants the vectoriser may call: libmvec's at the host's width,
    // and 16 lanes (a sum's forced width, emit_llvm.h kSumLanes) made of the
    // same function, so a sum over fn's values vectorises on every host as
    // its order requires and every element gets the one function.
    std::vector<std::string> variants;
    llvm::Function* vector = nullptr;
    if (vm.lanes > 0) {
      const auto lanes = static_cast<unsigned>(vm.lanes);
      auto* vty = llvm::FixedVectorType::get(f32, lanes);
      vector = llvm::cast<llvm::Function>(
          m.getOrInsertFunction(vm.prefix + fn, llvm::FunctionType::get(vty, {vty}, false)).getCallee());
      vector->setDoesNotAccessMemory();
      vector->setDoesNotThrow();
      vector->setWillReturn();
      llvm::appendToCompilerUsed(m, {vector});  // kept until the vectoriser calls it
      callee = laneZeroShim(m, callee, vector, lanes);
      variants.push_back(llvm::VFABI::mangleTLIVectorName(vector->getName(), callee->getName(), 1,
                                                          llvm::ElementCount::getFixed(lanes)));
    }
    llvm::Function* wide = nullptr;
    if (vm.lanes != kSumLanes) {
      wide = vector ? sixteenLanes(m, std::string("dtl_vm16_") + fn, vector, static_cast<unsigned>(vm.lanes))
                    : sixteenLanes(m, std::string("dtl_vm16_") + fn, callee, 1);
      variants.push_back(llvm::VFABI::mangleTLIVectorName(wide->getName(), callee->getName(), 1,
                                                          llvm::ElementCount::getFixed(kSumLanes)));
      llvm::appendToCompilerUsed(m, {wide});
    }
    for (llvm::User* u : callee->users())
      if (auto* call = llvm::dyn_cast<llvm::CallInst>(u);
          call && call->getCalledFunction() == callee && call->getFunction() != wide)
        llvm::VFABI::setVectorVariantNames(call, variants);
  }
}

}  // namespace dtl::codegen
