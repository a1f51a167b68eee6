// Pre-emption on a rank: the first SIGTERM or SIGINT only asks training to
// stop (a flag the step loop reads); the ranks then agree on the step to stop
// after, save a checkpoint and exit 0. A second one ends the process at once,
// by the signal's default action. The handler does nothing but set the flag
// and, the second time, restore the default action and re-raise.
//
// The handlers stay for the rest of the process: a signal that arrives after
// training (the launcher stopping ranks that are already on their way out)
// must not kill a rank before it has said why it failed.
#pragma once

namespace dtl::rt {

// Installs the handlers (once per process) and forgets any signal caught before.
void catchStopSignals();

// The first signal caught since catchStopSignals() (SIGTERM, SIGINT), or 0.
int stopSignalCaught();

}  // namespace dtl::rt
