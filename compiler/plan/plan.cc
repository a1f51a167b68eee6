#include "compiler/plan/plan.h"

#include <algorithm>
#include <map>

#include "compiler/sema/print_sema.h"
#include "core/json.h"

namespace dtl::plan {

namespace {


int64_t axisSize(const layout::Layout& l, const std::string& axis) {
  for (const auto& a : l.mesh)
    if (a.name == axis) return a.size;
  return 1;
}

// "the gradient of fc2.weight" / "cross_entropy at spec.dtl:24:12"
std::string describeNode(const ir::Graph& g, int id, const std::map<int, std::string>& grad_of) {
  auto it = grad_of.find(id);
  if (it != grad_of.end()) return "the gradient of " + it->second + " (%" + std::to_string(id) + ")";
  const ir::Node& n = g.nodes[static_cast<size_t>(id)];
  const bool fn = !n.fn.empty() && !ir::isConversion(n.op);  // a conversion's fn is why it was inserted
  return std::string(ir::opName(n.op)) + (fn ? "." + n.fn : "") + " %" + std::to_string(id) +
         (n.where.empty() ? "" : " at " + n.where);
}

// `p`: rank 0's program, for local sizes.
}  // namespace

std::vector<Collective> collectives(const ir::Graph& g, const prog::Program& p, int64_t zero) {
  // What each value is the gradient of: a parameter, or one copy of a
  // stacked one ("blocks.attn.wq[3]": the gathers name their copies).
  std::map<int, std::string> grad_of, update_of;
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::Update) update_of[n.inputs[1]] = n.name;
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const ir::Node& n = g.nodes[k];
    auto whole = update_of.find(n.id);
    if (n.op != ir::Op::SliceGrad || whole == update_of.end()) continue;
    for (size_t i = 0; i < n.inputs.size(); ++i)
      update_of[n.inputs[i]] = whole->second + "[" + std::to_string(n.index + static_cast<int64_t>(i)) + "]";
  }
  for (const ir::Node& n : g.nodes)
    if ((n.op == ir::Op::AllReduce || n.op == ir::Op::ReduceScatter) && update_of.count(n.id))
      grad_of[n.inputs[0]] = update_of[n.id];
  std::vector<Collective> out;
  std::vector<int> single_of;  // per collective of `out`: its node, or -1 for a bucket
  std::vector<bool> in_bucket(g.nodes.size(), false);
  for (const ir::Bucket& b : g.buckets) {
    Collective c;
    const bool scatter = b.op == ir::Op::ReduceScatter;
    c.op = scatter ? "reduce_scatter" : "all_reduce";
    c.axis = b.axis;
    c.dtype = "f32";
    // A reduce-scatter's formula is of the whole it reduces (its input).
    for (int m : b.members) c.bytes += p[scatter ? g.nodes[static_cast<size_t>(m)].inputs[0] : m].shape.elements().value_or(0) * 4;
    c.bucket = b.id;
    c.per_step = !scatter || zero == 1;
    c.start = b.start_after;
    c.after = describeNode(g, b.start_after, grad_of);
    for (int m : b.members) {
      in_bucket[static_cast<size_t>(m)] = true;
      c.tensors.push_back(update_of.count(m) ? update_of[m] : "%" + std::to_string(m));
      c.rule = g.nodes[static_cast<size_t>(m)].where;
      c.why = "parameter gradients are partial sums over `" + b.axis + "`; " + g.nodes[static_cast<size_t>(m)].fn;
    }
    out.push_back(std::move(c));
    single_of.push_back(-1);
  }
  for (const ir::Node& n : g.nodes) {
    if (!ir::isConversion(n.op) || n.op == ir::Op::LocalSlice || in_bucket[static_cast<size_t>(n.id)]) continue;
    Collective c;
    c.op = ir::opName(n.op);
    c.axis = n.name;
    c.dtype = dtypeName(n.dtype);
    // A reduce-scatter's formula is of the whole it reduces (its input).
    const int sized = n.op == ir::Op::ReduceScatter ? n.inputs[0] : n.id;
    c.bytes = p[sized].shape.elements().value_or(0) * dtypeBytes(n.dtype);
    c.max = n.op == ir::Op::AllReduce && !n.names.empty() && n.names[0] == "max";
    c.start = n.inputs[0];
    c.after = describeNode(g, n.inputs[0], grad_of);
    c.rule = n.where;
    c.why = n.fn;
    c.per_step = g.nodes[static_cast<size_t>(n.inputs[0])].op == ir::Op::Update;
    c.tensors.push_back("%" + std::to_string(n.inputs[0]));
    out.push_back(std::move(c));
    single_of.push_back(n.id);
  }
  // Numbered as the program's groups are, which the runtime's errors use.
  const std::vector<int> numbers = prog::collectiveNumbers(p);
  for (Collective& c : out)
    for (const prog::Group& grp : p.groups)
      if (c.bucket >= 0 ? grp.bucket == c.bucket : grp.bucket < 0 && grp.members[0] == single_of[&c - out.data()])
        c.number = numbers[static_cast<size_t>(grp.id)];
  std::stable_sort(out.begin(), out.end(), [](const Collective& a, const Collective& b) { return a.number < b.number; });
  return out;
}

double sent(const Collective& c, int64_t n) {
  if (n <= 1) return 0;
  if (c.max) return static_cast<double>(n - 1) * static_cast<double>(c.bytes);
  double f = c.op == "all_reduce" ? 2.0 * static_cast<double>(n - 1) / static_cast<double>(n)
                                  : static_cast<double>(n - 1) / static_cast<double>(n);
  return f * static_cast<double>(c.bytes);
}

namespace {

std::string meshText(const layout::Layout& l) {
  std::string s;
  for (const auto& a : l.mesh) s += (s.empty() ? "" : ", ") + a.name + " = " + std::to_string(a.size);
  return s;
}

int64_t world(const layout::Layout& l) {
  int64_t w = 1;
  for (const auto& a : l.mesh) w *= a.size;
  return w;
}

}  // namespace

namespace {

// Bytes of a value, saturated: a plan past int64 must still read as too big.
int64_t bytesOf(const Shape& s, int64_t per_element) {
  std::optional<int64_t> n = s.elements();
  int64_t b = 0;
  return n && !__builtin_mul_overflow(*n, per_element, &b) ? b : INT64_MAX;
}

int64_t plus(int64_t a, int64_t b) {
  int64_t s = 0;
  return __builtin_add_overflow(a, b, &s) ? INT64_MAX : s;
}

}  // namespace

Memory memoryPerRank(const prog::Program& p, const sema::Spec& spec) {
  Memory m;
  std::map<std::string, int64_t> params;  // by path: a parameter read twice is held once
  for (const ir::Node& n : p.nodes)
    if (n.op == ir::Op::Param) params[n.name] = bytesOf(n.shape, dtypeBytes(n.dtype));
  for (const auto& [path, bytes] : params) m.parameters = plus(m.parameters, bytes);
  // Gradients and optimiser state are of the pieces the updates work on:
  // the parameters' own, or with ZeRO their flat pieces over dp.
  std::map<std::string, int64_t> pieces;
  for (const ir::Node& n : p.nodes)
    if (n.op == ir::Op::Update) pieces[n.name] = bytesOf(n.shape, dtypeBytes(n.dtype));
  for (const auto& [path, bytes] : pieces) m.gradients = plus(m.gradients, bytes);
  const std::string& opt = spec.train.optimizer;
  int64_t states = opt == "adam" || opt == "adamw" ? 2 : 0;
  if (opt == "sgd") {
    auto it = spec.train.optimizer_args.find("momentum");
    states = it != spec.train.optimizer_args.end() && it->second != 0 ? 1 : 0;
  }
  m.optimizer_state = states == 0 ? 0 : states == 1 ? m.gradients : plus(m.gradients, m.gradients);
  m.peak_activations = p.arenaBytes();
  m.communication = p.groupBytes();
  return m;
}

std::string memoryText(const Memory& m) {
  return "memory per rank\n"
         "  parameters        " + sema::humanBytes(m.parameters) + "\n"
         "  gradients         " + sema::humanBytes(m.gradients) + "\n"
         "  optimizer state   " + sema::humanBytes(m.optimizer_state) + "\n"
         "  peak activations  " + sema::humanBytes(m.peak_activations) + "\n"
         "  comm buffers      " + sema::humanBytes(m.communication) + "\n"
         "  total             " + sema::humanBytes(m.total()) + "\n";
}

std::string planText(const ir::Graph& g, const layout::Layout& l, const prog::Program& p, const sema::Spec& spec) {
  std::vector<Collective> cs = collectives(g, p, spec.parallel.zero);
  int64_t w = world(l);
  std::string out = "plan for " + spec.model.name + " on " + std::to_string(w) + " rank" + (w == 1 ? "" : "s") +
                    " (mesh " + meshText(l) + "), one optimiser step of " +
                    std::to_string(spec.train.accumulate) + " micro-batch" + (spec.train.accumulate == 1 ? "" : "es") +
                    " of " + std::to_string(spec.train.batch) + "\n\ncollectives\n";
  double total = 0, per_micro = 0;
  const int64_t k = std::max<int64_t>(spec.train.accumulate, 1);
  for (const Collective& c : cs) {
    int64_t n = axisSize(l, c.axis);
    total += sent(c, n) * static_cast<double>(c.per_step ? 1 : k);
    if (!c.per_step) per_micro += sent(c, n);
    out += "  #" + std::to_string(c.number) + " " + c.op + (c.max ? " (max)" : "") + " over " + c.axis + ", " + c.dtype + ", " + sema::humanBytes(c.bytes);
    if (c.bucket >= 0) out += ", bucket " + std::to_string(c.bucket) + " (" + std::to_string(c.tensors.size()) + std::string(c.tensors.size() == 1 ? " tensor)" : " tensors)");
    if (k > 1) out += c.per_step ? ", once per step" : ", every micro-batch";
    out += "\n    starts after " + (c.bucket >= 0 && c.per_step && k > 1
                                        ? "the last micro-batch (no_sync: the " + std::to_string(k) + " micro-batches' gradients are summed first)"
                                        : c.after) + "\n";
    if (c.bucket >= 0) {
      std::string t;
      for (const std::string& s : c.tensors) t += (t.empty() ? "" : ", ") + s;
      out += "    tensors: " + t + "\n";
    }
    if (!c.why.empty()) out += "    why: " + c.why + "\n";
    if (!c.rule.empty()) out += "    rule: " + c.rule + "\n";
  }
  if (cs.empty()) out += "  none: every value stays on its rank\n";
  out += "\n" + memoryText(memoryPerRank(p, spec));
  out += "\nbytes sent per rank per step: " + sema::humanBytes(static_cast<int64_t>(total)) +
         " (ring: 2(n−1)/n × bytes per all-reduce)\n";
  if (k > 1) out += "bytes sent per rank per micro-batch: " + sema::humanBytes(static_cast<int64_t>(per_micro)) +
                    ", and once per step: " + sema::humanBytes(static_cast<int64_t>(total - per_micro * static_cast<double>(k))) + "\n";
  return out;
}

std::string planJson(const ir::Graph& g, const layout::Layout& l, const prog::Program& p, const sema::Spec& spec) {
  std::vector<Collective> cs = collectives(g, p, spec.parallel.zero);
  json::Writer w;
  w.beginObject();
  w.key("model").value(spec.model.name);
  w.key("world").value(world(l));
  w.key("mesh").beginObject();
  for (const auto& a : l.mesh) w.key(a.name).value(a.size);
  w.endObject();
  double total = 0;
  w.key("collectives").beginArray();
  const int64_t k = std::max<int64_t>(spec.train.accumulate, 1);
  double per_micro = 0;
  for (const Collective& c : cs) {
    const int64_t times = c.per_step ? 1 : k;  // gradient buckets: once per step (no_sync)
    if (!c.per_step) per_micro += sent(c, axisSize(l, c.axis));
    total += sent(c, axisSize(l, c.axis)) * static_cast<double>(times);
    w.beginObject();
    w.key("number").value(static_cast<int64_t>(c.number));
    w.key("op").value(c.op).key("axis").value(c.axis).key("dtype").value(c.dtype).key("bytes").value(c.bytes);
    w.key("times_per_step").value(times);
    if (c.max) w.key("reduce").value("max");
    w.key("bucket");
    if (c.bucket >= 0) w.value(c.bucket);
    else w.null();
    w.key("tensors").beginArray();
    for (const std::string& t : c.tensors) w.value(t);
    w.endArray();
    w.key("after").value(c.after).key("why").value(c.why).key("rule").value(c.rule);
    w.endObject();
  }
  w.endArray();
  Memory m = memoryPerRank(p, spec);
  w.key("memory").beginObject();
  w.key("parameters").value(m.parameters).key("gradients").value(m.gradients);
  w.key("optimizer_state").value(m.optimizer_state).key("peak_activations").value(m.peak_activations);
  w.key("communication").value(m.communication);
  w.key("total").value(m.total()).endObject();
  w.key("bytes_sent_per_rank").value(static_cast<int64_t>(total));
  w.key("bytes_sent_per_rank_per_micro_batch").value(static_cast<int64_t>(per_micro));
  w.endObject();
  return w.str() + "\n";
}

std::string planDot(const ir::Graph& g, const layout::Layout& l, const prog::Program& p, const sema::Spec& spec) {
  std::vector<Collective> cs = collectives(g, p, spec.parallel.zero);
  std::string out = "digraph plan {\n  rankdir=LR;\n  label=\"" + spec.model.name + " on mesh " + meshText(l) + "\";\n";
  out += "  subgraph cluster_mesh {\n    label=\"ranks\";\n";
  int64_t w = world(l);
  for (int64_t r = 0; r < w; ++r) out += "    r" + std::to_string(r) + " [shape=box,label=\"rank " + std::to_string(r) + "\"];\n";
  out += "  }\n";
  std::string prev = "start";
  out += "  start [shape=circle,label=\"backward\"];\n";
  for (size_t i = 0; i < cs.size(); ++i) {
    const Collective& c = cs[i];
    std::string id = "c" + std::to_string(i);
    out += "  " + id + " [shape=note,label=\"" + c.op + " over " + c.axis + "\\n" + sema::humanBytes(c.bytes) +
           (c.bucket >= 0 ? "\\nbucket " + std::to_string(c.bucket) + ", " + std::to_string(c.tensors.size()) + " tensors" : "") +
           "\"];\n";
    out += "  " + prev + " -> " + id + " [label=\"after " + json::quote(c.after).substr(1, json::quote(c.after).size() - 2) + "\"];\n";
    prev = id;
  }
  out += "  " + prev + " -> update;\n  update [shape=circle,label=\"optimiser\"];\n}\n";
  return out;
}

}  // namespace dtl::plan
