#include "device/device_info.hpp"

#include "common/env.hpp"
#include "common/log.hpp"
#include "device/driver_api.hpp"
#include "intfa/errors.hpp"

namespace intfa::device {
namespace {

int attribute(CUdevice device, CUdevice_attribute which) {
  int value = 0;
  INTFA_DRIVER(cuDeviceGetAttribute, &value, which, device);
  return value;
}

}  // namespace

std::string DeviceInfo::to_string() const {
  return name + " (device " + std::to_string(ordinal) + ", compute " +
         std::to_string(compute_major) + "." + std::to_string(compute_minor) + ", " +
         arch_name(arch) + ", " + std::to_string(sm_count) + " SMs, " +
         std::to_string(max_shared_bytes_per_block_optin) + " B shared/block opt-in)";
}

DeviceInfo query_device(CUdevice device) {
  const DriverApi& api = driver();
  DeviceInfo info;
  info.ordinal = static_cast<int>(device);
  char name[256] = {};
  INTFA_DRIVER(cuDeviceGetName, name, static_cast<int>(sizeof name), device);
  info.name = name;
  info.compute_major = attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.compute_minor = attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.arch = arch_for_compute_capability(info.compute_major, info.compute_minor);
  info.sm_count = attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.max_shared_bytes_per_block_optin =
      attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.max_shared_bytes_per_sm =
      attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  info.l2_bytes = attribute(device, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info.registers_per_sm = attribute(device, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  std::size_t total = 0;
  INTFA_DRIVER(cuDeviceTotalMem, &total, device);
  info.total_memory_bytes = total;
  info.driver_version = api.driver_version;
  return info;
}

CUdevice current_device() {
  CUcontext context = nullptr;
  INTFA_DRIVER(cuCtxGetCurrent, &context);
  CUdevice device = 0;
  if (context != nullptr) {
    INTFA_DRIVER(cuCtxGetDevice, &device);
  } else {
    INTFA_DRIVER(cuDeviceGet, &device, 0);
  }
  return device;
}

Arch target_arch() {
  if (const auto forced = arch_override_from_env()) return *forced;
  std::string reason;
  if (!driver_available(&reason)) {
    throw NoDevice(reason + "; set INTFA_ARCH to one of " + arch_names() +
                   " to compile without a GPU");
  }
  return query_device(current_device()).arch;
}

}  // namespace intfa::device

#include <map>
#include <memory>
#include <mutex>

namespace intfa::device {

namespace {

// Kernels launched on a GPU are compiled for its own arch (a cubin runs only on its major arch),
// so INTFA_ARCH, which picks the target when there is no GPU, cannot apply; say so once rather
// than let a user believe it took effect.
void warn_if_arch_override_is_ignored(Arch device_arch) {
  const auto value = env::get("INTFA_ARCH");
  if (!value) return;
  const auto forced = parse_arch(*value);
  if (forced && *forced == device_arch) return;
  const std::string problem = forced ? "" : " (and is not one of " + arch_names() + ")";
  log::warn_once("INTFA_ARCH ignored", "INTFA_ARCH='" + *value + "' is ignored on a GPU" + problem +
                                           ": launches use this GPU's " + arch_name(device_arch));
}

}  // namespace

const DeviceInfo& cached_device_info(CUdevice device) {
  static std::mutex mutex;
  static std::map<CUdevice, std::unique_ptr<DeviceInfo>> infos;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = infos[device];
  if (!slot) {
    slot = std::make_unique<DeviceInfo>(query_device(device));
    warn_if_arch_override_is_ignored(slot->arch);
  }
  return *slot;
}

}  // namespace intfa::device
