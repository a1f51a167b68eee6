// A lock on a folder that one job writes at a time (the checkpoint folder):
// DIR/.lock, held with flock(2) for as long as the DirLock lives, holding the
// owner's pid, host and start time. The kernel releases it when the process
// exits, however it exits, so a crashed job never leaves a stale lock.
#pragma once

#include <string>

#include "runtime/io/status.h"

namespace dtl::rt::io {

class DirLock {
 public:
  DirLock() = default;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock() { release(); }

  // Creates `dir` if needed and takes its lock without waiting. When another
  // process holds it, the error names it: "runs/x: in use by another job
  // (pid 4242 on host a, started 2026-12-01 10:52:19 UTC); …".
  Status acquire(const std::string& dir);
  void release();
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// "pid 4242 on host a, started 2026-12-01 10:52:19 UTC": this process, as written into the lock file.
std::string lockOwnerText();

}  // namespace dtl::rt::io
