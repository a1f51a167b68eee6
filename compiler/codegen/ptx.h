// The NVPTX target: a region as PTX text for sm_90 (PTX ISA 7.8, LLVM 16's
// newest), one kernel per phase (emit_llvm.h gives the calling convention).
// Transcendentals come from CUDA's libdevice, linked in only when the region
// needs one, with NVVMReflect resolving its __CUDA_FTZ (0: denormals kept)
// and __CUDA_ARCH queries. Nothing here needs a GPU or the CUDA driver.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/kernel_plan.h"
#include "compiler/codegen/region.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace dtl::codegen {

struct PtxKernel {
  std::string name;
  int64_t threads = 0;  // one per point of its phase, 32 per point where a warp reduces it: launch at least these
};

struct PtxModule {
  std::string ptx;
  std::vector<PtxKernel> kernels;  // in launch order
  KernelPlan plan;
};

// $CUDA_HOME/nvvm/libdevice/libdevice.10.bc, else the toolkit at
// /usr/local/cuda; "" when neither has it.
std::string findLibdevice();

// false with *error set when the region is malformed, it needs libdevice and
// none is found (`libdevice` overrides the search), or LLVM fails.
bool compilePtx(const Region& r, PtxModule* out, std::string* error, const std::string& libdevice = "");

// The module `emit` builds (it calls no libdevice function: the update
// kernels, emit_update.h) as PTX: tagged for sm_90, verified, O3.
bool modulePtx(const std::function<std::unique_ptr<llvm::Module>(llvm::LLVMContext&)>& emit, std::string* ptx,
               std::string* error);

// The region's NVPTX IR, before or after linking libdevice and optimising.
std::string nvptxIr(const Region& r, bool optimised);

}  // namespace dtl::codegen
