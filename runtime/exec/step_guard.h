// What every rank must agree on between a step's backward passes and its
// update, in one small all-reduce (4 floats, over each mesh axis of more than
// one rank in turn, so over the whole world; none on one process):
//
//   [ranks asked to stop by SIGTERM, by SIGINT, ranks that saw a non-finite
//    loss or gradient, ranks whose replicas diverged]
//
// So whichever rank got a signal, every rank stops after the same step; a
// non-finite gradient on one rank (its piece, under ZeRO) stops or skips the
// step on all of them. Only when a count is not zero does a second, rarer
// round follow: which rank saw the first non-finite tensor, and which.
// Every K steps (train.replica_check) the replicas' hashes are compared first
// (replica_check.h). Test-only faults (fault_hook.h) poison a gradient or
// flip a parameter's bit here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/exec/fault_hook.h"
#include "runtime/exec/stop_signal.h"
#include "runtime/exec/train_param.h"
#include "runtime/exec/trainer.h"

namespace dtl::rt {

struct StepVerdict {
  bool skip = false;    // non-finite, with on_nonfinite = skip: no update on any rank
  int stop_signal = 0;  // a rank was asked to stop: save and stop after this step (SIGTERM or SIGINT)
  bool nonfinite = false;  // with on_nonfinite = stop: agree() returned false for it
};

class StepGuard {
 public:
  explicit StepGuard(const TrainConfig& c);

  // Catches SIGTERM/SIGINT from here on (stop_signal.h). The injected faults
  // come parsed in TrainConfig::faults (dtlc run reads DTL_FAULT once).
  void start();

  // Before a step's forward pass: the flip_bit fault.
  void beforeStep(int64_t step, std::vector<Param>& params);

  // After the step's gradients, before clipping and the update. False stops
  // the run with status 1, `err` saying why — on one rank only (global rank
  // 0, or the diverged group's lowest), so a job prints it once.
  bool agree(int64_t step, double loss, std::vector<Param>& params, StepVerdict& v, std::string& err);

  // The 2-norm of each parameter's local gradient (optim::normTwo, the bits
  // clipping computes), measured by agree() on its way to finding the step
  // finite: a finite norm means finite elements, so one pass over the
  // gradients serves both. Null when agree() did not measure them all (a
  // non-finite loss or gradient: the step is skipped or stops).
  const std::vector<float>* localNorms() const { return norms_valid_ ? &norms_ : nullptr; }

 private:
  comm::Status allReduceWorld(std::vector<float>& v);
  // norms_[i] = normTwo of params[i]'s gradient, on up to TrainConfig::threads threads.
  void measureNorms(const std::vector<Param>& params);
  // 0: all finite; 1: the loss; 2 + i: params[i]'s gradient.
  int64_t firstNonfinite(double loss, const std::vector<Param>& params);
  bool nonfiniteMessage(int64_t step, double loss, const std::vector<Param>& params, int64_t mine, std::string& err);

  const TrainConfig& c_;
  int64_t world_ = 1;
  bool collective_ = false;  // some axis has more than one rank
  std::vector<float> norms_;  // localNorms()
  bool norms_valid_ = false;
};

}  // namespace dtl::rt
