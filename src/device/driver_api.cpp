#include "device/driver_api.hpp"

#include <dlfcn.h>

#include <mutex>

#include "intfa/errors.hpp"

namespace intfa::device {
namespace {

struct LoadedDriver {
  DriverApi api;
  std::string failure;  // empty when api is usable
};

// The symbol cuda.h binds a name to (cuMemAlloc -> "cuMemAlloc_v2"): the argument is expanded
// before it is stringified. Resolving exactly that symbol guarantees the function has the
// signature the header declares. cuGetProcAddress would hand back the newest ABI of a base name
// instead, and CUDA 13 added new signatures under old names (cuCtxGetDevice_v2 takes a context).
#define INTFA_STRINGIFY(text) #text
#define INTFA_SYMBOL_NAME(name) INTFA_STRINGIFY(name)

template <typename Function>
bool resolve(void* library, const char* symbol, Function& slot, std::string& failure) {
  void* address = dlsym(library, symbol);
  if (address == nullptr) {
    failure = std::string("the CUDA driver does not provide ") + symbol + " (driver older than CUDA " +
              std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10) +
              "?)";
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
#define INTFA_RESOLVE_DRIVER_FUNCTION(name)                                                   \
  if (!resolve(library, INTFA_SYMBOL_NAME(name), loaded.api.name, loaded.failure)) {         \
    return loaded;                                                                           \
  }
  INTFA_DRIVER_FUNCTIONS(INTFA_RESOLVE_DRIVER_FUNCTION)
#undef INTFA_RESOLVE_DRIVER_FUNCTION
  if (loaded.api.cuDriverGetVersion(&loaded.api.driver_version) != CUDA_SUCCESS) {
    loaded.failure = "cuDriverGetVersion failed";
    return loaded;
  }
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

namespace intfa::device {

const char* driver_symbol_name_of_cuMemAlloc() { return INTFA_SYMBOL_NAME(cuMemAlloc); }
const char* driver_symbol_name_of_cuCtxGetDevice() { return INTFA_SYMBOL_NAME(cuCtxGetDevice); }

}  // namespace intfa::device
