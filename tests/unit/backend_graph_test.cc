// Both backends over every node of real compiled graphs (forward, backward,
// no updates): a tiny GPT with stacked blocks, dropout, RMSNorm, SwiGlu, a
// softmax over a middle dim and a tied output layer; and an MLP with an
// integer-free mean loss. Each node runs on the reference's inputs so its own
// error is measured (to 1e-5); a second, free-running fast evaluation must
// reach the same loss and parameter gradients to 1e-4. A stack of stacks
// (repeat inside a repeated layer) checks the gathering of the copies'
// gradients; and the executor, which computes those copies in place, reuses
// buffers unzeroed and frees values early, must reproduce the node-by-node
// values of both backends exactly.
#include "tests/unit/backend_test_util.h"

#include <algorithm>
#include <map>
#include <memory>

#include "compiler/driver/frontend.h"
#include "compiler/program/plan_program.h"
#include "runtime/exec/executor.h"

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

// Two stack levels: `blocks.inner.w` is [depth, width, features, hid]; the
// inner stack's copies also feed a value the loss reads twice.
const char* const kNested = R"(
layer Inner(d: dim, e: dim) {
  param w : [d, e] init normal(std = 0.3)
  param v : [e, d] init normal(std = 0.3)
  param b : [d] init zeros
  forward(x) = tanh(tanh(x @ w) @ v + b)
}
layer Outer(d: dim, e: dim, k: dim) {
  inner = repeat(k) Inner(d, e)
  param s : [d] init ones
  forward(x) = inner(x) * s + x
}
model Nested {
  dim features = 5, hid = 4, depth = 2, width = 3
  input x : f32[batch, features]
  input y : f32[batch, features]
  blocks = repeat(depth) Outer(features, hid, width)
  pred = blocks(x)
  loss = mean((pred - y) * (pred - y))
}
data { train { synthetic(seed = 1) } }
train {
  batch = 4
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
  std::vector<std::vector<Buf>> rx(g.nodes.size()), fx(g.nodes.size());  // every result of each
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
    Outcomes r = evalNode(*ref, n, rin, rx, ctx);
    ASSERT_TRUE(r.status.ok) << "%" << n.id << ": " << r.status.message;
    Outcomes f = evalNode(*fast, n, rin, rx, ctx);  // the reference's inputs: this node's error only
    ASSERT_TRUE(f.status.ok) << "%" << n.id << ": " << f.status.message;
    for (size_t k = 0; k < r.out.size(); ++k)
      EXPECT_TRUE(close(f.out.at(k), r.out[k], 1e-5)) << "%" << n.id << " " << ir::opName(n.op) << " " << n.fn
                                                      << " result " << k << " at " << n.where;
    Outcomes chain = evalNode(*fast, n, fin, fx, ctx);
    ASSERT_TRUE(chain.status.ok) << chain.status.message;
    rv[id] = r.out.at(0);
    fv[id] = chain.out.at(0);
    rx[id] = std::move(r.out);
    fx[id] = std::move(chain.out);
    ++checked;
  }
  EXPECT_GT(checked, 20);
  const size_t loss = static_cast<size_t>(g.loss);
  EXPECT_TRUE(close(fv[loss], rv[loss], 1e-4, 1e-5)) << "loss";
  ASSERT_FALSE(g.grads.empty());
  for (const auto& [path, grad] : g.grads)
    EXPECT_TRUE(close(fv[static_cast<size_t>(grad)], rv[static_cast<size_t>(grad)], 1e-4, 1e-5)) << path;
}

// The executor against node-by-node evaluation on one backend: parameters
// by path and inputs by name, the same values for every node that reads
// them. Three runs (backward, forward only, backward) reuse the buffers of
// the earlier ones, so a kernel that relied on zeroed memory, a value freed
// too early or a copy gathered into the wrong block would show; a fourth
// writes the gradients into caller memory (Executor::bindGrad).
void checkExecutor(const char* spec, bool reference) {
  driver::Frontend fe;
  ASSERT_EQ(fe.runText("m.dtl", spec, {}, driver::Stop::Grad), 0) << fe.diagnostics().render();
  const ir::Graph& g = fe.graph();
  std::unique_ptr<Backend> be = reference ? makeReferenceBackend() : makeFastBackend();
  RunContext ctx;
  ctx.seed = 5;
  std::mt19937 rng(11);
  std::map<int, int> ranges = intRanges(g);
  std::map<std::string, Buf> params, inputs;
  std::vector<Buf> v(g.nodes.size());
  std::vector<std::vector<Buf>> vx(g.nodes.size());
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Update) continue;
    const size_t id = static_cast<size_t>(n.id);
    if (n.op == ir::Op::Param) {
      if (!params.count(n.name)) params[n.name] = normal(n.shape, rng, 0.5f);
      v[id] = params[n.name];
      continue;
    }
    if (n.op == ir::Op::Input) {
      if (!inputs.count(n.name))
        inputs[n.name] = isFloat(n.dtype) ? normal(n.shape, rng, 1.0f)
                                          : ints(n.shape, rng, 0, ranges.count(n.id) ? ranges[n.id] - 1 : 1, n.dtype);
      v[id] = inputs[n.name];
      continue;
    }
    std::vector<Buf*> in;
    for (int k : n.inputs) in.push_back(&v[static_cast<size_t>(k)]);
    Outcomes o = evalNode(*be, n, in, vx, ctx);
    ASSERT_TRUE(o.status.ok) << "%" << n.id << ": " << o.status.message;
    v[id] = o.out.at(0);
    vx[id] = std::move(o.out);
  }
  const prog::Program program = program::planProgram(g);
  Executor ex(program, *be);
  for (auto& [path, b] : params) ex.bindParam(path, b.f.data());
  for (auto& [name, b] : inputs)
    ex.setInput(name, isFloat(b.dtype) ? static_cast<const void*>(b.f.data()) : static_cast<const void*>(b.i.data()),
                b.size());
  auto exact = [](const float* got, const Buf& want) {
    for (size_t k = 0; k < want.f.size(); ++k)
      if (!(got[k] == want.f[k] || (std::isnan(got[k]) && std::isnan(want.f[k]))))
        return ::testing::AssertionFailure() << "element " << k << ": " << got[k] << " vs " << want.f[k];
    return ::testing::AssertionSuccess();
  };
  for (bool backward : {true, false, true}) {
    KernelStatus st = ex.run(backward, ctx);
    ASSERT_TRUE(st.ok) << st.message;
    EXPECT_EQ(ex.value(g.loss), v[static_cast<size_t>(g.loss)].f[0]) << (backward ? "training" : "evaluation");
    if (!backward) continue;
    ASSERT_FALSE(g.grads.empty());
    for (const auto& [path, grad] : g.grads) {
      const float* got = ex.grad(path);
      ASSERT_NE(got, nullptr) << path;
      EXPECT_TRUE(exact(got, v[static_cast<size_t>(grad)])) << path << " (" << be->name() << ")";
    }
  }
  // Gradients written straight into caller memory (the trainer's accumulators).
  std::map<std::string, std::vector<float>> into;
  int bound = 0;
  for (const auto& [path, grad] : g.grads) {
    std::vector<float>& dst = into[path];
    dst.assign(v[static_cast<size_t>(grad)].f.size(), std::nanf(""));
    if (ex.bindGrad(path, dst.data())) ++bound;
  }
  EXPECT_GT(bound, 0);
  KernelStatus st = ex.run(true, ctx);
  ASSERT_TRUE(st.ok) << st.message;
  for (const auto& [path, grad] : g.grads) {
    const float* got = ex.grad(path);
    EXPECT_TRUE(exact(got, v[static_cast<size_t>(grad)])) << path << " bound (" << be->name() << ")";
    if (got != into[path].data()) EXPECT_TRUE(std::isnan(into[path][0])) << path << ": not bound, yet written";
  }
  // Inputs read in place (bindInput, the trainer's batches), for one run
  // only: other values, copied by setInput, then bound and written only
  // after binding — the run reads them where they are, as they are then.
  std::map<std::string, Buf> other = inputs;  // floats halved, ids reversed (still in range)
  for (auto& [name, b] : other) {
    for (float& x : b.f) x *= 0.5f;
    std::reverse(b.i.begin(), b.i.end());
  }
  auto data = [](const Buf& b) { return isFloat(b.dtype) ? static_cast<const void*>(b.f.data()) : static_cast<const void*>(b.i.data()); };
  for (auto& [name, b] : other) ex.setInput(name, data(b), b.size());
  st = ex.run(true, ctx);
  ASSERT_TRUE(st.ok) << st.message;
  const float copied = ex.value(g.loss);
  EXPECT_NE(copied, v[static_cast<size_t>(g.loss)].f[0]) << "other inputs, another loss";
  std::map<std::string, Buf> bound_inputs = inputs;  // the old values until the run
  for (auto& [name, b] : bound_inputs) ex.bindInput(name, data(b), b.size());
  for (auto& [name, b] : bound_inputs) {  // written in place, after binding
    std::copy(other[name].f.begin(), other[name].f.end(), b.f.begin());
    std::copy(other[name].i.begin(), other[name].i.end(), b.i.begin());
  }
  st = ex.run(true, ctx);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(ex.value(g.loss), copied) << "inputs bound";
  st = ex.run(false, ctx);
  EXPECT_FALSE(st.ok) << "a bound input lasts one run";
  EXPECT_NE(st.message.find("was not fed"), std::string::npos) << st.message;
}

TEST(BackendGraph, TinyTransformerEveryNodeAgrees) { checkGraph(kTinyGpt); }

TEST(BackendGraph, MlpEveryNodeAgrees) { checkGraph(kMlp); }

TEST(BackendGraph, NestedStacksEveryNodeAgrees) {
  checkGraph(kNested);
  driver::Frontend fe;
  ASSERT_EQ(fe.runText("m.dtl", kNested, {}, driver::Stop::Grad), 0) << fe.diagnostics().render();
  // Each stacked parameter's copies are gathered by one slice_grad per stack
  // level (2 depth copies of 3 width copies): no full-size tensor per copy.
  int gathers = 0;
  for (const ir::Node& n : fe.graph().nodes)
    if (n.op == ir::Op::SliceGrad) {
      ++gathers;
      EXPECT_EQ(static_cast<int64_t>(n.inputs.size()), n.shape.dims[0].size) << "%" << n.id;
    }
  EXPECT_EQ(gathers, 3 * (2 + 1) + 1);  // w, v, b: 2 inner + 1 outer each; s: 1
}

TEST(BackendGraph, ExecutorMatchesNodeByNodeFast) {
  checkExecutor(kTinyGpt, false);
  checkExecutor(kMlp, false);
  checkExecutor(kNested, false);
}

TEST(BackendGraph, ExecutorMatchesNodeByNodeReference) {
  checkExecutor(kTinyGpt, true);
  checkExecutor(kNested, true);
}

}  // namespace
}  // namespace dtl::rt::testing
