// The x86 target: a region compiled for this machine's CPU (its name and
// features from LLVM's host queries: AVX2 or AVX-512 as present, never
// assumed), optimised at O3 and JIT-compiled with ORC LLJIT into this
// process. Transcendentals call the process's libm (glibc). A kernel is
// compiled to an object file and loaded into the JIT, so that object can be
// kept in an object cache (object_cache.h) and loaded by later runs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/kernel_plan.h"
#include "compiler/codegen/object_cache.h"
#include "compiler/codegen/region.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace dtl::codegen {

struct HostTarget {
  std::string triple;    // "x86_64-pc-linux-gnu"
  std::string cpu;       // "znver4", "sapphirerapids", …
  std::string features;  // "+avx2,+avx512f,…,-amx-tile" (LLVM's spelling; all of them)
  bool avx2 = false, avx512 = false;
};
HostTarget hostTarget();

// One kernel's object file in the process-wide JIT, in a JITDylib of its own
// (its symbol may be the same in every object of that kernel, so equal
// kernels loaded twice do not clash); removing the dylib frees its code.
class JitObject {
 public:
  ~JitObject();
  void* address() const { return address_; }
  void* lookup(const std::string& symbol) const;  // another symbol of the object, or nullptr
  bool cached() const { return cached_; }  // loaded from the object cache, not compiled
  double ms() const { return ms_; }        // emit + optimise + machine code, or the cache's load

 private:
  friend std::unique_ptr<JitObject> jitObject(const std::string&, const std::string&,
                                              const std::function<std::unique_ptr<llvm::Module>(llvm::LLVMContext&)>&,
                                              const ObjectCache*, std::string*);
  JitObject() = default;
  void* address_ = nullptr;
  bool cached_ = false;
  double ms_ = 0;
  struct Resources;
  std::unique_ptr<Resources> resources_;
};

// Builds a kernel's module (without triple or attributes: this tags it for
// the host, verifies it and runs O3 on it).
using ModuleEmitter = std::function<std::unique_ptr<llvm::Module>(llvm::LLVMContext&)>;

// `symbol` of the module `emit` builds, compiled for the host and loaded;
// with a cache, the object stored under `key` (hostCacheKey) is loaded
// instead, and a compiled one stored. nullptr with *error when LLVM fails.
std::unique_ptr<JitObject> jitObject(const std::string& key, const std::string& symbol, const ModuleEmitter& emit,
                                     const ObjectCache* cache, std::string* error);

// A cache key: a hash of `text` (what the kernel computes), the host CPU
// and features, the LLVM version, kGeneratorVersion and the flags.
std::string hostCacheKey(const std::string& text);

// The module `emit` builds, tagged for the host, before or after O3.
std::string hostIr(const ModuleEmitter& emit, bool optimised);

class JitKernel {
 public:
  // inputs: one f32 buffer per region input, in the region's order; outputs:
  // one per region output (float*, or uint8_t* for a Bool output). Scratch
  // for reductions that are not outputs is allocated here. Buffers must not
  // overlap. Not reentrant across threads (the scratch is the kernel's).
  void run(const std::vector<const float*>& inputs, const std::vector<void*>& outputs);
  // Reentrant: every buffer of the plan in its order (inputs, outputs, then
  // scratch the caller owns), rows [begin, end) of plan().split (0 and
  // plan().rows for all; begin a chunk's first row where the plan has
  // deferred sums). Disjoint row ranges may run on different threads; then
  // runTail once, after all of them.
  void runRows(void* const* buffers, int64_t begin, int64_t end) const { fn_(const_cast<void**>(buffers), begin, end); }
  void runTail(void* const* buffers) const {
    if (tail_fn_) tail_fn_(const_cast<void**>(buffers), 0, 0);
  }
  const KernelPlan& plan() const { return plan_; }
  double compileMs() const { return compile_ms_; }  // emit + optimise + machine code, or the cache's load
  bool cached() const { return cached_; }           // loaded from the object cache, not compiled

 private:
  friend std::unique_ptr<JitKernel> compileX86(const Region& r, std::string* error, const ObjectCache* cache);
  JitKernel() = default;
  KernelPlan plan_;
  void (*fn_)(void**, int64_t, int64_t) = nullptr;
  void (*tail_fn_)(void**, int64_t, int64_t) = nullptr;  // the plan's tail phases, or null
  bool cached_ = false;
  std::vector<std::vector<float>> scratch_;
  std::unique_ptr<JitObject> code_;  // the JIT's code for this kernel, freed with it
  double compile_ms_ = 0;
};

// Bumped whenever the generator's output for a region changes: part of the cache key.
// 2: f32 transcendentals, libmvec; 3: a reduction loads an output stored before it; 4: f32 gradients of the transcendentals
// 5: deferred sums over the split dim (partials per chunk, a tail); 6: a reduction operand adds into its partial
// only after its own phase; 7: the phases in one nest over the dims their spaces share in front; 8: every
// function realigns its stack (64-byte vector spills around libmvec calls); 9: exp and erf inline, sums in
// a fixed order (16 lanes, a halving tree, the rest in order); 10: 16-lane variants of every libm call;
// 11: without libmvec, libm called directly (no shim) with its 16-lane variant
inline constexpr int kGeneratorVersion = 11;

// nullptr with *error set when the region is malformed or LLVM fails. With
// a cache, an object stored under the region's key is loaded instead of
// compiled, and a compiled one is stored.
std::unique_ptr<JitKernel> compileX86(const Region& r, std::string* error, const ObjectCache* cache = nullptr);

// The cache key: a hash of the region's text (its name left out), the host
// CPU and features, the LLVM version, kGeneratorVersion, the flags and the
// vector math in use (vector_math.h: which libmvec variants, or libm).
std::string kernelCacheKey(const Region& r);

// The vector math the kernels call: "libmvec _ZGVeN16v_ (16 lanes)", or
// "scalar libm: " and why not.
std::string hostVectorMath();

// The region's LLVM IR for the host, before or after the O3 pipeline (for
// printing: tools/codegen/print_region.cc).
std::string x86Ir(const Region& r, bool optimised);

}  // namespace dtl::codegen
