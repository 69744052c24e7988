#include "support/gpu.hpp"

#include <utility>

namespace intfa::testing {

bool gpu_available(std::string* reason) {
  return device::driver_available(reason);
}

void use_primary_context() {
  thread_local bool done = false;
  if (done) return;
  CUdevice device = 0;
  INTFA_DRIVER(cuDeviceGet, &device, 0);
  CUcontext context = nullptr;
  INTFA_DRIVER(cuDevicePrimaryCtxRetain, &context, device);
  INTFA_DRIVER(cuCtxSetCurrent, context);
  done = true;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  use_primary_context();
  INTFA_DRIVER(cuMemAlloc, &address_, bytes == 0 ? 1 : bytes);
}

DeviceBuffer::~DeviceBuffer() {
  if (address_ != 0) device::driver().cuMemFree(address_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : address_(std::exchange(other.address_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (address_ != 0) device::driver().cuMemFree(address_);
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

Stream::Stream() {
  use_primary_context();
  INTFA_DRIVER(cuStreamCreate, &stream_, CU_STREAM_NON_BLOCKING);
}

Stream::~Stream() {
  if (stream_ != nullptr) device::driver().cuStreamDestroy(stream_);
}

void Stream::synchronize() const { INTFA_DRIVER(cuStreamSynchronize, stream_); }

}  // namespace intfa::testing
