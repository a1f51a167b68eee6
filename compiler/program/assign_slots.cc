#include "compiler/program/assign_slots.h"

#include <algorithm>
#include <limits>

namespace dtl::program {

namespace {

using prog::Instr;
using prog::Storage;

constexpr int kEnd = std::numeric_limits<int>::max();

// The value whose memory `v` is (itself unless it aliases another).
int root(const prog::Schedule& s, int v) {
  while (s.storage[static_cast<size_t>(v)].kind == Storage::Alias) v = s.storage[static_cast<size_t>(v)].index;
  return v;
}

}  // namespace

void assignSlots(prog::Program& p, prog::Schedule& s, const std::vector<bool>& keep,
                 const std::vector<int64_t>& pool, const std::vector<bool>& reserved) {
  // Values 0 … n-1 are the nodes; n + g is group g's transient buffer.
  const size_t n = p.nodes.size(), total = n + p.groups.size();
  std::vector<int> def(total, kEnd), last(total, -1);
  for (size_t pos = 0; pos < s.instrs.size(); ++pos) {
    const Instr& in = s.instrs[pos];
    const int at = static_cast<int>(pos);
    if (in.kind == Instr::Run) {
      def[static_cast<size_t>(in.id)] = std::min(def[static_cast<size_t>(in.id)], at);
      for (const ir::PostOp& o : p[in.id].epilogue)  // its epilogue's nodes: views of it, made by it
        def[static_cast<size_t>(o.node)] = std::min(def[static_cast<size_t>(o.node)], at);
      for (int x : p[in.id].inputs) last[static_cast<size_t>(x)] = std::max(last[static_cast<size_t>(x)], at);
      continue;
    }
    if (in.kind == Instr::Fused) {  // one kernel: reads its inputs, writes its outputs
      const prog::Fused& f = p.fused[static_cast<size_t>(in.id)];
      for (int v : f.outputs) def[static_cast<size_t>(v)] = std::min(def[static_cast<size_t>(v)], at);
      for (int x : f.inputs) last[static_cast<size_t>(x)] = std::max(last[static_cast<size_t>(x)], at);
      continue;
    }
    // A group writes its members from its start until it is waited for; a
    // bucket packs its operands when it starts, a single collective reads
    // its operand until it is waited for. Its own buffer is in use from
    // start to wait.
    const prog::Group& grp = p.groups[static_cast<size_t>(in.id)];
    const size_t buffer = n + static_cast<size_t>(in.id);
    if (in.kind == Instr::Start) def[buffer] = std::min(def[buffer], at);
    if (in.kind == Instr::Wait) last[buffer] = std::max(last[buffer], at);
    for (int m : grp.members) {
      if (in.kind == Instr::Start) def[static_cast<size_t>(m)] = std::min(def[static_cast<size_t>(m)], at);
      if (in.kind == Instr::Wait) last[static_cast<size_t>(m)] = std::max(last[static_cast<size_t>(m)], at);
      if (grp.bucket >= 0 && in.kind == Instr::Wait) continue;
      for (int x : p[m].inputs) last[static_cast<size_t>(x)] = std::max(last[static_cast<size_t>(x)], at);
    }
  }
  for (size_t v = 0; v < n; ++v) {
    if (def[v] == kEnd) continue;
    if (keep[v]) last[v] = kEnd;
    last[v] = std::max(last[v], def[v]);  // a value nothing reads is freed right after it is made
  }
  // A view's life is its source's: fold each alias into its root (the
  // copies of a stack are written before the stack's own node runs).
  for (size_t v = 0; v < n; ++v) {
    if (def[v] == kEnd || s.storage[v].kind != Storage::Alias) continue;
    const size_t r = static_cast<size_t>(root(s, static_cast<int>(v)));
    def[r] = std::min(def[r], def[v]);
    last[r] = std::max(last[r], last[v]);
  }
  std::vector<std::vector<int>> born(s.instrs.size()), dies(s.instrs.size());
  auto slotted = [&](size_t v) {
    return v < n ? s.storage[v].kind == Storage::Slot : p.groups[v - n].transient && p.groups[v - n].elements > 0;
  };
  for (size_t v = 0; v < total; ++v) {
    if (!slotted(v) || def[v] == kEnd) continue;
    born[static_cast<size_t>(def[v])].push_back(static_cast<int>(v));
    if (last[v] != kEnd && last[v] >= 0) dies[static_cast<size_t>(last[v])].push_back(static_cast<int>(v));
  }
  s.slot_words = pool;
  s.group_slot.assign(p.groups.size(), -1);
  std::vector<int> free;  // slot ids
  for (size_t k = 0; k < pool.size(); ++k)
    if (k >= reserved.size() || !reserved[k]) free.push_back(static_cast<int>(k));
  for (size_t pos = 0; pos < s.instrs.size(); ++pos) {
    for (int v : born[pos]) {
      const size_t vi = static_cast<size_t>(v);
      // A size past int64 saturates (the memory check refuses it before a run).
      const int64_t need = std::max<int64_t>(vi < n ? (p[v].results.empty() ? p[v].shape.elements().value_or(INT64_MAX / 4) : ir::storedElements(p[v])) : p.groups[vi - n].elements, 1);
      // Best fit among the free slots; else the largest free one, grown.
      int best = -1, largest = -1;
      for (int k : free) {
        const int64_t cap = s.slot_words[static_cast<size_t>(k)];
        if (cap >= need && (best < 0 || cap < s.slot_words[static_cast<size_t>(best)])) best = k;
        if (largest < 0 || cap > s.slot_words[static_cast<size_t>(largest)]) largest = k;
      }
      int slot = best >= 0 ? best : largest;
      if (slot < 0) {
        slot = static_cast<int>(s.slot_words.size());
        s.slot_words.push_back(need);
      } else {
        free.erase(std::find(free.begin(), free.end(), slot));
        s.slot_words[static_cast<size_t>(slot)] = std::max(s.slot_words[static_cast<size_t>(slot)], need);
      }
      if (vi < n) s.storage[vi].index = slot;
      else s.group_slot[vi - n] = slot;
    }
    for (int v : dies[pos]) {
      const size_t vi = static_cast<size_t>(v);
      free.push_back(vi < n ? s.storage[vi].index : s.group_slot[vi - n]);
      if (vi < n) s.instrs[pos].frees.push_back(v);
    }
  }
}

}  // namespace dtl::program
