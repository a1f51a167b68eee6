// The engine of the shared-memory communicator: the ranks of one machine
// meeting in a ShmSegment. Collectives are synchronous calls, made by the
// communicator's worker thread; every rank must make the same calls with the
// same sizes. Waits spin briefly, then sleep on the rank's bell, and call
// `service` meanwhile (the communicator takes new operations and progresses
// point-to-point transfers there).
//
// Collectives move data in chunks through double-buffered staging: a chunk
// is written to buffer (phase & 1) of the writer's staging area, a barrier
// publishes it, readers copy it out before they arrive at the next phase's
// first barrier, and buffer (phase & 1) is written again only two phases
// later, after that barrier. So most collectives need one barrier per chunk,
// and so does a small all-reduce (every rank stages all of it and sums every
// rank's copy, in rank order); a large one needs two per chunk:
//   1. each rank copies its chunk, all but its own slice, into its staging;
//   2. barrier; rank r sums slice r over all ranks (its own slice from its
//      buffer) into its buffer and into its staging;
//   3. barrier; each rank copies every other slice's sum out of the staging
//      of the rank that made it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/shm_segment.h"
#include "runtime/comm/store.h"

namespace dtl::rt::comm {

struct ShmTuning;

class ShmGroup {
 public:
  // One direction of a point-to-point message in flight.
  struct Transfer {
    uint8_t* data = nullptr;
    size_t bytes = 0;
    int peer = 0, tag = 0;
    size_t done = 0;
    bool headerDone = false;
  };

  ShmGroup(std::unique_ptr<ShmSegment> seg, int rank, std::chrono::milliseconds timeout, const ShmTuning& t,
           std::function<bool()> service, std::function<bool()> stopping);

  int rank() const { return rank_; }
  int size() const { return size_; }

  Status allReduce(float* data, int64_t n);
  Status reduceScatter(const float* in, float* out, int64_t n);
  Status allGather(const float* in, float* out, int64_t n);
  Status broadcast(float* data, int64_t n, int root);
  Status allToAll(const float* in, float* out, int64_t n);
  Status barrierOp();  // Communicator::barrier

  // Moves what fits of a send into channel(rank, peer) / of a recv out of
  // channel(peer, rank); true if anything moved. A recv whose message does
  // not match (tag, size) sets `error`.
  bool pushSend(Transfer& t);
  bool pullRecv(Transfer& t, Status& error);

  // Waits until ready() (true) or the deadline (false), calling service().
  bool waitUntil(const std::function<bool()>& ready, std::chrono::steady_clock::time_point deadline);
  void wakeSelf();
  // Pid of rank r if its process no longer exists, else 0.
  int exitedPid(int r) const;
  // Pid of rank r if its process is stopped (SIGSTOP, a debugger), else 0.
  int stoppedPid(int r) const;

 private:
  size_t sliceStart(size_t k, int j) const;
  // Arrive, then wait for every rank; the error names the ranks missing.
  Status barrier(const char* op);
  // First barrier of a phase: also checks every rank called the same
  // operation with the same size.
  Status phaseBarrier(const char* op, uint64_t signature, int phaseBuffer);
  ShmRankControl& ctl(int r) const { return seg_->control(r); }

  std::unique_ptr<ShmSegment> seg_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  size_t chunkFloats_, smallFloats_;
  std::chrono::microseconds spin_, spinBudget_;
  int yields_;
  std::function<bool()> service_, stopping_;
  uint32_t epoch_ = 0;
  uint64_t phase_ = 0;
  std::vector<const float*> srcs_;
};

}  // namespace dtl::rt::comm
