// Asynchronous global -> shared copies of the Q, K, V and scale tiles of one attention block.
// Rows past the end of a sequence are zero-filled on chip (the caller never pads).
//
// Each thread moves the 16-byte chunks thread, thread + Threads, ... of a tile. With that
// spacing every chunk of a thread sits in the same column of the tile and `Threads / chunks per
// row` rows below the previous one, which keeps the swizzle's XOR unchanged: the shared offsets
// are the first one plus compile-time steps, and the global ones the first plus a fixed row step.
// So a tile costs a handful of adds per chunk instead of a full index computation.
#pragma once

#include "attention/attention_params.h"
#include "common/copy.cuh"
#include "common/swizzle.cuh"

namespace intfa {
namespace kernels {

template <int Rows, int RowBytes, int Threads>
struct TileCopy {
  using Tile = SwizzledTile<RowBytes>;
  static constexpr int kChunksPerRow = Tile::kChunksPerRow;
  static constexpr int kChunks = Rows * kChunksPerRow;
  static constexpr int kChunksPerThread = (kChunks + Threads - 1) / Threads;
  static constexpr int kRowsPerPass = Threads / kChunksPerRow;
  static_assert(Threads % kChunksPerRow == 0, "a pass covers whole rows");
  static_assert(kChunks % Threads == 0 || kChunks < Threads, "whole passes, or one partial pass");
  // Whether every chunk of a thread gets the same swizzle XOR (true unless a pass covers fewer
  // than 8 rows of 128+ bytes); otherwise each chunk's offset is computed on its own.
  static constexpr bool kSameSwizzle =
      RowBytes >= 128 ? kRowsPerPass % 8 == 0
                      : (kRowsPerPass / (128 / RowBytes)) % kChunksPerRow == 0;

  u32 shared_offset;  // of this thread's first chunk in the tile
  i64 source_offset;  // of its first chunk from the tile's first row, in bytes
  i64 row_step;       // bytes between a thread's consecutive chunks in global memory
  int row;            // row of its first chunk in the tile
  int chunk;          // column (16-byte chunk) of all its chunks
  bool active;        // false for threads beyond a tile smaller than one pass

  __device__ __forceinline__ TileCopy(int thread, i64 row_stride) {
    row = thread / kChunksPerRow;
    chunk = thread % kChunksPerRow;
    active = kChunks >= Threads || thread < kChunks;
    shared_offset = static_cast<u32>(Tile::offset(row, chunk));
    source_offset = row * row_stride + chunk * 16;
    row_step = kRowsPerPass * row_stride;
  }

  // Copies the tile whose first row starts at `source`; rows at or past `valid_rows` are
  // zero-filled (pass Rows when the whole tile is inside the tensor).
  __device__ __forceinline__ void copy(u32 tile, const u8* source, int valid_rows) const {
    if (!active) return;
    const u8* from = source + source_offset;
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const bool valid = row + i * kRowsPerPass < valid_rows;
      const u32 offset = kSameSwizzle ? shared_offset + i * Threads * 16
                                      : static_cast<u32>(Tile::offset(row + i * kRowsPerPass, chunk));
      copy_16_bytes_async(tile + offset, valid ? from : source, valid);
      from += row_step;
    }
  }
};

template <class Config>
struct AttentionTileLoader {
  using QCopy = TileCopy<Config::kBlockM, Config::kQkRowBytes, Config::kThreads>;
  using KCopy = TileCopy<Config::kBlockN, Config::kQkRowBytes, Config::kThreads>;
  using VCopy = TileCopy<Config::kVRows, Config::kVRowBytes, Config::kThreads>;

  const u8* q_head;   // this block's (batch, query head)
  const u8* k_head;   // its (batch, KV head)
  const u8* v_head;
  const float* k_scale_head;
  const float* v_block_scale_head;  // per-block V scales of the KV head, or null
  i64 q_row_stride, k_row_stride, v_row_stride;
  int seq_q, seq_kv, v_padded_seq;
  int v_channels;  // half INT8: the caller's head dim (AttentionParams::out_head_dim)
  int thread;
  KCopy k_copy;
  VCopy v_copy;

  __device__ __forceinline__ AttentionTileLoader(const AttentionParams& p, int batch, int head_q,
                                                 int head_kv, const SequenceExtent& extent,
                                                 int thread_index)
      : q_head(static_cast<const u8*>(p.q) + batch * p.q_strides.batch + head_q * p.q_strides.head +
               extent.q_row0 * p.q_strides.row),
        k_head(static_cast<const u8*>(p.k) + batch * p.k_strides.batch +
               head_kv * p.k_strides.head + extent.kv_row0 * p.k_strides.row),
        // INT8 V has a per-batch layout (rows are channels); packed 16-bit V starts at kv_row0.
        v_head(static_cast<const u8*>(p.v) + batch * p.v_strides.batch +
               head_kv * p.v_strides.head +
               (Config::kFullInt8 ? 0 : extent.kv_row0 * p.v_strides.row)),
        k_scale_head(p.k_scale + extent.k_scale0),
        v_block_scale_head(Config::kPerBlockV
                               ? p.v_scale + (static_cast<i64>(batch) * p.heads_kv + head_kv) *
                                                 (p.v_padded_seq / kVTokenBlock) * Config::kHeadDim
                               : nullptr),
        q_row_stride(p.q_strides.row),
        k_row_stride(p.k_strides.row),
        v_row_stride(p.v_strides.row),
        seq_q(extent.seq_q),
        seq_kv(extent.seq_kv),
        v_padded_seq(p.v_padded_seq),
        v_channels(p.out_head_dim),
        thread(thread_index),
        k_copy(thread_index, p.k_strides.row),
        v_copy(thread_index, p.v_strides.row) {}

  __device__ __forceinline__ void load_q(u8* tile, int first_row) const {
    const QCopy q_copy(thread, q_row_stride);
    q_copy.copy(shared_address(tile), q_head + first_row * q_row_stride, seq_q - first_row);
  }

  __device__ __forceinline__ void load_k(u8* tile, float* scales, int first_key) const {
    k_copy.copy(shared_address(tile), k_head + first_key * k_row_stride, seq_kv - first_key);
    if constexpr (Config::kPerBlockK) {
      // The scales of the 64-key blocks the tile covers (one when the tile is part of a block).
      constexpr int kBlocks = Config::kBlockN > kKTokenBlock ? Config::kBlockN / kKTokenBlock : 1;
      if (thread < kBlocks) {
        const int first = first_key + thread * kKTokenBlock;
        const bool valid = first < seq_kv;
        copy_4_bytes_async(shared_address(scales + thread),
                           k_scale_head + (valid ? first / kKTokenBlock : 0), valid);
      }
    } else if (thread < Config::kBlockN) {
      const bool valid = first_key + thread < seq_kv;
      copy_4_bytes_async(shared_address(scales + thread),
                         k_scale_head + (valid ? first_key + thread : 0), valid);
    }
  }

  __device__ __forceinline__ void load_v(u8* tile, float* block_scales, int first_key) const {
    if (Config::kFullInt8) {
      // Rows are channels (all present); a chunk holds 16 token positions, which exist up to
      // the padded length.
      const bool valid = first_key + v_copy.chunk * 16 < v_padded_seq;
      v_copy.copy(shared_address(tile), v_head + first_key, valid ? Config::kVRows : 0);
    } else {
      // A chunk holds 8 channels; those past the caller's head dim are zero-filled.
      const bool valid = v_copy.chunk * 8 < v_channels;
      v_copy.copy(shared_address(tile), v_head + first_key * v_row_stride,
                  valid ? seq_kv - first_key : 0);
    }
    if (Config::kPerBlockV) {
      constexpr int kChunksPerBlock = Config::kHeadDim * 4 / 16;
      const int first_block = first_key / kVTokenBlock;
      const int blocks = v_padded_seq / kVTokenBlock;
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
