// The rotation of incoherent processing (rotation.h) on rows spread over a warp's lanes, 8
// channels per lane: the one implementation of quantize_rows (quantize_rows.cuh) and of the Hopper
// attention kernel's own Q pass (attention/wgmma_q_tile.cuh), so that both rotate a row to the bit.
#pragma once

#include "common/kernel_enums.h"
#include "common/types.h"
#include "quantize/rotation.h"

namespace intfa {
namespace kernels {

// The rotation of rotation.h on one row held by ThreadsPerRow consecutive lanes, 8
// consecutive channels each: the signs, butterflies of strides 1, 2, 4 inside the thread, then one
// shuffle per value for each larger stride (lane bit), then the normaliser. Every lane of the warp
// takes part (rows past the end with zeros).
template <int ThreadsPerRow>
__device__ __forceinline__ void rotate_row(float (&values)[8], int lane_in_row) {
  constexpr int kHeadDim = ThreadsPerRow * 8;
  const int channel = lane_in_row * 8;
  const u32 signs = rotation_sign_bits(channel / 32) >> (channel % 32);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    values[i] =
        __int_as_float(__float_as_int(values[i]) ^ static_cast<int>(((signs >> i) & 1u) << 31));
  }
#pragma unroll
  for (int stride = 1; stride < 8; stride *= 2) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if ((i & stride) != 0) continue;
      const float low = values[i];
      const float high = values[i + stride];
      values[i] = low + high;
      values[i + stride] = low - high;
    }
  }
#pragma unroll
  for (int lane_stride = 1; lane_stride < ThreadsPerRow; lane_stride *= 2) {
    // The lane with the bit clear holds the lower channel: (low, high) -> (low + high, low - high),
    // as one FFMA each, +-1 * own + partner (the product is exact: one rounding, as the FADD).
    const float own_sign = (lane_in_row & lane_stride) != 0 ? -1.0f : 1.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float partner = __shfl_xor_sync(0xFFFFFFFFu, values[i], lane_stride);
      values[i] = fmaf(own_sign, values[i], partner);
    }
  }
  constexpr float kNormaliser = rotation_normaliser(kHeadDim);
#pragma unroll
  for (int i = 0; i < 8; ++i) values[i] *= kNormaliser;
}

// The rotation a row gets under `Rotation`: none (kOff), rotate_row (kOn), or with kAuto
// rotate_row where `rotates` (the row's head's flag: QuantizeRowsParams::rotated_heads) is set.
// Every lane of the warp calls it, the lanes of a row with the same `rotates`. Where the warp's
// rows may be of two heads (SameHead false: quantize_rows), a warp whose rows differ runs the
// shuffles once for all its lanes and keeps each row's own result; where all its rows are one
// head's (SameHead: one head per block: quantize_row_blocks), `rotates` is the warp's and the
// rows rotate in place (no copy). The Hopper kernel's Q pass calls rotate_row itself, in its
// rotated passes.
template <QKRotation Rotation, int ThreadsPerRow, bool SameHead = false>
__device__ __forceinline__ void rotate_row_as(float (&values)[8], int lane_in_row, bool rotates) {
  if constexpr (Rotation == QKRotation::kOn) {
    rotate_row<ThreadsPerRow>(values, lane_in_row);
  } else if constexpr (Rotation == QKRotation::kAuto && SameHead) {
    if (rotates) rotate_row<ThreadsPerRow>(values, lane_in_row);
  } else if constexpr (Rotation == QKRotation::kAuto) {
    if (__any_sync(0xFFFFFFFFu, rotates)) {
      float rotated[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) rotated[i] = values[i];
      rotate_row<ThreadsPerRow>(rotated, lane_in_row);
      if (rotates) {
#pragma unroll
        for (int i = 0; i < 8; ++i) values[i] = rotated[i];
      }
    }
  }
}

}  // namespace kernels
}  // namespace intfa
