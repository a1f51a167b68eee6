// Running a region: its buffers in the kernel plan's order — the inputs'
// and outputs' executor memory, then the runner's own scratch for
// reductions that are not outputs (one set per runner, so executors on
// different threads never share it). A Bool output is written as bytes by
// the kernel and widened to the executor's int32 afterwards.
//
// Threads: a kernel with a split (kernel_plan.h) runs in the plan's chunks
// of rows (fixed by the region alone), spread over ctx.threads OpenMP
// threads when the region is large enough (JitOptions::parallel_work), else
// one after another on the caller; then its tail, once. Every chunk is
// computed by the same call whatever the thread count, and a sum over the
// split dim adds its per-chunk partials in chunk order in the tail, so
// results are bitwise the same on any number of threads.
#include "runtime/jit/jit_regions.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "compiler/codegen/fuse_regions.h"
#include "compiler/codegen/jit_x86.h"
#include "core/cpus.h"

namespace dtl::jit {

namespace {

// Kernels of this process by cache key, while some runner holds them.
std::mutex g_mu;
std::map<std::string, std::weak_ptr<codegen::JitKernel>>& shared() {
  static auto* m = new std::map<std::string, std::weak_ptr<codegen::JitKernel>>;  // never destroyed: outlives every runner
  return *m;
}

struct Kernel {
  std::shared_ptr<codegen::JitKernel> jit;
  int64_t chunk_rows = 1, chunks = 1;
  int64_t work = 0;  // points of all phases (a reduction's weighted)
};

// The plan's chunks, and the work that decides whether they go to threads.
void chunking(Kernel& k) {
  const codegen::KernelPlan& plan = k.jit->plan();
  if (plan.split.empty()) return;
  for (const codegen::PlanPhase& ph : plan.phases) {
    int64_t points = ph.space.elements().value_or(0);
    if (ph.reduction >= 0 && !ph.combine) points *= 8;  // a reduction's inner loop; only the order of magnitude matters
    k.work += points;
  }
  k.chunk_rows = plan.chunk_rows;
  k.chunks = plan.chunks;
}

// The threads that compile a program's kernels: the option, else every core
// this process may run on; never more than the kernels.
int compileThreads(const JitOptions& options, size_t kernels) {
  const int want = options.compile_threads > 0 ? options.compile_threads : usableCpus();
  return static_cast<int>(std::clamp<int64_t>(static_cast<int64_t>(kernels), 1, want));
}

// made[key] for every distinct key: a kernel another runner of this process
// still holds, else one compiled (or loaded from the cache) here, those on
// several threads at once — each compile has its own LLVM context and target
// machine (jit_x86.cc), and equal kernels compile once. Two runners made at
// the same moment may both compile a kernel; the later one is kept for
// sharing. A failed compile stops the others from starting; an exception
// (or a thread that cannot start) is carried to the caller after every
// helper has stopped.
bool compileMissing(const std::vector<codegen::Region>& regions, const std::vector<std::string>& keys,
                    const JitOptions& options, std::map<std::string, std::shared_ptr<codegen::JitKernel>>& made,
                    std::string* error, JitStats& stats) {
  std::vector<size_t> missing;  // a region of each key no runner holds
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (size_t k = 0; k < regions.size(); ++k) {
      if (made.count(keys[k])) continue;
      made[keys[k]] = shared()[keys[k]].lock();
      if (made[keys[k]]) ++stats.shared;
      else missing.push_back(k);
    }
  }
  std::vector<std::shared_ptr<codegen::JitKernel>> compiled(missing.size());
  std::vector<std::string> errors(missing.size());
  std::vector<std::exception_ptr> thrown(missing.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i; !failed.load() && (i = next.fetch_add(1)) < missing.size();) {
      try {
        compiled[i] = codegen::compileX86(regions[missing[i]], &errors[i], &options.cache);
      } catch (...) {
        thrown[i] = std::current_exception();
      }
      if (!compiled[i]) failed = true;
    }
  };
  std::vector<std::thread> helpers;
  try {
    for (int t = 1; t < compileThreads(options, missing.size()); ++t) helpers.emplace_back(work);
  } catch (const std::system_error&) {
    // no more threads: those started and this one do the rest
  }
  work();
  for (std::thread& h : helpers) h.join();
  for (std::exception_ptr& e : thrown)
    if (e) std::rethrow_exception(e);
  if (failed) {  // the first error (the kernels after a failure never started)
    for (const std::string& e : errors)
      if (!e.empty()) return *error = e, false;
    return *error = "a kernel failed to compile, saying nothing", false;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t i = 0; i < missing.size(); ++i) {
    ++(compiled[i]->cached() ? stats.loaded : stats.compiled);
    shared()[keys[missing[i]]] = compiled[i];
    made[keys[missing[i]]] = compiled[i];
  }
  return true;
}

class JitRegions : public rt::RegionRunner {
 public:
  bool build(const prog::Program& p, const JitOptions& options, std::string* error, JitStats& stats) {
    parallel_work_ = options.parallel_work;
    auto start = std::chrono::steady_clock::now();
    std::vector<codegen::Region> regions;
    std::vector<std::string> keys;
    for (size_t k = 0; k < p.fused.size(); ++k) {
      prog::Fused f = p.fused[k];
      regions.push_back(codegen::buildRegion(p, f, "region" + std::to_string(k)));
      if (f.inputs != p.fused[k].inputs) {
        *error = "fused region " + std::to_string(k) + " reads other values than the program says";
        return false;
      }
      keys.push_back(codegen::kernelCacheKey(regions.back()));
    }
    std::map<std::string, std::shared_ptr<codegen::JitKernel>> made;  // this program's kernels by key
    if (!compileMissing(regions, keys, options, made, error, stats)) return false;
    std::map<std::string, size_t> by_key;  // index in kernels_
    for (size_t k = 0; k < regions.size(); ++k) {
      auto it = by_key.find(keys[k]);
      if (it == by_key.end()) {
        Kernel kernel{made.at(keys[k])};
        chunking(kernel);
        it = by_key.emplace(keys[k], kernels_.size()).first;
        kernels_.push_back(std::move(kernel));
      }
      region_kernel_.push_back(it->second);
      // this runner's scratch for the region's kernel
      std::vector<std::vector<float>> scratch;
      for (const codegen::PlanBuffer& b : kernels_[it->second].jit->plan().buffers)
        if (b.role == codegen::PlanBuffer::Role::Scratch) scratch.emplace_back(std::max<int64_t>(b.elements(), 1));
      scratch_.push_back(std::move(scratch));
    }
    stats.regions = static_cast<int>(p.fused.size());
    stats.kernels = static_cast<int>(kernels_.size());
    stats.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return true;
  }

  rt::KernelStatus run(int region, const std::vector<const rt::TensorView*>& in, const std::vector<rt::TensorView*>& out,
                       const rt::RunContext& ctx) override {
    const Kernel& k = kernels_[static_cast<size_t>(region_kernel_[static_cast<size_t>(region)])];
    const codegen::KernelPlan& plan = k.jit->plan();
    if (static_cast<int>(in.size()) != plan.inputs || static_cast<int>(out.size()) != plan.outputs)
      return {false, "fused region " + std::to_string(region) + ": its kernel takes other buffers than the program gives"};
    // Kept across runs: a fused region runs every step, so its argument
    // list and Bool staging allocate only the first time.
    std::vector<void*>& buffers = buffers_;
    buffers.clear();
    for (const rt::TensorView* t : in) buffers.push_back(t->data);
    if (bools_.size() < out.size()) bools_.resize(out.size());
    std::vector<std::vector<uint8_t>>& bools = bools_;
    for (size_t j = 0; j < out.size(); ++j) {
      if (out[j]->dtype == DType::Bool) {
        bools[j].resize(static_cast<size_t>(std::max<int64_t>(out[j]->elements, 1)));
        buffers.push_back(bools[j].data());
      } else {
        buffers.push_back(out[j]->data);
      }
    }
    for (std::vector<float>& s : scratch_[static_cast<size_t>(region)]) buffers.push_back(s.data());
    if (k.chunks <= 1 || ctx.threads <= 1 || k.work < parallel_work_) {
      for (int64_t c = 0; c < k.chunks; ++c)
        k.jit->runRows(buffers.data(), c * k.chunk_rows, std::min(plan.rows, (c + 1) * k.chunk_rows));
    } else {
      const int threads = static_cast<int>(std::min<int64_t>(ctx.threads, k.chunks));
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t c = 0; c < k.chunks; ++c)
        k.jit->runRows(buffers.data(), c * k.chunk_rows, std::min(plan.rows, (c + 1) * k.chunk_rows));
    }
    k.jit->runTail(buffers.data());
    for (size_t j = 0; j < out.size(); ++j)
      if (out[j]->dtype == DType::Bool)
        for (int64_t e = 0; e < out[j]->elements; ++e) out[j]->i()[e] = bools[j][static_cast<size_t>(e)];
    return {};
  }

 private:
  int64_t parallel_work_ = 0;
  std::vector<Kernel> kernels_;
  std::vector<size_t> region_kernel_;                   // per region of the program
  std::vector<std::vector<std::vector<float>>> scratch_;  // per region: its kernel's scratch buffers
  std::vector<void*> buffers_;                // run()'s kernel arguments, reused
  std::vector<std::vector<uint8_t>> bools_;   // run()'s Bool outputs as bytes, reused
};

}  // namespace

std::unique_ptr<rt::RegionRunner> makeJitRegions(const prog::Program& p, const JitOptions& options, std::string* error,
                                                 JitStats* stats) {
  auto r = std::make_unique<JitRegions>();
  JitStats local;
  if (!r->build(p, options, error, stats ? *stats : local)) return nullptr;
  return r;
}

std::string describe(const JitStats& s) {
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.0f", s.ms);
  std::string text = "jit: " + std::to_string(s.regions) + " fused regions, " + std::to_string(s.kernels) + " kernels (" +
                     std::to_string(s.compiled) + " compiled, " + std::to_string(s.loaded) + " from the cache";
  if (s.shared) text += ", " + std::to_string(s.shared) + " shared";
  return text + ") in " + ms + " ms";
}

}  // namespace dtl::jit
