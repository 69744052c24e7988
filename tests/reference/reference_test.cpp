// Float64 attention against an independent long-double transcription of softmax(Q K^T * scale) V,
// plus the properties attention must have whatever the implementation; the error metrics; the
// random inputs.
#include "reference/reference.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "intfa/errors.hpp"
#include "support/seed.hpp"
#include "support/temp_dir.hpp"

namespace intfa::reference {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// A fresh seed, printed and recorded so that a failure can be replayed with random_values.
using testing::announced_seed;

struct Inputs {
  std::vector<float> q, k, v;
};

Inputs random_inputs(const Shape& shape, std::uint64_t seed, float score_spread = 2.0f) {
  Inputs inputs{random_values(shape.q_elements(), Distribution::kNormal, seed),
                random_values(shape.kv_elements(), Distribution::kNormal, seed + 1),
                random_values(shape.kv_elements(), Distribution::kNormal, seed + 2)};
  for (float& value : inputs.q) value *= score_spread;  // a peaked softmax, not a flat one
  return inputs;
}

// The definition, written independently: every (b, h, i) sees keys j with j - i <= seq_kv -
// seq_q when causal; weights exp(s - 0) summed in long double.
void naive_attention(const Shape& shape, const Inputs& in, std::vector<long double>& out,
                     std::vector<long double>& lse) {
  const int d = shape.head_dim;
  out.assign(shape.q_elements(), 0.0L);
  lse.assign(shape.q_elements() / d, 0.0L);
  const long double scale =
      shape.softmax_scale > 0 ? shape.softmax_scale : 1.0L / std::sqrt(static_cast<long double>(d));
  for (int b = 0; b < shape.batch; ++b) {
    for (int h = 0; h < shape.heads_q; ++h) {
      const int h_kv = h * shape.heads_kv / shape.heads_q;
      for (int i = 0; i < shape.seq_q; ++i) {
        const std::size_t q_row =
            (static_cast<std::size_t>(b) * shape.heads_q + h) * shape.seq_q + i;
        long double sum = 0;
        std::vector<long double> numerator(static_cast<std::size_t>(d), 0.0L);
        for (int j = 0; j < shape.seq_kv; ++j) {
          if (shape.causal && j - i > shape.seq_kv - shape.seq_q) continue;
          const std::size_t kv_row =
              (static_cast<std::size_t>(b) * shape.heads_kv + h_kv) * shape.seq_kv + j;
          long double score = 0;
          for (int c = 0; c < d; ++c) {
            score += static_cast<long double>(in.q[q_row * d + c]) * in.k[kv_row * d + c];
          }
          const long double weight = std::exp(score * scale);
          sum += weight;
          for (int c = 0; c < d; ++c)
            numerator[static_cast<std::size_t>(c)] += weight * in.v[kv_row * d + c];
        }
        lse[q_row] = sum > 0 ? std::log(sum) : -std::numeric_limits<long double>::infinity();
        for (int c = 0; c < d; ++c) {
          out[q_row * d + c] = sum > 0 ? numerator[static_cast<std::size_t>(c)] / sum : 0.0L;
        }
      }
    }
  }
}

std::string describe(const Shape& s) {
  return "b" + std::to_string(s.batch) + " hq" + std::to_string(s.heads_q) + " hkv" +
         std::to_string(s.heads_kv) + " sq" + std::to_string(s.seq_q) + " skv" +
         std::to_string(s.seq_kv) + " d" + std::to_string(s.head_dim) +
         (s.causal ? " causal" : "") + " scale " + std::to_string(s.softmax_scale);
}

// ---- Shape ------------------------------------------------------------------------------------

TEST(ReferenceShape, CausalMaskIsBottomRightAligned) {
  Shape shape = make_shape(1, 1, 1, 3, 5, 8, true);
  EXPECT_EQ(shape.allowed_keys(0), 3);  // keys 0..2
  EXPECT_EQ(shape.allowed_keys(2), 5);  // the last row sees every key
  shape = make_shape(1, 1, 1, 5, 3, 8, true);
  EXPECT_EQ(shape.allowed_keys(0), 0);
  EXPECT_EQ(shape.allowed_keys(1), 0);
  EXPECT_EQ(shape.allowed_keys(2), 1);
  EXPECT_EQ(shape.allowed_keys(4), 3);
  shape.causal = false;
  EXPECT_EQ(shape.allowed_keys(0), 3);
}

TEST(ReferenceShape, ScaleGqaAndValidation) {
  Shape shape = make_shape(1, 8, 2, 4, 4, 64, false);
  EXPECT_DOUBLE_EQ(shape.effective_scale(), 0.125);
  shape.softmax_scale = 0.3;
  EXPECT_DOUBLE_EQ(shape.effective_scale(), 0.3);
  EXPECT_EQ(shape.kv_head(3), 0);
  EXPECT_EQ(shape.kv_head(4), 1);
  EXPECT_EQ(shape.q_elements(), 8u * 4 * 64);
  EXPECT_EQ(shape.kv_elements(), 2u * 4 * 64);
  EXPECT_NO_THROW(shape.validate());
  shape.heads_kv = 3;
  EXPECT_THROW(shape.validate(), InvalidArgument);
  shape.heads_kv = 2;
  shape.seq_kv = 0;
  EXPECT_THROW(shape.validate(), InvalidArgument);
}

// ---- attention_f64 ----------------------------------------------------------------------------

TEST(ReferenceAttentionF64, MatchesLongDoubleDefinitionOnSmallShapes) {
  const std::uint64_t seed = announced_seed();
  const Shape shapes[] = {
      make_shape(2, 4, 2, 5, 7, 8, false),  // GQA 4/2
      make_shape(2, 4, 2, 5, 7, 8, true),   // causal, seq_q < seq_kv
      make_shape(1, 2, 1, 9, 4, 8, true),   // causal, seq_q > seq_kv: rows 0..4 see nothing
      make_shape(1, 1, 1, 1, 1, 4, false),  // one query, one key
      make_shape(1, 1, 1, 1, 1, 4, true),
      make_shape(1, 3, 3, 1, 6, 5, true),  // one query row sees every key; odd head_dim
      make_shape(3, 2, 2, 6, 6, 16, true, 0.3),
      make_shape(1, 2, 2, 33, 70, 3, false, 1.7),
  };
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(describe(shape));
    const Inputs in = random_inputs(shape, seed);
    std::vector<double> out(shape.q_elements()), lse(shape.q_elements() / shape.head_dim);
    attention_f64(shape, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
    std::vector<long double> expected_out, expected_lse;
    naive_attention(shape, in, expected_out, expected_lse);
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(out[i], static_cast<double>(expected_out[i]), 1e-12) << "element " << i;
    }
    for (std::size_t row = 0; row < lse.size(); ++row) {
      if (std::isinf(expected_lse[row])) {
        ASSERT_EQ(lse[row], -kInfinity) << "row " << row;
      } else {
        ASSERT_NEAR(lse[row], static_cast<double>(expected_lse[row]), 1e-12) << "row " << row;
      }
    }
  }
}

TEST(ReferenceAttentionF64, FullyMaskedRowsAreZeroWithMinusInfinityLse) {
  const Shape shape = make_shape(1, 1, 1, 6, 2, 4, true);  // rows 0..3 have no allowed key
  const Inputs in = random_inputs(shape, 7);
  std::vector<double> out(shape.q_elements(), 99.0), lse(6, 99.0);
  attention_f64(shape, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
  for (int row = 0; row < 6; ++row) {
    const bool masked = row < 4;
    EXPECT_EQ(lse[row] == -kInfinity, masked) << row;
    if (!masked) continue;
    for (int c = 0; c < 4; ++c) EXPECT_EQ(out[row * 4 + c], 0.0) << row;
  }
  // Row 4 sees key 0 only: its output is V row 0.
  for (int c = 0; c < 4; ++c) EXPECT_DOUBLE_EQ(out[4 * 4 + c], in.v[c]);
}

TEST(ReferenceAttentionF64, ConstantValueRowsGiveThatConstant) {
  const std::uint64_t seed = announced_seed();
  const Shape shape = make_shape(2, 2, 1, 17, 40, 8, true);
  Inputs in = random_inputs(shape, seed, 4.0f);
  for (std::size_t row = 0; row < in.v.size() / 8; ++row) {
    for (int c = 0; c < 8; ++c) in.v[row * 8 + c] = 0.25f * static_cast<float>(c) - 1.0f;
  }
  std::vector<double> out(shape.q_elements());
  attention_f64(shape, in.q.data(), in.k.data(), in.v.data(), out.data());
  for (std::size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], 0.25 * static_cast<double>(i % 8) - 1.0, 1e-14) << i;
  }
}

TEST(ReferenceAttentionF64, KeyOrderDoesNotMatterWithoutMask) {
  const std::uint64_t seed = announced_seed();
  const Shape shape = make_shape(1, 2, 2, 8, 50, 16, false);
  const Inputs in = random_inputs(shape, seed);
  std::vector<int> order(static_cast<std::size_t>(shape.heads_kv) * shape.seq_kv);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 generator(seed);
  for (int h = 0; h < shape.heads_kv; ++h) {  // permute keys within each head
    std::shuffle(order.begin() + h * shape.seq_kv, order.begin() + (h + 1) * shape.seq_kv,
                 generator);
  }
  Inputs permuted = in;
  for (std::size_t row = 0; row < order.size(); ++row) {
    for (int c = 0; c < 16; ++c) {
      permuted.k[row * 16 + c] = in.k[static_cast<std::size_t>(order[row]) * 16 + c];
      permuted.v[row * 16 + c] = in.v[static_cast<std::size_t>(order[row]) * 16 + c];
    }
  }
  std::vector<double> out(shape.q_elements()), out_permuted(shape.q_elements());
  std::vector<double> lse(16), lse_permuted(16);
  attention_f64(shape, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
  attention_f64(shape, permuted.q.data(), permuted.k.data(), permuted.v.data(), out_permuted.data(),
                lse_permuted.data());
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], out_permuted[i], 1e-13) << i;
  for (std::size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse[i], lse_permuted[i], 1e-13) << i;
}

// ---- compare ----------------------------------------------------------------------------------

TEST(ReferenceCompare, IdenticalVectorsHaveNoError) {
  const double reference[] = {1.0, -2.0, 0.5};
  const ErrorMetrics metrics = compare(reference, reference, 3);
  EXPECT_EQ(metrics.relative_l2, 0.0);
  EXPECT_DOUBLE_EQ(metrics.cosine, 1.0);
  EXPECT_EQ(metrics.mean_relative_error, 0.0);
  EXPECT_EQ(metrics.max_abs_error, 0.0);
  EXPECT_EQ(metrics.non_finite, 0u);
}

TEST(ReferenceCompare, KnownExample) {
  const double reference[] = {3.0, 4.0};
  const float output[] = {3.0f, 5.0f};
  const ErrorMetrics metrics = compare(reference, output, 2);
  EXPECT_DOUBLE_EQ(metrics.relative_l2, 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(metrics.cosine, 29.0 / (5.0 * std::sqrt(34.0)));
  EXPECT_DOUBLE_EQ(metrics.mean_relative_error, 1.0 / 7.0);
  EXPECT_DOUBLE_EQ(metrics.max_abs_error, 1.0);
}

TEST(ReferenceCompare, NonFiniteOutputFailsEveryTolerance) {
  const double reference[] = {1.0, 2.0, 3.0};
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const float output[] = {1.0f, bad, 3.0f};
    const ErrorMetrics metrics = compare(reference, output, 3);
    EXPECT_EQ(metrics.non_finite, 1u);
    EXPECT_EQ(metrics.relative_l2, kInfinity);
    EXPECT_EQ(metrics.mean_relative_error, kInfinity);
    EXPECT_EQ(metrics.cosine, 0.0);
    EXPECT_FALSE(metrics.relative_l2 <= 1e-3);
  }
}

TEST(ReferenceCompare, ZeroReferenceGivesAbsoluteErrors) {
  const double zeros[] = {0.0, 0.0};
  const double output[] = {3.0, -4.0};
  const ErrorMetrics metrics = compare(zeros, output, 2);
  EXPECT_DOUBLE_EQ(metrics.relative_l2, 5.0);
  EXPECT_DOUBLE_EQ(metrics.mean_relative_error, 3.5);
  EXPECT_EQ(metrics.cosine, 0.0);
  const ErrorMetrics exact = compare(zeros, zeros, 2);
  EXPECT_EQ(exact.relative_l2, 0.0);
  EXPECT_EQ(exact.cosine, 1.0);
}

// ---- random inputs ----------------------------------------------------------------------------

TEST(ReferenceRandom, SameSeedSameValuesAndTheDocumentedDistributions) {
  const std::uint64_t seed = announced_seed();
  const auto normal = random_values(100000, Distribution::kNormal, seed);
  EXPECT_EQ(normal, random_values(100000, Distribution::kNormal, seed));
  EXPECT_NE(normal, random_values(100000, Distribution::kNormal, seed + 1));
  double sum = 0, sum_squares = 0;
  for (const float value : normal) {
    sum += value;
    sum_squares += static_cast<double>(value) * value;
  }
  EXPECT_NEAR(sum / 1e5, 0.0, 0.02);  // 6 standard errors
  EXPECT_NEAR(sum_squares / 1e5, 1.0, 0.03);
  const auto uniform = random_values(100000, Distribution::kUniformHalf, seed);
  const auto [low, high] = std::minmax_element(uniform.begin(), uniform.end());
  EXPECT_GE(*low, -0.5f);
  EXPECT_LE(*high, 0.5f);
  EXPECT_LT(*low, -0.49f);
  EXPECT_GT(*high, 0.49f);
}

TEST(ReferenceRandom, FreshSeedsDiffer) {
  testing::ScopedEnv fresh("INTFA_TEST_SEED", nullptr);
  const std::uint64_t first = fresh_seed();
  const std::uint64_t second = fresh_seed();
  EXPECT_NE(first, second);
  EXPECT_NE(first, 0u);
}

// INTFA_TEST_SEED replays the seed a failed run printed; anything but a decimal integer is an
// error naming the variable, not a silent fresh seed.
TEST(ReferenceRandom, TheSeedVariableReplaysAPrintedSeed) {
  std::uint64_t printed = 0;
  {
    testing::ScopedEnv fresh("INTFA_TEST_SEED", nullptr);
    printed = fresh_seed();
  }
  {
    testing::ScopedEnv replay("INTFA_TEST_SEED", std::to_string(printed));
    EXPECT_EQ(fresh_seed(), printed);
    EXPECT_EQ(fresh_seed(), printed);
  }
  for (const char* bad : {"12x", "-3", "+3", "seed", " 7", "99999999999999999999999"}) {
    testing::ScopedEnv replay("INTFA_TEST_SEED", bad);
    try {
      fresh_seed();
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgument& error) {
      EXPECT_NE(std::string(error.what()).find("INTFA_TEST_SEED"), std::string::npos) << bad;
    }
  }
}

}  // namespace
}  // namespace intfa::reference
