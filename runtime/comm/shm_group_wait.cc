// ShmGroup's waiting (spin, yield, then sleep on the bell), its barriers
// (per-rank epoch counters, so a timeout can name the ranks that did not
// arrive) and its point-to-point ring buffers. Collectives are in
// shm_group.cc.
#include <immintrin.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/cpus.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/comm/shm_group.h"
#include "runtime/comm/work.h"

namespace dtl::rt::comm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

struct MessageHeader {
  int64_t tag;
  uint64_t bytes;
};

void ringWrite(uint8_t* ring, size_t cap, uint64_t pos, const void* src, size_t n) {
  size_t at = pos % cap, first = std::min(n, cap - at);
  std::memcpy(ring + at, src, first);
  std::memcpy(ring, static_cast<const uint8_t*>(src) + first, n - first);
}

void ringRead(const uint8_t* ring, size_t cap, uint64_t pos, void* dst, size_t n) {
  size_t at = pos % cap, first = std::min(n, cap - at);
  std::memcpy(dst, ring + at, first);
  std::memcpy(static_cast<uint8_t*>(dst) + first, ring, n - first);
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string describeSignature(uint64_t sig) {
  static const char* names[] = {"nothing", "allReduce", "reduceScatter", "allGather", "broadcast", "allToAll", "barrier"};
  uint64_t op = sig >> 56, n = sig & 0xffffffffffffull;
  std::string s = op < 7 ? names[op] : "an unknown operation";
  if (op == 6) return s;
  s += " of " + std::to_string(n) + " floats";
  if (op == 4) s += " from rank " + std::to_string((sig >> 48) & 0xff);
  return s;
}

}  // namespace

ShmGroup::ShmGroup(std::unique_ptr<ShmSegment> seg, int rank, milliseconds timeout, const ShmTuning& t,
                   std::function<bool()> service, std::function<bool()> stopping)
    : seg_(std::move(seg)),
      rank_(rank),
      size_(seg_->geometry().size),
      timeout_(timeout),
      chunkFloats_(seg_->geometry().chunkBytes / sizeof(float)),
      smallFloats_(std::min(seg_->geometry().smallBytes / sizeof(float), chunkFloats_)),
      service_(std::move(service)),
      stopping_(std::move(stopping)) {
  bool oversubscribed = size_ > usableCpus();
  spin_ = microseconds(t.spinMicros >= 0 ? t.spinMicros : (oversubscribed ? 0 : 50));
  spinBudget_ = spin_;
  yields_ = oversubscribed ? 2 : 8;
  ctl(rank_).pid.store(getpid());
}

// Spins for up to spinBudget_, yielding now and then so a rank that shares
// this core can run; then yields a few times; then sleeps on the bell. The
// budget follows the waits: twice a recent wait that was shorter than spin_
// (so it could have been spun through), halved after a longer one, so a
// loaded machine stops burning cores and an idle one stops sleeping.
bool ShmGroup::waitUntil(const std::function<bool()>& ready, Clock::time_point deadline) {
  if (ready()) return true;
  const auto start = Clock::now();
  auto adapt = [&] {
    auto waited = std::chrono::duration_cast<microseconds>(Clock::now() - start);
    if (waited < spin_)
      spinBudget_ = std::min(spin_, std::max(spinBudget_, 2 * waited + microseconds(1)));
    else
      spinBudget_ /= 2;
  };
  if (spinBudget_.count() > 0) {
    auto until = start + spinBudget_, nextYield = start + microseconds(4);
    for (unsigned i = 1;; ++i) {
      if (ready()) return adapt(), true;
      if (service_()) continue;
      _mm_pause();
      if ((i & 63) == 0) {
        auto now = Clock::now();
        if (now > until) break;
        if (now > nextYield) sched_yield(), nextYield = now + microseconds(4);
      }
    }
  }
  for (int y = 0; y < yields_; ++y) {
    if (ready()) return adapt(), true;
    if (!service_()) sched_yield();
  }
  for (;;) {
    if (ready()) return adapt(), true;
    if (service_()) continue;
    auto now = Clock::now();
    if (stopping_() || now >= deadline) return adapt(), ready();
    auto left = std::min<Clock::duration>(deadline - now, milliseconds(100));
    sleepOnBell(
        ctl(rank_), [&] { return ready() || service_() || stopping_(); },
        std::chrono::duration_cast<microseconds>(left) + microseconds(1));
  }
}

void ShmGroup::wakeSelf() {
  ShmRankControl& c = ctl(rank_);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  c.bell.fetch_add(1);
  ringBell(c);
}

namespace {

// The state letter of /proc/PID/stat (R, S, D, T, t, Z, X, …), or 0.
char processState(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : 0;
}

}  // namespace

// Gone, or a zombie its parent has not reaped yet.
int ShmGroup::exitedPid(int r) const {
  int pid = ctl(r).pid.load();
  if (pid <= 0 || pid == getpid()) return 0;
  if (kill(pid, 0) != 0) return errno == ESRCH ? pid : 0;
  char state = processState(pid);
  return state == 'Z' || state == 'X' ? pid : 0;
}

// Stopped by a signal (SIGSTOP, SIGTSTP) or a debugger.
int ShmGroup::stoppedPid(int r) const {
  int pid = ctl(r).pid.load();
  if (pid <= 0 || pid == getpid()) return 0;
  char state = processState(pid);
  return state == 'T' || state == 't' ? pid : 0;
}

Status ShmGroup::barrier(const char* op) {
  const uint32_t e = ++epoch_;
  ctl(rank_).arrived.store(e, std::memory_order_release);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) ringBell(ctl(r));
  auto arrived = [&](int r) { return int32_t(ctl(r).arrived.load(std::memory_order_acquire) - e) >= 0; };
  auto all = [&] {
    for (int r = 0; r < size_; ++r)
      if (!arrived(r)) return false;
    return true;
  };
  const auto deadline = Clock::now() + timeout_;
  for (;;) {
    if (waitUntil(all, std::min(deadline, Clock::now() + std::chrono::seconds(1)))) return {};
    std::vector<int> missing;
    std::string exited;
    for (int r = 0; r < size_; ++r) {
      if (arrived(r)) continue;
      missing.push_back(r);
      if (int pid = exitedPid(r))
        exited += (exited.empty() ? "" : ", ") + ("rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ")");
    }
    std::string what = "shared-memory " + std::string(op) + " on rank " + std::to_string(rank_);
    if (!exited.empty()) return Status::error(what + " failed: " + exited + " exited");
    if (stopping_()) return Status::error(what + " was interrupted: the communicator was destroyed");
    if (Clock::now() >= deadline) {
      std::string stopped;  // why they did not, when this machine can tell
      for (int r : missing)
        if (int pid = stoppedPid(r))
          stopped += (stopped.empty() ? "" : ", ") + ("rank " + std::to_string(r) + "'s process " + std::to_string(pid));
      return Status::error(what + " timed out after " + timeoutText(timeout_) + ": " + rankList(missing) +
                           " did not arrive" + (stopped.empty() ? "" : " (" + stopped + " is stopped)"));
    }
  }
}

Status ShmGroup::phaseBarrier(const char* op, uint64_t sig, int b) {
  ctl(rank_).signature[b].store(sig, std::memory_order_relaxed);
  if (Status s = barrier(op); !s.ok) return s;
  for (int r = 0; r < size_; ++r) {
    uint64_t other = ctl(r).signature[b].load(std::memory_order_relaxed);
    if (other != sig)
      return Status::error("shared-memory collectives do not match: rank " + std::to_string(r) + " called " +
                           describeSignature(other) + " where rank " + std::to_string(rank_) + " called " +
                           describeSignature(sig) + "; every rank must issue the same collectives in the same order");
  }
  return {};
}

bool ShmGroup::pushSend(Transfer& t) {
  ShmChannel& ch = seg_->channel(rank_, t.peer);
  uint8_t* ring = seg_->channelData(rank_, t.peer);
  const size_t cap = seg_->geometry().channelBytes;
  uint64_t head = ch.head.load(std::memory_order_relaxed);
  size_t space = cap - (head - ch.tail.load(std::memory_order_acquire));
  bool moved = false;
  if (!t.headerDone) {
    if (space < sizeof(MessageHeader)) return false;
    MessageHeader h{t.tag, t.bytes};
    ringWrite(ring, cap, head, &h, sizeof h);
    head += sizeof h;
    space -= sizeof h;
    t.headerDone = moved = true;
  }
  if (size_t m = std::min(space, t.bytes - t.done)) {
    ringWrite(ring, cap, head, t.data + t.done, m);
    head += m;
    t.done += m;
    moved = true;
  }
  if (moved) {
    ch.head.store(head, std::memory_order_release);
    ringBell(ctl(t.peer));
  }
  return moved;
}

bool ShmGroup::pullRecv(Transfer& t, Status& error) {
  ShmChannel& ch = seg_->channel(t.peer, rank_);
  const uint8_t* ring = seg_->channelData(t.peer, rank_);
  const size_t cap = seg_->geometry().channelBytes;
  uint64_t tail = ch.tail.load(std::memory_order_relaxed);
  size_t avail = ch.head.load(std::memory_order_acquire) - tail;
  bool moved = false;
  if (!t.headerDone) {
    if (avail < sizeof(MessageHeader)) return false;
    MessageHeader h;
    ringRead(ring, cap, tail, &h, sizeof h);
    if (h.tag != t.tag || h.bytes != t.bytes) {
      error = Status::error("shared-memory recv on rank " + std::to_string(rank_) + " from rank " +
                            std::to_string(t.peer) + " expected tag " + std::to_string(t.tag) + " (" +
                            std::to_string(t.bytes / 4) + " floats) but rank " + std::to_string(t.peer) +
                            " sent tag " + std::to_string(h.tag) + " (" + std::to_string(h.bytes / 4) +
                            " floats); between two ranks, sends and recvs must be issued in the same order");
      return false;
    }
    tail += sizeof h;
    avail -= sizeof h;
    t.headerDone = moved = true;
  }
  if (size_t m = std::min(avail, t.bytes - t.done)) {
    ringRead(ring, cap, tail, t.data + t.done, m);
    tail += m;
    t.done += m;
    moved = true;
  }
  if (moved) {
    ch.tail.store(tail, std::memory_order_release);
    ringBell(ctl(t.peer));
  }
  return moved;
}

}  // namespace dtl::rt::comm
