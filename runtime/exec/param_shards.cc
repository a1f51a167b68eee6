// param_shards.h: slicing a whole tensor to a rank's piece, and gathering
// the pieces back.
#include "runtime/exec/param_shards.h"

#include <algorithm>
#include <cstring>

namespace dtl::rt {

namespace {

std::vector<int64_t> sizesOf(const Shape& s) {
  std::vector<int64_t> out;
  for (const Dim& d : s.dims) out.push_back(d.size);
  return out;
}

int64_t count(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

}  // namespace

void copyBox(float* whole, const std::vector<int64_t>& dims, float* box, const std::vector<int64_t>& sizes,
             const std::vector<int64_t>& offsets, bool into_whole) {
  const size_t rank = dims.size();
  if (rank == 0) {
    if (into_whole) *whole = *box; else *box = *whole;
    return;
  }
  // Rows of the last dim are contiguous in both.
  const int64_t row = sizes[rank - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= sizes[d];
  std::vector<int64_t> at(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src = src * dims[d] + offsets[d] + at[d];
    float* w = whole + src;
    float* b = box + r * row;
    if (row > 0) std::memcpy(into_whole ? w : b, into_whole ? b : w, static_cast<size_t>(row) * 4);
    for (size_t d = rank - 1; d-- > 0;) {  // next row: the odometer over all but the last dim
      if (++at[d] < sizes[d]) break;
      at[d] = 0;
    }
  }
}

bool ShardOf::sharded() const {
  for (size_t a = 0; a < placement.size() && a < mesh.size(); ++a)
    if (placement[a].kind == layout::Placement::Shard && mesh[a].size > 1) return true;
  return false;
}

namespace {

// ZeRO's flat placement of `s`, if any: its axis (or -1); `named` gets `s`
// without it (the block this rank holds over the other axes).
int flatAxis(const ShardOf& s, ShardOf& named) {
  named = s;
  for (size_t a = 0; a < s.placement.size() && a < s.mesh.size(); ++a)
    if (s.placement[a].flat()) {
      named.placement[a] = layout::Placement{};
      return static_cast<int>(a);
    }
  return -1;
}

std::vector<float> takeNamed(const float* global, const ShardOf& s);

}  // namespace

std::vector<float> takeLocal(const float* global, const ShardOf& s) {
  ShardOf named;
  const int a = flatAxis(s, named);
  if (a < 0) return takeNamed(global, s);
  // The flat piece of each row (kept dims) of the block the other axes give.
  const std::vector<float> box = takeNamed(global, named);
  const std::string& flat = s.placement[static_cast<size_t>(a)].dim;
  const int64_t whole = layout::flatView(named.local(), flat).dims.back().size;
  const int64_t n = s.mesh[static_cast<size_t>(a)].size, r = s.coords[static_cast<size_t>(a)];
  const int64_t start = layout::pieceStart(whole, n, r), size = layout::pieceSize(whole, n, r);
  const int64_t outer = whole > 0 ? static_cast<int64_t>(box.size()) / whole : 0;
  std::vector<float> out(static_cast<size_t>(outer * size));
  for (int64_t o = 0; o < outer; ++o)
    std::copy(box.begin() + o * whole + start, box.begin() + o * whole + start + size, out.begin() + o * size);
  return out;
}

namespace {

std::vector<float> takeNamed(const float* global, const ShardOf& s) {
  const Shape local = s.local();
  const std::vector<int64_t> sizes = sizesOf(local);
  std::vector<int64_t> offsets;
  for (const Dim& d : s.global.dims) offsets.push_back(layout::localOffset(s.global, d.name, s.placement, s.mesh, s.coords));
  std::vector<float> out(static_cast<size_t>(count(sizes)));
  if (!out.empty()) copyBox(const_cast<float*>(global), sizesOf(s.global), out.data(), sizes, offsets, false);
  return out;
}

// ZeRO's flat pieces joined into the block the other axes give this rank:
// every rank sends its rows padded to the largest piece.
comm::Status gatherFlat(const std::vector<float>& local, const ShardOf& s, const ShardOf& named, size_t a,
                        const std::map<std::string, comm::Communicator*>& comms, std::vector<float>& out) {
  const std::string& flat = s.placement[a].dim;
  const int64_t whole = layout::flatView(named.local(), flat).dims.back().size;
  const int64_t n = s.mesh[a].size;
  const int64_t outer = whole > 0 ? named.local().elements().value_or(0) / whole : 0;
  const int64_t largest = layout::pieceSize(whole, n, 0), mine = layout::pieceSize(whole, n, s.coords[a]);
  auto c = comms.find(s.mesh[a].name);
  if (c == comms.end() || !c->second) return {false, "no process group for mesh axis `" + s.mesh[a].name + "`"};
  std::vector<float> send(static_cast<size_t>(outer * largest), 0.0f), blocks(static_cast<size_t>(n * outer * largest));
  for (int64_t o = 0; o < outer; ++o)
    std::copy(local.begin() + o * mine, local.begin() + (o + 1) * mine, send.begin() + o * largest);
  comm::Status st = c->second->allGather(send.data(), blocks.data(), outer * largest)->wait();
  if (!st.ok) return st;
  out.assign(static_cast<size_t>(outer * whole), 0.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < outer; ++o) {
      const float* from = blocks.data() + (r * outer + o) * largest;
      std::copy(from, from + layout::pieceSize(whole, n, r), out.begin() + o * whole + layout::pieceStart(whole, n, r));
    }
  return {};
}

comm::Status gatherNamed(const std::vector<float>& local, const ShardOf& s,
                         const std::map<std::string, comm::Communicator*>& comms, std::vector<float>& out);

}  // namespace

comm::Status gatherWhole(const std::vector<float>& local, const ShardOf& s,
                         const std::map<std::string, comm::Communicator*>& comms, std::vector<float>& out) {
  ShardOf named;
  const int a = flatAxis(s, named);
  if (a < 0 || s.mesh[static_cast<size_t>(a)].size <= 1) return gatherNamed(local, named, comms, out);
  std::vector<float> block;
  comm::Status st = gatherFlat(local, s, named, static_cast<size_t>(a), comms, block);
  if (!st.ok) return st;
  return gatherNamed(block, named, comms, out);
}

namespace {

comm::Status gatherNamed(const std::vector<float>& local, const ShardOf& s,
                         const std::map<std::string, comm::Communicator*>& comms, std::vector<float>& out) {
  out = local;
  std::vector<layout::Placement> left = s.placement;  // split over the axes not gathered yet
  std::vector<int64_t> dims = sizesOf(s.local());
  for (size_t a = std::min(s.placement.size(), s.mesh.size()); a-- > 0;) {
    const layout::Placement p = s.placement[a];
    if (p.kind != layout::Placement::Shard || s.mesh[a].size <= 1) continue;
    auto c = comms.find(s.mesh[a].name);
    if (c == comms.end() || !c->second) return {false, "no process group for mesh axis `" + s.mesh[a].name + "`"};
    comm::Communicator& comm = *c->second;
    const int k = s.global.find(p.dim);
    left[a] = layout::Placement{};
    const std::vector<int64_t> joined = sizesOf(layout::localShape(s.global, left, s.mesh, s.coords));
    const int64_t n = comm.size(), whole = joined[static_cast<size_t>(k)];
    // Every rank sends a block of the largest piece's size (uneven pieces padded).
    std::vector<int64_t> padded = dims;
    padded[static_cast<size_t>(k)] = layout::pieceSize(whole, n, 0);
    const int64_t block = count(padded);
    std::vector<float> send(static_cast<size_t>(block), 0.0f), blocks(static_cast<size_t>(n * block));
    if (!out.empty()) copyBox(send.data(), padded, out.data(), dims, std::vector<int64_t>(dims.size(), 0), true);
    comm::Status st = comm.allGather(send.data(), blocks.data(), block)->wait();
    if (!st.ok) return st;
    // Block r is rank r's piece, padded: its first pieceSize rows of dim k go to the piece's start.
    std::vector<float> next(static_cast<size_t>(count(joined)));
    for (int64_t r = 0; r < n; ++r) {
      std::vector<int64_t> piece = dims, offsets(dims.size(), 0);
      piece[static_cast<size_t>(k)] = layout::pieceSize(whole, n, r);
      offsets[static_cast<size_t>(k)] = layout::pieceStart(whole, n, r);
      std::vector<float> exact(static_cast<size_t>(count(piece)));
      if (!exact.empty()) {
        copyBox(blocks.data() + r * block, padded, exact.data(), piece, std::vector<int64_t>(dims.size(), 0), false);
        copyBox(next.data(), joined, exact.data(), piece, offsets, true);
      }
    }
    out = std::move(next);
    dims = joined;
  }
  return {};
}

}  // namespace

comm::Status sumOverShards(std::vector<float>& values, const ShardOf& s,
                           const std::map<std::string, comm::Communicator*>& comms) {
  for (size_t a = 0; a < s.placement.size() && a < s.mesh.size(); ++a) {
    if (s.placement[a].kind != layout::Placement::Shard || s.mesh[a].size <= 1) continue;
    auto c = comms.find(s.mesh[a].name);
    if (c == comms.end() || !c->second) return {false, "no process group for mesh axis `" + s.mesh[a].name + "`"};
    comm::Status st = c->second->allReduce(values.data(), static_cast<int64_t>(values.size()))->wait();
    if (!st.ok) return st;
  }
  return {};
}

}  // namespace dtl::rt
