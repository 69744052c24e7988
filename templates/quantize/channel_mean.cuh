// Per-(batch, head) channel means of K over the sampled keys of quantize_params.h (at most
// kChannelMeanSamples rows, evenly spread), for K smoothing (quantize_rows with SmoothK subtracts
// them). One block per (batch, head), so the pass costs the same short time at any length: each
// thread sums 8 consecutive channels (one 16-byte load per row) over a strided subset of the
// samples, then the row phases are added pairwise through shared memory in a fixed order, so the
// result does not depend on scheduling. A thread's loads are all issued before its first add:
// the pass is one memory latency long, not one per few samples. The launch also zeroes
// params.zero (V's scale accumulators in attention_forward_16bit), so that they need no memset.
// With params.rotated_heads it also decides automatic rotation (QKRotation::kAuto) from the same
// samples, still in registers: their squares (less the mean when smoothed) summed per channel in
// the same order, then the largest channel's against the head's total (rotates_channel_spread).
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

// Adds every row phase's 8 sums into phase 0's, pairwise through `partial` in a fixed order (the
// result does not depend on scheduling). Every thread of the block calls it.
template <class Config, int HeadDim>
__device__ __forceinline__ void add_row_phases(float (&sum)[8],
                                               float (&partial)[Config::kRowPhases / 2][HeadDim],
                                               int phase, int lane_in_row) {
  // Phases [active, 2 active) hand their sums to phases [0, active).
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
}

// This thread's samples added per channel in sample order: their values, or with Squares the
// squares of their values less `centre` (this lane's 8 channels of it).
template <class Config, ElementType InputType, bool Squares>
__device__ __forceinline__ void add_samples(float (&sum)[8],
                                            const uint4 (&raw)[Config::kSamplesPerThread],
                                            int phase, int count, const float* centre) {
#pragma unroll
  for (int i = 0; i < 8; ++i) sum[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < Config::kSamplesPerThread; ++i) {
    if (phase + i * Config::kRowPhases >= count) break;
    float values[8];
    unpack_8_values<InputType>(values, raw[i]);
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      if (Squares) {
        const float centred = values[c] - centre[c];
        sum[c] = fmaf(centred, centred, sum[c]);
      } else {
        sum[c] += values[c];
      }
    }
  }
}

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
  add_samples<Config, InputType, false>(sum, raw, phase, count, nullptr);
  add_row_phases<Config, HeadDim>(sum, partial, phase, lane_in_row);
  const float samples = static_cast<float>(count);
  float mean[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) mean[i] = divide_rn(sum[i], samples);
  if (phase == 0 && params.mean != nullptr) {
    float* out = params.mean + static_cast<i64>(blockIdx.x) * HeadDim + 8 * lane_in_row;
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = mean[i];
  }
  if (params.rotated_heads == nullptr) return;  // uniform over the block

  // Automatic rotation: phase 0's means to every phase, then each channel's sum of squares over
  // the samples, added up as the sums were.
  __shared__ float centre[HeadDim];
  if (phase == 0) {
#pragma unroll
    for (int i = 0; i < 8; ++i) centre[8 * lane_in_row + i] = params.smoothed ? mean[i] : 0.0f;
  }
  __syncthreads();
  float square_sum[8];
  add_samples<Config, InputType, true>(square_sum, raw, phase, count, centre + 8 * lane_in_row);
  add_row_phases<Config, HeadDim>(square_sum, partial, phase, lane_in_row);
  if (phase != 0) return;
  // Phase 0 is the first kThreadsPerRow (<= 32) lanes of warp 0: the head's largest channel and
  // total over them with shuffles.
  float largest = 0.0f;
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    largest = fmaxf(largest, square_sum[i]);
    total += square_sum[i];
  }
  constexpr unsigned kRowLanes =
      Config::kThreadsPerRow == 32 ? 0xFFFFFFFFu : (1u << Config::kThreadsPerRow) - 1u;
#pragma unroll
  for (int offset = Config::kThreadsPerRow / 2; offset > 0; offset /= 2) {
    largest = fmaxf(largest, __shfl_xor_sync(kRowLanes, largest, offset));
    total += __shfl_xor_sync(kRowLanes, total, offset);
  }
  if (lane_in_row == 0) {
    params.rotated_heads[blockIdx.x] =
        rotates_channel_spread(largest, total, params.channels, count) ? 1 : 0;
  }
}

}  // namespace kernels
}  // namespace intfa
