// INT-FlashAttention forward for Hopper (sm_90a): warpgroup MMAs (wgmma), TMA loads and warp
// specialisation. Same numerics as the portable kernel (attention_forward.cuh; both take their
// softmax from online_softmax.cuh and their output code from epilogue.cuh): full INT8 with every
// P encoding, P reference and V granularity, and half INT8 (FP16/BF16 V and P, P.V accumulated
// in FP32 by the wgmma into the output, which is rescaled when a row's exponent reference moves).
//
// A block computes 64 * ConsumerGroups query rows of one (batch, query head) with
// ConsumerGroups + 1 warpgroups:
//   - the producer warpgroup gives most of its registers away; lane 0 of its first warp issues
//     the TMA loads of Q once and of K and V per key tile into a ring of Stages slots, and every
//     lane copies some of the tile's K scales (cp.async, arriving on the same barrier); each
//     slot is guarded by a "full" mbarrier (bytes landed) and an "empty" one (consumers done);
//   - each consumer warpgroup owns 64 rows: S = Q K^T with wgmma (both operands in shared
//     memory), the online softmax and P's quantization in registers (the wgmma accumulator is
//     the m16n8 layout per warp, so the portable code applies unchanged), then P V with P as the
//     register A operand and V^T in shared memory. The INT8 V layout (channels as rows, tokens
//     permuted in groups of 16) is exactly the K-major B operand this needs; half INT8's 16-bit
//     V (keys as rows) is the MN-major B operand that 16-bit wgmma reads transposed.
// Consumer warpgroups take turns to issue their MMAs (named barriers), so one's softmax overlaps
// another's MMAs, where the registers allow and it measured faster (kTakesTurns); otherwise they
// run independently.
// With one consumer warpgroup, two blocks share an SM (kBlocksPerSm) and overlap instead.
#pragma once

#include "attention/epilogue.cuh"
#include "attention/online_softmax.cuh"
#include "attention/wgmma_params.h"
#include "common/copy.cuh"
#include "common/grid_dependency.cuh"
#include "common/swizzle.cuh"
#include "common/tma.cuh"
#include "common/wgmma.cuh"

namespace intfa {
namespace kernels {

// Variant: full INT8 (P in 8 bits, INT8 V in the V layout) or half INT8 (P in VType, V the
// caller's 16-bit tensor, P.V accumulated in FP32 by the wgmma into the output itself). PEnc,
// PScale and VGranularity are full INT8's (the renderer passes their first values for half
// INT8). QuantizesQ: Q arrives in QType (16 bits) and the consumers quantize it per token
// themselves (WgmmaAttention::quantize_q_tile), which saves intfa.attention the pass of
// quantize_rows over Q; DotKMean: they also write q . (K's channel mean), K smoothing's LSE term.
// The parameters by position: named once, by WgmmaAttentionConfig below.
template <int HeadDim, int BlockN, int ConsumerGroups, int Stages, AttentionVariant Variant,
          ElementType VType, ElementType OutputType, bool Causal, PEncoding PEnc,
          PScaleReference PScale, VScaleGranularity VGranularity, KScaleGranularity KGranularity,
          bool QuantizesQ, ElementType QType, bool DotKMean>
struct WgmmaAttentionConfigOf {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockN = BlockN;
  static constexpr int kConsumerGroups = ConsumerGroups;
  static constexpr int kBlockM = kWgmmaGroupRows * ConsumerGroups;
  static constexpr int kStages = Stages;
  static constexpr int kThreads = 128 * (ConsumerGroups + 1);
  static constexpr bool kCausal = Causal;
  static constexpr bool kUnsignedP = PEnc == PEncoding::kUnsigned255;
  static constexpr bool kTileMaxReference = PScale == PScaleReference::kTileMax;
  static constexpr ElementType kOutputType = OutputType;
  static constexpr bool kFullInt8 = Variant == AttentionVariant::kFullInt8;
  static constexpr VScaleGranularity kVGranularity = VGranularity;
  static constexpr bool kPerBlockV = kFullInt8 && VGranularity == VScaleGranularity::kPerBlock;
  static constexpr bool kPerBlockK = KGranularity == KScaleGranularity::kPerBlock;
  static constexpr bool kQuantizesQ = QuantizesQ;
  static constexpr ElementType kQType = QType;
  static constexpr bool kDotKMean = DotKMean;
  static constexpr float kPRange = kUnsignedP ? 255.0f : 127.0f;

  // What the shared softmax and output code (OnlineSoftmax, store_output) reads: each warp
  // owns one 16-row m tile, Q.K in 8 bits, V in 8 bits (full INT8) or VType.
  static constexpr int kQkBits = 8;
  static constexpr ElementType kVType = VType;
  static constexpr int kMTiles = 1;
  static constexpr int kQkRowBytes = HeadDim;
  static constexpr int kQkSteps = HeadDim / 32;
  static constexpr int kScoreTiles = BlockN / 8;
  static constexpr int kOutputTiles = HeadDim / 8;
  // P.V k-steps: 32 keys of 8-bit P, or 16 keys of 16-bit P.
  static constexpr int kPvSteps = kFullInt8 ? BlockN / 32 : BlockN / 16;
  static constexpr int kVRowBytes = BlockN;
  // Half INT8's V tile: slabs of 64 channels (128-byte rows) by BlockN keys.
  static constexpr int kVSlabBytes = BlockN * 128;

  // Shared memory (wgmma_params.h): Q as slabs, then per stage K as slabs, V^T, K's scales.
  static constexpr int kSlabBytes = wgmma_slab_bytes(HeadDim);
  static constexpr int kSlabs = HeadDim / kSlabBytes;
  static constexpr int kQTileBytes = kBlockM * HeadDim;
  static constexpr int kKTileBytes = BlockN * HeadDim;
  static constexpr int kVTileBytes = HeadDim * BlockN * (kFullInt8 ? 1 : 2);
  static constexpr int kKScaleBytes = BlockN * 4;
  static constexpr int kStageBytes = wgmma_stage_bytes(HeadDim, BlockN, kFullInt8 ? 1 : 2);
  // The staged epilogue (wgmma_params.h): each consumer warp's 16 output rows, then V's scales
  // (one per channel, one per tensor, or none: per-block V folds its scales per tile).
  static constexpr bool kStagesOutput = wgmma_stages_output(HeadDim);
  static constexpr int kOutputRowBytes = HeadDim * 2;
  static constexpr int kWarpOutputBytes = 16 * kOutputRowBytes;
  static constexpr int kOutputStagingBytes = wgmma_output_staging_bytes(HeadDim, kBlockM);
  static constexpr int kEpilogueVScales = !kFullInt8                                       ? 0
                                          : VGranularity == VScaleGranularity::kPerChannel ? HeadDim
                                          : VGranularity == VScaleGranularity::kPerTensor  ? 1
                                                                                           : 0;
  // P.V runs in chunks of at most 128 output columns (one accumulator of 64 registers); full
  // INT8 with three consumer warpgroups in chunks of 64, so that one chunk folds while the other
  // runs (kPvChunksTogether: 4-10% faster at d=128 than one chunk of 128, same registers).
  // Half INT8 accumulates into the output itself: nothing to fold.
  static constexpr int kPvColumns = HeadDim < 128                        ? HeadDim
                                    : (ConsumerGroups == 3 && kFullInt8) ? 64
                                                                         : 128;
  // Per-block V: the P.V steps that share one 64-token scale block fold together.
  static constexpr int kStepsPerFold =
      kPerBlockV ? (kVTokenBlock / 32 < kPvSteps ? kVTokenBlock / 32 : kPvSteps) : kPvSteps;

  // One consumer warpgroup: two blocks share an SM, so that one's pipeline fill and drain (the
  // first tile's softmax, the last P.V, the epilogue) overlap the other's main loop.
  static constexpr int kBlocksPerSm = ConsumerGroups == 1 ? 2 : 1;
  // The register split of setmaxnreg: the producer keeps what issuing TMA needs.
  static constexpr int kProducerRegisters = ConsumerGroups == 3 ? 32 : 24;
  static constexpr int kConsumerRegisters = ConsumerGroups == 1   ? 232
                                            : ConsumerGroups == 2 ? 240
                                                                  : 160;

  // Taking turns (WgmmaAttention::main_loop_in_turns) keeps S, P, the P.V accumulator and the
  // output in registers together; beside them the rest of the loop needs about 32 (ptxas).
  // Per-block V folds per 64-token block, one block after the other, in main_loop.
  // Half INT8's turns (main_loop_16bit_pv_in_turns) keep S, P and the FP32 output; two
  // warpgroups take them at d <= 128, where they measured faster. Three run without, as three of
  // full INT8 do, which measured faster than in turns at d=64 and d=128 from 4k tokens
  // (bench/history/2026-11-27.md, "Half INT8: three warpgroups without turns, and a lagging
  // reference"). At d=256 turns lose (bench/history/2026-11-24.md, "Half INT8 on the Hopper
  // kernel").
  static constexpr int kTurnRegisters =
      kFullInt8 ? BlockN / 2 + BlockN / 8 + HeadDim : BlockN / 2 + BlockN / 4 + HeadDim / 2;
  static constexpr bool kTakesTurns = ConsumerGroups > 1 && !kPerBlockV &&
                                      kTurnRegisters + 32 <= kConsumerRegisters &&
                                      (kFullInt8 || (ConsumerGroups == 2 && HeadDim <= 128));
  // Half INT8 with three stages or more: P.V one tile behind Q.K^T, each tile exponentiated while
  // the previous tile's P.V runs (WgmmaAttention::tiles_16bit_pv_behind). It holds a slot longer,
  // so with two stages the producer falls behind (slower than waiting for P.V first:
  // bench/history/2026-11-27.md, "Half INT8: P.V one tile behind Q.K^T"), which the two-stage
  // configs keep doing.
  // Full INT8 the same way (WgmmaAttention::tiles_pv_behind), also with three stages or more
  // (with two it measured 22% slower at d=64 than waiting for P.V first, as half INT8 did),
  // without turns, where S, P, the INT32 P.V accumulators and the output fit the registers
  // together with about 16 more: d=64 with three warpgroups (144 of 160: no spills) and one
  // warpgroup at d <= 128 (208 of 232 at d=128, where ptxas parks one 64-bit value of the Q
  // pass and the epilogue in 8 bytes of local memory across the loop; nothing spills inside
  // it), not three at d=128 (208 of 160). Not per-block V, whose blocks fold apart (main_loop).
  static constexpr int kPvBehindRegisters = BlockN / 2 + BlockN / 8 + HeadDim;
  static constexpr bool kPvBehindScores =
      Stages >= 3 && (!kFullInt8 || (!kTakesTurns && !kPerBlockV &&
                                     kPvBehindRegisters + 16 <= kConsumerRegisters));
  // Full INT8 in turns at d <= 64: a tile's softmax beside this warpgroup's own P.V of the
  // previous tile, into a second P set (main_loop_in_turns): faster than without it, still
  // behind three warpgroups without turns (bench/history/2026-11-24.md, "2026-11-24: fewer
  // instructions per score", lever 4). At d=128 the second set spills (ptxas, 240 registers).
  static constexpr bool kSoftmaxBesidePv = kFullInt8 && kTakesTurns && HeadDim <= 64;
  // Without turns, a tile's two P.V chunks are in flight together where their accumulators fit
  // beside P and the output (three warpgroups at d=128: 144 registers of 160, no spills), so
  // the first chunk folds while the second runs.
  static constexpr int kPvChunks = HeadDim / kPvColumns;
  static constexpr bool kPvChunksTogether =
      kFullInt8 && kPvChunks == 2 && !kPerBlockV && HeadDim + BlockN / 8 + 16 <= kConsumerRegisters;

  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static_assert(BlockN == 64 || BlockN == 128, "block_n 64 or 128 (a 64- or 128-byte V row)");
  static_assert(!DotKMean || QuantizesQ, "the LSE term comes from the kernel's own Q pass");
  static_assert(QType == ElementType::kF16 || QType == ElementType::kBF16, "16-bit Q");
  static_assert(ConsumerGroups >= 1 && ConsumerGroups <= 3, "1 to 3 consumer warpgroups");
  static_assert(Stages >= 2 && Stages <= 4, "2 to 4 pipeline stages");
  static_assert(kBlockM * HeadDim % 1024 == 0 && kKTileBytes % 1024 == 0, "aligned tiles");
  static_assert(128 * (kProducerRegisters + ConsumerGroups * kConsumerRegisters) * kBlocksPerSm <=
                    65536,
                "the register split fits the register file");
};

// Spec: the kernel spec's fields as `static constexpr` members (head_dim, block_n, warps: 4 per
// warpgroup, one of them the producer, stages, variant, input_type: half INT8's V and the 16-bit
// Q of a kernel that quantizes Q, output_type, causal, quantizes_q, q_dot_k_mean); Numerics: one
// member per numerics option (include/intfa/numerics.hpp); an option added to the list reaches
// the kernel as Config::Numerics::<its name>.
template <class Spec, class NumericsConstants>
struct WgmmaAttentionConfig
    : WgmmaAttentionConfigOf<Spec::head_dim, Spec::block_n, Spec::warps / 4 - 1, Spec::stages,
                             Spec::variant, Spec::input_type, Spec::output_type, Spec::causal,
                             NumericsConstants::p_encoding, NumericsConstants::p_scale,
                             NumericsConstants::v_granularity, NumericsConstants::k_granularity,
                             Spec::quantizes_q, Spec::input_type, Spec::q_dot_k_mean> {
  using Numerics = NumericsConstants;
};

template <class Config>
struct WgmmaAttention {
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
    __device__ __forceinline__ u32 q_full() const { return barriers() + 8 * (2 * kStages); }
    __device__ __forceinline__ u32 v_scales_full() const { return q_full() + 8; }
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
    mbarrier_init(shared.q_full(), 1);
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
    if (lane == 0 && !Config::kQuantizesQ) {
      mbarrier_arrive_expect_bytes(shared.q_full(), Config::kQTileBytes);
#pragma unroll
      for (int slab = 0; slab < Config::kSlabs; ++slab) {
        tma_load_4d(shared.q() + slab * Config::kBlockM * kSlab, &params.q_map, shared.q_full(),
                    slab * kSlab, work.first_row, work.head_q, work.batch);
      }
    }
    const float* head_k_scales = params.attention.k_scale + work.extent.k_scale0;
    for (int tile = 0; tile < work.tiles; ++tile) {
      const int slot = tile % kStages;
      const int round = tile / kStages;
      if (round > 0) mbarrier_wait(shared.empty(slot), (round - 1) & 1);
      const int first_key = tile * Config::kBlockN;
      if (lane == 0) {
        mbarrier_arrive_expect_bytes(shared.full(slot), Config::kKTileBytes + Config::kVTileBytes);
#pragma unroll
        for (int slab = 0; slab < Config::kSlabs; ++slab) {
          tma_load_4d(shared.k(slot) + slab * Config::kBlockN * kSlab, &params.k_map,
                      shared.full(slot), slab * kSlab, first_key, work.head_kv, work.batch);
        }
        if constexpr (Config::kFullInt8) {
          tma_load_4d(shared.v(slot), &params.v_map, shared.full(slot), first_key, 0, work.head_kv,
                      work.batch);
        } else {
#pragma unroll
          for (int slab = 0; slab < Config::kHeadDim / 64; ++slab) {
            tma_load_4d(shared.v(slot) + slab * Config::kVSlabBytes, &params.v_map,
                        shared.full(slot), slab * 64, first_key, work.head_kv, work.batch);
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

  // ---- consumers --------------------------------------------------------------------------
  // The kernel's own Q pass (kQuantizesQ): this warpgroup's 64 rows of 16-bit Q, quantized per
  // token into the Q tile's slabs where the TMA load would have put them (same swizzle). Each
  // warp takes the 16 rows its MMA fragments cover, HeadDim / 8 lanes per row with 8 channels
  // each: the lanes, the reductions (common/numeric.cuh) and the rounding of quantize_rows, so
  // the INT8 rows, scales and LSE terms are bit for bit the ones that pass would write. All of
  // the warp's row loads are issued first; their latency overlaps the producer's first K/V
  // loads. Each lane gets its two rows' scales (fragment rows group and group + 8) with one
  // shuffle per pass. The warpgroup then syncs on its own named barrier: wgmma reads all 64 rows.
  __device__ __forceinline__ static void quantize_q_tile(const WgmmaAttentionParams& params,
                                                         const SharedLayout& shared,
                                                         const BlockWork& work, int group,
                                                         int thread, LaneCoordinates coordinates,
                                                         float (&q_scale_of_row)[2]) {
    constexpr int kLanesPerRow = Config::kHeadDim / 8;
    constexpr int kRowsPerPass = 32 / kLanesPerRow;  // per warp
    constexpr int kPasses = 16 / kRowsPerPass;
    constexpr int kSlab = Config::kSlabBytes;
    using Slab = SwizzledTile<kSlab>;
    const WgmmaQInput& input = params.q_input;
    const int lane = thread & 31;
    const int lane_in_row = lane % kLanesPerRow;
    const int channel = lane_in_row * 8;
    // The warp's first row within the block's tile, and in the sequence.
    const int tile_row0 = group * kWgmmaGroupRows + (thread >> 5) * 16 + lane / kLanesPerRow;
    const int row0 = work.first_row + tile_row0;
    const u8* head_q = static_cast<const u8*>(input.q) + work.batch * input.strides.batch +
                       work.head_q * input.strides.head + channel * 2;
    uint4 raw[kPasses];
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int row = row0 + pass * kRowsPerPass;
      // Rows past the sequence and channels past the caller's head dim read as zeros.
      raw[pass] = row < work.extent.seq_q && channel < params.attention.out_head_dim
                      ? *reinterpret_cast<const uint4*>(head_q + row * input.strides.row)
                      : make_uint4(0, 0, 0, 0);
    }
    float mean[8];
    if constexpr (Config::kDotKMean) {
      const float* head_mean =
          input.k_channel_mean +
          (static_cast<i64>(work.batch) * params.attention.heads_kv + work.head_kv) *
              Config::kHeadDim +
          channel;
#pragma unroll
      for (int i = 0; i < 8; ++i) mean[i] = head_mean[i];
    }
    // Fragment row r (0..15 of the warp) is quantized in pass r / kRowsPerPass by the lanes from
    // (r % kRowsPerPass) * kLanesPerRow; rows group and group + 8 share that lane (8 is a
    // multiple of kRowsPerPass).
    const int source_lane = (coordinates.group % kRowsPerPass) * kLanesPerRow;
    u8* const tile = const_cast<u8*>(shared.bytes) + (shared.q() - shared.base);
    u8* const slab = tile + (channel / kSlab) * Config::kBlockM * kSlab + (channel % kSlab) % 16;
    const int chunk = (channel % kSlab) / 16;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      float values[8];
      unpack_8_values<Config::kQType>(values, raw[pass]);
      const int row = row0 + pass * kRowsPerPass;
      if constexpr (Config::kDotKMean) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot = fmaf(values[i], mean[i], dot);
        dot = row_sum<kLanesPerRow>(dot);
        if (lane_in_row == 0 && row < work.extent.seq_q) {
          input.q_dot_k_mean[work.extent.q_scale0 + row] = dot;
        }
      }
      const RowScale scale = row_scale(row_max_abs<kLanesPerRow>(values), 127.0f);
      u32 quantized[8];
      quantize_8(quantized, values, scale.inverse, 127, scale.clamps);
      store_int8x8(slab + Slab::offset(tile_row0 + pass * kRowsPerPass, chunk), quantized);
      const float row_scale_value = __shfl_sync(0xFFFFFFFFu, scale.scale, source_lane);
      if (coordinates.group / kRowsPerPass == pass) q_scale_of_row[0] = row_scale_value;
      if ((coordinates.group + 8) / kRowsPerPass == pass) q_scale_of_row[1] = row_scale_value;
    }
    fence_proxy_async_shared();
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + Config::kConsumerGroups + group) : "memory");
  }

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
      quantize_q_tile(params, shared, work, group, thread, coordinates, q_scale_of_row);
    } else {
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
    if (!Config::kQuantizesQ) mbarrier_wait(shared.q_full(), 0);
    if constexpr (!Config::kFullInt8 && Config::kTakesTurns) {
      main_loop_16bit_pv_in_turns(o[0], rows, shared, work, group, warp_first_row, visible_tiles,
                                  coordinates);
    } else if constexpr (!Config::kFullInt8) {
      main_loop_16bit_pv(o[0], rows, shared, work, group, warp_first_row, visible_tiles,
                         coordinates);
      for (int tile = visible_tiles; tile < work.tiles; ++tile) {
        wait_until_full(shared, tile);
        release(shared, tile % kStages);
      }
    } else if constexpr (Config::kTakesTurns) {
      main_loop_in_turns(o[0], rows, shared, work, group, warp_first_row, visible_tiles,
                         coordinates);
    } else {
      if constexpr (Config::kPvBehindScores) {
        if (visible_tiles > 0) {
          tiles_pv_behind(o[0], rows, shared, work, group, warp_first_row, visible_tiles,
                          coordinates);
        }
      } else {
        main_loop(o[0], rows, attention, shared, work, group, warp_first_row, visible_tiles,
                  coordinates);
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
      store_output_staged(attention, shared, work, warp_first_row, coordinates, o[0], lane_sum,
                          log2_reference);
    } else {
      store_output<Config>(attention, work.extent, work.batch, work.head_q, work.head_kv,
                           warp_first_row, coordinates, o, lane_sum, log2_reference);
    }
  }

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
  // (ConsumerGroups + 1 + group is warpgroup `group`'s own, for its Q pass: quantize_q_tile.)
  __device__ __forceinline__ static void wait_for_turn(int group) {
    asm volatile("bar.sync %0, 256;\n" ::"r"(1 + group) : "memory");
  }
  __device__ __forceinline__ static void pass_turn(int group) {
    asm volatile("bar.arrive %0, 256;\n" ::"r"(1 + (group + 1) % Config::kConsumerGroups)
                 : "memory");
  }

  // The turns of main_loop_in_turns after the first tile's softmax when kSoftmaxBesidePv (lever
  // 4 of issue 22): a turn issues tile t's Q K^T first and tile t - 1's P V after it, makes
  // tile t's P (into the other of two P sets: the running wgmma still reads the first) while
  // that P V runs, then folds it. Unrolled by two so that the sets swap by name. Leaves tile
  // visible_tiles - 1's P in `current` and returns the next turn.
  template <class IssueValues, class FoldValues, class QuantizeScores>
  __device__ __forceinline__ static int main_turns_beside_pv(
      TileP& current, int (&s)[kScoreTiles][4], IssueValues& issue_values, FoldValues& fold_values,
      QuantizeScores& quantize_scores, const SharedLayout& shared, int group, int visible_tiles) {
    constexpr int kChunks = Config::kPvChunks;
    TileP other;
    auto take_turn = [&](TileP& previous, TileP& next, int t) {
      int acc[kChunks][Config::kPvColumns / 8][4];
      wait_until_full(shared, t);
      wait_for_turn(group);
      issue_score_tile(s, shared, group, t % kStages);
      issue_values(acc, previous, t - 1);
      pass_turn(group);
      wgmma_wait<1>();
      quantize_scores(s, next, t);
      wgmma_wait<0>();
      fold_values(acc, previous, t - 1);
    };
    int turn = 1;
    for (; turn + 1 < visible_tiles; turn += 2) {
      take_turn(current, other, turn);
      take_turn(other, current, turn + 1);
    }
    if (turn < visible_tiles) {
      take_turn(current, other, turn);
      current = other;
      ++turn;
    }
    return turn;
  }

  // The consumer warpgroups take turns to issue their MMAs (FlashAttention-3's ping-pong), so
  // one's softmax runs while another's MMAs hold the tensor cores. In turn t a warpgroup issues
  // tile t - 1's P V and tile t's Q K^T, then folds P V while Q K^T runs. Every warpgroup takes
  // tiles + 1 turns (tiles above its causal diagonal only pass the turn on), so the turns stay in
  // step. The prologue and epilogue turns are peeled so that each loop waits on its MMAs
  // unconditionally, which ptxas needs to leave them asynchronous.
  __device__ __forceinline__ static void main_loop_in_turns(float (&o)[kOutputTiles][4],
                                                            RowState& rows,
                                                            const SharedLayout& shared,
                                                            const BlockWork& work, int group,
                                                            int warp_first_row, int visible_tiles,
                                                            LaneCoordinates coordinates) {
    constexpr int kChunks = Config::kPvChunks;
    auto issue_values = [&](int(&acc)[kChunks][Config::kPvColumns / 8][4], const TileP& tile_p,
                            int tile) {
#pragma unroll
      for (int chunk = 0; chunk < kChunks; ++chunk) {
        issue_pv(acc[chunk], tile_p.p, shared, tile % kStages, chunk, 0, Config::kPvSteps);
      }
    };
    auto fold_values = [&](int(&acc)[kChunks][Config::kPvColumns / 8][4], TileP& tile_p, int tile) {
      wgmma_pin(tile_p.p);
      release(shared, tile % kStages);
      float gamma[2];
      frame_tile(gamma, tile_p, rows, o);
#pragma unroll
      for (int chunk = 0; chunk < kChunks; ++chunk) {
        wgmma_pin(acc[chunk]);
        fold_into_output(o, acc[chunk], chunk, gamma, nullptr, coordinates);
      }
      sum_tile(rows, gamma, tile_p);
    };
    auto quantize_scores = [&](int(&s)[kScoreTiles][4], TileP& tile_p, int tile) {
      wgmma_pin(s);
      quantize_tile(tile_p, s, rows, shared.k_scales_generic(tile % kStages),
                    tile * Config::kBlockN, warp_first_row, work, coordinates);
    };

    if (group == Config::kConsumerGroups - 1) pass_turn(group);  // group 0 goes first
    int turn = 0;
    if (visible_tiles > 0) {
      int s[kScoreTiles][4];
      TileP current;
      wait_until_full(shared, 0);
      wait_for_turn(group);
      issue_score_tile(s, shared, group, 0);
      pass_turn(group);
      wgmma_wait<0>();
      quantize_scores(s, current, 0);
      if constexpr (Config::kSoftmaxBesidePv) {
        turn = main_turns_beside_pv(current, s, issue_values, fold_values, quantize_scores, shared,
                                    group, visible_tiles);
      } else {
        for (turn = 1; turn < visible_tiles; ++turn) {
          int acc[kChunks][Config::kPvColumns / 8][4];
          wait_until_full(shared, turn);
          wait_for_turn(group);
          issue_values(acc, current, turn - 1);
          issue_score_tile(s, shared, group, turn % kStages);
          pass_turn(group);
          wgmma_wait<1>();
          fold_values(acc, current, turn - 1);
          wgmma_wait<0>();
          quantize_scores(s, current, turn);
        }
      }
      int acc[kChunks][Config::kPvColumns / 8][4];
      if (turn < work.tiles) wait_until_full(shared, turn);
      wait_for_turn(group);
      issue_values(acc, current, turn - 1);
      pass_turn(group);
      wgmma_wait<0>();
      fold_values(acc, current, turn - 1);
      if (turn < work.tiles) release(shared, turn % kStages);
      ++turn;
    }
    pass_idle_turns(shared, work, group, turn);
  }

  // P V of one tile with both output chunks in flight at once (kPvChunksTogether), each folded
  // into the output as soon as it is done.
  __device__ __forceinline__ static void fold_tile_values_together(
      float (&o)[kOutputTiles][4], TileP& tile_p, const SharedLayout& shared, int slot,
      const float (&gamma)[2], LaneCoordinates coordinates) {
    int acc[2][Config::kPvColumns / 8][4];
#pragma unroll
    for (int chunk = 0; chunk < 2; ++chunk) {
      issue_pv(acc[chunk], tile_p.p, shared, slot, chunk, 0, Config::kPvSteps);
    }
    wgmma_wait<1>();
    wgmma_pin(acc[0]);
    fold_into_output(o, acc[0], 0, gamma, nullptr, coordinates);
    wgmma_wait<0>();
    wgmma_pin(acc[1]);
    wgmma_pin(tile_p.p);  // read by the wgmma until the last wait
    fold_into_output(o, acc[1], 1, gamma, nullptr, coordinates);
  }

  // Full INT8 with P V one tile behind Q K^T (kPvBehindScores): FlashAttention-3's overlap of a
  // warpgroup's softmax with its own P V, as tiles_16bit_pv_behind does for half INT8. Step t
  // waits for tile t's Q K^T and takes its scores, row maxima and reference (tile_scores), then
  // issues tile t - 1's P V, and while that runs rounds tile t's P into quantize_p_pair words
  // (round_p: the exponentials) and takes tile t - 1's fold factors (frame_tile: after tile
  // t - 2's fold, which a rebase of the frame must follow); then it waits for the P V, releases
  // its slot, folds it into the output, adds its row sums and only then gathers tile t's P into
  // the fragments the P V read, so one set of P registers does. Per tile the same operations in
  // the same order as main_loop: the output and the sums are the same bits. The P V is issued
  // after the maxima, not beside the Q K^T: with the K scales loaded and the maxima taken while
  // the P V accumulators and P are live, ptxas spilled 48-76 bytes at d=64 with three
  // warpgroups (and sank the P V's issue below the maxima itself). The first Q K^T and the last
  // P V are peeled, so that no wgmma is in flight across the loop's back edge (C7514:
  // tiles_16bit_pv_behind). A slot is released one step later than main_loop releases it.
  __device__ __forceinline__ static void tiles_pv_behind(float (&o)[kOutputTiles][4],
                                                         RowState& rows, const SharedLayout& shared,
                                                         const BlockWork& work, int group,
                                                         int warp_first_row, int visible_tiles,
                                                         LaneCoordinates coordinates) {
    constexpr int kChunks = Config::kPvChunks;
    using Accumulators = int[kChunks][Config::kPvColumns / 8][4];
    using Multipliers = float[1][2][Softmax::kKBlocks];
    TileP current;  // the tile whose P V is issued next
    u32 pairs[kScoreTiles][2];
    // Tile `tile`'s S = Q K^T, waited for, as scores y with their multipliers and reference.
    auto tile_scores = [&](float(&y)[1][kScoreTiles][4], Multipliers& c_tile, float(&reference)[2],
                           int tile) {
      int s[kScoreTiles][4];
      const float* k_scales = shared.k_scales_generic(tile % kStages);
      wait_until_full(shared, tile);
      issue_score_tile(s, shared, group, tile % kStages);
      wgmma_wait<0>();
      wgmma_pin(s);
      scale_scores(y, s, k_scales, tile * Config::kBlockN, warp_first_row, work, coordinates);
      tile_reference(reference, c_tile, y, rows, k_scales);
    };
    auto issue_values = [&](Accumulators& acc, int tile) {
#pragma unroll
      for (int chunk = 0; chunk < kChunks; ++chunk) {
        issue_pv(acc[chunk], current.p, shared, tile % kStages, chunk, 0, Config::kPvSteps);
      }
    };
    auto fold_values = [&](Accumulators& acc, int tile) {
      float gamma[2];
      frame_tile(gamma, current, rows, o);
      wgmma_wait<0>();
      wgmma_pin(current.p);  // read by the wgmma until the wait
      release(shared, tile % kStages);
#pragma unroll
      for (int chunk = 0; chunk < kChunks; ++chunk) {
        wgmma_pin(acc[chunk]);
        fold_into_output(o, acc[chunk], chunk, gamma, nullptr, coordinates);
      }
      sum_tile(rows, gamma, current);
    };

    {
      float y[1][kScoreTiles][4];
      Multipliers c_tile;
      tile_scores(y, c_tile, current.reference, 0);
      round_p(pairs, y, c_tile, current.reference);
    }
    gather_p(current, pairs);
    for (int tile = 1; tile < visible_tiles; ++tile) {
      float y[1][kScoreTiles][4];
      Multipliers c_tile;
      float reference[2];
      tile_scores(y, c_tile, reference, tile);
      Accumulators acc;
      issue_values(acc, tile - 1);
      round_p(pairs, y, c_tile, reference);
      fold_values(acc, tile - 1);
      gather_p(current, pairs);
      current.reference[0] = reference[0];
      current.reference[1] = reference[1];
    }
    // The last P V.
    Accumulators acc;
    issue_values(acc, visible_tiles - 1);
    fold_values(acc, visible_tiles - 1);
  }

  // Per tile: S = Q K^T, P, then P V folded into the output. With per-block V, each 64-token
  // block of a tile has its own scale per channel, so its part of P.V folds on its own.
  // (Issuing the next tile's Q K^T ahead, to overlap its softmax with this tile's P.V, measured
  // slower on the H100: ptxas serialises the warpgroup around the registers in flight.)
  __device__ __forceinline__ static void main_loop(float (&o)[kOutputTiles][4], RowState& rows,
                                                   const AttentionParams& attention,
                                                   const SharedLayout& shared,
                                                   const BlockWork& work, int group,
                                                   int warp_first_row, int visible_tiles,
                                                   LaneCoordinates coordinates) {
    const int v_blocks = attention.v_padded_seq / kVTokenBlock;
    const float* head_v_scales =
        Config::kPerBlockV
            ? attention.v_scale +
                  (static_cast<i64>(work.batch) * attention.heads_kv + work.head_kv) * v_blocks *
                      Config::kHeadDim
            : nullptr;
    for (int tile = 0; tile < visible_tiles; ++tile) {
      const int slot = tile % kStages;
      wait_until_full(shared, tile);
      int s[kScoreTiles][4];
      issue_score_tile(s, shared, group, slot);
      wgmma_wait<0>();
      wgmma_pin(s);
      TileP current;
      quantize_tile(current, s, rows, shared.k_scales_generic(slot), tile * Config::kBlockN,
                    warp_first_row, work, coordinates);
      float gamma[2];
      frame_tile(gamma, current, rows, o);
      if constexpr (Config::kPvChunksTogether) {
        fold_tile_values_together(o, current, shared, slot, gamma, coordinates);
      } else {
#pragma unroll
        for (int chunk = 0; chunk < Config::kPvChunks; ++chunk) {
#pragma unroll
          for (int part = 0; part < Config::kPvSteps / Config::kStepsPerFold; ++part) {
            // A tile can reach past V's last block: P is zero there, and no scale exists.
            const int block = tile * Config::kBlockN / kVTokenBlock + part;
            if (block >= v_blocks) continue;
            int acc[Config::kPvColumns / 8][4];
            issue_pv(acc, current.p, shared, slot, chunk, part * Config::kStepsPerFold,
                     Config::kStepsPerFold);
            wgmma_wait<0>();
            wgmma_pin(acc);
            wgmma_pin(current.p);  // read by the wgmma until the wait
            fold_into_output(
                o, acc, chunk, gamma,
                Config::kPerBlockV ? head_v_scales + block * Config::kHeadDim : nullptr,
                coordinates);
          }
        }
      }
      sum_tile(rows, gamma, current);
      release(shared, slot);
    }
  }

  // Half INT8's softmax of one tile (README "Half INT8") up to P: y from S, the exponent
  // reference, e in FP32 (`e`; Softmax::pack_p_16bit rounds it into P), l rescaled by alpha and the
  // tile's sum added; alpha (0 where a row saw no key before) is left for the caller to rescale
  // the output with, and whether any row of the warp needs it. It touches neither P nor the
  // output, so it runs while the wgmma of the previous tile's P V still reads and writes them.
  __device__ __forceinline__ static bool exponentiate_tile_16bit(
      float (&e)[kScoreTiles][4], float (&alpha)[2], const int (&s)[kScoreTiles][4], RowState& rows,
      const float* k_scales, int tile, int warp_first_row, const BlockWork& work,
      LaneCoordinates coordinates) {
    float y[1][kScoreTiles][4];
    float tile_max[1][2];
    float c_tile[1][2][Softmax::kKBlocks];
    scale_tile(y, tile_max, c_tile, s, rows, k_scales, tile * Config::kBlockN, warp_first_row, work,
               coordinates);
    bool rescale = false;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      // running_max is half INT8's reference (half_int8_reference): within 2^8 of the maximum.
      const float previous = rows.running_max[0][half];
      const float updated = half_int8_reference(previous, tile_max[0][half]);
      rows.running_max[0][half] = updated;
      alpha[half] = previous == negative_infinity() ? 0.0f : exp2_approx(previous - updated);
      rescale |= previous != updated;
    }
    float tile_sum[1][2];
    Softmax::exponentiate_16bit(reinterpret_cast<float(&)[1][kScoreTiles][4]>(e), tile_sum, y,
                                c_tile, rows.running_max);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      rows.sum[0][half] = fmaf(rows.sum[0][half], alpha[half], tile_sum[0][half]);
    }
    return __any_sync(0xFFFFFFFFu, rescale);
  }

  // The whole softmax of one tile, P included, for the loops that wait for their P V first.
  __device__ __forceinline__ static bool softmax_16bit(
      u32 (&p)[Config::kPvSteps][4], float (&alpha)[2], const int (&s)[kScoreTiles][4],
      RowState& rows, const float* k_scales, int tile, int warp_first_row, const BlockWork& work,
      LaneCoordinates coordinates) {
    float e[kScoreTiles][4];
    const bool rescale = exponentiate_tile_16bit(e, alpha, s, rows, k_scales, tile, warp_first_row,
                                                 work, coordinates);
    pack_p_16bit(p, e);
    return rescale;
  }

  // ptxas keeps shared-memory stores in order with a wgmma wait but moves arithmetic across it:
  // it sank the row maxima, exponents and sums of exponentiate_tile_16bit below the wait for the
  // previous tile's P V, so that nothing overlapped it (the SASS of sm_90a). Storing the row sums,
  // which depend on all of that work, to a word no one reads keeps it ahead of the wait. The store
  // is warp-wide in the SASS whatever its predicate, so lane 0 alone stores, to its warp's own
  // word: no two threads write one address (compute-sanitizer's racecheck reported each lane's
  // store to a shared word of the warpgroup as a write-write hazard).
  __device__ __forceinline__ static void keep_ahead_of_wait(const SharedLayout& shared, int group,
                                                            const RowState& rows) {
    const u32 lane = threadIdx.x % 32;
    asm volatile(
        "{\n"
        ".reg .pred first_lane;\n"
        "setp.eq.u32 first_lane, %2, 0;\n"
        "@first_lane st.shared.f32 [%0], %1;\n"
        "}\n" ::"r"(shared.unread_word(group, (threadIdx.x / 32) % 4)),
        "f"(rows.sum[0][0] + rows.sum[0][1]), "r"(lane)
        : "memory");
  }

  __device__ __forceinline__ static void pack_p_16bit(u32 (&p)[Config::kPvSteps][4],
                                                      const float (&e)[kScoreTiles][4]) {
    Softmax::pack_p_16bit(reinterpret_cast<u32(&)[1][Config::kPvSteps][4]>(p),
                          reinterpret_cast<const float(&)[1][kScoreTiles][4]>(e));
  }

  __device__ __forceinline__ static void rescale_output(float (&o)[kOutputTiles][4],
                                                        const float (&alpha)[2]) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int dt = 0; dt < kOutputTiles; ++dt) {
        o[dt][2 * half] *= alpha[half];
        o[dt][2 * half + 1] *= alpha[half];
      }
    }
  }

  // Half INT8 with P V one tile behind Q K^T (kPvBehindScores; as FlashAttention-3 overlaps a
  // warpgroup's softmax with its own P V): step t issues tile t's Q K^T, rescales the output for
  // tile t - 1 while that runs (as FlashAttention-3 does; rescaled after the wait for P V instead,
  // it was slower at d=64 causal: bench/history/2026-11-28.md, "Half INT8: the output rescaled
  // while Q.K^T runs"),
  // issues tile t - 1's P V, waits for the Q K^T only, exponentiates tile t while that P V still
  // runs, then waits for it and rounds tile t's P. P is rounded only after the wait, so one set of
  // P registers does: the running wgmma reads P and accumulates into the output, and the
  // exponentiation touches neither. Carried round the loop instead (tile t + 1's Q K^T issued
  // before the wait for P V), a wgmma in flight across the loop's back edge makes ptxas serialize
  // them all (C7514 in NVRTC's log). A slot is released only after the exponentiation of the next
  // tile, so the producer needs a third stage to keep a tile ahead. `take_turn` and `pass` bracket
  // each issue: the warpgroups' turns, or nothing for warpgroups that run independently;
  // visible_tiles + 1 issues, after which tiles 0 .. visible_tiles - 1 are released.
  template <class TakeTurn, class PassTurn>
  __device__ __forceinline__ static void tiles_16bit_pv_behind(
      float (&o)[kOutputTiles][4], RowState& rows, const SharedLayout& shared,
      const BlockWork& work, int group, int warp_first_row, int visible_tiles,
      LaneCoordinates coordinates, TakeTurn&& take_turn, PassTurn&& pass) {
    u32 p[Config::kPvSteps][4];
    int s[kScoreTiles][4];
    float e[kScoreTiles][4];
    float alpha[2];
    // The first tile, peeled: nothing to overlap, and the output is still zero (no rescale). The
    // loop below then waits on its MMAs unconditionally, which ptxas needs to leave them
    // asynchronous.
    wait_until_full(shared, 0);
    take_turn();
    issue_score_tile(s, shared, group, 0);
    pass();
    wgmma_wait<0>();
    wgmma_pin(s);
    bool rescale = false;  // whether the output needs alpha before the next P V: still zero here
    exponentiate_tile_16bit(e, alpha, s, rows, shared.k_scales_generic(0), 0, warp_first_row, work,
                            coordinates);
    pack_p_16bit(p, e);
    for (int tile = 1; tile < visible_tiles; ++tile) {
      wait_until_full(shared, tile);
      take_turn();
      issue_score_tile(s, shared, group, tile % kStages);
      if (rescale) rescale_output(o, alpha);  // the previous tile's, while S runs
      issue_pv_16bit(o, p, shared, (tile - 1) % kStages);
      pass();
      wgmma_wait<1>();  // this tile's S; the previous tile's P V runs on
      wgmma_pin(s);
      rescale = exponentiate_tile_16bit(e, alpha, s, rows, shared.k_scales_generic(tile % kStages),
                                        tile, warp_first_row, work, coordinates);
      keep_ahead_of_wait(shared, group, rows);
      wgmma_wait<0>();
      wgmma_pin(o);
      wgmma_pin(p);  // read by the wgmma until the wait
      release(shared, (tile - 1) % kStages);
      pack_p_16bit(p, e);
    }
    // The last P V.
    take_turn();
    if (rescale) rescale_output(o, alpha);
    issue_pv_16bit(o, p, shared, (visible_tiles - 1) % kStages);
    pass();
    wgmma_wait<0>();
    wgmma_pin(o);
    wgmma_pin(p);
    release(shared, (visible_tiles - 1) % kStages);
  }

  // Half INT8, the warpgroups independent of each other: with three stages P V one tile behind
  // Q K^T (tiles_16bit_pv_behind), with two main_loop_16bit_pv_waited.
  __device__ __forceinline__ static void main_loop_16bit_pv(float (&o)[kOutputTiles][4],
                                                            RowState& rows,
                                                            const SharedLayout& shared,
                                                            const BlockWork& work, int group,
                                                            int warp_first_row, int visible_tiles,
                                                            LaneCoordinates coordinates) {
    if constexpr (Config::kPvBehindScores) {
      if (visible_tiles > 0) {
        tiles_16bit_pv_behind(
            o, rows, shared, work, group, warp_first_row, visible_tiles, coordinates, [] {}, [] {});
      }
    } else {
      main_loop_16bit_pv_waited(o, rows, shared, work, group, warp_first_row, visible_tiles,
                                coordinates);
    }
  }

  // Half INT8 with two stages, the warpgroups independent: per tile S = Q K^T, the softmax, the
  // output rescaled when a row's reference moved, then O += P V into the FP32 output, waited for.
  __device__ __forceinline__ static void main_loop_16bit_pv_waited(
      float (&o)[kOutputTiles][4], RowState& rows, const SharedLayout& shared,
      const BlockWork& work, int group, int warp_first_row, int visible_tiles,
      LaneCoordinates coordinates) {
    for (int tile = 0; tile < visible_tiles; ++tile) {
      const int slot = tile % kStages;
      wait_until_full(shared, tile);
      int s[kScoreTiles][4];
      issue_score_tile(s, shared, group, slot);
      wgmma_wait<0>();
      wgmma_pin(s);
      u32 p[Config::kPvSteps][4];
      float alpha[2];
      if (softmax_16bit(p, alpha, s, rows, shared.k_scales_generic(slot), tile, warp_first_row,
                        work, coordinates)) {
        rescale_output(o, alpha);
      }
      issue_pv_16bit(o, p, shared, slot);
      wgmma_wait<0>();
      wgmma_pin(o);
      wgmma_pin(p);  // read by the wgmma until the wait
      release(shared, slot);
    }
  }

  // Half INT8 with the consumer warpgroups taking turns to issue their MMAs (as full INT8's
  // main_loop_in_turns), FlashAttention-3's ping-pong. With three stages, P V one tile behind
  // (tiles_16bit_pv_behind); with two, in turn t a warpgroup issues tile t's Q K^T and tile
  // t - 1's P V, waits for both, then makes tile t's P and rescales the output while the next
  // warpgroup's MMAs hold the tensor cores.
  __device__ __forceinline__ static void main_loop_16bit_pv_in_turns(
      float (&o)[kOutputTiles][4], RowState& rows, const SharedLayout& shared,
      const BlockWork& work, int group, int warp_first_row, int visible_tiles,
      LaneCoordinates coordinates) {
    if (group == Config::kConsumerGroups - 1) pass_turn(group);  // group 0 goes first
    int turn = 0;
    if constexpr (Config::kPvBehindScores) {
      if (visible_tiles > 0) {
        tiles_16bit_pv_behind(
            o, rows, shared, work, group, warp_first_row, visible_tiles, coordinates,
            [group] { wait_for_turn(group); }, [group] { pass_turn(group); });
        // Turns 0 .. visible_tiles are taken; the first tile past this warpgroup's diagonal is
        // released here, the rest (with their turns) by pass_idle_turns.
        turn = visible_tiles + 1;
        if (visible_tiles < work.tiles) {
          wait_until_full(shared, visible_tiles);
          release(shared, visible_tiles % kStages);
        }
      }
    } else if (visible_tiles > 0) {
      u32 p[Config::kPvSteps][4];
      int s[kScoreTiles][4];
      float alpha[2];
      wait_until_full(shared, 0);
      wait_for_turn(group);
      issue_score_tile(s, shared, group, 0);
      pass_turn(group);
      wgmma_wait<0>();
      wgmma_pin(s);
      // The output is still zero: no rescale.
      softmax_16bit(p, alpha, s, rows, shared.k_scales_generic(0), 0, warp_first_row, work,
                    coordinates);
      for (turn = 1; turn < visible_tiles; ++turn) {
        wait_until_full(shared, turn);
        wait_for_turn(group);
        issue_score_tile(s, shared, group, turn % kStages);
        issue_pv_16bit(o, p, shared, (turn - 1) % kStages);
        pass_turn(group);
        wgmma_wait<0>();
        wgmma_pin(s);
        wgmma_pin(o);
        wgmma_pin(p);
        release(shared, (turn - 1) % kStages);
        if (softmax_16bit(p, alpha, s, rows, shared.k_scales_generic(turn % kStages), turn,
                          warp_first_row, work, coordinates)) {
          rescale_output(o, alpha);
        }
      }
      // The last P V.
      if (turn < work.tiles) wait_until_full(shared, turn);
      wait_for_turn(group);
      issue_pv_16bit(o, p, shared, (turn - 1) % kStages);
      pass_turn(group);
      wgmma_wait<0>();
      wgmma_pin(o);
      wgmma_pin(p);
      release(shared, (turn - 1) % kStages);
      if (turn < work.tiles) release(shared, turn % kStages);
      ++turn;
    }
    pass_idle_turns(shared, work, group, turn);
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
  work.extent = sequence_extent<false, Config::kPerBlockK>(params.attention, work.batch,
                                                            work.head_q, work.head_kv);
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
