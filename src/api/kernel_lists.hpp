// The ahead-of-time path, once: which kernels a call needs (every option included: the quantize
// kernels with K smoothing, the rotation and INT4, the attention kernel at given tile configs, the
// paged cache's family), and compiling such a list on several threads. intfa::precompile (and so
// intfa.precompile and intfa_precompile), `intfa precompile` (a deployment bundle), `intfa tune`
// and `intfa bench` all list and compile through these.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "families/any_spec.hpp"
#include "intfa/attention.hpp"
#include "launch/kernel_runtime.hpp"
#include "spec/attention_spec.hpp"

namespace intfa::aot {

// Specs in the order first added, each once.
class KernelList {
 public:
  void add(const families::AnySpec& spec) {
    if (seen_.insert(spec).second) specs_.push_back(spec);
  }
  void add(const std::vector<families::AnySpec>& specs) {
    for (const families::AnySpec& spec : specs) add(spec);
  }
  const std::vector<families::AnySpec>& specs() const { return specs_; }

 private:
  std::vector<families::AnySpec> specs_;
  std::unordered_set<families::AnySpec, families::AnySpecHash> seen_;
};

// The kernels one attention_forward_16bit call of `request` with `dtype` inputs launches under
// `numerics`: its quantize kernels (quantize::call_specs; Q's only where a config's kernel does
// not quantize Q itself), then the attention kernel at each of `configs`, each checked to fit the
// arch's shared memory (InvalidArgument otherwise).
std::vector<families::AnySpec> attention_call_specs(const attention::SpecRequest& request,
                                                    DType dtype, const AttentionOptions& numerics,
                                                    const std::vector<KernelConfig>& configs);

// The same at the tile configs the runtime's heuristic picks for `request`.
std::vector<families::AnySpec> attention_call_specs(const attention::SpecRequest& request,
                                                    DType dtype, const AttentionOptions& numerics);

// Every kernel of the paged cache's family for one (arch, head dim, cache width, dtype): append,
// decode at the heuristic's configs (checked against the arch), the merge, and paged prefill's
// gather and varlen attention kernels (with Q's own pass where the attention kernel does not
// quantize Q).
std::vector<families::AnySpec> paged_specs(device::Arch arch, int head_dim, int bits, DType dtype);

struct CompileSummary {
  std::size_t compiled = 0;  // by NVRTC now
  std::size_t cached = 0;    // found in memory, a bundle or on disk
  std::vector<std::string> failures;  // "spec: message", in completion order
  std::exception_ptr first_failure;   // the first failure's exception, to rethrow
};

// Where one spec's cubin comes from (KernelRuntime::compile by default, or a bundle writer);
// called from several threads at once; a failure is an exception.
using CompileFunction = std::function<launch::CompiledKernel(const families::AnySpec&)>;
// Called after each spec with the number done (under a lock: one call at a time).
using ProgressFunction = std::function<void(std::size_t done)>;

// Compiles every spec on `threads` workers (0: all cores). NVRTC compiles are independent and
// KernelRuntime::compile is thread-safe; one failure does not stop the others.
CompileSummary compile_in_parallel(const std::vector<families::AnySpec>& specs, unsigned threads,
                                   const CompileFunction& compile = {},
                                   const ProgressFunction& progress = {});

}  // namespace intfa::aot
