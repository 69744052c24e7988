// The paged KV-cache family's host knowledge, without a GPU: how its specs render and read back,
// the decode kernel's shared memory and configs, the split heuristic and the workspace.
#include "families/paged_family.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "families/any_spec.hpp"
#include "intfa/errors.hpp"
#include "reference/reference.hpp"
#include "render/render.hpp"

namespace intfa::paged {
namespace {

using kernels::ElementType;

device::DeviceInfo h100() {
  device::DeviceInfo info;
  info.arch = device::Arch::kSm90a;
  info.sm_count = 132;
  info.max_shared_bytes_per_block_optin = 232448;
  info.max_shared_bytes_per_sm = 233472;
  return info;
}

// The append kernel divides row indices by heads_kv with a multiplier made on the host: it must
// agree with integer division for every dividend it can see (below 2^31) and any head count.
TEST(PagedParams, FastDivideAgreesWithIntegerDivision) {
  std::vector<int> divisors;
  for (int d = 1; d <= 300; ++d) divisors.push_back(d);
  for (int d : {511, 512, 513, 1000, 4095, 65535, 65536, 65537, 1 << 20, (1 << 30) + 1, 2147483646,
                2147483647}) {
    divisors.push_back(d);
  }
  std::mt19937_64 random(reference::fresh_seed());
  for (const int d : divisors) {
    const kernels::FastDivisor divisor = kernels::make_fast_divisor(d);
    // Around 0, d and the top of the range, and just below and at multiples of d, where a wrong
    // multiplier shows first (in 64 bits: d + 1 may not fit an int).
    std::vector<long long> dividends = {0, 1, d - 1LL, d, d + 1LL, 2147483646, 2147483647};
    for (long long multiple : {2LL, 3LL, 1000LL, 2147483647LL / d}) {
      for (long long delta : {-1LL, 0LL, 1LL}) dividends.push_back(multiple * d + delta);
    }
    for (int i = 0; i < 2000; ++i) dividends.push_back(static_cast<long long>(random() >> 33));
    for (const long long n : dividends) {
      if (n < 0 || n > 2147483647LL) continue;
      ASSERT_EQ(kernels::fast_divide(static_cast<int>(n), divisor), n / d) << n << " / " << d;
    }
  }
}

TEST(PagedFamily, EachKernelRendersItsTemplateWithTheSpecValues) {
  const render::RenderedUnit decode = families::render(decode_spec(
      device::Arch::kSm90a, 128, 4, ElementType::kBF16, ElementType::kF16, {32, 128, 4}));
  EXPECT_NE(decode.source.find("#include \"decode/paged_decode.cuh\""), std::string::npos);
  EXPECT_EQ(decode.name_expression,
            "intfa::kernels::paged_decode<128, 4, intfa::kernels::ElementType::kBF16, "
            "intfa::kernels::ElementType::kF16, 32, 128, 4>");
  const render::RenderedUnit append =
      families::render(append_spec(device::Arch::kSm80, 64, 8, ElementType::kF16));
  EXPECT_EQ(append.name_expression,
            "intfa::kernels::paged_append<64, 8, intfa::kernels::ElementType::kF16>");
  const render::RenderedUnit merge =
      families::render(merge_spec(device::Arch::kSm80, 256, ElementType::kF32, ElementType::kBF16));
  EXPECT_EQ(merge.name_expression,
            "intfa::kernels::merge_states<256, intfa::kernels::ElementType::kF32, "
            "intfa::kernels::ElementType::kBF16>");
}

TEST(PagedFamily, EveryDecodeFieldChangesTheKernel) {
  const PagedSpec base =
      decode_spec(device::Arch::kSm90a, 128, 8, ElementType::kF16, ElementType::kF16, {16, 64, 3});
  std::vector<PagedSpec> variants = {
      base,
      decode_spec(device::Arch::kSm80, 128, 8, ElementType::kF16, ElementType::kF16, {16, 64, 3}),
      decode_spec(device::Arch::kSm90a, 64, 8, ElementType::kF16, ElementType::kF16, {16, 64, 3}),
      decode_spec(device::Arch::kSm90a, 128, 4, ElementType::kF16, ElementType::kF16, {16, 64, 3}),
      decode_spec(device::Arch::kSm90a, 128, 8, ElementType::kBF16, ElementType::kF16, {16, 64, 3}),
      decode_spec(device::Arch::kSm90a, 128, 8, ElementType::kF16, ElementType::kBF16, {16, 64, 3}),
      decode_spec(device::Arch::kSm90a, 128, 8, ElementType::kF16, ElementType::kF16, {32, 64, 3}),
      decode_spec(device::Arch::kSm90a, 128, 8, ElementType::kF16, ElementType::kF16, {16, 128, 3}),
      decode_spec(device::Arch::kSm90a, 128, 8, ElementType::kF16, ElementType::kF16, {16, 64, 2}),
  };
  std::set<std::string> texts, units;
  for (const PagedSpec& spec : variants) {
    texts.insert(spec.to_string());
    const render::RenderedUnit unit = families::render(spec);
    units.insert(unit.name_expression + device::arch_name(spec.arch));
  }
  EXPECT_EQ(texts.size(), variants.size());
  EXPECT_EQ(units.size(), variants.size());
}

TEST(PagedFamily, SpecsDescribeTheirFieldsAndReadBackFromJson) {
  const PagedSpec specs[] = {
      append_spec(device::Arch::kSm90a, 128, 4, ElementType::kBF16),
      decode_spec(device::Arch::kSm90a, 128, 8, ElementType::kF16, ElementType::kBF16, {64, 64, 3}),
      merge_spec(device::Arch::kSm89, 64, ElementType::kF32, ElementType::kF16)};
  EXPECT_EQ(specs[0].to_string(), "paged_append sm_90a d128 bf16->i4");
  EXPECT_EQ(specs[1].to_string(), "paged_decode sm_90a d128 i8 m64 n64 s3 f16->bf16");
  EXPECT_EQ(specs[2].to_string(), "merge_states sm_89 d64 f32->f16");
  for (const PagedSpec& spec : specs) {
    EXPECT_EQ(PagedSpec::from_json(spec.to_json()), spec) << spec.to_string();
    EXPECT_EQ(families::AnySpec::from_json(spec.to_json()), families::AnySpec(spec))
        << spec.to_string();
  }
}

TEST(PagedFamily, SharedMemoryIsThePipelineOrTheWarpStatesWhicheverIsLarger) {
  // d = 128 INT8, 64-token stages of K, V and FP32 scales, three of them.
  const PagedSpec int8 =
      decode_spec(device::Arch::kSm90a, 128, 8, ElementType::kF16, ElementType::kF16, {16, 64, 3});
  EXPECT_EQ(decode_shared_bytes(int8), 3 * 2 * 64 * (128 + 4));
  // INT4 d = 64: the pipeline (3 * 2 * 64 * (32 + 4) bytes) is smaller than four warps' states.
  const PagedSpec int4 =
      decode_spec(device::Arch::kSm90a, 64, 4, ElementType::kF16, ElementType::kF16, {16, 64, 3});
  EXPECT_EQ(decode_shared_bytes(int4), 4 * 16 * (64 + 2) * 4);
  // One row tile per warp: no states to merge. d = 256 adds Q's fragments.
  const PagedSpec wide =
      decode_spec(device::Arch::kSm90a, 256, 8, ElementType::kF16, ElementType::kF16, {64, 64, 2});
  EXPECT_EQ(decode_shared_bytes(wide), 2 * 2 * 64 * (256 + 4) + 64 * 256 * 2);
}

// Two splits merge in their clusters on sm_90 where the block's state (rows of FP32 outputs and
// an LSE) fits the shared memory the block has anyway: every config of two 64-token stages but
// INT4's 64-row blocks below d = 256.
TEST(PagedFamily, TwoSplitsMayMergeInClustersOnHopperWhereTheStateFits) {
  for (int head_dim : {64, 128, 256}) {
    for (int bits : {8, 4}) {
      for (int rows : {8, 16, 32, 64}) {
        const PagedDecodeConfig config = {rows, 64, 2};
        const PagedSpec hopper = decode_spec(device::Arch::kSm90a, head_dim, bits,
                                             ElementType::kF16, ElementType::kF16, config);
        const bool fits =
            kernels::paged_decode_cluster_state_bytes(head_dim, rows) <= decode_shared_bytes(hopper);
        EXPECT_EQ(fits, !(bits == 4 && rows == 64 && head_dim < 256))
            << head_dim << " " << bits << " " << rows;
        EXPECT_EQ(splits_may_merge_in_clusters(hopper, 2), fits);
        EXPECT_FALSE(splits_may_merge_in_clusters(hopper, 1));
        EXPECT_FALSE(splits_may_merge_in_clusters(hopper, 3));
        const PagedSpec ampere = decode_spec(device::Arch::kSm80, head_dim, bits,
                                             ElementType::kF16, ElementType::kF16, config);
        EXPECT_FALSE(splits_may_merge_in_clusters(ampere, 2));
      }
    }
  }
}

// Clusters are taken where they need no more waves than their blocks alone: at B=32 N=4k on an
// H200 (256 clusters of two narrow blocks, 264 at once, 528 blocks alone) one wave either way;
// 64 clusters of 8 at 62 at once take two where the 512 blocks take one.
TEST(PagedFamily, ClustersAreTakenWhereTheyNeedNoMoreWaves) {
  EXPECT_TRUE(clusters_take_no_more_waves(256, 2, 264, 528));
  EXPECT_FALSE(clusters_take_no_more_waves(64, 8, 62, 528));
  EXPECT_TRUE(clusters_take_no_more_waves(300, 2, 264, 528));   // two waves each way
  EXPECT_FALSE(clusters_take_no_more_waves(270, 2, 264, 600));  // 2 waves against 1
  EXPECT_FALSE(clusters_take_no_more_waves(10, 2, 0, 528));     // no cluster fits
  EXPECT_FALSE(clusters_take_no_more_waves(10, 2, 264, 0));
}

TEST(PagedFamily, ConfigChecksNameTheFieldAndSharedMemoryIsUnsupportedNotInvalid) {
  PagedSpec spec =
      decode_spec(device::Arch::kSm90a, 128, 8, ElementType::kF16, ElementType::kF16, {16, 64, 3});
  EXPECT_NO_THROW(check_decode_config(spec, 232448));
  spec.config.block_rows = 48;
  try {
    check_decode_config(spec, 232448);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "config.block_rows");
  }
  spec.config.block_rows = 16;
  spec.config.stages = 5;
  EXPECT_THROW(check_decode_config(spec, 232448), InvalidArgument);
  spec.config.stages = 4;
  spec.config.stage_tokens = 128;
  EXPECT_THROW(check_decode_config(spec, 99 * 1024), Unsupported);
}

TEST(PagedFamily, TheHeuristicTakesAsFewRowTilesAsHoldTheRows) {
  EXPECT_EQ(heuristic_config(1, 128, 8).block_rows, 8);    // MHA, one query: narrow
  EXPECT_EQ(heuristic_config(4, 128, 8).block_rows, 8);    // GQA 4, one query: narrow
  EXPECT_EQ(heuristic_config(8, 128, 4).block_rows, 8);    // GQA 8, one query: narrow
  EXPECT_EQ(heuristic_config(12, 128, 8).block_rows, 16);  // GQA 4, three queries
  EXPECT_EQ(heuristic_config(32, 128, 8).block_rows, 32);  // MQA 32, one query
  EXPECT_EQ(heuristic_config(64, 128, 4).block_rows, 64);  // GQA 4, 16 queries
  EXPECT_EQ(heuristic_config(256, 64, 8).block_rows, 64);  // more rows: several row blocks
  EXPECT_EQ(heuristic_config(4, 128, 8).stages, 2);   // narrow: warps wait on their own
  EXPECT_EQ(heuristic_config(64, 128, 4).stages, 3);  // 64 rows: the block's barrier
  EXPECT_EQ(heuristic_config(4, 256, 8).stages, 2);
}

TEST(PagedFamily, EveryHeuristicConfigFitsEveryArch) {
  for (device::Arch arch : device::all_archs())
    for (int head_dim : {64, 128, 256})
      for (int bits : {8, 4})
        for (int rows : {1, 16, 17, 64}) {
          const PagedSpec spec =
              decode_spec(arch, head_dim, bits, ElementType::kF16, ElementType::kF16,
                          heuristic_config(rows, head_dim, bits));
          EXPECT_NO_THROW(check_decode_config(spec, device::default_max_shared_bytes(arch)))
              << spec.to_string();
        }
}

TEST(PagedFamily, CandidateConfigsStartWithTheHeuristicsAndAllFit) {
  const std::vector<PagedDecodeConfig> configs = candidate_configs(4, 128, 8, 99 * 1024);
  ASSERT_GT(configs.size(), 4u);
  const PagedDecodeConfig heuristic = heuristic_config(4, 128, 8);
  EXPECT_EQ(configs[0].block_rows, heuristic.block_rows);
  EXPECT_EQ(configs[0].stages, heuristic.stages);
  for (const PagedDecodeConfig& config : configs) {
    EXPECT_LE(kernels::paged_decode_shared_bytes(128, 8, config.block_rows, config.stage_tokens,
                                                 config.stages),
              99 * 1024);
  }
}

TEST(PagedFamily, TheMergeSharesARowsStatesAmongTheFewestGroupsThatKeepEightAThread) {
  // d=128: 16 threads a row, 8 row slots a block.
  EXPECT_EQ(merge_state_groups(1, 128), 1);
  EXPECT_EQ(merge_state_groups(2, 128), 1);  // intfa::merge_states of two states
  EXPECT_EQ(merge_state_groups(8, 128), 1);
  EXPECT_EQ(merge_state_groups(9, 128), 2);
  EXPECT_EQ(merge_state_groups(17, 128), 4);
  EXPECT_EQ(merge_state_groups(60, 128), 8);  // B=1 N=128k's 60 splits
  EXPECT_EQ(merge_state_groups(kMaxSplits, 128), 8);
  // d=256: 4 row slots, so 64 states take two rounds of 8 a thread.
  EXPECT_EQ(merge_state_groups(kMaxSplits, 256), 4);
  for (int head_dim : {64, 128, 256}) {
    const int slots = kernels::paged_rows_per_set(head_dim);
    for (int states = 1; states <= kMaxSplits; ++states) {
      const int groups = merge_state_groups(states, head_dim);
      // A power of two dividing the block's row slots (the kernel's rows per block).
      EXPECT_EQ(groups & (groups - 1), 0) << states << " states at d=" << head_dim;
      EXPECT_EQ(slots % groups, 0) << states << " states at d=" << head_dim;
      // The fewest: half as many would leave a thread more than 8 states.
      if (groups < slots) {
        EXPECT_LE(states, groups * kernels::kMergeStatesPerThread);
      }
      if (groups > 1) {
        EXPECT_GT(states, groups / 2 * kernels::kMergeStatesPerThread);
      }
    }
  }
}

TEST(PagedFamily, SplitsFillWholeWavesWithTheFewestSplits) {
  // 64 (sequence, KV head) blocks on 396 resident: 6 splits make 384 blocks (97% of a wave).
  EXPECT_EQ(heuristic_splits(64, 32768, 396), 6);
  // 256 blocks: 3 splits fill two waves to 97%.
  EXPECT_EQ(heuristic_splits(256, 4096, 396), 3);
  // Enough blocks already: no split.
  EXPECT_EQ(heuristic_splits(396, 32768, 396), 1);
  // No split shorter than kMinSplitTokens: 300 tokens take at most 2.
  EXPECT_LE(heuristic_splits(1, 300, 396), 2);
  EXPECT_EQ(heuristic_splits(1, 1, 396), 1);
  // At most kMaxSplits.
  EXPECT_EQ(heuristic_splits(1, 1 << 20, 1000), kMaxSplits);
  for (long long units : {1LL, 7LL, 50LL, 100LL, 333LL}) {
    const int splits = heuristic_splits(units, 1 << 20, 396);
    EXPECT_GE(splits, 1);
    EXPECT_LE(splits, kMaxSplits);
  }
}

TEST(PagedFamily, ResidentBlocksFollowLaunchBoundsAndSharedMemory) {
  const device::DeviceInfo info = h100();
  // d = 128: three blocks per SM by the launch bounds (51 KB each fit four).
  EXPECT_EQ(
      resident_blocks(
          decode_spec(info.arch, 128, 8, ElementType::kF16, ElementType::kF16, {16, 64, 3}), info),
      3 * 132);
  // 4 stages of 128 tokens at d = 128 INT8 take 132 KB: one per SM.
  EXPECT_EQ(
      resident_blocks(
          decode_spec(info.arch, 128, 8, ElementType::kF16, ElementType::kF16, {16, 128, 4}), info),
      132);
}

TEST(PagedFamily, WorkspaceHoldsEverySplitsOutputsThenLses) {
  EXPECT_EQ(workspace_bytes(1, 8, 1, 32, 128), 0u);
  const std::size_t lse_at = workspace_lse_offset(6, 8, 1, 32, 128);
  EXPECT_EQ(lse_at, 6u * 8 * 32 * 128 * 4);
  EXPECT_EQ(lse_at % 256, 0u);
  EXPECT_EQ(workspace_bytes(6, 8, 1, 32, 128), lse_at + 6 * 8 * 32 * 4);
  // Three splits of one row: 768 bytes of outputs, 12 of LSEs rounded up to 256.
  EXPECT_EQ(workspace_lse_offset(3, 1, 1, 1, 64), 768u);
  EXPECT_EQ(workspace_bytes(3, 1, 1, 1, 64), 768u + 256u);
}

TEST(PagedFamily, TheAheadOfTimeListHasEachKernelOnce) {
  const std::vector<PagedSpec> specs = family_specs(device::Arch::kSm90a, 128, 4, DType::kBF16);
  std::set<std::string> distinct;
  int decodes = 0;
  for (const PagedSpec& spec : specs) {
    distinct.insert(spec.to_string());
    decodes += spec.kernel == PagedKernel::kDecode;
  }
  EXPECT_EQ(distinct.size(), specs.size());
  EXPECT_EQ(decodes, 4);  // the 8-row (narrow), 16-, 32- and 64-row blocks
  EXPECT_EQ(specs.front().kernel, PagedKernel::kAppend);
}

}  // namespace
}  // namespace intfa::paged
