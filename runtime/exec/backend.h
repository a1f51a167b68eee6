// The kernel seam: a Backend runs one IR node on buffers. Two backends must
// agree: the reference backend (runtime/kernels/reference, computed in
// double) is the oracle; the fast backend (vendor GEMM, vectorised and fused
// f32 kernels) is what training uses. The executor owns the memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/graph.h"

namespace dtl::rt {

// A tensor in executor memory. Floating tensors (f32; bf16/f16 are computed
// as f32 in this version) are float arrays; integer and bool tensors are
// int32 arrays (bool as 0/1). Storage order is the shape's name order.
struct TensorView {
  Shape shape;
  DType dtype = DType::F32;
  void* data = nullptr;
  int64_t elements = 0;
  float* f() const { return static_cast<float*>(data); }
  int32_t* i() const { return static_cast<int32_t*>(data); }
  bool isFloat() const { return dtl::isFloat(dtype); }
};

struct RunContext {
  bool training = true;  // dropout is the identity when false
  uint64_t seed = 0;     // step seed; dropout masks derive from (seed, node id)
  int threads = 1;       // cores this rank may use
  // Gradient buckets are not reduced (each rank keeps its partial sums): the
  // micro-batches of a step with accumulation, whose gradients the trainer
  // sums and reduces once (PyTorch's no_sync).
  bool defer_buckets = false;
  // ZeRO's reduce-scatter buckets: add this micro-batch's gradients to the
  // blocks already packed (the step's sum, `zero = 1` with accumulation)
  // instead of overwriting them, and hold the launch until a run without
  // `scatter_defer` (the step's last micro-batch).
  bool scatter_add = false, scatter_defer = false;
};

// The seed of one dropout mask, shared by both backends so their masks agree:
//   dropoutSeed(step, id) = splitmix64(step ^ splitmix64(id))
// with splitmix64 the finaliser of runtime/kernels/reference/dropout.h and id
// the forward Dropout node's lowering id (its `index`; a DropoutGrad node
// carries the same). Element k of a rank's block is then kept iff
// ref::dropoutKeep(dropoutSeed(step, id), node.offset + k, p): the bits of the
// global element, whatever the layout.
// Hashing the id first keeps masks of neighbouring nodes and steps unrelated.
uint64_t dropoutSeed(uint64_t step_seed, int64_t forward_node_id);

struct KernelStatus {
  bool ok = true;
  std::string message;  // e.g. "cross_entropy: label 12 at (batch 3) is out of range …"
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Computes node `n` (any op but Input, Param, Update) into `out`, whose
  // shape, dtype and storage the executor has prepared from the node.
  virtual KernelStatus run(const ir::Node& n, const std::vector<const TensorView*>& in, TensorView& out,
                           const RunContext& ctx) = 0;
  // A node of several results (ir::Node::results): out[k] is result k, out[0] the node's own. Or a node
  // whose epilogue writes nodes of their own storage (ir::PostOp::own): out[0] its own value, then one
  // per such post-op in epilogue order, null where the running schedule does not compute that node (a
  // cross-entropy's gradient in the evaluation schedule).
  virtual KernelStatus runResults(const ir::Node& n, const std::vector<const TensorView*>& in,
                                  const std::vector<TensorView*>& out, const RunContext& ctx) = 0;
};

// Runs a program's fused regions (core/program.h Program::fused), each as
// one compiled kernel. Implemented where the kernel generator is linked
// (runtime/jit: `--kernels jit`), so the executor and the backends stay free
// of LLVM. One object per executor (it may keep scratch between regions).
class RegionRunner {
 public:
  virtual ~RegionRunner() = default;
  // Computes region `region`'s outputs into `out` (views the executor has
  // prepared from the output nodes) from `in`, in the region's orders.
  virtual KernelStatus run(int region, const std::vector<const TensorView*>& in, const std::vector<TensorView*>& out,
                           const RunContext& ctx) = 0;
};

// Both in dtl_backends (runtime/CMakeLists.txt). A backend object runs one
// node at a time (the fast one reuses scratch buffers between nodes); use one
// per thread. The fast one runs GEMMs on ctx.threads OpenMP threads (set per
// calling thread, only when it changes) and everything else on the caller.
std::unique_ptr<Backend> makeReferenceBackend();
std::unique_ptr<Backend> makeFastBackend();

}  // namespace dtl::rt
