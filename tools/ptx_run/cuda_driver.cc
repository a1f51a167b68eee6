#include "tools/ptx_run/cuda_driver.h"

#include <dlfcn.h>

namespace dtl::ptxrun {

namespace {

template <typename Fn>
bool bind(void* lib, const char* symbol, Fn* fn, std::string* why) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (*fn) return true;
  *why = std::string("libcuda.so.1 has no ") + symbol;
  return false;
}

bool bindAll(void* lib, CudaDriver* d, std::string* why) {
  return bind(lib, "cuInit", &d->init, why) && bind(lib, "cuDriverGetVersion", &d->driverGetVersion, why) &&
         bind(lib, "cuDeviceGetAttribute", &d->deviceGetAttribute, why) &&
         bind(lib, "cuDeviceGetCount", &d->deviceGetCount, why) &&
         bind(lib, "cuDeviceGet", &d->deviceGet, why) && bind(lib, "cuDeviceGetName", &d->deviceGetName, why) &&
         bind(lib, "cuDevicePrimaryCtxRetain", &d->primaryCtxRetain, why) &&
         bind(lib, "cuCtxSetCurrent", &d->ctxSetCurrent, why) && bind(lib, "cuCtxSynchronize", &d->ctxSynchronize, why) &&
         bind(lib, "cuModuleLoadData", &d->moduleLoadData, why) && bind(lib, "cuModuleUnload", &d->moduleUnload, why) &&
         bind(lib, "cuModuleGetFunction", &d->moduleGetFunction, why) && bind(lib, "cuMemAlloc_v2", &d->memAlloc, why) &&
         bind(lib, "cuMemFree_v2", &d->memFree, why) && bind(lib, "cuMemcpyHtoD_v2", &d->memcpyHtoD, why) &&
         bind(lib, "cuMemcpyDtoH_v2", &d->memcpyDtoH, why) && bind(lib, "cuMemsetD8_v2", &d->memsetD8, why) &&
         bind(lib, "cuMemsetD32_v2", &d->memsetD32, why) &&
         bind(lib, "cuLaunchKernel", &d->launchKernel, why) && bind(lib, "cuGetErrorString", &d->getErrorString, why);
}

}  // namespace

std::string CudaDriver::describe(CuResult result) const {
  const char* text = nullptr;
  if (getErrorString(result, &text) != 0 || !text) text = "unknown error";
  return std::string(text) + " (" + std::to_string(result) + ")";
}

const CudaDriver* loadCudaDriver(std::string* why) {
  static CudaDriver driver;
  static std::string failure;
  static const bool loaded = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      failure = std::string("no CUDA driver: ") + (e ? e : "libcuda.so.1 not found");
      return false;
    }
    return bindAll(lib, &driver, &failure);
  }();
  if (!loaded) *why = failure;
  return loaded ? &driver : nullptr;
}

}  // namespace dtl::ptxrun
