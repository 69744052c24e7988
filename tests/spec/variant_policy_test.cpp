// The variant table of variant="auto" (src/spec/variant_policy.cpp): rows found by head dim,
// causal flag and sequence bucket, the bucket of the longer length, and full INT8 where there is
// no row.
#include "spec/variant_policy.hpp"

#include <gtest/gtest.h>

#include <string>

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
  // d=256: not measured, full INT8.
  EXPECT_EQ(choose_variant(hopper, 256, 1024, 1024, false).variant, Variant::kFullInt8);
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
