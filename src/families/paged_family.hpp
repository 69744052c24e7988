// The paged KV-cache kernel family (append, split-KV decode, merge of partial states): everything
// the rest of intfa needs to know about these kernels, in one place. Which KernelSpec fields each
// kernel uses and how they render, its shared memory, what it can implement, the heuristic's
// tile config and split count, the list of kernels a deployment compiles ahead of time, and the
// packing of the kernels' parameters. The JIT core calls instantiation() and describe() for the
// family's KernelFamily values; the public API (include/intfa/paged.hpp) is paged_api.cpp.
//
// Spec fields (others stay at their defaults):
//   paged_append  head_dim, qk_bits (the cache's bits), input_type (new K/V)
//   paged_decode  head_dim, qk_bits, input_type (queries), output_type, block_m (query rows per
//                 block), block_n (tokens per pipeline stage), stages, warps (4)
//   merge_states  head_dim, input_type (the states: f16, bf16 or f32), output_type
#pragma once

#include <string>
#include <vector>

#include "decode/paged_params.h"
#include "device/arch.hpp"
#include "device/device_info.hpp"
#include "families/kernel_spec.hpp"
#include "intfa/paged.hpp"
#include "render/render.hpp"

namespace intfa::paged {

// ---- Specs
// ---------------------------------------------------------------------------------------

families::KernelSpec append_spec(device::Arch arch, int head_dim, int bits,
                                 kernels::ElementType input);
families::KernelSpec decode_spec(device::Arch arch, int head_dim, int bits,
                                 kernels::ElementType query, kernels::ElementType output,
                                 const PagedDecodeConfig& config);
families::KernelSpec merge_spec(device::Arch arch, int head_dim, kernels::ElementType state,
                                kernels::ElementType output);

// The render hooks: the unit's header and kernel, and the family's fields for to_string.
render::Instantiation instantiation(const families::KernelSpec& spec);
std::string describe(const families::KernelSpec& spec);

// ---- What a decode kernel needs and can do -----------------------------------------------------

int decode_shared_bytes(const families::KernelSpec& decode);
// Throws InvalidArgument naming the config field when a decode spec's tile config is not one the
// template takes, and Unsupported when its shared memory exceeds `max_shared_bytes`.
void check_decode_config(const families::KernelSpec& decode, int max_shared_bytes);

// The heuristic's tile config for `rows` query rows per KV head (q_len * heads_q / heads_kv):
// one 16-row tile per warp, as few row tiles as hold the rows (1 query of GQA-4: 16 rows, the
// four warps split the tokens; 16 queries: 64 rows, a warp each), 64-token stages, three of them
// (two at d = 256, whose Q fragments also live in shared memory).
PagedDecodeConfig heuristic_config(int rows, int head_dim, int bits);
// Every config a tuner or `intfa bench --configs all` may time for `rows` rows, each fitting
// `max_shared_bytes` (the heuristic's first).
std::vector<PagedDecodeConfig> candidate_configs(int rows, int head_dim, int bits,
                                                 int max_shared_bytes);
// The config `options` asks for, completed by the heuristic's fields it leaves at 0.
PagedDecodeConfig resolve_config(const PagedDecodeConfig& requested, int rows, int head_dim,
                                 int bits);

// The split count: enough blocks to fill the GPU, rounded to whole waves. `units` blocks exist
// without splitting (batch * heads_kv * row blocks); `resident_blocks` is how many run at once
// (SMs * blocks per SM). Among 1..max splits (no split shorter than kMinSplitTokens of
// max_seq_len, at most kMaxSplits), the fewest whose waves are at least 90% full, else the fullest.
inline constexpr int kMaxSplits = 64;
inline constexpr int kMinSplitTokens = 256;
int heuristic_splits(long long units, int max_seq_len, int resident_blocks);
// Decode blocks of `decode` the device runs at once: SMs times the blocks per SM that its launch
// bounds promise the registers for (kernels::paged_decode_min_blocks) and its shared memory
// allows. From the config alone, so that the workspace size and the launch agree.
int resident_blocks(const families::KernelSpec& decode, const device::DeviceInfo& info);

// Workspace bytes of one decode: FP32 partial outputs and LSEs of every split, 256-byte aligned
// parts (0 with one split).
std::size_t workspace_bytes(int splits, int batch, int q_len, int heads_q, int head_dim);
// Byte offset of the partial LSEs in the workspace.
std::size_t workspace_lse_offset(int splits, int batch, int q_len, int heads_q, int head_dim);

// ---- Ahead-of-time list
// --------------------------------------------------------------------------

// Every kernel a deployment of the paged cache with these settings may launch: the append, the
// decode at the heuristic's config for 16, 32 and 64 rows, the split-KV merge (FP32 states) and
// merge_states of two `dtype` states. `dtype` is the queries', outputs' and new K/V's.
std::vector<families::KernelSpec> family_specs(device::Arch arch, int head_dim, int bits,
                                               DType dtype);

// ---- Parameters
// ------------------------------------------------------------------------------------

kernels::PagedCacheParams cache_params(const PagedKVCache& cache);

}  // namespace intfa::paged
