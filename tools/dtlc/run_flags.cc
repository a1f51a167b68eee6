#include "tools/dtlc/run_flags.h"

#include "tools/dtlc/flags.h"

namespace dtl::cli {

std::string parseRun(const std::vector<std::string>& args, RunFlags& f) {
  return Flags("run")
      .integer("--steps", f.steps, "a positive number of steps", 1, INT64_MAX)
      .integer("--nproc", f.nproc, "a positive number of ranks", 1, 4096)
      .integer("--join-timeout", f.join_timeout, "a positive number of seconds", 1, 1000000000, &f.join_timeout_given)
      .integer("--collective-timeout", f.collective_timeout, "a positive number of seconds", 1, 1000000000)
      .integer("--nnodes", f.nnodes, "a positive number of nodes", 1, 100000)
      .integer("--node-rank", f.node_rank, "this node's number, from 0", 0, 100000)
      .integer("--max-restarts", f.max_restarts, "a number from 0", 0, 1000000)
      .integer("--term-timeout", f.term_timeout, "a number of seconds from 0", 0, 1000000000)
      .text("--master", f.master, "HOST:PORT")
      .text("--iface", f.iface, "a network interface, e.g. eth0")
      .text("--backend", f.backend, "", {"auto", "shm", "gloo"})
      .toggle("--as-rank", f.as_rank)
      .toggle("--ignore-memory-check", f.ignore_memory)
      .toggle("--no-checkpoints", f.no_checkpoints)
      .integer("--verify", f.verify, "a positive number of steps", 1, INT64_MAX)
      .number("--verify-tolerance", f.verify_tolerance, "a relative tolerance from 0, e.g. 1e-5", 0, 1e300,
              &f.verify_tolerance_given)
      .list("--set", f.sets, "KEY=VALUE")
      .text("--init", f.init, "a safetensors file")
      .text("--resume", f.resume, "a checkpoint folder")
      .text("--metrics", f.metrics, "a file")
      .text("--out", f.out, "a run folder")
      .text("--memory-report", f.memory_report, "a file")
      .text("--kernels", f.kernels, "", {"fast", "reference", "jit"})
      .parse(args, f.spec, f.help);
}

std::vector<std::string> runArgs(const RunFlags& f) {
  const RunFlags d;  // the defaults, left unsaid
  std::vector<std::string> a = {"run", f.spec};
  auto integer = [&](const char* name, int64_t v, int64_t def) {
    if (v != def) a.insert(a.end(), {name, std::to_string(v)});
  };
  auto text = [&](const char* name, const std::string& v, const std::string& def) {
    if (v != def) a.insert(a.end(), {name, v});
  };
  integer("--steps", f.steps, d.steps);
  integer("--nproc", f.nproc, d.nproc);
  if (f.join_timeout_given) a.insert(a.end(), {"--join-timeout", std::to_string(f.join_timeout)});
  integer("--collective-timeout", f.collective_timeout, d.collective_timeout);
  integer("--nnodes", f.nnodes, d.nnodes);
  integer("--node-rank", f.node_rank, d.node_rank);
  integer("--max-restarts", f.max_restarts, d.max_restarts);
  integer("--term-timeout", f.term_timeout, d.term_timeout);
  text("--master", f.master, d.master);
  text("--iface", f.iface, d.iface);
  text("--backend", f.backend, d.backend);
  if (f.ignore_memory) a.push_back("--ignore-memory-check");
  if (f.no_checkpoints) a.push_back("--no-checkpoints");
  for (const std::string& s : f.sets) a.insert(a.end(), {"--set", s});
  text("--init", f.init, d.init);
  text("--resume", f.resume, d.resume);
  text("--metrics", f.metrics, d.metrics);
  text("--out", f.out, d.out);
  text("--memory-report", f.memory_report, d.memory_report);
  text("--kernels", f.kernels, d.kernels);
  return a;
}

}  // namespace dtl::cli
