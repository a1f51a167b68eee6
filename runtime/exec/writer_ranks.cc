// Mesh coordinates with the last axis fastest; a piece's writer zeroes the
// coordinates of the axes it is replicated over.
#include "runtime/exec/writer_ranks.h"

#include <cstddef>

namespace dtl::rt {

std::vector<int64_t> meshCoords(const std::vector<int64_t>& sizes, int64_t rank) {
  std::vector<int64_t> coords(sizes.size(), 0);
  for (size_t a = sizes.size(); a-- > 0;) {
    int64_t n = sizes[a] > 0 ? sizes[a] : 1;
    coords[a] = rank % n;
    rank /= n;
  }
  return coords;
}

int64_t meshRank(const std::vector<int64_t>& sizes, const std::vector<int64_t>& coords) {
  int64_t rank = 0;
  for (size_t a = 0; a < sizes.size(); ++a) rank = rank * (sizes[a] > 0 ? sizes[a] : 1) + coords[a];
  return rank;
}

int64_t tensorWriter(const std::vector<int64_t>& sizes, const std::vector<bool>& sharded, int64_t rank) {
  std::vector<int64_t> coords = meshCoords(sizes, rank);
  for (size_t a = 0; a < coords.size(); ++a)
    if (a >= sharded.size() || !sharded[a]) coords[a] = 0;
  return meshRank(sizes, coords);
}

}  // namespace dtl::rt
