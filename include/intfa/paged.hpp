// A paged INT8/INT4 KV cache for serving: append new K/V rows, decode 1..64 new queries per
// sequence against it (split-KV, GQA/MQA, causal within the new queries), prefill any number of
// queries per sequence against it, and the merge of partial attention states by their LSE that
// the split-KV combine uses.
//
//   intfa::PagedKVCache cache{...};                       one layer's pages (the caller's memory)
//   intfa::paged_append(cache, k, v, slot_mapping, tokens, stream);      vLLM's reshape_and_cache
//   intfa::paged_decode(cache, problem, tensors, stream);                flash-decoding
//   intfa::paged_prefill(cache, problem, tensors, stream);               chunked prefill
//   intfa::merge_states(shape, a, b, out, stream);                       (out, lse) of two parts
//
// Conventions are vLLM's and FlashInfer's: pages of page_size tokens, a block table of int32 page
// ids per sequence, int32 sequence lengths and slot mappings, all on the device and never read on
// the host, so a decode step can be captured in a CUDA graph and replayed with new lengths (the
// workspace is sized once, from the maxima). Layout and numerics: templates/decode/README.md.
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "intfa/precompile.hpp"
#include "intfa/types.hpp"

namespace intfa {

// One layer's cache, in memory the caller owns (16-byte aligned):
//   k_data, v_data    [num_pages][heads_kv][page_size][head_dim * bits / 8] bytes: INT8, or INT4
//                     two per byte (element 2i in the low nibble of byte i)
//   k_scale, v_scale  [num_pages][heads_kv][page_size][scales per row]: INT8 one FP32 per row,
//                     INT4 one FP16 per 32 channels
//   k_offset          optional K smoothing: [heads_kv][head_dim] FP32 channel offsets (e.g. the
//                     mean of the prefill's keys per channel), subtracted from K before it is
//                     quantized. Attention outputs do not change (softmax ignores a vector
//                     subtracted from every key) while INT8 covers a narrower range when keys have
//                     per-channel offsets; decode adds q . k_offset back to the LSE. Fix it before
//                     the first append: rows appended with another offset decode wrongly.
// A slot is page * page_size + position in the page.
struct PagedKVCache {
  int num_pages = 0;
  int page_size = 16;  // 16, 32, 64 or 128 tokens
  int heads_kv = 1;
  int head_dim = 128;  // 64, 128 or 256
  int bits = 8;        // 8 or 4
  void* k_data = nullptr;
  void* v_data = nullptr;
  void* k_scale = nullptr;
  void* v_scale = nullptr;
  const float* k_offset = nullptr;
};

// Bytes of k_data (and of v_data), and of k_scale (and of v_scale). Throw InvalidArgument naming
// the bad member of `cache` (sizes only; the pointers are not looked at).
std::size_t paged_data_bytes(const PagedKVCache& cache);
std::size_t paged_scale_bytes(const PagedKVCache& cache);

// Quantizes `tokens` new rows of K and V and writes each into slot_mapping[token] (vLLM's
// reshape_and_cache): k and v are kF16/kBF16 views of [1, heads_kv, tokens, head_dim] (a
// [tokens, heads_kv, head_dim] tensor has strides {0, head_dim, heads_kv * head_dim, 1}),
// 16-byte rows; slot_mapping is device int32 [tokens], a negative slot skips its token (padding).
// INT8 rows get scale = max|x| / 127, INT4 groups of 32 channels scale = f16(max|x| / 7), values
// round half to even. Two tokens must not share a slot; tokens * heads_kv < 2^30 (else
// InvalidArgument on "tokens"). Asynchronous on `stream`.
void paged_append(const PagedKVCache& cache, const TensorView& k, const TensorView& v,
                  const int* slot_mapping, int tokens, CUstream stream);

struct PagedDecodeProblem {
  int batch = 1;      // sequences
  int q_len = 1;      // new queries per sequence, 1..64 (their K/V already appended)
  int heads_q = 1;    // a multiple of the cache's heads_kv (GQA/MQA)
  int max_pages = 1;  // columns of the block table
  // An upper bound of the sequence lengths, for the split heuristic only (lengths stay on the
  // device); a longer sequence is still attended completely.
  int max_seq_len = 1;
  // Query i of a sequence of length L sits at position L - q_len + i and sees keys 0 .. that
  // position (bottom-right aligned). Rows that see no key output zeros and LSE -inf.
  bool causal = false;
};

struct PagedDecodeTensors {
  TensorView q;    // kF16/kBF16 [batch, heads_q, q_len, head_dim] (any strides, unit head_dim)
  TensorView out;  // kF16/kBF16, same shape; a [batch, q_len, heads_q, head_dim] tensor is the
                   // view with strides {q_len * heads_q * d, d, heads_q * d, 1}
  float* lse = nullptr;              // optional [batch][q_len][heads_q], natural log
  const int* block_table = nullptr;  // device int32 [batch][max_pages]: page ids
  const int* seq_lens = nullptr;     // device int32 [batch]; 0 allowed (zeros, LSE -inf)
  // Split-KV partial states; paged_decode_workspace_bytes says how many bytes (none with one
  // split). 256-byte aligned.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

// A decode kernel's tile configuration (the tuner's knob; zeros: the heuristic's).
struct PagedDecodeConfig {
  int block_rows = 0;    // query rows per block: 8 (the narrow block), 16, 32 or 64 (>= q_len *
                         // heads_q / heads_kv or the rows are taken in several blocks)
  int stage_tokens = 0;  // tokens per pipeline stage: 64 or 128
  int stages = 0;        // 2, 3 or 4
};

struct PagedDecodeOptions {
  double softmax_scale = 0.0;  // 0: 1 / sqrt(head_dim)
  int num_splits = 0;          // splits of each sequence, 1..64; 0: the heuristic's
  PagedDecodeConfig config;
};

// The splits paged_decode will use for this problem on the current device.
int paged_decode_splits(const PagedKVCache& cache, const PagedDecodeProblem& problem,
                        const PagedDecodeOptions& options = {});
// Workspace for every decode with batch <= problem.batch and q_len <= problem.q_len (and the same
// heads, max_seq_len and options) on the current device: size it once for a CUDA graph's maxima.
std::size_t paged_decode_workspace_bytes(const PagedKVCache& cache,
                                         const PagedDecodeProblem& problem,
                                         const PagedDecodeOptions& options = {});

// Attention of problem.q_len queries per sequence over the cached K/V. Validates everything first
// (InvalidArgument naming the field), launches the split kernel and, with more than one split,
// merges the splits' states: two splits in the kernel's own clusters on sm_90 and later where they
// fit, else in a merge kernel after it. The workspace (paged_decode_workspace_bytes) is required
// whenever there is more than one split. Asynchronous on `stream`; no host reads of device memory.
void paged_decode(const PagedKVCache& cache, const PagedDecodeProblem& problem,
                  const PagedDecodeTensors& tensors, CUstream stream,
                  const PagedDecodeOptions& options = {});

// One partial attention state: values [batch, heads, seq, head_dim] (kF16/kBF16, 16-byte rows)
// and their LSE (natural log) with element strides {batch, heads, seq}.
struct AttentionState {
  TensorView values;
  float* lse = nullptr;
  std::array<std::int64_t, 3> lse_strides{};

  // An attention_forward output: values and its LSE [batch][heads][seq], dense.
  static AttentionState of(const TensorView& values, float* lse, const TensorShape& shape);
};

// out = (exp(lse_a - m) a + exp(lse_b - m) b) / (exp(lse_a - m) + exp(lse_b - m)), m the larger
// LSE, and out.lse = m + log(exp(lse_a - m) + exp(lse_b - m)) (issue 29): the attention of the
// union of the two key sets. A state with LSE -inf weighs nothing; both -inf give zeros and
// -inf. `out` may be `a` (in place; out.lse may be null). head_dim 64, 128 or 256.
void merge_states(const TensorShape& shape, const AttentionState& a, const AttentionState& b,
                  const AttentionState& out, CUstream stream);

// ---- Prefill over the cache ---------------------------------------------------------------------
//
// Queries of many sequences, packed, against their sequences' cached K/V: a prefill whose new
// K/V were appended first, a chunk of a chunked prefill, a prefix-cache hit, and decode rows
// beside them (a sequence of one query), as FlashInfer's BatchPrefillWithPagedKVCache and vLLM's
// chunked prefill take them. Sequence b's queries are rows query_start_loc[b] ..
// query_start_loc[b + 1] of q and out; its keys are its first seq_lens[b] cached tokens, and its
// query i sits at position seq_lens[b] - (its query count) + i (bottom-right causal masking).
//
// How: a gather kernel copies the sequences' cached rows into the packed layout of the varlen
// attention kernel, in the workspace (K as the cache's INT8 bytes and per-row scales, an INT4
// cache's K dequantized and quantized again per row; V dequantized to the queries' 16-bit type),
// and the varlen attention kernel runs with half INT8 numerics (INT8 Q.K, 16-bit P.V, Q
// quantized per token): on sm_90a the Hopper kernel, which quantizes Q itself; elsewhere the
// portable kernel after Q's own pass. K/V are read from the cache, never quantized again from 16
// bits.
struct PagedPrefillProblem {
  int batch = 1;      // sequences
  int heads_q = 1;    // a multiple of the cache's heads_kv (GQA/MQA)
  int total_q = 1;    // query rows of all sequences: query_start_loc[batch]
  int max_q_len = 1;  // the most queries of one sequence (an upper bound)
  int max_pages = 1;  // columns of the block table
  // The longest sequence (an upper bound): its cached tokens, its new ones included.
  int max_seq_len = 1;
  // The sum of seq_lens (an upper bound): the rows per KV head the workspace holds. Keys past
  // it are not gathered (the attention of the sequences they belong to is then wrong); memory is
  // never written past it.
  long long kv_tokens = 1;
  bool causal = true;
};

struct PagedPrefillTensors {
  TensorView q;    // kF16/kBF16 [1, heads_q, total_q, head_dim]: a [total_q, heads_q, head_dim]
                   // tensor is the view with strides {0, head_dim, heads_q * head_dim, 1}
  TensorView out;  // the same type and shape as q
  float* lse = nullptr;                  // optional [heads_q][total_q], natural log
  const int* query_start_loc = nullptr;  // device int32 [batch + 1]: 0, ..., total_q
  const int* block_table = nullptr;      // device int32 [batch][max_pages]: page ids
  const int* seq_lens = nullptr;         // device int32 [batch]
  void* workspace = nullptr;             // paged_prefill_workspace_bytes, 256-byte aligned
  std::size_t workspace_bytes = 0;
};

struct PagedPrefillOptions {
  double softmax_scale = 0.0;  // 0: 1 / sqrt(head_dim)
};

// The workspace one paged_prefill of this problem needs (the gathered K/V, the quantized Q).
std::size_t paged_prefill_workspace_bytes(const PagedKVCache& cache,
                                          const PagedPrefillProblem& problem);

// Validates everything first (InvalidArgument naming the field), then launches on `stream` Q's
// quantization (where the attention kernel does not quantize Q itself), the gather and the
// attention kernel. No host reads of device memory: the
// offsets and lengths must agree with the problem's bounds (query_start_loc increasing from 0 to
// total_q by at most max_q_len, each seq_lens[b] at least its query count and at most
// max_seq_len, their sum at most kv_tokens). A sequence with no keys outputs zeros (LSE -inf).
void paged_prefill(const PagedKVCache& cache, const PagedPrefillProblem& problem,
                   const PagedPrefillTensors& tensors, CUstream stream,
                   const PagedPrefillOptions& options = {});

// Compiles ahead of the first call, into the kernel cache, every kernel of the paged cache for
// these settings: the append, the decode at the heuristic's tile config for 8, 16, 32 and 64
// query rows per KV head, the split-KV combine and merge_states, and paged prefill's gather and
// varlen attention kernels (causal or not, K smoothed or not). Needs no GPU when an arch is named
// (or INTFA_ARCH is set). `intfa precompile --paged-bits 8,4` puts them into a deployment bundle.
struct PagedPrecompileRequest {
  std::string arch;  // "sm_90a", ...; "" for INTFA_ARCH, else the GPU's own
  std::vector<int> head_dims = {64, 128, 256};
  std::vector<int> bits = {8, 4};
  std::vector<DType> dtypes = {DType::kF16};  // queries, outputs and new K/V: kF16, kBF16
  unsigned jobs = 0;                          // parallel NVRTC compiles; 0: all cores
};
PrecompileReport precompile_paged(const PagedPrecompileRequest& request);

}  // namespace intfa
