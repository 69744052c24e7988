// The JIT-compiled quantize kernels on a GPU against the CPU quantizers, exactly (skipped without
// a GPU): integers equal, scales equal bit for bit, with K smoothing and the rotation; K
// smoothing's sampled means and Q's LSE terms to FP32 summation error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "intfa/attention.hpp"
#include "intfa/quantize.hpp"
#include "reference/half.hpp"
#include "reference/quantized_model.hpp"
#include "reference/reference.hpp"
#include "support/gpu.hpp"

namespace intfa {

// QuantizeVGpu's parameter's name in its tests' names (gtest prints the parameter by name through
// the enums' operator<<, include/intfa/numerics.hpp).
inline std::string granularity_name(VScaleGranularity granularity) {
  switch (granularity) {
    case VScaleGranularity::kPerTensor:
      return "PerTensor";
    case VScaleGranularity::kPerChannel:
      return "PerChannel";
    case VScaleGranularity::kPerBlock:
      return "PerBlock";
  }
  return "Unknown";
}

namespace {

using testing::DeviceBuffer;

struct RowCase {
  int batch, heads, seq, head_dim, bits;
  DType input_type;
  Layout layout;
  bool smooth_k = false;
  bool rotate = false;
};

// K smoothing: the channel means the kernel wrote, within FP32 summation error of a float64 mean
// of the keys it samples. Returns how many are off.
std::size_t mean_mismatches(const std::vector<float>& device_means, const std::vector<float>& dense,
                            int heads, int seq, int head_dim) {
  const std::vector<double> means =
      reference::sampled_channel_means(dense.data(), heads, seq, head_dim);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < means.size(); ++i) {
    if (std::fabs(device_means[i] - means[i]) > 1e-5 * (1.0 + std::fabs(means[i]))) ++mismatches;
  }
  return mismatches;
}

std::vector<std::uint16_t> to_bits(const std::vector<float>& values, bool bf16) {
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    bits[i] = bf16 ? reference::float_to_bf16_bits(values[i])
                   : reference::float_to_f16_bits(values[i]);
  }
  return bits;
}

// "B2_H3_N1000_D128_int8_f16_BHND_smooth_k": the test's name.
std::string row_case_name(const RowCase& c) {
  return "B" + std::to_string(c.batch) + "_H" + std::to_string(c.heads) + "_N" +
         std::to_string(c.seq) + "_D" + std::to_string(c.head_dim) + "_int" +
         std::to_string(c.bits) + "_" + dtype_name(c.input_type) +
         (c.layout == Layout::kBHND ? "_BHND" : "_BNHD") + (c.smooth_k ? "_smooth_k" : "") +
         (c.rotate ? "_rotate" : "");
}
void PrintTo(const RowCase& c, std::ostream* os) {
  *os << "B=" << c.batch << " H=" << c.heads << " N=" << c.seq << " D=" << c.head_dim << " INT"
      << c.bits << " from " << dtype_name(c.input_type)
      << (c.layout == Layout::kBHND ? " BHND" : " BNHD") << (c.smooth_k ? " smooth_k" : "")
      << (c.rotate ? " rotate" : "");
}

class QuantizeRowsGpu : public ::testing::TestWithParam<RowCase> {};

TEST_P(QuantizeRowsGpu, MatchesTheCpuQuantizerExactly) {
  INTFA_REQUIRE_GPU();
  const RowCase c = GetParam();
  const bool bf16 = c.input_type == DType::kBF16;
  const TensorShape shape{c.batch, c.heads, c.seq, c.head_dim};
  const std::size_t rows = static_cast<std::size_t>(c.batch) * c.heads * c.seq;
  const std::uint64_t seed = reference::fresh_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  // Values in the input's layout; the CPU quantizer sees the same rows in dense order.
  std::vector<float> values = reference::random_values(rows * c.head_dim,
                                                       reference::Distribution::kNormal, seed);
  // With K smoothing, each (batch, head, channel) gets an offset larger than the spread, as real
  // keys have: smoothing must remove it for the quantized values to match.
  const std::vector<float> offsets = reference::random_values(
      static_cast<std::size_t>(c.batch) * c.heads * c.head_dim, reference::Distribution::kNormal,
      seed + 1);
  const TensorView input_view = TensorView::dense(nullptr, c.input_type, c.layout, shape);
  std::vector<float> dense(values.size());
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int n = 0; n < c.seq; ++n)
        for (int d = 0; d < c.head_dim; ++d) {
          const std::size_t at = b * input_view.strides[0] + h * input_view.strides[1] +
                                 n * input_view.strides[2] + d;
          const std::size_t bh = static_cast<std::size_t>(b) * c.heads + h;
          const float offset = c.smooth_k ? 8.0f * offsets[bh * c.head_dim + d] : 0.0f;
          values[at] = reference::round_to_16bit(values[at] * 3.0f + offset, bf16);
          dense[(bh * c.seq + n) * c.head_dim + d] = values[at];
        }
  DeviceBuffer input(values.size() * 2);
  input.upload(to_bits(values, bf16));
  const std::size_t row_bytes = static_cast<std::size_t>(c.head_dim) * c.bits / 8;
  DeviceBuffer output(rows * row_bytes), scales(rows * sizeof(float));
  output.fill_bytes(0xA5);
  scales.fill_bytes(0xFF);
  const std::size_t heads = static_cast<std::size_t>(c.batch) * c.heads;
  DeviceBuffer means(heads * c.head_dim * sizeof(float));
  means.fill_bytes(0xFF);
  QuantizeOptions options;
  options.bits = c.bits;
  options.rotate = c.rotate ? QKRotation::kOn : QKRotation::kOff;
  if (c.smooth_k) options.smooth_k_channel_mean = means.as<float>();
  quantize_qk(shape, TensorView::dense(input.get(), c.input_type, c.layout, shape),
              TensorView::dense(output.get(), c.bits == 8 ? DType::kI8 : DType::kI4x2,
                                Layout::kBHND, shape),
              scales.as<float>(), nullptr, options);
  const auto bytes = output.download_as<std::int8_t>(rows * row_bytes);
  const auto device_scales = scales.download_as<float>(rows);
  // The CPU quantizer subtracts the kernel's own means (checked against float64 first), one
  // (batch, head) at a time.
  reference::QuantizedRows model;
  if (c.smooth_k) {
    const auto device_means = means.download_as<float>(heads * c.head_dim);
    EXPECT_EQ(mean_mismatches(device_means, dense, static_cast<int>(heads), c.seq, c.head_dim),
              0u);
    model = reference::quantize_rows_smoothed(dense.data(), static_cast<int>(heads), c.seq,
                                              c.head_dim, c.bits, device_means.data(), c.rotate);
  } else {
    model = reference::quantize_rows(dense.data(), static_cast<int>(rows), c.head_dim, c.bits,
                                     nullptr, c.rotate);
  }
  std::size_t value_mismatches = 0, scale_mismatches = 0;
  for (std::size_t row = 0; row < rows; ++row) {
    if (std::memcmp(&device_scales[row], &model.scales[row], 4) != 0) ++scale_mismatches;
    for (int d = 0; d < c.head_dim; ++d) {
      int value = bytes[row * row_bytes + d * c.bits / 8];
      if (c.bits == 4) {
        const int nibble = (d % 2 == 0) ? (value & 0xF) : ((value >> 4) & 0xF);
        value = nibble >= 8 ? nibble - 16 : nibble;
      }
      if (value != model.values[row * c.head_dim + d]) ++value_mismatches;
    }
  }
  EXPECT_EQ(value_mismatches, 0u);
  EXPECT_EQ(scale_mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, QuantizeRowsGpu,
    ::testing::Values(RowCase{2, 3, 1000, 128, 8, DType::kF16, Layout::kBHND},
                      RowCase{1, 4, 17, 64, 8, DType::kBF16, Layout::kBNHD},
                      RowCase{1, 2, 333, 256, 8, DType::kF16, Layout::kBNHD},
                      RowCase{1, 2, 129, 128, 4, DType::kF16, Layout::kBHND},
                      RowCase{1, 1, 1, 64, 4, DType::kBF16, Layout::kBHND},
                      RowCase{2, 3, 1000, 128, 8, DType::kF16, Layout::kBHND, true},
                      RowCase{1, 2, 77, 64, 8, DType::kBF16, Layout::kBNHD, true},
                      RowCase{1, 2, 1, 256, 4, DType::kF16, Layout::kBHND, true},
                      // Longer than the mean's sample of 256 keys: the sample, not all keys.
                      RowCase{1, 2, 3001, 128, 8, DType::kF16, Layout::kBHND, true},
                      RowCase{2, 3, 1000, 128, 8, DType::kF16, Layout::kBHND, false, true},
                      RowCase{1, 4, 17, 64, 8, DType::kBF16, Layout::kBNHD, false, true},
                      RowCase{1, 2, 333, 256, 8, DType::kF16, Layout::kBNHD, true, true},
                      RowCase{1, 2, 129, 128, 4, DType::kF16, Layout::kBHND, true, true}),
    [](const ::testing::TestParamInfo<RowCase>& param_info) {
      return row_case_name(param_info.param);
    });

// Rows that random N(0, 1) data almost never holds, through the same kernel and CPU quantizer:
// products exactly halfway between two integers (rounded half to even, both signs, up and down),
// a NaN and an infinity among finite values (the NaN, and a row whose scale is infinite, quantize
// to 0), a row of zeros, rows of tiny values (FP16 subnormals, normal in FP32) and BF16 rows whose
// FP32 scale is subnormal and its inverse infinite (RowScale::clamps: every product saturates and
// is clamped to +-range, where F2I's saturation alone gives -128). quantize_8's one F2I per
// value gives all of them; a rounding by the 1.5 * 2^23 trick (two FP32 instructions, tried on
// 2026-11-30 and not kept: no measurable gain) gave NaN products -1, which this test caught.
TEST(QuantizeRowsGpu, RoundsTiesNaNsAndInfinitiesAsTheCpuQuantizer) {
  INTFA_REQUIRE_GPU();
  const std::uint64_t seed = reference::fresh_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float infinity = std::numeric_limits<float>::infinity();
  for (const int bits : {8, 4}) {
    for (const DType dtype : {DType::kF16, DType::kBF16}) {
      const bool bf16 = dtype == DType::kBF16;
      const int head_dim = 128, rows = 64;
      const float range = bits == 8 ? 127.0f : 7.0f;
      std::vector<float> values = reference::random_values(
          static_cast<std::size_t>(rows) * head_dim, reference::Distribution::kNormal, seed);
      for (int row = 0; row < rows; ++row) {
        float* x = values.data() + static_cast<std::size_t>(row) * head_dim;
        const int kind = row % 8;
        for (int c = 0; c < head_dim; ++c) {
          // Ties: the row's maximum is the range, so the scale is 1 and x / scale is x itself;
          // the halves run over every integer the range holds, each sign on even and odd
          // integers alike (so rounding toward one infinity cannot pass).
          const float half_step = static_cast<float>(c % static_cast<int>(range)) + 0.5f;
          if (kind == 0) x[c] = c == 0 ? range : ((c / 2) % 2 == 0 ? half_step : -half_step);
          if (kind == 5) x[c] = 0.0f;
          if (kind == 6) x[c] *= 6.0e-8f;  // FP16 subnormals (BF16: tiny normals)
          // BF16 only (FP16 has no such values): normal FP32 values up to 2e-37, so the INT8
          // scale max / 127 is subnormal and 1 / scale overflows (no subnormal input: the kernel
          // flushes those, the CPU quantizer does not).
          if (kind == 7 && bf16) {
            x[c] = (c % 2 == 0 ? 1.0f : -1.0f) * 2.0e-37f * (0.07f + 0.93f * c / (head_dim - 1));
          }
          x[c] = reference::round_to_16bit(x[c], bf16);
        }
        // One special value each, at positions that differ from row to row.
        if (kind == 1) x[(row * 7) % head_dim] = nan;
        if (kind == 2) x[(row * 5) % head_dim] = infinity;
        if (kind == 3) x[(row * 3) % head_dim] = -infinity;
        if (kind == 4) {
          x[1] = nan;
          x[9] = infinity;
        }
      }
      const TensorShape shape{1, 1, rows, head_dim};
      DeviceBuffer input(values.size() * 2);
      input.upload(to_bits(values, bf16));
      const std::size_t row_bytes = static_cast<std::size_t>(head_dim) * bits / 8;
      DeviceBuffer output(rows * row_bytes), scales(rows * sizeof(float));
      output.fill_bytes(0xA5);
      scales.fill_bytes(0xFF);
      QuantizeOptions options;
      options.bits = bits;
      quantize_qk(shape, TensorView::dense(input.get(), dtype, Layout::kBHND, shape),
                  TensorView::dense(output.get(), bits == 8 ? DType::kI8 : DType::kI4x2,
                                    Layout::kBHND, shape),
                  scales.as<float>(), nullptr, options);
      const auto bytes = output.download_as<std::int8_t>(rows * row_bytes);
      const auto device_scales = scales.download_as<float>(rows);
      const reference::QuantizedRows model =
          reference::quantize_rows(values.data(), rows, head_dim, bits, nullptr, false);
      for (int row = 0; row < rows; ++row) {
        int mismatches = 0;
        for (int d = 0; d < head_dim; ++d) {
          int value = bytes[row * row_bytes + d * bits / 8];
          if (bits == 4) {
            const int nibble = (d % 2 == 0) ? (value & 0xF) : ((value >> 4) & 0xF);
            value = nibble >= 8 ? nibble - 16 : nibble;
          }
          if (value != model.values[static_cast<std::size_t>(row) * head_dim + d]) ++mismatches;
        }
        EXPECT_EQ(mismatches, 0) << "INT" << bits << " " << dtype_name(dtype) << " row " << row
                                 << " (kind " << row % 8 << ")";
        EXPECT_EQ(std::memcmp(&device_scales[row], &model.scales[row], 4), 0)
            << "INT" << bits << " " << dtype_name(dtype) << " row " << row;
      }
    }
  }
}

// Q of a smoothed K: the kernel writes q . (the mean of its KV head) per row from the original
// 16-bit row (GQA: query head h reads KV head h / (heads_q / heads_kv)), rotated or not, and the
// quantized Q is exactly the one without the term.
TEST(QuantizeRowsGpuLseTerm, EachRowDotsTheMeanOfItsKeyValueHead) {
  INTFA_REQUIRE_GPU();
  const std::uint64_t seed = reference::fresh_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  for (const int head_dim : {64, 128, 256}) {
    for (const bool rotate : {false, true}) {
      const int batch = 2, heads_q = 6, heads_kv = 2, seq = 77;
      const TensorShape shape{batch, heads_q, seq, head_dim};
      const std::size_t rows = static_cast<std::size_t>(batch) * heads_q * seq;
      std::vector<float> q =
          reference::random_values(rows * head_dim, reference::Distribution::kNormal, seed);
      for (float& value : q) value = reference::round_to_16bit(value * 2.0f, false);
      std::vector<float> means =
          reference::random_values(static_cast<std::size_t>(batch) * heads_kv * head_dim,
                                   reference::Distribution::kNormal, seed + 1);
      for (float& mean : means) mean *= 4.0f;
      DeviceBuffer input(q.size() * 2), output(rows * head_dim), scales(rows * 4), terms(rows * 4),
          device_means(means.size() * 4);
      input.upload(to_bits(q, false));
      device_means.upload(means);
      terms.fill_bytes(0xFF);
      QuantizeOptions options;
      options.rotate = rotate ? QKRotation::kOn : QKRotation::kOff;
      options.k_channel_mean = device_means.as<float>();
      options.k_channel_mean_heads = heads_kv;
      options.q_dot_k_mean = terms.as<float>();
      quantize_qk(shape, TensorView::dense(input.get(), DType::kF16, Layout::kBHND, shape),
                  TensorView::dense(output.get(), DType::kI8, Layout::kBHND, shape),
                  scales.as<float>(), nullptr, options);
      const auto device_terms = terms.download_as<float>(rows);
      const std::vector<double> exact =
          reference::q_dot_k_means(q.data(), batch, heads_q, heads_kv, seq, head_dim, means.data());
      std::size_t term_mismatches = 0;
      for (std::size_t row = 0; row < rows; ++row) {
        // FP32 sums of head_dim products of magnitude ~2 * 4: relative 1e-5 of their sum.
        if (std::fabs(device_terms[row] - exact[row]) > 1e-5 * 8.0 * head_dim) ++term_mismatches;
      }
      EXPECT_EQ(term_mismatches, 0u) << "d=" << head_dim << " rotate=" << rotate;
      const reference::QuantizedRows model =
          reference::quantize_rows(q.data(), static_cast<int>(rows), head_dim, 8, nullptr, rotate);
      const auto bytes = output.download_as<std::int8_t>(rows * head_dim);
      const auto device_scales = scales.download_as<float>(rows);
      EXPECT_EQ(std::memcmp(bytes.data(), model.values.data(), bytes.size()), 0)
          << "d=" << head_dim << " rotate=" << rotate;
      EXPECT_EQ(std::memcmp(device_scales.data(), model.scales.data(), rows * 4), 0)
          << "d=" << head_dim << " rotate=" << rotate;
    }
  }
}

class QuantizeVGpu : public ::testing::TestWithParam<VScaleGranularity> {};

TEST_P(QuantizeVGpu, WritesTheDocumentedLayoutAndScalesExactly) {
  INTFA_REQUIRE_GPU();
  const VScaleGranularity granularity = GetParam();
  for (const TensorShape shape : {TensorShape{2, 3, 1000, 128}, TensorShape{1, 2, 17, 64},
                                  TensorShape{1, 1, 130, 256}}) {
    const std::size_t count =
        static_cast<std::size_t>(shape.batch) * shape.heads * shape.seq * shape.head_dim;
    const std::uint64_t seed = reference::fresh_seed();
    std::vector<float> values =
        reference::random_values(count, reference::Distribution::kNormal, seed);
    for (float& v : values) v = reference::round_to_16bit(v, false);
    DeviceBuffer input(count * 2);
    input.upload(to_bits(values, false));
    const std::size_t scale_count =
        v_scale_count(granularity, shape.batch, shape.heads, shape.seq, shape.head_dim);
    DeviceBuffer output(v_int8_bytes(shape.batch, shape.heads, shape.seq, shape.head_dim));
    DeviceBuffer scales(scale_count * sizeof(float));
    output.fill_bytes(0xA5);
    scales.fill_bytes(0xFF);
    quantize_v(shape, TensorView::dense(input.get(), DType::kF16, Layout::kBHND, shape),
               output.get(), scales.as<float>(), granularity, nullptr);
    const reference::QuantizedV model =
        reference::quantize_v(values.data(), shape.batch, shape.heads, shape.seq, shape.head_dim,
                              static_cast<reference::VGranularity>(granularity));
    ASSERT_EQ(model.scales.size(), scale_count);
    const auto device_scales = scales.download_as<float>(scale_count);
    EXPECT_EQ(std::memcmp(device_scales.data(), model.scales.data(), scale_count * 4), 0)
        << "seed " << seed;
    const auto bytes = output.download_as<std::int8_t>(output.bytes());
    const int padded = v_padded_seq(shape.seq);
    std::size_t mismatches = 0;
    for (int bh = 0; bh < shape.batch * shape.heads; ++bh)
      for (int c = 0; c < shape.head_dim; ++c)
        for (int token = 0; token < padded; ++token) {
          // Documented position of a token inside its group of 16 (README.md).
          const int position = (token & ~15) | (((token >> 1) & 3) << 2) |
                               (((token >> 3) & 1) << 1) | (token & 1);
          const int expected =
              token < shape.seq
                  ? model.values[(static_cast<std::size_t>(bh) * shape.seq + token) * shape.head_dim + c]
                  : 0;
          if (bytes[(static_cast<std::size_t>(bh) * shape.head_dim + c) * padded + position] !=
              expected) {
            ++mismatches;
          }
        }
    EXPECT_EQ(mismatches, 0u) << "seed " << seed << " seq " << shape.seq;
  }
}

INSTANTIATE_TEST_SUITE_P(Granularities, QuantizeVGpu,
                         ::testing::Values(VScaleGranularity::kPerTensor,
                                           VScaleGranularity::kPerChannel,
                                           VScaleGranularity::kPerBlock),
                         [](const ::testing::TestParamInfo<VScaleGranularity>& param_info) {
                           return granularity_name(param_info.param);
                         });

}  // namespace
}  // namespace intfa
