// `dtlc run`: the composition root of training. Turns the checked spec and
// its training graph into the runtime's TrainConfig (parameters with their
// initialisers, data fields with everything the loader needs, optimiser,
// schedule, periods) and calls rt::train.
#include "tools/dtlc/run_command.h"

#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "compiler/driver/frontend.h"
#include "runtime/exec/trainer.h"

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
    "  --resume DIR         continue from the latest checkpoint in DIR\n"
    "  --metrics FILE       write one JSON line per optimiser step and evaluation\n"
    "  --kernels fast|reference\n"
    "                       the kernels to run: fast (default) or the plain\n"
    "                       reference kernels (slow; for checking numerics)\n"
    "  --nproc N            ranks to start on this machine (1 in this version)\n"
    "  -h, --help           this help\n"
    "\n"
    "exit status: 0 trained, 1 an error in the spec or during training, 2 usage error\n";

namespace {

struct RunFlags {
  std::string spec, init, resume, metrics, kernels = "fast";
  int64_t steps = 0, nproc = 1;
  std::vector<std::string> sets;
  bool help = false;
};

std::string parseRun(const std::vector<std::string>& args, RunFlags& f) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string a = args[i], value;
    bool has_value = false;
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    auto next = [&]() {
      if (has_value) return true;
      if (i + 1 >= args.size()) return false;
      value = args[++i];
      return true;
    };
    auto number = [&](int64_t& out) {
      char* end = nullptr;
      long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end || n < 1) return false;
      out = n;
      return true;
    };
    if (a == "-h" || a == "--help") {
      f.help = true;
    } else if (a == "--steps") {
      if (!next() || !number(f.steps)) return "--steps expects a positive number of steps";
    } else if (a == "--nproc") {
      if (!next() || !number(f.nproc)) return "--nproc expects a positive number of ranks";
    } else if (a == "--set") {
      if (!next()) return "--set needs KEY=VALUE";
      f.sets.push_back(value);
    } else if (a == "--init" || a == "--resume" || a == "--metrics" || a == "--kernels") {
      if (!next()) return a + " needs a value";
      (a == "--init" ? f.init : a == "--resume" ? f.resume : a == "--metrics" ? f.metrics : f.kernels) = value;
      if (a == "--kernels" && value != "fast" && value != "reference")
        return "--kernels is fast or reference, got '" + value + "'";
    } else if (a.rfind("-", 0) == 0 && a.size() > 1) {
      return "unknown option '" + args[i] + "' (see dtlc run --help)";
    } else if (f.spec.empty()) {
      f.spec = args[i];
    } else {
      return "more than one SPEC given: '" + f.spec + "' and '" + args[i] + "'";
    }
  }
  return "";
}

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
  int id = -1;
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::Input && n.name == input) id = n.id;
  for (const ir::Node& n : g.nodes) {
    if (n.inputs.size() < 2 || n.inputs[1] != id) continue;
    if (n.op == ir::Op::CrossEntropy) {
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

rt::Period period(const sema::Every& e) { return rt::Period{e.present ? e.count : 0, e.unit == "epochs"}; }

rt::TrainConfig makeConfig(const driver::Frontend& fe, const RunFlags& f) {
  const sema::Spec& spec = fe.spec();
  rt::TrainConfig c;
  c.graph = &fe.graph();
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
  auto arg = [&](const char* k, double d) {
    auto it = t.optimizer_args.find(k);
    return it == t.optimizer_args.end() ? d : it->second;
  };
  c.optimizer.name = t.optimizer;
  c.optimizer.lr = arg("lr", 1e-3);
  c.optimizer.momentum = arg("momentum", 0);
  c.optimizer.dampening = arg("dampening", 0);
  c.optimizer.weight_decay = arg("weight_decay", 0);
  c.optimizer.beta1 = arg("beta1", 0.9);
  c.optimizer.beta2 = arg("beta2", 0.999);
  c.optimizer.eps = arg("eps", 1e-8);
  c.optimizer.nesterov = arg("nesterov", 0) != 0;
  c.schedule.name = t.schedule;
  c.schedule.warmup = t.schedule_args.count("warmup") ? t.schedule_args.at("warmup") : 0;
  c.schedule.min_lr = t.schedule_args.count("min_lr") ? t.schedule_args.at("min_lr") : 0;
  c.clip = t.clip.value_or(0);
  c.seed = static_cast<uint64_t>(t.seed);
  c.log_every = period(t.log_every);
  c.eval_every = period(t.eval_every);
  c.checkpoint_every = period(t.checkpoint_every);
  c.checkpoint_dir = t.checkpoint_dir;
  c.checkpoint_keep = t.checkpoint_keep;
  c.init_file = f.init;
  c.resume_dir = f.resume;
  c.metrics_file = f.metrics;
  c.reference_kernels = f.kernels == "reference";
  c.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return c;
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
  if (f.nproc != 1) {
    err += "dtlc run: --nproc " + std::to_string(f.nproc) +
           ": this version trains on one process; multi-process data parallelism is not built yet\n";
    return 2;
  }
  driver::Frontend fe;
  driver::FrontendOptions opt;
  opt.sets = f.sets;
  opt.world = 1;
  int status = fe.run(f.spec, opt, driver::Stop::Grad);
  if (status == 2) {
    for (const std::string& u : fe.usageErrors()) err += "dtlc run: " + u + "\n";
    return 2;
  }
  if (status != 0) {
    err += fe.diagnostics().render();
    return 1;
  }
  if (!fe.spec().data.present) {
    err += "dtlc run: " + f.spec + " has no `data` block; add one, e.g. `data { train { synthetic(seed = 1) } }`\n";
    return 1;
  }
  rt::TrainConfig config = makeConfig(fe, f);
  std::string train_err;
  int rc = rt::train(config, train_err, isatty(1) != 0);
  if (rc != 0) err += "dtlc run: " + train_err;
  return rc;
}

}  // namespace dtl::cli
