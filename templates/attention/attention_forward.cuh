// INT-FlashAttention forward (the paper's Algorithm 1 and the variants of README.md) with
// warp-level tensor-core MMAs, for sm_80 and later.
//
// One block computes BlockM query rows of one (batch, query head); each warp owns 16 or 32 of
// those rows and walks the keys in tiles of BlockN, Stages tiles of K and V in flight (cp.async).
// Per tile: S = Q K^T (INT8 or INT4 MMA, Q kept in registers), the online softmax in the log2
// domain, P quantized to 8 bits (or kept in 16-bit floats for half INT8), O += P V.
//
// FP32 state of a row is kept relative to a fixed per-row reference `frame` (the first finite
// reference the row sees): O_frame = sum_t 2^(ref_t - frame) * (P_t V_t), and likewise l. A new
// maximum therefore never rescales O; only the factor 2^(ref_t - frame) of a folded tile changes.
// With the running-max reference, P V accumulates in INT32 across tiles and is folded into O_frame
// only when the reference moves (rare once the maximum has settled).
#pragma once

#include "attention/attention_config.cuh"
#include "attention/attention_params.h"
#include "attention/epilogue.cuh"
#include "attention/online_softmax.cuh"
#include "attention/tile_loads.cuh"
#include "common/copy.cuh"
#include "common/grid_dependency.cuh"
#include "common/kernel_enums.h"
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "common/swizzle.cuh"

namespace intfa {
namespace kernels {

// Per-lane byte offsets, inside a swizzled tile whose rows are the n dimension, of the
// ldmatrix.x4 that reads the B fragments of two n8 tiles (rows 0..15) x 32 bytes of k at k-step
// `step`. Rows 16*pair.. add pair * 16 * RowBytes: the swizzle's XOR only depends on the lane,
// so these offsets are computed once per kernel instead of once per tile.
template <int RowBytes, int Steps>
struct BFragmentOffsets {
  u32 offset[Steps];

  __device__ __forceinline__ explicit BFragmentOffsets(int lane) {
    const int row = ((lane >> 4) << 3) + (lane & 7);
#pragma unroll
    for (int step = 0; step < Steps; ++step) {
      offset[step] = static_cast<u32>(SwizzledTile<RowBytes>::offset(row, step * 2 + ((lane >> 3) & 1)));
    }
  }

  __device__ __forceinline__ void load(u32 (&b)[4], u32 tile, int pair, int step) const {
    load_matrix_x4(b, tile + offset[step] + pair * 16 * RowBytes);
  }
};

template <class Config>
struct AttentionKernel {
  static constexpr int kMTiles = Config::kMTiles;
  static constexpr int kScoreTiles = Config::kScoreTiles;
  static constexpr int kOutputTiles = Config::kOutputTiles;

  // ---- Q.K^T ------------------------------------------------------------------------------
  __device__ __forceinline__ static void load_q_fragments(u32 (&q)[kMTiles][Config::kQkSteps][4],
                                                          const u8* q_tile, int warp_row0,
                                                          int lane) {
    using Tile = SwizzledTile<Config::kQkRowBytes>;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int step = 0; step < Config::kQkSteps; ++step) {
        const int row = warp_row0 + mt * 16 + (((lane >> 3) & 1) << 3) + (lane & 7);
        const int chunk = step * 2 + (lane >> 4);
        load_matrix_x4(q[mt][step], shared_address(q_tile + Tile::offset(row, chunk)));
      }
    }
  }

  using KFragments = BFragmentOffsets<Config::kQkRowBytes, Config::kQkSteps>;
  using VFragments = BFragmentOffsets<Config::kVRowBytes, Config::kPvSteps>;

  __device__ __forceinline__ static void score_tile(int (&s)[kMTiles][kScoreTiles][4],
                                                    const u32 (&q)[kMTiles][Config::kQkSteps][4],
                                                    u32 k_tile, const KFragments& fragments) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kScoreTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) s[mt][nt][i] = 0;
#pragma unroll
    for (int step = 0; step < Config::kQkSteps; ++step) {
#pragma unroll
      for (int pair = 0; pair < kScoreTiles / 2; ++pair) {
        u32 b[4];
        fragments.load(b, k_tile, pair, step);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          if (Config::kQkBits == 8) {
            mma_s8s8_m16n8k32(s[mt][2 * pair], q[mt][step], b[0], b[1]);
            mma_s8s8_m16n8k32(s[mt][2 * pair + 1], q[mt][step], b[2], b[3]);
          } else {
            mma_s4s4_m16n8k64(s[mt][2 * pair], q[mt][step], b[0], b[1]);
            mma_s4s4_m16n8k64(s[mt][2 * pair + 1], q[mt][step], b[2], b[3]);
          }
        }
      }
    }
  }

  __device__ __forceinline__ static void mma_pv(int (&d)[4], const u32 (&p)[4], u32 b0, u32 b1) {
    if (Config::kUnsignedP) {
      mma_u8s8_m16n8k32(d, p, b0, b1);
    } else {
      mma_s8s8_m16n8k32(d, p, b0, b1);
    }
  }

  // Persistent accumulation: acc += P V over the whole tile.
  __device__ __forceinline__ static void accumulate_pv(
      int (&acc)[kMTiles][kOutputTiles][4], const u32 (&p)[kMTiles][Config::kPvSteps][4],
      u32 v_tile, const VFragments& fragments) {
#pragma unroll
    for (int pair = 0; pair < kOutputTiles / 2; ++pair) {
#pragma unroll
      for (int step = 0; step < Config::kPvSteps; ++step) {
        u32 b[4];
        fragments.load(b, v_tile, pair, step);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_pv(acc[mt][2 * pair], p[mt][step], b[0], b[1]);
          mma_pv(acc[mt][2 * pair + 1], p[mt][step], b[2], b[3]);
        }
      }
    }
  }

  // Per-tile accumulation: O_frame += gamma * (P V) [* per-block V scale], through small INT32
  // partial sums per pair of output tiles.
  __device__ __forceinline__ static void fold_pv_tile(
      float (&o)[kMTiles][kOutputTiles][4], const u32 (&p)[kMTiles][Config::kPvSteps][4],
      const float (&gamma)[kMTiles][2], u32 v_tile, const VFragments& fragments,
      const float* v_block_scales, LaneCoordinates coordinates) {
    // Steps sharing one V scale block fold together (the whole tile when scales are per tensor
    // or per channel).
    constexpr int kStepsPerFold =
        Config::kPerBlockV ? (kVTokenBlock / 32 < Config::kPvSteps ? kVTokenBlock / 32
                                                                   : Config::kPvSteps)
                           : Config::kPvSteps;
#pragma unroll
    for (int pair = 0; pair < kOutputTiles / 2; ++pair) {
#pragma unroll
      for (int fold = 0; fold < Config::kPvSteps / kStepsPerFold; ++fold) {
        int partial[kMTiles][2][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) partial[mt][j][i] = 0;
#pragma unroll
        for (int inner = 0; inner < kStepsPerFold; ++inner) {
          const int step = fold * kStepsPerFold + inner;
          u32 b[4];
          fragments.load(b, v_tile, pair, step);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            mma_pv(partial[mt][0], p[mt][step], b[0], b[1]);
            mma_pv(partial[mt][1], p[mt][step], b[2], b[3]);
          }
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          float2 v_scale = make_float2(1.0f, 1.0f);
          if (Config::kPerBlockV) {
            const int channel = (2 * pair + j) * 8 + 2 * coordinates.thread_in_group;
            v_scale = *reinterpret_cast<const float2*>(v_block_scales +
                                                       fold * Config::kHeadDim + channel);
          }
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const float weight =
                  Config::kPerBlockV ? gamma[mt][i >> 1] * ((i & 1) ? v_scale.y : v_scale.x)
                                     : gamma[mt][i >> 1];
              o[mt][2 * pair + j][i] =
                  fmaf(weight, small_int_to_float(partial[mt][j][i]), o[mt][2 * pair + j][i]);
            }
          }
        }
      }
    }
  }

  // ---- half INT8: P and V in 16-bit floats, FP32 accumulation --------------------------------
  // Half INT8: V rows are keys. Matrices (keys +0..7 | +8..15) x (channels +0..7 | +8..15) are
  // read transposed; the swizzle XOR depends on the lane only, so the offset of each channel pair
  // is computed once and a k-step adds 16 rows.
  struct HalfVFragments {
    u32 offset[kOutputTiles / 2];
    __device__ __forceinline__ explicit HalfVFragments(int lane) {
      const int row = (((lane >> 3) & 1) << 3) + (lane & 7);
#pragma unroll
      for (int pair = 0; pair < kOutputTiles / 2; ++pair) {
        offset[pair] = static_cast<u32>(
            SwizzledTile<Config::kVRowBytes>::offset(row, pair * 2 + (lane >> 4)));
      }
    }
  };

  __device__ __forceinline__ static void accumulate_pv_16bit(
      float (&o)[kMTiles][kOutputTiles][4], const u32 (&p)[kMTiles][Config::kPvSteps][4],
      u32 v_tile, const HalfVFragments& fragments) {
#pragma unroll
    for (int step = 0; step < Config::kPvSteps; ++step) {
#pragma unroll
      for (int pair = 0; pair < kOutputTiles / 2; ++pair) {
        u32 b[4];
        load_matrix_x4_transposed(
            b, v_tile + fragments.offset[pair] + step * 16 * Config::kVRowBytes);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          if (Config::kVType == ElementType::kF16) {
            mma_f16_m16n8k16(o[mt][2 * pair], p[mt][step], b[0], b[1]);
            mma_f16_m16n8k16(o[mt][2 * pair + 1], p[mt][step], b[2], b[3]);
          } else {
            mma_bf16_m16n8k16(o[mt][2 * pair], p[mt][step], b[0], b[1]);
            mma_bf16_m16n8k16(o[mt][2 * pair + 1], p[mt][step], b[2], b[3]);
          }
        }
      }
    }
  }
};

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocksPerSm)
    attention_forward(const AttentionParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
  using Kernel = AttentionKernel<Config>;
  using Softmax = OnlineSoftmax<Config>;
  constexpr int kMTiles = Config::kMTiles;
  constexpr int kScoreTiles = Config::kScoreTiles;
  constexpr int kOutputTiles = Config::kOutputTiles;
  constexpr int kStages = Config::kStages;

  extern __shared__ __align__(128) u8 shared[];
  u8* const q_tile = shared;
  auto stage = [&](int slot) { return shared + Config::kQTileBytes + slot * Config::kStageBytes; };
  auto k_tile = [&](int slot) { return stage(slot); };
  auto v_tile = [&](int slot) { return stage(slot) + Config::kKTileBytes; };
  auto k_scales = [&](int slot) {
    return reinterpret_cast<float*>(stage(slot) + Config::kKTileBytes + Config::kVTileBytes);
  };
  auto v_block_scales = [&](int slot) {
    return reinterpret_cast<float*>(stage(slot) + Config::kKTileBytes + Config::kVTileBytes +
                                    Config::kKScaleBytes);
  };

  // Causal blocks near the diagonal have the least work: schedule the longest rows first.
  const int m_block = Config::kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int head_q = blockIdx.y;
  const int batch = blockIdx.z;
  const int head_kv = head_q / (params.heads_q / params.heads_kv);
  const int first_row = m_block * Config::kBlockM;
  const int thread = threadIdx.x;
  const int lane = thread & 31;
  const int warp_row0 = (thread >> 5) * kMTiles * 16;
  const LaneCoordinates coordinates{lane >> 2, lane & 3};
  const SequenceExtent extent = sequence_extent<Config::kVarlen, Config::kPerBlockK>(params, batch, head_q, head_kv);
  // The grid covers the longest sequence; blocks past the end of a shorter one have no rows.
  if (Config::kVarlen && first_row >= extent.seq_q) return;
  const int causal_offset = extent.seq_kv - extent.seq_q;

  const AttentionTileLoader<Config> loader(params, batch, head_q, head_kv, extent, thread);
  const typename Kernel::KFragments k_fragments(lane);
  const typename Kernel::VFragments v_fragments(lane);
  const typename Kernel::HalfVFragments half_v_fragments(lane);

  // Key tiles this block visits: all, or up to the diagonal of its last row.
  int tiles = (extent.seq_kv + Config::kBlockN - 1) / Config::kBlockN;
  if (Config::kCausal) {
    const int last_visible_key = first_row + Config::kBlockM - 1 + causal_offset;
    tiles = last_visible_key < 0 ? 0 : min(tiles, last_visible_key / Config::kBlockN + 1);
  }

  loader.load_q(q_tile, first_row);
  commit_async_copies();
#pragma unroll
  for (int slot = 0; slot < kStages - 1; ++slot) {
    if (slot < tiles) {
      loader.load_k(k_tile(slot), k_scales(slot), slot * Config::kBlockN);
      loader.load_v(v_tile(slot), v_block_scales(slot), slot * Config::kBlockN);
    }
    commit_async_copies();
  }

  // c = q_scale * softmax scale * log2(e), kept positive so that -inf * c stays -inf.
  float c[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = first_row + warp_row0 + mt * 16 + coordinates.group + 8 * half;
      const float q_scale = row < extent.seq_q ? params.q_scale[extent.q_scale0 + row] : 0.0f;
      c[mt][half] = fmaxf(q_scale * params.scale_log2, 1e-30f);
    }

  wait_async_copies<kStages - 1>();
  __syncthreads();
  u32 q[kMTiles][Config::kQkSteps][4];
  Kernel::load_q_fragments(q, q_tile, warp_row0, lane);

  float o[kMTiles][kOutputTiles][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int dt = 0; dt < kOutputTiles; ++dt)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[mt][dt][i] = 0.0f;
  float running_max[kMTiles][2];
  RowFrame rows[kMTiles][2];
  float half_row_sum[kMTiles][2];
  // Persistent INT32 accumulation (full INT8, running max): the reference its sums were taken
  // against, and the integer row sums since the last fold.
  int acc[kMTiles][kOutputTiles][4];  // dead (and removed) unless kPersistentPv
  float acc_reference[kMTiles][2];
  int acc_row_sum[kMTiles][2];
  int tiles_since_fold = 0;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      running_max[mt][half] = negative_infinity();
      rows[mt][half] = RowFrame{negative_infinity(), 0.0f};
      half_row_sum[mt][half] = 0.0f;
      acc_reference[mt][half] = negative_infinity();
      acc_row_sum[mt][half] = 0;
    }
  if constexpr (Config::kPersistentPv) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int dt = 0; dt < kOutputTiles; ++dt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mt][dt][i] = 0;
  }

  // Folds the persistent INT32 sums into the FP32 frame (exact up to one FP32 rounding each).
  auto fold_persistent = [&]() {
    if constexpr (Config::kPersistentPv) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float gamma =
            fold_factor<kOutputTiles>(rows[mt][half], acc_reference[mt][half], o[mt], half);
#pragma unroll
        for (int dt = 0; dt < kOutputTiles; ++dt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int i = 2 * half + e;
            o[mt][dt][i] = fmaf(gamma, static_cast<float>(acc[mt][dt][i]), o[mt][dt][i]);
            acc[mt][dt][i] = 0;
          }
        }
        rows[mt][half].sum = fmaf(gamma, static_cast<float>(acc_row_sum[mt][half]),
                                  rows[mt][half].sum);
        acc_row_sum[mt][half] = 0;
      }
    }
    tiles_since_fold = 0;
    }
  };

  for (int tile = 0; tile < tiles; ++tile) {
    wait_async_copies<kStages - 2>();
    __syncthreads();  // tile `tile` has landed, and every warp is done with tile - 1's slot
    const int prefetch = tile + kStages - 1;
    if (prefetch < tiles) {
      loader.load_k(k_tile(prefetch % kStages), k_scales(prefetch % kStages),
                    prefetch * Config::kBlockN);
      loader.load_v(v_tile(prefetch % kStages), v_block_scales(prefetch % kStages),
                    prefetch * Config::kBlockN);
    }
    commit_async_copies();

    const int slot = tile % kStages;
    const int first_key = tile * Config::kBlockN;
    const bool needs_mask = first_key + Config::kBlockN > extent.seq_kv ||
                            (Config::kCausal && first_key + Config::kBlockN - 1 >
                                                    first_row + warp_row0 + causal_offset);

    int s[kMTiles][kScoreTiles][4];
    Kernel::score_tile(s, q, shared_address(k_tile(slot)), k_fragments);
    float y[kMTiles][kScoreTiles][4];
    float2 k_scale[kScoreTiles];
    if constexpr (!Config::kPerBlockK) Softmax::lane_k_scales(k_scale, k_scales(slot), coordinates);
    Softmax::scale_and_mask(y, s, k_scale, needs_mask, first_key, first_row + warp_row0,
                           extent.seq_kv, causal_offset, coordinates);
    float c_tile[kMTiles][2][Softmax::kKBlocks];
    Softmax::tile_multipliers(c_tile, c, k_scales(slot));
    float tile_max[kMTiles][2];
    Softmax::tile_row_max(tile_max, y, c_tile);

    float reference[kMTiles][2];
    float previous_max[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        previous_max[mt][half] = running_max[mt][half];
        // Half INT8 keeps a reference within 2^8 of the maximum instead (half_int8_reference).
        running_max[mt][half] =
            Config::kFullInt8 ? fmaxf(running_max[mt][half], tile_max[mt][half])
                              : half_int8_reference(running_max[mt][half], tile_max[mt][half]);
        reference[mt][half] =
            Config::kTileMaxReference ? tile_max[mt][half] : running_max[mt][half];
      }

    u32 p[kMTiles][Config::kPvSteps][4];
    if constexpr (Config::kFullInt8) {
      int row_sum[kMTiles][2];
      Softmax::quantize_p(p, y, c_tile, reference);
      Softmax::p_row_sums(row_sum, p);
      if constexpr (Config::kPersistentPv) {
        bool moved = tiles_since_fold >= Config::kMaxTilesPerFold;
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            moved |= reference[mt][half] != acc_reference[mt][half];
          }
        if (__any_sync(0xFFFFFFFFu, moved)) {
          fold_persistent();
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int half = 0; half < 2; ++half) acc_reference[mt][half] = reference[mt][half];
        }
        Kernel::accumulate_pv(acc, p, shared_address(v_tile(slot)), v_fragments);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int half = 0; half < 2; ++half) acc_row_sum[mt][half] += row_sum[mt][half];
        ++tiles_since_fold;
      } else {
        float gamma[kMTiles][2];
        fold_factors(gamma, rows, reference, o);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            rows[mt][half].sum = fmaf(gamma[mt][half], small_int_to_float(row_sum[mt][half]),
                                      rows[mt][half].sum);
          }
        Kernel::fold_pv_tile(o, p, gamma, shared_address(v_tile(slot)), v_fragments,
                             v_block_scales(slot), coordinates);
      }
    } else {
      // Half INT8: the MMA accumulates into O directly, so O follows the row's reference.
      bool rescale = false;
      float alpha[kMTiles][2];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          alpha[mt][half] = previous_max[mt][half] == negative_infinity()
                                ? 0.0f
                                : exp2_approx(previous_max[mt][half] - running_max[mt][half]);
          rescale |= previous_max[mt][half] != running_max[mt][half];
        }
      if (__any_sync(0xFFFFFFFFu, rescale)) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            half_row_sum[mt][half] *= alpha[mt][half];
#pragma unroll
            for (int dt = 0; dt < kOutputTiles; ++dt) {
              o[mt][dt][2 * half] *= alpha[mt][half];
              o[mt][dt][2 * half + 1] *= alpha[mt][half];
            }
          }
      }
      float row_sum[kMTiles][2];
      Softmax::exponentiate_p_16bit(p, row_sum, y, c_tile, running_max);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) half_row_sum[mt][half] += row_sum[mt][half];
      Kernel::accumulate_pv_16bit(o, p, shared_address(v_tile(slot)), half_v_fragments);
    }
  }
  wait_async_copies<0>();
  fold_persistent();

  // ---- epilogue: normalise, apply V's scale, round, store ------------------------------------
  float log2_reference[kMTiles][2];
  float lane_sum[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      log2_reference[mt][half] = Config::kFullInt8 ? rows[mt][half].frame : running_max[mt][half];
      lane_sum[mt][half] = Config::kFullInt8 ? rows[mt][half].sum : half_row_sum[mt][half];
    }
  store_output<Config>(params, extent, batch, head_q, head_kv, first_row + warp_row0, coordinates,
                       o, lane_sum, log2_reference);
}

}  // namespace kernels
}  // namespace intfa
