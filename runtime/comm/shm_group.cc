// See shm_group.h. Collectives here; waiting, barriers and point-to-point
// transfers in shm_group_wait.cc.
#include <algorithm>

#include "runtime/comm/shm_group.h"
#include "runtime/comm/shm_reduce.h"

namespace dtl::rt::comm {
namespace {

enum OpCode : uint64_t { kAllReduce = 1, kReduceScatter, kAllGather, kBroadcast, kAllToAll, kBarrier };

uint64_t signature(OpCode op, int64_t n, int root = 0) {
  return (uint64_t(op) << 56) | (uint64_t(root & 0xff) << 48) | (uint64_t(n) & 0xffffffffffffull);
}

size_t roundDown16(size_t x) { return x / 16 * 16; }

}  // namespace

// Slice j of a k-float chunk starts here; starts are multiples of 16 floats.
size_t ShmGroup::sliceStart(size_t k, int j) const {
  if (j >= size_) return k;
  return std::min(k, roundDown16(k * j / size_));
}

Status ShmGroup::allReduce(float* data, int64_t n) {
  if (n == 0 || size_ == 1) return {};
  const size_t total = n;
  std::vector<const float*>& p = srcs_;
  p.resize(size_);
  if (total <= smallFloats_) {
    // Every rank stages everything and sums all of it in rank order.
    int b = phase_++ & 1;
    copyFloats(seg_->staging(rank_, b), data, total);
    if (Status s = phaseBarrier("allReduce", signature(kAllReduce, n), b); !s.ok) return s;
    for (int j = 0; j < size_; ++j) p[j] = seg_->staging(j, b);  // not `data`: it is the output
    reduceSum(data, nullptr, p[0], p.data() + 1, size_ - 1, total);
    return {};
  }
  for (size_t at = 0; at < total; at += chunkFloats_) {
    const size_t k = std::min(chunkFloats_, total - at);
    const size_t lo = sliceStart(k, rank_), hi = sliceStart(k, rank_ + 1);
    float* chunk = data + at;
    int b = phase_++ & 1;
    float* mine = seg_->staging(rank_, b);
    copyFloats(mine, chunk, lo);
    copyFloats(mine + hi, chunk + hi, k - hi);
    Status s = at == 0 ? phaseBarrier("allReduce", signature(kAllReduce, n), b) : barrier("allReduce");
    if (!s.ok) return s;
    // Own slice first (it is also the output), then the others in rank order.
    p[0] = chunk + lo;
    for (int j = 0, at = 1; j < size_; ++j)
      if (j != rank_) p[at++] = seg_->staging(j, b) + lo;
    reduceSum(chunk + lo, mine + lo, p[0], p.data() + 1, size_ - 1, hi - lo);
    if (s = barrier("allReduce"); !s.ok) return s;
    for (int j = 0; j < size_; ++j) {
      if (j == rank_) continue;
      size_t jlo = sliceStart(k, j), jhi = sliceStart(k, j + 1);
      copyFloats(chunk + jlo, seg_->staging(j, b) + jlo, jhi - jlo);
    }
  }
  return {};
}

Status ShmGroup::reduceScatter(const float* in, float* out, int64_t n) {
  if (n == 0) return {};
  if (size_ == 1) return copyFloats(out, in, n), Status{};
  const size_t total = n, stride = roundDown16(chunkFloats_ / size_);
  std::vector<const float*>& p = srcs_;
  p.resize(size_);
  for (size_t at = 0; at < total; at += stride) {
    const size_t k = std::min(stride, total - at);
    int b = phase_++ & 1;
    float* mine = seg_->staging(rank_, b);
    for (int j = 0; j < size_; ++j)
      if (j != rank_) copyFloats(mine + j * stride, in + j * total + at, k);
    Status s = at == 0 ? phaseBarrier("reduceScatter", signature(kReduceScatter, n), b) : barrier("reduceScatter");
    if (!s.ok) return s;
    for (int j = 0; j < size_; ++j)
      p[j] = j == rank_ ? in + rank_ * total + at : seg_->staging(j, b) + rank_ * stride;
    reduceSum(out + at, nullptr, p[0], p.data() + 1, size_ - 1, k);
  }
  return {};
}

Status ShmGroup::allGather(const float* in, float* out, int64_t n) {
  if (n == 0) return {};
  const size_t total = n;
  copyFloats(out + rank_ * total, in, total);
  for (size_t at = 0; size_ > 1 && at < total; at += chunkFloats_) {
    const size_t k = std::min(chunkFloats_, total - at);
    int b = phase_++ & 1;
    copyFloats(seg_->staging(rank_, b), in + at, k);
    Status s = at == 0 ? phaseBarrier("allGather", signature(kAllGather, n), b) : barrier("allGather");
    if (!s.ok) return s;
    for (int j = 0; j < size_; ++j)
      if (j != rank_) copyFloats(out + j * total + at, seg_->staging(j, b), k);
  }
  return {};
}

Status ShmGroup::broadcast(float* data, int64_t n, int root) {
  if (n == 0 || size_ == 1) return {};
  const size_t total = n;
  for (size_t at = 0; at < total; at += chunkFloats_) {
    const size_t k = std::min(chunkFloats_, total - at);
    int b = phase_++ & 1;
    if (rank_ == root) copyFloats(seg_->staging(root, b), data + at, k);
    Status s = at == 0 ? phaseBarrier("broadcast", signature(kBroadcast, n, root), b) : barrier("broadcast");
    if (!s.ok) return s;
    if (rank_ != root) copyFloats(data + at, seg_->staging(root, b), k);
  }
  return {};
}

Status ShmGroup::allToAll(const float* in, float* out, int64_t n) {
  if (n == 0) return {};
  const size_t total = n, stride = roundDown16(chunkFloats_ / size_);
  copyFloats(out + rank_ * total, in + rank_ * total, total);
  for (size_t at = 0; size_ > 1 && at < total; at += stride) {
    const size_t k = std::min(stride, total - at);
    int b = phase_++ & 1;
    float* mine = seg_->staging(rank_, b);
    for (int j = 0; j < size_; ++j)
      if (j != rank_) copyFloats(mine + j * stride, in + j * total + at, k);
    Status s = at == 0 ? phaseBarrier("allToAll", signature(kAllToAll, n), b) : barrier("allToAll");
    if (!s.ok) return s;
    for (int j = 0; j < size_; ++j)
      if (j != rank_) copyFloats(out + j * total + at, seg_->staging(j, b) + rank_ * stride, k);
  }
  return {};
}

Status ShmGroup::barrierOp() {
  if (size_ == 1) return {};
  int b = phase_++ & 1;
  return phaseBarrier("barrier", signature(kBarrier, 0), b);
}

}  // namespace dtl::rt::comm
