// Silent divergence between replicas: ranks that should hold identical
// tensors compare a hash of them. Over each mesh axis of more than one rank,
// the tensors replicated over it — a parameter's value or optimiser state not
// split on that axis; dp replicas, also the tp ranks' copies of a norm's
// weight; never ZeRO's pieces, which differ by design — are hashed (XXH64,
// core/xxhash.h) into one 64-bit value per rank and all-gathered (8 bytes a
// rank). Only on a mismatch, a second all-gather of the per-tensor hashes
// names the tensors and the ranks holding another value than the rest.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/program.h"
#include "runtime/comm/communicator.h"
#include "runtime/exec/train_param.h"

namespace dtl::rt {

struct ReplicaCheck {
  bool diverged = false;  // over some axis this rank takes part in
  // Said by the group's lowest rank (coordinate 0 on the axis) only, so a
  // job prints it once per diverged group; e.g. "over `dp`, rank 1 holds
  // another `l1.weight` than rank 0".
  std::string message;
};

// Every rank calls it at the same step, in the same order on every axis.
// `state_names`: the optimiser state's names (optim::stateNames), for the
// message. Fails only when a collective does.
comm::Status checkReplicas(const std::vector<Param>& params, const std::vector<std::string>& state_names,
                           const prog::Program& program, const std::map<std::string, comm::Communicator*>& comms,
                           int64_t global_rank, ReplicaCheck& out);

}  // namespace dtl::rt
