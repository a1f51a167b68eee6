// stop_signal.h: a flag, set from an async-signal-safe handler.
#include "runtime/exec/stop_signal.h"

#include <signal.h>

namespace dtl::rt {

namespace {

volatile sig_atomic_t g_caught = 0;

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

void catchStopSignals() {
  g_caught = 0;
  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGTERM);  // one handler at a time, so "first" is well defined
  sigaddset(&sa.sa_mask, SIGINT);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

int stopSignalCaught() { return g_caught; }

}  // namespace dtl::rt
