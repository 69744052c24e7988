// The attention kernels: the portable one (KernelFamily::kAttention, mma.sync, every arch and the
// fallback on sm_90; attention_forward.cuh) and what it shares with the Hopper kernel
// (kAttentionWgmma, attention_wgmma_family.hpp). The portable kernel's instantiation; for both,
// the shared memory, the checks a config must pass before anything is compiled, the
// AttentionParams they take and the launch shape. The request, make_spec and the heuristic are
// the spec layer's (src/spec/attention_spec.hpp); the JIT core reaches the instantiation through
// src/families/kernel_families.cpp.
//
// Spec fields: head_dim, block_m, block_n, warps, stages, variant, qk_bits, output_type, causal,
// varlen, the numerics the variant reads (numerics_read_by), half INT8 input_type (V's).
#pragma once

#include "attention/attention_params.h"
#include "families/kernel_spec.hpp"
#include "intfa/attention.hpp"
#include "launch/kernel_runtime.hpp"
#include "render/render.hpp"

namespace intfa::attention {

// The render hook of the portable kernel.
render::Instantiation portable_instantiation(const families::KernelSpec& spec);

// What KernelSpec::to_string says of an attention spec (either kernel) after "family arch dN":
// " m128 n64 w8 s2 full_int8 qk8 f16->f16 causal p=u8 p-scale=tile v-scale=channel".
std::string fields_text(const families::KernelSpec& spec);

// The Numerics type of both kernels' instantiations: the spec's numerics as named constants.
render::ConstantsStruct numerics_constants(const families::KernelSpec& spec);

// Shared memory the kernel of `spec` uses per block.
int shared_bytes(const families::KernelSpec& spec);

// Throws InvalidArgument naming the bad config field (block_m not 16 or 32 rows per warp, ...),
// or Unsupported when the kernel would need more than `max_shared_bytes` of shared memory.
void validate_config(const families::KernelSpec& spec, int max_shared_bytes);

// A view's batch, head and row strides in bytes (elements of `element_bytes`).
kernels::Strides byte_strides(const TensorView& view, int element_bytes);

// The parameters of both kernels (the Hopper kernel's WgmmaAttentionParams::attention) for the
// caller's tensors.
kernels::AttentionParams make_params(const AttentionProblem& problem,
                                     const AttentionTensors& tensors, double softmax_scale);

// One block per block_m query rows of each query head and batch, warps * 32 threads,
// shared_bytes(spec) of dynamic shared memory.
launch::LaunchShape launch_shape(const AttentionProblem& problem, const families::KernelSpec& spec);

}  // namespace intfa::attention
