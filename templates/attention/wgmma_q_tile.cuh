// The Hopper attention kernel's Q tile (attention_forward_wgmma.cuh): each consumer warpgroup
// puts its own 64 rows of Q into shared memory, in the swizzle wgmma reads, either copying
// quantize_rows' INT8 rows (load_q_tile) or quantizing 16-bit rows itself (quantize_q_tile).
#pragma once

#include "attention/wgmma_pipeline.cuh"
#include "common/numeric.cuh"
#include "common/swizzle.cuh"
#include "quantize/rotate_row.cuh"

namespace intfa {
namespace kernels {

template <class Config>
struct WgmmaQTile : WgmmaPipeline<Config> {
  using typename WgmmaPipeline<Config>::SharedLayout;
  using typename WgmmaPipeline<Config>::BlockWork;

  // After a warpgroup has stored its rows with generic stores: visible to wgmma (the async
  // proxy), and all 64 of them written before any of its warps issues one, through the
  // warpgroup's own named barrier (ConsumerGroups + 1 + group; 1..ConsumerGroups pass turns).
  __device__ __forceinline__ static void publish_q_rows(int group) {
    fence_proxy_async_shared();
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + Config::kConsumerGroups + group) : "memory");
  }

  static constexpr int kQLanesPerRow = Config::kHeadDim / 8;
  static constexpr int kQRowsPerPass = 32 / kQLanesPerRow;  // per warp
  static constexpr int kQPasses = 16 / kQRowsPerPass;

  // What one lane's passes of quantize_q_tile read besides its rows: plain values, so that the
  // rotated passes can be called out of line with them (a reference to the kernel's parameters
  // would put those in local memory).
  struct QPassLane {
    float* q_dot_k_mean = nullptr;  // the (batch, head)'s LSE terms (kDotKMean), row 0
    int seq_q;
    int row0;  // the lane's first row in the sequence, and in the tile
    int tile_row0;
    int lane_in_row;
    u8* slab;  // the lane's 8 bytes of row 0 in the Q tile, and its 16-byte chunk
    int chunk;
    int source_lane;     // the lane that quantizes fragment rows group and group + 8
    int fragment_group;  // coordinates.group
    int lane_index;      // in the warp
    int row_in_pass;     // the lane's row among a pass's kQRowsPerPass
  };
  // The lane's rows as loaded (16-bit), and K's channel means at its channels (kDotKMean; else
  // zeros, never read).
  struct QPassRows {
    uint4 raw[kQPasses];
    float mean[8] = {};
  };

  // Full INT8 takes the warp's row scales from warp_row_scales: two IEEE divisions per lane for
  // the warp's 16 rows, where each pass divides twice. Its d=128 4k causal kernel measured 3.5%
  // faster, within 0.5% at d=64 and non-causal. Half INT8's ran 1.2-1.4% slower with it (H200;
  // bench/history/2026-11-30.md, "The Q pass's divisions"), and rotated rows would have to be
  // kept or rotated again: both divide per pass.
  template <bool Rotate>
  static constexpr bool kScalesPerPass = Rotate || !Config::kFullInt8;

  // The passes of quantize_q_tile: q . mean, the rotation (Rotate), the row's scale, the INT8
  // stores; returns the scales of the lane's fragment rows group and group + 8.
  template <bool Rotate>
  __device__ __forceinline__ static float2 quantize_q_passes(const QPassLane& lane,
                                                             const QPassRows& rows) {
    // Per pass: the row's scale (kScalesPerPass), or its maximum for warp_row_scales.
    float pass_value[kQPasses];
#pragma unroll
    for (int pass = 0; pass < kQPasses; ++pass) {
      float values[8];
      unpack_8_values<Config::kQType>(values, rows.raw[pass]);
      const int row = lane.row0 + pass * kQRowsPerPass;
      if constexpr (Config::kDotKMean) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot = fmaf(values[i], rows.mean[i], dot);
        dot = row_sum<kQLanesPerRow>(dot);
        if (lane.lane_in_row == 0 && row < lane.seq_q) lane.q_dot_k_mean[row] = dot;
      }
      // Every lane takes part: rows past the sequence are zeros.
      if constexpr (Rotate) rotate_row<kQLanesPerRow>(values, lane.lane_in_row);
      if constexpr (kScalesPerPass<Rotate>) {
        const RowScale scale = row_scale(row_max_abs<kQLanesPerRow>(values), 127.0f);
        store_q_row(lane, pass, values, scale);
        pass_value[pass] = scale.scale;
      } else {
        pass_value[pass] = row_max_abs<kQLanesPerRow>(values);
      }
    }
    if constexpr (kScalesPerPass<Rotate>) {
      float2 q_scale_of_row = make_float2(0.0f, 0.0f);
#pragma unroll
      for (int pass = 0; pass < kQPasses; ++pass) {
        const float row_scale_value =
            __shfl_sync(0xFFFFFFFFu, pass_value[pass], lane.source_lane);
        if (lane.fragment_group / kQRowsPerPass == pass) q_scale_of_row.x = row_scale_value;
        if ((lane.fragment_group + 8) / kQRowsPerPass == pass) q_scale_of_row.y = row_scale_value;
      }
      return q_scale_of_row;
    } else {
      const RowScale own = warp_row_scales(lane, pass_value);
#pragma unroll
      for (int pass = 0; pass < kQPasses; ++pass) {
        float values[8];
        unpack_8_values<Config::kQType>(values, rows.raw[pass]);
        // The scale of this lane's row of the pass, warp row row_in_pass + pass * kQRowsPerPass,
        // is the one lane (that warp row) computed.
        const int warp_row = lane.row_in_pass + pass * kQRowsPerPass;
        RowScale scale;
        scale.scale = __shfl_sync(0xFFFFFFFFu, own.scale, warp_row);
        scale.inverse = __shfl_sync(0xFFFFFFFFu, own.inverse, warp_row);
        scale.clamps = !(scale.scale >= kSmallestNormal);
        store_q_row(lane, pass, values, scale);
      }
      return make_float2(__shfl_sync(0xFFFFFFFFu, own.scale, lane.fragment_group),
                         __shfl_sync(0xFFFFFFFFu, own.scale, lane.fragment_group + 8));
    }
  }

  // The scales of the warp's 16 rows, row w in lanes w and w + 16 (row_scale, as each pass would
  // compute it). `amax`: each pass's row maximum, as every lane of the row has it.
  __device__ __forceinline__ static RowScale warp_row_scales(const QPassLane& lane,
                                                             const float (&amax)[kQPasses]) {
    const int warp_row = lane.lane_index % 16;
    const int holder = (warp_row % kQRowsPerPass) * kQLanesPerRow;
    float own = 0.0f;
#pragma unroll
    for (int pass = 0; pass < kQPasses; ++pass) {
      const float value = __shfl_sync(0xFFFFFFFFu, amax[pass], holder);
      if (warp_row / kQRowsPerPass == pass) own = value;
    }
    return row_scale(own, 127.0f);
  }

  // One pass's row quantized with its scale and stored into the Q tile.
  __device__ __forceinline__ static void store_q_row(const QPassLane& lane, int pass,
                                                     const float (&values)[8], RowScale scale) {
    using Slab = SwizzledTile<Config::kSlabBytes>;
    u32 quantized[8];
    quantize_8(quantized, values, scale.inverse, 127, scale.clamps);
    store_int8x8(lane.slab + Slab::offset(lane.tile_row0 + pass * kQRowsPerPass, lane.chunk),
                 quantized);
  }

  // The rotated passes of a tile whose head automatic rotation chose (kAuto), out of line: most
  // tiles run the unrotated passes, and inlined the rotated copy cost them 2-4% of the kernel at
  // 1k tokens; out of line about 1% is left, which no form of the rotated code measured removed
  // (bench/history/2026-11-30.md). The arguments go through the stack (160 bytes at d=128, 288
  // at d=256), which the rotated tiles pay: 0.6-1.5% of the kernel where every head rotates
  // (H200, d=128, 1k and 4k).
  __device__ __noinline__ static float2 quantize_rotated_q_passes(const QPassLane lane,
                                                                  const QPassRows rows) {
    return quantize_q_passes<true>(lane, rows);
  }

  // The kernel's own Q pass (kQuantizesQ): this warpgroup's 64 rows of 16-bit Q, quantized per
  // token into the Q tile's slabs where the TMA load would have put them (same swizzle). Each
  // warp takes the 16 rows its MMA fragments cover, HeadDim / 8 lanes per row with 8 channels
  // each: the lanes, the reductions (common/numeric.cuh) and the rounding of quantize_rows, so
  // the INT8 rows, scales and LSE terms are bit for bit the ones that pass would write (with
  // kRotateQ, rotated as it rotates them: rotate_row, after q . mean). All of
  // the warp's row loads are issued first; their latency overlaps the producer's first K/V
  // loads. Each lane gets its two rows' scales (fragment rows group and group + 8) by shuffles
  // (quantize_q_passes). The warpgroup then syncs on its own named barrier: wgmma reads all 64
  // rows.
  __device__ __forceinline__ static void quantize_q_tile(const WgmmaAttentionParams& params,
                                                         const SharedLayout& shared,
                                                         const BlockWork& work, int group,
                                                         int thread, LaneCoordinates coordinates,
                                                         float (&q_scale_of_row)[2]) {
    constexpr int kSlab = Config::kSlabBytes;
    const WgmmaQInput& input = params.q_input;
    const int lane_index = thread & 31;
    QPassLane lane;
    lane.lane_in_row = lane_index % kQLanesPerRow;
    lane.lane_index = lane_index;
    lane.row_in_pass = lane_index / kQLanesPerRow;
    const int channel = lane.lane_in_row * 8;
    // The warp's first row within the block's tile, and in the sequence.
    lane.tile_row0 = group * kWgmmaGroupRows + (thread >> 5) * 16 + lane_index / kQLanesPerRow;
    lane.row0 = work.first_row + lane.tile_row0;
    lane.seq_q = work.extent.seq_q;
    // Packed sequences: the batch stride is 0, the sequence's rows start at q_row0, and K's
    // per-head buffers (channel means, rotation decisions) are the packed tensor's, batch 0's.
    const u8* head_q = static_cast<const u8*>(input.q) + work.batch * input.strides.batch +
                       work.head_q * input.strides.head +
                       (Config::kVarlen ? work.extent.q_row0 * input.strides.row : 0) + channel * 2;
    const i64 kv_head = static_cast<i64>(Config::kVarlen ? 0 : work.batch) *
                            params.attention.heads_kv +
                        work.head_kv;
    // The tile is one query head's: its rows are rotated alike. The decision's load first, in
    // flight with the rows' (its latency would otherwise precede the first rotation).
    const bool rotates =
        Config::kRotateQ == QKRotation::kAuto && input.rotated_heads[kv_head] != 0;
    QPassRows rows;
#pragma unroll
    for (int pass = 0; pass < kQPasses; ++pass) {
      const int row = lane.row0 + pass * kQRowsPerPass;
      // Rows past the sequence and channels past the caller's head dim read as zeros.
      rows.raw[pass] = row < work.extent.seq_q && channel < params.attention.out_head_dim
                           ? *reinterpret_cast<const uint4*>(head_q + row * input.strides.row)
                           : make_uint4(0, 0, 0, 0);
    }
    if constexpr (Config::kDotKMean) {
      const float* head_mean = input.k_channel_mean + kv_head * Config::kHeadDim + channel;
#pragma unroll
      for (int i = 0; i < 8; ++i) rows.mean[i] = head_mean[i];
      lane.q_dot_k_mean = input.q_dot_k_mean + work.extent.q_scale0;
    }
    // Fragment row r (0..15 of the warp) is quantized in pass r / kQRowsPerPass by the lanes from
    // (r % kQRowsPerPass) * kQLanesPerRow; rows group and group + 8 share that lane (8 is a
    // multiple of kQRowsPerPass).
    lane.fragment_group = coordinates.group;
    lane.source_lane = (coordinates.group % kQRowsPerPass) * kQLanesPerRow;
    lane.slab =
        shared.q_generic() + (channel / kSlab) * Config::kBlockM * kSlab + (channel % kSlab) % 16;
    lane.chunk = (channel % kSlab) / 16;
    float2 scales;
    if constexpr (Config::kRotateQ == QKRotation::kOn) {
      scales = quantize_q_passes<true>(lane, rows);
    } else if constexpr (Config::kRotateQ == QKRotation::kAuto) {
      scales =
          rotates ? quantize_rotated_q_passes(lane, rows) : quantize_q_passes<false>(lane, rows);
    } else {
      scales = quantize_q_passes<false>(lane, rows);
    }
    q_scale_of_row[0] = scales.x;
    q_scale_of_row[1] = scales.y;
    publish_q_rows(group);
  }

  // INT8 Q (quantize_rows' rows: the kernel without its own Q pass): each consumer warpgroup
  // copies its 64 rows into the Q tile where a TMA load would put them (same swizzle), as
  // quantize_q_tile stores its rows, HeadDim / 16 lanes per row with 16 bytes each; rows past
  // the sequence are zeros, as TMA fills them. The producer then starts on the first K and V at
  // once instead of loading the block's Q before them, and the rows' latency overlaps those
  // loads. The warpgroup syncs on its own named barrier: wgmma reads all 64 rows.
  __device__ __forceinline__ static void load_q_tile(const AttentionParams& attention,
                                                     const SharedLayout& shared,
                                                     const BlockWork& work, int group, int thread) {
    constexpr int kLanesPerRow = Config::kHeadDim / 16;
    constexpr int kRowsPerPass = 32 / kLanesPerRow;  // per warp
    constexpr int kPasses = 16 / kRowsPerPass;
    constexpr int kSlab = Config::kSlabBytes;
    using Slab = SwizzledTile<kSlab>;
    const int lane = thread & 31;
    const int byte = (lane % kLanesPerRow) * 16;
    const int tile_row0 = group * kWgmmaGroupRows + (thread >> 5) * 16 + lane / kLanesPerRow;
    const int row0 = work.first_row + tile_row0;
    // Packed sequences: the batch stride is 0 and the sequence's rows start at q_row0.
    const u8* head_q = static_cast<const u8*>(attention.q) +
                       work.batch * attention.q_strides.batch +
                       work.head_q * attention.q_strides.head +
                       (Config::kVarlen ? work.extent.q_row0 * attention.q_strides.row : 0) + byte;
    uint4 rows[kPasses];
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int row = row0 + pass * kRowsPerPass;
      rows[pass] = row < work.extent.seq_q
                       ? *reinterpret_cast<const uint4*>(head_q + row * attention.q_strides.row)
                       : make_uint4(0, 0, 0, 0);
    }
    u8* const tile = shared.q_generic();
    u8* const slab = tile + (byte / kSlab) * Config::kBlockM * kSlab;
    const int chunk = (byte % kSlab) / 16;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      *reinterpret_cast<uint4*>(slab + Slab::offset(tile_row0 + pass * kRowsPerPass, chunk)) =
          rows[pass];
    }
    publish_q_rows(group);
  }
};

}  // namespace kernels
}  // namespace intfa
