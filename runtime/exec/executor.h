// Runs one rank's program (core/program.h): follows a schedule's
// instructions — run a node, start a communication group, wait for one —
// on the storage the planner chose. Buffer slots are allocated once, at the
// size the planner gave them, and reused by every run; nothing is zeroed
// (every kernel writes all of its output). Parameters live outside, bound by
// path; gradients can be written straight into caller memory (bindGrad).
// Update nodes run in the update schedule (update()), once per optimiser step.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/program.h"
#include "runtime/comm/communicator.h"
#include "runtime/exec/backend.h"
#include "runtime/optim/multi_tensor.h"
#include "runtime/optim/optimizer.h"

namespace dtl::rt {

class Executor {
 public:
  // `program` must outlive the executor. A program with fused regions
  // (Program::fused) needs `regions`, which runs them; unfused nodes run on
  // `backend`.
  Executor(const prog::Program& program, Backend& backend, RegionRunner* regions = nullptr);

  // The process group of a mesh axis; collectives on an axis without one
  // (a one-rank run) are copies.
  void setCommunicator(const std::string& axis, comm::Communicator* c) { comms_[axis] = c; }

  // When each gradient bucket was launched, in order: the proof that
  // communication overlaps the backward pass.
  struct BucketEvent {
    int bucket;
    int after_node;      // the last node that had run
    int64_t nodes_left;  // nodes of the step still to run at launch
  };
  const std::vector<BucketEvent>& bucketEvents() const { return bucket_events_; }

  // Storage of a parameter (its local shape on this rank: the piece its
  // placement gives it, stacked dims included), owned by the caller.
  void bindParam(const std::string& path, float* data);
  // Where the next runs write d(loss)/d(param) (param's size), instead of the
  // executor's own memory; grad(path) then points there. False when the
  // program does not compute that gradient as an output of its own (a view,
  // a block of a gathered stack or a bucket, shared with another parameter):
  // it stays in executor memory.
  bool bindGrad(const std::string& path, float* data);
  // Input values for the next run (f32 or int32 by the input's dtype); the
  // executor copies them.
  void setInput(const std::string& name, const void* data, int64_t elements);
  // The same without the copy, for the next run only: it reads `data`, which
  // the caller keeps alive and unchanged until run() returns (the trainer's
  // batch, handed back to the loader after its run: one copy of it a step
  // fewer). A later run needs the input fed again.
  void bindInput(const std::string& name, const void* data, int64_t elements);

  // Forward only (evaluation) or forward + backward (training).
  KernelStatus run(bool with_backward, const RunContext& ctx);

  // The optimiser step (the program's update schedule): each Update node
  // updates its parameter's piece in place from the gradient and state bound
  // here. `step` counts from 1; `lr` is this step's scheduled rate.
  void bindStepGrad(const std::string& path, float* grad) { step_grads_[path] = grad; }
  void bindState(const std::string& path, optim::ParamState* state) { states_[path] = state; }
  // With a multi-tensor runner (setMultiTensorUpdate: `--kernels jit`),
  // the updates between two of the schedule's collectives run as one call
  // of it on up to `threads` threads; without one, one Optimizer::update per
  // node on the caller's thread (`fast`).
  KernelStatus update(const optim::Optimizer& opt, int64_t step, double lr, int threads = 1);
  void setMultiTensorUpdate(optim::MultiTensorUpdate* m) { multi_update_ = m; }

  float value(int node) const;  // a scalar the run kept (loss, metrics)
  // A whole value the last run kept (one of the program's `outputs`), in its
  // storage order; its data is null when the run did not compute it.
  const TensorView& tensor(int node) const { return views_[static_cast<size_t>(node)]; }
  // d(loss)/d(param) from the last run, which must have been a backward one
  // (an evaluation run reuses the buffers), in the param's storage order.
  const float* grad(const std::string& path) const;
  // The same, writable until the next run (the trainer clips in place).
  float* grad(const std::string& path) { return const_cast<float*>(std::as_const(*this).grad(path)); }
  // Seconds this executor has spent blocked waiting for collectives (every
  // run and update so far): communication the schedule did not hide.
  double waitSeconds() const { return wait_seconds_; }
  // The part of it spent on gathers of parameters' pieces (ZeRO-3): what
  // prefetching is to hide.
  double gatherWaitSeconds() const { return gather_wait_seconds_; }
  bool gathersPieces() const;  // the program has such gathers
  // Bytes the executor holds: buffer slots, bucket buffers, unbound outputs.
  int64_t peakBytes() const { return held_bytes_; }
  const prog::Program& program() const { return program_; }

 private:
  void* place(const prog::Schedule& s, int node);
  KernelStatus runNode(const prog::Schedule& s, int node, const RunContext& ctx);
  KernelStatus runFused(const prog::Schedule& s, int region, const RunContext& ctx);
  TensorView& prepare(const prog::Schedule& s, int node);
  KernelStatus localSlice(const ir::Node& n, const TensorView& in, TensorView& out);
  KernelStatus start(const prog::Schedule& s, int group, int after_node, int64_t nodes_left, const RunContext& ctx);
  KernelStatus startScatterBucket(const prog::Schedule& s, int group, const RunContext& ctx, comm::Communicator* comm);
  void unpackScattered(int group);
  KernelStatus runUpdate(const ir::Node& n, const optim::Optimizer& opt, int64_t step, double lr);
  KernelStatus tensorStep(const ir::Node& n, optim::TensorStep& t);
  KernelStatus flushUpdates(const optim::Optimizer& opt, int64_t step, double lr, int threads);
  KernelStatus wait(int group);
  std::string describeCollective(int group) const;
  void placeGathered(int group);
  void largestOf(int group);
  KernelStatus reduceScatter(int group, const TensorView& in, TensorView& out, comm::Communicator* comm);
  void unscatter(int group);
  KernelStatus allToAll(int group, const TensorView& in, TensorView& out, comm::Communicator* comm);
  void exchanged(int group);
  int64_t axisRanks(const std::string& axis) const;

  const prog::Program& program_;
  Backend& backend_;
  RegionRunner* regions_;
  optim::MultiTensorUpdate* multi_update_ = nullptr;
  std::vector<optim::TensorStep> pending_;  // updates waiting for one multi-tensor call
  std::vector<TensorView> views_;  // per node, this run
  std::vector<TensorView> results_;  // the running node's results past its first
  struct Slot {
    std::unique_ptr<uint32_t[]> words;  // f32 and i32 are both one 4-byte word
  };
  std::vector<Slot> slots_;
  std::vector<void*> placed_;  // per node: its storage this run
  std::map<std::string, float*> step_grads_;  // per parameter path: this step's gradient
  std::map<std::string, optim::ParamState*> states_;
  // A group's buffer (prog::Group::elements): its own for the whole run, or
  // a transient one in the running schedule's slot (Schedule::group_slot).
  float* buffer(int group);
  int64_t bufferSize(int group) const { return program_.groups[static_cast<size_t>(group)].elements; }
  std::vector<std::vector<float>> flat_;      // per group: its own buffer, unless transient
  const prog::Schedule* running_ = nullptr;   // the schedule being run
  std::map<int, std::vector<float>> padded_;  // per uneven all-gather: this rank's piece, padded
  std::map<int, std::vector<float>> outputs_;  // unbound gradient outputs, by node
  std::map<std::string, float*> params_;
  struct Fed {
    std::vector<uint32_t> copy;  // setInput's
    const void* data = nullptr;  // copy.data(), or bindInput's
    int64_t elements = 0;
    bool bound = false;  // bindInput's: dropped when the run ends
  };
  std::map<std::string, Fed> inputs_;
  std::map<int, float*> bound_;          // gradient node → caller memory
  std::map<std::string, int> grad_node_;
  std::map<std::string, comm::Communicator*> comms_;
  std::vector<std::unique_ptr<comm::Work>> work_;  // per group, while in flight
  std::vector<uint64_t> started_at_;               // per group: when it last started (a count of starts)
  uint64_t starts_ = 0;
  std::vector<int> numbers_;                       // per group: its number in `dtlc plan`
  std::vector<BucketEvent> bucket_events_;
  int64_t held_bytes_ = 0;
  double wait_seconds_ = 0, gather_wait_seconds_ = 0;
  bool gathersPieces(const prog::Group& g) const;
};

}  // namespace dtl::rt
