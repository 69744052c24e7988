// The Hopper attention kernel (KernelPath::kWgmma: sm_90a, wgmma,
// TMA, a producer and 1 to 3 consumer warpgroups; attention_forward_wgmma.cuh): its instantiation,
// its shared memory, the rules of its configs, and the TMA descriptors of its parameters
// (WgmmaAttentionParams: the AttentionParams of both kernels and tensor maps of K and V), made
// with the driver's cuTensorMapEncodeTiled from the caller's tensors. What both attention kernels
// share (the spec, the checks every config passes, AttentionParams, the launch shape) is
// attention_family.hpp's.
//
// Spec fields as the portable kernel's, with warps = 4 per warpgroup (one of them the producer)
// and block_m = 64 rows per consumer warpgroup; 8-bit Q.K, dense or packed (varlen) batches.
#pragma once

#include <optional>
#include <string>

#include "attention/wgmma_params.h"
#include "families/attention_family.hpp"
#include "intfa/attention.hpp"
#include "render/render.hpp"

namespace intfa::attention {

// The Hopper kernel's instantiation (kernel_source renders it for KernelPath::kWgmma).
render::Instantiation wgmma_instantiation(const AttentionSpec& spec);

// Shared memory the Hopper kernel of `spec` uses per block.
int wgmma_shared_bytes(const AttentionSpec& spec);

// The Hopper kernel's rules (attention_forward_wgmma.cuh): what it implements and its tiles.
// Throws Unsupported off sm_90a, else InvalidArgument naming the field (validate_config makes
// the checks both kernels share).
void validate_wgmma_config(const AttentionSpec& spec);

// Why TMA cannot describe these tensors (a base or stride not a multiple of 16 bytes, ...), naming
// the field; nullopt when it can. Q has no tensor map, but its consumers load its rows in 16-byte
// pieces, which the same rules allow.
std::optional<std::string> tma_incompatibility(const AttentionProblem& problem,
                                               const AttentionTensors& tensors);

// The kernel's own Q pass (AttentionSpec::quantizes_q): `q` the caller's checked 16-bit Q; with K
// smoothing, K's channel means in and the LSE term out (else null); with automatic rotation, K's
// rotated heads (else null).
void set_q_input(kernels::WgmmaAttentionParams& params, const TensorView& q,
                 const float* k_channel_mean, float* q_dot_k_mean, const int* rotated_heads);

// Writes the tensor maps of `params` (Q, K, V) for the tiles of `spec`. Throws DriverError.
void encode_tensor_maps(kernels::WgmmaAttentionParams& params, const AttentionProblem& problem,
                        const AttentionTensors& tensors, const AttentionSpec& spec);

}  // namespace intfa::attention
