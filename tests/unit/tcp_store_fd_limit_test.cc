// The TCP store out of file descriptors: idle connections that never present
// the token, more of them than `ulimit -n` allows, must neither make the
// server's thread spin (accept() failing with EMFILE while the listening
// socket stays readable) nor lock a rank out. The server runs in a forked
// child under a low RLIMIT_NOFILE; the idle connections and the rank's
// client live in this (unlimited) process.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "runtime/comm/tcp_store.h"

namespace dtl::rt::comm {
namespace {

using std::chrono::milliseconds;
constexpr char kToken[] = "0123456789abcdef0123456789abcdef";
constexpr rlim_t kChildFdLimit = 64;
constexpr int kIdleConnections = 150;

long long cpuMicros() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000LL + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
}

bool writeAll(int fd, const void* p, size_t n) { return ::write(fd, p, n) == static_cast<ssize_t>(n); }
bool readAll(int fd, void* p, size_t n) { return ::read(fd, p, n) == static_cast<ssize_t>(n); }

// The child: serve under the low limit; on "go", report the CPU time the
// process (in effect the server's thread) used over one idle second.
[[noreturn]] void serveUnderLowLimit(int to_parent, int from_parent) {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = kChildFdLimit;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(3);
  Status s;
  auto server = TcpStoreServer::start("127.0.0.1", 0, kToken, s);
  int port = server ? server->port() : -1;
  if (!writeAll(to_parent, &port, sizeof port) || !server) ::_exit(4);
  char go;
  if (!readAll(from_parent, &go, 1)) ::_exit(5);
  long long before = cpuMicros();
  std::this_thread::sleep_for(milliseconds(1000));
  long long used = cpuMicros() - before;
  if (!writeAll(to_parent, &used, sizeof used)) ::_exit(6);
  (void)readAll(from_parent, &go, 1);  // until the parent is done
  server->stop();
  ::_exit(0);
}

int dial(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// True when the server closed fd (EOF or reset) within `wait`.
bool closedByServer(int fd, milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) != 1) return false;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

TEST(TcpStoreOutOfDescriptors, IdleConnectionsNeitherSpinTheServerNorLockOutARank) {
  int up[2], down[2];
  ASSERT_EQ(::pipe(up), 0);
  ASSERT_EQ(::pipe(down), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(up[0]);
    ::close(down[1]);
    serveUnderLowLimit(up[1], down[0]);
  }
  ::close(up[1]);
  ::close(down[0]);
  int port = -1;
  ASSERT_TRUE(readAll(up[0], &port, sizeof port));
  ASSERT_GT(port, 0);

  // More idle connections than the server has descriptors; the kernel
  // completes each handshake from the listen backlog.
  std::vector<int> idle;
  for (int i = 0; i < kIdleConnections; ++i) {
    int fd = dial(port);
    ASSERT_GE(fd, 0) << "connection " << i;
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(200));  // the server meets the limit
  ASSERT_TRUE(writeAll(down[1], "g", 1));
  long long used = 0;
  ASSERT_TRUE(readAll(up[0], &used, sizeof used));
  // Spinning on accept() burns most of that second; resting costs nothing.
  EXPECT_LT(used, 200000) << "the store used " << used / 1000 << " ms of CPU in one idle second";

  // A rank arriving now still gets in: the oldest idle connections make room.
  Status s;
  auto start = std::chrono::steady_clock::now();
  auto store = connectTcpStore("127.0.0.1", port, kToken, milliseconds(5000), s);
  ASSERT_TRUE(s.ok) << s.message;
  std::vector<uint8_t> v;
  EXPECT_TRUE(store->set("k", {'v'}).ok);
  EXPECT_TRUE(store->get("k", v, milliseconds(0)).ok);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_TRUE(closedByServer(idle.front(), milliseconds(100))) << "the oldest idle connection is still open";
  EXPECT_FALSE(closedByServer(idle.back(), milliseconds(0))) << "the newest idle connection was closed";

  store.reset();
  ASSERT_TRUE(writeAll(down[1], "d", 1));  // the server stops first, so closing these is not news to it
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "server child ended with status " << status;
  for (int fd : idle) ::close(fd);
}

}  // namespace
}  // namespace dtl::rt::comm
