// The plan as a picture (`dtlc plan --format svg`, and the plan on `dtlc
// report`'s page): the mesh's ranks as a grid, one lane per mesh axis with
// one bar segment per collective (width by the bytes one rank sends per
// step), and memory per rank as bars. Drawn here as SVG text; no Graphviz.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "compiler/plan/plan.h"

namespace dtl::plan {

// What the picture shows, taken from a plan (planPicture) or built by a test.
struct PlanPicture {
  std::string model;
  std::vector<std::pair<std::string, int64_t>> mesh;  // axis and size, outermost first
  std::vector<Collective> collectives;                // in the order they start
  std::vector<double> sent;                           // per collective: bytes one rank sends per step
  Memory memory;
};

PlanPicture planPicture(const ir::Graph& g, const layout::Layout& l, const prog::Program& p, const sema::Spec& spec);

// A standalone SVG document (its own <style>, classes prefixed `plan-`).
// Elements a reader (or a test) can find: one `rect.plan-rank` per rank
// drawn, one `g.plan-axis` per mesh axis holding one `rect.plan-coll` per
// collective over it (data-op, data-bytes), one `rect.plan-mem` per part of
// memory (data-bytes; widths proportional to the bytes).
std::string planSvg(const PlanPicture& pic);

}  // namespace dtl::plan
