// dtlc: check, plan and run DTL training specs.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tools/dtlc/big_stack.h"
#include "tools/dtlc/cli.h"

int main(int argc, char** argv) {
  // OpenMP threads that spin while waiting between GEMMs took most of the
  // CPU on two cores (bench/README.md): libgomp's default spins ~300,000
  // pauses (8 ms on a Zen 3) before it sleeps. Passive alone sleeps at every
  // wait: a Fashion-MNIST worker slept and was woken ~10 times a step, 17–38 %
  // of the step on a Zen 3 (bench/README.md). So the policy is passive with a
  // short spin, 30,000 pauses (~1 ms): the gaps between a step's kernels are
  // spun through, longer waits sleep, and libgomp spins not at all when a
  // process has more OpenMP threads than cores. libgomp reads both when it
  // loads, before main, so dtlc sets them and restarts itself once; a user's
  // own OMP_WAIT_POLICY (or GOMP_SPINCOUNT) is respected.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    if (!std::getenv("GOMP_SPINCOUNT")) setenv("GOMP_SPINCOUNT", "30000", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then carry on as we are
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string out, err;
  int status = 2;
  dtl::cli::runWithStack(256u << 20, [&] { status = dtl::cli::runCli(args, out, err); });
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fwrite(err.data(), 1, err.size(), stderr);
  return status;
}
