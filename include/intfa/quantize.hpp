// Quantization of FP16/BF16 Q, K, V for intfa::attention_forward (JIT kernels, one pass each
// except per-tensor/per-channel V, which first reduces the maximum over the sequence).
#pragma once

#include <cuda.h>

#include "intfa/attention.hpp"
#include "intfa/types.hpp"

namespace intfa {

struct QuantizeOptions {
  int bits = 8;  // 8, or 4 (Q and K only: output kI4x2)
  // K smoothing (for K only): when not null, [batch][heads][head_dim] device floats that receive
  // the per-(batch, head) channel means of the input, taken over a sample of at most 256 evenly
  // spread keys, which are subtracted from every row before it is quantized. Attention outputs are
  // unchanged by it (softmax ignores any vector subtracted from all keys) while INT8 covers a
  // narrower range when K has channel offsets. The LSE stays that of the original scores when Q is
  // quantized with k_channel_mean and q_dot_k_mean below and attention_forward gets
  // AttentionTensors::q_dot_k_mean; else it is that of the smoothed scores (lower by
  // softmax_scale * q . mean per row). 4-byte aligned.
  float* smooth_k_channel_mean = nullptr;
  // Q of a smoothed K (for Q only; both or neither): K's channel means (the buffer K's quantize_qk
  // wrote as smooth_k_channel_mean, on this stream before: [batch][k_channel_mean_heads]
  // [head_dim]) and [batch][heads][seq] device floats (the scales' layout) that receive
  // q . mean per row, from the original 16-bit row, with the mean of its KV head (GQA: head h
  // reads h / (heads / k_channel_mean_heads)). 4-byte aligned.
  const float* k_channel_mean = nullptr;
  float* q_dot_k_mean = nullptr;
  int k_channel_mean_heads = 0;  // 0: the shape's heads; else a divisor of them
  // Incoherent processing: rows are multiplied by the orthogonal R = D H / sqrt(head_dim) (H the
  // Walsh-Hadamard matrix, D fixed random signs; templates/quantize/rotation.h) after smoothing,
  // before quantizing. Rotate Q and K alike, or neither: (q R)(k R)^T = q k^T, so attention is
  // unchanged, while channels much larger than the rest are spread over the whole row.
  bool rotate = false;
  // K only, 8 bits, dense: one scale per block of 64 rows of a (batch, head) (the largest |x| of
  // the block over 127), `scales` [batch][heads][k_scale_blocks(seq)]; rows past the sequence's
  // end do not count. For attention_forward with AttentionOptions::numerics.k_granularity per
  // block.
  KScaleGranularity k_granularity = KScaleGranularity::kPerToken;
};

// Q or K [batch, heads, seq, head_dim] (kF16/kBF16, 16-byte rows) -> `output` (kI8 or kI4x2, same
// logical shape, any 16-byte-row layout) and `scales` [batch][heads][seq]:
// scale = max|row| / R, q = round_half_even(x / scale) with R = 127 (or 7), x after K smoothing
// and the rotation when asked (K smoothing adds a short pass over the sampled keys first).
void quantize_qk(const TensorShape& shape, const TensorView& input, const TensorView& output,
                 float* scales, CUstream stream, const QuantizeOptions& options = {});

// V [batch, heads_kv, seq_kv, head_dim] (kF16/kBF16) -> `output` in the INT8 V layout
// (v_int8_bytes) and `scales` (v_scale_count floats) at `granularity`.
void quantize_v(const TensorShape& shape, const TensorView& input, void* output, float* scales,
                VScaleGranularity granularity, CUstream stream);

// Varlen V (VarlenLayout): `input` is packed, [1, heads_kv, total_kv, head_dim] (its batch stride
// unused), sequence b its rows cu_seqlens_kv[b] .. cu_seqlens_kv[b + 1]; `shape` is
// {batch (sequences), heads_kv, longest sequence, head_dim}. Writes the same INT8 V layout and
// scales as quantize_v of shape (each sequence zero-padded to v_padded_seq(shape.seq)), so
// sequence b quantizes exactly as quantize_v of that sequence alone would.
void quantize_v_varlen(const TensorShape& shape, const TensorView& input, int total_kv,
                       const int* cu_seqlens_kv, void* output, float* scales,
                       VScaleGranularity granularity, CUstream stream);

}  // namespace intfa
