// Pre-emption on a rank: the first SIGTERM or SIGINT only asks training to
// stop (a flag the step loop reads); the ranks then agree on the step to stop
// after, save a checkpoint and exit 0. A second one ends the process at once,
// by the signal's default action. The handler does nothing but set the flag
// and, the second time, restore the default action and re-raise.
#pragma once

namespace dtl::rt {

class StopSignals {
 public:
  // Installs the handlers for SIGTERM and SIGINT (the previous ones are put
  // back by the destructor). At most one instance at a time.
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first signal caught since construction (SIGTERM, SIGINT), or 0.
  int caught() const;
};

}  // namespace dtl::rt
