// POSIX calls behind file_ops.h. Every step that can fail a write first asks
// the fault hook, so tests can make any one of them fail (or crash there).
#include "runtime/io/file_ops.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

namespace dtl::rt::io {

namespace {

FaultHook& hook() {
  static FaultHook h;
  return h;
}

// The errno the hook injects for `op` on `path`, or 0.
int injected(const char* op, const std::string& path) { return hook() ? hook()(op, path) : 0; }

bool writeAll(int fd, const void* data, size_t size, int& err) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void setFaultHookForTesting(FaultHook h) { hook() = std::move(h); }

Status ioError(const std::string& path, const std::string& what, int err) {
  return Status::error(path + ": cannot " + what + ": " + std::strerror(err));
}

std::string parentDir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status writeFileAtomic(const std::string& path, const std::vector<Chunk>& chunks) {
  std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  int err = injected("open", tmp);
  int fd = err ? -1 : ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ioError(path, "create " + tmp, err ? err : errno);
  auto abandon = [&](const std::string& what, int e) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return ioError(path, what, e);
  };
  for (const Chunk& c : chunks) {
    if ((err = injected("write", tmp))) return abandon("write " + tmp, err);
    if (!writeAll(fd, c.data, c.size, err)) return abandon("write " + tmp, err);
  }
  if ((err = injected("fsync", tmp)) || (::fsync(fd) != 0 && (err = errno)))
    return abandon("fsync " + tmp, err);
  err = injected("close", tmp);
  int closed = ::close(fd);
  fd = -1;
  if (err || (closed != 0 && (err = errno))) return abandon("close " + tmp, err);
  if ((err = injected("rename", path)) || (::rename(tmp.c_str(), path.c_str()) != 0 && (err = errno)))
    return abandon("rename " + tmp + " into place", err);
  return syncDir(parentDir(path));
}

Status syncDir(const std::string& dir) {
  int err = injected("fsync-dir", dir);
  if (err) return ioError(dir, "fsync the directory", err);
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ioError(dir, "open the directory to fsync it", errno);
  // Some file systems cannot fsync a directory (EINVAL); their renames are as durable as they get.
  if (::fsync(fd) != 0 && errno != EINVAL) {
    err = errno;
    ::close(fd);
    return ioError(dir, "fsync the directory", err);
  }
  ::close(fd);
  return {};
}

Status makeDirs(const std::string& dir) {
  std::string prefix;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    prefix = dir.substr(0, pos);
    if (prefix.empty()) continue;
    struct stat st;
    if (::stat(prefix.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return ioError(prefix, "create a directory there", ENOTDIR);
      continue;
    }
    int err = injected("mkdir", prefix);
    if (err || (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST && (err = errno)))
      return ioError(prefix, "create the directory", err);
  }
  return {};
}

Status renamePath(const std::string& from, const std::string& to) {
  int err = injected("rename", to);
  if (err || (::rename(from.c_str(), to.c_str()) != 0 && (err = errno)))
    return ioError(from, "rename to " + to, err);
  return {};
}

Status exchangePaths(const std::string& a, const std::string& b, bool* unsupported) {
  *unsupported = false;
  int err = injected("exchange", b);
  if (!err && ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) != 0) err = errno;
  if (!err) return {};
  *unsupported = err == EINVAL || err == ENOSYS || err == ENOTSUP;
  return ioError(a, "exchange with " + b, err);
}

void removeTreeQuietly(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

Status readWholeFile(const std::string& path, std::string& out) {
  out.clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ioError(path, "open", errno);
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ioError(path, "read", err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return {};
}

}  // namespace dtl::rt::io
