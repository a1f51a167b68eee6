// The trainer's side of checkpoints: the folder lock, saving with the older
// checkpoints kept until the new one has led to a finite loss, setting aside
// a checkpoint that led straight to a non-finite one, and resuming from the
// newest checkpoint that verifies — the same one on every rank.
#pragma once

#include <string>

#include "runtime/exec/trainer.h"
#include "runtime/io/checkpoint_store.h"
#include "runtime/io/dir_lock.h"

namespace dtl::rt {

class Checkpointing {
 public:
  explicit Checkpointing(const TrainConfig& c);

  // The folder writer (global rank 0) locks the checkpoint folder for the
  // whole run; a folder another job holds is an error naming that job.
  bool start(std::string& err);

  // Saves `c` (on the folder writer); the older checkpoints stay until confirm().
  bool save(const io::CheckpointContents& c, std::string& err);

  // The step after the last save had a finite loss (or training ended): drops
  // the checkpoints beyond `keep`.
  bool confirm(std::string& err);

  // The loss became non-finite. A checkpoint saved just before (unconfirmed)
  // is set aside; returns what the message says about the checkpoints, e.g.
  // " (the last good checkpoint is runs/x/step-00000005; …)".
  std::string diverged();

  // Loads the checkpoint to resume from: rank 0 picks the newest in
  // `config.resume_dir` that verifies (naming on stderr each newer one it
  // passes over, and why) — or the one `config.resume_checkpoint` names —
  // and the others load the one it picked.
  bool resume(io::CheckpointContents& out, std::string& err);

 private:
  bool writer() const;
  std::string path(const std::string& name) const;

  const TrainConfig& c_;
  io::DirLock lock_;
  std::string pending_;    // saved, not yet confirmed by a finite loss
  std::string last_good_;  // confirmed, or resumed from: a path
};

}  // namespace dtl::rt
