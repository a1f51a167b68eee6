#include "compiler/plan/plan_svg.h"

#include <algorithm>
#include <map>

#include "compiler/sema/print_sema.h"
#include "core/svg.h"

namespace dtl::plan {

namespace {

constexpr double kWidth = 760, kPad = 16, kLabel = 130;          // the picture; the column of labels
constexpr double kBar = kWidth - kPad - kLabel - kPad - 70;       // bar area (room for a value after it)
constexpr int kMaxRows = 8, kMaxCols = 16;                        // ranks drawn

const char* kStyle =
    "<style>"
    ".plan-title{font:600 15px sans-serif;fill:#222}"
    ".plan-head{font:600 13px sans-serif;fill:#333}"
    ".plan-label{font:12px sans-serif;fill:#333}"
    ".plan-note{font:11px sans-serif;fill:#666}"
    ".plan-in{font:11px sans-serif;fill:#fff}"
    ".plan-rank{fill:#e8eef7;stroke:#4a6fa5;stroke-width:1}"
    ".plan-lane{fill:#f4f4f4}"
    ".plan-coll{stroke:#fff;stroke-width:0.5}"
    ".plan-all_reduce{fill:#3b75af}.plan-all_gather{fill:#e1812c}.plan-reduce_scatter{fill:#3a923a}"
    ".plan-all_to_all{fill:#8e6bb8}.plan-other{fill:#888}"
    ".plan-mem{fill:#c44e52}"
    "</style>";

std::string opClass(const std::string& op) {
  for (const char* known : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"})
    if (op == known) return std::string("plan-") + known;
  return "plan-other";
}

int64_t worldOf(const PlanPicture& pic) {
  int64_t w = 1;
  for (const auto& a : pic.mesh) w *= a.second;
  return w;
}

std::string meshText(const PlanPicture& pic) {
  std::string s;
  for (const auto& a : pic.mesh) s += (s.empty() ? "" : ", ") + a.first + " = " + std::to_string(a.second);
  return s.empty() ? "one rank" : s;
}

// The ranks as a grid: the innermost axis across, the others down (rank r at
// row r / cols, column r % cols, as meshCoords numbers them).
std::string meshSection(const PlanPicture& pic, double& y) {
  const int64_t world = worldOf(pic);
  const int64_t inner = pic.mesh.empty() ? 1 : pic.mesh.back().second;
  const int64_t cols = std::min<int64_t>(pic.mesh.size() > 1 ? inner : world, kMaxCols);
  const int64_t rows = (world + cols - 1) / cols;
  const double cw = std::min(56.0, kBar / static_cast<double>(cols)), ch = 22;
  std::string across = pic.mesh.empty() ? "" : pic.mesh.back().first + " = " + std::to_string(inner) + " →";
  std::string down;
  for (size_t i = 0; i + 1 < pic.mesh.size(); ++i)
    down += (down.empty() ? "" : " × ") + pic.mesh[i].first + " = " + std::to_string(pic.mesh[i].second);
  std::string out = svg::text(kPad, y + 14, "mesh: " + std::to_string(world) + " rank" + (world == 1 ? "" : "s"), "plan-head");
  y += 24;
  if (pic.mesh.size() > 1 || inner > 1) out += svg::text(kPad + kLabel, y + 10, across, "plan-note");
  y += 16;
  if (!down.empty()) out += svg::text(kPad, y + 15, down + " ↓", "plan-note");
  const int64_t shown = std::min<int64_t>(rows, kMaxRows);
  for (int64_t r = 0; r < shown; ++r)
    for (int64_t c = 0; c < cols && r * cols + c < world; ++c) {
      const double x = kPad + kLabel + static_cast<double>(c) * cw, top = y + static_cast<double>(r) * (ch + 4);
      const std::string id = std::to_string(r * cols + c);
      out += svg::rect(x, top, cw - 4, ch, "plan-rank", "rank " + id);
      if (cw >= 28) out += svg::text(x + (cw - 4) / 2, top + 15, id, "plan-label", "middle");
    }
  y += static_cast<double>(shown) * (ch + 4);
  if (rows > shown) {
    out += svg::text(kPad + kLabel, y + 12, "… and " + std::to_string(world - shown * cols) + " more ranks", "plan-note");
    y += 18;
  }
  return out + "\n";
}

// Segment widths: a floor each (every collective stays visible), the rest
// shared by `weight`.
std::vector<double> segmentWidths(const std::vector<double>& weight, double avail) {
  const double n = static_cast<double>(weight.size());
  const double floor = std::min(2.0, avail / std::max(n, 1.0));
  double total = 0;
  for (double w : weight) total += w;
  std::vector<double> out;
  for (double w : weight) out.push_back(floor + (total > 0 ? w / total : 1 / n) * (avail - floor * n));
  return out;
}

std::string collectiveTitle(const Collective& c, double sent) {
  std::string t = c.op + (c.max ? " (max)" : "") + " over " + c.axis + ", " + c.dtype + ", " + sema::humanBytes(c.bytes) +
                  "; sends " + sema::humanBytes(static_cast<int64_t>(sent)) + " per rank per step";
  if (c.bucket >= 0) t += "; bucket " + std::to_string(c.bucket);
  std::string tensors;
  for (const std::string& s : c.tensors) tensors += (tensors.empty() ? "" : ", ") + s;
  if (!tensors.empty()) t += "; " + tensors;
  if (!c.after.empty()) t += "; starts after " + c.after;
  return t;
}

// One axis: its lane of collectives and a line that sums them by op.
std::string axisLane(const PlanPicture& pic, const std::string& axis, int64_t size, double& y) {
  std::vector<size_t> mine;
  for (size_t i = 0; i < pic.collectives.size(); ++i)
    if (pic.collectives[i].axis == axis) mine.push_back(i);
  std::string out = "<g class=\"plan-axis\" data-axis=\"" + svg::escape(axis) + "\">";
  out += svg::text(kPad, y + 15, axis + " · " + std::to_string(size) + " rank" + (size == 1 ? "" : "s"), "plan-label");
  out += svg::rect(kPad + kLabel, y, kBar, 22, "plan-lane");
  std::vector<double> weight;
  double total = 0;
  for (size_t i : mine) weight.push_back(pic.sent[i] > 0 ? pic.sent[i] : static_cast<double>(pic.collectives[i].bytes));
  for (size_t i : mine) total += pic.sent[i];
  std::vector<double> widths = segmentWidths(weight, kBar);
  double x = kPad + kLabel;
  std::map<std::string, int> count;
  for (size_t k = 0; k < mine.size(); ++k) {
    const Collective& c = pic.collectives[mine[k]];
    ++count[c.op];
    out += svg::rect(x, y, widths[k], 22, "plan-coll " + opClass(c.op), collectiveTitle(c, pic.sent[mine[k]]),
                     "data-op=\"" + c.op + "\" data-bytes=\"" + std::to_string(c.bytes) + "\"");
    const std::string label = c.op + " " + sema::humanBytes(c.bytes);
    if (widths[k] > 7.0 * static_cast<double>(label.size())) out += svg::text(x + 4, y + 15, label, "plan-in");
    x += widths[k];
  }
  std::string sum;
  for (const auto& [op, n] : count) sum += " · " + op + " ×" + std::to_string(n);
  out += svg::text(kPad + kLabel, y + 36,
                   mine.empty() ? std::string("no collectives")
                                : std::to_string(mine.size()) + " collective" + (mine.size() == 1 ? "" : "s") + sum + " · " +
                                      sema::humanBytes(static_cast<int64_t>(total)) + " sent per rank per step",
                   "plan-note");
  y += 48;
  return out + "</g>\n";
}

// A colour key for the ops the plan has, under the lanes.
std::string opKey(const PlanPicture& pic, double& y) {
  std::vector<std::string> ops;
  for (const Collective& c : pic.collectives)
    if (std::find(ops.begin(), ops.end(), c.op) == ops.end()) ops.push_back(c.op);
  std::string out;
  double x = kPad + kLabel;
  for (const std::string& op : ops) {
    out += svg::rect(x, y + 3, 10, 10, opClass(op));
    out += svg::text(x + 14, y + 12, op, "plan-note");
    x += 24 + 6.5 * static_cast<double>(op.size());
  }
  if (!ops.empty()) y += 20;
  return out;
}

std::string collectiveSection(const PlanPicture& pic, double& y) {
  std::string out = svg::text(kPad, y + 14, "collectives per step, by mesh axis (width: bytes one rank sends)", "plan-head");
  y += 24;
  for (const auto& [axis, size] : pic.mesh) out += axisLane(pic, axis, size, y);
  out += opKey(pic, y);
  if (pic.mesh.empty()) {
    out += svg::text(kPad, y + 12, "none: one rank", "plan-note");
    y += 20;
  }
  return out;
}

std::string memorySection(const PlanPicture& pic, double& y) {
  const Memory& m = pic.memory;
  const std::pair<const char*, int64_t> parts[] = {{"parameters", m.parameters},
                                                   {"gradients", m.gradients},
                                                   {"optimizer state", m.optimizer_state},
                                                   {"peak activations", m.peak_activations},
                                                   {"comm buffers", m.communication}};
  int64_t most = 1;
  for (const auto& p : parts) most = std::max(most, p.second);
  std::string out = svg::text(kPad, y + 14, "memory per rank: " + sema::humanBytes(m.total()), "plan-head");
  y += 24;
  for (const auto& [name, bytes] : parts) {
    const double w = kBar * static_cast<double>(bytes) / static_cast<double>(most);
    out += svg::text(kPad, y + 13, name, "plan-label");
    out += svg::rect(kPad + kLabel, y + 2, w, 14, "plan-mem", std::string(name) + ": " + sema::humanBytes(bytes),
                     "data-part=\"" + std::string(name) + "\" data-bytes=\"" + std::to_string(bytes) + "\"");
    out += svg::text(kPad + kLabel + w + 6, y + 13, sema::humanBytes(bytes), "plan-note");
    y += 22;
  }
  return out;
}

}  // namespace

PlanPicture planPicture(const ir::Graph& g, const layout::Layout& l, const prog::Program& p, const sema::Spec& spec) {
  PlanPicture pic;
  pic.model = spec.model.name;
  for (const auto& a : l.mesh) pic.mesh.emplace_back(a.name, a.size);
  pic.collectives = collectives(g, p, spec.parallel.zero);
  const int64_t k = std::max<int64_t>(spec.train.accumulate, 1);
  for (const Collective& c : pic.collectives) {
    int64_t n = 1;
    for (const auto& a : l.mesh)
      if (a.name == c.axis) n = a.size;
    pic.sent.push_back(sent(c, n) * static_cast<double>(c.per_step ? 1 : k));
  }
  pic.memory = memoryPerRank(p, spec);
  return pic;
}

std::string planSvg(const PlanPicture& pic) {
  double y = 12;
  std::string body = svg::text(kPad, y + 14, pic.model + " on " + meshText(pic), "plan-title");
  y += 30;
  body += meshSection(pic, y);
  y += 10;
  body += collectiveSection(pic, y);
  y += 6;
  body += memorySection(pic, y);
  y += 10;
  return svg::open(kWidth, y, "plan", "the plan of " + pic.model) + kStyle + "\n" + body + "</svg>\n";
}

}  // namespace dtl::plan
