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

// K's and V's passes of attention_forward_16bit (both at the kernel's head dim, their inputs with
// input_channels channels). K's options as quantize_qk_channels' (K: no q_dot_k_mean); V packed
// when cu_seqlens_kv is set (then v_input is [1, heads, total_kv, channels], as
// quantize_v_varlen_channels'). Each is checked as by its own function.
struct KAndVPasses {
  TensorShape k_shape;
  TensorView k_input, k_output;
  float* k_scales = nullptr;
  QuantizeOptions k_options;
  TensorShape v_shape;
  TensorView v_input;
  int total_kv = 0;
  const int* cu_seqlens_kv = nullptr;
  void* v_output = nullptr;
  float* v_scales = nullptr;
  VScaleGranularity v_granularity = VScaleGranularity::kPerChannel;
};

// The same kernels' work as quantize_qk_channels(K) then quantize_v_channels (or its varlen form),
// bit for bit, in fewer launches where V has a max pass and K is per token. On sm_90a, where V's
// (batch, head) fits the shared memory of a cluster (quantize::k_v_slices): K's channel means when
// smoothing, then K's rows and all of V in one launch that reads V once (quantize_k_v). Else K's
// channel means (their launch also zeroes V's scales; without smoothing a memset does), K's rows
// and V's max pass in one launch (quantize_k_v_scale), then V's quantize pass: three driver calls
// where the two functions make five (four without smoothing). Otherwise the two functions'
// launches.
// Returns whether K and V went through quantize_k_v (for tests).
bool quantize_k_and_v_channels(const KAndVPasses& passes, int input_channels, CUstream stream);

}  // namespace intfa::quantize
