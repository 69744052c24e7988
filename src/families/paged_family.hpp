// The paged KV-cache kernel family (append, split-KV decode, merge of partial states, the gather
// of cached rows that paged prefill attends over): everything
// the rest of intfa needs to know about these kernels, in one place. Their spec (PagedSpec: the
// three kernels share its fields, and `kernel` says which one), how it renders, its text and
// JSON, the decode kernel's shared memory, what it can implement, the heuristic's tile config and
// split count, the list of kernels a deployment compiles ahead of time, and the packing of the
// kernels' parameters. The public API (include/intfa/paged.hpp) is paged_api.cpp.
//
// Fields each kernel reads (others stay at their defaults):
//   paged_append  head_dim, bits (the cache's), input_type (new K/V)
//   paged_decode  head_dim, bits, input_type (queries), output_type, config (query rows per
//                 block, tokens per pipeline stage, stages; kernels::kPagedDecodeWarps warps)
//   merge_states  head_dim, input_type (the states: f16, bf16 or f32), output_type
//   paged_gather  head_dim, bits (the cache's), output_type (the gathered 16-bit V)
#pragma once

#include <string>
#include <vector>

#include "common/json.hpp"
#include "decode/paged_params.h"
#include "device/arch.hpp"
#include "device/device_info.hpp"
#include "intfa/paged.hpp"
#include "render/kernel_source.hpp"
#include "render/render.hpp"

namespace intfa::paged {

// ---- The spec ----------------------------------------------------------------------------------

// The kernels, numbered after the quantize and attention kernels' tags (spec_format.hpp) so
// that no two families' kernel ids meet.
enum class PagedKernel {
  kAppend = 8,        // FP16/BF16 K/V rows -> INT8/INT4 cache slots
  kDecode = 9,        // split-KV decode attention over the paged cache
  kMergeStates = 10,  // merge of partial attention states by their LSE (the split-KV combine)
  kGather = 11,       // cached rows -> the packed K (INT8) and V (16-bit) of paged prefill
};
// "paged_append", "paged_decode", "merge_states", "paged_gather": the spec JSON's "family" and
// the unit's file name.
std::string kernel_name(PagedKernel kernel);

struct PagedSpec {
  PagedKernel kernel = PagedKernel::kAppend;
  device::Arch arch = device::Arch::kSm80;
  int head_dim = 0;
  int bits = 8;  // the cache's: 8 or 4 (append and decode)
  kernels::ElementType input_type = kernels::ElementType::kF16;   // new K/V, queries, or states
  kernels::ElementType output_type = kernels::ElementType::kF16;  // decode and merge
  PagedDecodeConfig config;  // decode: its tile config (all zero for the others)

  friend bool operator==(const PagedSpec& a, const PagedSpec& b);
  friend bool operator!=(const PagedSpec& a, const PagedSpec& b) { return !(a == b); }

  // "paged_decode sm_90a d128 i8 m16 n64 s2 f16->f16".
  std::string to_string() const;
  // The spec file's members (families/spec_format.hpp): the config as block_m, block_n, stages
  // and warps, the cache's bits as qk_bits.
  json::Value to_json() const;
  // Inverse of to_json for a paged kernel's "family"; throws InvalidArgument naming the bad
  // member.
  static PagedSpec from_json(const json::Value& value);
};

// Whether `family` (a spec JSON's "family") names a paged-cache kernel.
bool names_kernel(const std::string& family);

// The spec's fields packed into the JIT core's key: equal ids exactly for equal specs.
render::KernelId kernel_id(const PagedSpec& spec);
// What the JIT core takes: the kernel's unit, arch, to_string() and to_json().
render::KernelSource kernel_source(
    const PagedSpec& spec, const render::TemplateSet& templates = render::TemplateSet::active());

// ---- Specs of the entry points -----------------------------------------------------------------

PagedSpec append_spec(device::Arch arch, int head_dim, int bits, kernels::ElementType input);
PagedSpec decode_spec(device::Arch arch, int head_dim, int bits, kernels::ElementType query,
                      kernels::ElementType output, const PagedDecodeConfig& config);
PagedSpec merge_spec(device::Arch arch, int head_dim, kernels::ElementType state,
                     kernels::ElementType output);
PagedSpec gather_spec(device::Arch arch, int head_dim, int bits, kernels::ElementType v_type);

// ---- What a decode kernel needs and can do -----------------------------------------------------

int decode_shared_bytes(const PagedSpec& decode);
// Throws InvalidArgument naming the config field when a decode spec's tile config is not one the
// template takes, and Unsupported when its shared memory exceeds `max_shared_bytes`.
void check_decode_config(const PagedSpec& decode, int max_shared_bytes);

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
// Thread groups that share a row's states in merge_states (launch_merge): the fewest, a power
// of two up to the merge block's row slots (kernels::paged_rows_per_set), that leave each thread
// at most kernels::kMergeStatesPerThread states, whose loads it issues together.
int merge_state_groups(int num_states, int head_dim);
// Decode blocks of `decode` the device runs at once: SMs times the blocks per SM that its launch
// bounds promise the registers for (kernels::paged_decode_min_blocks) and its shared memory
// allows. From the config alone, so that the workspace size and the launch agree.
int resident_blocks(const PagedSpec& decode, const device::DeviceInfo& info);
// Whether a decode's splits may merge in their clusters (paged_decode.cuh, "The cluster's
// merge"): exactly kernels::kPagedClusterMergeSplits of them, on an arch with clusters, the
// block's state within its shared memory. They do where clusters_take_no_more_waves; otherwise
// merge_states merges them.
bool splits_may_merge_in_clusters(const PagedSpec& decode, int splits);
// Whether `clusters` clusters of `splits` blocks (one per row block, sequence and KV head), at
// `clusters_at_once` (launch::max_active_clusters), take no more waves than their blocks alone at
// `resident_blocks`.
bool clusters_take_no_more_waves(long long clusters, int splits, long long clusters_at_once,
                                 long long resident_blocks);

// Workspace bytes of one decode: FP32 partial outputs and LSEs of every split, 256-byte aligned
// parts (0 with one split).
std::size_t workspace_bytes(int splits, int batch, int q_len, int heads_q, int head_dim);
// Byte offset of the partial LSEs in the workspace.
std::size_t workspace_lse_offset(int splits, int batch, int q_len, int heads_q, int head_dim);

// ---- Ahead-of-time list
// --------------------------------------------------------------------------

// Every kernel a deployment of the paged cache with these settings may launch: the append, the
// decode at the heuristic's config for 16, 32 and 64 rows, the split-KV merge (FP32 states),
// merge_states of two `dtype` states and paged prefill's gather (`dtype` V). `dtype` is the
// queries', outputs' and new K/V's.
std::vector<PagedSpec> family_specs(device::Arch arch, int head_dim, int bits, DType dtype);

// ---- Parameters
// ------------------------------------------------------------------------------------

kernels::PagedCacheParams cache_params(const PagedKVCache& cache);

}  // namespace intfa::paged
