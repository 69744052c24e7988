// Parameters of the quantize kernels, shared by host and device (plain data, by value).
#pragma once

#include "common/types.h"

namespace intfa {
namespace kernels {

// Q or K rows [batch, heads, seq, head_dim] (any strides in elements, unit stride on head_dim)
// -> INT8 (or two INT4 per byte) rows with the same logical shape, plus scale[b][h][n] (FP32,
// contiguous): scale = max|x| / R, q = clamp(round_even(x * (1 / scale)), -R, R), R = 127 or 7.
struct QuantizeRowsParams {
  const void* input;
  void* output;
  float* scales;
  // K smoothing's channel means, [batch][channel_mean_heads][head_dim]: subtracted from K's rows
  // before quantizing (SmoothK), or dotted with Q's original rows (DotKMean); else unused.
  const float* channel_mean;
  // DotKMean: q . mean of its KV head per row, [batch][heads][seq] (the scales' layout), which
  // the attention kernel adds back to the LSE (README.md, "K smoothing").
  float* q_dot_k_mean;
  i64 input_batch_stride, input_head_stride, input_row_stride;     // elements
  i64 output_batch_stride, output_head_stride, output_row_stride;  // bytes
  int batch, heads, seq;
  // Heads of channel_mean and rotated_heads: `heads` for K; heads_kv for Q (head h reads
  // h / (heads / heads_kv)).
  int channel_mean_heads;
  // QKRotation::kAuto: [batch][channel_mean_heads] ints, nonzero where the head's rows are
  // rotated (channel_mean's rotated_heads); else unused.
  const int* rotated_heads;
  // Channels the input has: head_dim, or fewer (below).
  int channels;
};

// What the `channels` member of these parameters means: the input rows have that many channels
// (a multiple of 8), read as if zeros followed them up to the kernel's head dim. Zero channels
// change no scale, no mean and no dot product, so the INT8 rows are the caller's zero-extended
// (attention_forward_16bit's head dims between the kernels': templates/attention/README.md).

// K smoothing's mean is taken over a sample of the keys, not all of them: softmax ignores any
// vector subtracted from every key of a (batch, head) (it shifts each query's scores by one
// constant), so the mean only has to be close enough to narrow K's range, and a sample costs one
// short pass whatever the length. kChannelMeanSamples keys, evenly spread (all of them when the
// sequence is shorter): sample i is row channel_mean_sample_row(i, count, seq).
constexpr int kChannelMeanSamples = 256;

INTFA_HOST_DEVICE constexpr int channel_mean_sample_count(int seq) {
  return seq < kChannelMeanSamples ? seq : kChannelMeanSamples;
}

INTFA_HOST_DEVICE constexpr int channel_mean_sample_row(int sample, int count, int seq) {
  return static_cast<int>(static_cast<i64>(sample) * seq / count);
}

// Automatic rotation's rule: a (batch, head) of K is rotated when its largest channel's mean
// square over the sampled keys is more than kRotationSpread^2 times the mean square over all its
// channels (`channels` of them). INT8 rows are quantized with a step set by each row's largest
// |x|: one or a few channels far larger than the rest make that step, and every value's error,
// about as many times larger, which the rotation removes by spreading those channels over the
// row (4 channels 10x larger: spread ~5, error 3.4% -> 1.5%). Keys of even spread measure
// 1.1-1.2 over 256 samples (up to ~1.6 over a few dozen), where rotating changes nothing but the
// time it takes; bench/channel_spread.py has the families' values. Fewer than
// kRotationMinSamples keys decide nothing (not rotated): over one to four N(0,1) keys some channel
// is that much larger by chance (a review's simulation: rotated 22-100% of the time).
constexpr float kRotationSpread = 2.0f;
constexpr int kRotationMinSamples = 16;

INTFA_HOST_DEVICE constexpr bool rotates_channel_spread(float largest_square_sum,
                                                        float square_sum, int channels,
                                                        int samples) {
  return samples >= kRotationMinSamples &&
         largest_square_sum * static_cast<float>(channels) >
             kRotationSpread * kRotationSpread * square_sum;
}

// K [batch, heads, seq, head_dim] (element strides, unit stride on head_dim) -> mean[b][h][d] in
// FP32 over the sampled rows above (K smoothing: subtracting it from every key narrows the range
// INT8 must cover, and changes no attention output).
struct ChannelMeanParams {
  const void* input;
  float* mean;
  i64 input_batch_stride, input_head_stride, input_row_stride;  // elements
  int batch, heads, seq;
  int channels;  // as QuantizeRowsParams::channels
  // Automatic rotation (QKRotation::kAuto): when not null, [batch][heads] ints that receive
  // whether each (batch, head) is rotated, from the channel spread of the same sampled keys
  // (rotates_channel_spread), less their mean when `smoothed` (the rows quantize_rows will
  // quantize). `mean` may then be null: the means are not written.
  int* rotated_heads;
  int smoothed;
  // Floats the launch also sets to zero (null: none): V's scale accumulators, which the next
  // launch of attention_forward_16bit (quantize_k_v_scale) takes the maximum into. A memset of its
  // own would be one more launch per call.
  float* zero;
  i64 zero_count;
};

// V [batch, heads, seq, head_dim] (element strides, unit stride on head_dim) -> INT8 in the
// attention kernel's V layout (templates/attention/README.md): [batch][heads][head_dim][padded_seq]
// with tokens permuted in groups of 16, padding zero.
struct QuantizeVParams {
  const void* input;
  i8* output;
  // Per tensor [batch][heads], per channel [batch][heads][head_dim], per block
  // [batch][heads][padded_seq / 64][head_dim]. Per tensor and per channel are filled by V's max
  // pass (quantize_v_scale, or quantize_k_v_scale's V half; over zeroed memory) before quantize_v
  // reads them.
  float* scales;
  i64 input_batch_stride, input_head_stride, input_row_stride;  // elements
  int batch, heads, seq, padded_seq;
  // Varlen: batch b is rows cu_seqlens[b] .. cu_seqlens[b + 1] of a packed input (its batch
  // stride unused), padded with zeros to padded_seq; null for [batch, heads, seq, head_dim].
  const int* cu_seqlens;
  int channels;  // as QuantizeRowsParams::channels
};

// K's row pass and V's max pass in one launch (quantize_k_v_scale.cuh): blocks [0, k_blocks) are
// quantize_rows' blocks over `k`, the others quantize_v_scale's over `v`, (block, head, batch) in
// that order from k_blocks on, v_blocks_per_head = padded_seq / kVTokenBlock.
struct QuantizeKVScaleParams {
  QuantizeRowsParams k;
  QuantizeVParams v;
  u32 k_blocks;
  int v_blocks_per_head;
};

// K's rows and all of V in one launch that reads each input byte once (quantize_k_v.cuh; sm_90a,
// full INT8, V per tensor or per channel, K per token). Grid (cluster rank, head, batch) with
// clusters of gridDim.x blocks: one cluster per (batch, head) of V, whose block r holds V's
// 64-token blocks [r * v_blocks_per_slice, (r + 1) * v_blocks_per_slice) in shared memory
// (kVTokenBlock * head_dim 16-bit values each) and quantizes K's rows of the same tokens. K has
// V's heads and batch: dense [batch, heads, seq], or with V's cu_seqlens the packed
// [1, heads, total] rows.
constexpr int kQuantizeKVThreads = 256;
// Blocks per SM the kernel's registers must allow (at most 64 per thread): its V slices are sized
// for four (quantize_family.hpp, kVSliceTargetBytes). Unbounded, the rotation's code took it to
// 67-79 registers, three blocks per SM, and cost the defaults 2-15% end to end (H200,
// bench/history/2026-11-29.md, third session).
constexpr int kQuantizeKVBlocksPerSm = 4;

struct QuantizeKVParams {
  QuantizeRowsParams k;
  QuantizeVParams v;
  int v_blocks_per_slice;
};

}  // namespace kernels
}  // namespace intfa
