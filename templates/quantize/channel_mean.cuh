// Per-(batch, head) channel means of K over the sampled keys of quantize_params.h (at most
// kChannelMeanSamples rows, evenly spread), for K smoothing (quantize_rows with SmoothK subtracts
// them). One block per (batch, head), so the pass costs the same short time at any length: each
// thread sums 8 consecutive channels (one 16-byte load per row) over a strided subset of the
// samples, then the row phases are added pairwise through shared memory in a fixed order, so the
// result does not depend on scheduling.
#pragma once

#include "common/numeric.cuh"
#include "quantize/quantize_params.h"

namespace intfa {
namespace kernels {

template <int HeadDim>
struct ChannelMeanConfig {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static constexpr int kThreads = 512;
  static constexpr int kThreadsPerRow = HeadDim / 8;  // 8 channels per thread
  static constexpr int kRowPhases = kThreads / kThreadsPerRow;
};

template <int HeadDim, ElementType InputType>
__global__ void __launch_bounds__(512) channel_mean(const ChannelMeanParams params) {
  using Config = ChannelMeanConfig<HeadDim>;
  __shared__ float partial[Config::kRowPhases / 2][HeadDim];
  const int batch = blockIdx.x / params.heads;
  const int head = blockIdx.x % params.heads;
  const int lane_in_row = threadIdx.x % Config::kThreadsPerRow;
  const int phase = threadIdx.x / Config::kThreadsPerRow;
  const u16* input = static_cast<const u16*>(params.input) + batch * params.input_batch_stride +
                     head * params.input_head_stride + 8 * lane_in_row;
  const int count = channel_mean_sample_count(params.seq);

  float sum[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) sum[i] = 0.0f;
#pragma unroll 4
  for (int sample = phase; sample < count; sample += Config::kRowPhases) {
    const i64 row = channel_mean_sample_row(sample, count, params.seq);
    const uint4 raw = *reinterpret_cast<const uint4*>(input + row * params.input_row_stride);
    const u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      sum[2 * i] += element_to_float<InputType>(static_cast<u16>(words[i] & 0xFFFF));
      sum[2 * i + 1] += element_to_float<InputType>(static_cast<u16>(words[i] >> 16));
    }
  }
  // Pairwise: phases [active, 2 active) hand their sums to phases [0, active).
#pragma unroll
  for (int active = Config::kRowPhases / 2; active > 0; active /= 2) {
    if (phase >= active && phase < 2 * active) {
#pragma unroll
      for (int i = 0; i < 8; ++i) partial[phase - active][8 * lane_in_row + i] = sum[i];
    }
    __syncthreads();
    if (phase < active) {
#pragma unroll
      for (int i = 0; i < 8; ++i) sum[i] += partial[phase][8 * lane_in_row + i];
    }
    __syncthreads();
  }
  if (phase != 0) return;
  float* mean = params.mean + static_cast<i64>(blockIdx.x) * HeadDim + 8 * lane_in_row;
  const float samples = static_cast<float>(count);
#pragma unroll
  for (int i = 0; i < 8; ++i) mean[i] = divide_rn(sum[i], samples);
}

}  // namespace kernels
}  // namespace intfa
