// The training graph (shared by compiler and runtime): a flat SSA list of primitive operations over named
// shapes. Lowering (lower_model.cc) produces the forward graph from the
// checked model; autodiff (autodiff.cc) appends the backward; the optimiser
// update is appended last. Every node keeps the source location that caused
// it so later passes can say *why*. The runtime executes nodes in order.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/placement.h"
#include "core/shape.h"

namespace dtl::ir {

// Operation kinds. Forward primitives mirror language.md §5; the *Grad kinds
// exist only in the backward graph.
enum class Op {
  // leaves
  Input,      // name = model input; fed by the data loader
  Param,      // name = parameter path; the full (stacked) tensor
  Const,      // scalar f32 `scalar`
  // structure
  Slice,      // inputs[0] stacked over names[0]; picks copy `index` (drops that dim)
  Align,      // permute / broadcast inputs[0] to this node's shape (by name)
  ReduceTo,   // sum inputs[0] over the names not in this node's shape, then permute
  // elementwise
  Unary,      // fn: relu gelu gelu_tanh silu tanh sigmoid exp log sqrt rsqrt neg abs
  Binary,     // fn: add sub mul div eq ne lt le gt ge; broadcast by name to this shape
  // contractions and reductions
  Contract,   // inputs[0] @ inputs[1]: sums the shared names. A third input without an epilogue is a `base` (this
              // node's shape, names in order, f32): base + the product (accumulate-into-contraction pass; the reference
              // rounds the product to f32 first, as the add did; a GEMM adds into base, beta = 1). The planner
              // computes base into this node's storage where it can, else the kernel copies it there first
  Reduce,     // fn: sum mean max; over names
  Softmax,    // over names[0]
  LogSoftmax, // over names[0]
  Normalize,  // over names, eps = scalar
  RmsNormalize,
  Embed,      // inputs: table, ids. In a rank's program `offset` is the first table row it holds and
              // `index` the table's rows in all (0: it holds them all); ids of other rows give zeros
  Attention,  // inputs: q, k, v; flag = causal. Results: out (q's shape), lse [lead…, seq_q, heads] f32: each
              // query row's log-sum-exp of its scaled scores, saved for the backward
  Dropout,    // scalar = p; index = its lowering id, the mask's stable seed; identity when evaluating
  CrossEntropy,  // inputs: logits, labels; names[0] = classes
  Argmax,     // names[0]
  Reshape,    // same data, this node's shape
  Cast,       // to this node's dtype
  Arange,     // i32 over this node's single dim
  PickClass,  // inputs: logits, labels; names[0] = classes: logits[…, label] per row. In a rank's program
              // `offset` is its first class and `index` the classes in all (0: all); other classes give 0
  Result,     // inputs[0] = a node of several results; index = k ≥ 1: a view of its result k (this node's
              // shape and dtype are that result's). No kernel, no copy: see Node::results
  // backward-only
  UnaryGrad,      // fn; inputs: x, dy → dx (relu: its result y = relu(x), dy: the same select)
  MaxGrad,        // inputs: x, dy; names reduced → dx
  SoftmaxGrad,    // inputs: y (softmax output), dy; names[0]
  LogSoftmaxGrad, // inputs: y (log_softmax output), dy; names[0]
  NormalizeGrad,  // inputs: x, dy; names, eps
  RmsNormalizeGrad,
  EmbedGrad,      // inputs: ids, dy[, base] → d table (this node's shape), added to `base` (another gradient
                  // of the table) when given; `offset`, `index` as for Embed
  AttentionGrad,  // inputs: q, k, v, out, lse, dy (out and lse: the forward's results); flag = causal.
                  // Results: dq (this node's shape), dk, dv
  CrossEntropyGrad,  // inputs: logits, labels, dy (scalar); names[0]
  DropoutGrad,    // inputs: dy; scalar = p, index = the forward's (the same mask)
  PickClassGrad,  // inputs: labels; names[0] = classes → one-hot of this node's shape; `offset`, `index`
                  // as for PickClass
  SliceGrad,      // inputs: g_0 … g_k-1, the gradients of copies index … index+k-1 along names[0] (copy
                  // shape each); this node = the full stacked shape, those copies in place, zeros elsewhere
  // optimiser
  Update,         // inputs: param, grad; name = param path; applies the train block's optimiser
  // communication, inserted by the layout pass (compiler/layout) where a
  // consumer needs another placement than its producer gives; name = the
  // mesh axis, `where` = the split rule that caused it
  AllReduce,      // Partial → Replicate: sum over the axis (names = {"max"}: the largest)
  AllGather,      // Shard(names[0]) → Replicate
  ReduceScatter,  // Partial → Shard(names[0])
  AllToAll,       // Shard(names[0]) → Shard(names[1]): each rank sends every other its part of names[1]
                  // and receives its part of names[1] with all of names[0]
  LocalSlice,     // Replicate → Shard(names[0]): this rank's slice of a value every rank holds whole;
                  // no communication. In a rank's program `index` is where its slice starts in its input.
};

// A group of gradient reductions launched together (language.md §9
// `bucket`): all-reduces, or (ZeRO) reduce-scatters into flat pieces. It
// starts once node `start_after` has run and is waited for where its first
// member node stands.
struct Bucket {
  int id = 0;
  std::string axis;
  Op op = Op::AllReduce;     // AllReduce or ReduceScatter
  std::vector<int> members;  // its op's node ids, in production order
  int start_after = -1;
  int64_t bytes = 0;
  // ZeRO-1: the bucket's blocks hold the full gradient for the whole step
  // (a step's micro-batches are summed in them); other reduce-scatter
  // buckets need theirs only while in flight.
  bool keeps_sum = false;
};

const char* opName(Op op);
// The nodes the layout pass inserts to change a placement (their `fn` says why).
inline bool isConversion(Op op) {
  return op == Op::AllReduce || op == Op::AllGather || op == Op::ReduceScatter || op == Op::AllToAll ||
         op == Op::LocalSlice;
}

// A result of a node beyond its first (the node's own shape and dtype).
struct Result {
  Shape shape;
  DType dtype = DType::F32;
};

// One step of a node's epilogue (Node::epilogue), computed by the node's own
// kernel after its result, in order: the node it stands for. On a
// contraction: `Binary` (fn "add": the result plus the contraction's input
// `operand`, broadcast by name) or `Unary` (fn), in place; or a `Unary` into
// its node's `own` storage, the result kept (a gelu whose gradient reads its
// pre-activation). On a cross-entropy: its `CrossEntropyGrad` (`own`; dy is
// the input `operand`), from the logits the forward has just read. The rules
// that make them are compiler/codegen/fold_epilogues.cc; a GEMM library's
// epilogue (oneDNN post-ops, later cuBLASLt's) or the node's kernel runs them.
struct PostOp {
  Op op = Op::Binary;
  std::string fn;
  int operand = -1;  // which of the node's inputs it reads besides the result
  int node = -1;     // the program node it computes: a view of this node's storage, or
  bool own = false;  // its own storage, written by this kernel (this node's value stays)
};

struct Node {
  int id = -1;
  Op op = Op::Const;
  std::vector<int> inputs;
  Shape shape;
  DType dtype = DType::F32;
  std::string fn;                  // Unary/Binary/Reduce function
  std::vector<std::string> names;  // dims an op works over
  double scalar = 0;               // Const value, eps, dropout p
  int64_t index = 0;               // Slice copy, Result's result number, a windowed op's whole dim
  bool flag = false;               // Attention causal
  // In a rank's program (local form): the flat index in the global tensor
  // where this rank's block starts, so dropout masks are drawn by global
  // element and every layout drops what one process drops; for Embed,
  // EmbedGrad, PickClass and PickClassGrad, the first row or class it holds.
  int64_t offset = 0;
  // In a rank's program, for a dropout of a block split along a dim that is
  // not the leading one: per dim, where the block starts in the global
  // tensor and the global size (start0, size0, start1, size1, …); empty
  // when `offset` says it.
  std::vector<int64_t> block;
  std::string name;                // Input name / Param path / value name for printing
  std::string where;               // "spec.dtl:12:9": the source that caused the node
  // Results 1, 2, … of a node that makes several (result 0 is `shape`, `dtype`): one kernel writes them
  // all, into one storage (result k right after result k-1, resultOffset); a consumer reads result k ≥ 1
  // through an Op::Result node, a view of it. In a rank's program, local shapes as `shape`.
  std::vector<Result> results;
  // A Contract in a rank's program planned for fused kernels: post-ops its
  // kernel applies to the product (inputs 0 and 1); their operands are
  // inputs 2, …. Empty everywhere else.
  std::vector<PostOp> epilogue;
};

// Node n's result k (0: the node's own).
inline Result resultOf(const Node& n, int64_t k) {
  return k == 0 ? Result{n.shape, n.dtype} : n.results.at(static_cast<size_t>(k - 1));
}
// The value a node adds its own result into, which the planner may compute
// in place in the node's storage: an EmbedGrad's or a Contract's `base`
// (inputs[2]; a Contract with an epilogue has its operands there instead);
// -1 for any other node.
inline int accumulationBase(const Node& n) {
  return (n.op == Op::EmbedGrad || n.op == Op::Contract) && n.inputs.size() == 3 && n.epilogue.empty() ? n.inputs[2]
                                                                                                       : -1;
}
// Where result k starts in the node's storage, in 4-byte elements (every stored dtype is 4 bytes).
int64_t resultOffset(const Node& n, int64_t k);
// The elements of all of a node's results: the size of its storage.
int64_t storedElements(const Node& n);


struct Graph {
  std::vector<Node> nodes;
  int loss = -1;                          // scalar f32
  std::vector<std::pair<std::string, int>> metrics;
  // Filled by autodiff: gradient node per parameter path (same shape).
  std::vector<std::pair<std::string, int>> grads;
  int forward_end = 0;                    // nodes [0, forward_end) are the forward pass
  std::vector<Bucket> buckets;            // filled by the bucketing pass
  // A collective → the node after which it starts, when a scheduling pass
  // chose (ZeRO-3's prefetching gathers); else it starts after its input.
  std::map<int, int> start_after;
  // Values beyond the loss and metrics that a caller reads whole after a run
  // (a tool's, e.g. `dtlc generate`'s logits): kept alive to the end of it.
  std::vector<int> outputs;

  int add(Node n) {
    n.id = static_cast<int>(nodes.size());
    nodes.push_back(std::move(n));
    return nodes.back().id;
  }
  const Node& operator[](int id) const { return nodes[static_cast<size_t>(id)]; }
};

// "" when every Op::Result reads an existing result (k ≥ 1) of a node that has several, with that
// result's shape and dtype; else the first problem.
std::string checkResults(const Graph& g);

// ZeRO-3's gather of a stored parameter's flat pieces (`input` is its
// operand): an all-gather along a flat dim of anything but an update (whose
// pieces are gathered back into the parameter, levels 1 and 2).
inline bool gathersStoredPieces(const Node& n, const Node& input) {
  return n.op == Op::AllGather && !n.names.empty() && layout::Placement::isFlat(n.names[0]) && input.op != Op::Update;
}

// The nodes of the optimiser's step: the updates, the pieces of replicated
// parameters they update (ZeRO levels 1, 2: a local slice), and the gathers
// of the updated pieces. The program runs them in its `update` schedule.
std::vector<bool> optimiserStep(const Graph& g);

// One node's line: "%3 = contract(%1, %2) : f32[batch=4, out=8]  NOTE  # spec.dtl:5:9".
// One post-op of n's epilogue: "gelu into %12", "add %5 as %9".
std::string printPostOp(const Node& n, const PostOp& o);
std::string printNode(const Node& n, const std::string& note = {});

// Deterministic text form (`dtlc check --emit=ir|grad`). `annotate` (when
// given) adds text after a node's type, e.g. its placements (--emit=layout).
std::string printGraph(const Graph& g, bool with_backward,
                       const std::function<std::string(const Node&)>& annotate = {});

}  // namespace dtl::ir
