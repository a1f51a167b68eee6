// `dtlc check --emit=llvm|ptx` and `dtlc run --kernels jit` need the kernel
// generator (compiler/codegen, LLVM 16), which only some binaries link:
// dtl_cli itself stays free of LLVM, and emit_kernels.cc — compiled into
// dtlc and some tests only when the build has the generator
// (DTL_HAVE_CODEGEN) — registers both before main. Without it, they say the
// build lacks the generator (exit 2).
#pragma once

#include <memory>
#include <string>

#include "compiler/codegen/fuse_regions.h"
#include "compiler/program/plan_program.h"
#include "compiler/sema/spec.h"
#include "core/program.h"
#include "runtime/exec/backend.h"
#include "runtime/optim/multi_tensor.h"

namespace dtl::cli {

// Appends every region's LLVM IR (ptx = false) or PTX to `out`, then the
// multi-tensor update kernels of the spec's optimiser; returns the exit status.
using KernelEmitter = int (*)(const prog::Program& p, const codegen::Fusion& f, const rt::optim::OptimizerConfig& opt,
                              bool ptx, std::string& out, std::string& err);
void setKernelEmitter(KernelEmitter emitter);

// `--kernels jit`: the runner of the program's fused regions and the
// multi-tensor optimiser update, every kernel compiled or loaded from the
// object cache ($XDG_CACHE_HOME/dtl) now; `note` says how many of each.
// Returns the exit status (2: no generator).
struct JitRunners {
  std::unique_ptr<rt::RegionRunner> regions;
  std::unique_ptr<rt::optim::MultiTensorUpdate> update;
};
// `threads`: the cores the rank may use, which compile the kernels.
using RegionRunnerMaker = int (*)(const prog::Program& p, const rt::optim::OptimizerConfig& opt, int threads,
                                  JitRunners& runners, std::string& note, std::string& err);
void setRegionRunnerMaker(RegionRunnerMaker maker);
int makeRegionRunner(const prog::Program& p, const rt::optim::OptimizerConfig& opt, int threads, JitRunners& runners,
                     std::string& note, std::string& err);

// The kernels `dtlc run` and `dtlc check` take when --kernels is not given
// (""): jit where this binary has the generator — on every benchmark it is
// at least as fast as fast (docs/compiler.md, "Step times") — else fast.
std::string kernelsOrDefault(const std::string& kernels);

// How to plan the program those kernels run (jit's has its fused regions),
// so that `dtlc plan`, the memory check before a run and the run folder's
// plan count the buffers the run will hold.
program::PlanOptions planOptionsFor(const std::string& kernels);

// The optimiser the spec's train block names, with PyTorch's defaults.
rt::optim::OptimizerConfig optimizerConfig(const sema::TrainSpec& t);

}  // namespace dtl::cli
