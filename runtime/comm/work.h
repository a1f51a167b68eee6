// Shared pieces of the communicator backends: a Work backed by a completion
// state, and a serial worker thread that runs a group's operations in issue
// order (so every rank starts its collectives in the same order). The
// shared-memory backend runs its own loop; it reuses only OpState.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/comm/communicator.h"

namespace dtl::rt::comm {

// Completion of one operation: set once by the thread that ran it. (Waiters
// sleep at once: spinning here took the core from the worker doing the
// operation and cost more on large all-reduces than it saved on small ones.)
class OpState {
 public:
  void finish(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(s);
    done_.store(true, std::memory_order_release);
    cv_.notify_all();
  }
  Status wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_.load(std::memory_order_relaxed); });
    return status_;
  }
  bool done() { return done_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  Status status_;
};

class StateWork : public Work {
 public:
  explicit StateWork(std::shared_ptr<OpState> s) : state_(std::move(s)) {}
  Status wait() override { return state_->wait(); }
  bool done() override { return state_->done(); }

 private:
  std::shared_ptr<OpState> state_;
};

inline std::unique_ptr<Work> finishedWork(Status s) {
  auto st = std::make_shared<OpState>();
  st->finish(std::move(s));
  return std::make_unique<StateWork>(std::move(st));
}

// One thread, one FIFO queue. Operations still queued when the worker is
// destroyed fail without running.
class SerialWorker {
 public:
  SerialWorker() : thread_([this] { loop(); }) {}
  ~SerialWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  std::unique_ptr<Work> submit(std::function<Status()> fn) {
    auto st = std::make_shared<OpState>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back({std::move(fn), st});
    }
    cv_.notify_one();
    return std::make_unique<StateWork>(std::move(st));
  }

 private:
  struct Item {
    std::function<Status()> fn;
    std::shared_ptr<OpState> state;
  };
  void loop() {
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) {
          for (auto& q : queue_) q.state->finish(Status::error("the communicator was destroyed before this operation ran"));
          queue_.clear();
          return;
        }
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      item.state->finish(item.fn());
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the fields it uses exist
};

// "300 ms", "12 s": durations in messages a person reads.
inline std::string timeoutText(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms < 10000 && ms % 1000 != 0) return std::to_string(ms) + " ms";
  return std::to_string(ms / 1000) + " s";
}

}  // namespace dtl::rt::comm
