#include "spec/attention_spec.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "attention/attention_params.h"
#include "attention/attention_test_support.hpp"
#include "intfa/errors.hpp"

namespace intfa::attention {
namespace {

using testing::sm90a_request;

// The heuristic looks at the head dim, masking, V's granularity and the sequence length (the
// Hopper kernel's warpgroups); every choice must be valid, and heuristic_configs lists each.
TEST(AttentionSpec, HeuristicConfigsAreValidAndFitEveryTarget) {
  for (device::Arch arch : device::all_archs()) {
    for (int head_dim : {64, 128, 256}) {
      for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
        for (bool causal : {false, true}) {
          for (VScaleGranularity granularity :
               {VScaleGranularity::kPerChannel, VScaleGranularity::kPerBlock}) {
            SpecRequest request = sm90a_request(head_dim);
            request.arch = arch;
            request.variant = variant;
            request.causal = causal;
            request.numerics.v_granularity = granularity;
            const std::vector<KernelConfig> listed = heuristic_configs(request);
            EXPECT_EQ(listed.front(), heuristic_config(request));
            for (int seq_bucket : {0, 1024, 2048, 16384}) {
              const KernelConfig config = heuristic_config(request, seq_bucket);
              const AttentionSpec spec = make_spec(request, config);
              EXPECT_NO_THROW(validate_config(spec, device::default_max_shared_bytes(arch)))
                  << spec.to_string();
              EXPECT_NE(std::find(listed.begin(), listed.end(), config), listed.end())
                  << spec.to_string() << " seq_bucket " << seq_bucket;
            }
          }
        }
      }
    }
  }
}

// Up to 1k tokens the Hopper kernel runs one consumer warpgroup per block, two blocks per SM (at
// d=64 and d=128, causal or not, where that measured fastest); from 2k on, as without a length.
// Full INT8 at d=64 with three stages (P.V one tile behind Q.K^T), at d=128 with two.
TEST(AttentionSpec, ShortSequencesOnHopperTakeTwoBlocksPerSm) {
  for (int head_dim : {64, 128}) {
    const KernelConfig two_blocks{64, 128, 8, head_dim <= 64 ? 3 : 2, KernelPath::kWgmma};
    SpecRequest request = sm90a_request(head_dim);
    for (bool causal : {false, true}) {
      request.causal = causal;
      EXPECT_EQ(heuristic_config(request, 1024), two_blocks) << head_dim;
      EXPECT_EQ(heuristic_config(request, 2048), heuristic_config(request)) << head_dim;
      EXPECT_NE(heuristic_config(request), two_blocks) << head_dim;
      // Shared memory: two blocks fit the SM's 228 KB.
      EXPECT_LE(2 * shared_bytes(make_spec(request, two_blocks)), 228 * 1024) << head_dim;
    }
  }
  const KernelConfig two_blocks{64, 128, 8, 2, KernelPath::kWgmma};
  EXPECT_NE(heuristic_config(sm90a_request(256), 1024), two_blocks);
  SpecRequest per_block_v = sm90a_request(128);
  per_block_v.numerics.v_granularity = VScaleGranularity::kPerBlock;
  EXPECT_NE(heuristic_config(per_block_v, 1024), two_blocks);
  SpecRequest ampere = sm90a_request(128);
  ampere.arch = device::Arch::kSm80;
  EXPECT_EQ(heuristic_config(ampere, 1024), heuristic_config(ampere));
}

// Half INT8 at d=64 on Hopper: one consumer warpgroup, two blocks per SM, up to 1k tokens; beyond
// (and without a length), three warpgroups with three stages, whose P.V runs one tile behind
// Q.K^T. At d=128 two warpgroups in turns up to 1k tokens, beyond three with 64-key tiles (the
// tiles their registers allow), three stages each.
TEST(AttentionSpec, HalfInt8TakesThreeWarpgroupsBeyondShortSequences) {
  const KernelConfig two_blocks{64, 128, 8, 2, KernelPath::kWgmma};
  const KernelConfig three_groups{192, 128, 16, 3, KernelPath::kWgmma};
  SpecRequest request = sm90a_request(64);
  request.variant = Variant::kHalfInt8;
  for (bool causal : {false, true}) {
    request.causal = causal;
    EXPECT_EQ(heuristic_config(request, 1024), two_blocks);
    EXPECT_EQ(heuristic_config(request, 2048), three_groups);
    EXPECT_EQ(heuristic_config(request, 16384), three_groups);
    EXPECT_EQ(heuristic_config(request), three_groups);
    EXPECT_NO_THROW(validate_config(make_spec(request, three_groups),
                                    device::default_max_shared_bytes(request.arch)));
  }
  SpecRequest d128 = sm90a_request(128);
  d128.variant = Variant::kHalfInt8;
  const KernelConfig d128_three_groups{192, 64, 16, 3, KernelPath::kWgmma};
  for (bool causal : {false, true}) {
    d128.causal = causal;
    EXPECT_EQ(heuristic_config(d128, 1024), (KernelConfig{128, 128, 12, 3, KernelPath::kWgmma}));
    EXPECT_EQ(heuristic_config(d128, 2048), d128_three_groups);
    EXPECT_EQ(heuristic_config(d128), d128_three_groups);
    EXPECT_NO_THROW(validate_config(make_spec(d128, d128_three_groups),
                                    device::default_max_shared_bytes(d128.arch)));
  }
}

TEST(AttentionSpec, ConfigFieldsOutOfRangeAreNamed) {
  const SpecRequest request = sm90a_request(128);
  auto field_of = [&](KernelConfig config) -> std::string {
    try {
      validate_config(make_spec(request, config), 1 << 20);
    } catch (const InvalidArgument& error) {
      return error.field();
    }
    return "(accepted)";
  };
  EXPECT_EQ(field_of({128, 64, 8, 2}), "(accepted)");
  EXPECT_EQ(field_of({100, 64, 8, 2}), "config.block_m");
  EXPECT_EQ(field_of({128, 48, 8, 2}), "config.block_n");
  EXPECT_EQ(field_of({128, 64, 3, 2}), "config.warps");
  EXPECT_EQ(field_of({128, 64, 8, 1}), "config.stages");
  EXPECT_EQ(field_of({128, 64, 8, 5}), "config.stages");
}

TEST(AttentionSpec, ConfigsThatDoNotFitTheDevicesSharedMemoryAreUnsupported) {
  const SpecRequest request = sm90a_request(256);
  const AttentionSpec spec = make_spec(request, KernelConfig{128, 128, 8, 4});
  EXPECT_GT(shared_bytes(spec), 200 * 1024);
  EXPECT_THROW(validate_config(spec, 99 * 1024), Unsupported);
}

TEST(AttentionSpec, SharedBytesFollowTheKernelsLayout) {
  SpecRequest request = sm90a_request(128);
  const AttentionSpec full = make_spec(request, KernelConfig{128, 64, 8, 2});
  // Q 128x128 + 2 x (K 64x128 + V 128x64 + K scales 64x4).
  EXPECT_EQ(shared_bytes(full), 128 * 128 + 2 * (64 * 128 + 128 * 64 + 64 * 4));
  request.variant = Variant::kHalfInt8;
  const AttentionSpec half = make_spec(request, KernelConfig{128, 64, 8, 2});
  EXPECT_EQ(shared_bytes(half), 128 * 128 + 2 * (64 * 128 + 64 * 128 * 2 + 64 * 4));
}

TEST(AttentionSpec, HalfInt8SpecsIgnoreFullInt8NumericsOptions) {
  SpecRequest request = sm90a_request(64);
  request.variant = Variant::kHalfInt8;
  request.numerics.p_encoding = PEncoding::kSigned127;
  const AttentionSpec a = make_spec(request, heuristic_config(request));
  request.numerics.p_encoding = PEncoding::kUnsigned255;
  request.numerics.v_granularity = VScaleGranularity::kPerBlock;
  EXPECT_EQ(a, make_spec(request, heuristic_config(request)));
}

TEST(AttentionSpec, VPositionPermutationIsABijectionWithinEachGroupOf16) {
  std::vector<int> seen(64, 0);
  for (int token = 0; token < 64; ++token) {
    const int position = kernels::v_position_of_token(token);
    ASSERT_GE(position, token & ~15);
    ASSERT_LT(position, (token & ~15) + 16);
    ++seen[static_cast<std::size_t>(position)];
  }
  for (int count : seen) EXPECT_EQ(count, 1);
  // Lane t of a quad holds columns 2t, 2t+1 (tile 0) and 8+2t, 9+2t (tile 1): positions 4t..4t+3.
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(kernels::v_position_of_token(2 * t), 4 * t);
    EXPECT_EQ(kernels::v_position_of_token(2 * t + 1), 4 * t + 1);
    EXPECT_EQ(kernels::v_position_of_token(8 + 2 * t), 4 * t + 2);
    EXPECT_EQ(kernels::v_position_of_token(9 + 2 * t), 4 * t + 3);
  }
}

// request_for is the one mapping of a problem and its options to a request: every field that
// selects a kernel comes from them (a field it forgot would keep SpecRequest's default).
TEST(AttentionSpec, RequestForTakesEveryFieldFromTheProblemAndOptions) {
  AttentionProblem problem;
  problem.head_dim = 64;
  problem.variant = Variant::kHalfInt8;
  problem.qk_bits = 4;
  problem.causal = true;
  AttentionOptions options;
  options.numerics.p_encoding = PEncoding::kSigned127;
  options.numerics.p_scale = PScaleReference::kRunningMax;
  options.numerics.v_granularity = VScaleGranularity::kPerBlock;
  options.numerics.k_granularity = KScaleGranularity::kPerBlock;
  const SpecRequest request = request_for(device::Arch::kSm89, problem, options, DType::kBF16);
  EXPECT_EQ(request.arch, device::Arch::kSm89);
  EXPECT_EQ(request.head_dim, 64);
  EXPECT_EQ(request.variant, Variant::kHalfInt8);
  EXPECT_EQ(request.qk_bits, 4);
  EXPECT_TRUE(request.causal);
  EXPECT_FALSE(request.varlen);
  EXPECT_EQ(request.v_type, DType::kBF16);
  EXPECT_EQ(request.output_type, DType::kBF16);
  EXPECT_EQ(request.numerics.p_encoding, PEncoding::kSigned127);
  EXPECT_EQ(request.numerics.p_scale, PScaleReference::kRunningMax);
  EXPECT_EQ(request.numerics.v_granularity, VScaleGranularity::kPerBlock);
  EXPECT_EQ(request.numerics.k_granularity, KScaleGranularity::kPerBlock);
}

// Per-block K is for 8-bit Q.K and dense batches: other requests are refused naming the option.
TEST(AttentionSpec, PerBlockKNeeds8BitQkAndDenseBatches) {
  SpecRequest request;
  request.numerics.k_granularity = KScaleGranularity::kPerBlock;
  request.qk_bits = 4;
  auto expect_refused = [&](const SpecRequest& r) {
    try {
      validate_config(make_spec(r, portable_heuristic_config(r)), 1 << 20);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& error) {
      EXPECT_NE(std::string(error.what()).find("options.k_granularity"), std::string::npos)
          << error.what();
    }
  };
  expect_refused(request);
  request.qk_bits = 8;
  request.varlen = true;
  expect_refused(request);
  request.varlen = false;
  EXPECT_NO_THROW(validate_config(make_spec(request, portable_heuristic_config(request)), 1 << 20));
  EXPECT_EQ(make_spec(request, portable_heuristic_config(request)).numerics.k_granularity,
            kernels::KScaleGranularity::kPerBlock);
}

}  // namespace
}  // namespace intfa::attention
