// The attention kernels on a GPU against the CPU references (skipped without a GPU). Every case
// draws fresh random inputs; the seed is printed so a failure can be replayed.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_test_support.hpp"
#include "intfa/attention.hpp"
#include "reference/attention_check.hpp"
#include "reference/reference.hpp"
#include "spec/attention_spec.hpp"
#include "support/gpu.hpp"

namespace intfa {
namespace {

using reference::CheckCase;
using reference::CheckResult;
using testing::make_case;
using testing::Shape;

// Tolerances: against the quantized model only rounding-order differences remain; against
// float64 the quantization error of each variant is bounded loosely here (the accuracy table in
// bench/RESULTS.md is where it is measured).
constexpr double kModelRelativeL2 = 1e-3;
constexpr double kLseAbsoluteError = 1e-3;

// The heuristic's config, made explicit so the model steps through the same key tiles (a tuning
// database on the test machine must not change what is tested).
void use_heuristic_config(CheckCase& check) {
  if (check.options.config) return;
  attention::SpecRequest request;
  request.head_dim = check.problem.head_dim;
  request.variant = check.problem.variant;
  check.options.config = attention::heuristic_config(request);
}

CheckResult expect_correct(CheckCase check, double f64_bound) {
  use_heuristic_config(check);
  const CheckResult result = reference::run_check(check);
  std::printf("  %s\n    %s\n", check.to_string().c_str(), result.to_string().c_str());
  const std::string where = check.to_string();
  EXPECT_EQ(result.unwritten_outputs, 0u) << where;
  EXPECT_EQ(result.vs_model.non_finite, 0u) << where;
  EXPECT_LE(result.vs_model.relative_l2, kModelRelativeL2) << where;
  EXPECT_EQ(result.q_mismatches, 0u) << where;
  EXPECT_EQ(result.k_mismatches, 0u) << where;
  EXPECT_EQ(result.v_mismatches, 0u) << where;
  EXPECT_EQ(result.scale_mismatches, 0u) << where;
  EXPECT_EQ(result.mean_mismatches, 0u) << where;
  EXPECT_EQ(result.lse_term_mismatches, 0u) << where;
  EXPECT_EQ(result.rotation_mismatches, 0u) << where;
  if (check.with_lse) {
    EXPECT_EQ(result.lse_infinity_mismatches, 0u) << where;
    EXPECT_LE(result.lse_max_error_past_ties, kLseAbsoluteError) << where;
  }
  if (check.compare_to_f64) {
    EXPECT_LE(result.vs_f64.relative_l2, f64_bound) << where;
  }
  return result;
}

class AttentionGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(AttentionGpu, FullInt8MatchesTheQuantizedModel) {
  INTFA_REQUIRE_GPU();
  expect_correct(make_case(GetParam(), Variant::kFullInt8), 0.05);
}

TEST_P(AttentionGpu, HalfInt8MatchesTheQuantizedModel) {
  INTFA_REQUIRE_GPU();
  expect_correct(make_case(GetParam(), Variant::kHalfInt8), 0.02);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionGpu, ::testing::ValuesIn(testing::attention_shapes()),
                         testing::shape_name);

TEST(AttentionGpuOptions, EveryPQuantizationAndVGranularityMatchesTheModel) {
  INTFA_REQUIRE_GPU();
  for (const AttentionOptions& numerics : testing::every_full_int8_numerics()) {
    CheckCase check = make_case({1, 2, 2, 500, 700, 128, true}, Variant::kFullInt8);
    check.options = numerics;
    expect_correct(check, 0.05);
  }
}

TEST(AttentionGpuOptions, StridedBnhdLayoutsAndBf16) {
  INTFA_REQUIRE_GPU();
  for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
    CheckCase check = make_case({2, 4, 2, 129, 300, 128, true}, variant);
    check.layout = Layout::kBNHD;
    check.io_type = DType::kBF16;
    expect_correct(check, variant == Variant::kFullInt8 ? 0.05 : 0.03);
  }
}

TEST(AttentionGpuOptions, UniformInputsAndExplicitSoftmaxScale) {
  INTFA_REQUIRE_GPU();
  CheckCase check = make_case({1, 2, 2, 256, 256, 64, false}, Variant::kFullInt8);
  check.inputs = reference::InputFamily::kUniform;
  check.options.softmax_scale = 0.3;
  expect_correct(check, 0.02);
}

// K smoothing (K's sampled means, Q's LSE term) and the rotation change the quantized Q and K but
// neither what the attention computes nor the LSE (that of the original scores), so the float64
// bounds are the plain ones; each combination with GQA, causal tails and every head dim.
// Automatic rotation on a layer whose even KV heads have outlier channels: the kernels decide
// head by head (checked against the model's decisions) and rotate exactly those heads' rows,
// a query head following its KV head.
TEST(AttentionGpuOptions, KSmoothingAndRotationMatchTheModel) {
  INTFA_REQUIRE_GPU();
  for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
    for (int head_dim : {64, 128, 256}) {
      for (bool smooth_k : {false, true}) {
        for (QKRotation rotation : {QKRotation::kOff, QKRotation::kOn, QKRotation::kAuto}) {
          const bool automatic = rotation == QKRotation::kAuto;
          CheckCase check = make_case({2, 4, 2, 333, 517, head_dim, true}, variant);
          check.inputs = automatic ? reference::InputFamily::kOutlierHeads
                                   : reference::InputFamily::kOffsetsAndOutliers;
          check.options.smooth_k = smooth_k;
          check.options.rotate_qk = rotation;
          const CheckResult result = expect_correct(check, 0.2);
          // Two batches of two KV heads: heads 0 and 2 have the outliers.
          if (automatic) {
            EXPECT_EQ(result.rotated_heads, 2u) << check.to_string();
          }
        }
      }
    }
  }
  for (QKRotation rotation : {QKRotation::kOn, QKRotation::kAuto}) {
    CheckCase int4 = make_case({2, 2, 1, 100, 200, 64, false}, Variant::kFullInt8);
    int4.inputs = reference::InputFamily::kOutlierHeads;
    int4.options.smooth_k = true;
    int4.options.rotate_qk = rotation;
    int4.problem.qk_bits = 4;
    expect_correct(int4, 0.5);
  }
}

// Per-block K on the portable kernel: key tiles of 32 (two per block), 64 and 128 (two blocks
// per tile), both variants, with and without smoothing, tails inside a block.
TEST(AttentionGpuOptions, PerBlockKMatchesTheModel) {
  INTFA_REQUIRE_GPU();
  for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
    for (int block_n : {32, 64, 128}) {
      for (bool smooth_k : {true, false}) {
        CheckCase check = make_case({2, 4, 2, 200, 333, 64, true}, variant);
        check.inputs = reference::InputFamily::kKeyOffsets;
        check.options.numerics.k_granularity = KScaleGranularity::kPerBlock;
        check.options.smooth_k = smooth_k;
        check.options.config = KernelConfig{64, block_n, 4, 2};
        expect_correct(check, smooth_k ? 0.05 : 0.2);
      }
    }
  }
  CheckCase wide = make_case({1, 2, 2, 129, 300, 256, false}, Variant::kFullInt8);
  wide.options.numerics.k_granularity = KScaleGranularity::kPerBlock;
  expect_correct(wide, 0.05);
}

// The LSE of a smoothed K is that of the original scores: against float64 of the original inputs
// it is off by the quantization error only, not by softmax_scale * q . mean (which is tens of
// nats on keys with 4-sigma channel offsets).
TEST(AttentionGpuOptions, TheLseOfASmoothedKIsThatOfTheOriginalScores) {
  INTFA_REQUIRE_GPU();
  for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
    for (QKRotation rotate : {QKRotation::kOff, QKRotation::kOn}) {
      CheckCase check = make_case({1, 4, 2, 300, 600, 128, false}, variant);
      check.inputs = reference::InputFamily::kKeyOffsets;
      check.options.rotate_qk = rotate;
      ASSERT_TRUE(check.options.smooth_k) << "K smoothing is the default";
      use_heuristic_config(check);
      const CheckResult result = reference::run_check(check);
      std::printf("  %s\n    %s\n", check.to_string().c_str(), result.to_string().c_str());
      EXPECT_LE(result.lse_vs_f64_max_abs_error, 0.05) << check.to_string();
      EXPECT_LE(result.lse_max_error_past_ties, kLseAbsoluteError) << check.to_string();
    }
  }
}

// INT4 Q.K (m16n8k64): Hopper emulates it, so this is a correctness check there, not a speed one.
// Its float64 error is large by construction (R = 7); the model comparison is the tight check.
TEST(AttentionGpuOptions, Int4QueryKeyMatchesTheModel) {
  INTFA_REQUIRE_GPU();
  for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
    for (const Shape& shape : std::vector<Shape>{{1, 4, 2, 300, 700, 128, true},
                                                 {1, 2, 1, 17, 129, 64, false}}) {
      CheckCase check = make_case(shape, variant);
      check.problem.qk_bits = 4;
      expect_correct(check, 0.5);
    }
  }
}

TEST(AttentionGpuOptions, EveryTileConfigOfTheTunerMatchesTheModel) {
  INTFA_REQUIRE_GPU();
  for (int head_dim : {64, 128}) {
    for (const KernelConfig& config : std::vector<KernelConfig>{
             {64, 32, 4, 2}, {64, 64, 4, 3}, {128, 128, 8, 2}, {128, 64, 4, 2}, {128, 32, 8, 3}}) {
      if (config.block_m == 32 * config.warps && head_dim > 64) continue;
      CheckCase check = make_case({1, 2, 1, 300, 450, head_dim, true}, Variant::kFullInt8);
      check.options.config = config;
      expect_correct(check, 0.05);
    }
  }
}

}  // namespace
}  // namespace intfa
