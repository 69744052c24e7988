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

TEST_F(RunCommand, SmoothKCompilesTheMeanPassAndTheSmoothedRowsOrPassesOnAGpu) {
  const CliResult result = run("--smooth-k --head-dim 64 --seq 100 --causal");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  if (has_gpu()) {
    EXPECT_TRUE(testing::mentions(result, "PASS")) << result.output;
    return;
  }
  EXPECT_TRUE(testing::mentions(result, "channel_mean sm_86 d64 f16")) << result.output;
  EXPECT_TRUE(testing::mentions(result, "quantize_rows sm_86 d64 f16->i8 smooth_k"))
      << result.output;
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
  EXPECT_TRUE(testing::mentions(result, "p=u8/tile_max v=channel")) << result.output;
  EXPECT_TRUE(testing::mentions(result, "quantize_v_scale sm_86 d64 f16 v=channel"))
      << result.output;
  EXPECT_FALSE(testing::mentions(result, "channel_mean")) << result.output;
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

}  // namespace
}  // namespace intfa
