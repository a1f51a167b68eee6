// Runs a training graph on one rank: gives every node a buffer (reusing the
// memory of values past their last use; buffers are not zeroed, every kernel
// writes all of its output), feeds inputs, calls the backend for each node in
// order, and keeps what the caller reads afterwards (loss, metrics, parameter
// gradients). Parameters live outside, bound by path; Param, Slice (of a
// leading stacked dim of a parameter) and Reshape are views, not copies.
// A slice_grad over a leading dim owns the stacked buffer, and each copy's
// gradient is computed straight into its block of it (so gathering the
// copies moves nothing). Update nodes are not run here: the trainer applies
// the optimiser.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/exec/backend.h"

namespace dtl::rt {

class Executor {
 public:
  Executor(const ir::Graph& graph, Backend& backend);

  // The process group of a mesh axis; collectives on an axis without one
  // (a one-rank run) are copies.
  void setCommunicator(const std::string& axis, comm::Communicator* c) { comms_[axis] = c; }

  // When each gradient bucket was launched, in node order: the proof that
  // communication overlaps the backward pass.
  struct BucketEvent {
    int bucket;
    int after_node;  // the node that had just run
    int64_t nodes_left;  // nodes of the step still to run at launch
  };
  const std::vector<BucketEvent>& bucketEvents() const { return bucket_events_; }

  // Storage of a parameter (its full, stacked shape), owned by the caller.
  void bindParam(const std::string& path, float* data);
  // Where the next runs write d(loss)/d(param) (param's size), instead of the
  // executor's own memory; grad(path) then points there. False when that
  // gradient is not a value of its own (a view, a block of a gathered
  // stack, or shared with another parameter): it stays in executor memory.
  bool bindGrad(const std::string& path, float* data);
  // Input values for the next run (f32 or int32 by the input's dtype); the
  // executor copies them.
  void setInput(const std::string& name, const void* data, int64_t elements);

  // Forward only (evaluation) or forward + backward (training).
  KernelStatus run(bool with_backward, const RunContext& ctx);

  float value(int node) const;  // a scalar the run kept (loss, metrics)
  // d(loss)/d(param) from the last backward run, in the param's storage order.
  const float* grad(const std::string& path) const;
  // The same, writable until the next run (the trainer clips in place).
  float* grad(const std::string& path) { return const_cast<float*>(std::as_const(*this).grad(path)); }
  int64_t peakBytes() const { return peak_bytes_; }
  const ir::Graph& graph() const { return graph_; }

 private:
  struct Buffer {
    std::unique_ptr<uint32_t[]> words;  // f32 and i32 are both one 4-byte word; not initialised
    size_t capacity = 0;
  };
  void* allocate(int node, int64_t elements);
  void* storage(int node);  // where node writes this run: its own buffer or its block of a stack
  KernelStatus collective(const ir::Node& n, TensorView& out);
  void launchBuckets(int after_node, int end);
  void release(int node);

  const ir::Graph& graph_;
  Backend& backend_;
  std::vector<TensorView> views_;
  std::vector<std::unique_ptr<Buffer>> owned_;     // per node, when it owns memory
  std::vector<std::unique_ptr<Buffer>> free_;      // reusable buffers
  std::map<std::string, float*> params_;
  std::map<std::string, std::vector<uint32_t>> inputs_;
  std::vector<int> last_use_fwd_, last_use_all_;   // per node: last consumer, or a large value to keep
  std::vector<std::vector<int>> release_fwd_, release_all_;  // per node: the values to free once it has run
  std::vector<bool> param_view_;                   // Param, a leading-dim Slice or a Reshape of one: a view
  std::vector<std::pair<int, int64_t>> gathered_;  // per node: (slice_grad, element offset) it writes into, or -1
  std::vector<void*> placed_;                      // per node: storage(node) of this run
  std::vector<float*> bound_;                      // per node: caller memory it is written to (bindGrad)
  bool gather_in_place_ = false;                   // this run computes copies into their stacks
  std::map<std::string, int> grad_node_;
  int64_t live_bytes_ = 0, peak_bytes_ = 0;
  std::map<std::string, comm::Communicator*> comms_;
  // A gradient bucket's values, contiguous, for the life of the executor:
  // gradients whose only reader is their all-reduce are computed straight
  // into it, the all-reduce runs on it in place, and the reduced gradients
  // are views of it (nothing is copied in or out, nothing reallocated).
  struct BucketRun {
    std::unique_ptr<comm::Work> work;
    bool waited = false;
  };
  std::vector<std::vector<float>> bucket_flat_;
  std::vector<BucketRun> buckets_;
  std::vector<std::pair<int, int64_t>> in_bucket_;  // per node: (bucket, offset) its value is computed into, or -1
  std::map<int, std::pair<int, int64_t>> member_slot_;  // AllReduce node → (bucket, offset)
  std::vector<BucketEvent> bucket_events_;
  std::vector<int> forward_extra_;  // conversions of the loss and metrics past forward_end
};

}  // namespace dtl::rt
