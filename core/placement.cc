#include "core/placement.h"

#include <utility>

namespace dtl::layout {

std::string Placement::str() const {
  switch (kind) {
    case Replicate: return "R";
    case Shard: return "S(" + dim + ")";
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

Shape localShape(const Shape& global, const std::vector<Placement>& placement, const std::vector<MeshAxis>& mesh,
                 const std::vector<int64_t>& coords) {
  Shape local = global;
  for (size_t k = 0; k < local.dims.size(); ++k)
    local.dims[k].size = piece(global, static_cast<int>(k), placement, mesh, coords).second;
  return local;
}

int64_t localOffset(const Shape& global, const std::string& dim, const std::vector<Placement>& placement,
                    const std::vector<MeshAxis>& mesh, const std::vector<int64_t>& coords) {
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
