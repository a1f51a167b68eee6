// Placements: where a value lives on the device mesh (shared by compiler and
// runtime). For each mesh axis a value is Replicate (every rank of the axis
// holds all of it), Shard(dim) (each rank holds its slice of `dim`) or
// Partial (each rank holds a summand of it). A rank's local shape is a
// function of the global shape, the placements and its mesh coordinates —
// `localShape` — and every stage that needs a size on one rank (the program
// planner, the executor, the loader, the plan) calls it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"

namespace dtl::layout {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

struct Placement {
  enum Kind { Replicate, Shard, Partial } kind = Replicate;
  std::string dim;  // Shard
  bool max = false;  // Partial: the value is the largest of the ranks' values, not their sum
  std::string str() const;
  bool operator==(const Placement& o) const { return kind == o.kind && dim == o.dim && max == o.max; }
};

// The placements of every value of a laid-out graph: of[node][axis].
struct Layout {
  std::vector<MeshAxis> mesh;
  std::vector<std::vector<Placement>> of;
};

// A rank's place on the mesh: one coordinate per axis, in the mesh's order
// (the first axis varies slowest over global ranks).
std::vector<int64_t> meshCoords(const std::vector<MeshAxis>& mesh, int64_t global_rank);

// The part of `global` one rank holds: a dim sharded over an axis of size n
// is divided by n (sharded over several axes, by each). Splits are even: the
// checks refuse a dim that an axis does not divide before anything runs.
Shape localShape(const Shape& global, const std::vector<Placement>& placement, const std::vector<MeshAxis>& mesh);

// Where the rank's slice of `dim` starts in the global dim (0 when `dim` is
// not sharded): coordinate-major over the axes sharding it, in mesh order.
int64_t localOffset(const Shape& global, const std::string& dim, const std::vector<Placement>& placement,
                    const std::vector<MeshAxis>& mesh, const std::vector<int64_t>& coords);

}  // namespace dtl::layout
