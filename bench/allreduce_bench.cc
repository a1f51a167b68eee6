// All-reduce bandwidth of the communicators, nccl-tests style: for each size
// (4 KiB … 256 MiB, float32 sum, in place) the time per operation and
// algbw = bytes / time, busbw = algbw · 2(n−1)/n. Ranks are processes
// forked from this one (bootstrapped through a fork-shared store) or, with
// --threads, threads of this process. Every rank holds a Gloo and a
// shared-memory communicator and runs both at each size, one after the
// other, so the columns are measured side by side. A time is the best of
// --blocks timed blocks in each of --repeat sweeps, a block's time being the
// slowest rank's mean.
//
// --compare FILE adds the busbw of another run (bench/mpi_allreduce_bench's
// output, same columns) and the ratios shm/MPI and shm/gloo; see
// bench/allreduce_vs_mpi.sh.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/comm/shm_store.h"

using namespace dtl::rt::comm;

namespace {

struct Options {
  int ranks = 2;
  bool threads = false;
  size_t minBytes = 4 << 10, maxBytes = size_t(256) << 20;
  int blocks = 3;
  int repeat = 1;  // whole sweeps; each time is the best over them
  double blockSeconds = 0.05;
  std::vector<std::string> backends = {"gloo", "shm"};
  ShmTuning shm;
  std::string compare;
};

struct Result {
  double seconds = 0;  // per operation
  bool correct = true;
};

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void check(const Status& s, const char* what) {
  if (s.ok) return;
  std::fprintf(stderr, "allreduce_bench: %s: %s\n", what, s.message.c_str());
  std::exit(2);
}

// One size on one communicator: a checked warm-up, then timed blocks.
Result measure(Communicator& c, std::vector<float>& buf, size_t count, const Options& o) {
  Result r;
  std::fill(buf.begin(), buf.begin() + count, float(c.rank() + 1));
  check(c.allReduce(buf.data(), count)->wait(), "warm-up all-reduce");
  const float want = c.size() * (c.size() + 1) / 2.0f;
  for (size_t i = 0; i < count; ++i)
    if (buf[i] != want) r.correct = false;
  std::fill(buf.begin(), buf.begin() + count, 0.0f);
  double t0 = now();
  check(c.allReduce(buf.data(), count)->wait(), "all-reduce");
  // Rank 0 picks the iteration count so every rank runs the same number.
  float iters = std::clamp(std::floor(o.blockSeconds / std::max(now() - t0, 1e-7)), 1.0, 2000.0);
  check(c.broadcast(&iters, 1, 0)->wait(), "broadcast");
  double best = 1e30;
  std::vector<float> times(c.size());
  for (int b = 0; b < o.blocks; ++b) {
    check(c.barrier(), "barrier");
    t0 = now();
    for (int i = 0; i < int(iters); ++i) check(c.allReduce(buf.data(), count)->wait(), "all-reduce");
    float mine = float((now() - t0) / iters);
    check(c.allGather(&mine, times.data(), 1)->wait(), "all-gather");
    best = std::min(best, double(*std::max_element(times.begin(), times.end())));
  }
  r.seconds = best;
  return r;
}

std::vector<size_t> sizes(const Options& o) {
  std::vector<size_t> s;
  for (size_t b = o.minBytes; b <= o.maxBytes; b *= 2) s.push_back(b);
  return s;
}

// Runs the sweep as one rank; rank 0 returns the results (backend, size).
std::map<std::pair<std::string, size_t>, Result> runRank(const std::shared_ptr<Store>& store, int rank,
                                                           const Options& o) {
  std::vector<std::unique_ptr<Communicator>> comms;
  for (auto& name : o.backends) {
    GroupOptions g{store, "bench/" + name + "/", rank, o.ranks, std::chrono::seconds(120)};
    Status s;
    comms.push_back(name == "gloo" ? makeGlooCommunicator(g, s) : makeShmCommunicator(g, o.shm, s));
    check(s, name.c_str());
  }
  std::vector<float> buf(o.maxBytes / sizeof(float));
  std::map<std::pair<std::string, size_t>, Result> results;
  for (int rep = 0; rep < o.repeat; ++rep)
    for (size_t bytes : sizes(o))
      for (size_t k = 0; k < comms.size(); ++k) {
        Result r = measure(*comms[k], buf, bytes / 4, o);
        auto [it, fresh] = results.try_emplace({o.backends[k], bytes}, r);
        if (!fresh) it->second = {std::min(it->second.seconds, r.seconds), it->second.correct && r.correct};
      }
  return results;
}

// size -> busbw from a file of "size count time algbw busbw" lines.
std::map<size_t, double> readCompare(const std::string& path) {
  std::map<size_t, double> m;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    double size, count, time, algbw, busbw;
    if (ls >> size >> count >> time >> algbw >> busbw) m[size_t(size)] = busbw;
  }
  return m;
}

void report(const std::map<std::pair<std::string, size_t>, Result>& results, const Options& o) {
  const double factor = 2.0 * (o.ranks - 1) / o.ranks;
  auto compare = o.compare.empty() ? std::map<size_t, double>{} : readCompare(o.compare);
  std::printf("# allreduce_bench: %d ranks (%s), float32 sum in place; best of %d blocks x %d sweeps, slowest rank\n",
              o.ranks, o.threads ? "threads" : "processes", o.blocks, o.repeat);
  std::printf("# busbw = algbw * 2(n-1)/n = algbw * %.3f\n#%11s %10s", factor, "size(B)", "count");
  for (auto& b : o.backends) std::printf(" | %-5s %10s %8s %8s", b.c_str(), "time(us)", "algbw", "busbw");
  if (!compare.empty()) std::printf(" | mpi busbw  shm/mpi");
  if (o.backends.size() == 2) std::printf(" shm/gloo");
  std::printf("\n");
  double logSumMpi = 0, logSumGloo = 0, minMpi = 1e30, minGloo = 1e30;
  int n = 0;
  for (size_t bytes : sizes(o)) {
    std::printf("%12zu %10zu", bytes, bytes / 4);
    std::map<std::string, double> busbw;
    for (auto& b : o.backends) {
      const Result& r = results.at({b, bytes});
      double alg = bytes / r.seconds / 1e9;
      busbw[b] = alg * factor;
      std::printf(" | %-5s %10.1f %8.3f %8.3f%s", "", r.seconds * 1e6, alg, alg * factor, r.correct ? "" : " WRONG");
    }
    double ratioMpi = 0, ratioGloo = 0;
    if (!compare.empty() && compare.count(bytes) && busbw.count("shm")) {
      ratioMpi = busbw["shm"] / compare[bytes];
      std::printf(" | %9.3f %8.2f", compare[bytes], ratioMpi);
    }
    if (busbw.count("shm") && busbw.count("gloo")) {
      ratioGloo = busbw["shm"] / busbw["gloo"];
      std::printf(" %8.2f", ratioGloo);
    }
    std::printf("\n");
    if (bytes >= (1 << 20) && ratioGloo > 0) {
      ++n;
      logSumGloo += std::log(ratioGloo);
      minGloo = std::min(minGloo, ratioGloo);
      if (ratioMpi > 0) logSumMpi += std::log(ratioMpi), minMpi = std::min(minMpi, ratioMpi);
    }
  }
  if (n) {
    std::printf("# from 1 MiB up: shm/gloo busbw geomean %.2f, min %.2f", std::exp(logSumGloo / n), minGloo);
    if (minMpi < 1e30) std::printf("; shm/mpi geomean %.2f, min %.2f", std::exp(logSumMpi / n), minMpi);
    std::printf("\n");
  }
}

size_t parseBytes(const char* s) {
  char* end;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
  }
  return size_t(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) std::fprintf(stderr, "allreduce_bench: %s needs a value\n", a.c_str()), std::exit(2);
      return argv[++i];
    };
    if (a == "--ranks") o.ranks = std::atoi(next());
    else if (a == "--threads") o.threads = true;
    else if (a == "--min-bytes") o.minBytes = parseBytes(next());
    else if (a == "--max-bytes") o.maxBytes = parseBytes(next());
    else if (a == "--blocks") o.blocks = std::atoi(next());
    else if (a == "--repeat") o.repeat = std::atoi(next());
    else if (a == "--block-seconds") o.blockSeconds = std::atof(next());
    else if (a == "--chunk-bytes") o.shm.chunkBytes = parseBytes(next());
    else if (a == "--small-bytes") o.shm.smallBytes = parseBytes(next());
    else if (a == "--spin-us") o.shm.spinMicros = std::atol(next());
    else if (a == "--compare") o.compare = next();
    else if (a == "--backends") {
      o.backends.clear();
      std::stringstream ss(next());
      for (std::string b; std::getline(ss, b, ',');) o.backends.push_back(b);
    } else {
      std::fprintf(stderr,
                   "usage: allreduce_bench [--ranks N] [--threads] [--min-bytes 4K] [--max-bytes 256M] "
                   "[--backends gloo,shm] [--blocks 3] [--repeat 1] [--block-seconds 0.05] [--chunk-bytes 1M] "
                   "[--small-bytes 64K] [--spin-us N] [--compare mpi.txt]\n");
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  std::map<std::pair<std::string, size_t>, Result> results;
  if (o.threads) {
    auto store = makeMemoryStore();
    std::vector<std::thread> threads;
    for (int r = 1; r < o.ranks; ++r) threads.emplace_back([&, r] { runRank(store, r, o); });
    results = runRank(store, 0, o);
    for (auto& t : threads) t.join();
  } else {
    auto store = makeForkSharedStore();
    std::vector<pid_t> children;
    for (int r = 1; r < o.ranks; ++r) {
      pid_t pid = fork();
      if (pid == 0) {
        runRank(store, r, o);
        std::fflush(nullptr);
        _exit(0);
      }
      children.push_back(pid);
    }
    results = runRank(store, 0, o);
    for (pid_t pid : children) waitpid(pid, nullptr, 0);
  }
  report(results, o);
  for (auto& [key, r] : results)
    if (!r.correct) return 1;
  return 0;
}
