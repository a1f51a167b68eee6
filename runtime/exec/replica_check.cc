// replica_check.h: one all-gather of a combined hash per axis; per-tensor
// hashes only to name what differs.
#include "runtime/exec/replica_check.h"

#include <algorithm>
#include <cstring>

#include "core/xxhash.h"

namespace dtl::rt {

namespace {

struct Held {
  std::string name;
  const std::vector<float>* values;
  const std::vector<layout::Placement>* placement;  // empty: replicated
};

bool splitOn(const std::vector<layout::Placement>& placement, size_t axis) {
  return axis < placement.size() && placement[axis].kind == layout::Placement::Shard;
}

// 64 bits carried as two f32 slots: an all-gather copies bits, it does no arithmetic.
void put(uint64_t h, float* at) { std::memcpy(at, &h, 8); }
uint64_t get(const float* at) {
  uint64_t h;
  std::memcpy(&h, at, 8);
  return h;
}

// Which ranks of the group hold another value of tensor k than most do, as
// the message's words.
std::string differing(const std::vector<uint64_t>& hashes, size_t tensors, size_t k, int size,
                      const std::vector<int64_t>& global) {
  std::vector<uint64_t> of(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) of[static_cast<size_t>(r)] = hashes[static_cast<size_t>(r) * tensors + k];
  uint64_t common = of[0];
  int best = 0;  // the most common value (the first of equally common ones)
  for (uint64_t h : of) {
    int n = static_cast<int>(std::count(of.begin(), of.end(), h));
    if (n > best) best = n, common = h;
  }
  std::vector<int64_t> odd, rest;
  for (int r = 0; r < size; ++r) (of[static_cast<size_t>(r)] == common ? rest : odd).push_back(global[static_cast<size_t>(r)]);
  auto list = [](const std::vector<int64_t>& ranks) {
    std::string t = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) t += (i ? ", " : "") + std::to_string(ranks[i]);
    return t;
  };
  // Without a strict majority there is no telling which is right: name them all.
  if (2 * rest.size() <= global.size()) return list(global) + " hold different values";
  return list(odd) + (odd.size() == 1 ? " holds" : " hold") + " another value than " + list(rest);
}

}  // namespace

comm::Status checkReplicas(const std::vector<Param>& params, const std::vector<std::string>& state_names,
                           const prog::Program& g, const std::map<std::string, comm::Communicator*>& comms,
                           int64_t global_rank, ReplicaCheck& out) {
  std::vector<Held> held;
  for (const Param& p : params) {
    held.push_back({p.spec->path, &p.value, &p.shard.placement});
    const std::vector<float>* state[2] = {&p.state.a, &p.state.b};
    for (size_t k = 0; k < state_names.size() && k < 2; ++k)
      held.push_back({p.spec->path + "." + state_names[k], state[k], &p.piece.placement});
  }
  std::vector<uint64_t> hash(held.size());
  for (size_t i = 0; i < held.size(); ++i) hash[i] = xxh64(held[i].values->data(), held[i].values->size() * 4, 0);

  int64_t stride = 1;  // ranks are laid out with the last axis fastest
  std::vector<int64_t> strides(g.mesh.size());
  for (size_t a = g.mesh.size(); a-- > 0;) strides[a] = stride, stride *= g.mesh[a].size;
  for (size_t a = 0; a < g.mesh.size(); ++a) {
    auto c = comms.find(g.mesh[a].name);
    if (c == comms.end() || !c->second || c->second->size() <= 1) continue;
    comm::Communicator& cm = *c->second;
    std::vector<size_t> members;  // the tensors replicated over this axis
    for (size_t i = 0; i < held.size(); ++i)
      if (!splitOn(*held[i].placement, a)) members.push_back(i);
    if (members.empty()) continue;
    std::vector<uint64_t> mine;
    for (size_t i : members) mine.push_back(hash[i]);
    float one[2];
    std::vector<float> gathered(2 * static_cast<size_t>(cm.size()));
    put(xxh64(mine.data(), mine.size() * 8, a), one);
    comm::Status s = cm.allGather(one, gathered.data(), 2)->wait();
    if (!s.ok) return {false, "comparing replicas over `" + g.mesh[a].name + "`: " + s.message};
    bool same = true;
    for (int r = 1; r < cm.size(); ++r) same = same && get(&gathered[2 * static_cast<size_t>(r)]) == get(&gathered[0]);
    if (same) continue;
    out.diverged = true;
    // The second round: every tensor's hash from every rank of the group.
    std::vector<float> each(2 * members.size()), every(2 * members.size() * static_cast<size_t>(cm.size()));
    for (size_t k = 0; k < members.size(); ++k) put(mine[k], &each[2 * k]);
    s = cm.allGather(each.data(), every.data(), static_cast<int64_t>(each.size()))->wait();
    if (!s.ok) return {false, "comparing replicas over `" + g.mesh[a].name + "`: " + s.message};
    std::vector<uint64_t> hashes(members.size() * static_cast<size_t>(cm.size()));
    for (size_t k = 0; k < hashes.size(); ++k) hashes[k] = get(&every[2 * k]);
    std::vector<int64_t> global(static_cast<size_t>(cm.size()));
    for (int r = 0; r < cm.size(); ++r)
      global[static_cast<size_t>(r)] = global_rank + (r - g.coords[a]) * strides[a];
    if (g.coords[a] != 0) continue;
    std::string text;
    int listed = 0, differ = 0;
    for (size_t k = 0; k < members.size(); ++k) {
      bool alike = true;
      for (int r = 1; r < cm.size(); ++r) alike = alike && hashes[static_cast<size_t>(r) * members.size() + k] == hashes[k];
      if (alike) continue;
      ++differ;
      if (listed++ < 5)
        text += "\n  `" + held[members[k]].name + "`: " + differing(hashes, members.size(), k, cm.size(), global);
    }
    if (differ > listed) text += "\n  and " + std::to_string(differ - listed) + " more";
    out.message += "replicas over `" + g.mesh[a].name + "` hold different values (" + std::to_string(differ) + " of " +
                   std::to_string(members.size()) + " tensors that should be identical):" + text + "\n";
  }
  return {};
}

}  // namespace dtl::rt
