// Execution, per run:
// 1. For each node in order: Input copies the fed values; Param, a leading-dim
//    Slice of a parameter and Reshape alias their source; a copy's gradient
//    gathered by a leading-dim slice_grad is computed into its block of that
//    slice_grad's buffer (allocated when its first copy is computed);
//    anything else gets a buffer (from the free list when one is large
//    enough, never zeroed) and the backend fills it.
// 2. After a node runs, every value whose last use it was is released unless
//    the caller reads it afterwards (loss, metrics, gradients). A view keeps
//    its source alive: a Reshape its input, a gathered copy its stack.
#include "runtime/exec/executor.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace dtl::rt {

namespace {
constexpr int kKeep = std::numeric_limits<int>::max();
}

Executor::Executor(const ir::Graph& g, Backend& backend) : graph_(g), backend_(backend) {
  size_t n = g.nodes.size();
  views_.resize(n);
  owned_.resize(n);
  placed_.assign(n, nullptr);
  bound_.assign(n, nullptr);
  last_use_fwd_.assign(n, -1);
  last_use_all_.assign(n, -1);
  for (const ir::Node& node : g.nodes) {
    if (node.op == ir::Op::Update) continue;
    for (int in : node.inputs) {
      last_use_all_[in] = std::max(last_use_all_[in], node.id);
      if (node.id < g.forward_end) last_use_fwd_[in] = std::max(last_use_fwd_[in], node.id);
    }
  }
  auto keep = [&](int id) {
    if (id < 0) return;
    last_use_fwd_[id] = kKeep;
    last_use_all_[id] = kKeep;
  };
  keep(g.loss);
  for (const auto& [name, id] : g.metrics) keep(id);
  // Evaluation runs the forward pass and the collectives that make the loss
  // and metrics global.
  std::vector<int> reads = {g.loss};
  for (const auto& [name, id] : g.metrics) reads.push_back(id);
  for (int id : reads)
    for (; id >= g.forward_end && id >= 0; id = g.nodes[static_cast<size_t>(id)].inputs.empty() ? -1 : g.nodes[static_cast<size_t>(id)].inputs[0])
      forward_extra_.push_back(id);
  std::sort(forward_extra_.begin(), forward_extra_.end());
  forward_extra_.erase(std::unique(forward_extra_.begin(), forward_extra_.end()), forward_extra_.end());
  for (int id : forward_extra_)
    for (int in : g.nodes[static_cast<size_t>(id)].inputs) last_use_fwd_[in] = std::max(last_use_fwd_[in], id);
  // Buckets: each member's slot in its bucket; a member's producer is
  // computed into that slot when the all-reduce is its only reader.
  std::vector<int> readers(n, 0);
  for (const ir::Node& node : g.nodes)
    if (node.op != ir::Op::Update)
      for (int in : node.inputs) ++readers[static_cast<size_t>(in)];
  in_bucket_.assign(n, {-1, 0});
  bucket_flat_.resize(g.buckets.size());
  for (const ir::Bucket& b : g.buckets) {
    int64_t offset = 0;
    for (int m : b.members) {
      member_slot_[m] = {b.id, offset};
      const ir::Node& member = g[m];
      const int src = member.inputs[0];
      const ir::Node& p = g[src];
      const int64_t elements = member.shape.elements().value_or(0);
      if (readers[static_cast<size_t>(src)] == 1 && src >= g.forward_end && isFloat(p.dtype) &&
          p.shape.elements().value_or(-1) == elements && p.op != ir::Op::Param && p.op != ir::Op::Input &&
          p.op != ir::Op::Reshape && p.op != ir::Op::Slice && p.op != ir::Op::Update)
        in_bucket_[static_cast<size_t>(src)] = {b.id, offset};
      offset += elements;
    }
    bucket_flat_[static_cast<size_t>(b.id)].resize(static_cast<size_t>(offset));
    live_bytes_ += offset * 4;
  }
  peak_bytes_ = live_bytes_;
  for (const auto& [path, id] : g.grads) {
    keep(id);
    grad_node_[path] = id;
  }
  // Views of parameters: a Slice is one only over its source's leading dim.
  param_view_.assign(n, false);
  for (const ir::Node& node : g.nodes) {
    const size_t id = static_cast<size_t>(node.id);
    if (node.op == ir::Op::Param) param_view_[id] = true;
    if (node.op == ir::Op::Reshape) param_view_[id] = param_view_[static_cast<size_t>(node.inputs[0])];
    if (node.op == ir::Op::Slice && !node.names.empty()) {
      const int src = node.inputs[0];
      param_view_[id] = param_view_[static_cast<size_t>(src)] && g[src].shape.find(node.names[0]) == 0;
    }
  }
  // Copies gathered in place: each input of a slice_grad over its leading
  // dim that a kernel computes (not a view, not fed, not a forward value the
  // evaluation reads) and that no other slice_grad input slot names.
  gathered_.assign(n, {-1, 0});
  std::vector<int> slots(n, 0);
  for (const ir::Node& node : g.nodes)
    if (node.op == ir::Op::SliceGrad)
      for (int in : node.inputs) ++slots[static_cast<size_t>(in)];
  std::vector<bool> extra(n, false);
  for (int id : forward_extra_) extra[static_cast<size_t>(id)] = true;
  std::vector<int> stacks;
  for (const ir::Node& node : g.nodes) {
    if (node.op != ir::Op::SliceGrad || node.names.empty() || node.shape.find(node.names[0]) != 0) continue;
    const int64_t per = node.shape.elements().value_or(0) / std::max<int64_t>(node.shape.dims[0].size, 1);
    bool any = false;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int in = node.inputs[k];
      const ir::Node& m = g[in];
      const size_t mi = static_cast<size_t>(in);
      // Not when something reads the copy after the stack is made: the stack
      // may be all-reduced in place by then (its bucket).
      if (in < g.forward_end || extra[mi] || slots[mi] != 1 || m.dtype != node.dtype ||
          m.shape.elements().value_or(-1) != per || last_use_all_[mi] > node.id)
        continue;
      if (m.op == ir::Op::Param || m.op == ir::Op::Input || m.op == ir::Op::Reshape || m.op == ir::Op::Slice ||
          m.op == ir::Op::Update)
        continue;
      gathered_[mi] = {node.id, (node.index + static_cast<int64_t>(k)) * per};
      any = true;
    }
    if (any) stacks.push_back(node.id);
  }
  // A reshape aliases its input: the input must live as long as the alias.
  for (size_t k = n; k-- > 0;) {
    const ir::Node& node = g.nodes[k];
    if (node.op != ir::Op::Reshape) continue;
    last_use_all_[node.inputs[0]] = std::max(last_use_all_[node.inputs[0]], last_use_all_[k]);
    last_use_fwd_[node.inputs[0]] = std::max(last_use_fwd_[node.inputs[0]], last_use_fwd_[k]);
  }
  // A stack lives until it has run and as long as each copy written into it
  // (inner stacks first: an outer one then covers them too).
  for (int st : stacks) {
    int& last = last_use_all_[static_cast<size_t>(st)];
    last = std::max(last, st);
    for (int in : g[st].inputs)
      if (gathered_[static_cast<size_t>(in)].first == st) last = std::max(last, last_use_all_[static_cast<size_t>(in)]);
  }
  release_fwd_.resize(n);
  release_all_.resize(n);
  for (size_t id = 0; id < n; ++id) {
    // A value nothing reads is freed right after it is made.
    int f = last_use_fwd_[id], a = last_use_all_[id];
    if (f != kKeep) release_fwd_[static_cast<size_t>(std::max<int>(f, static_cast<int>(id)))].push_back(static_cast<int>(id));
    if (a != kKeep) release_all_[static_cast<size_t>(std::max<int>(a, static_cast<int>(id)))].push_back(static_cast<int>(id));
  }
}

void Executor::bindParam(const std::string& path, float* data) { params_[path] = data; }

bool Executor::bindGrad(const std::string& path, float* data) {
  auto it = grad_node_.find(path);
  if (it == grad_node_.end()) return false;
  const size_t id = static_cast<size_t>(it->second);
  const ir::Node& n = graph_.nodes[id];
  if (bound_[id] == data) return true;
  if (bound_[id] || n.op == ir::Op::Param || n.op == ir::Op::Input || n.op == ir::Op::Reshape ||
      n.op == ir::Op::Slice || gathered_[id].first >= 0 || !isFloat(n.dtype) || it->second < graph_.forward_end ||
      member_slot_.count(it->second) || in_bucket_[id].first >= 0)
    return false;
  for (const auto& [other, node] : grad_node_)
    if (node == it->second && other != path) return false;
  bound_[id] = data;
  return true;
}

void Executor::setInput(const std::string& name, const void* data, int64_t elements) {
  auto& v = inputs_[name];
  v.resize(static_cast<size_t>(elements));
  if (elements > 0) std::memcpy(v.data(), data, static_cast<size_t>(elements) * 4);
}

void* Executor::allocate(int node, int64_t elements) {
  size_t need = static_cast<size_t>(std::max<int64_t>(elements, 1));
  // Best fit among free buffers; otherwise a new one. Never zeroed: every
  // kernel writes its whole output.
  size_t best = free_.size();
  for (size_t i = 0; i < free_.size(); ++i)
    if (free_[i]->capacity >= need && (best == free_.size() || free_[i]->capacity < free_[best]->capacity)) best = i;
  std::unique_ptr<Buffer> b;
  if (best < free_.size()) {
    b = std::move(free_[best]);
    free_.erase(free_.begin() + static_cast<long>(best));
  } else {
    b = std::make_unique<Buffer>();
    b->words.reset(new uint32_t[need]);
    b->capacity = need;
  }
  live_bytes_ += static_cast<int64_t>(b->capacity * 4);
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  void* p = b->words.get();
  owned_[node] = std::move(b);
  return p;
}

void* Executor::storage(int node) {
  const size_t id = static_cast<size_t>(node);
  if (placed_[id]) return placed_[id];
  const auto& [stack, offset] = gathered_[id];
  const auto& [bucket, slot] = in_bucket_[id];
  if (bound_[id])
    placed_[id] = bound_[id];
  else if (gather_in_place_ && bucket >= 0)
    placed_[id] = bucket_flat_[static_cast<size_t>(bucket)].data() + slot;
  else if (gather_in_place_ && stack >= 0)
    placed_[id] = static_cast<uint32_t*>(storage(stack)) + offset;
  else
    placed_[id] = allocate(node, graph_.nodes[id].shape.elements().value_or(0));
  return placed_[id];
}

void Executor::release(int node) {
  if (!owned_[node]) return;
  live_bytes_ -= static_cast<int64_t>(owned_[node]->capacity * 4);
  free_.push_back(std::move(owned_[node]));
}

KernelStatus Executor::run(bool with_backward, const RunContext& ctx) {
  for (size_t i = 0; i < owned_.size(); ++i) release(static_cast<int>(i));
  std::fill(placed_.begin(), placed_.end(), nullptr);
  gather_in_place_ = with_backward;
  const std::vector<std::vector<int>>& release_after = with_backward ? release_all_ : release_fwd_;
  int end = with_backward ? static_cast<int>(graph_.nodes.size()) : graph_.forward_end;
  buckets_.clear();
  buckets_.resize(with_backward ? graph_.buckets.size() : 0);
  bucket_events_.clear();
  std::vector<const TensorView*> ins;
  size_t extra = 0;
  for (int id = 0; id < static_cast<int>(graph_.nodes.size()); ++id) {
    if (id >= end) {
      // Forward-only: just the loss and metric conversions after the forward pass.
      while (extra < forward_extra_.size() && forward_extra_[extra] < id) ++extra;
      if (extra >= forward_extra_.size()) break;
      id = forward_extra_[extra];
    }
    const ir::Node& n = graph_.nodes[static_cast<size_t>(id)];
    if (n.op == ir::Op::Update) continue;
    TensorView& v = views_[static_cast<size_t>(id)];
    v.shape = n.shape;
    v.dtype = n.dtype;
    v.elements = n.shape.elements().value_or(0);
    if (n.op == ir::Op::Param) {
      auto it = params_.find(n.name);
      if (it == params_.end()) return {false, "parameter `" + n.name + "` has no storage"};
      v.data = it->second;
    } else if (n.op == ir::Op::Input) {
      auto it = inputs_.find(n.name);
      if (it == inputs_.end() || static_cast<int64_t>(it->second.size()) != v.elements)
        return {false, "input `" + n.name + "` was not fed " + std::to_string(v.elements) + " values"};
      v.data = storage(id);
      std::memcpy(v.data, it->second.data(), static_cast<size_t>(v.elements) * 4);
    } else if (n.op == ir::Op::Reshape || (n.op == ir::Op::Slice && param_view_[static_cast<size_t>(id)])) {
      // A view: reshape keeps the data; a leading-dim slice of a parameter
      // is a contiguous block of it.
      const TensorView& src = views_[static_cast<size_t>(n.inputs[0])];
      int64_t offset = n.op == ir::Op::Slice ? n.index * v.elements : 0;
      v.data = static_cast<uint32_t*>(src.data) + offset;
    } else if (n.op == ir::Op::AllReduce && !buckets_.empty() && member_slot_.count(id)) {
      KernelStatus s = collective(n, v);  // a view of its bucket
      if (!s.ok) return s;
    } else if (n.op == ir::Op::AllReduce || n.op == ir::Op::AllGather || n.op == ir::Op::ReduceScatter) {
      v.data = storage(id);
      KernelStatus s = collective(n, v);
      if (!s.ok) return s;
    } else {
      v.data = storage(id);
      ins.clear();
      for (int in : n.inputs) ins.push_back(&views_[static_cast<size_t>(in)]);
      KernelStatus s = backend_.run(n, ins, v, ctx);
      if (!s.ok) return s;
    }
    for (int done : release_after[static_cast<size_t>(id)]) release(done);
    if (!buckets_.empty()) launchBuckets(id, end);
  }
  for (BucketRun& b : buckets_)
    if (b.work && !b.waited) b.work->wait();
  return {};
}

void Executor::launchBuckets(int after_node, int end) {
  for (const ir::Bucket& b : graph_.buckets) {
    if (b.start_after != after_node) continue;
    BucketRun& run = buckets_[static_cast<size_t>(b.id)];
    std::vector<float>& flat = bucket_flat_[static_cast<size_t>(b.id)];
    for (int m : b.members) {  // the gradients not computed in place
      const TensorView& src = views_[static_cast<size_t>(graph_.nodes[static_cast<size_t>(m)].inputs[0])];
      float* slot = flat.data() + member_slot_[m].second;
      if (src.data != slot) std::memcpy(slot, src.data, static_cast<size_t>(src.elements) * 4);
    }
    auto c = comms_.find(b.axis);
    if (c != comms_.end() && c->second) run.work = c->second->allReduce(flat.data(), static_cast<int64_t>(flat.size()));
    bucket_events_.push_back({b.id, after_node, end - after_node - 1});
  }
}

KernelStatus Executor::collective(const ir::Node& n, TensorView& out) {
  const TensorView& in = views_[static_cast<size_t>(n.inputs[0])];
  auto c = comms_.find(n.name);
  comm::Communicator* comm = c == comms_.end() ? nullptr : c->second;
  auto slot = member_slot_.find(n.id);
  if (n.op == ir::Op::AllReduce && slot != member_slot_.end() && !buckets_.empty()) {
    BucketRun& b = buckets_[static_cast<size_t>(slot->second.first)];
    if (b.work && !b.waited) {
      comm::Status s = b.work->wait();
      b.waited = true;
      if (!s.ok) return {false, "all-reduce of bucket " + std::to_string(slot->second.first) + " over `" + n.name + "`: " + s.message};
    }
    // Reduced in place (or, without a communicator, the local values).
    out.data = bucket_flat_[static_cast<size_t>(slot->second.first)].data() + slot->second.second;
    return {};
  }
  if (n.op == ir::Op::AllReduce) {
    std::memcpy(out.data, in.data, static_cast<size_t>(out.elements) * 4);
    if (!comm) return {};
    comm::Status s = comm->allReduce(out.f(), out.elements)->wait();
    if (!s.ok) return {false, "all-reduce over `" + n.name + "`: " + s.message};
    return {};
  }
  if (!comm) {
    const int64_t n_in = std::min(in.elements, out.elements);
    std::memcpy(out.data, in.data, static_cast<size_t>(n_in) * 4);
    if (out.elements > n_in)  // buffers are not zeroed
      std::memset(out.f() + n_in, 0, static_cast<size_t>(out.elements - n_in) * 4);
    return {};
  }
  if (n.op == ir::Op::AllGather && !n.names.empty() && in.shape.find(n.names[0]) == 0) {
    // Gathering the leading dim is a concatenation of the ranks' blocks.
    comm::Status s = comm->allGather(in.f(), out.f(), in.elements)->wait();
    if (!s.ok) return {false, "all-gather over `" + n.name + "`: " + s.message};
    return {};
  }
  return {false, std::string(ir::opName(n.op)) + " over `" + n.name + "` of a non-leading dim is not built yet"};
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
