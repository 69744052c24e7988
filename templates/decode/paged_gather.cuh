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
  static constexpr int kRowsPerSet = paged_rows_per_set(HeadDim);
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

// The eight INT4 values of a row's word (this thread's channels), each times its group's scale
// and rounded to FP16, as decode's dequantization does (decode/dequantize.cuh, chunk_to_f16x2).
__device__ __forceinline__ void dequantize_int4x8(float (&values)[8], u32 word, float scale) {
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
  constexpr int kSets = kPagedGatherRowSets;
  const PagedCacheParams& cache = params.cache;
  const int sequence = blockIdx.y;
  const int start = packed_start(params, sequence);
  const int length = gathered_length(params, sequence);
  const int lane_in_row = threadIdx.x % Config::kThreadsPerRow;
  const int channel = lane_in_row * 8;
  const int first_row = static_cast<int>(blockIdx.x) * paged_gather_rows_per_block(HeadDim) +
                        static_cast<int>(threadIdx.x) / Config::kThreadsPerRow;
  const int* pages = params.block_table + sequence * params.block_table_stride;

  // Every row's page, then every row's loads, before any row is converted: a thread has kSets
  // rows' loads in flight instead of one, as in the append kernel. Inactive rows (past the
  // sequence, or past kv_rows) load nothing and still take part in the INT4 rows' shuffles.
  i64 packed_row[kSets];
  int cache_row[kSets];
  bool active[kSets];
#pragma unroll
  for (int k = 0; k < kSets; ++k) {
    const int row = first_row + k * Config::kRowsPerSet;
    const int token = fast_divide(row, params.heads_kv_divisor);
    const int head = row - token * cache.heads_kv;
    active[k] = token < length && token < params.kv_rows - start;
    packed_row[k] = static_cast<i64>(head) * params.kv_rows + start + token;
    cache_row[k] = 0;
    if (active[k]) {
      cache_row[k] = paged_cache_row(cache, pages[token >> cache.page_shift], head, token);
    }
  }
  // This thread's bytes of K and V (INT8: 8 bytes each; INT4: the low word, 4 bytes), and their
  // scales: the rows' (INT8) or the channels' group's (INT4); zeros for inactive rows.
  uint2 k_raw[kSets], v_raw[kSets];
  float k_scale[kSets], v_scale[kSets];
#pragma unroll
  for (int k = 0; k < kSets; ++k) {
    k_raw[k] = v_raw[k] = make_uint2(0, 0);
    k_scale[k] = v_scale[k] = 0.0f;
    if (!active[k]) continue;
    const i64 at = static_cast<i64>(cache_row[k]) * Config::kRowBytes + channel * Bits / 8;
    if constexpr (Bits == 8) {
      k_raw[k] = *reinterpret_cast<const uint2*>(cache.k_data + at);
      v_raw[k] = *reinterpret_cast<const uint2*>(cache.v_data + at);
      k_scale[k] = static_cast<const float*>(cache.k_scale)[cache_row[k]];
      v_scale[k] = static_cast<const float*>(cache.v_scale)[cache_row[k]];
    } else {
      k_raw[k].x = *reinterpret_cast<const u32*>(cache.k_data + at);
      v_raw[k].x = *reinterpret_cast<const u32*>(cache.v_data + at);
      const i64 group = static_cast<i64>(cache_row[k]) * Config::kGroups + channel / kPagedInt4Group;
      k_scale[k] = f16_to_float(static_cast<const u16*>(cache.k_scale)[group]);
      v_scale[k] = f16_to_float(static_cast<const u16*>(cache.v_scale)[group]);
    }
  }

#pragma unroll
  for (int k = 0; k < kSets; ++k) {
    u8* const k_destination = params.k + packed_row[k] * HeadDim + channel;
    // K: INT8 rows as they are; INT4 rows dequantized and quantized again against the row's max.
    if constexpr (Bits == 8) {
      if (active[k]) {
        *reinterpret_cast<uint2*>(k_destination) = k_raw[k];
        if (lane_in_row == 0) params.k_scale[packed_row[k]] = k_scale[k];
      }
    } else {
      float values[8];
      dequantize_int4x8(values, k_raw[k].x, k_scale[k]);  // zeros for an inactive row
      const RowScale scale = row_scale(row_max_abs<Config::kThreadsPerRow>(values), 127.0f);
      u32 quantized[8];
      quantize_8(quantized, values, scale.inverse, 127, scale.clamps);
      if (active[k]) {
        store_int8x8(k_destination, quantized);
        if (lane_in_row == 0) params.k_scale[packed_row[k]] = scale.scale;
      }
    }

    // V: value times scale in FP32 (INT4: rounded to FP16 first, as decode), rounded to VType.
    if (!active[k]) continue;
    float values[8];
    if constexpr (Bits == 8) {
      const u32 words[2] = {v_raw[k].x, v_raw[k].y};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int byte = static_cast<int>(words[i / 4] >> (8 * (i % 4))) & 0xFF;
        values[i] = static_cast<float>(byte >= 128 ? byte - 256 : byte) * v_scale[k];
      }
    } else {
      dequantize_int4x8(values, v_raw[k].x, v_scale[k]);
    }
    *reinterpret_cast<uint4*>(static_cast<u8*>(params.v) + (packed_row[k] * HeadDim + channel) * 2) =
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
