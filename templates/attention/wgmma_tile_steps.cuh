// The Hopper attention kernel's steps on one key tile (attention_forward_wgmma.cuh), which the
// main loops (wgmma_full_int8_loops.cuh, wgmma_half_int8_loops.cuh) put in their orders: issuing
// the wgmmas of Q.K^T and P.V, folding an INT32 P.V into the output, and the softmax of a tile up
// to its P (OnlineSoftmax applied to the wgmma accumulators, which hold the m16n8 layout per warp).
#pragma once

#include "attention/online_softmax.cuh"
#include "attention/wgmma_pipeline.cuh"
#include "common/wgmma.cuh"

namespace intfa {
namespace kernels {

template <class Config>
struct WgmmaTileSteps : WgmmaPipeline<Config> {
  using typename WgmmaPipeline<Config>::Softmax;
  using typename WgmmaPipeline<Config>::SharedLayout;
  using typename WgmmaPipeline<Config>::BlockWork;
  using WgmmaPipeline<Config>::kScoreTiles;
  using WgmmaPipeline<Config>::kOutputTiles;
  using WgmmaPipeline<Config>::lane_k_scales;

  // ---- MMAs -------------------------------------------------------------------------------
  // Issues S = Q K^T for this warpgroup's 64 rows and the tile in `slot` (wgmma_wait completes
  // it). The descriptors are offsets from the low words of the Q tile and of slot 0's K tile, which
  // the compiler takes once, outside the loops (SharedTileDescriptor).
  __device__ __forceinline__ static void issue_score_tile(int (&s)[kScoreTiles][4],
                                                          const SharedLayout& shared, int group,
                                                          int slot) {
    constexpr int kSlab = Config::kSlabBytes;
    using Descriptor = SharedTileDescriptor<kSlab>;
    const u32 q_low = Descriptor::low_word(shared.q() + group * kWgmmaGroupRows * kSlab);
    const u32 k_low = Descriptor::low_word(shared.k(0));
    const u32 slot_units = static_cast<u32>(slot) * (Config::kStageBytes / 16);
    wgmma_fence();
#pragma unroll
    for (int step = 0; step < Config::kQkSteps; ++step) {
      const int slab = step * 32 / kSlab;
      const u32 k_units = static_cast<u32>(step * 32 % kSlab) / 16;
      const u64 a = Descriptor::at(q_low, slab * Config::kBlockM * kSlab / 16 + k_units);
      const u64 b =
          Descriptor::at(k_low, slot_units + slab * Config::kBlockN * kSlab / 16 + k_units);
      wgmma_s8s8_ss<Config::kBlockN>(s, a, b, step > 0);
    }
    wgmma_commit();
  }

  // Issues acc = P V over P.V steps [first_step, first_step + steps) for output columns
  // [chunk * kPvColumns, +kPvColumns) (wgmma_wait completes it).
  __device__ __forceinline__ static void issue_pv(int (&acc)[Config::kPvColumns / 8][4],
                                                  const u32 (&p)[Config::kPvSteps][4],
                                                  const SharedLayout& shared, int slot, int chunk,
                                                  int first_step, int steps) {
    using Descriptor = SharedTileDescriptor<Config::kBlockN>;
    const u32 v_low = Descriptor::low_word(shared.v(0));
    const u32 tile_units = static_cast<u32>(slot) * (Config::kStageBytes / 16) +
                           chunk * Config::kPvColumns * Config::kBlockN / 16;
    wgmma_fence();
#pragma unroll
    for (int inner = 0; inner < Config::kStepsPerFold; ++inner) {
      if (inner < steps) {
        const int step = first_step + inner;
        const u64 b = Descriptor::at(v_low, tile_units + static_cast<u32>(step * 2));
        wgmma_x8s8_rs<Config::kPvColumns, Config::kUnsignedP>(acc, p[step], b, inner > 0);
      }
    }
    wgmma_commit();
  }

  // Half INT8: issues o += P V for every output column (wgmma_wait completes it). P is the
  // 16-bit register A operand, V the caller's 16-bit tile as TMA wrote it (MN-major B: keys are
  // rows, MnMajorTileDescriptor), and the FP32 accumulator is the output itself.
  __device__ __forceinline__ static void issue_pv_16bit(float (&o)[kOutputTiles][4],
                                                        const u32 (&p)[Config::kPvSteps][4],
                                                        const SharedLayout& shared, int slot) {
    using Descriptor = MnMajorTileDescriptor<Config::kVSlabBytes>;
    constexpr int kChunkTiles = Config::kPvColumns / 8;
    const u32 v_low = Descriptor::low_word(shared.v(0));
    const u32 slot_units = static_cast<u32>(slot) * (Config::kStageBytes / 16);
    wgmma_fence();
#pragma unroll
    for (int chunk = 0; chunk < Config::kPvChunks; ++chunk) {
      float(&o_chunk)[kChunkTiles][4] =
          *reinterpret_cast<float(*)[kChunkTiles][4]>(&o[chunk * kChunkTiles][0]);
      const u32 chunk_units = chunk * (Config::kPvColumns / 64) * (Config::kVSlabBytes / 16);
#pragma unroll
      for (int step = 0; step < Config::kPvSteps; ++step) {
        const u64 b =
            Descriptor::at(v_low, slot_units + chunk_units + step * Descriptor::kUnitsPerK16);
        wgmma_f32_16bit_rs<Config::kPvColumns, Config::kVType == ElementType::kBF16>(o_chunk,
                                                                                     p[step], b);
      }
    }
    wgmma_commit();
  }

  // o[tile] += weight * acc, weight = gamma of the row [* the V block's channel scale].
  __device__ __forceinline__ static void fold_into_output(
      float (&o)[kOutputTiles][4], const int (&acc)[Config::kPvColumns / 8][4], int chunk,
      const float (&gamma)[2], const float* v_scales, LaneCoordinates coordinates) {
    constexpr int kChunkTiles = Config::kPvColumns / 8;
#pragma unroll
    for (int j = 0; j < kChunkTiles; ++j) {
      const int tile = chunk * kChunkTiles + j;
      float2 v_scale = make_float2(1.0f, 1.0f);
      if (v_scales != nullptr) {
        v_scale =
            *reinterpret_cast<const float2*>(v_scales + tile * 8 + 2 * coordinates.thread_in_group);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float weight = gamma[i >> 1] * ((i & 1) ? v_scale.y : v_scale.x);
        // Exact: |acc| <= 255 * 127 * 128 < 2^24.
        o[tile][i] = fmaf(weight, static_cast<float>(acc[j][i]), o[tile][i]);
      }
    }
  }

  // ---- softmax ----------------------------------------------------------------------------
  // One tile's P, quantized against its reference.
  struct TileP {
    u32 p[Config::kPvSteps][4];
    float reference[2];
  };

  struct RowState {
    float c[1][2];            // q_scale * softmax scale * log2(e) per row
    float running_max[1][2];  // log2 domain
    RowFrame frame[2];        // full INT8: the fixed frame of O and l
    float sum[1][2];          // half INT8: this lane's part of l, against the reference
  };

  // A tile's scores y (K scales applied, -inf where a key is not allowed).
  __device__ __forceinline__ static void scale_scores(float (&y)[1][kScoreTiles][4],
                                                      const int (&s)[kScoreTiles][4],
                                                      const float* k_scales, int first_key,
                                                      int warp_first_row, const BlockWork& work,
                                                      LaneCoordinates coordinates) {
    const int seq_kv = work.extent.seq_kv;
    const bool needs_mask =
        first_key + Config::kBlockN > seq_kv ||
        (Config::kCausal && first_key + Config::kBlockN - 1 > warp_first_row + work.causal_offset);
    float2 k_scale[kScoreTiles];
    if constexpr (!Config::kPerBlockK) lane_k_scales(k_scale, k_scales, coordinates);
    const int(&scores)[1][kScoreTiles][4] = reinterpret_cast<const int(&)[1][kScoreTiles][4]>(s);
    Softmax::scale_and_mask(y, scores, k_scale, needs_mask, first_key, warp_first_row, seq_kv,
                            work.causal_offset, coordinates);
  }

  // A tile's scores y and their row maxima in the log2 domain.
  // The tile's exponent multipliers go to c_tile (OnlineSoftmax::tile_multipliers).
  __device__ __forceinline__ static void scale_tile(
      float (&y)[1][kScoreTiles][4], float (&tile_max)[1][2],
      float (&c_tile)[1][2][Softmax::kKBlocks], const int (&s)[kScoreTiles][4],
      const RowState& rows, const float* k_scales, int first_key, int warp_first_row,
      const BlockWork& work, LaneCoordinates coordinates) {
    scale_scores(y, s, k_scales, first_key, warp_first_row, work, coordinates);
    Softmax::tile_multipliers(c_tile, rows.c, k_scales);
    Softmax::tile_row_max(tile_max, y, c_tile);
  }

  // Full INT8: a tile's exponent multipliers (OnlineSoftmax::tile_multipliers) and reference from
  // its scores y; the row maxima updated.
  __device__ __forceinline__ static void tile_reference(float (&reference)[2],
                                                        float (&c_tile)[1][2][Softmax::kKBlocks],
                                                        const float (&y)[1][kScoreTiles][4],
                                                        RowState& rows, const float* k_scales) {
    float tile_max[1][2];
    Softmax::tile_multipliers(c_tile, rows.c, k_scales);
    Softmax::tile_row_max(tile_max, y, c_tile);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      rows.running_max[0][half] = fmaxf(rows.running_max[0][half], tile_max[0][half]);
      reference[half] = Config::kTileMaxReference ? tile_max[0][half] : rows.running_max[0][half];
    }
  }

  // The tile's P, rounded against its reference into quantize_p_pair words (Softmax::gather_p
  // packs them into P's fragments).
  __device__ __forceinline__ static void round_p(u32 (&pairs)[kScoreTiles][2],
                                                 const float (&y)[1][kScoreTiles][4],
                                                 const float (&c_tile)[1][2][Softmax::kKBlocks],
                                                 const float (&reference)[2]) {
    Softmax::quantize_p_pairs(pairs, y, c_tile, reinterpret_cast<const float(&)[1][2]>(reference),
                              0);
  }

  __device__ __forceinline__ static void gather_p(TileP& tile, const u32 (&pairs)[kScoreTiles][2]) {
    Softmax::gather_p(reinterpret_cast<u32(&)[1][Config::kPvSteps][4]>(tile.p), pairs, 0);
  }

  // One tile's P, quantized against its reference.
  __device__ __forceinline__ static void quantize_tile(TileP& tile, const int (&s)[kScoreTiles][4],
                                                       RowState& rows, const float* k_scales,
                                                       int first_key, int warp_first_row,
                                                       const BlockWork& work,
                                                       LaneCoordinates coordinates) {
    float y[1][kScoreTiles][4];
    scale_scores(y, s, k_scales, first_key, warp_first_row, work, coordinates);
    float c_tile[1][2][Softmax::kKBlocks];
    tile_reference(tile.reference, c_tile, y, rows, k_scales);
    u32 pairs[kScoreTiles][2];
    round_p(pairs, y, c_tile, tile.reference);
    gather_p(tile, pairs);
  }

  // The factors that fold `tile`'s P.V into the output frame.
  __device__ __forceinline__ static void frame_tile(float (&gamma)[2], const TileP& tile,
                                                    RowState& rows, float (&o)[kOutputTiles][4]) {
    fold_factors(reinterpret_cast<float(&)[1][2]>(gamma),
                 reinterpret_cast<RowFrame(&)[1][2]>(rows.frame),
                 reinterpret_cast<const float(&)[1][2]>(tile.reference),
                 reinterpret_cast<float(&)[1][kOutputTiles][4]>(o));
  }

  // Adds `tile`'s integer row sums, weighted by its fold factors, to l. Called once the tile's
  // P.V no longer reads P (a wgmma's register operands may not be read while it runs), where
  // nothing waits on it: after the fold, not before the next MMA.
  __device__ __forceinline__ static void sum_tile(RowState& rows, const float (&gamma)[2],
                                                  const TileP& tile) {
    int row_sum[1][2];
    Softmax::p_row_sums(row_sum, reinterpret_cast<const u32(&)[1][Config::kPvSteps][4]>(tile.p));
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      rows.frame[half].sum =
          fmaf(gamma[half], small_int_to_float(row_sum[0][half]), rows.frame[half].sum);
    }
  }
};

}  // namespace kernels
}  // namespace intfa
