#include "compiler/codegen/object_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/xxhash.h"

namespace dtl::codegen {

namespace {

constexpr char kMagic[8] = {'D', 'T', 'L', 'K', 'O', 'B', 'J', '1'};
constexpr size_t kHeader = sizeof kMagic + 16;  // magic, length, checksum
constexpr const char* kSuffix = ".o";

std::string pathOf(const ObjectCache& c, const std::string& key) { return c.dir + "/" + key + kSuffix; }

void makeDirs(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at)
    if (at == dir.size() || dir[at] == '/') ::mkdir(dir.substr(0, at).c_str(), 0755);
}

void putU64(std::string& s, uint64_t v) {
  for (int k = 0; k < 8; ++k) s.push_back(static_cast<char>(v >> (8 * k)));
}
uint64_t getU64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int k = 0; k < 8; ++k) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + static_cast<size_t>(k)])) << (8 * k);
  return v;
}

// Oldest first by modification time (a read marks a file used), until the folder fits.
void trim(const ObjectCache& c) {
  DIR* d = ::opendir(c.dir.c_str());
  if (!d) return;
  struct Entry {
    std::string path;
    int64_t bytes;
    struct timespec mtime;
  };
  std::vector<Entry> files;
  int64_t total = 0;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 3 || name.compare(name.size() - 2, 2, kSuffix) != 0) continue;
    struct stat st{};
    std::string path = c.dir + "/" + name;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    files.push_back({path, static_cast<int64_t>(st.st_size), st.st_mtim});
    total += st.st_size;
  }
  ::closedir(d);
  if (total <= c.max_bytes) return;
  std::sort(files.begin(), files.end(), [](const Entry& a, const Entry& b) {
    return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec : a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  for (const Entry& f : files) {
    if (total <= c.max_bytes) break;
    if (::unlink(f.path.c_str()) == 0) total -= f.bytes;
  }
}

}  // namespace

std::string defaultCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/dtl";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.cache/dtl";
  return "";
}

std::optional<std::string> readCachedObject(const ObjectCache& c, const std::string& key) {
  if (c.dir.empty()) return std::nullopt;
  const std::string path = pathOf(c, key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream all;
  all << in.rdbuf();
  const std::string s = all.str();
  if (s.size() < kHeader || std::memcmp(s.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  const uint64_t length = getU64(s, sizeof kMagic), sum = getU64(s, sizeof kMagic + 8);
  if (length != s.size() - kHeader || xxh64(s.data() + kHeader, length, 0) != sum) return std::nullopt;
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // used now: the last to be evicted
  return s.substr(kHeader);
}

void writeCachedObject(const ObjectCache& c, const std::string& key, const std::string& object) {
  if (c.dir.empty()) return;
  makeDirs(c.dir);
  std::string s(kMagic, sizeof kMagic);
  putU64(s, object.size());
  putU64(s, xxh64(object.data(), object.size(), 0));
  s += object;
  std::string tmp = c.dir + "/." + key + ".XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return;
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool whole = done == s.size() && ::fchmod(fd, 0644) == 0;
  if (::close(fd) != 0 || !whole || ::rename(tmp.c_str(), pathOf(c, key).c_str()) != 0) {
    ::unlink(tmp.c_str());
    return;
  }
  trim(c);
}

}  // namespace dtl::codegen
