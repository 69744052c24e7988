// intfa::precompile: compiles, ahead of the first call, the kernels attention calls will launch
// (the quantize kernels and the attention kernel at the heuristic's tile configs) into the user
// cache, so that a service's first request does not wait for NVRTC. Needs no GPU when an arch is
// named (or INTFA_ARCH is set). Python: intfa.precompile; C: intfa_precompile; a deployment
// bundle for other machines: `intfa precompile --out DIR`.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "intfa/attention.hpp"
#include "intfa/types.hpp"

namespace intfa {

struct PrecompileRequest {
  std::string arch;  // "sm_90a", ...; "" for INTFA_ARCH, else the GPU's own
  std::vector<int> head_dims;  // multiples of 8 up to 256 (others than 64, 128, 256: the next's)
  std::vector<Variant> variants;
  std::vector<DType> dtypes;  // inputs and output: kF16, kBF16
  std::vector<bool> causal;
  // The numerics (which attention kernels), and smooth_k and rotate_qk: which quantize kernels
  // attention_forward_16bit launches (K smoothing's mean pass, K's and Q's rows with the
  // smoothing, the LSE term and the rotation).
  AttentionOptions options;
  int qk_bits = 8;            // 8, or 4 for INT4 Q.K (AttentionProblem::qk_bits)
  unsigned jobs = 0;          // parallel NVRTC compiles; 0: all cores
};

struct PrecompileReport {
  std::string arch;
  std::size_t kernels = 0;
  std::size_t compiled_now = 0;
  std::size_t already_present = 0;  // in memory, the deployment bundle or the user cache
  std::vector<std::string> specs;   // readable spec of each kernel, in compile order
};

// Throws InvalidArgument naming the bad request field, NoDevice when no arch can be named,
// CompileError for the first kernel NVRTC rejects (after the others were tried).
PrecompileReport precompile(const PrecompileRequest& request);

}  // namespace intfa
