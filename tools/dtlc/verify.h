// `dtlc run SPEC --verify K`: the check a user runs before a long job. It
// trains K steps twice — the spec's layout, as `dtlc run` with the same flags
// would, and one process at the same global batch from the same weights —
// as two child `dtlc run` jobs writing metrics to a temporary folder and no
// checkpoints, then compares their losses step by step.
#pragma once

#include <string>
#include <vector>

#include "tools/dtlc/run_flags.h"

namespace dtl::cli {

// One step's loss from each job.
struct StepLosses {
  int64_t step = 0;
  double layout = 0, reference = 0;
};

// The outcome of comparing the two jobs' losses.
struct LossComparison {
  double largest = 0;       // the largest relative difference
  int64_t largest_at = 0;   // its step (0 when no step was compared)
  int64_t first_over = 0;   // the first step over the tolerance, 0 when none
  StepLosses over;          // its losses
};

// |layout − reference| / |reference| (the absolute difference where the
// reference is 0).
double relativeDifference(double layout, double reference);

LossComparison compareLosses(const std::vector<StepLosses>& steps, double tolerance);

// The per-step losses of a metrics file (`{"step": S, …, "loss": L, …}`;
// evaluation lines are passed over), in file order.
std::vector<std::pair<int64_t, double>> readStepLosses(const std::string& path);

// `dtlc run` with --verify K (K > 0): 0 when every step is within the
// tolerance, 1 when one is not or a job fails, 2 for flags --verify cannot
// take.
int verifyCommand(const RunFlags& f, std::string& out, std::string& err);

}  // namespace dtl::cli
