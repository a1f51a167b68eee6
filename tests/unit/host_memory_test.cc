// What the machine has left for a job (runtime/launch/host_memory.h), from
// made-up /proc/meminfo and cgroup file contents.
#include "runtime/launch/host_memory.h"

#include <gtest/gtest.h>

namespace dtl::rt::launch {
namespace {

const std::string kMeminfo =
    "MemTotal:       32768000 kB\n"
    "MemFree:         1024000 kB\n"
    "MemAvailable:   20000000 kB\n"
    "Buffers:          102400 kB\n";

TEST(HostMemory, MemAvailableIsReadInBytes) {
  EXPECT_EQ(memAvailable(kMeminfo), 20000000ll * 1024);
  EXPECT_EQ(memAvailable("MemTotal: 1 kB\n"), -1);
  EXPECT_EQ(memAvailable(""), -1);
}

TEST(HostMemory, WithoutACgroupLimitMemAvailableCounts) {
  HostMemory h = availableMemory(kMeminfo, {{"/sys/fs/cgroup", "max\n", "123456\n", false},
                                            {"/sys/fs/cgroup/memory", "9223372036854771712\n", "4671180800\n", true}});
  EXPECT_EQ(h.available, 20000000ll * 1024);
  EXPECT_EQ(h.what, "MemAvailable");
}

TEST(HostMemory, ATighterCgroupLimitWins) {
  // 24 GiB limit with 23 GiB in use leaves 1 GiB, less than MemAvailable.
  HostMemory h = availableMemory(kMeminfo, {{"/sys/fs/cgroup/job", "25769803776\n", "24696061952\n", false}});
  EXPECT_EQ(h.available, 1ll << 30);
  EXPECT_EQ(h.what, "the cgroup /sys/fs/cgroup/job (memory.max 24.0 GiB, 23.0 GiB in use)");
  // The smallest room over every level, v1 included.
  h = availableMemory(kMeminfo, {{"/sys/fs/cgroup/a/b", "max", "1", false},
                                 {"/sys/fs/cgroup/a", "4294967296", "1073741824", false},
                                 {"/sys/fs/cgroup/memory", "2147483648", "1073741824", true}});
  EXPECT_EQ(h.available, 1ll << 30);
  EXPECT_EQ(h.what, "the cgroup /sys/fs/cgroup/memory (memory.limit_in_bytes 2.0 GiB, 1.0 GiB in use)");
  // Usage past the limit leaves nothing.
  EXPECT_EQ(availableMemory(kMeminfo, {{"/c", "100", "200", false}}).available, 0);
}

TEST(HostMemory, UnreadableFilesDoNotCount) {
  EXPECT_EQ(availableMemory(kMeminfo, {{"/c", "", "", false}, {"/d", "garbage", "1", false}}).available,
            20000000ll * 1024);
  HostMemory none = availableMemory("", {});
  EXPECT_EQ(none.available, -1);
  // Only a cgroup: it still bounds the job.
  EXPECT_EQ(availableMemory("", {{"/c", "1000", "10", false}}).available, 990);
}

TEST(HostMemory, ThisMachineHasSomeMemory) {
  HostMemory h = readHostMemory();
  EXPECT_GT(h.available, 0) << h.what;
  EXPECT_FALSE(h.what.empty());
}

}  // namespace
}  // namespace dtl::rt::launch
