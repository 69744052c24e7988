// merge_states on a GPU (skipped without one) against the float64 merge of the same states: out of
// place and in place, FP16 and BF16, attention_forward's [batch, heads, seq] LSE and FlashInfer's
// [seq, heads] one, with rows where one state or both have LSE -inf.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "decode/paged_test_support.hpp"

namespace intfa::testing {
namespace {

struct MergeCase {
  bool bf16;
  bool in_place;
  bool seq_major;  // FlashInfer's [seq, heads, head_dim] values and [seq, heads] LSE (batch 1)
  int head_dim;
};

void PrintTo(const MergeCase& c, std::ostream* os) {
  *os << (c.bf16 ? "bf16" : "f16") << (c.in_place ? " in place" : "")
      << (c.seq_major ? " [seq, heads]" : " [batch, heads, seq]") << " d" << c.head_dim;
}

class MergeStatesGpu : public ::testing::TestWithParam<MergeCase> {};

TEST_P(MergeStatesGpu, MatchesTheFloat64MergeOfTheSameStates) {
  INTFA_REQUIRE_GPU();
  const MergeCase c = GetParam();
  const std::uint64_t seed = reference::fresh_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  const TensorShape shape{c.seq_major ? 1 : 2, 4, 33, c.head_dim};
  const std::size_t rows = static_cast<std::size_t>(shape.batch) * shape.heads * shape.seq;
  const std::size_t count = rows * c.head_dim;
  const std::vector<float> a = random_16bit(count, seed, c.bf16);
  const std::vector<float> b = random_16bit(count, seed + 1, c.bf16);
  std::vector<float> lse_a =
      reference::random_values(rows, reference::Distribution::kNormal, seed + 2);
  std::vector<float> lse_b =
      reference::random_values(rows, reference::Distribution::kNormal, seed + 3);
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  for (std::size_t r = 0; r < rows; ++r) {
    lse_a[r] *= 5.0f;
    lse_b[r] *= 5.0f;
    if (r % 7 == 1) lse_a[r] = minus_infinity;              // only b counts
    if (r % 11 == 2) lse_b[r] = minus_infinity;             // only a counts
    if (r % 13 == 3) lse_a[r] = lse_b[r] = minus_infinity;  // neither: zeros, -inf
  }
  const Layout layout = c.seq_major ? Layout::kBNHD : Layout::kBHND;
  // LSE strides {batch, heads, seq}: [b][h][s] dense, or [s][h] for the sequence-major case.
  const std::array<std::int64_t, 3> lse_strides =
      c.seq_major ? std::array<std::int64_t, 3>{0, 1, shape.heads}
                  : std::array<std::int64_t, 3>{static_cast<std::int64_t>(shape.heads) * shape.seq,
                                                shape.seq, 1};
  // The host arrays are in the device layout already: element (b, h, s, c) sits where the view
  // says; the reference walks them through the same strides.
  DeviceBuffer a_device(count * 2), b_device(count * 2), out_device(count * 2),
      lse_a_device(rows * 4), lse_b_device(rows * 4), out_lse_device(rows * 4);
  a_device.upload(to_16bit(a, c.bf16));
  b_device.upload(to_16bit(b, c.bf16));
  lse_a_device.upload(lse_a);
  lse_b_device.upload(lse_b);
  out_device.fill_bytes(0xFF);
  out_lse_device.fill_bytes(0xFF);
  const DType dtype = c.bf16 ? DType::kBF16 : DType::kF16;
  auto state = [&](DeviceBuffer& values, DeviceBuffer& lse) {
    AttentionState s;
    s.values = TensorView::dense(values.get(), dtype, layout, shape);
    s.lse = lse.as<float>();
    s.lse_strides = lse_strides;
    return s;
  };
  const AttentionState state_a = state(a_device, lse_a_device);
  const AttentionState state_b = state(b_device, lse_b_device);
  const AttentionState out = c.in_place ? state_a : state(out_device, out_lse_device);
  Stream stream;
  merge_states(shape, state_a, state_b, out, stream.get());
  stream.synchronize();
  const std::vector<float> merged =
      from_16bit((c.in_place ? a_device : out_device).download_as<std::uint16_t>(count), c.bf16);
  const std::vector<float> merged_lse =
      (c.in_place ? lse_a_device : out_lse_device).download_as<float>(rows);

  const TensorView view = TensorView::dense(nullptr, dtype, layout, shape);
  std::vector<double> expected(count), expected_lse(rows);
  std::vector<float> actual(count), actual_lse(rows);
  std::size_t row = 0;
  for (int bi = 0; bi < shape.batch; ++bi)
    for (int h = 0; h < shape.heads; ++h)
      for (int s = 0; s < shape.seq; ++s, ++row) {
        const std::size_t lse_at =
            static_cast<std::size_t>(bi * lse_strides[0] + h * lse_strides[1] + s * lse_strides[2]);
        const double la = lse_a[lse_at], lb = lse_b[lse_at];
        const double m = std::max(la, lb);
        const double wa = std::isinf(la) ? 0.0 : std::exp(la - m);
        const double wb = std::isinf(lb) ? 0.0 : std::exp(lb - m);
        expected_lse[row] = std::isinf(m) ? m : m + std::log(wa + wb);
        actual_lse[row] = merged_lse[lse_at];
        for (int ch = 0; ch < shape.head_dim; ++ch) {
          const std::size_t at = static_cast<std::size_t>(
              bi * view.strides[0] + h * view.strides[1] + s * view.strides[2] + ch);
          expected[row * shape.head_dim + ch] =
              std::isinf(m) ? 0.0 : (wa * a[at] + wb * b[at]) / (wa + wb);
          actual[row * shape.head_dim + ch] = merged[at];
        }
      }
  EXPECT_LE(reference::compare(expected.data(), actual.data(), count).relative_l2,
            c.bf16 ? 5e-3 : 1e-3);
  EXPECT_LE(lse_error(expected_lse, actual_lse.data(), rows), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MergeStatesGpu,
    ::testing::Values(MergeCase{false, false, false, 128}, MergeCase{false, true, false, 64},
                      MergeCase{true, false, true, 256}, MergeCase{true, true, true, 128}),
    [](const ::testing::TestParamInfo<MergeCase>& param_info) {
      const MergeCase& c = param_info.param;
      return std::string(c.bf16 ? "Bf16" : "F16") + (c.in_place ? "_InPlace" : "") +
             (c.seq_major ? "_SeqMajor" : "") + "_D" + std::to_string(c.head_dim);
    });

}  // namespace
}  // namespace intfa::testing
