// stop_signal.h: a flag, set from an async-signal-safe handler.
#include "runtime/exec/stop_signal.h"

#include <signal.h>

namespace dtl::rt {

namespace {

volatile sig_atomic_t g_caught = 0;
struct sigaction g_old_term, g_old_int;

void onStopSignal(int sig) {
  if (g_caught == 0) {
    g_caught = sig;
    return;
  }
  // The second: at once. sigaction and raise are async-signal-safe; the
  // signal is blocked while this handler runs, so it lands on return.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

}  // namespace

StopSignals::StopSignals() {
  g_caught = 0;
  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGTERM);  // one handler at a time, so "first" is well defined
  sigaddset(&sa.sa_mask, SIGINT);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &sa, &g_old_term);
  ::sigaction(SIGINT, &sa, &g_old_int);
}

StopSignals::~StopSignals() {
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::sigaction(SIGINT, &g_old_int, nullptr);
}

int StopSignals::caught() const { return g_caught; }

}  // namespace dtl::rt
