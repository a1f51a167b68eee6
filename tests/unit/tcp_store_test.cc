// The TCP store: set/get/add/wait over loopback, waiting reads satisfied
// later, timeouts that name the keys, refusal of peers without the token or
// with oversized frames (checked with raw sockets), many concurrent clients.
#include "runtime/comm/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/comm/tcp_store_wire.h"

namespace dtl::rt::comm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }
long long msSince(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

// Redirects this process's stderr (fd 2) to a file while alive.
class StderrCapture {
 public:
  StderrCapture() : path_(::testing::TempDir() + "stderr_capture_" + std::to_string(::getpid())) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    int fd = ::open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() { restore(); }
  std::string text() {
    restore();
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

struct Fixture : ::testing::Test {
  void SetUp() override {
    Status s;
    server = TcpStoreServer::start("127.0.0.1", 0, kToken, s);
    ASSERT_TRUE(s.ok) << s.message;
    ASSERT_GT(server->port(), 0);
  }
  std::shared_ptr<Store> client(milliseconds timeout = milliseconds(2000)) {
    Status s;
    auto c = connectTcpStore("127.0.0.1", server->port(), kToken, timeout, s);
    EXPECT_TRUE(s.ok) << s.message;
    return c;
  }
  std::string where() const { return "127.0.0.1:" + std::to_string(server->port()); }

  // A plain socket to the server, for speaking the protocol by hand.
  int rawSocket() const {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(server->port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  }
  static void sendBytes(int fd, const std::vector<uint8_t>& b) {
    ASSERT_EQ(::send(fd, b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size()));
  }
  // True when the server closes fd within 2 s without sending anything.
  static bool closedByServer(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 2000) != 1) return false;
    char c;
    return ::recv(fd, &c, 1, 0) <= 0;
  }
  static void authenticate(int fd) {
    sendBytes(fd, wire::request(wire::kAuth, wire::kStoreProtocol, bytes(kToken)));
    uint8_t reply[9];
    ASSERT_EQ(::recv(fd, reply, sizeof reply, MSG_WAITALL), 9);
    ASSERT_EQ(reply[0], wire::kOk);
  }

  std::unique_ptr<TcpStoreServer> server;
};

using TcpStoreTest = Fixture;

TEST_F(TcpStoreTest, SetGetAddWait) {
  auto store = client();
  ASSERT_TRUE(store->set("a", bytes("hello")).ok);
  std::vector<uint8_t> v;
  ASSERT_TRUE(store->get("a", v, milliseconds(0)).ok);
  EXPECT_EQ(text(v), "hello");
  ASSERT_TRUE(store->set("a", bytes("")).ok);  // overwrite, with an empty value
  ASSERT_TRUE(store->get("a", v, milliseconds(100)).ok);
  EXPECT_EQ(text(v), "");

  int64_t n = 0;
  ASSERT_TRUE(store->add("count", 1, n).ok);
  EXPECT_EQ(n, 1);
  ASSERT_TRUE(store->add("count", 5, n).ok);
  EXPECT_EQ(n, 6);
  ASSERT_TRUE(store->add("count", -10, n).ok);
  EXPECT_EQ(n, -4);
  ASSERT_TRUE(store->get("count", v, milliseconds(0)).ok);
  EXPECT_EQ(text(v), "-4");  // counters read as decimal text

  EXPECT_TRUE(store->wait({"a", "count"}, milliseconds(0)).ok);
  EXPECT_TRUE(store->wait({}, milliseconds(0)).ok);
}

TEST_F(TcpStoreTest, AddToANonCounterFails) {
  auto store = client();
  ASSERT_TRUE(store->set("s", bytes("abc")).ok);
  int64_t n = 0;
  Status s = store->add("s", 1, n);
  EXPECT_EQ(s.message, "the store at " + where() + " refused add on s: key 's' holds a value that is not an integer counter");
  ASSERT_TRUE(store->set("big", bytes("9223372036854775807")).ok);
  EXPECT_FALSE(store->add("big", 1, n).ok);
  EXPECT_TRUE(store->add("s2", 2, n).ok);  // the connection still works after a refusal
}

TEST_F(TcpStoreTest, BlockingGetIsSatisfiedBySetLater) {
  auto reader = client();
  auto writer = client();
  std::vector<uint8_t> v;
  Status s;
  auto start = Clock::now();
  std::thread t([&] { s = reader->get("late", v, milliseconds(5000)); });
  std::this_thread::sleep_for(milliseconds(150));
  ASSERT_TRUE(writer->set("late", bytes("now")).ok);
  t.join();
  EXPECT_TRUE(s.ok) << s.message;
  EXPECT_EQ(text(v), "now");
  EXPECT_GE(msSince(start), 140);
  EXPECT_LT(msSince(start), 2000);
}

TEST_F(TcpStoreTest, BlockingGetIsSatisfiedByAdd) {
  auto store = client();
  std::vector<uint8_t> v;
  Status s;
  std::thread t([&] { s = store->get("n", v, milliseconds(5000)); });  // same client: a second connection
  std::this_thread::sleep_for(milliseconds(50));
  int64_t n;
  ASSERT_TRUE(store->add("n", 7, n).ok);
  t.join();
  EXPECT_TRUE(s.ok) << s.message;
  EXPECT_EQ(text(v), "7");
}

TEST_F(TcpStoreTest, WaitIsSatisfiedWhenTheLastKeyArrives) {
  auto store = client();
  Status s;
  auto start = Clock::now();
  std::thread t([&] { s = store->wait({"x", "y", "z"}, milliseconds(5000)); });
  for (const char* k : {"z", "x", "y"}) {
    std::this_thread::sleep_for(milliseconds(50));
    ASSERT_TRUE(store->set(k, bytes("1")).ok);
  }
  t.join();
  EXPECT_TRUE(s.ok) << s.message;
  EXPECT_GE(msSince(start), 140);
}

TEST_F(TcpStoreTest, GetTimeoutNamesTheKey) {
  auto store = client();
  std::vector<uint8_t> v;
  auto start = Clock::now();
  Status s = store->get("rank/3", v, milliseconds(200));
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.message, "timed out after 0.2 s waiting for key rank/3 in the store at " + where());
  EXPECT_GE(msSince(start), 190);
  EXPECT_LT(msSince(start), 2000);
  // A get that may not wait answers at once.
  start = Clock::now();
  EXPECT_FALSE(store->get("rank/3", v, milliseconds(0)).ok);
  EXPECT_LT(msSince(start), 500);
}

TEST_F(TcpStoreTest, WaitTimeoutNamesOnlyTheMissingKeys) {
  auto store = client();
  ASSERT_TRUE(store->set("rank/0", bytes("")).ok);
  ASSERT_TRUE(store->set("rank/2", bytes("")).ok);
  Status s = store->wait({"rank/0", "rank/1", "rank/2", "rank/3"}, milliseconds(300));
  EXPECT_EQ(s.message, "timed out after 0.3 s waiting for keys rank/1, rank/3 in the store at " + where());
  s = store->wait({"rank/0", "rank/3"}, milliseconds(0));
  EXPECT_EQ(s.message, "timed out after 0 s waiting for key rank/3 in the store at " + where());
}

TEST_F(TcpStoreTest, ConnectionWithoutTheTokenIsRefusedAndLogged) {
  StderrCapture err;
  int fd = rawSocket();
  sendBytes(fd, wire::request(wire::kSet, "k", bytes("v")));  // no handshake
  EXPECT_TRUE(closedByServer(fd));
  ::close(fd);

  fd = rawSocket();
  sendBytes(fd, wire::request(wire::kAuth, wire::kStoreProtocol, bytes("not-the-token")));
  EXPECT_TRUE(closedByServer(fd));
  ::close(fd);

  fd = rawSocket();  // connects and leaves without a word
  ::close(fd);
  std::this_thread::sleep_for(milliseconds(100));

  std::string log = err.text();
  EXPECT_NE(log.find("dtl store: refused the connection from 127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find(": it left without presenting the job token\n"), std::string::npos) << log;
  EXPECT_NE(log.find(": it did not open with the dtl store handshake\n"), std::string::npos) << log;
  EXPECT_NE(log.find(": wrong job token\n"), std::string::npos) << log;
  std::vector<uint8_t> v;
  EXPECT_FALSE(client()->get("k", v, milliseconds(0)).ok);  // the refused set did nothing
}

TEST_F(TcpStoreTest, ClientWithTheWrongTokenGetsAClearError) {
  StderrCapture err;
  Status s;
  auto start = Clock::now();
  auto store = connectTcpStore("127.0.0.1", server->port(), "wrong", milliseconds(5000), s);
  EXPECT_EQ(store, nullptr);
  EXPECT_EQ(s.message, "cannot join the store at " + where() +
                           ": it refused this rank's job token (is DTL_JOB_TOKEN the same on every rank, and is "
                           "this the right job's store?)");
  EXPECT_LT(msSince(start), 2000);  // not retried
}

TEST_F(TcpStoreTest, OversizedFramesCloseTheConnection) {
  StderrCapture err;
  int fd = rawSocket();
  authenticate(fd);
  std::vector<uint8_t> frame{wire::kSet};
  wire::putU32(frame, kStoreMaxKeyBytes + 1);  // the header alone is enough to refuse
  sendBytes(fd, frame);
  EXPECT_TRUE(closedByServer(fd));
  ::close(fd);

  fd = rawSocket();
  authenticate(fd);
  frame = {wire::kSet};
  wire::putU32(frame, 1);
  frame.push_back('k');
  wire::putU64(frame, kStoreMaxValueBytes + 1);
  sendBytes(fd, frame);
  EXPECT_TRUE(closedByServer(fd));
  ::close(fd);

  fd = rawSocket();  // before the token, even a modest frame is too big
  frame = {wire::kAuth};
  wire::putU32(frame, 1000);
  sendBytes(fd, frame);
  EXPECT_TRUE(closedByServer(fd));
  ::close(fd);

  std::string log = err.text();
  EXPECT_NE(log.find(": a key of 4097 bytes (the limit is 4096)"), std::string::npos) << log;
  EXPECT_NE(log.find(": a value of 67108865 bytes (the limit is 67108864)"), std::string::npos) << log;

  // The client refuses to send them in the first place.
  auto store = client();
  Status s = store->set(std::string(kStoreMaxKeyBytes + 1, 'k'), bytes("v"));
  EXPECT_EQ(s.message.rfind("a store key of 4097 bytes is over the limit of 4096", 0), 0u) << s.message;
  s = store->set("big", std::vector<uint8_t>(kStoreMaxValueBytes + 1));
  EXPECT_EQ(s.message, "a store value of 67108865 bytes is over the limit of 67108864 (key big)");
  // The largest allowed value goes through whole.
  std::vector<uint8_t> big(kStoreMaxValueBytes, 7), back;
  big.back() = 9;
  ASSERT_TRUE(store->set("big", big).ok);
  ASSERT_TRUE(store->get("big", back, milliseconds(0)).ok);
  EXPECT_EQ(back, big);
}

TEST_F(TcpStoreTest, ManyConcurrentClients) {
  constexpr int kThreads = 24, kAdds = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  auto shared = client();
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto own = client();
      Store& store = i % 2 == 0 ? *own : *shared;  // half share one client's connection pool
      int64_t n;
      for (int k = 0; k < kAdds; ++k)
        if (!store.add("counter", 1, n).ok) ++failures;
      if (!store.set("done/" + std::to_string(i), bytes(std::to_string(i))).ok) ++failures;
      std::vector<std::string> all;
      for (int j = 0; j < kThreads; ++j) all.push_back("done/" + std::to_string(j));
      Status s = store.wait(all, milliseconds(10000));
      if (!s.ok) ++failures;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<uint8_t> v;
  ASSERT_TRUE(shared->get("counter", v, milliseconds(0)).ok);
  EXPECT_EQ(text(v), std::to_string(kThreads * kAdds));
}

TEST(TcpStoreConnect, RetriesUntilTheServerStarts) {
  Status s;
  int port;
  {
    auto probe = TcpStoreServer::start("127.0.0.1", 0, kToken, s);  // find a free port
    ASSERT_TRUE(s.ok);
    port = probe->port();
  }
  std::unique_ptr<TcpStoreServer> late;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(300));
    Status st;
    late = TcpStoreServer::start("127.0.0.1", port, kToken, st);
  });
  auto store = connectTcpStore("127.0.0.1", port, kToken, milliseconds(5000), s);
  starter.join();
  ASSERT_TRUE(s.ok) << s.message;
  EXPECT_TRUE(store->set("k", bytes("v")).ok);
}

TEST(TcpStoreConnect, TimeoutNamesTheAddressAndTheCause) {
  Status s;
  int port;
  {
    auto probe = TcpStoreServer::start("127.0.0.1", 0, kToken, s);
    ASSERT_TRUE(s.ok);
    port = probe->port();
  }
  auto start = Clock::now();
  auto store = connectTcpStore("127.0.0.1", port, kToken, milliseconds(300), s);
  EXPECT_EQ(store, nullptr);
  EXPECT_EQ(s.message, "cannot reach the store at 127.0.0.1:" + std::to_string(port) +
                           " within 0.3 s: connection refused; is MASTER_ADDR right?");
  EXPECT_GE(msSince(start), 290);
  EXPECT_LT(msSince(start), 2000);
}

TEST(TcpStoreServerStart, ErrorsNameTheAddress) {
  Status s;
  auto first = TcpStoreServer::start("127.0.0.1", 0, kToken, s);
  ASSERT_TRUE(s.ok);
  auto second = TcpStoreServer::start("127.0.0.1", first->port(), kToken, s);
  EXPECT_EQ(second, nullptr);
  EXPECT_EQ(s.message, "cannot start the store on 127.0.0.1:" + std::to_string(first->port()) +
                           ": address already in use");
  EXPECT_EQ(TcpStoreServer::start("127.0.0.1", 0, "", s), nullptr);
  EXPECT_EQ(s.message, "cannot start the store on 127.0.0.1:0: no job token");
}

TEST_F(TcpStoreTest, StoppingTheServerFailsAParkedGetAtOnce) {
  auto store = client();
  std::vector<uint8_t> v;
  Status s;
  auto start = Clock::now();
  std::thread t([&] { s = store->get("never", v, milliseconds(10000)); });
  std::this_thread::sleep_for(milliseconds(100));
  server->stop();
  t.join();
  EXPECT_LT(msSince(start), 2000);
  EXPECT_EQ(s.message.rfind("lost the connection to the store at " + where() + " during get never: ", 0), 0u)
      << s.message;
}

TEST_F(TcpStoreTest, ResetForgetsKeysAndKeepsThePort) {
  auto old_client = client();
  ASSERT_TRUE(old_client->set("k", bytes("v")).ok);
  int port = server->port();
  server->reset();
  EXPECT_EQ(server->port(), port);
  auto fresh = client();
  std::vector<uint8_t> v;
  EXPECT_FALSE(fresh->get("k", v, milliseconds(0)).ok);
  EXPECT_FALSE(old_client->set("k", bytes("v")).ok);  // its connection was closed
}

TEST(FormatDuration, Seconds) {
  EXPECT_EQ(formatDuration(milliseconds(300000)), "300 s");
  EXPECT_EQ(formatDuration(milliseconds(0)), "0 s");
  EXPECT_EQ(formatDuration(milliseconds(500)), "0.5 s");
  EXPECT_EQ(formatDuration(milliseconds(1250)), "1.25 s");
  EXPECT_EQ(formatDuration(milliseconds(2005)), "2.005 s");
}

}  // namespace
}  // namespace dtl::rt::comm
