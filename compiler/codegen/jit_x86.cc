// The x86 JIT: one process-wide LLJIT for the host; each kernel's module is
// verified, tagged with the host CPU and features, run through the O3
// pipeline (the loop and SLP vectorisers see the real vector width), then
// handed to LLJIT under its own resource tracker. Modules compile on any
// number of threads at once (each its own context and target machine);
// only the LLJIT session is shared, under the engine's lock.
#include "compiler/codegen/jit_x86.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "compiler/codegen/emit_llvm.h"
#include "compiler/codegen/vector_math.h"
#include "core/hash.h"
#include "core/xxhash.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
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
  // 512-bit vectors on every AVX-512 host. LLVM prefers 256 on Intel's (its
  // Zen 4 tuning already takes 512): but the step's GEMMs (oneDNN's AVX-512
  // kernels) run the core at its 512-bit clock anyway, and the regions'
  // libmvec calls do twice the lanes per call (char GPT's gelu-gradient
  // regions 1.62-2.50 -> 1.24-1.64 ms on this Sapphire Rapids host,
  // alternated). The optimiser update keeps 256 bits (emit_update.cc).
  if (features.lookup("avx512f")) h.features += ",-prefer-256-bit";
  // Testing another x86 level on this host ("-avx512f", "-avx512f,-avx2,-avx"):
  // LLVM lets a later feature override an earlier one.
  if (const char* extra = std::getenv("DTL_JIT_FEATURES"); extra && *extra) {
    h.features += std::string(",") + extra;
    for (llvm::StringRef f : llvm::split(llvm::StringRef(extra), ','))
      if (f.size() > 1) features[f.drop_front()] = f.front() == '+';
  }
  h.avx2 = features.lookup("avx2");
  h.avx512 = features.lookup("avx512f");
  return h;
}

// The process-wide JIT and a target machine for the optimiser's cost models.
struct Engine {
  HostTarget host;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;  // the first; each compiling thread has its own (threadMachine)
  VectorMath vmath;   // libmvec's variants for the host's vector width, or none
  std::string error;  // why the engine could not start
  std::mutex mu;      // the JIT session: one object added, looked up or removed at a time
  uint64_t next_id = 0;
};

llvm::orc::JITTargetMachineBuilder hostBuilder(const HostTarget& h) {
  llvm::orc::JITTargetMachineBuilder b{llvm::Triple(h.triple)};
  b.setCPU(h.cpu);
  llvm::SubtargetFeatures features(h.features);
  b.addFeatures(features.getFeatures());
  b.setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
  b.setRelocationModel(llvm::Reloc::PIC_);  // objects loaded anywhere, calling libm through the GOT
  return b;
}

Engine& engine() {
  static Engine e;
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    if (std::string why = keepSumsInOrder(); !why.empty()) {
      e.error = why;
      return;
    }
    e.host = detectHost();
    auto tm = hostBuilder(e.host).createTargetMachine();
    if (!tm) {
      e.error = errorText(tm.takeError());
      return;
    }
    e.tm = std::move(*tm);
    e.vmath = chooseVectorMath(*e.tm, e.host.cpu, e.host.features, e.host.avx2);
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(hostBuilder(e.host)).create();
    if (!jit) {
      e.error = errorText(jit.takeError());
      return;
    }
    e.jit = std::move(*jit);
    // libm (expf, logf, tanhf, erff) and libmvec (loaded by chooseVectorMath) from the process
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

// This thread's target machine: a TargetMachine is not safe to share between
// threads, and modules compile on several at once (each in its own context).
llvm::TargetMachine* threadMachine(Engine& e, std::string* error) {
  thread_local std::unique_ptr<llvm::TargetMachine> tm;
  if (tm) return tm.get();
  auto made = hostBuilder(e.host).createTargetMachine();
  if (!made) {
    *error = "the x86 target machine: " + errorText(made.takeError());
    return nullptr;
  }
  tm = std::move(*made);
  return tm.get();
}

// The module `emit` builds, tagged for the host, verified and (when asked) optimised.
std::unique_ptr<llvm::Module> hostModule(Engine& e, const ModuleEmitter& emit, llvm::LLVMContext& ctx, bool optimised,
                                         std::string* error) {
  llvm::TargetMachine* tm = threadMachine(e, error);
  if (!tm) return nullptr;
  // LLVM warns on stderr of each loop it cannot transform as metadata asks
  // (a sum of fewer terms than kSumLanes it could not take for a reduction;
  // every call in a sum's body has a 16-lane variant, vector_math.h): the
  // kernel is right either way, nothing for a user to act on, and
  // CodegenSums.ASumsOrderIsFixedByTheSumAlone checks the order. Only
  // errors are printed.
  ctx.setDiagnosticHandlerCallBack([](const llvm::DiagnosticInfo& d, void*) {
    if (d.getSeverity() != llvm::DS_Error) return;
    llvm::DiagnosticPrinterRawOStream printer(llvm::errs());
    d.print(printer);
    llvm::errs() << "\n";
  });
  std::unique_ptr<llvm::Module> m = emit(ctx);
  useVectorMath(*m, e.vmath);  // libmvec's variants for the host, or plain libm
  m->setTargetTriple(e.host.triple);
  m->setDataLayout(tm->createDataLayout());
  for (llvm::Function& f : *m) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", e.host.cpu);
    f.addFnAttr("target-features", e.host.features);
    // A loop that calls libmvec keeps its vectors on the stack across the
    // calls (every vector register is the caller's to save). The ABI aligns
    // the stack to 16 bytes only, so without realigning, a 64-byte spill
    // slot's alignment depends on the caller's stack depth: misaligned, each
    // spill and reload splits over two cache lines and char GPT's GELU
    // gradient ran 2x slower on some threads than on others (docs/compiler.md,
    // "Aligned spills").
    f.addFnAttr("stackrealign");
  }
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(*m, &os)) {
    *error = "generated IR of `" + m->getName().str() + "` is invalid: " + os.str();
    return nullptr;
  }
  if (optimised) optimiseModule(*m, *tm);
  return m;
}

// What the compiled code depends on besides the region (kernelCacheKey).
constexpr const char* kFlags = "O3 pic no-fast-math ordered-sum-16 no-epilogue-vectorization";

std::string symbolFor(const Region& r) { return "dtl_" + hex64(regionHash(r)); }

ModuleEmitter regionEmitter(const Region& r, const KernelPlan& plan) {
  return [&r, &plan](llvm::LLVMContext& ctx) { return emitRegion(r, plan, Target::X86, symbolFor(r), ctx); };
}

// The module's object file for the host (machine code of the O3-optimised module).
bool objectFor(Engine& e, const ModuleEmitter& emit, std::string* object, std::string* error) {
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m = hostModule(e, emit, ctx, /*optimised=*/true, error);
  if (!m) return false;  // hostModule made this thread's machine, or said why not
  llvm::SmallVector<char, 0> bytes;
  llvm::raw_svector_ostream os(bytes);
  llvm::legacy::PassManager pm;
  llvm::TargetMachine* tm = threadMachine(e, error);
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile)) {
    *error = "the x86 target cannot emit object files";
    return false;
  }
  pm.run(*m);
  object->assign(bytes.data(), bytes.size());
  return true;
}

}  // namespace

HostTarget hostTarget() {
  Engine& e = engine();
  return e.host;
}

std::string hostVectorMath() {
  Engine& e = engine();
  return e.vmath.lanes ? e.vmath.describe() + " (" + std::to_string(e.vmath.lanes) + " lanes)"
                       : "scalar libm: " + (e.tm ? e.vmath.why : e.error);
}

// Each kernel in a JITDylib of its own: its symbol is the region's (the same
// in every object the cache holds for it), so equal kernels loaded twice do
// not clash, and removing the dylib frees its code.
struct JitObject::Resources {
  llvm::orc::JITDylib* dylib = nullptr;
};

JitObject::~JitObject() {
  if (!resources_ || !resources_->dylib) return;
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  llvm::consumeError(e.jit->getExecutionSession().removeJITDylib(*resources_->dylib));
}

void* JitObject::lookup(const std::string& symbol) const {
  if (!resources_ || !resources_->dylib) return nullptr;
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  llvm::Expected<llvm::orc::ExecutorAddr> address = e.jit->lookup(*resources_->dylib, symbol);
  if (!address) {
    llvm::consumeError(address.takeError());
    return nullptr;
  }
  return address->toPtr<void*>();
}

std::string hostCacheKey(const std::string& what) {
  Engine& e = engine();
  std::string text = what + "\n" + e.host.triple + "\n" + e.host.cpu + "\n" + e.host.features +
                     "\nLLVM " LLVM_VERSION_STRING "\ngenerator " + std::to_string(kGeneratorVersion) + "\n" + kFlags + "\n" +
                     e.vmath.describe();
  return hex64(xxh64(text.data(), text.size(), 0)) + hex64(xxh64(text.data(), text.size(), 1));
}

std::string kernelCacheKey(const Region& r) {
  std::string text = printRegion(r);
  return hostCacheKey(text.substr(text.find('\n') + 1));  // the name line left out: equal kernels share an object
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
  fn_(args.data(), 0, plan_.rows);
  runTail(args.data());
}

std::unique_ptr<JitObject> jitObject(const std::string& key, const std::string& symbol, const ModuleEmitter& emit,
                                     const ObjectCache* cache, std::string* error) {
  auto start = std::chrono::steady_clock::now();
  Engine& e = engine();
  if (!e.jit) {
    *error = "the x86 JIT could not start: " + e.error;
    return nullptr;
  }
  std::unique_ptr<JitObject> k(new JitObject);
  std::optional<std::string> object = cache ? readCachedObject(*cache, key) : std::nullopt;
  // A cached object that LLVM refuses (a checksum cannot vouch for the
  // writer) is compiled again and rewritten. Compiling needs no lock (its
  // own context and target machine): only the session is shared.
  for (int attempt = object ? 0 : 1; attempt < 2; ++attempt) {
    if (attempt == 1) {
      object.emplace();
      if (!objectFor(e, emit, &*object, error)) return nullptr;
    }
    std::lock_guard<std::mutex> lock(e.mu);
    auto dylib = e.jit->createJITDylib("dtl_kernel_" + std::to_string(e.next_id++));
    if (!dylib) {
      *error = "JIT of `" + symbol + "`: " + errorText(dylib.takeError());
      return nullptr;
    }
    dylib->addToLinkOrder(e.jit->getMainJITDylib());  // libm, through the process's symbols
    llvm::Error err = e.jit->addObjectFile(*dylib, llvm::MemoryBuffer::getMemBufferCopy(*object, symbol));
    llvm::Expected<llvm::orc::ExecutorAddr> address =
        err ? llvm::Expected<llvm::orc::ExecutorAddr>(std::move(err)) : e.jit->lookup(*dylib, symbol);
    if (!address) {
      std::string why = errorText(address.takeError());
      llvm::consumeError(e.jit->getExecutionSession().removeJITDylib(*dylib));
      if (attempt == 0) continue;
      *error = "JIT of `" + symbol + "`: " + why;
      return nullptr;
    }
    k->resources_ = std::make_unique<JitObject::Resources>();
    k->resources_->dylib = &*dylib;
    k->address_ = address->toPtr<void*>();
    k->cached_ = attempt == 0;
    break;
  }
  if (!k->cached_ && cache) writeCachedObject(*cache, key, *object);
  k->ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return k;
}

std::unique_ptr<JitKernel> compileX86(const Region& r, std::string* error, const ObjectCache* cache) {
  auto start = std::chrono::steady_clock::now();
  if (std::string problem = r.validate(); !problem.empty()) {
    *error = "region `" + r.name() + "`: " + problem;
    return nullptr;
  }
  std::unique_ptr<JitKernel> k(new JitKernel);
  k->plan_ = planKernel(r);
  for (const PlanBuffer& b : k->plan_.buffers)
    if (b.role == PlanBuffer::Role::Scratch) k->scratch_.emplace_back(std::max<int64_t>(b.elements(), 1));
  std::string why;
  k->code_ = jitObject(cache ? kernelCacheKey(r) : "", symbolFor(r), regionEmitter(r, k->plan_), cache, &why);
  if (!k->code_) {
    *error = "region `" + r.name() + "`: " + why;
    return nullptr;
  }
  k->fn_ = reinterpret_cast<void (*)(void**, int64_t, int64_t)>(k->code_->address());
  if (k->plan_.hasTail()) {
    k->tail_fn_ = reinterpret_cast<void (*)(void**, int64_t, int64_t)>(k->code_->lookup(symbolFor(r) + "_tail"));
    if (!k->tail_fn_) {
      *error = "region `" + r.name() + "`: its kernel has no tail";
      return nullptr;
    }
  }
  k->cached_ = k->code_->cached();
  k->compile_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return k;
}

std::string hostIr(const ModuleEmitter& emit, bool optimised) {
  Engine& e = engine();
  if (!e.tm) return "; the x86 target could not start: " + e.error + "\n";
  llvm::LLVMContext ctx;
  std::string error;
  std::unique_ptr<llvm::Module> m = hostModule(e, emit, ctx, optimised, &error);
  if (!m) return "; " + error + "\n";
  std::string text;
  llvm::raw_string_ostream os(text);
  m->print(os, nullptr);
  return os.str();
}

std::string x86Ir(const Region& r, bool optimised) {
  if (std::string problem = r.validate(); !problem.empty()) return "; region `" + r.name() + "`: " + problem + "\n";
  const KernelPlan plan = planKernel(r);
  return hostIr(regionEmitter(r, plan), optimised);
}

}  // namespace dtl::codegen
