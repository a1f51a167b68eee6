// A run follows one schedule of the program:
// - run: a parameter points at the caller's memory, an input copies what
//   was fed, a view points into its source's storage, anything else is
//   computed by the backend into the storage the planner gave it;
// - start: a bucket copies the gradients not computed in place into its
//   flat buffer and launches one all-reduce on it; a single collective
//   launches on its own buffer;
// - wait: the group's results are ready.
// Storage is resolved once per run and value: a slot, the caller's
// parameter or bound gradient, a block of a bucket or of another value.
#include "runtime/exec/executor.h"

#include "runtime/exec/param_shards.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace dtl::rt {

Executor::Executor(const prog::Program& p, Backend& backend) : program_(p), backend_(backend) {
  views_.resize(p.nodes.size());
  const std::vector<int64_t> arena = p.arenaWords();
  slots_.resize(arena.size());
  for (size_t k = 0; k < arena.size(); ++k) {
    slots_[k].words.reset(new uint32_t[static_cast<size_t>(arena[k])]);  // never zeroed: every kernel writes all of its output
    held_bytes_ += arena[k] * 4;
  }
  flat_.resize(p.groups.size());
  work_.resize(p.groups.size());
  for (const prog::Group& g : p.groups) {
    flat_[static_cast<size_t>(g.id)].resize(static_cast<size_t>(g.elements));
    held_bytes_ += g.elements * 4;
  }
  for (const auto& [path, id] : p.grads) grad_node_[path] = id;
}

void Executor::bindParam(const std::string& path, float* data) { params_[path] = data; }

bool Executor::bindGrad(const std::string& path, float* data) {
  auto it = grad_node_.find(path);
  if (it == grad_node_.end()) return false;
  if (program_.train.storage[static_cast<size_t>(it->second)].kind != prog::Storage::Output) return false;
  bound_[it->second] = data;
  return true;
}

void Executor::setInput(const std::string& name, const void* data, int64_t elements) {
  auto& v = inputs_[name];
  v.resize(static_cast<size_t>(elements));
  if (elements > 0) std::memcpy(v.data(), data, static_cast<size_t>(elements) * 4);
}

void* Executor::place(const prog::Schedule& s, int node) {
  void*& at = placed_[static_cast<size_t>(node)];
  if (at) return at;
  const prog::Storage& st = s.storage[static_cast<size_t>(node)];
  const ir::Node& n = program_[node];
  switch (st.kind) {
    case prog::Storage::Slot: at = slots_[static_cast<size_t>(st.index)].words.get(); break;
    case prog::Storage::Param: {
      auto it = params_.find(n.name);
      at = it == params_.end() ? nullptr : it->second;
      break;
    }
    case prog::Storage::Alias: at = static_cast<uint32_t*>(place(s, st.index)) + st.offset; break;
    case prog::Storage::Group: at = flat_[static_cast<size_t>(st.index)].data() + st.offset; break;
    case prog::Storage::Output: {
      auto b = bound_.find(node);
      if (b != bound_.end()) {
        at = b->second;
        break;
      }
      std::vector<float>& own = outputs_[node];
      const int64_t elements = std::max<int64_t>(n.shape.elements().value_or(0), 1);
      if (own.empty()) {
        own.resize(static_cast<size_t>(elements));
        held_bytes_ += elements * 4;
      }
      at = own.data();
      break;
    }
    case prog::Storage::None: break;
  }
  return at;
}

KernelStatus Executor::run(bool with_backward, const RunContext& ctx) {
  const prog::Schedule& s = with_backward ? program_.train : program_.eval;
  placed_.assign(program_.nodes.size(), nullptr);
  bucket_events_.clear();
  int64_t runs_left = 0;
  for (const prog::Instr& in : s.instrs) runs_left += in.kind == prog::Instr::Run;
  int last_run = -1;
  KernelStatus status;
  for (const prog::Instr& in : s.instrs) {
    if (in.kind == prog::Instr::Run) {
      status = runNode(s, in.id, ctx);
      last_run = in.id;
      --runs_left;
    } else if (in.kind == prog::Instr::Start) {
      status = start(s, in.id, last_run, runs_left, ctx.defer_buckets);
    } else {
      status = wait(in.id);
    }
    if (!status.ok) break;
  }
  for (std::unique_ptr<comm::Work>& w : work_)  // after a failure, nothing may still write our buffers
    if (w) {
      w->wait();
      w.reset();
    }
  return status;
}

KernelStatus Executor::runNode(const prog::Schedule& s, int id, const RunContext& ctx) {
  const ir::Node& n = program_[id];
  TensorView& v = views_[static_cast<size_t>(id)];
  v.shape = n.shape;
  v.dtype = n.dtype;
  v.elements = n.shape.elements().value_or(0);
  v.data = place(s, id);
  if (n.op == ir::Op::Param) {
    if (!v.data) return {false, "parameter `" + n.name + "` has no storage"};
    return {};
  }
  if (!v.data) return {false, "%" + std::to_string(id) + " (" + ir::opName(n.op) + ") has no storage in this run"};
  if (n.op == ir::Op::Input) {
    auto it = inputs_.find(n.name);
    if (it == inputs_.end() || static_cast<int64_t>(it->second.size()) != v.elements)
      return {false, "input `" + n.name + "` was not fed " + std::to_string(v.elements) + " values"};
    std::memcpy(v.data, it->second.data(), static_cast<size_t>(v.elements) * 4);
    return {};
  }
  const prog::Storage& st = s.storage[static_cast<size_t>(id)];
  if (st.kind == prog::Storage::Alias && !n.inputs.empty() && st.index == n.inputs[0] &&
      (n.op == ir::Op::Reshape || n.op == ir::Op::Slice || n.op == ir::Op::LocalSlice))
    return {};  // a view of its input: its data is its source's (an alias elsewhere, a block of a stack, is computed)
  if (n.op == ir::Op::LocalSlice) return localSlice(n, views_[static_cast<size_t>(n.inputs[0])], v);
  std::vector<const TensorView*> ins;
  ins.reserve(n.inputs.size());
  for (int x : n.inputs) ins.push_back(&views_[static_cast<size_t>(x)]);
  return backend_.run(n, ins, v, ctx);
}

// This rank's block of a replicated value along a dim that is not its
// leading one (that one is a view): a strided copy, no communication.
KernelStatus Executor::localSlice(const ir::Node& n, const TensorView& in, TensorView& out) {
  const int k = in.shape.find(n.names[0]);
  if (k < 0) return {false, "local_slice: `" + n.names[0] + "` is not a dim of its input"};
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < k; ++d) outer *= in.shape.dims[static_cast<size_t>(d)].size;
  for (size_t d = static_cast<size_t>(k) + 1; d < in.shape.dims.size(); ++d) inner *= in.shape.dims[d].size;
  const int64_t whole = in.shape.dims[static_cast<size_t>(k)].size, part = out.shape.dims[static_cast<size_t>(k)].size;
  const auto* src = static_cast<const uint32_t*>(in.data);
  auto* dst = static_cast<uint32_t*>(out.data);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * part * inner, src + (o * whole + n.index) * inner, static_cast<size_t>(part * inner) * 4);
  return {};
}

KernelStatus Executor::start(const prog::Schedule& s, int group, int after_node, int64_t nodes_left, bool defer) {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  auto c = comms_.find(g.axis);
  comm::Communicator* comm = c == comms_.end() ? nullptr : c->second;
  if (g.bucket >= 0) {
    std::vector<float>& flat = flat_[static_cast<size_t>(group)];
    for (int m : g.members) {  // the gradients not computed in place
      const TensorView& src = views_[static_cast<size_t>(program_[m].inputs[0])];
      TensorView& out = views_[static_cast<size_t>(m)];
      out = src;
      out.shape = program_[m].shape;
      out.data = place(s, m);
      if (src.data != out.data) std::memcpy(out.data, src.data, static_cast<size_t>(src.elements) * 4);
    }
    if (comm && !defer) work_[static_cast<size_t>(group)] = comm->allReduce(flat.data(), static_cast<int64_t>(flat.size()));
    bucket_events_.push_back({g.bucket, after_node, nodes_left});
    return {};
  }
  const int m = g.members[0];
  const ir::Node& n = program_[m];
  const TensorView& in = views_[static_cast<size_t>(n.inputs[0])];
  TensorView& out = views_[static_cast<size_t>(m)];
  out.shape = n.shape;
  out.dtype = n.dtype;
  out.elements = n.shape.elements().value_or(0);
  out.data = place(s, m);
  if (n.op == ir::Op::ReduceScatter) return reduceScatter(group, in, out, comm);
  if (n.op == ir::Op::AllToAll) return allToAll(group, in, out, comm);
  if (n.op == ir::Op::AllReduce && g.elements > 0 && comm) {
    // The largest: every rank's values, compared at wait() (largestOf).
    work_[static_cast<size_t>(group)] = comm->allGather(in.f(), flat_[static_cast<size_t>(group)].data(), in.elements);
    return {};
  }
  if (n.op == ir::Op::AllReduce || !comm) {
    // Without a communicator (a one-rank axis) a collective is a copy.
    const int64_t n_in = std::min(in.elements, out.elements);
    std::memcpy(out.data, in.data, static_cast<size_t>(n_in) * 4);
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
    const int64_t block = static_cast<int64_t>(flat_[static_cast<size_t>(group)].size()) / comm->size();
    const float* send = in.f();
    if (block != in.elements) {  // a smaller piece: padded along the gathered dim
      std::vector<float>& pad = padded_[group];
      pad.assign(static_cast<size_t>(block), 0.0f);
      copyPiece(in.f(), in.shape, in.shape.find(n.names[0]), pad.data(), block, 0);
      send = pad.data();
    }
    work_[static_cast<size_t>(group)] = comm->allGather(send, flat_[static_cast<size_t>(group)].data(), block);
    return {};
  }
  return {false, std::string(ir::opName(n.op)) + " over `" + n.name + "` is not built yet"};
}

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
  std::vector<float>& flat = flat_[static_cast<size_t>(group)];
  std::fill(flat.begin(), flat.end(), 0.0f);
  for (int64_t r = 0; r < ranks; ++r)
    copyRows(in.f(), outer, whole, inner, layout::pieceStart(whole, ranks, r), flat.data() + r * block, largest, 0,
             layout::pieceSize(whole, ranks, r));
  work_[static_cast<size_t>(group)] = comm->reduceScatter(flat.data(), flat.data() + ranks * block, block);
  return {};
}

void Executor::unscatter(int group) {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  const ir::Node& n = program_[g.members[0]];
  TensorView& out = views_[static_cast<size_t>(g.members[0])];
  const int k = out.shape.find(n.names[0]);
  const int64_t mine = out.shape.dims[static_cast<size_t>(k)].size;
  const auto [outer, inner] = around(out.shape, k);
  const std::vector<float>& flat = flat_[static_cast<size_t>(group)];
  const int64_t ranks = axisRanks(n.name), block = static_cast<int64_t>(flat.size()) / (ranks + 1);
  const int64_t largest = outer * inner > 0 ? block / (outer * inner) : 0;
  copyRows(flat.data() + ranks * block, outer, largest, inner, 0, out.f(), mine, 0, mine);
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
  std::vector<float>& flat = flat_[static_cast<size_t>(group)];
  std::fill(flat.begin(), flat.end(), 0.0f);
  const std::vector<int64_t> in_dims = dimsOf(in.shape);
  for (int64_t r = 0; r < e.ranks; ++r) {
    std::vector<int64_t> sizes = in_dims, at(in_dims.size(), 0);
    sizes[static_cast<size_t>(e.k_to)] = layout::pieceSize(e.to_whole, e.ranks, r);
    at[static_cast<size_t>(e.k_to)] = layout::pieceStart(e.to_whole, e.ranks, r);
    std::vector<float> part(static_cast<size_t>(count(sizes)));
    if (part.empty()) continue;
    copyBox(const_cast<float*>(in.f()), in_dims, part.data(), sizes, at, false);
    copyBox(flat.data() + r * block, e.block, part.data(), sizes, std::vector<int64_t>(sizes.size(), 0), true);
  }
  work_[static_cast<size_t>(group)] = comm->allToAll(flat.data(), flat.data() + e.ranks * block, block);
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
  std::vector<float>& flat = flat_[static_cast<size_t>(group)];
  for (int64_t r = 0; r < e.ranks; ++r) {
    std::vector<int64_t> sizes = out_dims, at(out_dims.size(), 0);
    sizes[static_cast<size_t>(e.k_from)] = layout::pieceSize(e.from_whole, e.ranks, r);
    at[static_cast<size_t>(e.k_from)] = layout::pieceStart(e.from_whole, e.ranks, r);
    std::vector<float> part(static_cast<size_t>(count(sizes)));
    if (part.empty()) continue;
    copyBox(flat.data() + (e.ranks + r) * block, e.block, part.data(), sizes, std::vector<int64_t>(sizes.size(), 0), false);
    copyBox(out.f(), out_dims, part.data(), sizes, at, true);
  }
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
  const float* from = flat_[static_cast<size_t>(group)].data();
  const int64_t n = out.elements, ranks = n > 0 ? static_cast<int64_t>(flat_[static_cast<size_t>(group)].size()) / n : 0;
  for (int64_t i = 0; i < n; ++i) {
    float m = from[i];
    for (int64_t r = 1; r < ranks; ++r) {
      const float v = from[r * n + i];
      if (v > m || std::isnan(v)) m = std::isnan(m) ? m : v;
    }
    out.f()[i] = m;
  }
}

// Copies a piece [outer, L, inner] (L = the piece's size of dim k) into a
// block of `to` whose dim k is `block_elements / (outer · inner)` long,
// starting at row `at` of that dim.
void Executor::copyPiece(const float* from, const Shape& piece, int k, float* to, int64_t block_elements, int64_t at) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < k; ++d) outer *= piece.dims[static_cast<size_t>(d)].size;
  for (size_t d = static_cast<size_t>(k) + 1; d < piece.dims.size(); ++d) inner *= piece.dims[d].size;
  const int64_t part = piece.dims[static_cast<size_t>(k)].size;
  const int64_t span = outer * inner > 0 ? block_elements / (outer * inner) : 0;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(to + (o * span + at) * inner, from + o * part * inner, static_cast<size_t>(part * inner) * 4);
}

// The blocks of a buffered all-gather, rank after rank in the group's
// buffer (each padded to the largest piece), put in place along the
// gathered dim: rank r's piece of L_r rows goes to its start in the result.
void Executor::placeGathered(int group) {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  const ir::Node& n = program_[g.members[0]];
  TensorView& out = views_[static_cast<size_t>(g.members[0])];
  const int k = n.shape.find(n.names[0]);
  const int64_t whole = n.shape.dims[static_cast<size_t>(k)].size;
  const std::vector<float>& flat = flat_[static_cast<size_t>(group)];
  int64_t ranks = 1;
  for (const layout::MeshAxis& a : program_.mesh)
    if (a.name == n.name) ranks = std::max<int64_t>(a.size, 1);
  const int64_t block = static_cast<int64_t>(flat.size()) / ranks, largest = layout::pieceSize(whole, ranks, 0);
  for (int64_t r = 0; r < ranks; ++r) {
    // Row by row of the padded block: its first L_r rows of dim k are rank r's.
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < k; ++d) outer *= n.shape.dims[static_cast<size_t>(d)].size;
    for (size_t d = static_cast<size_t>(k) + 1; d < n.shape.dims.size(); ++d) inner *= n.shape.dims[d].size;
    const int64_t part = layout::pieceSize(whole, ranks, r), at = layout::pieceStart(whole, ranks, r);
    const float* from = flat.data() + r * block;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out.f() + (o * whole + at) * inner, from + o * largest * inner, static_cast<size_t>(part * inner) * 4);
  }
}

KernelStatus Executor::wait(int group) {
  std::unique_ptr<comm::Work> w = std::move(work_[static_cast<size_t>(group)]);
  if (!w) return {};
  comm::Status s = w->wait();
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  if (s.ok) {
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
  const ir::Node& n = program_[g.members[0]];
  std::string what = g.bucket >= 0 ? "all-reduce of bucket " + std::to_string(g.bucket)
                                   : std::string(n.op == ir::Op::AllReduce       ? "all-reduce"
                                                 : n.op == ir::Op::ReduceScatter ? "reduce-scatter"
                                                 : n.op == ir::Op::AllToAll      ? "all-to-all"
                                                                                 : "all-gather");
  return {false, what + " over `" + g.axis + "`: " + s.message};
}

KernelStatus Executor::update(const optim::Optimizer& opt, int64_t step, double lr) {
  for (const prog::Instr& in : program_.update.instrs) {
    const ir::Node& n = program_[in.id];
    auto p = params_.find(n.name);
    auto g = step_grads_.find(n.name);
    auto st = states_.find(n.name);
    if (p == params_.end() || g == step_grads_.end() || st == states_.end() || !p->second || !g->second)
      return {false, "update of `" + n.name + "`: its parameter, gradient or optimiser state is not bound"};
    try {
      opt.update(p->second, g->second, n.shape.elements().value_or(0), *st->second, step, lr);
    } catch (const std::invalid_argument& e) {
      return {false, "update of `" + n.name + "`: " + e.what()};
    }
  }
  return {};
}

float Executor::value(int node) const {
  const TensorView& v = views_[static_cast<size_t>(node)];
  if (!v.data) return 0;
  return isFloat(v.dtype) ? v.f()[0] : static_cast<float>(v.i()[0]);
}

const float* Executor::grad(const std::string& path) const {
  auto it = grad_node_.find(path);
  if (it == grad_node_.end()) return nullptr;
  return views_[static_cast<size_t>(it->second)].f();
}

}  // namespace dtl::rt
