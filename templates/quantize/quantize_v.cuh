// Quantization of V into the attention kernel's INT8 V layout.
//
// Each block takes 64 tokens x head_dim of one (batch, head) into shared memory and writes them
// back transposed (channels become rows of token positions) and permuted (v_position_of_token).
// Per-block scales are computed right there, so that granularity is a single pass. Per-tensor and
// per-channel scales need a maximum over the whole sequence first: v_scale_block reduces it with
// atomicMax into zeroed memory (non-negative floats order like their bit patterns), then
// quantize_v reads it. v_scale_block is the body of quantize_v_scale and of the V half of
// quantize_k_v_scale (quantize_k_v_scale.cuh: K's rows and V's maximum in one launch).
#pragma once

#include "attention/attention_params.h"
#include "common/grid_dependency.cuh"
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

// V's head of (batch, head) in the input and its length: varlen input starts at the sequence's
// first row.
struct VHead {
  const u16* input;
  int seq;
};

__device__ __forceinline__ VHead v_head(const QuantizeVParams& params, int batch, int head) {
  const u16* input = static_cast<const u16*>(params.input) + head * params.input_head_stride;
  if (params.cu_seqlens == nullptr) return {input + batch * params.input_batch_stride, params.seq};
  const int first_row = params.cu_seqlens[batch];
  return {input + static_cast<i64>(first_row) * params.input_row_stride,
          params.cu_seqlens[batch + 1] - first_row};
}

// Loads tokens [first, first + 64) of one (batch, head) as raw 16-bit values, zeros past the end
// (of the sequence, for varlen input).
template <int HeadDim>
__device__ __forceinline__ void load_v_tile(VTile<HeadDim>& tile, const QuantizeVParams& params,
                                            int batch, int head, int first) {
  constexpr int kChunksPerToken = HeadDim / 8;
  const VHead v = v_head(params, batch, head);
  for (int index = threadIdx.x; index < VTile<HeadDim>::kTokens * kChunksPerToken;
       index += VTile<HeadDim>::kThreads) {
    const int token = index / kChunksPerToken;
    const int channel = (index % kChunksPerToken) * 8;
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (first + token < v.seq && channel < params.channels) {
      raw = *reinterpret_cast<const uint4*>(
          v.input + static_cast<i64>(first + token) * params.input_row_stride + channel);
    }
    u32* destination = reinterpret_cast<u32*>(&tile.values[token * VTile<HeadDim>::kPitch + channel]);
    destination[0] = raw.x;
    destination[1] = raw.y;
    destination[2] = raw.z;
    destination[3] = raw.w;
  }
}

// The token (of 16) that V's layout stores at byte `position` of a 16-token group
// (templates/attention/README.md: the order the attention kernel's P.V fragments read).
__device__ __forceinline__ int v_token_at_position(int position) {
  return ((position >> 1) & 1) * 8 + (position >> 2) * 2 + (position & 1);
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

// Channel maxima over a block's threads, 8 channels per lane from `channel` on, lanes
// LanesPerToken apart holding the same channels: over the warp with shuffles, then into
// warp_channel_max[warp][...] (every thread of the block calls it; it ends with __syncthreads).
// channel_max_over_warps then gives one channel's maximum over the block.
template <int LanesPerToken, int Warps, int HeadDim>
__device__ __forceinline__ void channel_max_to_shared(float (&amax)[8], int channel,
                                                      float (&warp_channel_max)[Warps][HeadDim]) {
#pragma unroll
  for (int offset = LanesPerToken; offset < 32; offset *= 2) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      amax[i] = fmaxf(amax[i], __shfl_xor_sync(0xFFFFFFFFu, amax[i], offset));
    }
  }
  if (threadIdx.x % 32 < LanesPerToken) {
#pragma unroll
    for (int i = 0; i < 8; ++i) warp_channel_max[threadIdx.x / 32][channel + i] = amax[i];
  }
  __syncthreads();
}

template <int Warps, int HeadDim>
__device__ __forceinline__ float channel_max_over_warps(
    const float (&warp_channel_max)[Warps][HeadDim], int channel) {
  float channel_max = warp_channel_max[0][channel];
#pragma unroll
  for (int w = 1; w < Warps; ++w) channel_max = fmaxf(channel_max, warp_channel_max[w][channel]);
  return channel_max;
}

// The max pass over one block of kVTokenBlock tokens, in registers: each token's HeadDim / 8 lanes
// load 8 channels each (one 16-byte load), Threads / (HeadDim / 8) tokens at a time, up to 8 loads
// in flight per thread; the channels' maxima over the block's tokens then go through shuffles (the
// tokens of a warp) and shared memory (the warps), and into the scales with one atomicMax per
// channel, or per block for a per-tensor scale. max|x| / 127 is rounded once per block and max
// commutes with that rounding, so the scales are those of the maximum over the whole sequence, in
// any order of blocks.
template <int HeadDim, int Threads>
struct VScaleConfig {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static constexpr int kLanesPerToken = HeadDim / 8;
  static constexpr int kTokensPerPass = Threads / kLanesPerToken;
  static constexpr int kPasses = kVTokenBlock / kTokensPerPass;
  static constexpr int kWarps = Threads / 32;
  static constexpr int kLoadsInFlight = kPasses < 8 ? kPasses : 8;
  static_assert(kPasses * kTokensPerPass == kVTokenBlock, "passes cover the block");
  static_assert(kPasses % kLoadsInFlight == 0, "groups of loads cover the passes");
};

template <int HeadDim, ElementType InputType, VScaleGranularity Granularity, int Threads>
__device__ __forceinline__ void v_scale_block(const QuantizeVParams& params, int batch, int head,
                                              int block) {
  static_assert(Granularity != VScaleGranularity::kPerBlock,
                "per-block scales come with quantize_v itself");
  using Config = VScaleConfig<HeadDim, Threads>;
  __shared__ float warp_channel_max[Config::kWarps][HeadDim];
  __shared__ float warp_max[Config::kWarps];
  const int lane_in_token = threadIdx.x % Config::kLanesPerToken;
  const int token_in_pass = threadIdx.x / Config::kLanesPerToken;
  const int channel = 8 * lane_in_token;
  const VHead v = v_head(params, batch, head);
  const int first = block * kVTokenBlock + token_in_pass;

  float amax[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) amax[i] = 0.0f;
  // At most 8 loads (32 registers) in flight per thread: the fused kernel's K half shares this
  // kernel's register count, and its occupancy.
#pragma unroll
  for (int group = 0; group < Config::kPasses; group += Config::kLoadsInFlight) {
    uint4 raw[Config::kLoadsInFlight];
#pragma unroll
    for (int pass = 0; pass < Config::kLoadsInFlight; ++pass) {
      const int token = first + (group + pass) * Config::kTokensPerPass;
      raw[pass] = make_uint4(0, 0, 0, 0);  // past the end, and channels past params.channels
      if (token < v.seq && channel < params.channels) {
        raw[pass] = *reinterpret_cast<const uint4*>(
            v.input + static_cast<i64>(token) * params.input_row_stride + channel);
      }
    }
#pragma unroll
    for (int pass = 0; pass < Config::kLoadsInFlight; ++pass) {
      float values[8];
      unpack_8_values<InputType>(values, raw[pass]);
#pragma unroll
      for (int i = 0; i < 8; ++i) amax[i] = fmaxf(amax[i], fabsf(values[i]));
    }
  }
  // The tokens of a warp (lanes kLanesPerToken apart hold the same channels), then the warps.
  channel_max_to_shared<Config::kLanesPerToken>(amax, channel, warp_channel_max);
  const int warp = threadIdx.x / 32;
  const i64 head_index = static_cast<i64>(batch) * params.heads + head;
  float block_max = 0.0f;
  for (int c = threadIdx.x; c < HeadDim; c += Threads) {
    const float channel_max = channel_max_over_warps(warp_channel_max, c);
    if (Granularity == VScaleGranularity::kPerChannel) {
      atomicMax(reinterpret_cast<int*>(params.scales + head_index * HeadDim + c),
                __float_as_int(divide_rn(channel_max, 127.0f)));
    }
    block_max = fmaxf(block_max, channel_max);
  }
  if (Granularity == VScaleGranularity::kPerTensor) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      block_max = fmaxf(block_max, __shfl_xor_sync(0xFFFFFFFFu, block_max, offset));
    }
    if (threadIdx.x % 32 == 0) warp_max[warp] = block_max;
    __syncthreads();
    if (threadIdx.x == 0) {
#pragma unroll
      for (int w = 1; w < Config::kWarps; ++w) block_max = fmaxf(block_max, warp_max[w]);
      atomicMax(reinterpret_cast<int*>(params.scales + head_index),
                __float_as_int(divide_rn(block_max, 127.0f)));
    }
  }
}

// Grid (block, head, batch) as quantize_v's.
template <int HeadDim, ElementType InputType, VScaleGranularity Granularity>
__global__ void __launch_bounds__(256) quantize_v_scale(const QuantizeVParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
  v_scale_block<HeadDim, InputType, Granularity, 256>(params, blockIdx.z, blockIdx.y, blockIdx.x);
}

template <int HeadDim, ElementType InputType, VScaleGranularity Granularity>
__global__ void __launch_bounds__(256) quantize_v(const QuantizeVParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
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
      u32 quantized[4];
#pragma unroll
      for (int byte = 0; byte < 4; ++byte) {
        // The token stored at position 4 * word + byte of this 16-token group.
        const int position = 4 * word + byte;
        const int token = chunk * 16 + v_token_at_position(position);
        const float x = element_to_float<InputType>(tile.values[token * VTile<HeadDim>::kPitch + channel]);
        // Clamped: the scale may be subnormal (a channel of values below 127 * 2^-126).
        quantized[byte] = quantize_to_low_bits<true>(x, inverse, 127);
      }
      words[word] = gather_low_bytes(quantized[0], quantized[1], quantized[2], quantized[3]);
    }
    *reinterpret_cast<uint4*>(head_output + (i64)channel * params.padded_seq + first + chunk * 16) =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
}

}  // namespace kernels
}  // namespace intfa
