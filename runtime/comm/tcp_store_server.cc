// The TCP store's server: one thread, one poll() loop over the listening
// socket, a wake eventfd (stop, reset) and every client connection.
//
//  1. Accept; a new connection has 10 s to present the job token (compared in
//     constant time); until then it may send only a small handshake frame.
//  2. Read frames as they arrive; a length field over the limits, an unknown
//     op or a malformed body closes the connection with a line on stderr.
//  3. set/add answer at once and wake the requests parked on their key; a
//     get/wait whose keys are missing parks on the first missing key (one
//     waiting list per key) until it is set or the request's deadline passes.
//  4. poll() sleeps until the nearest deadline; nothing polls the keys.
//  5. Out of file descriptors (EMFILE/ENFILE), accept() fails while the
//     listening socket stays readable: close the oldest connections that have
//     not presented the token and retry; with none to close, leave the
//     listening socket out of poll() for kAcceptBackoff instead of spinning.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "runtime/comm/tcp_store.h"
#include "runtime/comm/tcp_store_wire.h"

namespace dtl::rt::comm {

namespace {

using wire::Clock;
constexpr auto kAuthWindow = std::chrono::seconds(10);
constexpr size_t kReadChunk = 64 * 1024;
constexpr auto kAcceptBackoff = std::chrono::milliseconds(50);

struct Pending {
  enum Kind { kNone, kGet, kWait } kind = kNone;
  std::vector<std::string> keys;
  Clock::time_point deadline;
  std::string watching;  // the missing key whose arrival re-checks this request
};

struct Conn {
  int fd = -1;
  std::string peer;
  bool authed = false;
  Clock::time_point auth_deadline;
  std::vector<uint8_t> in;
  std::vector<uint8_t> out;
  size_t out_at = 0;
  Pending pending;
  bool dead = false;
};

std::string peerName(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return wire::hostPort(host, port);
}

// A get/wait's deadline from its timeout_ms field.
Clock::time_point requestDeadline(const uint8_t* timeout_ms) {
  uint64_t ms = std::min<uint64_t>(wire::getU64(timeout_ms), INT64_MAX);
  return wire::deadlineAfter(std::chrono::milliseconds(static_cast<int64_t>(ms)));
}

// A listening, non-blocking socket on host:port in fd; "" or why not.
std::string bindListener(const std::string& host, int port, int& fd) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return "cannot resolve '" + host + "': " + gai_strerror(rc);
  int err = 0;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      err = errno;
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd >= 0 ? "" : wire::errnoText(err);
}

}  // namespace

struct TcpStoreServer::Impl {
  int listen_fd = -1;
  int wake_fd = -1;
  int port = 0;
  std::string token;
  std::thread thread;

  std::mutex mu;  // guards the requests below, made by other threads
  std::condition_variable cv;
  bool stop_requested = false;
  bool exited = false;
  uint64_t resets_requested = 0, resets_done = 0;
  std::mutex stop_mu;
  bool stopped = false;

  // Owned by the server thread.
  std::unordered_map<std::string, std::vector<uint8_t>> data;
  std::map<uint64_t, Conn> conns;
  std::unordered_map<std::string, std::vector<uint64_t>> watchers;
  uint64_t next_id = 1;
  bool unparked = false;
  Clock::time_point accept_resumes{};  // out of descriptors: accept nothing before this
  bool told_dropping = false, told_out_of_fds = false;  // each said once per reset

  void run();
  void acceptAll();
  bool dropOldestUnauthenticated();
  void outOfDescriptors(int err);
  void readSome(Conn& c);
  void consume(uint64_t id, Conn& c);
  void handle(uint64_t id, Conn& c, uint8_t op, std::string key, std::vector<uint8_t> value);
  void addCounter(Conn& c, const std::string& key, int64_t delta);
  void park(uint64_t id, Conn& c, Pending p);
  void recheck(uint64_t id, Conn& c);
  void notify(const std::string& key);
  void unwatch(uint64_t id, Conn& c);
  void reply(Conn& c, wire::Reply status, const std::vector<uint8_t>& payload);
  void flush(Conn& c);
  void fail(Conn& c, const std::string& why);
  void expire(Clock::time_point now);
  void closeAll();
  int pollTimeout() const;
};

void TcpStoreServer::Impl::reply(Conn& c, wire::Reply status, const std::vector<uint8_t>& payload) {
  c.out.push_back(status);
  wire::putU64(c.out, payload.size());
  c.out.insert(c.out.end(), payload.begin(), payload.end());
  flush(c);
}

void TcpStoreServer::Impl::flush(Conn& c) {
  while (c.out_at < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.out_at, c.out.size() - c.out_at, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      c.dead = true;  // the peer went away; nothing to report
      return;
    }
    c.out_at += static_cast<size_t>(n);
  }
  c.out.clear();
  c.out_at = 0;
}

void TcpStoreServer::Impl::fail(Conn& c, const std::string& why) {
  std::fprintf(stderr, "dtl store: %s the connection from %s: %s\n", c.authed ? "closed" : "refused",
               c.peer.c_str(), why.c_str());
  c.dead = true;
}

void TcpStoreServer::Impl::acceptAll() {
  // Bounded, so a peer that keeps connecting cannot starve the others.
  for (int budget = 1024; budget > 0; --budget) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        int err = errno;
        if (dropOldestUnauthenticated()) continue;
        outOfDescriptors(err);
      }
      return;  // EAGAIN: nothing more to accept
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Conn c;
    c.fd = fd;
    c.peer = peerName(addr);
    c.auth_deadline = Clock::now() + kAuthWindow;
    conns.emplace(next_id++, std::move(c));
  }
}

// Closes the connection that has waited longest without presenting the token
// (ids grow with arrival): a rank presents it at once, so an old one is idle
// or hostile. False when every connection has presented it.
bool TcpStoreServer::Impl::dropOldestUnauthenticated() {
  for (auto it = conns.begin(); it != conns.end(); ++it) {
    if (it->second.authed) continue;
    if (!told_dropping) {
      std::fprintf(stderr,
                   "dtl store: out of file descriptors; closing the oldest connections that have not presented "
                   "the job token (the first from %s)\n",
                   it->second.peer.c_str());
      told_dropping = true;
    }
    ::close(it->second.fd);
    conns.erase(it);
    return true;
  }
  return false;
}

// Every connection is a rank's: new ones wait in the kernel's backlog, and
// the listening socket rests a little so poll() does not spin on it.
void TcpStoreServer::Impl::outOfDescriptors(int err) {
  accept_resumes = Clock::now() + kAcceptBackoff;
  if (told_out_of_fds) return;
  told_out_of_fds = true;
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  std::fprintf(stderr,
               "dtl store: cannot accept more connections (%s) with %zu open (ulimit -n is %llu); new ones wait "
               "until one closes: raise ulimit -n for the launcher (or rank 0) and start fewer ranks per store\n",
               wire::errnoText(err).c_str(), conns.size(), static_cast<unsigned long long>(lim.rlim_cur));
}

void TcpStoreServer::Impl::readSome(Conn& c) {
  size_t budget = 16 * kReadChunk;  // then let the other connections have a turn
  while (budget > 0) {
    size_t old = c.in.size();
    c.in.resize(old + kReadChunk);
    ssize_t n = ::recv(c.fd, c.in.data() + old, kReadChunk, 0);
    c.in.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n > 0) {
      budget -= std::min(budget, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (!c.authed) return fail(c, "it left without presenting the job token");
    c.dead = true;  // EOF or reset: the client left
    return;
  }
}

// Handles every complete frame in c.in until a request parks.
void TcpStoreServer::Impl::consume(uint64_t id, Conn& c) {
  size_t at = 0;
  while (!c.dead && c.pending.kind == Pending::kNone) {
    size_t max_key = c.authed ? kStoreMaxKeyBytes : wire::kAuthMaxKeyBytes;
    size_t max_value = c.authed ? kStoreMaxValueBytes : wire::kAuthMaxValueBytes;
    wire::Request r;
    size_t used = 0;
    std::string why;
    wire::Decoded d = wire::decodeRequest(c.in.data() + at, c.in.size() - at, max_key, max_value, r, used, why);
    if (d == wire::Decoded::kMalformed) fail(c, why);
    if (d != wire::Decoded::kRequest) break;
    at += used;
    handle(id, c, r.op, std::move(r.key), std::move(r.value));
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(std::min(at, c.in.size())));
}

void TcpStoreServer::Impl::handle(uint64_t id, Conn& c, uint8_t op, std::string key, std::vector<uint8_t> value) {
  if (!c.authed) {
    if (op != wire::kAuth || key != wire::kStoreProtocol) {
      fail(c, "it did not open with the dtl store handshake");
    } else if (!wire::constantTimeEqual(std::string(value.begin(), value.end()), token)) {
      fail(c, "wrong job token");
    } else {
      c.authed = true;
      reply(c, wire::kOk, {});
    }
    return;
  }
  switch (op) {
    case wire::kAuth:
      reply(c, wire::kOk, {});
      return;
    case wire::kSet:
      data[key] = std::move(value);
      reply(c, wire::kOk, {});
      notify(key);
      return;
    case wire::kGet: {
      if (value.size() != 8) return fail(c, "a malformed get");
      Pending p;
      p.kind = Pending::kGet;
      p.keys = {std::move(key)};
      p.deadline = requestDeadline(value.data());
      park(id, c, std::move(p));
      return;
    }
    case wire::kAdd:
      if (value.size() != 8) return fail(c, "a malformed add");
      addCounter(c, key, static_cast<int64_t>(wire::getU64(value.data())));
      return;
    case wire::kWait: {
      Pending p;
      p.kind = Pending::kWait;
      if (value.size() < 8 || !wire::parseKeyList(value.data(), value.size(), 8, kStoreMaxKeyBytes, p.keys))
        return fail(c, "a malformed wait");
      p.deadline = requestDeadline(value.data());
      park(id, c, std::move(p));
      return;
    }
    default:
      fail(c, "unknown request op " + std::to_string(op));
  }
}

void TcpStoreServer::Impl::addCounter(Conn& c, const std::string& key, int64_t delta) {
  auto refuse = [&](const std::string& why) { reply(c, wire::kError, std::vector<uint8_t>(why.begin(), why.end())); };
  std::vector<uint8_t>& slot = data[key];
  int64_t now = 0, sum = 0;
  if (!wire::parseCounter(slot, now)) return refuse("key '" + key + "' holds a value that is not an integer counter");
  if (__builtin_add_overflow(now, delta, &sum)) return refuse("counter '" + key + "' would overflow");
  std::string digits = std::to_string(sum);
  slot.assign(digits.begin(), digits.end());
  std::vector<uint8_t> out;
  wire::putU64(out, static_cast<uint64_t>(sum));
  reply(c, wire::kOk, out);
  notify(key);
}

void TcpStoreServer::Impl::park(uint64_t id, Conn& c, Pending p) {
  c.pending = std::move(p);
  recheck(id, c);
  // A request that cannot be met at once and may not wait answers now.
  if (c.pending.kind != Pending::kNone && c.pending.deadline <= Clock::now()) expire(Clock::now());
}

// Answers c's parked request if its keys are there, else parks it on the first missing one.
void TcpStoreServer::Impl::recheck(uint64_t id, Conn& c) {
  Pending& p = c.pending;
  if (p.kind == Pending::kGet) {
    auto it = data.find(p.keys[0]);
    if (it == data.end()) {
      p.watching = p.keys[0];
      watchers[p.watching].push_back(id);
      return;
    }
    p = Pending{};
    unparked = true;
    reply(c, wire::kOk, it->second);
    return;
  }
  for (const std::string& k : p.keys) {
    if (data.count(k) == 0) {
      p.watching = k;
      watchers[k].push_back(id);
      return;
    }
  }
  p = Pending{};
  unparked = true;
  reply(c, wire::kOk, {});
}

void TcpStoreServer::Impl::notify(const std::string& key) {
  auto it = watchers.find(key);
  if (it == watchers.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  watchers.erase(it);
  for (uint64_t id : ids) {
    auto c = conns.find(id);
    if (c == conns.end() || c->second.dead || c->second.pending.kind == Pending::kNone) continue;
    if (c->second.pending.watching != key) continue;
    recheck(id, c->second);
  }
}

void TcpStoreServer::Impl::unwatch(uint64_t id, Conn& c) {
  if (c.pending.kind == Pending::kNone) return;
  auto it = watchers.find(c.pending.watching);
  if (it == watchers.end()) return;
  std::erase(it->second, id);
  if (it->second.empty()) watchers.erase(it);
}

void TcpStoreServer::Impl::expire(Clock::time_point now) {
  for (auto& [id, c] : conns) {
    if (c.dead) continue;
    if (!c.authed && c.auth_deadline <= now) {
      fail(c, "no job token within " + formatDuration(kAuthWindow));
      continue;
    }
    if (c.pending.kind == Pending::kNone || c.pending.deadline > now) continue;
    unwatch(id, c);
    std::vector<std::string> missing;
    for (const std::string& k : c.pending.keys)
      if (data.count(k) == 0) missing.push_back(k);
    std::vector<uint8_t> payload;
    if (c.pending.kind == Pending::kWait) wire::putKeyList(payload, missing);
    c.pending = Pending{};
    unparked = true;
    reply(c, wire::kTimeout, payload);
  }
}

int TcpStoreServer::Impl::pollTimeout() const {
  bool any = accept_resumes > Clock::now();
  Clock::time_point next = accept_resumes;
  for (const auto& [id, c] : conns) {
    if (c.dead) return 0;
    if (!c.authed && (!any || c.auth_deadline < next)) next = c.auth_deadline, any = true;
    if (c.pending.kind != Pending::kNone && (!any || c.pending.deadline < next)) next = c.pending.deadline, any = true;
  }
  return any ? wire::pollMillis(next) : -1;
}

void TcpStoreServer::Impl::closeAll() {
  for (auto& [id, c] : conns) ::close(c.fd);
  conns.clear();
  watchers.clear();
}

void TcpStoreServer::Impl::run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  for (;;) {
    bool accepting = Clock::now() >= accept_resumes;
    fds.assign({{wake_fd, POLLIN, 0}, {accepting ? listen_fd : -1, POLLIN, 0}});
    ids.assign(2, 0);
    for (auto& [id, c] : conns) {
      short ev = POLLRDHUP;
      if (c.pending.kind == Pending::kNone) ev |= POLLIN;
      if (!c.out.empty()) ev |= POLLOUT;
      fds.push_back({c.fd, ev, 0});
      ids.push_back(id);
    }
    int n = ::poll(fds.data(), fds.size(), pollTimeout());
    if (n < 0 && errno != EINTR) {
      std::fprintf(stderr, "dtl store: poll failed: %s; the store stops\n", wire::errnoText(errno).c_str());
      break;
    }
    if (n > 0 && (fds[0].revents & POLLIN)) {
      uint64_t count;
      (void)!::read(wake_fd, &count, sizeof count);
      std::unique_lock<std::mutex> lock(mu);
      if (stop_requested) break;
      if (resets_done < resets_requested) {
        closeAll();
        data.clear();
        told_dropping = told_out_of_fds = false;
        resets_done = resets_requested;
        cv.notify_all();
        continue;
      }
    }
    if (n > 0 && (fds[1].revents & POLLIN)) acceptAll();
    for (size_t i = 2; n > 0 && i < fds.size(); ++i) {
      auto it = conns.find(ids[i]);
      if (it == conns.end() || fds[i].revents == 0) continue;
      Conn& c = it->second;
      if (fds[i].revents & POLLIN) readSome(c);
      if (fds[i].revents & (POLLERR | POLLHUP | POLLRDHUP)) c.dead = true;  // gone; its parked request too
      if (fds[i].revents & POLLOUT) flush(c);
      if (!c.dead) consume(ids[i], c);
    }
    expire(Clock::now());
    // A set may have un-parked a connection with frames still buffered.
    while (unparked) {
      unparked = false;
      for (auto& [id, c] : conns)
        if (!c.dead && c.pending.kind == Pending::kNone && !c.in.empty()) consume(id, c);
    }
    for (auto it = conns.begin(); it != conns.end();) {
      if (!it->second.dead) {
        ++it;
        continue;
      }
      unwatch(it->first, it->second);
      ::close(it->second.fd);
      it = conns.erase(it);
    }
  }
  closeAll();
  std::lock_guard<std::mutex> lock(mu);
  exited = true;
  cv.notify_all();
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TcpStoreServer::~TcpStoreServer() { stop(); }

int TcpStoreServer::port() const { return impl_->port; }

std::unique_ptr<TcpStoreServer> TcpStoreServer::start(const std::string& bind_host, int port, std::string token,
                                                      Status& status) {
  std::string where = wire::hostPort(bind_host, port);
  if (token.empty()) {
    status = Status::error("cannot start the store on " + where + ": no job token");
    return nullptr;
  }
  if (port < 0 || port > 65535) {
    status = Status::error("cannot start the store on " + where + ": not a port number");
    return nullptr;
  }
  int fd = -1;
  std::string why = bindListener(bind_host, port, fd);
  if (!why.empty()) {
    status = Status::error("cannot start the store on " + where + ": " + why);
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->listen_fd = fd;
  impl->token = std::move(token);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  impl->port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                          : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  impl->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl->wake_fd < 0) {
    status = Status::error("cannot start the store on " + where + ": eventfd: " + wire::errnoText(errno));
    ::close(fd);
    return nullptr;
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  status = Status{};
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(impl)));
}

void TcpStoreServer::stop() {
  std::lock_guard<std::mutex> once(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop_requested = true;
  }
  uint64_t one = 1;
  (void)!::write(impl_->wake_fd, &one, sizeof one);
  impl_->thread.join();
  ::close(impl_->listen_fd);
  ::close(impl_->wake_fd);
}

void TcpStoreServer::reset() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (impl_->exited || impl_->stop_requested) return;
  uint64_t target = ++impl_->resets_requested;
  uint64_t one = 1;
  (void)!::write(impl_->wake_fd, &one, sizeof one);
  impl_->cv.wait(lock, [&] { return impl_->resets_done >= target || impl_->exited; });
}

}  // namespace dtl::rt::comm
