// `--kernels jit`'s optimiser step: rt::optim::MultiTensorUpdate over the
// generated multi-tensor kernels (compiler/codegen/emit_update.h). The
// tensors of one call are cut into chunks of a fixed number of elements,
// one table per variant (sgd momentum's first step is a variant of its
// own), and each table is one launch whose chunks are spread over the
// threads. Every element is computed by the same instructions whatever the
// chunking or thread count, so results never depend on either.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/object_cache.h"
#include "runtime/optim/multi_tensor.h"

namespace dtl::jit {

struct UpdateStats {
  int kernels = 0, compiled = 0, loaded = 0;
  double ms = 0;
};

// Elements per chunk: large enough that a call costs nothing beside its
// memory traffic (256 KiB of param), small enough to share a model's
// tensors evenly among threads.
inline constexpr int64_t kUpdateChunk = int64_t{1} << 16;

// A table is spread over the threads only from this many elements on: below
// it, waking threads costs more than it saves. 2^17, as the regions'
// (JitOptions::parallel_work): at 2^20 the Fashion sample's 669,706
// parameters ran on one thread, and its update took 0.85 ms a step late in
// training against 0.42-0.61 on two (`dtlc run`, 4 epochs, the Zen 3).
inline constexpr int64_t kUpdateParallelElements = int64_t{1} << 17;

// The variants `opt` runs (sgd with momentum: its first step and the rest).
std::vector<optim_step::Variant> updateVariants(const rt::optim::Optimizer& opt);

struct UpdateOptions {
  codegen::ObjectCache cache;  // no folder: compile every kernel
  int64_t chunk = kUpdateChunk;
  int64_t parallel_elements = kUpdateParallelElements;  // tests lower both
};

// Every variant of `c` compiled (or loaded from the cache) now; a variant
// another optimiser needs is compiled when first run. nullptr with *error
// when one cannot be compiled.
std::unique_ptr<rt::optim::MultiTensorUpdate> makeJitUpdate(const rt::optim::OptimizerConfig& c,
                                                           const UpdateOptions& options, std::string* error,
                                                           UpdateStats* stats = nullptr);

// "update: 2 kernels (0 compiled, 2 from the cache) in 3 ms"
std::string describe(const UpdateStats& s);

}  // namespace dtl::jit
