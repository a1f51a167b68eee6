// The multi-tensor optimiser update: one generated kernel per optimiser
// variant (core/optim_step.h: sgd with or without weight decay, momentum,
// its first step, nesterov; adam with or without L2; adamw) that updates a
// table of chunks — pointers to slices of param, grad and state, and their
// lengths — the way apex's multi_tensor_apply does, with the step's scalars
// computed on the host (rt::optim::Optimizer::scalars).
//
// The per-element arithmetic is runtime/optim/optimizer.cc's, operation for
// operation: f32 IEEE without fast-math flags, llvm.fma exactly where that
// loop calls std::fma and nowhere else (nothing is contracted), so a
// generated update is bitwise equal to `fast`'s (NaN payloads aside).
//
// X86: `void SYMBOL(const Chunk* table, i64 begin, i64 end, const float* scalars)`
//   updates chunks [begin, end); disjoint ranges may run on different threads.
// NVPTX: kernel `SYMBOL(const Chunk* table, i64 chunks, const float* scalars)`,
//   any 1-D launch: block b takes chunks b, b + gridDim, …; its threads
//   stride the chunk's elements (apex's one block per chunk).
#pragma once

#include <memory>
#include <string>

#include "compiler/codegen/emit_llvm.h"
#include "compiler/codegen/object_cache.h"
#include "core/optim_step.h"

namespace dtl::codegen {

class JitObject;

// "dtl_update_" + the variant's name.
std::string updateSymbol(const optim_step::Variant& v);

std::unique_ptr<llvm::Module> emitUpdate(const optim_step::Variant& v, Target target, llvm::LLVMContext& ctx);

// The x86 kernel, compiled or loaded from the cache.
class UpdateKernel {
 public:
  using Fn = void (*)(const optim_step::Chunk*, int64_t, int64_t, const float*);
  void run(const optim_step::Chunk* table, int64_t begin, int64_t end, const optim_step::Scalars& s) const {
    fn_(table, begin, end, s.v);
  }
  bool cached() const;
  double ms() const;
  ~UpdateKernel();

 private:
  friend std::unique_ptr<UpdateKernel> compileUpdateX86(const optim_step::Variant&, std::string*, const ObjectCache*);
  UpdateKernel() = default;
  Fn fn_ = nullptr;
  std::unique_ptr<JitObject> code_;
};

std::unique_ptr<UpdateKernel> compileUpdateX86(const optim_step::Variant& v, std::string* error,
                                               const ObjectCache* cache = nullptr);
std::string updateCacheKey(const optim_step::Variant& v);

// Printing: the x86 IR (before or after O3) and the sm_90 PTX.
std::string updateX86Ir(const optim_step::Variant& v, bool optimised);
bool updatePtx(const optim_step::Variant& v, std::string* ptx, std::string* error);

}  // namespace dtl::codegen
