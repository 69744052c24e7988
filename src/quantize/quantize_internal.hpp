// The quantize entry points for an input narrower than the kernel's head dim: `shape` at the
// kernel's head dim (64, 128 or 256), `input` with `input_channels` channels (a multiple of 8, at
// most shape.head_dim), read as if zeros followed them; the outputs are the kernel's width. What
// attention_forward_16bit uses for a head dim between the kernels' (templates/attention/README.md,
// "Head dims between the kernels'"); intfa::quantize_qk and quantize_v are these with all
// channels. Each validates as the public function does, the input against input_channels.
#pragma once

#include <cuda.h>

#include "intfa/quantize.hpp"

namespace intfa::quantize {

void quantize_qk_channels(const TensorShape& shape, int input_channels, const TensorView& input,
                          const TensorView& output, float* scales, CUstream stream,
                          const QuantizeOptions& options);

void quantize_v_channels(const TensorShape& shape, int input_channels, const TensorView& input,
                         void* output, float* scales, VScaleGranularity granularity,
                         CUstream stream);

void quantize_v_varlen_channels(const TensorShape& shape, int input_channels,
                                const TensorView& input, int total_kv, const int* cu_seqlens_kv,
                                void* output, float* scales, VScaleGranularity granularity,
                                CUstream stream);

}  // namespace intfa::quantize
