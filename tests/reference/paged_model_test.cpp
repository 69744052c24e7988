// The paged cache's CPU model: the quantizers' rounding on hand-made rows, the INT4 packing, the
// byte layout, the append's slot rules, and the accuracy the layout choices give (INT8 and INT4
// with 32- and 64-channel groups, on N(0, 1) and on keys with per-channel offsets, against float64
// attention of the original K/V). templates/decode/README.md quotes these numbers.
#include "reference/paged_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "reference/half.hpp"
#include "reference/quantized_model.hpp"
#include "reference/reference.hpp"
#include "support/timing.hpp"

namespace intfa::reference {
namespace {

std::vector<int> as_ints(const std::vector<std::int8_t>& values) {
  return std::vector<int>(values.begin(), values.end());
}

// ---- quantize_cache_row ------------------------------------------------------------------------

TEST(PagedCacheModel, Int8RowsQuantizeExactlyAsTheQuantizeRowsKernel) {
  const std::vector<float> x = random_values(128, Distribution::kNormal, 7);
  const CacheRow row = quantize_cache_row(x.data(), 128, 8, 32);
  const QuantizedRows rows = quantize_rows(x.data(), 1, 128, 8);
  EXPECT_EQ(row.values, rows.values);
  ASSERT_EQ(row.scales.size(), 1u);
  EXPECT_EQ(row.scales[0], rows.scales[0]);
}

TEST(PagedCacheModel, Int8OffsetIsSubtractedBeforeQuantizing) {
  const float x[8] = {10, 5, -3, 5, 1, 1, 1, 1};
  const float offset[8] = {9, 1, 0, 5, 1, 1, 1, 1};
  const CacheRow row = quantize_cache_row(x, 8, 8, 32, offset);
  EXPECT_EQ(row.scales[0], 4.0f / 127.0f);
  EXPECT_EQ(as_ints(row.values), (std::vector<int>{32, 127, -95, 0, 0, 0, 0, 0}));
}

TEST(PagedCacheModel, Int4GroupsHaveTheirOwnScales) {
  // Two groups of 8: amax 7 (scale exactly 1) and amax 0.7 (scale f16(0.1)).
  float x[16] = {7, -7, 3.5f, 2.5f, -0.5f, 1.49f, 0, 6.6f};
  for (int c = 8; c < 16; ++c) x[c] = 0.1f * x[c - 8];
  const CacheRow row = quantize_cache_row(x, 16, 4, 8);
  ASSERT_EQ(row.scales.size(), 2u);
  EXPECT_EQ(row.scales[0], 1.0f);
  EXPECT_EQ(row.scales[1], round_to_16bit(0.7f / 7.0f, false));
  // Ties to even: 3.5 -> 4, 2.5 -> 2, -0.5 -> 0.
  EXPECT_EQ(as_ints(std::vector<std::int8_t>(row.values.begin(), row.values.begin() + 8)),
            (std::vector<int>{7, -7, 4, 2, 0, 1, 0, 7}));
}

TEST(PagedCacheModel, Int4QuantizesAgainstTheFp16RoundedScale) {
  // amax / 7 = 0.3 is not an FP16 value; the values are rounded against f16(0.3), the scale that
  // is stored, so dequantizing gives q * stored scale.
  const float x[8] = {2.1f, 1.05f, -0.6f, 0.45f, 0, 0, 0, 0};
  const CacheRow row = quantize_cache_row(x, 8, 4, 8);
  const float stored = round_to_16bit(2.1f / 7.0f, false);
  EXPECT_NE(stored, 2.1f / 7.0f);
  EXPECT_EQ(row.scales[0], stored);
  const float inverse = 1.0f / stored;
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(row.values[static_cast<std::size_t>(c)],
              static_cast<int>(std::nearbyint(x[c] * inverse)));
  }
}

TEST(PagedCacheModel, AZeroGroupHasZeroScaleAndValues) {
  float x[64] = {};
  x[40] = -1.0f;
  const CacheRow row = quantize_cache_row(x, 64, 4, 32);
  EXPECT_EQ(row.scales[0], 0.0f);
  EXPECT_EQ(row.scales[1], round_to_16bit(1.0f / 7.0f, false));
  EXPECT_EQ(row.values[40], -7);
  for (int c = 0; c < 32; ++c) EXPECT_EQ(row.values[static_cast<std::size_t>(c)], 0);
}

TEST(PagedCacheModel, RandomRowsReconstructWithinHalfAStep) {
  const int rows = 200, head_dim = 128;
  std::vector<float> x =
      random_values(static_cast<std::size_t>(rows) * head_dim, Distribution::kNormal, 11);
  for (int row = 0; row < rows; ++row) {  // magnitudes 1e-3 .. 1e3
    const float magnitude = std::pow(10.0f, static_cast<float>(row % 7) - 3.0f);
    for (int c = 0; c < head_dim; ++c) x[static_cast<std::size_t>(row) * head_dim + c] *= magnitude;
  }
  for (const int bits : {8, 4}) {
    for (const int group : {32, 64}) {
      for (int r = 0; r < rows; ++r) {
        const float* input = &x[static_cast<std::size_t>(r) * head_dim];
        const CacheRow row = quantize_cache_row(input, head_dim, bits, group);
        std::vector<float> back(head_dim);
        dequantize_cache_row(row, head_dim, bits, group, back.data());
        for (int c = 0; c < head_dim; ++c) {
          const float scale = row.scales[bits == 8 ? 0 : static_cast<std::size_t>(c / group)];
          // Half a step, plus INT4's FP16 rounding of the dequantized value.
          const float slack = bits == 8 ? 1e-5f : 1e-3f;
          ASSERT_LE(std::fabs(back[static_cast<std::size_t>(c)] - input[c]),
                    scale * (0.5f + slack) + std::fabs(input[c]) * slack)
              << "bits " << bits << " row " << r << " channel " << c;
        }
      }
    }
  }
}

// ---- INT4 packing -------------------------------------------------------------------------------

TEST(PagedCacheModel, Int4PackingPutsElement2iInTheLowNibbleOfByteI) {
  const std::int8_t values[4] = {1, -1, -7, 7};
  const std::vector<std::uint8_t> bytes = pack_int4(values, 4);
  ASSERT_EQ(bytes.size(), 2u);
  EXPECT_EQ(bytes[0], 0xF1);  // -1 = 0xF in the high nibble, 1 in the low
  EXPECT_EQ(bytes[1], 0x79);  // 7 high, -7 = 0x9 low
}

TEST(PagedCacheModel, Int4UnpackingInvertsPackingForEveryValue) {
  std::vector<std::int8_t> values;
  for (int a = -8; a <= 7; ++a)
    for (int b = -8; b <= 7; ++b) {
      values.push_back(static_cast<std::int8_t>(a));
      values.push_back(static_cast<std::int8_t>(b));
    }
  const int count = static_cast<int>(values.size());
  EXPECT_EQ(unpack_int4(pack_int4(values.data(), count).data(), count), values);
}

// ---- layout and append --------------------------------------------------------------------------

TEST(PagedCacheModel, RowsArePagesThenHeadsThenPositionsThenChannels) {
  PagedLayout layout;
  layout.num_pages = 5;
  layout.page_size = 16;
  layout.heads_kv = 3;
  layout.head_dim = 64;
  layout.bits = 4;
  layout.group = 32;
  EXPECT_EQ(layout.row_bytes(), 32);
  EXPECT_EQ(layout.scales_per_row(), 2);
  EXPECT_EQ(layout.data_bytes(), 5u * 3 * 16 * 32);
  // Slot 37 = page 2, position 5; head 1.
  EXPECT_EQ(layout.data_offset(37, 1), ((2u * 3 + 1) * 16 + 5) * 32);
  EXPECT_EQ(layout.scale_offset(37, 1), ((2u * 3 + 1) * 16 + 5) * 2 * 2);
  layout.bits = 8;
  EXPECT_EQ(layout.scale_offset(37, 1), ((2u * 3 + 1) * 16 + 5) * 4);
}

TEST(PagedCacheModel, AppendWritesTheGivenSlotsOnlyAndSkipsNegativeOnes) {
  PagedLayout layout;
  layout.num_pages = 3;
  layout.page_size = 16;
  layout.heads_kv = 2;
  layout.head_dim = 64;
  PagedCacheModel model(layout, 0xAB);
  const std::vector<float> k = random_values(3 * 2 * 64, Distribution::kNormal, 3);
  const std::vector<float> v = random_values(3 * 2 * 64, Distribution::kNormal, 4);
  const std::int32_t slots[3] = {40, -1, 2};
  model.append(k.data(), v.data(), slots, 3, nullptr);
  std::size_t changed = 0;
  for (std::uint8_t byte : model.k_data()) changed += byte != 0xAB;
  // Two tokens x two heads x 64 bytes, less the bytes that happen to be 0xAB (-85).
  EXPECT_LE(changed, 2u * 2 * 64);
  EXPECT_GE(changed, 2u * 2 * 64 - 8);
  const CacheRow token2_head1 = quantize_cache_row(&k[(2 * 2 + 1) * 64], 64, 8, 32);
  EXPECT_EQ(
      std::memcmp(model.k_data().data() + layout.data_offset(2, 1), token2_head1.values.data(), 64),
      0);
  float stored_scale;
  std::memcpy(&stored_scale, model.k_scales().data() + layout.scale_offset(2, 1), 4);
  EXPECT_EQ(stored_scale, token2_head1.scales[0]);
  // The skipped token's values appear nowhere: slot 41 (after token 0's) is untouched.
  for (int i = 0; i < 64; ++i) EXPECT_EQ(model.k_data()[layout.data_offset(41, 0) + i], 0xAB);
}

TEST(PagedCacheModel, DequantizedSequencesFollowTheBlockTable) {
  PagedLayout layout;
  layout.num_pages = 4;
  layout.page_size = 16;
  layout.heads_kv = 1;
  layout.head_dim = 64;
  layout.bits = 4;
  PagedCacheModel model(layout, 0);
  // 20 tokens: positions 0..15 in page 3, 16..19 in page 1.
  const std::vector<float> k = random_values(20 * 64, Distribution::kNormal, 5);
  std::vector<std::int32_t> slots(20);
  for (int t = 0; t < 20; ++t) slots[static_cast<std::size_t>(t)] = t < 16 ? 48 + t : 16 + t - 16;
  model.append(k.data(), k.data(), slots.data(), 20, nullptr);
  const std::int32_t table[2] = {3, 1};
  const std::vector<float> dense = model.dequantized_k(table, 20);
  for (int t = 0; t < 20; ++t) {
    std::vector<float> expected(64);
    dequantize_cache_row(quantize_cache_row(&k[static_cast<std::size_t>(t) * 64], 64, 4, 32), 64, 4,
                         32, expected.data());
    for (int c = 0; c < 64; ++c) {
      ASSERT_EQ(dense[static_cast<std::size_t>(t) * 64 + c], expected[static_cast<std::size_t>(c)]);
    }
  }
}

TEST(PagedCacheModel, DecodeQueriesAreFp16InTheLog2Domain) {
  const float q[2] = {1.0f, -3.0f};
  const std::vector<float> rounded = decode_queries(q, 2, 0.125);
  const float scale_log2 = static_cast<float>(0.125 * 1.4426950408889634);
  EXPECT_EQ(rounded[0], round_to_16bit(scale_log2, false));
  EXPECT_EQ(rounded[1], round_to_16bit(-3.0f * scale_log2, false));
}

// ---- accuracy of the layout choices -------------------------------------------------------------

struct AccuracyCase {
  const char* name;
  double key_offset_sigmas;  // per-(head, channel) offsets of K, in units of K's spread
  bool smooth;               // subtract the prefill's channel means before quantizing K
};

struct AccuracyProblem {
  int heads_q = 32, heads_kv = 8, head_dim = 128, seq_kv = 4096, seq_q = 4;
  int prefill = 512;  // the tokens the smoothing offset is computed from
};

// Relative L2 of attention over the model's cache (the decode kernel's algorithm) against float64
// attention of the original K/V, over `seq_q` causal queries at the end of the sequence.
double cache_error(const AccuracyProblem& p, const AccuracyCase& c, int bits, int group) {
  const std::size_t row = static_cast<std::size_t>(p.head_dim);
  const std::size_t kv = static_cast<std::size_t>(p.heads_kv) * p.seq_kv * row;
  auto f16 = [](std::vector<float> values) {
    for (float& value : values) value = round_to_16bit(value, false);
    return values;
  };
  const std::vector<float> q = f16(random_values(
      static_cast<std::size_t>(p.heads_q) * p.seq_q * row, Distribution::kNormal, 101));
  std::vector<float> k = random_values(kv, Distribution::kNormal, 102);
  const std::vector<float> v = f16(random_values(kv, Distribution::kNormal, 103));
  const std::vector<float> offsets = random_values(p.heads_kv * row, Distribution::kNormal, 104);
  for (int h = 0; h < p.heads_kv; ++h)
    for (int t = 0; t < p.seq_kv; ++t)
      for (std::size_t d = 0; d < row; ++d) {
        k[(static_cast<std::size_t>(h) * p.seq_kv + t) * row + d] +=
            static_cast<float>(c.key_offset_sigmas) * offsets[h * row + d];
      }
  k = f16(k);
  // K smoothing: the per-(head, channel) mean of the prefill's keys, fixed afterwards.
  std::vector<float> offset(p.heads_kv * row, 0.0f);
  if (c.smooth) {
    for (int h = 0; h < p.heads_kv; ++h)
      for (std::size_t d = 0; d < row; ++d) {
        double sum = 0;
        for (int t = 0; t < p.prefill; ++t)
          sum += k[(static_cast<std::size_t>(h) * p.seq_kv + t) * row + d];
        offset[h * row + d] = static_cast<float>(sum / p.prefill);
      }
  }
  std::vector<float> k_cache(kv), v_cache(kv);
  for (int h = 0; h < p.heads_kv; ++h)
    for (int t = 0; t < p.seq_kv; ++t) {
      const std::size_t at = (static_cast<std::size_t>(h) * p.seq_kv + t) * row;
      dequantize_cache_row(quantize_cache_row(&k[at], p.head_dim, bits, group,
                                              c.smooth ? &offset[h * row] : nullptr),
                           p.head_dim, bits, group, &k_cache[at]);
      dequantize_cache_row(quantize_cache_row(&v[at], p.head_dim, bits, group), p.head_dim, bits,
                           group, &v_cache[at]);
    }
  const Shape shape = make_shape(1, p.heads_q, p.heads_kv, p.seq_q, p.seq_kv, p.head_dim, true);
  std::vector<double> exact(shape.q_elements()), model(shape.q_elements());
  attention_f64(shape, q.data(), k.data(), v.data(), exact.data());
  const std::vector<float> q_log2 = decode_queries(q.data(), q.size(), shape.effective_scale());
  const Shape log2_shape =
      make_shape(1, p.heads_q, p.heads_kv, p.seq_q, p.seq_kv, p.head_dim, true, 0.6931471805599453);
  attention_f64(log2_shape, q_log2.data(), k_cache.data(), v_cache.data(), model.data());
  return compare(exact.data(), model.data(), exact.size()).relative_l2;
}

// cache_error of the default problem, computed once per (case, bits, group) for the three tests
// below. The study is skipped under the sanitizers (ten times slower there): it runs no code the
// model tests above do not.
double study_error(const AccuracyCase& c, int bits, int group) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, int, int>, double> known;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(std::string(c.name), bits, group);
  const auto it = known.find(key);
  if (it != known.end()) return it->second;
  return known[key] = cache_error(AccuracyProblem{}, c, bits, group);
}

#define INTFA_SKIP_UNDER_SANITIZERS()                                                \
  do {                                                                               \
    if (::intfa::testing::kSanitizerSlowdown > 1) GTEST_SKIP() << "sanitizer build"; \
  } while (0)

const AccuracyCase kNormal{"N(0,1)", 0.0, false};
const AccuracyCase kOffsets{"K with 4-sigma channel offsets", 4.0, false};
const AccuracyCase kOffsetsSmoothed{"K with 4-sigma channel offsets, smoothed", 4.0, true};

TEST(PagedCacheAccuracy, Int8MeetsOnePercentOnNormalAndOnSmoothedOffsetKeys) {
  INTFA_SKIP_UNDER_SANITIZERS();
  for (const AccuracyCase& c : {kNormal, kOffsets, kOffsetsSmoothed}) {
    const double error = study_error(c, 8, 32);
    std::printf("  INT8, %s: relative L2 %.3f%%\n", c.name, 100 * error);
    RecordProperty(std::string("int8 ") + c.name, std::to_string(error));
    if (c.key_offset_sigmas == 0 || c.smooth) {
      EXPECT_LE(error, 0.010) << c.name;
    }
  }
}

TEST(PagedCacheAccuracy, SmoothingRemovesTheErrorOfKeyOffsets) {
  INTFA_SKIP_UNDER_SANITIZERS();
  for (int bits : {8, 4}) {
    const double plain = study_error(kOffsets, bits, 32);
    const double smoothed = study_error(kOffsetsSmoothed, bits, 32);
    const double normal = study_error(kNormal, bits, 32);
    EXPECT_GT(plain, 1.5 * smoothed) << bits << " bits";
    EXPECT_LE(smoothed, 1.2 * normal) << bits << " bits";
  }
}

// The INT4 group size of the kernels (kInt4Group in templates/decode/paged_params.h) was chosen
// from these numbers: see templates/decode/README.md.
TEST(PagedCacheAccuracy, Int4ErrorForGroupsOf32And64) {
  INTFA_SKIP_UNDER_SANITIZERS();
  double errors[2][3] = {};
  for (int g = 0; g < 2; ++g) {
    const int group = g == 0 ? 32 : 64;
    int i = 0;
    for (const AccuracyCase& c : {kNormal, kOffsets, kOffsetsSmoothed}) {
      errors[g][i] = study_error(c, 4, group);
      std::printf("  INT4 group %d, %s: relative L2 %.3f%%\n", group, c.name, 100 * errors[g][i]);
      RecordProperty("int4 g" + std::to_string(group) + " " + c.name, std::to_string(errors[g][i]));
      ++i;
    }
  }
  // Smaller groups follow the values more closely.
  EXPECT_LT(errors[0][0], errors[1][0]);
  EXPECT_LT(errors[0][2], errors[1][2]);
  // INT4 is reported, not held to INT8's target: each value keeps 15 levels.
  EXPECT_LE(errors[0][0], 0.15);
}

}  // namespace
}  // namespace intfa::reference
