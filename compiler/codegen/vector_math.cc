// libmvec for the x86 kernels (vector_math.h).
#include "compiler/codegen/vector_math.h"

#include <cstdlib>

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

constexpr const char* kFunctions[] = {"expf", "logf", "tanhf", "erff"};

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

void useVectorMath(llvm::Module& m, const VectorMath& vm) {
  if (vm.lanes == 0) return;
  llvm::LLVMContext& ctx = m.getContext();
  llvm::Type* f32 = llvm::Type::getFloatTy(ctx);
  auto* vty = llvm::FixedVectorType::get(f32, static_cast<unsigned>(vm.lanes));
  for (const char* fn : kFunctions) {
    llvm::Function* scalar = m.getFunction(fn);
    if (!scalar || scalar->use_empty()) continue;
    std::string vector_name = vm.prefix + fn;
    auto* vector = llvm::cast<llvm::Function>(
        m.getOrInsertFunction(vector_name, llvm::FunctionType::get(vty, {vty}, false)).getCallee());
    vector->setDoesNotAccessMemory();
    vector->setDoesNotThrow();
    vector->setWillReturn();

    std::string shim_name = std::string("dtl_vm_") + fn;
    auto* shim = llvm::Function::Create(llvm::FunctionType::get(f32, {f32}, false), llvm::GlobalValue::InternalLinkage,
                                        shim_name, m);
    shim->addFnAttr(llvm::Attribute::NoInline);  // inlined, the loop would hold a vector call it cannot widen
    shim->setDoesNotAccessMemory();
    shim->setDoesNotThrow();
    shim->setWillReturn();
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", shim));
    llvm::Value* splat = b.CreateVectorSplat(static_cast<unsigned>(vm.lanes), shim->getArg(0));
    llvm::CallInst* lanes = b.CreateCall(vector, {splat});
    lanes->setDoesNotAccessMemory();
    b.CreateRet(b.CreateExtractElement(lanes, uint64_t{0}));

    scalar->replaceAllUsesWith(shim);
    scalar->eraseFromParent();
    std::string variant =
        llvm::VFABI::mangleTLIVectorName(vector_name, shim_name, 1, llvm::ElementCount::getFixed(static_cast<unsigned>(vm.lanes)));
    for (llvm::User* u : shim->users())
      if (auto* call = llvm::dyn_cast<llvm::CallInst>(u); call && call->getCalledFunction() == shim)
        llvm::VFABI::setVectorVariantNames(call, {variant});
    llvm::appendToCompilerUsed(m, {vector});  // kept until the vectoriser calls it
  }
}

}  // namespace dtl::codegen
