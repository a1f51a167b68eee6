// The multi-tensor update runner (jit_update.h). A call first computes the
// step's scalars and creates or checks every tensor's state, exactly as
// Optimizer::update does, so a refused step changes nothing (states it had
// just created are dropped again); then one launch per variant.
#include "runtime/jit/jit_update.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "compiler/codegen/emit_update.h"

namespace dtl::jit {

namespace {

using optim_step::Chunk;
using optim_step::Variant;

class JitUpdate : public rt::optim::MultiTensorUpdate {
 public:
  explicit JitUpdate(UpdateOptions o) : cache_(std::move(o.cache)), chunk_(o.chunk), parallel_(o.parallel_elements) {}

  bool prepare(const Variant& v, std::string* error, UpdateStats* stats) {
    if (kernels_.count(v)) return true;
    std::unique_ptr<codegen::UpdateKernel> k = codegen::compileUpdateX86(v, error, &cache_);
    if (!k) return false;
    if (stats) {
      ++stats->kernels;
      ++(k->cached() ? stats->loaded : stats->compiled);
    }
    kernels_[v] = std::move(k);
    return true;
  }

  std::string run(const rt::optim::Optimizer& opt, const std::vector<rt::optim::TensorStep>& tensors, int64_t step,
                  double lr, int threads) override {
    optim_step::Scalars s;
    try {
      s = opt.scalars(step, lr);
    } catch (const std::invalid_argument& e) {
      return std::string("optimizer step: ") + e.what();
    }
    for (auto& [v, table] : tables_) table.clear();
    std::vector<rt::optim::ParamState*> created;  // dropped again if a later tensor is refused
    for (const rt::optim::TensorStep& t : tensors) {
      const bool fresh = t.state->a.empty() && t.state->b.empty();
      bool first = false;
      try {
        first = opt.prepareState(*t.state, t.n);
      } catch (const std::invalid_argument& e) {
        for (rt::optim::ParamState* c : created) *c = {};
        return "update of `" + t.name + "`: " + e.what();
      }
      if (fresh) created.push_back(t.state);
      std::vector<Chunk>& table = tables_[opt.variant(first)];
      for (int64_t at = 0; at < t.n; at += chunk_) {
        const int64_t n = std::min(chunk_, t.n - at);
        float* a = t.state->a.empty() ? nullptr : t.state->a.data() + at;
        float* b = t.state->b.empty() ? nullptr : t.state->b.data() + at;
        table.push_back({t.param + at, t.grad + at, a, b, n});
      }
    }
    for (auto& [v, table] : tables_) {  // every kernel ready before any runs: all of the step or none
      std::string error;
      if (!table.empty() && !prepare(v, &error, nullptr)) {
        for (rt::optim::ParamState* c : created) *c = {};
        return "the generated update `" + v.name() + "`: " + error;
      }
    }
    for (auto& [v, table] : tables_)
      if (!table.empty()) launch(*kernels_[v], table, s, threads, parallel_);
    return "";
  }

 private:
  static void launch(const codegen::UpdateKernel& k, const std::vector<Chunk>& table, const optim_step::Scalars& s,
                     int threads, int64_t parallel_elements) {
    const int64_t chunks = static_cast<int64_t>(table.size());
    int64_t elements = 0;
    for (const Chunk& c : table) elements += c.n;
    const int t = elements < parallel_elements ? 1 : static_cast<int>(std::min<int64_t>(std::max(threads, 1), chunks));
    if (t <= 1) {
      k.run(table.data(), 0, chunks, s);
      return;
    }
    // Dynamic: a chunk whose blocks hold subnormal moments costs more than
    // one whose do not (they sit in some tensors, not spread evenly), and
    // which thread runs a chunk never changes its bits.
#pragma omp parallel for num_threads(t) schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; ++c) k.run(table.data(), c, c + 1, s);
  }

  codegen::ObjectCache cache_;
  int64_t chunk_, parallel_;
  std::map<Variant, std::unique_ptr<codegen::UpdateKernel>> kernels_;
  std::map<Variant, std::vector<Chunk>> tables_;  // run()'s, reused: no allocation per step once sized
};

}  // namespace

std::vector<Variant> updateVariants(const rt::optim::Optimizer& opt) {
  std::vector<Variant> v{opt.variant(false)};
  if (opt.variant(true) != v[0]) v.push_back(opt.variant(true));
  return v;
}

std::unique_ptr<rt::optim::MultiTensorUpdate> makeJitUpdate(const rt::optim::OptimizerConfig& c,
                                                           const UpdateOptions& options, std::string* error,
                                                           UpdateStats* stats) {
  if (options.chunk < 1) {
    *error = "the update's chunk must hold at least one element";
    return nullptr;
  }
  std::unique_ptr<rt::optim::Optimizer> opt;
  try {
    opt = std::make_unique<rt::optim::Optimizer>(c);
  } catch (const std::invalid_argument& e) {
    *error = e.what();
    return nullptr;
  }
  auto r = std::make_unique<JitUpdate>(options);
  UpdateStats local;
  UpdateStats& st = stats ? *stats : local;
  auto start = std::chrono::steady_clock::now();
  for (const Variant& v : updateVariants(*opt))
    if (!r->prepare(v, error, &st)) return nullptr;
  st.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::string describe(const UpdateStats& s) {
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.0f", s.ms);
  return "update: " + std::to_string(s.kernels) + (s.kernels == 1 ? " kernel (" : " kernels (") +
         std::to_string(s.compiled) + " compiled, " + std::to_string(s.loaded) + " from the cache) in " + ms + " ms";
}

}  // namespace dtl::jit
