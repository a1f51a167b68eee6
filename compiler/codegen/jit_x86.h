// The x86 target: a region compiled for this machine's CPU (its name and
// features from LLVM's host queries: AVX2 or AVX-512 as present, never
// assumed), optimised at O3 and JIT-compiled with ORC LLJIT into this
// process. Transcendentals call the process's libm (glibc). Not yet: the
// object cache and the split over the executor's threads (issue 11).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/kernel_plan.h"
#include "compiler/codegen/region.h"

namespace dtl::codegen {

struct HostTarget {
  std::string triple;    // "x86_64-pc-linux-gnu"
  std::string cpu;       // "znver4", "sapphirerapids", …
  std::string features;  // "+avx2,+avx512f,…,-amx-tile" (LLVM's spelling; all of them)
  bool avx2 = false, avx512 = false;
};
HostTarget hostTarget();

class JitKernel {
 public:
  ~JitKernel();
  // inputs: one f32 buffer per region input, in the region's order; outputs:
  // one per region output (float*, or uint8_t* for a Bool output). Scratch
  // for reductions that are not outputs is allocated here. Buffers must not
  // overlap. Not reentrant across threads (the scratch is the kernel's).
  void run(const std::vector<const float*>& inputs, const std::vector<void*>& outputs);
  const KernelPlan& plan() const { return plan_; }
  double compileMs() const { return compile_ms_; }  // emit + optimise + machine code

 private:
  friend std::unique_ptr<JitKernel> compileX86(const Region& r, std::string* error);
  JitKernel() = default;
  KernelPlan plan_;
  void (*fn_)(void**) = nullptr;
  std::vector<std::vector<float>> scratch_;
  struct Resources;
  std::unique_ptr<Resources> resources_;  // the JIT's code for this kernel, freed with it
  double compile_ms_ = 0;
};

// nullptr with *error set when the region is malformed or LLVM fails.
std::unique_ptr<JitKernel> compileX86(const Region& r, std::string* error);

// The region's LLVM IR for the host, before or after the O3 pipeline (for
// printing: tools/codegen/print_region.cc).
std::string x86Ir(const Region& r, bool optimised);

}  // namespace dtl::codegen
