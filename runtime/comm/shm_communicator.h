// Knobs of the shared-memory communicator (makeShmCommunicator in
// communicator.h uses the defaults). Tests shrink the chunks to cross chunk
// boundaries with small tensors; the bench sweeps them. The sizes are rank
// 0's (the segment records them); spinMicros is each rank's own.
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/comm/communicator.h"

namespace dtl::rt::comm {

struct ShmTuning {
  size_t chunkBytes = 1 << 20;      // one staging buffer of one rank (there are two)
  size_t channelBytes = 256 << 10;  // one point-to-point ring buffer (one per ordered pair)
  size_t smallBytes = 64 << 10;     // all-reduces up to this size: every rank sums everything, one barrier
  // Spin this long before sleeping on a futex; 0 when ranks outnumber the
  // cores this process may run on, so waiting ranks do not starve the others.
  long spinMicros = -1;  // -1: 50 µs, or 0 when oversubscribed
};

std::unique_ptr<Communicator> makeShmCommunicator(const GroupOptions& o, const ShmTuning& t, Status& status);

}  // namespace dtl::rt::comm
