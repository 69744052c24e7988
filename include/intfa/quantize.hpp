// Quantization of FP16/BF16 Q, K, V for intfa::attention_forward (JIT kernels, one pass each
// except per-tensor/per-channel V, which first reduces the maximum over the sequence).
#pragma once

#include <cuda.h>

#include "intfa/attention.hpp"
#include "intfa/types.hpp"

namespace intfa {

struct QuantizeOptions {
  int bits = 8;  // 8, or 4 (Q and K only: output kI4x2)
  // K smoothing (for K only): when not null, [batch][heads][head_dim] device floats that receive
  // the per-(batch, head) channel means of the input, which are subtracted from every row before
  // it is quantized. Attention outputs are unchanged by it (softmax ignores a per-query constant)
  // while INT8 covers a narrower range when K has channel offsets; the LSE output becomes that of
  // the smoothed scores (lower by softmax_scale * q . mean per row). 4-byte aligned.
  float* smooth_k_channel_mean = nullptr;
};

// Q or K [batch, heads, seq, head_dim] (kF16/kBF16, 16-byte rows) -> `output` (kI8 or kI4x2, same
// logical shape, any 16-byte-row layout) and `scales` [batch][heads][seq]:
// scale = max|row| / R, q = round_half_even(x / scale) with R = 127 (or 7), x after K smoothing
// when options.smooth_k_channel_mean is set (then two passes over the input, else one).
void quantize_qk(const TensorShape& shape, const TensorView& input, const TensorView& output,
                 float* scales, CUstream stream, const QuantizeOptions& options = {});

// V [batch, heads_kv, seq_kv, head_dim] (kF16/kBF16) -> `output` in the INT8 V layout
// (v_int8_bytes) and `scales` (v_scale_count floats) at `granularity`.
void quantize_v(const TensorShape& shape, const TensorView& input, void* output, float* scales,
                VScaleGranularity granularity, CUstream stream);

// Varlen V (VarlenLayout): `input` is packed, [1, heads_kv, total_kv, head_dim] (its batch stride
// unused), sequence b its rows cu_seqlens_kv[b] .. cu_seqlens_kv[b + 1]; `shape` is
// {batch (sequences), heads_kv, longest sequence, head_dim}. Writes the same INT8 V layout and
// scales as quantize_v of shape (each sequence zero-padded to v_padded_seq(shape.seq)), so
// sequence b quantizes exactly as quantize_v of that sequence alone would.
void quantize_v_varlen(const TensorShape& shape, const TensorView& input, int total_kv,
                       const int* cu_seqlens_kv, void* output, float* scales,
                       VScaleGranularity granularity, CUstream stream);

}  // namespace intfa
