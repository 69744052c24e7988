// The checks the paged cache's decode makes of the cache's sizes, the problem and the options
// before it looks for a device (its tensors and pointers aside), each failure an InvalidArgument
// naming the field ("options.config.block_rows"): paged_decode_splits and
// paged_decode_workspace_bytes make them first, and the tools check a command line with them
// without a GPU.
#pragma once

#include "intfa/paged.hpp"

namespace intfa::paged {

void validate_decode(const PagedKVCache& cache, const PagedDecodeProblem& problem,
                     const PagedDecodeOptions& options);

}  // namespace intfa::paged
