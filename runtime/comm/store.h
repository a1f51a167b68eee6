// The rendezvous store: a small key-value service every rank of a job can
// reach (a TCP server run by the launcher or by rank 0). Ranks use it to
// find each other, exchange program fingerprints and bootstrap the
// communicators. Values are bytes; every call has a timeout and a failure
// says which keys (so which ranks) are missing.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtl::rt::comm {

struct Status {
  bool ok = true;
  std::string message;  // "rank 3 did not join within 300 s (key rank/3); check MASTER_ADDR"
  static Status error(std::string m) { return {false, std::move(m)}; }
};

class Store {
 public:
  virtual ~Store() = default;
  virtual Status set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Blocks until the key exists or the timeout passes.
  virtual Status get(const std::string& key, std::vector<uint8_t>& value, std::chrono::milliseconds timeout) = 0;
  // Atomically adds `delta` to an integer counter (created at 0); returns the new value.
  virtual Status add(const std::string& key, int64_t delta, int64_t& result) = 0;
  // Blocks until every key exists; the error names the missing ones.
  virtual Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
};

// In-process store for tests that run ranks as threads.
std::shared_ptr<Store> makeMemoryStore();

}  // namespace dtl::rt::comm
