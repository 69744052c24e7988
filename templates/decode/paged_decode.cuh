// Split-KV decode attention over the paged INT8/INT4 cache (flash-decoding). One block takes one
// (split of the sequence, tile of query rows, sequence and KV head): the query rows are every
// query head of the KV head's group for each new query, so K and V are read once for all of them
// (GQA/MQA). Four warps each own 16 rows, or share the 8 rows of a narrow block; warps that share
// a row tile take turns at the stage's 16-token tiles and merge their states at the end. K, V and
// their scales stream through a cp.async pipeline of `Stages` buffers; each warp dequantizes its
// tiles in registers to FP16 tensor-core operands: S = Q K^T and O += P V with mma.sync m16n8k16
// and FP32 accumulation (narrow blocks: S^T = K Q^T and O^T = V^T P^T, the rows in the n8
// dimension), the online softmax in FP32 between them. Layout, numerics and why: README.md in
// this folder.
#pragma once

#include "common/cluster.cuh"
#include "common/copy.cuh"
#include "common/grid_dependency.cuh"
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "decode/dequantize.cuh"
#include "decode/paged_params.h"

namespace intfa {
namespace kernels {

template <int HeadDim, int Bits, ElementType QueryType, ElementType OutputType, int BlockRows,
          int StageTokens, int Stages>
struct PagedDecodeConfig {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static_assert(Bits == 8 || Bits == 4, "8 or 4 bits");
  static_assert(BlockRows == 8 || BlockRows == 16 || BlockRows == 32 || BlockRows == 64,
                "8, 16, 32 or 64 rows");
  static_assert(Stages >= 2 && Stages <= 4, "2 to 4 stages");
  static constexpr int kWarps = kPagedDecodeWarps;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRowTiles = paged_decode_row_tiles(BlockRows);
  // 8-row blocks are narrow (README.md, "Narrow blocks"): S^T = K Q^T and O^T = V^T P^T, the
  // query rows in the MMAs' n8 dimension, so that a warp keeps no accumulators for the m16
  // tile's other 8 rows, and P, not V, is transposed in registers.
  static constexpr bool kNarrow = BlockRows == 8;
  static constexpr int kLaneChannels = HeadDim / 8;        // narrow: channels of one lane group
  static constexpr int kOutputTiles = HeadDim / 16;        // narrow: m16 tiles of O^T
  static constexpr int kTokenGroups = kWarps / kRowTiles;  // warps sharing one row tile
  static constexpr int kStageTiles = StageTokens / kPagedTileTokens;
  static_assert(StageTokens % kPagedTileTokens == 0 && kStageTiles % kTokenGroups == 0 &&
                    kStageTiles % kWarps == 0,
                "every warp takes the same number of tiles per stage, to copy and to compute");
  static constexpr int kTilesPerWarp = kStageTiles / kTokenGroups;
  static constexpr int kChunkGroups = HeadDim / 64;  // 64 channels: 4 lanes x 16 channels
  static constexpr int kKSteps = 4;                  // m16n8k16 steps per chunk group
  static constexpr int kRowBytes = paged_row_bytes(HeadDim, Bits);
  static constexpr int kRowChunks = kRowBytes / 16;
  static constexpr int kLaneChunkBytes = 16 * Bits / 8;  // 16 channels
  static constexpr int kLaneChunkWords = kLaneChunkBytes / 4;
  static constexpr int kScalesPerRow = paged_scales_per_row(HeadDim, Bits);
  static constexpr int kScaleRowBytes = kScalesPerRow * paged_scale_bytes(Bits);
  static constexpr int kTileScaleBytes = kPagedTileTokens * kScaleRowBytes;
  // One stage: K data, V data, K scales, V scales.
  static constexpr int kStageDataBytes = StageTokens * kRowBytes;
  static constexpr int kStageScaleBytes = StageTokens * kScaleRowBytes;
  static constexpr int kStageBytes = 2 * (kStageDataBytes + kStageScaleBytes);
  static_assert(kStageBytes == paged_decode_stage_bytes(HeadDim, Bits, StageTokens), "layout");
  // Q's fragments in shared memory past the pipeline's buffers (d = 256 only).
  static constexpr bool kQInShared = HeadDim > 128;
  static constexpr int kQSharedOffset = Stages * kStageBytes;
  static constexpr int kSharedBytes =
      paged_decode_shared_bytes(HeadDim, Bits, BlockRows, StageTokens, Stages);
  static_assert(!kQInShared || kQSharedOffset + kRowTiles * 16 * HeadDim * 2 <= kSharedBytes,
                "room for Q's fragments");
  // Narrow INT4 blocks apply K's group scales to Q.K's products per group, after the MMAs, and
  // multiply K's nibbles in as int4x8_to_biased_f16x2 leaves them (README.md, "INT4 keys in
  // narrow blocks"): each MMA's k16 slots then hold channels of one group, lane t taking word t
  // (channels 8t .. 8t + 7) of the group's 16 bytes, and the bias of those channels times Q
  // starts each group's accumulator, from shared memory past Q's fragments.
  static constexpr bool kGroupScaledKeys = kNarrow && Bits == 4;
  static constexpr int kKeyGroups = HeadDim / kPagedInt4Group;
  static_assert(kPagedInt4Group * 4 / 8 == 16, "an INT4 group is one 16-byte chunk of a row");
  static constexpr int kKeyBiasOffset =
      kQSharedOffset + (kQInShared ? kRowTiles * 16 * HeadDim * 2 : 0);
  static_assert(!kGroupScaledKeys ||
                    kKeyBiasOffset + paged_decode_key_bias_bytes(HeadDim, Bits, BlockRows) <=
                        kSharedBytes,
                "room for the key groups' bias");

  // One stage buffer's parts: K data, V data, K scales, V scales.
  struct StageParts {
    const u8* k;
    const u8* v;
    const u8* k_scales;
    const u8* v_scales;
  };
  __device__ __forceinline__ static StageParts stage_parts(const u8* buffer) {
    return {buffer, buffer + kStageDataBytes, buffer + 2 * kStageDataBytes,
            buffer + 2 * kStageDataBytes + kStageScaleBytes};
  }

  // Physical 16-byte chunk of a row's logical chunk, XOR-permuted by token so that the lanes of
  // one shared-memory wavefront read distinct banks: INT8 lanes read 16 bytes of 2 tokens per
  // quarter warp, INT4 lanes 8 bytes of 4 tokens per half warp (README.md, "Shared memory"); at
  // d = 128 INT8 also the narrow blocks' V loads, 16 bytes of tokens 2t (+ 1) per quarter warp,
  // which the (token >> 1) term spreads over all banks (ncu, H100, 2026-11-27: the narrow INT8
  // kernel's shared-load wavefronts 11.2M -> 4.9M, conflicts 6.4M -> 0.15M; its time moved by
  // 0-2%). At INT4 d = 128 the narrow V loads keep 2-way conflicts: the four tokens of a
  // half-warp's loads are even, and even rows start in the same bank; loading the pair's second
  // token first in half the lanes removed them (1.2M -> 0.15M) but cost 1-3% in selects.
  __device__ __forceinline__ static int chunk_swizzle(int token) {
    if (Bits == 8 && kRowChunks == 8) return ((token & 1) * 4) ^ (((token >> 1) & 3) * 2);
    if (Bits == 8) return kRowChunks > 8 ? (token & 1) * 4 : 0;
    if (kRowChunks == 4) return ((token >> 1) & 1) * 2;
    return kRowChunks == 8 ? (token & 3) * 2 : 0;
  }
  // K's chunks in narrow INT4 blocks: lanes (g, t) read word t of one group's chunk of tokens g
  // (+ 8). Tokens whose rows start at the same offset of different 128-byte bank rows take
  // distinct chunk orders (tokens within one bank row share one), so every lane of a load hits
  // its own bank.
  __device__ __forceinline__ static int key_chunk_swizzle(int token) {
    if constexpr (kGroupScaledKeys) return (token / (128 / kRowBytes)) & (kRowChunks - 1);
    return chunk_swizzle(token);
  }
  // Byte offset in a stage's K buffer of word `word` (channels 8 word .. + 7) of key group `group`.
  __device__ __forceinline__ static int key_word_offset(int token, int group, int word) {
    return token * kRowBytes + ((group ^ key_chunk_swizzle(token)) << 4) + 4 * word;
  }
  // Byte offset in a stage's K or V buffer of the lane chunk `unit` (16 channels) of `token`.
  __device__ __forceinline__ static int lane_chunk_offset(int token, int unit) {
    if (Bits == 8) return token * kRowBytes + ((unit ^ chunk_swizzle(token)) << 4);
    return token * kRowBytes + (((unit >> 1) ^ chunk_swizzle(token)) << 4) + ((unit & 1) << 3);
  }
  // The eight FP16 pairs (chunk_to_f16x2) of lane chunk `unit` of `token` in a stage's K or V
  // buffer `tile`; INT4 takes the chunk's group scale from `scales`, or 0 where `scaled` is false
  // (a slot past the sequence end may hold NaN scales: its values become 0, not NaN).
  __device__ __forceinline__ static void lane_chunk_pairs(const u8* tile, const u8* scales,
                                                          int token, int unit, bool scaled,
                                                          u32 (&pairs)[8]) {
    u32 words[kLaneChunkWords];
    u32 scale2 = 0;
    if constexpr (Bits == 8) {
      const uint4 raw = *reinterpret_cast<const uint4*>(tile + lane_chunk_offset(token, unit));
      words[0] = raw.x, words[1] = raw.y, words[2] = raw.z, words[3] = raw.w;
    } else {
      const uint2 raw = *reinterpret_cast<const uint2*>(tile + lane_chunk_offset(token, unit));
      words[0] = raw.x, words[1] = raw.y;
      scale2 = scaled ? f16_broadcast(reinterpret_cast<const u16*>(
                            scales)[token * kScalesPerRow + unit * 16 / kPagedInt4Group])
                      : 0u;
    }
    chunk_to_f16x2<Bits>(words, scale2, pairs);
  }
};

// Every thread of the block, which reach it from different places in the code: a named barrier
// with the block's thread count and without .aligned (__syncthreads, and bar.sync, which is
// barrier.sync.aligned, must be the same instruction for every thread: PTX ISA, "barrier").
__device__ __forceinline__ void block_barrier_from_any_place() {
  asm volatile("barrier.sync 1, %0;" ::"n"(kPagedDecodeWarps * 32) : "memory");
}

// -inf (NVRTC has neither <limits> nor a constexpr infinity builtin).
__device__ __forceinline__ float paged_negative_infinity() {
  return __int_as_float(0xff800000);
}

// Where the cluster's merge writes a row: PagedDecodeParams' out and lse at this block's
// sequence and KV head.
struct ClusterMergeOutput {
  void* out;
  i64 batch_offset, token_stride, head_stride;  // elements; batch_offset = batch * its stride
  float* lse;  // this sequence's [q_len][heads_q], or null
  int group, heads_q, head_kv;
};

// The cluster's merge (the kernel launched as clusters of its splits: src/decode/paged_api.cpp,
// with PagedDecodeParams::partial_out null). Each block of the cluster left its row block's
// normalised FP32 outputs and LSE (natural log; -inf for a row that saw no key) in its shared
// memory at `states`, rows of HeadDim values, then the rows' LSE. Block `rank` merges rows rank,
// rank + splits, ... of the row block, HeadDim / 8 threads a row with 8 channels each, reading
// every block's state through distributed shared memory, with merge_states' arithmetic for FP32
// states (the same weights, added in the same order as its one state group adds them).
// Every thread of the block calls it (the barriers count them all): once every block of the
// cluster has arrived, its state is in its shared memory; the merge; then no block leaves (its
// shared memory with it) before every block has read what it merges. The block's threads have
// met at a block barrier since the last read of the shared memory the state overwrites.
// Out of line, with its arguments by value: the kernel calls it from two places (the warps that
// shared a row tile leave early), and a cluster barrier must be one instruction for the whole
// block; inlined, or given the kernel's parameters by reference, it also made the compiler
// recompute the main loop's shared-memory offsets inside the loop, about 15% more instructions
// in the narrow blocks' loop (bench/history/2026-11-30.md, "The twelfth session").
template <int HeadDim, ElementType OutputType, int BlockRows>
__device__ __noinline__ void merge_in_cluster(const ClusterMergeOutput output,
                                              const float* states, int rows) {
  cluster_arrive();
  cluster_wait();
  constexpr int kThreadsPerRow = HeadDim / 8;
  constexpr int kRowSlots = kPagedDecodeWarps * 32 / kThreadsPerRow;
  constexpr float kLog2E = 1.4426950408889634f;
  constexpr float kLn2 = 0.6931471805599453f;
  const float minus_infinity = paged_negative_infinity();
  const float* lses = states + BlockRows * HeadDim;
  const int splits = static_cast<int>(cluster_block_count());
  const int rank = static_cast<int>(cluster_block_rank());
  const int channel = threadIdx.x % kThreadsPerRow * 8;
  for (int local = rank + splits * static_cast<int>(threadIdx.x / kThreadsPerRow);
       local < BlockRows; local += splits * kRowSlots) {
    const int row = blockIdx.y * BlockRows + local;
    if (row >= rows) break;
    float lse[kPagedClusterMergeSplits];
    float maximum = minus_infinity;
#pragma unroll
    for (int s = 0; s < kPagedClusterMergeSplits; ++s) {
      lse[s] = s < splits ? load_float_of_cluster_block(lses + local, s) : minus_infinity;
      maximum = fmaxf(maximum, lse[s]);
    }
    float merged[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) merged[i] = 0.0f;
    float weight_sum = 0.0f;
    if (maximum != minus_infinity) {
      float4 values[kPagedClusterMergeSplits][2];
#pragma unroll
      for (int s = 0; s < kPagedClusterMergeSplits; ++s) {
        // A state of LSE -inf holds nothing: its values are never read.
        if (lse[s] == minus_infinity) continue;
        const float* value = states + local * HeadDim + channel;
        values[s][0] = load_float4_of_cluster_block(value, s);
        values[s][1] = load_float4_of_cluster_block(value + 4, s);
      }
#pragma unroll
      for (int s = 0; s < kPagedClusterMergeSplits; ++s) {
        if (lse[s] == minus_infinity) continue;
        const float weight = exp2_approx((lse[s] - maximum) * kLog2E);
        weight_sum += weight;
        const float state_values[8] = {values[s][0].x, values[s][0].y, values[s][0].z,
                                       values[s][0].w, values[s][1].x, values[s][1].y,
                                       values[s][1].z, values[s][1].w};
#pragma unroll
        for (int i = 0; i < 8; ++i) merged[i] += weight * state_values[i];
      }
    }
    if (weight_sum > 0.0f) {
      const float inverse = divide_rn(1.0f, weight_sum);
#pragma unroll
      for (int i = 0; i < 8; ++i) merged[i] *= inverse;
    }
    const int query = row / output.group;
    const int head_q = output.head_kv * output.group + row % output.group;
    u16* out = static_cast<u16*>(output.out) + output.batch_offset + query * output.token_stride +
               head_q * output.head_stride + channel;
    *reinterpret_cast<uint4*>(out) = make_uint4(
        pack_float2<OutputType>(merged[0], merged[1]), pack_float2<OutputType>(merged[2], merged[3]),
        pack_float2<OutputType>(merged[4], merged[5]), pack_float2<OutputType>(merged[6], merged[7]));
    if (output.lse != nullptr && channel == 0) {
      output.lse[query * output.heads_q + head_q] =
          weight_sum > 0.0f ? maximum + log2_approx(weight_sum) * kLn2 : maximum;
    }
  }
  cluster_arrive();
  cluster_wait();
}

// merge_in_cluster's output for this block's sequence and KV head.
__device__ __forceinline__ ClusterMergeOutput cluster_merge_output(const PagedDecodeParams& params,
                                                                   int batch, int head_kv) {
  ClusterMergeOutput output;
  output.out = params.out;
  output.batch_offset = batch * params.out_batch_stride;
  output.token_stride = params.out_token_stride;
  output.head_stride = params.out_head_stride;
  output.lse = params.lse == nullptr
                   ? nullptr
                   : params.lse + static_cast<i64>(batch) * params.q_len * params.heads_q;
  output.group = params.group;
  output.heads_q = params.heads_q;
  output.head_kv = head_kv;
  return output;
}

template <int HeadDim, int Bits, ElementType QueryType, ElementType OutputType, int BlockRows,
          int StageTokens, int Stages>
__global__ void __launch_bounds__(kPagedDecodeWarps * 32,
                                  paged_decode_min_blocks(HeadDim, BlockRows))
    paged_decode(const PagedDecodeParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
  using Config =
      PagedDecodeConfig<HeadDim, Bits, QueryType, OutputType, BlockRows, StageTokens, Stages>;
  constexpr int kGroups = Config::kChunkGroups;
  constexpr float kLn2 = 0.6931471805599453f;
  extern __shared__ __align__(16) u8 shared[];

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int lane_group = lane / 4;     // fragment row (and row + 8), and K/V token in a tile
  const int lane_in_group = lane % 4;  // fragment column pair, and 16-channel chunk
  const int row_tile = warp % Config::kRowTiles;
  const int token_group = warp / Config::kRowTiles;
  const PagedCacheParams& cache = params.cache;
  const int split = blockIdx.x;
  const int batch = blockIdx.z / cache.heads_kv;
  const int head_kv = blockIdx.z % cache.heads_kv;
  const int seq_len = params.seq_lens[batch];
  const int rows = params.q_len * params.group;
  const int warp_first_row = blockIdx.y * BlockRows + row_tile * 16;

  // This split's tokens: equal shares rounded up to whole stages, so a tile never straddles two
  // splits; trailing splits of a short sequence are empty.
  const int share = (seq_len + params.num_splits - 1) / params.num_splits;
  const int split_tokens = (share + StageTokens - 1) / StageTokens * StageTokens;
  const int split_start = split * split_tokens;
  const int split_end = min(seq_len, split_start + split_tokens);

  // ---- Q: this lane's rows (fragment rows g and g + 8) and channels 64 cg + 16 t .. + 15,
  // scaled into the log2 domain and rounded to FP16 pairs in the channel order of the K pairs,
  // as the A fragments of the k steps. Up to d = 128 they stay in registers; at d = 256 (whose
  // FP32 output already takes 128 registers) each lane parks its own in shared memory.
  u32 q_registers[Config::kQInShared ? 1 : kGroups][Config::kKSteps][4];
  uint4* q_shared = reinterpret_cast<uint4*>(shared + Config::kQSharedOffset) +
                    row_tile * kGroups * Config::kKSteps * 32 + lane;
  float smoothing[2] = {0.0f, 0.0f};  // q . k_offset, log2 domain
  // Narrow INT4 blocks: lane (g, t) holds, for row g and key group G, the FP16 pairs of channels
  // 32 G + 8 t + {p, p + 4} (p = 0..3) as the B fragments of the group's two MMAs, pairs 1 and 3
  // divided by 16 (their keys come 16 x larger); the group's bias of Q.K goes to shared memory.
  u32 q_group[Config::kGroupScaledKeys && !Config::kQInShared ? Config::kKeyGroups : 1][4];
  if constexpr (Config::kGroupScaledKeys) {
    constexpr u32 kSixteenth = 0x2C002C00u;  // f16x2 {1/16, 1/16}
    const int row = warp_first_row + lane_group;
    const bool real = row < rows;
    const int query = real ? row / params.group : 0;
    const int head_q = head_kv * params.group + (real ? row % params.group : 0);
    const u16* q_row = static_cast<const u16*>(params.q) + batch * params.q_batch_stride +
                       query * params.q_token_stride + head_q * params.q_head_stride;
    float* key_bias = reinterpret_cast<float*>(shared + Config::kKeyBiasOffset);
#pragma unroll
    for (int group = 0; group < Config::kKeyGroups; ++group) {
      const int channel = kPagedInt4Group * group + 8 * lane_in_group;
      uint4 raw = make_uint4(0, 0, 0, 0);
      if (real) raw = *reinterpret_cast<const uint4*>(q_row + channel);
      const u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
      float values[8];
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        values[2 * w] =
            element_to_float<QueryType>(static_cast<u16>(words[w] & 0xFFFF)) * params.scale_log2;
        values[2 * w + 1] =
            element_to_float<QueryType>(static_cast<u16>(words[w] >> 16)) * params.scale_log2;
      }
      u32 pairs[4];
      float bias = 0.0f;  // sum over this lane's channels of (the key's bias) x (its Q value)
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const u32 rounded = pack_f16x2(values[p], values[p + 4]);
        pairs[p] = p % 2 == 0 ? rounded : f16x2_mul(rounded, kSixteenth);
        const float key_bias_value = p % 2 == 0 ? 1032.0f : 1152.0f;
        bias += key_bias_value * (f16_to_float(static_cast<u16>(pairs[p] & 0xFFFF)) +
                                  f16_to_float(static_cast<u16>(pairs[p] >> 16)));
        if (cache.k_offset != nullptr) {
          // The dot product with the rounded queries, as the scores see them.
          const float* offset = cache.k_offset + head_kv * HeadDim + channel;
          smoothing[0] += f16_to_float(static_cast<u16>(rounded & 0xFFFF)) * offset[p] +
                          f16_to_float(static_cast<u16>(rounded >> 16)) * offset[p + 4];
        }
      }
      bias += __shfl_xor_sync(0xFFFFFFFFu, bias, 1);
      bias += __shfl_xor_sync(0xFFFFFFFFu, bias, 2);
      // Column t's accumulator quad {row 2t, row 2t + 1, row 2t, row 2t + 1} of each group,
      // negated: it starts the group's first MMA.
      if (token_group == 0 && lane_in_group == 0) {
        float* quad = key_bias + (group * 4 + lane_group / 2) * 4 + lane_group % 2;
        quad[0] = -bias;
        quad[2] = -bias;
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if constexpr (Config::kQInShared) {
          if (token_group == 0) {
            q_shared[(2 * group + h) * 32] = make_uint4(pairs[2 * h], 0, pairs[2 * h + 1], 0);
          }
        } else {
          q_group[Config::kQInShared ? 0 : group][2 * h] = pairs[2 * h];
          q_group[Config::kQInShared ? 0 : group][2 * h + 1] = pairs[2 * h + 1];
        }
      }
    }
  }
#pragma unroll
  for (int cg = 0; cg < (Config::kGroupScaledKeys ? 0 : kGroups); ++cg) {
    const int channel = 64 * cg + 16 * lane_in_group;
    u32 pairs[2][8];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_first_row + lane_group + 8 * half;
      // (Narrow blocks: rows g are the n8 columns of Q^T; g + 8 is the next block's.)
      const bool real = (half == 0 || !Config::kNarrow) && row < rows;
      const int query = real ? row / params.group : 0;
      const int head_q = head_kv * params.group + (real ? row % params.group : 0);
      const u16* q_row = static_cast<const u16*>(params.q) + batch * params.q_batch_stride +
                         query * params.q_token_stride + head_q * params.q_head_stride;
      float values[16];
#pragma unroll
      for (int part = 0; part < 2; ++part) {
        uint4 raw = make_uint4(0, 0, 0, 0);
        if (real) raw = *reinterpret_cast<const uint4*>(q_row + channel + 8 * part);
        const u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          values[8 * part + 2 * w] =
              element_to_float<QueryType>(static_cast<u16>(words[w] & 0xFFFF)) * params.scale_log2;
          values[8 * part + 2 * w + 1] =
              element_to_float<QueryType>(static_cast<u16>(words[w] >> 16)) * params.scale_log2;
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        pairs[half][j] =
            pack_f16x2(values[pair_first_channel<Bits>(j)], values[pair_second_channel<Bits>(j)]);
      }
      if (cache.k_offset != nullptr) {
        // The dot product with the rounded queries, as the scores see them.
        const float* offset = cache.k_offset + head_kv * HeadDim + channel;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          smoothing[half] += f16_to_float(static_cast<u16>(pairs[half][j] & 0xFFFF)) *
                                 offset[pair_first_channel<Bits>(j)] +
                             f16_to_float(static_cast<u16>(pairs[half][j] >> 16)) *
                                 offset[pair_second_channel<Bits>(j)];
        }
      }
    }
#pragma unroll
    for (int step = 0; step < Config::kKSteps; ++step) {
      const u32 a[4] = {pairs[0][2 * step], pairs[1][2 * step], pairs[0][2 * step + 1],
                        pairs[1][2 * step + 1]};
      if constexpr (Config::kQInShared) {
        // One warp per row tile writes; the others read after the pipeline's first barrier.
        if (token_group == 0) {
          q_shared[(cg * Config::kKSteps + step) * 32] = make_uint4(a[0], a[1], a[2], a[3]);
        }
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) q_registers[Config::kQInShared ? 0 : cg][step][i] = a[i];
      }
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    smoothing[half] += __shfl_xor_sync(0xFFFFFFFFu, smoothing[half], 1);
    smoothing[half] += __shfl_xor_sync(0xFFFFFFFFu, smoothing[half], 2);
  }

  // ---- Online-softmax state of this warp's rows over its tokens. O is kept in units of
  // v_reference (INT8 V: the largest V scale seen so far, folded into P so that P stays in
  // [0, 1] in FP16 whatever V's magnitude).
  float row_max[2] = {paged_negative_infinity(), paged_negative_infinity()};
  float row_sum[2] = {0.0f, 0.0f};  // this lane's columns only; reduced at the end
  float v_reference = 0.0f;
  float v_reference_inverse = 0.0f;
  // The maximum of `value` over the lanes that hold this lane's rows' columns: the four of a
  // fragment row, or in narrow blocks the eight with the same t.
  auto row_lanes_max = [](float value) {
#pragma unroll
    for (int offset = Config::kNarrow ? 4 : 1; offset < (Config::kNarrow ? 32 : 4); offset *= 2) {
      value = fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, offset));
    }
    return value;
  };
  // The online softmax's step for row `half` with its tile's maximum: the running maximum moves,
  // `factor` is what the state kept so far is multiplied by, and the result is what the tile's
  // scores subtract before exp2.
  auto advance_row_max = [&](int half, float tile_max, float& factor) {
    const float new_max = fmaxf(row_max[half], tile_max);
    // A row with no allowed key yet keeps max -inf: its P is 0, its state untouched.
    const float reference = new_max == paged_negative_infinity() ? 0.0f : new_max;
    factor = exp2_approx(row_max[half] - reference);
    row_max[half] = new_max;
    return reference;
  };
  // INT8 V: a tile whose largest V scale (the same in every lane) exceeds v_reference raises it,
  // and both rows' rescale factors take the change of units.
  auto raise_v_reference = [&](float tile_v_max, float(&factor)[2]) {
    if (tile_v_max > v_reference) {
      const float inverse = divide_rn(1.0f, tile_v_max);
      // Exactly 1 when the reference does not move, so that the vote below can skip it.
      const float rebase = v_reference * inverse;
      factor[0] *= rebase;
      factor[1] *= rebase;
      v_reference = tile_v_max;
      v_reference_inverse = inverse;
    }
  };
  float o[kGroups][8][4];
  // Narrow blocks: O^T's m16 tiles j, lane (g, t) holding channels g L + j (c0, c1) and
  // g L + kOutputTiles + j (c2, c3) of rows 2t and 2t + 1, L = kLaneChannels.
  float o_t[Config::kNarrow ? Config::kOutputTiles : 1][4];
#pragma unroll
  for (int j = 0; j < (Config::kNarrow ? Config::kOutputTiles : 1); ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) o_t[j][i] = 0.0f;
#pragma unroll
  for (int cg = 0; cg < kGroups; ++cg)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[cg][j][i] = 0.0f;

  // The first query row this warp holds bounds the causal limit of all its rows from below.
  const int first_limit =
      params.causal ? seq_len - params.q_len + warp_first_row / params.group + 1 : seq_len;
  const int warp_limit = min(seq_len, first_limit);
  // This lane's two rows in the warp's tile: fragment rows g and g + 8, or in narrow blocks the
  // n8 columns 2t and 2t + 1 of S^T and O^T.
  auto lane_row = [&](int half) {
    return Config::kNarrow ? 2 * lane_in_group + half : lane_group + 8 * half;
  };
  // The keys each of this lane's two rows may see: [0, row_limit).
  int row_limit[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = warp_first_row + lane_row(half);
    row_limit[half] =
        params.causal ? min(seq_len, seq_len - params.q_len + row / params.group + 1) : seq_len;
  }
  const bool warp_has_rows = warp_first_row < rows;
  const int stage_count =
      split_start < split_end ? (split_end - split_start + StageTokens - 1) / StageTokens : 0;

  // ---- The pipeline: stage s holds tokens [split_start + s * StageTokens, + StageTokens).
  auto stage_buffer = [&](int stage) { return shared + (stage % Stages) * Config::kStageBytes; };
  const int* block_table = params.block_table + batch * params.block_table_stride;
  // Copies: warp w copies the stage's tiles w, w + 4, ... (K, V and their scales). A tile's 16
  // rows are contiguous in its page, so lane l's j-th 16-byte chunk is byte 16 (l + 32 j) of the
  // tile in global memory and lands XOR-swizzled in shared memory. Each tile's page (-1 past the
  // split, so that no page beyond the sequence's is looked up) is loaded a stage ahead of its
  // copies, hiding the block table's latency behind a stage's compute; its cache row (page, head,
  // position of its first token) is computed only when the copies are issued, since arithmetic
  // on the page right after its load would wait for the load there (ncu, H200 2026-11-29: 17% of
  // INT8's and 11% of INT4's stall samples at B=8 N=32k sat on that multiply).
  constexpr int kCopyTiles = Config::kStageTiles / Config::kWarps;
  constexpr int kTileChunks = kPagedTileTokens * Config::kRowChunks;
  static_assert(kTileChunks % 32 == 0, "whole rounds of 16-byte copies per lane");
  constexpr int kTileScaleChunks = Config::kTileScaleBytes / 16;
  static_assert(kTileScaleChunks <= 16, "K scales on lanes 0..15, V scales on lanes 16..31");
  using TilePages = int[kCopyTiles];
  auto load_tile_pages = [&](int stage, TilePages& tile_pages) {
    const int stage_start = split_start + stage * StageTokens;
#pragma unroll
    for (int k = 0; k < kCopyTiles; ++k) {
      const int tile_start = stage_start + (warp + k * Config::kWarps) * kPagedTileTokens;
      tile_pages[k] = -1;
      if (stage < stage_count && tile_start < split_end) {
        tile_pages[k] = block_table[tile_start >> cache.page_shift];
      }
    }
  };
  auto issue_stage = [&](int stage, const TilePages& tile_pages) {
    u8* buffer = stage_buffer(stage);
    const int stage_start = split_start + stage * StageTokens;
#pragma unroll
    for (int k = 0; k < kCopyTiles; ++k) {
      const int page = tile_pages[k];
      if (page < 0) continue;
      const int tile = warp + k * Config::kWarps;
      const int tile_start = stage_start + tile * kPagedTileTokens;
      const int row = paged_cache_row(cache, page, head_kv, tile_start);
      const i64 source = static_cast<i64>(row) * Config::kRowBytes;
      u8* k_destination = buffer + tile * kPagedTileTokens * Config::kRowBytes;
#pragma unroll
      for (int j = 0; j < kTileChunks / 32; ++j) {
        const int chunk = lane + 32 * j;
        const int token = chunk / Config::kRowChunks;
        const int column = chunk % Config::kRowChunks;
        const int key_destination =
            token * Config::kRowBytes + ((column ^ Config::key_chunk_swizzle(token)) << 4);
        const int value_destination =
            token * Config::kRowBytes + ((column ^ Config::chunk_swizzle(token)) << 4);
        copy_16_bytes_async(shared_address(k_destination + key_destination),
                            cache.k_data + source + chunk * 16, true);
        copy_16_bytes_async(
            shared_address(k_destination + Config::kStageDataBytes + value_destination),
            cache.v_data + source + chunk * 16, true);
      }
      // A tile's scales are a 64-byte (INT8) or 128-byte (INT4, d = 128) read beside the other
      // heads' scales of the page, which their blocks read at about the same time, and the page's
      // next tiles': L2 fetches the 256 bytes around them. (The same prefetch on the K/V rows
      // measured slower: bench/history/2026-11-29.md, "The ninth session".)
      const int scale_chunk = lane % 16;
      if (scale_chunk < kTileScaleChunks) {
        const bool values = lane >= 16;
        const i64 scale_source = static_cast<i64>(row) * Config::kScaleRowBytes + scale_chunk * 16;
        copy_16_bytes_async_prefetch_256(
            shared_address(buffer + 2 * Config::kStageDataBytes +
                           (values ? Config::kStageScaleBytes : 0) +
                           tile * Config::kTileScaleBytes + scale_chunk * 16),
            static_cast<const u8*>(values ? cache.v_scale : cache.k_scale) + scale_source);
      }
    }
  };

  // ---- One 16-token tile of this warp: S = Q K^T, the softmax step, O += P V.
  auto process_tile = [&](const u8* buffer, int tile, int tile_start) {
    const auto [k_tile, v_tile, k_scales, v_scales] = Config::stage_parts(buffer);
    const int first_token = tile * kPagedTileTokens;  // in the stage

    float s[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) s[nt][i] = 0.0f;
      const int token = first_token + 8 * nt + lane_group;
#pragma unroll
      for (int cg = 0; cg < kGroups; ++cg) {
        const int unit = 4 * cg + lane_in_group;
        u32 pairs[8];
        Config::lane_chunk_pairs(k_tile, k_scales, token, unit, true, pairs);
#pragma unroll
        for (int step = 0; step < Config::kKSteps; ++step) {
          u32 a[4];
          if constexpr (Config::kQInShared) {
            const uint4 stored = q_shared[(cg * Config::kKSteps + step) * 32];
            a[0] = stored.x, a[1] = stored.y, a[2] = stored.z, a[3] = stored.w;
          } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = q_registers[Config::kQInShared ? 0 : cg][step][i];
          }
          mma_f16_m16n8k16(s[nt], a, pairs[2 * step], pairs[2 * step + 1]);
        }
      }
    }

    // Scores in the log2 domain: INT8 keys' scale per token, -inf where a key is not allowed.
    const bool needs_mask = tile_start + kPagedTileTokens > warp_limit;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const int column = first_token + 8 * nt + 2 * lane_in_group;
      if constexpr (Bits == 8) {
        const float2 scale = *reinterpret_cast<const float2*>(k_scales + column * 4);
        s[nt][0] *= scale.x, s[nt][1] *= scale.y, s[nt][2] *= scale.x, s[nt][3] *= scale.y;
      }
      if (needs_mask) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = tile_start + 8 * nt + 2 * lane_in_group + (i & 1);
          // A select, not arithmetic: a slot past the sequence end may hold NaN scales.
          if (key >= row_limit[i >> 1]) s[nt][i] = paged_negative_infinity();
        }
      }
    }

    float factor[2];
    float p[2][4];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float reference =
          advance_row_max(half,
                          row_lanes_max(fmaxf(fmaxf(s[0][2 * half], s[0][2 * half + 1]),
                                              fmaxf(s[1][2 * half], s[1][2 * half + 1]))),
                          factor[half]);
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          p[nt][2 * half + e] = exp2_approx(s[nt][2 * half + e] - reference);
          sum += p[nt][2 * half + e];
        }
      row_sum[half] = row_sum[half] * factor[half] + sum;
    }

    if constexpr (Bits == 8) {
      // V's per-token scales fold into P: P' = P * v_scale / v_reference.
      float v_scale[2][2];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int column = first_token + 8 * nt + 2 * lane_in_group;
        const float2 scale = *reinterpret_cast<const float2*>(v_scales + column * 4);
        const int key = tile_start + 8 * nt + 2 * lane_in_group;
        v_scale[nt][0] = key < seq_len ? scale.x : 0.0f;
        v_scale[nt][1] = key + 1 < seq_len ? scale.y : 0.0f;
      }
      raise_v_reference(row_lanes_max(fmaxf(fmaxf(v_scale[0][0], v_scale[0][1]),
                                            fmaxf(v_scale[1][0], v_scale[1][1]))),
                        factor);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) p[nt][i] *= v_scale[nt][i & 1] * v_reference_inverse;
    }

    // O *= factor, skipped (one vote) when no row's frame moved.
    if (!__all_sync(0xFFFFFFFFu, factor[0] == 1.0f && factor[1] == 1.0f)) {
#pragma unroll
      for (int cg = 0; cg < kGroups; ++cg)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          o[cg][j][0] *= factor[0], o[cg][j][1] *= factor[0];
          o[cg][j][2] *= factor[1], o[cg][j][3] *= factor[1];
        }
    }

    // P as the A operand: the S fragments of the two n8 tiles are the m16k16 A fragment.
    const u32 p_fragment[4] = {pack_f16x2(p[0][0], p[0][1]), pack_f16x2(p[0][2], p[0][3]),
                               pack_f16x2(p[1][0], p[1][1]), pack_f16x2(p[1][2], p[1][3])};
#pragma unroll
    for (int cg = 0; cg < kGroups; ++cg) {
      const int unit = 4 * cg + lane_in_group;
      u32 pairs[2][8];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int token = first_token + 8 * half + lane_group;
        const bool valid = tile_start + 8 * half + lane_group < seq_len;
        Config::lane_chunk_pairs(v_tile, v_scales, token, unit, valid, pairs[half]);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        // Lane (g, t) held V[token g][channels of pair j]; the transposes give it
        // V[tokens 2t, 2t + 1][channel g of pair j's columns], the B operand of P.V.
        mma_f16_m16n8k16(o[cg][j], p_fragment, transpose_8x8_b16(pairs[0][j]),
                         transpose_8x8_b16(pairs[1][j]));
      }
    }
  };

  // ---- Narrow blocks: one 16-token tile of this warp as S^T = K Q^T (tokens g and 8 + g of the
  // tile in c0, c1 and c2, c3; rows 2t, 2t + 1), the softmax step, O^T += V^T P^T.
  auto process_tile_narrow = [&](const u8* buffer, int tile, int tile_start) {
    const auto [k_tile, v_tile, k_scales, v_scales] = Config::stage_parts(buffer);
    const int first_token = tile * kPagedTileTokens;  // in the stage

    // K's chunks as the wide tile reads them (token 8 nt + g, chunk 4 cg + t) are the A
    // fragments of S^T, tokens g and 8 + g in its two row halves; Q's B fragment of row g is the
    // wide A fragment's registers 0 and 2.
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if constexpr (Config::kGroupScaledKeys) {
      // Group G's scores sum x q over its channels, its nibbles x taken biased (1032 + x, or
      // 1152 + 16 x against Q / 16) and the bias times Q the accumulator's start; then scaled by
      // the group's scale of the token (tokens g and 8 + g: c0, c1 and c2, c3) in FP32.
      constexpr int kScaleWords = Config::kKeyGroups / 2;  // FP16 scales, two per word
      u32 key_scales[2][kScaleWords];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const u32* scales = reinterpret_cast<const u32*>(
            k_scales + (first_token + 8 * nt + lane_group) * Config::kScaleRowBytes);
#pragma unroll
        for (int w = 0; w < kScaleWords; ++w) key_scales[nt][w] = scales[w];
      }
      const float4* bias_quads =
          reinterpret_cast<const float4*>(shared + Config::kKeyBiasOffset) + lane_in_group;
#pragma unroll
      for (int group = 0; group < Config::kKeyGroups; ++group) {
        u32 pairs[2][4];
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const int token = first_token + 8 * nt + lane_group;
          int4x8_to_biased_f16x2(*reinterpret_cast<const u32*>(
                                     k_tile + Config::key_word_offset(token, group, lane_in_group)),
                                 pairs[nt]);
        }
        const float4 bias = bias_quads[group * 4];
        float products[4] = {bias.x, bias.y, bias.z, bias.w};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          u32 b0, b1;
          if constexpr (Config::kQInShared) {
            const uint4 stored = q_shared[(2 * group + h) * 32];
            b0 = stored.x, b1 = stored.z;
          } else {
            b0 = q_group[Config::kQInShared ? 0 : group][2 * h];
            b1 = q_group[Config::kQInShared ? 0 : group][2 * h + 1];
          }
          const u32 a[4] = {pairs[0][2 * h], pairs[1][2 * h], pairs[0][2 * h + 1],
                            pairs[1][2 * h + 1]};
          mma_f16_m16n8k16(products, a, b0, b1);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const u32 word = key_scales[i >> 1][group / 2];
          const float scale =
              f16_to_float(static_cast<u16>(group % 2 == 0 ? word & 0xFFFF : word >> 16));
          s[i] = group == 0 ? products[i] * scale : fmaf(products[i], scale, s[i]);
        }
      }
    }
#pragma unroll
    for (int cg = 0; cg < (Config::kGroupScaledKeys ? 0 : kGroups); ++cg) {
      const int unit = 4 * cg + lane_in_group;
      u32 pairs[2][8];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int token = first_token + 8 * nt + lane_group;
        Config::lane_chunk_pairs(k_tile, k_scales, token, unit, true, pairs[nt]);
      }
#pragma unroll
      for (int step = 0; step < Config::kKSteps; ++step) {
        u32 b0, b1;
        if constexpr (Config::kQInShared) {
          const uint4 stored = q_shared[(cg * Config::kKSteps + step) * 32];
          b0 = stored.x, b1 = stored.z;
        } else {
          b0 = q_registers[Config::kQInShared ? 0 : cg][step][0];
          b1 = q_registers[Config::kQInShared ? 0 : cg][step][2];
        }
        const u32 a[4] = {pairs[0][2 * step], pairs[1][2 * step], pairs[0][2 * step + 1],
                          pairs[1][2 * step + 1]};
        mma_f16_m16n8k16(s, a, b0, b1);
      }
    }

    // Scores in the log2 domain: INT8 keys' scale per token, -inf where a key is not allowed.
    if constexpr (Bits == 8) {
      const float* scale = reinterpret_cast<const float*>(k_scales) + first_token + lane_group;
      const float first = scale[0], second = scale[8];
      s[0] *= first, s[1] *= first, s[2] *= second, s[3] *= second;
    }
    if (tile_start + kPagedTileTokens > warp_limit) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = tile_start + lane_group + 8 * (i >> 1);
        // A select, not arithmetic: a slot past the sequence end may hold NaN scales.
        if (key >= row_limit[i & 1]) s[i] = paged_negative_infinity();
      }
    }

    // Row 2t + e's scores are s[e] and s[2 + e] of the eight lanes with this t.
    float factor[2];
    float p[4];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float reference = advance_row_max(e, row_lanes_max(fmaxf(s[e], s[2 + e])), factor[e]);
      p[e] = exp2_approx(s[e] - reference);
      p[2 + e] = exp2_approx(s[2 + e] - reference);
      row_sum[e] = row_sum[e] * factor[e] + (p[e] + p[2 + e]);
    }

    if constexpr (Bits == 8) {
      // V's per-token scales fold into P: P' = P * v_scale / v_reference (tokens g, 8 + g).
      const float* scale = reinterpret_cast<const float*>(v_scales) + first_token + lane_group;
      const int key = tile_start + lane_group;
      const float v_scale[2] = {key < seq_len ? scale[0] : 0.0f,
                                key + 8 < seq_len ? scale[8] : 0.0f};
      raise_v_reference(row_lanes_max(fmaxf(v_scale[0], v_scale[1])), factor);
#pragma unroll
      for (int i = 0; i < 4; ++i) p[i] *= v_scale[i >> 1] * v_reference_inverse;
    }

    // O^T *= factor (per column), skipped (one vote) when no row's frame moved.
    if (!__all_sync(0xFFFFFFFFu, factor[0] == 1.0f && factor[1] == 1.0f)) {
#pragma unroll
      for (int j = 0; j < Config::kOutputTiles; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) o_t[j][i] *= factor[i & 1];
    }

    // P^T as the B operand: lane (g, t) holds P^T[tokens g, 8 + g][rows 2t, 2t + 1], two 8x8
    // blocks in the m8n8 layout; their transposes give it P^T[tokens 2t, 2t + 1 (+ 8)][row g].
    const u32 p_columns[2] = {transpose_8x8_b16(pack_f16x2(p[0], p[1])),
                              transpose_8x8_b16(pack_f16x2(p[2], p[3]))};

    // V^T as the A operand: lane (g, t) reads its group's channels g L .. g L + L - 1 of tokens
    // 2t, 2t + 1 and 2t + 8, 2t + 9, and pairs the two tokens of each channel (byte permutes,
    // then the same conversions as the wide tile).
    constexpr int L = Config::kLaneChannels;
    u32 pairs[2][L];  // [token pair][channel]
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {
      u32 words[2][L * Bits / 32 > 0 ? L * Bits / 32 : 1];
#pragma unroll
      for (int which = 0; which < 2; ++which) {
        const int token = first_token + 2 * lane_in_group + 8 * pair + which;
        // Channel g L of the row: lane-chunk unit g L / 16, and the half of it for L = 8.
        const int unit = lane_group * L / 16;
        const u8* row = v_tile + Config::lane_chunk_offset(token, unit) +
                        (L < 16 ? (lane_group % 2) * (8 * Bits / 8) : 0);
        if constexpr (L * Bits / 8 == 4) {
          words[which][0] = *reinterpret_cast<const u32*>(row);
        } else if constexpr (L * Bits / 8 == 8) {
          const uint2 raw = *reinterpret_cast<const uint2*>(row);
          words[which][0] = raw.x, words[which][1] = raw.y;
        } else if constexpr (L * Bits / 8 == 16) {
          const uint4 raw = *reinterpret_cast<const uint4*>(row);
          words[which][0] = raw.x, words[which][1] = raw.y, words[which][2] = raw.z,
          words[which][3] = raw.w;
        } else {  // 32 bytes: two lane-chunk units
          const uint4 low = *reinterpret_cast<const uint4*>(row);
          const uint4 high =
              *reinterpret_cast<const uint4*>(v_tile + Config::lane_chunk_offset(token, unit + 1));
          words[which][0] = low.x, words[which][1] = low.y, words[which][2] = low.z,
          words[which][3] = low.w, words[which][4] = high.x, words[which][5] = high.y,
          words[which][6] = high.z, words[which][7] = high.w;
        }
      }
      u32 scale2 = 0;
      if constexpr (Bits == 4) {
        // One group holds all of a lane's channels. A slot past the sequence end may hold NaN
        // scales: its values become 0, not NaN.
        const int token = first_token + 2 * lane_in_group + 8 * pair;
        const int group = lane_group * L / kPagedInt4Group;
        const u16* scales = reinterpret_cast<const u16*>(v_scales) + group;
        const int key = tile_start + 2 * lane_in_group + 8 * pair;
        const u32 first = key < seq_len ? scales[token * Config::kScalesPerRow] : 0u;
        const u32 second = key + 1 < seq_len ? scales[(token + 1) * Config::kScalesPerRow] : 0u;
        scale2 = first | (second << 16);
      }
#pragma unroll
      for (int w = 0; w < L * Bits / 32; ++w) {
        if constexpr (Bits == 8) {
          // Four channels of each token: {a0, b0, a1, b1} and {a2, b2, a3, b3}.
          u32 two[2];
          int8x4_to_f16x2(__byte_perm(words[0][w], words[1][w], 0x5140), two);
          pairs[pair][4 * w] = two[0], pairs[pair][4 * w + 1] = two[1];
          int8x4_to_f16x2(__byte_perm(words[0][w], words[1][w], 0x7362), two);
          pairs[pair][4 * w + 2] = two[0], pairs[pair][4 * w + 3] = two[1];
        } else {
          // Eight channels of each token: bytes 0, 1 of both (channels 0..3), then bytes 2, 3.
#pragma unroll
          for (int part = 0; part < 2; ++part) {
            u32 four[4];
            int4x8_to_f16x2(__byte_perm(words[0][w], words[1][w], part == 0 ? 0x5410 : 0x7632),
                            four);
#pragma unroll
            for (int c = 0; c < 4; ++c) {
              pairs[pair][8 * w + 4 * part + c] = f16x2_mul(four[c], scale2);
            }
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < Config::kOutputTiles; ++j) {
      const u32 a[4] = {pairs[0][j], pairs[0][Config::kOutputTiles + j], pairs[1][j],
                        pairs[1][Config::kOutputTiles + j]};
      mma_f16_m16n8k16(o_t[j], a, p_columns[0], p_columns[1]);
    }
  };

  // With one row tile, warp w copies the stage's tiles w, w + 4, ... and computes the same ones
  // (copy: tile warp + 4 k; compute: tile token_group + kTokenGroups k, token_group = warp), so a
  // stage needs only the warp's own copies landed: a warp barrier, and the warps drift apart
  // instead of waiting for the slowest at every stage. Q's fragments (d = 256) and the key
  // groups' bias, written by warp 0 above, need the block's barrier once.
  constexpr bool kWarpComputesItsCopies = Config::kRowTiles == 1;
  static_assert(!kWarpComputesItsCopies ||
                    (Config::kTokenGroups == Config::kWarps && Config::kTilesPerWarp == kCopyTiles),
                "each warp computes exactly the tiles it copies");
  if constexpr (kWarpComputesItsCopies && (Config::kQInShared || Config::kGroupScaledKeys)) {
    __syncthreads();
  }
  if (stage_count > 0) {
    TilePages tile_pages;
#pragma unroll
    for (int stage = 0; stage < Stages - 1; ++stage) {
      load_tile_pages(stage, tile_pages);
      issue_stage(stage, tile_pages);
      commit_async_copies();
    }
    load_tile_pages(Stages - 1, tile_pages);
    for (int stage = 0; stage < stage_count; ++stage) {
      wait_async_copies<Stages - 2>();
      // The stage landed for every thread that reads it; they are all done with stage - 1.
      if constexpr (kWarpComputesItsCopies) {
        __syncwarp();
      } else {
        __syncthreads();
      }
      if (stage + Stages - 1 < stage_count) issue_stage(stage + Stages - 1, tile_pages);
      commit_async_copies();
      load_tile_pages(stage + Stages, tile_pages);
      if (warp_has_rows) {
        const u8* buffer = stage_buffer(stage);
        const int stage_start = split_start + stage * StageTokens;
#pragma unroll
        for (int k = 0; k < Config::kTilesPerWarp; ++k) {
          const int tile = token_group + k * Config::kTokenGroups;
          const int tile_start = stage_start + tile * kPagedTileTokens;
          if (tile_start < split_end) {
            if constexpr (Config::kNarrow) {
              process_tile_narrow(buffer, tile, tile_start);
            } else {
              process_tile(buffer, tile, tile_start);
            }
          }
        }
      }
    }
    wait_async_copies<0>();
  }

  // A row's sum over the lanes that hold its columns: the four of a fragment row, or in narrow
  // blocks the eight with the same t.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
#pragma unroll
    for (int offset = Config::kNarrow ? 4 : 1; offset < (Config::kNarrow ? 32 : 4); offset *= 2) {
      row_sum[half] += __shfl_xor_sync(0xFFFFFFFFu, row_sum[half], offset);
    }
  }
  // From here O is in plain units.
#pragma unroll
  for (int cg = 0; cg < kGroups; ++cg)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[cg][j][i] *= Bits == 8 ? v_reference : 1.0f;
#pragma unroll
  for (int j = 0; j < (Config::kNarrow ? Config::kOutputTiles : 1); ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) o_t[j][i] *= Bits == 8 ? v_reference : 1.0f;
  // Row r's output value of channel c, for this lane's rows and channels (narrow: rows 2t + half,
  // channels g L + c for c < L; wide: through o in the epilogue and the merge below).
  auto narrow_value = [&](int c, int half) -> float& {
    return o_t[c % Config::kOutputTiles][2 * (c / Config::kOutputTiles) + half];
  };
  // Each of this lane's output values of row `half` (narrow: its L channels from g L; wide: for
  // each 64-channel group the 16 of its chunk, pair j's two channels in turn) and its channel.
  constexpr int kLaneOutputs = Config::kNarrow ? Config::kLaneChannels : 16 * kGroups;
  auto output_value = [&](int i, int half) -> float& {
    if constexpr (Config::kNarrow) return narrow_value(i, half);
    return o[i / 16][i % 16 / 2][2 * half + i % 2];
  };
  auto output_channel = [&](int i) {
    if constexpr (Config::kNarrow) return lane_group * Config::kLaneChannels + i;
    const int j = i % 16 / 2;
    return 64 * (i / 16) + 16 * lane_in_group +
           (i % 2 == 0 ? pair_first_channel<Bits>(j) : pair_second_channel<Bits>(j));
  };

  // Launched as clusters of its splits (src/decode/paged_api.cpp), each block leaves its state at
  // the start of its shared memory for the cluster's merge (merge_in_cluster).
  const bool cluster_merge = cluster_block_count() > 1;  // uniform over the grid
  float* cluster_state = reinterpret_cast<float*>(shared);

  // ---- Warps that shared a row tile's tokens merge into the first of them.
  if constexpr (Config::kTokenGroups > 1) {
    __syncthreads();  // every warp is done with the pipeline buffers
    float* states = reinterpret_cast<float*>(shared);
    constexpr int kStateFloats = 16 * (HeadDim + 2);
    float* mine = states + warp * kStateFloats;
    if (token_group > 0) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = lane_row(half);
#pragma unroll
        for (int i = 0; i < kLaneOutputs; ++i) {
          mine[row * HeadDim + output_channel(i)] = output_value(i, half);
        }
        if ((Config::kNarrow ? lane_group : lane_in_group) == 0) {
          mine[16 * HeadDim + row] = row_max[half];
          mine[16 * HeadDim + 16 + row] = row_sum[half];
        }
      }
    }
    __syncthreads();
    if (token_group > 0) {
      // Their states are in the first warp's; they take their part of the cluster's merge, once
      // the first warps have read the states the cluster's overwrites.
      if (cluster_merge) {
        block_barrier_from_any_place();
        merge_in_cluster<HeadDim, OutputType, BlockRows>(
            cluster_merge_output(params, batch, head_kv), cluster_state, rows);
      }
      return;
    }
#pragma unroll
    for (int other = 1; other < Config::kTokenGroups; ++other) {
      const float* theirs = states + (other * Config::kRowTiles + row_tile) * kStateFloats;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = lane_row(half);
        const float their_max = theirs[16 * HeadDim + row];
        const float new_max = fmaxf(row_max[half], their_max);
        if (new_max == paged_negative_infinity()) continue;
        const float mine_factor = exp2_approx(row_max[half] - new_max);
        const float their_factor = exp2_approx(their_max - new_max);
        row_max[half] = new_max;
        row_sum[half] =
            row_sum[half] * mine_factor + theirs[16 * HeadDim + 16 + row] * their_factor;
#pragma unroll
        for (int i = 0; i < kLaneOutputs; ++i) {
          float& value = output_value(i, half);
          value = value * mine_factor + theirs[row * HeadDim + output_channel(i)] * their_factor;
        }
      }
    }
    // The cluster's state goes where the other warps' states were (they meet this barrier
    // before their part of the cluster's merge).
    if (cluster_merge) block_barrier_from_any_place();
  }

  // ---- Output: out = O / l and lse = (m + log2 l + q . k_offset) ln 2, or the same as this
  // split's partial state, in the workspace or, when the splits are one cluster, in this block's
  // shared memory for the cluster's merge; rows with no allowed key are 0 with LSE -inf.
  const bool partial = params.partial_out != nullptr;
  // Without warps that shared a row tile, the block's other warps may still read the pipeline's
  // last stage where the cluster's state goes.
  if (Config::kTokenGroups == 1 && cluster_merge) __syncthreads();
  // Row `half`'s 1 / l and LSE, with `smoothing_term` its q . k_offset (log2 domain).
  auto row_inverse_and_lse = [&](int half, float smoothing_term, float& inverse, float& lse) {
    const bool empty = row_max[half] == paged_negative_infinity();
    inverse = empty ? 0.0f : divide_rn(1.0f, row_sum[half]);
    lse = empty ? paged_negative_infinity()
                : (row_max[half] + log2_approx(row_sum[half]) + smoothing_term) * kLn2;
  };
  // Row (query, head_q)'s normalised values of channels channel .. channel + count - 1 (a
  // multiple of 8), and its LSE when `writes_lse`: into this split's FP32 partial state, or with
  // one split into out and lse.
  auto store_row = [&](int query, int head_q, int channel, const float* values, int count,
                       float lse, bool writes_lse) {
    if (cluster_merge) {
      // Row (query, head_q) is row query * group + head_q % group of the KV head's rows.
      const int local_row = query * params.group + head_q % params.group - blockIdx.y * BlockRows;
      float4* destination =
          reinterpret_cast<float4*>(cluster_state + local_row * HeadDim + channel);
#pragma unroll
      for (int part = 0; part < count / 4; ++part) {
        destination[part] = make_float4(values[4 * part], values[4 * part + 1],
                                        values[4 * part + 2], values[4 * part + 3]);
      }
      if (writes_lse) cluster_state[BlockRows * HeadDim + local_row] = lse;
    } else if (partial) {
      const i64 at = ((static_cast<i64>(split) * params.batch + batch) * params.q_len + query) *
                         params.heads_q +
                     head_q;
      float4* destination = reinterpret_cast<float4*>(params.partial_out + at * HeadDim + channel);
#pragma unroll
      for (int part = 0; part < count / 4; ++part) {
        destination[part] = make_float4(values[4 * part], values[4 * part + 1],
                                        values[4 * part + 2], values[4 * part + 3]);
      }
      if (writes_lse) params.partial_lse[at] = lse;
    } else {
      u16* destination = static_cast<u16*>(params.out) + batch * params.out_batch_stride +
                         query * params.out_token_stride + head_q * params.out_head_stride +
                         channel;
#pragma unroll
      for (int part = 0; part < count / 8; ++part) {
        reinterpret_cast<uint4*>(destination)[part] =
            make_uint4(pack_float2<OutputType>(values[8 * part], values[8 * part + 1]),
                       pack_float2<OutputType>(values[8 * part + 2], values[8 * part + 3]),
                       pack_float2<OutputType>(values[8 * part + 4], values[8 * part + 5]),
                       pack_float2<OutputType>(values[8 * part + 6], values[8 * part + 7]));
      }
      if (writes_lse && params.lse != nullptr) {
        params.lse[(static_cast<i64>(batch) * params.q_len + query) * params.heads_q + head_q] =
            lse;
      }
    }
  };
  if constexpr (Config::kNarrow) {
    // Row 2t + half's q . k_offset is with the lanes that loaded Q row g = 2t + half.
    float row_smoothing[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      row_smoothing[half] = __shfl_sync(0xFFFFFFFFu, smoothing[0], 4 * lane_row(half));
    }
    constexpr int L = Config::kLaneChannels;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_first_row + lane_row(half);
      if (row >= rows) continue;
      const int query = row / params.group;
      const int head_q = head_kv * params.group + row % params.group;
      float inverse, lse;
      row_inverse_and_lse(half, row_smoothing[half], inverse, lse);
      float values[L];
#pragma unroll
      for (int c = 0; c < L; ++c) values[c] = narrow_value(c, half) * inverse;
      store_row(query, head_q, lane_group * L, values, L, lse, lane_group == 0);
    }
  } else {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_first_row + lane_group + 8 * half;
      if (row >= rows) continue;
      const int query = row / params.group;
      const int head_q = head_kv * params.group + row % params.group;
      float inverse, lse;
      row_inverse_and_lse(half, smoothing[half], inverse, lse);
#pragma unroll
      for (int cg = 0; cg < kGroups; ++cg) {
        float values[16];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          values[pair_first_channel<Bits>(j)] = o[cg][j][2 * half] * inverse;
          values[pair_second_channel<Bits>(j)] = o[cg][j][2 * half + 1] * inverse;
        }
        store_row(query, head_q, 64 * cg + 16 * lane_in_group, values, 16, lse,
                  cg == 0 && lane_in_group == 0);
      }
    }
  }

  if (cluster_merge) {
    merge_in_cluster<HeadDim, OutputType, BlockRows>(cluster_merge_output(params, batch, head_kv),
                                                     cluster_state, rows);
  }
}

}  // namespace kernels
}  // namespace intfa
