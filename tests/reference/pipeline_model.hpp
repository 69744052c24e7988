// intfa::attention_forward_16bit (intfa.attention) on the CPU: the quantize kernels' steps on the
// 16-bit inputs (K smoothing with the sampled channel means, the rotation, Q's LSE term), then the
// attention model, all as the kernels do them (quantized_model.hpp). The accuracy tables and the
// CPU tests that pin the defaults' accuracy run this.
#pragma once

#include <vector>

#include "intfa/attention.hpp"
#include "reference/quantized_model.hpp"

namespace intfa::reference {

struct PipelineOptions {
  // variant, the numerics (all four: V's and K's granularity say how V and K are quantized),
  // block_n (model.q_dot_k_mean is set here)
  ModelOptions model;
  int qk_bits = 8;
  bool smooth_k = true;     // K minus its (sampled) channel means, with the LSE term
  // Q and K rotated before quantizing: no head, every head, or (kAuto) the heads the model's
  // rotation_decisions choose, as the channel-mean pass would.
  QKRotation rotate = QKRotation::kOff;
  bool exact_mean = false;  // smoothing with the mean of all keys, not the kernel's sample
  // Q, K as two INT8 terms (QuantizedRows::low_terms): a study of more precise Q.K, no kernel.
  bool q_low_terms = false;
  bool k_low_terms = false;

  // What attention_forward_16bit does for a `variant` call under `options` (numerics, smooth_k,
  // rotate_qk) with the attention kernel's key tile of `block_n` keys.
  static PipelineOptions of(Variant variant, const AttentionOptions& options, int block_n);
};

// q [batch][heads_q][seq_q][head_dim], k and v [batch][heads_kv][seq_kv][head_dim] (16-bit values
// as floats) -> out [batch][heads_q][seq_q][head_dim] and, when not null, the natural-log LSE.
void attention_pipeline_model(const Shape& shape, const float* q, const float* k, const float* v,
                              const PipelineOptions& options, double* out, double* lse = nullptr);

}  // namespace intfa::reference
