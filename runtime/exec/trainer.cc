// The training loop.
//
// 1. Parameters: initialised from the spec (seeded per path), or loaded by
//    path from --init, or restored with the optimiser state, the step and the
//    data cursor from --resume (so the resumed losses equal the
//    uninterrupted run's bit for bit).
// 2. Each step: `accumulate` micro-batches forward + backward, gradients
//    averaged, global-norm clipped, the scheduled learning rate, the
//    optimiser. A NaN/Inf loss stops the run naming the step and the last
//    good checkpoint (checkpointing.h: older ones are dropped only once a
//    newer one has led to a finite loss).
//    Before the update every rank agrees (step_guard.h, one small
//    all-reduce) whether to stop after this step (a SIGTERM/SIGINT on any
//    rank: save, exit 0), to skip or stop for a non-finite gradient on any
//    rank (train.on_nonfinite), or to stop because replicas diverged.
// 3. Around it: metrics lines (steps counted from 1, loss before the update),
//    progress or log lines, evaluation over the whole eval split, checkpoints.
#include "runtime/exec/trainer.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "core/hash.h"
#include "core/json.h"
#include "runtime/exec/checkpointing.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/grad_sync.h"
#include "runtime/exec/param_init.h"
#include "runtime/exec/param_shards.h"
#include "runtime/exec/run_log.h"
#include "runtime/exec/step_guard.h"
#include "runtime/exec/train_state.h"
#include "runtime/exec/writer_ranks.h"
#include "runtime/io/checkpoint_store.h"
#include "runtime/io/checksums.h"
#include "runtime/io/file_ops.h"

namespace dtl::rt {

namespace {

io::TensorBlob blob(const std::string& name, const Shape& shape, const std::vector<float>& v) {
  io::TensorBlob b;
  b.name = name;
  b.dtype = "F32";
  for (const Dim& d : shape.dims) b.shape.push_back(d.size);
  b.bytes.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(b.bytes.data(), v.data(), b.bytes.size());
  return b;
}

std::string shapeText(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Loads F32 tensors by name into the params; every param must be present
// with its shape, and nothing else may be in the file.
bool loadParams(const std::vector<io::TensorBlob>& blobs, std::vector<Param>& params, const std::string& file,
                std::string& err) {
  std::map<std::string, const io::TensorBlob*> by_name;
  for (const auto& b : blobs) by_name[b.name] = &b;
  bool ok = true;
  for (Param& p : params) {
    auto it = by_name.find(p.spec->path);
    if (it == by_name.end()) {
      err += file + ": no tensor `" + p.spec->path + "` (the model's parameter " + p.spec->shape.str() + ")\n";
      ok = false;
      continue;
    }
    const io::TensorBlob& b = *it->second;
    std::vector<int64_t> want;
    for (const Dim& d : p.spec->shape.dims) want.push_back(d.size);
    if (b.shape != want || b.dtype != "F32") {
      err += file + ": tensor `" + b.name + "` is " + b.dtype + shapeText(b.shape) + " but parameter `" +
             p.spec->path + "` is F32" + p.spec->shape.str() + "\n";
      ok = false;
    } else if (!b.bytes.empty()) {
      // Into the memory the executor is bound to.
      const std::vector<float> piece = takeLocal(reinterpret_cast<const float*>(b.bytes.data()), p.shard);
      std::copy(piece.begin(), piece.end(), p.value.begin());
    }
    by_name.erase(it);
  }
  for (const auto& [name, b] : by_name) {
    err += file + ": tensor `" + name + "` is not a parameter of the model\n";
    ok = false;
  }
  return ok;
}

class Trainer {
 public:
  Trainer(const TrainConfig& c, std::string& err, bool tty) : c_(c), err_(err), tty_(tty), checkpoints_(c), guard_(c) {}

  int run() {
    const prog::Program& g = *c_.program;
    backend_ = c_.reference_kernels ? makeReferenceBackend() : makeFastBackend();
    exec_ = std::make_unique<Executor>(g, *backend_, c_.regions);
    exec_->setMultiTensorUpdate(c_.multi_update);
    for (const auto& [axis, c] : c_.comms) exec_->setCommunicator(axis, c);
    lead_ = writesLogs(c_.global_rank);
    gathers_pieces_ = exec_->gathersPieces();
    for (const ParamSpec& s : c_.params) {
      Param p{&s, shardOf(s), {}, {}, {}, nullptr, {}};
      p.updated = pieceOf(s, p.piece);
      std::vector<float> whole = initParam(s, c_.seed);  // what one process makes; this rank keeps its piece
      p.value = p.shard.sharded() ? takeLocal(whole.data(), p.shard) : std::move(whole);
      p.value.reserve(1);  // a rank's ZeRO piece may be empty (fewer elements than ranks): still bound memory
      params_.push_back(std::move(p));
    }
    for (Param& p : params_) {
      exec_->bindParam(p.spec->path, p.value.data());
      p.grad.assign(static_cast<size_t>(p.piece.local().elements().value_or(0)), 0.0f);
      p.grad.reserve(1);
    }
    if (c_.accumulate > 1) findBucketReduced();
    if (c_.accumulate > 1 && c_.zero == 1) scattered_ = scatterReducedParams(*c_.program, params_);
    if (!c_.init_file.empty() && !initFrom(c_.init_file)) return 1;
    if (!openData()) return 1;
    if (!checkpoints_.start(err_)) return 1;
    int64_t micro_per_epoch = train_loader_->stepsPerEpoch();
    int64_t steps_per_epoch = micro_per_epoch / c_.accumulate;
    if (steps_per_epoch < 1 && c_.epochs > 0) {
      err_ += "the training data holds " + std::to_string(micro_per_epoch) + " batches of " +
              std::to_string(c_.batch) + ", fewer than one step of " + std::to_string(c_.accumulate) +
              " micro-batches\n";
      return 1;
    }
    total_ = c_.steps > 0 ? c_.steps : c_.epochs * steps_per_epoch;
    int64_t start = 0;
    if (!c_.resume_dir.empty() && !resume(start)) return 1;
    total_ -= shift_;
    // Loading a checkpoint or compiling kernels (--kernels jit) takes each
    // rank its own time, which must not count against the collective timeout
    // of the first collective (the parameters' hash below gathers the pieces
    // of sharded ones): the ranks meet first, given the join timeout.
    if ((!c_.init_file.empty() || !c_.resume_dir.empty() || c_.regions != nullptr) && !meet(0)) return 1;
    if (c_.confirm_params) {
      std::string why, hash;
      if (!paramsHash(hash)) return 1;
      if (!c_.confirm_params(hash, why)) {
        err_ += why + "\n";
        return 1;
      }
    }
    if (!log_.open(total_, start > 0, err_)) return 1;
    optim::Optimizer opt(c_.optimizer);
    guard_.start();
    for (int64_t step = start + 1; step <= total_; ++step) {
      const auto step_start = std::chrono::steady_clock::now();
      const double waited_before = exec_->waitSeconds(), gathered_before = exec_->gatherWaitSeconds();
      int64_t epoch = train_loader_->cursor().first;
      double loss = 0;
      RunLog::Step rec;  // the step's line; its parts' seconds are taken as they happen
      double mark = secondsSince(step_start);
      guard_.beforeStep(step, params_);
      rec.guard_s = secondsSince(step_start) - mark;
      mark = secondsSince(step_start);
      if (!microBatches(step, loss, rec.batch_s)) return 1;
      rec.compute_s = secondsSince(step_start) - mark - rec.batch_s;
      if (!std::isfinite(loss) && c_.on_nonfinite != "skip") {
        // Every rank holds the same loss and stops here; global rank 0 says why, once.
        const std::string why = "step " + std::to_string(step) + ": the loss is " + (std::isnan(loss) ? "NaN" : "infinite") +
                                "; stopping" + checkpoints_.diverged() +
                                "\nhint: lower the learning rate, or set `clip = 1.0` in `train`\n";
        if (c_.global_rank == 0) err_ += why;
        return 1;
      }
      StepVerdict verdict;  // every rank's: stop after this step, skip it, or fail
      mark = secondsSince(step_start);
      const bool agreed = guard_.agree(step, loss, params_, verdict, err_);
      rec.guard_s += secondsSince(step_start) - mark;
      if (!agreed) {
        if (verdict.nonfinite && c_.global_rank == 0)
          err_ += checkpoints_.diverged() + "\nhint: `on_nonfinite = skip` in `train` skips such steps on every rank\n";
        return 1;
      }
      if (std::isfinite(loss) && !checkpoints_.confirm(err_)) return 1;
      // A skipped step moves neither the optimiser's step count nor the schedule.
      const int64_t opt_step = step - skipped_;
      double lr = optim::scheduledLr(c_.schedule, c_.optimizer.lr, opt_step + shift_, total_ + shift_);
      mark = secondsSince(step_start);
      if (verdict.skip) {
        ++skipped_;
        rec.grad_norm = std::nan("");  // not measured: the step was not finite (null in the metrics)
      } else if (!update(opt, opt_step, lr, rec.grad_norm)) {
        return 1;
      }
      rec.update_s = secondsSince(step_start) - mark;
      if (step == start + 1 && !c_.memory_report.empty() && c_.global_rank == 0 && !reportMemory()) return 1;
      if (c_.on_step) c_.on_step(step);
      rec.step = step;
      rec.epoch = epoch;
      rec.loss = loss;
      rec.lr = lr;
      rec.step_s = secondsSince(step_start);
      rec.comm_wait_s = exec_->waitSeconds() - waited_before;
      if (gathers_pieces_) rec.gather_wait_s = exec_->gatherWaitSeconds() - gathered_before;
      if (c_.on_nonfinite == "skip") rec.skipped_steps = skipped_;
      bool epoch_end = steps_per_epoch > 0 && (step + shift_) % steps_per_epoch == 0;
      // The last step is always shown, so a run shorter than `log every` says how it ended.
      if (!log_.step(rec, due(c_.log_every, step, epoch_end) || step == total_, err_)) return 1;
      if (!c_.eval_fields.empty() && (due(c_.eval_every, step, epoch_end) || step == total_)) {
        if (!evaluate(step, epoch)) return 1;
      }
      const bool stopping = verdict.stop_signal != 0;  // pre-empted: save this step, then end
      if (!c_.checkpoint_dir.empty() && (due(c_.checkpoint_every, step, epoch_end) || step == total_ || stopping)) {
        if (!checkpoint(step)) return 1;
      }
      if (stopping) return stopAfter(step, verdict.stop_signal);
    }
    if (!checkpoints_.confirm(err_)) return 1;  // training ended without diverging
    log_.finish(total_ - start);
    return 0;
  }

 private:
  // Every rank stops after the same step (step_guard.h), the checkpoint
  // saved: status 0, so a scheduler that pre-empted the job sees it end well.
  int stopAfter(int64_t step, int signal) {
    if (!checkpoints_.confirm(err_)) return 1;
    if (!lead_) return 0;
    std::string line = "stopped after step " + std::to_string(step) + " (" + (signal == SIGINT ? "SIGINT" : "SIGTERM") + "): ";
    line += c_.checkpoint_dir.empty()
                ? "no checkpoint written (--no-checkpoints)"
                : "saved " + c_.checkpoint_dir + "/" + io::checkpointName(step) + "; --resume " + c_.checkpoint_dir +
                      " continues from it";
    std::fputs(((tty_ ? "\n" : "") + line + "\n").c_str(), stdout);
    std::fflush(stdout);
    return 0;
  }

  // What this rank holds, counted where it is allocated: the parameter
  // pieces, their gradient accumulators, the optimiser state, and the
  // executor's buffers (slots, communication buffers, unbound outputs).
  bool reportMemory() {
    int64_t params = 0, grads = 0, state = 0;
    for (const Param& p : params_) {
      params += static_cast<int64_t>(p.value.size() * 4);
      grads += static_cast<int64_t>(p.grad.size() * 4);
      state += static_cast<int64_t>((p.state.a.size() + p.state.b.size()) * 4);
    }
    json::Writer w;
    w.beginObject();
    w.key("parameters").value(params).key("gradients").value(grads).key("optimizer_state").value(state);
    w.key("executor").value(exec_->peakBytes());
    w.endObject();
    const std::string text = w.str() + "\n";
    io::Status s = io::writeFileAtomic(c_.memory_report, {{text.data(), text.size()}});
    if (!s.ok) err_ += "--memory-report: " + s.message + "\n";
    return s.ok;
  }

  bool due(const Period& p, int64_t step, bool epoch_end) const {
    if (p.count <= 0) return false;
    if (!p.epochs) return step % p.count == 0;
    if (!epoch_end) return false;
    int64_t steps_per_epoch = train_loader_->stepsPerEpoch() / c_.accumulate;
    return ((step + shift_) / steps_per_epoch) % p.count == 0;
  }

  // The piece of `s` this rank holds, from its placement in the program.
  ShardOf shardOf(const ParamSpec& s) const {
    const prog::Program& g = *c_.program;
    ShardOf out{s.shape, {}, g.mesh, g.coords};
    for (const ir::Node& n : g.nodes)
      if (n.op == ir::Op::Param && n.name == s.path) out.placement = g.placement[static_cast<size_t>(n.id)];
    return out;
  }

  // The piece of `s` the optimiser updates (its update's placement) into
  // `piece`; false when the program has no update of it (nothing depends on it).
  bool pieceOf(const ParamSpec& s, ShardOf& piece) const {
    const prog::Program& g = *c_.program;
    piece = shardOf(s);
    for (const ir::Node& n : g.nodes)
      if (n.op == ir::Op::Update && n.name == s.path) {
        piece.placement = g.placement[static_cast<size_t>(n.id)];
        return true;
      }
    return false;
  }

  // Per mesh axis: whether `s` is split over it (writer_ranks.h's terms).
  static std::vector<bool> splitAxes(const ShardOf& s) {
    std::vector<bool> out(s.mesh.size(), false);
    for (size_t a = 0; a < s.mesh.size() && a < s.placement.size(); ++a)
      out[a] = s.placement[a].kind == layout::Placement::Shard && s.mesh[a].size > 1;
    return out;
  }

  // A sharded tensor whole, on every rank of the axes it is split over (all
  // of them call this together).
  bool whole(const ShardOf& shard, const std::vector<float>& piece, std::vector<float>& out, const std::string& path) {
    if (!shard.sharded()) {
      out = piece;
      return true;
    }
    comm::Status s = gatherWhole(piece, shard, c_.comms, out);
    if (!s.ok) err_ += "gathering `" + path + "`: " + s.message + "\n";
    return s.ok;
  }

  // Over every parameter's path and whole values' bits: the same on every
  // rank, and the same as one process's from the same weights.
  bool paramsHash(std::string& out) {
    uint64_t h = kFnvOffset;
    std::vector<float> w;
    for (const Param& p : params_) {
      if (!whole(p.shard, p.value, w, p.spec->path)) return false;
      h = fnv1a(w.data(), w.size() * 4, fnv1a(p.spec->path, h));
    }
    out = hex64(h);
    return true;
  }

  // A file with dtl's checksums (a checkpoint's params.safetensors) is
  // checked against them; one from elsewhere is taken as it is.
  bool initFrom(const std::string& file) {
    std::vector<io::TensorBlob> blobs;
    std::map<std::string, std::string> meta;
    io::Status s = io::readSafetensors(file, blobs, &meta);
    if (s.ok && io::hasChecksums(meta)) s = io::verifyChecksums(file, blobs, meta);
    if (!s.ok) {
      err_ += s.message + "\n";
      return false;
    }
    return loadParams(blobs, params_, file, err_);
  }

  bool openData() {
    data::Status s = data::Dataset::open(c_.train_fields, train_);
    if (!s.ok) {
      err_ += "train data: " + s.message + "\n";
      return false;
    }
    data::LoaderOptions o;
    o.batch = c_.batch;
    o.shuffle = c_.shuffle;
    o.seed = c_.seed;
    o.rank = c_.rank;
    o.world = c_.world;
    train_loader_ = std::make_unique<data::Loader>(train_, o);
    if (!train_loader_->status().ok) {
      err_ += "train data: " + train_loader_->status().message + "\n";
      return false;
    }
    if (!c_.eval_fields.empty()) {
      s = data::Dataset::open(c_.eval_fields, eval_);
      if (!s.ok) {
        err_ += "eval data: " + s.message + "\n";
        return false;
      }
    }
    return true;
  }

  // The executor reads the batch in place during the next run (bindInput):
  // the callers give it back to the loader only after that run.
  void feed(const data::Batch& b) {
    for (const auto& [name, v] : b.floats) exec_->bindInput(name, v.data(), static_cast<int64_t>(v.size()));
    for (const auto& [name, v] : b.ints) exec_->bindInput(name, v.data(), static_cast<int64_t>(v.size()));
  }

  // With accumulation, bucket-reduced gradients are reduced once per step
  // (grad_sync.h).
  void findBucketReduced() { deferred_ = bucketReducedParams(*c_.program, params_); }

  bool reduceDeferred(int64_t step) {
    comm::Status s = reduceAccumulated(params_, deferred_, c_.comms);
    if (!s.ok) err_ += "step " + std::to_string(step) + ": all-reduce of the accumulated gradients: " + s.message + "\n";
    return s.ok;
  }

  // Seconds from `start` to now.
  static double secondsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // The step's forward and backward over its micro-batches; `batch_s`: the
  // seconds of it spent taking the batches from the loader.
  bool microBatches(int64_t step, double& loss, double& batch_s) {
    const prog::Program& g = *c_.program;
    RunContext ctx;
    ctx.training = true;
    ctx.threads = c_.threads;
    ctx.defer_buckets = c_.accumulate > 1;
    const bool sum_in_program = !scattered_.empty();  // zero = 1: the buckets add the micro-batches up
    double sum = 0;
    // One micro-batch: the executor writes the gradients straight into the
    // accumulators (where it can), so nothing is copied.
    if (c_.accumulate == 1)
      for (Param& p : params_) exec_->bindGrad(p.spec->path, p.grad.data());
    batch_s = 0;
    for (int64_t m = 0; m < c_.accumulate; ++m) {
      const auto fetch = std::chrono::steady_clock::now();
      data::Batch batch = train_loader_->next();
      feed(batch);
      batch_s += secondsSince(fetch);
      ctx.seed = c_.seed * 1000003ull + static_cast<uint64_t>(step) * 131ull + static_cast<uint64_t>(m);
      ctx.scatter_add = sum_in_program && m > 0;
      ctx.scatter_defer = sum_in_program && m + 1 < c_.accumulate;
      KernelStatus s = exec_->run(true, ctx);
      train_loader_->recycle(std::move(batch));
      if (!s.ok) {
        err_ += "step " + std::to_string(step) + ": " + s.message + "\n";
        return false;
      }
      sum += exec_->value(g.loss);
      for (size_t i = 0; i < params_.size(); ++i) {
        Param& p = params_[i];
        float* gr = exec_->grad(p.spec->path);
        p.step_grad = p.grad.data();
        if (sum_in_program && scattered_[i]) {  // the step's sum, complete after the last micro-batch
          if (m + 1 == c_.accumulate && gr) std::memcpy(p.grad.data(), gr, p.grad.size() * 4);
          continue;
        }
        if (!gr) {  // a parameter the loss does not depend on
          if (m == 0) std::fill(p.grad.begin(), p.grad.end(), 0.0f);
          continue;
        }
        if (m == 0 && c_.accumulate == 1) {
          p.step_grad = gr;
        } else if (m == 0) {  // the first micro-batch overwrites: no zeroing first
          if (gr != p.grad.data()) std::memcpy(p.grad.data(), gr, p.grad.size() * 4);
        } else {
          for (size_t i = 0; i < p.grad.size(); ++i) p.grad[i] += gr[i];
        }
      }
    }
    if (c_.accumulate == 1) unshareStepGrads();
    if (c_.accumulate > 1 && !reduceDeferred(step)) return false;
    if (c_.accumulate > 1) {
      float inv = 1.0f / static_cast<float>(c_.accumulate);
      for (Param& p : params_)
        for (float& v : p.grad) v *= inv;
    }
    loss = sum / static_cast<double>(c_.accumulate);
    return true;
  }

  // Gradients left in executor memory may share it (two parameters with one
  // gradient value, a view of another's gradient); clipping scales in place,
  // so each overlapping one is copied into its own accumulator first.
  void unshareStepGrads() {
    std::vector<std::pair<const float*, Param*>> by_address;
    for (Param& p : params_)
      if (!p.grad.empty()) by_address.emplace_back(p.step_grad, &p);
    std::sort(by_address.begin(), by_address.end());
    const float* reach = nullptr;  // the furthest end so far
    Param* reach_owner = nullptr;
    for (auto& [at, p] : by_address) {
      const float* end = at + p->grad.size();
      if (reach && at < reach) {
        for (Param* q : {p, reach_owner}) {
          if (q->step_grad != q->grad.data()) {
            std::memcpy(q->grad.data(), q->step_grad, q->grad.size() * 4);
            q->step_grad = q->grad.data();
          }
        }
      }
      if (!reach || end > reach) reach = end, reach_owner = p;
    }
  }

  // The program's update schedule on this step's gradients; `grad_norm`
  // gets their global norm before clipping.
  bool update(const optim::Optimizer& opt, int64_t step, double lr, double& grad_norm) {
    // The guard measured every gradient's norm while checking the step is
    // finite: clipping and the logged norm take those, so the gradients are
    // read once before the update, not twice. With clip <= 0: only the norm.
    comm::Status norm = clipOverPieces(params_, c_.clip, c_.comms, &grad_norm, guard_.localNorms());
    if (!norm.ok) {
      err_ += "step " + std::to_string(step) + ": " + (c_.clip > 0 ? "clipping: " : "the gradient norm: ") + norm.message + "\n";
      return false;
    }
    for (Param& p : params_) {
      exec_->bindStepGrad(p.spec->path, p.step_grad);
      exec_->bindState(p.spec->path, &p.state);
    }
    KernelStatus s = exec_->update(opt, step, lr, c_.threads);
    if (!s.ok) err_ += "step " + std::to_string(step) + ": " + s.message + "\n";
    return s.ok;
  }

  bool evaluate(int64_t step, int64_t epoch) {
    const prog::Program& g = *c_.program;
    data::LoaderOptions o;
    o.batch = c_.batch;
    o.shuffle = false;
    o.prefetch = 0;
    o.rank = c_.rank;
    o.world = c_.world;
    data::Loader loader(eval_, o);
    if (!loader.status().ok) {
      err_ += "eval data: " + loader.status().message + "\n";
      return false;
    }
    RunContext ctx;
    ctx.training = false;
    ctx.threads = c_.threads;
    double loss = 0;
    std::vector<double> metric(g.metrics.size(), 0.0);
    int64_t n = loader.stepsPerEpoch();
    for (int64_t i = 0; i < n; ++i) {
      data::Batch batch = loader.next();
      feed(batch);
      KernelStatus s = exec_->run(false, ctx);
      loader.recycle(std::move(batch));
      if (!s.ok) {
        err_ += "evaluation after step " + std::to_string(step) + ": " + s.message + "\n";
        return false;
      }
      loss += exec_->value(g.loss);
      for (size_t k = 0; k < g.metrics.size(); ++k) metric[k] += exec_->value(g.metrics[k].second);
    }
    std::vector<std::pair<std::string, double>> shown = {{"loss", loss / static_cast<double>(n)}};
    for (size_t k = 0; k < g.metrics.size(); ++k) shown.emplace_back(g.metrics[k].first, metric[k] / static_cast<double>(n));
    return log_.eval(step, epoch, shown, err_);
  }

  // Mesh-free: every tensor is saved whole, by its full name and shape. A
  // sharded one is gathered first (every rank of its axes takes part); the
  // folder writer, global rank 0, then holds all of them.
  bool checkpoint(int64_t step) {
    const auto began = std::chrono::steady_clock::now();
    io::CheckpointContents c;
    c.step = step;
    std::vector<std::string> names = optim::stateNames(c_.optimizer);
    const bool writer = c_.global_rank == 0;
    std::vector<float> w;
    for (const Param& p : params_) {
      // Only the ranks gathering for the writer: the group over the axes the
      // tensor is split on that holds rank 0 (writesTensor: the ranks whose
      // other coordinates are 0).
      const bool gathers_value = p.shard.sharded() && writesTensor(c_.mesh, splitAxes(p.shard), c_.global_rank);
      const bool gathers_state = p.piece.sharded() && writesTensor(c_.mesh, splitAxes(p.piece), c_.global_rank);
      if (!writer && !gathers_value && !gathers_state) continue;
      if ((writer || gathers_value) && !whole(p.shard, p.value, w, p.spec->path)) return false;
      if (writer) c.params.push_back(blob(p.spec->path, p.spec->shape, w));
      if (!writer && !gathers_state) continue;
      const std::vector<float>* state[2] = {&p.state.a, &p.state.b};
      for (size_t k = 0; k < names.size() && k < 2; ++k) {
        // Every rank gathers alike: a rank's empty piece has empty state.
        if (!p.updated) continue;
        if (!whole(p.piece, *state[k], w, p.spec->path)) return false;
        if (writer) c.optimizer.push_back(blob(p.spec->path + "." + names[k], p.spec->shape, w));
      }
    }
    TrainState st;
    st.step = step;
    std::tie(st.epoch, st.step_in_epoch) = train_loader_->cursor();
    st.seed = static_cast<int64_t>(c_.seed);
    st.model = c_.model;
    st.global_batch = c_.batch * c_.world;
    st.world = c_.world;
    st.skipped_steps = skipped_;
    c.state_json = trainStateJson(st);
    if (!checkpoints_.save(c, err_)) return false;
    int64_t bytes = static_cast<int64_t>(c.state_json.size());
    for (const auto* blobs : {&c.params, &c.optimizer})
      for (const io::TensorBlob& b : *blobs) bytes += static_cast<int64_t>(b.bytes.size());
    log_.checkpoint(step, c_.checkpoint_dir + "/" + io::checkpointName(step), bytes,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    return meet(step);
  }

  bool meet(int64_t step) {
    std::string why;
    if (!c_.meet || c_.meet(step, why)) return true;
    err_ += why + "\n";
    return false;
  }

  bool resume(int64_t& start) {
    io::CheckpointContents c;
    if (!checkpoints_.resume(c, err_)) return false;
    TrainStateExpect expect;
    expect.step = c.step;
    expect.model = c_.model;
    expect.seed = static_cast<int64_t>(c_.seed);
    expect.samples = train_.samples();
    expect.global_batch = c_.batch * c_.world;
    TrainState state;
    std::string why;
    if (!parseTrainState(c.state_json, expect, state, why)) {
      err_ += "--resume " + c_.resume_dir + ": " + io::checkpointName(c.step) + "/state.json: " + why + "\n";
      return false;
    }
    if (!loadParams(c.params, params_, c_.resume_dir, err_)) return false;
    if (!restoreOptimizerState(c.optimizer)) return false;
    if (!seekData(state)) return false;
    start = c.step;
    skipped_ = state.skipped_steps;
    if (lead_) std::fprintf(stdout, "resumed from %s at step %lld\n", c_.resume_dir.c_str(), static_cast<long long>(start));
    return true;
  }

  bool restoreOptimizerState(const std::vector<io::TensorBlob>& blobs) {
    std::map<std::string, const io::TensorBlob*> opt;
    for (const auto& b : blobs) opt[b.name] = &b;
    std::vector<std::string> names = optim::stateNames(c_.optimizer);
    for (Param& p : params_) {
      std::vector<float>* state[2] = {&p.state.a, &p.state.b};
      for (size_t k = 0; k < names.size() && k < 2; ++k) {
        auto it = opt.find(p.spec->path + "." + names[k]);
        if (it == opt.end()) continue;
        const auto* data = reinterpret_cast<const float*>(it->second->bytes.data());
        const int64_t values = static_cast<int64_t>(it->second->bytes.size() / 4);
        if (values != 0 && values != p.spec->shape.elements().value_or(-1)) {
          err_ += "--resume " + c_.resume_dir + ": optimiser state `" + it->first + "` holds " + std::to_string(values) +
                  " values but parameter `" + p.spec->path + "` is " + p.spec->shape.str() + "\n";
          return false;
        }
        if (values == 0) {
          state[k]->clear();
        } else if (p.piece.sharded()) {
          *state[k] = takeLocal(data, p.piece);
        } else {
          state[k]->assign(data, data + values);
        }
      }
    }
    return true;
  }

  // The data cursor of a resumed run, converted when the checkpoint's run had another global batch.
  bool seekData(const TrainState& state) {
    int64_t epoch = state.epoch, in_epoch = state.step_in_epoch;
    // Written by a run with another global batch (another number of ranks or
    // per-rank batch): continue at the same sample of the epoch's order.
    int64_t global = c_.batch * c_.world;
    if (state.global_batch > 0 && state.global_batch != global) {
      const int64_t ckpt_global = state.global_batch;
      int64_t samples = in_epoch * ckpt_global;
      if (samples % (global * c_.accumulate) != 0) {
        err_ += "--resume " + c_.resume_dir + ": the checkpoint's run had a global batch of " + std::to_string(ckpt_global) +
                " and stopped after " + std::to_string(samples) + " samples of epoch " + std::to_string(epoch) +
                ", which is not a whole number of this run's optimiser steps of " +
                std::to_string(global * c_.accumulate) + " samples" +
                "\nhint: choose `batch` so that batch × ranks divides " + std::to_string(samples) +
                " (the same global batch as before continues the run exactly)\n";
        return false;
      }
      in_epoch = samples / global;
      // Steps count on in this run's units for what depends on the epoch
      // (its end, epochs-long periods, the total and the schedule); the
      // optimiser keeps its own step count.
      if (c_.epochs > 0) {
        int64_t steps_per_epoch = train_loader_->stepsPerEpoch() / c_.accumulate;
        shift_ = epoch * steps_per_epoch + in_epoch / c_.accumulate - state.step;
      }
    }
    train_loader_->seek(epoch, in_epoch);
    return true;
  }

  const TrainConfig& c_;
  std::string& err_;
  bool tty_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Executor> exec_;
  std::vector<Param> params_;
  std::map<std::string, std::vector<size_t>> deferred_;  // axis → params reduced once per step (no_sync)
  std::vector<bool> scattered_;  // zero = 1 with accumulation: per param, summed and scattered by the program
  data::Dataset train_, eval_;
  std::unique_ptr<data::Loader> train_loader_;
  RunLog log_{c_, writesLogs(c_.global_rank), tty_};
  int64_t total_ = 0;
  int64_t shift_ = 0;  // this run's step count in the epoch's units, minus the optimiser's (resume())
  bool lead_ = true;  // logs, prints and writes metrics
  bool gathers_pieces_ = false;  // zero = 3: the metrics say how long gathers of parameters were waited for
  Checkpointing checkpoints_;
  StepGuard guard_;
  int64_t skipped_ = 0;  // steps skipped for a non-finite loss or gradient (on_nonfinite = skip)
};

}  // namespace

int train(const TrainConfig& config, std::string& err, bool is_tty) {
  return Trainer(config, err, is_tty).run();
}

}  // namespace dtl::rt
