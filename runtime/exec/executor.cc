// A run follows one schedule of the program:
// - run: a parameter points at the caller's memory, an input copies what
//   was fed, a view points into its source's storage, anything else is
//   computed by the backend into the storage the planner gave it (a
//   node with an epilogue, ir::Node::epilogue, computes the nodes it absorbed
//   there too, as views of it, or into their own storage, PostOp::own);
// - start: an all-reduce bucket copies the gradients not computed in place
//   into its flat buffer and launches one all-reduce on it; a ZeRO
//   reduce-scatter bucket packs each rank's pieces into that rank's block;
//   a single collective launches on its own buffer (executor_collectives.cc);
// - wait: the group's results are ready (and put in place: a bucket's
//   scattered pieces, gathered blocks, …);
// - update: the optimiser step's schedule, once per optimiser step: each
//   update in place on its parameter's piece, the gathers of updated pieces;
//   with a multi-tensor runner (`--kernels jit`) the updates up to the next
//   collective are collected and run in one call of it.
// Storage is resolved once per run and value: a slot, the caller's
// parameter or bound gradient, a block of a bucket or of another value. A
// group's buffer is its own, or a slot of the running schedule.
#include "runtime/exec/executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace dtl::rt {

Executor::Executor(const prog::Program& p, Backend& backend, RegionRunner* regions)
    : program_(p), backend_(backend), regions_(regions) {
  views_.resize(p.nodes.size());
  const std::vector<int64_t> arena = p.arenaWords();
  slots_.resize(arena.size());
  for (size_t k = 0; k < arena.size(); ++k) {
    slots_[k].words.reset(new uint32_t[static_cast<size_t>(arena[k])]);  // never zeroed: every kernel writes all of its output
    held_bytes_ += arena[k] * 4;
  }
  flat_.resize(p.groups.size());
  work_.resize(p.groups.size());
  started_at_.assign(p.groups.size(), 0);
  numbers_ = prog::collectiveNumbers(p);
  for (const prog::Group& g : p.groups) {
    if (g.transient) continue;
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
  Fed& f = inputs_[name];
  f.copy.resize(static_cast<size_t>(elements));
  if (elements > 0) std::memcpy(f.copy.data(), data, static_cast<size_t>(elements) * 4);
  f.data = f.copy.data();
  f.elements = elements;
  f.bound = false;
}

void Executor::bindInput(const std::string& name, const void* data, int64_t elements) {
  Fed& f = inputs_[name];
  f.copy = {};
  f.data = data;
  f.elements = elements;
  f.bound = true;
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
    case prog::Storage::Group: at = buffer(st.index) + st.offset; break;
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

float* Executor::buffer(int group) {
  const prog::Group& g = program_.groups[static_cast<size_t>(group)];
  if (!g.transient) return flat_[static_cast<size_t>(group)].data();
  const int slot = running_ ? running_->group_slot[static_cast<size_t>(group)] : -1;
  return slot < 0 ? nullptr : reinterpret_cast<float*>(slots_[static_cast<size_t>(slot)].words.get());
}

KernelStatus Executor::run(bool with_backward, const RunContext& ctx) {
  struct DropBound {  // bindInput's pointers serve this run only, however it ends (a kernel may throw)
    std::map<std::string, Fed>& inputs;
    ~DropBound() { std::erase_if(inputs, [](const auto& in) { return in.second.bound; }); }
  } drop_bound{inputs_};
  const prog::Schedule& s = with_backward ? program_.train : program_.eval;
  running_ = &s;
  placed_.assign(program_.nodes.size(), nullptr);
  bucket_events_.clear();
  int64_t runs_left = 0;
  for (const prog::Instr& in : s.instrs) runs_left += in.kind == prog::Instr::Run || in.kind == prog::Instr::Fused;
  int last_run = -1;
  KernelStatus status;
  for (const prog::Instr& in : s.instrs) {
    if (in.kind == prog::Instr::Run) {
      status = runNode(s, in.id, ctx);
      last_run = in.id;
      --runs_left;
    } else if (in.kind == prog::Instr::Fused) {
      status = runFused(s, in.id, ctx);
      last_run = program_.fused[static_cast<size_t>(in.id)].nodes.back();
      --runs_left;
    } else if (in.kind == prog::Instr::Start) {
      status = start(s, in.id, last_run, runs_left, ctx);
      started_at_[static_cast<size_t>(in.id)] = ++starts_;
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

TensorView& Executor::prepare(const prog::Schedule& s, int id) {
  const ir::Node& n = program_[id];
  TensorView& v = views_[static_cast<size_t>(id)];
  v.shape = n.shape;
  v.dtype = n.dtype;
  v.elements = n.shape.elements().value_or(0);
  v.data = place(s, id);
  return v;
}

// One kernel for the region's members: its outputs are placed like any
// computed value; the other members are never stored.
KernelStatus Executor::runFused(const prog::Schedule& s, int region, const RunContext& ctx) {
  const prog::Fused& f = program_.fused[static_cast<size_t>(region)];
  if (!regions_) return {false, "the program has fused regions but no kernels to run them (--kernels jit)"};
  std::vector<const TensorView*> ins;
  std::vector<TensorView*> outs;
  for (int x : f.inputs) {
    if (!views_[static_cast<size_t>(x)].data)
      return {false, "fused region " + std::to_string(region) + " reads %" + std::to_string(x) + ", which has no value in this run"};
    ins.push_back(&views_[static_cast<size_t>(x)]);
  }
  for (int v : f.outputs) {
    TensorView& t = prepare(s, v);
    if (!t.data) return {false, "%" + std::to_string(v) + " (a fused region's output) has no storage in this run"};
    outs.push_back(&t);
  }
  return regions_->run(region, ins, outs, ctx);
}

KernelStatus Executor::runNode(const prog::Schedule& s, int id, const RunContext& ctx) {
  const ir::Node& n = program_[id];
  TensorView& v = prepare(s, id);
  if (n.op == ir::Op::Param) {
    if (!v.data) return {false, "parameter `" + n.name + "` has no storage"};
    return {};
  }
  if (!v.data) return {false, "%" + std::to_string(id) + " (" + ir::opName(n.op) + ") has no storage in this run"};
  if (n.op == ir::Op::Input) {
    auto it = inputs_.find(n.name);
    if (it == inputs_.end() || it->second.elements != v.elements)
      return {false, "input `" + n.name + "` was not fed " + std::to_string(v.elements) + " values"};
    if (v.elements > 0) std::memcpy(v.data, it->second.data, static_cast<size_t>(v.elements) * 4);
    return {};
  }
  const prog::Storage& st = s.storage[static_cast<size_t>(id)];
  if (st.kind == prog::Storage::Alias && !n.inputs.empty() && st.index == n.inputs[0] &&
      (n.op == ir::Op::Reshape || n.op == ir::Op::Slice || n.op == ir::Op::LocalSlice || n.op == ir::Op::Result))
    return {};  // a view of its input: its data is its source's (an alias elsewhere, a block of a stack, is computed)
  if (n.op == ir::Op::Update) return {};  // in place on its parameter's piece: runUpdate
  if (n.op == ir::Op::LocalSlice) return localSlice(n, views_[static_cast<size_t>(n.inputs[0])], v);
  std::vector<const TensorView*> ins;
  ins.reserve(n.inputs.size());
  for (int x : n.inputs) ins.push_back(&views_[static_cast<size_t>(x)]);
  if (n.results.empty()) {
    // An epilogue that writes nodes of their own storage: those are the kernel's other outputs
    // (none where this schedule does not compute them: a cross-entropy's gradient in evaluation).
    const bool own = std::any_of(n.epilogue.begin(), n.epilogue.end(), [](const ir::PostOp& o) { return o.own; });
    KernelStatus st;
    if (own) {
      std::vector<TensorView*> outs = {&v};
      for (const ir::PostOp& o : n.epilogue)
        if (o.own) {
          TensorView& t = prepare(s, o.node);
          outs.push_back(t.data ? &t : nullptr);
        }
      st = backend_.runResults(n, ins, outs, ctx);
    } else {
      st = backend_.run(n, ins, v, ctx);
    }
    // The other nodes an epilogue computed are views of this node's storage.
    if (st.ok)
      for (const ir::PostOp& o : n.epilogue)
        if (!o.own) prepare(s, o.node);
    return st;
  }
  // Results 1, 2, … follow the first in the node's storage (the views of
  // them, Op::Result nodes, point there).
  results_.resize(n.results.size());
  std::vector<TensorView*> outs = {&v};
  for (size_t k = 0; k < n.results.size(); ++k) {
    TensorView& r = results_[k];
    r.shape = n.results[k].shape;
    r.dtype = n.results[k].dtype;
    r.elements = r.shape.elements().value_or(0);
    r.data = static_cast<uint32_t*>(v.data) + ir::resultOffset(n, static_cast<int64_t>(k) + 1);
    outs.push_back(&r);
  }
  return backend_.runResults(n, ins, outs, ctx);
}

// This rank's block of a replicated value along a dim that is not its
// leading one (that one is a view): a strided copy, no communication.
KernelStatus Executor::localSlice(const ir::Node& n, const TensorView& in, TensorView& out) {
  // A flat piece: the same rows of the value seen with its flat dim merged.
  const Shape in_shape = layout::flatView(in.shape, n.names[0]);
  const int k = in_shape.find(n.names[0]);
  if (k < 0) return {false, "local_slice: `" + n.names[0] + "` is not a dim of its input"};
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < k; ++d) outer *= in_shape.dims[static_cast<size_t>(d)].size;
  for (size_t d = static_cast<size_t>(k) + 1; d < in_shape.dims.size(); ++d) inner *= in_shape.dims[d].size;
  const int64_t whole = in_shape.dims[static_cast<size_t>(k)].size, part = out.shape.dims[static_cast<size_t>(k)].size;
  const auto* src = static_cast<const uint32_t*>(in.data);
  auto* dst = static_cast<uint32_t*>(out.data);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * part * inner, src + (o * whole + n.index) * inner, static_cast<size_t>(part * inner) * 4);
  return {};
}

// The update schedule: each Update in place on its parameter's piece (the
// parameter itself, or with ZeRO this rank's flat piece of it), and the
// gathers of updated pieces it starts and waits for.
KernelStatus Executor::update(const optim::Optimizer& opt, int64_t step, double lr, int threads) {
  const prog::Schedule& s = program_.update;
  running_ = &s;
  placed_.assign(program_.nodes.size(), nullptr);
  pending_.clear();
  RunContext ctx;
  ctx.threads = threads;
  KernelStatus status;
  for (const prog::Instr& in : s.instrs) {
    // A collective may read an updated piece (ZeRO's gathers): the updates before it are done first.
    if (in.kind != prog::Instr::Run) status = flushUpdates(opt, step, lr, threads);
    if (!status.ok) break;
    if (in.kind == prog::Instr::Run) {
      const ir::Node& n = program_[in.id];
      status = runNode(s, in.id, ctx);
      if (status.ok && n.op == ir::Op::Update) {
        if (multi_update_) {
          optim::TensorStep t;
          status = tensorStep(n, t);
          if (status.ok && t.n > 0) pending_.push_back(std::move(t));
        } else {
          status = runUpdate(n, opt, step, lr);
        }
      }
    } else if (in.kind == prog::Instr::Start) {
      status = start(s, in.id, -1, 0, ctx);
      started_at_[static_cast<size_t>(in.id)] = ++starts_;
    } else {
      status = wait(in.id);
    }
    if (!status.ok) break;
  }
  if (status.ok) status = flushUpdates(opt, step, lr, threads);
  for (std::unique_ptr<comm::Work>& w : work_)
    if (w) {
      w->wait();
      w.reset();
    }
  return status;
}

// What an Update node updates: its parameter's piece, gradient and state.
KernelStatus Executor::tensorStep(const ir::Node& n, optim::TensorStep& t) {
  t.name = n.name;
  t.n = n.shape.elements().value_or(0);
  if (t.n == 0) return {};  // a ZeRO piece of fewer elements than ranks: nothing here
  t.param = views_[static_cast<size_t>(n.id)].f();
  auto g = step_grads_.find(n.name);
  auto st = states_.find(n.name);
  if (!t.param || g == step_grads_.end() || st == states_.end() || !g->second)
    return {false, "update of `" + n.name + "`: its parameter, gradient or optimiser state is not bound"};
  t.grad = g->second;
  t.state = st->second;
  return {};
}

KernelStatus Executor::flushUpdates(const optim::Optimizer& opt, int64_t step, double lr, int threads) {
  if (pending_.empty()) return {};
  std::string why = multi_update_->run(opt, pending_, step, lr, threads);
  pending_.clear();
  if (!why.empty()) return {false, why};
  return {};
}

KernelStatus Executor::runUpdate(const ir::Node& n, const optim::Optimizer& opt, int64_t step, double lr) {
  optim::TensorStep t;
  if (KernelStatus s = tensorStep(n, t); !s.ok || t.n == 0) return s;
  try {
    opt.update(t.param, t.grad, t.n, *t.state, step, lr);
  } catch (const std::invalid_argument& e) {
    return {false, "update of `" + n.name + "`: " + e.what()};
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
