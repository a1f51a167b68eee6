// Planning, in order:
// 1. Local form: every node's shape becomes this rank's local shape.
// 2. Communication groups: each gradient bucket is one group (a flat
//    buffer: an all-reduce bucket's members are views of it, a ZeRO
//    reduce-scatter bucket packs one block per rank and unpacks each piece
//    at its wait); every other collective is a group of its own. A group
//    whose buffer is needed only in flight has it in a buffer slot.
// 3. Per schedule, the instruction list: nodes in graph order; a group
//    starts right after the value named by its `start_after` is ready (its
//    input, or what a scheduling pass chose: ZeRO-3's prefetch) and is
//    waited for before the first instruction that reads a member — or
//    earlier, to keep few reduce-scatter buckets and gathers of updated
//    pieces in flight.
// 4. Per schedule, storage: views (parameters, reshapes, leading-dim slices
//    of parameters, a rank's slice of a replicated value along its leading
//    dim or a flat piece without kept dims) alias their source; in
//    training, a gradient whose only reader is its bucket's all-reduce is
//    computed into the bucket, a stacked copy's gradient (or its scattered
//    piece) into its block of the stack, and a parameter's gradient into the
//    caller's memory when bound; everything else gets a buffer slot from
//    liveness (assign_slots.cc). The optimiser step's schedule (updates in
//    place, gathers of updated pieces into the parameters) takes the
//    training schedule's slots but for those holding the step's gradients.
// 5. With PlanOptions::fuse, the contractions' epilogues, chosen on the
//    training schedule (compiler/codegen/fold_epilogues.h: the absorbed nodes
//    become views of the contraction, which computes them), then the training
//    and evaluation schedules' fused
//    regions (compiler/codegen/fuse_regions.h): each region's members become
//    one Fused instruction where its first member ran, members that are not
//    region outputs lose their storage, and the slots are assigned again.
#include "compiler/program/plan_program.h"

#include <algorithm>
#include <functional>
#include <deque>
#include <map>
#include <set>

#include "compiler/codegen/fuse_regions.h"
#include "compiler/program/assign_slots.h"

namespace dtl::program {

namespace {

using ir::Node;
using ir::Op;
using prog::Instr;
using prog::Schedule;
using prog::Storage;

// The conversions that communicate (a local slice does not).
bool isCollective(Op op) { return ir::isConversion(op) && op != Op::LocalSlice; }
bool isMaxReduce(const Node& n) { return n.op == Op::AllReduce && !n.names.empty() && n.names[0] == "max"; }

int64_t elements(const Node& n) { return n.shape.elements().value_or(0); }

class Planner {
 public:
  Planner(const ir::Graph& g, prog::Program& p, const PlanOptions& o) : g_(g), p_(p), o_(o), n_(g.nodes.size()) {}

  void run() {
    groups();
    p_.train = schedule(true);
    p_.eval = schedule(false, p_.train.slot_words);  // in the training schedule's slots
    p_.update = updates();
  }

 private:
  void groups() {
    group_of_.assign(n_, -1);
    for (const ir::Bucket& b : g_.buckets) {
      prog::Group grp;
      grp.id = static_cast<int>(p_.groups.size());
      grp.op = b.op;
      grp.axis = b.axis;
      grp.members = b.members;
      grp.bucket = b.id;
      grp.start_after = b.start_after;
      if (b.op == Op::ReduceScatter) {
        layOutScatterBucket(grp);
        grp.transient = !b.keeps_sum;
      } else {
        for (int m : b.members) {
          group_of_[static_cast<size_t>(m)] = grp.id;
          offset_[m] = grp.elements;
          grp.elements += elements(p_[m]);
        }
      }
      p_.groups.push_back(std::move(grp));
    }
    for (const Node& n : g_.nodes) {
      if (!isCollective(n.op) || group_of_[static_cast<size_t>(n.id)] >= 0) continue;
      prog::Group grp;
      grp.id = static_cast<int>(p_.groups.size());
      grp.op = n.op;
      grp.axis = n.name;
      grp.members = {n.id};
      auto chosen = g_.start_after.find(n.id);
      grp.start_after = chosen != g_.start_after.end() ? chosen->second : n.inputs[0];
      // Gathering a dim that is not the leading one: the ranks' blocks
      // arrive one after another in a buffer of the group's own, and are
      // put in place along the dim when the group is waited for.
      if (n.op == Op::AllGather && !n.names.empty() && layout::Placement::isFlat(n.names[0])) {
        grp.elements = prog::flatBlock(p_[n.id].shape, n.names[0], axisSize(n.name)) * axisSize(n.name);
      } else if (n.op == Op::AllGather && !n.names.empty()) {
        const int k = p_[n.id].shape.find(n.names[0]);
        const int64_t ranks = axisSize(n.name), whole = k >= 0 ? p_[n.id].shape.dims[static_cast<size_t>(k)].size : 0;
        // Uneven pieces travel padded to the largest.
        if (k > 0 || whole % ranks != 0) grp.elements = elements(p_[n.id]) / std::max<int64_t>(whole, 1) * ((whole + ranks - 1) / ranks) * ranks;
      }
      // A reduce-scatter packs each rank's rows of the dim (padded to the
      // largest piece) one after another, then receives its own block.
      if (n.op == Op::ReduceScatter && layout::Placement::isFlat(n.names.at(0))) {
        grp.elements = prog::flatBlock(p_[n.inputs[0]].shape, n.names[0], axisSize(n.name)) * (axisSize(n.name) + 1);
      } else if (n.op == Op::ReduceScatter) {
        const int k = p_[n.inputs[0]].shape.find(n.names.at(0));
        const int64_t ranks = axisSize(n.name), whole = p_[n.inputs[0]].shape.dims.at(static_cast<size_t>(k)).size;
        grp.elements = elements(p_[n.inputs[0]]) / std::max<int64_t>(whole, 1) * ((whole + ranks - 1) / ranks) * (ranks + 1);
      }
      // An all-to-all packs one block per rank and receives one from each,
      // every block padded to the largest pieces of both dims.
      if (n.op == Op::AllToAll) grp.elements = 2 * axisSize(n.name) * exchangeBlock(n);
      // The largest over the ranks: every rank's values arrive (an
      // all-gather) and are compared when the group is waited for.
      if (isMaxReduce(n)) grp.elements = elements(p_[n.id]) * axisSize(n.name);
      grp.transient = true;
      group_of_[static_cast<size_t>(n.id)] = grp.id;
      p_.groups.push_back(std::move(grp));
    }
  }

  // A bucket of ZeRO reduce-scatters: one block per rank, each holding
  // every member's piece for that rank (padded to the largest piece), and
  // after them the block this rank receives, from which each member's piece
  // is copied to its own storage when the bucket is waited for.
  void layOutScatterBucket(prog::Group& grp) {
    const int64_t ranks = axisSize(grp.axis);
    int64_t block = 0;
    for (int m : grp.members) {
      group_of_[static_cast<size_t>(m)] = grp.id;
      block += prog::flatBlock(p_[g_[m].inputs[0]].shape, g_[m].names.at(0), ranks);
    }
    grp.elements = (ranks + 1) * block;
  }

  // A member of a reduce-scatter bucket: its piece is written at the
  // bucket's wait into storage of its own, like a computed value's.
  bool scattered(int id) const {
    const int grp = group_of_[static_cast<size_t>(id)];
    return grp >= 0 && scatterBucket(grp);
  }

  bool scatterBucket(int grp) const {
    const prog::Group& g = p_.groups[static_cast<size_t>(grp)];
    return g.bucket >= 0 && g.op == Op::ReduceScatter;
  }

  // The optimiser step's nodes: the updates, the pieces of replicated
  // parameters they update (ZeRO), the gathers of the updated pieces, and
  // the parameters these read.
  std::vector<bool> updateSide() const {
    std::vector<bool> side = ir::optimiserStep(g_);
    for (const Node& n : g_.nodes)
      if (side[static_cast<size_t>(n.id)])
        for (int x : n.inputs)
          if (g_[x].op == Op::Param) side[static_cast<size_t>(x)] = true;
    return side;
  }

  enum class Kind { Train, Eval, Update };

  // The nodes a schedule computes: all but the optimiser step's, the
  // forward pass and the collectives after it that make the loss and metrics
  // global, or the optimiser step's.
  std::vector<bool> members(Kind kind) const {
    const std::vector<bool> step = updateSide();
    if (kind == Kind::Update) return step;
    std::vector<bool> in(n_, false);
    const bool train = kind == Kind::Train;
    for (const Node& n : g_.nodes)
      in[static_cast<size_t>(n.id)] = train ? !step[static_cast<size_t>(n.id)] || n.op == Op::Param : n.id < g_.forward_end;
    if (train) return withoutUnread(in, step);
    std::vector<int> todo = {g_.loss};
    for (const auto& [name, id] : g_.metrics) todo.push_back(id);
    for (int id : g_.outputs) todo.push_back(id);
    while (!todo.empty()) {  // what the loss and metrics read past the forward pass
      const int id = todo.back();
      todo.pop_back();
      if (id < g_.forward_end || in[static_cast<size_t>(id)]) continue;
      in[static_cast<size_t>(id)] = true;
      for (int x : g_[id].inputs) todo.push_back(x);
    }
    return in;
  }

  // The training schedule runs what the caller keeps, the optimiser step
  // reads, and what those read: a value nothing reads (an embedding gradient
  // the scatter-into pass folded into another) is not computed.
  std::vector<bool> withoutUnread(std::vector<bool> in, const std::vector<bool>& step) const {
    std::vector<bool> needed = kept();
    for (const Node& n : g_.nodes)
      if (step[static_cast<size_t>(n.id)])
        for (int x : n.inputs) needed[static_cast<size_t>(x)] = true;
    for (size_t k = n_; k-- > 0;) {  // ids are in topological order
      if (!needed[k] || !in[k]) continue;
      for (int x : g_.nodes[k].inputs) needed[static_cast<size_t>(x)] = true;
    }
    for (const Node& n : g_.nodes)
      if (n.op != Op::Param && n.op != Op::Input && !needed[static_cast<size_t>(n.id)]) in[static_cast<size_t>(n.id)] = false;
    return in;
  }

  Schedule schedule(bool train, const std::vector<int64_t>& pool = {}) {
    Schedule s;
    const std::vector<bool> in = members(train ? Kind::Train : Kind::Eval);
    order(s, in);
    // A reduce-scatter bucket's buffer and pieces are needed only until it
    // is waited for: wait early, rather than where a stacked gradient
    // gathers its copies after the last layer, so that a couple of
    // buckets' buffers are live at a time, not the whole gradient's.
    boundInFlight(s, 2, [&](int grp) { return scatterBucket(grp); });
    s.storage.assign(n_, Storage{});
    for (const Node& n : g_.nodes)
      if (in[static_cast<size_t>(n.id)]) s.storage[static_cast<size_t>(n.id)] = storage(n, train);
    if (train) placeTraining(s);
    if (o_.fuse) fuse(s, train);
    assignSlots(p_, s, kept(), pool);
    return s;
  }

  // 5. The schedule's regions replace their members' instructions.
  void fuse(Schedule& s, bool train) {
    hoistParamViews(s);
    const codegen::FuseRules rules = o_.fuseRules();
    if (train) codegen::foldEpilogues(p_, s, rules.epilogues);  // the evaluation schedule reads no value training does not
    codegen::applyEpilogues(p_, s);
    const codegen::Fusion f = codegen::fuseRegions(p_, s, rules);
    std::vector<int> first(n_, -1);  // per member: its region's index in p_.fused, at its first member
    std::vector<bool> member(n_, false);
    for (const codegen::FusedRegion& r : f.regions) {
      auto at = std::find(p_.fused.begin(), p_.fused.end(), r.members);  // the eval schedule shares training's
      const int k = static_cast<int>(at - p_.fused.begin());
      if (at == p_.fused.end()) p_.fused.push_back(r.members);
      first[static_cast<size_t>(r.members.nodes.front())] = k;
      for (const std::vector<int>* list : {&r.members.nodes, &r.members.folded})
        for (int v : *list) {
          member[static_cast<size_t>(v)] = true;
          if (std::find(r.members.outputs.begin(), r.members.outputs.end(), v) == r.members.outputs.end())
            s.storage[static_cast<size_t>(v)] = Storage{};
        }
    }
    std::vector<Instr> out;
    for (const Instr& in : s.instrs) {
      if (in.kind != Instr::Run || !member[static_cast<size_t>(in.id)]) {
        out.push_back(in);
      } else if (first[static_cast<size_t>(in.id)] >= 0) {
        out.push_back(Instr{Instr::Fused, first[static_cast<size_t>(in.id)], {}});
      }
    }
    s.instrs = std::move(out);
  }

  // A parameter and a view of one (its storage the caller's, at an offset)
  // compute nothing and are ready before the run starts: they run first, in
  // their order, so that a region may read them wherever it starts (a bias
  // add or a norm's gain joins the region before it, rather than waiting for
  // the slice the schedule put just before its reader).
  void hoistParamViews(Schedule& s) const {
    auto free = [&](const Instr& in) {
      if (in.kind != Instr::Run || !paramView(in.id)) return false;
      const Storage::Kind k = s.storage[static_cast<size_t>(in.id)].kind;
      return k == Storage::Param || k == Storage::Alias;
    };
    std::stable_partition(s.instrs.begin(), s.instrs.end(), free);
  }

  // The optimiser step: each Update in graph order, in place on its
  // parameter's piece, and (ZeRO levels 1, 2) the gather of the updated
  // pieces into the parameter, started as soon as its update is done. Its
  // slots come after the other schedules' (arenaWords).
  Schedule updates() {
    Schedule s;
    const std::vector<bool> in = members(Kind::Update);
    order(s, in);
    boundInFlight(s, 2, [](int) { return true; });
    s.storage.assign(n_, Storage{});
    for (const Node& n : g_.nodes) {
      if (!in[static_cast<size_t>(n.id)]) continue;
      Storage& st = s.storage[static_cast<size_t>(n.id)];
      st = storage(n, false);
      if (n.op == Op::Update) st = {Storage::Alias, n.inputs[0], 0};
      if (n.op == Op::AllGather) st = {Storage::Alias, updatedParam(n), 0};
    }
    // In the training schedule's slots, but for those holding what the step
    // reads: the gradients the training run left in them.
    std::vector<bool> reserved(p_.train.slot_words.size(), false);
    for (const auto& [path, id] : g_.grads) {
      int v = id;
      while (p_.train.storage[static_cast<size_t>(v)].kind == Storage::Alias) v = p_.train.storage[static_cast<size_t>(v)].index;
      const Storage& st = p_.train.storage[static_cast<size_t>(v)];
      if (st.kind == Storage::Slot) reserved[static_cast<size_t>(st.index)] = true;
    }
    assignSlots(p_, s, std::vector<bool>(n_, false), p_.arenaWords(), reserved);
    return s;
  }

  // At most `limit` of the groups `counted` picks in flight: each start past
  // it waits for the oldest first — the gathers of updated pieces (levels 1,
  // 2) hold a couple of parameters' buffers at a time, not the whole
  // model's, and reduce-scatter buckets a couple of buckets' buffers.
  template <typename Counted>
  static void boundInFlight(Schedule& s, size_t limit, Counted counted) {
    std::vector<Instr> out;
    std::deque<int> flying;
    std::set<int> waited;
    for (const Instr& in : s.instrs) {
      if (in.kind == Instr::Wait) {
        if (!waited.insert(in.id).second) continue;
        flying.erase(std::remove(flying.begin(), flying.end(), in.id), flying.end());
      }
      if (in.kind == Instr::Start && counted(in.id)) {
        if (flying.size() >= limit) {  // the oldest is done before this one's buffer is taken
          waited.insert(flying.front());
          out.push_back(Instr{Instr::Wait, flying.front(), {}});
          flying.pop_front();
        }
        flying.push_back(in.id);
      }
      out.push_back(in);
    }
    s.instrs = std::move(out);
  }

  // The parameter an all-gather of updated pieces writes.
  int updatedParam(const Node& gather) const {
    int v = g_[gather.inputs[0]].inputs[0];  // the update's parameter (piece)
    while (g_[v].op != Op::Param && !g_[v].inputs.empty()) v = g_[v].inputs[0];
    return v;
  }

  // 3. The instruction list: nodes in graph order, each group started when
  // its `start_after` value is ready and waited for right before its first
  // reader. Demand pulls work forward: a group starts only once every
  // member's input has run (a node not yet run is run first, with what it
  // reads) and every group those inputs come from has been waited for — a
  // gradient sliced for its update after a reader of its bucket's other
  // members, or reduced over dp and then over tp.
  void order(Schedule& s, const std::vector<bool>& in) {
    std::vector<bool> started(p_.groups.size(), false), waited(p_.groups.size(), false), ran(n_, false);
    std::multimap<int, int> starts;  // value → groups it starts
    for (const prog::Group& grp : p_.groups)
      if (in[static_cast<size_t>(grp.members[0])]) starts.emplace(grp.start_after, grp.id);
    std::function<void(int)> run, wait, start, markReady;
    auto need = [&](int x) {  // value x in place (one this schedule does not make is bound by the caller)
      if (!in[static_cast<size_t>(x)]) return;
      if (group_of_[static_cast<size_t>(x)] >= 0) {
        wait(group_of_[static_cast<size_t>(x)]);
      } else {
        run(x);
      }
    };
    run = [&](int id) {
      if (ran[static_cast<size_t>(id)] || !in[static_cast<size_t>(id)]) return;
      ran[static_cast<size_t>(id)] = true;
      for (int x : g_[id].inputs) need(x);
      s.instrs.push_back(Instr{Instr::Run, id, {}});
      markReady(id);
    };
    start = [&](int grp) {
      if (started[static_cast<size_t>(grp)]) return;  // a reader needed it first
      started[static_cast<size_t>(grp)] = true;
      for (int m : p_.groups[static_cast<size_t>(grp)].members)
        for (int x : g_[m].inputs)
          if (group_of_[static_cast<size_t>(x)] != grp) need(x);
      s.instrs.push_back(Instr{Instr::Start, grp, {}});
    };
    markReady = [&](int v) {
      auto [lo, hi] = starts.equal_range(v);
      std::vector<int> due;
      for (auto it = lo; it != hi; ++it) due.push_back(it->second);
      for (int grp : due) start(grp);
    };
    wait = [&](int grp) {
      if (waited[static_cast<size_t>(grp)]) return;
      start(grp);
      waited[static_cast<size_t>(grp)] = true;
      s.instrs.push_back(Instr{Instr::Wait, grp, {}});
      for (int m : p_.groups[static_cast<size_t>(grp)].members) markReady(m);
    };
    for (const Node& n : g_.nodes)
      if (group_of_[static_cast<size_t>(n.id)] < 0) run(n.id);
    for (size_t grp = 0; grp < p_.groups.size(); ++grp)
      if (started[grp]) wait(static_cast<int>(grp));
  }

  // 4. Storage in any schedule: views, group members, slots.
  Storage storage(const Node& n, bool train) const {
    const int grp = group_of_[static_cast<size_t>(n.id)];
    if (n.op == Op::Param) return {Storage::Param, -1, 0};
    if (n.op == Op::Reshape) return {Storage::Alias, n.inputs[0], 0};
    // A node's results are one storage (a slot: never a bucket's, a stack's or the caller's, see
    // computed()); a view of result k is the part of it resultOffset says.
    if (n.op == Op::Result) return {Storage::Alias, n.inputs[0], ir::resultOffset(p_[n.inputs[0]], n.index)};
    if (n.op == Op::Slice && paramView(n.id)) return {Storage::Alias, n.inputs[0], n.index * elements(p_[n.id])};
    if (n.op == Op::LocalSlice && layout::Placement::isFlat(n.names[0])) {
      // A flat piece of a value without kept dims is one run of it.
      if (layout::flatStart(p_[n.inputs[0]].shape, n.names[0]) == 0) return {Storage::Alias, n.inputs[0], p_[n.id].index};
      return {Storage::Slot, -1, 0};
    }
    if (n.op == Op::LocalSlice && p_[n.inputs[0]].shape.find(n.names[0]) == 0) {
      // A slice of the leading dim is a contiguous block of the input.
      const Shape& in = p_[n.inputs[0]].shape;
      return {Storage::Alias, n.inputs[0], p_[n.id].index * (elements(p_[n.inputs[0]]) / std::max<int64_t>(in.dims[0].size, 1))};
    }
    if (scattered(n.id)) return train ? Storage{Storage::Slot, -1, 0} : Storage{};
    if (grp >= 0 && p_.groups[static_cast<size_t>(grp)].bucket >= 0)
      return train ? Storage{Storage::Group, grp, offset_.at(n.id)} : Storage{};
    return {Storage::Slot, -1, 0};
  }

  // A Param, a Reshape of a view, a Slice of a view over its leading dim.
  bool paramView(int id) const {
    const Node& n = g_[id];
    if (n.op == Op::Param) return true;
    if (n.op == Op::Reshape) return paramView(n.inputs[0]);
    if (n.op == Op::Slice && !n.names.empty()) return paramView(n.inputs[0]) && g_[n.inputs[0]].shape.find(n.names[0]) == 0;
    return false;
  }

  // Can a kernel compute this value straight into other memory? Not when it
  // is a view or fed, or not a float, or one of a node's several results
  // (they are one storage).
  bool computed(const Node& n) const {
    return n.op != Op::Param && n.op != Op::Input && n.op != Op::Reshape && n.op != Op::Slice && n.op != Op::Update &&
           n.op != Op::Result && n.results.empty() && !isCollective(n.op) && isFloat(n.dtype);
  }

  // 4, training only: into buckets, into stacks, into the caller's memory.
  void placeTraining(Schedule& s) const {
    std::vector<int> readers(n_, 0), last(n_, -1), stack_slots(n_, 0);
    for (const Node& n : g_.nodes) {
      if (n.op == Op::Update) continue;
      for (int x : n.inputs) {
        ++readers[static_cast<size_t>(x)];
        last[static_cast<size_t>(x)] = std::max(last[static_cast<size_t>(x)], n.id);
        if (n.op == Op::SliceGrad) ++stack_slots[static_cast<size_t>(x)];
      }
    }
    std::vector<bool> elsewhere(n_, false);
    for (const prog::Group& grp : p_.groups) {
      if (grp.bucket < 0 || grp.op != Op::AllReduce) continue;  // a scatter packs its members' pieces
      for (int m : grp.members) {
        const Node& src = g_[g_[m].inputs[0]];
        if (readers[static_cast<size_t>(src.id)] == 1 && src.id >= g_.forward_end && computed(src) &&
            elements(p_[src.id]) == elements(p_[m])) {
          s.storage[static_cast<size_t>(src.id)] = {Storage::Group, grp.id, offset_.at(m)};
          elsewhere[static_cast<size_t>(src.id)] = true;
        }
      }
    }
    const std::vector<bool> keep = kept();
    for (const Node& st : g_.nodes) {
      if (st.op != Op::SliceGrad || st.names.empty() || st.shape.find(st.names[0]) != 0) continue;
      const Node& local = p_[st.id];
      const int64_t per = elements(local) / std::max<int64_t>(local.shape.dims[0].size, 1);
      for (size_t k = 0; k < st.inputs.size(); ++k) {
        const int x = st.inputs[k];
        const size_t xi = static_cast<size_t>(x);
        // Not when something reads the copy after the stack is made: the
        // stack may be all-reduced in place by then (its bucket).
        if (x < g_.forward_end || keep[xi] || elsewhere[xi] || stack_slots[xi] != 1 || !(computed(g_[x]) || scattered(x)) ||
            g_[x].dtype != st.dtype || elements(p_[x]) != per || last[xi] > st.id)
          continue;
        s.storage[xi] = {Storage::Alias, st.id, (st.index + static_cast<int64_t>(k)) * per};
        elsewhere[xi] = true;
      }
    }
    // A dense gradient an embedding gradient adds its rows into (the
    // scatter-into pass), a value a contraction adds its product into (the
    // accumulate-into-contraction pass): computed into that node's storage,
    // in place. Where it cannot be, the kernel copies it there first.
    for (const Node& e : g_.nodes) {
      const int x = ir::accumulationBase(e);
      if (x < 0 || s.storage[static_cast<size_t>(e.id)].kind == Storage::None) continue;
      const size_t xi = static_cast<size_t>(x);
      if (x < g_.forward_end || keep[xi] || elsewhere[xi] || readers[xi] != 1 || !computed(g_[x]) ||
          s.storage[xi].kind != Storage::Slot || elements(p_[x]) != elements(p_[e.id]) || g_[x].dtype != e.dtype)
        continue;
      s.storage[xi] = {Storage::Alias, e.id, 0};
      elsewhere[xi] = true;
    }
    std::map<int, int> paths;  // gradient node → parameters it is the gradient of
    for (const auto& [path, id] : g_.grads) ++paths[id];
    for (const auto& [id, count] : paths) {
      const Node& n = g_[id];
      if (count == 1 && id >= g_.forward_end && (computed(n) || scattered(id)) && !elsewhere[static_cast<size_t>(id)] &&
          s.storage[static_cast<size_t>(id)].kind == Storage::Slot)
        s.storage[static_cast<size_t>(id)] = {Storage::Output, -1, 0};
    }
  }

  // What the caller reads after a run: the loss, the metrics, the outputs, the gradients.
  std::vector<bool> kept() const {
    std::vector<bool> keep(n_, false);
    if (g_.loss >= 0) keep[static_cast<size_t>(g_.loss)] = true;
    for (const auto& [name, id] : g_.metrics) keep[static_cast<size_t>(id)] = true;
    for (int id : g_.outputs) keep[static_cast<size_t>(id)] = true;
    for (const auto& [path, id] : g_.grads) keep[static_cast<size_t>(id)] = true;
    return keep;
  }

  // An all-to-all's block: its input with the dim it gives up and the dim
  // it takes each at their largest piece.
  int64_t exchangeBlock(const Node& n) const {
    const int64_t ranks = axisSize(n.name);
    const Shape& in = p_[n.inputs[0]].shape;
    const Shape& out = p_[n.id].shape;
    int64_t block = 1;
    for (size_t d = 0; d < in.dims.size(); ++d) {
      const std::string& name = in.dims[d].name;
      if (name == n.names.at(0)) block *= layout::pieceSize(out.dims[static_cast<size_t>(out.find(name))].size, ranks, 0);
      else if (name == n.names.at(1)) block *= layout::pieceSize(in.dims[d].size, ranks, 0);
      else block *= in.dims[d].size;
    }
    return block;
  }

  int64_t axisSize(const std::string& axis) const {
    for (const layout::MeshAxis& a : p_.mesh)
      if (a.name == axis) return std::max<int64_t>(a.size, 1);
    return 1;
  }

  const ir::Graph& g_;
  prog::Program& p_;
  const PlanOptions o_;
  const size_t n_;
  std::vector<int> group_of_;
  std::map<int, int64_t> offset_;  // bucket member → its offset in the flat buffer
};

// Where a rank's block of node `id` starts in the flat global tensor, when
// only its leading dim is split (the block is contiguous; dropoutBlock
// handles the others).
int64_t globalOffset(const Shape& global, const prog::Program& p, int id) {
  if (global.dims.empty()) return 0;
  int64_t inner = 1;
  for (size_t d = 1; d < global.dims.size(); ++d) inner *= global.dims[d].size;
  return layout::localOffset(global, global.dims[0].name, p.placement[static_cast<size_t>(id)], p.mesh, p.coords) * inner;
}

// Where a dropout's block lies in the global tensor: the flat offset when
// only its leading dim is split (its block is one run), else every dim's
// start and size (its rows are runs).
void dropoutBlock(const ir::Graph& g, const prog::Program& p, ir::Node& n) {
  const Shape& global = g[n.id].shape;
  const Shape& local = n.shape;
  bool inner_split = false;
  for (size_t d = 1; d < global.dims.size(); ++d) inner_split |= local.dims[d].size != global.dims[d].size;
  if (!inner_split) {
    n.offset = globalOffset(global, p, n.id);
    return;
  }
  n.block.clear();
  for (const Dim& d : global.dims) {
    n.block.push_back(layout::localOffset(global, d.name, p.placement[static_cast<size_t>(n.id)], p.mesh, p.coords));
    n.block.push_back(d.size);
  }
}

// The window of a table or of the classes an op holds on this rank: the
// first row (class) in `offset`, the whole dim in `index` (left 0 when the
// rank holds all of it).
void windowOf(const ir::Graph& g, const prog::Program& p, ir::Node& n) {
  int holder = -1;  // the value whose dim is windowed
  std::string dim;
  switch (n.op) {
    case Op::Embed: holder = n.inputs[0], dim = g[holder].shape.dims.at(0).name; break;
    case Op::EmbedGrad: holder = n.id, dim = n.shape.dims.at(0).name; break;
    case Op::PickClass: holder = n.inputs[0], dim = n.names.at(0); break;
    case Op::PickClassGrad: holder = n.id, dim = n.names.at(0); break;
    default: return;
  }
  const Shape& global = g[holder].shape;
  const Shape local = layout::localShape(global, p.placement[static_cast<size_t>(holder)], p.mesh, p.coords);
  const int k = global.find(dim);
  if (k < 0 || local.dims[static_cast<size_t>(k)].size == global.dims[static_cast<size_t>(k)].size) return;
  n.offset = layout::localOffset(global, dim, p.placement[static_cast<size_t>(holder)], p.mesh, p.coords);
  n.index = global.dims[static_cast<size_t>(k)].size;
}

}  // namespace

prog::Program planProgram(const ir::Graph& g, const layout::Layout& layout, const std::vector<int64_t>& coords,
                          const PlanOptions& options) {
  prog::Program p;
  p.mesh = layout.mesh;
  p.coords = coords;
  p.coords.resize(p.mesh.size(), 0);
  p.nodes = g.nodes;
  p.placement = layout.of;
  p.placement.resize(g.nodes.size(), std::vector<layout::Placement>(p.mesh.size()));
  for (ir::Node& n : p.nodes) {
    n.shape = layout::localShape(n.shape, p.placement[static_cast<size_t>(n.id)], p.mesh, p.coords);
    for (ir::Result& r : n.results)  // split on the same names as the node (the layout pass)
      r.shape = layout::localShape(r.shape, p.placement[static_cast<size_t>(n.id)], p.mesh, p.coords);
  }
  for (ir::Node& n : p.nodes) {
    if (n.op == ir::Op::Dropout || n.op == ir::Op::DropoutGrad) dropoutBlock(g, p, n);
    windowOf(g, p, n);
    if (n.op != ir::Op::LocalSlice) continue;
    // Where this rank's slice starts within its input's local block.
    const int in = n.inputs[0];
    const Shape& global = g[in].shape;
    n.index = layout::localOffset(global, n.names[0], p.placement[static_cast<size_t>(n.id)], p.mesh, p.coords) -
              layout::localOffset(global, n.names[0], p.placement[static_cast<size_t>(in)], p.mesh, p.coords);
  }
  p.loss = g.loss;
  p.forward_end = g.forward_end;
  p.metrics = g.metrics;
  p.outputs = g.outputs;
  p.grads = g.grads;
  p.buckets = g.buckets;
  Planner(g, p, options).run();
  return p;
}

prog::Program planProgram(const ir::Graph& g) { return planProgram(g, layout::Layout{}, {}); }

}  // namespace dtl::program
