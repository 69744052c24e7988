#include "device/driver_api.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <mutex>

#include "intfa/errors.hpp"

namespace intfa::device {
namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

struct LoadedDriver {
  DriverApi api;
  std::string failure;  // empty when api is usable
};

template <typename Function>
bool resolve(GetProcAddress get_proc, const char* symbol, int version, Function& slot,
             std::string& failure) {
  void* address = nullptr;
  CUdriverProcAddressQueryResult status{};
  const CUresult result = get_proc(symbol, &address, version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  if (result != CUDA_SUCCESS || address == nullptr) {
    failure = std::string("the CUDA driver does not provide ") + symbol + " (driver too old?)";
    return false;
  }
  slot = reinterpret_cast<Function>(address);
  return true;
}

LoadedDriver load_driver() {
  LoadedDriver loaded;
  // Deliberately never dlclose'd: the driver lives as long as the process.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = dlerror();
    loaded.failure = std::string("no CUDA driver: cannot open libcuda.so.1 (") +
                     (error ? error : "unknown error") + ")";
    return loaded;
  }
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  auto get_version =
      reinterpret_cast<decltype(&::cuDriverGetVersion)>(dlsym(library, "cuDriverGetVersion"));
  if (get_proc == nullptr || get_version == nullptr) {
    loaded.failure = "the CUDA driver is older than CUDA 12 (no cuGetProcAddress_v2)";
    return loaded;
  }
  int driver_version = 0;
  if (get_version(&driver_version) != CUDA_SUCCESS) {
    loaded.failure = "cuDriverGetVersion failed";
    return loaded;
  }
  loaded.api.driver_version = driver_version;
  // Ask for the entry points as of the older of the driver and the headers we were built with.
  const int version = std::min(driver_version, CUDA_VERSION);
#define INTFA_RESOLVE_DRIVER_FUNCTION(name)                                    \
  if (!resolve(get_proc, #name, version, loaded.api.name, loaded.failure)) { \
    return loaded;                                                           \
  }
  INTFA_DRIVER_FUNCTIONS(INTFA_RESOLVE_DRIVER_FUNCTION)
#undef INTFA_RESOLVE_DRIVER_FUNCTION
  const CUresult init = loaded.api.cuInit(0);
  if (init != CUDA_SUCCESS) {
    const char* name = nullptr;
    loaded.api.cuGetErrorName(init, &name);
    loaded.failure = std::string("cuInit failed with ") + (name ? name : "an unknown error") +
                     (init == CUDA_ERROR_NO_DEVICE ? " (no GPU)" : "");
    return loaded;
  }
  int count = 0;
  if (loaded.api.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    loaded.failure = "the CUDA driver sees no GPU";
  }
  return loaded;
}

const LoadedDriver& loaded_driver() {
  static const LoadedDriver loaded = load_driver();
  return loaded;
}

}  // namespace

const DriverApi& driver() {
  const LoadedDriver& loaded = loaded_driver();
  if (!loaded.failure.empty()) throw NoDevice(loaded.failure);
  return loaded.api;
}

bool driver_available(std::string* reason) {
  const LoadedDriver& loaded = loaded_driver();
  if (reason != nullptr) *reason = loaded.failure;
  return loaded.failure.empty();
}

std::string result_name(CUresult result) {
  const LoadedDriver& loaded = loaded_driver();
  const char* name = nullptr;
  if (loaded.api.cuGetErrorName != nullptr &&
      loaded.api.cuGetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr) {
    return name;
  }
  return "CUresult " + std::to_string(static_cast<int>(result));
}

void check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  const LoadedDriver& loaded = loaded_driver();
  const char* description = nullptr;
  if (loaded.api.cuGetErrorString != nullptr) loaded.api.cuGetErrorString(result, &description);
  throw DriverError(call, static_cast<int>(result), result_name(result),
                    description ? description : "");
}

}  // namespace intfa::device
