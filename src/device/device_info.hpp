// Facts about a GPU, read through the driver.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "device/arch.hpp"

namespace intfa::device {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  Arch arch = Arch::kSm80;
  int sm_count = 0;
  int max_shared_bytes_per_block_optin = 0;
  int max_shared_bytes_per_sm = 0;
  int l2_bytes = 0;
  int registers_per_sm = 0;  // 32-bit registers
  std::uint64_t total_memory_bytes = 0;
  int driver_version = 0;  // 13000 for CUDA 13.0

  std::string to_string() const;
};

// Throws NoDevice without a driver, Unsupported for a compute capability intfa does not target.
DeviceInfo query_device(CUdevice device);

// The device of the context current on this thread, else device 0.
CUdevice current_device();

// What the kernels should be compiled for: INTFA_ARCH if set, else the current device's arch.
// Throws NoDevice when neither is available.
Arch target_arch();

}  // namespace intfa::device

namespace intfa::device {
// query_device, remembered per device for the life of the process (hot path of every launch).
const DeviceInfo& cached_device_info(CUdevice device);
}  // namespace intfa::device
