// Joining a job and the agreement checks (rendezvous.h). Keys:
//   rank/<r>              a counter each rank adds 1 to on joining (2 = a duplicate rank)
//   host/<r>              the joining process's host name, for people reading the store
//   fingerprint/<r>       rank r's program fingerprint (params_hash/<r>: its parameter hash)
//   fingerprint/verdict   rank 0's comparison: "ok", or "error\n<message>"
//   fingerprint/read/<r>  rank r has read an error verdict (rank 0 waits for it before exiting)
//   step/<r>              the last step rank r finished (the launcher reads it)
#include "runtime/launch/rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <vector>

#include "runtime/comm/tcp_store.h"

namespace dtl::rt::launch {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr size_t kRanksNamed = 16;
constexpr size_t kFingerprintShown = 64;

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

// "rank 2" or "ranks 2, 3" (the first few, then how many in all).
std::string rankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < kRanksNamed; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > kRanksNamed) s += ", … (" + std::to_string(ranks.size()) + " in all)";
  return s;
}

std::string showFingerprint(const std::string& f) {
  return f.size() <= kFingerprintShown ? f : f.substr(0, kFingerprintShown) + "…";
}

bool isTimeout(const Status& s) { return s.message.rfind("timed out", 0) == 0; }

milliseconds left(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

// The ranks whose `prefix<r>` key is absent; an error other than absence fails.
Status missingRanks(Store& store, const std::string& prefix, int world, std::vector<int>& missing) {
  std::vector<uint8_t> v;
  for (int r = 0; r < world; ++r) {
    Status s = store.get(prefix + std::to_string(r), v, milliseconds(0));
    if (s.ok) continue;
    if (!isTimeout(s)) return s;
    missing.push_back(r);
  }
  return {};
}

// The client of a store this rank also serves; the server outlives the client.
class HostedStore final : public Store {
 public:
  HostedStore(std::unique_ptr<comm::TcpStoreServer> server, std::shared_ptr<Store> client)
      : server_(std::move(server)), client_(std::move(client)) {}
  ~HostedStore() override {
    client_.reset();
    server_->stop();
  }
  Status set(const std::string& k, const std::vector<uint8_t>& v) override { return client_->set(k, v); }
  Status get(const std::string& k, std::vector<uint8_t>& v, milliseconds t) override { return client_->get(k, v, t); }
  Status add(const std::string& k, int64_t d, int64_t& r) override { return client_->add(k, d, r); }
  Status wait(const std::vector<std::string>& k, milliseconds t) override { return client_->wait(k, t); }

 private:
  std::unique_ptr<comm::TcpStoreServer> server_;
  std::shared_ptr<Store> client_;
};

std::string hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

}  // namespace

std::string storeBindHost(const std::string& master_addr) {
  bool loopback = master_addr == "localhost" || master_addr.rfind("127.", 0) == 0 || master_addr == "::1";
  if (loopback) return master_addr;
  return master_addr.find(':') != std::string::npos ? "::" : "0.0.0.0";
}

std::string stepKey(int rank) { return "step/" + std::to_string(rank); }

std::string firstStepKey(int rank) { return "first_step/" + std::to_string(rank); }

Status reportStep(Store& store, int rank, int64_t step, bool first) {
  if (first)
    if (Status s = store.set(firstStepKey(rank), bytes(std::to_string(step))); !s.ok) return s;
  return store.set(stepKey(rank), bytes(std::to_string(step)));
}

Status meetRanks(Store& store, const RankEnv& env, const std::string& key, const std::string& point, int slow,
                 milliseconds timeout, milliseconds slow_timeout) {
  const std::string prefix = "meet/" + key + "/";
  if (Status s = store.set(prefix + std::to_string(env.rank), bytes("1")); !s.ok) return s;
  for (bool slow_ones : {false, true}) {
    std::vector<std::string> keys;
    for (int r = 0; r < env.world_size; ++r)
      if ((slow < 0 || r == slow) == slow_ones && r != env.rank) keys.push_back(prefix + std::to_string(r));
    if (keys.empty()) continue;
    const milliseconds limit = slow_ones ? slow_timeout : timeout;
    Status s = store.wait(keys, limit);
    if (s.ok) continue;
    if (!isTimeout(s)) return s;
    std::vector<int> missing;
    if (Status probe = missingRanks(store, prefix, env.world_size, missing); !probe.ok) return probe;
    return Status::error(rankList(missing) + " did not reach " + point + " within " + comm::formatDuration(limit));
  }
  return {};
}

Status joinJob(const RankEnv& env, milliseconds timeout, std::shared_ptr<Store>& store) {
  Clock::time_point deadline = Clock::now() + timeout;
  std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  std::unique_ptr<comm::TcpStoreServer> server;
  Status s;
  if (env.rank == 0 && !env.launcher_hosts_store) {
    server = comm::TcpStoreServer::start(storeBindHost(env.master_addr), env.master_port, env.token, s);
    if (!s.ok) {
      return Status::error("rank 0 cannot host the job's store: " + s.message + "; is another job using port " +
                           std::to_string(env.master_port) + "? Set MASTER_PORT (or " + kEnvStorePort +
                           ") to a free one");
    }
  }
  std::shared_ptr<Store> client = comm::connectTcpStore(env.master_addr, env.master_port, env.token, timeout, s);
  if (!s.ok) return s;
  std::string me = std::to_string(env.rank);
  int64_t claims = 0;
  if (s = client->add("rank/" + me, 1, claims); !s.ok) return s;
  if (claims > 1) {
    return Status::error("rank " + me + " joined twice: two processes were given rank " + me + " (" + env.source +
                         " variables); check the rank of every process");
  }
  if (s = client->set("host/" + me, bytes(hostName())); !s.ok) return s;
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back("rank/" + std::to_string(r));
  s = client->wait(keys, left(deadline));
  if (!s.ok) {
    if (!isTimeout(s)) return s;
    std::vector<int> missing;
    if (Status probe = missingRanks(*client, "rank/", env.world_size, missing); !probe.ok) return probe;
    if (!missing.empty()) {
      return Status::error(rankList(missing) + " did not join within " +
                           comm::formatDuration(timeout) + " (store at " + where +
                           "); check that every rank was started with the same MASTER_ADDR, MASTER_PORT and " +
                           kEnvToken);
    }
  }
  store = server ? std::make_shared<HostedStore>(std::move(server), std::move(client)) : std::move(client);
  return {};
}

Status checkAgreement(Store& store, const RankEnv& env, const Agreement& what, const std::string& value,
                      milliseconds timeout) {
  const std::string prefix = what.key + "/", verdict_key = what.key + "/verdict";
  if (Status s = store.set(prefix + std::to_string(env.rank), bytes(value)); !s.ok) return s;
  std::vector<uint8_t> v;
  if (env.rank != 0) {
    Status s = store.get(verdict_key, v, timeout + std::chrono::seconds(2));
    if (!s.ok) {
      if (!isTimeout(s)) return s;
      return Status::error("rank 0 did not say within " + comm::formatDuration(timeout) + " whether every rank " +
                           what.same + "; did rank 0 fail?");
    }
    std::string verdict(v.begin(), v.end());
    if (verdict == "ok") return {};
    (void)store.set(what.key + "/read/" + std::to_string(env.rank), bytes("1"));  // rank 0 may exit now
    return Status::error(verdict.substr(verdict.find('\n') + 1));
  }
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back(prefix + std::to_string(r));
  Status verdict;
  std::vector<int> silent;  // ranks that did not publish: they will not read the verdict either
  if (Status s = store.wait(keys, timeout); !s.ok) {
    if (!isTimeout(s)) return s;
    std::vector<int>& missing = silent;
    if (Status probe = missingRanks(store, prefix, env.world_size, missing); !probe.ok) return probe;
    verdict = Status::error(rankList(missing) + " did not publish " + what.noun + " within " +
                            comm::formatDuration(timeout) + "; did " + (missing.size() == 1 ? "it" : "they") +
                            " " + what.silent + "?");
  } else {
    std::map<std::string, std::vector<int>> groups;
    for (int r = 0; r < env.world_size; ++r) {
      if (Status s = store.get(keys[r], v, milliseconds(0)); !s.ok) return s;
      groups[std::string(v.begin(), v.end())].push_back(r);
    }
    if (groups.size() > 1) {
      std::string differ;
      for (const auto& [fp, ranks] : groups) {
        if (fp == value) continue;
        differ += (differ.empty() ? "" : "; ") + rankList(ranks) + (ranks.size() == 1 ? " has" : " have") + " " +
                  what.label + " " + showFingerprint(fp);
      }
      const std::vector<int>& mine = groups[value];
      verdict = Status::error(what.differ + ": " + differ + ", but " + rankList(mine) +
                              (mine.size() == 1 ? " has " : " have ") + showFingerprint(value) + "; " + what.hint);
    }
  }
  std::string text = verdict.ok ? "ok" : "error\n" + verdict.message;
  if (Status s = store.set(verdict_key, bytes(text)); !s.ok) return s;
  if (!verdict.ok) {
    // Rank 0 may host the store and is about to exit with this error: the
    // others must read the verdict first (a few seconds at most).
    std::vector<std::string> read;
    for (int r = 1; r < env.world_size; ++r)
      if (std::find(silent.begin(), silent.end(), r) == silent.end())
        read.push_back(what.key + "/read/" + std::to_string(r));
    (void)store.wait(read, std::min<milliseconds>(timeout, std::chrono::seconds(5)));
  }
  return verdict;
}

const Agreement kSameProgram{"fingerprint", "a program fingerprint", "fingerprint", "compiled the same program",
                             "ranks compiled different programs",
                             "check every rank runs the same spec with the same --set and --kernels", "fail to compile"};
const Agreement kSameParameters{"params_hash", "a parameter hash", "parameter hash", "starts from the same parameters",
                                "ranks start from different parameters",
                                "every rank must load the same --init / --resume files and use the same seed",
                                "fail to load its parameters"};

Status checkFingerprints(Store& store, const RankEnv& env, const std::string& fingerprint, milliseconds timeout) {
  return checkAgreement(store, env, kSameProgram, fingerprint, timeout);
}

}  // namespace dtl::rt::launch
