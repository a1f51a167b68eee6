// One bundle case (bundle.h) on the GPU: its module loaded, its buffers
// allocated and filled, its kernels launched, its outputs read back, and
// every module and allocation released on every path.
#pragma once

#include <string>

#include "tools/ptx_run/bundle.h"
#include "tools/ptx_run/cuda_driver.h"

namespace dtl::ptxrun {

// "" with the device's name, or why no generated kernel can run here: no
// driver, no device, or one older than sm_90 / a driver older than CUDA
// 11.8 (the PTX is sm_90, ISA 7.8: compiler/codegen/ptx.h).
std::string openGpu(const CudaDriver** cu, std::string* name);

class CaseRunner {
 public:
  CaseRunner(const CudaDriver& cu, const std::string& inputs) : cu_(cu), inputs_(inputs) {}

  // The case run twice — a full grid, then 3 blocks of 96 threads striding
  // — from the same inputs, with outputs and scratch filled differently in
  // each pass (an unwritten value then differs): "" with the first pass's
  // outputs when both passes agree bit for bit, else what failed.
  std::string run(const BundleCase& c, const std::string& ptx, std::string* outputs);

  // A region case's kernels launched `repeats` times after a warm-up, one
  // thread per point: *ms, the mean wall time of one launch of them all.
  std::string time(const BundleCase& c, const std::string& ptx, int repeats, double* ms);

  // After a launch failure the context is unusable: every later case fails.
  bool contextLost() const { return lost_; }

 private:
  struct Loaded;
  std::string check(CuResult r, const char* what);
  std::string runRegion(const BundleCase& c, Loaded& m, std::string* outputs);
  std::string runUpdate(const BundleCase& c, Loaded& m, std::string* outputs);
  std::string twoPasses(const BundleCase& c, Loaded& m, std::string* outputs, const char* full_grid);
  std::string fill(const BundleCase& c, Loaded& m, int pass);
  std::string launchAll(const BundleCase& c, Loaded& m, bool strided);  // queued, not waited for
  std::string readOutputs(const BundleCase& c, Loaded& m, std::string* got);

  const CudaDriver& cu_;
  const std::string& inputs_;
  bool lost_ = false;
};

}  // namespace dtl::ptxrun
