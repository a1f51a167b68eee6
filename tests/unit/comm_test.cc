// Tests for runtime/comm: the memory and fork-shared stores, and every
// collective and transfer of the Gloo and shared-memory communicators, with
// ranks as threads in one process (world sizes 1–4; tensors of 0, 1, odd and
// multi-chunk sizes), async ordering, timeouts that name the missing rank,
// ranks pinned to one core, and real processes (fork) including a peer
// that dies.
#include <gtest/gtest.h>
#include <chrono>
#include <random>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/comm/shm_store.h"

namespace dtl::rt::comm {
namespace {

using namespace std::chrono_literals;
using Factory = std::function<std::unique_ptr<Communicator>(const GroupOptions&, Status&)>;

constexpr int64_t kLarge = 3 * (1 << 20) + 7;  // all-reduce, broadcast
constexpr int64_t kLargeBlock = (1 << 18) + 3;  // per-rank block of reduce-scatter, all-gather, all-to-all

struct Backend {
  const char* name;
  Factory make;
  int64_t large = kLarge, largeBlock = kLargeBlock;
};

// Test names in ctest show the parameter; keep them stable and readable.
void PrintTo(const Backend& b, std::ostream* os) { *os << b.name; }

const Backend kGloo{"gloo", [](const GroupOptions& o, Status& s) { return makeGlooCommunicator(o, s); }};
const Backend kShm{"shm", [](const GroupOptions& o, Status& s) { return makeShmCommunicator(o, s); }};
// Tiny chunks and no small-message path: odd sizes cross many chunk boundaries.
const Backend kShmTiny{"shm_tiny_chunks", [](const GroupOptions& o, Status& s) {
                         ShmTuning t;
                         t.chunkBytes = 1024;
                         t.channelBytes = 512;
                         t.smallBytes = 0;
                         return makeShmCommunicator(o, t, s);
                       },
                       3 * (1 << 14) + 7, (1 << 12) + 3};

// Small integers, so every sum is exact in float whatever the order.
float value(int rank, int64_t i) { return float((i * 7 + rank * 13) % 101) - 50.0f; }

std::string uniquePrefix() {
  static std::atomic<int> n{0};
  return "group" + std::to_string(n++) + "/";
}

// Runs body(comm) for every rank of a group of `size` on its own thread.
void runRanks(const Backend& b, int size, const std::function<void(Communicator&)>& body,
              std::chrono::milliseconds timeout = 20s) {
  auto store = makeMemoryStore();
  std::string prefix = uniquePrefix();
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      GroupOptions o{store, prefix, r, size, timeout};
      Status s;
      auto comm = b.make(o, s);
      ASSERT_TRUE(s.ok) << s.message;
      ASSERT_EQ(comm->rank(), r);
      ASSERT_EQ(comm->size(), size);
      body(*comm);
    });
  }
  for (auto& t : threads) t.join();
}

// First index where `got` differs from `want(i)`, or -1.
int64_t firstMismatch(const std::vector<float>& got, const std::function<float(int64_t)>& want) {
  for (int64_t i = 0; i < int64_t(got.size()); ++i)
    if (got[i] != want(i)) return i;
  return -1;
}

class Collectives : public ::testing::TestWithParam<std::tuple<Backend, int>> {
 protected:
  const Backend& backend() const { return std::get<0>(GetParam()); }
  int size() const { return std::get<1>(GetParam()); }
  int64_t large() const { return backend().large; }
  int64_t largeBlock() const { return backend().largeBlock; }
  void run(const std::function<void(Communicator&)>& body) { runRanks(backend(), size(), body); }
};

TEST_P(Collectives, AllReduce) {
  run([&](Communicator& c) {
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(1001), large()}) {
      std::vector<float> x(n);
      for (int64_t i = 0; i < n; ++i) x[i] = value(c.rank(), i);
      Status s = c.allReduce(x.data(), n)->wait();
      ASSERT_TRUE(s.ok) << s.message;
      int64_t bad = firstMismatch(x, [&](int64_t i) {
        float sum = 0;
        for (int r = 0; r < c.size(); ++r) sum += value(r, i);
        return sum;
      });
      EXPECT_EQ(bad, -1) << "n=" << n << " rank " << c.rank();
    }
  });
}

TEST_P(Collectives, ReduceScatter) {
  run([&](Communicator& c) {
    const int p = c.size();
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(1001), largeBlock()}) {
      std::vector<float> in(n * p), out(n, -1.0f);
      for (int64_t i = 0; i < n * p; ++i) in[i] = value(c.rank(), i);
      Status s = c.reduceScatter(in.data(), out.data(), n)->wait();
      ASSERT_TRUE(s.ok) << s.message;
      int64_t bad = firstMismatch(out, [&](int64_t i) {
        float sum = 0;
        for (int r = 0; r < p; ++r) sum += value(r, c.rank() * n + i);
        return sum;
      });
      EXPECT_EQ(bad, -1) << "n=" << n << " rank " << c.rank();
    }
  });
}

TEST_P(Collectives, AllGather) {
  run([&](Communicator& c) {
    const int p = c.size();
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(1001), largeBlock()}) {
      std::vector<float> in(n), out(n * p, -1.0f);
      for (int64_t i = 0; i < n; ++i) in[i] = value(c.rank(), i);
      Status s = c.allGather(in.data(), out.data(), n)->wait();
      ASSERT_TRUE(s.ok) << s.message;
      EXPECT_EQ(firstMismatch(out, [&](int64_t i) { return value(i / n, i % n); }), -1) << "n=" << n;
    }
  });
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  run([&](Communicator& c) {
    for (int root = 0; root < c.size(); ++root) {
      for (int64_t n : {int64_t(0), int64_t(1), int64_t(1001), large()}) {
        std::vector<float> x(n);
        for (int64_t i = 0; i < n; ++i) x[i] = value(c.rank(), i);
        Status s = c.broadcast(x.data(), n, root)->wait();
        ASSERT_TRUE(s.ok) << s.message;
        EXPECT_EQ(firstMismatch(x, [&](int64_t i) { return value(root, i); }), -1) << "n=" << n << " root " << root;
      }
    }
  });
}

TEST_P(Collectives, AllToAll) {
  run([&](Communicator& c) {
    const int p = c.size(), me = c.rank();
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(1001), largeBlock()}) {
      std::vector<float> in(n * p), out(n * p, -1.0f);
      for (int64_t i = 0; i < n * p; ++i) in[i] = value(me, i);
      Status s = c.allToAll(in.data(), out.data(), n)->wait();
      ASSERT_TRUE(s.ok) << s.message;
      // Block j of out is block `me` of rank j's input.
      EXPECT_EQ(firstMismatch(out, [&](int64_t i) { return value(i / n, me * n + i % n); }), -1) << "n=" << n;
    }
  });
}

TEST_P(Collectives, SendRecvBothWaysAroundTheRing) {
  if (size() == 1) GTEST_SKIP() << "no peer";
  run([&](Communicator& c) {
    const int p = c.size(), me = c.rank(), right = (me + 1) % p, left = (me + p - 1) % p;
    // Everything posted before anything is waited on; messages larger than a
    // shared-memory channel must not deadlock.
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(1001), int64_t(300001)}) {
      std::vector<float> toRight(n), toLeft(n), fromLeft(n, -1.0f), fromRight(n, -1.0f);
      for (int64_t i = 0; i < n; ++i) toRight[i] = value(me, i), toLeft[i] = value(me, i + 5);
      auto a = c.send(toRight.data(), n, right, 7);
      auto b = c.send(toLeft.data(), n, left, 8);
      auto d = c.recv(fromLeft.data(), n, left, 7);
      auto e = c.recv(fromRight.data(), n, right, 8);
      for (auto* w : {&a, &b, &d, &e}) {
        Status s = (*w)->wait();
        ASSERT_TRUE(s.ok) << s.message;
      }
      EXPECT_EQ(firstMismatch(fromLeft, [&](int64_t i) { return value(left, i); }), -1) << "n=" << n;
      EXPECT_EQ(firstMismatch(fromRight, [&](int64_t i) { return value(right, i + 5); }), -1) << "n=" << n;
    }
  });
}

TEST_P(Collectives, BarrierHoldsEveryRankUntilAllArrive) {
  std::atomic<int> arrived[3] = {0, 0, 0};
  run([&](Communicator& c) {
    for (int round = 0; round < 3; ++round) {
      if (c.rank() == round % c.size()) std::this_thread::sleep_for(20ms);  // a late rank
      arrived[round]++;
      Status s = c.barrier();
      ASSERT_TRUE(s.ok) << s.message;
      EXPECT_EQ(arrived[round].load(), c.size()) << "round " << round;
    }
  });
}

TEST_P(Collectives, OutstandingOperationsCompleteInIssueOrder) {
  run([&](Communicator& c) {
    const int p = c.size(), me = c.rank();
    const int64_t n = 50001;
    std::vector<float> a(n), b(n), gathered(n * p), d(n);
    for (int64_t i = 0; i < n; ++i) a[i] = value(me, i), b[i] = value(me, i + 1), d[i] = value(me, i + 2);
    std::vector<std::unique_ptr<Work>> works;
    works.push_back(c.allReduce(a.data(), n));
    works.push_back(c.allGather(b.data(), gathered.data(), n));
    works.push_back(c.broadcast(d.data(), n, p - 1));
    works.push_back(c.allReduce(b.data(), n));  // b is only read by the all-gather before it
    Status last = works.back()->wait();
    ASSERT_TRUE(last.ok) << last.message;
    for (size_t k = 0; k + 1 < works.size(); ++k) EXPECT_TRUE(works[k]->done()) << "operation " << k;
    for (auto it = works.rbegin(); it != works.rend(); ++it) EXPECT_TRUE((*it)->wait().ok);
    auto sum = [&](int64_t shift) {
      return [=](int64_t i) {
        float s = 0;
        for (int r = 0; r < p; ++r) s += value(r, i + shift);
        return s;
      };
    };
    EXPECT_EQ(firstMismatch(a, sum(0)), -1);
    EXPECT_EQ(firstMismatch(b, sum(1)), -1);
    EXPECT_EQ(firstMismatch(gathered, [&](int64_t i) { return value(i / n, i % n + 1); }), -1);
    EXPECT_EQ(firstMismatch(d, [&](int64_t i) { return value(p - 1, i + 2); }), -1);
  });
}

INSTANTIATE_TEST_SUITE_P(Comm, Collectives,
                         ::testing::Combine(::testing::Values(kGloo, kShm, kShmTiny), ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_world" +
                                  std::to_string(std::get<1>(info.param));
                         });

// --- Failures ---------------------------------------------------------------

// Ranks 0 and 1 all-reduce; rank 2 never calls. Returns the errors of 0 and 1
// and the error of a later operation on rank 0.
std::vector<std::string> allReduceWithoutRank2(const Backend& b) {
  std::vector<std::string> errors(3);
  runRanks(
      b, 3,
      [&](Communicator& c) {
        if (c.rank() == 2) return;
        std::vector<float> x(1001, 1.0f);
        Status s = c.allReduce(x.data(), x.size())->wait();
        errors[c.rank()] = s.ok ? "ok" : s.message;
        if (c.rank() == 0) {
          Status later = c.allReduce(x.data(), x.size())->wait();
          errors[2] = later.ok ? "ok" : later.message;
        }
      },
      300ms);
  return errors;
}

TEST(CommFailures, ShmTimeoutNamesTheRankThatNeverCalled) {
  auto e = allReduceWithoutRank2(kShm);
  EXPECT_EQ(e[0], "shared-memory allReduce on rank 0 timed out after 300 ms: rank 2 did not arrive");
  EXPECT_EQ(e[1], "shared-memory allReduce on rank 1 timed out after 300 ms: rank 2 did not arrive");
  EXPECT_EQ(e[2], "shared-memory allReduce not run: an earlier operation failed: " + e[0]);
}

TEST(CommFailures, GlooTimeoutNamesTheRankThatNeverCalled) {
  auto e = allReduceWithoutRank2(kGloo);
  for (int r = 0; r < 2; ++r) {
    std::string head = "gloo allReduce (operation 0) failed on rank " + std::to_string(r) + ": ";
    std::string tail = "; rank 2 did not reach it within 300 ms";
    EXPECT_EQ(e[r].substr(0, head.size()), head) << e[r];
    ASSERT_GE(e[r].size(), tail.size());
    EXPECT_EQ(e[r].substr(e[r].size() - tail.size()), tail) << e[r];
  }
  EXPECT_EQ(e[2], "gloo allReduce not run: an earlier operation failed: " + e[0]);
}

TEST(CommFailures, RankThatNeverJoinsIsNamed) {
  for (const Backend* b : {&kGloo, &kShm}) {
    auto store = makeMemoryStore();
    std::string prefix = uniquePrefix();
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        Status s;
        auto c = b->make(GroupOptions{store, prefix, r, 3, 300ms}, s);
        errors[r] = s.ok ? "ok" : s.message;
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) {
      if (std::string(b->name) == "gloo")
        EXPECT_NE(errors[r].find("rank 2 did not join the gloo group '" + prefix + "gloo/' within 300 ms"),
                  std::string::npos)
            << errors[r];
      else
        EXPECT_EQ(errors[r], "shared memory: rank 2 did not join group '" + prefix + "' within 300 ms");
    }
  }
}

TEST(CommFailures, ShmMismatchedCollectivesAreReported) {
  std::vector<std::string> errors(2);
  runRanks(kShm, 2, [&](Communicator& c) {
    std::vector<float> x(1000 + c.rank());
    Status s = c.allReduce(x.data(), x.size())->wait();
    errors[c.rank()] = s.ok ? "ok" : s.message;
  });
  EXPECT_EQ(errors[0],
            "shared-memory collectives do not match: rank 1 called allReduce of 1001 floats where rank 0 called "
            "allReduce of 1000 floats; every rank must issue the same collectives in the same order");
}

TEST(CommFailures, ShmRecvOfTheWrongTagIsReported) {
  std::string error;
  runRanks(kShm, 2, [&](Communicator& c) {
    std::vector<float> x(10);
    if (c.rank() == 0) {
      EXPECT_TRUE(c.send(x.data(), 10, 1, 5)->wait().ok);
    } else {
      Status s = c.recv(x.data(), 10, 0, 6)->wait();
      error = s.ok ? "ok" : s.message;
    }
  });
  EXPECT_EQ(error,
            "shared-memory recv on rank 1 from rank 0 expected tag 6 (10 floats) but rank 0 sent tag 5 (10 "
            "floats); between two ranks, sends and recvs must be issued in the same order");
}

double cpuSeconds() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Four ranks, eight threads, one core: waiting ranks must sleep, not spin
// away the core the others need. Judged by CPU time, which a loaded machine
// does not inflate: spinning ranks would burn it for the whole run.
TEST(CommScheduling, ShmFourRanksOnOneCoreDoNotLivelock) {
  cpu_set_t old, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof old, &old), 0);
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &old)) {
      CPU_SET(c, &one);
      break;
    }
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);  // threads started below inherit it
  double start = cpuSeconds();
  runRanks(kShm, 4, [&](Communicator& c) {
    for (int i = 0; i < 200; ++i) {
      std::vector<float> x(i % 2 ? 4096 : 300001, 1.0f);
      ASSERT_TRUE(c.allReduce(x.data(), x.size())->wait().ok);
      ASSERT_EQ(x.back(), 4.0f) << "iteration " << i;
    }
  });
  double used = cpuSeconds() - start;
  ASSERT_EQ(sched_setaffinity(0, sizeof old, &old), 0);
  EXPECT_LT(used, 5.0);
}

// An operation submitted while the worker is between waits must start at
// once. (A bug: when the worker's idle wait took the new operation off the
// queue itself, it slept on until its 1 s wake-up — seen as 1 s stalls of a
// data-parallel step every hundred steps or so.) Small all-reduces with
// gaps around the worker's spin time hit that window.
TEST(CommScheduling, ShmOperationsSubmittedWhileTheWorkerIdlesStartAtOnce) {
  std::atomic<double> worst{0};
  runRanks(kShm, 2, [&](Communicator& c) {
    std::mt19937 rng(static_cast<unsigned>(c.rank()) + 7);
    for (int i = 0; i < 4000; ++i) {
      // Mostly within the worker's spin (tens of microseconds), now and then past it.
      std::this_thread::sleep_for(std::chrono::microseconds(i % 16 ? rng() % 80 : rng() % 1000));
      float x = 1.0f;
      auto t0 = std::chrono::steady_clock::now();
      ASSERT_TRUE(c.allReduce(&x, 1)->wait().ok);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double w = worst.load();
      while (s > w && !worst.compare_exchange_weak(w, s)) {
      }
    }
  });
  // The peer sleeps at most 1 ms between operations: 0.5 s is far above any
  // honest wait on a busy machine and far below the 1 s of the bug.
  EXPECT_LT(worst.load(), 0.5);
}

// --- Processes --------------------------------------------------------------

// Forks size-1 children; rank 0 runs in this process. Each child exits with 0
// if body returned true.
bool runProcesses(int size, std::chrono::milliseconds timeout, const std::function<bool(Communicator&)>& body) {
  auto store = makeForkSharedStore();
  std::string prefix = uniquePrefix();
  std::vector<pid_t> children;
  for (int r = 1; r < size; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      Status s;
      auto c = makeShmCommunicator(GroupOptions{store, prefix, r, size, timeout}, s);
      if (!s.ok) std::fprintf(stderr, "rank %d: %s\n", r, s.message.c_str());
      _exit(s.ok && body(*c) ? 0 : 1);
    }
    children.push_back(pid);
  }
  Status s;
  auto c = makeShmCommunicator(GroupOptions{store, prefix, 0, size, timeout}, s);
  if (!s.ok) std::fprintf(stderr, "rank 0: %s\n", s.message.c_str());
  bool ok = s.ok && body(*c);
  c.reset();
  for (pid_t pid : children) {
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    ok = ok && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
  }
  return ok;
}

TEST(CommProcesses, ForkSharedStoreCrossesFork) {
  auto store = makeForkSharedStore();
  pid_t pid = fork();
  if (pid == 0) {
    int64_t v = 0;
    store->add("count", 5, v);
    _exit(store->set("k", {1, 2, 3}).ok ? 0 : 1);
  }
  std::vector<uint8_t> v;
  Status s = store->get("k", v, 5s);
  ASSERT_TRUE(s.ok) << s.message;
  EXPECT_EQ(v, (std::vector<uint8_t>{1, 2, 3}));
  int64_t count = 0;
  ASSERT_TRUE(store->add("count", 1, count).ok);
  EXPECT_EQ(count, 6);
  int wstatus;
  waitpid(pid, &wstatus, 0);
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
  EXPECT_EQ(store->get("missing", v, 10ms).message, "store: key 'missing' was not set within 10 ms");
}

TEST(CommProcesses, ShmAllReduceAcrossThreeProcesses) {
  bool ok = runProcesses(3, 20s, [](Communicator& c) {
    auto fail = [&](const std::string& what) {
      std::fprintf(stderr, "rank %d: %s\n", c.rank(), what.c_str());
      return false;
    };
    std::vector<float> x(kLarge);
    for (int64_t i = 0; i < kLarge; ++i) x[i] = value(c.rank(), i);
    if (Status s = c.allReduce(x.data(), x.size())->wait(); !s.ok) return fail(s.message);
    for (int64_t i = 0; i < kLarge; ++i)
      if (x[i] != value(0, i) + value(1, i) + value(2, i)) return fail("wrong sum at " + std::to_string(i));
    std::vector<float> mine(1001, float(c.rank())), y(1001, -1.0f);
    auto s = c.send(mine.data(), mine.size(), (c.rank() + 1) % 3, 1);
    auto r = c.recv(y.data(), y.size(), (c.rank() + 2) % 3, 1);
    if (Status st = s->wait(); !st.ok) return fail(st.message);
    if (Status st = r->wait(); !st.ok) return fail(st.message);
    return y[1000] == float((c.rank() + 2) % 3) || fail("wrong message");
  });
  EXPECT_TRUE(ok);
}

TEST(CommProcesses, ShmPeerThatDiesIsNamedLongBeforeTheTimeout) {
  std::string error;
  auto start = std::chrono::steady_clock::now();
  runProcesses(2, 60s, [&](Communicator& c) {
    if (c.rank() == 1) _exit(3);  // a crash: joined the group, never calls
    std::vector<float> x(10);
    Status s = c.allReduce(x.data(), x.size())->wait();
    error = s.message;
    return !s.ok;
  });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(error.find("shared-memory allReduce on rank 0 failed: rank 1 (pid "), std::string::npos) << error;
  EXPECT_NE(error.find(") exited"), std::string::npos) << error;
  EXPECT_LT(seconds, 30.0);
}

// --- Memory store -----------------------------------------------------------

TEST(MemoryStore, SetGetAddWait) {
  auto s = makeMemoryStore();
  std::vector<uint8_t> v;
  EXPECT_EQ(s->get("a", v, 5ms).message, "store: key 'a' was not set within 5 ms");
  ASSERT_TRUE(s->set("a", {7}).ok);
  ASSERT_TRUE(s->get("a", v, 5ms).ok);
  EXPECT_EQ(v, std::vector<uint8_t>{7});
  int64_t n = 0;
  ASSERT_TRUE(s->add("c", 2, n).ok);
  ASSERT_TRUE(s->add("c", 3, n).ok);
  EXPECT_EQ(n, 5);
  EXPECT_EQ(s->add("a", 1, n).message, std::string("store: key 'a' holds '\x07', not a counter"));
  EXPECT_EQ(s->wait({"a", "b", "c", "d"}, 5ms).message, "store: keys 'b', 'd' were not set within 5 ms");
  std::thread late([&] {
    std::this_thread::sleep_for(10ms);
    s->set("b", {});
  });
  EXPECT_TRUE(s->wait({"a", "b"}, 5s).ok);
  late.join();
}

}  // namespace
}  // namespace dtl::rt::comm
