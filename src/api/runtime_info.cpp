#include "common/locations.hpp"
#include "device/arch.hpp"
#include "device/device_info.hpp"
#include "device/driver_api.hpp"
#include "intfa/runtime.hpp"
#include "intfa_version.hpp"
#include "launch/kernel_runtime.hpp"
#include "nvrtc/compiler.hpp"

namespace intfa {

RuntimeInfo runtime_info() {
  RuntimeInfo info;
  info.version = INTFA_VERSION_STRING;
  info.nvrtc_version = nvrtc::version().to_string();
  std::string reason;
  info.gpu_available = device::driver_available(&reason);
  info.gpu = info.gpu_available ? device::query_device(device::current_device()).to_string()
                                : "no GPU: " + reason;
  try {
    info.target_arch = device::arch_name(device::target_arch());
  } catch (const std::exception&) {
    info.target_arch.clear();
  }
  if (const auto directory = locations::default_cache_directory()) {
    info.cache_directory = directory->string();
  }
  return info;
}

RuntimeCounters runtime_counters() {
  const launch::RuntimeStats stats = launch::KernelRuntime::instance().stats();
  return RuntimeCounters{stats.nvrtc_compiles, stats.disk_hits, stats.memory_hits};
}

}  // namespace intfa
