// Per-token quantization of Q or K: one scale per row of head_dim values (Algorithm 1's S_Q, S_K).
// Each thread owns 8 consecutive elements (one 16-byte load); the HeadDim / 8 threads of a row
// reduce max|x| with shuffles, so the kernel reads each input byte once and writes each output
// byte once.
#pragma once

#include "common/numeric.cuh"
#include "quantize/quantize_params.h"

namespace intfa {
namespace kernels {

template <int HeadDim, ElementType InputType, int Bits, bool SmoothK>
struct QuantizeRowsConfig {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static_assert(Bits == 8 || Bits == 4, "8 or 4 bits");
  static constexpr int kThreadsPerRow = HeadDim / 8;
  static constexpr int kThreads = 128;
  static constexpr int kRowsPerBlock = kThreads / kThreadsPerRow;
  static constexpr float kRange = Bits == 8 ? 127.0f : 7.0f;
};

template <int HeadDim, ElementType InputType, int Bits, bool SmoothK>
__global__ void __launch_bounds__(128) quantize_rows(const QuantizeRowsParams params) {
  using Config = QuantizeRowsConfig<HeadDim, InputType, Bits, SmoothK>;
  const int lane_in_row = threadIdx.x % Config::kThreadsPerRow;
  const i64 row = static_cast<i64>(blockIdx.x) * Config::kRowsPerBlock +
                  threadIdx.x / Config::kThreadsPerRow;
  const i64 total_rows = static_cast<i64>(params.batch) * params.heads * params.seq;
  // Rows past the end still take part in the shuffles below with zeros.
  const bool active = row < total_rows;
  const int n = active ? static_cast<int>(row % params.seq) : 0;
  const int h = active ? static_cast<int>((row / params.seq) % params.heads) : 0;
  const int b = active ? static_cast<int>(row / (static_cast<i64>(params.seq) * params.heads)) : 0;
  const int channel = lane_in_row * 8;

  float values[8];
  if (active) {
    const u16* input = static_cast<const u16*>(params.input) + b * params.input_batch_stride +
                       h * params.input_head_stride + n * params.input_row_stride + channel;
    const uint4 raw = *reinterpret_cast<const uint4*>(input);
    const u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      values[2 * i] = element_to_float<InputType>(static_cast<u16>(words[i] & 0xFFFF));
      values[2 * i + 1] = element_to_float<InputType>(static_cast<u16>(words[i] >> 16));
    }
    if (SmoothK) {
      const float* mean =
          params.channel_mean + (static_cast<i64>(b) * params.heads + h) * HeadDim + channel;
#pragma unroll
      for (int i = 0; i < 8; ++i) values[i] -= mean[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) values[i] = 0.0f;
  }

  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(values[i]));
#pragma unroll
  for (int offset = Config::kThreadsPerRow / 2; offset > 0; offset /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, offset));
  }
  if (!active) return;

  const float scale = divide_rn(amax, Config::kRange);
  const float inverse = amax > 0.0f ? divide_rn(1.0f, scale) : 0.0f;
  int quantized[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int q = round_to_int(values[i] * inverse);
    quantized[i] = max(-static_cast<int>(Config::kRange), min(static_cast<int>(Config::kRange), q));
  }

  u8* output = static_cast<u8*>(params.output) + b * params.output_batch_stride +
               h * params.output_head_stride + n * params.output_row_stride;
  if (Bits == 8) {
    u32 packed[2];
#pragma unroll
    for (int word = 0; word < 2; ++word) {
      packed[word] = (static_cast<u32>(quantized[4 * word] & 0xFF)) |
                     (static_cast<u32>(quantized[4 * word + 1] & 0xFF) << 8) |
                     (static_cast<u32>(quantized[4 * word + 2] & 0xFF) << 16) |
                     (static_cast<u32>(quantized[4 * word + 3] & 0xFF) << 24);
    }
    *reinterpret_cast<uint2*>(output + channel) = make_uint2(packed[0], packed[1]);
  } else {
    // Two's-complement nibbles, element 2i in the low nibble of byte i (the s4 MMA operand order).
    u32 packed = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) packed |= static_cast<u32>(quantized[i] & 0xF) << (4 * i);
    *reinterpret_cast<u32*>(output + channel / 2) = packed;
  }
  if (lane_in_row == 0) {
    params.scales[(static_cast<i64>(b) * params.heads + h) * params.seq + n] = scale;
  }
}

}  // namespace kernels
}  // namespace intfa
