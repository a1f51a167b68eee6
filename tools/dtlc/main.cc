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
  // CPU on two cores (bench/README.md). libgomp reads its wait policy when it
  // loads, before main, so dtlc sets it and restarts itself once; a user's
  // own OMP_WAIT_POLICY is respected.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
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
