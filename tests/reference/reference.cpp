// Float64 attention of the original inputs, the error metrics, and the random inputs of the tests.
#include "reference/reference.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include "intfa/errors.hpp"
#include "reference/parallel_heads.hpp"

namespace intfa::reference {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

void require_positive(const char* field, int value) {
  if (value <= 0) {
    throw InvalidArgument(std::string("shape.") + field, std::to_string(value), "expected > 0");
  }
}

// q . k in float64 (the products of floats are exact in double); four independent partial sums
// let the CPU overlap the additions.
double dot_f64(const double* q, const double* k, int head_dim) {
  double partial[4] = {0, 0, 0, 0};
  int c = 0;
  for (; c + 4 <= head_dim; c += 4) {
    for (int lane = 0; lane < 4; ++lane) partial[lane] += q[c + lane] * k[c + lane];
  }
  for (; c < head_dim; ++c) partial[0] += q[c] * k[c];
  return (partial[0] + partial[1]) + (partial[2] + partial[3]);
}

// A block of consecutive query rows of one (batch, head), computed together: every K and V row is
// read once per block instead of once per query row, which matters at 16k keys where K and V no
// longer fit in cache. Rows are [first_row, first_row + rows).
class RowBlock {
 public:
  RowBlock(const Shape& shape, int max_rows)
      : shape_(shape),
        head_dim_(static_cast<std::size_t>(shape.head_dim)),
        q_(static_cast<std::size_t>(max_rows) * head_dim_),
        key_(head_dim_),
        weights_(static_cast<std::size_t>(max_rows) * shape.seq_kv),
        accumulators_(static_cast<std::size_t>(max_rows) * head_dim_),
        keys_(static_cast<std::size_t>(max_rows)) {}

  // q_rows, out_rows, lse_rows (may be null) point at the block's first row; k_head and v_head
  // at key 0 of the block's KV head.
  void compute(const float* q_rows, const float* k_head, const float* v_head, int first_row,
               int rows, double* out_rows, double* lse_rows) {
    rows_ = static_cast<std::size_t>(rows);
    for (std::size_t r = 0; r < rows_; ++r)
      keys_[r] = shape_.allowed_keys(first_row + static_cast<int>(r));
    std::copy(q_rows, q_rows + rows_ * head_dim_, q_.begin());
    compute_scores(k_head);
    const std::vector<double> sums = scores_to_weights(lse_rows);
    accumulate_values(v_head);
    for (std::size_t r = 0; r < rows_; ++r) {
      // A row with no allowed key (causal, seq_q > seq_kv) outputs zeros.
      for (std::size_t c = 0; c < head_dim_; ++c) {
        out_rows[r * head_dim_ + c] =
            keys_[r] > 0 ? accumulators_[r * head_dim_ + c] / sums[r] : 0.0;
      }
    }
  }

 private:
  double* weights_of(std::size_t row) { return weights_.data() + row * shape_.seq_kv; }

  // weights_[r][j] = (q_r . k_j) * scale for the allowed keys of each row.
  void compute_scores(const float* k_head) {
    const double scale = shape_.effective_scale();
    const int last_key =
        *std::max_element(keys_.begin(), keys_.begin() + static_cast<std::ptrdiff_t>(rows_));
    for (int j = 0; j < last_key; ++j) {
      const float* k_row = k_head + static_cast<std::size_t>(j) * head_dim_;
      std::copy(k_row, k_row + head_dim_, key_.begin());
      for (std::size_t r = 0; r < rows_; ++r) {
        if (j >= keys_[r]) continue;
        weights_of(r)[j] = dot_f64(&q_[r * head_dim_], key_.data(), shape_.head_dim) * scale;
      }
    }
  }

  // Numerically stable softmax numerators exp(s - max) in place; returns their sums and writes
  // lse = max + log(sum), -inf for an empty sum.
  std::vector<double> scores_to_weights(double* lse_rows) {
    std::vector<double> sums(rows_, 0.0);
    for (std::size_t r = 0; r < rows_; ++r) {
      if (keys_[r] == 0) {
        if (lse_rows != nullptr) lse_rows[r] = -kInfinity;
        continue;
      }
      double* weights = weights_of(r);
      const double row_max = *std::max_element(weights, weights + keys_[r]);
      for (int j = 0; j < keys_[r]; ++j) {
        weights[j] = std::exp(weights[j] - row_max);
        sums[r] += weights[j];
      }
      if (lse_rows != nullptr) lse_rows[r] = row_max + std::log(sums[r]);
    }
    return sums;
  }

  // accumulators_[r][c] = sum_j weights_[r][j] * v[j][c].
  void accumulate_values(const float* v_head) {
    std::fill(accumulators_.begin(),
              accumulators_.begin() + static_cast<std::ptrdiff_t>(rows_ * head_dim_), 0.0);
    const int last_key =
        *std::max_element(keys_.begin(), keys_.begin() + static_cast<std::ptrdiff_t>(rows_));
    for (int j = 0; j < last_key; ++j) {
      const float* v_row = v_head + static_cast<std::size_t>(j) * head_dim_;
      std::copy(v_row, v_row + head_dim_, key_.begin());
      for (std::size_t r = 0; r < rows_; ++r) {
        if (j >= keys_[r]) continue;
        const double weight = weights_of(r)[j];
        double* accumulator = &accumulators_[r * head_dim_];
        for (std::size_t c = 0; c < head_dim_; ++c) accumulator[c] += weight * key_[c];
      }
    }
  }

  const Shape& shape_;
  std::size_t head_dim_;
  std::vector<double> q_;             // [rows][head_dim]
  std::vector<double> key_;           // one K or V row in double
  std::vector<double> weights_;       // [rows][seq_kv]: scores, then exp(score - max)
  std::vector<double> accumulators_;  // [rows][head_dim]
  std::vector<int> keys_;             // allowed keys of each row
  std::size_t rows_ = 0;
};

template <typename Output>
ErrorMetrics compare_values(const double* reference, const Output* output, std::size_t count) {
  ErrorMetrics metrics;
  double difference_squared = 0, reference_squared = 0, output_squared = 0, inner_product = 0;
  double difference_absolute = 0, reference_absolute = 0;
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
    inner_product += o * r;
    difference_absolute += std::fabs(difference);
    reference_absolute += std::fabs(r);
    metrics.max_abs_error = std::max(metrics.max_abs_error, std::fabs(difference));
  }
  if (metrics.non_finite > 0) {
    // Whatever the finite elements say, a NaN or inf in the output must fail every tolerance.
    metrics.relative_l2 = kInfinity;
    metrics.cosine = 0;
    metrics.mean_relative_error = kInfinity;
    return metrics;
  }
  // An all-zero reference has no scale to be relative to: the errors are then absolute, so that
  // an all-zero output still scores 0 and anything else scores its own size.
  metrics.relative_l2 = reference_squared > 0 ? std::sqrt(difference_squared / reference_squared)
                                              : std::sqrt(difference_squared);
  metrics.mean_relative_error =
      reference_absolute > 0
          ? difference_absolute / reference_absolute
          : difference_absolute / static_cast<double>(std::max<std::size_t>(count, 1));
  if (reference_squared > 0 && output_squared > 0) {
    metrics.cosine = inner_product / std::sqrt(reference_squared * output_squared);
  } else {
    // Two zero vectors point the same way; a zero against a non-zero one does not.
    metrics.cosine = reference_squared == output_squared ? 1.0 : 0.0;
  }
  return metrics;
}

}  // namespace

double Shape::effective_scale() const {
  return softmax_scale > 0 ? softmax_scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

std::size_t Shape::q_elements() const {
  return static_cast<std::size_t>(batch) * heads_q * seq_q * head_dim;
}

std::size_t Shape::kv_elements() const {
  return static_cast<std::size_t>(batch) * heads_kv * seq_kv * head_dim;
}

int Shape::allowed_keys(int query_row) const {
  if (!causal) return seq_kv;
  // Bottom-right aligned: the last query row (seq_q - 1) sees every key.
  const long long last_allowed_key = static_cast<long long>(query_row) + seq_kv - seq_q;
  return static_cast<int>(std::clamp<long long>(last_allowed_key + 1, 0, seq_kv));
}

int Shape::kv_head(int query_head) const {
  return query_head / (heads_q / heads_kv);
}

void Shape::validate() const {
  require_positive("batch", batch);
  require_positive("heads_q", heads_q);
  require_positive("heads_kv", heads_kv);
  require_positive("seq_q", seq_q);
  require_positive("seq_kv", seq_kv);
  require_positive("head_dim", head_dim);
  if (heads_q % heads_kv != 0) {
    throw InvalidArgument("shape.heads_kv", std::to_string(heads_kv),
                          "expected a divisor of heads_q = " + std::to_string(heads_q));
  }
  if (softmax_scale < 0 || !std::isfinite(softmax_scale)) {
    throw InvalidArgument("shape.softmax_scale", std::to_string(softmax_scale),
                          "expected 0 (1 / sqrt(head_dim)) or a positive scale");
  }
}

void attention_f64(const Shape& shape, const float* q, const float* k, const float* v, double* out,
                   double* lse) {
  shape.validate();
  const std::size_t head_dim = static_cast<std::size_t>(shape.head_dim);
  for_each_row_block_in_parallel(
      shape.batch, shape.heads_q, shape.seq_q, [&](int b, int h, int first_row, int end_row) {
        const std::size_t q_head = (static_cast<std::size_t>(b) * shape.heads_q + h) * shape.seq_q;
        const std::size_t kv_head =
            (static_cast<std::size_t>(b) * shape.heads_kv + shape.kv_head(h)) * shape.seq_kv;
        const std::size_t first = q_head + static_cast<std::size_t>(first_row);
        RowBlock block(shape, end_row - first_row);
        block.compute(q + first * head_dim, k + kv_head * head_dim, v + kv_head * head_dim,
                      first_row, end_row - first_row, out + first * head_dim,
                      lse != nullptr ? lse + first : nullptr);
      });
}

ErrorMetrics compare(const double* reference, const float* output, std::size_t count) {
  return compare_values(reference, output, count);
}

ErrorMetrics compare(const double* reference, const double* output, std::size_t count) {
  return compare_values(reference, output, count);
}

Shape make_shape(int batch, int heads_q, int heads_kv, int seq_q, int seq_kv, int head_dim,
                 bool causal, double softmax_scale) {
  Shape shape;
  shape.batch = batch;
  shape.heads_q = heads_q;
  shape.heads_kv = heads_kv;
  shape.seq_q = seq_q;
  shape.seq_kv = seq_kv;
  shape.head_dim = head_dim;
  shape.causal = causal;
  shape.softmax_scale = softmax_scale;
  return shape;
}

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void fill_random_chunk(float* values, std::size_t count, Distribution distribution,
                       std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  if (distribution == Distribution::kNormal) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t i = 0; i < count; ++i) values[i] = normal(generator);
  } else {
    std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
    for (std::size_t i = 0; i < count; ++i) values[i] = uniform(generator);
  }
}

}  // namespace

// Fixed-size chunks, each with its own generator seeded from (seed, chunk): the values depend on
// the seed alone (not on the thread count), and large inputs are drawn on every core (one core
// took ~20 s per B=4 H=32 N=16k problem of the benchmarks).
std::vector<float> random_values(std::size_t count, Distribution distribution, std::uint64_t seed) {
  constexpr std::size_t kChunk = std::size_t{1} << 18;
  std::vector<float> values(count);
  for_each_chunk_in_parallel(count, kChunk, [&](std::size_t chunk, std::size_t begin,
                                                std::size_t end) {
    fill_random_chunk(values.data() + begin, end - begin, distribution,
                      splitmix64(seed ^ splitmix64(chunk)));
  });
  return values;
}

std::uint64_t fresh_seed() {
  if (const char* replay = std::getenv("INTFA_TEST_SEED"); replay != nullptr && *replay != '\0') {
    const std::string text(replay);
    const bool digits = std::all_of(text.begin(), text.end(),
                                    [](char c) { return c >= '0' && c <= '9'; });
    try {
      if (digits) return std::stoull(text);
    } catch (const std::out_of_range&) {
    }
    throw InvalidArgument("INTFA_TEST_SEED", text,
                          "expected a seed a test printed (a decimal integer below 2^64)");
  }
  std::random_device device;
  const auto now =
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  const std::uint64_t entropy = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  // splitmix64's finaliser spreads the clock's low-order changes over every bit.
  std::uint64_t seed = entropy ^ now;
  seed = (seed ^ (seed >> 30)) * 0xBF58476D1CE4E5B9ull;
  seed = (seed ^ (seed >> 27)) * 0x94D049BB133111EBull;
  seed ^= seed >> 31;
  // Non-zero and below 2^62, so that it prints and parses back as an ordinary integer.
  return seed % (std::uint64_t{1} << 62) + 1;
}

}  // namespace intfa::reference
