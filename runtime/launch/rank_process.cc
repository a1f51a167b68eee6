// Child processes for the launcher (rank_process.h). Between fork and exec
// the child only makes async-signal-safe calls: the launcher has other
// threads (the store server), so anything that may take a lock is prepared
// before the fork.
#include "runtime/launch/rank_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace dtl::rt::launch {

namespace {

constexpr size_t kMaxPartialLine = 16 * 1024;  // a longer unfinished line is written as it is
std::atomic<int> g_signal_write_fd{-1};
struct sigaction g_old_int, g_old_term, g_old_pipe, g_old_chld;

void onSignal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  int fd = g_signal_write_fd.load();
  if (fd >= 0) (void)!::write(fd, &b, 1);
  errno = saved;
}

void writeAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && errno == EAGAIN) {
      pollfd pf{fd, POLLOUT, 0};
      ::poll(&pf, 1, 100);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      return;  // EPIPE and the like: the reader is gone; drop the output
    }
  }
}

std::string errnoText(int err) { return std::strerror(err); }

}  // namespace

SignalCatcher::~SignalCatcher() {
  if (!installed_) return;
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::sigaction(SIGPIPE, &g_old_pipe, nullptr);
  ::sigaction(SIGCHLD, &g_old_chld, nullptr);
  int w = g_signal_write_fd.exchange(-1);
  ::close(w);
  ::close(read_fd_);
}

bool SignalCatcher::install(std::string& err) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    err = "cannot create a pipe: " + errnoText(errno);
    return false;
  }
  int expected = -1;
  if (!g_signal_write_fd.compare_exchange_strong(expected, fds[1])) {
    ::close(fds[0]);
    ::close(fds[1]);
    err = "another launch is already running in this process";
    return false;
  }
  read_fd_ = fds[0];
  struct sigaction sa{};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
  struct sigaction ignore{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &g_old_pipe);
  struct sigaction dfl{};  // so an inherited SIG_IGN cannot reap the ranks behind waitpid's back
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGCHLD, &dfl, &g_old_chld);
  installed_ = true;
  return true;
}

int SignalCatcher::take() {
  unsigned char b = 0;
  return ::read(read_fd_, &b, 1) == 1 ? b : 0;
}

bool findExecutable(const std::string& name, std::string& path, std::string& err) {
  auto runnable = [](const std::string& p) {
    struct stat st{};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (runnable(name)) {
      path = name;
      return true;
    }
    err = "cannot run " + name + ": " + (::access(name.c_str(), F_OK) == 0 ? "not an executable file" : "no such file");
    return false;
  }
  const char* env_path = std::getenv("PATH");
  std::string dirs = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  size_t at = 0;
  while (at <= dirs.size()) {
    size_t colon = dirs.find(':', at);
    std::string dir = dirs.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (runnable(candidate)) {
      path = candidate;
      return true;
    }
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  err = "cannot find " + name + " on PATH";
  return false;
}

std::vector<std::string> childEnvironment(const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : overrides) replaced = replaced || k == name;
    if (!replaced) env.push_back(std::move(entry));
  }
  for (const auto& [k, v] : overrides) env.push_back(k + "=" + v);
  return env;
}

bool spawnChild(const SpawnRequest& req, Child& child, std::string& err) {
  std::vector<char*> argv, envp;
  for (const std::string& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : req.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int status_pipe[2], out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (::pipe2(status_pipe, O_CLOEXEC) != 0 ||
      (req.relay_output && (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0))) {
    err = "cannot create a pipe: " + errnoText(errno);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      if (fd >= 0) ::close(fd);
    return false;
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    err = "cannot fork: " + errnoText(errno);
    for (int fd : {status_pipe[0], status_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      if (fd >= 0) ::close(fd);
    return false;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the launcher died before the line above
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGQUIT, SIGCHLD}) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    if (req.relay_output) {
      ::dup2(out_pipe[1], 1);
      ::dup2(err_pipe[1], 2);
    }
    // Nothing else the launcher's process has open leaks into the rank (kernel 5.11+; else as it was).
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    ::execve(req.path.c_str(), argv.data(), envp.data());
    int e = errno;
    (void)!::write(status_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so the group exists before we signal it (EACCES after exec is fine)
  ::close(status_pipe[1]);
  if (req.relay_output) {
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
  }
  int e = 0;
  ssize_t n;
  do n = ::read(status_pipe[0], &e, sizeof e);
  while (n < 0 && errno == EINTR);
  ::close(status_pipe[0]);
  if (n == sizeof e) {
    int ignored;
    ::waitpid(pid, &ignored, 0);
    if (req.relay_output) {
      ::close(out_pipe[0]);
      ::close(err_pipe[0]);
    }
    err = "cannot run " + req.path + ": " + errnoText(e);
    return false;
  }
  child.pid = pid;
  child.exited = false;
  if (req.relay_output) {
    child.out_fd = out_pipe[0];
    child.err_fd = err_pipe[0];
    ::fcntl(child.out_fd, F_SETFL, O_NONBLOCK);
    ::fcntl(child.err_fd, F_SETFL, O_NONBLOCK);
  }
  return true;
}

void relayLines(int& fd, std::string& partial, int to, const std::string& prefix) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // EOF (or an error, treated alike)
      if (!partial.empty()) {
        std::string line = prefix + partial + "\n";
        writeAll(to, line.data(), line.size());
        partial.clear();
      }
      ::close(fd);
      fd = -1;
      return;
    }
    partial.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    std::string lines;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1)
      lines += prefix + partial.substr(start, nl + 1 - start);
    partial.erase(0, start);
    if (partial.size() > kMaxPartialLine) {
      lines += prefix + partial + "\n";
      partial.clear();
    }
    if (!lines.empty()) writeAll(to, lines.data(), lines.size());
  }
}

std::string signalName(int sig) {
  static const std::pair<int, const char*> kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"},
      {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},
      {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"}, {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
      {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},   {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"},
      {SIGTTIN, "SIGTTIN"}, {SIGTTOU, "SIGTTOU"}, {SIGCONT, "SIGCONT"}};
  for (const auto& [n, name] : kNames)
    if (n == sig) return name;
  return "signal " + std::to_string(sig);
}

std::string describeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    std::string s = "was killed by " + signalName(WTERMSIG(wait_status));
    if (WCOREDUMP(wait_status)) s += " (core dumped)";
    return s;
  }
  return "ended with wait status " + std::to_string(wait_status);
}

}  // namespace dtl::rt::launch
