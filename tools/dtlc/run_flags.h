// `dtlc run`'s flags: what the command line says (parseRun) and the command
// line that says it again (runArgs), for the jobs `--verify` starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtl::cli {

struct RunFlags {
  std::string spec, init, resume, metrics, out;
  std::string kernels;  // "" = kernelsOrDefault's choice (jit where the build has the generator)
  int64_t steps = 0, nproc = 1, join_timeout = 300, nnodes = 1, node_rank = 0, max_restarts = 0;
  int64_t term_timeout = 30;  // seconds the ranks have to save and end after SIGTERM/SIGINT
  std::string master = "127.0.0.1:0", backend = "auto", iface;
  bool as_rank = false;  // internal: started by the launcher
  bool join_timeout_given = false;
  // Seconds a collective waits for the other ranks (every rank reads its own
  // from its command line, which the launcher passes on).
  int64_t collective_timeout = 300;
  bool ignore_memory = false;
  bool no_checkpoints = false;
  std::string memory_report;  // rank 0's held bytes after step 1, as JSON
  int64_t verify = 0;  // --verify K: 0 = not asked
  double verify_tolerance = 1e-5;
  bool verify_tolerance_given = false;
  std::vector<std::string> sets;
  bool help = false;
};

// "" or the usage message (without the "dtlc run: " prefix).
std::string parseRun(const std::vector<std::string>& args, RunFlags& f);

// `run SPEC …` that parseRun reads back as `f` (without --verify,
// --verify-tolerance, --as-rank and --help).
std::vector<std::string> runArgs(const RunFlags& f);

}  // namespace dtl::cli
