#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "reference/parallel_heads.hpp"
#include "reference/reference.hpp"

namespace intfa::reference {

double Shape::effective_scale() const {
  return softmax_scale > 0 ? softmax_scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

std::size_t Shape::q_elements() const {
  return static_cast<std::size_t>(batch) * heads_q * seq_q * head_dim;
}

std::size_t Shape::kv_elements() const {
  return static_cast<std::size_t>(batch) * heads_kv * seq_kv * head_dim;
}

void attention_f64(const Shape& shape, const float* q, const float* k, const float* v,
                   double* out, double* lse) {
  const int d = shape.head_dim;
  const double scale = shape.effective_scale();
  const int group = shape.heads_q / shape.heads_kv;
  for_each_row_block_in_parallel(shape.batch, shape.heads_q, shape.seq_q,
                                 [&](int b, int h, int first_row, int end_row) {
    const std::size_t q_head = (static_cast<std::size_t>(b) * shape.heads_q + h) * shape.seq_q;
    const std::size_t kv_head =
        (static_cast<std::size_t>(b) * shape.heads_kv + h / group) * shape.seq_kv;
    std::vector<double> scores(static_cast<std::size_t>(shape.seq_kv));
    std::vector<double> row(static_cast<std::size_t>(d));
    for (int i = first_row; i < end_row; ++i) {
      const float* q_row = q + (q_head + i) * d;
      // Bottom-right aligned causal mask: the last query sees every key.
      int keys = shape.seq_kv;
      if (shape.causal) keys = std::max(0, std::min(shape.seq_kv, i + shape.seq_kv - shape.seq_q + 1));
      double* out_row = out + (q_head + i) * d;
      if (keys == 0) {
        std::fill(out_row, out_row + d, 0.0);
        if (lse) lse[q_head + i] = -std::numeric_limits<double>::infinity();
        continue;
      }
      double maximum = -std::numeric_limits<double>::infinity();
      for (int j = 0; j < keys; ++j) {
        const float* k_row = k + (kv_head + j) * d;
        double dot = 0;
        for (int c = 0; c < d; ++c) dot += static_cast<double>(q_row[c]) * k_row[c];
        scores[static_cast<std::size_t>(j)] = dot * scale;
        maximum = std::max(maximum, scores[static_cast<std::size_t>(j)]);
      }
      std::fill(row.begin(), row.end(), 0.0);
      double sum = 0;
      for (int j = 0; j < keys; ++j) {
        const double weight = std::exp(scores[static_cast<std::size_t>(j)] - maximum);
        sum += weight;
        const float* v_row = v + (kv_head + j) * d;
        for (int c = 0; c < d; ++c) row[static_cast<std::size_t>(c)] += weight * v_row[c];
      }
      for (int c = 0; c < d; ++c) out_row[c] = row[static_cast<std::size_t>(c)] / sum;
      if (lse) lse[q_head + i] = maximum + std::log(sum);
    }
  });
}

namespace {

template <typename Output>
ErrorMetrics compare_impl(const double* reference, const Output* output, std::size_t count) {
  ErrorMetrics metrics;
  double difference_squared = 0, reference_squared = 0, output_squared = 0, dot = 0;
  double absolute_difference = 0, absolute_reference = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double o = static_cast<double>(output[i]);
    const double r = reference[i];
    if (!std::isfinite(o)) {
      ++metrics.non_finite;
      continue;
    }
    const double difference = o - r;
    difference_squared += difference * difference;
    reference_squared += r * r;
    output_squared += o * o;
    dot += o * r;
    absolute_difference += std::fabs(difference);
    absolute_reference += std::fabs(r);
    metrics.max_abs_error = std::max(metrics.max_abs_error, std::fabs(difference));
  }
  if (metrics.non_finite > 0) {
    // A non-finite output fails every tolerance.
    metrics.relative_l2 = std::numeric_limits<double>::infinity();
    metrics.cosine = 0;
    metrics.mean_relative_error = std::numeric_limits<double>::infinity();
    return metrics;
  }
  // With an all-zero reference the relative error is reported as the absolute one.
  metrics.relative_l2 = reference_squared > 0 ? std::sqrt(difference_squared / reference_squared)
                                              : std::sqrt(difference_squared);
  metrics.cosine = (reference_squared > 0 && output_squared > 0)
                       ? dot / std::sqrt(reference_squared * output_squared)
                       : (reference_squared == output_squared ? 1.0 : 0.0);
  metrics.mean_relative_error =
      absolute_reference > 0 ? absolute_difference / absolute_reference : absolute_difference;
  return metrics;
}

}  // namespace

ErrorMetrics compare(const double* reference, const float* output, std::size_t count) {
  return compare_impl(reference, output, count);
}

ErrorMetrics compare(const double* reference, const double* output, std::size_t count) {
  return compare_impl(reference, output, count);
}

std::vector<float> random_values(std::size_t count, Distribution distribution,
                                 std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<float> values(count);
  if (distribution == Distribution::kNormal) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& value : values) value = normal(generator);
  } else {
    std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
    for (float& value : values) value = uniform(generator);
  }
  return values;
}

std::uint64_t fresh_seed() {
  std::random_device device;
  const auto now = static_cast<std::uint64_t>(
      std::chrono::steady_clock::now().time_since_epoch().count());
  std::uint64_t seed = (static_cast<std::uint64_t>(device()) << 32) ^ device() ^ now;
  return seed % (std::uint64_t{1} << 62) + 1;
}

}  // namespace intfa::reference
