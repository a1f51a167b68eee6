// --emit=llvm|ptx: each fused region of rank 0's program through the kernel
// generator; --kernels jit: the runner of a program's regions (runtime/jit).
// Compiled only where the build has the generator (tools/dtlc/CMakeLists.txt),
// into the binaries that link libLLVM-16.so (dtlc, some tests).
#ifndef DTL_HAVE_CODEGEN
#error "emit_kernels.cc is compiled only with the kernel generator"
#endif
#include <cstdio>
#include <map>
#include <stdexcept>
#include <vector>

#include "compiler/codegen/emit_update.h"
#include "compiler/codegen/jit_x86.h"
#include "compiler/codegen/ptx.h"
#include "runtime/jit/jit_regions.h"
#include "runtime/jit/jit_update.h"
#include "tools/dtlc/kernel_emitter.h"

namespace dtl::cli {
namespace {

// The multi-tensor update kernels of the spec's optimiser (none without a train block).
int emitUpdateKernels(const prog::Program& p, const rt::optim::OptimizerConfig& config, bool ptx, std::string& out,
                      std::string& err) {
  bool updates = false;
  for (const ir::Node& n : p.nodes) updates = updates || n.op == ir::Op::Update;
  if (!updates || config.name.empty()) return 0;
  std::vector<optim_step::Variant> variants;
  try {
    variants = jit::updateVariants(rt::optim::Optimizer(config));
  } catch (const std::invalid_argument& e) {
    err += std::string("dtlc check: the optimiser: ") + e.what() + "\n";
    return 1;
  }
  const char* c = ptx ? "//" : ";";
  for (const optim_step::Variant& v : variants) {
    out += std::string("\n") + c + " the optimiser step (" + config.name + "): multi-tensor update `" + v.name() +
           "`, one launch over a table of chunks\n";
    if (!ptx) {
      out += codegen::updateX86Ir(v, false);
      continue;
    }
    std::string text, error;
    if (!codegen::updatePtx(v, &text, &error)) {
      err += "dtlc check: update `" + v.name() + "`: " + error + "\n";
      return 1;
    }
    out += text;
  }
  return 0;
}

int emitKernels(const prog::Program& p, const codegen::Fusion& f, const rt::optim::OptimizerConfig& opt, bool ptx,
                std::string& out, std::string& err) {
  if (ptx) {
    out += "// PTX for sm_90 (PTX ISA 7.8), after LLVM's O3 pipeline; " + std::to_string(f.regions.size()) +
           " regions of rank 0's program (--emit=fused lists their nodes)\n";
  } else {
    codegen::HostTarget h = codegen::hostTarget();
    out += "; LLVM IR for " + h.triple + " (cpu " + h.cpu + "), unoptimised: the generator's IR before the O3 pipeline; " +
           std::to_string(f.regions.size()) + " regions of rank 0's program (--emit=fused lists their nodes)\n";
  }
  const char* c = ptx ? "//" : ";";
  std::map<uint64_t, size_t> seen;  // region hash → the first region with it
  for (size_t k = 0; k < f.regions.size(); ++k) {
    const codegen::FusedRegion& r = f.regions[k];
    uint64_t hash = codegen::regionHash(r.region);
    std::string head = std::string("\n") + c + " region" + std::to_string(k) + ": " + std::to_string(r.nodes.size()) +
                       (r.nodes.size() == 1 ? " node" : " nodes");
    auto [it, fresh] = seen.emplace(hash, k);
    if (!fresh) {
      out += head + ", the same kernel as region" + std::to_string(it->second) + "\n";
      continue;
    }
    out += head + "\n";
    if (!ptx) {
      out += codegen::x86Ir(r.region, false);
      continue;
    }
    codegen::PtxModule m;
    std::string error;
    if (!codegen::compilePtx(r.region, &m, &error)) {
      err += "dtlc check: region" + std::to_string(k) + ": " + error + "\n";
      return 1;
    }
    for (const codegen::PtxKernel& kernel : m.kernels)
      out += "// kernel " + kernel.name + ": " + std::to_string(kernel.threads) + " threads\n";
    out += m.ptx;
  }
  return emitUpdateKernels(p, opt, ptx, out, err);
}

int makeJit(const prog::Program& p, const rt::optim::OptimizerConfig& opt, int threads, JitRunners& runners,
            std::string& note, std::string& err) {
  jit::JitOptions options;
  options.cache.dir = codegen::defaultCacheDir();
  options.compile_threads = threads;  // the rank's share of the cores: ranks on one machine compile at once
  jit::JitStats stats;
  std::string error;
  runners.regions = jit::makeJitRegions(p, options, &error, &stats);
  if (!runners.regions) {
    err += "dtlc run: --kernels jit: " + error + "\n";
    return 1;
  }
  jit::UpdateStats update_stats;
  jit::UpdateOptions update_options;
  update_options.cache = options.cache;
  runners.update = jit::makeJitUpdate(opt, update_options, &error, &update_stats);
  if (!runners.update) {
    err += "dtlc run: --kernels jit: the optimiser update: " + error + "\n";
    return 1;
  }
  note = jit::describe(stats) + "; " + jit::describe(update_stats) +
         (options.cache.dir.empty() ? " (no cache: neither XDG_CACHE_HOME nor HOME is set)" : "");
  return 0;
}

const bool kRegistered = (setKernelEmitter(&emitKernels), setRegionRunnerMaker(&makeJit), true);

}  // namespace
}  // namespace dtl::cli
