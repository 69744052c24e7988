#include "device/device_memory.hpp"

#include <utility>

#include "device/driver_api.hpp"

namespace intfa::device {

void use_primary_context() {
  static CUcontext primary = [] {
    CUdevice device = 0;
    INTFA_DRIVER(cuDeviceGet, &device, 0);
    CUcontext context = nullptr;
    INTFA_DRIVER(cuDevicePrimaryCtxRetain, &context, device);
    return context;
  }();
  INTFA_DRIVER(cuCtxSetCurrent, primary);
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  INTFA_DRIVER(cuMemAlloc, &address_, bytes == 0 ? 1 : bytes);
}

DeviceBuffer::~DeviceBuffer() {
  if (address_ != 0) driver().cuMemFree(address_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : address_(std::exchange(other.address_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (address_ != 0) driver().cuMemFree(address_);
    address_ = std::exchange(other.address_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  INTFA_DRIVER(cuMemcpyHtoD, address_, host, bytes);
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  INTFA_DRIVER(cuMemcpyDtoH, host, address_, bytes);
}

void DeviceBuffer::fill_bytes(unsigned char value) {
  INTFA_DRIVER(cuMemsetD8Async, address_, value, bytes_, nullptr);
  INTFA_DRIVER(cuCtxSynchronize);
}

Stream::Stream() { INTFA_DRIVER(cuStreamCreate, &stream_, CU_STREAM_NON_BLOCKING); }

Stream::~Stream() {
  if (stream_ != nullptr) driver().cuStreamDestroy(stream_);
}

void Stream::synchronize() const { INTFA_DRIVER(cuStreamSynchronize, stream_); }

Event::Event() { INTFA_DRIVER(cuEventCreate, &event_, CU_EVENT_DEFAULT); }

Event::~Event() {
  if (event_ != nullptr) driver().cuEventDestroy(event_);
}

void Event::record(CUstream stream) { INTFA_DRIVER(cuEventRecord, event_, stream); }

float Event::elapsed_ms_since(const Event& start) const {
  INTFA_DRIVER(cuEventSynchronize, event_);
  float milliseconds = 0;
  INTFA_DRIVER(cuEventElapsedTime, &milliseconds, start.event_, event_);
  return milliseconds;
}

}  // namespace intfa::device
