// Region → LLVM IR, for either target, following the region's KernelPlan
// (kernel_plan.h). This file knows the loop nests and the arithmetic; it sets
// no triple, data layout or optimisation: jit_x86.h and ptx.h do.
//
// Arithmetic: f32 as IEEE without fast-math flags (NaN and ±inf as the
// reference kernels); an x86 sum adds in kSumLanes lanes (a fixed order that
// vectorises; its error stays within γₙ·Σ|xᵢ|). The transcendental
// functions (exp log tanh sigmoid silu gelu gelu_tanh) are f32 formulas over
// f32 exp, log, tanh and erf: on x86 exp and erf inline (core/f32_math.h,
// which the fast backend's gelu, attention and cross-entropy call too; its other exps are
// libmvec's), logf and tanhf from glibc's libm (or libmvec's vector
// variants, vector_math.h); libdevice's __nv_*f on NVPTX; tests/support/region_oracle.cc bounds their error
// against the reference's double formulas. So are the gradients of gelu,
// gelu_tanh, silu, tanh, sigmoid and exp (the fast backend's f32 formulas
// over the same calls); the other gradients and rsqrt stay double formulas
// rounded once (no call; they vectorise as they are).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/codegen/kernel_plan.h"
#include "compiler/codegen/region.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace dtl::codegen {

enum class Target { X86, NVPTX };

// An x86 sum adds its terms in this many lanes, then the lanes as LLVM's
// reduction tree, then the leftover terms in order: the same order on every
// host and in every kernel that computes the sum (emit_llvm.cc,
// orderedSumHints). 16: one AVX-512 register, two AVX2 ones.
inline constexpr int kSumLanes = 16;

// X86: one function `void SYMBOL(void** buffers, i64 begin, i64 end)`, the
// buffers in the plan's order (inputs, outputs, scratch), distinct and not
// overlapping; the phases run in order inside one loop nest over the dims
// their spaces share in front (each phase's own dims inside, last dim
// innermost), the outermost over rows [begin, end) of the plan's split dim (ignored
// without a split); with deferred sums (plan.folded), chunk by chunk, begin
// a chunk's first row; and, with tail phases, `SYMBOL_tail` (same
// signature, begin and end ignored) runs them once after every row.
// NVPTX: one kernel per phase, `SYMBOL_pK(ptr b0, …, ptr bN)` (every kernel
// takes every buffer), launched in phase order with any 1-D grid of blocks
// of a multiple of 32 threads: each thread visits points gid, gid +
// gridsize, … of the phase's space — but a warp each point of a reduction
// along its operand's last dim of 32 or more terms (warpReduced: lanes read
// adjacent terms, a butterfly of shuffles combines them); after a phase
// with partials, one kernel per deferred sum `SYMBOL_pK_sJ` over [chunk,
// result] (one thread sums one chunk's rows). nvptxKernels lists them all
// with the threads each wants.
std::unique_ptr<llvm::Module> emitRegion(const Region& r, const KernelPlan& plan, Target target,
                                         const std::string& symbol, llvm::LLVMContext& ctx);

// LLVM's O3 pipeline with `tm`'s cost models (and its target passes: NVVMReflect for NVPTX).
void optimiseModule(llvm::Module& m, llvm::TargetMachine& tm);

// Turns LLVM's epilogue vectorisation off, once for the process (it would
// add a sum's leftover terms in narrower lanes where the cost model likes
// it: an order that hangs on the loop body). optimiseModule, which every
// pipeline of this process runs through, calls it first. "" or why not.
std::string keepSumsInOrder();

// The NVPTX kernel name of phase `k`.
std::string phaseKernelName(const std::string& symbol, size_t k);
std::string partialKernelName(const std::string& symbol, size_t k, size_t j);
// A phase whose NVPTX kernel gives a warp to each point (above).
bool warpReduced(const Region& r, const PlanPhase& phase);
// Every kernel in launch order with the threads it wants (one per point, 32 where warpReduced).
std::vector<std::pair<std::string, int64_t>> nvptxKernels(const Region& r, const KernelPlan& plan,
                                                          const std::string& symbol);

}  // namespace dtl::codegen
