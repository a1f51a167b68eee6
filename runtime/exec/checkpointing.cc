// Checkpointing: the folder writer is global rank 0 (runtime/exec/writer_ranks.h);
// every rank verifies the checkpoint it resumes from, and all take rank 0's
// choice through `config.agree_on_checkpoint` (the job's store).
#include "runtime/exec/checkpointing.h"

#include <cstdio>

#include "runtime/exec/writer_ranks.h"

namespace dtl::rt {

Checkpointing::Checkpointing(const TrainConfig& c) : c_(c) {}

bool Checkpointing::writer() const { return c_.global_rank == 0; }

std::string Checkpointing::path(const std::string& name) const { return c_.checkpoint_dir + "/" + name; }

bool Checkpointing::start(std::string& err) {
  if (!writer() || c_.checkpoint_dir.empty()) return true;
  io::Status s = lock_.acquire(c_.checkpoint_dir);
  if (!s.ok) err += "checkpoint folder " + s.message + "\n";
  return s.ok;
}

bool Checkpointing::save(const io::CheckpointContents& c, std::string& err) {
  if (!writer()) return true;
  io::CheckpointStore store(c_.checkpoint_dir, c_.checkpoint_keep);
  io::Status s = store.save(c, io::Prune::Later);
  if (!s.ok) {
    err += "checkpoint at step " + std::to_string(c.step) + ": " + s.message + "\n";
    return false;
  }
  pending_ = io::checkpointName(c.step);
  return true;
}

bool Checkpointing::confirm(std::string& err) {
  if (pending_.empty()) return true;
  last_good_ = path(pending_);
  pending_.clear();
  io::Status s = io::CheckpointStore(c_.checkpoint_dir, c_.checkpoint_keep).prune();
  if (!s.ok) err += s.message + "\n";
  return s.ok;
}

std::string Checkpointing::diverged() {
  if (!writer() || c_.checkpoint_dir.empty()) return "";
  std::string text;
  if (!pending_.empty()) {
    std::string moved;
    io::Status s = io::CheckpointStore(c_.checkpoint_dir, c_.checkpoint_keep).withdraw(pending_, moved);
    text = s.ok ? "; the checkpoint saved just before (" + pending_ + ") led to it and was set aside as " + moved
                : "; the checkpoint saved just before (" + path(pending_) + ") led to it, and setting it aside failed: " +
                      s.message;
    pending_.clear();
  }
  if (last_good_.empty()) return text + "; no checkpoint of this run is known to be good";
  return text + "; the last good checkpoint is " + last_good_ + " (--resume " + c_.checkpoint_dir + " continues from it)";
}

bool Checkpointing::resume(io::CheckpointContents& out, std::string& err) {
  const std::string& dir = c_.resume_dir;
  std::string chosen, why;
  io::Status s;
  if (writer()) {
    io::LoadReport report;
    if (!c_.resume_checkpoint.empty()) {  // the one named, or nothing
      s = io::CheckpointStore::load(dir, c_.resume_checkpoint, out, &report.warning);
      report.name = c_.resume_checkpoint;
    } else {
      s = io::CheckpointStore::loadNewestIntact(dir, out, report);
    }
    chosen = s.ok ? report.name : "";
    for (const std::string& skipped : report.skipped)
      std::fprintf(stderr, "warning: --resume %s: passed over %s\n", dir.c_str(), skipped.c_str());
    if (s.ok && !report.skipped.empty())
      std::fprintf(stderr, "warning: --resume %s: resuming from %s instead, the newest checkpoint that verifies\n",
                   dir.c_str(), chosen.c_str());
    if (s.ok && !report.warning.empty()) std::fprintf(stderr, "warning: %s\n", report.warning.c_str());
    if (c_.agree_on_checkpoint && !c_.agree_on_checkpoint(chosen, why)) {
      err += "--resume " + dir + ": " + why + "\n";
      return false;
    }
  } else {
    if (c_.agree_on_checkpoint && !c_.agree_on_checkpoint(chosen, why)) {
      err += "--resume " + dir + ": " + why + "\n";
      return false;
    }
    if (chosen.empty()) {
      err += "--resume " + dir + ": rank 0 found no checkpoint there that verifies (its message says why)\n";
      return false;
    }
    s = io::CheckpointStore::load(dir, chosen, out);
    if (!s.ok) s.message = "rank 0 resumes from " + chosen + ", but on this rank it does not verify: " + s.message;
  }
  if (!s.ok) {
    err += "--resume " + dir + ": " + s.message + "\n";
    return false;
  }
  if (dir == c_.checkpoint_dir) last_good_ = path(chosen);
  return true;
}

}  // namespace dtl::rt
