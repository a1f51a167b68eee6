// How the launchers of a job on several nodes learn of each other's end. Each
// sees only its own ranks; without this, when node 1's ranks fail before
// Gloo connects them (a spec that does not compile there, a rank that never
// joins), node 0's ranks wait out the whole join timeout. Through the job's
// store:
//   launcher/failures   a counter: the first node to fail takes 1
//   launcher/failed     that node's message, which every launcher reports
//   launcher/ended/<k>  node k's launcher is done, with its exit code
// A watcher thread parks a get on launcher/failed; on another node's failure,
// or when node 0's store is gone (node 0's launcher ended), fd() turns
// readable and the launcher stops its ranks. Node 0 keeps the store up until
// every node has said it ended (or a bound passes).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/store.h"

namespace dtl::rt::launch {

class NodeWatch {
 public:
  NodeWatch(std::string host, int port, std::string token, int node_rank, int nnodes);
  ~NodeWatch();
  NodeWatch(const NodeWatch&) = delete;
  NodeWatch& operator=(const NodeWatch&) = delete;

  bool start(std::string& err);
  void stop();  // ends the watcher thread (within half a second)
  int fd() const { return event_fd_; }  // readable once reason() is set
  std::string reason();                 // "node 1 failed: rank 3 ...", or ""

  // This node failed with `message`; returns the job's first failure as every
  // launcher reports it (this one, or another node's that came first).
  std::string publishFailure(const std::string& message);
  // This node's launcher is done; node 0 then waits (waitForOtherNodes).
  void publishEnd(int code);
  // Node 0: up to `timeout` for every other node's end, or until give_up()
  // (checked a few times a second). Returns "" when all ended with 0, else
  // what went wrong (a node failed or never said).
  std::string waitForOtherNodes(std::chrono::milliseconds timeout, const std::function<bool()>& give_up);

 private:
  void run();
  void fire(const std::string& why);
  std::shared_ptr<comm::Store> connect(std::chrono::milliseconds timeout);
  std::shared_ptr<comm::Store> publisher();

  std::string host_, token_;
  int port_, node_rank_, nnodes_;
  int event_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::string reason_;
  std::shared_ptr<comm::Store> publisher_;  // the launcher's thread only
  bool publisher_tried_ = false;
};

}  // namespace dtl::rt::launch
