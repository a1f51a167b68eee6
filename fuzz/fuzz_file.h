// For fuzz targets whose reader takes a path, not bytes: the input is written
// to a file in a private temporary folder (one per process, removed at exit)
// and the reader opens it by name. Only the targets include this.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace dtl::fuzz {

// The folder, made on first use under $TMPDIR (or /tmp).
inline const std::string& scratchDir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/dtl-fuzz-XXXXXX";
    if (!::mkdtemp(pattern.data())) {
      std::perror("fuzz: mkdtemp");
      std::abort();
    }
    static std::string keep = pattern;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(keep, ec);
    });
    return pattern;
  }();
  return dir;
}

// Writes data[0, size) to scratchDir()/name (replacing it) and returns its path.
inline std::string writeInput(const std::string& name, const void* data, size_t size) {
  std::string path = scratchDir() + "/" + name;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::perror(("fuzz: cannot write " + path).c_str());
    std::abort();
  }
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n <= 0) {
      std::perror(("fuzz: cannot write " + path).c_str());
      std::abort();
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  ::close(fd);
  return path;
}

// A broken invariant in a target: print it and abort, so libFuzzer keeps the input.
[[noreturn]] inline void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz: invariant broken: %s\n", what.c_str());
  std::abort();
}

}  // namespace dtl::fuzz
