// The probes' memory of the gzip files this process probed (probe_internal.h).
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "runtime/data/probe_internal.h"

namespace dtl::rt::data::detail {

namespace {

struct Seen {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t bytes = 0;  // a hash of the file's compressed bytes
  ProbeResult result;
};

// The file's compressed bytes, hashed a word at a time (~100x cheaper than
// inflating them); 0 when it cannot be read or is not gzip.
uint64_t gzipBytesHash(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return 0;
  std::vector<uint64_t> buf(1 << 17);
  uint64_t h = 0x9e3779b97f4a7c15ull;
  bool first = true, gzip = false;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size() * sizeof(uint64_t), f)) > 0) {
    if (first) {
      const auto* b = reinterpret_cast<const unsigned char*>(buf.data());
      gzip = n >= 2 && b[0] == 0x1f && b[1] == 0x8b;
      first = false;
      if (!gzip) break;
    }
    if (n % 8) std::memset(reinterpret_cast<char*>(buf.data()) + n, 0, 8 - n % 8);  // the tail's word, zero-padded
    for (size_t k = 0; k < (n + 7) / 8; ++k) h = ((h ^ buf[k]) * 0xff51afd7ed558ccdull) ^ (h >> 29);
    h ^= n;
  }
  std::fclose(f);
  return gzip && h != 0 ? h : 0;
}

std::mutex g_mu;
std::map<std::string, Seen>& seenFiles() {
  static auto* seen = new std::map<std::string, Seen>;  // never destroyed: probes may run during exit
  return *seen;
}
std::atomic<bool> g_keep{false};

}  // namespace

// path "" : every file's.
void forgetInflated(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [id, seen] : seenFiles())
    if (path.empty() || (id.size() > path.size() && id.compare(id.size() - path.size(), path.size(), path) == 0 &&
                         id[id.size() - path.size() - 1] == '\n'))
      seen.result.inflated.reset();
}

ProbeResult remembered(const std::string& key, const std::string& path, const std::function<ProbeResult()>& probe) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return probe();
  const uint64_t bytes = gzipBytesHash(path);
  if (bytes == 0) return probe();  // not gzip: its probe reads headers, or counts what a hash would read anyway
  std::map<std::string, Seen>& seen = seenFiles();
  const std::string id = key + '\n' + path;
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = seen.find(id);
    if (it != seen.end() && it->second.dev == st.st_dev && it->second.ino == st.st_ino &&
        it->second.size == st.st_size && it->second.mtime_ns == mtime_ns && it->second.bytes == bytes)
      return it->second.result;
  }
  ProbeResult r = probe();
  std::lock_guard<std::mutex> lock(g_mu);
  seen[id] = Seen{st.st_dev, st.st_ino, st.st_size, mtime_ns, bytes, r};
  return r;
}

}  // namespace dtl::rt::data::detail

namespace dtl::rt::data {

void keepInflatedData(bool keep) {
  detail::g_keep = keep;
  if (!keep) detail::forgetInflated("");  // what no loader adopted is let go
}
bool keepingInflatedData() { return detail::g_keep; }

}  // namespace dtl::rt::data
