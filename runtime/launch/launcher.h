// `dtlc run --nproc N`: starts N rank processes on this node with the
// torchrun variables set, runs the job's rendezvous store (on node 0) and
// watches the ranks. When one fails the others are stopped and the failure is
// named with the rank's last reported step; with max_restarts every rank is
// started again. Ranks find their identity with env.h and join with
// rendezvous.h.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace dtl::rt::launch {

struct LaunchOptions {
  std::vector<std::string> argv;  // what each rank runs, e.g. {"dtlc", "run", SPEC, ..., <rank flag>}
  int nproc = 1;                  // ranks on this node
  int nnodes = 1, node_rank = 0;
  std::string master = "127.0.0.1:0";  // HOST:PORT of the store; port 0 picks a free one (one node only)
  std::chrono::seconds join_timeout{300};  // passed to the ranks as DTL_JOIN_TIMEOUT
  int max_restarts = 0;                    // one node only
  // The interface the ranks' Gloo binds (bind_address.h), passed to them as
  // DTL_SOCKET_IFNAME; empty: DTL_SOCKET_IFNAME or GLOO_SOCKET_IFNAME from the
  // environment, else the one that routes to the master.
  std::string iface;
  std::string backend = "auto";  // the ranks' --backend, for the limits (launch_limits.h)
  // Empty: DTL_JOB_TOKEN from the environment, else (one node) a fresh random one.
  std::string token;
  std::chrono::milliseconds stop_grace{5000};  // SIGTERM, then SIGKILL after this long
  // After a SIGTERM/SIGINT forwarded to the ranks: how long they have to save
  // a checkpoint and end before they are killed (--term-timeout).
  std::chrono::milliseconds term_timeout{30000};
};

// Runs the job to its end. Returns 0 when every rank exited 0. Otherwise
// `err` says why and the result is: the failed rank's exit status (128 +
// signal number when it was killed), 128 + the signal when the launcher was
// interrupted and a rank did not end with status 0 (SIGINT/SIGTERM are
// forwarded to every rank, which save a checkpoint and exit 0 — then so does
// the launcher; a second signal, or term_timeout passing, kills them), 2 for invalid options (or when called inside a rank: DTL_LAUNCHED=1),
// 1 when the job could not start (too many ranks for a limit, launch_limits.h).
// Across nodes, a failure on one node stops every node's ranks (node_watch.h)
// and is named by every launcher. Rank 0 shares
// the launcher's stdout and stderr; other ranks' lines are prefixed "[rank r] ".
int launch(const LaunchOptions& o, std::string& err);

// 32 hex digits from getrandom(): a fresh job token.
std::string randomJobToken();

}  // namespace dtl::rt::launch
