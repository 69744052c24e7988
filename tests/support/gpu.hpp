// GPU test support: skipping cleanly where there is no GPU, and RAII device memory and streams
// through intfa's own driver table (the tests link no CUDA runtime).
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "device/driver_api.hpp"

namespace intfa::testing {

// True when a driver and a GPU are usable; `reason` says why not.
bool gpu_available(std::string* reason = nullptr);

// Skips the current test (GTEST_SKIP) when there is no GPU, naming the reason.
#define INTFA_REQUIRE_GPU()                                          \
  do {                                                               \
    std::string intfa_no_gpu_reason;                                 \
    if (!::intfa::testing::gpu_available(&intfa_no_gpu_reason)) {   \
      GTEST_SKIP() << "no GPU: " << intfa_no_gpu_reason;             \
    }                                                                \
  } while (0)

// Makes device 0's primary context current on this thread (once per thread).
void use_primary_context();

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr address() const { return address_; }
  void* get() const { return reinterpret_cast<void*>(address_); }
  std::size_t bytes() const { return bytes_; }

  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  // Fills every byte with `value` (poison before a launch: 0xFF makes f16 NaN, f32 NaN).
  void fill_bytes(unsigned char value);

  template <typename T>
  void upload(const std::vector<T>& host) { upload(host.data(), host.size() * sizeof(T)); }
  template <typename T>
  std::vector<T> download_as(std::size_t count) const {
    std::vector<T> host(count);
    download(host.data(), count * sizeof(T));
    return host;
  }

 private:
  CUdeviceptr address_ = 0;
  std::size_t bytes_ = 0;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return stream_; }
  void synchronize() const;

 private:
  CUstream stream_ = nullptr;
};

}  // namespace intfa::testing
