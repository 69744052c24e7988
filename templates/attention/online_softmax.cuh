// The online softmax of one warp's score fragments, shared by the portable (mma.sync) and the
// Hopper (wgmma) attention kernels: scores from the Q.K^T accumulators, row maxima, P quantized to
// 8 bits (full INT8) or kept in 16-bit floats (half INT8), and the fixed-frame bookkeeping that
// folds each tile's P.V into the FP32 output (README.md, "Online softmax over tiles").
//
// Both kernels hold a warp's scores in the m16n8 accumulator layout (wgmma's m64nN accumulator is
// that layout per warp), so one implementation serves both: lane (group, thread_in_group) holds
// rows group and group + 8 ("halves" 0 and 1) of each 16-row m tile, columns
// 8 nt + 2 thread_in_group + {0, 1} of each n8 tile nt.
#pragma once

#include "attention/attention_params.h"
#include "common/kernel_enums.h"
#include "common/numeric.cuh"
#include "common/types.h"

namespace intfa {
namespace kernels {

// -inf (NVRTC has neither <limits> nor a constexpr infinity builtin).
__device__ __forceinline__ float negative_infinity() {
  return __int_as_float(0xff800000);
}
constexpr float kLn2 = 0.6931471805599453f;
// Past this distance (log2 units) between a row's frame and a reference, 2^distance could
// overflow later sums: the row is rebased.
constexpr float kMaxFrameDistance = 64.0f;
// Half INT8's exponent reference may lag the row's maximum by this much (log2 units), so that
// e = 2^(x - m) <= 2^8, far inside FP16 and BF16: most tiles whose maximum rises a little then
// skip rescaling the output (README "Half INT8").
constexpr float kHalfReferenceSlack = 8.0f;

// Half INT8's reference after a tile whose maximum is `tile_max` (log2 domain): `reference` while
// the tile passes it by at most kHalfReferenceSlack, else the new maximum. From -inf it takes the
// tile's maximum (a finite maximum minus -inf is +inf, and -inf - -inf is NaN: neither is within
// the slack, and the second keeps -inf).
__device__ __forceinline__ float half_int8_reference(float reference, float tile_max) {
  const float maximum = fmaxf(reference, tile_max);
  return maximum - reference <= kHalfReferenceSlack ? reference : maximum;
}

// Position of this lane inside the MMA fragments.
struct LaneCoordinates {
  int group;            // lane / 4: the fragment row (and row + 8)
  int thread_in_group;  // lane % 4: the fragment column pair
};

// P = round_half_even(R * e) of two exponentials e in [0, 1], as the low bytes of the two halves
// of one word (`low` in bits 0..7, `high` in bits 16..23). e is rounded to f16 (one
// cvt.rn.f16x2.f32 for both), then one f16x2 FMA forms R * e + 1024: f16's spacing is exactly 1
// in [1024, 2048), so the FMA's single rounding is round-half-even to an integer, and 1024 adds
// nothing to the low byte (1024 = 0x6400 in f16). Three instructions per four scores fewer than
// rounding in FP32 through 1.5 * 2^23 and gathering one byte per word.
template <bool UnsignedP>
__device__ __forceinline__ u32 quantize_p_pair(float low, float high) {
  constexpr u32 kRangeX2 = UnsignedP ? 0x5BF85BF8u : 0x57F057F0u;  // f16x2 {255, 255} / {127, 127}
  constexpr u32 kBiasX2 = 0x64006400u;                             // f16x2 {1024, 1024}
  u32 pair;
  asm("{\n.reg .b32 e;\ncvt.rn.f16x2.f32 e, %1, %2;\nfma.rn.f16x2 %0, e, %3, %4;\n}\n"
      : "=r"(pair)
      : "f"(high), "f"(low), "r"(kRangeX2), "r"(kBiasX2));
  return pair;
}

// Four P bytes from two quantize_p_pair words: (first.low, first.high, second.low, second.high).
__device__ __forceinline__ u32 gather_p_bytes(u32 first, u32 second) {
  return __byte_perm(first, second, 0x6420);
}

// The sum of the four unsigned bytes of `packed`, added to `sum` (one dp4a).
__device__ __forceinline__ u32 add_byte_sum(u32 packed, u32 sum) {
  u32 result;
  asm("dp4a.u32.u32 %0, %1, %2, %3;" : "=r"(result) : "r"(packed), "r"(0x01010101u), "r"(sum));
  return result;
}

template <class Config>
struct OnlineSoftmax {
  static constexpr int kMTiles = Config::kMTiles;
  static constexpr int kScoreTiles = Config::kScoreTiles;
  // K's scales: per token, each score is multiplied by its key's scale (y = dot * s_k) and the
  // exponent takes the row's c; per block of kKTokenBlock keys, y is the plain dot product and the
  // block's scale goes into the exponent's multiplier instead (c_b = c * s_b), which takes one
  // multiply and the scale loads off every score. kKBlocks: the multipliers of one tile.
  static constexpr bool kPerBlockK = Config::kPerBlockK;
  static constexpr int kKBlocks = kPerBlockK && Config::kBlockN > kKTokenBlock
                                      ? Config::kBlockN / kKTokenBlock
                                      : 1;
  // The multiplier block of n8 tile nt.
  __device__ __forceinline__ static constexpr int key_block(int nt) {
    return kPerBlockK ? nt * 8 / (kKTokenBlock < Config::kBlockN ? kKTokenBlock : Config::kBlockN)
                      : 0;
  }

  // The exponent's multipliers of one tile: per token the rows' c; per block c * s_b, kept
  // positive like c (a block of all-zero keys, or one past the sequence, has s_b = 0), so that
  // -inf * c_b stays -inf. `k_block_scales`: the tile's kKBlocks block scales (per block only).
  __device__ __forceinline__ static void tile_multipliers(float (&c_tile)[kMTiles][2][kKBlocks],
                                                          const float (&c)[kMTiles][2],
                                                          const float* k_block_scales) {
#pragma unroll
    for (int b = 0; b < kKBlocks; ++b) {
      const float block_scale = kPerBlockK ? k_block_scales[b] : 1.0f;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half)
          c_tile[mt][half][b] = kPerBlockK ? fmaxf(c[mt][half] * block_scale, 1e-30f)
                                           : c[mt][half];
    }
  }

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

  // y = dot * k_scale[key] (per token; per block y = dot and k_scale is not read), -inf where
  // the key is not allowed (tails, causal).
  __device__ __forceinline__ static void scale_and_mask(float (&y)[kMTiles][kScoreTiles][4],
                                                        const int (&s)[kMTiles][kScoreTiles][4],
                                                        const float2 (&k_scale)[kScoreTiles],
                                                        bool needs_mask, int first_key,
                                                        int first_row, int seq_kv,
                                                        int causal_offset, LaneCoordinates lane) {
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
          y[mt][nt][i] = kPerBlockK ? dot : dot * ((i & 1) ? scale.y : scale.x);
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
          const bool allowed = key < seq_kv && (!Config::kCausal || key <= row + causal_offset);
          if (!allowed) y[mt][nt][i] = negative_infinity();
        }
  }

  // Row maxima of y over the tile, in the log2 domain (times the multipliers, all > 0, so a row
  // with no allowed key keeps -inf): per multiplier block the largest y times c_b, the largest
  // of those.
  __device__ __forceinline__ static void tile_row_max(
      float (&tile_max)[kMTiles][2], const float (&y)[kMTiles][kScoreTiles][4],
      const float (&c_tile)[kMTiles][2][kKBlocks]) {
    constexpr int kTilesPerBlock = kScoreTiles / kKBlocks;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float value = negative_infinity();
#pragma unroll
        for (int b = 0; b < kKBlocks; ++b) {
          // A tree, not a chain: the row's exponentials wait on this maximum, so its depth (5
          // for 32 values instead of 17) is latency every tile pays.
          float partial[kTilesPerBlock];
#pragma unroll
          for (int t = 0; t < kTilesPerBlock; ++t) {
            const int nt = b * kTilesPerBlock + t;
            partial[t] = fmaxf(y[mt][nt][2 * half], y[mt][nt][2 * half + 1]);
          }
#pragma unroll
          for (int stride = 1; stride < kTilesPerBlock; stride *= 2) {
#pragma unroll
            for (int t = 0; t + stride < kTilesPerBlock; t += 2 * stride) {
              partial[t] = fmaxf(partial[t], partial[t + stride]);
            }
          }
          value = kKBlocks == 1 ? partial[0] : fmaxf(value, partial[0] * c_tile[mt][half][b]);
        }
        value = fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, 1));
        value = fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, 2));
        tile_max[mt][half] = kKBlocks == 1 ? value * c_tile[mt][half][0] : value;
      }
    }
  }

  // ---- full INT8: P in 8 bits, P.V with the s32 MMA -----------------------------------------
  // P = round(R * 2^(y * c_b - ref)) packed into the A fragments of the 8-bit P.V MMA (m16n8k32,
  // and wgmma's register A operand, which has the same layout), per m tile: quantize_p_pairs
  // rounds each P into a quantize_p_pair word, gather_p packs those words' bytes into the
  // fragments. Apart, so that the Hopper kernel can round a tile's P while its wgmma of the
  // previous tile still reads the P registers, keeping half as many words as the FP32
  // exponentials; quantize_p does both.
  // pairs[nt][half]: the P of columns 2 thread_in_group + {0, 1} of n8 tile nt, one row.
  __device__ __forceinline__ static void quantize_p_pairs(
      u32 (&pairs)[kScoreTiles][2], const float (&y)[kMTiles][kScoreTiles][4],
      const float (&c_tile)[kMTiles][2][kKBlocks], const float (&reference)[kMTiles][2], int mt) {
    float offset[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      // A row with no allowed key in this tile: every e is 2^-inf = 0.
      offset[half] = reference[mt][half] == negative_infinity() ? 0.0f : -reference[mt][half];
    }
#pragma unroll
    for (int nt = 0; nt < kScoreTiles; ++nt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float c = c_tile[mt][half][key_block(nt)];
        const float e0 = exp2_approx(fmaf(y[mt][nt][2 * half], c, offset[half]));
        const float e1 = exp2_approx(fmaf(y[mt][nt][2 * half + 1], c, offset[half]));
        pairs[nt][half] = quantize_p_pair<Config::kUnsignedP>(e0, e1);
      }
    }
  }

  // A fragment of k-step `step`: n8 tiles 4*step .. 4*step+3 (see v_position_of_token); words 0
  // and 2 hold row `group`, words 1 and 3 row `group + 8`.
  __device__ __forceinline__ static void gather_p(u32 (&p)[kMTiles][Config::kPvSteps][4],
                                                  const u32 (&pairs)[kScoreTiles][2], int mt) {
#pragma unroll
    for (int step = 0; step < Config::kPvSteps; ++step) {
      const int nt = 4 * step;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        p[mt][step][half] = gather_p_bytes(pairs[nt][half], pairs[nt + 1][half]);
        p[mt][step][2 + half] = gather_p_bytes(pairs[nt + 2][half], pairs[nt + 3][half]);
      }
    }
  }

  __device__ __forceinline__ static void quantize_p(u32 (&p)[kMTiles][Config::kPvSteps][4],
                                                    const float (&y)[kMTiles][kScoreTiles][4],
                                                    const float (&c_tile)[kMTiles][2][kKBlocks],
                                                    const float (&reference)[kMTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      u32 pairs[kScoreTiles][2];
      quantize_p_pairs(pairs, y, c_tile, reference, mt);
      gather_p(p, pairs, mt);
    }
  }

  // Each lane's part of the integer row sums of quantize_p's P (exact: at most 255 * 2 *
  // kScoreTiles). Apart from quantize_p because nothing waits on them until the tile is folded:
  // the Hopper kernel takes them while its P.V runs, off the path to the next MMA.
  __device__ __forceinline__ static void p_row_sums(int (&row_sum)[kMTiles][2],
                                                    const u32 (&p)[kMTiles][Config::kPvSteps][4]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        // Two chains, not one: half the dp4a latency in a row.
        u32 sum[2] = {0, 0};
#pragma unroll
        for (int step = 0; step < Config::kPvSteps; ++step) {
          sum[0] = add_byte_sum(p[mt][step][half], sum[0]);
          sum[1] = add_byte_sum(p[mt][step][2 + half], sum[1]);
        }
        row_sum[mt][half] = static_cast<int>(sum[0] + sum[1]);
      }
    }
  }

  // ---- half INT8: P and V in 16-bit floats, FP32 accumulation --------------------------------
  // e = 2^(y * c_b - ref) in FP32, P = e rounded to V's type in the A fragments of the 16-bit
  // m16n8k16 MMA (and of wgmma's k16 register A operand), and each lane's part of the row sums
  // of the unrounded e.
  // exponentiate_16bit makes e and the row sums, pack_p_16bit rounds e into P: apart, so that
  // the Hopper kernel can exponentiate a tile while its wgmma of the previous tile still reads P.
  __device__ __forceinline__ static void exponentiate_16bit(
      float (&e)[kMTiles][kScoreTiles][4], float (&row_sum)[kMTiles][2],
      const float (&y)[kMTiles][kScoreTiles][4], const float (&c_tile)[kMTiles][2][kKBlocks],
      const float (&reference)[kMTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float offset =
            reference[mt][half] == negative_infinity() ? 0.0f : -reference[mt][half];
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kScoreTiles; ++nt) {
#pragma unroll
          for (int i = 2 * half; i < 2 * half + 2; ++i) {
            e[mt][nt][i] = exp2_approx(fmaf(y[mt][nt][i], c_tile[mt][half][key_block(nt)], offset));
            sum += e[mt][nt][i];
          }
        }
        row_sum[mt][half] = sum;
      }
    }
  }

  // P as the 16-bit register A operand of the P.V MMA: the fragment of k-step `step` holds n8
  // tiles 2*step (k 0..7) and 2*step+1 (k 8..15), each e rounded to V's type.
  __device__ __forceinline__ static void pack_p_16bit(u32 (&p)[kMTiles][Config::kPvSteps][4],
                                                      const float (&e)[kMTiles][kScoreTiles][4]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int step = 0; step < Config::kPvSteps; ++step) {
        p[mt][step][0] = pack_float2<Config::kVType>(e[mt][2 * step][0], e[mt][2 * step][1]);
        p[mt][step][1] = pack_float2<Config::kVType>(e[mt][2 * step][2], e[mt][2 * step][3]);
        p[mt][step][2] =
            pack_float2<Config::kVType>(e[mt][2 * step + 1][0], e[mt][2 * step + 1][1]);
        p[mt][step][3] =
            pack_float2<Config::kVType>(e[mt][2 * step + 1][2], e[mt][2 * step + 1][3]);
      }
    }
  }

  // Both at once, where nothing runs in between.
  __device__ __forceinline__ static void exponentiate_p_16bit(
      u32 (&p)[kMTiles][Config::kPvSteps][4], float (&row_sum)[kMTiles][2],
      const float (&y)[kMTiles][kScoreTiles][4], const float (&c_tile)[kMTiles][2][kKBlocks],
      const float (&reference)[kMTiles][2]) {
    float e[kMTiles][kScoreTiles][4];
    exponentiate_16bit(e, row_sum, y, c_tile, reference);
    pack_p_16bit(p, e);
  }
};

// Per-row FP32 state of the fixed-frame accumulation (full INT8).
struct RowFrame {
  float frame;  // log2-domain reference O and l are expressed against; -inf until set
  float sum;    // this lane's part of l, in the frame
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

// fold_factor for every row of a warp's m tiles, with one warp vote instead of a branch per row:
// once each row has its frame and no reference has moved far from it (almost every tile), the
// factor is 2^(reference - frame) (0 for a reference of -inf), with no per-row tests taken.
template <int kMTiles, int kOutputTiles>
__device__ __forceinline__ void fold_factors(float (&gamma)[kMTiles][2],
                                             RowFrame (&rows)[kMTiles][2],
                                             const float (&reference)[kMTiles][2],
                                             float (&o)[kMTiles][kOutputTiles][4]) {
  bool unusual = false;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float frame = rows[mt][half].frame;
      unusual |= frame == negative_infinity() || reference[mt][half] - frame > kMaxFrameDistance;
    }
  if (__any_sync(0xFFFFFFFFu, unusual)) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        gamma[mt][half] =
            fold_factor<kOutputTiles>(rows[mt][half], reference[mt][half], o[mt], half);
  } else {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        gamma[mt][half] = exp2_approx(reference[mt][half] - rows[mt][half].frame);
  }
}

}  // namespace kernels
}  // namespace intfa
