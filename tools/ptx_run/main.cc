// ptx_run: runs a PTX bundle (bundle.h) on the first CUDA device and writes
// every case's outputs for the checker. Each case runs twice, on a grid that
// covers its points with one thread each and on 3 blocks of 96 threads (each
// thread then strides over many points): the outputs must agree bit for bit,
// since a generated kernel's point is computed the same whichever thread
// visits it. Outputs start as 0xA5 bytes and scratch as NaN, so a value the
// kernels never write shows.
//
//   ptx_run --probe            exit 0 when a GPU can run kernels, 77 (skip) when not
//   ptx_run BUNDLE RESULTS     exit 0, 1 when a case failed, 77 without a GPU, 2 on bad use
//   ptx_run --time BUNDLE RESULTS   each region module's time and bytes/s (timeBundle)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tools/ptx_run/bundle.h"
#include "tools/ptx_run/cuda_driver.h"

namespace dtl::ptxrun {
namespace {

constexpr int kNoGpu = 77;
constexpr int64_t kOutputFileBytes = 15 << 20;  // a file the GPU machine's tool hands back whole

struct Gpu {
  const CudaDriver* cu = nullptr;
  std::string name;
};

// "" and the device, or why no kernel can run here.
std::string openGpu(Gpu* gpu) {
  std::string why;
  gpu->cu = loadCudaDriver(&why);
  if (!gpu->cu) return why;
  const CudaDriver& cu = *gpu->cu;
  int count = 0, device = 0;
  CuContext ctx = nullptr;
  if (CuResult r = cu.init(0)) return "cuInit: " + cu.describe(r);
  if (CuResult r = cu.deviceGetCount(&count)) return "cuDeviceGetCount: " + cu.describe(r);
  if (count == 0) return "the CUDA driver sees no device";
  if (CuResult r = cu.deviceGet(&device, 0)) return "cuDeviceGet: " + cu.describe(r);
  char name[256] = {};
  cu.deviceGetName(name, sizeof name, device);
  gpu->name = name;
  if (CuResult r = cu.primaryCtxRetain(&ctx, device)) return "cuDevicePrimaryCtxRetain: " + cu.describe(r);
  if (CuResult r = cu.ctxSetCurrent(ctx)) return "cuCtxSetCurrent: " + cu.describe(r);
  return "";
}

std::string readFile(const std::filesystem::path& p, bool* ok) {
  std::ifstream in(p, std::ios::binary);
  *ok = static_cast<bool>(in);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// One case's buffers on the device, freed on every path.
struct DeviceBuffers {
  const CudaDriver& cu;
  std::vector<CuDevicePtr> ptrs;
  explicit DeviceBuffers(const CudaDriver& d) : cu(d) {}
  ~DeviceBuffers() {
    for (CuDevicePtr p : ptrs) cu.memFree(p);
  }
};

class CaseRunner {
 public:
  CaseRunner(const CudaDriver& cu, const std::string& inputs) : cu_(cu), inputs_(inputs) {}

  // A region module's kernels launched `repeats` times after one warm-up,
  // one thread per point: *ms the mean wall time of one launch of them all.
  std::string time(const BundleCase& c, const std::string& ptx, int repeats, double* ms, bool* sticky) {
    CuModule module = nullptr;
    if (CuResult r = cu_.moduleLoadData(&module, ptx.c_str())) return "loading the PTX: " + cu_.describe(r);
    std::string error = timeLoaded(c, module, repeats, ms, sticky);
    cu_.moduleUnload(module);
    return error;
  }

  // "" with the outputs, or what failed; *sticky when the context is lost.
  std::string run(const BundleCase& c, const std::string& ptx, std::string* outputs, bool* sticky) {
    CuModule module = nullptr;
    if (CuResult r = cu_.moduleLoadData(&module, ptx.c_str())) return "loading the PTX: " + cu_.describe(r);
    std::string error = c.kind == BundleCase::Kind::Update ? runUpdate(c, module, outputs, sticky)
                                                          : runLoaded(c, module, outputs, sticky);
    cu_.moduleUnload(module);
    return error;
  }

 private:
  std::string check(CuResult r, const std::string& what, bool* sticky) {
    if (r == 0) return "";
    // 700-720: launch failures that leave the context unusable.
    if (r >= 700 && r < 720) *sticky = true;
    return what + ": " + cu_.describe(r);
  }

  std::string prepare(const BundleCase& c, CuModule module, std::vector<CuFunction>* fns, DeviceBuffers* bufs,
                      bool* sticky) {
    for (const BundleKernel& k : c.kernels) {
      CuFunction fn = nullptr;
      if (CuResult r = cu_.moduleGetFunction(&fn, module, k.name.c_str()))
        return "kernel " + k.name + ": " + cu_.describe(r);
      fns->push_back(fn);
    }
    for (const BundleBuffer& b : c.buffers) {
      CuDevicePtr p = 0;
      if (std::string e = check(cu_.memAlloc(&p, static_cast<size_t>(b.bytes > 0 ? b.bytes : 4)), "cuMemAlloc", sticky);
          !e.empty())
        return e;
      bufs->ptrs.push_back(p);
    }
    return "";
  }

  std::string timeLoaded(const BundleCase& c, CuModule module, int repeats, double* ms, bool* sticky) {
    std::vector<CuFunction> fns;
    DeviceBuffers bufs(cu_);
    if (std::string e = prepare(c, module, &fns, &bufs, sticky); !e.empty()) return e;
    if (std::string e = fill(c, bufs, sticky); !e.empty()) return e;
    auto all = [&]() -> std::string {
      for (size_t k = 0; k < fns.size(); ++k)
        if (std::string e = launch(c.kernels[k], fns[k], bufs, false, sticky); !e.empty()) return e;
      return "";
    };
    if (std::string e = all(); !e.empty()) return e;
    if (std::string e = check(cu_.ctxSynchronize(), "the warm-up", sticky); !e.empty()) return e;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i)
      if (std::string e = all(); !e.empty()) return e;
    if (std::string e = check(cu_.ctxSynchronize(), "the timed launches", sticky); !e.empty()) return e;
    *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / repeats;
    return "";
  }

  std::string runLoaded(const BundleCase& c, CuModule module, std::string* outputs, bool* sticky) {
    std::vector<CuFunction> fns;
    DeviceBuffers bufs(cu_);
    if (std::string e = prepare(c, module, &fns, &bufs, sticky); !e.empty()) return e;
    std::string first, second;
    for (int pass = 0; pass < 2; ++pass) {
      if (std::string e = fill(c, bufs, sticky); !e.empty()) return e;
      for (size_t k = 0; k < fns.size(); ++k)
        if (std::string e = launch(c.kernels[k], fns[k], bufs, pass == 1, sticky); !e.empty()) return e;
      if (std::string e = check(cu_.ctxSynchronize(), "running the kernels", sticky); !e.empty()) return e;
      std::string& got = pass == 0 ? first : second;
      for (size_t i = 0; i < c.buffers.size(); ++i) {
        const BundleBuffer& b = c.buffers[i];
        if (b.role != BundleBuffer::Role::Out) continue;
        size_t at = got.size();
        got.resize(at + static_cast<size_t>(b.bytes));
        if (b.bytes > 0)
          if (std::string e = check(cu_.memcpyDtoH(&got[at], bufs.ptrs[i], static_cast<size_t>(b.bytes)), "reading back",
                                    sticky);
              !e.empty())
            return e;
      }
    }
    if (first != second) return "the outputs differ between a full grid and 3 blocks of 96 threads";
    *outputs = std::move(first);
    return "";
  }

  // emit_update.h's kernel: SYMBOL(table, chunks, scalars), the table rows
  // optim_step::Chunk's layout { param, grad, a, b, n } with device pointers.
  struct TableRow {
    CuDevicePtr param, grad, a, b;
    int64_t n;
  };
  static_assert(sizeof(TableRow) == 40, "optim_step::Chunk");

  std::string runUpdate(const BundleCase& c, CuModule module, std::string* outputs, bool* sticky) {
    CuFunction fn = nullptr;
    if (CuResult r = cu_.moduleGetFunction(&fn, module, c.symbol.c_str())) return "kernel " + c.symbol + ": " + cu_.describe(r);
    DeviceBuffers bufs(cu_);
    auto alloc = [&](int64_t bytes, CuDevicePtr* p) {
      std::string e = check(cu_.memAlloc(p, static_cast<size_t>(bytes > 0 ? bytes : 4)), "cuMemAlloc", sticky);
      if (e.empty()) bufs.ptrs.push_back(*p);
      return e;
    };
    std::vector<TableRow> rows;
    std::vector<std::pair<CuDevicePtr, int64_t>> uploads;  // each device vector and its offset in inputs.bin
    for (const BundleChunk& k : c.chunks) {
      TableRow row{0, 0, 0, 0, k.n};
      for (auto [offset, slot] : {std::pair{k.param, &row.param}, {k.grad, &row.grad}, {k.a, &row.a}, {k.b, &row.b}}) {
        if (offset < 0) continue;
        if (static_cast<size_t>(offset) + static_cast<size_t>(k.n) * 4 > inputs_.size())
          return "a chunk lies past the end of inputs.bin";
        if (std::string e = alloc(k.n * 4, slot); !e.empty()) return e;
        uploads.push_back({*slot, offset});
      }
      rows.push_back(row);
    }
    CuDevicePtr table = 0, scalars = 0;
    if (std::string e = alloc(static_cast<int64_t>(rows.size() * sizeof(TableRow)), &table); !e.empty()) return e;
    if (std::string e = alloc(c.scalar_count * 4, &scalars); !e.empty()) return e;
    if (static_cast<size_t>(c.scalars + c.scalar_count * 4) > inputs_.size()) return "the scalars lie past inputs.bin";
    if (!rows.empty())
      if (std::string e = check(cu_.memcpyHtoD(table, rows.data(), rows.size() * sizeof(TableRow)), "the table", sticky);
          !e.empty())
        return e;
    if (std::string e = check(cu_.memcpyHtoD(scalars, inputs_.data() + c.scalars, static_cast<size_t>(c.scalar_count) * 4),
                              "the scalars", sticky);
        !e.empty())
      return e;
    int64_t chunks = static_cast<int64_t>(rows.size());
    void* params[] = {&table, &chunks, &scalars};
    std::string first, second;
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t u = 0, k = 0; k < rows.size(); ++k)  // every pass from the same inputs
        for (int v = 0; v < 4 && u < uploads.size(); ++v) {
          CuDevicePtr slot = v == 0 ? rows[k].param : v == 1 ? rows[k].grad : v == 2 ? rows[k].a : rows[k].b;
          if (slot == 0) continue;
          if (rows[k].n > 0)
            if (std::string e = check(cu_.memcpyHtoD(slot, inputs_.data() + uploads[u].second, static_cast<size_t>(rows[k].n) * 4),
                                      "a chunk's vector", sticky);
                !e.empty())
              return e;
          ++u;
        }
      unsigned threads = pass == 1 ? 96 : 256;
      unsigned blocks = pass == 1 ? 3 : static_cast<unsigned>(std::max<int64_t>(chunks, 1));
      if (std::string e = check(cu_.launchKernel(fn, blocks, 1, 1, threads, 1, 1, 0, nullptr, params, nullptr),
                                "launching " + c.symbol, sticky);
          !e.empty())
        return e;
      if (std::string e = check(cu_.ctxSynchronize(), "running the update", sticky); !e.empty()) return e;
      std::string& got = pass == 0 ? first : second;
      for (const TableRow& row : rows)
        for (CuDevicePtr p : {row.param, row.a, row.b}) {
          if (p == 0 || row.n == 0) continue;
          size_t at = got.size();
          got.resize(at + static_cast<size_t>(row.n) * 4);
          if (std::string e = check(cu_.memcpyDtoH(&got[at], p, static_cast<size_t>(row.n) * 4), "reading back", sticky);
              !e.empty())
            return e;
        }
    }
    if (first != second) return "the outputs differ between one block per chunk and 3 blocks of 96 threads";
    *outputs = std::move(first);
    return "";
  }

  std::string fill(const BundleCase& c, const DeviceBuffers& bufs, bool* sticky) {
    for (size_t i = 0; i < c.buffers.size(); ++i) {
      const BundleBuffer& b = c.buffers[i];
      if (b.bytes == 0) continue;
      auto bytes = static_cast<size_t>(b.bytes);
      CuResult r = 0;
      if (b.role == BundleBuffer::Role::In && b.offset < 0) {
        r = cu_.memsetD32(bufs.ptrs[i], 0x3f000000u, bytes / 4);  // 0.5f
      } else if (b.role == BundleBuffer::Role::In) {
        if (static_cast<size_t>(b.offset) + bytes > inputs_.size()) return "an input lies past the end of inputs.bin";
        r = cu_.memcpyHtoD(bufs.ptrs[i], inputs_.data() + b.offset, bytes);
      } else {
        r = cu_.memsetD8(bufs.ptrs[i], b.role == BundleBuffer::Role::Out ? 0xA5 : 0xFF, bytes);
      }
      if (std::string e = check(r, "filling a buffer", sticky); !e.empty()) return e;
    }
    return "";
  }

  std::string launch(const BundleKernel& k, CuFunction fn, DeviceBuffers& bufs, bool strided, bool* sticky) {
    if (k.points == 0) return "";
    std::vector<void*> params;
    for (CuDevicePtr& p : bufs.ptrs) params.push_back(&p);
    unsigned threads = strided ? 96 : 256;
    int64_t blocks = strided ? 3 : (k.points + threads - 1) / threads;
    if (blocks > 0x7fffffff) blocks = 0x7fffffff;
    CuResult r = cu_.launchKernel(fn, static_cast<unsigned>(blocks), 1, 1, threads, 1, 1, 0, nullptr, params.data(), nullptr);
    return check(r, "launching " + k.name, sticky);
  }

  const CudaDriver& cu_;
  const std::string& inputs_;
};

// --time: each region module's mean time over 20 launches, and the rate at
// which it moves its buffers' bytes (each buffer counted once: a floor on
// its traffic), to RESULTS/timing.txt as `time ID MS BYTES`.
int timeBundle(const Gpu& gpu, const std::filesystem::path& bundle, const std::filesystem::path& results) {
  std::vector<BundleCase> cases;
  if (std::string e = readManifest((bundle / "manifest.txt").string(), &cases); !e.empty()) {
    std::fprintf(stderr, "ptx_run: %s\n", e.c_str());
    return 2;
  }
  bool ok = false;
  const std::string inputs = readFile(bundle / "inputs.bin", &ok);
  std::filesystem::create_directories(results);
  std::ofstream out(results / "timing.txt");
  out << "# ptx_run --time on " << gpu.name << ": ID, ms per launch of its kernels (mean of 20), bytes of its buffers\n";
  CaseRunner runner(*gpu.cu, inputs);
  double total_ms = 0, total_bytes = 0;
  int failed = 0;
  bool sticky = false;
  for (const BundleCase& c : cases) {
    if (c.kind != BundleCase::Kind::Region || sticky) continue;
    const std::string ptx = readFile(bundle / c.ptx_file, &ok);
    double ms = 0;
    std::string error = ok ? runner.time(c, ptx, 20, &ms, &sticky) : "cannot read " + c.ptx_file;
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
  std::printf("ptx_run --time: %.3f ms in all, %.1f MB of buffers, %.0f GB/s, %d failed\n", total_ms, total_bytes / 1e6,
              total_ms > 0 ? total_bytes / total_ms / 1e6 : 0.0, failed);
  return failed ? 1 : 0;
}

int runBundle(const Gpu& gpu, const std::filesystem::path& bundle, const std::filesystem::path& results) {
  std::vector<BundleCase> cases;
  if (std::string e = readManifest((bundle / "manifest.txt").string(), &cases); !e.empty()) {
    std::fprintf(stderr, "ptx_run: %s\n", e.c_str());
    return 2;
  }
  bool ok = false;
  const std::string inputs = readFile(bundle / "inputs.bin", &ok);
  if (!ok) {
    std::fprintf(stderr, "ptx_run: cannot read %s\n", (bundle / "inputs.bin").c_str());
    return 2;
  }
  std::filesystem::create_directories(results);
  CaseRunner runner(*gpu.cu, inputs);
  std::vector<CaseResult> out;
  std::ofstream data;
  std::string data_name;
  int64_t data_bytes = 0, files = 0, failed = 0;
  bool sticky = false;
  for (const BundleCase& c : cases) {
    CaseResult r;
    r.id = c.id;
    std::string outputs;
    if (sticky) {
      r.error = "not run: the context was lost in an earlier case";
    } else {
      std::string ptx = readFile(bundle / c.ptx_file, &ok);
      r.error = ok ? runner.run(c, ptx, &outputs, &sticky) : "cannot read " + c.ptx_file;
    }
    r.ok = r.error.empty();
    if (r.ok) {
      if (data_name.empty() || data_bytes + static_cast<int64_t>(outputs.size()) > kOutputFileBytes) {
        data.close();
        data_name = "outputs-" + std::to_string(files++) + ".bin";
        data.open(results / data_name, std::ios::binary);
        data_bytes = 0;
      }
      r.file = data_name;
      r.offset = data_bytes;
      r.bytes = static_cast<int64_t>(outputs.size());
      data.write(outputs.data(), static_cast<std::streamsize>(outputs.size()));
      data_bytes += r.bytes;
    } else {
      ++failed;
      std::fprintf(stderr, "ptx_run: case %s: %s\n", c.id.c_str(), r.error.c_str());
    }
    out.push_back(r);
  }
  data.close();
  if (std::string e = writeResults((results / "results.txt").string(), gpu.name, out); !e.empty()) {
    std::fprintf(stderr, "ptx_run: %s\n", e.c_str());
    return 2;
  }
  std::printf("ptx_run: %zu cases on %s, %lld failed, outputs in %lld file(s)\n", cases.size(), gpu.name.c_str(),
              static_cast<long long>(failed), static_cast<long long>(files));
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace dtl::ptxrun

int main(int argc, char** argv) {
  using namespace dtl::ptxrun;
  bool probe = argc == 2 && std::strcmp(argv[1], "--probe") == 0;
  bool timing = argc == 4 && std::strcmp(argv[1], "--time") == 0;
  if (!probe && !timing && argc != 3) {
    std::fprintf(stderr, "usage: ptx_run --probe | ptx_run BUNDLE RESULTS | ptx_run --time BUNDLE RESULTS\n");
    return 2;
  }
  Gpu gpu;
  if (std::string why = openGpu(&gpu); !why.empty()) {
    std::printf("ptx_run: no GPU to run kernels on: %s\n", why.c_str());
    return kNoGpu;
  }
  if (probe) {
    std::printf("ptx_run: %s\n", gpu.name.c_str());
    return 0;
  }
  return timing ? timeBundle(gpu, argv[2], argv[3]) : runBundle(gpu, argv[1], argv[2]);
}
