// Both backends over every node of real compiled graphs (forward, backward,
// no updates): a tiny GPT with stacked blocks, dropout, RMSNorm, SwiGlu, a
// softmax over a middle dim and a tied output layer; and an MLP with an
// integer-free mean loss. Each node runs on the reference's inputs so its own
// error is measured (to 1e-5); a second, free-running fast evaluation must
// reach the same loss and parameter gradients to 1e-4.
#include "tests/unit/backend_test_util.h"

#include <map>
#include <memory>

#include "compiler/driver/frontend.h"

namespace dtl::rt::testing {
namespace {

const char* const kTinyGpt = R"(
model TinyGpt {
  dim vocab = 13, seq = 6, d = 8, heads = 2, hidden = 12, layers = 2
  input tokens  : i32[batch, seq]
  input targets : i32[batch, seq]
  tok    = Embedding(vocab, d)
  param pos : [seq, d] init normal(std = 0.01)
  blocks = repeat(layers) TransformerBlock(d, heads, hidden)
  ln_f   = RMSNorm(d)
  ff     = SwiGlu(d, hidden)
  logits = ff(ln_f(blocks(dropout(tok(tokens) + pos, p = 0.25)))) @ tok.table
  loss   = cross_entropy(logits, targets, over = vocab) + 0.1 * mean(softmax(logits, over = seq) * logits)
}
data { train { synthetic(seed = 1) } }
train {
  batch = 3
  steps = 1
  optimizer = sgd(lr = 0.1)
}
)";

const char* const kMlp = R"(
model Mlp {
  dim features = 33, hidden = 17, out = 3
  input x : f32[batch, features]
  input y : f32[batch, out]
  fc1 = Linear(features, hidden)
  fc2 = Linear(hidden, out)
  pred = fc2(tanh(fc1(x)) * sigmoid(fc1(x)))
  loss = mean((pred - y) * (pred - y)) + 0.01 * sum(max(pred, over = out))
}
data { train { synthetic(seed = 1) } }
train {
  batch = 5
  steps = 1
  optimizer = sgd(lr = 0.1)
}
)";

// The exclusive upper bound of each integer input: the table it indexes or the
// classes it labels.
std::map<int, int> intRanges(const ir::Graph& g) {
  std::map<int, int> hi;
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Embed) hi[n.inputs[1]] = static_cast<int>(g[n.inputs[0]].shape.dims[0].size);
    if (n.op == ir::Op::CrossEntropy) {
      const Shape& s = g[n.inputs[0]].shape;
      hi[n.inputs[1]] = static_cast<int>(s.dims[static_cast<size_t>(s.find(n.names[0]))].size);
    }
  }
  return hi;
}

void checkGraph(const char* spec) {
  driver::Frontend fe;
  ASSERT_EQ(fe.runText("m.dtl", spec, {}, driver::Stop::Grad), 0) << fe.diagnostics().render();
  const ir::Graph& g = fe.graph();
  ASSERT_GE(g.loss, 0);
  std::unique_ptr<Backend> ref = makeReferenceBackend(), fast = makeFastBackend();
  RunContext ctx;
  ctx.seed = 5;
  std::mt19937 rng(7);
  std::map<int, int> ranges = intRanges(g);
  std::vector<Buf> rv(g.nodes.size()), fv(g.nodes.size());  // reference values; free-running fast values
  int checked = 0;
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Update) continue;
    const size_t id = static_cast<size_t>(n.id);
    if (n.op == ir::Op::Input || n.op == ir::Op::Param) {
      rv[id] = isFloat(n.dtype) ? normal(n.shape, rng, n.op == ir::Op::Param ? 0.5f : 1.0f)
                                : ints(n.shape, rng, 0, ranges.count(n.id) ? ranges[n.id] - 1 : 1, n.dtype);
      fv[id] = rv[id];
      continue;
    }
    std::vector<Buf*> rin, fin;
    for (int k : n.inputs) {
      rin.push_back(&rv[static_cast<size_t>(k)]);
      fin.push_back(&fv[static_cast<size_t>(k)]);
    }
    Outcome r = runNode(*ref, n, rin, ctx);
    ASSERT_TRUE(r.status.ok) << "%" << n.id << ": " << r.status.message;
    Outcome f = runNode(*fast, n, rin, ctx);  // the reference's inputs: this node's error only
    ASSERT_TRUE(f.status.ok) << "%" << n.id << ": " << f.status.message;
    EXPECT_TRUE(close(f.out, r.out, 1e-5)) << "%" << n.id << " " << ir::opName(n.op) << " " << n.fn << " at "
                                           << n.where;
    Outcome chain = runNode(*fast, n, fin, ctx);
    ASSERT_TRUE(chain.status.ok) << chain.status.message;
    rv[id] = std::move(r.out);
    fv[id] = std::move(chain.out);
    ++checked;
  }
  EXPECT_GT(checked, 20);
  const size_t loss = static_cast<size_t>(g.loss);
  EXPECT_TRUE(close(fv[loss], rv[loss], 1e-4, 1e-5)) << "loss";
  ASSERT_FALSE(g.grads.empty());
  for (const auto& [path, grad] : g.grads)
    EXPECT_TRUE(close(fv[static_cast<size_t>(grad)], rv[static_cast<size_t>(grad)], 1e-4, 1e-5)) << path;
}

TEST(BackendGraph, TinyTransformerEveryNodeAgrees) { checkGraph(kTinyGpt); }

TEST(BackendGraph, MlpEveryNodeAgrees) { checkGraph(kMlp); }

}  // namespace
}  // namespace dtl::rt::testing
