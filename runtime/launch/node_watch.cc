// The launchers' exchange about each other's end (node_watch.h).
#include "runtime/launch/node_watch.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/comm/tcp_store.h"

namespace dtl::rt::launch {

namespace {

using std::chrono::milliseconds;
constexpr char kFailures[] = "launcher/failures";
constexpr char kFailed[] = "launcher/failed";
constexpr auto kPark = milliseconds(500);  // how long stop() may wait for the watcher
constexpr auto kPublishConnect = std::chrono::seconds(5);

std::string endedKey(int node) { return "launcher/ended/" + std::to_string(node); }
std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
bool isTimeout(const comm::Status& s) { return s.message.rfind("timed out", 0) == 0; }

}  // namespace

NodeWatch::NodeWatch(std::string host, int port, std::string token, int node_rank, int nnodes)
    : host_(std::move(host)), token_(std::move(token)), port_(port), node_rank_(node_rank), nnodes_(nnodes) {}

NodeWatch::~NodeWatch() {
  stop();
  if (event_fd_ >= 0) ::close(event_fd_);
}

bool NodeWatch::start(std::string& err) {
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) {
    err = "cannot watch the other nodes: eventfd failed";
    return false;
  }
  thread_ = std::thread([this] { run(); });
  return true;
}

void NodeWatch::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::string NodeWatch::reason() {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

void NodeWatch::fire(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    reason_ = why;
  }
  uint64_t one = 1;
  (void)!::write(event_fd_, &one, sizeof one);
}

std::shared_ptr<comm::Store> NodeWatch::connect(milliseconds timeout) {
  comm::Status s;
  return comm::connectTcpStore(host_, port_, token_, timeout, s);
}

// One connection for what this launcher says at its end, dialled once: an
// unreachable store costs the wait once, not per message.
std::shared_ptr<comm::Store> NodeWatch::publisher() {
  if (!publisher_tried_) publisher_ = connect(kPublishConnect);
  publisher_tried_ = true;
  return publisher_;
}

// Node 0's store may start after this launcher: keep dialling until it is
// up, then park on the failure key, half a second at a time.
void NodeWatch::run() {
  std::shared_ptr<comm::Store> store;
  while (!stop_ && !store) store = connect(kPark);
  std::vector<uint8_t> v;
  while (!stop_) {
    comm::Status s = store->get(kFailed, v, kPark);
    if (s.ok) return fire(std::string(v.begin(), v.end()));
    if (isTimeout(s)) continue;
    if (node_rank_ != 0 && !stop_)
      fire("lost the job's store on node 0 (" + s.message + "): node 0's launcher has ended");
    return;
  }
}

std::string NodeWatch::publishFailure(const std::string& message) {
  std::string mine = "node " + std::to_string(node_rank_) + " failed: " + message;
  auto store = publisher();
  if (!store) return mine;
  int64_t order = 0;
  if (!store->add(kFailures, 1, order).ok) return mine;
  if (order == 1) {
    (void)store->set(kFailed, bytes(mine));
    return mine;
  }
  std::vector<uint8_t> v;
  if (!store->get(kFailed, v, kPublishConnect).ok) return mine;
  return std::string(v.begin(), v.end()) + "; then on node " + std::to_string(node_rank_) + ": " + message;
}

void NodeWatch::publishEnd(int code) {
  auto store = publisher();
  if (store) (void)store->set(endedKey(node_rank_), bytes(std::to_string(code)));
}

std::string NodeWatch::waitForOtherNodes(milliseconds timeout, const std::function<bool()>& give_up) {
  auto store = publisher();
  if (!store) return "";
  std::vector<std::string> keys;
  for (int k = 0; k < nnodes_; ++k)
    if (k != node_rank_) keys.push_back(endedKey(k));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  comm::Status waited = comm::Status::error("timed out");
  while (!waited.ok && !give_up() && std::chrono::steady_clock::now() < deadline) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    waited = store->wait(keys, std::clamp(left, milliseconds(0), milliseconds(200)));
    if (!waited.ok && !isTimeout(waited)) break;  // the store is gone: nobody can say any more
  }
  std::vector<uint8_t> v;
  if (store->get(kFailed, v, milliseconds(0)).ok) return std::string(v.begin(), v.end());
  if (waited.ok) return "";
  std::string missing;
  for (int k = 0; k < nnodes_; ++k)
    if (k != node_rank_ && !store->get(endedKey(k), v, milliseconds(0)).ok)
      missing += (missing.empty() ? "" : ", ") + std::to_string(k);
  return "node" + std::string(missing.find(',') == std::string::npos ? " " : "s ") + missing +
         " did not say within " + comm::formatDuration(timeout) + " that " +
         (missing.find(',') == std::string::npos ? "its" : "their") + " ranks ended; is " +
         (missing.find(',') == std::string::npos ? "its" : "their") + " launcher still running?";
}

}  // namespace dtl::rt::launch
