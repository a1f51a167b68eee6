// The CUDA driver API, loaded at run time from libcuda.so.1: a binary that
// uses it builds and starts where no driver is installed (every build
// machine here) and says so, instead of failing to load. Only the calls
// ptx_run needs; their ABI is the driver's stable C one (the _v2 symbols
// cuda.h maps its names to since CUDA 4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dtl::ptxrun {

using CuResult = int;  // CUresult; 0 is CUDA_SUCCESS
using CuDevicePtr = unsigned long long;
struct CuContextSt;
struct CuModuleSt;
struct CuFunctionSt;
struct CuStreamSt;
using CuContext = CuContextSt*;
using CuModule = CuModuleSt*;
using CuFunction = CuFunctionSt*;
using CuStream = CuStreamSt*;

// CUdevice_attribute values.
inline constexpr int kComputeCapabilityMajor = 75, kComputeCapabilityMinor = 76;

struct CudaDriver {
  CuResult (*init)(unsigned flags);
  CuResult (*driverGetVersion)(int* version);  // 11080: CUDA 11.8
  CuResult (*deviceGetAttribute)(int* value, int attribute, int device);
  CuResult (*deviceGetCount)(int* count);
  CuResult (*deviceGet)(int* device, int ordinal);
  CuResult (*deviceGetName)(char* name, int len, int device);
  CuResult (*primaryCtxRetain)(CuContext* ctx, int device);
  CuResult (*ctxSetCurrent)(CuContext ctx);
  CuResult (*ctxSynchronize)();
  CuResult (*moduleLoadData)(CuModule* module, const void* image);
  CuResult (*moduleUnload)(CuModule module);
  CuResult (*moduleGetFunction)(CuFunction* fn, CuModule module, const char* name);
  CuResult (*memAlloc)(CuDevicePtr* ptr, size_t bytes);
  CuResult (*memFree)(CuDevicePtr ptr);
  CuResult (*memcpyHtoD)(CuDevicePtr dst, const void* src, size_t bytes);
  CuResult (*memcpyDtoH)(void* dst, CuDevicePtr src, size_t bytes);
  CuResult (*memsetD8)(CuDevicePtr dst, unsigned char value, size_t bytes);
  CuResult (*memsetD32)(CuDevicePtr dst, unsigned value, size_t words);
  CuResult (*launchKernel)(CuFunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                           unsigned shared_bytes, CuStream stream, void** params, void** extra);
  CuResult (*getErrorString)(CuResult result, const char** text);

  // "name (code)" for a result, from the driver's own strings.
  std::string describe(CuResult result) const;
};

// The driver, loaded once; nullptr with *why set when libcuda.so.1 is absent
// or lacks a symbol.
const CudaDriver* loadCudaDriver(std::string* why);

}  // namespace dtl::ptxrun
