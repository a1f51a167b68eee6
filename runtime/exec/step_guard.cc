// step_guard.h: the per-step agreement, the non-finite scan and the faults.
#include "runtime/exec/step_guard.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "runtime/exec/replica_check.h"
#include "runtime/optim/clip.h"

namespace dtl::rt {

namespace {

// The parameter a fault names (`tensor=PATH`), else the first with elements.
Param* faultTarget(const Fault& f, std::vector<Param>& params, bool gradient) {
  const std::string want = f.text("tensor");
  for (Param& p : params) {
    const size_t n = gradient ? p.grad.size() : p.value.size();
    if (n > 0 && (want.empty() || p.spec->path == want)) return &p;
  }
  return nullptr;
}

}  // namespace

StepGuard::StepGuard(const TrainConfig& c) : c_(c) {
  for (int64_t size : c_.mesh) world_ *= size;
  for (const auto& [axis, comm] : c_.comms) collective_ = collective_ || (comm && comm->size() > 1);
}

void StepGuard::start() { catchStopSignals(); }

void StepGuard::beforeStep(int64_t step, std::vector<Param>& params) {
  for (const Fault* f : faultsAt(c_.faults, "flip_bit", c_.global_rank, step, c_.restart)) {
    if (Param* p = faultTarget(*f, params, false)) {
      uint32_t bits;
      std::memcpy(&bits, p->value.data(), 4);
      bits ^= 1u;  // the lowest mantissa bit: the smallest change a float can take
      std::memcpy(p->value.data(), &bits, 4);
    }
  }
}

comm::Status StepGuard::allReduceWorld(std::vector<float>& v) {
  if (!c_.program) return {};
  for (const layout::MeshAxis& axis : c_.program->mesh) {
    auto it = c_.comms.find(axis.name);
    if (it == c_.comms.end() || !it->second || it->second->size() <= 1) continue;
    comm::Status s = it->second->allReduce(v.data(), static_cast<int64_t>(v.size()))->wait();
    if (!s.ok) return {false, "over `" + axis.name + "`: " + s.message};
  }
  return {};
}

void StepGuard::measureNorms(const std::vector<Param>& params) {
  norms_.resize(params.size());
  // Largest first, each parameter whole on one thread: its bits stay
  // normTwo's (PyTorch's order), and the threads share the bytes about
  // evenly. The pass is memory-bound: the MLP benchmark's gradients (7.4 MB,
  // caches flushed, a scratch driver over normTwo) took 1.01–1.05 ms on one
  // thread, 0.58–0.62 ms on two.
  std::vector<size_t> order(params.size());
  int64_t total = 0;
  for (size_t i = 0; i < params.size(); ++i) order[i] = i, total += static_cast<int64_t>(params[i].grad.size());
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params[a].grad.size() > params[b].grad.size(); });
  constexpr int64_t kThreadElements = 1 << 16;  // below this a second thread costs more than it reads
  const int threads = static_cast<int>(std::clamp<int64_t>(total / kThreadElements, 1, std::max(c_.threads, 1)));
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) if (threads > 1)
  for (size_t k = 0; k < order.size(); ++k) {
    const Param& p = params[order[k]];
    norms_[order[k]] = optim::normTwo(p.step_grad, static_cast<int64_t>(p.grad.size()));
  }
}

int64_t StepGuard::firstNonfinite(double loss, const std::vector<Param>& params) {
  norms_valid_ = false;
  if (!std::isfinite(loss)) return 1;
  measureNorms(params);
  for (size_t i = 0; i < params.size(); ++i) {
    // NaN or inf when an element is; an infinite norm may also be finite
    // elements whose squares overflow (|g| > ~1.8e19): look at them.
    const int64_t n = static_cast<int64_t>(params[i].grad.size());
    if (!std::isfinite(norms_[i]) && !optim::allFinite(params[i].step_grad, n)) return 2 + static_cast<int64_t>(i);
  }
  norms_valid_ = true;
  return 0;
}

bool StepGuard::agree(int64_t step, double loss, std::vector<Param>& params, StepVerdict& v, std::string& err) {
  norms_valid_ = false;  // this step's, once measured below
  for (const Fault* f : faultsAt(c_.faults, "nan_grad", c_.global_rank, step, c_.restart))
    if (Param* p = faultTarget(*f, params, true)) p->step_grad[0] = std::numeric_limits<float>::quiet_NaN();
  ReplicaCheck replicas;
  if (collective_ && c_.replica_check > 0 && step % c_.replica_check == 0) {
    comm::Status s = checkReplicas(params, optim::stateNames(c_.optimizer), *c_.program, c_.comms, c_.global_rank, replicas);
    if (!s.ok) {
      err += "step " + std::to_string(step) + ": " + s.message + "\n";
      return false;
    }
  }
  const int64_t mine = firstNonfinite(loss, params);
  const int sig = stopSignalCaught();
  std::vector<float> vote = {sig == SIGTERM ? 1.0f : 0.0f, sig == SIGINT ? 1.0f : 0.0f, mine != 0 ? 1.0f : 0.0f,
                             replicas.diverged ? 1.0f : 0.0f};
  if (collective_) {
    comm::Status s = allReduceWorld(vote);
    if (!s.ok) {
      err += "step " + std::to_string(step) + ": agreeing on the step's outcome with the other ranks: " + s.message + "\n";
      return false;
    }
  }
  if (vote[3] > 0) {
    if (!replicas.message.empty())
      err += "step " + std::to_string(step) + ": " + replicas.message +
             "stopping: ranks that should hold identical tensors do not (a hardware fault, or a bug: please report it)\n";
    return false;
  }
  v.stop_signal = vote[0] > 0 ? SIGTERM : vote[1] > 0 ? SIGINT : 0;
  if (vote[2] > 0) {
    if (c_.on_nonfinite == "skip") {
      v.skip = true;
      return true;
    }
    v.nonfinite = true;
    return nonfiniteMessage(step, loss, params, mine, err);
  }
  return true;
}

// Every rank learns which rank saw the first non-finite tensor (the lowest
// rank that saw one, its first tensor in parameter order): a second round,
// one slot per rank.
bool StepGuard::nonfiniteMessage(int64_t step, double loss, const std::vector<Param>& params, int64_t mine,
                                 std::string& err) {
  int64_t rank = c_.global_rank, code = mine;
  if (collective_) {
    std::vector<float> who(static_cast<size_t>(world_), 0.0f);
    who[static_cast<size_t>(c_.global_rank)] = static_cast<float>(mine);
    comm::Status s = allReduceWorld(who);
    if (!s.ok) {
      err += "step " + std::to_string(step) + ": naming the non-finite gradient: " + s.message + "\n";
      return false;
    }
    for (rank = 0; rank < world_ && who[static_cast<size_t>(rank)] == 0; ++rank) {
    }
    code = rank < world_ ? static_cast<int64_t>(who[static_cast<size_t>(rank)]) : 0;
  }
  if (c_.global_rank != 0) return false;  // rank 0 says it, once
  const std::string on = world_ > 1 ? " on rank " + std::to_string(rank) : "";
  if (code == 1) {
    err += "step " + std::to_string(step) + ": the loss is " + (std::isnan(loss) ? "NaN" : "not finite") + on;
  } else if (code >= 2 && code - 2 < static_cast<int64_t>(params.size())) {
    err += "step " + std::to_string(step) + ": the gradient of `" + params[static_cast<size_t>(code - 2)].spec->path +
           "` is not finite" + on + " (the first such tensor); stopping before the update";
  } else {
    err += "step " + std::to_string(step) + ": a gradient is not finite; stopping before the update";
  }
  return false;
}

}  // namespace dtl::rt
