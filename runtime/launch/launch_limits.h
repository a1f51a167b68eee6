// What bounds how many ranks `dtlc run` may start, checked before any is
// spawned so an impossible job fails once, at once, with what to do — not
// as hundreds of ranks failing the same way seconds later.
//   - the shared-memory backend holds at most kShmMaxGroupSize ranks a group;
//   - file descriptors: a Gloo rank keeps a socket per peer, the launcher two
//     pipes per rank it relays, and node 0's store a connection or two per
//     rank of the job. The launcher first raises its soft RLIMIT_NOFILE to the
//     hard limit (its ranks inherit it); past that the user must act.
// Cores are not a limit: ranks outnumbering them run, only slower.
#pragma once

#include <cstdint>
#include <string>

namespace dtl::rt::launch {

struct RankCounts {
  int nproc = 1, nnodes = 1, node_rank = 0;
  std::string backend = "auto";  // auto | shm | gloo, as dtlc run's --backend
};

struct FdLimit {
  uint64_t soft = 0, hard = 0;
};

// Descriptors this node's launcher and each of its ranks need, at most.
uint64_t launcherFdsNeeded(const RankCounts& c);
uint64_t rankFdsNeeded(const RankCounts& c);

// "" when the job fits `limit`, else the one message saying which limit and
// what to do. Pure, for tests; checkRankLimits reads and raises the real one.
std::string rankLimitProblem(const RankCounts& c, const FdLimit& limit);
std::string checkRankLimits(const RankCounts& c);

}  // namespace dtl::rt::launch
