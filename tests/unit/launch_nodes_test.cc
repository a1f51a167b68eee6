// Jobs across nodes and their limits: which address a rank's Gloo binds
// (bind_address.h, with a substitute view of the machine and with the real
// one), the interface variables, how many ranks a launcher may start
// (launch_limits.h), and two launchers of one job on loopback stopping each
// other when one node's ranks fail (node_watch.h). The same across two
// network namespaces: tests/e2e/two_nodes_netns.sh.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "runtime/launch/bind_address.h"
#include "runtime/launch/env.h"
#include "runtime/launch/launch_limits.h"
#include "runtime/launch/launcher.h"

namespace dtl::rt::launch {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ---- the bind address ----------------------------------------------------------

// A machine with loopback and one NIC; the kernel routes 10.0.0.0/8 via eth0.
NetView fakeNet(std::vector<std::string>* routed = nullptr) {
  NetView v;
  v.interfaces = [] {
    return std::vector<NetInterface>{{"lo", {"127.0.0.1", "::1"}},
                                     {"eth0", {"fe80::1", "10.1.2.3", "fd00::3"}},
                                     {"down0", {}}};
  };
  v.routeTo = [routed](const std::string& host, std::string& local, std::string& err) {
    if (routed) routed->push_back(host);
    if (host.rfind("127.", 0) == 0 || host == "localhost") return local = "127.0.0.1", true;
    if (host.rfind("10.", 0) == 0) return local = "10.1.2.3", true;
    err = "network is unreachable";
    return false;
  };
  return v;
}

std::string choose(const std::string& master, const std::string& iface, std::string& err,
                   std::vector<std::string>* routed = nullptr) {
  std::string address;
  err.clear();
  if (!chooseBindAddress(master, iface, "--iface", fakeNet(routed), address, err)) return "";
  return address;
}

TEST(BindAddress, TheAddressThatRoutesToTheMaster) {
  std::string err;
  std::vector<std::string> routed;
  // The bug: a rank of a job whose master is on another machine bound loopback.
  EXPECT_EQ(choose("10.9.9.9", "", err, &routed), "10.1.2.3") << err;
  EXPECT_EQ(routed, std::vector<std::string>{"10.9.9.9"});
  EXPECT_EQ(choose("127.0.0.1", "", err), "127.0.0.1") << err;
  EXPECT_EQ(choose("localhost", "", err), "127.0.0.1") << err;
}

TEST(BindAddress, AnInterfaceNamedWinsOverTheRoute) {
  std::string err;
  std::vector<std::string> routed;
  EXPECT_EQ(choose("10.9.9.9", "lo", err, &routed), "127.0.0.1") << err;
  EXPECT_TRUE(routed.empty());
  // The master's family; a link-local IPv6 address is never chosen.
  EXPECT_EQ(choose("10.9.9.9", "eth0", err), "10.1.2.3") << err;
  EXPECT_EQ(choose("fd00::9", "eth0", err), "fd00::3") << err;
  EXPECT_EQ(choose("127.0.0.1", "eth0", err), "10.1.2.3") << err;
}

TEST(BindAddress, ErrorsSayWhatToDo) {
  std::string err;
  EXPECT_EQ(choose("10.9.9.9", "eth9", err), "");
  EXPECT_EQ(err, "--iface eth9: no such interface (this machine has lo, eth0, down0)");
  EXPECT_EQ(choose("10.9.9.9", "down0", err), "");
  EXPECT_EQ(err, "--iface down0: the interface has no usable IPv4 or IPv6 address");
  EXPECT_EQ(choose("192.0.2.7", "", err), "");
  EXPECT_EQ(err, "cannot find this machine's address towards the master 192.0.2.7: network is unreachable; check "
                 "--master (MASTER_ADDR), or name the interface that reaches it with --iface (DTL_SOCKET_IFNAME)");
  std::string address;
  EXPECT_FALSE(chooseBindAddress("10.9.9.9", "eth9", "GLOO_SOCKET_IFNAME=", fakeNet(), address, err));
  EXPECT_EQ(err, "GLOO_SOCKET_IFNAME=eth9: no such interface (this machine has lo, eth0, down0)");
}

TEST(BindAddress, OnThisMachine) {
  std::string address, err;
  ASSERT_TRUE(chooseBindAddress("127.0.0.1", "", "--iface", systemNet(), address, err)) << err;
  EXPECT_EQ(address, "127.0.0.1");
  ASSERT_TRUE(chooseBindAddress("10.9.9.9", "lo", "--iface", systemNet(), address, err)) << err;
  EXPECT_EQ(address, "127.0.0.1");
  EXPECT_FALSE(chooseBindAddress("127.0.0.1", "no-such-if0", "--iface", systemNet(), address, err));
  EXPECT_EQ(err.rfind("--iface no-such-if0: no such interface (this machine has ", 0), 0u) << err;
  EXPECT_NE(err.find("lo"), std::string::npos) << err;
}

TEST(RankEnv, TheInterfaceComesFromDtlOrGlooVariables) {
  std::map<std::string, std::string> vars = {{"RANK", "0"},          {"WORLD_SIZE", "2"},
                                             {"LOCAL_RANK", "0"},    {"LOCAL_WORLD_SIZE", "1"},
                                             {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"},
                                             {"DTL_JOB_TOKEN", "t"}};
  auto lookup = [&](const char* n) -> const char* {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  RankEnv env;
  std::string err;
  ASSERT_TRUE(rankEnvFrom(lookup, env, err)) << err;
  EXPECT_EQ(env.iface, "");
  vars["GLOO_SOCKET_IFNAME"] = "eth1,eth2";
  ASSERT_TRUE(rankEnvFrom(lookup, env, err)) << err;
  EXPECT_EQ(env.iface, "eth1");
  EXPECT_EQ(env.iface_from, "GLOO_SOCKET_IFNAME=");
  vars["DTL_SOCKET_IFNAME"] = "ib0";
  ASSERT_TRUE(rankEnvFrom(lookup, env, err)) << err;
  EXPECT_EQ(env.iface, "ib0");
  EXPECT_EQ(env.iface_from, "DTL_SOCKET_IFNAME=");
}

// ---- how many ranks --------------------------------------------------------------

TEST(LaunchLimits, SharedMemoryGroupsHoldAtMost255Ranks) {
  FdLimit plenty{1 << 20, 1 << 20};
  EXPECT_EQ(rankLimitProblem({255, 1, 0, "shm"}, plenty), "");
  EXPECT_EQ(rankLimitProblem({1000, 1, 0, "shm"}, plenty),
            "--backend shm holds at most 255 ranks in a group, and this job has 1000 ranks; use --backend auto "
            "(Gloo for larger groups) or gloo, or start at most 255 ranks");
  EXPECT_EQ(rankLimitProblem({2, 2, 0, "shm"}, plenty),
            "--backend shm needs every rank on one machine, and --nnodes is 2; use --backend auto or gloo");
  // auto takes Gloo for a group shared memory cannot hold.
  EXPECT_EQ(rankLimitProblem({1000, 1, 0, "auto"}, plenty), "");
}

TEST(LaunchLimits, FileDescriptorsForGlooRanksAndTheLauncher) {
  // 1000 Gloo ranks: a socket per peer in each rank; the launcher relays two
  // pipes per rank and its store serves every rank.
  EXPECT_GE(rankFdsNeeded({1000, 1, 0, "auto"}), 1000u);
  EXPECT_LT(rankFdsNeeded({8, 1, 0, "auto"}), 100u);  // shared memory: no socket per peer
  EXPECT_GE(launcherFdsNeeded({1000, 1, 0, "auto"}), 4000u);
  EXPECT_LT(launcherFdsNeeded({4, 2, 1, "gloo"}), 100u);  // not node 0: no store
  EXPECT_EQ(rankLimitProblem({1000, 1, 0, "auto"}, {1024, 4096}),
            "1000 ranks need about " + std::to_string(launcherFdsNeeded({1000, 1, 0, "auto"})) +
                " open files in the launcher, but the limit is 1024 (ulimit -n; hard limit 4096): raise it (ulimit "
                "-n " + std::to_string(launcherFdsNeeded({1000, 1, 0, "auto"})) +
                ", or the hard limit in /etc/security/limits.conf) or start fewer ranks");
  EXPECT_EQ(rankLimitProblem({4, 1, 0, "auto"}, {1024, 4096}), "");
  EXPECT_EQ(rankLimitProblem({200, 8, 3, "gloo"}, {1024, 1024}).rfind("1600 ranks (200 on each of 8 nodes) need about ", 0),
            0u);
}

TEST(LaunchLimits, TheLauncherRefusesBeforeStartingAnyRank) {
  LaunchOptions o;
  o.nproc = 1000;
  o.backend = "shm";
  o.argv = {DTL_LAUNCH_CHILD, "--steps", "1"};
  std::string err;
  auto start = Clock::now();
  EXPECT_EQ(launch(o, err), 1);
  EXPECT_EQ(err, "--backend shm holds at most 255 ranks in a group, and this job has 1000 ranks; use --backend auto "
                 "(Gloo for larger groups) or gloo, or start at most 255 ranks");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  o.nproc = 2;
  o.backend = "auto";
  o.iface = "no-such-if0";
  EXPECT_EQ(launch(o, err), 2);
  EXPECT_EQ(err.rfind("--iface no-such-if0: no such interface (this machine has ", 0), 0u) << err;
}

// ---- two launchers of one job ----------------------------------------------------

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// One node's launcher as a process of its own (launch() allows one per
// process): launch_child --launch, its stderr in `log`.
pid_t startNode(int node, const std::string& master, const std::string& log, const std::vector<std::string>& rank_args) {
  std::vector<std::string> args = {DTL_LAUNCH_CHILD, "--launch",    "2",     "--nnodes",       "2",
                                   "--node-rank",    std::to_string(node), "--master", master, "--join-timeout",
                                   "60",             "--grace-ms",  "500",   "--"};
  args.insert(args.end(), rank_args.begin(), rank_args.end());
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  FILE* f = std::freopen(log.c_str(), "w", stderr);
  (void)f;
  ::setenv("DTL_JOB_TOKEN", "nodes-test-token", 1);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

struct NodeEnd {
  int code = -1;
  long long ms = 0;
  std::string log;
};

NodeEnd awaitNode(pid_t pid, const std::string& log, Clock::time_point start, milliseconds bound) {
  NodeEnd e;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() - start > bound) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  e.ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  e.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  e.log = ss.str();
  return e;
}

// A rank of node `failing` exits before joining: the other node's ranks would
// wait out the 60 s join timeout; their launcher must stop them at once.
void oneNodeFails(int failing) {
  std::string master = "127.0.0.1:" + std::to_string(freePort());
  std::string dir = ::testing::TempDir() + "launch_nodes_" + std::to_string(::getpid()) + "_";
  std::string bad_rank = std::to_string(failing * 2);  // local rank 0 of that node
  auto start = Clock::now();
  pid_t n0 = startNode(0, master, dir + "0.log", failing == 0 ? std::vector<std::string>{"--early-exit-rank", bad_rank}
                                                              : std::vector<std::string>{"--steps", "1"});
  pid_t n1 = startNode(1, master, dir + "1.log", failing == 1 ? std::vector<std::string>{"--early-exit-rank", bad_rank}
                                                              : std::vector<std::string>{"--steps", "1"});
  NodeEnd e0 = awaitNode(n0, dir + "0.log", start, milliseconds(30000));
  NodeEnd e1 = awaitNode(n1, dir + "1.log", start, milliseconds(30000));
  const NodeEnd& other = failing == 0 ? e1 : e0;
  const NodeEnd& bad = failing == 0 ? e0 : e1;
  std::string first = "node " + std::to_string(failing) + " failed: rank " + bad_rank + " (local rank 0 on ";
  EXPECT_EQ(bad.code, 1) << bad.log;
  EXPECT_NE(bad.log.find("launcher: " + first), std::string::npos) << bad.log;
  EXPECT_EQ(other.code, 1) << other.log;
  EXPECT_NE(other.log.find("launcher: " + first), std::string::npos) << other.log;
  EXPECT_NE(other.log.find("exited with status 1 before finishing a step; the other ranks were stopped; so node " +
                           std::to_string(1 - failing) + "'s ranks were stopped too"),
            std::string::npos)
      << other.log;
  EXPECT_LT(other.ms, 10000) << other.log;
  EXPECT_LT(bad.ms, 15000) << bad.log;
}

TEST(LauncherAcrossNodes, WhenNodeOnesRanksFailNodeZeroStopsWithinSeconds) { oneNodeFails(1); }
TEST(LauncherAcrossNodes, WhenNodeZerosRanksFailNodeOneStopsWithinSeconds) { oneNodeFails(0); }

TEST(LauncherAcrossNodes, BothNodesFinish) {
  std::string master = "127.0.0.1:" + std::to_string(freePort());
  std::string dir = ::testing::TempDir() + "launch_nodes_ok_" + std::to_string(::getpid()) + "_";
  auto start = Clock::now();
  pid_t n1 = startNode(1, master, dir + "1.log", {"--steps", "3"});
  pid_t n0 = startNode(0, master, dir + "0.log", {"--steps", "3"});
  NodeEnd e0 = awaitNode(n0, dir + "0.log", start, milliseconds(30000));
  NodeEnd e1 = awaitNode(n1, dir + "1.log", start, milliseconds(30000));
  EXPECT_EQ(e0.code, 0) << e0.log;
  EXPECT_EQ(e1.code, 0) << e1.log;
  EXPECT_NE(e0.log.find("rank 0 of 4 says hello"), std::string::npos) << e0.log;
  EXPECT_NE(e1.log.find("[rank 3] rank 3 of 4 says hello"), std::string::npos) << e1.log;
}

}  // namespace
}  // namespace dtl::rt::launch
