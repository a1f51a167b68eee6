// Gloo's rendezvous store (set/get/wait, throwing on failure) on top of our
// Store (returning Status), under a key prefix. Gloo's own keys are rank
// numbers ("3", "rank_3"), so a failure is reported as the ranks missing.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/store.h"

namespace dtl::rt::comm {

class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(std::shared_ptr<comm::Store> store, std::string prefix, std::chrono::milliseconds timeout)
      : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  [[noreturn]] void fail(const std::vector<std::string>& keys, std::chrono::milliseconds timeout, const Status& st);

  std::shared_ptr<comm::Store> store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

}  // namespace dtl::rt::comm
