// RAII device memory and streams through the driver table (used by the demo, the tools and the
// tests; the library itself allocates nothing on the device).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

namespace intfa::device {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);  // in the context current on this thread
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr address() const { return address_; }
  void* get() const { return reinterpret_cast<void*>(address_); }
  template <typename T>
  T* as() const { return reinterpret_cast<T*>(address_); }
  std::size_t bytes() const { return bytes_; }

  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  // Every byte set to `value`, synchronously. Poison outputs before a launch with 0xFF: NaN in
  // f16, bf16 and f32, so an element the kernel never wrote cannot pass a check.
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

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent get() const { return event_; }
  void record(CUstream stream);
  // Milliseconds from `start` to this event (both recorded; waits for this one).
  float elapsed_ms_since(const Event& start) const;

 private:
  CUevent event_ = nullptr;
};

// Makes device 0's primary context current on this thread (retained once per process).
void use_primary_context();

}  // namespace intfa::device
