// The cores this process may run on: its affinity mask (taskset, a cgroup
// cpuset, Slurm's binding), not every core of the machine. Thread counts and
// spin-or-sleep decisions are made against this.
#pragma once

#include <sched.h>

#include <thread>

namespace dtl {

inline int usableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace dtl
