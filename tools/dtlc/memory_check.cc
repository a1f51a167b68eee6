#include "tools/dtlc/memory_check.h"

#include "compiler/program/plan_program.h"
#include "compiler/sema/print_sema.h"
#include "runtime/launch/host_memory.h"
#include "tools/dtlc/kernel_emitter.h"

namespace dtl::cli {

std::string memoryRefusal(const plan::Memory& per_rank, int64_t ranks, int64_t available, const std::string& where,
                          const std::string& hint) {
  int64_t total = per_rank.total();
  // Saturate: a plan past int64 does not fit anything.
  int64_t need = ranks > 0 && total > INT64_MAX / ranks ? INT64_MAX : total * ranks;
  if (need <= available) return "";
  std::string what = "the plan needs " + sema::humanBytes(total) + " per rank";
  if (ranks != 1)
    what += " × " + std::to_string(ranks) + " ranks on this machine = " + sema::humanBytes(need);
  return what + ", more than the " + sema::humanBytes(available) + " " + where + "\n" + plan::memoryText(per_rank) +
         "hint: " + hint + "\n";
}

int checkRunMemory(const driver::Frontend& fe, int64_t local_ranks, const std::string& kernels, std::string& err) {
  rt::launch::HostMemory host = rt::launch::readHostMemory();
  if (host.available < 0) return 0;  // nothing to compare with
  const prog::Program rank0 =
      program::planProgram(fe.graph(), fe.layout(), layout::meshCoords(fe.layout().mesh, 0), planOptionsFor(kernels));
  std::string no = memoryRefusal(plan::memoryPerRank(rank0, fe.spec()), local_ranks, host.available,
                                 "available (" + host.what + ")",
                                 "lower train.batch or the model's dims, or start fewer ranks on this machine; "
                                 "--ignore-memory-check starts it anyway");
  if (no.empty()) return 0;
  err += "dtlc run: " + no;
  return 1;
}

}  // namespace dtl::cli
