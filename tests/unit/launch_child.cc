// A stand-in rank for launch_test: reads its identity like `dtlc run` would,
// joins the job, checks fingerprints, then "trains" a few steps, reporting
// each. Flags make one rank misbehave:
//   --steps N --step-ms M        how long to run (default 3 steps of 20 ms)
//   --kill-rank R --at-step S    rank R SIGKILLs itself after step S
//   --exit-rank R --code C       rank R exits with C after step S (--at-step)
//   --fail-once-rank R           like --exit-rank with code 3, on the first try only
//   --no-join-rank R             rank R never joins (sleeps a minute)
//   --early-exit-rank R          rank R exits 1 before joining (as if its spec did not compile)
//   --fingerprint-rank R FP      rank R reports fingerprint FP ("same-program" otherwise)
//   --ignore-term-rank R         rank R ignores SIGTERM
//   --ready-dir DIR              each rank creates DIR/ready.<r> once checked in
//   --no-inherited-fds 1         exit 5 when started with any descriptor above 2 open
// With `--launch N [--grace-ms G] [--nnodes K --node-rank R --master H:P]
// [--join-timeout S] -- ARGS...` it is instead a launcher of N ranks running
// this program with ARGS (for the signal-forwarding and multi-node tests).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "runtime/launch/env.h"
#include "runtime/launch/launcher.h"
#include "runtime/launch/rendezvous.h"

namespace launch = dtl::rt::launch;

namespace {

int runLauncher(int argc, char** argv) {
  launch::LaunchOptions o;
  o.nproc = std::atoi(argv[2]);
  int i = 3;
  for (; i + 1 < argc && std::strcmp(argv[i], "--") != 0; i += 2) {
    std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--grace-ms") o.stop_grace = std::chrono::milliseconds(std::atoi(v));
    else if (flag == "--nnodes") o.nnodes = std::atoi(v);
    else if (flag == "--node-rank") o.node_rank = std::atoi(v);
    else if (flag == "--master") o.master = v;
    else if (flag == "--join-timeout") o.join_timeout = std::chrono::seconds(std::atoi(v));
    else {
      std::fprintf(stderr, "launch_child --launch: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (i < argc && std::strcmp(argv[i], "--") == 0) ++i;
  o.argv = {argv[0]};
  for (; i < argc; ++i) o.argv.push_back(argv[i]);
  std::string err;
  int code = launch::launch(o, err);
  if (code != 0) std::fprintf(stderr, "launcher: %s\n", err.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--launch") == 0) return runLauncher(argc, argv);
  int steps = 3, step_ms = 20, at_step = 1, code = 0;
  int kill_rank = -1, exit_rank = -1, fail_once_rank = -1, no_join_rank = -1, fp_rank = -1, ignore_term_rank = -1;
  int early_exit_rank = -1;
  std::string other_fp, ready_dir;
  bool check_fds = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (flag == "--steps") steps = v;
    else if (flag == "--step-ms") step_ms = v;
    else if (flag == "--at-step") at_step = v;
    else if (flag == "--code") code = v;
    else if (flag == "--kill-rank") kill_rank = v;
    else if (flag == "--exit-rank") exit_rank = v;
    else if (flag == "--fail-once-rank") fail_once_rank = v;
    else if (flag == "--no-join-rank") no_join_rank = v;
    else if (flag == "--early-exit-rank") early_exit_rank = v;
    else if (flag == "--ignore-term-rank") ignore_term_rank = v;
    else if (flag == "--ready-dir") ready_dir = argv[i + 1];
    else if (flag == "--no-inherited-fds") check_fds = v != 0;
    else if (flag == "--fingerprint-rank" && i + 2 < argc) fp_rank = v, other_fp = argv[i + 2], ++i;
    else {
      std::fprintf(stderr, "launch_child: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }

  if (check_fds) {
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      int fd = std::atoi(entry.path().filename().c_str());
      std::error_code ec;
      auto target = std::filesystem::read_symlink(entry.path(), ec);
      // The directory listing itself shows up as one more descriptor.
      if (fd > 2 && target.string().rfind("/proc/", 0) != 0) {
        std::fprintf(stderr, "launch_child: inherited descriptor %d (%s)\n", fd, target.c_str());
        return 5;
      }
    }
  }
  launch::RankEnv env;
  std::string err;
  if (!launch::rankEnvFromEnvironment(env, err)) {
    std::fprintf(stderr, "launch_child: %s\n", err.c_str());
    return 2;
  }
  int r = env.rank;
  if (r == ignore_term_rank) ::signal(SIGTERM, SIG_IGN);
  if (r == early_exit_rank) {
    std::fprintf(stderr, "launch_child: rank %d fails before joining\n", r);
    return 1;
  }
  if (r == no_join_rank) {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  std::shared_ptr<launch::Store> store;
  launch::Status s = launch::joinJob(env, env.join_timeout, store);
  if (s.ok) s = launch::checkFingerprints(*store, env, r == fp_rank ? other_fp : "same-program", env.join_timeout);
  if (!s.ok) {
    std::fprintf(stderr, "launch_child: %s\n", s.message.c_str());
    return 1;
  }
  std::fprintf(stderr, "rank %d of %d says hello\n", r, env.world_size);
  if (!ready_dir.empty()) ::close(::open((ready_dir + "/ready." + std::to_string(r)).c_str(), O_CREAT | O_WRONLY, 0644));
  for (int step = 1; step <= steps; ++step) {
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
    if (s = launch::reportStep(*store, r, step); !s.ok) {
      std::fprintf(stderr, "launch_child: %s\n", s.message.c_str());
      return 1;
    }
    if (step != at_step) continue;
    if (r == kill_rank) ::raise(SIGKILL);
    if (r == exit_rank) return code;
    if (r == fail_once_rank && env.restart_count == 0) return 3;
  }
  return 0;
}
