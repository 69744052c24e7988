// The variant table of variant="auto" (src/spec/variant_policy.cpp): rows found by head dim,
// causal flag and sequence bucket, the bucket of the longer length, and full INT8 where there is
// no row.
#include "spec/variant_policy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "intfa/attention.hpp"
#include "intfa/errors.hpp"

namespace intfa::attention {
namespace {

TEST(VariantPolicy, Sm90aTakesHalfInt8WhereTheTableSaysAndFullInt8Beyond) {
  const device::Arch hopper = device::Arch::kSm90a;
  // d=64: half INT8 at every length, causal or not.
  for (bool causal : {false, true}) {
    for (int seq : {1, 1000, 4096, 100000}) {
      EXPECT_EQ(choose_variant(hopper, 64, seq, seq, causal).variant, Variant::kHalfInt8)
          << seq << " causal=" << causal;
    }
  }
  // d=128: half INT8 up to the 2k bucket (8k causal), full INT8 beyond; the longer length's
  // bucket decides.
  EXPECT_EQ(choose_variant(hopper, 128, 2048, 2048, false).variant, Variant::kHalfInt8);
  EXPECT_EQ(choose_variant(hopper, 128, 2049, 2049, false).variant, Variant::kFullInt8);
  EXPECT_EQ(choose_variant(hopper, 128, 1, 4096, false).variant, Variant::kFullInt8);
  EXPECT_EQ(choose_variant(hopper, 128, 8192, 100, true).variant, Variant::kHalfInt8);
  EXPECT_EQ(choose_variant(hopper, 128, 8193, 100, true).variant, Variant::kFullInt8);
  // d=256: half INT8 at every length.
  for (bool causal : {false, true}) {
    EXPECT_EQ(choose_variant(hopper, 256, 100000, 100000, causal).variant, Variant::kHalfInt8);
  }
  // The reason names the row and the bucket.
  const VariantChoice choice = choose_variant(hopper, 128, 3000, 3000, false);
  EXPECT_NE(choice.reason.find("d=128"), std::string::npos) << choice.reason;
  EXPECT_NE(choice.reason.find("bucket 4k"), std::string::npos) << choice.reason;
}

TEST(VariantPolicy, OtherArchsHaveNoTableAndTakeFullInt8) {
  for (device::Arch arch : {device::Arch::kSm80, device::Arch::kSm89, device::Arch::kSm120}) {
    const VariantChoice choice = choose_variant(arch, 64, 1024, 1024, false);
    EXPECT_EQ(choice.variant, Variant::kFullInt8);
    EXPECT_NE(choice.reason.find("no table"), std::string::npos) << choice.reason;
  }
  EXPECT_NE(variant_policy_text(device::Arch::kSm90a).find("d=128: half INT8 up to 2k tokens"),
            std::string::npos);
}

TEST(VariantPolicy, PicksTheFastestVariantWithinTheFloorAndTheMoreAccurateWithin2Percent) {
  const VariantMeasurement full{Variant::kFullInt8, 1.00, 0.014};
  const VariantMeasurement half_close{Variant::kHalfInt8, 1.02, 0.009};
  const VariantMeasurement half_slow{Variant::kHalfInt8, 1.03, 0.009};
  const VariantMeasurement half_fast{Variant::kHalfInt8, 0.90, 0.009};
  // 1 / 1.02 = 0.980 of the fastest's speed: the more accurate; 1 / 1.03 = 0.971: the faster.
  EXPECT_EQ(pick_variant({full, half_close}, 0.015), Variant::kHalfInt8);
  EXPECT_EQ(pick_variant({half_close, full}, 0.015), Variant::kHalfInt8);
  EXPECT_EQ(pick_variant({full, half_slow}, 0.015), Variant::kFullInt8);
  EXPECT_EQ(pick_variant({half_slow, full}, 0.015), Variant::kFullInt8);
  EXPECT_EQ(pick_variant({full, half_fast}, 0.015), Variant::kHalfInt8);
  // Past the floor a variant is not chosen for its speed.
  EXPECT_EQ(pick_variant({full, half_slow}, 0.012), Variant::kHalfInt8);
  // None within it: the most accurate.
  EXPECT_EQ(pick_variant({full, half_slow}, 0.005), Variant::kHalfInt8);
  EXPECT_EQ(pick_variant({full}, 0.005), Variant::kFullInt8);
  const VariantMeasurement half_worse{Variant::kHalfInt8, 0.5, 0.02};
  EXPECT_EQ(pick_variant({full, half_worse}, 0.015), Variant::kFullInt8);
}

TEST(VariantPolicy, PickVariantRefusesWhatWasNotMeasured) {
  const auto field_of = [](const std::vector<VariantMeasurement>& measured) -> std::string {
    try {
      pick_variant(measured, 0.015);
    } catch (const InvalidArgument& error) {
      return error.field();
    }
    return "(accepted)";
  };
  EXPECT_EQ(field_of({}), "measured");
  EXPECT_EQ(field_of({{Variant::kFullInt8, 0.0, 0.01}}), "measured.median_ms");
  EXPECT_EQ(field_of({{Variant::kFullInt8, 1.0, -0.01}}), "measured.relative_l2");
  EXPECT_EQ(field_of({{Variant::kFullInt8, 1.0, 0.01}, {Variant::kHalfInt8, 1.0, std::nan("")}}),
            "measured.relative_l2");
}

TEST(VariantPolicy, AHeadDimNoKernelServesIsAnInvalidArgumentBeforeTheDeviceIsAsked) {
  AttentionProblem problem;
  problem.head_dim = 300;
  try {
    auto_variant(problem, CUdevice{0});
    FAIL() << "head dim 300 was accepted";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "problem.head_dim");
  }
}

}  // namespace
}  // namespace intfa::attention
