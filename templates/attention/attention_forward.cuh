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
#include "attention/tile_loads.cuh"
#include "common/copy.cuh"
#include "common/kernel_enums.h"
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "common/swizzle.cuh"

namespace intfa {
namespace kernels {

// -inf (NVRTC has neither <limits> nor a constexpr infinity builtin).
__device__ __forceinline__ float negative_infinity() { return __int_as_float(0xff800000); }
constexpr float kLn2 = 0.6931471805599453f;
// Past this distance (log2 units) between a row's frame and a reference, 2^distance could
// overflow later sums: the row is rebased.
constexpr float kMaxFrameDistance = 64.0f;

// Position of this lane inside the MMA fragments.
struct LaneCoordinates {
  int group;            // lane / 4: the fragment row (and row + 8)
  int thread_in_group;  // lane % 4: the fragment column pair
};

// Four 8-bit values, each the low byte of one word, packed into one word (lowest first).
__device__ __forceinline__ u32 pack_low_bytes(u32 b0, u32 b1, u32 b2, u32 b3) {
  const u32 low = __byte_perm(b0, b1, 0x0040);
  const u32 high = __byte_perm(b2, b3, 0x0040);
  return __byte_perm(low, high, 0x5410);
}

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

  // y = dot * k_scale[key], -inf where the key is not allowed (tails, causal).
  // The scales of this lane's keys (columns 8 nt + 2 thread_in_group + {0, 1}) from a tile's
  // scales in shared memory.
  __device__ __forceinline__ static void lane_k_scales(float2 (&scale)[kScoreTiles],
                                                       const float* k_scales,
                                                       LaneCoordinates lane) {
#pragma unroll
    for (int nt = 0; nt < kScoreTiles; ++nt) {
      scale[nt] = *reinterpret_cast<const float2*>(k_scales + nt * 8 + 2 * lane.thread_in_group);
    }
  }

  __device__ __forceinline__ static void scale_and_mask(
      float (&y)[kMTiles][kScoreTiles][4], const int (&s)[kMTiles][kScoreTiles][4],
      const float2 (&k_scale)[kScoreTiles], bool needs_mask, int first_key, int first_row,
      int seq_kv, int causal_offset, LaneCoordinates lane) {
#pragma unroll
    for (int nt = 0; nt < kScoreTiles; ++nt) {
      const float2 scale = k_scale[nt];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          // I2F measured faster here than the magic-number trick (one op, on a pipe the
          // softmax leaves idle), H100 2026-11-22.
          const float dot = static_cast<float>(s[mt][nt][i]);
          y[mt][nt][i] = dot * ((i & 1) ? scale.y : scale.x);
        }
      }
    }
    if (!needs_mask) return;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kScoreTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = first_key + nt * 8 + 2 * lane.thread_in_group + (i & 1);
          const int row = first_row + mt * 16 + lane.group + ((i >> 1) << 3);
          const bool allowed =
              key < seq_kv && (!Config::kCausal || key <= row + causal_offset);
          if (!allowed) y[mt][nt][i] = negative_infinity();
        }
  }

  // Row maxima of y over the tile, in the log2 domain (times c = q_scale * scale_log2 >= 0).
  __device__ __forceinline__ static void tile_row_max(float (&tile_max)[kMTiles][2],
                                                      const float (&y)[kMTiles][kScoreTiles][4],
                                                      const float (&c)[kMTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float value = negative_infinity();
#pragma unroll
        for (int nt = 0; nt < kScoreTiles; ++nt) {
          value = fmaxf(value, fmaxf(y[mt][nt][2 * half], y[mt][nt][2 * half + 1]));
        }
        value = fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, 1));
        value = fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, 2));
        tile_max[mt][half] = value == negative_infinity() ? value : value * c[mt][half];
      }
    }
  }

  // ---- full INT8: P in 8 bits, P.V with the s32 MMA -----------------------------------------
  // P = round(R * 2^(y * c - ref)) packed into the A fragments of the P.V MMA, and each lane's
  // part of the integer row sums.
  __device__ __forceinline__ static void quantize_p(u32 (&p)[kMTiles][Config::kPvSteps][4],
                                                    int (&row_sum)[kMTiles][2],
                                                    const float (&y)[kMTiles][kScoreTiles][4],
                                                    const float (&c)[kMTiles][2],
                                                    const float (&reference)[kMTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      float offset[2];
      u32 sum_bits[2] = {0, 0};
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        offset[half] = reference[mt][half] == negative_infinity() ? 0.0f : -reference[mt][half];
      }
      u32 bits[kScoreTiles][4];
#pragma unroll
      for (int nt = 0; nt < kScoreTiles; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float e = exp2_approx(fmaf(y[mt][nt][i], c[mt][i >> 1], offset[i >> 1]));
          bits[nt][i] = static_cast<u32>(__float_as_int(fmaf(e, Config::kPRange, kRoundingMagic)));
          sum_bits[i >> 1] += bits[nt][i];
        }
      }
      // Each summed word carried the rounding constant's bits; remove them (mod 2^32).
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        row_sum[mt][half] = static_cast<int>(
            sum_bits[half] - static_cast<u32>(kScoreTiles * 2) * static_cast<u32>(kRoundingMagicBits));
      }
      // A fragment of k-step `step`: n8 tiles 4*step .. 4*step+3 (see v_position_of_token).
#pragma unroll
      for (int step = 0; step < Config::kPvSteps; ++step) {
        const int nt = 4 * step;
        p[mt][step][0] = pack_low_bytes(bits[nt][0], bits[nt][1], bits[nt + 1][0], bits[nt + 1][1]);
        p[mt][step][1] = pack_low_bytes(bits[nt][2], bits[nt][3], bits[nt + 1][2], bits[nt + 1][3]);
        p[mt][step][2] =
            pack_low_bytes(bits[nt + 2][0], bits[nt + 2][1], bits[nt + 3][0], bits[nt + 3][1]);
        p[mt][step][3] =
            pack_low_bytes(bits[nt + 2][2], bits[nt + 2][3], bits[nt + 3][2], bits[nt + 3][3]);
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
  __device__ __forceinline__ static void exponentiate_p_16bit(
      u32 (&p)[kMTiles][Config::kPvSteps][4], float (&row_sum)[kMTiles][2],
      const float (&y)[kMTiles][kScoreTiles][4], const float (&c)[kMTiles][2],
      const float (&reference)[kMTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      float e[kScoreTiles][4];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float offset =
            reference[mt][half] == negative_infinity() ? 0.0f : -reference[mt][half];
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kScoreTiles; ++nt) {
#pragma unroll
          for (int i = 2 * half; i < 2 * half + 2; ++i) {
            e[nt][i] = exp2_approx(fmaf(y[mt][nt][i], c[mt][half], offset));
            sum += e[nt][i];
          }
        }
        row_sum[mt][half] = sum;
      }
      // A fragment of m16n8k16 k-step `step`: n8 tiles 2*step (k 0..7) and 2*step+1 (k 8..15).
#pragma unroll
      for (int step = 0; step < Config::kPvSteps; ++step) {
        p[mt][step][0] = pack_float2<Config::kVType>(e[2 * step][0], e[2 * step][1]);
        p[mt][step][1] = pack_float2<Config::kVType>(e[2 * step][2], e[2 * step][3]);
        p[mt][step][2] = pack_float2<Config::kVType>(e[2 * step + 1][0], e[2 * step + 1][1]);
        p[mt][step][3] = pack_float2<Config::kVType>(e[2 * step + 1][2], e[2 * step + 1][3]);
      }
    }
  }

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

// Per-row FP32 state of the fixed-frame accumulation (full INT8).
struct RowFrame {
  float frame;      // log2-domain reference O and l are expressed against; -inf until set
  float sum;        // this lane's part of l, in the frame
};

// The factor 2^(reference - frame) that folds a partial sum taken against `reference`; sets the
// frame on first use and rebases the row (scaling `o_row`) when the distance grows too large.
template <int kOutputTiles>
__device__ __forceinline__ float fold_factor(RowFrame& row, float reference,
                                             float (&o)[kOutputTiles][4], int half) {
  if (reference == negative_infinity()) return 0.0f;
  if (row.frame == negative_infinity()) row.frame = reference;
  if (reference - row.frame > kMaxFrameDistance) {
    const float shrink = exp2_approx(row.frame - reference);
#pragma unroll
    for (int dt = 0; dt < kOutputTiles; ++dt) {
      o[dt][2 * half] *= shrink;
      o[dt][2 * half + 1] *= shrink;
    }
    row.sum *= shrink;
    row.frame = reference;
  }
  return exp2_approx(reference - row.frame);
}

// A row's sum from the parts of the four lanes of its quad.
__device__ __forceinline__ float quad_sum(float lane_part) {
  float sum = lane_part + __shfl_xor_sync(0xFFFFFFFFu, lane_part, 1);
  return sum + __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
}

// What a row's outputs are multiplied by: 1 / l (0 for a row that saw no key) times V's
// per-tensor scale.
__device__ __forceinline__ float output_row_scale(float sum, float tensor_v_scale) {
  return (sum > 0.0f ? divide_rn(1.0f, sum) : 0.0f) * tensor_v_scale;
}

// The row's log-sum-exp, when asked, from its sum relative to `log2_reference` (the frame, or the
// running maximum for half INT8, whose P is not scaled by R).
template <class Config>
__device__ __forceinline__ void store_lse(const AttentionParams& params,
                                          const SequenceExtent& extent, int row, float sum,
                                          float log2_reference, LaneCoordinates coordinates) {
  if (params.lse != nullptr && coordinates.thread_in_group == 0) {
    const float p_range = Config::kFullInt8 ? Config::kPRange : 1.0f;
    const float log2_sum = log2_reference + log2_approx(sum / p_range);
    params.lse[extent.q_scale0 + row] = sum > 0.0f ? log2_sum * kLn2 : negative_infinity();
  }
}

// Output columns 8 dt + 2 thread_in_group + {0, 1} of one row, normalised, scaled by V's channel
// scales and rounded to the output type, as one word.
template <class Config>
__device__ __forceinline__ u32 output_pair(const float (&o_tile)[4], int half, float row_scale,
                                           float2 channel_scale) {
  return pack_float2<Config::kOutputType>(o_tile[2 * half] * row_scale * channel_scale.x,
                                          o_tile[2 * half + 1] * row_scale * channel_scale.y);
}

// Normalises the output rows of one warp, applies V's per-tensor or per-channel scale, rounds to
// the output type and stores them, with the log-sum-exp when asked. `lane_sum` is this lane's
// part of each row's sum, relative to `log2_reference` (store_lse).
template <class Config>
__device__ __forceinline__ void store_output(
    const AttentionParams& params, const SequenceExtent& extent, int batch, int head_q,
    int head_kv, int warp_first_row, LaneCoordinates coordinates,
    const float (&o)[Config::kMTiles][Config::kOutputTiles][4],
    const float (&lane_sum)[Config::kMTiles][2],
    const float (&log2_reference)[Config::kMTiles][2]) {
  const i64 kv_index = static_cast<i64>(batch) * params.heads_kv + head_kv;
  const float* v_scale = params.v_scale;
  float tensor_v_scale = 1.0f;
  if (Config::kFullInt8 && Config::kVGranularity == VScaleGranularity::kPerTensor) {
    tensor_v_scale = v_scale[kv_index];
  }
  // Every scale is loaded before the first store: the compiler must assume that a store may
  // alias v_scale, so a load placed after one waits out its own memory latency, once per output
  // tile (measured: a quarter of the d=128 Hopper kernel's stall samples at N=1k).
  float2 channel_scale[Config::kOutputTiles];
#pragma unroll
  for (int dt = 0; dt < Config::kOutputTiles; ++dt) {
    channel_scale[dt] = make_float2(1.0f, 1.0f);
    if (Config::kFullInt8 && Config::kVGranularity == VScaleGranularity::kPerChannel) {
      channel_scale[dt] = *reinterpret_cast<const float2*>(
          v_scale + kv_index * Config::kHeadDim + dt * 8 + 2 * coordinates.thread_in_group);
    }
  }
  u8* const out_head = static_cast<u8*>(params.out) + batch * params.out_strides.batch +
                       head_q * params.out_strides.head + extent.q_row0 * params.out_strides.row;
#pragma unroll
  for (int mt = 0; mt < Config::kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float sum = quad_sum(lane_sum[mt][half]);
      const int row = warp_first_row + mt * 16 + coordinates.group + 8 * half;
      if (row >= extent.seq_q) continue;
      const float row_scale = output_row_scale(sum, tensor_v_scale);
      u8* const out_row = out_head + static_cast<i64>(row) * params.out_strides.row;
#pragma unroll
      for (int dt = 0; dt < Config::kOutputTiles; ++dt) {
        const int channel = dt * 8 + 2 * coordinates.thread_in_group;
        *reinterpret_cast<u32*>(out_row + channel * 2) =
            output_pair<Config>(o[mt][dt], half, row_scale, channel_scale[dt]);
      }
      store_lse<Config>(params, extent, row, sum, log2_reference[mt][half], coordinates);
    }
  }
}

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocksPerSm)
    attention_forward(const AttentionParams params) {
  using Kernel = AttentionKernel<Config>;
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
  const SequenceExtent extent = sequence_extent<Config::kVarlen>(params, batch, head_q, head_kv);
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
    Kernel::lane_k_scales(k_scale, k_scales(slot), coordinates);
    Kernel::scale_and_mask(y, s, k_scale, needs_mask, first_key, first_row + warp_row0,
                           extent.seq_kv, causal_offset, coordinates);
    float tile_max[kMTiles][2];
    Kernel::tile_row_max(tile_max, y, c);

    float reference[kMTiles][2];
    float previous_max[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        previous_max[mt][half] = running_max[mt][half];
        running_max[mt][half] = fmaxf(running_max[mt][half], tile_max[mt][half]);
        reference[mt][half] =
            Config::kTileMaxReference ? tile_max[mt][half] : running_max[mt][half];
      }

    u32 p[kMTiles][Config::kPvSteps][4];
    if constexpr (Config::kFullInt8) {
      int row_sum[kMTiles][2];
      Kernel::quantize_p(p, row_sum, y, c, reference);
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
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            gamma[mt][half] =
                fold_factor<kOutputTiles>(rows[mt][half], reference[mt][half], o[mt], half);
            rows[mt][half].sum = fmaf(gamma[mt][half], small_int_to_float(row_sum[mt][half]),
                                      rows[mt][half].sum);
          }
        Kernel::fold_pv_tile(o, p, gamma, shared_address(v_tile(slot)), v_fragments,
                             v_block_scales(slot), coordinates);
      }
    } else {
      // Half INT8: the MMA accumulates into O directly, so O follows the running maximum.
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
      Kernel::exponentiate_p_16bit(p, row_sum, y, c, running_max);
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
