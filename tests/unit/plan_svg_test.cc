// The plan picture (`dtlc plan --format svg`, compiler/plan/plan_svg.cc):
// one rank box per rank, one lane per mesh axis with one segment per
// collective over it, memory bars proportional to the bytes; and the
// picture of a real plan has as many segments as the plan has collectives.
#include "compiler/plan/plan_svg.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>

#include "tools/dtlc/cli.h"

namespace dtl {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// The value of attribute `attr` of every element whose class starts with `cls`.
std::vector<double> attrOf(const std::string& svg, const std::string& cls, const std::string& attr) {
  std::vector<double> out;
  std::regex rect("<rect ([^>]*)class=\"" + cls + "[^\"]*\"");
  std::regex value(attr + "=\"([-0-9.]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), rect); it != std::sregex_iterator(); ++it) {
    std::smatch m;
    std::string head = (*it)[1];
    if (std::regex_search(head, m, value)) out.push_back(std::stod(m[1]));
  }
  return out;
}

plan::Collective coll(const std::string& op, const std::string& axis, int64_t bytes) {
  plan::Collective c;
  c.op = op, c.axis = axis, c.dtype = "f32", c.bytes = bytes;
  return c;
}

plan::PlanPicture picture() {
  plan::PlanPicture p;
  p.model = "Toy";
  p.mesh = {{"dp", 2}, {"tp", 3}};
  p.collectives = {coll("all_reduce", "dp", 4000), coll("all_gather", "tp", 600), coll("all_reduce", "dp", 1000),
                   coll("reduce_scatter", "tp", 300), coll("all_reduce", "dp", 2000)};
  for (const auto& c : p.collectives) p.sent.push_back(plan::sent(c, c.axis == "dp" ? 2 : 3));
  p.memory.parameters = 1000, p.memory.gradients = 1000, p.memory.optimizer_state = 2000;
  p.memory.peak_activations = 4000, p.memory.communication = 500;
  return p;
}

// The <g class="plan-axis" data-axis="AXIS"> group of the picture.
std::string axisGroup(const std::string& svg, const std::string& axis) {
  size_t at = svg.find("<g class=\"plan-axis\" data-axis=\"" + axis + "\">");
  return at == std::string::npos ? "" : svg.substr(at, svg.find("</g>", at) - at);
}

TEST(PlanSvg, OneRankBoxPerRankAndOneLanePerAxis) {
  const std::string svg = plan::planSvg(picture());
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << svg;
  EXPECT_EQ(count(svg, "class=\"plan-rank\""), 6u);
  EXPECT_EQ(count(svg, "<g class=\"plan-axis\""), 2u);
  EXPECT_EQ(count(svg, "<g "), count(svg, "</g>"));
  EXPECT_NE(svg.find(">Toy on dp = 2, tp = 3<"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">dp = 2 ↓<"), std::string::npos);
  EXPECT_NE(svg.find(">tp = 3 →<"), std::string::npos);
}

TEST(PlanSvg, OneSegmentPerCollectiveInItsAxisLaneWidthByBytesSent) {
  const std::string svg = plan::planSvg(picture());
  const std::string dp = axisGroup(svg, "dp"), tp = axisGroup(svg, "tp");
  EXPECT_EQ(count(dp, "class=\"plan-coll"), 3u) << dp;
  EXPECT_EQ(count(dp, "data-op=\"all_reduce\""), 3u);
  EXPECT_EQ(count(tp, "class=\"plan-coll"), 2u) << tp;
  EXPECT_EQ(count(tp, "data-op=\"all_gather\" data-bytes=\"600\""), 1u);
  EXPECT_NE(dp.find("3 collectives · all_reduce ×3 · 6.8 KiB sent per rank per step"), std::string::npos) << dp;
  // Segments in start order; the 4000-byte one is twice the 2000-byte one
  // (up to each segment's 2-pixel floor) and four times the 1000-byte one.
  std::vector<double> w = attrOf(dp, "plan-coll", "width");
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NEAR((w[0] - 2) / (w[2] - 2), 2.0, 0.01);
  EXPECT_NEAR((w[0] - 2) / (w[1] - 2), 4.0, 0.02);
  std::vector<double> x = attrOf(dp, "plan-coll", "x");
  EXPECT_NEAR(x[1], x[0] + w[0], 0.11);
  // Every segment's tooltip says what it is and what it sends.
  EXPECT_NE(dp.find("<title>all_reduce over dp, f32, 3.9 KiB; sends 3.9 KiB per rank per step"), std::string::npos) << dp;
}

TEST(PlanSvg, MemoryBarsAreProportionalToTheirBytes) {
  const std::string svg = plan::planSvg(picture());
  std::vector<double> w = attrOf(svg, "plan-mem", "width");
  ASSERT_EQ(w.size(), 5u);
  ASSERT_GT(w[3], 100);  // peak activations, the largest
  const double bytes[] = {1000, 1000, 2000, 4000, 500};
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(w[i] / w[3], bytes[i] / 4000, 0.002) << i;
  EXPECT_NE(svg.find(">memory per rank: 8.3 KiB<"), std::string::npos) << svg;
}

TEST(PlanSvg, AnAxisWithoutCollectivesSaysSo) {
  plan::PlanPicture p = picture();
  p.mesh.emplace_back("sp", 1);
  EXPECT_NE(axisGroup(plan::planSvg(p), "sp").find(">no collectives<"), std::string::npos);
}

TEST(PlanSvg, TheCommandDrawsEveryCollectiveOfThePlan) {
  const std::string dir = std::string(DTL_SOURCE_DIR) + "/tests/golden/plan";
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir(dir.c_str()), 0);
  std::string svg, json, err;
  EXPECT_EQ(cli::runCli({"plan", "mlp_dp.dtl", "--world", "4", "--format", "svg"}, svg, err), 0) << err;
  EXPECT_EQ(cli::runCli({"plan", "mlp_dp.dtl", "--world", "4", "--format", "json"}, json, err), 0) << err;
  ASSERT_EQ(chdir(cwd), 0);
  EXPECT_GT(count(json, "\"op\":"), 0u);
  EXPECT_EQ(count(svg, "class=\"plan-coll"), count(json, "\"op\":")) << svg;
  EXPECT_EQ(count(svg, "class=\"plan-rank\""), 4u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

}  // namespace
}  // namespace dtl
