// The process side of the launcher: starting one rank as a child in its own
// process group, relaying a rank's output line by line with a "[rank r] "
// prefix, catching SIGINT/SIGTERM so they can be forwarded, and wording how
// a child ended. Knows nothing about stores or restarts (launcher.cc does).
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace dtl::rt::launch {

// While alive, SIGINT and SIGTERM are caught (their numbers readable from
// fd()) and SIGPIPE is ignored; the destructor restores what was there.
// One per process at a time.
class SignalCatcher {
 public:
  SignalCatcher() = default;
  ~SignalCatcher();
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;

  bool install(std::string& err);
  int fd() const { return read_fd_; }
  int take();  // the next caught signal, or 0 when none is pending

 private:
  bool installed_ = false;
  int read_fd_ = -1;
};

// One rank's child process.
struct Child {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;  // also its process group id
  bool exited = false;
  int wait_status = 0;
  // Stopped (SIGSTOP, SIGTSTP, …): it ignores SIGTERM until continued, so a
  // launcher stopping the job kills it with SIGKILL at once.
  int stopped_by = 0;  // the signal that stopped it, 0 while it runs
  bool killed_stopped = false;
  // Read ends of its stdout/stderr pipes when its output is relayed, else -1.
  int out_fd = -1, err_fd = -1;
  std::string out_partial, err_partial;  // an unfinished last line
};

struct SpawnRequest {
  std::string path;  // resolved executable
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value"
  bool relay_output = false;     // pipe stdout/stderr back instead of sharing ours
};

// Starts the child (stdin from /dev/null, default signal handling, killed if
// the launcher dies). false with `err` when it cannot run ("PATH: no such file").
bool spawnChild(const SpawnRequest& req, Child& child, std::string& err);

// The launcher's environment with `overrides` replacing same-named variables.
std::vector<std::string> childEnvironment(const std::vector<std::pair<std::string, std::string>>& overrides);

// `name` as execvp would find it: as given when it has a slash, else on PATH.
bool findExecutable(const std::string& name, std::string& path, std::string& err);

// Copies what fd has to `to` a line at a time, each line prefixed; at EOF
// writes any unfinished line, closes fd and sets it to -1.
void relayLines(int& fd, std::string& partial, int to, const std::string& prefix);

std::string signalName(int sig);  // "SIGKILL", or "signal 42"
// "exited with status 3", "was killed by SIGSEGV (core dumped)"
std::string describeWaitStatus(int wait_status);

}  // namespace dtl::rt::launch
