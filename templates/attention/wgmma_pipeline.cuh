// The Hopper attention kernel's pipeline (attention_forward_wgmma.cuh): the shared-memory layout,
// the ring of K/V slots with its "full" and "empty" mbarriers, the producer warp that fills it
// (TMA for K and V, cp.async for the scales), and the named barriers by which consumer
// warpgroups take turns. Every other part of the kernel derives from WgmmaPipeline.
#pragma once

#include "attention/online_softmax.cuh"
#include "attention/wgmma_params.h"
#include "common/copy.cuh"
#include "common/tma.cuh"
#include "common/wgmma.cuh"

namespace intfa {
namespace kernels {

template <class Config>
struct WgmmaPipeline {
  using Softmax = OnlineSoftmax<Config>;
  static constexpr int kScoreTiles = Config::kScoreTiles;
  static constexpr int kOutputTiles = Config::kOutputTiles;
  static constexpr int kStages = Config::kStages;

  // Shared-memory addresses of the tiles (for TMA and wgmma) and of the mbarriers; the K scales
  // are also read with plain loads, through `bytes`.
  struct SharedLayout {
    u32 base;         // 1024-byte aligned
    const u8* bytes;  // the same memory, generic

    __device__ __forceinline__ explicit SharedLayout(u8* dynamic_shared) {
      const u32 raw = shared_address(dynamic_shared);
      base = (raw + 1023u) & ~1023u;
      bytes = dynamic_shared + (base - raw);
    }
    __device__ __forceinline__ u32 q() const { return base; }
    __device__ __forceinline__ u32 stage(int slot) const {
      return base + Config::kQTileBytes + slot * Config::kStageBytes;
    }
    // The Q tile, written by the consumers' own stores (WgmmaQTile) before wgmma reads it.
    __device__ __forceinline__ u8* q_generic() const {
      return const_cast<u8*>(bytes) + (q() - base);
    }
    __device__ __forceinline__ u32 k(int slot) const { return stage(slot); }
    __device__ __forceinline__ u32 v(int slot) const { return stage(slot) + Config::kKTileBytes; }
    __device__ __forceinline__ u32 k_scales(int slot) const {
      return v(slot) + Config::kVTileBytes;
    }
    __device__ __forceinline__ const float* k_scales_generic(int slot) const {
      return reinterpret_cast<const float*>(bytes + (k_scales(slot) - base));
    }
    __device__ __forceinline__ u32 output(int consumer_warp) const {
      return stage(kStages) + consumer_warp * Config::kWarpOutputBytes;
    }
    __device__ __forceinline__ const u8* output_generic(int consumer_warp) const {
      return bytes + (output(consumer_warp) - base);
    }
    __device__ __forceinline__ u32 v_scales() const { return output(4 * Config::kConsumerGroups); }
    __device__ __forceinline__ const float* v_scales_generic() const {
      return reinterpret_cast<const float*>(bytes + (v_scales() - base));
    }
    __device__ __forceinline__ u32 barriers() const {
      return stage(kStages) + Config::kOutputStagingBytes;
    }
    __device__ __forceinline__ u32 full(int slot) const { return barriers() + 8 * slot; }
    __device__ __forceinline__ u32 empty(int slot) const {
      return barriers() + 8 * (kStages + slot);
    }
    __device__ __forceinline__ u32 v_scales_full() const { return barriers() + 8 * (2 * kStages); }
    // One word per consumer warp, written by its lane 0 and never read (keep_ahead_of_wait).
    __device__ __forceinline__ u32 unread_word(int group, int warp_in_group) const {
      return barriers() + kUnreadWordsOffset + 4 * (4 * group + warp_in_group);
    }
    static constexpr int kUnreadWordsOffset = 8 * (2 * kStages + 2);
    static_assert(kUnreadWordsOffset + 4 * 4 * Config::kConsumerGroups <= kWgmmaBarrierBytes,
                  "the barriers and the unread words fit their bytes");
  };

  // The block's place in the problem.
  struct BlockWork {
    int batch, head_q, head_kv, first_row, tiles, causal_offset;
    SequenceExtent extent;
  };

  // A slot is full when the producer's TMA bytes have landed (one arrival with the byte count)
  // and each lane of the producer warp has seen its K scale copies land (32 arrivals).
  static constexpr int kFullArrivals = 1 + 32;
  // V's scales for the epilogue arrive on their own barrier, once per lane.
  static constexpr int kVScaleArrivals = 32;

  __device__ __forceinline__ static void init_barriers(const SharedLayout& shared,
                                                       int working_groups) {
    for (int slot = 0; slot < kStages; ++slot) {
      mbarrier_init(shared.full(slot), kFullArrivals);
      // Every working consumer thread releases a slot once its MMAs and its reads of the K
      // scales there are complete (release).
      mbarrier_init(shared.empty(slot), 128 * working_groups);
    }
    if (Config::kEpilogueVScales > 0) mbarrier_init(shared.v_scales_full(), kVScaleArrivals);
    fence_barrier_init();
  }

  // Where the producer puts the scale of key `key` of a tile, so that each consumer lane reads the
  // scales of its columns of two n8 tiles (8 nt + 2 thread_in_group + {0, 1} for nt = 2 pair and
  // 2 pair + 1) as one 16-byte load: position 16 pair + 4 thread_in_group + 2 (nt % 2) + e. The
  // four lanes of a quad read four consecutive 16-byte chunks, so no two share a bank.
  __device__ __forceinline__ static int k_scale_position(int key) {
    const int nt = key >> 3;
    const int thread_in_group = (key >> 1) & 3;
    return (nt >> 1) * 16 + thread_in_group * 4 + (nt & 1) * 2 + (key & 1);
  }

  __device__ __forceinline__ static void lane_k_scales(float2 (&scale)[kScoreTiles],
                                                       const float* k_scales,
                                                       LaneCoordinates lane) {
#pragma unroll
    for (int pair = 0; pair < kScoreTiles / 2; ++pair) {
      const float4 four =
          *reinterpret_cast<const float4*>(k_scales + pair * 16 + 4 * lane.thread_in_group);
      scale[2 * pair] = make_float2(four.x, four.y);
      scale[2 * pair + 1] = make_float2(four.z, four.w);
    }
  }

  // ---- producer (one warp) ----------------------------------------------------------------
  // Lane 0 issues the TMA loads; every lane copies BlockN / 32 K scales with cp.async (a head's
  // scales need not start on the 16-byte boundary a TMA box needs), zero past the sequence.
  __device__ __forceinline__ static void produce(const WgmmaAttentionParams& params,
                                                 const SharedLayout& shared, const BlockWork& work,
                                                 int lane) {
    constexpr int kSlab = Config::kSlabBytes;
    constexpr int kScalesPerLane = Config::kBlockN / 32;
    const float* head_k_scales = params.attention.k_scale + work.extent.k_scale0;
    for (int tile = 0; tile < work.tiles; ++tile) {
      const int slot = tile % kStages;
      const int round = tile / kStages;
      if (round > 0) mbarrier_wait(shared.empty(slot), (round - 1) & 1);
      const int first_key = tile * Config::kBlockN;
      // K and 16-bit V of packed sequences are one batch: the sequence's rows start at kv_row0
      // (keys past its end, the next sequence's, are masked like those past a dense one's).
      const int row_key = Config::kVarlen ? static_cast<int>(work.extent.kv_row0) + first_key
                                          : first_key;
      const int row_batch = Config::kVarlen ? 0 : work.batch;
      if (lane == 0) {
        mbarrier_arrive_expect_bytes(shared.full(slot), Config::kKTileBytes + Config::kVTileBytes);
#pragma unroll
        for (int slab = 0; slab < Config::kSlabs; ++slab) {
          tma_load_4d(shared.k(slot) + slab * Config::kBlockN * kSlab, &params.k_map,
                      shared.full(slot), slab * kSlab, row_key, work.head_kv, row_batch);
        }
        if constexpr (Config::kFullInt8) {  // INT8 V keeps one layout per sequence, varlen or not
          tma_load_4d(shared.v(slot), &params.v_map, shared.full(slot), first_key, 0, work.head_kv,
                      work.batch);
        } else {
#pragma unroll
          for (int slab = 0; slab < Config::kHeadDim / 64; ++slab) {
            tma_load_4d(shared.v(slot) + slab * Config::kVSlabBytes, &params.v_map,
                        shared.full(slot), slab * 64, row_key, work.head_kv, row_batch);
          }
        }
      }
      if constexpr (Config::kPerBlockK) {
        // One scale per 64-key block of the tile, in order.
        if (lane < Softmax::kKBlocks) {
          const int first = first_key + lane * kKTokenBlock;
          const bool valid = first < work.extent.seq_kv;
          copy_4_bytes_async(shared.k_scales(slot) + 4 * lane,
                             head_k_scales + (valid ? first / kKTokenBlock : 0), valid);
        }
      } else {
#pragma unroll
        for (int i = 0; i < kScalesPerLane; ++i) {
          const int index = i * 32 + lane;
          const int key = first_key + index;
          const bool valid = key < work.extent.seq_kv;
          copy_4_bytes_async(shared.k_scales(slot) + 4 * k_scale_position(index),
                             head_k_scales + (valid ? key : 0), valid);
        }
      }
      async_copies_arrive(shared.full(slot));
    }
  }

  // V's scales, which only the staged epilogue reads, copied by the producer's second warp (each
  // lane arrives once). Copied by the loading warp, they lengthened the consumers' main loop by
  // 24 instructions per tile (ptxas allocates the registers of all warpgroups' code together).
  __device__ __forceinline__ static void copy_v_scales(const WgmmaAttentionParams& params,
                                                       const SharedLayout& shared,
                                                       const BlockWork& work, int lane) {
    const i64 kv_index = static_cast<i64>(work.batch) * params.attention.heads_kv + work.head_kv;
    const float* head_v_scales =
        params.attention.v_scale + kv_index * (Config::kEpilogueVScales > 1 ? Config::kHeadDim : 1);
    for (int i = lane; i < Config::kEpilogueVScales; i += 32) {
      copy_4_bytes_async(shared.v_scales() + 4 * i, head_v_scales + i, true);
    }
    async_copies_arrive(shared.v_scales_full());
  }

  // ---- slots, as the consumers see them ---------------------------------------------------
  __device__ __forceinline__ static void wait_until_full(const SharedLayout& shared, int tile) {
    mbarrier_wait(shared.full(tile % kStages), (tile / kStages) & 1);
  }

  // Each thread arrives for itself, so that its own reads of the slot are ordered before the
  // producer's next copies into it. With one arrival per warp after __syncwarp (1% faster with
  // three warpgroups at d=128, the same elsewhere), compute-sanitizer's racecheck reported the
  // K-scale copies into a reused slot as racing with the other lanes' reads (H100, 2026-11-23).
  __device__ __forceinline__ static void release(const SharedLayout& shared, int slot) {
    mbarrier_arrive(shared.empty(slot));
  }

  // ---- turns ------------------------------------------------------------------------------
  // The turns from `turn` on, of tiles wholly above this warpgroup's causal diagonal (and the
  // closing turn): every warpgroup takes tiles + 1 turns, so the turns stay in step; these only
  // release their slots and pass the turn on.
  __device__ __forceinline__ static void pass_idle_turns(const SharedLayout& shared,
                                                         const BlockWork& work, int group,
                                                         int turn) {
    for (; turn <= work.tiles; ++turn) {
      if (turn < work.tiles) wait_until_full(shared, turn);
      wait_for_turn(group);
      pass_turn(group);
      if (turn < work.tiles) release(shared, turn % kStages);
    }
  }

  // Named barriers 1..ConsumerGroups (0 is __syncthreads) pass the turn to issue MMAs from one
  // consumer warpgroup to the next; each has the waiting warpgroup and the one passing it.
  // (ConsumerGroups + 1 + group is warpgroup `group`'s own, for its Q tile: publish_q_rows.)
  __device__ __forceinline__ static void wait_for_turn(int group) {
    asm volatile("bar.sync %0, 256;\n" ::"r"(1 + group) : "memory");
  }
  __device__ __forceinline__ static void pass_turn(int group) {
    asm volatile("bar.arrive %0, 256;\n" ::"r"(1 + (group + 1) % Config::kConsumerGroups)
                 : "memory");
  }
};

}  // namespace kernels
}  // namespace intfa
