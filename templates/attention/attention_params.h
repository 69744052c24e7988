// Parameters of the attention kernels, shared by host and device (plain data, passed by value).
// The numerics and every layout are specified in templates/attention/README.md.
#pragma once

#include "common/types.h"

namespace intfa {
namespace kernels {

struct Strides {  // in bytes
  i64 batch, head, row;
};

struct AttentionParams {
  const void* q;  // INT8 (or two INT4 per byte) [batch][heads_q][seq_q][head_dim]
  const void* k;  // INT8 (or two INT4 per byte) [batch][heads_kv][seq_kv][head_dim]
  // Full INT8: INT8 V in the V layout of README.md ([batch][heads_kv][head_dim][v_padded_seq],
  // tokens permuted within groups of 32); Strides.row is then the stride between channels.
  // Half INT8: 16-bit float V [batch][heads_kv][seq_kv][head_dim].
  const void* v;
  const float* q_scale;  // [batch][heads_q][seq_q]
  const float* k_scale;  // [batch][heads_kv][seq_kv]
  // Full INT8 only. Per tensor: [batch][heads_kv]. Per channel: [batch][heads_kv][head_dim].
  // Per block: [batch][heads_kv][v_padded_seq / 64][head_dim].
  const float* v_scale;
  void* out;   // 16-bit float [batch][heads_q][seq_q][head_dim]
  float* lse;  // natural-log log-sum-exp [batch][heads_q][seq_q], or null
  Strides q_strides, k_strides, v_strides, out_strides;
  int batch, heads_q, heads_kv, seq_q, seq_kv;
  int v_padded_seq;  // seq_kv rounded up to a multiple of 64 (full INT8)
  float scale_log2;  // softmax scale * log2(e)
};

// V is quantized in blocks of 64 tokens (per-block scales) and padded to a multiple of 64 tokens.
constexpr int kVTokenBlock = 64;

// Shared memory of one attention block: the Q tile, and per pipeline stage a K tile, a V tile,
// the K tile's scales and (per-block V) the V tile's scales. Host and kernel both use this.
INTFA_HOST_DEVICE constexpr int attention_shared_bytes(int head_dim, int block_m, int block_n,
                                                         int stages, int qk_bits, bool full_int8,
                                                         bool per_block_v_scales) {
  return block_m * head_dim * qk_bits / 8 +
         stages * (block_n * head_dim * qk_bits / 8 +                  // K
                   block_n * head_dim * (full_int8 ? 1 : 2) +          // V
                   block_n * 4 +                                       // K scales
                   (per_block_v_scales ? (block_n < kVTokenBlock ? 1 : block_n / kVTokenBlock) *
                                             head_dim * 4
                                       : 0));
}

// Position of token `token` inside its V row: the INT8 P.V MMA (m16n8k32) takes P straight from
// the accumulator registers of Q.K^T, where lane t of a quad holds columns 2t, 2t+1, 8+2t, 9+2t
// of each 16 columns; storing token 16h + 8a + 2t + e at 16h + 4t + 2a + e makes those four
// columns the four consecutive k indices the MMA expects from that lane.
INTFA_HOST_DEVICE constexpr int v_position_of_token(int token) {
  return (token & ~15) | (((token >> 1) & 3) << 2) | (((token >> 3) & 1) << 1) | (token & 1);
}

}  // namespace kernels
}  // namespace intfa
