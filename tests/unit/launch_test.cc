// Multi-process jobs: rank identity from torchrun/OpenMPI/Slurm variables,
// joining and the fingerprint check with ranks as threads, and the launcher
// with real rank processes (launch_child) that finish, crash, exit non-zero,
// never join or compiled a different program.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "runtime/comm/tcp_store.h"
#include "runtime/launch/env.h"
#include "runtime/launch/launcher.h"
#include "runtime/launch/rendezvous.h"

namespace dtl::rt::launch {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using Vars = std::map<std::string, std::string>;

long long msSince(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}
bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ---- rank identity --------------------------------------------------------

bool parse(const Vars& vars, RankEnv& env, std::string& err) {
  return rankEnvFrom(
      [&](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      env, err);
}

// The error for `vars`, or "" when they parse.
std::string parseError(const Vars& vars) {
  RankEnv env;
  std::string err;
  bool ok = parse(vars, env, err);
  EXPECT_EQ(ok, err.empty());
  return err;
}

Vars torchrun() {
  return {{"RANK", "5"},          {"LOCAL_RANK", "1"},         {"WORLD_SIZE", "8"},
          {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29400"},
          {"DTL_JOB_TOKEN", "secret"}};
}

TEST(RankEnv, Torchrun) {
  RankEnv env;
  std::string err;
  Vars v = torchrun();
  v["DTL_LAUNCHED"] = "1";
  v["DTL_RESTART_COUNT"] = "2";
  v["DTL_JOIN_TIMEOUT"] = "2.5";
  ASSERT_TRUE(parse(v, env, err)) << err;
  EXPECT_EQ(env.source, "torchrun");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_world_size, 4);
  EXPECT_EQ(env.master_addr, "10.0.0.1");
  EXPECT_EQ(env.master_port, 29400);
  EXPECT_EQ(env.token, "secret");
  EXPECT_TRUE(env.launcher_hosts_store);
  EXPECT_EQ(env.restart_count, 2);
  EXPECT_EQ(env.join_timeout, milliseconds(2500));
  EXPECT_EQ(env.note, "");
}

TEST(RankEnv, TorchrunWithoutLocalVariablesAssumesOneNode) {
  RankEnv env;
  std::string err;
  Vars v = torchrun();
  v.erase("LOCAL_RANK");
  v.erase("LOCAL_WORLD_SIZE");
  ASSERT_TRUE(parse(v, env, err)) << err;
  EXPECT_EQ(env.local_rank, 5);
  EXPECT_EQ(env.local_world_size, 8);
  EXPECT_FALSE(env.launcher_hosts_store);
  EXPECT_EQ(env.join_timeout, milliseconds(300000));
  EXPECT_EQ(env.note, "LOCAL_RANK or LOCAL_WORLD_SIZE is not set; assuming every rank runs on this node");
}

TEST(RankEnv, TheStorePortMovesOffTorchrunsOwnStore) {
  RankEnv env;
  std::string err;
  Vars v = torchrun();
  v["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  ASSERT_TRUE(parse(v, env, err)) << err;
  EXPECT_EQ(env.master_port, 29401);
  EXPECT_EQ(env.note, "torchrun's own store holds MASTER_PORT=29400, so dtl's store uses port 29401 (set "
                      "DTL_STORE_PORT to choose)");
  v["DTL_STORE_PORT"] = "31000";
  ASSERT_TRUE(parse(v, env, err)) << err;
  EXPECT_EQ(env.master_port, 31000);
  EXPECT_EQ(env.note, "");
  v["DTL_STORE_PORT"] = "0";
  EXPECT_EQ(parseError(v), "DTL_STORE_PORT=0 must be at least 1");
}

TEST(RankEnv, TorchrunBadValues) {
  auto with = [](std::map<std::string, std::string> changes) {
    Vars v = torchrun();
    for (auto& [k, x] : changes) {
      if (x == "<unset>") v.erase(k);
      else v[k] = x;
    }
    return parseError(v);
  };
  EXPECT_EQ(with({{"RANK", "8"}}), "RANK=8 is not below WORLD_SIZE=8");
  EXPECT_EQ(with({{"RANK", "abc"}}), "RANK is 'abc', not a whole number");
  EXPECT_EQ(with({{"RANK", "3x"}}), "RANK is '3x', not a whole number");
  EXPECT_EQ(with({{"RANK", ""}}), "RANK is '', not a whole number");
  EXPECT_EQ(with({{"RANK", "-1"}}), "RANK=-1 must be at least 0");
  EXPECT_EQ(with({{"WORLD_SIZE", "0"}}), "WORLD_SIZE=0 must be at least 1");
  EXPECT_EQ(with({{"WORLD_SIZE", "<unset>"}}), "WORLD_SIZE is not set");
  EXPECT_EQ(with({{"LOCAL_RANK", "4"}}), "LOCAL_RANK=4 is not below LOCAL_WORLD_SIZE=4");
  EXPECT_EQ(with({{"LOCAL_WORLD_SIZE", "16"}}), "LOCAL_WORLD_SIZE=16 is larger than WORLD_SIZE=8");
  EXPECT_EQ(with({{"MASTER_PORT", "70000"}}), "MASTER_PORT=70000 is not a port number (1 to 65535)");
  EXPECT_EQ(with({{"MASTER_PORT", "http"}}), "MASTER_PORT is 'http', not a whole number");
  EXPECT_EQ(with({{"MASTER_ADDR", "<unset>"}}),
            "MASTER_ADDR is not set (torchrun sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and "
            "MASTER_PORT; set them all when starting ranks by hand)");
  EXPECT_EQ(with({{"DTL_JOIN_TIMEOUT", "soon"}}), "DTL_JOIN_TIMEOUT is 'soon', not a positive number of seconds");
  EXPECT_EQ(with({{"DTL_RESTART_COUNT", "x"}}), "DTL_RESTART_COUNT is 'x', not a whole number");
  EXPECT_EQ(with({{"DTL_JOB_TOKEN", "<unset>"}}).rfind("DTL_JOB_TOKEN is not set: every rank of a job needs", 0), 0u);
}

TEST(RankEnv, OpenMpiDefaultsTheStoreOnOneNode) {
  RankEnv env;
  std::string err;
  Vars v = {{"OMPI_COMM_WORLD_RANK", "2"},
            {"OMPI_COMM_WORLD_SIZE", "3"},
            {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
            {"DTL_JOB_TOKEN", "t"}};
  ASSERT_TRUE(parse(v, env, err)) << err;
  EXPECT_EQ(env.source, "OpenMPI");
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.world_size, 3);
  EXPECT_EQ(env.local_rank, 2);
  EXPECT_EQ(env.local_world_size, 3);
  EXPECT_EQ(env.master_addr, "127.0.0.1");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_EQ(env.note, "MASTER_ADDR and MASTER_PORT are not set; using the store at 127.0.0.1:29500 on this node");

  v["MASTER_PORT"] = "1234";
  ASSERT_TRUE(parse(v, env, err)) << err;
  EXPECT_EQ(env.master_port, 1234);
  EXPECT_EQ(env.note, "MASTER_ADDR is not set; using the store at 127.0.0.1:1234 on this node");

  v["MASTER_ADDR"] = "node7";
  ASSERT_TRUE(parse(v, env, err)) << err;
  EXPECT_EQ(env.master_addr, "node7");
  EXPECT_EQ(env.note, "");
}

TEST(RankEnv, OpenMpiBadValues) {
  Vars v = {{"OMPI_COMM_WORLD_RANK", "1"},       {"OMPI_COMM_WORLD_SIZE", "4"},
            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
            {"DTL_JOB_TOKEN", "t"}};
  EXPECT_EQ(parseError(v),
            "MASTER_ADDR is not set, but the 4 ranks span more than one node (2 on this one): set MASTER_ADDR (and "
            "MASTER_PORT) to rank 0's host so every rank can reach the store");
  v["MASTER_ADDR"] = "node0";
  EXPECT_EQ(parseError(v), "");
  v["OMPI_COMM_WORLD_LOCAL_RANK"] = "2";
  EXPECT_EQ(parseError(v), "OMPI_COMM_WORLD_LOCAL_RANK=2 is not below OMPI_COMM_WORLD_LOCAL_SIZE=2");
  v["OMPI_COMM_WORLD_LOCAL_RANK"] = "1";
  v["OMPI_COMM_WORLD_SIZE"] = "four";
  EXPECT_EQ(parseError(v), "OMPI_COMM_WORLD_SIZE is 'four', not a whole number");
  v.erase("OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(parseError(v), "OMPI_COMM_WORLD_SIZE is not set");
}

TEST(RankEnv, Slurm) {
  RankEnv env;
  std::string err;
  Vars v = {{"SLURM_PROCID", "6"},          {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "0"},
            {"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "3"}, {"MASTER_ADDR", "n0"},
            {"MASTER_PORT", "29500"},       {"DTL_JOB_TOKEN", "t"}};
  ASSERT_TRUE(parse(v, env, err)) << err;
  EXPECT_EQ(env.source, "Slurm");
  EXPECT_EQ(env.rank, 6);
  EXPECT_EQ(env.world_size, 7);
  EXPECT_EQ(env.local_world_size, 1);
  v["SLURM_NODEID"] = "1";
  v["SLURM_PROCID"] = "3";
  v["SLURM_LOCALID"] = "1";
  ASSERT_TRUE(parse(v, env, err)) << err;
  EXPECT_EQ(env.local_world_size, 2);
  v["SLURM_NTASKS_PER_NODE"] = "4";  // wins over SLURM_TASKS_PER_NODE
  ASSERT_TRUE(parse(v, env, err)) << err;
  EXPECT_EQ(env.local_world_size, 4);
  v["SLURM_LOCALID"] = "4";
  EXPECT_EQ(parseError(v), "SLURM_LOCALID=4 is not below SLURM_NTASKS_PER_NODE=4");
  v.erase("SLURM_NTASKS_PER_NODE");
  v["SLURM_LOCALID"] = "0";
  v["SLURM_TASKS_PER_NODE"] = "2(x";
  EXPECT_EQ(parseError(v), "SLURM_TASKS_PER_NODE is '2(x', which does not say how many tasks node 1 (SLURM_NODEID) runs");
  v["SLURM_TASKS_PER_NODE"] = "2";  // only node 0
  EXPECT_EQ(parseError(v), "SLURM_TASKS_PER_NODE is '2', which does not say how many tasks node 1 (SLURM_NODEID) runs");
  v.erase("SLURM_TASKS_PER_NODE");
  EXPECT_EQ(parseError(v), "SLURM_PROCID is set but neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE is");
}

TEST(RankEnv, TorchrunVariablesWinAndAbsenceIsExplained) {
  RankEnv env;
  std::string err;
  Vars v = torchrun();
  v["OMPI_COMM_WORLD_RANK"] = "0";
  v["SLURM_PROCID"] = "0";
  ASSERT_TRUE(parse(v, env, err)) << err;
  EXPECT_EQ(env.source, "torchrun");
  EXPECT_EQ(env.rank, 5);

  auto none = [](const char*) -> const char* { return nullptr; };
  EXPECT_FALSE(rankEnvPresent(none));
  EXPECT_FALSE(rankEnvFrom(none, env, err));
  EXPECT_EQ(err, "no rank variables are set: expected RANK and WORLD_SIZE (dtlc run, torchrun), "
                 "OMPI_COMM_WORLD_RANK (mpirun) or SLURM_PROCID (srun)");
}

// ---- joining, with ranks as threads ------------------------------------------

constexpr char kToken[] = "test-token";

RankEnv rankOf(int rank, int world, int port, bool launcher_hosts_store = true) {
  RankEnv env;
  env.rank = env.local_rank = rank;
  env.world_size = env.local_world_size = world;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.token = kToken;
  env.source = "torchrun";
  env.launcher_hosts_store = launcher_hosts_store;
  return env;
}

// Runs `body(rank)` on a thread per rank of `ranks`; returns each rank's status.
std::vector<Status> onThreads(const std::vector<int>& ranks, const std::function<Status(int)>& body) {
  std::vector<Status> out(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) threads.emplace_back([&, i] { out[i] = body(ranks[i]); });
  for (auto& t : threads) t.join();
  return out;
}

std::vector<int> upTo(int n) {
  std::vector<int> r;
  for (int i = 0; i < n; ++i) r.push_back(i);
  return r;
}

int freePort() {
  Status s;
  auto probe = comm::TcpStoreServer::start("127.0.0.1", 0, kToken, s);
  return probe ? probe->port() : 0;
}

TEST(Rendezvous, EveryWorldSizeJoinsAndAgrees) {
  for (int world : {1, 2, 3, 4}) {
    Status s;
    auto server = comm::TcpStoreServer::start("127.0.0.1", 0, kToken, s);
    ASSERT_TRUE(s.ok);
    auto results = onThreads(upTo(world), [&](int r) {
      RankEnv env = rankOf(r, world, server->port());
      std::shared_ptr<Store> store;
      Status st = joinJob(env, milliseconds(5000), store);
      if (st.ok) st = checkFingerprints(*store, env, "fp-1", milliseconds(5000));
      if (st.ok) st = reportStep(*store, r, 10 + r);
      return st;
    });
    for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok) << "world " << world << " rank " << r << ": " << results[r].message;
    auto store = comm::connectTcpStore("127.0.0.1", server->port(), kToken, milliseconds(1000), s);
    std::vector<uint8_t> v;
    ASSERT_TRUE(store->get(stepKey(world - 1), v, milliseconds(0)).ok);
    EXPECT_EQ(std::string(v.begin(), v.end()), std::to_string(10 + world - 1));
  }
}

// After a checkpoint the ranks meet: rank 0 (the writer) is waited for up
// to the long timeout, any other rank only up to the short (collective) one,
// and the error names who did not come. With slow = -1 every rank gets the
// long one.
TEST(Rendezvous, MeetingExcusesOnlyTheSlowRank) {
  Status s;
  auto server = comm::TcpStoreServer::start("127.0.0.1", 0, kToken, s);
  ASSERT_TRUE(s.ok) << s.message;
  auto store = comm::connectTcpStore("127.0.0.1", server->port(), kToken, milliseconds(1000), s);
  ASSERT_TRUE(s.ok) << s.message;
  const milliseconds shortWait(300), longWait(5000);
  auto meet = [&](int r, const std::string& key, int slow) {
    return meetRanks(*store, rankOf(r, 3, 0), key, "the end of the checkpoint at step 1", slow, shortWait, longWait);
  };
  auto results = onThreads({0, 1, 2}, [&](int r) {
    if (r == 0) std::this_thread::sleep_for(milliseconds(800));  // longer than the short wait: writing
    return meet(r, "a", 0);
  });
  for (const Status& r : results) EXPECT_TRUE(r.ok) << r.message;

  const auto start = std::chrono::steady_clock::now();
  results = onThreads({0, 1}, [&](int r) { return meet(r, "b", 0); });  // rank 2 never comes
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3000));
  for (const Status& r : results)
    EXPECT_EQ(r.message, "rank 2 did not reach the end of the checkpoint at step 1 within 0.3 s");

  results = onThreads({0, 1, 2}, [&](int r) {
    if (r == 2) std::this_thread::sleep_for(milliseconds(800));
    return meet(r, "c", -1);
  });
  for (const Status& r : results) EXPECT_TRUE(r.ok) << r.message;
}

TEST(Rendezvous, RankZeroHostsTheStoreWhenNoLauncherDoes) {
  int port = freePort();
  std::vector<std::shared_ptr<Store>> stores(3);
  auto results = onThreads({2, 1, 0}, [&](int r) {  // rank 0 last: the others retry until it listens
    if (r == 0) std::this_thread::sleep_for(milliseconds(200));
    RankEnv env = rankOf(r, 3, port, /*launcher_hosts_store=*/false);
    Status st = joinJob(env, milliseconds(5000), stores[r]);
    if (st.ok) st = checkFingerprints(*stores[r], env, "fp", milliseconds(5000));
    return st;
  });
  for (const Status& s : results) EXPECT_TRUE(s.ok) << s.message;
  stores.clear();  // rank 0's last: its store shuts the server down
}

TEST(Rendezvous, RankZeroSaysWhenItCannotHostTheStore) {
  Status s;
  auto other_job = comm::TcpStoreServer::start("127.0.0.1", 0, "another-token", s);
  ASSERT_TRUE(s.ok);
  std::shared_ptr<Store> store;
  int port = other_job->port();
  s = joinJob(rankOf(0, 2, port, /*launcher_hosts_store=*/false), milliseconds(300), store);
  EXPECT_EQ(s.message, "rank 0 cannot host the job's store: cannot start the store on 127.0.0.1:" +
                           std::to_string(port) + ": address already in use; is another job using port " +
                           std::to_string(port) + "? Set MASTER_PORT (or DTL_STORE_PORT) to a free one");
}

TEST(Rendezvous, MissingRanksAreNamed) {
  Status s;
  auto server = comm::TcpStoreServer::start("127.0.0.1", 0, kToken, s);
  auto start = Clock::now();
  auto results = onThreads({0, 1}, [&](int r) {
    std::shared_ptr<Store> store;
    return joinJob(rankOf(r, 4, server->port()), milliseconds(500), store);
  });
  for (const Status& st : results) {
    EXPECT_EQ(st.message, "ranks 2, 3 did not join within 0.5 s (store at 127.0.0.1:" +
                              std::to_string(server->port()) +
                              "); check that every rank was started with the same MASTER_ADDR, MASTER_PORT and "
                              "DTL_JOB_TOKEN");
  }
  EXPECT_LT(msSince(start), 3000);
}

TEST(Rendezvous, ADuplicateRankIsRefused) {
  Status s;
  auto server = comm::TcpStoreServer::start("127.0.0.1", 0, kToken, s);
  std::shared_ptr<Store> first, second;
  std::thread t([&] { s = joinJob(rankOf(1, 2, server->port()), milliseconds(300), first); });
  t.join();
  Status dup = joinJob(rankOf(1, 2, server->port()), milliseconds(300), second);
  EXPECT_EQ(dup.message, "rank 1 joined twice: two processes were given rank 1 (torchrun variables); check the rank "
                         "of every process");
  EXPECT_EQ(s.message.rfind("rank 0 did not join within 0.3 s", 0), 0u) << s.message;
}

TEST(Rendezvous, DifferentFingerprintsFailEveryRank) {
  Status s;
  auto server = comm::TcpStoreServer::start("127.0.0.1", 0, kToken, s);
  auto results = onThreads(upTo(4), [&](int r) {
    RankEnv env = rankOf(r, 4, server->port());
    std::shared_ptr<Store> store;
    Status st = joinJob(env, milliseconds(5000), store);
    if (!st.ok) return st;
    std::string fp = r == 1 ? "bbbb" : r == 3 ? "cccc" : "aaaa";
    return checkFingerprints(*store, env, fp, milliseconds(5000));
  });
  for (const Status& st : results) {
    EXPECT_EQ(st.message, "ranks compiled different programs: rank 1 has fingerprint bbbb; rank 3 has fingerprint "
                          "cccc, but ranks 0, 2 have aaaa; check every rank runs the same spec with the same --set and --kernels");
  }
}

TEST(Rendezvous, ARankThatNeverPublishesItsFingerprintIsNamed) {
  Status s;
  auto server = comm::TcpStoreServer::start("127.0.0.1", 0, kToken, s);
  auto results = onThreads(upTo(3), [&](int r) {
    RankEnv env = rankOf(r, 3, server->port());
    std::shared_ptr<Store> store;
    Status st = joinJob(env, milliseconds(5000), store);
    if (!st.ok || r == 2) return st;  // rank 2 joins, then dies before compiling
    return checkFingerprints(*store, env, "fp", milliseconds(300));
  });
  EXPECT_TRUE(results[2].ok);
  for (int r : {0, 1})
    EXPECT_EQ(results[r].message, "rank 2 did not publish a program fingerprint within 0.3 s; did it fail to compile?");
}

// ---- the launcher, with real rank processes -----------------------------------

// Redirects this process's stderr (fd 2; rank 0 inherits it) to a file while alive.
class StderrCapture {
 public:
  StderrCapture() : path_(::testing::TempDir() + "launch_stderr_" + std::to_string(::getpid())) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    int fd = ::open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() { text(); }
  std::string text() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      ::dup2(saved_, 2);
      ::close(saved_);
      saved_ = -1;
    }
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

struct JobRun {
  int code;
  std::string err, log;
  long long ms;
};

JobRun launchChildren(int nproc, std::vector<std::string> args, LaunchOptions o = {}) {
  o.nproc = nproc;
  o.argv = {DTL_LAUNCH_CHILD};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  StderrCapture capture;
  JobRun run;
  auto start = Clock::now();
  run.code = launch(o, run.err);
  run.ms = msSince(start);
  run.log = capture.text();
  return run;
}

TEST(Launcher, EveryRankFinishes) {
  for (int nproc : {1, 2, 3, 4}) {
    JobRun run = launchChildren(nproc, {"--steps", "3"});
    EXPECT_EQ(run.code, 0) << run.err << "\n" << run.log;
    EXPECT_EQ(run.err, "");
    // Rank 0 writes straight to our stderr; the others' lines come prefixed.
    EXPECT_TRUE(contains(run.log, "rank 0 of " + std::to_string(nproc) + " says hello\n")) << run.log;
    EXPECT_FALSE(contains(run.log, "[rank 0]")) << run.log;
    for (int r = 1; r < nproc; ++r) {
      std::string line = "[rank " + std::to_string(r) + "] rank " + std::to_string(r) + " of " +
                         std::to_string(nproc) + " says hello\n";
      EXPECT_TRUE(contains(run.log, line)) << run.log;
    }
  }
}

TEST(Launcher, RanksInheritNoDescriptorsButTheStandardThree) {
  int leak = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC: fork/exec alone would pass it on
  ASSERT_GE(leak, 3);
  JobRun run = launchChildren(2, {"--no-inherited-fds", "1"});
  ::close(leak);
  EXPECT_EQ(run.code, 0) << run.err << "\n" << run.log;
}

TEST(Launcher, AKilledRankIsNamedWithItsSignalAndStep) {
  JobRun run = launchChildren(3, {"--steps", "1000", "--step-ms", "10", "--kill-rank", "1", "--at-step", "3"});
  EXPECT_EQ(run.code, 128 + SIGKILL);
  EXPECT_TRUE(contains(run.err, "rank 1 (pid ")) << run.err;
  EXPECT_TRUE(contains(run.err, ") was killed by SIGKILL after step 3; a SIGKILL nobody sent is often the kernel's "
                                "out-of-memory killer (see dmesg); the other ranks were stopped"))
      << run.err;
  EXPECT_LT(run.ms, 10000);
}

TEST(Launcher, ANonZeroExitIsNamedWithItsStatusAndStep) {
  JobRun run = launchChildren(3, {"--steps", "1000", "--step-ms", "10", "--exit-rank", "2", "--code", "3", "--at-step", "2"});
  EXPECT_EQ(run.code, 3);
  EXPECT_TRUE(contains(run.err, "rank 2 (pid ")) << run.err;
  EXPECT_TRUE(contains(run.err, ") exited with status 3 after step 2; the other ranks were stopped")) << run.err;
  EXPECT_LT(run.ms, 10000);
}

TEST(Launcher, ARankThatNeverJoinsIsNamedByTheOthers) {
  LaunchOptions o;
  o.join_timeout = std::chrono::seconds(2);
  JobRun run = launchChildren(4, {"--no-join-rank", "2"}, o);
  EXPECT_EQ(run.code, 1);
  EXPECT_TRUE(contains(run.err, "exited with status 1 before finishing a step")) << run.err;
  // The first rank to fail says why; the launcher may stop the others before they do.
  EXPECT_TRUE(contains(run.log, "launch_child: rank 2 did not join within 2 s (store at 127.0.0.1:")) << run.log;
  EXPECT_GE(run.ms, 2000);
  EXPECT_LT(run.ms, 8000);
}

TEST(Launcher, MismatchedFingerprintsAreRefused) {
  JobRun run = launchChildren(3, {"--fingerprint-rank", "1", "other-program"});
  EXPECT_EQ(run.code, 1);
  std::string why = "ranks compiled different programs: rank 1 has fingerprint other-program, but ranks 0, 2 have "
                    "same-program; check every rank runs the same spec with the same --set and --kernels";
  EXPECT_TRUE(contains(run.log, "launch_child: " + why)) << run.log;
  EXPECT_FALSE(contains(run.log, "says hello")) << run.log;
}

TEST(Launcher, ARankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  LaunchOptions o;
  o.stop_grace = milliseconds(300);
  JobRun run = launchChildren(2, {"--steps", "1000", "--step-ms", "10", "--exit-rank", "0", "--code", "4", "--at-step",
                               "2", "--ignore-term-rank", "1"},
                           o);
  EXPECT_EQ(run.code, 4);
  EXPECT_TRUE(contains(run.err, "rank 0 (pid ")) << run.err;
  EXPECT_LT(run.ms, 5000);
}

TEST(Launcher, RestartsEveryRankAfterAFailure) {
  LaunchOptions o;
  o.max_restarts = 1;
  JobRun run = launchChildren(2, {"--steps", "4", "--fail-once-rank", "1", "--at-step", "2"}, o);
  EXPECT_EQ(run.code, 0) << run.err << "\n" << run.log;
  EXPECT_TRUE(contains(run.log, ") exited with status 3 after step 2; the other ranks were stopped; restarting every "
                                "rank (restart 1 of 1)\n"))
      << run.log;

  JobRun spent = launchChildren(2, {"--steps", "4", "--exit-rank", "1", "--code", "3", "--at-step", "1"}, o);
  EXPECT_EQ(spent.code, 3);
  EXPECT_TRUE(contains(spent.log, "restart 1 of 1")) << spent.log;
  EXPECT_TRUE(contains(spent.err, "exited with status 3 after step 1")) << spent.err;
}

TEST(Launcher, BadOptions) {
  std::string err;
  LaunchOptions o;
  o.argv = {DTL_LAUNCH_CHILD};
  o.nproc = 0;
  EXPECT_EQ(launch(o, err), 2);
  EXPECT_EQ(err, "--nproc must be at least 1, not 0");
  o.nproc = 1;
  o.master = "localhost";
  EXPECT_EQ(launch(o, err), 2);
  EXPECT_EQ(err, "--master must be HOST:PORT (port 0 picks a free one on one node), not 'localhost'");
  o.master = "127.0.0.1:0";
  o.nnodes = 2;
  o.token = "t";
  EXPECT_EQ(launch(o, err), 2);
  EXPECT_EQ(err, "--nnodes 2 needs a fixed port in --master (not 127.0.0.1:0): every node must know where the store "
                 "listens");
  o.master = "127.0.0.1:29500";
  o.node_rank = 2;
  EXPECT_EQ(launch(o, err), 2);
  EXPECT_EQ(err, "--node-rank 2 is not a node of --nnodes 2 (0 to 1)");
  o.nnodes = 1;
  o.node_rank = 0;
  o.master = "127.0.0.1:0";
  o.argv = {"/no/such/program"};
  EXPECT_EQ(launch(o, err), 1);
  EXPECT_EQ(err, "cannot run /no/such/program: no such file");
  o.argv = {"no-such-program-on-path"};
  EXPECT_EQ(launch(o, err), 1);
  EXPECT_EQ(err, "cannot find no-such-program-on-path on PATH");
}

TEST(Launcher, ARankCannotLaunchRanks) {
  LaunchOptions o;
  o.argv = {DTL_LAUNCH_CHILD};
  ::setenv("DTL_LAUNCHED", "1", 1);
  std::string err;
  int code = launch(o, err);
  ::unsetenv("DTL_LAUNCHED");
  EXPECT_EQ(code, 2);
  EXPECT_EQ(err, "this process is already a rank of a dtl job (DTL_LAUNCHED=1), and a rank cannot launch more ranks");
}

TEST(Launcher, JobTokensAreFreshAndLong) {
  std::string a = randomJobToken(), b = randomJobToken();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
}

// The launcher as its own process (launch_child --launch), sent SIGTERM as a
// scheduler would: it forwards the signal and reports the interruption.
TEST(Launcher, ForwardsSigtermAndReportsTheInterruption) {
  std::string dir = ::testing::TempDir() + "launch_ready_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string log = dir + "/stderr";
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    ::dup2(fd, 2);
    ::execl(DTL_LAUNCH_CHILD, DTL_LAUNCH_CHILD, "--launch", "3", "--", "--steps", "100000", "--step-ms", "10",
            "--ready-dir", dir.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  auto start = Clock::now();
  while (msSince(start) < 10000 && !(std::filesystem::exists(dir + "/ready.0") &&
                                     std::filesystem::exists(dir + "/ready.1") && std::filesystem::exists(dir + "/ready.2")))
    std::this_thread::sleep_for(milliseconds(20));
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  auto sent = Clock::now();
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0 && msSince(sent) < 5000) std::this_thread::sleep_for(milliseconds(20));
  if (msSince(sent) >= 5000) ::kill(pid, SIGKILL), ::waitpid(pid, &status, 0);
  EXPECT_LT(msSince(sent), 5000);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_TRUE(contains(ss.str(), "launcher: interrupted by SIGTERM; every rank was stopped\n")) << ss.str();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dtl::rt::launch
