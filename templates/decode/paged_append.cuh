// Append: new FP16/BF16 K and V rows -> quantized rows and scales in their cache slots (vLLM's
// reshape_and_cache with quantization). Each thread owns 16 consecutive channels of one (token,
// head) row of K or V (two 16-byte loads) in each of kPagedAppendRowSets row sets; the threads
// of a row (INT8) or of a 32-channel group (INT4) reduce max|x| with shuffles, so every input
// byte is read once and every cache byte written once. Rounding: README.md, "Append".
#pragma once

#include "common/grid_dependency.cuh"
#include "common/numeric.cuh"
#include "decode/paged_params.h"

namespace intfa {
namespace kernels {

template <int HeadDim, int Bits>
struct PagedAppendConfig {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static_assert(Bits == 8 || Bits == 4, "8 or 4 bits");
  static constexpr int kChannels = kPagedAppendChannels;  // a thread's, of one row
  static constexpr int kThreadsPerRow = HeadDim / kChannels;
  static constexpr int kRowsPerSet = kPagedRowThreads / kThreadsPerRow;
  static_assert(kRowsPerSet * kPagedAppendRowSets == paged_append_rows_per_block(HeadDim),
                "the host's grid");
  // The lanes that share one scale: the whole row (INT8) or one group (INT4).
  static constexpr int kThreadsPerScale = Bits == 8 ? kThreadsPerRow : kPagedInt4Group / kChannels;
  static_assert(kPagedInt4Group % kChannels == 0, "a thread's channels in one INT4 group");
  static_assert(kChannels == 16, "two 16-byte loads of 8 values a row");
  static constexpr float kRange = Bits == 8 ? 127.0f : 7.0f;
  static constexpr int kRowBytes = paged_row_bytes(HeadDim, Bits);
};

// A block takes kPagedAppendRowSets consecutive row sets of K (blockIdx.y 0) or V (1), each
// set the rows its threads cover at once, and issues all their slot loads, then all their row
// loads, before it quantizes any: a thread has two 16-byte loads in flight per row set.
// Written one row per thread with a 64-bit division per row, it was bound by the instructions
// it issued (ncu on the H200, 2026-11-27: 82% of the issue slots busy at 28% of DRAM bandwidth),
// so the per-row work is kept small: row indices divide by heads_kv through a host-made
// multiplier, which tensor a block reads is uniform, and quantize_8 is one F2I per value.
template <int HeadDim, int Bits, ElementType InputType>
__global__ void __launch_bounds__(kPagedRowThreads) paged_append(const PagedAppendParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
  using Config = PagedAppendConfig<HeadDim, Bits>;
  constexpr int kSets = kPagedAppendRowSets;
  const PagedCacheParams& cache = params.cache;
  const int lane_in_row = threadIdx.x % Config::kThreadsPerRow;
  const int channel = lane_in_row * Config::kChannels;
  const bool is_v = blockIdx.y != 0;
  const u16* input = static_cast<const u16*>(is_v ? params.v : params.k) + channel;
  const i64 token_stride = is_v ? params.v_token_stride : params.k_token_stride;
  const i64 head_stride = is_v ? params.v_head_stride : params.k_head_stride;
  const float* k_offset = is_v ? nullptr : cache.k_offset;
  const int first_row = static_cast<int>(blockIdx.x) * paged_append_rows_per_block(HeadDim) +
                        static_cast<int>(threadIdx.x) / Config::kThreadsPerRow;

  int head[kSets], slot[kSets];
  const u16* row_input[kSets];
#pragma unroll
  for (int k = 0; k < kSets; ++k) {
    const int row = first_row + k * Config::kRowsPerSet;
    const int token = fast_divide(row, params.heads_kv_divisor);
    head[k] = row - token * cache.heads_kv;
    // Rows past the end still take part in the shuffles, with zeros, as skipped tokens do.
    slot[k] = row < params.rows ? params.slot_mapping[token] : -1;
    row_input[k] = input + token * token_stride + head[k] * head_stride;
  }
  uint4 raw[kSets][2];  // channels channel .. + 7, then + 8 .. + 15
#pragma unroll
  for (int k = 0; k < kSets; ++k) {
    raw[k][0] = raw[k][1] = make_uint4(0, 0, 0, 0);
    if (slot[k] >= 0) {
      raw[k][0] = reinterpret_cast<const uint4*>(row_input[k])[0];
      raw[k][1] = reinterpret_cast<const uint4*>(row_input[k])[1];
    }
  }

  u8* const data = is_v ? cache.v_data : cache.k_data;
  void* const scales = is_v ? cache.v_scale : cache.k_scale;
#pragma unroll
  for (int k = 0; k < kSets; ++k) {
    float values[2][8];  // channels channel .. + 7, then + 8 .. + 15
    unpack_8_values<InputType>(values[0], raw[k][0]);  // zeros for an inactive row
    unpack_8_values<InputType>(values[1], raw[k][1]);
    if (k_offset != nullptr && slot[k] >= 0) {
      // Loaded here, not with the rows: the same few KB for every token, so L1 hits, and holding
      // them from the loads on would take 64 more registers (with 8 channels a thread, 32 of them
      // cost a third of the resident warps).
      const float* row_offset = k_offset + head[k] * HeadDim + channel;
      if ((reinterpret_cast<u64>(k_offset) & 15) == 0) {  // a torch allocation's, say
#pragma unroll
        for (int part = 0; part < 4; ++part) {
          const float4 offset = reinterpret_cast<const float4*>(row_offset)[part];
          float* four = values[part / 2] + 4 * (part % 2);
          four[0] -= offset.x, four[1] -= offset.y, four[2] -= offset.z, four[3] -= offset.w;
        }
      } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) values[i / 8][i % 8] -= row_offset[i];
      }
    }
    float magnitudes[Config::kChannels];
#pragma unroll
    for (int i = 0; i < Config::kChannels; ++i) magnitudes[i] = values[i / 8][i % 8];
    const float amax = row_max_abs<Config::kThreadsPerScale>(magnitudes);

    float scale = divide_rn(amax, Config::kRange);
    u16 scale_bits = 0;
    // |x * inverse| < range + 1/2 needs no clamp while the scale is a normal value of the type
    // it is stored in: FP32 for INT8 (as row_scale), FP16 for INT4, whose scale also saturates
    // beyond FP16's range (rather than becoming infinity) and whose values then clamp to +-7.
    const bool clamps = Bits == 8 ? !(scale >= kSmallestNormal)
                                  : !(scale >= 6.10351562e-05f && scale <= 65504.0f);  // 2^-14
    if (Bits == 4) {
      // The FP16 scale that is stored is the one the values are quantized against.
      scale_bits = float_to_f16_bits(fminf(scale, 65504.0f));
      scale = f16_to_float(scale_bits);
    }
    // INT8 as quantize_rows (zero when amax is); INT4 zero when the stored scale is.
    const bool nonzero = Bits == 8 ? amax > 0.0f : scale > 0.0f;
    const float inverse = nonzero ? divide_rn(1.0f, scale) : 0.0f;
    u32 quantized[2][8];
    quantize_8(quantized[0], values[0], inverse, static_cast<int>(Config::kRange), clamps);
    quantize_8(quantized[1], values[1], inverse, static_cast<int>(Config::kRange), clamps);
    // Inactive rows (past the end, skipped tokens) computed with zeros and store nothing.
    if (slot[k] < 0) continue;

    // Below 2^31: the host checks num_pages * heads_kv * page_size.
    const int cache_row = paged_cache_row(cache, slot[k] >> cache.page_shift, head[k], slot[k]);
    u8* const row_data = data + static_cast<i64>(cache_row) * Config::kRowBytes;
    if (Bits == 8) {
      store_int8x16(row_data + channel, quantized[0], quantized[1]);
      if (lane_in_row == 0) static_cast<float*>(scales)[cache_row] = scale;
    } else {
      *reinterpret_cast<uint2*>(row_data + channel / 2) =
          make_uint2(pack_int4x8(quantized[0]), pack_int4x8(quantized[1]));
      if (channel % kPagedInt4Group == 0) {
        constexpr int kGroups = HeadDim / kPagedInt4Group;
        static_cast<u16*>(scales)[cache_row * kGroups + channel / kPagedInt4Group] = scale_bits;
      }
    }
  }
}

}  // namespace kernels
}  // namespace intfa
