// e^x and erf(x) as inline IR: core/f32_math.h's polynomials, operation for
// operation (every multiply-add an llvm.fma), so the x86 JIT's kernels and
// the fast kernels compute the same bits, and a loop over them vectorises
// with no call and no spill. The NVPTX target keeps libdevice's (emit_llvm.cc).
#pragma once

#include "llvm/IR/IRBuilder.h"

namespace dtl::codegen {

llvm::Value* emitExpF32(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emitErfF32(llvm::IRBuilder<>& b, llvm::Value* x);

}  // namespace dtl::codegen
