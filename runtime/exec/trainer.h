// One-process training: parameters, data, the executor, the optimiser, and
// everything around the loop — evaluation, metrics, progress, checkpoints,
// resume. Built by `dtlc run` from the checked spec; knows nothing of the
// compiler beyond the graph.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <functional>

#include "core/graph.h"
#include "core/program.h"
#include "runtime/comm/communicator.h"
#include "runtime/data/loader.h"
#include "runtime/exec/backend.h"
#include "runtime/exec/fault_hook.h"
#include "runtime/optim/multi_tensor.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/schedule.h"

namespace dtl::rt {

struct ParamSpec {
  std::string path;
  Shape shape;  // stacked params lead with their repeat dims
  std::string init;  // zeros ones normal uniform xavier kaiming
  std::map<std::string, double> init_args;
  int stack_dims = 0;  // leading repeat dims (not part of fan-in/fan-out)
  // Which piece of it this rank holds follows from its placement in the
  // program (param_shards.h).
};

struct Period {
  int64_t count = 0;  // 0 = never
  bool epochs = false;
};

struct TrainConfig {
  const prog::Program* program = nullptr;  // this rank's (compiler/program)
  std::string model;
  std::vector<ParamSpec> params;
  std::vector<data::FieldSpec> train_fields, eval_fields;
  bool shuffle = true;
  int64_t batch = 1, accumulate = 1;
  int64_t epochs = 0, steps = 0;  // exactly one is > 0
  optim::OptimizerConfig optimizer;
  optim::ScheduleConfig schedule;
  double clip = 0;  // 0 = no clipping
  std::string on_nonfinite = "stop";  // stop | skip: a step with a non-finite loss or gradient (step_guard.h)
  int64_t replica_check = 100;        // every K steps replicas compare hashes (replica_check.h); 0 = never
  std::vector<Fault> faults;          // tests' injected faults (DTL_FAULT, fault_hook.h), parsed once by dtlc run
  int64_t restart = 0;                // the job's generation, for faults keyed by `restart`
  int zero = 0;     // the spec's `zero`: at 1, accumulated gradients are reduce-scattered once per step
  uint64_t seed = 0;
  Period log_every, eval_every, checkpoint_every;
  // The run folder: metrics.jsonl (rank 0 writes it; "" writes none) and,
  // unless --no-checkpoints, the checkpoints (checkpoint_dir, the same folder).
  std::string run_dir, checkpoint_dir;
  int64_t checkpoint_keep = 0;
  std::string init_file, resume_dir, metrics_file;  // metrics_file: --metrics, also written
  std::string resume_checkpoint;  // --resume DIR/step-N: that checkpoint, not the newest that verifies
  int64_t tokens_per_sample = 0;  // the token ids' positions per sample (a sequence dim); 0: none
  std::string memory_report;  // global rank 0 writes what it holds there after step 1
  bool reference_kernels = false;
  RegionRunner* regions = nullptr;  // runs the program's fused regions (Program::fused: `--kernels jit`)
  optim::MultiTensorUpdate* multi_update = nullptr;  // the optimiser step in multi-tensor calls (`--kernels jit`)
  int threads = 1;
  // Data parallelism: which slice of each global batch this rank reads
  // (rank of world equal slices, from its program's local shapes), and a
  // communicator per mesh axis. Global rank 0 alone logs, evaluates
  // to the screen, writes metrics and the checkpoint folder (writer_ranks.h);
  // every rank computes.
  int rank = 0, world = 1;
  int global_rank = 0;
  std::vector<int64_t> mesh;  // the size of each mesh axis (empty: one rank)
  std::map<std::string, comm::Communicator*> comms;
  std::function<void(int64_t)> on_step;  // after each optimiser step (progress for the launcher)
  // At the end, on every rank, with its peak resident bytes: global rank 0
  // gets every rank's (by rank; -1 for one it did not hear from), the others
  // nothing. Unset: one process.
  std::function<std::vector<int64_t>(int64_t own_peak_bytes)> peak_memory;
  // Before step 1, with a hash of every parameter's value: false (with a
  // message) stops the run — the ranks must start from the same parameters.
  std::function<bool(const std::string& params_hash, std::string& err)> confirm_params;
  // --resume on many ranks: rank 0 passes the checkpoint it picked (empty
  // when none verifies), every other rank gets rank 0's in `name`. False
  // (with a message) when that cannot be done.
  std::function<bool(std::string& name, std::string& err)> agree_on_checkpoint;
  // The ranks meet where they may have been apart for long on work of their
  // own, so that it never counts against the collective timeout: after a
  // checkpoint (`step`; only the folder writer is excused: it wrote it) and,
  // with step 0, after loading the parameters (every rank is excused). False
  // (with a message naming the ranks missing) stops the run.
  std::function<bool(int64_t step, std::string& err)> meet;
};

// Trains; progress and logs to `out`, errors to `err`. Returns the exit
// status: 0 done, 1 a failure the message explains (bad data, NaN loss, …).
int train(const TrainConfig& config, std::string& err, bool is_tty);

}  // namespace dtl::rt
