// GPU test support: skipping cleanly where there is no GPU; device memory and streams come from
// the library (src/device/device_memory.hpp), so the tests link no CUDA runtime.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "device/device_info.hpp"
#include "device/device_memory.hpp"
#include "device/driver_api.hpp"

namespace intfa::testing {

using device::DeviceBuffer;
using device::Stream;

// True when a driver and a GPU are usable; `reason` says why not.
inline bool gpu_available(std::string* reason = nullptr) {
  return device::driver_available(reason);
}

// The arch of the current context's device (after INTFA_REQUIRE_GPU).
inline device::Arch current_arch() {
  CUdevice device = 0;
  INTFA_DRIVER(cuCtxGetDevice, &device);
  return device::cached_device_info(device).arch;
}

// Skips the current test (GTEST_SKIP) when there is no GPU, naming the reason; otherwise makes
// device 0's primary context current on this thread.
#define INTFA_REQUIRE_GPU()                                          \
  do {                                                               \
    std::string intfa_no_gpu_reason;                                 \
    if (!::intfa::testing::gpu_available(&intfa_no_gpu_reason)) {   \
      GTEST_SKIP() << "no GPU: " << intfa_no_gpu_reason;             \
    }                                                                \
    ::intfa::device::use_primary_context();                          \
  } while (0)

}  // namespace intfa::testing
