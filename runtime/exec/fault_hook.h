// Test-only fault injection: DTL_FAULT makes a rank fail in a chosen way at
// a chosen step, so the tests drive real failures through `dtlc run` (real
// processes, the real launcher). Not a user feature: a rank that finds
// DTL_FAULT set says so on stderr.
//
// DTL_FAULT holds faults separated by `,`, each `kind:key=value:…`:
//   stop:rank=1:step=3            rank 1 stops itself (SIGSTOP) after step 3
//   kill:rank=1:step=3:restart=0  rank 1 kills itself (SIGKILL) after step 3,
//                                 only in the job's first generation of ranks
// Keys: rank (a global rank; absent: every rank), step (after that optimiser
// step; absent: after every step), restart (only when the launcher has
// restarted the ranks that many times, DTL_RESTART_COUNT; absent: always).
// An unknown kind or key, or a value that is not a number, is an error.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dtl::rt {

struct Fault {
  std::string kind;
  std::map<std::string, int64_t> args;  // rank, step, restart
};

// Parses DTL_FAULT's text; false with `err` naming the bad part.
bool parseFaults(const std::string& text, std::vector<Fault>& out, std::string& err);

class FaultHook {
 public:
  FaultHook() = default;
  FaultHook(std::vector<Fault> faults, int rank, int restart)
      : faults_(std::move(faults)), rank_(rank), restart_(restart) {}
  // From DTL_FAULT (none when unset); false with `err` when it does not parse.
  static bool fromEnvironment(int rank, int restart, FaultHook& out, std::string& err);

  bool any() const { return !faults_.empty(); }
  // A fault of `kind` applies to this rank after `step`.
  bool due(const std::string& kind, int64_t step) const;
  // After an optimiser step: stop or kill this process when asked to.
  void afterStep(int64_t step) const;

 private:
  std::vector<Fault> faults_;
  int rank_ = 0, restart_ = 0;
};

}  // namespace dtl::rt
