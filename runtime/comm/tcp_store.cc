// The TCP store's client: dials the server (retrying until the connect
// timeout, since the launcher or rank 0 may start it later), presents the job
// token, then sends one request at a time per connection. Concurrent callers
// each take a connection from a small pool, so a parked get never blocks
// another thread's set. Every failure names the store's address.
#include "runtime/comm/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <thread>

#include "runtime/comm/tcp_store_wire.h"

namespace dtl::rt::comm {

namespace {

using wire::Clock;
using std::chrono::milliseconds;
// A reply may come this long after the request's own timeout before the
// client gives up on the server; set/add get kIoTimeout.
constexpr auto kReplyGrace = std::chrono::seconds(10);
constexpr auto kIoTimeout = std::chrono::seconds(60);
constexpr size_t kMaxReplyBytes = kStoreMaxValueBytes + (1 << 20);
constexpr size_t kKeysNamed = 10;

// Waits for `events` on fd; "" when ready, else why not.
std::string waitFd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, wire::pollMillis(deadline));
    if (n > 0) return "";
    if (n == 0) return "timed out";
    if (errno != EINTR) return wire::errnoText(errno);
  }
}

std::string sendAll(int fd, const std::vector<uint8_t>& bytes, Clock::time_point deadline) {
  size_t at = 0;
  while (at < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n >= 0) {
      at += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return wire::errnoText(errno);
    if (std::string why = waitFd(fd, POLLOUT, deadline); !why.empty()) return why;
  }
  return "";
}

std::string recvAll(int fd, uint8_t* out, size_t size, Clock::time_point deadline) {
  size_t at = 0;
  while (at < size) {
    ssize_t n = ::recv(fd, out + at, size - at, 0);
    if (n > 0) {
      at += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return "the store closed the connection";
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return wire::errnoText(errno);
    if (std::string why = waitFd(fd, POLLIN, deadline); !why.empty()) return why;
  }
  return "";
}

struct Answer {
  uint8_t status = 0;
  std::vector<uint8_t> payload;
};

std::string exchange(int fd, const std::vector<uint8_t>& req, Clock::time_point deadline, Answer& a) {
  if (std::string why = sendAll(fd, req, deadline); !why.empty()) return why;
  uint8_t head[9];
  if (std::string why = recvAll(fd, head, sizeof head, deadline); !why.empty()) return why;
  a.status = head[0];
  uint64_t len = wire::getU64(head + 1);
  if (len > kMaxReplyBytes) return "a reply of " + std::to_string(len) + " bytes is over the limit";
  a.payload.resize(len);
  return recvAll(fd, a.payload.data(), len, deadline);
}

struct Dial {
  int fd = -1;
  std::string error;
  bool fatal = false;  // retrying cannot help
};

Dial dialOnce(const std::string& host, int port, const std::string& token, Clock::time_point deadline) {
  Dial d;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    d.error = "cannot resolve '" + host + "': " + gai_strerror(rc);
    return d;
  }
  for (addrinfo* a = found; a != nullptr && d.fd < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      d.error = wire::errnoText(errno);
      continue;
    }
    std::string why;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        why = wire::errnoText(errno);
      } else if (why = waitFd(fd, POLLOUT, deadline); why.empty()) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) why = wire::errnoText(err);
      }
    }
    if (why.empty()) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Answer ans;
      std::string auth_why = exchange(
          fd, wire::request(wire::kAuth, wire::kStoreProtocol, std::vector<uint8_t>(token.begin(), token.end())),
          deadline, ans);
      if (auth_why.empty() && ans.status == wire::kOk) {
        d.fd = fd;
        break;
      }
      if (auth_why != "timed out") {
        d.fatal = true;
        why = "it refused this rank's job token (is DTL_JOB_TOKEN the same on every rank, and is this the "
              "right job's store?)";
      } else {
        why = "no answer to the handshake";
      }
    }
    d.error = why;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return d;
}

Status dial(const std::string& host, int port, const std::string& token, milliseconds timeout, int& fd) {
  Clock::time_point deadline = wire::deadlineAfter(timeout);
  auto backoff = milliseconds(10);
  for (;;) {
    Dial d = dialOnce(host, port, token, deadline);
    if (d.fd >= 0) {
      fd = d.fd;
      return {};
    }
    std::string where = wire::hostPort(host, port);
    if (d.fatal) return Status::error("cannot join the store at " + where + ": " + d.error);
    if (Clock::now() >= deadline) {
      return Status::error("cannot reach the store at " + where + " within " + formatDuration(timeout) + ": " +
                           d.error + "; is MASTER_ADDR right?");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - Clock::now()));
    backoff = std::min(backoff * 2, milliseconds(500));
  }
}

std::vector<uint8_t> u64Bytes(uint64_t v) {
  std::vector<uint8_t> out;
  wire::putU64(out, v);
  return out;
}

uint64_t millis(milliseconds t) { return static_cast<uint64_t>(std::max<int64_t>(t.count(), 0)); }

std::string namedKeys(const std::vector<std::string>& keys) {
  std::string s = keys.size() == 1 ? "key " : "keys ";
  for (size_t i = 0; i < keys.size() && i < kKeysNamed; ++i) s += (i ? ", " : "") + keys[i];
  if (keys.size() > kKeysNamed) s += ", … (" + std::to_string(keys.size()) + " in all)";
  return s;
}

class TcpStore final : public Store {
 public:
  TcpStore(std::string host, int port, std::string token, milliseconds connect_timeout, int fd)
      : host_(std::move(host)), port_(port), token_(std::move(token)), connect_timeout_(connect_timeout),
        where_(wire::hostPort(host_, port_)), idle_{fd} {}

  ~TcpStore() override {
    for (int fd : idle_) ::close(fd);
  }

  Status set(const std::string& key, const std::vector<uint8_t>& value) override {
    if (Status s = checkSizes(key, value.size()); !s.ok) return s;
    Answer a;
    return call("set", key, wire::request(wire::kSet, key, value), wire::deadlineAfter(kIoTimeout), a);
  }

  Status get(const std::string& key, std::vector<uint8_t>& value, milliseconds timeout) override {
    if (Status s = checkSizes(key, 0); !s.ok) return s;
    Answer a;
    Status s = call("get", key, wire::request(wire::kGet, key, u64Bytes(millis(timeout))),
                    wire::deadlineAfter(timeout + kReplyGrace), a);
    if (!s.ok) return s;
    if (a.status == wire::kTimeout) {
      return Status::error("timed out after " + formatDuration(timeout) + " waiting for key " + key +
                           " in the store at " + where_);
    }
    value = std::move(a.payload);
    return {};
  }

  Status add(const std::string& key, int64_t delta, int64_t& result) override {
    if (Status s = checkSizes(key, 0); !s.ok) return s;
    Answer a;
    Status s = call("add", key, wire::request(wire::kAdd, key, u64Bytes(static_cast<uint64_t>(delta))),
                    wire::deadlineAfter(kIoTimeout), a);
    if (!s.ok) return s;
    if (a.status == wire::kError || a.payload.size() != 8) {
      return Status::error("the store at " + where_ + " refused add on " + key + ": " +
                           std::string(a.payload.begin(), a.payload.end()));
    }
    result = static_cast<int64_t>(wire::getU64(a.payload.data()));
    return {};
  }

  Status wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    if (keys.empty()) return {};
    std::vector<uint8_t> body = u64Bytes(millis(timeout));
    for (const std::string& k : keys)
      if (Status s = checkSizes(k, 0); !s.ok) return s;
    wire::putKeyList(body, keys);
    if (Status s = checkSizes("", body.size()); !s.ok) return s;
    Answer a;
    Status s = call("wait", keys.front(), wire::request(wire::kWait, "", body),
                    wire::deadlineAfter(timeout + kReplyGrace), a);
    if (!s.ok) return s;
    if (a.status == wire::kTimeout) {
      std::vector<std::string> missing;
      if (!wire::parseKeyList(a.payload.data(), a.payload.size(), 0, kStoreMaxKeyBytes, missing)) missing = keys;
      return Status::error("timed out after " + formatDuration(timeout) + " waiting for " + namedKeys(missing) +
                           " in the store at " + where_);
    }
    return {};
  }

 private:
  Status checkSizes(const std::string& key, size_t value_bytes) const {
    if (key.size() > kStoreMaxKeyBytes) {
      return Status::error("a store key of " + std::to_string(key.size()) + " bytes is over the limit of " +
                           std::to_string(kStoreMaxKeyBytes) + " (key " + key.substr(0, 40) + "…)");
    }
    if (value_bytes > kStoreMaxValueBytes) {
      return Status::error("a store value of " + std::to_string(value_bytes) + " bytes is over the limit of " +
                           std::to_string(kStoreMaxValueBytes) + " (key " + key + ")");
    }
    return {};
  }

  // Sends one request on a pooled connection and reads its answer.
  Status call(const char* op, const std::string& key, const std::vector<uint8_t>& req, Clock::time_point deadline,
              Answer& a) {
    int fd = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        fd = idle_.back();
        idle_.pop_back();
      }
    }
    if (fd < 0) {
      if (Status s = dial(host_, port_, token_, connect_timeout_, fd); !s.ok) return s;
    }
    std::string why = exchange(fd, req, deadline, a);
    if (!why.empty()) {
      ::close(fd);
      if (why == "timed out") {
        return Status::error("the store at " + where_ + " did not answer " + op + " " + key +
                             " in time; is the launcher (or rank 0) stuck?");
      }
      return Status::error("lost the connection to the store at " + where_ + " during " + op + " " + key + ": " +
                           why + "; did the launcher (or rank 0) exit?");
    }
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(fd);
    return {};
  }

  std::string host_;
  int port_;
  std::string token_;
  milliseconds connect_timeout_;
  std::string where_;
  std::mutex mu_;
  std::vector<int> idle_;  // connected and authenticated, not in use
};

}  // namespace

std::shared_ptr<Store> connectTcpStore(const std::string& host, int port, const std::string& token,
                                       milliseconds connect_timeout, Status& status) {
  int fd = -1;
  status = dial(host, port, token, connect_timeout, fd);
  if (!status.ok) return nullptr;
  return std::make_shared<TcpStore>(host, port, token, connect_timeout, fd);
}

}  // namespace dtl::rt::comm
