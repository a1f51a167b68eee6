// The Gloo backend: a gloo::rendezvous::Context over our store (through
// GlooStoreAdapter) and Gloo's TCP transport. Collectives run one at a time
// on the group's worker thread, in issue order, with Gloo's algorithms
// (reduce-scatter is a ring on unbound buffers: Gloo has no unbound-buffer
// reduce-scatter). send/recv are posted at once from the calling thread and
// matched by tag, as in PyTorch's ProcessGroupGloo; each has a small thread
// that waits for it, so done() never blocks. After any failure the group is
// broken: Gloo poisons the whole context on a timeout. Gloo writes to
// sockets that a dead peer may have closed, so SIGPIPE (which would kill the
// process) is ignored unless the program set a handler of its own.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <list>
#include <vector>

#include "runtime/comm/gloo_store_adapter.h"
#include "runtime/comm/work.h"

namespace dtl::rt::comm {
namespace {

using std::chrono::milliseconds;

// Slots outside the range Gloo's collectives build theirs in (prefix bytes 0x01..0x0f).
constexpr uint64_t kP2PSlot = 0xD0ull << 56;
constexpr uint64_t kReduceScatterSlot = 0xD1ull << 56;

void sumFloats(void* c, const void* a, const void* b, size_t n) {
  auto* o = static_cast<float*>(c);
  auto* x = static_cast<const float*>(a);
  auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

// A posted send or recv and the thread that waits for it.
struct PendingP2P {
  std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  std::shared_ptr<OpState> state;
  std::thread waiter;
  bool isSend = false;
};

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(const GroupOptions& o, std::shared_ptr<gloo::Context> ctx) : o_(o), ctx_(std::move(ctx)) {}

  ~GlooCommunicator() override {
    worker_.reset();  // fails queued collectives, finishes the running one
    std::lock_guard<std::mutex> lock(p2pMu_);
    for (auto& p : p2p_) {
      if (!p.state->done()) p.isSend ? p.buf->abortWaitSend() : p.buf->abortWaitRecv();
      p.waiter.join();
    }
  }

  const char* backend() const override { return "gloo"; }
  int rank() const override { return o_.rank; }
  int size() const override { return o_.size; }

  std::unique_ptr<Work> allReduce(float* data, int64_t n) override {
    return submit("allReduce", [=, this] {
      if (n == 0 || o_.size == 1) return;
      gloo::AllreduceOptions opts(ctx_);
      opts.setOutput(data, n);
      opts.setReduceFunction(&sumFloats);
      opts.setTimeout(o_.timeout);
      gloo::allreduce(opts);
    });
  }

  std::unique_ptr<Work> reduceScatter(const float* in, float* out, int64_t n) override {
    return submit("reduceScatter", [=, this] { ringReduceScatter(in, out, n); });
  }

  std::unique_ptr<Work> allGather(const float* in, float* out, int64_t n) override {
    return submit("allGather", [=, this] {
      if (n == 0) return;
      if (o_.size == 1) return void(std::memcpy(out, in, n * sizeof(float)));
      gloo::AllgatherOptions opts(ctx_);
      opts.setInput(const_cast<float*>(in), n);
      opts.setOutput(out, n * o_.size);
      opts.setTimeout(o_.timeout);
      gloo::allgather(opts);
    });
  }

  std::unique_ptr<Work> broadcast(float* data, int64_t n, int root) override {
    if (root < 0 || root >= o_.size) return badPeer("broadcast", root);
    return submit("broadcast", [=, this] {
      if (n == 0 || o_.size == 1) return;
      gloo::BroadcastOptions opts(ctx_);
      opts.setOutput(data, n);
      opts.setRoot(root);
      opts.setTimeout(o_.timeout);
      gloo::broadcast(opts);
    });
  }

  std::unique_ptr<Work> allToAll(const float* in, float* out, int64_t n) override {
    return submit("allToAll", [=, this] {
      if (n == 0) return;
      if (o_.size == 1) return void(std::memcpy(out, in, n * sizeof(float)));
      gloo::AlltoallOptions opts(ctx_);
      opts.setInput(const_cast<float*>(in), n * o_.size);
      opts.setOutput(out, n * o_.size);
      opts.setTimeout(o_.timeout);
      gloo::alltoall(opts);
    });
  }

  std::unique_ptr<Work> send(const float* data, int64_t n, int peer, int tag) override {
    return postP2P(true, const_cast<float*>(data), n, peer, tag);
  }
  std::unique_ptr<Work> recv(float* data, int64_t n, int peer, int tag) override {
    return postP2P(false, data, n, peer, tag);
  }

  Status barrier() override {
    return submit("barrier", [this] {
             if (o_.size == 1) return;
             gloo::BarrierOptions opts(ctx_);
             opts.setTimeout(o_.timeout);
             gloo::barrier(opts);
           })
        ->wait();
  }

 private:
  std::unique_ptr<Work> badPeer(const char* op, int peer) {
    return finishedWork(Status::error("gloo " + std::string(op) + ": rank " + std::to_string(peer) +
                                      " is not in the group (size " + std::to_string(o_.size) + ")"));
  }

  // Runs `body` on the worker; a thrown error breaks the group and is
  // reported with the ranks that never reached this operation.
  std::unique_ptr<Work> submit(const char* op, std::function<void()> body) {
    return worker_->submit([this, op, body = std::move(body)]() -> Status {
      uint64_t seq = seq_++;
      if (!broken_.empty())
        return Status::error("gloo " + std::string(op) + " not run: an earlier operation failed: " + broken_);
      try {
        body();
        return {};
      } catch (const std::exception& e) {
        broken_ = diagnose(op, seq, e.what());
      }
      return Status::error(broken_);
    });
  }

  // Every rank that fails operation `seq` says so in the store, then waits a
  // little for the others: whoever never reports did not reach it.
  std::string diagnose(const char* op, uint64_t seq, const std::string& what) {
    std::string base = o_.prefix + "gloo_failed/" + std::to_string(seq) + "/";
    std::string msg = "gloo " + std::string(op) + " (operation " + std::to_string(seq) + ") failed on rank " +
                      std::to_string(o_.rank) + ": " + what;
    if (!o_.store->set(base + std::to_string(o_.rank), {1}).ok) return msg;
    auto grace = std::min(o_.timeout, milliseconds(10000));
    std::string missing;
    auto deadline = std::chrono::steady_clock::now() + grace;
    for (int r = 0; r < o_.size; ++r) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      std::vector<uint8_t> v;
      if (!o_.store->get(base + std::to_string(r), v, std::max(left, milliseconds(0))).ok)
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    if (missing.empty()) return msg + " (every rank reached it)";
    return msg + "; " + (missing.find(',') == std::string::npos ? "rank " : "ranks ") + missing +
           " did not reach it within " + timeoutText(o_.timeout);
  }

  // Ring: at step s rank r sends its partial block r-s-1 to r+1 and adds the
  // partial block r-s-2 from r-1; after size-1 steps block r is complete.
  void ringReduceScatter(const float* in, float* out, int64_t n) {
    if (n == 0) return;
    const int p = o_.size, r = o_.rank;
    if (p == 1) return void(std::memcpy(out, in, n * sizeof(float)));
    const size_t bytes = n * sizeof(float);
    std::vector<float> acc(in, in + n * p), tmp(n);
    auto accBuf = ctx_->createUnboundBuffer(acc.data(), bytes * p);
    auto tmpBuf = ctx_->createUnboundBuffer(tmp.data(), bytes);
    auto mod = [p](int x) { return ((x % p) + p) % p; };
    for (int s = 0; s + 1 < p; ++s) {
      uint64_t slot = kReduceScatterSlot | ((rsSeq_ & 0xffffffull) << 8) | uint64_t(s);
      tmpBuf->recv(mod(r - 1), slot, 0, bytes);
      accBuf->send(mod(r + 1), slot, mod(r - s - 1) * bytes, bytes);
      tmpBuf->waitRecv(o_.timeout);
      accBuf->waitSend(o_.timeout);
      float* block = acc.data() + int64_t(mod(r - s - 2)) * n;
      for (int64_t i = 0; i < n; ++i) block[i] += tmp[i];
    }
    ++rsSeq_;
    std::memcpy(out, acc.data() + int64_t(r) * n, bytes);
  }

  std::unique_ptr<Work> postP2P(bool isSend, float* data, int64_t n, int peer, int tag) {
    const char* op = isSend ? "send" : "recv";
    if (peer < 0 || peer >= o_.size || peer == o_.rank) return badPeer(op, peer);
    if (n == 0) return finishedWork({});
    std::string what = std::string("gloo ") + op + (isSend ? " to rank " : " from rank ") + std::to_string(peer) +
                       " (tag " + std::to_string(tag) + ")";
    std::lock_guard<std::mutex> lock(p2pMu_);
    reapP2P();
    PendingP2P& p = p2p_.emplace_back();
    p.isSend = isSend;
    p.state = std::make_shared<OpState>();
    uint64_t slot = kP2PSlot | uint32_t(tag);
    try {
      p.buf = ctx_->createUnboundBuffer(data, n * sizeof(float));
      isSend ? p.buf->send(peer, slot) : p.buf->recv(peer, slot);
    } catch (const std::exception& e) {
      p.state->finish(Status::error(what + " failed: " + e.what()));
      p.waiter = std::thread([] {});
      return std::make_unique<StateWork>(p.state);
    }
    auto* buf = p.buf.get();
    p.waiter = std::thread([buf, isSend, what, peer, st = p.state, timeout = o_.timeout] {
      Status s;
      try {
        bool completed = isSend ? buf->waitSend(timeout) : buf->waitRecv(timeout);
        if (!completed) s = Status::error(what + " was aborted: the communicator was destroyed");
      } catch (const std::exception& e) {
        std::string m = e.what();
        if (m.find("Timed out") != std::string::npos)
          s = Status::error(what + " timed out after " + timeoutText(timeout) + ": rank " +
                            std::to_string(peer) + " did not " + (isSend ? "receive it" : "send"));
        else
          s = Status::error(what + " failed: " + m);
      }
      st->finish(std::move(s));
    });
    return std::make_unique<StateWork>(p.state);
  }

  // Joins the waiter threads of finished transfers (p2pMu_ held).
  void reapP2P() {
    for (auto it = p2p_.begin(); it != p2p_.end();) {
      if (!it->state->done()) {
        ++it;
        continue;
      }
      it->waiter.join();
      it = p2p_.erase(it);
    }
  }

  GroupOptions o_;
  std::shared_ptr<gloo::Context> ctx_;
  uint64_t seq_ = 0, rsSeq_ = 0;  // worker thread only
  std::string broken_;            // worker thread only
  std::mutex p2pMu_;
  std::list<PendingP2P> p2p_;
  std::unique_ptr<SerialWorker> worker_ = std::make_unique<SerialWorker>();
};

}  // namespace

std::unique_ptr<Communicator> makeGlooCommunicator(const GroupOptions& o, Status& status) {
  status = {};
  if (!o.store || o.size < 1 || o.rank < 0 || o.rank >= o.size) {
    status = Status::error("gloo: bad group options (rank " + std::to_string(o.rank) + ", size " +
                           std::to_string(o.size) + (o.store ? ")" : ", no store)"));
    return nullptr;
  }
  struct sigaction pipe;
  if (sigaction(SIGPIPE, nullptr, &pipe) == 0 && pipe.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  try {
    auto ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
    ctx->setTimeout(o.joinTimeout());  // connecting; the operations then wait o.timeout
    if (o.size > 1) {
      gloo::transport::tcp::attr attr;
      attr.hostname = o.host;
      auto dev = gloo::transport::tcp::CreateDevice(attr);
      GlooStoreAdapter store(o.store, o.prefix + "gloo/", o.joinTimeout());
      ctx->connectFullMesh(store, dev);
    }
    ctx->setTimeout(o.timeout);
    return std::make_unique<GlooCommunicator>(o, std::move(ctx));
  } catch (const std::exception& e) {
    status = Status::error(std::string("gloo: ") + e.what());
  }
  return nullptr;
}

}  // namespace dtl::rt::comm
