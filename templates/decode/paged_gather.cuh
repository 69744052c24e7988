// Gather: a batch's cached K/V rows, through the block table, into the packed layout the varlen
// attention kernel reads (PagedGatherParams), so that a prefill over the paged cache (queries
// against their sequences' cached prefixes and their own new keys) runs on the dense kernels
// with no quantize pass over K. K keeps the cache's INT8 values and per-row scales (an INT4
// cache's rows are dequantized, as decode dequantizes them, and quantized again per row, as
// quantize_rows would); V is dequantized to 16 bits for half INT8's FP16/BF16 P.V.
#pragma once

#include "common/grid_dependency.cuh"
#include "common/numeric.cuh"
#include "decode/paged_params.h"

namespace intfa {
namespace kernels {

template <int HeadDim, int Bits>
struct PagedGatherConfig {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static_assert(Bits == 8 || Bits == 4, "8 or 4 bits");
  static constexpr int kThreadsPerRow = HeadDim / 8;
  static constexpr int kRowsPerBlock = paged_rows_per_set(HeadDim);
  static constexpr int kRowBytes = paged_row_bytes(HeadDim, Bits);
  static constexpr int kGroups = HeadDim / kPagedInt4Group;
};

// A sequence's rows as the gather takes them: its length clamped to [0, max_seq_len].
__device__ __forceinline__ int gathered_length(const PagedGatherParams& params, int sequence) {
  return min(max(params.seq_lens[sequence], 0), params.max_seq_len);
}

// The packed row of sequence `sequence`'s first token: the lengths of the sequences before it,
// summed by the whole block (every block of the sequence computes it; batches are small), in 64
// bits and clamped to kv_rows (lengths summing past it, or past 2^31, place nothing beyond).
__device__ __forceinline__ int packed_start(const PagedGatherParams& params, int sequence) {
  __shared__ long long warp_sums[kPagedRowThreads / 32];
  long long sum = 0;
  for (int i = threadIdx.x; i < sequence; i += kPagedRowThreads) sum += gathered_length(params, i);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  long long total = 0;
#pragma unroll
  for (int w = 0; w < kPagedRowThreads / 32; ++w) total += warp_sums[w];
  return static_cast<int>(min(total, static_cast<long long>(params.kv_rows)));
}

// The eight INT4 values of this thread's channels, each times its group's FP16 scale and rounded
// to FP16, as decode's dequantization does (decode/dequantize.cuh, chunk_to_f16x2).
template <int HeadDim>
__device__ __forceinline__ void dequantize_int4x8(float (&values)[8], const u8* row_data,
                                                  const u16* row_scales, int channel) {
  const u32 word = *reinterpret_cast<const u32*>(row_data + channel / 2);
  const float scale = f16_to_float(row_scales[channel / kPagedInt4Group]);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int nibble = static_cast<int>(word >> (4 * i)) & 0xF;
    const float value = static_cast<float>(nibble >= 8 ? nibble - 16 : nibble);
    values[i] = f16_to_float(float_to_f16_bits(value * scale));
  }
}

template <int HeadDim, int Bits, ElementType VType>
__global__ void __launch_bounds__(kPagedRowThreads) paged_gather(const PagedGatherParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
  using Config = PagedGatherConfig<HeadDim, Bits>;
  const PagedCacheParams& cache = params.cache;
  const int sequence = blockIdx.y;
  const int start = packed_start(params, sequence);
  const int length = gathered_length(params, sequence);
  const int lane_in_row = threadIdx.x % Config::kThreadsPerRow;
  const int channel = lane_in_row * 8;
  const int row = static_cast<int>(blockIdx.x) * Config::kRowsPerBlock +
                  static_cast<int>(threadIdx.x) / Config::kThreadsPerRow;
  const int token = fast_divide(row, params.heads_kv_divisor);
  const int head = row - token * cache.heads_kv;
  // Inactive rows (past the sequence, or past kv_rows) still take part in the shuffles.
  const bool active = token < length && token < params.kv_rows - start;

  int cache_row = 0;
  if (active) {
    const int page = params.block_table[sequence * params.block_table_stride +
                                        (token >> cache.page_shift)];
    cache_row = ((page * cache.heads_kv + head) << cache.page_shift) +
                (token & (cache.page_size - 1));
  }
  const i64 packed_row = static_cast<i64>(head) * params.kv_rows + start + token;
  const u8* k_row = cache.k_data + static_cast<i64>(cache_row) * Config::kRowBytes;
  const u8* v_row = cache.v_data + static_cast<i64>(cache_row) * Config::kRowBytes;

  // K: INT8 rows as they are; INT4 rows dequantized and quantized again against the row's max.
  if constexpr (Bits == 8) {
    if (active) {
      *reinterpret_cast<uint2*>(params.k + packed_row * HeadDim + channel) =
          *reinterpret_cast<const uint2*>(k_row + channel);
      if (lane_in_row == 0) {
        params.k_scale[packed_row] = static_cast<const float*>(cache.k_scale)[cache_row];
      }
    }
  } else {
    float values[8] = {};
    if (active) {
      dequantize_int4x8<HeadDim>(values, k_row,
                                 static_cast<const u16*>(cache.k_scale) +
                                     static_cast<i64>(cache_row) * Config::kGroups,
                                 channel);
    }
    const RowScale scale = row_scale(row_max_abs<Config::kThreadsPerRow>(values), 127.0f);
    u32 quantized[8];
    quantize_8(quantized, values, scale.inverse, 127, scale.clamps);
    if (active) {
      store_int8x8(params.k + packed_row * HeadDim + channel, quantized);
      if (lane_in_row == 0) params.k_scale[packed_row] = scale.scale;
    }
  }

  // V: value times scale in FP32 (INT4: rounded to FP16 first, as decode), rounded to VType.
  if (active) {
    float values[8];
    if constexpr (Bits == 8) {
      const uint2 raw = *reinterpret_cast<const uint2*>(v_row + channel);
      const float scale = static_cast<const float*>(cache.v_scale)[cache_row];
      const u32 words[2] = {raw.x, raw.y};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int byte = static_cast<int>(words[i / 4] >> (8 * (i % 4))) & 0xFF;
        values[i] = static_cast<float>(byte >= 128 ? byte - 256 : byte) * scale;
      }
    } else {
      dequantize_int4x8<HeadDim>(values, v_row,
                                 static_cast<const u16*>(cache.v_scale) +
                                     static_cast<i64>(cache_row) * Config::kGroups,
                                 channel);
    }
    *reinterpret_cast<uint4*>(static_cast<u8*>(params.v) + (packed_row * HeadDim + channel) * 2) =
        make_uint4(pack_float2<VType>(values[0], values[1]),
                   pack_float2<VType>(values[2], values[3]),
                   pack_float2<VType>(values[4], values[5]),
                   pack_float2<VType>(values[6], values[7]));
  }

  if (blockIdx.x != 0) return;
  const int end = static_cast<int>(
      min(static_cast<long long>(start) + length, static_cast<long long>(params.kv_rows)));
  if (threadIdx.x == 0) {
    params.cu_seqlens_kv[sequence + 1] = end;
    if (sequence == 0) params.cu_seqlens_kv[0] = 0;
  }
  // After the last sequence: zeros, up to a key tile of them, in every head's V.
  if (sequence != params.batch - 1) return;
  const int zero_rows = min(kPagedGatherZeroRows, params.kv_rows - end);
  constexpr int kChunksPerRow = HeadDim / 8;  // 16-byte chunks of a 16-bit row
  const int chunks = zero_rows * cache.heads_kv * kChunksPerRow;
  for (int i = threadIdx.x; i < chunks; i += kPagedRowThreads) {
    const int chunk = i % kChunksPerRow;
    const int zero_row = i / kChunksPerRow;
    const int zero_head = zero_row / max(zero_rows, 1);
    const i64 at = static_cast<i64>(zero_head) * params.kv_rows + end + zero_row % zero_rows;
    *reinterpret_cast<uint4*>(static_cast<u8*>(params.v) + (at * HeadDim + chunk * 8) * 2) =
        make_uint4(0, 0, 0, 0);
  }
}

}  // namespace kernels
}  // namespace intfa
