// ptx_run: runs a PTX bundle (bundle.h) on the first CUDA device and writes
// every case's outputs for the checker (tests/gpu/ptx_check.cc); each case
// runs on two grids that must agree bit for bit (case_runner.h).
//
//   ptx_run --probe                  exit 0 when a GPU can run the kernels, 77 (skip) when not
//   ptx_run BUNDLE RESULTS           exit 0, 1 when a case failed, 77 without a GPU, 2 on bad use
//   ptx_run --time BUNDLE RESULTS    each region case's time and the rate it moves its buffers
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tools/ptx_run/bundle.h"
#include "tools/ptx_run/case_runner.h"
#include "tools/ptx_run/cuda_driver.h"

namespace dtl::ptxrun {
namespace {

namespace fs = std::filesystem;

constexpr int kNoGpu = 77, kBadUse = 2;
constexpr int64_t kOutputFileBytes = 15 << 20;  // a file the GPU machine's tool hands back whole
constexpr int kTimedLaunches = 20;

std::string readFile(const fs::path& p, bool* ok) {
  std::ifstream in(p, std::ios::binary);
  *ok = static_cast<bool>(in);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Bundle {
  std::vector<BundleCase> cases;
  std::string inputs;
};

bool readBundle(const fs::path& dir, Bundle* b) {
  if (std::string e = readManifest((dir / "manifest.txt").string(), &b->cases); !e.empty()) {
    std::fprintf(stderr, "ptx_run: %s\n", e.c_str());
    return false;
  }
  bool ok = false;
  b->inputs = readFile(dir / "inputs.bin", &ok);
  if (!ok) std::fprintf(stderr, "ptx_run: cannot read %s\n", (dir / "inputs.bin").c_str());
  return ok;
}

// Outputs go to outputs-K.bin files of at most kOutputFileBytes each.
class OutputFiles {
 public:
  explicit OutputFiles(const fs::path& dir) : dir_(dir) {}
  void add(const std::string& bytes, CaseResult* r) {
    if (name_.empty() || size_ + static_cast<int64_t>(bytes.size()) > kOutputFileBytes) {
      out_.close();
      name_ = "outputs-" + std::to_string(files_++) + ".bin";
      out_.open(dir_ / name_, std::ios::binary);
      size_ = 0;
    }
    r->file = name_;
    r->offset = size_;
    r->bytes = static_cast<int64_t>(bytes.size());
    out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    size_ += r->bytes;
  }
  bool close() {  // true when every output was written (also when there were none)
    if (!out_.is_open()) return !out_.fail();
    out_.close();
    return !out_.fail();
  }
  int files() const { return files_; }

 private:
  fs::path dir_;
  std::ofstream out_;
  std::string name_;
  int64_t size_ = 0;
  int files_ = 0;
};

int runBundle(const CudaDriver& cu, const std::string& device, const fs::path& dir, const fs::path& results) {
  Bundle bundle;
  if (!readBundle(dir, &bundle)) return kBadUse;
  fs::create_directories(results);
  CaseRunner runner(cu, bundle.inputs);
  OutputFiles files(results);
  std::vector<CaseResult> out;
  int failed = 0;
  for (const BundleCase& c : bundle.cases) {
    CaseResult r;
    r.id = c.id;
    std::string outputs;
    bool ok = false;
    const std::string ptx = readFile(dir / c.ptx_file, &ok);
    r.error = runner.contextLost() ? "not run: the context was lost in an earlier case"
              : ok                 ? runner.run(c, ptx, &outputs)
                                   : "cannot read " + c.ptx_file;
    r.ok = r.error.empty();
    if (r.ok) {
      files.add(outputs, &r);
    } else {
      ++failed;
      std::fprintf(stderr, "ptx_run: case %s: %s\n", c.id.c_str(), r.error.c_str());
    }
    out.push_back(r);
  }
  std::string e = files.close() ? writeResults((results / "results.txt").string(), device, out) : "cannot write the outputs";
  if (!e.empty()) {
    std::fprintf(stderr, "ptx_run: %s\n", e.c_str());
    return kBadUse;
  }
  std::printf("ptx_run: %zu cases on %s, %d failed, outputs in %d file(s)\n", bundle.cases.size(), device.c_str(),
              failed, files.files());
  return failed ? 1 : 0;
}

// Each region case's mean time over kTimedLaunches launches, and the rate
// at which it moves its buffers (each counted once: a floor on its
// traffic), to RESULTS/timing.txt as `time ID MS BYTES`.
int timeBundle(const CudaDriver& cu, const std::string& device, const fs::path& dir, const fs::path& results) {
  Bundle bundle;
  if (!readBundle(dir, &bundle)) return kBadUse;
  fs::create_directories(results);
  std::ofstream out(results / "timing.txt");
  out << "# ptx_run --time on " << device << ": ID, ms per launch of its kernels (mean of " << kTimedLaunches
      << "), bytes of its buffers\n";
  CaseRunner runner(cu, bundle.inputs);
  double total_ms = 0, total_bytes = 0;
  int failed = 0;
  for (const BundleCase& c : bundle.cases) {
    if (c.kind != BundleCase::Kind::Region) continue;
    bool ok = false;
    const std::string ptx = readFile(dir / c.ptx_file, &ok);
    double ms = 0;
    std::string error = runner.contextLost() ? "not run: the context was lost in an earlier case"
                        : ok                 ? runner.time(c, ptx, kTimedLaunches, &ms)
                                             : "cannot read " + c.ptx_file;
    if (!error.empty()) {
      ++failed;
      std::fprintf(stderr, "ptx_run: case %s: %s\n", c.id.c_str(), error.c_str());
      continue;
    }
    int64_t bytes = 0;
    for (const BundleBuffer& b : c.buffers) bytes += b.bytes;
    out << "time " << c.id << " " << ms << " " << bytes << "\n";
    total_ms += ms;
    total_bytes += static_cast<double>(bytes);
  }
  out.close();
  if (out.fail()) {
    std::fprintf(stderr, "ptx_run: cannot write %s\n", (results / "timing.txt").c_str());
    return kBadUse;
  }
  std::printf("ptx_run --time: %.3f ms in all, %.1f MB of buffers, %.0f GB/s, %d failed\n", total_ms, total_bytes / 1e6,
              total_ms > 0 ? total_bytes / total_ms / 1e6 : 0.0, failed);
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace dtl::ptxrun

int main(int argc, char** argv) {
  using namespace dtl::ptxrun;
  const bool probe = argc == 2 && std::strcmp(argv[1], "--probe") == 0;
  const bool timing = argc == 4 && std::strcmp(argv[1], "--time") == 0;
  if (!probe && !timing && (argc != 3 || argv[1][0] == '-')) {
    std::fprintf(stderr, "usage: ptx_run --probe | ptx_run BUNDLE RESULTS | ptx_run --time BUNDLE RESULTS\n");
    return kBadUse;
  }
  const CudaDriver* cu = nullptr;
  std::string device;
  if (std::string why = openGpu(&cu, &device); !why.empty()) {
    std::printf("ptx_run: no GPU to run the generated kernels on: %s\n", why.c_str());
    return kNoGpu;
  }
  if (probe) {
    std::printf("ptx_run: %s\n", device.c_str());
    return 0;
  }
  return timing ? timeBundle(*cu, device, argv[2], argv[3]) : runBundle(*cu, device, argv[1], argv[2]);
}
