// Placements: where a value lives on the device mesh (shared by compiler and
// runtime). For each mesh axis a value is Replicate (every rank of the axis
// holds all of it), Shard(dim) (each rank holds its slice of `dim`) or
// Partial (each rank holds a summand of it). A flat shard (ZeRO, `zero =
// 1..3`) is Shard of a dim named `*D`: the value's dims from D on, as this
// rank holds them over the other axes, flattened and cut into equal pieces
// (the dims before D — a stacked parameter's `repeat` dims — are kept, so
// each layer's copy is cut on its own). A rank's local shape is a
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
  bool flat() const { return kind == Shard && isFlat(dim); }
  static bool isFlat(const std::string& dim) { return !dim.empty() && dim[0] == '*'; }
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

// A dim of D split over n ranks: rank r holds D / n elements, one more when
// r < D mod n (uneven splits: GPT-2's vocabulary of 50257 over tp = 2 is
// 25129 + 25128), starting at pieceStart.
inline int64_t pieceSize(int64_t d, int64_t n, int64_t r) { return d / n + (r < d % n ? 1 : 0); }
inline int64_t pieceStart(int64_t d, int64_t n, int64_t r) { return r * (d / n) + (r < d % n ? r : d % n); }

// The flat dim of `s` that keeps its first `keep` dims: `*` and the name of
// the first dim it flattens (`*` alone when there is none).
std::string flatDim(const Shape& s, size_t keep);
// Where the dims `flat` (a flatDim) merges start in `s`: the dim after the
// kept ones (s.rank() for a bare `*`); -1 when `s` lacks that dim.
int flatStart(const Shape& s, const std::string& flat);
// `s` with the dims from flatStart merged into one dim named `flat`; `s`
// itself when it has `flat` already or cannot be flattened so.
Shape flatView(const Shape& s, const std::string& flat);
// Whether `s` holds what `dim` names: the dim itself, or a flat dim's first
// merged dim (or a flattened view of it).
bool holds(const Shape& s, const std::string& dim);

// The part of `global` the rank at `coords` holds: a dim sharded over an
// axis is split into pieces (sharded over several axes, by each in mesh
// order). Without coords: coordinate 0's, the largest.
Shape localShape(const Shape& global, const std::vector<Placement>& placement, const std::vector<MeshAxis>& mesh,
                 const std::vector<int64_t>& coords = {});

// Where the rank's slice of `dim` starts in the global dim (0 when `dim` is
// not sharded): coordinate-major over the axes sharding it, in mesh order.
// For a flat dim: where its piece starts in the flattened block the rank
// holds over the other axes.
int64_t localOffset(const Shape& global, const std::string& dim, const std::vector<Placement>& placement,
                    const std::vector<MeshAxis>& mesh, const std::vector<int64_t>& coords);

// Whether every dim of `global` that `placement` shards divides evenly.
bool evenSplit(const Shape& global, const std::vector<Placement>& placement, const std::vector<MeshAxis>& mesh);

}  // namespace dtl::layout
