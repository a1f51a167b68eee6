// Does the plan fit the machine? `dtlc run` compares the plan's memory per
// rank × the ranks it starts on this machine with what the machine can still
// give (runtime/launch/host_memory.h) before any rank starts; `dtlc plan
// --device-memory SIZE` compares one rank's plan with SIZE. When it does not
// fit, the refusal shows the plan's breakdown.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/driver/frontend.h"
#include "compiler/plan/plan.h"

namespace dtl::cli {

// "" when `ranks` × `per_rank` fits in `available` bytes; else the message
// (first line without a "dtlc COMMAND: " prefix, then the breakdown and
// `hint`), `where` naming the budget ("available (MemAvailable)").
std::string memoryRefusal(const plan::Memory& per_rank, int64_t ranks, int64_t available, const std::string& where,
                          const std::string& hint);

// `dtlc run` before `local_ranks` ranks start here: 0 when the plan fits the
// memory this machine has left (or it cannot be read), else 1 with the
// refusal in `err`. `kernels` as --kernels says (the program they run).
int checkRunMemory(const driver::Frontend& fe, int64_t local_ranks, const std::string& kernels, std::string& err);

}  // namespace dtl::cli
