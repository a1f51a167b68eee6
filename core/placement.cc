#include "core/placement.h"

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

Shape localShape(const Shape& global, const std::vector<Placement>& placement, const std::vector<MeshAxis>& mesh) {
  Shape local = global;
  for (size_t a = 0; a < placement.size() && a < mesh.size(); ++a) {
    if (placement[a].kind != Placement::Shard || mesh[a].size <= 1) continue;
    const int k = local.find(placement[a].dim);
    if (k >= 0) local.dims[static_cast<size_t>(k)].size /= mesh[a].size;
  }
  return local;
}

int64_t localOffset(const Shape& global, const std::string& dim, const std::vector<Placement>& placement,
                    const std::vector<MeshAxis>& mesh, const std::vector<int64_t>& coords) {
  const int k = global.find(dim);
  if (k < 0) return 0;
  int64_t block = global.dims[static_cast<size_t>(k)].size, offset = 0;
  for (size_t a = 0; a < placement.size() && a < mesh.size(); ++a) {
    if (placement[a].kind != Placement::Shard || placement[a].dim != dim || mesh[a].size <= 1) continue;
    block /= mesh[a].size;
    offset += coords[a] * block;
  }
  return offset;
}

}  // namespace dtl::layout
