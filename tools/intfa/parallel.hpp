// Compiling many kernel specs at once (aot::compile_in_parallel, src/api/kernel_lists.hpp) with a
// progress bar on a terminal and a plain line every few seconds otherwise.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "families/any_spec.hpp"
#include "launch/kernel_runtime.hpp"

namespace intfa::cli {

struct CompileSummary {
  std::size_t compiled = 0;  // by NVRTC now
  std::size_t cached = 0;    // found in memory or on disk
  std::vector<std::string> failures;
};

// Where one spec's cubin comes from: KernelRuntime::compile, or launch::compile into a bundle.
// Called from several threads at once; a failure is an exception, listed in the summary.
using CompileFunction = std::function<launch::CompiledKernel(const families::AnySpec&)>;

// Compiles (or finds in the cache) every spec with `threads` workers (0: all cores), printing
// progress. Without `compile`, specs go through the process-wide runtime and its caches.
CompileSummary compile_in_parallel(const std::vector<families::AnySpec>& specs,
                                   const std::string& label, unsigned threads = 0,
                                   const CompileFunction& compile = {});

}  // namespace intfa::cli
