// K's rows and all of V -- its scales and its quantization -- in one launch that reads each input
// byte once: attention_forward_16bit's quantize passes on sm_90a (full INT8, V per channel or per
// tensor, K per token). V's scales bound V over the whole sequence, so no V value can be
// quantized before every token has been read; the two-launch path (quantize_k_v_scale, then
// quantize_v) reads V twice for that. Here one cluster of blocks (common/cluster.cuh) takes one
// (batch, head) of V: each block copies its slice of the tokens into shared memory (cp.async),
// reduces its channels' maxima, and the cluster's blocks read each other's maxima through
// distributed shared memory; each block then quantizes its slice from shared memory into V's
// layout. While the slice is in flight, and again while the cluster's other blocks catch up, the
// block quantizes its share of K's rows (quantize_rows' code). Every output is bit for bit the two
// launches': the same maxima (max commutes with the rounding of max / 127), the same quantization.
#pragma once

#include "attention/attention_params.h"
#include "common/cluster.cuh"
#include "common/copy.cuh"
#include "common/grid_dependency.cuh"
#include "common/kernel_enums.h"
#include "common/numeric.cuh"
#include "quantize/quantize_params.h"
#include "quantize/quantize_rows.cuh"
#include "quantize/quantize_v.cuh"

namespace intfa {
namespace kernels {

template <int HeadDim>
struct QuantizeKVConfig {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static constexpr int kThreads = kQuantizeKVThreads;
  static constexpr int kWarps = kThreads / 32;
  // V's slice: one 16-byte chunk (8 channels) of a token per thread, kTokensPerPass tokens at once.
  static constexpr int kChunksPerToken = HeadDim / 8;
  static constexpr int kTokensPerPass = kThreads / kChunksPerToken;
  // K: a group is kThreads / (HeadDim / 8) rows, one chunk per thread; four groups' loads in
  // flight (each thread's K work is a chain of memory round trips, one per kKGroupsInFlight).
  static constexpr int kKRowsPerGroup = kThreads / (HeadDim / 8);
  static constexpr int kKGroupsInFlight = 4;
};

// Where chunk `chunk` of slice token `token` sits in shared memory (in 16-bit values): rows of
// HeadDim values, the chunk index XOR 4 in the second 32 tokens of each 64. The quantize step
// reads one channel pair of 32 tokens per lane, half a warp in each 32-token half of a block:
// the XOR puts the two halves' reads in different banks (rows are a multiple of 128 bytes).
template <int HeadDim>
__device__ __forceinline__ int v_slice_offset(int token, int chunk) {
  return token * HeadDim + (chunk ^ (((token >> 5) & 1) << 2)) * 8;
}

// K's rows of this block's tokens: those of V's slice, in K's own layout (dense, or the packed
// rows of a varlen batch), and this lane's channel means when smoothing (one (batch, head) per
// block: loaded once).
struct KSlice {
  u32 head_index;  // of K's [batch, heads] (batch 0 when packed)
  int h, b;
  int first_row;  // of the slice's first token in K's rows of that head
  int tokens;     // the slice's tokens that exist (the rest are V's padding)
  float mean[8];
  bool rotates;  // automatic rotation: the head's decision (one head per block: read once)
};

// K's row groups [begin, end) of the slice (kKRowsPerGroup tokens each), kKGroupsInFlight groups'
// loads in flight at a time. Every thread of the block calls it with the same range (the row
// reductions are shuffles).
template <int HeadDim, ElementType InputType, int Bits, bool SmoothK, QKRotation Rotate>
__device__ __forceinline__ void quantize_k_groups(const QuantizeRowsParams& params,
                                                  const KSlice& slice, int begin, int end) {
  using Config = QuantizeKVConfig<HeadDim>;
  const int lane_in_row = threadIdx.x % (HeadDim / 8);
  const int row_in_group = threadIdx.x / (HeadDim / 8);
  for (int group = begin; group < end; group += Config::kKGroupsInFlight) {
    RowChunk chunks[Config::kKGroupsInFlight];
    uint4 raw[Config::kKGroupsInFlight];
#pragma unroll
    for (int i = 0; i < Config::kKGroupsInFlight; ++i) {
      // A group past the range is inactive (the other call's, or past the slice).
      const int token = (group + i) * Config::kKRowsPerGroup + row_in_group;
      RowChunk& chunk = chunks[i];
      chunk.active = group + i < end && token < slice.tokens;
      chunk.head_index = slice.head_index;
      chunk.n = slice.first_row + token;
      chunk.h = slice.h;
      chunk.b = slice.b;
      chunk.channel = 8 * lane_in_row;
      raw[i] = load_row_chunk(params, chunk);
    }
    asm volatile("" ::: "memory");  // every group's load before any group's arithmetic
#pragma unroll
    for (int i = 0; i < Config::kKGroupsInFlight; ++i) {
      float values[8];
      unpack_8_values<InputType>(values, raw[i]);
      if (SmoothK && chunks[i].active) {
#pragma unroll
        for (int c = 0; c < 8; ++c) values[c] -= slice.mean[c];
      }
      finish_row_chunk<HeadDim, InputType, Bits, SmoothK, false, Rotate>(
          params, chunks[i], values, 0.0f, lane_in_row, slice.rotates);
    }
  }
}

template <int HeadDim, ElementType InputType, int Bits, bool SmoothK, QKRotation Rotate,
          VScaleGranularity Granularity>
__global__ void __launch_bounds__(kQuantizeKVThreads, kQuantizeKVBlocksPerSm)
    quantize_k_v(const QuantizeKVParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
  static_assert(Granularity != VScaleGranularity::kPerBlock,
                "per-block V scales need no cluster (quantize_v)");
  using Config = QuantizeKVConfig<HeadDim>;
  extern __shared__ __align__(16) u16 slice[];  // params.v_blocks_per_slice blocks of V
  __shared__ float warp_channel_max[Config::kWarps][HeadDim];
  __shared__ float slice_channel_max[HeadDim];  // read by the cluster's other blocks
  __shared__ float inverse_scale[HeadDim];
  __shared__ float warp_max[Config::kWarps];

  const QuantizeVParams& v_params = params.v;
  const int rank = static_cast<int>(cluster_block_rank());  // the cluster spans gridDim.x
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const VHead v = v_head(v_params, batch, head);
  const int first = rank * params.v_blocks_per_slice * kVTokenBlock;
  const int slice_tokens =
      max(0, min(params.v_blocks_per_slice * kVTokenBlock, v_params.padded_seq - first));
  const int lane_chunk = threadIdx.x % Config::kChunksPerToken;
  const int channel = 8 * lane_chunk;

  // V's slice in flight (zeros past the sequence and past v_params.channels).
  const u32 slice_address = shared_address(slice);
  for (int token = threadIdx.x / Config::kChunksPerToken; token < slice_tokens;
       token += Config::kTokensPerPass) {
    const bool valid = first + token < v.seq && channel < v_params.channels;
    const u16* source =
        valid ? v.input + static_cast<i64>(first + token) * v_params.input_row_stride + channel
              : v.input;
    copy_16_bytes_async(slice_address + 2 * v_slice_offset<HeadDim>(token, lane_chunk), source,
                        valid);
  }
  commit_async_copies();

  // Half of K's rows while the slice is in flight; the other half between this block's arrival
  // at the cluster barrier and its wait, where it hides the cluster's slowest block.
  KSlice k_slice;
  const bool packed = v_params.cu_seqlens != nullptr;
  k_slice.b = packed ? 0 : batch;
  k_slice.h = head;
  k_slice.head_index = static_cast<u32>(k_slice.b * params.k.heads + head);
  k_slice.first_row = (packed ? v_params.cu_seqlens[batch] : 0) + first;
  // K's rows of the slice's tokens that exist (and, however the offsets came, no row past K's).
  k_slice.tokens = max(0, min(min(slice_tokens, v.seq - first), params.k.seq - k_slice.first_row));
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    k_slice.mean[i] = SmoothK
                          ? params.k.channel_mean[static_cast<i64>(k_slice.head_index) * HeadDim +
                                                  8 * (threadIdx.x % (HeadDim / 8)) + i]
                          : 0.0f;
  }
  k_slice.rotates = Rotate == QKRotation::kAuto && params.k.rotated_heads[k_slice.head_index] != 0;
  const int k_groups = slice_tokens / Config::kKRowsPerGroup;
  const int k_groups_first_half = (k_groups + 1) / 2;
  quantize_k_groups<HeadDim, InputType, Bits, SmoothK, Rotate>(params.k, k_slice, 0,
                                                               k_groups_first_half);

  // The slice's channel maxima: lanes kChunksPerToken apart hold the same channels; then warps.
  wait_async_copies<0>();
  __syncthreads();
  float amax[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) amax[i] = 0.0f;
  for (int token = threadIdx.x / Config::kChunksPerToken; token < slice_tokens;
       token += Config::kTokensPerPass) {
    float values[8];
    unpack_8_values<InputType>(values, *reinterpret_cast<const uint4*>(
                                           slice + v_slice_offset<HeadDim>(token, lane_chunk)));
#pragma unroll
    for (int i = 0; i < 8; ++i) amax[i] = fmaxf(amax[i], fabsf(values[i]));
  }
  channel_max_to_shared<Config::kChunksPerToken>(amax, channel, warp_channel_max);
  const int warp = threadIdx.x / 32;
  for (int c = threadIdx.x; c < HeadDim; c += Config::kThreads) {
    slice_channel_max[c] = channel_max_over_warps(warp_channel_max, c);
  }

  // The cluster's maxima: every block's slice_channel_max is written once all have arrived.
  cluster_arrive();
  quantize_k_groups<HeadDim, InputType, Bits, SmoothK, Rotate>(params.k, k_slice,
                                                               k_groups_first_half, k_groups);
  cluster_wait();
  const i64 head_index = static_cast<i64>(batch) * v_params.heads + head;
  static_assert(HeadDim <= Config::kThreads, "one channel per thread");
  float channel_max = 0.0f;
  if (threadIdx.x < HeadDim) {
    for (u32 block = 0; block < cluster_block_count(); ++block) {
      channel_max =
          fmaxf(channel_max, load_float_of_cluster_block(&slice_channel_max[threadIdx.x], block));
    }
  }
  // This block has read the others' maxima: they may leave once their final wait sees it.
  cluster_arrive();
  if (Granularity == VScaleGranularity::kPerChannel) {
    if (threadIdx.x < HeadDim) {
      const float scale = divide_rn(channel_max, 127.0f);
      inverse_scale[threadIdx.x] = scale > 0.0f ? divide_rn(1.0f, scale) : 0.0f;
      if (rank == 0) v_params.scales[head_index * HeadDim + threadIdx.x] = scale;
    }
  } else {
    float tensor_max = channel_max;  // threads past HeadDim hold 0
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      tensor_max = fmaxf(tensor_max, __shfl_xor_sync(0xFFFFFFFFu, tensor_max, offset));
    }
    if (threadIdx.x % 32 == 0) warp_max[warp] = tensor_max;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < Config::kWarps; ++w) tensor_max = fmaxf(tensor_max, warp_max[w]);
    const float scale = divide_rn(tensor_max, 127.0f);
    if (threadIdx.x < HeadDim)
      inverse_scale[threadIdx.x] = scale > 0.0f ? divide_rn(1.0f, scale) : 0.0f;
    if (rank == 0 && threadIdx.x == 0) v_params.scales[head_index] = scale;
  }
  __syncthreads();

  // The slice into V's layout: per item one channel pair and 32 tokens (two 16-token groups of
  // 16 bytes per channel); a warp's lanes take 16 pairs in each 32-token half of a block.
  i8* head_output = v_params.output + head_index * HeadDim * v_params.padded_seq + first;
  const int items = slice_tokens / kVTokenBlock * HeadDim;
  for (int item = threadIdx.x; item < items; item += Config::kThreads) {
    const int block = item / HeadDim;
    const int within = item % HeadDim;
    const int half = (within / 16) % 2;
    const int pair = (within / 32) * 16 + within % 16;
    const int pair_channel = 2 * pair;
    const float inverse_low = inverse_scale[pair_channel];
    const float inverse_high = inverse_scale[pair_channel + 1];
#pragma unroll
    for (int group = 0; group < 2; ++group) {
      const int group_first = block * kVTokenBlock + half * 32 + group * 16;
      u32 low_words[4];
      u32 high_words[4];
#pragma unroll
      for (int word = 0; word < 4; ++word) {
        u32 low[4];
        u32 high[4];
#pragma unroll
        for (int byte = 0; byte < 4; ++byte) {
          const int token = group_first + v_token_at_position(4 * word + byte);
          const u32 bits = *reinterpret_cast<const u32*>(
              slice + v_slice_offset<HeadDim>(token, pair_channel / 8) + pair_channel % 8);
          // Clamped: the scale may be subnormal (a channel of values below 127 * 2^-126).
          low[byte] = quantize_to_low_bits<true>(
              element_to_float<InputType>(static_cast<u16>(bits & 0xFFFF)), inverse_low, 127);
          high[byte] = quantize_to_low_bits<true>(
              element_to_float<InputType>(static_cast<u16>(bits >> 16)), inverse_high, 127);
        }
        low_words[word] = gather_low_bytes(low[0], low[1], low[2], low[3]);
        high_words[word] = gather_low_bytes(high[0], high[1], high[2], high[3]);
      }
      i8* output = head_output + static_cast<i64>(pair_channel) * v_params.padded_seq + group_first;
      *reinterpret_cast<uint4*>(output) =
          make_uint4(low_words[0], low_words[1], low_words[2], low_words[3]);
      *reinterpret_cast<uint4*>(output + v_params.padded_seq) =
          make_uint4(high_words[0], high_words[1], high_words[2], high_words[3]);
    }
  }
  // No block leaves while another may still read its maxima.
  cluster_wait();
}

}  // namespace kernels
}  // namespace intfa
