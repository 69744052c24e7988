// The Hopper attention kernel's staged epilogue (attention_forward_wgmma.cuh, d >= 128: see
// wgmma_params.h): the output rows go through shared memory so that global stores are whole
// 128-byte rows. Smaller heads use the portable kernel's store_output (epilogue.cuh).
#pragma once

#include "attention/epilogue.cuh"
#include "attention/wgmma_pipeline.cuh"
#include "common/copy.cuh"
#include "common/swizzle.cuh"

namespace intfa {
namespace kernels {

template <class Config>
struct WgmmaEpilogue : WgmmaPipeline<Config> {
  using typename WgmmaPipeline<Config>::SharedLayout;
  using typename WgmmaPipeline<Config>::BlockWork;
  using WgmmaPipeline<Config>::kOutputTiles;

  // The epilogue of one consumer warp (d >= 128, wgmma_params.h): its 16 rows normalised as
  // store_output does, written to the warp's staging tile with stmatrix and read back as 16-byte
  // chunks of a row, so that 8 lanes store 128 contiguous bytes. Stored from the fragments, each
  // instruction writes a 16-byte piece of 8 rows, half of each 32-byte sector: the epilogue took
  // 1.3 to 2.5 us of a d=128 block's 17 at N=1k (H100, timestamps). V's scales come from shared
  // memory (copy_v_scales), not from a load on this path. The staging tile is swizzled
  // (SwizzledTile), so neither the stmatrix nor the chunk reads have bank conflicts.
  __device__ __forceinline__ static void store_output_staged(
      const AttentionParams& attention, const SharedLayout& shared, const BlockWork& work,
      int warp_first_row, LaneCoordinates coordinates, const float (&o)[kOutputTiles][4],
      const float (&lane_sum)[1][2], const float (&log2_reference)[1][2]) {
    using Staging = SwizzledTile<Config::kOutputRowBytes>;
    // Half INT8 has no V scales (kEpilogueVScales = 0).
    constexpr bool kPerTensorV =
        Config::kEpilogueVScales > 0 && Config::kVGranularity == VScaleGranularity::kPerTensor;
    constexpr bool kPerChannelV =
        Config::kEpilogueVScales > 0 && Config::kVGranularity == VScaleGranularity::kPerChannel;
    if constexpr (Config::kEpilogueVScales > 0) mbarrier_wait(shared.v_scales_full(), 0);
    // Read again rather than kept through the main loop, where registers are short.
    const int consumer_warp = static_cast<int>(threadIdx.x / 32) - 4;
    const int lane = static_cast<int>(threadIdx.x % 32);
    const float* v_scales = shared.v_scales_generic();
    const float tensor_v_scale = kPerTensorV ? v_scales[0] : 1.0f;
    // Tail rows are normalised too (their sums are 0) and dropped at the global store.
    float row_scale[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float sum = quad_sum(lane_sum[0][half]);
      row_scale[half] = output_row_scale(sum, tensor_v_scale);
      const int row = warp_first_row + coordinates.group + 8 * half;
      if (row < work.extent.seq_q) {
        store_lse<Config>(attention, work.extent, row, sum, log2_reference[0][half], coordinates);
      }
    }
    auto channel_scale = [&](int dt) {
      if (!kPerChannelV) return make_float2(1.0f, 1.0f);
      return *reinterpret_cast<const float2*>(v_scales + dt * 8 + 2 * coordinates.thread_in_group);
    };
    // stmatrix j writes the 8x8 matrices (dt, half) = (2j, 0), (2j, 1), (2j + 1, 0), (2j + 1, 1);
    // lane l gives the address of row l % 8 of matrix l / 8.
    const u32 tile = shared.output(consumer_warp);
    const int matrix = lane >> 3;
    const int matrix_row = (lane & 7) + 8 * (matrix & 1);
#pragma unroll
    for (int j = 0; j < kOutputTiles / 2; ++j) {
      u32 words[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int dt = 2 * j + (i >> 1);
        words[i] = output_pair<Config>(o[dt], i & 1, row_scale[i & 1], channel_scale(dt));
      }
      const int dt = 2 * j + (matrix >> 1);
      store_matrix_x4(tile + Staging::offset(matrix_row, dt), words);
    }
    __syncwarp();
    u8* const out_head =
        static_cast<u8*>(attention.out) + work.batch * attention.out_strides.batch +
        work.head_q * attention.out_strides.head + work.extent.q_row0 * attention.out_strides.row;
    // Whole 16-byte stores where the output's rows allow them (validation asks 4-byte alignment).
    const u64 alignment_bits =
        reinterpret_cast<u64>(out_head) | static_cast<u64>(attention.out_strides.row);
    const bool wide = (alignment_bits & 15) == 0;
    const u8* const staged = shared.output_generic(consumer_warp);
#pragma unroll
    for (int i = 0; i < kOutputTiles / 2; ++i) {
      const int index = i * 32 + lane;
      const int row = index / kOutputTiles;
      const int chunk = index % kOutputTiles;
      const uint4 value = *reinterpret_cast<const uint4*>(staged + Staging::offset(row, chunk));
      // Rows past the sequence, and channels past the caller's head dim, are not stored.
      if (warp_first_row + row >= work.extent.seq_q || chunk * 8 >= attention.out_head_dim) {
        continue;
      }
      u8* const destination = out_head +
                              static_cast<i64>(warp_first_row + row) * attention.out_strides.row +
                              chunk * 16;
      if (wide) {
        *reinterpret_cast<uint4*>(destination) = value;
      } else {
        u32* const words = reinterpret_cast<u32*>(destination);
        words[0] = value.x;
        words[1] = value.y;
        words[2] = value.z;
        words[3] = value.w;
      }
    }
  }
};

}  // namespace kernels
}  // namespace intfa
