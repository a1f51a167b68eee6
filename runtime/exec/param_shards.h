// A parameter's piece on one rank. Parameters (and their optimiser state)
// are held in their local shape — core/placement.h localShape of the global
// one — so a parameter split over `tp` takes 1/tp of the memory on each tp
// rank. What crosses the rank boundary stays mesh-free: initialisation
// makes the tensor one process would make and each rank keeps its piece;
// `--init` and `--resume` read whole tensors and slice them; a checkpoint
// gathers each sharded tensor whole before the folder writer saves it, so a
// checkpoint written on any mesh loads on any other.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/placement.h"
#include "runtime/comm/communicator.h"

namespace dtl::rt {

struct ShardOf {
  Shape global;
  std::vector<layout::Placement> placement;  // per mesh axis; empty: replicated
  std::vector<layout::MeshAxis> mesh;
  std::vector<int64_t> coords;  // this rank's
  Shape local() const { return layout::localShape(global, placement, mesh, coords); }
  bool sharded() const;  // split over any axis of size > 1
};

// Copies the box of `sizes` at `offsets` of a row-major tensor of `dims` to
// (or, with `into_whole`, from) a dense tensor of `sizes` (4-byte values).
void copyBox(float* whole, const std::vector<int64_t>& dims, float* box, const std::vector<int64_t>& sizes,
             const std::vector<int64_t>& offsets, bool into_whole);

// This rank's piece of a whole tensor (`global` holds global.elements() values).
std::vector<float> takeLocal(const float* global, const ShardOf& s);

// The whole tensor from every rank's piece: all-gathers over each axis the
// tensor is split on (the last axis first, so each gather joins contiguous
// blocks). Every rank of those axes must call it, in the same order.
comm::Status gatherWhole(const std::vector<float>& local, const ShardOf& s,
                         const std::map<std::string, comm::Communicator*>& comms, std::vector<float>& out);

// Sum of `values` over the ranks of every axis that `s` is split on (for a
// norm over a sharded tensor: each rank's sum of squares).
comm::Status sumOverShards(std::vector<float>& values, const ShardOf& s,
                           const std::map<std::string, comm::Communicator*>& comms);

}  // namespace dtl::rt
