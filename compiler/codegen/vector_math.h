// Vector transcendentals for the x86 kernels: the f32 libm calls the emitter
// makes (logf tanhf; exp and erf are inline, emit_f32_math.h) are routed
// through glibc's libmvec, one vector width per host, so the loop
// vectoriser calls `_ZGVeN16v_logf` (AVX-512), `_ZGVdN8v_logf` (AVX2), … on
// whole vectors.
//
// One function per host: the scalar calls the vectoriser leaves (a loop's
// remainder, code it does not vectorise) go through the same vector
// function, one lane used, and the 16-lane variant a sum's forced width
// needs (emit_llvm.h kSumLanes) is made of the host's width's calls: every
// element of a kernel gets the same function whatever path computes it, so
// a probe kernel and the fused one agree bit for bit (tests/support/
// region_oracle.h), and so do any two compiles. Without libmvec (or without
// its variant for the width), plain libm, with a 16-lane variant of 16
// scalar calls.
#pragma once

#include <string>

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace dtl::codegen {

struct VectorMath {
  int lanes = 0;       // f32 lanes of the variants used; 0: scalar libm calls only
  std::string prefix;  // the variants' name prefix, "_ZGVeN16v_" …
  std::string why;     // for lanes 0: why not
  // What the object code depends on (part of the object cache's key).
  std::string describe() const;
};

// The width the loop vectoriser uses for f32 on `tm` with this CPU and
// features (its register width: AVX-512 hosts may prefer 256 bits), if
// libmvec.so.1 loads into the process and has both functions for it.
VectorMath chooseVectorMath(llvm::TargetMachine& tm, const std::string& cpu, const std::string& features, bool avx2);

// Routes `m`'s calls of logf and tanhf through `dtl_vm_NAME`, an internal,
// never inlined function that calls the vector variant on a splat and
// returns lane 0, with the variant declared as its vector form
// (`vector-function-abi-variant`) for the loop vectoriser; and gives every
// such call (or, when vm.lanes is 0, every libm call) a 16-lane vector form
// too (`dtl_vm16_NAME`) unless the host's width is 16. Run it before the
// target attributes are set on every function.
void useVectorMath(llvm::Module& m, const VectorMath& vm);

}  // namespace dtl::codegen
