// `intfa run`, the demo: the kernels it compiles for the numerics asked (without a GPU it only
// compiles and lists them; with one it launches and checks them and says PASS).
#include <gtest/gtest.h>

#include <string>

#include "device/driver_api.hpp"
#include "support/cli.hpp"
#include "support/temp_dir.hpp"

namespace intfa {
namespace {

using testing::CliResult;
using testing::TempDir;

class RunCommand : public ::testing::Test {
 protected:
  CliResult run(const std::string& arguments) const {
    return testing::run_cli("run --repeats 2 " + arguments,
                            "-u INTFA_TUNE_DB -u INTFA_DEPLOY_CACHE -u INTFA_CACHE_DISABLE "
                            "INTFA_ARCH=sm_86 INTFA_CACHE_DIR='" +
                                cache_.path().string() + "'");
  }
  static bool has_gpu() { return device::driver_available(); }

  TempDir cache_;
};

TEST_F(RunCommand, SmoothKOffAndRotationCompileOneRotatedRowsKernelOrPassOnAGpu) {
  const CliResult result = run("--smooth-k=0 --rotate --head-dim 64 --seq 100 --causal");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  if (has_gpu()) {
    EXPECT_TRUE(testing::mentions(result, "Q and K rotated")) << result.output;
    EXPECT_FALSE(testing::mentions(result, "K smoothed")) << result.output;
    EXPECT_TRUE(testing::mentions(result, "PASS")) << result.output;
    return;
  }
  // K's rows with V's max pass, Q's rows.
  EXPECT_TRUE(
      testing::mentions(result, "quantize_k_v_scale sm_86 d64 f16->i8 rotate v-scale=channel"))
      << result.output;
  EXPECT_TRUE(testing::mentions(result, "quantize_rows sm_86 d64 f16->i8 rotate")) << result.output;
  EXPECT_FALSE(testing::mentions(result, "channel_mean")) << result.output;
  EXPECT_FALSE(testing::mentions(result, "smooth_k")) << result.output;
}

TEST_F(RunCommand, WithoutOptionsTheKernelsHaveTheDefaultNumerics) {
  const CliResult result = run("--head-dim 64 --seq 100");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  if (has_gpu()) {
    EXPECT_TRUE(testing::mentions(result, "P u8 against the tile max, V per channel"))
        << result.output;
    EXPECT_TRUE(testing::mentions(result, "PASS")) << result.output;
    return;
  }
  EXPECT_TRUE(testing::mentions(result, "p=u8 p-scale=tile v-scale=channel")) << result.output;
  // K smoothing and automatic rotation are on by default: the mean pass (the means and the
  // heads' decisions), K's smoothed rows with V's max pass (one launch), Q's rows with the LSE
  // term, V.
  EXPECT_TRUE(testing::mentions(result, "channel_mean sm_86 d64 f16")) << result.output;
  EXPECT_TRUE(testing::mentions(
      result, "quantize_k_v_scale sm_86 d64 f16->i8 smooth_k rotate=auto v-scale=channel"))
      << result.output;
  EXPECT_TRUE(testing::mentions(result, "quantize_v sm_86 d64 f16 v-scale=channel"))
      << result.output;
  EXPECT_FALSE(testing::mentions(result, "quantize_v_scale")) << result.output;
  EXPECT_TRUE(testing::mentions(result, "quantize_rows sm_86 d64 f16->i8 q_dot_k_mean rotate=auto"))
      << result.output;
}

TEST_F(RunCommand, HalfInt8QuantizesNoV) {
  const CliResult result = run("--variant half --head-dim 64 --seq 100");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  if (has_gpu()) {
    EXPECT_TRUE(testing::mentions(result, "half INT8")) << result.output;
    EXPECT_TRUE(testing::mentions(result, "PASS")) << result.output;
    return;
  }
  EXPECT_TRUE(testing::mentions(result, "half_int8")) << result.output;
  EXPECT_FALSE(testing::mentions(result, "quantize_v")) << result.output;
}

// A Hopper config runs where the GPU is a Hopper; anywhere else, and without a GPU for any arch
// but sm_90a, it is an error naming the path (not an NVRTC failure of the kernel).
void expect_hopper_config_runs_or_names_the_path(const CliResult& result, bool on_gpu) {
  if (on_gpu && result.exit_code == 0) {
    EXPECT_TRUE(testing::mentions(result, "PASS")) << result.output;
    return;
  }
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_TRUE(testing::mentions(result, "config.path = wgmma needs sm_90a")) << result.output;
  EXPECT_FALSE(testing::mentions(result, "NVRTC")) << result.output;
}

// A config given with --config is checked as a launch checks it, with or without a GPU.
TEST_F(RunCommand, AHopperConfigForAnotherArchIsAnErrorNamingThePath) {
  expect_hopper_config_runs_or_names_the_path(
      run("--head-dim 64 --seq 100 --config 128,128,12,2"), has_gpu());
}

TEST_F(RunCommand, ABadConfigFieldIsAnErrorNamingTheField) {
  const CliResult result = run("--head-dim 64 --seq 100 --config 64,256,4,2");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_TRUE(testing::mentions(result, "config.block_n")) << result.output;
}

// Without INTFA_ARCH and without a GPU the demo compiles for every arch: a Hopper config only
// for sm_90a, saying why it skipped the others.
TEST(RunCommandEveryArch, AHopperConfigCompilesForSm90aOnlyAndNamesTheArchsItSkipped) {
  TempDir cache;
  const CliResult result = testing::run_cli(
      "run --repeats 2 --head-dim 64 --seq 100 --config 128,128,12,2",
      "-u INTFA_TUNE_DB -u INTFA_DEPLOY_CACHE -u INTFA_CACHE_DISABLE -u INTFA_ARCH "
      "INTFA_CACHE_DIR='" + cache.path().string() + "'");
  if (device::driver_available()) {
    expect_hopper_config_runs_or_names_the_path(result, true);
    return;
  }
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* arch : {"sm_80", "sm_86", "sm_89"}) {
    EXPECT_TRUE(testing::mentions(result, std::string("skipped for ") + arch)) << result.output;
    EXPECT_FALSE(testing::mentions(result, std::string("quantize_rows ") + arch)) << result.output;
  }
  EXPECT_TRUE(testing::mentions(result, "attention_wgmma sm_90a d64 m128 n128 w12 s2"))
      << result.output;
}

}  // namespace
}  // namespace intfa
