// See shm_store.h.
#include "runtime/comm/shm_store.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <new>

#include "runtime/comm/work.h"

namespace dtl::rt::comm {
namespace {

constexpr int kEntries = 256;
constexpr size_t kKeyBytes = 192, kValueBytes = 4096;

struct Entry {
  char key[kKeyBytes];
  uint32_t used;
  uint32_t length;
  uint8_t value[kValueBytes];
};

struct Table {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  Entry entries[kEntries];
};

class ForkSharedStore : public Store {
 public:
  ForkSharedStore() {
    void* p = mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    t_ = static_cast<Table*>(p);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&t_->mu, &ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t_->cv, &ca);
  }
  ~ForkSharedStore() override { munmap(t_, sizeof(Table)); }

  Status set(const std::string& key, const std::vector<uint8_t>& value) override {
    if (value.size() > kValueBytes)
      return Status::error("store: value of '" + key + "' is " + std::to_string(value.size()) + " bytes, over 4 KiB");
    Lock lock(t_);
    Entry* e = slot(key, true);
    if (!e) return full(key);
    e->length = value.size();
    if (!value.empty()) std::memcpy(e->value, value.data(), value.size());
    pthread_cond_broadcast(&t_->cv);
    return {};
  }

  Status get(const std::string& key, std::vector<uint8_t>& value, std::chrono::milliseconds timeout) override {
    Lock lock(t_);
    if (!waitFor({key}, timeout)) return Status::error("store: key '" + key + "' was not set within " + timeoutText(timeout));
    Entry* e = slot(key, false);
    value.assign(e->value, e->value + e->length);
    return {};
  }

  Status add(const std::string& key, int64_t delta, int64_t& result) override {
    Lock lock(t_);
    Entry* e = slot(key, false);
    int64_t current = 0;
    if (e) {
      std::string s(reinterpret_cast<char*>(e->value), e->length);
      char* end = nullptr;
      current = std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end) return Status::error("store: key '" + key + "' holds '" + s + "', not a counter");
    } else if (!(e = slot(key, true))) {
      return full(key);
    }
    result = current + delta;
    std::string s = std::to_string(result);
    e->length = s.size();
    std::memcpy(e->value, s.data(), s.size());
    pthread_cond_broadcast(&t_->cv);
    return {};
  }

  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    Lock lock(t_);
    if (waitFor(keys, timeout)) return {};
    std::string missing;
    for (auto& k : keys)
      if (!slot(k, false)) missing += (missing.empty() ? "'" : ", '") + k + "'";
    return Status::error("store: keys " + missing + " were not set within " + timeoutText(timeout));
  }

 private:
  struct Lock {
    explicit Lock(Table* t) : t(t) {
      if (pthread_mutex_lock(&t->mu) == EOWNERDEAD) pthread_mutex_consistent(&t->mu);
    }
    ~Lock() { pthread_mutex_unlock(&t->mu); }
    Table* t;
  };

  static Status full(const std::string& key) {
    return Status::error("store: no room for key '" + key + "' (at most 256 keys of up to 191 bytes)");
  }

  Entry* slot(const std::string& key, bool create) {
    if (key.size() >= kKeyBytes) return nullptr;
    for (auto& e : t_->entries)
      if (e.used && key == e.key) return &e;
    if (!create) return nullptr;
    for (auto& e : t_->entries) {
      if (e.used) continue;
      std::memcpy(e.key, key.c_str(), key.size() + 1);
      e.used = 1;
      e.length = 0;
      return &e;
    }
    return nullptr;
  }

  // Mutex held.
  bool waitFor(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    int64_t ns = deadline.tv_nsec + (timeout.count() % 1000) * 1000000;
    deadline.tv_sec += timeout.count() / 1000 + ns / 1000000000;
    deadline.tv_nsec = ns % 1000000000;
    for (;;) {
      bool all = true;
      for (auto& k : keys) all = all && slot(k, false);
      if (all) return true;
      int rc = pthread_cond_timedwait(&t_->cv, &t_->mu, &deadline);
      if (rc == EOWNERDEAD) pthread_mutex_consistent(&t_->mu);
      if (rc == ETIMEDOUT) {
        for (auto& k : keys)
          if (!slot(k, false)) return false;
        return true;
      }
    }
  }

  Table* t_;
};

}  // namespace

std::shared_ptr<Store> makeForkSharedStore() { return std::make_shared<ForkSharedStore>(); }

}  // namespace dtl::rt::comm
