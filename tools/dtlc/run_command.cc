// `dtlc run`: the composition root of training. Turns the checked spec and
// its training graph into the runtime's TrainConfig (parameters with their
// initialisers, data fields with everything the loader needs, optimiser,
// schedule, periods) and calls rt::train.
#include "tools/dtlc/run_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "compiler/driver/frontend.h"
#include "compiler/program/plan_program.h"
#include "compiler/sema/print_sema.h"
#include "core/cpus.h"
#include "core/graph.h"
#include "core/hash.h"
#include "runtime/comm/communicator.h"
#include "runtime/data/probe.h"
#include "runtime/exec/fault_hook.h"
#include "runtime/exec/trainer.h"
#include "runtime/io/dir_lock.h"
#include "runtime/launch/bind_address.h"
#include "runtime/launch/launcher.h"
#include "runtime/launch/rendezvous.h"
#include "tools/dtlc/compile_spec.h"
#include "tools/dtlc/flags.h"
#include "tools/dtlc/kernel_emitter.h"
#include "tools/dtlc/memory_check.h"
#include "tools/dtlc/run_flags.h"
#include "tools/dtlc/run_folder.h"
#include "tools/dtlc/verify.h"

namespace dtl::cli {

const char* const kRunHelp =
    "usage: dtlc run SPEC [options]\n"
    "\n"
    "Checks SPEC, derives its training graph (forward, backward, optimiser)\n"
    "and trains it on this process. Rank 0 shows a progress line on a\n"
    "terminal and plain log lines every `log every` steps otherwise.\n"
    "\n"
    "options:\n"
    "  --steps N            stop after N optimiser steps (overrides epochs/steps)\n"
    "  --set KEY=VALUE      override a setting, as for `dtlc check` (repeatable)\n"
    "  --init FILE          load parameters by path from a safetensors file\n"
    "  --out DIR            the run folder: checkpoints, metrics.jsonl, spec.dtl,\n"
    "                       plan.txt, plan.json (default: the spec's checkpoint\n"
    "                       folder, else runs/<spec name>, in the working folder)\n"
    "  --resume DIR         continue the run in DIR from its newest checkpoint that\n"
    "                       verifies (or DIR/step-N: that checkpoint)\n"
    "  --metrics FILE       also write the metrics (one JSON line per optimiser step\n"
    "                       and evaluation) to FILE\n"
    "  --kernels jit|fast|reference\n"
    "                       the kernels to run: jit (default where dtlc was built\n"
    "                       with LLVM 16): the fused regions as x86 kernels\n"
    "                       compiled at start (cached in $XDG_CACHE_HOME/dtl),\n"
    "                       the rest fast; fast: every node its hand-written\n"
    "                       kernel (the default without LLVM 16); reference:\n"
    "                       the plain kernels (slow; for checking numerics)\n"
    "  --nproc N            ranks to start on this machine (data parallel: each\n"
    "                       reads its slice of every global batch)\n"
    "  --nnodes K           machines in the job (with --node-rank and --master;\n"
    "                       every node needs the same DTL_JOB_TOKEN exported)\n"
    "  --node-rank R        this machine's number, 0 to K-1 (node 0 hosts the store)\n"
    "  --master HOST:PORT   where node 0's store listens (default 127.0.0.1, a free port)\n"
    "  --iface NAME         the network interface Gloo binds (default: the one that\n"
    "                       routes to the master; also DTL_SOCKET_IFNAME)\n"
    "  --backend auto|shm|gloo\n"
    "                       collectives: shared memory when every rank is on this\n"
    "                       machine (groups up to 255 ranks), Gloo over TCP\n"
    "                       otherwise (auto, the default)\n"
    "  --max-restarts N     start every rank again up to N times after a failure\n"
    "                       (one node; ranks resume from the checkpoint folder)\n"
    "  --join-timeout S     seconds a rank waits for the others to join (default 300)\n"
    "  --collective-timeout S\n"
    "                       seconds a collective waits for the other ranks before\n"
    "                       the job stops, naming the collective and the ranks\n"
    "                       that did not arrive (default 300)\n"
    "  --term-timeout S     after SIGTERM or a first SIGINT, seconds the ranks have\n"
    "                       to finish the step, save a checkpoint and exit before\n"
    "                       they are killed (default 30)\n"
    "  --ignore-memory-check\n"
    "                       start even when the plan's memory per rank × the ranks\n"
    "                       on this machine exceeds the memory it has available\n"
    "  --no-checkpoints     write no checkpoints (the run folder still gets the\n"
    "                       metrics, spec and plan)\n"
    "  --memory-report FILE after the first step, write the bytes rank 0 holds for\n"
    "                       parameters, gradients, optimizer state and the\n"
    "                       executor's buffers (JSON; compare with dtlc plan)\n"
    "  --verify K           check the layout before a long job: train K steps as\n"
    "                       this command would and on one process at the same\n"
    "                       global batch from the same weights, and compare the\n"
    "                       losses step by step (exit 1 when they differ)\n"
    "  --verify-tolerance X the largest relative loss difference --verify accepts\n"
    "                       (default 1e-5)\n"
    "  -h, --help           this help\n"
    "\n"
    "exit status: 0 trained, 1 an error in the spec or during training, 2 usage error\n";

namespace {

// "normal(std = 0.02, mean = 0)" → kind and arguments.
void parseInit(const std::string& text, rt::ParamSpec& p) {
  size_t open = text.find('(');
  p.init = text.substr(0, open);
  if (open == std::string::npos) return;
  std::string rest = text.substr(open + 1);
  size_t pos = 0;
  while (pos < rest.size()) {
    size_t eq = rest.find('=', pos), comma = rest.find(',', pos);
    if (eq == std::string::npos) break;
    std::string key = rest.substr(pos, eq - pos);
    key.erase(0, key.find_first_not_of(' '));
    key.erase(key.find_last_not_of(' ') + 1);
    p.init_args[key] = std::strtod(rest.c_str() + eq + 1, nullptr);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
}

// The values an integer input may take: the classes of the cross_entropy or
// the rows of the embedding table that consume it (for synthetic data).
int64_t intRange(const ir::Graph& g, const std::string& input) {
  std::set<int> ids;  // the input, and its local slices (an input sharded by a rule on another dim)
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Input && n.name == input) ids.insert(n.id);
    if (n.op == ir::Op::LocalSlice && ids.count(n.inputs[0])) ids.insert(n.id);
  }
  for (const ir::Node& n : g.nodes) {
    if (n.inputs.size() < 2 || !ids.count(n.inputs[1])) continue;
    if (n.op == ir::Op::CrossEntropy || n.op == ir::Op::PickClass) {
      const Shape& s = g.nodes[n.inputs[0]].shape;
      int k = s.find(n.names[0]);
      if (k >= 0) return s.dims[k].size;
    }
    if (n.op == ir::Op::Embed) return g.nodes[n.inputs[0]].shape.dims[0].size;
  }
  return 0;
}

std::vector<rt::data::FieldSpec> fields(const sema::Spec& spec, const std::string& split, const ir::Graph& g) {
  std::vector<rt::data::FieldSpec> out;
  for (const sema::DataSplit& s : spec.data.splits) {
    if (s.name != split) continue;
    for (const sema::DataField& f : s.fields) {
      rt::data::FieldSpec d;
      d.name = f.name;
      d.source = f.source;
      d.path = f.path;
      d.csv.columns = f.csv_columns;
      d.csv.header = f.csv_header;
      d.csv.skip = f.csv_skip;
      d.csv.delimiter = f.csv_delimiter;
      d.key = f.key;
      d.seq = f.seq;
      d.token_dtype = f.token_dtype;
      if (f.source == "text" || f.source == "tokens") d.field_of_multi = f.name;
      for (const auto& [op, v] : f.transforms) d.transforms.push_back({op, v});
      d.seed = static_cast<uint64_t>(f.seed);
      for (const sema::InputInfo& in : spec.model.inputs) {
        if (in.name != f.name) continue;
        for (size_t k = 1; k < in.shape.dims.size(); ++k) d.sample_dims.push_back(in.shape.dims[k].size);
        d.integer = isInteger(in.dtype);
      }
      if (d.integer) d.int_range = intRange(g, f.name);
      out.push_back(std::move(d));
    }
  }
  return out;
}

// Which samples of each global batch this rank reads: its slice of the
// inputs' leading (sample) dim, as its program holds it.
void sampleSlice(const ir::Graph& g, const prog::Program& p, rt::TrainConfig& c) {
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::Input || n.shape.dims.empty()) continue;
    const Dim& global = n.shape.dims[0];
    const int64_t local = std::max<int64_t>(p[n.id].shape.dims[0].size, 1);
    const int64_t offset = layout::localOffset(n.shape, global.name, p.placement[static_cast<size_t>(n.id)], p.mesh, p.coords);
    c.world = static_cast<int>(global.size / local);
    c.rank = static_cast<int>(offset / local);
    return;
  }
}

rt::Period period(const sema::Every& e) { return rt::Period{e.present ? e.count : 0, e.unit == "epochs"}; }

// Positions per sample of the token ids an embedding reads (a [batch, seq]
// input gives seq), for tokens/s; 0 when no input is read by an Embed.
int64_t tokensPerSample(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::Embed || n.inputs.size() < 2) continue;
    const ir::Node& ids = g.nodes[static_cast<size_t>(n.inputs[1])];
    if (ids.op != ir::Op::Input || ids.shape.dims.size() < 2) continue;
    int64_t per = 1;
    for (size_t k = 1; k < ids.shape.dims.size(); ++k) per *= ids.shape.dims[k].size;
    return per;
  }
  return 0;
}

}  // namespace

rt::optim::OptimizerConfig optimizerConfig(const sema::TrainSpec& t) {
  auto arg = [&](const char* k, double d) {
    auto it = t.optimizer_args.find(k);
    return it == t.optimizer_args.end() ? d : it->second;
  };
  rt::optim::OptimizerConfig o;
  o.name = t.optimizer;
  o.lr = arg("lr", 1e-3);
  o.momentum = arg("momentum", 0);
  o.dampening = arg("dampening", 0);
  o.weight_decay = arg("weight_decay", 0);
  o.beta1 = arg("beta1", 0.9);
  o.beta2 = arg("beta2", 0.999);
  o.eps = arg("eps", 1e-8);
  o.nesterov = arg("nesterov", 0) != 0;
  return o;
}

namespace {

rt::TrainConfig makeConfig(const driver::Frontend& fe, const RunFlags& f) {
  const sema::Spec& spec = fe.spec();
  rt::TrainConfig c;
  c.model = spec.model.name;
  for (const sema::ParamInfo& p : spec.model.params) {
    rt::ParamSpec ps;
    ps.path = p.path;
    ps.shape = p.shape;
    parseInit(p.init, ps);
    for (const Dim& d : p.shape.dims) {
      bool stacked = false;
      for (const std::string& r : spec.model.repeat_dims) stacked |= r == d.name;
      if (!stacked) break;
      ++ps.stack_dims;
    }
    c.params.push_back(std::move(ps));
  }
  c.train_fields = fields(spec, "train", fe.graph());
  c.eval_fields = fields(spec, "eval", fe.graph());
  c.shuffle = spec.data.shuffle;
  const sema::TrainSpec& t = spec.train;
  c.batch = t.batch;
  c.accumulate = t.accumulate;
  c.epochs = t.steps ? 0 : t.epochs.value_or(1);
  c.steps = t.steps.value_or(0);
  if (f.steps > 0) {
    c.steps = f.steps;
    c.epochs = 0;
  }
  c.optimizer = optimizerConfig(t);
  c.schedule.name = t.schedule;
  c.schedule.warmup = t.schedule_args.count("warmup") ? t.schedule_args.at("warmup") : 0;
  c.schedule.min_lr = t.schedule_args.count("min_lr") ? t.schedule_args.at("min_lr") : 0;
  c.clip = t.clip.value_or(0);
  c.on_nonfinite = t.on_nonfinite;
  c.replica_check = t.replica_check;
  c.zero = static_cast<int>(spec.parallel.zero);
  c.seed = static_cast<uint64_t>(t.seed);
  c.log_every = period(t.log_every);
  c.eval_every = period(t.eval_every);
  c.checkpoint_every = period(t.checkpoint_every);
  const RunFolder folder = resolveRunFolder(f, t.checkpoint_dir);
  c.run_dir = folder.dir;
  if (!f.no_checkpoints) c.checkpoint_dir = folder.dir;
  c.checkpoint_keep = t.checkpoint_keep;
  c.init_file = f.init;
  c.resume_dir = folder.resume_dir;
  c.resume_checkpoint = folder.resume_checkpoint;
  c.tokens_per_sample = tokensPerSample(fe.graph());
  c.metrics_file = f.metrics;
  c.memory_report = f.memory_report;
  c.reference_kernels = kernelsOrDefault(f.kernels) == "reference";
  c.threads = usableCpus();
  return c;
}

}  // namespace

bool dtlcExecutable(std::string& exe, std::string& what) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  exe = n > 0 ? std::string(self, static_cast<size_t>(n)) : "";
  if (exe.size() >= 4 && exe.compare(exe.size() - 4, 4, "dtlc") == 0) return true;
  what = exe.empty() ? "unknown" : exe;
  return false;
}

namespace {

// `--nproc N`: start N copies of this command as ranks and supervise them.
int launchRanks(const std::vector<std::string>& args, const RunFlags& f, std::string& err) {
  rt::launch::LaunchOptions o;
  // Each rank re-runs this binary: it must be dtlc (an embedding program,
  // such as a test, would start copies of itself).
  std::string exe, what;
  if (!dtlcExecutable(exe, what)) {
    err += "dtlc run: --nproc starts ranks of the dtlc binary; this process is " + what + "\n";
    return 2;
  }
  o.argv.push_back(exe);
  for (const std::string& a : args) o.argv.push_back(a);
  o.argv.push_back("--as-rank");
  o.nproc = static_cast<int>(f.nproc);
  o.nnodes = static_cast<int>(f.nnodes);
  o.node_rank = static_cast<int>(f.node_rank);
  o.master = f.master;
  o.iface = f.iface;
  o.backend = f.backend;
  o.max_restarts = static_cast<int>(f.max_restarts);
  o.join_timeout = std::chrono::seconds(f.join_timeout);
  o.term_timeout = std::chrono::seconds(f.term_timeout);
  std::string launch_err;
  int rc = rt::launch::launch(o, launch_err);
  if (rc != 0) err += "dtlc run: " + launch_err + (launch_err.empty() || launch_err.back() == '\n' ? "" : "\n");
  return rc;
}

// What every rank must have compiled alike: the laid-out graph, the spec's
// model/mesh/train summary, and what the loader and the optimiser step read
// beyond it. A data file is named by its file name: ranks on different
// machines may mount it at other paths.
std::string programText(const driver::Frontend& fe, const rt::TrainConfig& c) {
  sema::Spec spec = fe.spec();
  spec.file.clear();
  std::string text = ir::printGraph(fe.graph(), true) + sema::summaryJson(spec);
  for (const auto* split : {&c.train_fields, &c.eval_fields}) {
    text += split == &c.train_fields ? "train:" : "eval:";
    for (const rt::data::FieldSpec& d : *split) {
      text += " " + d.name + "=" + d.source + "(" + d.path.substr(d.path.find_last_of('/') + 1) + ", " + d.key +
              ", seq " + std::to_string(d.seq) + ", seed " + std::to_string(d.seed) + ")";
      for (const rt::data::Transform& t : d.transforms) text += " " + std::string(1, t.op) + " " + std::to_string(t.value);
    }
    text += "\n";
  }
  text += "shuffle " + std::to_string(c.shuffle) + ", clip " + std::to_string(c.clip) + ", lr " +
          std::to_string(c.optimizer.lr) + ", schedule " + c.schedule.name + ", on_nonfinite " + c.on_nonfinite +
          ", replica_check " + std::to_string(c.replica_check) + "\n";
  return text;
}

// A rank joins the job: the store, the same program on every rank (checked
// by fingerprint), then one communicator per mesh axis — shared memory when
// every rank is on this machine, Gloo over TCP otherwise.
bool joinRanks(const driver::Frontend& fe, const rt::launch::RankEnv& env, const RunFlags& f, rt::TrainConfig& config,
               std::shared_ptr<rt::comm::Store>& store, std::vector<std::unique_ptr<rt::comm::Communicator>>& comms,
               std::string& failure) {
  std::chrono::milliseconds timeout = env.join_timeout;
  rt::comm::Status s = rt::launch::joinJob(env, timeout, store);
  if (!s.ok) {
    failure = s.message;
    return false;
  }
  // The kernels too: a node whose dtlc lacks the generator would run fast
  // beside the others' jit (other update kernels, replicas drifting apart).
  const std::string program = programText(fe, config) + "kernels " + kernelsOrDefault(f.kernels) + "\n";
  s = rt::launch::checkFingerprints(*store, env, hex64(fnv1a(program)), timeout);
  if (!s.ok) {
    failure = s.message;
    return false;
  }
  std::string host;  // Gloo's pairs bind the address the other nodes reach this one at
  const sema::ParallelSpec& par = fe.spec().parallel;
  config.global_rank = env.rank;
  config.mesh.clear();
  for (const sema::MeshAxisSpec& axis : par.mesh) config.mesh.push_back(axis.size);
  int64_t stride = 1;
  for (size_t a = par.mesh.size(); a-- > 0;) {
    const sema::MeshAxisSpec& axis = par.mesh[a];
    // Rank r's coordinate on this axis, and the ranks sharing the others.
    int64_t coord = (env.rank / stride) % axis.size;
    int64_t group = env.rank - coord * stride;
    rt::comm::GroupOptions g;
    g.store = store;
    g.prefix = axis.name + "/" + std::to_string(group) + "/";
    g.rank = static_cast<int>(coord);
    g.size = static_cast<int>(axis.size);
    g.timeout = std::chrono::seconds(f.collective_timeout);
    g.join_timeout = timeout;
    bool one_machine = env.local_world_size == env.world_size;
    if (f.backend == "shm" && !one_machine) {
      failure = "--backend shm needs every rank on one machine; this job has " + std::to_string(env.world_size) +
                " ranks with " + std::to_string(env.local_world_size) + " on this one";
      return false;
    }
    bool shm = f.backend == "shm" || (f.backend == "auto" && one_machine && axis.size <= rt::comm::kShmMaxGroupSize);
    if (!shm && host.empty() &&
        !rt::launch::chooseBindAddress(env.master_addr, env.iface, env.iface_from, rt::launch::systemNet(), host,
                                       failure))
      return false;
    g.host = host;
    std::unique_ptr<rt::comm::Communicator> c =
        shm ? rt::comm::makeShmCommunicator(g, s) : rt::comm::makeGlooCommunicator(g, s);
    if (!c || !s.ok) {
      failure = "cannot set up the `" + axis.name + "` group: " + s.message;
      return false;
    }
    config.comms[axis.name] = c.get();
    if (env.rank == 0)
      std::fprintf(stdout, "rank 0 of %d: `%s` group of %lld ranks over %s%s\n", env.world_size, axis.name.c_str(),
                   static_cast<long long>(axis.size), c->backend(), shm ? "" : (" from " + host).c_str());
    comms.push_back(std::move(c));
    stride *= axis.size;
  }
  // Ranks sharing this machine's cores divide them; a rank bound to its own
  // cores (srun --cpu-bind, taskset per rank) has them to itself.
  const int cpus = usableCpus();
  const bool whole_machine = cpus >= static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  config.threads = whole_machine ? std::max(1, cpus / std::max(1, env.local_world_size)) : cpus;
  rt::comm::Store* raw = store.get();
  int rank = env.rank;
  config.on_step = [raw, rank, first = true](int64_t step) mutable {
    rt::launch::reportStep(*raw, rank, step, first);
    first = false;
  };
  config.confirm_params = [raw, env](const std::string& hash, std::string& why) {
    rt::comm::Status st = rt::launch::checkAgreement(*raw, env, rt::launch::kSameParameters, hash, env.join_timeout);
    if (!st.ok) why = st.message;
    return st.ok;
  };
  // Global rank 0 writes checkpoints (writer_ranks.h): the others wait for it
  // here, up to the join timeout, rather than in the next step's collectives;
  // after loading parameters (step 0) every rank gets the join timeout.
  config.meet = [raw, env, collective = std::chrono::milliseconds(std::chrono::seconds(f.collective_timeout))](
                    int64_t step, std::string& why) {
    const std::string key = step > 0 ? "checkpoint/" + std::to_string(step) : "loaded";
    const std::string point = step > 0 ? "the end of the checkpoint at step " + std::to_string(step)
                                       : "the end of loading the parameters and compiling the kernels";
    rt::comm::Status st = rt::launch::meetRanks(*raw, env, key, point, step > 0 ? 0 : -1, collective, env.join_timeout);
    if (!st.ok) why = st.message;
    return st.ok;
  };
  // Each rank's peak memory, for rank 0's summary (keys per restart: a
  // restarted job's ranks start afresh).
  config.peak_memory = [raw, env](int64_t own) {
    const std::string prefix = "peak/" + std::to_string(env.restart_count) + "/";
    const std::string text = std::to_string(own);
    std::vector<int64_t> all;
    if (!raw->set(prefix + std::to_string(env.rank), std::vector<uint8_t>(text.begin(), text.end())).ok || env.rank != 0)
      return all;
    // One deadline for all: ranks that died at the end must not hold rank 0 10 s each.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (int r = 0; r < env.world_size; ++r) {
      std::vector<uint8_t> v;
      const auto left = std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                   deadline - std::chrono::steady_clock::now()));
      const bool got = raw->get(prefix + std::to_string(r), v, left).ok;
      all.push_back(got ? std::strtoll(std::string(v.begin(), v.end()).c_str(), nullptr, 10) : -1);
    }
    return all;
  };
  // Rank 0 picks the checkpoint to resume from (the newest that verifies);
  // the others take its pick, so every rank continues from the same one.
  config.agree_on_checkpoint = [raw, env](std::string& name, std::string& why) {
    const std::string key = "resume/checkpoint";
    rt::comm::Status st;
    std::vector<uint8_t> v(name.begin(), name.end());
    if (env.rank == 0) {
      st = raw->set(key, v);
    } else {
      st = raw->get(key, v, env.join_timeout);
      name.assign(v.begin(), v.end());
    }
    if (!st.ok) why = "agreeing with rank 0 on the checkpoint to resume from: " + st.message;
    return st.ok;
  };
  return true;
}

// The process that owns the run folder (the launcher of node 0, the one
// process, or global rank 0 of ranks started by another launcher) refuses a
// folder already holding a run, then writes the spec and plan into it.
int prepareRunFolder(const driver::Frontend& fe, const RunFlags& f, std::string& err) {
  const RunFolder folder = resolveRunFolder(f, fe.spec().train.checkpoint_dir);
  const std::string resumed = folder.resume_dir + (folder.resume_checkpoint.empty() ? "" : "/" + folder.resume_checkpoint);
  struct stat st{};
  if (!folder.resume_dir.empty() && (::stat(resumed.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
    err += "dtlc run: --resume " + f.resume + ": no such folder\n";
    return 1;
  }
  // A job writing into the folder holds its lock: refuse before touching its spec and plan.
  {
    rt::io::DirLock probe;  // released at once: the trainer takes it for the run
    rt::io::Status held = probe.acquire(folder.dir);
    if (!held.ok) {
      err += "dtlc run: checkpoint folder " + held.message + "\n";
      return 1;
    }
  }
  if (std::string no = refuseTakenFolder(folder); !no.empty()) {
    err += "dtlc run: " + no + "\n";
    return 2;
  }
  if (std::string bad = writeRunFiles(folder, fe, f.sets, f.kernels); !bad.empty()) {
    err += "dtlc run: run folder " + folder.dir + ": " + bad + "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int runCommand(const std::vector<std::string>& args, std::string& out, std::string& err) {
  RunFlags f;
  std::string bad = parseRun(args, f);
  if (f.help) {
    out += kRunHelp;
    return 0;
  }
  if (!bad.empty()) {
    err += "dtlc run: " + bad + "\n";
    return 2;
  }
  if (f.spec.empty()) {
    err += "dtlc run: no SPEC given\nusage: dtlc run SPEC [--steps N] [--set KEY=VALUE]… [--metrics FILE]\n";
    return 2;
  }
  if (f.verify > 0 && !f.as_rank) return verifyCommand(f, out, err);
  if (f.verify_tolerance_given && f.verify == 0) {
    err += "dtlc run: --verify-tolerance is the tolerance of --verify K; give --verify too\n";
    return 2;
  }
  // --max-restarts needs someone to restart the process: the launcher, even for one rank.
  if ((f.nproc > 1 || f.nnodes > 1 || f.max_restarts > 0) && !f.as_rank) {
    driver::Frontend fe;
    if (int rc = compileForRun(fe, f.spec, f.sets, f.nproc * f.nnodes, err); rc != 0) return rc;
    if (!f.ignore_memory)
      if (int rc = checkRunMemory(fe, f.nproc, f.kernels, err); rc != 0) return rc;
    if (f.node_rank == 0)
      if (int rc = prepareRunFolder(fe, f, err); rc != 0) return rc;
    return launchRanks(args, f, err);
  }
  rt::launch::RankEnv env;
  bool ranked = f.as_rank || rt::launch::rankEnvPresent([](const char* n) { return std::getenv(n); });
  if (ranked) {
    std::string env_err;
    if (!rt::launch::rankEnvFromEnvironment(env, env_err)) {
      err += "dtlc run: " + env_err + "\n";
      return 2;
    }
    // A rank started by hand (torchrun's variables, mpirun, Slurm) takes the flag too.
    if (f.join_timeout_given && !f.as_rank) env.join_timeout = std::chrono::seconds(f.join_timeout);
  }
  // This process checks the spec (probing its data files), then loads them:
  // what a probe inflates is kept for the loader (probe.h), until the run
  // returns (tests run several commands in one process).
  rt::data::KeepInflatedData keep_inflated;
  driver::Frontend fe;
  const int64_t world = ranked ? env.world_size : 1;
  if (int rc = compileForRun(fe, f.spec, f.sets, world, err); rc != 0) return rc;
  // A rank the launcher started was checked there, once for the machine.
  if (!f.as_rank && !f.ignore_memory)
    if (int rc = checkRunMemory(fe, ranked ? env.local_world_size : 1, f.kernels, err); rc != 0) return rc;
  if (!f.as_rank && (!ranked || env.rank == 0))
    if (int rc = prepareRunFolder(fe, f, err); rc != 0) return rc;
  rt::TrainConfig config = makeConfig(fe, f);
  // A rank the launcher started again after a failure continues from the
  // latest checkpoint this job wrote (not an older run's), else as it began.
  struct stat index{};
  if (ranked && env.restart_count > 0 && !config.checkpoint_dir.empty() &&
      ::stat((config.checkpoint_dir + "/index.json").c_str(), &index) == 0 && index.st_mtime >= env.job_started) {
    config.resume_dir = config.checkpoint_dir;
    config.resume_checkpoint.clear();  // this job's newest, not the step-N the job was started from
    if (env.rank == 0)
      std::fprintf(stdout, "restart %lld: resuming from %s\n", static_cast<long long>(env.restart_count),
                   config.checkpoint_dir.c_str());
  }
  std::shared_ptr<rt::comm::Store> store;
  std::vector<std::unique_ptr<rt::comm::Communicator>> comms;
  if (world > 1) {
    std::string failure;
    if (!joinRanks(fe, env, f, config, store, comms, failure)) {
      err += "dtlc run: [rank " + std::to_string(env.rank) + "] " + failure + "\n";
      return 1;
    }
  }
  rt::FaultHook faults;  // tests' injected failures (fault_hook.h)
  if (std::string why; !rt::FaultHook::fromEnvironment(env.rank, env.restart_count, faults, why)) {
    err += "dtlc run: " + why + "\n";
    return 2;
  }
  config.faults = faults.faults();
  config.restart = env.restart_count;
  if (faults.any())
    config.on_step = [report = config.on_step, faults](int64_t step) {
      if (report) report(step);
      faults.afterStep(step);
    };
  // This rank's program: the laid-out graph at its mesh coordinates.
  const program::PlanOptions plan = planOptionsFor(f.kernels);
  const prog::Program program =
      program::planProgram(fe.graph(), fe.layout(), layout::meshCoords(fe.layout().mesh, ranked ? env.rank : 0), plan);
  config.program = &program;
  JitRunners jit;
  if (plan.fuse) {
    std::string note;
    if (int rc = makeRegionRunner(program, config.optimizer, config.threads, jit, note, err); rc != 0) return rc;
    if (env.rank == 0) std::fprintf(stdout, "%s\n", note.c_str());
    config.regions = jit.regions.get();
    config.multi_update = jit.update.get();
  }
  sampleSlice(fe.graph(), program, config);
  std::string train_err;
  int rc = rt::train(config, train_err, isatty(1) != 0 && env.rank == 0);
  // A rank that stops with the others says nothing: the rank that saw why says it, once.
  if (rc != 0 && !train_err.empty())
    err += "dtlc run: " + (world > 1 ? "[rank " + std::to_string(env.rank) + "] " : std::string()) + train_err;
  return rc;
}

}  // namespace dtl::cli
