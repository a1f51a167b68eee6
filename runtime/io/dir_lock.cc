// DirLock: flock on DIR/.lock (open file descriptions conflict even within one
// process, so a test can play the second job), then the owner text written
// into it; a loser reads the text to name the holder.
#include "runtime/io/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "runtime/io/file_ops.h"

namespace dtl::rt::io {

std::string lockOwnerText() {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  // The process's own start would need /proc; the lock's taking is what a reader needs.
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return "pid " + std::to_string(::getpid()) + " on host " + host + ", started " + when;
}

Status DirLock::acquire(const std::string& dir) {
  release();
  if (Status s = makeDirs(dir); !s.ok) return s;
  std::string path = dir + "/.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ioError(path, "open the lock file", errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err != EWOULDBLOCK) return ioError(path, "lock", err);
    std::string holder;
    readWholeFile(path, holder);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return Status::error(dir + ": in use by another job (" + (holder.empty() ? "its owner is not recorded yet" : holder) +
                         "); two jobs writing checkpoints into one folder would destroy each other's\n"
                         "hint: wait for that job to finish, or give this run another `checkpoint` folder");
  }
  std::string text = lockOwnerText() + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    int err = errno;
    ::close(fd);
    return ioError(path, "write the lock file", err);
  }
  fd_ = fd;
  return {};
}

void DirLock::release() {
  if (fd_ < 0) return;
  // The file stays: removing it would let a third job lock a new inode while a second still waits on the old one.
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
  fd_ = -1;
}

}  // namespace dtl::rt::io
