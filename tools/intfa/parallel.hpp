// Compiling many kernel specs at once (NVRTC is thread-safe per program), with progress.
#pragma once

#include <string>
#include <vector>

#include "render/kernel_spec.hpp"

namespace intfa::cli {

struct CompileSummary {
  std::size_t compiled = 0;  // by NVRTC now
  std::size_t cached = 0;    // found in memory or on disk
  std::vector<std::string> failures;
};

// Compiles (or finds in the cache) every spec with `threads` workers (0: all cores), printing a
// progress bar on a terminal and a plain line every few seconds otherwise.
CompileSummary compile_in_parallel(const std::vector<render::KernelSpec>& specs,
                                   const std::string& label, unsigned threads = 0);

}  // namespace intfa::cli
