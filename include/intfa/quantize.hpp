// Quantization of FP16/BF16 Q, K, V for intfa::attention_forward (JIT kernels, one pass each
// except per-tensor/per-channel V, which first reduces the maximum over the sequence).
#pragma once

#include <cuda.h>

#include "intfa/attention.hpp"
#include "intfa/types.hpp"

namespace intfa {

struct QuantizeOptions {
  int bits = 8;  // 8, or 4 (Q and K only: output kI4x2)
};

// Q or K [batch, heads, seq, head_dim] (kF16/kBF16, 16-byte rows) -> `output` (kI8 or kI4x2, same
// logical shape, any 16-byte-row layout) and `scales` [batch][heads][seq]:
// scale = max|row| / R, q = round_half_even(x / scale) with R = 127 (or 7).
void quantize_qk(const TensorShape& shape, const TensorView& input, const TensorView& output,
                 float* scales, CUstream stream, const QuantizeOptions& options = {});

// V [batch, heads_kv, seq_kv, head_dim] (kF16/kBF16) -> `output` in the INT8 V layout
// (v_int8_bytes) and `scales` (v_scale_count floats) at `granularity`.
void quantize_v(const TensorShape& shape, const TensorView& input, void* output, float* scales,
                VScaleGranularity granularity, CUstream stream);

}  // namespace intfa
