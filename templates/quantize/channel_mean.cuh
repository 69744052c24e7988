// Per-(batch, head) channel means of K over the sequence, for K smoothing (quantize_rows with
// SmoothK subtracts them before quantizing). One block per (batch, head): each thread sums two
// channels over a strided subset of the rows (consecutive threads read consecutive 4-byte words,
// so each row is one coalesced read), then the row phases are added in a fixed order through
// shared memory, so the result does not depend on scheduling.
#pragma once

#include "common/numeric.cuh"
#include "quantize/quantize_params.h"

namespace intfa {
namespace kernels {

template <int HeadDim>
struct ChannelMeanConfig {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static constexpr int kThreads = 256;
  static constexpr int kThreadsPerRow = HeadDim / 2;  // two channels per thread
  static constexpr int kRowPhases = kThreads / kThreadsPerRow;
};

template <int HeadDim, ElementType InputType>
__global__ void __launch_bounds__(256) channel_mean(const ChannelMeanParams params) {
  using Config = ChannelMeanConfig<HeadDim>;
  __shared__ float2 partial[Config::kRowPhases][Config::kThreadsPerRow];
  const int batch = blockIdx.x / params.heads;
  const int head = blockIdx.x % params.heads;
  const int pair = threadIdx.x % Config::kThreadsPerRow;
  const int phase = threadIdx.x / Config::kThreadsPerRow;
  const u16* input = static_cast<const u16*>(params.input) + batch * params.input_batch_stride +
                     head * params.input_head_stride + 2 * pair;

  float2 sum = make_float2(0.0f, 0.0f);
  for (int row = phase; row < params.seq; row += Config::kRowPhases) {
    const u32 word = *reinterpret_cast<const u32*>(input + static_cast<i64>(row) *
                                                               params.input_row_stride);
    sum.x += element_to_float<InputType>(static_cast<u16>(word & 0xFFFF));
    sum.y += element_to_float<InputType>(static_cast<u16>(word >> 16));
  }
  partial[phase][pair] = sum;
  __syncthreads();
  if (phase != 0) return;
  for (int other = 1; other < Config::kRowPhases; ++other) {
    sum.x += partial[other][pair].x;
    sum.y += partial[other][pair].y;
  }
  const float inverse_count = 1.0f / static_cast<float>(params.seq);
  float* mean = params.mean + static_cast<i64>(blockIdx.x) * HeadDim + 2 * pair;
  mean[0] = sum.x * inverse_count;
  mean[1] = sum.y * inverse_count;
}

}  // namespace kernels
}  // namespace intfa
