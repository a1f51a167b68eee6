// The POSIX shared-memory segment behind the shared-memory communicator, and
// how ranks wake each other through it. Layout (every part 4 KiB aligned):
//   header | per-rank control blocks | per-rank staging (2 buffers each) |
//   size² one-way p2p channels (ring buffers, channel(src, dst)).
// A rank waits on its own `bell` (a futex word) after spinning; whoever
// changes something that rank waits for rings its bell. Nothing here knows
// about collectives.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/comm/store.h"

namespace dtl::rt::comm {

struct ShmGeometry {
  int size = 1;
  size_t chunkBytes = 0;    // one staging buffer of one rank
  size_t channelBytes = 0;  // one p2p ring buffer
  size_t smallBytes = 0;    // all-reduces up to this size take the one-barrier path
};

struct alignas(64) ShmRankControl {
  std::atomic<uint32_t> arrived;  // barrier epoch this rank last reached
  uint32_t pad;
  std::atomic<uint64_t> signature[2];  // operation and size, by phase parity
  char pad0[40];
  std::atomic<uint32_t> bell;      // futex word; bumped by whoever wakes this rank
  std::atomic<uint32_t> sleeping;  // 1 while the rank may be asleep on `bell`
  std::atomic<int32_t> pid;
  char pad1[52];
};

struct ShmChannel {
  alignas(64) std::atomic<uint64_t> head;  // bytes written so far (producer)
  alignas(64) std::atomic<uint64_t> tail;  // bytes consumed so far (consumer)
};

class ShmSegment {
 public:
  // Rank 0 creates (exclusively) and sizes the segment; the others open it.
  static Status create(const std::string& name, const ShmGeometry& g, std::unique_ptr<ShmSegment>& out);
  static Status open(const std::string& name, int expectedSize, std::unique_ptr<ShmSegment>& out);
  static void unlink(const std::string& name);
  ~ShmSegment();

  const ShmGeometry& geometry() const { return g_; }
  size_t bytes() const { return bytes_; }
  ShmRankControl& control(int r) const;
  float* staging(int r, int buffer) const;
  ShmChannel& channel(int src, int dst) const;
  uint8_t* channelData(int src, int dst) const { return reinterpret_cast<uint8_t*>(&channel(src, dst)) + 128; }

 private:
  ShmSegment(void* base, size_t bytes, const ShmGeometry& g);
  void* base_;
  size_t bytes_;
  ShmGeometry g_;
  size_t controlOff_, stagingOff_, channelOff_, channelStride_;
};

// Wakes the rank of `c` if it sleeps; call after publishing what it waits for.
void ringBell(ShmRankControl& c);
// Announces that the rank of `c` sleeps, then sleeps until its bell rings or
// `maxWait` passes, unless recheck() (called after the announcement, so no
// ring is lost) returns true.
template <class F>
void sleepOnBell(ShmRankControl& c, F&& recheck, std::chrono::microseconds maxWait);
void futexWait(std::atomic<uint32_t>& word, uint32_t seen, std::chrono::microseconds maxWait);

template <class F>
void sleepOnBell(ShmRankControl& c, F&& recheck, std::chrono::microseconds maxWait) {
  if (maxWait.count() <= 0) return;
  uint32_t seen = c.bell.load(std::memory_order_seq_cst);
  c.sleeping.store(1, std::memory_order_seq_cst);
  if (!recheck()) futexWait(c.bell, seen, maxWait);
  c.sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace dtl::rt::comm
