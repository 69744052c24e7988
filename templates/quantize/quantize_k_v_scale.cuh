// K's row pass and V's max pass in one launch, for attention_forward_16bit (full INT8, V scaled
// per tensor or per channel): two independent grids, each too small to fill the GPU at short
// sequences, share the launch instead of each paying a launch and a drain. Blocks below
// params.k_blocks are quantize_rows' blocks of K (quantize_rows.cuh), the others quantize_v_scale's
// blocks of V (quantize_v.cuh), so each half writes exactly what its own kernel writes. The block
// size is quantize_rows' 128 threads; V's half uses the same v_scale_block at that width. V's
// scales must be zero before this launch (channel_mean's launch zeroes them, or a memset).
#pragma once

#include "common/grid_dependency.cuh"
#include "quantize/quantize_params.h"
#include "quantize/quantize_rows.cuh"
#include "quantize/quantize_v.cuh"

namespace intfa {
namespace kernels {

template <int HeadDim, ElementType InputType, int Bits, bool SmoothK, QKRotation Rotate,
          VScaleGranularity Granularity>
__global__ void __launch_bounds__(128) quantize_k_v_scale(const QuantizeKVScaleParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
  using RowsConfig = QuantizeRowsConfig<HeadDim, InputType, Bits, SmoothK, false, Rotate>;
  static_assert(RowsConfig::kThreads == 128, "the launch's block size is quantize_rows'");
  if (blockIdx.x < params.k_blocks) {
    quantize_rows_block<HeadDim, InputType, Bits, SmoothK, false, Rotate>(params.k, blockIdx.x);
    return;
  }
  const u32 v_block = blockIdx.x - params.k_blocks;
  const u32 per_head = static_cast<u32>(params.v_blocks_per_head);
  const u32 head_index = v_block / per_head;  // batch * heads + head
  const int heads = params.v.heads;
  v_scale_block<HeadDim, InputType, Granularity, RowsConfig::kThreads>(
      params.v, static_cast<int>(head_index / static_cast<u32>(heads)),
      static_cast<int>(head_index % static_cast<u32>(heads)), static_cast<int>(v_block % per_head));
}

}  // namespace kernels
}  // namespace intfa
