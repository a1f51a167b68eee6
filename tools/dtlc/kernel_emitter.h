// `dtlc check --emit=llvm|ptx` needs the kernel generator (compiler/codegen,
// LLVM 16), which only some binaries link: dtl_cli itself stays free of
// LLVM, and emit_kernels.cc — compiled into dtlc and cli_test only when the
// build has the generator (DTL_HAVE_CODEGEN) — registers the emitter before
// main. Without it, --emit=llvm|ptx says the build lacks the generator.
#pragma once

#include <string>

#include "compiler/codegen/fuse_regions.h"
#include "core/program.h"

namespace dtl::cli {

// Appends every region's LLVM IR (ptx = false) or PTX to `out`; returns the exit status.
using KernelEmitter = int (*)(const prog::Program& p, const codegen::Fusion& f, bool ptx, std::string& out,
                              std::string& err);
void setKernelEmitter(KernelEmitter emitter);

}  // namespace dtl::cli
