// Which rank writes what, in terms of the mesh and a tensor's placement, so
// that it stays right for any layout: logs and metrics come from global rank
// 0 alone; a checkpoint holds whole tensors, written by rank 0 with the
// folder's index — a tensor split over `tp` is first gathered by the lowest
// ranks holding its pieces (writesTensor: the tp ranks whose other
// coordinates are 0, rank 0's tp group).
//
// Ranks are numbered as `dtlc run` lays them on the mesh: the last axis varies
// fastest (mesh dp = 2, tp = 2: rank = dp·2 + tp).
#pragma once

#include <cstdint>
#include <vector>

namespace dtl::rt {

// A rank's coordinate on each axis of a mesh of `sizes`.
std::vector<int64_t> meshCoords(const std::vector<int64_t>& sizes, int64_t rank);

// The rank at `coords`.
int64_t meshRank(const std::vector<int64_t>& sizes, const std::vector<int64_t>& coords);

inline bool writesLogs(int64_t global_rank) { return global_rank == 0; }

// The lowest rank holding the same piece of a tensor as `rank` does.
// `sharded[a]` says whether the tensor is split over axis a (each coordinate
// holds another piece); on the other axes (or when `sharded` is shorter than
// the mesh) it is replicated.
int64_t tensorWriter(const std::vector<int64_t>& sizes, const std::vector<bool>& sharded, int64_t rank);

inline bool writesTensor(const std::vector<int64_t>& sizes, const std::vector<bool>& sharded, int64_t rank) {
  return tensorWriter(sizes, sharded, rank) == rank;
}

}  // namespace dtl::rt
