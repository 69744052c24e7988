// Quantization of V into the attention kernel's INT8 V layout.
//
// Each block takes 64 tokens x head_dim of one (batch, head) into shared memory and writes them
// back transposed (channels become rows of token positions) and permuted (v_position_of_token).
// Per-block scales are computed right there, so that granularity is a single pass. Per-tensor and
// per-channel scales need a maximum over the whole sequence first: quantize_v_scale reduces it
// with atomicMax into zeroed memory (non-negative floats order like their bit patterns), then
// quantize_v reads it.
#pragma once

#include "attention/attention_params.h"
#include "common/kernel_enums.h"
#include "common/numeric.cuh"
#include "quantize/quantize_params.h"

namespace intfa {
namespace kernels {

template <int HeadDim>
struct VTile {
  static constexpr int kTokens = kVTokenBlock;
  static constexpr int kPitch = HeadDim + 2;  // in 16-bit elements; breaks channel-read conflicts
  static constexpr int kThreads = 256;
  u16 values[kTokens * kPitch];
};

// Loads tokens [first, first + 64) of one (batch, head) as raw 16-bit values, zeros past the end
// (of the sequence, for varlen input).
template <int HeadDim>
__device__ __forceinline__ void load_v_tile(VTile<HeadDim>& tile, const QuantizeVParams& params,
                                            int batch, int head, int first) {
  constexpr int kChunksPerToken = HeadDim / 8;
  const u16* head_input = static_cast<const u16*>(params.input) + head * params.input_head_stride;
  int seq = params.seq;
  if (params.cu_seqlens != nullptr) {
    const int first_row = params.cu_seqlens[batch];
    head_input += static_cast<i64>(first_row) * params.input_row_stride;
    seq = params.cu_seqlens[batch + 1] - first_row;
  } else {
    head_input += batch * params.input_batch_stride;
  }
  for (int index = threadIdx.x; index < VTile<HeadDim>::kTokens * kChunksPerToken;
       index += VTile<HeadDim>::kThreads) {
    const int token = index / kChunksPerToken;
    const int channel = (index % kChunksPerToken) * 8;
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (first + token < seq && channel < params.channels) {
      raw = *reinterpret_cast<const uint4*>(head_input + (i64)(first + token) * params.input_row_stride +
                                            channel);
    }
    u32* destination = reinterpret_cast<u32*>(&tile.values[token * VTile<HeadDim>::kPitch + channel]);
    destination[0] = raw.x;
    destination[1] = raw.y;
    destination[2] = raw.z;
    destination[3] = raw.w;
  }
}

template <int HeadDim, ElementType InputType>
__device__ __forceinline__ float channel_max_abs(const VTile<HeadDim>& tile, int channel) {
  float amax = 0.0f;
#pragma unroll 8
  for (int token = 0; token < VTile<HeadDim>::kTokens; ++token) {
    amax = fmaxf(amax, fabsf(element_to_float<InputType>(
                           tile.values[token * VTile<HeadDim>::kPitch + channel])));
  }
  return amax;
}

template <int HeadDim, ElementType InputType, VScaleGranularity Granularity>
__global__ void __launch_bounds__(256) quantize_v_scale(const QuantizeVParams params) {
  __shared__ VTile<HeadDim> tile;
  __shared__ float warp_max[8];
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  load_v_tile<HeadDim>(tile, params, batch, head, blockIdx.x * kVTokenBlock);
  __syncthreads();
  const i64 head_index = static_cast<i64>(batch) * params.heads + head;
  float amax = 0.0f;
  for (int channel = threadIdx.x; channel < HeadDim; channel += blockDim.x) {
    const float channel_amax = channel_max_abs<HeadDim, InputType>(tile, channel);
    if (Granularity == VScaleGranularity::kPerChannel) {
      atomicMax(reinterpret_cast<int*>(params.scales + head_index * HeadDim + channel),
                __float_as_int(divide_rn(channel_amax, 127.0f)));
    }
    amax = fmaxf(amax, channel_amax);
  }
  if (Granularity != VScaleGranularity::kPerTensor) return;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, offset));
  }
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int warp = 1; warp < static_cast<int>(blockDim.x >> 5); ++warp) {
      amax = fmaxf(amax, warp_max[warp]);
    }
    atomicMax(reinterpret_cast<int*>(params.scales + head_index),
              __float_as_int(divide_rn(amax, 127.0f)));
  }
}

template <int HeadDim, ElementType InputType, VScaleGranularity Granularity>
__global__ void __launch_bounds__(256) quantize_v(const QuantizeVParams params) {
  __shared__ VTile<HeadDim> tile;
  __shared__ float inverse_scale[HeadDim];
  const int block = blockIdx.x;
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const int first = block * kVTokenBlock;
  const i64 head_index = static_cast<i64>(batch) * params.heads + head;
  load_v_tile<HeadDim>(tile, params, batch, head, first);
  __syncthreads();

  for (int channel = threadIdx.x; channel < HeadDim; channel += blockDim.x) {
    float scale;
    if (Granularity == VScaleGranularity::kPerBlock) {
      scale = divide_rn(channel_max_abs<HeadDim, InputType>(tile, channel), 127.0f);
      params.scales[(head_index * (params.padded_seq / kVTokenBlock) + block) * HeadDim + channel] =
          scale;
    } else if (Granularity == VScaleGranularity::kPerChannel) {
      scale = params.scales[head_index * HeadDim + channel];
    } else {
      scale = params.scales[head_index];
    }
    inverse_scale[channel] = scale > 0.0f ? divide_rn(1.0f, scale) : 0.0f;
  }
  __syncthreads();

  // One thread writes 16 consecutive positions (16 bytes) of one channel row.
  constexpr int kChunksPerChannel = kVTokenBlock / 16;
  i8* head_output = params.output + head_index * HeadDim * params.padded_seq;
  for (int index = threadIdx.x; index < HeadDim * kChunksPerChannel; index += blockDim.x) {
    const int channel = index / kChunksPerChannel;
    const int chunk = index % kChunksPerChannel;
    const float inverse = inverse_scale[channel];
    u32 words[4];
#pragma unroll
    for (int word = 0; word < 4; ++word) {
      u32 packed = 0;
#pragma unroll
      for (int byte = 0; byte < 4; ++byte) {
        // The token stored at position 4 * word + byte of this 16-token group.
        const int position = 4 * word + byte;
        const int token = chunk * 16 + ((position >> 1) & 1) * 8 + (position >> 2) * 2 + (position & 1);
        const float x = element_to_float<InputType>(tile.values[token * VTile<HeadDim>::kPitch + channel]);
        const int q = max(-127, min(127, round_to_int(x * inverse)));
        packed |= static_cast<u32>(q & 0xFF) << (8 * byte);
      }
      words[word] = packed;
    }
    *reinterpret_cast<uint4*>(head_output + (i64)channel * params.padded_seq + first + chunk * 16) =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
}

}  // namespace kernels
}  // namespace intfa
