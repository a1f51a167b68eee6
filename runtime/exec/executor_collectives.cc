// How each collective moves its bytes: a group starts (its members' data
// packed into the group's buffer where it must be: buckets, padded uneven
// pieces, blocks per rank) and is waited for (the received data put in
// place: gathered blocks along their dim, a reduce-scatter's own block, an
// all-to-all's blocks, the largest of a max all-reduce).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "runtime/exec/executor.h"
#include "runtime/exec/param_shards.h"

namespace dtl::rt {

namespace {

// Rows [from_row0, from_row0 + rows) of dim k of a tensor seen as [outer,
// from_rows, inner] into rows [to_row0, …) of one seen as [outer, to_rows,
// inner].
void copyRows(const float* from, int64_t outer, int64_t from_rows, int64_t inner, int64_t from_row0, float* to,
              int64_t to_rows, int64_t to_row0, int64_t rows) {
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(to + (o * to_rows + to_row0) * inner, from + (o * from_rows + from_row0) * inner,
                static_cast<size_t>(rows * inner) * 4);
}

// outer and inner sizes around dim k.
std::pair<int64_t, int64_t> around(const Shape& s, int k) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < k; ++d) outer *= s.dims[static_cast<size_t>(d)].size;
  for (size_t d = static_cast<size_t>(k) + 1; d < s.dims.size(); ++d) inner *= s.dims[d].size;
  return {outer, inner};
}

}  // namespace

KernelStatus Executor::start(const prog::Schedule& s, int group, int after_node, int64_t nodes_left, const RunContext& ctx) {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  auto c = comms_.find(g.axis);
  comm::Communicator* comm = c == comms_.end() ? nullptr : c->second;
  if (g.bucket >= 0 && g.op == ir::Op::ReduceScatter) {
    bucket_events_.push_back({g.bucket, after_node, nodes_left});
    return startScatterBucket(s, group, ctx, comm);
  }
  const bool defer = ctx.defer_buckets;
  if (g.bucket >= 0) {
    float* flat = buffer(group);
    for (int m : g.members) {  // the gradients not computed in place
      const TensorView& src = views_[static_cast<size_t>(program_[m].inputs[0])];
      TensorView& out = views_[static_cast<size_t>(m)];
      out = src;
      out.shape = program_[m].shape;
      out.data = place(s, m);
      if (src.data != out.data) std::memcpy(out.data, src.data, static_cast<size_t>(src.elements) * 4);
    }
    if (comm && !defer) work_[static_cast<size_t>(group)] = comm->allReduce(flat, bufferSize(group));
    bucket_events_.push_back({g.bucket, after_node, nodes_left});
    return {};
  }
  const int m = g.members[0];
  const ir::Node& n = program_[m];
  TensorView in = views_[static_cast<size_t>(n.inputs[0])];
  TensorView& out = views_[static_cast<size_t>(m)];
  out.shape = n.shape;
  out.dtype = n.dtype;
  out.elements = n.shape.elements().value_or(0);
  out.data = place(s, m);
  // ZeRO's flat pieces move as rows of the value with its flat dim merged.
  if (!n.names.empty() && layout::Placement::isFlat(n.names[0])) in.shape = layout::flatView(in.shape, n.names[0]);
  if (n.op == ir::Op::ReduceScatter) return reduceScatter(group, in, out, comm);
  if (n.op == ir::Op::AllToAll) return allToAll(group, in, out, comm);
  if (n.op == ir::Op::AllReduce && g.elements > 0 && comm) {
    // The largest: every rank's values, compared at wait() (largestOf).
    work_[static_cast<size_t>(group)] = comm->allGather(in.f(), buffer(group), in.elements);
    return {};
  }
  if (n.op == ir::Op::AllReduce || !comm) {
    // Without a communicator (a one-rank axis) a collective is a copy.
    const int64_t n_in = std::min(in.elements, out.elements);
    std::memmove(out.data, in.data, static_cast<size_t>(n_in) * 4);  // a ZeRO piece may be in place already
    if (out.elements > n_in) std::memset(out.f() + n_in, 0, static_cast<size_t>(out.elements - n_in) * 4);
    if (comm) work_[static_cast<size_t>(group)] = comm->allReduce(out.f(), out.elements);
    return {};
  }
  if (n.op == ir::Op::AllGather && !n.names.empty() && in.shape.find(n.names[0]) >= 0) {
    // Gathering the leading dim evenly is a concatenation of the ranks'
    // blocks; another dim's blocks, or uneven ones (padded to the largest),
    // arrive in the group's buffer and are put in place at wait().
    if (g.elements == 0) {
      work_[static_cast<size_t>(group)] = comm->allGather(in.f(), out.f(), in.elements);
      return {};
    }
    const int64_t block = bufferSize(group) / comm->size();
    const float* send = in.f();
    if (block != in.elements) {  // a smaller piece: padded along the gathered dim
      std::vector<float>& pad = padded_[group];
      pad.assign(static_cast<size_t>(block), 0.0f);
      const int k = in.shape.find(n.names[0]);
      const auto [outer, inner] = around(in.shape, k);
      const int64_t part = in.shape.dims[static_cast<size_t>(k)].size;
      copyRows(in.f(), outer, part, inner, 0, pad.data(), block / std::max<int64_t>(outer * inner, 1), 0, part);
      send = pad.data();
    }
    work_[static_cast<size_t>(group)] = comm->allGather(send, buffer(group), block);
    return {};
  }
  return {false, std::string(ir::opName(n.op)) + " over `" + n.name + "` is not built yet"};
}


// A bucket of ZeRO reduce-scatters: block r of the group's buffer holds, for
// each member in turn, rank r's flat piece of its gradient (every row of its
// kept dims, padded to the largest piece); the blocks are reduce-scattered
// into the block after them, where each member's result is (compacted at
// wait() when its rows are shorter than the padded ones). With
// `scatter_add` the pieces are added to the blocks (a step's micro-batches,
// `zero = 1`), and with `scatter_defer` the launch waits for the last one.
KernelStatus Executor::startScatterBucket(const prog::Schedule& s, int group, const RunContext& ctx,
                                          comm::Communicator* comm) {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  const int64_t ranks = axisRanks(g.axis);
  float* flat = buffer(group);
  const int64_t block = bufferSize(group) / (ranks + 1);
  if (!ctx.scatter_add) std::fill(flat, flat + ranks * block, 0.0f);
  int64_t at = 0;  // the member's place within a block
  for (int m : g.members) {
    const ir::Node& n = program_[m];
    const TensorView& src = views_[static_cast<size_t>(n.inputs[0])];
    const Shape v = layout::flatView(src.shape, n.names[0]);
    const int64_t whole = v.dims.back().size, outer = whole > 0 ? src.elements / whole : 0;
    const int64_t largest = layout::pieceSize(whole, ranks, 0);
    for (int64_t r = 0; r < ranks; ++r) {
      const int64_t start = layout::pieceStart(whole, ranks, r), size = layout::pieceSize(whole, ranks, r);
      for (int64_t o = 0; o < outer; ++o) {
        const float* from = src.f() + o * whole + start;
        float* to = flat + r * block + at + o * largest;
        for (int64_t i = 0; i < size; ++i) to[i] += from[i];
      }
    }
    TensorView& out = views_[static_cast<size_t>(m)];
    out.shape = n.shape;
    out.dtype = n.dtype;
    out.elements = n.shape.elements().value_or(0);
    out.data = place(s, m);
    at += outer * largest;
  }
  if (ctx.scatter_defer) return {};
  if (comm) {
    work_[static_cast<size_t>(group)] = comm->reduceScatter(flat, flat + ranks * block, block);
  } else {
    std::copy(flat, flat + block, flat + ranks * block);
    unpackScattered(group);
  }
  return {};
}

// Each member's piece from the received block (its rows padded to the
// largest piece) into its own storage.
void Executor::unpackScattered(int group) {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  const int64_t ranks = axisRanks(g.axis);
  const float* received = buffer(group) + ranks * (bufferSize(group) / (ranks + 1));
  int64_t at = 0;
  for (int m : g.members) {
    const ir::Node& n = program_[m];
    const Shape& input = program_[n.inputs[0]].shape;
    const int64_t whole = layout::flatView(input, n.names[0]).dims.back().size;
    const int64_t mine = layout::flatView(n.shape, n.names[0]).dims.back().size;
    const int64_t largest = layout::pieceSize(whole, ranks, 0);
    // Rows as packed (an empty piece still has its rows' padded blocks).
    const int64_t outer = whole > 0 ? input.elements().value_or(0) / whole : 0;
    copyRows(received + at, outer, largest, 1, 0, views_[static_cast<size_t>(m)].f(), mine, 0, mine);
    at += outer * largest;
  }
}

// Partial → Shard(dim): rank r's rows of the dim are packed as block r of
// the group's buffer (padded to the largest piece), the blocks
// reduce-scattered, and this rank's block (after the n sent) unpacked into
// its piece at wait() (unscatter).
KernelStatus Executor::reduceScatter(int group, const TensorView& in, TensorView& out, comm::Communicator* comm) {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  const ir::Node& n = program_[g.members[0]];
  const int k = in.shape.find(n.names[0]);
  if (k < 0) return {false, "reduce_scatter: `" + n.names[0] + "` is not a dim of its input"};
  if (!comm) {  // a one-rank axis: the piece is all of it
    std::memcpy(out.data, in.data, static_cast<size_t>(std::min(in.elements, out.elements)) * 4);
    return {};
  }
  const int64_t ranks = comm->size(), whole = in.shape.dims[static_cast<size_t>(k)].size;
  const int64_t largest = layout::pieceSize(whole, ranks, 0);
  const auto [outer, inner] = around(in.shape, k);
  const int64_t block = outer * largest * inner;
  float* flat = buffer(group);
  std::fill(flat, flat + bufferSize(group), 0.0f);
  for (int64_t r = 0; r < ranks; ++r)
    copyRows(in.f(), outer, whole, inner, layout::pieceStart(whole, ranks, r), flat + r * block, largest, 0,
             layout::pieceSize(whole, ranks, r));
  work_[static_cast<size_t>(group)] = comm->reduceScatter(flat, flat + ranks * block, block);
  return {};
}

void Executor::unscatter(int group) {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  const ir::Node& n = program_[g.members[0]];
  TensorView& out = views_[static_cast<size_t>(g.members[0])];
  const int k = out.shape.find(n.names[0]);
  const int64_t mine = out.shape.dims[static_cast<size_t>(k)].size;
  const auto [outer, inner] = around(out.shape, k);
  const float* flat = buffer(group);
  const int64_t ranks = axisRanks(n.name), block = bufferSize(group) / (ranks + 1);
  const int64_t largest = outer * inner > 0 ? block / (outer * inner) : 0;
  copyRows(flat + ranks * block, outer, largest, inner, 0, out.f(), mine, 0, mine);
}

// Shard(from) → Shard(to): block r of the send half of the group's buffer
// is this rank's piece of `from` with rank r's part of `to`; block r of the
// receive half, rank r's piece of `from` with this rank's part of `to`,
// goes to rank r's place along `from` (exchanged() at wait). Blocks are
// padded to the largest pieces (uneven splits).
namespace {

struct Exchange {
  int k_from = -1, k_to = -1;
  int64_t ranks = 1, from_whole = 0, to_whole = 0;
  std::vector<int64_t> block;  // dims of one padded block
};

Exchange exchangeOf(const ir::Node& n, const Shape& in, const Shape& out, int64_t ranks) {
  Exchange e;
  e.ranks = ranks;
  e.k_from = in.find(n.names.at(0));
  e.k_to = in.find(n.names.at(1));
  e.from_whole = out.dims[static_cast<size_t>(out.find(n.names[0]))].size;
  e.to_whole = in.dims[static_cast<size_t>(e.k_to)].size;
  for (const Dim& d : in.dims) e.block.push_back(d.size);
  e.block[static_cast<size_t>(e.k_from)] = layout::pieceSize(e.from_whole, ranks, 0);
  e.block[static_cast<size_t>(e.k_to)] = layout::pieceSize(e.to_whole, ranks, 0);
  return e;
}

int64_t count(const std::vector<int64_t>& dims) {
  int64_t c = 1;
  for (int64_t d : dims) c *= d;
  return c;
}

std::vector<int64_t> dimsOf(const Shape& s) {
  std::vector<int64_t> out;
  for (const Dim& d : s.dims) out.push_back(d.size);
  return out;
}

}  // namespace

KernelStatus Executor::allToAll(int group, const TensorView& in, TensorView& out, comm::Communicator* comm) {
  const ir::Node& n = program_[program_.groups[static_cast<size_t>(group)].members[0]];
  if (!comm) {  // a one-rank axis: nothing moves
    std::memcpy(out.data, in.data, static_cast<size_t>(std::min(in.elements, out.elements)) * 4);
    return {};
  }
  const Exchange e = exchangeOf(n, in.shape, out.shape, comm->size());
  const int64_t block = count(e.block);
  float* flat = buffer(group);
  std::fill(flat, flat + bufferSize(group), 0.0f);
  const std::vector<int64_t> in_dims = dimsOf(in.shape);
  for (int64_t r = 0; r < e.ranks; ++r) {
    std::vector<int64_t> sizes = in_dims, at(in_dims.size(), 0);
    sizes[static_cast<size_t>(e.k_to)] = layout::pieceSize(e.to_whole, e.ranks, r);
    at[static_cast<size_t>(e.k_to)] = layout::pieceStart(e.to_whole, e.ranks, r);
    std::vector<float> part(static_cast<size_t>(count(sizes)));
    if (part.empty()) continue;
    copyBox(const_cast<float*>(in.f()), in_dims, part.data(), sizes, at, false);
    copyBox(flat + r * block, e.block, part.data(), sizes, std::vector<int64_t>(sizes.size(), 0), true);
  }
  work_[static_cast<size_t>(group)] = comm->allToAll(flat, flat + e.ranks * block, block);
  return {};
}

void Executor::exchanged(int group) {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  const ir::Node& n = program_[g.members[0]];
  const TensorView& in = views_[static_cast<size_t>(n.inputs[0])];
  TensorView& out = views_[static_cast<size_t>(g.members[0])];
  const Exchange e = exchangeOf(n, in.shape, out.shape, axisRanks(n.name));
  const int64_t block = count(e.block);
  const std::vector<int64_t> out_dims = dimsOf(out.shape);
  float* flat = buffer(group);
  for (int64_t r = 0; r < e.ranks; ++r) {
    std::vector<int64_t> sizes = out_dims, at(out_dims.size(), 0);
    sizes[static_cast<size_t>(e.k_from)] = layout::pieceSize(e.from_whole, e.ranks, r);
    at[static_cast<size_t>(e.k_from)] = layout::pieceStart(e.from_whole, e.ranks, r);
    std::vector<float> part(static_cast<size_t>(count(sizes)));
    if (part.empty()) continue;
    copyBox(flat + (e.ranks + r) * block, e.block, part.data(), sizes, std::vector<int64_t>(sizes.size(), 0), false);
    copyBox(out.f(), out_dims, part.data(), sizes, at, true);
  }
}

// An all-gather of a stored parameter's flat pieces (ZeRO-3), not of updated ones.
bool Executor::gathersPieces(const prog::Group& g) const {
  const ir::Node& n = program_[g.members[0]];
  return g.bucket < 0 && ir::gathersStoredPieces(n, program_[n.inputs[0]]);
}

bool Executor::gathersPieces() const {
  for (const prog::Group& g : program_.groups)
    if (gathersPieces(g)) return true;
  return false;
}

int64_t Executor::axisRanks(const std::string& axis) const {
  for (const layout::MeshAxis& a : program_.mesh)
    if (a.name == axis) return std::max<int64_t>(a.size, 1);
  return 1;
}

// A max all-reduce's result: element-wise the largest of the ranks' blocks
// (NaN wins, as in a max over one rank's values).
void Executor::largestOf(int group) {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  TensorView& out = views_[static_cast<size_t>(g.members[0])];
  const float* from = buffer(group);
  const int64_t n = out.elements, ranks = n > 0 ? bufferSize(group) / n : 0;
  for (int64_t i = 0; i < n; ++i) {
    float m = from[i];
    for (int64_t r = 1; r < ranks; ++r) {
      const float v = from[r * n + i];
      if (v > m || std::isnan(v)) m = std::isnan(m) ? m : v;
    }
    out.f()[i] = m;
  }
}

// The blocks of a buffered all-gather, rank after rank in the group's
// buffer (each padded to the largest piece), put in place along the
// gathered dim: rank r's piece of L_r rows goes to its start in the result.
void Executor::placeGathered(int group) {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  const ir::Node& n = program_[g.members[0]];
  TensorView& out = views_[static_cast<size_t>(g.members[0])];
  const Shape shape = layout::flatView(n.shape, n.names[0]);  // itself unless the pieces are flat
  const int k = shape.find(n.names[0]);
  const int64_t whole = shape.dims[static_cast<size_t>(k)].size, ranks = axisRanks(n.name);
  const int64_t largest = layout::pieceSize(whole, ranks, 0);
  const auto [outer, inner] = around(shape, k);
  const float* from = buffer(group);
  for (int64_t r = 0; r < ranks; ++r)
    copyRows(from + r * outer * largest * inner, outer, largest, inner, 0, out.f(), whole,
             layout::pieceStart(whole, ranks, r), layout::pieceSize(whole, ranks, r));
}

KernelStatus Executor::wait(int group) {
  std::unique_ptr<comm::Work> w = std::move(work_[static_cast<size_t>(group)]);
  if (!w) return {};
  const auto t0 = std::chrono::steady_clock::now();
  comm::Status s = w->wait();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  wait_seconds_ += waited;
  if (gathersPieces(g)) gather_wait_seconds_ += waited;
  if (s.ok) {
    if (g.bucket >= 0 && g.op == ir::Op::ReduceScatter) unpackScattered(group);
    if (g.bucket < 0 && g.elements > 0) {
      const ir::Op op = program_[g.members[0]].op;
      if (op == ir::Op::AllReduce) {
        largestOf(group);
      } else if (op == ir::Op::ReduceScatter) {
        unscatter(group);
      } else if (op == ir::Op::AllToAll) {
        exchanged(group);
      } else {
        placeGathered(group);
      }
    }
    return {};
  }
  // The communicator ran its operations in issue order and failed every one
  // after the first failure ("an earlier operation failed"): name the first.
  int culprit = group;
  std::vector<int> earlier;
  for (size_t k = 0; k < work_.size(); ++k)
    if (work_[k] && started_at_[k] < started_at_[static_cast<size_t>(group)] &&
        program_.groups[k].axis == g.axis)
      earlier.push_back(static_cast<int>(k));
  std::sort(earlier.begin(), earlier.end(),
            [&](int a, int b) { return started_at_[static_cast<size_t>(a)] < started_at_[static_cast<size_t>(b)]; });
  for (int k : earlier) {
    comm::Status e = work_[static_cast<size_t>(k)]->wait();
    work_[static_cast<size_t>(k)].reset();
    if (!e.ok) {
      culprit = k;
      s = e;
      break;
    }
  }
  return {false, describeCollective(culprit) + " failed: " + s.message};
}

// "all-reduce of bucket 0 over `dp` (#3 in `dtlc plan`; rule: split batch
// over dp (spec.dtl:22:3))": what a failed collective's error names.
std::string Executor::describeCollective(int group) const {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  const ir::Node& n = program_[g.members[0]];
  std::string what = g.bucket >= 0 ? std::string(g.op == ir::Op::ReduceScatter ? "reduce-scatter" : "all-reduce") +
                                         " of bucket " + std::to_string(g.bucket)
                                   : std::string(n.op == ir::Op::AllReduce       ? "all-reduce"
                                                 : n.op == ir::Op::ReduceScatter ? "reduce-scatter"
                                                 : n.op == ir::Op::AllToAll      ? "all-to-all"
                                                                                 : "all-gather");
  what += " over `" + g.axis + "` (#" + std::to_string(numbers_[static_cast<size_t>(group)]) + " in `dtlc plan`";
  if (!n.where.empty()) what += "; rule: " + n.where;
  return what + ")";
}

}  // namespace dtl::rt
