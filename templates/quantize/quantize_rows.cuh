// Per-token quantization of Q or K: one scale per row of head_dim values (Algorithm 1's S_Q, S_K).
// Each thread owns 8 consecutive elements (one 16-byte load); the HeadDim / 8 threads of a row
// reduce max|x| with shuffles, so the kernel reads each input byte once and writes each output
// byte once. Before the row is quantized, K may be smoothed (SmoothK: minus its channel means),
// and Q and K may be rotated (Rotate: every row, or with kAuto those of the heads channel_mean
// flagged; rotation.h, with shuffles between the row's lanes); Q of a
// smoothed K writes q . mean per row (DotKMean), the term the attention kernel adds back to the
// LSE. The order is the CPU model's (tests/reference/quantized_model.cpp): subtract, rotate,
// quantize; the dot product takes the original row.
//
// quantize_row_blocks: K with one scale per block of kKTokenBlock (64) rows of a (batch, head),
// for the attention kernels' per-block K (KScaleGranularity::kPerBlock).
#pragma once

#include "common/grid_dependency.cuh"
#include "common/kernel_enums.h"
#include "common/numeric.cuh"
#include "quantize/quantize_params.h"
#include "quantize/rotate_row.cuh"

namespace intfa {
namespace kernels {

template <int HeadDim, ElementType InputType, int Bits, bool SmoothK, bool DotKMean, QKRotation Rotate>
struct QuantizeRowsConfig {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static_assert(Bits == 8 || Bits == 4, "8 or 4 bits");
  static_assert(!(SmoothK && DotKMean), "K is smoothed, Q dotted with K's mean: not both");
  static constexpr int kThreadsPerRow = HeadDim / 8;
  static constexpr int kThreads = 128;
  static constexpr int kRowsPerBlock = kThreads / kThreadsPerRow;
  static constexpr float kRange = Bits == 8 ? 127.0f : 7.0f;
};

// Where one lane's 8 channels of a row are: the row of the flattened [batch, heads, seq] rows (or
// past them: then the lane takes part in its row's shuffles with zeros and stores nothing).
struct RowChunk {
  bool active;
  u32 head_index;  // batch * heads + head
  int n, h, b;
  int channel;
};

__device__ __forceinline__ RowChunk row_chunk(const QuantizeRowsParams& params, i64 row,
                                              int lane_in_row) {
  const i64 total_rows = static_cast<i64>(params.batch) * params.heads * params.seq;
  RowChunk chunk;
  chunk.active = row < total_rows;
  // One 64-bit division: (batch, head) as one index below 2^32 (both at most 65535), then 32-bit.
  chunk.head_index = chunk.active ? static_cast<u32>(row / params.seq) : 0u;
  chunk.n =
      chunk.active ? static_cast<int>(row - static_cast<i64>(chunk.head_index) * params.seq) : 0;
  chunk.h = static_cast<int>(chunk.head_index % static_cast<u32>(params.heads));
  chunk.b = static_cast<int>(chunk.head_index / static_cast<u32>(params.heads));
  chunk.channel = lane_in_row * 8;
  return chunk;
}

// The lane's 16-byte load of its chunk (zeros past the rows and past params.channels).
__device__ __forceinline__ uint4 load_row_chunk(const QuantizeRowsParams& params,
                                                const RowChunk& chunk) {
  if (!chunk.active || chunk.channel >= params.channels) return make_uint4(0, 0, 0, 0);
  const u16* input = static_cast<const u16*>(params.input) + chunk.b * params.input_batch_stride +
                     chunk.h * params.input_head_stride + chunk.n * params.input_row_stride +
                     chunk.channel;
  return *reinterpret_cast<const uint4*>(input);
}

// Whether the chunk's row is rotated under kAuto: its head's flag (K reads its own head's, a query
// head its KV head's). A load whose latency would sit between a row's load and its rotation:
// callers issue it with the row's load (the row's load in flight first). K's rows index the flags
// as their scales (no division: the two divisions of a query head's index cost K's rows 3.5 us of
// 33 at d=128 1k, H200).
template <QKRotation Rotate>
__device__ __forceinline__ bool rotates_row(const QuantizeRowsParams& params,
                                            const RowChunk& chunk) {
  if (Rotate != QKRotation::kAuto || !chunk.active) return false;
  if (params.heads == params.channel_mean_heads) return params.rotated_heads[chunk.head_index] != 0;
  const int group = params.heads / params.channel_mean_heads;
  return params.rotated_heads[static_cast<i64>(chunk.b) * params.channel_mean_heads +
                              chunk.h / group] != 0;
}

// Everything after smoothing and q . mean: the rotation (`rotates`: rotates_row's answer under
// kAuto), the row's scale, the stores. Every lane of the warp calls it together (the row
// reductions are shuffles).
template <int HeadDim, ElementType InputType, int Bits, bool SmoothK, bool DotKMean, QKRotation Rotate>
__device__ __forceinline__ void finish_row_chunk(const QuantizeRowsParams& params,
                                                 const RowChunk& chunk, float (&values)[8],
                                                 float dot_k_mean, int lane_in_row,
                                                 bool rotates) {
  using Config = QuantizeRowsConfig<HeadDim, InputType, Bits, SmoothK, DotKMean, Rotate>;
  if (DotKMean) dot_k_mean = row_sum<Config::kThreadsPerRow>(dot_k_mean);
  rotate_row_as<Rotate, Config::kThreadsPerRow>(values, lane_in_row, rotates);

  const float amax = row_max_abs<Config::kThreadsPerRow>(values);
  if (!chunk.active) return;

  const RowScale row_scale_of_row = row_scale(amax, Config::kRange);
  const float scale = row_scale_of_row.scale;
  u32 quantized[8];
  quantize_8(quantized, values, row_scale_of_row.inverse, static_cast<int>(Config::kRange),
             row_scale_of_row.clamps);

  u8* output = static_cast<u8*>(params.output) + chunk.b * params.output_batch_stride +
               chunk.h * params.output_head_stride + chunk.n * params.output_row_stride;
  if (Bits == 8) {
    store_int8x8(output + chunk.channel, quantized);
  } else {
    *reinterpret_cast<u32*>(output + chunk.channel / 2) = pack_int4x8(quantized);
  }
  if (lane_in_row == 0) {
    const i64 row_index = static_cast<i64>(chunk.head_index) * params.seq + chunk.n;
    params.scales[row_index] = scale;
    if (DotKMean) params.q_dot_k_mean[row_index] = dot_k_mean;
  }
}

// Everything after the load: smoothing or q . mean (the means read here), then finish_row_chunk.
template <int HeadDim, ElementType InputType, int Bits, bool SmoothK, bool DotKMean, QKRotation Rotate>
__device__ __forceinline__ void quantize_row_chunk(const QuantizeRowsParams& params,
                                                   const RowChunk& chunk, uint4 raw,
                                                   int lane_in_row, bool rotates) {
  float values[8];
  float dot_k_mean = 0.0f;  // DotKMean: this lane's part of q . mean
  unpack_8_values<InputType>(values, raw);
  if ((SmoothK || DotKMean) && chunk.active) {
    // GQA: query head h reads the mean of KV head h / (heads / heads_kv); K reads its own.
    const i64 mean_index = SmoothK ? static_cast<i64>(chunk.head_index)
                                   : static_cast<i64>(chunk.b) * params.channel_mean_heads +
                                         chunk.h / (params.heads / params.channel_mean_heads);
    const float* mean = params.channel_mean + mean_index * HeadDim + chunk.channel;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if (SmoothK) values[i] -= mean[i];
      if (DotKMean) dot_k_mean = fmaf(values[i], mean[i], dot_k_mean);
    }
  }
  finish_row_chunk<HeadDim, InputType, Bits, SmoothK, DotKMean, Rotate>(
      params, chunk, values, dot_k_mean, lane_in_row, rotates);
}

// The rows of block `block` (Config::kRowsPerBlock rows, Config::kThreads threads): the body of
// quantize_rows and of the K half of quantize_k_v_scale (quantize_k_v_scale.cuh).
template <int HeadDim, ElementType InputType, int Bits, bool SmoothK, bool DotKMean, QKRotation Rotate>
__device__ __forceinline__ void quantize_rows_block(const QuantizeRowsParams& params, u32 block) {
  using Config = QuantizeRowsConfig<HeadDim, InputType, Bits, SmoothK, DotKMean, Rotate>;
  const int lane_in_row = threadIdx.x % Config::kThreadsPerRow;
  const RowChunk chunk = row_chunk(
      params,
      static_cast<i64>(block) * Config::kRowsPerBlock + threadIdx.x / Config::kThreadsPerRow,
      lane_in_row);
  const uint4 raw = load_row_chunk(params, chunk);
  // The row's load is in flight before the means' addresses are worked out: this kernel is
  // bound by the latency of that one load, and ptxas otherwise issues it with the means' loads,
  // after their address arithmetic (H100: 134 against 104 us for K at d=128, N=4k, B=4, H=32).
  asm volatile("" ::: "memory");
  // Automatic rotation's decision in flight with the row (and the means).
  const bool rotates = rotates_row<Rotate>(params, chunk);
  quantize_row_chunk<HeadDim, InputType, Bits, SmoothK, DotKMean, Rotate>(params, chunk, raw,
                                                                          lane_in_row, rotates);
}

template <int HeadDim, ElementType InputType, int Bits, bool SmoothK, bool DotKMean, QKRotation Rotate>
__global__ void __launch_bounds__(128) quantize_rows(const QuantizeRowsParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
  quantize_rows_block<HeadDim, InputType, Bits, SmoothK, DotKMean, Rotate>(params, blockIdx.x);
}

// K with one scale per block of kKTokenBlock rows of one (batch, head): scale = max|x| / 127 over
// the block's rows that exist (x after smoothing and rotation, as quantize_rows), then every row
// quantized with it; scales[b][h][block] (k_scale_blocks(seq) per head). Grid (block, head,
// batch), kThreads threads: kRowsPerPass rows at a time, each row's HeadDim / 8 lanes 8 channels,
// every row of the block held in registers between the reduction and the stores.
template <int HeadDim, ElementType InputType, bool SmoothK, QKRotation Rotate>
struct QuantizeRowBlocksConfig {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static constexpr int kThreadsPerRow = HeadDim / 8;
  static constexpr int kThreads = 256;
  static constexpr int kRowsPerPass = kThreads / kThreadsPerRow;
  static constexpr int kPasses = kKTokenBlock / kRowsPerPass;
  static constexpr float kRange = 127.0f;
  static_assert(kPasses * kRowsPerPass == kKTokenBlock, "passes cover the block");
};

template <int HeadDim, ElementType InputType, bool SmoothK, QKRotation Rotate>
__global__ void __launch_bounds__(256) quantize_row_blocks(const QuantizeRowsParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
  using Config = QuantizeRowBlocksConfig<HeadDim, InputType, SmoothK, Rotate>;
  const int block = blockIdx.x;
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  const int lane_in_row = threadIdx.x % Config::kThreadsPerRow;
  const int row_in_pass = threadIdx.x / Config::kThreadsPerRow;
  const int channel = lane_in_row * 8;
  const i64 head_index = static_cast<i64>(b) * params.heads + h;
  const u16* input = static_cast<const u16*>(params.input) + b * params.input_batch_stride +
                     h * params.input_head_stride + channel;

  // Every load of the block in flight at once.
  uint4 raw[Config::kPasses];
#pragma unroll
  for (int pass = 0; pass < Config::kPasses; ++pass) {
    const int n = block * kKTokenBlock + pass * Config::kRowsPerPass + row_in_pass;
    raw[pass] = n < params.seq && channel < params.channels
                    ? *reinterpret_cast<const uint4*>(input + n * params.input_row_stride)
                    : make_uint4(0, 0, 0, 0);
  }
  float mean[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    mean[i] = SmoothK ? params.channel_mean[head_index * HeadDim + channel + i] : 0.0f;
  }
  // The block is one head's: its rows are rotated alike.
  const bool rotates = Rotate == QKRotation::kAuto && params.rotated_heads[head_index] != 0;
  float values[Config::kPasses][8];
  float amax = 0.0f;
#pragma unroll
  for (int pass = 0; pass < Config::kPasses; ++pass) {
    const int n = block * kKTokenBlock + pass * Config::kRowsPerPass + row_in_pass;
    unpack_8_values<InputType>(values[pass], raw[pass]);
    // A row past the end stays zero: it takes part in the rotation's shuffles, not in the max.
    if (SmoothK && n < params.seq) {
#pragma unroll
      for (int i = 0; i < 8; ++i) values[pass][i] -= mean[i];
    }
    rotate_row_as<Rotate, Config::kThreadsPerRow, true>(values[pass], lane_in_row, rotates);
#pragma unroll
    for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(values[pass][i]));
  }
  // The block's max: over the warp with shuffles, then over the warps in shared memory.
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, offset));
  }
  __shared__ float warp_max[Config::kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
#pragma unroll
  for (int warp = 0; warp < Config::kThreads / 32; ++warp) amax = fmaxf(amax, warp_max[warp]);

  const RowScale block_scale = row_scale(amax, Config::kRange);
  const float scale = block_scale.scale;
  const float inverse = block_scale.inverse;
  u8* output = static_cast<u8*>(params.output) + b * params.output_batch_stride +
               h * params.output_head_stride + channel;
#pragma unroll
  for (int pass = 0; pass < Config::kPasses; ++pass) {
    const int n = block * kKTokenBlock + pass * Config::kRowsPerPass + row_in_pass;
    if (n >= params.seq) continue;
    u32 quantized[8];
    quantize_8(quantized, values[pass], inverse, static_cast<int>(Config::kRange),
               block_scale.clamps);
    store_int8x8(output + n * params.output_row_stride, quantized);
  }
  if (threadIdx.x == 0) params.scales[head_index * k_scale_blocks(params.seq) + block] = scale;
}

}  // namespace kernels
}  // namespace intfa
