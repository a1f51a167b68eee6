// dtlc: check, plan and run DTL training specs.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/dtlc/big_stack.h"
#include "tools/dtlc/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string out, err;
  int status = 2;
  dtl::cli::runWithStack(256u << 20, [&] { status = dtl::cli::runCli(args, out, err); });
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fwrite(err.data(), 1, err.size(), stderr);
  return status;
}
