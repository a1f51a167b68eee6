#include "runtime/launch/host_memory.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace dtl::rt::launch {

namespace {

// A limit at or above this is "no limit" (cgroup v1 writes 2^63 rounded down to a page).
constexpr int64_t kUnlimited = int64_t{1} << 60;

// A whole non-negative number of bytes ("24\n"); -1 otherwise.
int64_t bytesIn(const std::string& text) {
  const char* s = text.c_str();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (end == s || errno == ERANGE || v < 0) return -1;
  while (*end == ' ' || *end == '\n' || *end == '\t') ++end;
  return *end ? -1 : v;
}

std::string gib(int64_t bytes) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30) << " GiB";
  return s.str();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  if (in) ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int64_t memAvailable(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string key, unit;
  long long value = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    if (!(l >> key >> value) || key != "MemAvailable:" || value < 0) continue;
    l >> unit;
    return unit == "kB" ? value * 1024 : unit.empty() ? value : -1;
  }
  return -1;
}

HostMemory availableMemory(const std::string& meminfo, const std::vector<CgroupFiles>& cgroups) {
  HostMemory h;
  h.available = memAvailable(meminfo);
  if (h.available >= 0) h.what = "MemAvailable";
  for (const CgroupFiles& c : cgroups) {
    int64_t limit = bytesIn(c.limit), usage = bytesIn(c.usage);
    if (limit < 0 || limit >= kUnlimited || usage < 0) continue;
    int64_t room = limit > usage ? limit - usage : 0;
    if (h.available >= 0 && room >= h.available) continue;
    h.available = room;
    h.what = "the cgroup " + c.dir + " (" + (c.v1 ? "memory.limit_in_bytes " : "memory.max ") + gib(limit) + ", " +
             gib(usage) + " in use)";
  }
  return h;
}

HostMemory readHostMemory() {
  std::vector<CgroupFiles> cgroups;
  // cgroup v2: "0::/a/b" names this process' group; each level up may limit it too.
  std::string v2, v1;
  std::istringstream self(slurp("/proc/self/cgroup"));
  for (std::string line; std::getline(self, line);) {
    if (line.rfind("0::", 0) == 0) v2 = line.substr(3);
    size_t at = line.find(":memory:");
    if (at != std::string::npos) v1 = line.substr(at + 8);
  }
  for (std::string path = v2;; path = path.substr(0, path.find_last_of('/'))) {
    std::string dir = "/sys/fs/cgroup" + (path == "/" ? "" : path);
    cgroups.push_back({dir, slurp(dir + "/memory.max"), slurp(dir + "/memory.current"), false});
    if (path.empty() || path == "/" || path.find('/') == std::string::npos) break;
  }
  // cgroup v1: inside a container the group is usually mounted as the root.
  for (const std::string& dir : {"/sys/fs/cgroup/memory" + (v1 == "/" ? "" : v1), std::string("/sys/fs/cgroup/memory")})
    cgroups.push_back({dir, slurp(dir + "/memory.limit_in_bytes"), slurp(dir + "/memory.usage_in_bytes"), true});
  return availableMemory(slurp("/proc/meminfo"), cgroups);
}

}  // namespace dtl::rt::launch
