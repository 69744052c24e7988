// The CUDA driver, opened at run time. libcuda.so.1 is dlopen'ed on first use and its entry points
// are resolved (dlsym, by the exact versioned names cuda.h uses) into one table, so intfa links,
// renders, compiles and caches on machines that have no driver and no GPU; only launching needs
// one.
#pragma once

#include <cuda.h>

#include <string>

namespace intfa::device {

// Every driver entry point intfa (and its tests and tools) calls. Names are the cuda.h names, so
// the versioned macros of cuda.h (cuMemAlloc -> cuMemAlloc_v2) give each member its right type.
#define INTFA_DRIVER_FUNCTIONS(X)                                                              \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGet)        \
  X(cuDeviceGetCount) X(cuDeviceGetAttribute) X(cuDeviceGetName) X(cuDeviceTotalMem)          \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent)                 \
  X(cuCtxSetCurrent) X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuCtxCreate) X(cuCtxDestroy)     \
  X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuStreamGetCtx) X(cuStreamCreate)                  \
  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuModuleLoadData) X(cuModuleUnload)             \
  X(cuModuleGetFunction) X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel)        \
  X(cuLaunchKernelEx)                                                                          \
  X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo) X(cuMemcpyHtoD) X(cuMemcpyDtoH)                  \
  X(cuMemcpyDtoDAsync) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemsetD8Async)          \
  X(cuMemsetD32Async) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)                     \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuPointerGetAttribute) X(cuTensorMapEncodeTiled) \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuOccupancyMaxActiveClusters)             \
  X(cuStreamBeginCapture) X(cuStreamEndCapture)                                                \
  X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy)

// The symbol each entry point is resolved by ("cuMemAlloc_v2" for cuMemAlloc): for tests.
const char* driver_symbol_name_of_cuMemAlloc();
const char* driver_symbol_name_of_cuCtxGetDevice();

struct DriverApi {
  int driver_version = 0;  // cuDriverGetVersion: 13000 for CUDA 13.0
#define INTFA_DECLARE_DRIVER_FUNCTION(name) decltype(&::name) name = nullptr;
  INTFA_DRIVER_FUNCTIONS(INTFA_DECLARE_DRIVER_FUNCTION)
#undef INTFA_DECLARE_DRIVER_FUNCTION
};

// The process-wide table, loaded (and cuInit'ed) on first use. Throws NoDevice naming the reason
// when there is no usable driver or no device.
const DriverApi& driver();

// Whether driver() would succeed; never throws. `reason` receives why not.
bool driver_available(std::string* reason = nullptr);

// The CUresult's name ("CUDA_ERROR_OUT_OF_MEMORY"), or its number when no driver is loaded.
std::string result_name(CUresult result);

// Throws DriverError naming `call` and the CUresult when `result` is not CUDA_SUCCESS.
void check(CUresult result, const char* call);

}  // namespace intfa::device

// INTFA_DRIVER(cuMemAlloc, &ptr, bytes): call through the table and throw DriverError on failure.
#define INTFA_DRIVER(function, ...) \
  ::intfa::device::check(::intfa::device::driver().function(__VA_ARGS__), #function)
