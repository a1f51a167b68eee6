// The program planner: local shapes from placements, and a storage plan the
// executor can follow blindly. Every schedule of every sample (one rank and
// laid out over four) is simulated slot by slot: no value is written into a
// slot another live value holds, every read finds its value still there, a
// collective's operands stay put until its group is waited for, and what
// the caller reads after a run (loss, metrics, gradients) survives to the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "compiler/driver/frontend.h"
#include "compiler/program/plan_program.h"
#include "core/program.h"

namespace dtl::program {
namespace {

using prog::Instr;
using prog::Storage;

int root(const prog::Schedule& s, int v) {
  while (s.storage[static_cast<size_t>(v)].kind == Storage::Alias) v = s.storage[static_cast<size_t>(v)].index;
  return v;
}

// Who holds each slot as the schedule runs; failures name the instruction.
class SlotSimulator {
 public:
  SlotSimulator(const prog::Program& p, const prog::Schedule& s, const char* name)
      : p_(p), s_(s), name_(name), holder_(s.slot_words.size(), -1) {}

  void run() {
    for (pos_ = 0; pos_ < s_.instrs.size(); ++pos_) {
      const Instr& in = s_.instrs[pos_];
      if (in.kind == Instr::Run) {
        for (int x : p_[in.id].inputs) read(x);
        write(in.id);
        for (const ir::PostOp& o : p_[in.id].epilogue) write(o.node);  // a view of it, or its own storage
      } else if (in.kind == Instr::Fused) {  // one kernel: every input before any output
        const prog::Fused& f = p_.fused[static_cast<size_t>(in.id)];
        for (int x : f.inputs) read(x);
        for (int v : f.outputs) write(v);
      } else {
        for (int m : p_.groups[static_cast<size_t>(in.id)].members) {
          for (int x : p_[m].inputs) read(x);  // operands until the wait
          if (in.kind == Instr::Start) write(m);
          if (in.kind == Instr::Wait) read(m);  // written until the wait
        }
      }
      for (int v : in.frees) {
        const Storage& st = s_.storage[static_cast<size_t>(v)];
        ASSERT_EQ(int(st.kind), int(Storage::Slot)) << where() << " frees %" << v << ", which has no slot";
        ASSERT_EQ(holder_[static_cast<size_t>(st.index)], v) << where() << " frees %" << v << " from a slot it does not hold";
        holder_[static_cast<size_t>(st.index)] = -1;
      }
    }
  }

  void kept(int v) {
    const int r = root(s_, v);
    const Storage& st = s_.storage[static_cast<size_t>(r)];
    if (st.kind == Storage::Slot)
      EXPECT_EQ(holder_[static_cast<size_t>(st.index)], r) << name_ << ": %" << v << " is read after the run but was freed";
  }

 private:
  std::string where() const { return std::string(name_) + " instruction " + std::to_string(pos_); }

  void write(int v) {
    const int r = root(s_, v);
    const Storage& st = s_.storage[static_cast<size_t>(r)];
    if (st.kind != Storage::Slot) return;
    ASSERT_GE(st.index, 0) << where() << ": %" << r << " has no slot number";
    const int64_t need = std::max<int64_t>(ir::storedElements(p_[r]), 1);  // every result of a node of several
    EXPECT_LE(need, s_.slot_words[static_cast<size_t>(st.index)]) << where() << ": %" << r << " does not fit its slot";
    int& h = holder_[static_cast<size_t>(st.index)];
    ASSERT_TRUE(h == -1 || h == r) << where() << ": %" << v << " is written into slot " << st.index << " while %" << h
                                   << " still lives there";
    h = r;
  }

  void read(int x) {
    const int r = root(s_, x);
    const Storage& st = s_.storage[static_cast<size_t>(r)];
    ASSERT_NE(int(st.kind), int(Storage::None)) << where() << " reads %" << x << ", which this schedule never computes";
    if (st.kind == Storage::Slot)
      ASSERT_EQ(holder_[static_cast<size_t>(st.index)], r) << where() << " reads %" << x << " after its slot was reused";
  }

  const prog::Program& p_;
  const prog::Schedule& s_;
  const char* name_;
  std::vector<int> holder_;
  size_t pos_ = 0;
};

struct Compiled {
  driver::Frontend fe;
  prog::Program program;
};

std::unique_ptr<Compiled> compile(const std::string& sample, int world, bool fuse = false) {
  auto c = std::make_unique<Compiled>();
  driver::FrontendOptions o;
  o.world = world;
  const std::string path = std::string(DTL_SOURCE_DIR) + "/samples/" + sample;
  // As `dtlc run` compiles: one rank is not laid out.
  EXPECT_EQ(c->fe.run(path, o, world > 1 ? driver::Stop::Plan : driver::Stop::Grad), 0) << c->fe.diagnostics().render();
  PlanOptions options;
  options.fuse = fuse;
  c->program = planProgram(c->fe.graph(), c->fe.layout(), layout::meshCoords(c->fe.layout().mesh, world - 1), options);
  return c;
}

class EverySample : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(EverySample, SchedulesKeepEveryValueUntilItsLastRead) {
  auto [sample, world] = GetParam();
  auto c = compile(sample, world);
  const prog::Program& p = c->program;
  for (const auto& [s, name] : {std::pair{&p.train, "train"}, std::pair{&p.eval, "eval"}}) {
    SlotSimulator sim(p, *s, name);
    sim.run();
    if (::testing::Test::HasFatalFailure()) return;
    sim.kept(p.loss);
    for (const auto& [m, id] : p.metrics) sim.kept(id);
    if (s == &p.train)
      for (const auto& [path, id] : p.grads) sim.kept(id);
  }
  // Every node but the updates runs in training; the groups start and are waited for once each.
  std::map<std::pair<int, int>, int> seen;
  for (const Instr& in : p.train.instrs) ++seen[{in.kind, in.id}];
  for (const auto& [key, count] : seen) EXPECT_EQ(count, 1) << "instruction kind " << key.first << " id " << key.second;
}

INSTANTIATE_TEST_SUITE_P(Samples, EverySample,
                         ::testing::Combine(::testing::Values("fashion_mnist_mlp.dtl", "char_gpt.dtl", "synthetic_mlp.dtl"),
                                            ::testing::Values(1, 4)),
                         [](const auto& info) {
                           std::string s = std::get<0>(info.param);
                           return s.substr(0, s.find('.')) + "_world" + std::to_string(std::get<1>(info.param));
                         });

// Planned for fused kernels (`--kernels jit`): each schedule computes what
// the unfused one does — every node it ran runs, or is computed (or folded)
// by exactly one of its regions or contractions' epilogues — the slots hold every value until its last
// read, and the regions' members that are not outputs are not stored. (Slot
// bytes may grow: a region's outputs never share its inputs' buffers, where
// an unfused node's output could take its operand's slot.)
TEST_P(EverySample, FusedSchedulesComputeTheSameValues) {
  auto [sample, world] = GetParam();
  auto plain = compile(sample, world);
  auto fused = compile(sample, world, /*fuse=*/true);
  const prog::Program& p = fused->program;
  ASSERT_FALSE(p.fused.empty()) << "no region in " << sample;
  for (const auto& [s, u, name] : {std::tuple{&p.train, &plain->program.train, "train"},
                                   std::tuple{&p.eval, &plain->program.eval, "eval"}}) {
    SlotSimulator sim(p, *s, name);
    sim.run();
    if (::testing::Test::HasFatalFailure()) return;
    sim.kept(p.loss);
    for (const auto& [m, id] : p.metrics) sim.kept(id);
    if (s == &p.train)
      for (const auto& [path, id] : p.grads) sim.kept(id);
    std::map<int, int> computed;  // node → times this schedule computes it
    int regions = 0, epilogues = 0;
    for (const Instr& in : s->instrs) {
      if (in.kind == Instr::Run) {
        ++computed[in.id];
        epilogues += p[in.id].epilogue.empty() ? 0 : 1;
        for (const ir::PostOp& o : p[in.id].epilogue) {  // a node's epilogue computes these, as views of it
          const Storage& st = s->storage[static_cast<size_t>(o.node)];
          if (o.own) {  // or into their own slots, where the schedule computes them at all
            EXPECT_TRUE(st.kind == Storage::Slot || st.kind == Storage::None) << name << ": %" << o.node;
            computed[o.node] += st.kind == Storage::Slot;
            continue;
          }
          ++computed[o.node];
          EXPECT_EQ(int(st.kind), int(Storage::Alias)) << name << ": %" << o.node;
          EXPECT_EQ(st.index, in.id) << name << ": %" << o.node;
        }
      }
      if (in.kind != Instr::Fused) continue;
      ++regions;
      const prog::Fused& f = p.fused[static_cast<size_t>(in.id)];
      for (const std::vector<int>* list : {&f.nodes, &f.folded})
        for (int v : *list) computed[v] = 1;  // folded Aligns may be shared by two regions
      for (int v : f.nodes)
        if (std::find(f.outputs.begin(), f.outputs.end(), v) == f.outputs.end())
          EXPECT_EQ(int(s->storage[static_cast<size_t>(v)].kind), int(Storage::None)) << name << ": member %" << v << " is stored";
    }
    // Something fused in each schedule: the MLP's evaluation has no region
    // left, its bias adds and relu being its contractions' epilogues.
    EXPECT_GT(regions + epilogues, 0) << name;
    for (const Instr& in : u->instrs)
      if (in.kind == Instr::Run) EXPECT_EQ(computed[in.id], 1) << name << ": %" << in.id << " is not computed once";
    auto slotted = [](const prog::Schedule& x) {
      return std::count_if(x.storage.begin(), x.storage.end(), [](const Storage& st) { return st.kind == Storage::Slot; });
    };
    EXPECT_LE(slotted(*s), slotted(*u)) << name;
  }
}

// The graph holds the global batch; each rank's program its slice of it.
TEST(Program, LocalShapesAreTheRanksSlice) {
  auto one = compile("fashion_mnist_mlp.dtl", 1);
  auto four = compile("fashion_mnist_mlp.dtl", 4);
  const int64_t batch = one->fe.spec().train.batch;
  int seen = 0;
  for (const ir::Node& n : four->fe.graph().nodes) {
    if (n.op != ir::Op::Input) continue;
    ++seen;
    EXPECT_EQ(n.shape.dims[0].size, 4 * batch) << n.name << " in the graph";
    EXPECT_EQ(four->program[n.id].shape.dims[0].size, batch) << n.name << " on a rank";
    EXPECT_EQ(layout::localOffset(n.shape, "batch", four->program.placement[static_cast<size_t>(n.id)],
                                  four->program.mesh, four->program.coords),
              3 * batch);
  }
  EXPECT_EQ(seen, 2);
  // A rank of four computes what one process computes for its quarter: the same contractions.
  std::vector<Shape> want, got;
  for (const ir::Node& n : one->program.nodes)
    if (n.op == ir::Op::Contract) want.push_back(n.shape);
  for (const ir::Node& n : four->program.nodes)
    if (n.op == ir::Op::Contract) got.push_back(n.shape);
  EXPECT_EQ(want, got);
}

// Gradient buckets run in place: a gradient whose only reader is its
// all-reduce is computed straight into the bucket; parameters' gradients on
// one rank go to the caller's memory.
TEST(Program, GradientsAreComputedWhereTheyAreRead) {
  auto one = compile("fashion_mnist_mlp.dtl", 1);
  for (const auto& [path, id] : one->program.grads)
    EXPECT_EQ(int(one->program.train.storage[static_cast<size_t>(id)].kind), int(Storage::Output)) << path;
  auto four = compile("fashion_mnist_mlp.dtl", 4);
  const prog::Program& p = four->program;
  ASSERT_FALSE(p.buckets.empty());
  int in_place = 0;
  for (const prog::Group& g : p.groups) {
    if (g.bucket < 0) continue;
    for (int m : g.members) {
      EXPECT_EQ(int(p.train.storage[static_cast<size_t>(m)].kind), int(Storage::Group));
      in_place += p.train.storage[static_cast<size_t>(p[m].inputs[0])].kind == Storage::Group;
    }
  }
  EXPECT_EQ(in_place, static_cast<int>(p.grads.size()));
}

// A graph's `outputs` (dtlc generate's logits) live to the end of an
// evaluation run; without being named they are freed once the loss has read them.
TEST(Program, OutputsLiveToTheEndOfTheRun) {
  auto c = compile("char_gpt.dtl", 1);
  ir::Graph g = c->fe.graph();
  const int logits = g[g.loss].op == ir::Op::CrossEntropy ? g[g.loss].inputs[0] : -1;
  ASSERT_GE(logits, 0) << ir::printNode(g[g.loss]);
  auto freed = [&](const prog::Program& p) {
    for (const Instr& in : p.eval.instrs)
      for (int v : in.frees)
        if (v == logits) return true;
    return false;
  };
  EXPECT_TRUE(freed(planProgram(g)));
  g.outputs.push_back(logits);
  const prog::Program p = planProgram(g);
  EXPECT_FALSE(freed(p));
  SlotSimulator sim(p, p.eval, "eval");
  sim.run();
  sim.kept(logits);
}

}  // namespace
}  // namespace dtl::program
