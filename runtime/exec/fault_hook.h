// Test-only fault injection: DTL_FAULT makes a rank fail in a chosen way at
// a chosen step, so tests drive real failures through `dtlc run` (real rank
// processes, the real launcher). Not a user feature: a rank that finds
// DTL_FAULT set says so on stderr.
//
//   DTL_FAULT=nan_grad:rank=1:step=5,flip_bit:rank=0:step=3:tensor=l1.weight
//
// Faults are separated by `,`, each `kind:key=value:…`. The kinds:
//   stop      the rank stops itself (SIGSTOP) after the step   (FaultHook)
//   kill      the rank kills itself (SIGKILL) after the step   (FaultHook)
//   nan_grad  a NaN in the step's gradient (of `tensor`)       (StepGuard)
//   flip_bit  one bit of a parameter (`tensor`) flipped before the step (StepGuard)
// Keys: rank (a global rank), step (an optimiser step), restart (the job's
// generation: how often the launcher restarted the ranks, DTL_RESTART_COUNT);
// each absent key matches every value; tensor (a parameter path) where the
// kind takes one. An unknown kind or key, or a number that does not parse,
// is an error, never ignored: a test that thinks it injected a fault must
// not pass because none was.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dtl::rt {

inline constexpr const char* kEnvFault = "DTL_FAULT";

struct Fault {
  std::string kind;
  std::map<std::string, std::string> args;

  // The integer value of `key`, or `fallback` when absent (parseFaults
  // checked it is an integer when the kind takes the key as one).
  int64_t integer(const std::string& key, int64_t fallback) const;
  std::string text(const std::string& key) const;
};

// A kind and the keys it takes; integer keys are checked as such.
struct FaultKind {
  std::string name;
  std::vector<std::string> integer_keys;  // rank, step, restart
  std::vector<std::string> text_keys;     // tensor
};

// Every kind dtl injects (the list above).
const std::vector<FaultKind>& knownFaults();

// Parses `text` (empty: no faults) into `out`, each fault's kind and keys
// checked against `kinds`; false with `err` naming the bad part.
bool parseFaults(const std::string& text, const std::vector<FaultKind>& kinds, std::vector<Fault>& out,
                 std::string& err);

// DTL_FAULT parsed against knownFaults() (none when unset or empty), with a
// warning on stderr when set; false with `err` when it does not parse.
bool faultsFromEnvironment(std::vector<Fault>& out, std::string& err);

// The faults of `kind` due on `rank` at `step` in generation `restart`.
std::vector<const Fault*> faultsAt(const std::vector<Fault>& faults, const std::string& kind, int64_t rank,
                                   int64_t step, int64_t restart);

// The process-level kinds, run after each optimiser step.
class FaultHook {
 public:
  FaultHook() = default;
  FaultHook(std::vector<Fault> faults, int rank, int restart)
      : faults_(std::move(faults)), rank_(rank), restart_(restart) {}
  // From DTL_FAULT (none when unset); false with `err` when it does not parse.
  static bool fromEnvironment(int rank, int restart, FaultHook& out, std::string& err);

  bool any() const { return !faults_.empty(); }
  const std::vector<Fault>& faults() const { return faults_; }
  // A fault of `kind` applies to this rank after `step`.
  bool due(const std::string& kind, int64_t step) const;
  // After an optimiser step: stop or kill this process when asked to.
  void afterStep(int64_t step) const;

 private:
  std::vector<Fault> faults_;
  int rank_ = 0, restart_ = 0;
};

}  // namespace dtl::rt
