// The CPU quantizers: the rounding of templates/quantize/*.cuh on hand-made rows, and the group
// structure of the three V granularities.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "intfa/errors.hpp"
#include "quantize/rotation.h"
#include "reference/quantized_model.hpp"
#include "support/seed.hpp"

namespace intfa::reference {
namespace {

using testing::announced_seed;

std::vector<int> as_ints(const std::vector<std::int8_t>& values) {
  return std::vector<int>(values.begin(), values.end());
}

// ---- quantize_rows ----------------------------------------------------------------------------

TEST(QuantizeRowsModel, AmaxMapsToPlusMinus127AndScaleIsAmaxOver127) {
  const float row[] = {2.54f, -2.54f, 1.0f, 0.0f};
  const QuantizedRows q = quantize_rows(row, 1, 4, 8);
  const float scale = 2.54f / 127.0f;  // FP32 division, ~0.02
  EXPECT_EQ(q.scales[0], scale);
  EXPECT_NEAR(q.scales[0], 0.02f, 1e-8f);
  // 1.0 / 0.02 = 50 (to FP32 rounding of the inverse).
  EXPECT_EQ(as_ints(q.values), (std::vector<int>{127, -127, 50, 0}));
}

TEST(QuantizeRowsModel, TiesRoundToEven) {
  // amax 127 makes the scale exactly 1, so x * inverse = x: the ties are exact.
  const float row[] = {127.0f, 0.5f, 1.5f, 2.5f, -2.5f, -0.5f, 126.5f, -3.5f};
  const QuantizedRows q = quantize_rows(row, 1, 8, 8);
  EXPECT_EQ(q.scales[0], 1.0f);
  EXPECT_EQ(as_ints(q.values), (std::vector<int>{127, 0, 2, 2, -2, 0, 126, -4}));
}

TEST(QuantizeRowsModel, FourBitsUsePlusMinus7) {
  const float row[] = {-7.0f, 6.5f, 2.5f, 3.49f, -0.5f, 1.0f};
  const QuantizedRows q = quantize_rows(row, 1, 6, 4);
  EXPECT_EQ(q.bits, 4);
  EXPECT_EQ(q.scales[0], 1.0f);
  EXPECT_EQ(as_ints(q.values), (std::vector<int>{-7, 6, 2, 3, 0, 1}));
}

TEST(QuantizeRowsModel, ZeroRowHasZeroScaleAndValues) {
  const float rows[] = {0.0f, 0.0f, -0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f};
  const QuantizedRows q = quantize_rows(rows, 2, 4, 8);
  EXPECT_EQ(q.scales[0], 0.0f);
  EXPECT_EQ(as_ints(q.values), (std::vector<int>{0, 0, 0, 0, 127, 0, 0, 0}));
  EXPECT_EQ(q.scales[1], 1.0f / 127.0f);
}

// Per-block K: 64 rows of a head share the scale of their largest |x|; a head's last block may be
// short, and heads never share a block.
TEST(QuantizeRowsModel, RowBlocksShareTheScaleOfTheirLargestValue) {
  const int heads = 2, seq = 70, head_dim = 4;
  std::vector<float> x(static_cast<std::size_t>(heads) * seq * head_dim, 0.5f);
  x[(0 * seq + 10) * head_dim + 1] = -2.54f;  // head 0, block 0
  x[(0 * seq + 65) * head_dim + 3] = 1.27f;   // head 0, block 1 (6 rows)
  x[(1 * seq + 63) * head_dim + 0] = 12.7f;   // head 1, block 0's last row
  const QuantizedRows q = quantize_row_blocks(x.data(), heads, seq, head_dim);
  ASSERT_EQ(q.block_scales.size(), 4u);
  EXPECT_EQ(q.block_scales[0], 2.54f / 127.0f);
  EXPECT_EQ(q.block_scales[1], 1.27f / 127.0f);
  EXPECT_EQ(q.block_scales[2], 12.7f / 127.0f);
  EXPECT_EQ(q.block_scales[3], 0.5f / 127.0f);
  // Every row holds its block's scale, and 0.5 quantizes against it.
  EXPECT_EQ(q.scales[0], q.block_scales[0]);
  EXPECT_EQ(q.scales[64], q.block_scales[1]);
  EXPECT_EQ(q.scales[seq + 64], q.block_scales[3]);
  EXPECT_EQ(q.values[0], 25);                                  // 0.5 / 0.02
  EXPECT_EQ(q.values[(0 * seq + 10) * head_dim + 1], -127);
  EXPECT_EQ(q.values[64 * head_dim], 50);                     // 0.5 / 0.01
  EXPECT_EQ(q.values[(1 * seq + 63) * head_dim + 0], 127);
  EXPECT_EQ(q.values[(1 * seq + 64) * head_dim], 127);         // the short block's own max
  // Smoothing subtracts each head's mean first, as the rows kernel does.
  const std::vector<float> means(static_cast<std::size_t>(heads) * head_dim, 0.5f);
  const QuantizedRows smoothed = quantize_row_blocks(x.data(), heads, seq, head_dim, means.data());
  EXPECT_EQ(smoothed.block_scales[3], 0.0f);  // all 0.5 minus 0.5
  EXPECT_EQ(smoothed.values[(1 * seq + 64) * head_dim], 0);
}

// The low terms (the model of a more precise Q.K) carry each value's rounding residual in units of
// scale / 254: value + low / 254 reconstructs x within half of that unit, 254x finer than the
// value alone, and with them the rows stay the same.
TEST(QuantizeRowsModel, LowTermsReconstructWithinHalfAStepOf254) {
  const std::uint64_t seed = announced_seed();
  const int rows = 200, head_dim = 128;
  const std::vector<float> x =
      random_values(static_cast<std::size_t>(rows) * head_dim, Distribution::kNormal, seed);
  const QuantizedRows one = quantize_rows(x.data(), rows, head_dim, 8);
  const QuantizedRows two = quantize_rows(x.data(), rows, head_dim, 8, nullptr, false, true);
  EXPECT_TRUE(one.low_terms.empty());
  ASSERT_EQ(two.low_terms.size(), x.size());
  EXPECT_EQ(two.values, one.values);
  EXPECT_EQ(two.scales, one.scales);
  int nonzero = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double scale = two.scales[i / head_dim];
    const double reconstructed = scale * (two.values[i] + two.low_terms[i] / 254.0);
    // Half a step of the low term, and FP32's rounding of x / scale (|x / scale| <= 127).
    ASSERT_LE(std::fabs(reconstructed - x[i]), scale * (0.5 / 254 + 127 * 1e-7)) << "element " << i;
    nonzero += two.low_terms[i] != 0;
  }
  EXPECT_GT(nonzero, static_cast<int>(x.size()) / 2);  // the residuals are not all rounded away
  EXPECT_THROW(quantize_rows(x.data(), rows, head_dim, 4, nullptr, false, true), InvalidArgument);
}

TEST(QuantizeRowsModel, RandomRowsStayInRangeAndReconstructWithinHalfAStep) {
  const std::uint64_t seed = announced_seed();
  const int rows = 300, head_dim = 64;
  std::vector<float> x =
      random_values(static_cast<std::size_t>(rows) * head_dim, Distribution::kNormal, seed);
  for (int row = 0; row < rows; ++row) {  // magnitudes from 1e-6 to 1e4
    const float magnitude = std::pow(10.0f, static_cast<float>(row % 11) - 6.0f);
    for (int c = 0; c < head_dim; ++c) x[static_cast<std::size_t>(row) * head_dim + c] *= magnitude;
  }
  for (const int bits : {8, 4}) {
    const int range = bits == 8 ? 127 : 7;
    const QuantizedRows q = quantize_rows(x.data(), rows, head_dim, bits);
    ASSERT_EQ(q.values.size(), x.size());
    for (int row = 0; row < rows; ++row) {
      const float* input = &x[static_cast<std::size_t>(row) * head_dim];
      const std::int8_t* values = &q.values[static_cast<std::size_t>(row) * head_dim];
      const int argmax = static_cast<int>(
          std::max_element(input, input + head_dim,
                           [](float a, float b) { return std::fabs(a) < std::fabs(b); }) -
          input);
      EXPECT_EQ(values[argmax], input[argmax] > 0 ? range : -range) << "bits " << bits;
      const double scale = q.scales[static_cast<std::size_t>(row)];
      for (int c = 0; c < head_dim; ++c) {
        ASSERT_LE(std::abs(values[c]), range);
        ASSERT_LE(std::fabs(values[c] * scale - input[c]), scale * (0.5 + 1e-5))
            << "row " << row << " channel " << c << " bits " << bits;
      }
    }
  }
}

TEST(QuantizeRowsModel, SmoothingSubtractsTheChannelMeanFirst) {
  const float row[] = {10.0f, 5.0f, -3.0f, 5.0f};
  const float mean[] = {9.0f, 1.0f, 0.0f, 5.0f};
  const QuantizedRows smoothed = quantize_rows(row, 1, 4, 8, mean);
  const float centred[] = {1.0f, 4.0f, -3.0f, 0.0f};
  const QuantizedRows expected = quantize_rows(centred, 1, 4, 8);
  EXPECT_EQ(smoothed.scales, expected.scales);
  EXPECT_EQ(smoothed.values, expected.values);
  EXPECT_EQ(smoothed.scales[0], 4.0f / 127.0f);
  EXPECT_EQ(as_ints(smoothed.values), (std::vector<int>{32, 127, -95, 0}));  // 31.75, -95.25
}

TEST(QuantizeRowsModel, SmoothingMeanAppliesToEveryRow) {
  const float rows[] = {2.0f, 4.0f, 6.0f, 8.0f};
  const float mean[] = {1.0f, 2.0f};
  const QuantizedRows q = quantize_rows(rows, 2, 2, 8, mean);
  EXPECT_EQ(q.scales[0], 2.0f / 127.0f);  // row 0 -> {1, 2}
  EXPECT_EQ(q.scales[1], 6.0f / 127.0f);  // row 1 -> {5, 6}
}

// ---- the rotation (incoherent processing) ------------------------------------------------------

// R[c][j] = sign(c) * (-1)^popcount(c & j) / sqrt(d): the signed Walsh-Hadamard matrix that
// rotation.h describes, written out entry by entry.
double rotation_entry(int c, int j, int head_dim) {
  const double sign = kernels::rotation_negates(c) ? -1.0 : 1.0;
  const double hadamard = __builtin_popcount(static_cast<unsigned>(c & j)) % 2 == 0 ? 1.0 : -1.0;
  return sign * hadamard / std::sqrt(static_cast<double>(head_dim));
}

TEST(RotationModel, IsTheRowTimesTheSignedHadamardMatrix) {
  const std::uint64_t seed = announced_seed();
  for (const int head_dim : {8, 64, 128, 256}) {
    std::vector<float> row =
        random_values(static_cast<std::size_t>(head_dim), Distribution::kNormal, seed + head_dim);
    std::vector<double> expected(static_cast<std::size_t>(head_dim), 0.0);
    for (int j = 0; j < head_dim; ++j) {
      for (int c = 0; c < head_dim; ++c) expected[j] += row[c] * rotation_entry(c, j, head_dim);
    }
    rotate_row(row.data(), head_dim);
    for (int j = 0; j < head_dim; ++j) {
      // FP32 butterflies: log2(d) roundings of sums of magnitude ~sqrt(d).
      ASSERT_NEAR(row[j], expected[j], 1e-5) << "d=" << head_dim << " channel " << j;
    }
  }
}

TEST(RotationModel, LeavesQueryKeyProductsUnchangedToFloatRounding) {
  const std::uint64_t seed = announced_seed();
  for (const int head_dim : {64, 128, 256}) {
    const int rows = 50;
    const std::size_t count = static_cast<std::size_t>(rows) * head_dim;
    std::vector<float> q = random_values(count, Distribution::kNormal, seed);
    std::vector<float> k = random_values(count, Distribution::kNormal, seed + 1);
    for (std::size_t i = 0; i < count; ++i) {
      if (i % head_dim < 4) k[i] = k[i] * 10.0f + 5.0f;  // outlier channels with an offset
    }
    std::vector<float> q_rotated = q, k_rotated = k;
    for (int r = 0; r < rows; ++r) {
      rotate_row(q_rotated.data() + static_cast<std::size_t>(r) * head_dim, head_dim);
      rotate_row(k_rotated.data() + static_cast<std::size_t>(r) * head_dim, head_dim);
    }
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < rows; ++j) {
        double original = 0, rotated = 0, magnitude = 0;
        for (int c = 0; c < head_dim; ++c) {
          const std::size_t a = static_cast<std::size_t>(i) * head_dim + c;
          const std::size_t b = static_cast<std::size_t>(j) * head_dim + c;
          original += static_cast<double>(q[a]) * k[b];
          rotated += static_cast<double>(q_rotated[a]) * k_rotated[b];
          magnitude += std::fabs(static_cast<double>(q[a]) * k[b]);
        }
        // Each rotated value carries log2(d) + 1 FP32 roundings: ~1e-6 of the row norms.
        ASSERT_NEAR(rotated, original, 2e-6 * magnitude + 1e-6)
            << "d=" << head_dim << " q row " << i << " k row " << j;
      }
    }
  }
}

TEST(RotationModel, NormaliserIsTheKernelsConstant) {
  for (const int head_dim : {64, 128, 256}) {
    std::vector<float> unit(static_cast<std::size_t>(head_dim), 0.0f);
    unit[0] = 1.0f;
    rotate_row(unit.data(), head_dim);
    // Row 0 of H is all ones: every channel is sign(0) / sqrt(d), in FP32 exactly the constant.
    const float expected = kernels::rotation_normaliser(head_dim);
    for (const float value : unit) ASSERT_EQ(std::fabs(value), expected) << "d=" << head_dim;
  }
}

TEST(RotationModel, SpreadsAnOutlierChannelOverTheRow) {
  const int head_dim = 128;
  std::vector<float> row(static_cast<std::size_t>(head_dim), 0.0f);
  row[37] = 100.0f;
  row[5] = 1.0f;
  rotate_row(row.data(), head_dim);
  float amax = 0;
  for (const float value : row) amax = std::max(amax, std::fabs(value));
  EXPECT_LT(amax, 101.0f / std::sqrt(128.0f) + 1e-3f);
  EXPECT_GT(amax, 99.0f / std::sqrt(128.0f) - 1e-3f);
}

TEST(RotationModel, SignsAreMixed) {
  // Neither all alike nor alternating in any group of 32 channels.
  for (int first = 0; first < 256; first += 32) {
    int negated = 0;
    for (int c = first; c < first + 32; ++c) negated += kernels::rotation_negates(c) ? 1 : 0;
    EXPECT_GT(negated, 8) << "channels " << first << "..";
    EXPECT_LT(negated, 24) << "channels " << first << "..";
    EXPECT_EQ(kernels::rotation_negates(first + 5),
              ((kernels::rotation_sign_bits(first / 32) >> 5) & 1u) != 0);
  }
}

// Why D is there: H alone maps a row of equal values (an offset every channel shares) onto
// channel 0; with the signs it stays spread.
TEST(RotationModel, SpreadsARowOfEqualValues) {
  for (const int head_dim : {64, 128, 256}) {
    std::vector<float> row(static_cast<std::size_t>(head_dim), 1.0f);
    rotate_row(row.data(), head_dim);
    float amax = 0;
    for (const float value : row) amax = std::max(amax, std::fabs(value));
    // The row's norm is sqrt(d): one channel holding it would be sqrt(d) >= 8.
    EXPECT_LT(amax, 0.5f * std::sqrt(static_cast<float>(head_dim))) << "d=" << head_dim;
  }
}

TEST(RotationModel, QuantizeRowsRotatesAfterSmoothingAndBeforeQuantizing) {
  const std::uint64_t seed = announced_seed();
  const int rows = 20, head_dim = 64;
  std::vector<float> x =
      random_values(static_cast<std::size_t>(rows) * head_dim, Distribution::kNormal, seed);
  const std::vector<float> mean =
      random_values(static_cast<std::size_t>(head_dim), Distribution::kNormal, seed + 1);
  std::vector<float> by_hand = x;
  for (int r = 0; r < rows; ++r) {
    float* row = by_hand.data() + static_cast<std::size_t>(r) * head_dim;
    for (int c = 0; c < head_dim; ++c) row[c] -= mean[c];
    rotate_row(row, head_dim);
  }
  for (const int bits : {8, 4}) {
    const QuantizedRows rotated = quantize_rows(x.data(), rows, head_dim, bits, mean.data(), true);
    const QuantizedRows expected = quantize_rows(by_hand.data(), rows, head_dim, bits);
    EXPECT_EQ(rotated.values, expected.values) << "bits " << bits;
    EXPECT_EQ(rotated.scales, expected.scales) << "bits " << bits;
  }
}

TEST(RotationModel, RefusesAHeadDimThatIsNotAPowerOfTwo) {
  std::vector<float> row(96, 1.0f);
  EXPECT_THROW(rotate_row(row.data(), 96), InvalidArgument);
}

// ---- K smoothing's sampled means and Q's LSE term ----------------------------------------------

TEST(SampledChannelMeans, AreTheMeansOfAtMost256EvenlySpreadKeys) {
  // Row n holds n in every channel: the mean of the sampled rows is the mean of their indices.
  for (const int seq : {1, 100, 256, 257, 1000, 5000}) {
    const int head_dim = 2;
    std::vector<float> x(static_cast<std::size_t>(seq) * head_dim);
    for (int n = 0; n < seq; ++n) x[2 * n] = x[2 * n + 1] = static_cast<float>(n);
    const int count = std::min(seq, 256);
    // The sampled rows are floor(i * seq / count).
    double expected = 0;
    for (int i = 0; i < count; ++i) {
      expected += static_cast<double>((static_cast<long long>(i) * seq) / count);
    }
    expected /= count;
    const std::vector<double> means = sampled_channel_means(x.data(), 1, seq, head_dim);
    EXPECT_DOUBLE_EQ(means[0], expected) << "seq " << seq;
    EXPECT_DOUBLE_EQ(means[1], expected) << "seq " << seq;
    if (seq <= 256) {
      EXPECT_DOUBLE_EQ(means[0], (seq - 1) / 2.0) << "every key";
    }
  }
}

TEST(SampledChannelMeans, RemoveAChannelOffsetAsWellAsTheExactMean) {
  const std::uint64_t seed = announced_seed();
  const int seq = 4096, head_dim = 64;
  std::vector<float> k =
      random_values(static_cast<std::size_t>(seq) * head_dim, Distribution::kNormal, seed);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] += 4.0f * static_cast<float>(i % head_dim % 7);
  const std::vector<double> sampled = sampled_channel_means(k.data(), 1, seq, head_dim);
  const std::vector<double> exact = channel_means(k.data(), 1, seq, head_dim);
  for (int c = 0; c < head_dim; ++c) {
    // 256 samples of N(0, 1): within 5 standard errors (1/16) of the exact mean.
    EXPECT_NEAR(sampled[c], exact[c], 5.0 / 16.0) << "channel " << c;
  }
}

TEST(QDotKMeans, DotEachQueryRowWithTheMeanOfItsKeyValueHead) {
  // batch 1, heads_q 4, heads_kv 2, seq 1, head_dim 2: query heads 0, 1 read KV head 0.
  const float q[] = {1, 2, 3, 4, 5, 6, 7, 8};
  const float means[] = {10, 100, -1, 0.5f};
  const std::vector<double> dots = q_dot_k_means(q, 1, 4, 2, 1, 2, means);
  EXPECT_EQ(dots, (std::vector<double>{210, 430, -2, -3}));
  EXPECT_THROW(q_dot_k_means(q, 1, 4, 3, 1, 2, means), InvalidArgument);
}

// ---- quantize_v -------------------------------------------------------------------------------

// For each granularity: how many scales a head has, and which group a (token, channel) is in.
struct GranularityCase {
  VGranularity granularity;
  int scales_per_head;
};

int group_of(VGranularity granularity, int token, int channel, int head_dim) {
  switch (granularity) {
    case VGranularity::kPerTensor:
      return 0;
    case VGranularity::kPerChannel:
      return channel;
    case VGranularity::kPerBlock:
      return (token / 64) * head_dim + channel;
  }
  return -1;
}

TEST(QuantizeVModel, ScalesAreGroupMaximaOver127AndMaximaMapTo127) {
  const std::uint64_t seed = announced_seed();
  const int batch = 2, heads = 3, seq = 100, head_dim = 8;  // two 64-token blocks, one partial
  std::vector<float> v = random_values(static_cast<std::size_t>(batch) * heads * seq * head_dim,
                                       Distribution::kNormal, seed);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] *= 1.0f + static_cast<float>(i % head_dim);
  const GranularityCase cases[] = {{VGranularity::kPerTensor, 1},
                                   {VGranularity::kPerChannel, head_dim},
                                   {VGranularity::kPerBlock, 2 * head_dim}};
  for (const GranularityCase& test : cases) {
    SCOPED_TRACE(static_cast<int>(test.granularity));
    const QuantizedV q = quantize_v(v.data(), batch, heads, seq, head_dim, test.granularity);
    ASSERT_EQ(q.scales.size(), static_cast<std::size_t>(batch * heads * test.scales_per_head));
    ASSERT_EQ(q.values.size(), v.size());
    for (int head = 0; head < batch * heads; ++head) {
      std::vector<float> amax(static_cast<std::size_t>(test.scales_per_head), 0.0f);
      const std::size_t base = static_cast<std::size_t>(head) * seq * head_dim;
      for (int token = 0; token < seq; ++token) {
        for (int c = 0; c < head_dim; ++c) {
          float& group_max =
              amax[static_cast<std::size_t>(group_of(test.granularity, token, c, head_dim))];
          group_max = std::max(group_max,
                               std::fabs(v[base + static_cast<std::size_t>(token) * head_dim + c]));
        }
      }
      for (int group = 0; group < test.scales_per_head; ++group) {
        ASSERT_EQ(q.scales[static_cast<std::size_t>(head * test.scales_per_head + group)],
                  amax[static_cast<std::size_t>(group)] / 127.0f);
      }
      for (int token = 0; token < seq; ++token) {
        for (int c = 0; c < head_dim; ++c) {
          const std::size_t index = base + static_cast<std::size_t>(token) * head_dim + c;
          const int group = group_of(test.granularity, token, c, head_dim);
          const float scale =
              q.scales[static_cast<std::size_t>(head * test.scales_per_head + group)];
          ASSERT_LE(std::abs(q.values[index]), 127);
          ASSERT_LE(std::fabs(q.values[index] * static_cast<double>(scale) - v[index]),
                    scale * (0.5 + 1e-5));
          if (std::fabs(v[index]) == amax[static_cast<std::size_t>(group)]) {
            ASSERT_EQ(q.values[index], v[index] > 0 ? 127 : -127);
          }
        }
      }
    }
  }
}

TEST(QuantizeVModel, PerBlockGroupsAre64TokensOfOneChannel) {
  const int seq = 130, head_dim = 2;  // blocks of 64, 64 and 2 tokens
  std::vector<float> v(static_cast<std::size_t>(seq) * head_dim, 0.0f);
  v[10 * head_dim + 0] = 1.27f;   // block 0, channel 0
  v[70 * head_dim + 1] = -2.54f;  // block 1, channel 1
  v[129 * head_dim + 0] = 12.7f;  // block 2 (partial), channel 0
  const QuantizedV q = quantize_v(v.data(), 1, 1, seq, head_dim, VGranularity::kPerBlock);
  const std::vector<float> expected = {1.27f / 127.0f, 0.0f,           0.0f,
                                       2.54f / 127.0f, 12.7f / 127.0f, 0.0f};
  EXPECT_EQ(q.scales, expected);
  EXPECT_EQ(q.values[10 * head_dim + 0], 127);
  EXPECT_EQ(q.values[70 * head_dim + 1], -127);
  EXPECT_EQ(q.values[129 * head_dim + 0], 127);
}

TEST(QuantizeVModel, AllZeroGroupHasZeroScaleAndValues) {
  const std::vector<float> v(64 * 4, 0.0f);
  for (const VGranularity granularity :
       {VGranularity::kPerTensor, VGranularity::kPerChannel, VGranularity::kPerBlock}) {
    const QuantizedV q = quantize_v(v.data(), 1, 1, 64, 4, granularity);
    for (const float scale : q.scales) EXPECT_EQ(scale, 0.0f);
    for (const std::int8_t value : q.values) EXPECT_EQ(value, 0);
  }
}

}  // namespace
}  // namespace intfa::reference
