// stop_signal.h: a flag, set from an async-signal-safe handler.
#include "runtime/exec/stop_signal.h"

#include <signal.h>

#include <atomic>

namespace dtl::rt {

namespace {

// Any thread may run the handler (the collectives' and GEMM's workers too),
// so the flag is an atomic the loop reads, lock-free so a handler may set it.
std::atomic<int> g_caught{0};
static_assert(std::atomic<int>::is_always_lock_free);

void onStopSignal(int sig) {
  int none = 0;
  if (g_caught.compare_exchange_strong(none, sig)) return;
  // The second: at once. sigaction and raise are async-signal-safe; the
  // signal is blocked while this handler runs, so it lands on return.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

}  // namespace

void catchStopSignals() {
  g_caught.store(0);
  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGTERM);  // one handler at a time, so "first" is well defined
  sigaddset(&sa.sa_mask, SIGINT);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

int stopSignalCaught() { return g_caught.load(); }

}  // namespace dtl::rt
