// See gloo_store_adapter.h.
#include "runtime/comm/gloo_store_adapter.h"

#include <gloo/common/error.h>

#include <cctype>

#include "runtime/comm/work.h"

namespace dtl::rt::comm {
namespace {

// "3" or "rank_3" -> 3; anything else -> -1.
int rankOfKey(const std::string& key) {
  std::string digits = key.rfind("rank_", 0) == 0 ? key.substr(5) : key;
  if (digits.empty() || digits.size() > 9) return -1;
  for (char c : digits)
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
  return std::stoi(digits);
}

}  // namespace

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  Status st = store_->set(prefix_ + key, std::vector<uint8_t>(data.begin(), data.end()));
  if (!st.ok) throw gloo::IoException("gloo rendezvous: " + st.message);
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  std::vector<uint8_t> v;
  Status st = store_->get(prefix_ + key, v, timeout_);
  if (!st.ok) fail({key}, timeout_, st);
  return std::vector<char>(v.begin(), v.end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  for (auto& k : keys) full.push_back(prefix_ + k);
  Status st = store_->wait(full, timeout);
  if (!st.ok) fail(keys, timeout, st);
}

void GlooStoreAdapter::fail(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                            const Status& st) {
  // Which of the keys are still missing (a zero-timeout probe of each).
  std::string ranks, others;
  for (auto& k : keys) {
    std::vector<uint8_t> v;
    if (store_->get(prefix_ + k, v, std::chrono::milliseconds(0)).ok) continue;
    int r = rankOfKey(k);
    if (r >= 0)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    else
      others += (others.empty() ? "" : ", ") + prefix_ + k;
  }
  std::string msg;
  if (!ranks.empty())
    msg = (ranks.find(',') == std::string::npos ? "rank " : "ranks ") + ranks + " did not join the gloo group '" +
          prefix_ + "' within " + timeoutText(timeout);
  else if (!others.empty())
    msg = "gloo rendezvous: keys " + others + " missing after " + timeoutText(timeout);
  else
    msg = "gloo rendezvous: " + st.message;
  throw gloo::IoException(msg);
}

}  // namespace dtl::rt::comm
