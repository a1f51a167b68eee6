#include "tools/ptx_run/case_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace dtl::ptxrun {

namespace {

constexpr int64_t kMaxBlocks = 0x7fffffff;

// Launch failures after which the context is unusable (CUDA_ERROR_ILLEGAL_ADDRESS,
// LAUNCH_TIMEOUT, CONTEXT_IS_DESTROYED, ASSERT, HARDWARE_STACK_ERROR … LAUNCH_FAILED).
bool losesContext(CuResult r) { return r == 700 || r == 702 || r == 709 || r == 710 || (r >= 714 && r <= 719); }

}  // namespace

std::string openGpu(const CudaDriver** driver, std::string* name) {
  std::string why;
  const CudaDriver* cu = loadCudaDriver(&why);
  if (!cu) return why;
  int count = 0, device = 0, version = 0, major = 0, minor = 0;
  CuContext ctx = nullptr;
  if (CuResult r = cu->init(0)) return "cuInit: " + cu->describe(r);
  if (CuResult r = cu->driverGetVersion(&version)) return "cuDriverGetVersion: " + cu->describe(r);
  if (version < 11080) return "the CUDA driver is " + std::to_string(version) + ", older than 11.8 (PTX ISA 7.8)";
  if (CuResult r = cu->deviceGetCount(&count)) return "cuDeviceGetCount: " + cu->describe(r);
  if (count == 0) return "the CUDA driver sees no device";
  if (CuResult r = cu->deviceGet(&device, 0)) return "cuDeviceGet: " + cu->describe(r);
  char text[256] = {};
  if (CuResult r = cu->deviceGetName(text, sizeof text, device)) return "cuDeviceGetName: " + cu->describe(r);
  cu->deviceGetAttribute(&major, kComputeCapabilityMajor, device);
  cu->deviceGetAttribute(&minor, kComputeCapabilityMinor, device);
  if (major < 9)
    return std::string(text) + " is sm_" + std::to_string(major) + std::to_string(minor) +
           ": the generated PTX is for sm_90";
  if (CuResult r = cu->primaryCtxRetain(&ctx, device)) return "cuDevicePrimaryCtxRetain: " + cu->describe(r);
  if (CuResult r = cu->ctxSetCurrent(ctx)) return "cuCtxSetCurrent: " + cu->describe(r);
  *driver = cu;
  *name = text;
  return "";
}

// A case's module, functions and device memory, released when it goes.
struct CaseRunner::Loaded {
  explicit Loaded(const CudaDriver& d) : cu(d) {}
  Loaded(const Loaded&) = delete;
  Loaded& operator=(const Loaded&) = delete;
  ~Loaded() {
    for (CuDevicePtr p : owned) cu.memFree(p);
    if (module) cu.moduleUnload(module);
  }
  const CudaDriver& cu;
  CuModule module = nullptr;
  std::vector<CuFunction> fns;
  std::vector<CuDevicePtr> owned;
  // a region: one pointer per buffer, in argument order
  std::vector<CuDevicePtr> buffers;
  // an update: its vectors to upload (pointer, offset in inputs.bin, bytes), to read back, and its arguments
  struct Upload {
    CuDevicePtr ptr;
    int64_t offset, bytes;
  };
  std::vector<Upload> uploads;
  std::vector<std::pair<CuDevicePtr, int64_t>> readbacks;
  CuDevicePtr table = 0, scalars = 0;
  int64_t chunks = 0;
  std::vector<void*> params;  // the launch's argument addresses, built once
};

std::string CaseRunner::check(CuResult r, const char* what) {
  if (r == 0) return "";
  if (losesContext(r)) lost_ = true;
  return std::string(what) + ": " + cu_.describe(r);
}

std::string CaseRunner::run(const BundleCase& c, const std::string& ptx, std::string* outputs) {
  Loaded m(cu_);
  if (CuResult r = cu_.moduleLoadData(&m.module, ptx.c_str())) return "loading the PTX: " + cu_.describe(r);
  return c.kind == BundleCase::Kind::Update ? runUpdate(c, m, outputs) : runRegion(c, m, outputs);
}

std::string CaseRunner::runRegion(const BundleCase& c, Loaded& m, std::string* outputs) {
  for (const BundleKernel& k : c.kernels) {
    CuFunction fn = nullptr;
    if (CuResult r = cu_.moduleGetFunction(&fn, m.module, k.name.c_str())) return "kernel " + k.name + ": " + cu_.describe(r);
    m.fns.push_back(fn);
  }
  for (const BundleBuffer& b : c.buffers) {
    CuDevicePtr p = 0;
    if (std::string e = check(cu_.memAlloc(&p, static_cast<size_t>(std::max<int64_t>(b.bytes, 4))), "cuMemAlloc");
        !e.empty())
      return e;
    m.owned.push_back(p);
    m.buffers.push_back(p);
  }
  for (CuDevicePtr& p : m.buffers) m.params.push_back(&p);
  return twoPasses(c, m, outputs, "a full grid");
}

std::string CaseRunner::twoPasses(const BundleCase& c, Loaded& m, std::string* outputs, const char* full_grid) {
  std::string got[2];
  for (int pass = 0; pass < 2; ++pass) {
    if (std::string e = fill(c, m, pass); !e.empty()) return e;
    if (std::string e = launchAll(c, m, pass == 1); !e.empty()) return e;
    if (std::string e = check(cu_.ctxSynchronize(), "running the kernels"); !e.empty()) return e;
    if (std::string e = readOutputs(c, m, &got[pass]); !e.empty()) return e;
  }
  if (got[0] != got[1]) return std::string("the outputs differ between ") + full_grid + " and 3 blocks of 96 threads";
  *outputs = std::move(got[0]);
  return "";
}

// emit_update.h's kernel SYMBOL(table, chunks, scalars); the table rows are
// optim_step::Chunk's layout { param, grad, a, b, n } with device pointers.
std::string CaseRunner::runUpdate(const BundleCase& c, Loaded& m, std::string* outputs) {
  struct TableRow {
    CuDevicePtr param, grad, a, b;
    int64_t n;
  };
  static_assert(sizeof(TableRow) == 40, "optim_step::Chunk");
  CuFunction fn = nullptr;
  if (CuResult r = cu_.moduleGetFunction(&fn, m.module, c.symbol.c_str())) return "kernel " + c.symbol + ": " + cu_.describe(r);
  m.fns.push_back(fn);
  auto alloc = [&](int64_t bytes, CuDevicePtr* p) {
    std::string e = check(cu_.memAlloc(p, static_cast<size_t>(std::max<int64_t>(bytes, 4))), "cuMemAlloc");
    if (e.empty()) m.owned.push_back(*p);
    return e;
  };
  if (c.scalars < 0 || static_cast<size_t>(c.scalars + c.scalar_count * 4) > inputs_.size())
    return "the scalars lie past the end of inputs.bin";
  std::vector<TableRow> rows;
  for (const BundleChunk& k : c.chunks) {
    TableRow row{0, 0, 0, 0, k.n};
    for (auto [offset, slot] : {std::pair{k.param, &row.param}, {k.grad, &row.grad}, {k.a, &row.a}, {k.b, &row.b}}) {
      if (offset < 0) continue;
      if (static_cast<size_t>(offset) + static_cast<size_t>(k.n) * 4 > inputs_.size())
        return "a chunk lies past the end of inputs.bin";
      if (std::string e = alloc(k.n * 4, slot); !e.empty()) return e;
      m.uploads.push_back({*slot, offset, k.n * 4});
      if (slot != &row.grad) m.readbacks.push_back({*slot, k.n * 4});
    }
    rows.push_back(row);
  }
  if (std::string e = alloc(static_cast<int64_t>(rows.size() * sizeof(TableRow)), &m.table); !e.empty()) return e;
  if (std::string e = alloc(c.scalar_count * 4, &m.scalars); !e.empty()) return e;
  if (!rows.empty())
    if (std::string e = check(cu_.memcpyHtoD(m.table, rows.data(), rows.size() * sizeof(TableRow)), "the table"); !e.empty())
      return e;
  if (std::string e = check(cu_.memcpyHtoD(m.scalars, inputs_.data() + c.scalars, static_cast<size_t>(c.scalar_count) * 4),
                            "the scalars");
      !e.empty())
    return e;
  m.chunks = static_cast<int64_t>(rows.size());
  m.params = {&m.table, &m.chunks, &m.scalars};
  return twoPasses(c, m, outputs, "one block per chunk");
}

// Inputs from inputs.bin (or 0.5 everywhere, set on the device); a region's
// outputs and scratch to a pattern that differs between passes.
std::string CaseRunner::fill(const BundleCase& c, Loaded& m, int pass) {
  for (const Loaded::Upload& u : m.uploads)
    if (u.bytes > 0)
      if (std::string e = check(cu_.memcpyHtoD(u.ptr, inputs_.data() + u.offset, static_cast<size_t>(u.bytes)), "an upload");
          !e.empty())
        return e;
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    const BundleBuffer& b = c.buffers[i];
    if (b.bytes == 0) continue;
    auto bytes = static_cast<size_t>(b.bytes);
    CuResult r = 0;
    if (b.role == BundleBuffer::Role::In && b.offset < 0) {
      r = cu_.memsetD32(m.buffers[i], 0x3f000000u, bytes / 4);  // 0.5f
    } else if (b.role == BundleBuffer::Role::In) {
      if (static_cast<size_t>(b.offset) + bytes > inputs_.size()) return "an input lies past the end of inputs.bin";
      r = cu_.memcpyHtoD(m.buffers[i], inputs_.data() + b.offset, bytes);
    } else if (b.role == BundleBuffer::Role::Out) {
      r = cu_.memsetD8(m.buffers[i], pass == 0 ? 0xA5 : 0x5A, bytes);
    } else {
      r = cu_.memsetD8(m.buffers[i], pass == 0 ? 0xFF : 0x7F, bytes);  // NaN, then 3.4e38
    }
    if (std::string e = check(r, "filling a buffer"); !e.empty()) return e;
  }
  return "";
}

std::string CaseRunner::launchAll(const BundleCase& c, Loaded& m, bool strided) {
  const unsigned threads = strided ? 96 : 256;
  auto launch = [&](CuFunction fn, int64_t units) {
    int64_t blocks = strided ? 3 : std::clamp<int64_t>(units, 1, kMaxBlocks);
    return check(cu_.launchKernel(fn, static_cast<unsigned>(blocks), 1, 1, threads, 1, 1, 0, nullptr, m.params.data(),
                                  nullptr),
                 "a launch");
  };
  if (c.kind == BundleCase::Kind::Update) {
    if (std::string e = launch(m.fns[0], m.chunks); !e.empty()) return e;  // one block per chunk
  } else {
    for (size_t k = 0; k < m.fns.size(); ++k) {
      if (c.kernels[k].threads == 0) continue;
      if (std::string e = launch(m.fns[k], (c.kernels[k].threads + threads - 1) / threads); !e.empty())
        return c.kernels[k].name + ": " + e;
    }
  }
  return "";
}

std::string CaseRunner::readOutputs(const BundleCase& c, Loaded& m, std::string* got) {
  std::vector<std::pair<CuDevicePtr, int64_t>> from = m.readbacks;
  for (size_t i = 0; i < c.buffers.size(); ++i)
    if (c.buffers[i].role == BundleBuffer::Role::Out) from.push_back({m.buffers[i], c.buffers[i].bytes});
  for (const auto& [ptr, bytes] : from) {
    if (bytes == 0) continue;
    size_t at = got->size();
    got->resize(at + static_cast<size_t>(bytes));
    if (std::string e = check(cu_.memcpyDtoH(&(*got)[at], ptr, static_cast<size_t>(bytes)), "reading back"); !e.empty())
      return e;
  }
  return "";
}

std::string CaseRunner::time(const BundleCase& c, const std::string& ptx, int repeats, double* ms) {
  if (c.kind != BundleCase::Kind::Region) return "only region cases are timed";
  Loaded m(cu_);
  if (CuResult r = cu_.moduleLoadData(&m.module, ptx.c_str())) return "loading the PTX: " + cu_.describe(r);
  std::string warm;
  if (std::string e = runRegion(c, m, &warm); !e.empty()) return e;  // loads, fills, runs both grids once
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < repeats; ++i)
    if (std::string e = launchAll(c, m, false); !e.empty()) return e;
  if (std::string e = check(cu_.ctxSynchronize(), "the timed launches"); !e.empty()) return e;
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / repeats;
  return "";
}

}  // namespace dtl::ptxrun
