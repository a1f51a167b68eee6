// What each rank does at start-up, before any communicator exists: join the
// job's store (hosting it first when it is rank 0 and no launcher does),
// wait until every rank has joined, and agree that all ranks compiled the
// same program. Also the progress key the launcher reads to name a failed
// rank's last step.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/comm/store.h"
#include "runtime/launch/env.h"

namespace dtl::rt::launch {

using comm::Status;
using comm::Store;

// Connects to the store at env.master_addr:master_port (as rank 0 without
// env.launcher_hosts_store, first starts it there: the returned store then
// owns the server, so keep it alive while other ranks may use it), claims
// rank/<r>, then waits for every rank. The whole join must finish within
// `timeout`; else the error names the missing ranks ("ranks 2, 3 did not
// join within 300 s ..."). Two processes with the same rank fail too.
Status joinJob(const RankEnv& env, std::chrono::milliseconds timeout, std::shared_ptr<Store>& store);

// What the ranks must agree on, and the words for it in errors.
struct Agreement {
  std::string key;     // store keys: <key>/<rank>, <key>/verdict
  std::string noun;    // "a program fingerprint"
  std::string label;   // "fingerprint", as in "rank 1 has fingerprint …"
  std::string same;    // "compiled the same program"
  std::string differ;  // "ranks compiled different programs"
  std::string hint;
  std::string silent;  // "fail to compile": why a rank may not have published
};
extern const Agreement kSameProgram, kSameParameters;

// Every rank publishes `value`; rank 0 compares them and publishes the
// verdict, so on a mismatch every rank fails with the same message naming
// the ranks that differ and both values. Ranks other than 0 wait up to
// `timeout` plus 2 s for the verdict.
Status checkAgreement(Store& store, const RankEnv& env, const Agreement& what, const std::string& value,
                      std::chrono::milliseconds timeout);

// checkAgreement on kSameProgram. Every rank publishes `fingerprint` (of its compiled program); rank 0
// compares them and publishes the verdict, so on a mismatch every rank fails
// with the same message naming the ranks that differ and both fingerprints.
// Ranks other than 0 wait up to `timeout` plus 2 s for the verdict.
Status checkFingerprints(Store& store, const RankEnv& env, const std::string& fingerprint,
                         std::chrono::milliseconds timeout);

// Every rank arrives at `point` (meet/<key>/<rank> in the store; `point` names
// it in errors, e.g. "the end of the checkpoint at step 12") and waits for
// the others: up to `timeout` for each
// rank but `slow`, which did long work of its own first (rank 0 writing a
// checkpoint) and gets `slow_timeout` (every rank does when `slow` is -1).
// The error names the ranks missing.
Status meetRanks(Store& store, const RankEnv& env, const std::string& key, const std::string& point, int slow,
                 std::chrono::milliseconds timeout, std::chrono::milliseconds slow_timeout);

// Where the store listens for a job whose ranks reach it at `master_addr`: a
// loopback address stays private to this node; any other means every interface.
std::string storeBindHost(const std::string& master_addr);

// "step/<rank>": the last optimiser step a rank finished, as decimal text.
std::string stepKey(int rank);
// "first_step/<rank>": the first step a rank finished in this generation of
// ranks (a restarted one resumed from the step before it).
std::string firstStepKey(int rank);
// `first`: the first step this process finished (also firstStepKey).
Status reportStep(Store& store, int rank, int64_t step, bool first = false);

}  // namespace dtl::rt::launch
