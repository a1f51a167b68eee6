#include "core/placement.h"

#include <algorithm>
#include <utility>

namespace dtl::layout {

std::string Placement::str() const {
  switch (kind) {
    case Replicate: return "R";
    case Shard: return isFlat(dim) ? "S(flat" + (dim.size() > 1 ? " " + dim.substr(1) + "…" : std::string()) + ")" : "S(" + dim + ")";
    case Partial: return max ? "P(max)" : "P";
  }
  return "?";
}

std::vector<int64_t> meshCoords(const std::vector<MeshAxis>& mesh, int64_t global_rank) {
  std::vector<int64_t> coords(mesh.size(), 0);
  int64_t stride = 1;
  for (size_t a = mesh.size(); a-- > 0;) {
    const int64_t n = mesh[a].size > 0 ? mesh[a].size : 1;
    coords[a] = (global_rank / stride) % n;
    stride *= n;
  }
  return coords;
}

namespace {

// The piece of dim `k` at `coords` (coordinate 0 where coords are missing):
// its start and size.
std::pair<int64_t, int64_t> piece(const Shape& global, int k, const std::vector<Placement>& placement,
                                  const std::vector<MeshAxis>& mesh, const std::vector<int64_t>& coords) {
  int64_t size = global.dims[static_cast<size_t>(k)].size, start = 0;
  const std::string& dim = global.dims[static_cast<size_t>(k)].name;
  for (size_t a = 0; a < placement.size() && a < mesh.size(); ++a) {
    if (placement[a].kind != Placement::Shard || placement[a].dim != dim || mesh[a].size <= 1) continue;
    const int64_t r = a < coords.size() ? coords[a] : 0;
    start += pieceStart(size, mesh[a].size, r);
    size = pieceSize(size, mesh[a].size, r);
  }
  return {start, size};
}

}  // namespace

std::string flatDim(const Shape& s, size_t keep) { return keep < s.dims.size() ? "*" + s.dims[keep].name : "*"; }

int flatStart(const Shape& s, const std::string& flat) {
  if (flat.size() <= 1) return static_cast<int>(s.dims.size());
  return s.find(flat.substr(1));
}

Shape flatView(const Shape& s, const std::string& flat) {
  const int k = flatStart(s, flat);
  if (k < 0 || s.has(flat)) return s;
  Shape out;
  int64_t merged = 1;
  for (size_t d = 0; d < s.dims.size(); ++d) {
    if (static_cast<int>(d) < k) out.dims.push_back(s.dims[d]);
    else merged *= s.dims[d].size;
  }
  out.dims.push_back({flat, merged});
  return out;
}

bool holds(const Shape& s, const std::string& dim) {
  if (s.has(dim)) return true;
  return Placement::isFlat(dim) && flatStart(s, dim) >= 0;
}

namespace {

// The local shape over the named (not flat) shards, and the flat
// placement's axis (or -1).
Shape namedPieces(const Shape& global, const std::vector<Placement>& placement, const std::vector<MeshAxis>& mesh,
                  const std::vector<int64_t>& coords, int& flat_axis) {
  Shape local = global;
  for (size_t k = 0; k < local.dims.size(); ++k)
    local.dims[k].size = piece(global, static_cast<int>(k), placement, mesh, coords).second;
  flat_axis = -1;
  for (size_t a = 0; a < placement.size() && a < mesh.size(); ++a)
    if (placement[a].flat() && flatStart(global, placement[a].dim) >= 0) flat_axis = static_cast<int>(a);
  return local;
}

}  // namespace

Shape localShape(const Shape& global, const std::vector<Placement>& placement, const std::vector<MeshAxis>& mesh,
                 const std::vector<int64_t>& coords) {
  int a = -1;
  Shape local = namedPieces(global, placement, mesh, coords, a);
  if (a < 0) return local;
  // Cut last: the flat piece is of what this rank holds over the other axes.
  local = flatView(local, placement[static_cast<size_t>(a)].dim);
  const int64_t n = std::max<int64_t>(mesh[static_cast<size_t>(a)].size, 1);
  const int64_t r = static_cast<size_t>(a) < coords.size() ? coords[static_cast<size_t>(a)] : 0;
  local.dims.back().size = pieceSize(local.dims.back().size, n, r);
  return local;
}

int64_t localOffset(const Shape& global, const std::string& dim, const std::vector<Placement>& placement,
                    const std::vector<MeshAxis>& mesh, const std::vector<int64_t>& coords) {
  if (Placement::isFlat(dim)) {
    int a = -1;
    const Shape local = flatView(namedPieces(global, placement, mesh, coords, a), dim);
    if (a < 0 || placement[static_cast<size_t>(a)].dim != dim || !local.has(dim)) return 0;
    const int64_t n = std::max<int64_t>(mesh[static_cast<size_t>(a)].size, 1);
    const int64_t r = static_cast<size_t>(a) < coords.size() ? coords[static_cast<size_t>(a)] : 0;
    return pieceStart(local.dims.back().size, n, r);
  }
  const int k = global.find(dim);
  return k < 0 ? 0 : piece(global, k, placement, mesh, coords).first;
}

bool evenSplit(const Shape& global, const std::vector<Placement>& placement, const std::vector<MeshAxis>& mesh) {
  for (size_t a = 0; a < placement.size() && a < mesh.size(); ++a) {
    if (placement[a].kind != Placement::Shard || mesh[a].size <= 1) continue;
    const int k = global.find(placement[a].dim);
    if (k >= 0 && global.dims[static_cast<size_t>(k)].size % mesh[a].size != 0) return false;
  }
  return true;
}

}  // namespace dtl::layout
