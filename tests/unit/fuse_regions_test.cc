// The fusion pass (compiler/codegen/fuse_regions.cc): its rules on small
// hand-built programs and on the MLP sample; with the kernel generator, every
// region of every sample's one-rank program becomes LLVM IR and PTX that
// `ptxas -arch=sm_90` assembles, and the MLP sample's regions, JIT-run on
// random inputs, agree with the reference kernels node by node
// (tests/unit/codegen_check.h); `dtlc check --emit=fused|llvm|ptx` in process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "compiler/codegen/fuse_regions.h"
#include "compiler/driver/frontend.h"
#include "compiler/program/plan_program.h"
#include "tools/dtlc/cli.h"
#ifdef DTL_HAVE_CODEGEN
#include "compiler/codegen/jit_x86.h"
#include "compiler/codegen/ptx.h"
#include "tests/unit/codegen_check.h"
#endif

namespace dtl::codegen {
namespace {

using ir::Graph;
using ir::Node;
using ir::Op;

Shape S(std::vector<Dim> d) { return Shape{std::move(d)}; }

int add(Graph& g, Op op, Shape shape, std::vector<int> in, std::string fn = "", DType dt = DType::F32) {
  Node n;
  n.op = op;
  n.shape = std::move(shape);
  n.inputs = std::move(in);
  n.fn = std::move(fn);
  n.dtype = dt;
  return g.add(std::move(n));
}
int input(Graph& g, const std::string& name, Shape s, DType dt = DType::F32) {
  int id = add(g, Op::Input, std::move(s), {}, "", dt);
  g.nodes[static_cast<size_t>(id)].name = name;
  return id;
}
int param(Graph& g, const std::string& name, Shape s) {
  int id = add(g, Op::Param, std::move(s), {});
  g.nodes[static_cast<size_t>(id)].name = name;
  return id;
}
int constant(Graph& g, double v) {
  int id = add(g, Op::Const, Shape{}, {});
  g.nodes[static_cast<size_t>(id)].scalar = v;
  return id;
}
int reduce(Graph& g, const std::string& fn, int x, const std::string& dim) {
  Shape s = g[x].shape;
  s.dims.erase(s.dims.begin() + s.find(dim));
  int id = add(g, Op::Reduce, s, {x}, fn);
  g.nodes[static_cast<size_t>(id)].names = {dim};
  return id;
}

struct Fused {
  prog::Program p;
  Fusion f;
  int region(int node) const { return f.region_of[static_cast<size_t>(node)]; }
};
Fused fuse(Graph g) {
  g.forward_end = static_cast<int>(g.nodes.size());
  Fused r;
  r.p = program::planProgram(g);
  r.f = fuseRegions(r.p);
  return r;
}

const Shape kBH = S({{"batch", 4}, {"hidden", 5}});

TEST(FuseRegions, BiasReluSoftmaxIsOneRegionBetweenContractions) {
  Graph g;
  int x = input(g, "x", S({{"batch", 4}, {"in", 3}}));
  int w = param(g, "w", S({{"in", 3}, {"hidden", 5}}));
  int mm = add(g, Op::Contract, kBH, {x, w});
  int b = param(g, "b", S({{"hidden", 5}}));
  int biased = add(g, Op::Binary, kBH, {mm, b}, "add");
  int relu = add(g, Op::Unary, kBH, {biased}, "relu");
  int sm = add(g, Op::Softmax, kBH, {relu});
  g.nodes[static_cast<size_t>(sm)].names = {"hidden"};
  int two = constant(g, 2.0);
  int scaled = add(g, Op::Binary, kBH, {sm, two}, "mul");
  int w2 = param(g, "w2", S({{"hidden", 5}, {"out", 2}}));
  int mm2 = add(g, Op::Contract, S({{"batch", 4}, {"out", 2}}), {scaled, w2});
  int rows = reduce(g, "sum", mm2, "out");
  g.loss = reduce(g, "mean", rows, "batch");
  Fused r = fuse(g);
  ASSERT_EQ(r.f.regions.size(), 2u) << printFusion(r.p, r.f);
  EXPECT_EQ(r.f.regions[0].nodes, (std::vector<int>{biased, relu, sm, two, scaled}));
  EXPECT_EQ(r.f.regions[0].inputs, (std::vector<int>{mm, b}));
  EXPECT_EQ(r.f.regions[0].outputs, (std::vector<int>{scaled}));
  EXPECT_EQ(r.f.regions[1].nodes, (std::vector<int>{rows, g.loss}));
  EXPECT_EQ(r.f.regions[1].inputs, (std::vector<int>{mm2}));
  EXPECT_EQ(r.f.regions[1].outputs, (std::vector<int>{g.loss}));  // the caller reads the loss
  for (int id : {x, w, mm, b, w2, mm2}) EXPECT_EQ(r.region(id), -1) << id;
  std::string text = printFusion(r.p, r.f);
  EXPECT_NE(text.find("region0: 5 nodes (%4, %5, %6, %7, %8)"), std::string::npos) << text;
  EXPECT_NE(text.find("in0 = %2 contract"), std::string::npos) << text;
}

TEST(FuseRegions, ARegionNeverWaitsForALaterValue) {
  // e = exp(x); c = e @ w; d = e + c: d needs c, which runs after e's region
  // starts, so d is a region of its own.
  Graph g;
  int x = input(g, "x", kBH);
  int e = add(g, Op::Unary, kBH, {x}, "exp");
  int w = param(g, "w", S({{"hidden", 5}, {"hidden2", 5}}));
  int c = add(g, Op::Contract, S({{"batch", 4}, {"hidden2", 5}}), {e, w});
  int d = add(g, Op::Binary, kBH, {e, x}, "sub");
  int dd = add(g, Op::Binary, S({{"batch", 4}, {"hidden", 5}, {"hidden2", 5}}), {d, c}, "add");
  g.loss = reduce(g, "sum", reduce(g, "sum", reduce(g, "sum", dd, "hidden2"), "hidden"), "batch");
  Fused r = fuse(g);
  EXPECT_GE(r.region(e), 0);
  EXPECT_EQ(r.region(d), r.region(e));   // e → d, both read only x and e
  EXPECT_NE(r.region(dd), r.region(e));  // dd reads c, produced after e
  EXPECT_EQ(r.region(c), -1);
  EXPECT_EQ(r.region(dd), r.region(g.loss));
  for (const FusedRegion& fr : r.f.regions)
    for (int in : fr.inputs)
      EXPECT_LT(in, fr.nodes.front()) << printFusion(r.p, r.f);
}

TEST(FuseRegions, ABroadcastIsFoldedAndAComparisonIsAnOutput) {
  Graph g;
  int x = input(g, "x", kBH);
  int b = param(g, "b", S({{"hidden", 5}}));
  int wide = add(g, Op::Align, kBH, {b});
  int y = add(g, Op::Binary, kBH, {x, wide}, "mul");
  int pos = add(g, Op::Binary, kBH, {y, constant(g, 0.0)}, "gt", DType::Bool);
  int cast = add(g, Op::Cast, kBH, {pos});
  int z = add(g, Op::Binary, kBH, {y, cast}, "mul");
  g.loss = reduce(g, "sum", reduce(g, "sum", z, "hidden"), "batch");
  Fused r = fuse(g);
  ASSERT_GE(r.region(y), 0) << printFusion(r.p, r.f);
  EXPECT_EQ(r.region(wide), r.region(y));
  EXPECT_EQ(r.region(pos), r.region(y));
  EXPECT_EQ(r.region(cast), -1);
  const FusedRegion& fr = r.f.regions[static_cast<size_t>(r.region(y))];
  EXPECT_EQ(fr.inputs, (std::vector<int>{x, b}));  // b itself, broadcast by the kernel
  EXPECT_EQ(fr.outputs, (std::vector<int>{y, pos}));
  EXPECT_NE(r.region(z), r.region(y));  // z reads the cast, which reads the region's output
}

TEST(FuseRegions, AnUnrepresentablePermuteStaysUnfused) {
  // Align to [hidden, batch] of a [batch, hidden] value read by a unary: the
  // region IR keeps its operand's order, so the Align is not folded.
  Graph g;
  int x = input(g, "x", kBH);
  int t = add(g, Op::Align, S({{"hidden", 5}, {"batch", 4}}), {x});
  int e = add(g, Op::Unary, g[t].shape, {t}, "exp");
  g.loss = reduce(g, "sum", reduce(g, "sum", e, "batch"), "hidden");
  Fused r = fuse(g);
  EXPECT_EQ(r.region(t), -1);
  EXPECT_GE(r.region(e), 0);
  EXPECT_EQ(r.f.regions[static_cast<size_t>(r.region(e))].inputs, (std::vector<int>{t}));
}

int over(Graph& g, Op op, std::vector<int> in, const std::string& dim, double eps = 0, std::string fn = "") {
  Shape shape = g[in[0]].shape;
  int id = add(g, op, shape, std::move(in), std::move(fn));
  g.nodes[static_cast<size_t>(id)].names = {dim};
  g.nodes[static_cast<size_t>(id)].scalar = eps;
  return id;
}

// The backward kinds and the norms: one region from the norms' input to the
// last gradient; without the transcendentals, the kinds that need libm stay out.
TEST(FuseRegions, NormsAndGradientKindsFuseIntoOneRegion) {
  auto build = [](Graph& g) {
    std::map<std::string, int> id;
    int x = id["x"] = input(g, "x", kBH);
    int dy = id["dy"] = input(g, "dy", kBH);
    int ln = id["ln"] = over(g, Op::Normalize, {x}, "hidden", 1e-5);
    int rms = id["rms"] = over(g, Op::RmsNormalize, {ln}, "hidden", 1e-6);
    int a = id["relu"] = add(g, Op::Unary, kBH, {rms}, "relu");
    int sm = id["softmax"] = over(g, Op::Softmax, {a}, "hidden");
    int d1 = id["softmax_grad"] = over(g, Op::SoftmaxGrad, {sm, dy}, "hidden");
    int d2 = id["log_softmax_grad"] = over(g, Op::LogSoftmaxGrad, {sm, d1}, "hidden");
    int d3 = id["relu_grad"] = add(g, Op::UnaryGrad, kBH, {rms, d2}, "relu");
    int d4 = id["tanh_grad"] = add(g, Op::UnaryGrad, kBH, {rms, d3}, "tanh");
    int d5 = id["rms_grad"] = over(g, Op::RmsNormalizeGrad, {ln, d4}, "hidden", 1e-6);
    int d6 = id["ln_grad"] = over(g, Op::NormalizeGrad, {x, d5}, "hidden", 1e-5);
    g.loss = reduce(g, "sum", reduce(g, "sum", d6, "hidden"), "batch");
    return id;
  };
  Graph g;
  std::map<std::string, int> id = build(g);
  Fused r = fuse(g);
  ASSERT_EQ(r.f.regions.size(), 1u) << printFusion(r.p, r.f);
  EXPECT_EQ(r.f.regions[0].inputs, (std::vector<int>{id["x"], id["dy"]}));
  EXPECT_EQ(r.f.regions[0].outputs, (std::vector<int>{g.loss}));
  std::string text = printFusion(r.p, r.f);
  for (const char* op : {"relu_grad", "tanh_grad", "rsqrt"}) EXPECT_NE(text.find(op), std::string::npos) << op << "\n" << text;

  FuseRules none;
  none.transcendentals = none.libm_gradients = false;
  Fusion f = fuseRegions(r.p, r.p.train, none);
  auto in = [&](const Fusion& fu, const std::string& name) { return fu.region_of[static_cast<size_t>(id[name])] >= 0; };
  for (const char* fused : {"ln", "rms", "relu", "softmax_grad", "relu_grad", "rms_grad", "ln_grad"})
    EXPECT_TRUE(in(f, fused)) << fused << "\n" << printFusion(r.p, f);
  for (const char* kept : {"softmax", "log_softmax_grad", "tanh_grad"})  // exp, exp, tanh: libm calls
    EXPECT_FALSE(in(f, kept)) << kept << "\n" << printFusion(r.p, f);
  // --kernels jit's rules: the f32 transcendentals (vector math) fused, and
  // the gradients computed in f32 over the same calls.
  const Fusion jit = fuseRegions(r.p, r.p.train, program::PlanOptions{}.fuseRules());
  for (const char* fused : {"softmax", "log_softmax_grad", "tanh_grad"})
    EXPECT_TRUE(in(jit, fused)) << fused << "\n" << printFusion(r.p, jit);
  FuseRules no_gradients;
  no_gradients.libm_gradients = false;
  EXPECT_FALSE(in(fuseRegions(r.p, r.p.train, no_gradients), "tanh_grad"));
}

TEST(FuseRegions, ANormOverTwoNamesStaysUnfused) {
  Graph g;
  int x = input(g, "x", kBH);
  int ln = add(g, Op::Normalize, kBH, {x});
  g.nodes[static_cast<size_t>(ln)].names = {"batch", "hidden"};
  g.nodes[static_cast<size_t>(ln)].scalar = 1e-5;
  int sq = add(g, Op::Binary, kBH, {ln, ln}, "mul");
  g.loss = reduce(g, "sum", reduce(g, "sum", sq, "hidden"), "batch");
  Fused r = fuse(g);
  EXPECT_EQ(r.region(ln), -1);
  EXPECT_GE(r.region(sq), 0);
}

struct Sample {
  driver::Frontend fe;
  prog::Program p;
  Fusion f;
};
std::unique_ptr<Sample> compileSample(const std::string& file, std::vector<std::string> sets = {}) {
  auto s = std::make_unique<Sample>();
  driver::FrontendOptions o;
  o.world = 1;
  o.sets = std::move(sets);
  // GPT-2's mesh fixes tp = 2 and pp = 2 (not built yet): its one-rank program has both at 1.
  if (file == "gpt2_small.dtl") o.sets.insert(o.sets.end(), {"parallel.mesh.tp=1", "parallel.mesh.pp=1"});
  // As `dtlc run` compiles one rank: not laid out.
  EXPECT_EQ(s->fe.run(std::string(DTL_SOURCE_DIR) + "/samples/" + file, o, driver::Stop::Grad), 0)
      << s->fe.diagnostics().render();
  s->p = program::planProgram(s->fe.graph(), s->fe.layout(), layout::meshCoords(s->fe.layout().mesh, 0));
  s->f = fuseRegions(s->p);
  return s;
}

TEST(FuseRegions, MlpSampleFusesBiasAndReluNeverAContraction) {
  auto s = compileSample("synthetic_mlp.dtl");
  const prog::Program& p = s->p;
  int relus = 0;
  for (const Node& n : p.nodes) {
    if (n.op == Op::Contract || n.op == Op::CrossEntropy || n.op == Op::Input || n.op == Op::Param)
      EXPECT_EQ(s->f.region_of[static_cast<size_t>(n.id)], -1) << ir::printNode(n);
    if (n.op == Op::Unary && n.fn == "relu") {
      ++relus;
      const Node& biased = p[n.inputs[0]];
      ASSERT_EQ(biased.op, Op::Binary);
      EXPECT_EQ(biased.fn, "add");
      EXPECT_GE(s->f.region_of[static_cast<size_t>(n.id)], 0);
      EXPECT_EQ(s->f.region_of[static_cast<size_t>(n.id)], s->f.region_of[static_cast<size_t>(biased.id)])
          << printFusion(p, s->f);
    }
  }
  EXPECT_EQ(relus, 1);
  for (const FusedRegion& fr : s->f.regions) EXPECT_EQ(fr.region.validate(), "");
}

// The epilogue rule (fold_epilogues.cc) as the planner applies it for
// `--kernels jit`: each Linear's bias add joins its contraction — a view of
// the contraction's storage, run by no instruction of its own, in both
// schedules — and so does the hidden layer's relu (x86's rule: the fast
// backend's relu on each panel of C), whose gradient reads its result, not
// the pre-activation. Without activations, the relu stays in a region.
prog::Program planFused(const ir::Graph& g, std::vector<UnaryFn> activations = program::PlanOptions{}.epilogue_activations,
                        bool epilogues = true,
                        std::vector<UnaryFn> kept = program::PlanOptions{}.epilogue_kept_input_activations,
                        bool cross_entropy_grad = true) {
  program::PlanOptions o;
  o.fuse = true;
  o.fuse_epilogues = epilogues;
  o.epilogue_activations = std::move(activations);
  o.epilogue_kept_input_activations = std::move(kept);
  o.fuse_cross_entropy_grad = cross_entropy_grad;
  return program::planProgram(g, layout::Layout{}, {}, o);
}
// "add relu" → how many contractions; "cross_entropy_grad" → how many cross-entropies.
std::map<std::string, int> epilogueShapes(const prog::Program& p) {
  std::map<std::string, int> out;
  for (const Node& n : p.nodes) {
    if (n.epilogue.empty()) continue;
    std::string k;
    for (const ir::PostOp& o : n.epilogue)
      k += (k.empty() ? "" : " ") + (o.fn.empty() ? std::string(ir::opName(o.op)) : o.fn) + (o.own ? "*" : "");
    ++out[k];
  }
  return out;
}
std::map<std::string, int> withoutGradient(std::map<std::string, int> shapes) {
  shapes.erase("cross_entropy_grad*");
  return shapes;
}
// An absorbed node runs no instruction of its own, in either schedule; it is
// a view of the node that computes it, or (PostOp::own) keeps a slot of its
// own where the schedule computes it at all.
void expectAbsorbed(const prog::Program& p) {
  for (const prog::Schedule* s : {&p.train, &p.eval})
    for (const Node& n : p.nodes)
      for (const ir::PostOp& o : n.epilogue) {
        const prog::Storage& st = s->storage[static_cast<size_t>(o.node)];
        if (o.own) {
          EXPECT_TRUE(st.kind == prog::Storage::Slot || (s == &p.eval && st.kind == prog::Storage::None))
              << ir::printNode(p[o.node]);
        } else {
          EXPECT_EQ(int(st.kind), int(prog::Storage::Alias)) << ir::printNode(p[o.node]);
          EXPECT_EQ(st.index, n.id);
        }
        for (const prog::Instr& in : s->instrs) EXPECT_FALSE(in.kind == prog::Instr::Run && in.id == o.node);
        EXPECT_EQ(n.inputs.size(), 3u);
      }
}

TEST(Epilogues, AMlpsBiasAddsJoinTheirContractions) {
  auto s = compileSample("synthetic_mlp.dtl");
  const prog::Program p = planFused(s->fe.graph(), {});
  EXPECT_EQ(epilogueShapes(p), (std::map<std::string, int>{{"add", 2}, {"cross_entropy_grad*", 1}}));
  expectAbsorbed(p);
  const Fusion f = plannedFusion(p);
  for (const Node& n : p.nodes) {
    if (n.op == Op::Unary && n.fn == "relu") {
      EXPECT_GE(f.region_of[static_cast<size_t>(n.id)], 0);  // reads the epilogue's result
      EXPECT_FALSE(p[n.inputs[0]].op == Op::Contract);
    }
    for (const ir::PostOp& o : n.epilogue) EXPECT_EQ(f.region_of[static_cast<size_t>(o.node)], -1);
  }
  const prog::Program relu = planFused(s->fe.graph());  // x86's rule
  EXPECT_EQ(withoutGradient(epilogueShapes(relu)), (std::map<std::string, int>{{"add", 1}, {"add relu", 1}}));
  expectAbsorbed(relu);
  const Fusion fr = plannedFusion(relu);
  for (const Node& n : relu.nodes)
    if (n.op == Op::Unary && n.fn == "relu") EXPECT_EQ(fr.region_of[static_cast<size_t>(n.id)], -1);
  EXPECT_LT(fr.regions.size(), f.regions.size()) << "the relu's region goes";
  EXPECT_EQ(epilogueShapes(planFused(s->fe.graph(), {}, /*epilogues=*/false, {}, /*cross_entropy_grad=*/false)),
            (std::map<std::string, int>{}));
}

// A gelu's gradient reads its input: with gelu allowed in place, the chain
// still stops at the bias add (the pre-activation must be written for it);
// with gelu a kept-input activation (x86's rule, rule 3b) the contraction
// computes it into its own storage beside the pre-activation, which stays
// in C for the gradient: the gelu's region goes.
TEST(Epilogues, NotInPlaceWhenThePreActivationIsReadElsewhere) {
  auto s = compileSample("char_gpt.dtl");
  for (bool kept : {false, true}) {
    const prog::Program p = planFused(s->fe.graph(), {UnaryFn::Gelu, UnaryFn::Relu}, true,
                                      kept ? std::vector<UnaryFn>{UnaryFn::Gelu} : std::vector<UnaryFn>{});
    int gelus = 0;
    for (const Node& n : p.nodes)
      if (n.op == Op::Unary && n.fn == "gelu") {
        ++gelus;
        const Node& pre = p[n.inputs[0]];
        ASSERT_EQ(pre.op, Op::Binary) << ir::printNode(pre);
        const Node& c = p[p.train.storage[static_cast<size_t>(pre.id)].index];
        ASSERT_EQ(c.op, Op::Contract) << ir::printNode(c);
        ASSERT_EQ(c.epilogue.size(), kept ? 2u : 1u) << ir::printNode(c);
        EXPECT_EQ(c.epilogue[0].node, pre.id);
        if (kept) {
          EXPECT_TRUE(c.epilogue[1].own);
          EXPECT_EQ(c.epilogue[1].node, n.id);
          EXPECT_EQ(c.epilogue[1].fn, "gelu");
          EXPECT_EQ(plannedFusion(p).region_of[static_cast<size_t>(n.id)], -1);
          bool grad_reads_c = false;  // the gradient reads the pre-activation: C's storage
          for (const Node& r : p.nodes) grad_reads_c |= r.op == Op::UnaryGrad && r.inputs[0] == pre.id;
          EXPECT_TRUE(grad_reads_c);
        }
      }
    EXPECT_EQ(gelus, 2);
    expectAbsorbed(p);
  }

  // By hand: y = x @ w + b read by relu and by the caller (a graph output):
  // the add joins (the epilogue's result is stored), relu does not; a
  // product read twice, or a bias over the batch, has no epilogue.
  Graph g;
  const Shape bk = S({{"batch", 4}, {"k", 3}}), kh = S({{"k", 3}, {"hidden", 5}});
  int x = input(g, "x", bk), w = param(g, "w", kh), b = param(g, "b", S({{"hidden", 5}}));
  int rows = param(g, "rows", S({{"batch", 4}}));
  int c1 = add(g, Op::Contract, kBH, {x, w});
  int y = add(g, Op::Binary, kBH, {c1, b}, "add");
  int r = add(g, Op::Unary, kBH, {y}, "relu");
  int c2 = add(g, Op::Contract, kBH, {x, w});
  int twice = add(g, Op::Binary, kBH, {c2, b}, "add");
  int again = add(g, Op::Unary, kBH, {c2}, "neg");
  int c3 = add(g, Op::Contract, kBH, {x, w});
  int by_row = add(g, Op::Binary, kBH, {rows, c3}, "add");
  g.outputs = {y, r, twice, again, by_row};
  g.forward_end = static_cast<int>(g.nodes.size());
  const prog::Program h = planFused(g, {UnaryFn::Relu});
  ASSERT_EQ(h[c1].epilogue.size(), 1u) << ir::printNode(h[c1]);
  EXPECT_EQ(h[c1].epilogue[0].node, y);
  EXPECT_TRUE(h[c2].epilogue.empty()) << ir::printNode(h[c2]);
  EXPECT_TRUE(h[c3].epilogue.empty()) << ir::printNode(h[c3]);
  expectAbsorbed(h);
}

int positionOf(const prog::Schedule& s, int id) {
  for (size_t k = 0; k < s.instrs.size(); ++k)
    if (s.instrs[k].kind == prog::Instr::Run && s.instrs[k].id == id) return static_cast<int>(k);
  return -1;
}

// Rule 4: the cross-entropy computes its gradient (dy the loss's seed, a
// constant that now runs before it) into the gradient's own slot in
// training; the logits are freed by the cross-entropy, not kept until the
// backward pass; evaluation computes the loss alone. Not when dy is not a
// constant, nor with the rule off.
TEST(Epilogues, ACrossEntropyComputesItsGradient) {
  auto s = compileSample("char_gpt.dtl");
  const prog::Program p = planFused(s->fe.graph());
  int folded = 0;
  for (const Node& x : p.nodes) {
    if (x.op != Op::CrossEntropy) continue;
    ASSERT_EQ(x.epilogue.size(), 1u) << ir::printNode(x);
    ++folded;
    const ir::PostOp& o = x.epilogue[0];
    EXPECT_TRUE(o.own);
    EXPECT_EQ(o.operand, 2);
    const Node& g = p[o.node];
    ASSERT_EQ(g.op, Op::CrossEntropyGrad);
    EXPECT_EQ(g.inputs[0], x.inputs[0]);
    EXPECT_EQ(g.inputs[1], x.inputs[1]);
    EXPECT_EQ(x.inputs.at(2), g.inputs[2]);
    EXPECT_EQ(p[x.inputs[2]].op, Op::Const);
    for (const prog::Schedule* sch : {&p.train, &p.eval}) {
      ASSERT_GE(positionOf(*sch, x.id), 0);
      EXPECT_GE(positionOf(*sch, x.inputs[2]), 0);
      EXPECT_LT(positionOf(*sch, x.inputs[2]), positionOf(*sch, x.id)) << "dy runs before the cross-entropy";
    }
    EXPECT_EQ(int(p.train.storage[static_cast<size_t>(g.id)].kind), int(prog::Storage::Slot));
    EXPECT_EQ(int(p.eval.storage[static_cast<size_t>(g.id)].kind), int(prog::Storage::None));
    const std::vector<int>& frees = p.train.instrs[static_cast<size_t>(positionOf(p.train, x.id))].frees;
    EXPECT_NE(std::find(frees.begin(), frees.end(), x.inputs[0]), frees.end()) << "the logits die at the cross-entropy";
  }
  EXPECT_EQ(folded, 1);
  expectAbsorbed(p);
  const prog::Program off = planFused(s->fe.graph(), program::PlanOptions{}.epilogue_activations, true,
                                      program::PlanOptions{}.epilogue_kept_input_activations, false);
  for (const Node& x : off.nodes) EXPECT_TRUE(x.op != Op::CrossEntropy || x.epilogue.empty());

  // By hand: dy fed as an input, not a constant.
  Graph h;
  const Shape bc = S({{"batch", 4}, {"c", 3}});
  int logits = input(h, "logits", bc), labels = input(h, "labels", S({{"batch", 4}}), DType::I32);
  int dy = input(h, "dy", Shape{});
  int loss = add(h, Op::CrossEntropy, Shape{}, {logits, labels});
  h.nodes[static_cast<size_t>(loss)].names = {"c"};
  int grad = add(h, Op::CrossEntropyGrad, bc, {logits, labels, dy});
  h.nodes[static_cast<size_t>(grad)].names = {"c"};
  h.outputs = {loss, grad};
  h.forward_end = static_cast<int>(h.nodes.size());
  EXPECT_TRUE(planFused(h)[loss].epilogue.empty());
}

// Every norm, norm gradient, softmax gradient and elementwise gradient of
// the GPT samples is in a region by the full rules; the counts are printed
// for the record (docs/compiler.md).
TEST(FuseRegions, GptSamplesFuseEveryNormAndGradientKind) {
  for (const char* file : {"char_gpt.dtl", "gpt2_small.dtl"}) {
    auto s = compileSample(file);
    const prog::Program& p = s->p;
    std::map<std::string, int> kinds;
    for (const Node& n : p.nodes) {
      bool wanted = n.op == Op::Normalize || n.op == Op::RmsNormalize || n.op == Op::NormalizeGrad ||
                    n.op == Op::RmsNormalizeGrad || n.op == Op::SoftmaxGrad || n.op == Op::UnaryGrad;
      if (!wanted) continue;
      ++kinds[ir::opName(n.op)];
      EXPECT_GE(s->f.region_of[static_cast<size_t>(n.id)], 0) << file << ": " << ir::printNode(n);
    }
    EXPECT_GE(kinds["normalize"] + kinds["rms_normalize"], 2) << file;
    EXPECT_GE(kinds["unary_grad"], 1) << file;
    size_t fused = 0;
    for (const FusedRegion& fr : s->f.regions) fused += fr.nodes.size();
    FuseRules jit;
    jit.transcendentals = false;
    Fusion f = fuseRegions(p, p.train, jit);
    size_t fused_jit = 0;
    for (const FusedRegion& fr : f.regions) fused_jit += fr.nodes.size();
    std::printf("%s: %zu program nodes; full rules %zu regions fusing %zu; --kernels jit %zu regions fusing %zu\n", file,
                p.nodes.size(), s->f.regions.size(), fused, f.regions.size(), fused_jit);
  }
}

// Planned for `--kernels jit`, a layer norm's gain and bias (slices of the
// stacked parameters) join the norm's region: parameters and their views run
// first in a fused schedule.
TEST(FuseRegions, ALayerNormsGainAndBiasJoinItsRegion) {
  auto s = compileSample("char_gpt.dtl");
  program::PlanOptions o;
  o.fuse = true;
  const prog::Program p = program::planProgram(s->fe.graph(), s->fe.layout(), layout::meshCoords(s->fe.layout().mesh, 0), o);
  Fusion f = plannedFusion(p);
  int norms = 0;
  for (const Node& n : p.nodes) {
    if (n.op != Op::Normalize) continue;
    ++norms;
    int region = f.region_of[static_cast<size_t>(n.id)];
    ASSERT_GE(region, 0) << ir::printNode(n);
    int gain = -1, bias = -1;  // the mul that reads the norm, the add that reads the mul
    for (const Node& m : p.nodes)
      if (m.op == Op::Binary && m.fn == "mul" && m.inputs[0] == n.id) gain = m.id;
    for (const Node& m : p.nodes)
      if (gain >= 0 && m.op == Op::Binary && m.fn == "add" && m.inputs[0] == gain) bias = m.id;
    ASSERT_GE(bias, 0) << ir::printNode(n);
    EXPECT_EQ(f.region_of[static_cast<size_t>(gain)], region) << printFusion(p, f);
    EXPECT_EQ(f.region_of[static_cast<size_t>(bias)], region) << printFusion(p, f);
  }
  EXPECT_EQ(norms, 5);  // two per block, two blocks, and the last
}

// A LayerNorm's backward as `--kernels jit` fuses it: the gain's and the
// bias's gradients (sums over batch and seq) join the norm gradient's region,
// which reads dy once and computes x̂ again from x, so the forward region
// writes no x̂.
TEST(FuseRegions, ANormsGradientRegionReadsDyOnceAndRecomputesTheNorm) {
  auto s = compileSample("char_gpt.dtl");
  program::PlanOptions o;
  o.fuse = true;
  const prog::Program p = program::planProgram(s->fe.graph(), s->fe.layout(), layout::meshCoords(s->fe.layout().mesh, 0), o);
  Fusion f = plannedFusion(p);
  int grads = 0;
  for (const Node& n : p.nodes) {
    if (n.op != Op::NormalizeGrad) continue;
    ++grads;
    const int region = f.region_of[static_cast<size_t>(n.id)];
    ASSERT_GE(region, 0) << ir::printNode(n);
    // dy (a contraction's result, or added to one) is read by this region alone
    for (int x : f.regions[static_cast<size_t>(region)].inputs) {
      if (p[x].op != Op::Contract) continue;
      int readers = 0;
      for (const FusedRegion& fr : f.regions) readers += std::count(fr.inputs.begin(), fr.inputs.end(), x);
      EXPECT_EQ(readers, 1) << "%" << x << " read by several regions\n" << printFusion(p, f);
    }
    const prog::Fused& m = f.regions[static_cast<size_t>(region)].members;
    EXPECT_EQ(m.recomputed.size(), 1u) << printFusion(p, f);
    for (int x : m.recomputed) {
      EXPECT_EQ(p[x].op, Op::Normalize);
      for (const FusedRegion& fr : f.regions) EXPECT_EQ(std::count(fr.outputs.begin(), fr.outputs.end(), x), 0) << "%" << x;
    }
  }
  EXPECT_EQ(grads, 5);
  // FuseRules::several_name_sums (on by default): the sums over batch and
  // seq fuse too, into the region of the value they sum; off, they do not.
  FuseRules sums = program::PlanOptions{}.fuseRules();
  EXPECT_TRUE(sums.several_name_sums);
  sums.several_name_sums = false;
  Fusion apart = fuseRegions(p, p.train, sums);
  int several = 0;
  for (const Node& n : p.nodes)
    if (n.op == Op::ReduceTo && p[n.inputs[0]].shape.dims.size() == n.shape.dims.size() + 2) {
      ++several;
      EXPECT_GE(f.region_of[static_cast<size_t>(n.id)], 0) << ir::printNode(n);
      EXPECT_LT(apart.region_of[static_cast<size_t>(n.id)], 0) << ir::printNode(n);
    }
  EXPECT_GT(several, 10);
}

TEST(FuseRegions, EmitFusedPrintsRegions) {
  std::string out, err;
  int rc = cli::runCli({"check", std::string(DTL_SOURCE_DIR) + "/samples/synthetic_mlp.dtl", "--emit=fused", "--world", "1"}, out, err);
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(out.find("region0: "), std::string::npos) << out;
  EXPECT_NE(out.find(" regions fusing "), std::string::npos) << out;
  // Each Linear's bias add is its contraction's epilogue, named on a line of its own.
  // So is the cross-entropy's gradient, computed by the cross-entropy.
  EXPECT_NE(out.find("# 2 contractions and 1 other node run an epilogue: %"), std::string::npos) << out;
  EXPECT_NE(out.find(" (add %"), std::string::npos) << out;
  EXPECT_NE(out.find(" (cross_entropy_grad %"), std::string::npos) << out;
  // --kernels jit: the regions it runs, by the full rules: gelu and its
  // gradient fused (f32 through libmvec)
  const std::string gpt = std::string(DTL_SOURCE_DIR) + "/samples/char_gpt.dtl";
  out.clear();
  ASSERT_EQ(cli::runCli({"check", gpt, "--emit=fused", "--world", "1"}, out, err), 0) << err;
  EXPECT_NE(out.find(" gelu_grad %"), std::string::npos) << out;
  EXPECT_NE(out.find(", gelu into %"), std::string::npos) << out;  // the up projection's epilogue
  EXPECT_NE(out.find(" normalize_grad"), std::string::npos) << out;
  std::string jit;
  ASSERT_EQ(cli::runCli({"check", gpt, "--emit=fused", "--world", "1", "--kernels", "jit"}, jit, err), 0) << err;
  EXPECT_EQ(jit, out);
#ifndef DTL_HAVE_CODEGEN
  EXPECT_EQ(cli::runCli({"check", std::string(DTL_SOURCE_DIR) + "/samples/synthetic_mlp.dtl", "--emit=ptx", "--world", "1"}, out, err), 2);
  EXPECT_NE(err.find("built without it"), std::string::npos) << err;
#endif
}

#ifdef DTL_HAVE_CODEGEN

namespace fs = std::filesystem;

TEST(FuseRegions, EmitLlvmAndPtx) {
  std::string out, err;
  const std::string spec = std::string(DTL_SOURCE_DIR) + "/samples/synthetic_mlp.dtl";
  ASSERT_EQ(cli::runCli({"check", spec, "--emit=llvm", "--world", "1"}, out, err), 0) << err;
  EXPECT_NE(out.find("unoptimised"), std::string::npos);
  EXPECT_NE(out.find("define void @dtl_"), std::string::npos) << out.substr(0, 2000);
  // the sample's sgd with momentum: its two multi-tensor update kernels after the regions
  EXPECT_NE(out.find("define void @dtl_update_sgd_momentum("), std::string::npos);
  EXPECT_NE(out.find("define void @dtl_update_sgd_momentum_first("), std::string::npos);
  out.clear();
  ASSERT_EQ(cli::runCli({"check", spec, "--emit=ptx", "--world", "1"}, out, err), 0) << err;
  EXPECT_NE(out.find(".target sm_90"), std::string::npos) << out.substr(0, 2000);
  EXPECT_NE(out.find(".entry dtl_update_sgd_momentum("), std::string::npos);
  EXPECT_NE(out.find(".entry dtl_update_sgd_momentum_first("), std::string::npos);
}

// Every region of every sample's one-rank program (equal kernels once):
// LLVM IR for x86, PTX for sm_90, assembled by ptxas.
TEST(FuseRegions, EverySampleRegionBecomesPtxThatAssembles) {
  const std::string ptxas = testing::ptxasPath();
  const fs::path dir = fs::temp_directory_path() / ("dtl_fuse_ptx_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto start = std::chrono::steady_clock::now();
  std::set<uint64_t> seen;
  int assembled = 0;
  for (const auto& entry : fs::directory_iterator(std::string(DTL_SOURCE_DIR) + "/samples")) {
    if (entry.path().extension() != ".dtl") continue;
    const std::string file = entry.path().filename().string();
    auto s = compileSample(file);
    int fresh = 0;
    for (const FusedRegion& fr : s->f.regions) {
      if (!seen.insert(regionHash(fr.region)).second) continue;
      ++fresh;
      EXPECT_NE(x86Ir(fr.region, false).find("define"), std::string::npos) << file;
      PtxModule m;
      std::string error;
      ASSERT_TRUE(compilePtx(fr.region, &m, &error)) << file << ": " << error << "\n" << printRegion(fr.region);
      EXPECT_NE(m.ptx.find(".target sm_90"), std::string::npos);
      if (ptxas.empty()) continue;
      std::string name = "k" + std::to_string(seen.size());
      std::string in = (dir / (name + ".ptx")).string(), log = (dir / (name + ".log")).string();
      std::ofstream(in) << m.ptx;
      std::string cmd = "'" + ptxas + "' -arch=sm_90 -o '" + (dir / (name + ".cubin")).string() + "' '" + in +
                        "' > '" + log + "' 2>&1";
      if (std::system(cmd.c_str()) == 0) {
        ++assembled;
      } else {
        std::stringstream text;
        text << std::ifstream(log).rdbuf();
        ADD_FAILURE() << file << ": ptxas failed on\n" << printRegion(fr.region) << text.str();
      }
    }
    std::printf("[ sample   ] %s: %zu regions, %d new kernels\n", file.c_str(), s->f.regions.size(), fresh);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ kernels  ] %zu distinct kernels, %d assembled by ptxas, %.1f s\n", seen.size(), assembled, secs);
  if (ptxas.empty()) GTEST_SKIP() << "PTX generated, but not assembled: no ptxas on PATH or in /usr/local/cuda/bin";
}

// Each region of a sample, JIT-run on random inputs, against the reference
// kernels node by node; its outputs equal the probe's bit for bit.
void checkSampleRegions(const std::string& file, std::vector<std::string> sets) {
  auto s = compileSample(file, std::move(sets));
  std::mt19937_64 rng(11);
  testing::Stats stats;
  std::set<uint64_t> seen;
  for (const FusedRegion& fr : s->f.regions) {
    if (!seen.insert(regionHash(fr.region)).second) continue;
    std::vector<testing::Values> inputs;
    for (int in : fr.region.inputs())
      inputs.push_back(testing::randomValues(fr.region.node(in).shape.elements().value_or(0), rng, 0.02));
    testing::checkRegion(fr.region, inputs, &stats);
  }
  EXPECT_GT(stats.kernels, 0);
  std::printf("%s", testing::formatStats(stats).c_str());
}

TEST(FuseRegions, MlpSampleRegionsMatchTheReference) { checkSampleRegions("synthetic_mlp.dtl", {}); }

// Its norms, their gradients and the gradients of softmax and gelu among them.
TEST(FuseRegions, CharGptRegionsMatchTheReference) { checkSampleRegions("char_gpt.dtl", {"train.batch=1"}); }

#endif  // DTL_HAVE_CODEGEN

}  // namespace
}  // namespace dtl::codegen
