// How much memory this machine can still give a job: the smaller of the
// kernel's MemAvailable and the room the process's cgroup leaves (v2
// memory.max − memory.current, at every level up to the root; v1
// memory.limit_in_bytes − memory.usage_in_bytes). `dtlc run` compares the
// plan's memory against it before starting any rank, so a job that cannot
// fit is refused with the plan's numbers instead of being OOM-killed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtl::rt::launch {

// One cgroup's files as read: the limit ("max" or bytes) and the usage.
struct CgroupFiles {
  std::string dir;    // where they were read, for the message
  std::string limit;  // memory.max or memory.limit_in_bytes
  std::string usage;  // memory.current or memory.usage_in_bytes
  bool v1 = false;
};

struct HostMemory {
  int64_t available = -1;  // bytes; -1 when nothing could be read
  std::string what;        // "MemAvailable" or "the cgroup /sys/fs/cgroup/x (memory.max 24.0 GiB, 3.1 GiB in use)"
};

// MemAvailable of /proc/meminfo's text, in bytes; -1 when absent.
int64_t memAvailable(const std::string& meminfo);
// The smaller of MemAvailable and every limited cgroup's limit − usage. An
// unlimited cgroup ("max", or v1's near-2^63 value) and unreadable files do
// not count.
HostMemory availableMemory(const std::string& meminfo, const std::vector<CgroupFiles>& cgroups);
// The same from /proc/meminfo, /proc/self/cgroup and /sys/fs/cgroup.
HostMemory readHostMemory();

}  // namespace dtl::rt::launch
