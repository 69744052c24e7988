// The Hopper attention kernel (KernelPath::kWgmma) on an sm_90 GPU against the CPU references,
// and against the portable kernel on the same inputs (skipped without an sm_90 GPU). Every case
// draws fresh random inputs; the seed is printed so a failure can be replayed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_test_support.hpp"
#include "device/device_info.hpp"
#include "intfa/attention.hpp"
#include "launch/kernel_runtime.hpp"
#include "reference/attention_check.hpp"
#include "reference/reference.hpp"
#include "spec/attention_spec.hpp"
#include "support/gpu.hpp"

namespace intfa {
namespace {

using reference::CheckCase;
using reference::CheckResult;
using testing::Shape;

constexpr double kModelRelativeL2 = 1e-3;
constexpr double kLseAbsoluteError = 1e-3;
// The two kernels compute the same numerics: their float64 errors on one input may differ only by
// FP32 rounding order (0.05 points of relative L2).
constexpr double kPathAccuracyGap = 5e-4;
// The shared memory an sm_90 block may opt in to (H100, H200).
constexpr int kSharedBytesPerBlock = 232448;

bool on_sm90() { return testing::current_arch() == device::Arch::kSm90a; }

#define INTFA_REQUIRE_SM90()                                                 \
  do {                                                                       \
    INTFA_REQUIRE_GPU();                                                     \
    if (!on_sm90()) GTEST_SKIP() << "the Hopper kernel needs an sm_90 GPU";  \
  } while (0)

// A full INT8 check of `shape`.
CheckCase make_case(const Shape& shape) { return testing::make_case(shape, Variant::kFullInt8); }


// A half INT8 check of `shape` (16-bit V and P, P.V in FP32).
CheckCase make_half_case(const Shape& shape) {
  return testing::make_case(shape, Variant::kHalfInt8);
}

// The Hopper heuristic's config for the case's head dim, variant, masking and V granularity,
// unless the case names one.
KernelConfig wgmma_config(const CheckCase& check) {
  attention::SpecRequest request = testing::sm90a_request(check.problem.head_dim);
  request.variant = check.problem.variant;
  request.causal = check.problem.causal;
  request.numerics.v_granularity = check.options.numerics.v_granularity;
  const KernelConfig config = attention::heuristic_config(request);
  EXPECT_EQ(config.path, KernelPath::kWgmma);
  return config;
}

CheckResult expect_correct(CheckCase check, double f64_bound) {
  if (!check.options.config) check.options.config = wgmma_config(check);
  const CheckResult result = reference::run_check(check);
  std::printf("  %s\n    %s\n", check.to_string().c_str(), result.to_string().c_str());
  const std::string where = check.to_string() + " " + check.options.config->to_string();
  EXPECT_EQ(result.unwritten_outputs, 0u) << where;
  EXPECT_EQ(result.overwritten_padding, 0u) << where;
  EXPECT_EQ(result.vs_model.non_finite, 0u) << where;
  EXPECT_LE(result.vs_model.relative_l2, kModelRelativeL2) << where;
  EXPECT_EQ(result.q_mismatches + result.k_mismatches + result.v_mismatches, 0u) << where;
  EXPECT_EQ(result.scale_mismatches, 0u) << where;
  EXPECT_EQ(result.mean_mismatches + result.lse_term_mismatches, 0u) << where;
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

// Every Hopper config the tuner may time, for `variant`, on one causal GQA shape with tails. The
// tuner drops what does not fit the device's shared memory (16-bit V tiles are twice the size:
// half INT8 with three stages at d=256 needs 245 KB), and so does this.
void expect_every_tuner_config_correct(Variant variant, double f64_bound) {
  for (int head_dim : {64, 128, 256}) {
    attention::SpecRequest request = testing::sm90a_request(head_dim);
    request.variant = variant;
    for (const KernelConfig& config : attention::candidate_configs(request)) {
      if (config.path != KernelPath::kWgmma) continue;
      if (attention::shared_bytes(attention::make_spec(request, config)) > kSharedBytesPerBlock) {
        continue;
      }
      CheckCase check = testing::make_case({1, 2, 1, 300, 450, head_dim, true}, variant);
      check.options.config = config;
      expect_correct(check, f64_bound);
    }
  }
}

class WgmmaGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(WgmmaGpu, MatchesTheQuantizedModel) {
  INTFA_REQUIRE_SM90();
  expect_correct(make_case(GetParam()), 0.05);
}

INSTANTIATE_TEST_SUITE_P(Shapes, WgmmaGpu, ::testing::ValuesIn(testing::attention_shapes()),
                         testing::shape_name);

// Half INT8 on the Hopper kernel: every shape of the attention tests (tails, GQA, causal with
// seq_q != seq_kv, d = 64, 128, 256) against the quantized model and float64.
class WgmmaHalfGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(WgmmaHalfGpu, MatchesTheQuantizedModel) {
  INTFA_REQUIRE_SM90();
  expect_correct(make_half_case(GetParam()), 0.02);
}

INSTANTIATE_TEST_SUITE_P(Shapes, WgmmaHalfGpu, ::testing::ValuesIn(testing::attention_shapes()),
                         testing::shape_name);

TEST(WgmmaHalfGpuOptions, EveryTileConfigOfTheTunerMatchesTheModel) {
  INTFA_REQUIRE_SM90();
  expect_every_tuner_config_correct(Variant::kHalfInt8, 0.02);
}

// The shapes of the P.V-behind tests: causal with seq_q != seq_kv, tails, GQA, 1 and 2 key tiles.
std::vector<Shape> pv_behind_shapes() {
  return {{2, 4, 2, 300, 700, 128, true}, {1, 4, 4, 517, 333, 64, false},
          {1, 2, 1, 77, 100, 128, true},  {1, 2, 2, 200, 256, 64, false},
          {1, 2, 2, 300, 200, 64, true},  {1, 2, 2, 300, 200, 128, true},
          {1, 4, 2, 700, 900, 64, true}};
}

// Half INT8 with P.V one tile behind Q.K^T (three stages) in both of its loops: one warpgroup
// alone (64,128,8,3: no tuner candidate, but a config a caller may name), two taking turns (the
// default at d=128 up to 1k tokens) and three on their own (the default beyond 1k tokens, with
// 64-key tiles at d=128); causal with
// seq_q != seq_kv (idle turns past the diagonal, and with more queries than keys a warpgroup
// that sees no key beside one that sees a tile), tails, GQA, 1 and 2 key tiles (the peeled
// first tile and last P.V alone), the LSE.
TEST(WgmmaHalfGpuOptions, PvOneTileBehindScoresMatchesTheModel) {
  INTFA_REQUIRE_SM90();
  const std::vector<std::pair<KernelConfig, std::vector<int>>> configs_and_head_dims = {
      {{64, 128, 8, 3, KernelPath::kWgmma}, {64, 128}},
      {{128, 128, 12, 3, KernelPath::kWgmma}, {64, 128}},
      {{192, 128, 16, 3, KernelPath::kWgmma}, {64}},
      {{192, 64, 16, 3, KernelPath::kWgmma}, {128}}};  // three fit d=128 with 64-key tiles only
  for (const auto& [config, head_dims] : configs_and_head_dims) {
    for (const Shape& shape : pv_behind_shapes()) {
      if (std::find(head_dims.begin(), head_dims.end(), shape.head_dim) == head_dims.end()) {
        continue;
      }
      CheckCase check = make_half_case(shape);
      check.options.config = config;
      check.with_lse = true;
      expect_correct(check, 0.02);
    }
  }
}

// BF16 inputs, V and output; BNHD strides; K smoothing with the rotation on keys with offsets
// and outlier channels; the LSE; a 1-row problem.
TEST(WgmmaHalfGpuOptions, Bf16StridedLayoutsSmoothingAndTinyShapes) {
  INTFA_REQUIRE_SM90();
  CheckCase strided = make_half_case({2, 4, 2, 129, 300, 128, true});
  strided.layout = Layout::kBNHD;
  strided.io_type = DType::kBF16;
  expect_correct(strided, 0.02);
  CheckCase smoothed = make_half_case({2, 4, 2, 333, 517, 64, false});
  smoothed.inputs = reference::InputFamily::kOffsetsAndOutliers;
  smoothed.options.rotate_qk = QKRotation::kOn;
  expect_correct(smoothed, 0.02);
  expect_correct(make_half_case({1, 2, 2, 1, 1, 128, false}), 0.02);
}

// Every input family of the accuracy tables, both variants, with the default K smoothing and
// with no rotation, the rotation and automatic rotation: the kernel matches the model (which the
// CPU tests hold to the accuracy targets of each family), quantized tensors, LSE terms and the
// automatic decisions exactly.
TEST(WgmmaGpuOptions, EveryInputFamilyWithSmoothingAndRotationMatchesTheModel) {
  INTFA_REQUIRE_SM90();
  for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
    for (reference::InputFamily family : reference::all_input_families()) {
      for (QKRotation rotate : {QKRotation::kOff, QKRotation::kOn, QKRotation::kAuto}) {
        CheckCase check = testing::make_case({1, 4, 2, 700, 1100, 128, false}, variant);
        check.inputs = family;
        check.options.rotate_qk = rotate;
        expect_correct(check, 0.06);
      }
    }
  }
}

// Same seed, both kernels: half INT8 on the Hopper kernel is as accurate as on the portable one.
TEST(WgmmaHalfGpuOptions, AccuracyEqualsThePortableKernel) {
  INTFA_REQUIRE_SM90();
  for (const Shape& shape : std::vector<Shape>{{1, 4, 4, 2048, 2048, 128, false},
                                               {1, 4, 4, 2048, 2048, 64, true}}) {
    CheckCase hopper = make_half_case(shape);
    const CheckResult hopper_result = expect_correct(hopper, 0.02);
    CheckCase portable = hopper;
    attention::SpecRequest request = testing::sm90a_request(shape.head_dim);
    request.variant = Variant::kHalfInt8;
    portable.options.config = attention::portable_heuristic_config(request);
    const CheckResult portable_result = expect_correct(portable, 0.02);
    EXPECT_LE(std::fabs(hopper_result.vs_f64.relative_l2 - portable_result.vs_f64.relative_l2),
              kPathAccuracyGap)
        << hopper.to_string();
  }
}

TEST(WgmmaGpuOptions, EveryPQuantizationAndVGranularityMatchesTheModel) {
  INTFA_REQUIRE_SM90();
  for (int head_dim : {64, 128}) {
    for (const AttentionOptions& numerics : testing::every_full_int8_numerics()) {
      CheckCase check = make_case({1, 2, 2, 500, 700, head_dim, true});
      check.options = numerics;
      expect_correct(check, 0.05);
    }
  }
}

// The last key tile reaches past V's last 64-token scale block (seq_kv = 130: blocks 0..2, tile
// 1 covers blocks 2 and 3); block 3's scales do not exist and must not be read.
TEST(WgmmaGpuOptions, PerBlockVWhereATileEndsPastTheLastBlock) {
  INTFA_REQUIRE_SM90();
  for (int head_dim : {64, 128}) {
    for (bool causal : {false, true}) {
      CheckCase check = make_case({2, 4, 2, 130, 130, head_dim, causal});
      check.options.numerics.v_granularity = VScaleGranularity::kPerBlock;
      expect_correct(check, 0.05);
    }
  }
}

// Per-block K (one scale per 64 keys, folded into the exponent's multiplier): both variants, every
// head dim, smoothing and the rotation, GQA, causal and non-causal, key counts that end inside a
// block and inside a tile (517 = 8 blocks + 5 keys), and every Hopper config the tuner may time
// for either variant (half INT8's three warpgroups with 64-key tiles at d=128 among them).
TEST(WgmmaGpuOptions, PerBlockKMatchesTheModel) {
  INTFA_REQUIRE_SM90();
  for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
    for (int head_dim : {64, 128, 256}) {
      for (bool causal : {false, true}) {
        for (const auto& [smooth_k, rotate] :
             {std::pair{true, QKRotation::kOff}, std::pair{false, QKRotation::kOff},
              std::pair{true, QKRotation::kOn}}) {
          CheckCase check = testing::make_case({2, 4, 2, 333, 517, head_dim, causal}, variant);
          check.inputs = reference::InputFamily::kKeyOffsets;
          check.options.numerics.k_granularity = KScaleGranularity::kPerBlock;
          check.options.smooth_k = smooth_k;
          check.options.rotate_qk = rotate;
          expect_correct(check, smooth_k ? 0.05 : 0.2);
        }
      }
    }
  }
  for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
    for (int head_dim : {64, 128}) {
      attention::SpecRequest request = testing::sm90a_request(head_dim);
      request.variant = variant;
      request.numerics.k_granularity = KScaleGranularity::kPerBlock;
      for (const KernelConfig& config : attention::candidate_configs(request)) {
        if (config.path != KernelPath::kWgmma) continue;
        if (attention::shared_bytes(attention::make_spec(request, config)) >
            kSharedBytesPerBlock) {
          continue;
        }
        CheckCase check = testing::make_case({1, 2, 1, 300, 450, head_dim, true}, variant);
        check.options.numerics.k_granularity = KScaleGranularity::kPerBlock;
        check.options.config = config;
        expect_correct(check, 0.05);
      }
    }
  }
}

TEST(WgmmaGpuOptions, StridedBnhdLayoutsBf16AndKSmoothing) {
  INTFA_REQUIRE_SM90();
  CheckCase strided = make_case({2, 4, 2, 129, 300, 128, true});
  strided.layout = Layout::kBNHD;
  strided.io_type = DType::kBF16;
  expect_correct(strided, 0.05);
  CheckCase smoothed = make_case({2, 4, 2, 333, 517, 64, false});
  smoothed.inputs = reference::InputFamily::kOffsetsAndOutliers;
  smoothed.options.rotate_qk = QKRotation::kOn;
  expect_correct(smoothed, 0.05);
  CheckCase plain = make_case({2, 4, 2, 333, 517, 128, true});
  plain.options.smooth_k = false;
  expect_correct(plain, 0.05);
  CheckCase uniform = make_case({1, 2, 2, 256, 256, 64, false});
  uniform.inputs = reference::InputFamily::kUniform;
  uniform.options.softmax_scale = 0.3;
  expect_correct(uniform, 0.02);
}

// The epilogue stores 16-byte pieces of a row only where the output's rows are 16-byte aligned;
// rows 4 bytes apart from that take the word-by-word stores, and the padding between them stays.
TEST(WgmmaGpuOptions, OutputRowsOnly4ByteAlignedAreStoredWordByWord) {
  INTFA_REQUIRE_SM90();
  for (int head_dim : {64, 128, 256}) {
    for (Layout layout : {Layout::kBHND, Layout::kBNHD}) {
      CheckCase check = make_case({2, 3, 3, 200, 300, head_dim, head_dim == 128});
      check.layout = layout;
      check.out_row_padding = 2;
      expect_correct(check, 0.05);
      check.out_row_padding = 8;  // 16-byte aligned again, with padding to keep
      expect_correct(check, 0.05);
    }
  }
}

TEST(WgmmaGpuOptions, EveryTileConfigOfTheTunerMatchesTheModel) {
  INTFA_REQUIRE_SM90();
  expect_every_tuner_config_correct(Variant::kFullInt8, 0.05);
}

// One consumer warpgroup per block (the heuristic's choice up to 1k tokens): two blocks share
// an SM, or the config loses its point, and it matches the model with tails, GQA, per-block V,
// causal masking and the LSE.
TEST(WgmmaGpuOptions, OneConsumerWarpgroupBlocksShareAnSmAndMatchTheModel) {
  INTFA_REQUIRE_SM90();
  const KernelConfig two_blocks{64, 128, 8, 2, KernelPath::kWgmma};
  CUcontext context = nullptr;
  INTFA_DRIVER(cuCtxGetCurrent, &context);
  for (int head_dim : {64, 128}) {
    for (bool causal : {false, true}) {
      attention::SpecRequest request = testing::sm90a_request(head_dim);
      request.causal = causal;
      const attention::AttentionSpec spec = attention::make_spec(request, two_blocks);
      const unsigned shared = static_cast<unsigned>(attention::shared_bytes(spec));
      const launch::LoadedKernel& kernel =
          launch::KernelRuntime::instance().load(spec, context, shared);
      int blocks_per_sm = 0;
      INTFA_DRIVER(cuOccupancyMaxActiveBlocksPerMultiprocessor, &blocks_per_sm, kernel.function,
                   two_blocks.warps * 32, shared);
      EXPECT_EQ(blocks_per_sm, 2) << spec.to_string() << ": " << kernel.registers_per_thread
                                  << " registers, " << shared << " B shared";
      EXPECT_EQ(kernel.local_bytes_per_thread, 0) << spec.to_string();
    }
  }
  for (const Shape& shape : std::vector<Shape>{{2, 8, 2, 1000, 1000, 128, false},
                                               {1, 4, 4, 777, 1030, 64, true},
                                               {2, 6, 3, 1030, 777, 128, true},
                                               {1, 2, 2, 1, 1, 64, false}}) {
    CheckCase check = make_case(shape);
    check.options.config = two_blocks;
    expect_correct(check, 0.05);
  }
  CheckCase per_block_v = make_case({2, 4, 2, 300, 500, 128, false});
  per_block_v.options.config = two_blocks;
  per_block_v.options.numerics.v_granularity = VScaleGranularity::kPerBlock;
  expect_correct(per_block_v, 0.05);
}

// Full INT8 with P.V one tile behind Q.K^T (kPvBehindScores, tiles_pv_behind, three stages):
// three warpgroups at d=64 (the default beyond 1k tokens) and one warpgroup at d=64 and d=128
// (two stages of each, which wait for P.V, alike), with the default numerics, the paper's (s8 P, running max, per
// tensor V) and per-block K; causal with seq_q != seq_kv (a warpgroup that sees no key beside one
// that does), tails, GQA, 1 and 2 key tiles (the peeled first tile and last P.V alone), the LSE.
// Each against the model and, on the same inputs, bit for bit against a loop that waits for each
// P.V with the same 128-key tiles (d=64: two warpgroups in turns; d=128: three warpgroups,
// main_loop): per tile the same operations in the same order, so equal errors to the last bit.
TEST(WgmmaGpuOptions, PvOneTileBehindScoresMatchesTheModelAndTheWaitingLoop) {
  INTFA_REQUIRE_SM90();
  const std::vector<KernelConfig> behind = {
      {192, 128, 16, 2, KernelPath::kWgmma}, {192, 128, 16, 3, KernelPath::kWgmma},
      {64, 128, 8, 2, KernelPath::kWgmma}, {64, 128, 8, 3, KernelPath::kWgmma}};
  AttentionOptions paper;
  paper.numerics = paper_numerics();
  AttentionOptions per_block_k;
  per_block_k.numerics.k_granularity = KScaleGranularity::kPerBlock;
  for (const Shape& shape : pv_behind_shapes()) {
    const KernelConfig waiting = shape.head_dim == 64
                                     ? KernelConfig{128, 128, 12, 2, KernelPath::kWgmma}
                                     : KernelConfig{192, 128, 16, 2, KernelPath::kWgmma};
    for (const AttentionOptions& numerics : {AttentionOptions{}, paper, per_block_k}) {
      CheckCase check = make_case(shape);
      check.options = numerics;
      check.options.config = waiting;
      const CheckResult expected = expect_correct(check, 0.05);
      for (const KernelConfig& config : behind) {
        if (config.warps == 16 && shape.head_dim != 64) continue;  // three fit d=64 only
        check.options.config = config;
        const CheckResult result = expect_correct(check, 0.05);
        const std::string where = check.to_string() + " " + config.to_string();
        EXPECT_EQ(result.vs_model.relative_l2, expected.vs_model.relative_l2) << where;
        EXPECT_EQ(result.vs_model.max_abs_error, expected.vs_model.max_abs_error) << where;
        EXPECT_EQ(result.lse_max_abs_error, expected.lse_max_abs_error) << where;
      }
    }
  }
}

// Same seed, both kernels: the Hopper kernel is exactly as accurate as the portable one.
TEST(WgmmaGpuOptions, AccuracyEqualsThePortableKernel) {
  INTFA_REQUIRE_SM90();
  for (const Shape& shape : std::vector<Shape>{{1, 4, 4, 2048, 2048, 128, false},
                                               {1, 4, 4, 2048, 2048, 64, true}}) {
    CheckCase hopper = make_case(shape);
    const CheckResult hopper_result = expect_correct(hopper, 0.05);
    CheckCase portable = hopper;
    portable.options.config =
        attention::portable_heuristic_config(testing::sm90a_request(shape.head_dim));
    const CheckResult portable_result = expect_correct(portable, 0.05);
    EXPECT_LE(std::fabs(hopper_result.vs_f64.relative_l2 - portable_result.vs_f64.relative_l2),
              kPathAccuracyGap)
        << hopper.to_string();
  }
}

}  // namespace
}  // namespace intfa
