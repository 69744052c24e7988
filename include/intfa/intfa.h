/* intfa C API: a flat interface over the C++ library for FFI (ctypes, other languages).
 * Every function returns an intfa_status_t; on failure intfa_last_error() gives this thread's
 * message (the C++ exception's text, naming the bad field). Nothing throws across this API: every
 * function is noexcept when seen from C++, and an enum value outside its type is
 * INTFA_INVALID_ARGUMENT naming the member. */
#ifndef INTFA_INTFA_H_
#define INTFA_INTFA_H_

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define INTFA_NOEXCEPT noexcept
extern "C" {
#else
#define INTFA_NOEXCEPT
#endif

typedef enum intfa_status_t {
  INTFA_OK = 0,
  INTFA_INVALID_ARGUMENT = 1,
  INTFA_UNSUPPORTED = 2,
  INTFA_COMPILE_ERROR = 3,
  INTFA_DRIVER_ERROR = 4,
  INTFA_NO_DEVICE = 5,
  INTFA_CACHE_ERROR = 6,
  INTFA_INTERNAL = 7
} intfa_status_t;

typedef enum intfa_dtype_t { INTFA_F16 = 0, INTFA_BF16 = 1, INTFA_I8 = 2, INTFA_I4X2 = 3 } intfa_dtype_t;
typedef enum intfa_variant_t { INTFA_FULL_INT8 = 0, INTFA_HALF_INT8 = 1 } intfa_variant_t;
typedef enum intfa_p_encoding_t { INTFA_P_S8 = 0, INTFA_P_U8 = 1 } intfa_p_encoding_t;
typedef enum intfa_p_scale_t { INTFA_P_RUNNING_MAX = 0, INTFA_P_TILE_MAX = 1 } intfa_p_scale_t;
typedef enum intfa_v_granularity_t {
  INTFA_V_PER_TENSOR = 0,
  INTFA_V_PER_CHANNEL = 1,
  INTFA_V_PER_BLOCK = 2
} intfa_v_granularity_t;
/* K's scales (intfa::KScaleGranularity): one per key, or one per block of 64 keys of a (batch,
   head), which the attention kernel folds into the softmax (faster, a little less accurate). */
typedef enum intfa_k_granularity_t {
  INTFA_K_PER_TOKEN = 0,
  INTFA_K_PER_BLOCK = 1
} intfa_k_granularity_t;
/* The rotation of Q and K before they are quantized (intfa::QKRotation): none, every head, or the
   KV heads whose keys have outlier channels (decided on the device; the default). Stored in the
   `int rotate` members below. */
typedef enum intfa_rotation_t {
  INTFA_ROTATE_OFF = 0,
  INTFA_ROTATE_ON = 1,
  INTFA_ROTATE_AUTO = 2
} intfa_rotation_t;

/* A device tensor viewed as [batch, heads, seq, head_dim]; strides in elements. */
typedef struct intfa_tensor_t {
  void* data;
  intfa_dtype_t dtype;
  int64_t strides[4];
} intfa_tensor_t;

typedef struct intfa_shape_t {
  int batch, heads, seq, head_dim;
} intfa_shape_t;

typedef struct intfa_problem_t {
  int batch, heads_q, heads_kv, seq_q, seq_kv, head_dim;
  int causal;           /* 0 or 1; bottom-right aligned */
  intfa_variant_t variant;
  int qk_bits;          /* 8 or 4 */
} intfa_problem_t;

typedef struct intfa_attention_tensors_t {
  intfa_tensor_t q, k, v, out;
  const float* q_scale;
  const float* k_scale;
  const float* v_scale;
  float* lse; /* optional */
} intfa_attention_tensors_t;

typedef struct intfa_options_t {
  double softmax_scale; /* 0: 1/sqrt(head_dim) */
  intfa_p_encoding_t p_encoding;
  intfa_p_scale_t p_scale;
  intfa_v_granularity_t v_granularity;
  /* Tile config; all four 0 means: tuning database, else heuristic. warps = 12 or 16, or 8 with
     block_m = 64, selects the Hopper kernel (sm_90a; intfa::KernelPath::kWgmma), others the
     portable one. */
  int block_m, block_n, warps, stages;
  /* intfa::AttentionOptions::k_granularity: must match how K was quantized
     (intfa_quantize_options_t::k_granularity); INTFA_K_PER_BLOCK takes 8-bit Q.K and dense calls
     only. New in 0.2.0 (added last: the fields above keep their offsets, but a program built
     against the 0.1 header leaves it uninitialised, hence the new SONAME libintfa.so.0.2). Fill
     options with intfa_default_options first. */
  intfa_k_granularity_t k_granularity;
} intfa_options_t;

/* Varlen (packed) batches: intfa::VarlenLayout (include/intfa/attention.hpp). Device int32
   prefix sums [batch + 1]; the views of Q, K, 16-bit V and out span the total rows. */
typedef struct intfa_varlen_t {
  const int* cu_seqlens_q;
  const int* cu_seqlens_kv;
  int total_q, total_kv;
} intfa_varlen_t;

/* The defaults of intfa::AttentionOptions. */
void intfa_default_options(intfa_options_t* options) INTFA_NOEXCEPT;

/* How intfa_attention_forward_16bit quantizes its 16-bit Q and K (intfa::AttentionOptions'
   smooth_k and rotate_qk): K smoothing (K minus its channel means over a sample of keys; the LSE
   stays that of the original scores) and the rotation of Q and K (incoherent processing). Neither
   changes the attention in exact arithmetic; intfa_default_qk_transforms gives the defaults. */
typedef struct intfa_qk_transforms_t {
  int smooth_k; /* 0 or 1 */
  int rotate;   /* an intfa_rotation_t */
} intfa_qk_transforms_t;
void intfa_default_qk_transforms(intfa_qk_transforms_t* transforms) INTFA_NOEXCEPT;

/* 16-bit inputs of intfa_attention_forward_16bit (intfa::AttentionInputs). */
typedef struct intfa_attention_inputs_t {
  intfa_tensor_t q, k, v, out; /* INTFA_F16 or INTFA_BF16 */
  float* lse;                  /* optional: the LSE of the original scores */
} intfa_attention_inputs_t;

intfa_status_t intfa_attention_forward(const intfa_problem_t* problem,
                                       const intfa_attention_tensors_t* tensors, CUstream stream,
                                       const intfa_options_t* options) INTFA_NOEXCEPT;
/* attention_forward over packed sequences: problem->batch sequences, seq_q/seq_kv the longest. */
intfa_status_t intfa_attention_forward_varlen(const intfa_problem_t* problem,
                                              const intfa_attention_tensors_t* tensors,
                                              const intfa_varlen_t* varlen, CUstream stream,
                                              const intfa_options_t* options) INTFA_NOEXCEPT;
intfa_status_t intfa_quantize_qk(const intfa_shape_t* shape, const intfa_tensor_t* input,
                                 const intfa_tensor_t* output, float* scales, int bits,
                                 CUstream stream) INTFA_NOEXCEPT;
/* K with smoothing (intfa::QuantizeOptions::smooth_k_channel_mean): `channel_mean` receives the
   [batch][heads][head_dim] channel means subtracted from K before quantizing (device floats,
   4-byte aligned); attention outputs are unchanged, LSE becomes that of the smoothed scores. */
intfa_status_t intfa_quantize_k_smoothed(const intfa_shape_t* shape, const intfa_tensor_t* input,
                                         const intfa_tensor_t* output, float* scales, int bits,
                                         float* channel_mean, CUstream stream) INTFA_NOEXCEPT;
/* intfa::QuantizeOptions (include/intfa/quantize.hpp): K smoothing's means (K), the LSE term of a
   smoothed K (Q: k_channel_mean and q_dot_k_mean, both or neither), the rotation (Q and K alike),
   K's scale granularity. Pointers NULL when unused; intfa_default_quantize_options fills bits = 8,
   k_granularity = INTFA_K_PER_TOKEN and the rest zero. */
typedef struct intfa_quantize_options_t {
  int bits;                     /* 8 or 4 */
  float* smooth_k_channel_mean; /* K: receives [batch][heads][head_dim] channel means */
  const float* k_channel_mean;  /* Q: K's means, [batch][k_channel_mean_heads][head_dim] */
  float* q_dot_k_mean;          /* Q: receives q . mean per row, [batch][heads][seq] */
  int k_channel_mean_heads;     /* Q: K's heads (0: the shape's heads) */
  int rotate; /* INTFA_ROTATE_OFF or INTFA_ROTATE_ON (auto: the C++ API, which takes the heads) */
  /* K only, 8 bits, dense: INTFA_K_PER_BLOCK writes one scale per 64 rows of a (batch, head),
     `scales` then of intfa_k_scale_count floats. New in 0.2.0: the struct grew by 8 bytes, so a
     program built against the 0.1 header must be rebuilt (SONAME libintfa.so.0.2). */
  intfa_k_granularity_t k_granularity;
} intfa_quantize_options_t;
void intfa_default_quantize_options(intfa_quantize_options_t* options) INTFA_NOEXCEPT;
intfa_status_t intfa_quantize_qk_with_options(const intfa_shape_t* shape,
                                              const intfa_tensor_t* input,
                                              const intfa_tensor_t* output, float* scales,
                                              const intfa_quantize_options_t* options,
                                              CUstream stream) INTFA_NOEXCEPT;
intfa_status_t intfa_quantize_v(const intfa_shape_t* shape, const intfa_tensor_t* input,
                                void* output, float* scales, intfa_v_granularity_t granularity,
                                CUstream stream) INTFA_NOEXCEPT;

/* intfa_attention_forward(_varlen) over a smoothed K (intfa::AttentionTensors::q_dot_k_mean):
   `q_dot_k_mean` is what Q's intfa_quantize_qk_with_options wrote, and the LSE adds
   softmax_scale times it, so it stays the LSE of the original scores. `varlen` NULL: dense. */
intfa_status_t intfa_attention_forward_smoothed_k(const intfa_problem_t* problem,
                                                  const intfa_attention_tensors_t* tensors,
                                                  const float* q_dot_k_mean,
                                                  const intfa_varlen_t* varlen, CUstream stream,
                                                  const intfa_options_t* options) INTFA_NOEXCEPT;

/* intfa::attention_workspace_bytes and intfa::attention_forward_16bit: 16-bit Q, K, V quantized
   into `workspace` (256-byte aligned device memory of at least `bytes`) and attended, all on
   `stream`. `varlen` NULL: a dense batch. `options` NULL: intfa_default_options;
   `transforms` NULL: intfa_default_qk_transforms. problem->head_dim may be any multiple of 8 up
   to 256 (the next of the 64, 128 and 256 kernels serves it, reading the missing channels as
   zeros; intfa::AttentionProblem::head_dim). */
intfa_status_t intfa_attention_workspace_bytes(const intfa_problem_t* problem,
                                               const intfa_varlen_t* varlen,
                                               size_t* bytes) INTFA_NOEXCEPT;
intfa_status_t intfa_attention_forward_16bit(
    const intfa_problem_t* problem, const intfa_attention_inputs_t* inputs,
    const intfa_varlen_t* varlen, void* workspace, size_t workspace_bytes, CUstream stream,
    const intfa_options_t* options, const intfa_qk_transforms_t* transforms) INTFA_NOEXCEPT;

/* intfa::quantize_v_varlen: packed V [1, heads_kv, total_kv, head_dim] -> the INT8 V layout of
   shape {batch (sequences), heads_kv, longest sequence, head_dim}. */
intfa_status_t intfa_quantize_v_varlen(const intfa_shape_t* shape, const intfa_tensor_t* input,
                                       int total_kv, const int* cu_seqlens_kv, void* output,
                                       float* scales, intfa_v_granularity_t granularity,
                                       CUstream stream) INTFA_NOEXCEPT;

/* The INT8 V layout (intfa::v_padded_seq, ...). Out-of-range input (batch or heads_kv outside
   [1, 65535], seq_kv outside [1, 2^28], a head dim other than 64, 128 or 256, an unknown
   granularity, a null result pointer) is INTFA_INVALID_ARGUMENT naming the parameter. */
intfa_status_t intfa_v_padded_seq_checked(int seq_kv, int* padded_seq) INTFA_NOEXCEPT;
intfa_status_t intfa_v_int8_bytes_checked(int batch, int heads_kv, int seq_kv, int head_dim,
                                          size_t* bytes) INTFA_NOEXCEPT;
intfa_status_t intfa_v_scale_count_checked(intfa_v_granularity_t granularity, int batch,
                                           int heads_kv, int seq_kv, int head_dim,
                                           size_t* count) INTFA_NOEXCEPT;
/* Fills `view` with the INT8 V layout's strides for `data`. */
intfa_status_t intfa_v_int8_view_checked(void* data, int batch, int heads_kv, int seq_kv,
                                         int head_dim, intfa_tensor_t* view) INTFA_NOEXCEPT;

/* The same, with the signatures (and ABI) of intfa 0.1.0: out-of-range input gives -1, 0, or a
   view with a null data pointer and zero strides, and intfa_last_error() says why. */
int intfa_v_padded_seq(int seq_kv) INTFA_NOEXCEPT;
size_t intfa_v_int8_bytes(int batch, int heads_kv, int seq_kv, int head_dim) INTFA_NOEXCEPT;
size_t intfa_v_scale_count(intfa_v_granularity_t granularity, int batch, int heads_kv, int seq_kv,
                           int head_dim) INTFA_NOEXCEPT;
void intfa_v_int8_view(void* data, int batch, int heads_kv, int seq_kv, int head_dim,
                       intfa_tensor_t* view) INTFA_NOEXCEPT;

/* K's scales (intfa::k_scale_count): batch * heads_kv * seq_kv floats per token, batch * heads_kv
   * ceil(seq_kv / 64) per block. Out-of-range input (as for the V layout's helpers, or an unknown
   granularity) is INTFA_INVALID_ARGUMENT naming the parameter; intfa_k_scale_count then gives 0
   and intfa_last_error() says why. */
intfa_status_t intfa_k_scale_count_checked(intfa_k_granularity_t granularity, int batch,
                                           int heads_kv, int seq_kv, size_t* count) INTFA_NOEXCEPT;
size_t intfa_k_scale_count(intfa_k_granularity_t granularity, int batch, int heads_kv,
                           int seq_kv) INTFA_NOEXCEPT;

/* intfa::precompile (include/intfa/precompile.hpp) for one problem: compiles now, into the kernel
   cache, the kernels intfa_attention_forward_16bit of `problem` with `dtype` inputs (INTFA_F16 or
   INTFA_BF16), `options` (NULL: the defaults; its tile config is not used: the heuristic's) and
   the default Q/K transforms will launch (the quantize kernels and the attention kernel), for
   `arch` ("sm_90a", ...; NULL or "": INTFA_ARCH, else the GPU's own; naming one needs no GPU).
   `kernels` and `compiled_now` (each may be NULL) receive how many kernels that is and how many
   NVRTC compiled in this call (the others were cached). */
intfa_status_t intfa_precompile(const intfa_problem_t* problem, intfa_dtype_t dtype,
                                const intfa_options_t* options, const char* arch, size_t* kernels,
                                size_t* compiled_now) INTFA_NOEXCEPT;

/* ---- The paged INT8/INT4 KV cache (include/intfa/paged.hpp, templates/decode/README.md) ---- */

/* One layer's cache: intfa::PagedKVCache. k_data, v_data [num_pages][heads_kv][page_size][head_dim
   * bits / 8] bytes; k_scale, v_scale [num_pages][heads_kv][page_size][1 FP32 (INT8) or
   head_dim / 32 FP16 (INT4)]; k_offset optional [heads_kv][head_dim] FP32 K smoothing offsets. */
typedef struct intfa_paged_cache_t {
  int num_pages, page_size, heads_kv, head_dim, bits;
  void* k_data;
  void* v_data;
  void* k_scale;
  void* v_scale;
  const float* k_offset;
} intfa_paged_cache_t;

typedef struct intfa_paged_decode_problem_t {
  int batch, q_len, heads_q, max_pages, max_seq_len;
  int causal; /* 0 or 1; bottom-right aligned */
} intfa_paged_decode_problem_t;

/* q, out: [batch, heads_q, q_len, head_dim] views (strides in elements); lse optional
   [batch][q_len][heads_q]; block_table device int32 [batch][max_pages]; seq_lens device int32
   [batch]; workspace of intfa_paged_decode_workspace_bytes bytes (none with one split). */
typedef struct intfa_paged_decode_tensors_t {
  intfa_tensor_t q, out;
  float* lse;
  const int* block_table;
  const int* seq_lens;
  void* workspace;
  size_t workspace_bytes;
} intfa_paged_decode_tensors_t;

/* intfa::PagedDecodeOptions; zeros are the defaults (1/sqrt(head_dim), the heuristic's splits and
   tile config). */
typedef struct intfa_paged_decode_options_t {
  double softmax_scale;
  int num_splits;
  int block_rows, stage_tokens, stages;
} intfa_paged_decode_options_t;

/* intfa::PagedPrefillProblem: packed queries of `batch` sequences against their cached K/V.
   max_q_len, max_seq_len and kv_tokens (the sum of seq_lens) are upper bounds, never read back
   from the device: the offsets and lengths must agree with them (query_start_loc from 0 to
   total_q, each seq_lens[b] at least its sequence's query count and at most max_seq_len, their
   sum at most kv_tokens: keys past it are not gathered, and the attention of their sequences is
   wrong). Unlike the C++ struct's default, a zeroed struct is not causal. */
typedef struct intfa_paged_prefill_problem_t {
  int batch, heads_q, total_q, max_q_len, max_pages, max_seq_len;
  long long kv_tokens;
  int causal; /* 0 or 1; bottom-right aligned */
} intfa_paged_prefill_problem_t;

/* q, out: [1, heads_q, total_q, head_dim] views (a [total_q, heads_q, head_dim] tensor: strides
   {0, head_dim, heads_q * head_dim, 1}); lse optional [heads_q][total_q]; query_start_loc device
   int32 [batch + 1] (0 .. total_q); block_table device int32 [batch][max_pages]; seq_lens device
   int32 [batch] (each sequence's cached tokens, its new ones appended first); workspace of
   intfa_paged_prefill_workspace_bytes bytes, 256-byte aligned. */
typedef struct intfa_paged_prefill_tensors_t {
  intfa_tensor_t q, out;
  float* lse;
  const int* query_start_loc;
  const int* block_table;
  const int* seq_lens;
  void* workspace;
  size_t workspace_bytes;
} intfa_paged_prefill_tensors_t;

/* intfa::PagedPrefillOptions; zero is the default (1/sqrt(head_dim)). */
typedef struct intfa_paged_prefill_options_t {
  double softmax_scale;
} intfa_paged_prefill_options_t;

/* A partial attention state: values [batch, heads, seq, head_dim] and its LSE with element strides
   {batch, heads, seq} (intfa::AttentionState). */
typedef struct intfa_attention_state_t {
  intfa_tensor_t values;
  float* lse;
  int64_t lse_strides[3];
} intfa_attention_state_t;

/* Bytes of k_data (= v_data) and of k_scale (= v_scale); either result pointer may be NULL. */
intfa_status_t intfa_paged_cache_bytes(const intfa_paged_cache_t* cache, size_t* data_bytes,
                                       size_t* scale_bytes) INTFA_NOEXCEPT;
/* k, v: [1, heads_kv, tokens, head_dim] views of the new rows; slot_mapping device int32 [tokens],
   negative slots skipped. */
intfa_status_t intfa_paged_append(const intfa_paged_cache_t* cache, const intfa_tensor_t* k,
                                  const intfa_tensor_t* v, const int* slot_mapping, int tokens,
                                  CUstream stream) INTFA_NOEXCEPT;
/* options may be NULL (the defaults). */
intfa_status_t intfa_paged_decode_splits(const intfa_paged_cache_t* cache,
                                         const intfa_paged_decode_problem_t* problem,
                                         const intfa_paged_decode_options_t* options,
                                         int* splits) INTFA_NOEXCEPT;
intfa_status_t intfa_paged_decode_workspace_bytes(const intfa_paged_cache_t* cache,
                                                  const intfa_paged_decode_problem_t* problem,
                                                  const intfa_paged_decode_options_t* options,
                                                  size_t* bytes) INTFA_NOEXCEPT;
intfa_status_t intfa_paged_decode(const intfa_paged_cache_t* cache,
                                  const intfa_paged_decode_problem_t* problem,
                                  const intfa_paged_decode_tensors_t* tensors, CUstream stream,
                                  const intfa_paged_decode_options_t* options) INTFA_NOEXCEPT;
intfa_status_t intfa_paged_prefill_workspace_bytes(const intfa_paged_cache_t* cache,
                                                   const intfa_paged_prefill_problem_t* problem,
                                                   size_t* bytes) INTFA_NOEXCEPT;
/* intfa::paged_prefill (chunked prefill over the cache, decode rows beside it); options may be
   NULL (the defaults). */
intfa_status_t intfa_paged_prefill(const intfa_paged_cache_t* cache,
                                   const intfa_paged_prefill_problem_t* problem,
                                   const intfa_paged_prefill_tensors_t* tensors, CUstream stream,
                                   const intfa_paged_prefill_options_t* options) INTFA_NOEXCEPT;
/* intfa::precompile_paged: the family's kernels for the cache's head_dim and bits with `dtype`
   queries and new K/V (INTFA_F16 or INTFA_BF16), for `arch` (NULL or "": INTFA_ARCH, else the
   GPU's own). Only head_dim and bits of `cache` are read. */
intfa_status_t intfa_paged_precompile(const intfa_paged_cache_t* cache, intfa_dtype_t dtype,
                                      const char* arch, size_t* kernels,
                                      size_t* compiled_now) INTFA_NOEXCEPT;
/* intfa::merge_states: out = the LSE-weighted merge of a and b (issue 29); out may be a or b (in
   place, same strides); out->lse may be NULL. */
intfa_status_t intfa_merge_states(const intfa_shape_t* shape, const intfa_attention_state_t* a,
                                  const intfa_attention_state_t* b,
                                  const intfa_attention_state_t* out,
                                  CUstream stream) INTFA_NOEXCEPT;

/* This thread's message for the last failed call ("" when none). */
const char* intfa_last_error(void) INTFA_NOEXCEPT;
const char* intfa_status_string(intfa_status_t status) INTFA_NOEXCEPT;
const char* intfa_version(void) INTFA_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* INTFA_INTFA_H_ */
