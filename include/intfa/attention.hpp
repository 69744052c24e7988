// INT8 attention forward: intfa::attention_forward and what it takes.
//
//   intfa::quantize_qk(...)   Q, K  -> INT8 + per-token scales          (include/intfa/quantize.hpp)
//   intfa::quantize_v(...)    V     -> INT8 in the kernel's V layout + scales
//   intfa::attention_forward(problem, tensors, stream, options)
//
// The kernels are generated for the problem's head dim, variant and options, compiled with NVRTC
// for the GPU of the current context on first use, cached on disk, and launched on `stream`.
// Numerics: templates/attention/README.md.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <optional>
#include <string>

#include "intfa/numerics.hpp"
#include "intfa/types.hpp"

namespace intfa {

struct AttentionProblem {
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;  // heads_q must be a multiple (GQA/MQA)
  int seq_q = 1;
  int seq_kv = 1;
  // 64, 128 or 256; attention_forward_16bit and attention_workspace_bytes also take any other
  // multiple of 8 up to 256, served by the next of those kernels, which reads the missing
  // channels as zeros and writes only the caller's (the default softmax scale stays
  // 1/sqrt(head_dim)).
  int head_dim = 128;
  // Bottom-right aligned when seq_q != seq_kv: query i sees keys j <= i + seq_kv - seq_q, as
  // FlashAttention >= 2.1 does. Rows that see no key output zeros (and LSE -inf).
  bool causal = false;
  Variant variant = Variant::kFullInt8;
  int qk_bits = 8;  // 8, or 4 for INT4 Q.K (q and k are then DType::kI4x2)
};

// Varlen (packed) batches, as FlashAttention's varlen API: sequence b is rows
// cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of the packed Q, out and LSE and rows
// cu_seqlens_kv[b] .. cu_seqlens_kv[b + 1] of the packed K (and 16-bit V). Then
// AttentionProblem::batch is the number of sequences and seq_q / seq_kv are the longest ones
// (they size the grid and INT8 V's padding); causal masking is per sequence, bottom-right aligned.
// The views of Q, K, 16-bit V and out are [1, heads, total rows, head_dim] (their batch stride is
// not used), the scales and the LSE [heads][total rows] (quantize_qk of the packed tensor writes
// exactly that), and INT8 V keeps its per-sequence layout: quantize_v_varlen writes it.
// A sequence may be empty. The offsets are device memory and are not read on the host: they must
// start at 0, never decrease, end at total_q / total_kv and step by at most seq_q / seq_kv.
struct VarlenLayout {
  const int* cu_seqlens_q = nullptr;   // device int32 [batch + 1]
  const int* cu_seqlens_kv = nullptr;  // device int32 [batch + 1]
  int total_q = 0;                     // cu_seqlens_q[batch]
  int total_kv = 0;                    // cu_seqlens_kv[batch]
  bool enabled() const { return cu_seqlens_q != nullptr || cu_seqlens_kv != nullptr; }
};

struct AttentionTensors {
  TensorView q;             // kI8 (or kI4x2), [batch, heads_q, seq_q, head_dim], 16-byte rows
  TensorView k;             // kI8 (or kI4x2), [batch, heads_kv, seq_kv, head_dim]
  // Full INT8: kI8 in the INT8 V layout (make it with v_int8_view; quantize_v writes it).
  // Half INT8: kF16/kBF16, [batch, heads_kv, seq_kv, head_dim], 16-byte rows.
  TensorView v;
  const float* q_scale = nullptr;  // [batch][heads_q][seq_q]
  // [batch][heads_kv][seq_kv]; with options.numerics.k_granularity per block
  // [batch][heads_kv][k_scale_blocks(seq_kv)] (quantize_qk with QuantizeOptions::k_granularity)
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;  // full INT8: v_scale_count(...) floats; unused for half INT8
  TensorView out;                  // kF16/kBF16, [batch, heads_q, seq_q, head_dim]
  float* lse = nullptr;            // optional: [batch][heads_q][seq_q] natural-log LSE
  VarlenLayout varlen;             // packed sequences when set (see VarlenLayout)
  // K smoothed (QuantizeOptions::smooth_k_channel_mean): q . (K's channel mean) per query row,
  // as quantize_qk of Q writes it (QuantizeOptions::q_dot_k_mean), in the layout of q_scale. The
  // LSE adds softmax_scale times it, and so stays the LSE of the original scores. null: the LSE
  // of the scores of q and k as given.
  const float* q_dot_k_mean = nullptr;
};

// Which attention kernel family runs a config.
//   kMmaSync: the portable kernel (warp-level mma.sync, cp.async), every arch and option.
//   kWgmma: the Hopper kernel (sm_90a: warpgroup MMAs, TMA, a producer warpgroup and
//     `warps / 4 - 1` consumer warpgroups of 64 rows each): full and half INT8 with 8-bit Q.K,
//     dense and packed batches, tensors TMA can describe (16-byte aligned bases and strides).
enum class KernelPath { kMmaSync, kWgmma };

// A tile configuration of the attention kernel (what the tuner chooses).
struct KernelConfig {
  int block_m = 0;
  int block_n = 0;
  int warps = 0;
  int stages = 0;
  KernelPath path = KernelPath::kMmaSync;
  std::string to_string() const;
  friend bool operator==(const KernelConfig& a, const KernelConfig& b) {
    return a.block_m == b.block_m && a.block_n == b.block_n && a.warps == b.warps &&
           a.stages == b.stages && a.path == b.path;
  }
  friend bool operator!=(const KernelConfig& a, const KernelConfig& b) { return !(a == b); }
};

// The path of a config given as four numbers (the C API, Python, `intfa --config M,N,W,S`):
// the Hopper kernel has a producer warpgroup and 1, 2 or 3 consumer warpgroups of 64 rows, so
// 8 warps with block_m = 64, or 12 or 16 warps; the portable kernel's 8 warps have 128 or 256
// rows.
KernelPath path_for_config(int block_m, int warps);

struct AttentionOptions {
  double softmax_scale = 0.0;  // 0: 1 / sqrt(head_dim)
  // How P and K's and V's scales are quantized (include/intfa/numerics.hpp lists the options and
  // their defaults); v_granularity and k_granularity must match how V and K were quantized
  // (quantize_v, QuantizeOptions::k_granularity).
  AttentionNumerics numerics;
  // How attention_forward_16bit (intfa.attention) quantizes its 16-bit Q and K; attention_forward
  // reads INT8 tensors quantized by the caller, who chooses these in QuantizeOptions. Neither
  // changes the attention in exact arithmetic, nor the meaning of the LSE (that of the original
  // scores); both narrow the range INT8 must cover (templates/attention/README.md, "K smoothing",
  // "Rotation"; the accuracy tables in bench/RESULTS.md, "Accuracy on the inputs real models
  // produce").
  // K smoothing: K minus its channel means (over a sample of keys) before it is quantized: keys
  // with per-channel offsets lose their extra error (4-sigma offsets: 2.7-3.0% -> 1.4% relative
  // L2), other inputs are unchanged; one short pass over the sampled keys.
  bool smooth_k = true;
  // Incoherent processing: Q and K rotated by one orthogonal (signed Walsh-Hadamard) matrix before
  // they are quantized, so that a few channels much larger than the rest (outlier channels) are
  // spread over the row: 4 channels 10x larger, 3.0-3.7% -> 1.3-1.5%. A few shuffles per value
  // in the quantize kernels. kAuto (the default) rotates the KV heads whose sampled keys have
  // outlier channels, and their query heads, decided on the device in K smoothing's mean pass
  // (which runs for it without smoothing too; QuantizeOptions::rotate says how): on inputs
  // without outlier channels (and with fewer than 16 keys) it rotates nothing, for about 1% of
  // the attention kernel's time (1-2% at 1k; the quantize passes' decision 2-6 us more;
  // bench/RESULTS.md, "Automatic rotation").
  QKRotation rotate_qk = QKRotation::kAuto;
  // Output element type comes from tensors.out.dtype. A config overrides the tuning database and
  // the heuristic (benchmarks, tuning).
  std::optional<KernelConfig> config;
};

// Validates everything before any launch (typed InvalidArgument naming the field and value, or
// Unsupported), compiles or fetches the kernel, and launches it on `stream`. Asynchronous.
void attention_forward(const AttentionProblem& problem, const AttentionTensors& tensors,
                       CUstream stream, const AttentionOptions& options = {});

// ---- 16-bit inputs: quantize and attend in one call ---------------------------------------------
//
// What `intfa.attention` runs: FP16/BF16 Q, K (and V for full INT8) are quantized into
// `workspace` (Q and K per token, K smoothed and Q and K rotated as options.smooth_k and
// options.rotate_qk say; V in the INT8 V layout with options.v_granularity) and attended to, all
// on `stream`, with no allocation and no host synchronisation (CUDA-graph safe). Half INT8 reads V
// as given. On sm_90a without the rotation the Hopper kernel quantizes Q itself (the same bits,
// one pass fewer; INTFA_QUANTIZE_Q_IN_KERNEL=0 keeps Q's pass), so the workspace's Q part is then
// not written.
struct AttentionInputs {
  TensorView q;    // kF16/kBF16, [batch, heads_q, seq_q, head_dim], 16-byte rows, any strides
  TensorView k;    // q's dtype, [batch, heads_kv, seq_kv, head_dim]
  TensorView v;    // q's dtype, k's shape
  TensorView out;  // kF16/kBF16, [batch, heads_q, seq_q, head_dim]
  float* lse = nullptr;  // optional: [batch][heads_q][seq_q] natural-log LSE of the original
                         // scores (K smoothing's term added back)
  // Packed sequences (as AttentionTensors::varlen): q, k, v and out are then
  // [1, heads, total rows, head_dim] and the LSE [heads_q][total_q]; K smoothing subtracts the
  // mean over (a sample of) all packed keys of a head.
  VarlenLayout varlen;
};

// The workspace attention_forward_16bit needs (bytes; 256-byte aligned device memory), whatever
// the options: for packed sequences only varlen's totals are read. Throws InvalidArgument for a
// problem attention_forward would refuse.
std::size_t attention_workspace_bytes(const AttentionProblem& problem,
                                      const VarlenLayout& varlen = {});

// Validates everything first (InvalidArgument naming "inputs.q.strides", "workspace_bytes", ...),
// then launches the quantize kernels (K smoothing's mean pass, K, V, and Q where the attention
// kernel does not quantize it) and the attention kernel on `stream`. Asynchronous. Full INT8 with
// V per tensor or per channel: K's rows and V's max pass share one launch, and K smoothing's mean
// pass zeroes V's scales (a memset does without smoothing): 4 launches with Q in the kernel.
void attention_forward_16bit(const AttentionProblem& problem, const AttentionInputs& inputs,
                             void* workspace, std::size_t workspace_bytes, CUstream stream,
                             const AttentionOptions& options = {});

// The INT8 V layout: [batch][heads_kv][head_dim][v_padded_seq(seq_kv)] bytes, tokens permuted in
// groups of 16 (templates/attention/README.md). Each throws InvalidArgument naming the parameter
// for what no problem can have: batch or heads_kv outside [1, 65535], seq_kv outside [1, 2^28],
// a head dim other than 64, 128 or 256.
int v_padded_seq(int seq_kv);
std::size_t v_int8_bytes(int batch, int heads_kv, int seq_kv, int head_dim);
TensorView v_int8_view(void* data, int batch, int heads_kv, int seq_kv, int head_dim);
std::size_t v_scale_count(VScaleGranularity granularity, int batch, int heads_kv, int seq_kv,
                          int head_dim);
// K's scales per (batch, head) at each granularity: seq_kv per token, ceil(seq_kv / 64) per block.
int k_scale_blocks(int seq_kv);
std::size_t k_scale_count(KScaleGranularity granularity, int batch, int heads_kv, int seq_kv);

// ---- The variant of the default numerics --------------------------------------------------------
//
// The variant intfa.attention runs by default (variant "auto"): full or half INT8 for `problem`
// (its head dim, lengths and causal flag; problem.variant is not read) on the GPU of the current
// context (`device`: that one), from a table per arch measured end to end: the fastest variant
// within the accuracy floor (1.5% relative L2), the more accurate where the two are within 2% of
// each other (attention::pick_variant; sm_90a: half INT8 at
// d = 64 and d = 256, and at d = 128 up to 2k tokens, 8k causal; full INT8 beyond and on other
// archs: src/spec/variant_policy.cpp). Rows that `intfa tune --variant-table` measured on this
// GPU (the tuning database, as the tile configs) come first: the row of the problem's head dim
// and causal flag nearest to its sequence bucket. `reason` names the row. The attention calls run
// the variant they are given (AttentionProblem::variant): this is how a caller asks for the
// table's. INTFA_LOG=1 prints each choice once. Throws InvalidArgument for a head dim no kernel
// serves (attention_forward_16bit's rule), NoDevice without a GPU.
struct AutoVariant {
  Variant variant = Variant::kFullInt8;
  std::string reason;
};
AutoVariant auto_variant(const AttentionProblem& problem);
AutoVariant auto_variant(const AttentionProblem& problem, CUdevice device);

}  // namespace intfa
