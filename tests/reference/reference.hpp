// Float64 attention of the original (unquantized) inputs, and the error metrics every accuracy
// claim of intfa uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace intfa::reference {

// Logical shape of one attention problem. Tensors here are dense [batch][heads][seq][head_dim].
struct Shape {
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int seq_q = 1;
  int seq_kv = 1;
  int head_dim = 64;
  bool causal = false;         // bottom-right aligned, see templates/attention/README.md
  double softmax_scale = 0.0;  // 0 means 1 / sqrt(head_dim)

  double effective_scale() const;
  std::size_t q_elements() const;   // batch * heads_q * seq_q * head_dim
  std::size_t kv_elements() const;  // batch * heads_kv * seq_kv * head_dim

  // Query row `query_row` attends to keys [0, allowed_keys): all of them, or with causal
  // masking those with key <= query_row + seq_kv - seq_q (0 keys for the first rows when
  // seq_q > seq_kv).
  int allowed_keys(int query_row) const;
  // GQA: consecutive groups of heads_q / heads_kv query heads share one KV head.
  int kv_head(int query_head) const;
  // Throws intfa::InvalidArgument unless every size is positive and heads_kv divides heads_q.
  void validate() const;
};

Shape make_shape(int batch, int heads_q, int heads_kv, int seq_q, int seq_kv, int head_dim,
                 bool causal, double softmax_scale = 0.0);

// out: [batch][heads_q][seq_q][head_dim]; lse (optional): [batch][heads_q][seq_q], natural log,
// -inf for rows with no allowed key (their output is 0).
void attention_f64(const Shape& shape, const float* q, const float* k, const float* v, double* out,
                   double* lse = nullptr);

struct ErrorMetrics {
  double relative_l2 = 0;          // ||o - r|| / ||r||
  double cosine = 0;               // <o, r> / (||o|| ||r||)
  double mean_relative_error = 0;  // mean|o - r| / mean|r| over all elements
  double max_abs_error = 0;
  std::size_t non_finite = 0;  // NaN/inf elements of o (a failure whatever the rest says)
};

// Any non-finite output element gives relative_l2 = mean_relative_error = +inf and cosine = 0
// (the other sums skip it). With an all-zero reference the errors are absolute: relative_l2 =
// ||o||, mean_relative_error = mean|o|, and cosine is 1 only when o is all zero too.
ErrorMetrics compare(const double* reference, const float* output, std::size_t count);
ErrorMetrics compare(const double* reference, const double* output, std::size_t count);

// Deterministic random inputs for a seed (tests draw a fresh seed per run and print it).
enum class Distribution { kNormal, kUniformHalf };  // N(0, 1) and U(-0.5, 0.5)
std::vector<float> random_values(std::size_t count, Distribution distribution, std::uint64_t seed);
// A seed that differs run to run (time and address entropy), printed by the caller; or, to replay
// a failure, the one INTFA_TEST_SEED names (a decimal integer, InvalidArgument naming the variable
// when it is not one).
std::uint64_t fresh_seed();

}  // namespace intfa::reference
