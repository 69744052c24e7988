// Per-(batch, head) channel means of K over the sampled keys of quantize_params.h (at most
// kChannelMeanSamples rows, evenly spread), for K smoothing (quantize_rows with SmoothK subtracts
// them). One block per (batch, head), so the pass costs the same short time at any length: each
// thread sums 8 consecutive channels (one 16-byte load per row) over a strided subset of the
// samples, then the row phases are added pairwise through shared memory in a fixed order, so the
// result does not depend on scheduling. A thread's loads are all issued before its first add:
// the pass is one memory latency long, not one per few samples. The launch also zeroes
// params.zero (V's scale accumulators in attention_forward_16bit), so that they need no memset.
#pragma once

#include "common/grid_dependency.cuh"
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
  // The most samples one thread adds (kChannelMeanSamples rows over kRowPhases phases).
  static constexpr int kSamplesPerThread = (kChannelMeanSamples + kRowPhases - 1) / kRowPhases;
};

template <int HeadDim, ElementType InputType>
__global__ void __launch_bounds__(512) channel_mean(const ChannelMeanParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
  using Config = ChannelMeanConfig<HeadDim>;
  __shared__ float partial[Config::kRowPhases / 2][HeadDim];
  const int batch = blockIdx.x / params.heads;
  const int head = blockIdx.x % params.heads;
  const int lane_in_row = threadIdx.x % Config::kThreadsPerRow;
  const int phase = threadIdx.x / Config::kThreadsPerRow;
  const u16* input = static_cast<const u16*>(params.input) + batch * params.input_batch_stride +
                     head * params.input_head_stride + 8 * lane_in_row;
  const int count = channel_mean_sample_count(params.seq);

  uint4 raw[Config::kSamplesPerThread];
#pragma unroll
  for (int i = 0; i < Config::kSamplesPerThread; ++i) {
    const int sample = phase + i * Config::kRowPhases;
    raw[i] = make_uint4(0, 0, 0, 0);  // channels past params.channels read as zeros
    if (sample < count && 8 * lane_in_row < params.channels) {
      const i64 row = channel_mean_sample_row(sample, count, params.seq);
      raw[i] = *reinterpret_cast<const uint4*>(input + row * params.input_row_stride);
    }
  }
  if (params.zero != nullptr) {
    for (i64 i = static_cast<i64>(blockIdx.x) * Config::kThreads + threadIdx.x;
         i < params.zero_count; i += static_cast<i64>(gridDim.x) * Config::kThreads) {
      params.zero[i] = 0.0f;
    }
  }
  // Added in sample order, as the samples' loop did.
  float sum[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) sum[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < Config::kSamplesPerThread; ++i) {
    if (phase + i * Config::kRowPhases >= count) break;
    float values[8];
    unpack_8_values<InputType>(values, raw[i]);
#pragma unroll
    for (int c = 0; c < 8; ++c) sum[c] += values[c];
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
