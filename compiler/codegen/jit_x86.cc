// The x86 JIT: one process-wide LLJIT for the host; each kernel's module is
// verified, tagged with the host CPU and features, run through the O3
// pipeline (the loop and SLP vectorisers see the real vector width), then
// handed to LLJIT under its own resource tracker.
#include "compiler/codegen/jit_x86.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include "compiler/codegen/emit_llvm.h"
#include "core/hash.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

namespace dtl::codegen {

namespace {

std::string errorText(llvm::Error e) { return llvm::toString(std::move(e)); }

HostTarget detectHost() {
  HostTarget h;
  h.triple = llvm::sys::getProcessTriple();
  h.cpu = llvm::sys::getHostCPUName().str();
  llvm::StringMap<bool> features;
  std::vector<std::string> list;
  if (llvm::sys::getHostCPUFeatures(features))
    for (const auto& f : features) list.push_back((f.second ? "+" : "-") + f.first().str());
  std::sort(list.begin(), list.end());  // StringMap's order is its hash's: sort for a stable key
  for (const std::string& f : list) h.features += (h.features.empty() ? "" : ",") + f;
  h.avx2 = features.lookup("avx2");
  h.avx512 = features.lookup("avx512f");
  return h;
}

// The process-wide JIT and a target machine for the optimiser's cost models.
struct Engine {
  HostTarget host;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::string error;  // why the engine could not start
  std::mutex mu;      // one compile at a time through `tm`
  uint64_t next_id = 0;
};

llvm::orc::JITTargetMachineBuilder hostBuilder(const HostTarget& h) {
  llvm::orc::JITTargetMachineBuilder b{llvm::Triple(h.triple)};
  b.setCPU(h.cpu);
  llvm::SubtargetFeatures features(h.features);
  b.addFeatures(features.getFeatures());
  b.setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
  return b;
}

Engine& engine() {
  static Engine e;
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    e.host = detectHost();
    auto tm = hostBuilder(e.host).createTargetMachine();
    if (!tm) {
      e.error = errorText(tm.takeError());
      return;
    }
    e.tm = std::move(*tm);
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(hostBuilder(e.host)).create();
    if (!jit) {
      e.error = errorText(jit.takeError());
      return;
    }
    e.jit = std::move(*jit);
    // libm (exp, log, tanh, erf) from the process
    auto search = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        e.jit->getDataLayout().getGlobalPrefix());
    if (!search) {
      e.error = errorText(search.takeError());
      return;
    }
    e.jit->getMainJITDylib().addGenerator(std::move(*search));
  });
  return e;
}

// The region's module for the host, verified and (when asked) optimised.
std::unique_ptr<llvm::Module> hostModule(Engine& e, const Region& r, const KernelPlan& plan, const std::string& symbol,
                                         llvm::LLVMContext& ctx, bool optimised, std::string* error) {
  std::unique_ptr<llvm::Module> m = emitRegion(r, plan, Target::X86, symbol, ctx);
  m->setTargetTriple(e.host.triple);
  m->setDataLayout(e.tm->createDataLayout());
  for (llvm::Function& f : *m) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", e.host.cpu);
    f.addFnAttr("target-features", e.host.features);
  }
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(*m, &os)) {
    *error = "generated IR for region `" + r.name() + "` is invalid: " + os.str();
    return nullptr;
  }
  if (optimised) optimiseModule(*m, *e.tm);
  return m;
}

std::string symbolFor(const Region& r, uint64_t id) {
  std::string s = "dtl_";
  for (char ch : r.name()) s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s + "_" + hex64(regionHash(r)) + "_" + std::to_string(id);
}

}  // namespace

HostTarget hostTarget() {
  Engine& e = engine();
  return e.host;
}

struct JitKernel::Resources {
  llvm::orc::ResourceTrackerSP tracker;
};

JitKernel::~JitKernel() {
  if (resources_ && resources_->tracker) llvm::consumeError(resources_->tracker->remove());
}

void JitKernel::run(const std::vector<const float*>& inputs, const std::vector<void*>& outputs) {
  if (static_cast<int>(inputs.size()) != plan_.inputs || static_cast<int>(outputs.size()) != plan_.outputs) {
    std::fprintf(stderr, "codegen: kernel takes %d inputs and %d outputs, given %zu and %zu\n", plan_.inputs,
                 plan_.outputs, inputs.size(), outputs.size());
    std::abort();
  }
  std::vector<void*> args;
  for (const float* p : inputs) args.push_back(const_cast<float*>(p));
  for (void* p : outputs) args.push_back(p);
  for (std::vector<float>& s : scratch_) args.push_back(s.data());
  fn_(args.data());
}

std::unique_ptr<JitKernel> compileX86(const Region& r, std::string* error) {
  auto start = std::chrono::steady_clock::now();
  Engine& e = engine();
  if (!e.jit) {
    *error = "the x86 JIT could not start: " + e.error;
    return nullptr;
  }
  if (std::string problem = r.validate(); !problem.empty()) {
    *error = "region `" + r.name() + "`: " + problem;
    return nullptr;
  }
  std::unique_ptr<JitKernel> k(new JitKernel);
  k->plan_ = planKernel(r);
  for (const PlanBuffer& b : k->plan_.buffers)
    if (b.role == PlanBuffer::Role::Scratch) k->scratch_.emplace_back(std::max<int64_t>(b.elements(), 1));

  std::lock_guard<std::mutex> lock(e.mu);
  std::string symbol = symbolFor(r, e.next_id++);
  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> m = hostModule(e, r, k->plan_, symbol, *ctx, /*optimised=*/true, error);
  if (!m) return nullptr;
  k->resources_ = std::make_unique<JitKernel::Resources>();
  k->resources_->tracker = e.jit->getMainJITDylib().createResourceTracker();
  if (llvm::Error err = e.jit->addIRModule(k->resources_->tracker,
                                           llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)))) {
    *error = "JIT of region `" + r.name() + "`: " + errorText(std::move(err));
    return nullptr;
  }
  auto address = e.jit->lookup(symbol);  // compiles to machine code now
  if (!address) {
    *error = "JIT of region `" + r.name() + "`: " + errorText(address.takeError());
    return nullptr;
  }
  k->fn_ = address->toPtr<void (*)(void**)>();
  k->compile_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return k;
}

std::string x86Ir(const Region& r, bool optimised) {
  Engine& e = engine();
  if (!e.tm) return "; the x86 target could not start: " + e.error + "\n";
  if (std::string problem = r.validate(); !problem.empty()) return "; region `" + r.name() + "`: " + problem + "\n";
  std::lock_guard<std::mutex> lock(e.mu);
  llvm::LLVMContext ctx;
  std::string error;
  std::unique_ptr<llvm::Module> m = hostModule(e, r, planKernel(r), symbolFor(r, 0), ctx, optimised, &error);
  if (!m) return "; " + error + "\n";
  std::string text;
  llvm::raw_string_ostream os(text);
  m->print(os, nullptr);
  return os.str();
}

}  // namespace dtl::codegen
