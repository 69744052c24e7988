// The epilogue both attention kernels share: a warp's output rows normalised by their sums,
// scaled by V's per-tensor or per-channel scales, rounded to the output type and stored, and the
// log-sum-exp when asked (README.md, "Online softmax over tiles": out and lse).
#pragma once

#include "attention/attention_params.h"
#include "attention/online_softmax.cuh"
#include "common/kernel_enums.h"
#include "common/numeric.cuh"
#include "common/types.h"

namespace intfa {
namespace kernels {

// A row's sum from the parts of the four lanes of its quad.
__device__ __forceinline__ float quad_sum(float lane_part) {
  float sum = lane_part + __shfl_xor_sync(0xFFFFFFFFu, lane_part, 1);
  return sum + __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
}

// What a row's outputs are multiplied by: 1 / l (0 for a row that saw no key) times V's
// per-tensor scale.
__device__ __forceinline__ float output_row_scale(float sum, float tensor_v_scale) {
  return (sum > 0.0f ? divide_rn(1.0f, sum) : 0.0f) * tensor_v_scale;
}

// The row's log-sum-exp, when asked, from its sum relative to `log2_reference` (the frame, or the
// exponent reference for half INT8, whose P is not scaled by R). With K smoothed, the scores the
// kernel saw are the original ones less softmax_scale * q . mean: adding that term back makes it
// the LSE of the original scores (README.md, "K smoothing").
template <class Config>
__device__ __forceinline__ void store_lse(const AttentionParams& params,
                                          const SequenceExtent& extent, int row, float sum,
                                          float log2_reference, LaneCoordinates coordinates) {
  if (params.lse != nullptr && coordinates.thread_in_group == 0) {
    const float p_range = Config::kFullInt8 ? Config::kPRange : 1.0f;
    float log2_sum = log2_reference + log2_approx(sum / p_range);
    if (params.q_dot_k_mean != nullptr) {
      log2_sum += params.scale_log2 * params.q_dot_k_mean[extent.q_scale0 + row];
    }
    params.lse[extent.q_scale0 + row] = sum > 0.0f ? log2_sum * kLn2 : negative_infinity();
  }
}

// Output columns 8 dt + 2 thread_in_group + {0, 1} of one row, normalised, scaled by V's channel
// scales and rounded to the output type, as one word.
template <class Config>
__device__ __forceinline__ u32 output_pair(const float (&o_tile)[4], int half, float row_scale,
                                           float2 channel_scale) {
  return pack_float2<Config::kOutputType>(o_tile[2 * half] * row_scale * channel_scale.x,
                                          o_tile[2 * half + 1] * row_scale * channel_scale.y);
}

// Normalises the output rows of one warp, applies V's per-tensor or per-channel scale, rounds to
// the output type and stores them, with the log-sum-exp when asked. `lane_sum` is this lane's
// part of each row's sum, relative to `log2_reference` (store_lse).
template <class Config>
__device__ __forceinline__ void store_output(
    const AttentionParams& params, const SequenceExtent& extent, int batch, int head_q, int head_kv,
    int warp_first_row, LaneCoordinates coordinates,
    const float (&o)[Config::kMTiles][Config::kOutputTiles][4],
    const float (&lane_sum)[Config::kMTiles][2],
    const float (&log2_reference)[Config::kMTiles][2]) {
  const i64 kv_index = static_cast<i64>(batch) * params.heads_kv + head_kv;
  const float* v_scale = params.v_scale;
  float tensor_v_scale = 1.0f;
  if (Config::kFullInt8 && Config::kVGranularity == VScaleGranularity::kPerTensor) {
    tensor_v_scale = v_scale[kv_index];
  }
  // Every scale is loaded before the first store: the compiler must assume that a store may
  // alias v_scale, so a load placed after one waits out its own memory latency, once per output
  // tile (measured: a quarter of the d=128 Hopper kernel's stall samples at N=1k).
  float2 channel_scale[Config::kOutputTiles];
#pragma unroll
  for (int dt = 0; dt < Config::kOutputTiles; ++dt) {
    channel_scale[dt] = make_float2(1.0f, 1.0f);
    if (Config::kFullInt8 && Config::kVGranularity == VScaleGranularity::kPerChannel) {
      channel_scale[dt] = *reinterpret_cast<const float2*>(
          v_scale + kv_index * Config::kHeadDim + dt * 8 + 2 * coordinates.thread_in_group);
    }
  }
  u8* const out_head = static_cast<u8*>(params.out) + batch * params.out_strides.batch +
                       head_q * params.out_strides.head + extent.q_row0 * params.out_strides.row;
#pragma unroll
  for (int mt = 0; mt < Config::kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float sum = quad_sum(lane_sum[mt][half]);
      const int row = warp_first_row + mt * 16 + coordinates.group + 8 * half;
      if (row >= extent.seq_q) continue;
      const float row_scale = output_row_scale(sum, tensor_v_scale);
      u8* const out_row = out_head + static_cast<i64>(row) * params.out_strides.row;
#pragma unroll
      for (int dt = 0; dt < Config::kOutputTiles; ++dt) {
        if (dt * 8 >= params.out_head_dim) break;  // channels the caller's head dim lacks
        const int channel = dt * 8 + 2 * coordinates.thread_in_group;
        *reinterpret_cast<u32*>(out_row + channel * 2) =
            output_pair<Config>(o[mt][dt], half, row_scale, channel_scale[dt]);
      }
      store_lse<Config>(params, extent, row, sum, log2_reference[mt][half], coordinates);
    }
  }
}

}  // namespace kernels
}  // namespace intfa
