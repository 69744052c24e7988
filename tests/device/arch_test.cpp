#include "device/arch.hpp"

#include <gtest/gtest.h>

#include "device/driver_api.hpp"
#include "intfa/errors.hpp"
#include "support/temp_dir.hpp"

namespace intfa::device {
namespace {

TEST(Arch, ComputeCapabilitiesMapToTargets) {
  EXPECT_EQ(arch_for_compute_capability(8, 0), Arch::kSm80);
  EXPECT_EQ(arch_for_compute_capability(8, 6), Arch::kSm86);
  EXPECT_EQ(arch_for_compute_capability(8, 7), Arch::kSm87);
  EXPECT_EQ(arch_for_compute_capability(8, 9), Arch::kSm89);
  EXPECT_EQ(arch_for_compute_capability(9, 0), Arch::kSm90a);
  EXPECT_EQ(arch_for_compute_capability(10, 0), Arch::kSm100a);
  EXPECT_EQ(arch_for_compute_capability(12, 0), Arch::kSm120);
  EXPECT_EQ(arch_for_compute_capability(12, 1), Arch::kSm121);
}

// A cubin for sm_XY loads on X.Z for Z >= Y, except an arch-specific ('a') one, which loads on X.Y
// alone.
TEST(Arch, LaterMinorsRunTheNearestLowerTargetUnlessItIsArchSpecific) {
  EXPECT_EQ(arch_for_compute_capability(8, 1), Arch::kSm80);
  EXPECT_EQ(arch_for_compute_capability(8, 8), Arch::kSm87);
  EXPECT_EQ(arch_for_compute_capability(12, 9), Arch::kSm121);
}

TEST(Arch, UnsupportedComputeCapabilitiesAreRefusedNamingIntfaArch) {
  for (auto [major, minor] : {std::pair{7, 5}, {7, 0}, {9, 1}, {10, 3}, {11, 0}, {13, 0}}) {
    try {
      arch_for_compute_capability(major, minor);
      FAIL() << major << "." << minor;
    } catch (const Unsupported& error) {
      EXPECT_NE(std::string(error.what()).find("INTFA_ARCH"), std::string::npos);
    }
  }
}

TEST(Arch, NamesRoundTrip) {
  for (Arch arch : all_archs()) EXPECT_EQ(parse_arch(arch_name(arch)), arch);
  EXPECT_EQ(parse_arch("SM_90"), Arch::kSm90a);
  EXPECT_EQ(parse_arch("sm_100"), Arch::kSm100a);
  EXPECT_FALSE(parse_arch("sm_75").has_value());
  EXPECT_FALSE(parse_arch("sm_120a").has_value());
  EXPECT_FALSE(parse_arch("").has_value());
}

TEST(Arch, EnvironmentOverrideIsParsedOrRefusedNamingTheVariable) {
  {
    testing::ScopedEnv arch("INTFA_ARCH", "sm_89");
    EXPECT_EQ(arch_override_from_env(), Arch::kSm89);
  }
  for (const char* name : {"sm_87", "sm_100a", "sm_120", "sm_121"}) {
    testing::ScopedEnv arch("INTFA_ARCH", name);
    EXPECT_EQ(arch_override_from_env(), parse_arch(name)) << name;
  }
  {
    testing::ScopedEnv arch("INTFA_ARCH", nullptr);
    EXPECT_FALSE(arch_override_from_env().has_value());
  }
  testing::ScopedEnv arch("INTFA_ARCH", "sm_70");
  try {
    arch_override_from_env();
    FAIL();
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "INTFA_ARCH");
    EXPECT_NE(std::string(error.what()).find(arch_names()), std::string::npos) << error.what();
  }
}

TEST(Arch, NamesForMessagesListEveryTargetInOrder) {
  EXPECT_EQ(arch_names(), "sm_80, sm_86, sm_87, sm_89, sm_90a, sm_100a, sm_120 or sm_121");
  EXPECT_EQ(arch_names("and"), "sm_80, sm_86, sm_87, sm_89, sm_90a, sm_100a, sm_120 and sm_121");
}

TEST(Driver, AbsenceIsReportedNotThrownByTheProbe) {
  std::string reason;
  const bool available = driver_available(&reason);
  if (available) {
    EXPECT_TRUE(reason.empty());
    EXPECT_GE(driver().driver_version, 12000);
  } else {
    EXPECT_FALSE(reason.empty());
    EXPECT_THROW(driver(), NoDevice);
  }
}

}  // namespace
}  // namespace intfa::device

namespace intfa::device {
namespace {

// CUDA 13 gave some old names new signatures under a _v2 suffix (cuCtxGetDevice_v2 takes a
// context): the table must bind each function to the symbol whose signature cuda.h declares.
TEST(Driver, EntryPointsAreResolvedByTheSymbolsCudaHDeclares) {
  EXPECT_STREQ(driver_symbol_name_of_cuMemAlloc(), "cuMemAlloc_v2");
  EXPECT_STREQ(driver_symbol_name_of_cuCtxGetDevice(), "cuCtxGetDevice");
}

}  // namespace
}  // namespace intfa::device
