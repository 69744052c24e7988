// INT-FlashAttention forward for Hopper (sm_90a): warpgroup MMAs (wgmma), TMA loads and warp
// specialisation. Same numerics as the portable kernel (attention_forward.cuh; both take their
// softmax from online_softmax.cuh and their output code from epilogue.cuh): full INT8 with every
// P encoding, P reference and V granularity, and half INT8 (FP16/BF16 V and P, P.V accumulated
// in FP32 by the wgmma into the output, which is rescaled when a row's exponent reference moves).
//
// A block computes 64 * ConsumerGroups query rows of one (batch, query head) with
// ConsumerGroups + 1 warpgroups:
//   - the producer warpgroup gives most of its registers away; lane 0 of its first warp issues
//     the TMA loads of K and V per key tile into a ring of Stages slots, and every
//     lane copies some of the tile's K scales (cp.async, arriving on the same barrier); each
//     slot is guarded by a "full" mbarrier (bytes landed) and an "empty" one (consumers done);
//   - each consumer warpgroup owns 64 rows, which it loads into shared memory itself (INT8, or
//     16-bit and quantized on the way): S = Q K^T with wgmma (both operands in shared
//     memory), the online softmax and P's quantization in registers (the wgmma accumulator is
//     the m16n8 layout per warp, so the portable code applies unchanged), then P V with P as the
//     register A operand and V^T in shared memory. The INT8 V layout (channels as rows, tokens
//     permuted in groups of 16) is exactly the K-major B operand this needs; half INT8's 16-bit
//     V (keys as rows) is the MN-major B operand that 16-bit wgmma reads transposed.
// Consumer warpgroups take turns to issue their MMAs (named barriers), so one's softmax overlaps
// another's MMAs, where the registers allow and it measured faster (kTakesTurns); otherwise they
// run independently.
//
// The parts, each a struct over the Config of wgmma_config.cuh:
//   - wgmma_pipeline.cuh (WgmmaPipeline, the base of the others): the shared-memory layout, the
//     slots' barriers, the producer, and the named barriers of the consumers' turns;
//   - wgmma_q_tile.cuh (WgmmaQTile): a consumer warpgroup's Q rows into shared memory;
//   - wgmma_tile_steps.cuh (WgmmaTileSteps): one tile's MMAs, fold and softmax;
//   - wgmma_full_int8_loops.cuh and wgmma_half_int8_loops.cuh: the main loops of each variant,
//     which put those steps in order;
//   - wgmma_epilogue.cuh (WgmmaEpilogue): the staged output of d >= 128;
//   - this file: a consumer warpgroup's work (consume: the Q tile, the main loop that Config
//     picks, the epilogue) and the kernel, which splits the warpgroups into their roles.
#pragma once

#include "attention/epilogue.cuh"
#include "attention/wgmma_config.cuh"
#include "attention/wgmma_epilogue.cuh"
#include "attention/wgmma_full_int8_loops.cuh"
#include "attention/wgmma_half_int8_loops.cuh"
#include "attention/wgmma_params.h"
#include "attention/wgmma_pipeline.cuh"
#include "attention/wgmma_q_tile.cuh"
#include "attention/wgmma_tile_steps.cuh"
#include "common/grid_dependency.cuh"
#include "common/tma.cuh"

namespace intfa {
namespace kernels {

// The kernel's roles: the producer's (WgmmaPipeline::produce, copy_v_scales) and a consumer
// warpgroup's (consume: its Q tile, the main loop Config picks, the output).
template <class Config>
struct WgmmaAttention : WgmmaPipeline<Config> {
  using typename WgmmaPipeline<Config>::SharedLayout;
  using typename WgmmaPipeline<Config>::BlockWork;
  using WgmmaPipeline<Config>::kOutputTiles;
  using WgmmaPipeline<Config>::kStages;
  using WgmmaPipeline<Config>::wait_until_full;
  using WgmmaPipeline<Config>::release;
  using QTile = WgmmaQTile<Config>;
  using RowState = typename WgmmaTileSteps<Config>::RowState;
  using FullInt8Loops = WgmmaFullInt8Loops<Config>;
  using HalfInt8Loops = WgmmaHalfInt8Loops<Config>;
  using Epilogue = WgmmaEpilogue<Config>;

  __device__ __forceinline__ static void consume(const WgmmaAttentionParams& params,
                                                 const SharedLayout& shared,
                                                 const BlockWork& work, int group) {
    const AttentionParams& attention = params.attention;
    const int thread = threadIdx.x - 128 * (group + 1);
    const int lane = thread & 31;
    const LaneCoordinates coordinates{lane >> 2, lane & 3};
    const int group_first_row = work.first_row + group * kWgmmaGroupRows;
    const int warp_first_row = group_first_row + (thread >> 5) * 16;

    // The scales of this lane's two rows: from the kernel's own Q pass, or quantize_rows'.
    float q_scale_of_row[2];
    if constexpr (Config::kQuantizesQ) {
      QTile::quantize_q_tile(params, shared, work, group, thread, coordinates, q_scale_of_row);
    } else {
      QTile::load_q_tile(attention, shared, work, group, thread);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_first_row + coordinates.group + 8 * half;
        q_scale_of_row[half] =
            row < work.extent.seq_q ? attention.q_scale[work.extent.q_scale0 + row] : 0.0f;
      }
    }
    RowState rows;
    // c is kept positive so that -inf * c stays -inf.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float q_scale = q_scale_of_row[half];
      rows.c[0][half] = fmaxf(q_scale * attention.scale_log2, 1e-30f);
      rows.running_max[0][half] = negative_infinity();
      rows.frame[half] = RowFrame{negative_infinity(), 0.0f};
      rows.sum[0][half] = 0.0f;
    }
    float o[1][kOutputTiles][4];
#pragma unroll
    for (int dt = 0; dt < kOutputTiles; ++dt)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[0][dt][i] = 0.0f;

    // Causal: the block's last tiles can lie wholly above this warpgroup's diagonal; they are
    // only released.
    int visible_tiles = work.tiles;
    if (Config::kCausal) {
      const int last_key = group_first_row + kWgmmaGroupRows - 1 + work.causal_offset;
      visible_tiles = last_key < 0 ? 0 : min(visible_tiles, last_key / Config::kBlockN + 1);
    }
    if constexpr (!Config::kFullInt8 && Config::kTakesTurns) {
      HalfInt8Loops::main_loop_16bit_pv_in_turns(o[0], rows, shared, work, group, warp_first_row,
                                                 visible_tiles, coordinates);
    } else if constexpr (!Config::kFullInt8) {
      HalfInt8Loops::main_loop_16bit_pv(o[0], rows, shared, work, group, warp_first_row,
                                        visible_tiles, coordinates);
      for (int tile = visible_tiles; tile < work.tiles; ++tile) {
        wait_until_full(shared, tile);
        release(shared, tile % kStages);
      }
    } else if constexpr (Config::kTakesTurns) {
      FullInt8Loops::main_loop_in_turns(o[0], rows, shared, work, group, warp_first_row,
                                        visible_tiles, coordinates);
    } else {
      if constexpr (Config::kPvBehindScores) {
        if (visible_tiles > 0) {
          FullInt8Loops::tiles_pv_behind(o[0], rows, shared, work, group, warp_first_row,
                                         visible_tiles, coordinates);
        }
      } else {
        FullInt8Loops::main_loop(o[0], rows, attention, shared, work, group, warp_first_row,
                                 visible_tiles, coordinates);
      }
      for (int tile = visible_tiles; tile < work.tiles; ++tile) {
        wait_until_full(shared, tile);
        release(shared, tile % kStages);
      }
    }

    float log2_reference[1][2];
    float lane_sum[1][2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      log2_reference[0][half] =
          Config::kFullInt8 ? rows.frame[half].frame : rows.running_max[0][half];
      lane_sum[0][half] = Config::kFullInt8 ? rows.frame[half].sum : rows.sum[0][half];
    }
    if constexpr (Config::kStagesOutput) {
      Epilogue::store_output_staged(attention, shared, work, warp_first_row, coordinates, o[0],
                                    lane_sum, log2_reference);
    } else {
      store_output<Config>(attention, work.extent, work.batch, work.head_q, work.head_kv,
                           warp_first_row, coordinates, o, lane_sum, log2_reference);
    }
  }
};

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, Config::kBlocksPerSm)
    attention_forward_wgmma(const __grid_constant__ WgmmaAttentionParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
  using Kernel = WgmmaAttention<Config>;
  extern __shared__ __align__(1024) u8 dynamic_shared[];
  const typename Kernel::SharedLayout shared(dynamic_shared);

  typename Kernel::BlockWork work;
  // Causal blocks near the diagonal have the least work: schedule the longest rows first.
  const int m_block = Config::kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  work.head_q = blockIdx.y;
  work.batch = blockIdx.z;
  work.head_kv = work.head_q / (params.attention.heads_q / params.attention.heads_kv);
  work.first_row = m_block * Config::kBlockM;
  work.extent = sequence_extent<Config::kVarlen, Config::kPerBlockK>(params.attention, work.batch,
                                                                      work.head_q, work.head_kv);
  // The grid covers the longest sequence; a shorter one's blocks past its rows have no work.
  if (Config::kVarlen && work.first_row >= work.extent.seq_q) return;
  work.causal_offset = work.extent.seq_kv - work.extent.seq_q;
  work.tiles = (work.extent.seq_kv + Config::kBlockN - 1) / Config::kBlockN;
  if (Config::kCausal) {
    const int last_visible_key = work.first_row + Config::kBlockM - 1 + work.causal_offset;
    work.tiles =
        last_visible_key < 0 ? 0 : min(work.tiles, last_visible_key / Config::kBlockN + 1);
  }

  // Consumer warpgroups whose rows all lie past the sequence have no work: with three of them,
  // the last query block at N = 1k, 4k or 16k has 64 rows. They leave at once, unless they take
  // turns (main_loop_in_turns), where each one's turns pass the turn on. (Deciding this inside
  // consume() instead made ptxas build the d=128 and d=256 main loops differently.)
  int working_groups = Config::kConsumerGroups;
  if (!Config::kTakesTurns) {
    const int rows = work.extent.seq_q - work.first_row;
    working_groups = min(working_groups, (rows + kWgmmaGroupRows - 1) / kWgmmaGroupRows);
  }
  if (threadIdx.x == 0) Kernel::init_barriers(shared, working_groups);
  __syncthreads();

  // Read through a shuffle so that the compiler knows it is the same in every lane: the wgmma
  // descriptors derived from it then live in uniform registers (no R2UR before each wgmma).
  const int warpgroup = __shfl_sync(0xFFFFFFFFu, static_cast<int>(threadIdx.x / 128), 0);
  if (warpgroup == 0) {
    release_registers<Config::kProducerRegisters>();
    if (threadIdx.x < 32) {
      Kernel::produce(params, shared, work, threadIdx.x);
    } else if (Config::kStagesOutput && Config::kEpilogueVScales > 0 && threadIdx.x < 64) {
      Kernel::copy_v_scales(params, shared, work, threadIdx.x - 32);
    }
  } else {
    acquire_registers<Config::kConsumerRegisters>();
    if (warpgroup - 1 < working_groups) Kernel::consume(params, shared, work, warpgroup - 1);
  }
}

}  // namespace kernels
}  // namespace intfa
