// Parameters and shared-memory size of the Hopper attention kernels (attention_forward_wgmma.cuh),
// shared by host and device.
#pragma once

#include "attention/attention_params.h"
#include "common/tensor_map.h"

namespace intfa {
namespace kernels {

// The portable parameters (pointers, strides, lengths, scales) and the TMA descriptors of the
// tiles the producer warp loads. The kernel takes it as a __grid_constant__, so the descriptors
// stay in parameter memory, where TMA reads them.
//   k_map: INT8 (head_dim, seq, heads, batch), box (slab bytes, block rows), swizzled. (Q has
//     no map: each consumer warpgroup loads its own rows, INT8 or 16-bit.)
//   v_map: full INT8: the INT8 V layout (v_padded_seq, head_dim, heads_kv, batch), box
//     (block_n, head_dim); half INT8: 16-bit V (head_dim, seq_kv, heads_kv, batch), box
//     (64 channels, block_n), swizzled: slabs of 64 channels.
// The kernel's own Q pass (WgmmaAttentionConfig::kQuantizesQ; attention_forward_16bit): Q
// arrives in 16 bits and each consumer warpgroup quantizes its 64 rows per token into the Q tile
// exactly as quantize_rows would have (AttentionParams::q and q_scale are then unused).
struct WgmmaQInput {
  const void* q;     // FP16/BF16 [batch][heads_q][seq_q][head_dim], rows 16-byte aligned
  Strides strides;   // in bytes
  // With K smoothing (DotKMean): K's channel means [batch][heads_kv][head_dim] in, the LSE term
  // q . mean per row out (AttentionParams::q_dot_k_mean's memory, which the epilogue reads).
  const float* k_channel_mean;
  float* q_dot_k_mean;
  // Automatic rotation (RotateQ kAuto): [batch][heads_kv] ints, nonzero where the KV head's rows
  // are rotated (channel_mean's flags, which K's rows followed).
  const int* rotated_heads;
};

struct WgmmaAttentionParams {
  AttentionParams attention;
  TensorMap k_map, v_map;
  WgmmaQInput q_input;
};

// Rows of one consumer warpgroup (the M of wgmma).
constexpr int kWgmmaGroupRows = 64;

// Q and K rows are stored as slabs of at most 128 bytes (the widest TMA/wgmma swizzle); d=256
// is two slabs side by side.
INTFA_HOST_DEVICE constexpr int wgmma_slab_bytes(int head_dim) {
  return head_dim < 128 ? head_dim : 128;
}

// One pipeline stage: the K tile, the V tile (INT8, or 16-bit for half INT8; each a multiple of
// 1024 bytes, so every tile starts where the 128-byte swizzle pattern repeats) and the K tile's
// scales, padded to 1024 bytes.
INTFA_HOST_DEVICE constexpr int wgmma_stage_bytes(int head_dim, int block_n,
                                                  int v_element_bytes) {
  return block_n * head_dim * (1 + v_element_bytes) + (block_n * 4 + 1023) / 1024 * 1024;
}

constexpr int kWgmmaBarrierBytes = 128;

// Whether the epilogue stages the output rows in shared memory (attention_forward_wgmma.cuh,
// store_output_staged): at d >= 128. Every staged d=64 variant measured 1-10% slower than
// storing from the fragments, its main loop rescheduled by ptxas each time (H100, 2026-11-23,
// bench/history/2026-11-23.md); unstaged, the d=64 cubin is what it was.
INTFA_HOST_DEVICE constexpr bool wgmma_stages_output(int head_dim) { return head_dim >= 128; }

// The block's output rows in the 16-bit output type, staged on their way to global memory, and
// V's scales for the staged epilogue (one FP32 per channel).
INTFA_HOST_DEVICE constexpr int wgmma_output_staging_bytes(int head_dim, int block_m) {
  return wgmma_stages_output(head_dim) ? block_m * head_dim * 2 + head_dim * 4 : 0;
}

// 1024 bytes of slack align the dynamic shared memory, whose base is only 16-byte aligned. After
// the stages: the output staging, if any, then the barriers.
INTFA_HOST_DEVICE constexpr int wgmma_attention_shared_bytes(int head_dim, int block_m,
                                                               int block_n, int stages,
                                                               int v_element_bytes) {
  return 1024 + block_m * head_dim + stages * wgmma_stage_bytes(head_dim, block_n, v_element_bytes) +
         wgmma_output_staging_bytes(head_dim, block_m) + kWgmmaBarrierBytes;
}

}  // namespace kernels
}  // namespace intfa
