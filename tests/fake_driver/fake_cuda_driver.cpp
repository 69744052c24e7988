// A CUDA driver that does nothing, as libcuda.so.1 in a folder of its own (never installed): with
// it on LD_LIBRARY_PATH, intfa runs its whole host path on a machine without a GPU, so that the
// launches of a call can be counted (the HostPath test) and intfa's own host time measured apart
// from the driver's (bench/host_path.cpp). Every call succeeds at once; the device looks like an
// H100 (compute capability 9.0, 132 SMs); "device" memory is host memory; launches, memsets and
// copies to the device do nothing but count. NVRTC, which dlopens the driver too, gets no export
// table and compiles as it does without a driver.
#include <cuda.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

int context_storage, module_storage, stream_storage, event_storage;
// A handle of its own for each function looked up (cuModuleGetFunction), so that a test can tell
// the kernels launched apart; the 4096th and later reuse the first ones.
constexpr int kFunctions = 4096;
char function_storage[kFunctions];
std::atomic<int> next_function{0};
std::atomic<bool> function_launched[kFunctions];
std::atomic<unsigned long long> functions_launched{0};  // distinct functions launched
const CUcontext kContext = reinterpret_cast<CUcontext>(&context_storage);
thread_local CUcontext current_context = nullptr;
std::atomic<unsigned long long> launches{0};  // kernel launches and memsets
// Of them, cuLaunchKernelEx's with a programmatic dependency on the launch before.
std::atomic<unsigned long long> programmatic_launches{0};

}  // namespace

// What the HostPath test reads (through dlsym on the loaded driver).
extern "C" unsigned long long intfa_fake_driver_launches() { return launches.load(); }
extern "C" unsigned long long intfa_fake_driver_programmatic_launches() {
  return programmatic_launches.load();
}
// How many distinct functions (cuModuleGetFunction handles) have been launched at least once.
extern "C" unsigned long long intfa_fake_driver_functions_launched() {
  return functions_launched.load();
}

namespace {

void count_launch(CUfunction function) {
  ++launches;
  const auto index = reinterpret_cast<char*>(function) - function_storage;
  if (index >= 0 && index < kFunctions && !function_launched[index].exchange(true)) {
    ++functions_launched;
  }
}

}  // namespace

CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int* version) {
  *version = 13000;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult, const char** text) {
  *text = "CUDA_ERROR_FAKE_DRIVER";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult, const char** text) {
  *text = "the fake driver of intfa's tests";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetExportTable(const void** table, const CUuuid*) {
  *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int* count) {
  *count = 1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *value = 233472; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *value = 65536; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *value = 50 << 20; break;
    default: *value = 1; break;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char* name, int length, CUdevice) {
  std::strncpy(name, "intfa fake driver (H100-like)", static_cast<std::size_t>(length));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice) {
  *bytes = size_t{80} << 30;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice) {
  *context = kContext;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxGetCurrent(CUcontext* context) {
  *context = current_context;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext context) {
  current_context = context;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSynchronize(void) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxCreate(CUcontext* context, CUctxCreateParams*, unsigned int, CUdevice) {
  *context = current_context = kContext;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxDestroy(CUcontext) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxPushCurrent(CUcontext context) {
  current_context = context;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxPopCurrent(CUcontext* context) {
  if (context != nullptr) *context = current_context;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamGetCtx(CUstream, CUcontext* context) {
  *context = kContext;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamCreate(CUstream* stream, unsigned int) {
  *stream = reinterpret_cast<CUstream>(&stream_storage);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void*) {
  *module = reinterpret_cast<CUmodule>(&module_storage);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleGetFunction(CUfunction* function, CUmodule, const char*) {
  *function = reinterpret_cast<CUfunction>(&function_storage[next_function++ % kFunctions]);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction) {
  *value = attribute == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024
           : attribute == CU_FUNC_ATTRIBUTE_NUM_REGS            ? 64
                                                                : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuLaunchKernel(CUfunction function, unsigned int, unsigned int, unsigned int,
                                unsigned int, unsigned int, unsigned int, unsigned int, CUstream,
                                void**, void**) {
  count_launch(function);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction function, void**,
                                  void**) {
  count_launch(function);
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& attribute = config->attrs[i];
    if (attribute.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
        attribute.value.programmaticStreamSerializationAllowed != 0) {
      ++programmatic_launches;
    }
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* pointer, size_t bytes) {
  *pointer = reinterpret_cast<CUdeviceptr>(std::aligned_alloc(256, (bytes + 255) / 256 * 256));
  return *pointer != 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr pointer) {
  std::free(reinterpret_cast<void*>(pointer));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = size_t{70} << 30;
  *total_bytes = size_t{80} << 30;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr, const void*, size_t) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemcpyDtoH(void* host, CUdeviceptr, size_t bytes) {
  std::memset(host, 0, bytes);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr, CUdeviceptr, size_t, CUstream) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr, const void*, size_t, CUstream) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* host, CUdeviceptr, size_t bytes, CUstream) {
  std::memset(host, 0, bytes);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr, unsigned char, size_t, CUstream) {
  ++launches;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr, unsigned int, size_t, CUstream) {
  ++launches;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventCreate(CUevent* event, unsigned int) {
  *event = reinterpret_cast<CUevent>(&event_storage);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventElapsedTime(float* milliseconds, CUevent, CUevent) {
  *milliseconds = 0.0f;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr) {
  if (attribute == CU_POINTER_ATTRIBUTE_CONTEXT) {
    *static_cast<CUcontext*>(data) = kContext;
  } else if (attribute == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) {
    *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
  } else {
    std::memset(data, 0, sizeof(int));
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType, cuuint32_t, void*,
                                        const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                        const cuuint32_t*, CUtensorMapInterleave,
                                        CUtensorMapSwizzle, CUtensorMapL2promotion,
                                        CUtensorMapFloatOOBfill) {
  std::memset(map, 0, sizeof *map);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction, int,
                                                             size_t) {
  *blocks = 1;
  return CUDA_SUCCESS;
}
// As many clusters as 132 SMs of four blocks each hold (the decode kernel's narrow blocks on an
// H100), so that the host's cluster choices see a GPU of that size; INTFA_FAKE_CLUSTERS_AT_ONCE
// (a test's) replaces the count.
CUresult CUDAAPI cuOccupancyMaxActiveClusters(int* clusters, CUfunction,
                                              const CUlaunchConfig* config) {
  if (const char* forced = std::getenv("INTFA_FAKE_CLUSTERS_AT_ONCE")) {
    *clusters = std::atoi(forced);
    return CUDA_SUCCESS;
  }
  unsigned blocks = 1;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      blocks = config->attrs[i].value.clusterDim.x * config->attrs[i].value.clusterDim.y *
               config->attrs[i].value.clusterDim.z;
    }
  }
  *clusters = static_cast<int>(132 * 4 / blocks);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamBeginCapture(CUstream, CUstreamCaptureMode) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamEndCapture(CUstream, CUgraph* graph) {
  *graph = nullptr;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* exec, CUgraph, unsigned long long) {
  *exec = nullptr;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec, CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuGraphDestroy(CUgraph) { return CUDA_SUCCESS; }
