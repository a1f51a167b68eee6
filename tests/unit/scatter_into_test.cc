// compiler/passes/scatter_into_gradient.h on the char GPT sample, whose
// output projection is its embedding table (`@ tok.table`): one process and
// two ranks alike, the table's gradient is one embed_grad adding its rows
// into the projection's gradient, computed in place; the unfused
// embed_grad is not run.
#include <gtest/gtest.h>

#include "compiler/driver/frontend.h"
#include "compiler/program/plan_program.h"

namespace dtl::program {
namespace {

using ir::Op;

void expectScatterInto(int world) {
  driver::Frontend fe;
  driver::FrontendOptions o;
  o.world = world;
  const std::string path = std::string(DTL_SOURCE_DIR) + "/samples/char_gpt.dtl";
  ASSERT_EQ(fe.run(path, o, world > 1 ? driver::Stop::Plan : driver::Stop::Grad), 0) << fe.diagnostics().render();
  const prog::Program p = world > 1 ? planProgram(fe.graph(), fe.layout(), layout::meshCoords(fe.layout().mesh, 0))
                                    : planProgram(fe.graph());
  std::vector<int> into, alone;
  for (const prog::Instr& in : p.train.instrs) {
    if (in.kind != prog::Instr::Run || p[in.id].op != Op::EmbedGrad) continue;
    (p[in.id].inputs.size() == 3 ? into : alone).push_back(in.id);
  }
  ASSERT_EQ(into.size(), 1u) << "world " << world;
  EXPECT_TRUE(alone.empty()) << "world " << world << ": an unfused embed_grad still runs";
  const int dense = p[into[0]].inputs[2];
  EXPECT_EQ(p[dense].op, Op::Contract);
  const prog::Storage& st = p.train.storage[static_cast<size_t>(dense)];
  EXPECT_EQ(st.kind, prog::Storage::Alias) << "world " << world;
  EXPECT_EQ(st.index, into[0]);
  for (const auto& [path_, id] : p.grads)
    if (path_ == "tok.table") EXPECT_TRUE(id == into[0] || p[id].inputs.at(0) == into[0]) << "world " << world;
}

TEST(ScatterIntoGradient, TiedTableGradientIsOneScatterIntoTheProjectionsGradient) {
  expectScatterInto(1);
  expectScatterInto(2);
}

}  // namespace
}  // namespace dtl::program
