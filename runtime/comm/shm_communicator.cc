// The shared-memory Communicator: bootstrap through the store (rank 0
// creates a segment under a random name, publishes it, and unlinks it once
// every rank has mapped it), and a worker thread that runs collectives in
// issue order through ShmGroup. Sends and recvs are posted as soon as the
// worker sees them, even while a collective waits, and progress whenever the
// worker waits, so exchanges never deadlock on the FIFO. A send completes
// when its last byte is in the channel. Any failure breaks the group: later
// operations fail at once with the first error.
#include <unistd.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "runtime/comm/shm_communicator.h"
#include "runtime/comm/shm_group.h"
#include "runtime/comm/work.h"

namespace dtl::rt::comm {
namespace {

using Clock = std::chrono::steady_clock;

struct ShmOp {
  enum Kind { kCollective, kSend, kRecv } kind = kCollective;
  const char* name = "";
  std::function<Status(ShmGroup&)> run;
  ShmGroup::Transfer transfer;
  Clock::time_point deadline;
  std::shared_ptr<OpState> state;
};

class ShmCommunicator : public Communicator {
 public:
  ShmCommunicator(const GroupOptions& o, std::unique_ptr<ShmSegment> seg, const ShmTuning& t)
      : o_(o),
        sends_(o.size),
        recvs_(o.size),
        group_(
            std::move(seg), o.rank, o.timeout, t, [this] { return service(); },
            [this] { return stop_.load(); }),
        thread_([this] { loop(); }) {}

  ~ShmCommunicator() override {
    stop_ = true;
    group_.wakeSelf();
    thread_.join();
  }

  const char* backend() const override { return "shm"; }
  int rank() const override { return o_.rank; }
  int size() const override { return o_.size; }

  std::unique_ptr<Work> allReduce(float* data, int64_t n) override {
    return collective("allReduce", [=](ShmGroup& g) { return g.allReduce(data, n); });
  }
  std::unique_ptr<Work> reduceScatter(const float* in, float* out, int64_t n) override {
    return collective("reduceScatter", [=](ShmGroup& g) { return g.reduceScatter(in, out, n); });
  }
  std::unique_ptr<Work> allGather(const float* in, float* out, int64_t n) override {
    return collective("allGather", [=](ShmGroup& g) { return g.allGather(in, out, n); });
  }
  std::unique_ptr<Work> broadcast(float* data, int64_t n, int root) override {
    if (root < 0 || root >= o_.size) return badPeer("broadcast", root);
    return collective("broadcast", [=](ShmGroup& g) { return g.broadcast(data, n, root); });
  }
  std::unique_ptr<Work> allToAll(const float* in, float* out, int64_t n) override {
    return collective("allToAll", [=](ShmGroup& g) { return g.allToAll(in, out, n); });
  }
  std::unique_ptr<Work> send(const float* data, int64_t n, int peer, int tag) override {
    return pointToPoint(ShmOp::kSend, const_cast<float*>(data), n, peer, tag);
  }
  std::unique_ptr<Work> recv(float* data, int64_t n, int peer, int tag) override {
    return pointToPoint(ShmOp::kRecv, data, n, peer, tag);
  }
  Status barrier() override {
    return collective("barrier", [](ShmGroup& g) { return g.barrierOp(); })->wait();
  }

 private:
  std::unique_ptr<Work> badPeer(const char* op, int peer) {
    return finishedWork(Status::error("shared-memory " + std::string(op) + ": rank " + std::to_string(peer) +
                                      " is not in the group (size " + std::to_string(o_.size) + ")"));
  }

  std::unique_ptr<Work> collective(const char* name, std::function<Status(ShmGroup&)> run) {
    ShmOp op;
    op.name = name;
    op.run = std::move(run);
    return enqueue(std::move(op));
  }

  std::unique_ptr<Work> pointToPoint(ShmOp::Kind kind, float* data, int64_t n, int peer, int tag) {
    const char* name = kind == ShmOp::kSend ? "send" : "recv";
    if (peer < 0 || peer >= o_.size || peer == o_.rank) return badPeer(name, peer);
    if (n == 0) return finishedWork({});
    ShmOp op;
    op.kind = kind;
    op.name = name;
    op.transfer.data = reinterpret_cast<uint8_t*>(data);
    op.transfer.bytes = n * sizeof(float);
    op.transfer.peer = peer;
    op.transfer.tag = tag;
    op.deadline = Clock::now() + o_.timeout;
    return enqueue(std::move(op));
  }

  std::unique_ptr<Work> enqueue(ShmOp op) {
    op.state = std::make_shared<OpState>();
    auto work = std::make_unique<StateWork>(op.state);
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(op));
      submitted_.fetch_add(1, std::memory_order_release);
    }
    group_.wakeSelf();
    return work;
  }

  // Worker thread from here on.

  Status brokenError(const char* name) const {
    return Status::error("shared-memory " + std::string(name) + " not run: an earlier operation failed: " + broken_);
  }

  void fail(ShmOp& op, Status s) {
    if (broken_.empty()) broken_ = s.message;
    op.state->finish(std::move(s));
  }

  // Takes newly submitted operations: collectives queue up, transfers are posted.
  bool takeSubmitted() {
    if (submitted_.load(std::memory_order_acquire) == taken_) return false;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& op : queue_) {
      if (op.kind == ShmOp::kCollective)
        collectives_.push_back(std::move(op));
      else
        (op.kind == ShmOp::kSend ? sends_ : recvs_)[op.transfer.peer].push_back(std::move(op));
      ++taken_;
    }
    queue_.clear();
    return true;
  }

  // Moves data for the oldest send to and recv from each peer.
  bool progressTransfers() {
    bool moved = false;
    for (int p = 0; p < o_.size; ++p) {
      while (!sends_[p].empty()) {
        ShmOp& op = sends_[p].front();
        if (!broken_.empty()) {
          op.state->finish(brokenError("send"));
        } else {
          moved |= group_.pushSend(op.transfer);
          if (op.transfer.done < op.transfer.bytes) break;
          op.state->finish({});
        }
        sends_[p].pop_front();
      }
      while (!recvs_[p].empty()) {
        ShmOp& op = recvs_[p].front();
        Status error;
        if (!broken_.empty()) {
          op.state->finish(brokenError("recv"));
        } else {
          moved |= group_.pullRecv(op.transfer, error);
          if (!error.ok) {
            fail(op, error);
          } else {
            if (op.transfer.done < op.transfer.bytes || !op.transfer.headerDone) break;
            op.state->finish({});
          }
        }
        recvs_[p].pop_front();
      }
    }
    return moved;
  }

  bool service() {
    bool took = takeSubmitted();
    return progressTransfers() || took;
  }

  // Fails transfers past their deadline or whose peer's process is gone. A
  // peer that sent its last message and exited is no error: the message is
  // in the shared memory. So the peers are found gone first, then what they
  // left is taken, and only a transfer still unfinished after that fails
  // (under load a rank's recv failed this way: CommProcesses under ASan).
  void checkTransfers() {
    std::vector<int> gone(static_cast<size_t>(o_.size), 0);
    bool any = false;
    for (int p = 0; p < o_.size; ++p) {
      if (sends_[p].empty() && recvs_[p].empty()) continue;
      gone[static_cast<size_t>(p)] = group_.exitedPid(p);
      any = any || gone[static_cast<size_t>(p)] != 0;
    }
    if (any)
      while (progressTransfers()) {
      }
    auto now = Clock::now();
    for (auto* lists : {&sends_, &recvs_}) {
      for (auto& list : *lists) {
        if (list.empty()) continue;
        ShmOp& op = list.front();
        int peer = op.transfer.peer;
        std::string what = "shared-memory " + std::string(op.name) + (op.kind == ShmOp::kSend ? " to" : " from") +
                           " rank " + std::to_string(peer) + " (tag " + std::to_string(op.transfer.tag) + ")";
        if (int pid = gone[static_cast<size_t>(peer)]) {
          fail(op, Status::error(what + " failed: rank " + std::to_string(peer) + " (pid " + std::to_string(pid) +
                                 ") exited"));
        } else if (now >= op.deadline) {
          fail(op, Status::error(what + " timed out after " + timeoutText(o_.timeout) + ": rank " +
                                 std::to_string(peer) + (op.kind == ShmOp::kSend ? " did not receive it" : " did not send")));
        } else {
          continue;
        }
        list.pop_front();
      }
    }
  }

  bool transfersPending() const {
    for (int p = 0; p < o_.size; ++p)
      if (!sends_[p].empty() || !recvs_[p].empty()) return true;
    return false;
  }

  void loop() {
    for (;;) {
      service();
      if (stop_) break;
      if (!collectives_.empty()) {
        ShmOp op = std::move(collectives_.front());
        collectives_.pop_front();
        if (!broken_.empty()) {
          op.state->finish(brokenError(op.name));
          continue;
        }
        Status s = op.run(group_);
        if (!s.ok) fail(op, std::move(s));
        else op.state->finish({});
        continue;
      }
      bool pending = transfersPending();
      if (pending) checkTransfers();
      auto wake = Clock::now() + (pending ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000));
      // service() inside the wait may already have taken a new collective
      // off the queue: that counts as work too (else it would sit until `wake`).
      group_.waitUntil(
          [this] { return stop_ || !collectives_.empty() || submitted_.load(std::memory_order_acquire) != taken_; },
          wake);
    }
    takeSubmitted();
    Status gone = Status::error("the communicator was destroyed before this operation finished");
    for (auto& op : collectives_) op.state->finish(gone);
    for (auto* lists : {&sends_, &recvs_})
      for (auto& list : *lists)
        for (auto& op : list) op.state->finish(gone);
  }

  GroupOptions o_;
  std::mutex mu_;
  std::deque<ShmOp> queue_;
  std::atomic<uint64_t> submitted_{0};
  std::atomic<bool> stop_{false};
  // Worker thread only:
  uint64_t taken_ = 0;
  std::deque<ShmOp> collectives_;
  std::vector<std::deque<ShmOp>> sends_, recvs_;  // by peer, oldest first
  std::string broken_;
  ShmGroup group_;
  std::thread thread_;  // last: starts once everything above exists
};

std::string segmentName(const std::string& prefix) {
  std::string clean;
  for (char c : prefix.substr(0, 64)) clean += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  std::random_device rd;
  uint64_t id = (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(getpid());
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(id));
  return "/dtl-" + clean + "-" + hex;
}

}  // namespace

std::unique_ptr<Communicator> makeShmCommunicator(const GroupOptions& o, const ShmTuning& t, Status& status) {
  status = {};
  if (o.size > kShmMaxGroupSize) {
    status = Status::error("shared memory: a group of " + std::to_string(o.size) + " ranks is more than the " +
                           std::to_string(kShmMaxGroupSize) + " this backend holds; use Gloo for it");
    return nullptr;
  }
  if (!o.store || o.size < 1 || o.rank < 0 || o.rank >= o.size) {
    status = Status::error("shared memory: bad group options (rank " + std::to_string(o.rank) + ", size " +
                           std::to_string(o.size) + (o.store ? ")" : ", no store)"));
    return nullptr;
  }
  const std::string key = o.prefix + "shm/segment";
  std::unique_ptr<ShmSegment> seg;
  std::string name;
  if (o.rank == 0) {
    ShmGeometry g;
    g.size = o.size;
    g.chunkBytes = std::max<size_t>((t.chunkBytes + 63) / 64 * 64, 64 * size_t(o.size));
    g.channelBytes = std::max<size_t>((t.channelBytes + 63) / 64 * 64, 64);
    g.smallBytes = t.smallBytes;
    name = segmentName(o.prefix);
    status = ShmSegment::create(name, g, seg);
    if (status.ok) status = o.store->set(key, std::vector<uint8_t>(name.begin(), name.end()));
  } else {
    std::vector<uint8_t> v;
    status = o.store->get(key, v, o.joinTimeout());
    if (!status.ok)
      status = Status::error("shared memory: rank 0 did not publish the segment of group '" + o.prefix +
                             "' within " + timeoutText(o.joinTimeout()));
    else
      status = ShmSegment::open(name.assign(v.begin(), v.end()), o.size, seg);
  }
  if (!status.ok) return nullptr;
  seg->control(o.rank).pid.store(getpid());

  // Everyone maps the segment before rank 0 unlinks it.
  std::vector<std::string> mapped;
  for (int r = 0; r < o.size; ++r) mapped.push_back(o.prefix + "shm/mapped/" + std::to_string(r));
  status = o.store->set(mapped[o.rank], {1});
  if (status.ok && !o.store->wait(mapped, o.joinTimeout()).ok) {
    std::string missing;
    for (int r = 0; r < o.size; ++r) {
      std::vector<uint8_t> v;
      if (!o.store->get(mapped[r], v, std::chrono::milliseconds(0)).ok)
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    status = Status::error("shared memory: " + std::string(missing.find(',') == std::string::npos ? "rank " : "ranks ") +
                           missing + " did not join group '" + o.prefix + "' within " + timeoutText(o.joinTimeout()));
  }
  if (o.rank == 0) ShmSegment::unlink(name);
  if (!status.ok) return nullptr;
  return std::make_unique<ShmCommunicator>(o, std::move(seg), t);
}

std::unique_ptr<Communicator> makeShmCommunicator(const GroupOptions& o, Status& status) {
  return makeShmCommunicator(o, ShmTuning{}, status);
}

}  // namespace dtl::rt::comm
