// Parameters of the attention kernels, shared by host and device (plain data, passed by value).
// The numerics and every layout are specified in templates/attention/README.md.
#pragma once

#include "common/kernel_enums.h"
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
  // Per token [batch][heads_kv][seq_kv]; per block of kKTokenBlock keys (KScaleGranularity)
  // [batch][heads_kv][k_scale_blocks(seq_kv)], dense batches only.
  const float* k_scale;
  // Full INT8 only. Per tensor: [batch][heads_kv]. Per channel: [batch][heads_kv][head_dim].
  // Per block: [batch][heads_kv][v_padded_seq / 64][head_dim].
  const float* v_scale;
  void* out;   // 16-bit float [batch][heads_q][seq_q][head_dim]
  float* lse;  // natural-log log-sum-exp [batch][heads_q][seq_q], or null
  // K smoothing's LSE term: q . (K's channel mean) per query row, in the layout of q_scale
  // (quantize_rows with DotKMean writes it), added as scale_log2 * value to the log2 LSE so that
  // it is the LSE of the original scores; null when K was not smoothed (README.md).
  const float* q_dot_k_mean;
  Strides q_strides, k_strides, v_strides, out_strides;
  int batch, heads_q, heads_kv, seq_q, seq_kv;
  int v_padded_seq;  // seq_kv rounded up to a multiple of 64 (full INT8)
  // The caller's head dim: the channels of `out` and of half INT8's 16-bit V. The kernel's own
  // (its HeadDim) or, where attention_forward_16bit serves a head dim between the kernels' (a
  // multiple of 8), fewer: Q and K then arrive zero-extended to HeadDim, V's channels past it
  // read as zero and the output's are not stored (README.md, "Head dims between the kernels'").
  int out_head_dim;
  float scale_log2;  // softmax scale * log2(e)
  // Varlen kernels only: sequence b is rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of the packed
  // Q, out (batch strides 0) and LSE, and rows cu_seqlens_kv[b] .. of the packed K and 16-bit V;
  // the scales and LSE are [heads][total rows]; seq_q and seq_kv are the longest sequences. INT8 V
  // keeps its per-batch layout (quantize_v pads each sequence to v_padded_seq).
  const int* cu_seqlens_q;
  const int* cu_seqlens_kv;
  int total_q, total_kv;
};

// The rows of one (batch, head) pair: its lengths, the first packed row of the sequence (0 when
// dense: the batch strides place it) and where its rows start in the scales and LSE.
struct SequenceExtent {
  int seq_q, seq_kv;
  i64 q_row0, kv_row0;
  i64 q_scale0, k_scale0;
};

template <bool Varlen, bool PerBlockK = false>
INTFA_HOST_DEVICE inline SequenceExtent sequence_extent(const AttentionParams& p, int batch,
                                                        int head_q, int head_kv) {
  SequenceExtent extent;
  if (Varlen) {
    const int q0 = p.cu_seqlens_q[batch];
    const int kv0 = p.cu_seqlens_kv[batch];
    extent.seq_q = p.cu_seqlens_q[batch + 1] - q0;
    extent.seq_kv = p.cu_seqlens_kv[batch + 1] - kv0;
    extent.q_row0 = q0;
    extent.kv_row0 = kv0;
    extent.q_scale0 = static_cast<i64>(head_q) * p.total_q + q0;
    extent.k_scale0 = static_cast<i64>(head_kv) * p.total_kv + kv0;
  } else {
    extent.seq_q = p.seq_q;
    extent.seq_kv = p.seq_kv;
    extent.q_row0 = 0;
    extent.kv_row0 = 0;
    extent.q_scale0 = (static_cast<i64>(batch) * p.heads_q + head_q) * p.seq_q;
    extent.k_scale0 = (static_cast<i64>(batch) * p.heads_kv + head_kv) *
                      (PerBlockK ? k_scale_blocks(p.seq_kv) : p.seq_kv);
  }
  return extent;
}

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
