#include "reference/pipeline_model.hpp"

#include "intfa/errors.hpp"

namespace intfa::reference {

PipelineOptions PipelineOptions::of(Variant variant, const AttentionOptions& options, int block_n) {
  PipelineOptions pipeline;
  pipeline.model.variant = variant;
  pipeline.model.numerics = options.numerics;
  pipeline.model.block_n = block_n;
  pipeline.smooth_k = options.smooth_k;
  pipeline.rotate = options.rotate_qk;
  return pipeline;
}

void attention_pipeline_model(const Shape& shape, const float* q, const float* k, const float* v,
                              const PipelineOptions& options, double* out, double* lse) {
  shape.validate();
  const bool k_per_block = options.model.numerics.k_granularity == KScaleGranularity::kPerBlock;
  if (options.k_low_terms && k_per_block) {
    throw InvalidArgument("options.k_low_terms", "true", "expected K per token (not per block)");
  }
  const int q_rows = shape.batch * shape.heads_q * shape.seq_q;
  const int kv_heads = shape.batch * shape.heads_kv;
  // K first: Q's quantize reads K's channel means (quantize_qk of K, then of Q).
  std::vector<float> means;
  if (options.smooth_k) {
    const std::vector<double> exact =
        options.exact_mean ? channel_means(k, kv_heads, shape.seq_kv, shape.head_dim)
                           : sampled_channel_means(k, kv_heads, shape.seq_kv, shape.head_dim);
    means.assign(exact.begin(), exact.end());
  }
  const float* k_means = options.smooth_k ? means.data() : nullptr;
  // The rows rotated: every row or none, or the heads automatic rotation chooses.
  RowRotation k_rotation(options.rotate == QKRotation::kOn), q_rotation = k_rotation;
  if (options.rotate == QKRotation::kAuto) {
    const std::vector<int> decisions =
        rotation_decisions(k, kv_heads, shape.seq_kv, shape.head_dim, shape.head_dim, k_means);
    k_rotation = RowRotation(decisions, shape.seq_kv);
    q_rotation = RowRotation(decisions, shape.seq_q, shape.heads_q / shape.heads_kv);
  }
  QuantizedRows k8;
  if (options.smooth_k) {
    k8 = k_per_block
             ? quantize_row_blocks(k, kv_heads, shape.seq_kv, shape.head_dim, k_means, k_rotation)
             : quantize_rows_smoothed(k, kv_heads, shape.seq_kv, shape.head_dim, options.qk_bits,
                                      k_means, k_rotation, options.k_low_terms);
  } else if (k_per_block) {
    k8 = quantize_row_blocks(k, kv_heads, shape.seq_kv, shape.head_dim, nullptr, k_rotation);
  } else {
    k8 = quantize_rows(k, kv_heads * shape.seq_kv, shape.head_dim, options.qk_bits, nullptr,
                       k_rotation, options.k_low_terms);
  }
  const QuantizedRows q8 = quantize_rows(q, q_rows, shape.head_dim, options.qk_bits, nullptr,
                                         q_rotation, options.q_low_terms);
  ModelOptions model = options.model;
  std::vector<float> lse_terms;
  if (options.smooth_k) {
    const std::vector<double> dots = q_dot_k_means(q, shape.batch, shape.heads_q, shape.heads_kv,
                                                   shape.seq_q, shape.head_dim, means.data());
    lse_terms.assign(dots.begin(), dots.end());  // the kernel writes FP32
    model.q_dot_k_mean = lse_terms.data();
  }
  if (model.variant == Variant::kFullInt8) {
    const QuantizedV v8 = quantize_v(v, shape.batch, shape.heads_kv, shape.seq_kv, shape.head_dim,
                                     options.model.numerics.v_granularity);
    attention_quantized_model(shape, q8, k8, &v8, nullptr, model, out, lse);
  } else {
    attention_quantized_model(shape, q8, k8, nullptr, v, model, out, lse);
  }
}

}  // namespace intfa::reference
