// The launcher (launcher.h):
//  1. Check the options; settle the job token and (node 0) start the store.
//  2. Start nproc ranks, each in its own process group, with RANK, LOCAL_RANK,
//     WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, DTL_JOB_TOKEN.
//  3. Every 20 ms (or on output or a signal): relay output, forward caught
//     signals, reap exited ranks. The first rank to fail makes the launcher
//     SIGTERM the others, then SIGKILL them after the grace period — a
//     stopped rank (SIGSTOP) at once, as it ignores SIGTERM.
//  4. Name the failed rank with its last step (step/<r> in the store); with
//     restarts left, empty the store and go back to 2, and log how long the
//     job took to recover (until rank 0 reports its first step).
// Across nodes a NodeWatch (node_watch.h) joins step 3's poll: another node's
// failure stops this node's ranks as a local one would, and this node's
// failure is published for the others.
#include "runtime/launch/launcher.h"

#include <signal.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "runtime/comm/tcp_store.h"
#include "runtime/launch/bind_address.h"
#include "runtime/launch/env.h"
#include "runtime/launch/launch_limits.h"
#include "runtime/launch/node_watch.h"
#include "runtime/launch/rank_process.h"
#include "runtime/launch/rendezvous.h"

namespace dtl::rt::launch {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPollMillis = 20;
constexpr auto kDrainWindow = std::chrono::seconds(2);  // for output still in flight after the last exit
constexpr auto kStepLookupTimeout = std::chrono::seconds(2);
// Node 0 keeps the store up this long for the other nodes' launchers to end.
constexpr auto kOtherNodesAfterSuccess = std::chrono::seconds(30);
constexpr auto kOtherNodesAfterFailure = std::chrono::seconds(5);  // plus their stop grace

// What every generation of ranks shares.
struct Plan {
  std::string exe;
  std::vector<std::string> argv;
  int nproc = 1, nnodes = 1, node_rank = 0;
  int64_t started = 0;  // Unix seconds: checkpoints older than this are not this job's
  std::string host;
  int port = 0;
  std::string token;
  std::string iface;  // --iface, passed on as DTL_SOCKET_IFNAME; empty: none given
  std::chrono::seconds join_timeout{300};
  std::chrono::milliseconds stop_grace{5000};
  std::chrono::milliseconds term_timeout{30000};
};

struct Outcome {
  int code = 0;
  std::string message;
  bool retryable = false;  // a rank failed (rather than the launcher or the user)
};

bool parseMaster(const std::string& m, std::string& host, int& port, std::string& err) {
  size_t colon = m.rfind(':');
  std::string h = colon == std::string::npos ? "" : m.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  std::string p = colon == std::string::npos ? "" : m.substr(colon + 1);
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (h.empty() || p.empty() || ec != std::errc() || end != p.data() + p.size() || port < 0 || port > 65535) {
    err = "--master must be HOST:PORT (port 0 picks a free one on one node), not '" + m + "'";
    return false;
  }
  host = h;
  return true;
}

std::string hostName() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "?";
}

// "after step 12", "before finishing a step", or why the store could not say.
std::string lastStep(const Plan& p, int rank) {
  comm::Status s;
  auto store = comm::connectTcpStore(p.host, p.port, p.token, kStepLookupTimeout, s);
  if (!s.ok) return "(its last step is unknown: " + s.message + ")";
  std::vector<uint8_t> v;
  if (!store->get(stepKey(rank), v, std::chrono::milliseconds(0)).ok) return "before finishing a step";
  return "after step " + std::string(v.begin(), v.end());
}

std::string describeFailure(const Plan& p, const Child& c) {
  std::string who = "rank " + std::to_string(c.rank);
  if (p.nnodes > 1) who += " (local rank " + std::to_string(c.local_rank) + " on " + hostName() + ")";
  std::string s = who + " (pid " + std::to_string(c.pid) + ") " + describeWaitStatus(c.wait_status) + " " +
                  lastStep(p, c.rank);
  if (WIFSIGNALED(c.wait_status) && WTERMSIG(c.wait_status) == SIGKILL)
    s += "; a SIGKILL nobody sent is often the kernel's out-of-memory killer (see dmesg)";
  if (p.nproc * p.nnodes > 1) s += "; the other ranks were stopped";
  return s;
}

// "; rank 1 (pid 4242) was stopped by SIGSTOP, so it was killed with SIGKILL"
std::string describeStoppedKills(const std::vector<Child>& children) {
  std::string s;
  for (const Child& c : children)
    if (c.killed_stopped)
      s += "; rank " + std::to_string(c.rank) + " (pid " + std::to_string(c.pid) + ") was stopped by " +
           signalName(c.stopped_by) + " (a stopped process ignores SIGTERM), so it was killed with SIGKILL";
  return s;
}

// After a restart: when rank 0 finishes its first step, how long recovery
// took since the failure and the step it resumed from (its first step - 1).
class RecoveryWatch {
 public:
  RecoveryWatch(const Plan& p, int restart, Clock::time_point failed_at) : restart_(restart), failed_at_(failed_at) {
    comm::Status s;
    store_ = comm::connectTcpStore(p.host, p.port, p.token, kStepLookupTimeout, s);
    if (!s.ok) store_.reset();
  }
  void poll() {
    if (!store_ || done_) return;
    std::vector<uint8_t> v;
    if (!store_->get(firstStepKey(0), v, std::chrono::milliseconds(0)).ok) return;
    done_ = true;
    const double secs = std::chrono::duration<double>(Clock::now() - failed_at_).count();
    const long long first = std::atoll(std::string(v.begin(), v.end()).c_str());
    const std::string from = first > 1 ? "resumed from step " + std::to_string(first - 1) : "no checkpoint: started over";
    std::fprintf(stderr, "dtl: restart %d: recovered in %.2f s (%s)\n", restart_, secs, from.c_str());
  }

 private:
  std::shared_ptr<comm::Store> store_;
  int restart_;
  Clock::time_point failed_at_;
  bool done_ = false;
};

int exitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return std::clamp(WEXITSTATUS(wait_status), 1, 255);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::vector<std::string> rankEnvironment(const Plan& p, const Child& c, int restart) {
  std::vector<std::pair<std::string, std::string>> vars = {
      {"RANK", std::to_string(c.rank)},
      {"LOCAL_RANK", std::to_string(c.local_rank)},
      {"WORLD_SIZE", std::to_string(p.nproc * p.nnodes)},
      {"LOCAL_WORLD_SIZE", std::to_string(p.nproc)},
      {"MASTER_ADDR", p.host},
      {"MASTER_PORT", std::to_string(p.port)},
      {kEnvToken, p.token},
      {kEnvLaunched, "1"},
      {kEnvRestartCount, std::to_string(restart)},
      {kEnvJobStarted, std::to_string(p.started)},
      {kEnvJoinTimeout, std::to_string(p.join_timeout.count())},
  };
  if (!p.iface.empty()) vars.push_back({kEnvSocketIfname, p.iface});
  return childEnvironment(vars);
}

// `failed_at`: when a rank's failure was seen.
Outcome runGeneration(const Plan& p, int restart, SignalCatcher& signals, NodeWatch* watch, RecoveryWatch* recovery,
                      Clock::time_point& failed_at) {
  std::vector<Child> children(p.nproc);
  auto signalAll = [&](int sig) {
    for (Child& c : children)
      if (c.pid > 0 && !c.exited) ::kill(-c.pid, sig);
  };
  for (int i = 0; i < p.nproc; ++i) {
    Child& c = children[i];
    c.local_rank = i;
    c.rank = p.node_rank * p.nproc + i;
    SpawnRequest req{p.exe, p.argv, rankEnvironment(p, c, restart), c.rank != 0};
    std::string err;
    if (!spawnChild(req, c, err)) {
      signalAll(SIGKILL);
      for (Child& started : children) {
        if (started.pid <= 0) continue;
        int ignored;
        ::waitpid(started.pid, &ignored, 0);
        for (int fd : {started.out_fd, started.err_fd})
          if (fd >= 0) ::close(fd);
      }
      return {1, "cannot start rank " + std::to_string(c.rank) + ": " + err, false};
    }
  }

  std::optional<size_t> failed;
  std::string elsewhere;  // another node's failure, which stopped ours
  int interrupted_by = 0;
  bool stopping = false, killed = false, second_signal = false;
  Clock::time_point kill_at = Clock::time_point::max(), drain_until = Clock::time_point::max();
  std::vector<pollfd> fds;
  for (;;) {
    bool all_exited = std::all_of(children.begin(), children.end(), [](const Child& c) { return c.exited; });
    bool pipes_open = std::any_of(children.begin(), children.end(),
                                  [](const Child& c) { return c.out_fd >= 0 || c.err_fd >= 0; });
    if (all_exited && (!pipes_open || Clock::now() >= drain_until)) break;

    fds.assign({{signals.fd(), POLLIN, 0}, {watch ? watch->fd() : -1, POLLIN, 0}});
    for (const Child& c : children)
      for (int fd : {c.out_fd, c.err_fd})
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), kPollMillis);

    for (int sig; (sig = signals.take()) != 0;) {
      if (interrupted_by == 0) {  // the ranks save a checkpoint and end (step_guard.h), within the budget
        interrupted_by = sig;
        stopping = true;
        signalAll(sig);
        kill_at = std::min(kill_at, Clock::now() + p.term_timeout);
      } else if (!killed) {
        signalAll(SIGKILL);
        killed = true;
        second_signal = true;
      }
    }
    if (watch && elsewhere.empty() && (fds[1].revents & POLLIN)) {
      elsewhere = watch->reason();
      if (!stopping) {
        stopping = true;
        signalAll(SIGTERM);
        kill_at = Clock::now() + p.stop_grace;
      }
    }
    for (Child& c : children) {
      std::string prefix = "[rank " + std::to_string(c.rank) + "] ";
      if (c.out_fd >= 0) relayLines(c.out_fd, c.out_partial, 1, prefix);
      if (c.err_fd >= 0) relayLines(c.err_fd, c.err_partial, 2, prefix);
    }
    for (size_t i = 0; i < children.size(); ++i) {
      Child& c = children[i];
      if (c.exited) continue;
      int st = 0;
      pid_t r = ::waitpid(c.pid, &st, WNOHANG | WUNTRACED | WCONTINUED);
      if (r != c.pid) continue;
      if (WIFSTOPPED(st) || WIFCONTINUED(st)) {
        c.stopped_by = WIFSTOPPED(st) ? WSTOPSIG(st) : 0;
        continue;
      }
      c.exited = true;
      c.wait_status = st;
      bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
      if (!ok && !stopping) {
        failed = i;
        failed_at = Clock::now();
        stopping = true;
        signalAll(SIGTERM);
        kill_at = Clock::now() + p.stop_grace;
      }
    }
    // A stopped rank would wait out the grace period (and a second
    // interrupt): it acts on no signal but SIGKILL.
    if (stopping)
      for (Child& c : children)
        if (!c.exited && c.stopped_by != 0 && !c.killed_stopped) {
          ::kill(-c.pid, SIGKILL);
          c.killed_stopped = true;
        }
    if (recovery) recovery->poll();
    Clock::time_point now = Clock::now();
    if (drain_until == Clock::time_point::max() &&
        std::all_of(children.begin(), children.end(), [](const Child& c) { return c.exited; }))
      drain_until = now + kDrainWindow;
    if (!killed && now >= kill_at) {
      signalAll(SIGKILL);
      killed = true;
    }
  }
  for (Child& c : children)
    for (int* fd : {&c.out_fd, &c.err_fd})
      if (*fd >= 0) ::close(*fd), *fd = -1;

  if (interrupted_by != 0) {
    // Pre-empted, and every rank stopped as asked (after a checkpoint): done.
    if (std::all_of(children.begin(), children.end(), [](const Child& c) {
          return WIFEXITED(c.wait_status) && WEXITSTATUS(c.wait_status) == 0;
        })) {
      std::fprintf(stderr, "dtl: %s: every rank stopped after the same step\n", signalName(interrupted_by).c_str());
      return {};
    }
    const std::string budget = killed && !second_signal
                                   ? "; ranks still running after --term-timeout " +
                                         std::to_string(p.term_timeout.count() / 1000) + " s were killed"
                                   : "";
    return {128 + interrupted_by, "interrupted by " + signalName(interrupted_by) + "; every rank was stopped" + budget + describeStoppedKills(children),
            false};
  }
  if (failed) {
    const Child& c = children[*failed];
    return {exitCode(c.wait_status), describeFailure(p, c) + describeStoppedKills(children), true};
  }
  if (!elsewhere.empty()) return {1, elsewhere + "; so node " + std::to_string(p.node_rank) + "'s ranks were stopped too", false};
  return {};
}

// A job on several nodes: this node's launcher tells the others how it ended
// (node 0 first waits for theirs, as it hosts the store they read).
Outcome finishNode(const Plan& p, NodeWatch& watch, SignalCatcher& signals, Outcome out) {
  watch.stop();
  bool stopped_by_other = out.code != 0 && !watch.reason().empty() &&
                          out.message.rfind(watch.reason(), 0) == 0;
  if (out.code != 0 && !stopped_by_other) out.message = watch.publishFailure(out.message);
  watch.publishEnd(out.code);
  if (p.node_rank != 0) return out;
  auto bound = out.code == 0 ? std::chrono::milliseconds(kOtherNodesAfterSuccess)
                             : p.stop_grace + std::chrono::milliseconds(kOtherNodesAfterFailure);
  int sig = 0;  // a signal here gives up waiting, not the message
  std::string others = watch.waitForOtherNodes(bound, [&] { return sig != 0 || (sig = signals.take()) != 0; });
  if (out.code == 0 && sig != 0)
    return {128 + sig, "interrupted by " + signalName(sig) + " while waiting for the other nodes to end", false};
  if (out.code == 0 && !others.empty()) return {1, others, false};
  return out;
}

// The interface named by --iface, else by the environment the ranks inherit.
bool checkInterface(const LaunchOptions& o, const Plan& p, std::string& err) {
  std::string iface = o.iface, from = "--iface";
  if (iface.empty()) interfaceFromEnv([](const char* n) { return std::getenv(n); }, iface, from);
  std::string address;
  return chooseBindAddress(p.host, iface, from, systemNet(), address, err);
}

}  // namespace

std::string randomJobToken() {
  unsigned char buf[16];
  size_t got = 0;
  while (got < sizeof buf) {
    ssize_t n = ::getrandom(buf + got, sizeof buf - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      std::FILE* f = std::fopen("/dev/urandom", "rb");
      bool ok = f != nullptr && std::fread(buf, 1, sizeof buf, f) == sizeof buf;
      if (f != nullptr) std::fclose(f);
      if (!ok) return "";
      got = sizeof buf;
    }
  }
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : buf) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

int launch(const LaunchOptions& o, std::string& err) {
  Plan p;
  p.started = static_cast<int64_t>(::time(nullptr));
  p.argv = o.argv;
  p.nproc = o.nproc;
  p.nnodes = o.nnodes;
  p.node_rank = o.node_rank;
  p.join_timeout = o.join_timeout;
  p.stop_grace = o.stop_grace;
  p.term_timeout = o.term_timeout;
  if (o.argv.empty()) {
    err = "no command for the ranks to run";
    return 2;
  }
  if (const char* launched = std::getenv(kEnvLaunched); launched != nullptr && std::string(launched) == "1") {
    // A rank (or a test binary started as one) must not fan out again: that recursion never ends.
    err = "this process is already a rank of a dtl job (DTL_LAUNCHED=1), and a rank cannot launch more ranks";
    return 2;
  }
  if (o.nproc < 1 || o.nnodes < 1) {
    err = o.nproc < 1 ? "--nproc must be at least 1, not " + std::to_string(o.nproc)
                      : "--nnodes must be at least 1, not " + std::to_string(o.nnodes);
    return 2;
  }
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    err = "--node-rank " + std::to_string(o.node_rank) + " is not a node of --nnodes " + std::to_string(o.nnodes) +
          " (0 to " + std::to_string(o.nnodes - 1) + ")";
    return 2;
  }
  if (!parseMaster(o.master, p.host, p.port, err)) return 2;
  if (o.nnodes > 1 && p.port == 0) {
    err = "--nnodes " + std::to_string(o.nnodes) + " needs a fixed port in --master (not " + o.master +
          "): every node must know where the store listens";
    return 2;
  }
  if (o.max_restarts < 0 || (o.nnodes > 1 && o.max_restarts > 0)) {
    err = o.max_restarts < 0 ? "--max-restarts must be at least 0"
                             : "--max-restarts needs --nnodes 1: restarting ranks across nodes is not supported yet";
    return 2;
  }
  if (o.join_timeout.count() <= 0) {
    err = "the join timeout must be positive";
    return 2;
  }
  p.token = o.token;
  if (const char* t = std::getenv(kEnvToken); p.token.empty() && t != nullptr) p.token = t;
  if (p.token.empty() && o.nnodes > 1) {
    err = "--nnodes " + std::to_string(o.nnodes) + " needs " + kEnvToken +
          " set to the same secret on every node, e.g. export " + kEnvToken +
          "=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')";
    return 2;
  }
  if (p.token.empty()) p.token = randomJobToken();
  if (p.token.empty()) {
    err = "cannot make a job token: no randomness from getrandom() or /dev/urandom";
    return 1;
  }
  if (!findExecutable(o.argv[0], p.exe, err)) return 1;
  if (!checkInterface(o, p, err)) return 2;
  p.iface = o.iface;
  if (std::string why = checkRankLimits({o.nproc, o.nnodes, o.node_rank, o.backend}); !why.empty()) {
    err = why;
    return 1;
  }

  SignalCatcher signals;
  if (!signals.install(err)) return 1;
  std::unique_ptr<comm::TcpStoreServer> server;
  if (o.node_rank == 0) {
    comm::Status s;
    server = comm::TcpStoreServer::start(storeBindHost(p.host), p.port, p.token, s);
    if (!s.ok) {
      err = "cannot start the job's store: " + s.message;
      return 1;
    }
    p.port = server->port();
  }
  std::unique_ptr<NodeWatch> watch;
  if (o.nnodes > 1) {
    watch = std::make_unique<NodeWatch>(p.host, p.port, p.token, p.node_rank, p.nnodes);
    if (!watch->start(err)) return 1;
  }
  std::unique_ptr<RecoveryWatch> recovery;
  for (int attempt = 0;; ++attempt) {
    Clock::time_point failed_at;
    Outcome out = runGeneration(p, attempt, signals, watch.get(), recovery.get(), failed_at);
    if (watch) out = finishNode(p, *watch, signals, out);
    if (out.code == 0) return 0;
    if (!out.retryable || attempt >= o.max_restarts) {
      err = out.message;
      return out.code;
    }
    std::fprintf(stderr, "dtl: %s; restarting every rank (restart %d of %d)\n", out.message.c_str(), attempt + 1,
                 o.max_restarts);
    server->reset();
    recovery = std::make_unique<RecoveryWatch>(p, attempt + 1, failed_at);
  }
}

}  // namespace dtl::rt::launch
