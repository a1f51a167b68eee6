// Region → PTX: emit (Target::NVPTX), link libdevice's needed functions and
// internalise them, set nvvm-reflect-ftz = 0, O3 (NVVMReflect runs at its
// start), then the NVPTX back end prints PTX.
#include "compiler/codegen/ptx.h"

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "compiler/codegen/emit_llvm.h"
#include "core/hash.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"

namespace dtl::codegen {

namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";
constexpr const char* kCpu = "sm_90";
constexpr const char* kFeatures = "+ptx78";

struct Nvptx {
  std::unique_ptr<llvm::TargetMachine> tm;
  std::string error;
  std::mutex mu;
};

Nvptx& nvptx() {
  static Nvptx n;
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    const llvm::Target* t = llvm::TargetRegistry::lookupTarget(kTriple, n.error);
    if (!t) return;
    n.tm.reset(t->createTargetMachine(kTriple, kCpu, kFeatures, llvm::TargetOptions(), std::nullopt, std::nullopt,
                                      llvm::CodeGenOpt::Aggressive));
    if (!n.tm) n.error = "LLVM could not create the NVPTX target machine";
  });
  return n;
}

bool needsLibdevice(const llvm::Module& m) {
  for (const llvm::Function& f : m)
    if (f.isDeclaration() && f.getName().startswith("__nv_")) return true;
  return false;
}

// The region's module, libdevice linked when needed, verified; optimised when asked.
std::unique_ptr<llvm::Module> nvptxModule(Nvptx& n, const Region& r, const KernelPlan& plan, llvm::LLVMContext& ctx,
                                          bool optimised, const std::string& libdevice, std::string* error) {
  std::string symbol = "dtl_" + hex64(regionHash(r));
  std::unique_ptr<llvm::Module> m = emitRegion(r, plan, Target::NVPTX, symbol, ctx);
  m->setTargetTriple(kTriple);
  m->setDataLayout(n.tm->createDataLayout());
  m->addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t{0});  // keep denormals, as the reference
  if (needsLibdevice(*m)) {
    std::string path = libdevice.empty() ? findLibdevice() : libdevice;
    if (path.empty()) {
      *error = "region `" + r.name() +
               "` needs CUDA's libdevice (libdevice.10.bc), found neither under $CUDA_HOME/nvvm/libdevice nor "
               "/usr/local/cuda/nvvm/libdevice; install the CUDA toolkit or set CUDA_HOME";
      return nullptr;
    }
    auto file = llvm::MemoryBuffer::getFile(path);
    if (!file) {
      *error = "cannot read " + path + ": " + file.getError().message();
      return nullptr;
    }
    auto lib = llvm::parseBitcodeFile((*file)->getMemBufferRef(), ctx);
    if (!lib) {
      *error = "cannot parse " + path + ": " + llvm::toString(lib.takeError());
      return nullptr;
    }
    (*lib)->setTargetTriple(kTriple);
    (*lib)->setDataLayout(m->getDataLayout());
    if (llvm::Linker::linkModules(*m, std::move(*lib), llvm::Linker::Flags::LinkOnlyNeeded)) {
      *error = "linking " + path + " failed";
      return nullptr;
    }
    // Only the kernels stay visible, so the optimiser inlines libdevice and drops the rest.
    for (llvm::Function& f : *m)
      if (!f.isDeclaration() && !f.getName().startswith(symbol + "_p")) f.setLinkage(llvm::GlobalValue::InternalLinkage);
    for (llvm::GlobalVariable& g : m->globals())
      if (!g.isDeclaration()) g.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(*m, &os)) {
    *error = "generated NVPTX IR for region `" + r.name() + "` is invalid: " + os.str();
    return nullptr;
  }
  if (optimised) optimiseModule(*m, *n.tm);
  return m;
}

}  // namespace

std::string findLibdevice() {
  std::vector<std::string> roots;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) roots.push_back(home);
  roots.push_back("/usr/local/cuda");
  for (const std::string& root : roots) {
    std::string p = root + "/nvvm/libdevice/libdevice.10.bc";
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return p;
  }
  return "";
}

bool compilePtx(const Region& r, PtxModule* out, std::string* error, const std::string& libdevice) {
  Nvptx& n = nvptx();
  if (!n.tm) {
    *error = "the NVPTX target could not start: " + n.error;
    return false;
  }
  if (std::string problem = r.validate(); !problem.empty()) {
    *error = "region `" + r.name() + "`: " + problem;
    return false;
  }
  std::lock_guard<std::mutex> lock(n.mu);
  out->plan = planKernel(r);
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m = nvptxModule(n, r, out->plan, ctx, /*optimised=*/true, libdevice, error);
  if (!m) return false;
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream os(text);
  llvm::legacy::PassManager pm;
  if (n.tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_AssemblyFile)) {
    *error = "the NVPTX back end cannot emit PTX";
    return false;
  }
  pm.run(*m);
  out->ptx = text.str().str();
  out->kernels.clear();
  std::string symbol = "dtl_" + hex64(regionHash(r));
  for (const auto& [name, threads] : nvptxKernels(r, out->plan, symbol)) out->kernels.push_back({name, threads});
  return true;
}

bool modulePtx(const std::function<std::unique_ptr<llvm::Module>(llvm::LLVMContext&)>& emit, std::string* ptx,
               std::string* error) {
  Nvptx& n = nvptx();
  if (!n.tm) {
    *error = "the NVPTX target could not start: " + n.error;
    return false;
  }
  std::lock_guard<std::mutex> lock(n.mu);
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m = emit(ctx);
  m->setTargetTriple(kTriple);
  m->setDataLayout(n.tm->createDataLayout());
  m->addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t{0});
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(*m, &os)) {
    *error = "generated NVPTX IR of `" + m->getName().str() + "` is invalid: " + os.str();
    return false;
  }
  optimiseModule(*m, *n.tm);
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream out(text);
  llvm::legacy::PassManager pm;
  if (n.tm->addPassesToEmitFile(pm, out, nullptr, llvm::CGFT_AssemblyFile)) {
    *error = "the NVPTX back end cannot emit PTX";
    return false;
  }
  pm.run(*m);
  *ptx = text.str().str();
  return true;
}

std::string nvptxIr(const Region& r, bool optimised) {
  Nvptx& n = nvptx();
  if (!n.tm) return "; the NVPTX target could not start: " + n.error + "\n";
  if (std::string problem = r.validate(); !problem.empty()) return "; region `" + r.name() + "`: " + problem + "\n";
  std::lock_guard<std::mutex> lock(n.mu);
  llvm::LLVMContext ctx;
  std::string error;
  std::unique_ptr<llvm::Module> m = nvptxModule(n, r, planKernel(r), ctx, optimised, "", &error);
  if (!m) return "; " + error + "\n";
  std::string text;
  llvm::raw_string_ostream os(text);
  m->print(os, nullptr);
  return os.str();
}

}  // namespace dtl::codegen
