// The limits on a job's size (launch_limits.h). The descriptor counts are
// upper estimates with headroom for what a process opens besides sockets
// (its program, data files, epoll and event descriptors).
#include "runtime/launch/launch_limits.h"

#include <sys/resource.h>

#include <algorithm>

#include "runtime/comm/communicator.h"

namespace dtl::rt::launch {

namespace {

constexpr uint64_t kBaseFds = 64;
constexpr uint64_t kStoreConnectionsPerRank = 2;  // the rank's own and its Gloo groups' store clients

uint64_t world(const RankCounts& c) { return uint64_t(c.nproc) * uint64_t(c.nnodes); }

// Gloo for some group: chosen, needed across nodes, or (auto) a group too big
// for shared memory — a group may hold the whole world.
bool mayUseGloo(const RankCounts& c) {
  return c.backend == "gloo" || c.nnodes > 1 || (c.backend == "auto" && world(c) > comm::kShmMaxGroupSize);
}

}  // namespace

uint64_t launcherFdsNeeded(const RankCounts& c) {
  uint64_t relayed = 2 * uint64_t(c.nproc);  // stdout and stderr pipes (rank 0 shares ours)
  uint64_t store = c.node_rank == 0 ? kStoreConnectionsPerRank * world(c) : 0;
  return kBaseFds + relayed + store;
}

uint64_t rankFdsNeeded(const RankCounts& c) {
  // A Gloo rank holds one socket per peer in each group; groups (mesh axes)
  // share no peers, so world - 1 bounds them all.
  return kBaseFds + (mayUseGloo(c) ? world(c) : 0);
}

std::string rankLimitProblem(const RankCounts& c, const FdLimit& limit) {
  const std::string n = std::to_string(world(c)) + (c.nnodes > 1 ? " ranks (" + std::to_string(c.nproc) +
                                                                       " on each of " + std::to_string(c.nnodes) +
                                                                       " nodes)"
                                                                 : " ranks");
  if (c.backend == "shm" && c.nnodes > 1)
    return "--backend shm needs every rank on one machine, and --nnodes is " + std::to_string(c.nnodes) +
           "; use --backend auto or gloo";
  if (c.backend == "shm" && world(c) > comm::kShmMaxGroupSize)
    return "--backend shm holds at most " + std::to_string(comm::kShmMaxGroupSize) +
           " ranks in a group, and this job has " + n +
           "; use --backend auto (Gloo for larger groups) or gloo, or start at most " +
           std::to_string(comm::kShmMaxGroupSize) + " ranks";
  uint64_t need = std::max(launcherFdsNeeded(c), rankFdsNeeded(c));
  if (need <= limit.soft) return "";
  std::string who = launcherFdsNeeded(c) >= rankFdsNeeded(c) ? "the launcher" : "each rank (a Gloo socket per peer)";
  return n + " need about " + std::to_string(need) + " open files in " + who + ", but the limit is " +
         std::to_string(limit.soft) + " (ulimit -n; hard limit " + std::to_string(limit.hard) +
         "): raise it (ulimit -n " + std::to_string(need) + ", or the hard limit in /etc/security/limits.conf) or "
         "start fewer ranks";
}

std::string checkRankLimits(const RankCounts& c) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return "";
  uint64_t need = std::max(launcherFdsNeeded(c), rankFdsNeeded(c));
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < need && lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  auto value = [](rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : uint64_t(v); };
  return rankLimitProblem(c, FdLimit{value(lim.rlim_cur), value(lim.rlim_max)});
}

}  // namespace dtl::rt::launch
