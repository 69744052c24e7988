// The checks the paged cache's entry points share (paged_api.cpp, paged_prefill.cpp), each
// failure an InvalidArgument naming the field ("cache.page_size", "options.config.block_rows"),
// and the device a call runs on.
#pragma once

#include <cuda.h>

#include <string>

#include "device/device_info.hpp"
#include "intfa/paged.hpp"

namespace intfa::paged {

// The cache's sizes (no pointers), and the same with its pointers' presence and alignment.
void validate_cache_geometry(const PagedKVCache& cache);
void validate_cache(const PagedKVCache& cache);
// A device pointer that is set and `alignment`-byte aligned.
void require_pointer(const void* pointer, const std::string& field, int alignment);

// The context of `stream` (the current one for the null stream) and its device's description.
struct Where {
  CUcontext context;
  const device::DeviceInfo* info;
};
Where where(CUstream stream);

// What paged_decode checks of the cache's sizes, the problem and the options before it looks for
// a device (its tensors and pointers aside): paged_decode_splits and
// paged_decode_workspace_bytes make them first, and the tools check a command line with them
// without a GPU.
void validate_decode(const PagedKVCache& cache, const PagedDecodeProblem& problem,
                     const PagedDecodeOptions& options);

}  // namespace intfa::paged
