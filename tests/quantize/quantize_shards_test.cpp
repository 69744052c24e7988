// The quantize passes a sequence split across devices takes (context parallel: each shard
// quantized as quantize_qk and quantize_v of the whole sequence would quantize it). K: the
// whole sequence's sampled rows (k_channel_mean_sample_rows), gathered in order, have its means
// bit for bit (k_channel_means), and each shard smoothed by them (smooth_k_given_mean) is the
// whole's rows bit for bit. V: the elementwise maximum of the shards' v_scales is the whole's
// scales, and each shard quantized with it (quantize_v_with_scales) is the whole's columns. The
// argument checks run without a GPU; the rest skips without one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "attention/attention_test_support.hpp"
#include "intfa/attention.hpp"
#include "intfa/quantize.hpp"
#include "reference/half.hpp"
#include "reference/reference.hpp"
#include "support/gpu.hpp"
#include "support/invalid_field.hpp"

namespace intfa {
namespace {

using testing::DeviceBuffer;
using testing::fake_pointer;
using testing::invalid_field;

TEST(QuantizeShards, SampleRowsAreEvenlySpreadAndCoverShortSequences) {
  for (int seq : {1, 7, 255, 256, 257, 1000, 4096, 131072, 1 << 20}) {
    const std::vector<int> rows = k_channel_mean_sample_rows(seq);
    const int count = static_cast<int>(rows.size());
    EXPECT_EQ(count, std::min(seq, 256)) << "seq " << seq;
    EXPECT_EQ(rows.front(), 0) << "seq " << seq;
    EXPECT_LT(rows.back(), seq) << "seq " << seq;
    // Increasing, with gaps that differ by at most one row (evenly spread).
    int smallest_gap = seq, largest_gap = 0;
    for (int i = 1; i < count; ++i) {
      const int gap = rows[i] - rows[i - 1];
      smallest_gap = std::min(smallest_gap, gap);
      largest_gap = std::max(largest_gap, gap);
    }
    if (count > 1) {
      EXPECT_GE(smallest_gap, 1) << "seq " << seq;
      EXPECT_LE(largest_gap - smallest_gap, 1) << "seq " << seq;
    }
  }
  EXPECT_EQ(invalid_field([] { k_channel_mean_sample_rows(0); }), "seq");
}

// Automatic rotation's decisions: written by K (rotated_heads), read by Q or by K's shards
// (k_rotated_heads), one of them and only with QKRotation::kAuto.
TEST(QuantizeRotation, BadArgumentsNameTheirField) {
  const TensorShape shape{1, 2, 10, 64};
  const TensorView input = TensorView::dense(fake_pointer(), DType::kF16, Layout::kBHND, shape);
  const TensorView output = TensorView::dense(fake_pointer(), DType::kI8, Layout::kBHND, shape);
  float* scales = static_cast<float*>(fake_pointer());
  int* heads = static_cast<int*>(fake_pointer());
  const auto refused = [&](const QuantizeOptions& options) {
    return invalid_field([&] { quantize_qk(shape, input, output, scales, nullptr, options); });
  };
  QuantizeOptions bad;
  bad.rotate = static_cast<QKRotation>(3);
  EXPECT_EQ(refused(bad), "options.rotate");
  for (QKRotation rotation : {QKRotation::kOff, QKRotation::kOn}) {
    QuantizeOptions writes, reads;
    writes.rotate = reads.rotate = rotation;
    writes.rotated_heads = heads;
    reads.k_rotated_heads = heads;
    EXPECT_EQ(refused(writes), "options.rotated_heads") << rotation;
    EXPECT_EQ(refused(reads), "options.k_rotated_heads") << rotation;
  }
  QuantizeOptions neither;
  neither.rotate = QKRotation::kAuto;
  EXPECT_EQ(refused(neither), "options.k_rotated_heads");
  QuantizeOptions both = neither;
  both.rotated_heads = heads;
  both.k_rotated_heads = heads;
  EXPECT_EQ(refused(both), "options.rotated_heads");
  QuantizeOptions query_writes = neither;  // Q (the LSE term's means) deciding for itself
  query_writes.k_channel_mean = static_cast<const float*>(fake_pointer());
  query_writes.q_dot_k_mean = static_cast<float*>(fake_pointer());
  query_writes.rotated_heads = heads;
  EXPECT_EQ(refused(query_writes), "options.rotated_heads");
  QuantizeOptions shard_writes = neither;  // a shard must take its sequence's decisions
  shard_writes.smooth_k_given_mean = static_cast<const float*>(fake_pointer());
  shard_writes.rotated_heads = heads;
  EXPECT_EQ(refused(shard_writes), "options.rotated_heads");
  QuantizeOptions misaligned = neither;
  misaligned.k_rotated_heads = static_cast<const int*>(fake_pointer(2));
  EXPECT_EQ(refused(misaligned), "options.k_rotated_heads");
}

TEST(QuantizeShards, BadArgumentsNameTheirField) {
  const TensorShape shape{1, 2, 10, 64};
  const TensorView input = TensorView::dense(fake_pointer(), DType::kF16, Layout::kBHND, shape);
  const TensorView output = TensorView::dense(fake_pointer(), DType::kI8, Layout::kBHND, shape);
  float* scales = static_cast<float*>(fake_pointer());
  QuantizeOptions both;
  both.smooth_k_channel_mean = static_cast<float*>(fake_pointer());
  both.smooth_k_given_mean = static_cast<const float*>(fake_pointer());
  EXPECT_EQ(invalid_field([&] { quantize_qk(shape, input, output, scales, nullptr, both); }),
            "options.smooth_k_given_mean");
  QuantizeOptions for_q;
  for_q.k_channel_mean = static_cast<const float*>(fake_pointer());
  for_q.q_dot_k_mean = static_cast<float*>(fake_pointer());
  for_q.smooth_k_given_mean = static_cast<const float*>(fake_pointer());
  EXPECT_EQ(invalid_field([&] { quantize_qk(shape, input, output, scales, nullptr, for_q); }),
            "options.smooth_k_given_mean");
  QuantizeOptions misaligned;
  misaligned.smooth_k_given_mean = static_cast<const float*>(fake_pointer(2));
  EXPECT_EQ(invalid_field([&] { quantize_qk(shape, input, output, scales, nullptr, misaligned); }),
            "options.smooth_k_given_mean");

  EXPECT_EQ(invalid_field([&] { k_channel_means(shape, input, nullptr, nullptr); }), "means");
  EXPECT_EQ(invalid_field([&] {
              k_channel_means(shape, input, nullptr, nullptr, static_cast<int*>(fake_pointer(2)));
            }),
            "rotated_heads");
  EXPECT_EQ(invalid_field([&] {
              k_channel_means(shape, input, static_cast<float*>(fake_pointer(2)), nullptr);
            }),
            "means");
  EXPECT_EQ(invalid_field([&] {
              k_channel_means({1, 0, 10, 64}, input, scales, nullptr);
            }),
            "shape.heads");

  for (bool scales_only : {true, false}) {
    EXPECT_EQ(invalid_field([&] {
                if (scales_only) {
                  v_scales(shape, input, scales, VScaleGranularity::kPerBlock, nullptr);
                } else {
                  quantize_v_with_scales(shape, input, fake_pointer(), scales,
                                         VScaleGranularity::kPerBlock, nullptr);
                }
              }),
              "granularity")
        << (scales_only ? "v_scales" : "quantize_v_with_scales");
  }
  EXPECT_EQ(invalid_field([&] {
              quantize_v_with_scales(shape, input, nullptr, scales, VScaleGranularity::kPerChannel,
                                     nullptr);
            }),
            "output");
  EXPECT_EQ(invalid_field(
                [&] { v_scales(shape, input, nullptr, VScaleGranularity::kPerChannel, nullptr); }),
            "scales");
}

struct ShardCase {
  const char* name;
  int batch, heads, seq, head_dim;
  int shards;  // equal, contiguous
  VScaleGranularity v_granularity;
  bool rotate, bf16;
};

void PrintTo(const ShardCase& c, std::ostream* os) {
  *os << c.name;
}

class QuantizeShardsGpu : public ::testing::TestWithParam<ShardCase> {};

std::vector<std::uint8_t> bytes_of(const DeviceBuffer& buffer) {
  return buffer.download_as<std::uint8_t>(buffer.bytes());
}

TEST_P(QuantizeShardsGpu, EachShardQuantizesAsTheWholeSequence) {
  INTFA_REQUIRE_GPU();
  const ShardCase c = GetParam();
  const std::uint64_t seed = reference::fresh_seed();
  const std::size_t rows = static_cast<std::size_t>(c.batch) * c.heads * c.seq;
  const std::size_t count = rows * c.head_dim;
  // K with channel offsets (what smoothing takes out); V with channels of different magnitudes.
  const std::vector<float> k =
      reference::random_values(count, reference::Distribution::kNormal, seed);
  const std::vector<float> v =
      reference::random_values(count, reference::Distribution::kNormal, seed + 1);
  std::vector<std::uint16_t> k_bits(count), v_bits(count);
  for (std::size_t i = 0; i < count; ++i) {
    const int channel = static_cast<int>(i % c.head_dim);
    const float k_value = k[i] + 0.5f * static_cast<float>(channel % 5);
    const float v_value = v[i] * static_cast<float>(1 + channel % 3);
    k_bits[i] = reference::float_to_16bit_bits(k_value, c.bf16);
    v_bits[i] = reference::float_to_16bit_bits(v_value, c.bf16);
  }
  DeviceBuffer k_input(count * 2), v_input(count * 2);
  k_input.upload(k_bits);
  v_input.upload(v_bits);
  const DType dtype = c.bf16 ? DType::kBF16 : DType::kF16;
  const TensorShape whole_shape{c.batch, c.heads, c.seq, c.head_dim};
  const TensorView k_whole = TensorView::dense(k_input.get(), dtype, Layout::kBHND, whole_shape);
  const TensorView v_whole = TensorView::dense(v_input.get(), dtype, Layout::kBHND, whole_shape);
  const std::size_t mean_floats = static_cast<std::size_t>(c.batch) * c.heads * c.head_dim;
  const std::size_t v_scale_floats =
      v_scale_count(c.v_granularity, c.batch, c.heads, c.seq, c.head_dim);

  // The whole sequence, as one call quantizes it.
  DeviceBuffer whole_k8(count), whole_k_scales(rows * 4), whole_mean(mean_floats * 4);
  DeviceBuffer whole_v8(v_int8_bytes(c.batch, c.heads, c.seq, c.head_dim));
  DeviceBuffer whole_v_scales(v_scale_floats * 4);
  QuantizeOptions whole_options;
  whole_options.rotate = c.rotate ? QKRotation::kOn : QKRotation::kOff;
  whole_options.smooth_k_channel_mean = whole_mean.as<float>();
  quantize_qk(whole_shape, k_whole,
              TensorView::dense(whole_k8.get(), DType::kI8, Layout::kBHND, whole_shape),
              whole_k_scales.as<float>(), nullptr, whole_options);
  quantize_v(whole_shape, v_whole, whole_v8.get(), whole_v_scales.as<float>(), c.v_granularity,
             nullptr);

  // K's sampled rows gathered on the host (as the ranks' all-reduce would), their means.
  const std::vector<int> sample_rows = k_channel_mean_sample_rows(c.seq);
  const int samples = static_cast<int>(sample_rows.size());
  std::vector<std::uint16_t> gathered(static_cast<std::size_t>(c.batch) * c.heads * samples *
                                      c.head_dim);
  for (int bh = 0; bh < c.batch * c.heads; ++bh) {
    for (int s = 0; s < samples; ++s) {
      std::copy_n(
          k_bits.begin() + (static_cast<std::size_t>(bh) * c.seq + sample_rows[s]) * c.head_dim,
          c.head_dim, gathered.begin() + (static_cast<std::size_t>(bh) * samples + s) * c.head_dim);
    }
  }
  DeviceBuffer samples_input(gathered.size() * 2), means(mean_floats * 4);
  samples_input.upload(gathered);
  means.fill_bytes(0xA5);
  const TensorShape samples_shape{c.batch, c.heads, samples, c.head_dim};
  k_channel_means(samples_shape,
                  TensorView::dense(samples_input.get(), dtype, Layout::kBHND, samples_shape),
                  means.as<float>(), nullptr);
  EXPECT_EQ(bytes_of(means), bytes_of(whole_mean)) << "K's means, seed " << seed;

  // V's scales: the elementwise maximum of the shards'.
  const int shard_seq = c.seq / c.shards;
  const TensorShape shard_shape{c.batch, c.heads, shard_seq, c.head_dim};
  auto shard_view = [&](const DeviceBuffer& input, int shard) {
    TensorView view = k_whole;  // the whole's strides, from the shard's first row
    view.data = static_cast<std::uint16_t*>(input.get()) +
                static_cast<std::size_t>(shard) * shard_seq * c.head_dim;
    return view;
  };
  std::vector<float> sequence_scales(v_scale_floats, 0.0f);
  for (int shard = 0; shard < c.shards; ++shard) {
    DeviceBuffer scales(v_scale_floats * 4);
    scales.fill_bytes(0xA5);
    v_scales(shard_shape, shard_view(v_input, shard), scales.as<float>(), c.v_granularity, nullptr);
    const std::vector<float> mine = scales.download_as<float>(v_scale_floats);
    for (std::size_t i = 0; i < v_scale_floats; ++i) {
      sequence_scales[i] = std::max(sequence_scales[i], mine[i]);
    }
  }
  EXPECT_EQ(sequence_scales, whole_v_scales.download_as<float>(v_scale_floats))
      << "V's scales, seed " << seed;
  DeviceBuffer given_scales(v_scale_floats * 4);
  given_scales.upload(sequence_scales);

  // Each shard: K's rows and scales, V's columns, against the whole's.
  const std::vector<std::uint8_t> k8 = bytes_of(whole_k8);
  const std::vector<float> k_scales = whole_k_scales.download_as<float>(rows);
  const std::vector<std::uint8_t> v8 = bytes_of(whole_v8);
  const int padded = v_padded_seq(c.seq), shard_padded = v_padded_seq(shard_seq);
  for (int shard = 0; shard < c.shards; ++shard) {
    const std::size_t shard_rows = static_cast<std::size_t>(c.batch) * c.heads * shard_seq;
    DeviceBuffer shard_k8(shard_rows * c.head_dim), shard_k_scales(shard_rows * 4);
    DeviceBuffer shard_v8(v_int8_bytes(c.batch, c.heads, shard_seq, c.head_dim));
    for (DeviceBuffer* buffer : {&shard_k8, &shard_k_scales, &shard_v8}) buffer->fill_bytes(0xA5);
    QuantizeOptions options;
    options.rotate = c.rotate ? QKRotation::kOn : QKRotation::kOff;
    options.smooth_k_given_mean = means.as<float>();
    quantize_qk(shard_shape, shard_view(k_input, shard),
                TensorView::dense(shard_k8.get(), DType::kI8, Layout::kBHND, shard_shape),
                shard_k_scales.as<float>(), nullptr, options);
    quantize_v_with_scales(shard_shape, shard_view(v_input, shard), shard_v8.get(),
                           given_scales.as<float>(), c.v_granularity, nullptr);
    const std::vector<std::uint8_t> mine_k8 = bytes_of(shard_k8);
    const std::vector<float> mine_k_scales = shard_k_scales.download_as<float>(shard_rows);
    const std::vector<std::uint8_t> mine_v8 = bytes_of(shard_v8);
    std::size_t k_differing = 0, scale_differing = 0, v_differing = 0;
    for (int bh = 0; bh < c.batch * c.heads; ++bh) {
      for (int row = 0; row < shard_seq; ++row) {
        const std::size_t mine_row = static_cast<std::size_t>(bh) * shard_seq + row;
        const std::size_t whole_row = static_cast<std::size_t>(bh) * c.seq +
                                      static_cast<std::size_t>(shard) * shard_seq + row;
        scale_differing += mine_k_scales[mine_row] != k_scales[whole_row];
        for (int d = 0; d < c.head_dim; ++d) {
          k_differing += mine_k8[mine_row * c.head_dim + d] != k8[whole_row * c.head_dim + d];
          // The INT8 V layout: [batch, heads, head_dim, padded seq].
          const std::size_t column = static_cast<std::size_t>(bh) * c.head_dim + d;
          v_differing += mine_v8[column * shard_padded + row] !=
                         v8[column * padded + static_cast<std::size_t>(shard) * shard_seq + row];
        }
      }
    }
    EXPECT_EQ(k_differing, 0u) << "K's rows, shard " << shard << ", seed " << seed;
    EXPECT_EQ(scale_differing, 0u) << "K's scales, shard " << shard << ", seed " << seed;
    EXPECT_EQ(v_differing, 0u) << "V, shard " << shard << ", seed " << seed;
  }
}

// Fields: name, batch, heads, seq, head_dim, shards, V's granularity, rotate, bf16.
// clang-format off
const ShardCase kShardCases[] = {
    {"D128_Seq2048_Shards4_PerChannel", 2, 3, 2048, 128, 4, VScaleGranularity::kPerChannel, false, false},
    {"D128_Seq1024_Shards2_PerChannel_Rotate_Bf16", 1, 4, 1024, 128, 2, VScaleGranularity::kPerChannel, true, true},
    {"D64_Seq768_Shards3_PerTensor", 1, 2, 768, 64, 3, VScaleGranularity::kPerTensor, false, false},
    // Fewer keys than samples: every row is sampled, from every shard.
    {"D256_Seq192_Shards2_PerChannel_Rotate", 1, 2, 192, 256, 2, VScaleGranularity::kPerChannel, true, false},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(Cases, QuantizeShardsGpu, ::testing::ValuesIn(kShardCases),
                         [](const ::testing::TestParamInfo<ShardCase>& param_info) {
                           return std::string(param_info.param.name);
                         });

}  // namespace
}  // namespace intfa
