// Shared-memory tile addressing with an XOR swizzle of 16-byte chunks, so that the 8 row
// addresses of one ldmatrix (same logical chunk, 8 consecutive rows) and the 16-byte cp.async
// stores hit 8 different 16-byte bank groups (32 banks x 4 bytes = 128 bytes per wavefront).
#pragma once

#include "common/types.h"

namespace intfa {
namespace kernels {

template <int RowBytes>
struct SwizzledTile {
  static_assert(RowBytes % 16 == 0 && RowBytes >= 16, "rows are whole 16-byte chunks");
  static constexpr int kChunksPerRow = RowBytes / 16;

  // Rows narrower than 128 bytes share a 128-byte line with their neighbours; rows of the same
  // line must not be XORed apart, rows of different lines must.
  __device__ __forceinline__ static int chunk_xor(int row) {
    if constexpr (RowBytes >= 128) {
      return row & 7;
    } else {
      constexpr int kRowsPerLine = 128 / RowBytes;
      return (row / kRowsPerLine) % kChunksPerRow;
    }
  }

  // Byte offset of 16-byte chunk `chunk` of row `row`.
  __device__ __forceinline__ static int offset(int row, int chunk) {
    return row * RowBytes + ((chunk ^ chunk_xor(row)) << 4);
  }
};

}  // namespace kernels
}  // namespace intfa
