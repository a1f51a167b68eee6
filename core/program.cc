#include "core/program.h"

#include <algorithm>

namespace dtl::prog {

namespace {

int64_t wordBytes(const std::vector<int64_t>& words) {
  int64_t total = 0, b = 0;
  for (int64_t w : words)
    if (__builtin_mul_overflow(w, 4, &b) || __builtin_add_overflow(total, b, &total)) return INT64_MAX;
  return total;
}

std::string storageText(const Storage& s) {
  switch (s.kind) {
    case Storage::None: return "-";
    case Storage::Slot: return "slot " + std::to_string(s.index);
    case Storage::Param: return "param";
    case Storage::Alias: return "view of %" + std::to_string(s.index) + (s.offset ? " +" + std::to_string(s.offset) : "");
    case Storage::Group: return "group " + std::to_string(s.index) + " +" + std::to_string(s.offset);
    case Storage::Output: return "output";
  }
  return "?";
}

std::string groupText(const Program& p, const Group& g) {
  std::string s = std::string(ir::opName(g.op)) + " over " + g.axis;
  if (g.bucket >= 0) s += ", bucket " + std::to_string(g.bucket) + " (" + std::to_string(g.elements * 4) + " B)";
  s += ":";
  for (int m : g.members) s += " %" + std::to_string(m);
  return s;
}

std::string scheduleText(const Program& p, const Schedule& s, const char* name) {
  std::string out = std::string(name) + ": " + std::to_string(s.instrs.size()) + " instructions, " +
                    std::to_string(std::count_if(s.slot_words.begin(), s.slot_words.end(), [](int64_t w) { return w > 0; })) + " buffer slots, " + std::to_string(s.slotBytes()) + " B\n";
  for (const Instr& in : s.instrs) {
    std::string line;
    if (in.kind == Instr::Run) {
      const ir::Node& n = p[in.id];
      line = "  run   " + ir::printNode(n, "-> " + storageText(s.storage[static_cast<size_t>(in.id)]));
      line.pop_back();
    } else if (in.kind == Instr::Fused) {
      const Fused& f = p.fused[static_cast<size_t>(in.id)];
      line = "  fused region " + std::to_string(in.id) + ": " + std::to_string(f.nodes.size() + f.folded.size()) + " nodes, reads";
      for (int x : f.inputs) line += " %" + std::to_string(x);
      line += ", writes";
      for (int x : f.outputs) line += " %" + std::to_string(x) + " -> " + storageText(s.storage[static_cast<size_t>(x)]);
    } else {
      line = std::string(in.kind == Instr::Start ? "  start " : "  wait  ") + "group " + std::to_string(in.id);
      if (in.kind == Instr::Start) line += ": " + groupText(p, p.groups[static_cast<size_t>(in.id)]);
      const size_t g = static_cast<size_t>(in.id);
      if (in.kind == Instr::Start && g < s.group_slot.size() && s.group_slot[g] >= 0)
        line += " (buffer in slot " + std::to_string(s.group_slot[g]) + ")";
    }
    if (!in.frees.empty()) {
      line += "  ; frees";
      for (int v : in.frees) line += " %" + std::to_string(v);
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::vector<int> collectiveNumbers(const Program& p) {
  // A bucket starts after its start_after; a single collective after its
  // input (as the plan lists them, whatever schedule point prefetching chose).
  auto start = [&](const Group& g) { return g.bucket >= 0 ? g.start_after : p[g.members[0]].inputs[0]; };
  std::vector<int> order(p.groups.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return start(p.groups[static_cast<size_t>(a)]) < start(p.groups[static_cast<size_t>(b)]);
  });
  std::vector<int> number(p.groups.size());
  for (size_t k = 0; k < order.size(); ++k) number[static_cast<size_t>(order[k])] = static_cast<int>(k) + 1;
  return number;
}

int64_t flatBlock(const Shape& local, const std::string& flat, int64_t ranks) {
  const Shape v = layout::flatView(local, flat);
  if (!v.has(flat)) return 0;
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < v.dims.size(); ++d) outer *= v.dims[d].size;
  return outer * layout::pieceSize(v.dims.back().size, std::max<int64_t>(ranks, 1), 0);
}

int64_t Schedule::slotBytes() const { return wordBytes(slot_words); }

std::vector<int64_t> Program::arenaWords() const {
  std::vector<int64_t> words(std::max({train.slot_words.size(), eval.slot_words.size(), update.slot_words.size()}), 0);
  for (const Schedule* s : {&train, &eval, &update})
    for (size_t k = 0; k < s->slot_words.size(); ++k) words[k] = std::max(words[k], s->slot_words[k]);
  return words;
}

int64_t Program::arenaBytes() const { return wordBytes(arenaWords()); }

int64_t Program::groupBytes() const {
  std::vector<int64_t> words;
  for (const Group& g : groups)
    if (!g.transient) words.push_back(g.elements);
  return wordBytes(words);
}

std::string printProgram(const Program& p) {
  std::string out = "program for";
  if (p.mesh.empty()) out += " one rank";
  for (size_t a = 0; a < p.mesh.size(); ++a)
    out += " " + p.mesh[a].name + "=" + std::to_string(p.coords[a]) + "/" + std::to_string(p.mesh[a].size);
  out += "\n";
  for (const Group& g : p.groups) out += "group " + std::to_string(g.id) + ": " + groupText(p, g) + "\n";
  for (size_t k = 0; k < p.fused.size(); ++k) {
    std::string line = "fused " + std::to_string(k) + ":";
    for (int x : p.fused[k].nodes) line += " %" + std::to_string(x);
    if (!p.fused[k].folded.empty()) line += " (folded";
    for (int x : p.fused[k].folded) line += " %" + std::to_string(x);
    if (!p.fused[k].folded.empty()) line += ")";
    if (!p.fused[k].recomputed.empty()) line += " (recomputes";
    for (int x : p.fused[k].recomputed) line += " %" + std::to_string(x);
    out += line + (p.fused[k].recomputed.empty() ? "\n" : ")\n");
  }
  out += scheduleText(p, p.train, "train");
  out += scheduleText(p, p.eval, "eval");
  out += scheduleText(p, p.update, "update");
  out += "loss %" + std::to_string(p.loss) + "\n";
  for (const auto& [name, id] : p.metrics) out += "metric " + name + " %" + std::to_string(id) + "\n";
  for (const auto& [path, id] : p.grads) out += "grad " + path + " %" + std::to_string(id) + "\n";
  return out;
}

}  // namespace dtl::prog
