// See shm_segment.h.
#include "runtime/comm/shm_segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dtl::rt::comm {
namespace {

constexpr uint64_t kMagic = 0x64746c2d73686d31ull;  // "dtl-shm1"
constexpr size_t kPage = 4096;

struct Header {
  uint64_t magic;
  uint64_t bytes;
  int32_t size;
  uint64_t chunkBytes;
  uint64_t channelBytes;
  uint64_t smallBytes;
};

size_t roundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

struct Offsets {
  size_t control, staging, channel, channelStride, total;
};

Offsets offsetsFor(const ShmGeometry& g) {
  Offsets o;
  o.control = kPage;
  o.staging = roundUp(o.control + sizeof(ShmRankControl) * g.size, kPage);
  o.channel = roundUp(o.staging + 2 * g.chunkBytes * g.size, kPage);
  o.channelStride = roundUp(128 + g.channelBytes, kPage);
  o.total = o.channel + o.channelStride * g.size * g.size;
  return o;
}

std::string errnoText(const std::string& what, const std::string& name) {
  return "shared memory: " + what + " '" + name + "' failed: " + std::strerror(errno);
}

}  // namespace

ShmSegment::ShmSegment(void* base, size_t bytes, const ShmGeometry& g) : base_(base), bytes_(bytes), g_(g) {
  Offsets o = offsetsFor(g);
  controlOff_ = o.control;
  stagingOff_ = o.staging;
  channelOff_ = o.channel;
  channelStride_ = o.channelStride;
}

ShmSegment::~ShmSegment() { munmap(base_, bytes_); }

Status ShmSegment::create(const std::string& name, const ShmGeometry& g, std::unique_ptr<ShmSegment>& out) {
  Offsets o = offsetsFor(g);
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return Status::error(errnoText("creating", name));
  if (ftruncate(fd, o.total) != 0) {
    Status s = Status::error(errnoText("sizing (" + std::to_string(o.total >> 20) + " MiB)", name));
    close(fd);
    shm_unlink(name.c_str());
    return s;
  }
  void* base = mmap(nullptr, o.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    return Status::error(errnoText("mapping", name));
  }
  auto* h = static_cast<Header*>(base);
  h->bytes = o.total;
  h->size = g.size;
  h->chunkBytes = g.chunkBytes;
  h->channelBytes = g.channelBytes;
  h->smallBytes = g.smallBytes;
  std::atomic_ref<uint64_t>(h->magic).store(kMagic, std::memory_order_release);
  out.reset(new ShmSegment(base, o.total, g));
  return {};
}

Status ShmSegment::open(const std::string& name, int expectedSize, std::unique_ptr<ShmSegment>& out) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return Status::error(errnoText("opening", name) + " (is this rank on the same machine as rank 0?)");
  struct stat st;
  if (fstat(fd, &st) != 0 || size_t(st.st_size) < kPage) {
    close(fd);
    return Status::error("shared memory: segment '" + name + "' is truncated");
  }
  void* base = mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return Status::error(errnoText("mapping", name));
  auto* h = static_cast<Header*>(base);
  ShmGeometry g{h->size, h->chunkBytes, h->channelBytes, h->smallBytes};
  if (std::atomic_ref<uint64_t>(h->magic).load(std::memory_order_acquire) != kMagic || h->bytes != size_t(st.st_size) ||
      offsetsFor(g).total != h->bytes || h->size != expectedSize) {
    munmap(base, st.st_size);
    return Status::error("shared memory: segment '" + name + "' was made for a group of size " +
                         std::to_string(h->size) + ", not " + std::to_string(expectedSize));
  }
  out.reset(new ShmSegment(base, st.st_size, g));
  return {};
}

void ShmSegment::unlink(const std::string& name) { shm_unlink(name.c_str()); }

ShmRankControl& ShmSegment::control(int r) const {
  return reinterpret_cast<ShmRankControl*>(static_cast<char*>(base_) + controlOff_)[r];
}

float* ShmSegment::staging(int r, int buffer) const {
  return reinterpret_cast<float*>(static_cast<char*>(base_) + stagingOff_ + (2 * r + buffer) * g_.chunkBytes);
}

ShmChannel& ShmSegment::channel(int src, int dst) const {
  return *reinterpret_cast<ShmChannel*>(static_cast<char*>(base_) + channelOff_ +
                                        channelStride_ * (size_t(src) * g_.size + dst));
}

void ringBell(ShmRankControl& c) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!c.sleeping.load(std::memory_order_seq_cst)) return;
  c.bell.fetch_add(1, std::memory_order_seq_cst);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&c.bell), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

void futexWait(std::atomic<uint32_t>& word, uint32_t seen, std::chrono::microseconds maxWait) {
  struct timespec ts;
  ts.tv_sec = maxWait.count() / 1000000;
  ts.tv_nsec = (maxWait.count() % 1000000) * 1000;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

}  // namespace dtl::rt::comm
