// The job's rendezvous store over TCP: a single-threaded poll() server (run by
// the launcher, or by rank 0 when another tool started the ranks) and the
// Store client every rank uses. Each connection first presents the per-job
// token; messages are a tiny bounded binary frame, never code. Waiting reads
// park on the server until their key appears or their timeout passes.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "runtime/comm/store.h"

namespace dtl::rt::comm {

// Larger keys or values close the connection (the client refuses to send them).
inline constexpr size_t kStoreMaxKeyBytes = 4096;
inline constexpr size_t kStoreMaxValueBytes = size_t{64} << 20;

class TcpStoreServer {
 public:
  // Listens on bind_host:port (port 0 picks a free one; "0.0.0.0" for ranks
  // on other nodes) and serves from a thread of its own until stop().
  // `token` must be non-empty. On failure returns null and sets `status`.
  static std::unique_ptr<TcpStoreServer> start(const std::string& bind_host, int port, std::string token,
                                               Status& status);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const;
  // Closes every connection and the listening socket; idempotent.
  void stop();
  // Forgets every key and closes every client connection (parked waiters
  // included); keeps listening on the same port. The launcher calls it before
  // restarting the ranks so a new generation never sees the old one's keys.
  void reset();

  struct Impl;

 private:
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The client. Retries the first connection until `connect_timeout` passes (the
// server may start later); errors name the address and what failed. Safe to
// use from several threads: each concurrent call gets a connection of its own.
// add() keeps counters as decimal text, so get() of a counter reads "3".
std::shared_ptr<Store> connectTcpStore(const std::string& host, int port, const std::string& token,
                                       std::chrono::milliseconds connect_timeout, Status& status);

// "300 s", "2 s", "0.5 s": how the store and the rendezvous word timeouts.
std::string formatDuration(std::chrono::milliseconds d);

}  // namespace dtl::rt::comm
