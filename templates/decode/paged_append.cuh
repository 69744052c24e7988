// Append: new FP16/BF16 K and V rows -> quantized rows and scales in their cache slots (vLLM's
// reshape_and_cache with quantization). Each thread owns 8 consecutive channels of one (token,
// head) row of K or V (one 16-byte load); the threads of a row (INT8) or of a 32-channel group
// (INT4) reduce max|x| with shuffles, so every input byte is read once and every cache byte
// written once. Rounding: README.md, "Append".
#pragma once

#include "common/numeric.cuh"
#include "decode/paged_params.h"

namespace intfa {
namespace kernels {

template <int HeadDim, int Bits>
struct PagedAppendConfig {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static_assert(Bits == 8 || Bits == 4, "8 or 4 bits");
  static constexpr int kThreadsPerRow = HeadDim / 8;
  static constexpr int kRowsPerBlock = kPagedRowThreads / kThreadsPerRow;
  // The lanes that share one scale: the whole row (INT8) or one group (INT4).
  static constexpr int kThreadsPerScale = Bits == 8 ? kThreadsPerRow : kPagedInt4Group / 8;
  static constexpr float kRange = Bits == 8 ? 127.0f : 7.0f;
  static constexpr int kRowBytes = paged_row_bytes(HeadDim, Bits);
};

// FP32 -> FP16 bits, round to nearest even.
__device__ __forceinline__ u16 float_to_f16_bits(float value) {
  u16 bits;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
}

template <int HeadDim, int Bits, ElementType InputType>
__global__ void __launch_bounds__(kPagedRowThreads) paged_append(const PagedAppendParams params) {
  using Config = PagedAppendConfig<HeadDim, Bits>;
  const int lane_in_row = threadIdx.x % Config::kThreadsPerRow;
  const i64 row =
      static_cast<i64>(blockIdx.x) * Config::kRowsPerBlock + threadIdx.x / Config::kThreadsPerRow;
  const PagedCacheParams& cache = params.cache;
  // Rows: all K rows (token-major, then head), then all V rows.
  const i64 rows_per_tensor = static_cast<i64>(params.tokens) * cache.heads_kv;
  const bool in_range = row < 2 * rows_per_tensor;
  const bool is_v = in_range && row >= rows_per_tensor;
  const i64 tensor_row = is_v ? row - rows_per_tensor : row;
  const int token = in_range ? static_cast<int>(tensor_row / cache.heads_kv) : 0;
  const int head = in_range ? static_cast<int>(tensor_row % cache.heads_kv) : 0;
  const int slot = in_range ? params.slot_mapping[token] : -1;
  // Rows past the end and skipped tokens still take part in the shuffles, with zeros.
  const bool active = slot >= 0;
  const int channel = lane_in_row * 8;

  float values[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) values[i] = 0.0f;
  if (active) {
    const u16* input = static_cast<const u16*>(is_v ? params.v : params.k) +
                       token * (is_v ? params.v_token_stride : params.k_token_stride) +
                       head * (is_v ? params.v_head_stride : params.k_head_stride) + channel;
    const uint4 raw = *reinterpret_cast<const uint4*>(input);
    unpack_8_values<InputType>(values, raw);
    if (!is_v && cache.k_offset != nullptr) {
      const float* offset = cache.k_offset + head * HeadDim + channel;
#pragma unroll
      for (int i = 0; i < 8; ++i) values[i] -= offset[i];
    }
  }

  const float amax = row_max_abs<Config::kThreadsPerScale>(values);
  if (!active) return;

  float scale = divide_rn(amax, Config::kRange);
  u16 scale_bits = 0;
  if (Bits == 4) {
    // The FP16 scale that is stored is the one the values are quantized against; beyond FP16's
    // range it saturates (and the values clamp), rather than becoming infinity.
    scale_bits = float_to_f16_bits(fminf(scale, 65504.0f));
    scale = f16_to_float(scale_bits);
  }
  // INT8 as quantize_rows (zero when amax is); INT4 zero when the stored scale is.
  const bool nonzero = Bits == 8 ? amax > 0.0f : scale > 0.0f;
  const float inverse = nonzero ? divide_rn(1.0f, scale) : 0.0f;
  int quantized[8];
  quantize_8(quantized, values, inverse, static_cast<int>(Config::kRange));

  const i64 page = slot >> cache.page_shift;
  const i64 cache_row =
      ((page * cache.heads_kv + head) << cache.page_shift) + (slot & (cache.page_size - 1));
  u8* data = (is_v ? cache.v_data : cache.k_data) + cache_row * Config::kRowBytes;
  void* scales = is_v ? cache.v_scale : cache.k_scale;
  if (Bits == 8) {
    store_int8x8(data + channel, quantized);
    if (lane_in_row == 0) static_cast<float*>(scales)[cache_row] = scale;
  } else {
    // Two's-complement nibbles, element 2i in the low nibble of byte i.
    u32 packed = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) packed |= static_cast<u32>(quantized[i] & 0xF) << (4 * i);
    *reinterpret_cast<u32*>(data + channel / 2) = packed;
    if (channel % kPagedInt4Group == 0) {
      constexpr int kGroups = HeadDim / kPagedInt4Group;
      static_cast<u16*>(scales)[cache_row * kGroups + channel / kPagedInt4Group] = scale_bits;
    }
  }
}

}  // namespace kernels
}  // namespace intfa
