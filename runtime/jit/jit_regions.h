// `--kernels jit`: the executor's RegionRunner (runtime/exec/backend.h) over
// the kernel generator's x86 JIT (compiler/codegen/jit_x86.h). Every
// distinct region of a program (by the cache key: equal regions share one
// kernel, also across the executors of one process) is compiled — or loaded
// from the object cache — once, when the runner is made, before step 1.
// Only binaries that link the generator (dtlc, some tests) link this
// library; the executor and backends stay free of LLVM.
#pragma once

#include <memory>
#include <string>

#include "compiler/codegen/object_cache.h"
#include "core/program.h"
#include "runtime/exec/backend.h"

namespace dtl::jit {

struct JitStats {
  int regions = 0;   // the program's fused regions
  int kernels = 0;   // distinct kernels among them
  int compiled = 0;  // kernels compiled now
  int loaded = 0;    // kernels loaded from the object cache
  int shared = 0;    // kernels another executor of this process had ready
  double ms = 0;     // wall time to have them all
};

struct JitOptions {
  codegen::ObjectCache cache;  // no folder: compile every kernel
  // A region spreads its chunks of rows over ctx.threads only from this
  // many points (a reduction's weighted 8) on: below it, starting threads
  // costs more than it saves. At 2^20 char GPT's layer norms ([2048, 128],
  // ~2^18 points) ran on one of a step's two threads: 0.40-0.50 ms each,
  // 0.22-0.24 from 2^15 on (jit_bench's profile, 2026-12-03). 2^17 keeps
  // that and leaves smaller regions (Fashion's [128, 512] gradients,
  // 2^16) on one thread, unmeasured either way: each parallel region is a
  // fork and a join, and under CPU steal a join waits for a descheduled
  // thread. (PyTorch's grain for its elementwise loops is 2^15 elements.)
  // Tests lower it.
  int64_t parallel_work = int64_t{1} << 17;
  // Threads that compile the program's kernels when the runner is made
  // (0: every core this process may run on); equal kernels compile once.
  int compile_threads = 0;
};

// nullptr with *error when a region cannot be compiled.
std::unique_ptr<rt::RegionRunner> makeJitRegions(const prog::Program& p, const JitOptions& options, std::string* error,
                                                 JitStats* stats = nullptr);

// "jit: 12 regions, 9 kernels (3 compiled, 6 from the cache) in 85 ms"
std::string describe(const JitStats& s);

}  // namespace dtl::jit
