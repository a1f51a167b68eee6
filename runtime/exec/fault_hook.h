// Test-only faults, injected through the environment so that tests can drive
// the real thing (`dtlc run`, real rank processes) into a failure:
//
//   DTL_FAULT=nan_grad:rank=1:step=5,flip_bit:rank=0:step=3:tensor=l1.weight
//
// Each fault is `kind` followed by `:key=value` pairs; several are separated
// by `,`. This file only parses and looks faults up; what a kind does is its
// consumer's (the trainer's step guard). A malformed value is an error, never
// ignored: a test that thinks it injected a fault must not pass because none was.
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

  // The integer value of `key`, or `fallback` when absent (the value was
  // checked to be an integer by parseFaults when the consumer's kind takes it).
  int64_t integer(const std::string& key, int64_t fallback) const;
  std::string text(const std::string& key) const;
};

// What a consumer accepts: per kind, its keys; integer keys are checked as such.
struct FaultKind {
  std::string name;
  std::vector<std::string> integer_keys;  // e.g. rank, step
  std::vector<std::string> text_keys;     // e.g. tensor
};

// Parses `text` (empty: no faults) into `out`, each fault's kind and keys
// checked against `kinds`; false with `err` naming the bad part.
bool parseFaults(const std::string& text, const std::vector<FaultKind>& kinds, std::vector<Fault>& out,
                 std::string& err);

// The faults of `kind` due on `rank` at `step` (keys `rank`, default 0, and `step`).
std::vector<const Fault*> faultsAt(const std::vector<Fault>& faults, const std::string& kind, int64_t rank,
                                   int64_t step);

}  // namespace dtl::rt
