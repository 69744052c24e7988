// Asynchronous global -> shared loads of the Q, K, V and scale tiles of one attention block.
// Rows past the end of a sequence are zero-filled on chip (the caller never pads).
#pragma once

#include "attention/attention_params.h"
#include "common/copy.cuh"
#include "common/swizzle.cuh"

namespace intfa {
namespace kernels {

// Copies `Rows` rows of `RowBytes` into a swizzled tile; `source_row(row)` gives a row's address
// or null when the row lies outside the tensor.
template <int Rows, int RowBytes, int Threads, typename SourceRow>
__device__ __forceinline__ void load_rows_async(u8* tile, const SourceRow& source_row,
                                                int thread) {
  using Tile = SwizzledTile<RowBytes>;
  constexpr int kChunks = Rows * Tile::kChunksPerRow;
#pragma unroll
  for (int first = 0; first < kChunks; first += Threads) {
    const int index = first + thread;
    if (kChunks % Threads != 0 && index >= kChunks) break;
    const int row = index / Tile::kChunksPerRow;
    const int chunk = index % Tile::kChunksPerRow;
    const u8* row_start = source_row(row, chunk);
    copy_16_bytes_async(shared_address(tile + Tile::offset(row, chunk)),
                        row_start != nullptr ? row_start + chunk * 16 : tile, row_start != nullptr);
  }
}

template <class Config>
struct AttentionTileLoader {
  const AttentionParams& params;
  const u8* q_head;   // this block's (batch, query head)
  const u8* k_head;   // its (batch, KV head)
  const u8* v_head;
  const float* k_scale_head;
  const float* v_block_scale_head;  // per-block V scales of the KV head, or null
  int thread;

  __device__ __forceinline__ void load_q(u8* tile, int first_row) const {
    const AttentionParams& p = params;
    const u8* base = q_head;
    load_rows_async<Config::kBlockM, Config::kQkRowBytes, Config::kThreads>(
        tile,
        [&](int row, int) -> const u8* {
          return first_row + row < p.seq_q ? base + (i64)(first_row + row) * p.q_strides.row
                                           : nullptr;
        },
        thread);
  }

  __device__ __forceinline__ void load_k(u8* tile, float* scales, int first_key) const {
    const AttentionParams& p = params;
    const u8* base = k_head;
    load_rows_async<Config::kBlockN, Config::kQkRowBytes, Config::kThreads>(
        tile,
        [&](int row, int) -> const u8* {
          return first_key + row < p.seq_kv ? base + (i64)(first_key + row) * p.k_strides.row
                                            : nullptr;
        },
        thread);
    for (int key = thread; key < Config::kBlockN; key += Config::kThreads) {
      const bool valid = first_key + key < p.seq_kv;
      copy_4_bytes_async(shared_address(scales + key),
                         k_scale_head + (valid ? first_key + key : 0), valid);
    }
  }

  __device__ __forceinline__ void load_v(u8* tile, float* block_scales, int first_key) const {
    const AttentionParams& p = params;
    const u8* base = v_head;
    if (Config::kFullInt8) {
      // Rows are channels; a 16-byte chunk holds 16 token positions of the padded V row.
      load_rows_async<Config::kVRows, Config::kVRowBytes, Config::kThreads>(
          tile,
          [&](int channel, int chunk) -> const u8* {
            return first_key + chunk * 16 < p.v_padded_seq
                       ? base + (i64)channel * p.v_strides.row + first_key
                       : nullptr;
          },
          thread);
    } else {
      load_rows_async<Config::kVRows, Config::kVRowBytes, Config::kThreads>(
          tile,
          [&](int row, int) -> const u8* {
            return first_key + row < p.seq_kv ? base + (i64)(first_key + row) * p.v_strides.row
                                              : nullptr;
          },
          thread);
    }
    if (Config::kPerBlockV) {
      constexpr int kChunksPerBlock = Config::kHeadDim * 4 / 16;
      const int first_block = first_key / kVTokenBlock;
      const int blocks = p.v_padded_seq / kVTokenBlock;
      for (int index = thread; index < Config::kVBlocksPerTile * kChunksPerBlock;
           index += Config::kThreads) {
        const int block = first_block + index / kChunksPerBlock;
        const bool valid = block < blocks;
        const int chunk = index % kChunksPerBlock;
        copy_16_bytes_async(
            shared_address(block_scales + (index / kChunksPerBlock) * Config::kHeadDim + chunk * 4),
            v_block_scale_head + (valid ? (i64)block * Config::kHeadDim + chunk * 4 : 0), valid);
      }
    }
  }
};

}  // namespace kernels
}  // namespace intfa
