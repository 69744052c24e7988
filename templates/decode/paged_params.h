// The paged KV cache's layout constants and the parameters of its kernels (append, decode, merge
// of partial states), shared by host and device (plain data, by value). Layout and numerics:
// README.md in this folder.
#pragma once

#include "common/types.h"

namespace intfa {
namespace kernels {

// Channels per INT4 scale along head_dim: the CPU model's accuracy study chose 32 over 64
// (README.md, "Why these choices").
constexpr int kPagedInt4Group = 32;
// Tokens per decode tile: the smallest page, so that a tile never spans two pages.
constexpr int kPagedTileTokens = 16;
// Threads of the append, gather and merge kernels. In the gather and the merge each thread owns
// 8 consecutive channels of a row, so a block's threads cover a row set of kPagedRowThreads /
// (head_dim / 8) rows at once; the append's threads own 16 (below).
constexpr int kPagedRowThreads = 128;
INTFA_HOST_DEVICE constexpr int paged_rows_per_set(int head_dim) {
  return kPagedRowThreads / (head_dim / 8);
}
// States whose loads a merge_states thread issues together; the host gives a row as many thread
// groups as keep each thread's states at or under it (merge_states.cuh).
constexpr int kMergeStatesPerThread = 8;
// An append thread owns 16 consecutive channels of a row (two 16-byte loads), and a block takes
// kPagedAppendRowSets consecutive row sets of K or V, their loads all in flight before it
// quantizes any (paged_append.cuh).
constexpr int kPagedAppendChannels = 16;
constexpr int kPagedAppendRowSets = 4;
INTFA_HOST_DEVICE constexpr int paged_append_rows_per_block(int head_dim) {
  return kPagedRowThreads / (head_dim / kPagedAppendChannels) * kPagedAppendRowSets;
}
// A gather block takes kPagedGatherRowSets consecutive row sets of one sequence, likewise with
// every row's page, then every row's loads, in flight before it converts any (paged_gather.cuh).
constexpr int kPagedGatherRowSets = 4;
INTFA_HOST_DEVICE constexpr int paged_gather_rows_per_block(int head_dim) {
  return paged_rows_per_set(head_dim) * kPagedGatherRowSets;
}

// n / divisor for 0 <= n < 2^31 and 1 <= divisor < 2^31 as (n * multiplier) >> shift: one wide
// multiply where a division takes about twenty instructions (Granlund and Montgomery, "Division
// by invariant integers using multiplication", 1994, theorem 4.2 with N = 31: shift = 31 + l,
// l = ceil(log2 divisor), multiplier = floor(2^shift / divisor) + 1 < 2^32).
struct FastDivisor {
  u32 multiplier;
  int shift;
};
INTFA_HOST_DEVICE constexpr FastDivisor make_fast_divisor(int divisor) {
  int log2_ceiling = 0;
  while ((1LL << log2_ceiling) < divisor) ++log2_ceiling;
  const int shift = 31 + log2_ceiling;
  return FastDivisor{static_cast<u32>((1ULL << shift) / static_cast<u64>(divisor) + 1), shift};
}
INTFA_HOST_DEVICE constexpr int fast_divide(int n, FastDivisor divisor) {
  return static_cast<int>((static_cast<u64>(n) * divisor.multiplier) >> divisor.shift);
}

// Bytes of one (token, head) row of K or V in the cache: head_dim values of `bits` bits.
INTFA_HOST_DEVICE constexpr int paged_row_bytes(int head_dim, int bits) {
  return head_dim * bits / 8;
}
// Scales of one (token, head) row: one FP32 for INT8, head_dim / kPagedInt4Group FP16 for INT4.
INTFA_HOST_DEVICE constexpr int paged_scales_per_row(int head_dim, int bits) {
  return bits == 8 ? 1 : head_dim / kPagedInt4Group;
}
INTFA_HOST_DEVICE constexpr int paged_scale_bytes(int bits) {
  return bits == 8 ? 4 : 2;
}

// Warps of a decode block; each owns 16 query rows (one m16 tile; 8 in narrow blocks) and a
// share of the tokens.
constexpr int kPagedDecodeWarps = 4;
// m16 row tiles of a block: one for 8 (narrow) and 16 rows.
INTFA_HOST_DEVICE constexpr int paged_decode_row_tiles(int block_rows) {
  return block_rows < 16 ? 1 : block_rows / 16;
}
// Blocks per SM the decode kernel's launch bounds keep registers for: three up to d = 128 (at
// most 170 registers a thread), two at d = 256 (whose FP32 output alone takes 128); narrow
// 8-row blocks hold a quarter of that output, and take one block more. The host's split
// heuristic counts on it (src/families/paged_family.cpp, resident_blocks).
INTFA_HOST_DEVICE constexpr int paged_decode_min_blocks(int head_dim, int block_rows) {
  return (head_dim > 128 ? 2 : 3) + (block_rows < 16 ? 1 : 0);
}

// Narrow INT4 blocks keep Q.K's bias per key group in shared memory, as the FP32 accumulator quads
// of each lane column: (head_dim / 32 groups) x 4 columns x 16 bytes (paged_decode.cuh).
INTFA_HOST_DEVICE constexpr int paged_decode_key_bias_bytes(int head_dim, int bits,
                                                            int block_rows) {
  return block_rows < 16 && bits == 4 ? head_dim / kPagedInt4Group * 4 * 16 : 0;
}

// Splits whose states a decode merges in its own launch: with this many, the splits of one
// (row block, sequence, KV head) are one thread block cluster, which merges them through
// distributed shared memory (paged_decode.cuh, "The cluster's merge"); more take merge_states.
// Larger clusters ran slower than their blocks launched alone with merge_states (README.md,
// "Blocks and splits").
constexpr int kPagedClusterMergeSplits = 2;

// Shared memory of one decode block: `stages` buffers of `stage_tokens` tokens of K, V and their
// scales (the cp.async pipeline), then at d = 256 Q's FP16 fragments, then narrow INT4 blocks'
// bias of Q.K per key group; reused at the end for the states of warps that split a row tile's
// tokens (16 rows of head_dim FP32 outputs, their maximum and sum, per warp), then for the
// block's state that its cluster merges (paged_decode_cluster_state_bytes).
INTFA_HOST_DEVICE constexpr int paged_decode_stage_bytes(int head_dim, int bits, int stage_tokens) {
  return 2 * stage_tokens *
         (paged_row_bytes(head_dim, bits) +
          paged_scales_per_row(head_dim, bits) * paged_scale_bytes(bits));
}
INTFA_HOST_DEVICE constexpr int paged_decode_shared_bytes(int head_dim, int bits, int block_rows,
                                                          int stage_tokens, int stages) {
  const int row_tiles = paged_decode_row_tiles(block_rows);
  const int pipeline = stages * paged_decode_stage_bytes(head_dim, bits, stage_tokens) +
                       (head_dim > 128 ? 16 * row_tiles * head_dim * 2 : 0) +
                       paged_decode_key_bias_bytes(head_dim, bits, block_rows);
  const int token_groups = kPagedDecodeWarps / row_tiles;
  const int merge = token_groups > 1 ? kPagedDecodeWarps * 16 * (head_dim + 2) * 4 : 0;
  return pipeline > merge ? pipeline : merge;
}
// The block's state its cluster merges, from the start of its shared memory: block_rows rows of
// head_dim FP32 normalised outputs, then their LSE. It is not reserved: a config whose shared
// memory is smaller (INT4 64-row blocks below d = 256) keeps merge_states
// (paged::splits_may_merge_in_clusters).
INTFA_HOST_DEVICE constexpr int paged_decode_cluster_state_bytes(int head_dim, int block_rows) {
  return block_rows * (head_dim + 1) * 4;
}

// One layer's cache: K and V data [num_pages][heads_kv][page_size][row bytes], their scales
// [num_pages][heads_kv][page_size][scales per row] (FP32 for INT8, FP16 for INT4).
struct PagedCacheParams {
  u8* k_data;
  u8* v_data;
  void* k_scale;
  void* v_scale;
  // K smoothing: [heads_kv][head_dim] FP32 channel offsets subtracted from K before quantizing
  // (append) and whose dot product with q is added back to the LSE (decode); or null.
  const float* k_offset;
  int num_pages;
  int page_size;   // 16, 32, 64 or 128
  int page_shift;  // log2(page_size)
  int heads_kv;
};

// The row of the cache's data and scale arrays that holds position `position` (any token index
// or slot: its offset within the page is taken) of page `page`, KV head `head`.
INTFA_HOST_DEVICE inline int paged_cache_row(const PagedCacheParams& cache, int page, int head,
                                             int position) {
  return ((page * cache.heads_kv + head) << cache.page_shift) + (position & (cache.page_size - 1));
}

// New rows [tokens][heads_kv][head_dim] (16-bit, element strides, unit stride on head_dim) go to
// slot_mapping[token] = page * page_size + position; a negative slot skips the token. The grid
// is (ceil(tokens * heads_kv / paged_append_rows_per_block(head_dim)), 2): blockIdx.y 0 takes
// K's rows, 1 V's; row r of either is token r / heads_kv, head r % heads_kv.
struct PagedAppendParams {
  const void* k;
  const void* v;
  i64 k_token_stride, k_head_stride;  // elements
  i64 v_token_stride, v_head_stride;  // elements
  const int* slot_mapping;
  int rows;  // of K and of V: tokens * heads_kv, below 2^30 (the host checks)
  FastDivisor heads_kv_divisor;
  PagedCacheParams cache;
};

// Queries q[batch][q_len][heads_q][head_dim] against sequence b's first seq_lens[b] cached
// tokens, whose pages are block_table[b][0 ..]. Query i of sequence b sits at position
// seq_lens[b] - q_len + i (its own K/V already appended), so causal masking is bottom-right
// aligned. Rows of a block are query-major: row = i * (heads_q / heads_kv) + query head in the
// KV head's group.
struct PagedDecodeParams {
  const void* q;
  i64 q_batch_stride, q_token_stride, q_head_stride;  // elements
  void* out;
  i64 out_batch_stride, out_token_stride, out_head_stride;  // elements
  float* lse;  // [batch][q_len][heads_q], natural log; may be null (direct mode)
  // Split mode (num_splits > 1): each block writes its normalised FP32 output and LSE here,
  // [num_splits][batch][q_len][heads_q][head_dim] and [num_splits][batch][q_len][heads_q], and
  // merge_states combines them into out and lse. Null in direct mode, and with splits launched
  // as clusters of num_splits blocks (at most kPagedClusterMergeSplits), which merge them.
  float* partial_out;
  float* partial_lse;
  const int* block_table;
  i64 block_table_stride;  // int32 elements between sequences
  const int* seq_lens;
  PagedCacheParams cache;
  int batch, q_len, heads_q, group;  // group = heads_q / heads_kv
  int num_splits;
  int causal;
  float scale_log2;  // softmax scale * log2(e)
};

// Gather (paged prefill's first step): sequence b's first min(seq_lens[b], max_seq_len) cached
// rows, through its block table row, become packed rows kv_start(b) .. of every KV head, with
// kv_start(b) the lengths of the sequences before it: K as INT8 with one FP32 scale per row (an
// INT8 cache's bytes and scales as they are; an INT4 cache's rows dequantized as decode does and
// quantized again per row), V dequantized to 16 bits. The layouts are the varlen attention
// kernel's: k [heads_kv][kv_rows][head_dim] bytes, k_scale [heads_kv][kv_rows], v
// [heads_kv][kv_rows][head_dim] 16-bit values, and cu_seqlens_kv [batch + 1] receives the offsets.
// V rows from the end of the last sequence on, up to kPagedGatherZeroRows of them, are zeroed:
// the attention kernel's last key tile reads past a sequence's end (those keys are masked, and P
// is 0 there, but 0 times a NaN left in the workspace is not). Rows at kv_rows and beyond are
// never written. The grid is (ceil(max_seq_len * heads_kv / paged_gather_rows_per_block), batch);
// each thread owns 8 channels of one (token, head) row in each of its block's row sets.
constexpr int kPagedGatherZeroRows = 128;  // the largest key tile (block_n) of the attention kernels
struct PagedGatherParams {
  PagedCacheParams cache;
  const int* block_table;
  i64 block_table_stride;  // int32 elements between sequences
  const int* seq_lens;
  int batch, max_seq_len;
  int kv_rows;  // rows per head of k, k_scale and v: at least the sum of the lengths
  FastDivisor heads_kv_divisor;
  u8* k;
  float* k_scale;
  void* v;
  int* cu_seqlens_kv;
};

// Merges partial attention states by their LSE: state 0's values are at first_values, state
// s >= 1's at rest_values + (s - 1) * values_state_stride (likewise the LSEs), each
// [outer][inner][heads][head_dim] (values, element strides) and [outer][inner][heads] (LSE, float
// strides). merged = sum_s exp(lse_s - m) values_s / sum_s exp(lse_s - m) with m = max_s lse_s,
// merged_lse = m + log(sum_s exp(lse_s - m)); states with LSE -inf weigh nothing and are not
// read; a row whose states are all -inf is zero with LSE -inf. merged may be first_values (in
// place, with the same strides).
struct MergeStatesParams {
  const void* first_values;
  const void* rest_values;
  const float* first_lse;
  const float* rest_lse;
  i64 values_state_stride;      // elements, between states from rest_values on
  i64 lse_state_stride;         // floats
  i64 first_values_strides[3];  // outer, inner, heads (elements)
  i64 rest_values_strides[3];
  i64 first_lse_strides[3];  // outer, inner, heads (floats)
  i64 rest_lse_strides[3];
  void* merged;
  i64 merged_strides[3];
  float* merged_lse;  // may be null
  i64 merged_lse_strides[3];
  int outer, inner, heads, num_states;
  // Thread groups sharing a row's states: a power of two dividing paged_rows_per_set(head_dim).
  int state_groups;
};

}  // namespace kernels
}  // namespace intfa
