#include "compiler/layout/print_layout.h"

namespace dtl::layout {

std::string printLayout(const ir::Graph& g, const Layout& l) {
  std::string out = "mesh";
  for (const MeshAxis& a : l.mesh) out += " " + a.name + "=" + std::to_string(a.size);
  out += "\n";
  // "@ dp=S(batch) tp=R local [batch=16, hidden=512]" after each node's type.
  out += ir::printGraph(g, true, [&](const ir::Node& n) {
    std::string s = "@";
    const std::vector<Placement>& p = l.of[static_cast<size_t>(n.id)];
    for (size_t a = 0; a < l.mesh.size() && a < p.size(); ++a) s += " " + l.mesh[a].name + "=" + p[a].str();
    s += " local " + localShape(n.shape, p, l.mesh).str();
    if (ir::isConversion(n.op) && !n.fn.empty()) s += "  (" + n.fn + ")";  // why the layout inserted it
    return s;
  });
  for (const ir::Bucket& b : g.buckets) {
    out += "bucket " + std::to_string(b.id) + " over " + b.axis + ", " + std::to_string(b.bytes) + " B, starts after %" +
           std::to_string(b.start_after) + ":";
    for (int m : b.members) out += " %" + std::to_string(m);
    out += "\n";
  }
  return out;
}

}  // namespace dtl::layout
