// The quantized algorithm of templates/attention/README.md, step by step.
#include <cmath>
#include <limits>

#include "reference/half.hpp"
#include "reference/parallel_heads.hpp"
#include "reference/quantized_model.hpp"

namespace intfa::reference {
namespace {

constexpr double kNegativeInfinity = -std::numeric_limits<double>::infinity();

// scale = amax / R, inv = 1 / scale (0 for an all-zero group), q = clamp(round_even(x * inv)):
// FP32 throughout, as the quantize kernels.
struct Quantizer {
  float scale;
  float inverse;
  float range;

  Quantizer(float amax, float range_value)
      : scale(amax / range_value),
        inverse(amax > 0.0f ? 1.0f / (amax / range_value) : 0.0f),
        range(range_value) {}

  std::int8_t operator()(float x) const {
    const float product = x * inverse;
    const float rounded = std::nearbyint(product);
    return static_cast<std::int8_t>(std::max(-range, std::min(range, rounded)));
  }
};

int allowed_keys(const Shape& shape, int row) {
  if (!shape.causal) return shape.seq_kv;
  return std::max(0, std::min(shape.seq_kv, row + shape.seq_kv - shape.seq_q + 1));
}

}  // namespace

QuantizedRows quantize_rows(const float* x, int rows, int head_dim, int bits,
                            const float* channel_mean) {
  QuantizedRows result;
  result.rows = rows;
  result.head_dim = head_dim;
  result.bits = bits;
  result.values.resize(static_cast<std::size_t>(rows) * head_dim);
  result.scales.resize(static_cast<std::size_t>(rows));
  const float range = bits == 8 ? 127.0f : 7.0f;
  std::vector<float> row_values(static_cast<std::size_t>(head_dim));
  for (int row = 0; row < rows; ++row) {
    const float* input = x + static_cast<std::size_t>(row) * head_dim;
    float amax = 0.0f;
    for (int c = 0; c < head_dim; ++c) {
      row_values[static_cast<std::size_t>(c)] =
          channel_mean ? input[c] - channel_mean[c] : input[c];
      amax = std::max(amax, std::fabs(row_values[static_cast<std::size_t>(c)]));
    }
    const Quantizer quantize(amax, range);
    result.scales[static_cast<std::size_t>(row)] = quantize.scale;
    for (int c = 0; c < head_dim; ++c) {
      result.values[static_cast<std::size_t>(row) * head_dim + c] =
          quantize(row_values[static_cast<std::size_t>(c)]);
    }
  }
  return result;
}

QuantizedV quantize_v(const float* v, int batch, int heads, int seq, int head_dim,
                      VGranularity granularity) {
  QuantizedV result;
  result.granularity = granularity;
  result.batch = batch;
  result.heads = heads;
  result.seq = seq;
  result.head_dim = head_dim;
  result.values.resize(static_cast<std::size_t>(batch) * heads * seq * head_dim);
  const int blocks = (seq + 63) / 64;
  for (int bh = 0; bh < batch * heads; ++bh) {
    const std::size_t base = static_cast<std::size_t>(bh) * seq * head_dim;
    auto at = [&](int token, int c) { return base + static_cast<std::size_t>(token) * head_dim + c; };
    // The group of (token, channel) each scale covers, as [first_token, end_token) x channels.
    auto quantize_group = [&](int first, int end, int first_channel, int end_channel) {
      float amax = 0.0f;
      for (int token = first; token < end; ++token)
        for (int c = first_channel; c < end_channel; ++c) amax = std::max(amax, std::fabs(v[at(token, c)]));
      const Quantizer quantize(amax, 127.0f);
      for (int token = first; token < end; ++token)
        for (int c = first_channel; c < end_channel; ++c) result.values[at(token, c)] = quantize(v[at(token, c)]);
      result.scales.push_back(quantize.scale);
    };
    switch (granularity) {
      case VGranularity::kPerTensor: quantize_group(0, seq, 0, head_dim); break;
      case VGranularity::kPerChannel:
        for (int c = 0; c < head_dim; ++c) quantize_group(0, seq, c, c + 1);
        break;
      case VGranularity::kPerBlock:
        for (int block = 0; block < blocks; ++block)
          for (int c = 0; c < head_dim; ++c) {
            quantize_group(block * 64, std::min(seq, (block + 1) * 64), c, c + 1);
          }
        break;
    }
  }
  return result;
}

void attention_quantized_model(const Shape& shape, const QuantizedRows& q, const QuantizedRows& k,
                               const QuantizedV* v_quantized, const float* v_half,
                               const ModelOptions& options, double* out, double* lse) {
  const int d = shape.head_dim;
  const int group = shape.heads_q / shape.heads_kv;
  const bool full = options.variant == Variant::kFullInt8;
  const double range = options.p_encoding == PEncoding::kUnsigned255 ? 255.0 : 127.0;
  const float scale_log2 = static_cast<float>(shape.effective_scale() * 1.4426950408889634);
  const VGranularity granularity = full ? v_quantized->granularity : VGranularity::kPerTensor;
  const int v_blocks = (shape.seq_kv + 63) / 64;

  for_each_row_block_in_parallel(shape.batch, shape.heads_q, shape.seq_q,
                                 [&](int b, int h, int first_row, int end_row) {
    const int h_kv = h / group;
    const std::size_t q_head = (static_cast<std::size_t>(b) * shape.heads_q + h) * shape.seq_q;
    const std::size_t kv_head = (static_cast<std::size_t>(b) * shape.heads_kv + h_kv) * shape.seq_kv;
    const std::size_t v_scale_head = static_cast<std::size_t>(b) * shape.heads_kv + h_kv;
    auto v_value = [&](int token, int c) -> double {
      const std::size_t index = (kv_head + token) * d + c;
      return full ? v_quantized->values[index] : v_half[index];
    };
    std::vector<double> o(static_cast<std::size_t>(d)), x(static_cast<std::size_t>(options.block_n));
    std::vector<double> p(static_cast<std::size_t>(options.block_n));
    for (int i = first_row; i < end_row; ++i) {
      const std::int8_t* q_row = &q.values[(q_head + i) * d];
      // c_i stays positive (as in the kernel) so that a masked -inf never meets a zero.
      const float c_i = std::max(q.scales[q_head + i] * scale_log2, 1e-30f);
      const int keys = allowed_keys(shape, i);
      double m = kNegativeInfinity, l = 0;
      std::fill(o.begin(), o.end(), 0.0);
      for (int first = 0; first < keys; first += options.block_n) {
        const int end = std::min(keys, first + options.block_n);
        double tile_max = kNegativeInfinity;
        for (int j = first; j < end; ++j) {
          const std::int8_t* k_row = &k.values[(kv_head + j) * d];
          long long dot = 0;
          for (int c = 0; c < d; ++c) dot += static_cast<long long>(q_row[c]) * k_row[c];
          const float y = static_cast<float>(dot) * k.scales[kv_head + j];
          x[static_cast<std::size_t>(j - first)] = static_cast<float>(y * c_i);
          tile_max = std::max(tile_max, x[static_cast<std::size_t>(j - first)]);
        }
        const double m_new = std::max(m, tile_max);
        const double alpha = m == kNegativeInfinity ? 0.0 : std::exp2(m - m_new);
        if (full) {
          const double reference =
              options.p_scale == PScaleReference::kRunningMax ? m_new : tile_max;
          const double beta = std::exp2(reference - m_new);
          double row_sum = 0;
          for (int j = first; j < end; ++j) {
            p[static_cast<std::size_t>(j - first)] =
                std::nearbyint(range * std::exp2(x[static_cast<std::size_t>(j - first)] - reference));
            row_sum += p[static_cast<std::size_t>(j - first)];
          }
          l = l * alpha + beta * row_sum;
          for (int c = 0; c < d; ++c) {
            double tile_sum = 0;
            if (granularity == VGranularity::kPerBlock) {
              for (int block_start = first - first % 64; block_start < end; block_start += 64) {
                double block_sum = 0;
                for (int j = std::max(first, block_start); j < std::min(end, block_start + 64); ++j) {
                  block_sum += p[static_cast<std::size_t>(j - first)] * v_value(j, c);
                }
                const std::size_t scale_index =
                    (v_scale_head * v_blocks + static_cast<std::size_t>(block_start / 64)) * d + c;
                tile_sum += v_quantized->scales[scale_index] * block_sum;
              }
            } else {
              for (int j = first; j < end; ++j) tile_sum += p[static_cast<std::size_t>(j - first)] * v_value(j, c);
            }
            o[static_cast<std::size_t>(c)] = o[static_cast<std::size_t>(c)] * alpha + beta * tile_sum;
          }
        } else {
          double row_sum = 0;
          for (int j = first; j < end; ++j) {
            const double e = std::exp2(x[static_cast<std::size_t>(j - first)] - m_new);
            row_sum += e;
            p[static_cast<std::size_t>(j - first)] =
                round_to_16bit(static_cast<float>(e), options.v_is_bf16);
          }
          l = l * alpha + row_sum;
          for (int c = 0; c < d; ++c) {
            double tile_sum = 0;
            for (int j = first; j < end; ++j) tile_sum += p[static_cast<std::size_t>(j - first)] * v_value(j, c);
            o[static_cast<std::size_t>(c)] = o[static_cast<std::size_t>(c)] * alpha + tile_sum;
          }
        }
        m = m_new;
      }
      double* out_row = out + (q_head + i) * d;
      if (l <= 0) {
        std::fill(out_row, out_row + d, 0.0);
        if (lse) lse[q_head + i] = kNegativeInfinity;
        continue;
      }
      for (int c = 0; c < d; ++c) {
        double value = o[static_cast<std::size_t>(c)] / l;
        if (full && granularity == VGranularity::kPerTensor) {
          value *= v_quantized->scales[v_scale_head];
        } else if (full && granularity == VGranularity::kPerChannel) {
          value *= v_quantized->scales[v_scale_head * d + c];
        }
        out_row[c] = value;
      }
      if (lse) lse[q_head + i] = (m + std::log2(full ? l / range : l)) * std::log(2.0);
    }
  });
}

}  // namespace intfa::reference
