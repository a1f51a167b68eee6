// The fast f32 kernels behind makeFastBackend(), one function per primitive
// (forward and backward). Inputs and outputs are executor TensorViews; the
// caller (fast_backend.cc) has checked arity and prepared `out` from the node.
// Scratch buffers live in `Scratch`, owned by the backend and reused, so a
// backend object must not run two nodes at once.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/exec/backend.h"
#include "runtime/kernels/reference/elementwise.h"

namespace dtl::rt::fast {

using Names = std::vector<std::string>;

struct Scratch {
  std::vector<float> a, b, c, d;
  std::vector<int32_t> ids;
};

// epilogue.cc: a Contract with post-ops (ir::Node::epilogue), its operands in `in`; "" when done.
// out[0] is C, then one output per post-op into its own storage (PostOp::own; null: not computed).
// An activation into its own storage runs on up to `threads` OpenMP threads.
std::string contractEpilogue(const ir::Node& n, const std::vector<const TensorView*>& in,
                             const std::vector<TensorView*>& out, Scratch& s, int threads = 1);

// elementwise.cc
void unary(ref::Unary op, const TensorView& x, TensorView& y);
void unaryGrad(ref::Unary op, const TensorView& x, const TensorView& dy, TensorView& dx);
// relu over x in place (unary's select: NaN stays NaN, −0 and −inf become +0),
// for a contraction's epilogue on a panel of C still in cache.
void reluInPlace(float* x, int64_t n);
// unary's loop on n floats (a panel of C into an activation's own storage).
void unaryArray(ref::Unary op, const float* x, float* y, int64_t n);
void binary(ref::Binary op, const TensorView& a, const TensorView& b, TensorView& y);
void fill(double value, TensorView& y);
void cast(const TensorView& x, TensorView& y);
void arange(TensorView& y);
// Element k's mask bit is global element first + k's (a rank's block of a sharded tensor).
void dropout(const TensorView& x, double p, uint64_t seed, uint64_t first, bool training, TensorView& y);
// A block of a larger tensor (ref::forEachGlobalRun): masks by global element.
void dropoutBlock(const TensorView& x, double p, uint64_t seed, const std::vector<int64_t>& block, bool training,
                  TensorView& y);

// reduce.cc: over `names` (empty = all); the output keeps x's other dims.
void reduceSum(const TensorView& x, TensorView& y);
void reduceMean(const TensorView& x, TensorView& y);
void reduceMax(const TensorView& x, TensorView& y);
void maxGrad(const TensorView& x, const TensorView& dy, TensorView& dx);
void argmax(const TensorView& x, const std::string& over, TensorView& y);

// rows.cc: ops over a set of "row" names (softmax: one; normalize: several).
void softmax(const TensorView& x, const std::string& over, bool log, TensorView& y, Scratch& s);
void softmaxGrad(const TensorView& y, const TensorView& dy, const std::string& over, bool log, TensorView& dx,
                 Scratch& s);
void normalize(const TensorView& x, const Names& over, double eps, bool rms, TensorView& y, Scratch& s);
void normalizeGrad(const TensorView& x, const TensorView& dy, const Names& over, double eps, bool rms, TensorView& dx,
                   Scratch& s);

// nn.cc: the ops that fail on bad user data return "" or the message.
// Cross-entropy's rows are shared out over `threads` OpenMP threads (a
// GPT-2 step's logits are 256 rows of 50,257); the loss sums its rows'
// terms in row order whatever the threads, so it is the same bit for bit.
std::string crossEntropy(const TensorView& logits, const TensorView& labels, const std::string& classes, TensorView& y,
                         int threads, Scratch& s);
std::string crossEntropyGrad(const TensorView& logits, const TensorView& labels, const std::string& classes,
                             const TensorView& dloss, TensorView& dx, int threads, Scratch& s);
// Both at once (a cross-entropy's epilogue, PostOp::own): each row's loss term
// and its gradient row from one read of the row, the two kernels' bits; the
// loss alone when dx is null.
std::string crossEntropyWithGrad(const TensorView& logits, const TensorView& labels, const std::string& classes,
                                 const TensorView& dloss, TensorView& y, TensorView* dx, int threads, Scratch& s);
// Windowed as the reference's (ref::embed): rows [first, first + held) of `whole` (0: all).
std::string embed(const TensorView& table, const TensorView& ids, TensorView& y, int64_t first = 0, int64_t whole = 0);
std::string embedGrad(const TensorView& ids, const TensorView& dy, TensorView& dtable, int64_t first = 0,
                      int64_t whole = 0);
// ref::embedBackwardInto: the gradient added to `base`, in place when base is
// dtable's memory (the program computes the base into it).
std::string embedGradInto(const TensorView& base, const TensorView& ids, const TensorView& dy, TensorView& dtable,
                          int64_t first, int64_t whole, Scratch& s);
// ref::pickClass, ref::pickClassGrad.
std::string pickClass(const TensorView& logits, const TensorView& labels, const std::string& classes, TensorView& y,
                      int64_t first, int64_t whole, Scratch& s);
std::string pickClassGrad(const TensorView& labels, const std::string& classes, TensorView& y, int64_t first,
                          int64_t whole, Scratch& s);

// attention.cc: q [lead…, seq_q, heads, dim], k and v [lead…, seq_k, heads, dim]; the Attention node's
// results y (q's shape) and lse [lead…, seq_q, heads], on up to `threads` OpenMP threads.
std::string attention(const TensorView& q, const TensorView& k, const TensorView& v, bool causal, TensorView& y,
                      TensorView& lse, int threads, Scratch& s);
// The AttentionGrad node: from the forward's inputs, its results y and lse, and dy.
std::string attentionGrad(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& y,
                          const TensorView& lse, const TensorView& dy, bool causal, TensorView& dq, TensorView& dk,
                          TensorView& dv, int threads, Scratch& s);
// The scratch either takes on `threads` threads (bench/attention_bench.cc reports it).
int64_t attentionScratchBytes(const Shape& q, const Shape& k, bool backward, int threads);
// How the fused attention's tile loops hold their vectors
// (attention_tiles.cc): 8 lanes (the rule without AVX-512), 16, or 16 with
// two column blocks at a time (the rule with AVX-512's 32 registers). Tests
// force each for the whole process; the bits are the same.
enum class AttentionVectors { kLanes8, kLanes16, kLanes16TwoBlocks };
void setAttentionVectors(std::optional<AttentionVectors> v);

}  // namespace dtl::rt::fast
