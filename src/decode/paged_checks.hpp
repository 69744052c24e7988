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
void require_positive(long long value, const std::string& field);
// problem.heads_q: positive and a multiple of the cache's KV heads (GQA/MQA).
void validate_query_heads(const PagedKVCache& cache, int heads_q);
// problem.max_pages and problem.max_seq_len: positive, and the block table's rows hold the
// longest sequence.
void validate_sequence_bounds(const PagedKVCache& cache, int max_pages, int max_seq_len);

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
