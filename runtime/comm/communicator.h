// The Communicator: collectives and point-to-point transfers on one process
// group (one mesh axis). Every operation is asynchronous — it returns a Work
// the caller waits on just before it needs the result — so gradient buckets
// overlap the backward pass. Buffers are f32 and must stay alive and
// untouched until wait() returns. Backends: Gloo over TCP, a shared-memory
// path for ranks on one machine, (later) NCCL and MPI.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/comm/store.h"

namespace dtl::rt::comm {

class Work {
 public:
  virtual ~Work() = default;
  virtual Status wait() = 0;  // blocks; the error names the peer or the timeout
  virtual bool done() = 0;    // non-blocking
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual const char* backend() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sum over ranks, in place: data[0, n).
  virtual std::unique_ptr<Work> allReduce(float* data, int64_t n) = 0;
  // in: size()·n values; out: n — rank r gets the sum of every rank's block r.
  virtual std::unique_ptr<Work> reduceScatter(const float* in, float* out, int64_t n) = 0;
  // in: n values; out: size()·n — block r is rank r's `in`.
  virtual std::unique_ptr<Work> allGather(const float* in, float* out, int64_t n) = 0;
  virtual std::unique_ptr<Work> broadcast(float* data, int64_t n, int root) = 0;
  // in, out: size()·n — block r of `in` goes to rank r, arriving as block (this rank) there.
  virtual std::unique_ptr<Work> allToAll(const float* in, float* out, int64_t n) = 0;
  virtual std::unique_ptr<Work> send(const float* data, int64_t n, int peer, int tag) = 0;
  virtual std::unique_ptr<Work> recv(float* data, int64_t n, int peer, int tag) = 0;
  virtual Status barrier() = 0;
};

// The shared-memory backend's largest group (its segment holds a channel per
// ordered pair of ranks).
inline constexpr int kShmMaxGroupSize = 255;

struct GroupOptions {
  std::shared_ptr<Store> store;
  std::string prefix;  // keys of this group in the store, e.g. "dp/0/"
  int rank = 0, size = 1;
  // How long an operation waits for the other ranks (`dtlc run
  // --collective-timeout`); the error then names the ranks that did not arrive.
  std::chrono::milliseconds timeout{300000};
  std::string host = "127.0.0.1";  // this rank's address for TCP transports
  // How long setting the group up waits for the other ranks to join it
  // (the job's join timeout); 0: `timeout`.
  std::chrono::milliseconds join_timeout{0};
  std::chrono::milliseconds joinTimeout() const { return join_timeout.count() > 0 ? join_timeout : timeout; }
};

// Both backends: collectives run in issue order on a worker thread per
// communicator (every rank must issue the same collectives in the same
// order); send/recv are posted at once and matched by (peer, tag) — on the
// shared-memory backend, also in issue order per pair of ranks. n == 0 is a
// no-op everywhere. A failure (timeout, lost peer) breaks the communicator:
// later operations fail at once, naming the first error. `prefix` must be
// unique per group within a store. Tuning and a store for forked ranks:
// shm_communicator.h, shm_store.h.
std::unique_ptr<Communicator> makeGlooCommunicator(const GroupOptions& o, Status& status);
// Ranks on one machine: collectives through a shared-memory segment.
std::unique_ptr<Communicator> makeShmCommunicator(const GroupOptions& o, Status& status);

}  // namespace dtl::rt::comm
