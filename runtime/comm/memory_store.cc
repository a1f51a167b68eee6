// The in-process Store: a map behind a mutex, with a condition variable for
// the blocking calls. For tests that run ranks as threads; it cannot cross a
// process boundary (see shm_store.h for one that survives fork()).
#include <condition_variable>
#include <map>
#include <mutex>

#include "runtime/comm/store.h"
#include "runtime/comm/work.h"

namespace dtl::rt::comm {
namespace {

class MemoryStore : public Store {
 public:
  Status set(const std::string& key, const std::vector<uint8_t>& value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      kv_[key] = value;
    }
    cv_.notify_all();
    return {};
  }

  Status get(const std::string& key, std::vector<uint8_t>& value, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return kv_.count(key) > 0; }))
      return Status::error("store: key '" + key + "' was not set within " + timeoutText(timeout));
    value = kv_[key];
    return {};
  }

  Status add(const std::string& key, int64_t delta, int64_t& result) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& v = kv_[key];
      int64_t current = 0;
      if (!v.empty()) {
        std::string s(v.begin(), v.end());
        size_t used = 0;
        try {
          current = std::stoll(s, &used);
        } catch (...) {
          used = 0;
        }
        if (used != s.size()) return Status::error("store: key '" + key + "' holds '" + s + "', not a counter");
      }
      result = current + delta;
      std::string s = std::to_string(result);
      v.assign(s.begin(), s.end());
    }
    cv_.notify_all();
    return {};
  }

  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    auto all = [&] {
      for (auto& k : keys)
        if (!kv_.count(k)) return false;
      return true;
    };
    if (cv_.wait_for(lock, timeout, all)) return {};
    std::string missing;
    for (auto& k : keys)
      if (!kv_.count(k)) missing += (missing.empty() ? "'" : ", '") + k + "'";
    return Status::error("store: keys " + missing + " were not set within " + timeoutText(timeout));
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<uint8_t>> kv_;
};

}  // namespace

std::shared_ptr<Store> makeMemoryStore() { return std::make_shared<MemoryStore>(); }

}  // namespace dtl::rt::comm
