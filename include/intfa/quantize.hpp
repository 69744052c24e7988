// Quantization of FP16/BF16 Q, K, V for intfa::attention_forward (JIT kernels, one pass each
// except per-tensor/per-channel V, which first reduces the maximum over the sequence).
#pragma once

#include <cuda.h>

#include <vector>

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
  // K smoothing by means computed elsewhere (for K only; instead of smooth_k_channel_mean):
  // [batch][heads][head_dim] device floats subtracted from every row, read, not computed; no
  // mean pass runs. For K that is one shard of a longer sequence (context parallel): every shard
  // smoothed by the whole sequence's means, from k_channel_means of its sampled keys
  // (k_channel_mean_sample_rows), quantizes as quantize_qk of the whole sequence does. 4-byte
  // aligned.
  const float* smooth_k_given_mean = nullptr;
  // Q of a smoothed K (for Q only; both or neither): K's channel means (the buffer K's quantize_qk
  // wrote as smooth_k_channel_mean, on this stream before: [batch][k_channel_mean_heads]
  // [head_dim]) and [batch][heads][seq] device floats (the scales' layout) that receive
  // q . mean per row, from the original 16-bit row, with the mean of its KV head (GQA: head h
  // reads h / (heads / k_channel_mean_heads)). 4-byte aligned.
  const float* k_channel_mean = nullptr;
  float* q_dot_k_mean = nullptr;
  // 0: the shape's heads; else a divisor of them: the heads of K's per-head buffers that Q reads
  // (k_channel_mean, k_rotated_heads).
  int k_channel_mean_heads = 0;
  // Incoherent processing: rows are multiplied by the orthogonal R = D H / sqrt(head_dim) (H the
  // Walsh-Hadamard matrix, D fixed random signs; templates/quantize/rotation.h) after smoothing,
  // before quantizing. Rotate Q and K alike: (q R)(k R)^T = q k^T, so attention is unchanged,
  // while channels much larger than the rest are spread over the whole row. kOff: no row; kOn:
  // every row; kAuto: the rows of the heads whose keys have outlier channels, decided per
  // (batch, KV head) from the keys K smoothing samples (their largest channel's mean square
  // against the mean over all channels, less the mean when smoothed; templates/quantize/
  // quantize_params.h, rotates_channel_spread). K with kAuto writes the decisions into
  // rotated_heads (its channel-mean pass runs for them, with or without smoothing) or reads them
  // from k_rotated_heads; Q with kAuto reads K's from k_rotated_heads.
  QKRotation rotate = QKRotation::kOff;
  // K with kAuto: [batch][heads] device int32 that receive 1 where the head's rows are rotated,
  // else 0. Not with smooth_k_given_mean: a shard's decisions must be its whole sequence's (give
  // them in k_rotated_heads). For K only: Q given rotated_heads (without k_channel_mean, which
  // is refused) would decide from its own rows and disagree with K's; Q reads k_rotated_heads.
  // 4-byte aligned.
  int* rotated_heads = nullptr;
  // kAuto, decisions made elsewhere: [batch][k_channel_mean_heads] device int32 (K's
  // rotated_heads, written on this stream before); query head h follows KV head
  // h / (heads / k_channel_mean_heads). 4-byte aligned.
  const int* k_rotated_heads = nullptr;
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

// K smoothing's means alone (quantize_qk's first pass with smooth_k_channel_mean): `means`
// [batch][heads][head_dim] device floats (4-byte aligned) receive the channel means of `input`
// [batch, heads, seq, head_dim] (kF16/kBF16) over its sampled rows. With `rotated_heads`
// ([batch][heads] device int32) the pass also makes automatic rotation's decisions, as K's
// quantize_qk with QKRotation::kAuto would: for K smoothed by those means, or for K as given when
// `means` is null. A sequence's sampled rows gathered in order (k_channel_mean_sample_rows) give
// its decisions bit for bit, as they give its means.
void k_channel_means(const TensorShape& shape, const TensorView& input, float* means,
                     CUstream stream, int* rotated_heads = nullptr);

// The rows of a sequence of `seq` keys that K smoothing's means are taken over, in the order they
// are added (at most 256, evenly spread; all of them for a shorter sequence). Those rows of a
// longer sequence, gathered in this order into a sequence of their own, have the same means
// (bit for bit) as the longer one: how the shards of a sequence get its means.
std::vector<int> k_channel_mean_sample_rows(int seq);

// V [batch, heads_kv, seq_kv, head_dim] (kF16/kBF16) -> `output` in the INT8 V layout
// (v_int8_bytes) and `scales` (v_scale_count floats) at `granularity`.
void quantize_v(const TensorShape& shape, const TensorView& input, void* output, float* scales,
                VScaleGranularity granularity, CUstream stream);

// quantize_v's two passes apart, for per-tensor and per-channel scales (the maximum of |V| over
// the sequence, over 127): v_scales writes the scales of `input` (v_scale_count floats);
// quantize_v_with_scales quantizes `input` with the scales given. A scale of several inputs is
// the largest of theirs, so the shards of a sequence quantize as quantize_v of the whole does
// when each takes the elementwise maximum of all shards' v_scales (context parallel: an
// all-reduce). Per-block scales are each block's own: quantize_v computes them in its one pass.
void v_scales(const TensorShape& shape, const TensorView& input, float* scales,
              VScaleGranularity granularity, CUstream stream);
void quantize_v_with_scales(const TensorShape& shape, const TensorView& input, void* output,
                            const float* scales, VScaleGranularity granularity, CUstream stream);

// Varlen V (VarlenLayout): `input` is packed, [1, heads_kv, total_kv, head_dim] (its batch stride
// unused), sequence b its rows cu_seqlens_kv[b] .. cu_seqlens_kv[b + 1]; `shape` is
// {batch (sequences), heads_kv, longest sequence, head_dim}. Writes the same INT8 V layout and
// scales as quantize_v of shape (each sequence zero-padded to v_padded_seq(shape.seq)), so
// sequence b quantizes exactly as quantize_v of that sequence alone would.
void quantize_v_varlen(const TensorShape& shape, const TensorView& input, int total_kv,
                       const int* cu_seqlens_kv, void* output, float* scales,
                       VScaleGranularity granularity, CUstream stream);

}  // namespace intfa
