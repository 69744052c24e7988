// The paged cache in the `intfa` tool, on any machine: `bench --decode` and `tune --decode` check
// their options before they look for a GPU, and `precompile --paged-bits` bundles the family.
#include <gtest/gtest.h>

#include <string>

#include "support/cli.hpp"
#include "support/fake_driver.hpp"
#include "support/gpu.hpp"

namespace intfa::cli {
namespace {

using testing::CliResult;
using testing::mentions;
using testing::run_cli;

TEST(DecodeCli, HelpAfterDecodeDescribesTheDecodeOptions) {
  for (const char* verb : {"bench", "tune"}) {
    const CliResult help = run_cli(std::string(verb) + " --decode --help");
    EXPECT_EQ(help.exit_code, 0) << verb;
    EXPECT_TRUE(mentions(help, "usage: intfa bench --decode")) << help.output;
    EXPECT_TRUE(mentions(help, "--page-size")) << help.output;
  }
  EXPECT_TRUE(mentions(run_cli("bench --help"), "--decode"));
}

// The option by its name ("--bits 6" named cache.bits, "--head-dims 96" cache.head_dim).
TEST(DecodeCli, BadValuesAreUsageErrorsNamingTheOption) {
  const std::pair<const char*, const char*> cases[] = {
      {"--bits 6", "--bits"},
      {"--head-dims 96", "--head-dims"},
      {"--page-size 24", "--page-size"},
      {"--q-len 65", "--q-len"},
      {"--heads-q 12", "--heads-q"},
      {"--configs 16,64", "--configs"},
      {"--dtype f32", "--dtype"},
      {"--splits 65", "--splits"},
      {"--seq 0", "--seq"},
      {"--head-dim 128", "--head-dim"},
      // The rules of a config and of the problem, checked without a device (each said "needs a
      // GPU"): block rows, stage tokens, stages; 1000 batches of 128 KV heads pass the grid.
      {"--configs 7,64,2", "--configs 7,64,2"},
      {"--configs '64,64,2;8,32,2'", "--configs 8,32,2"},
      {"--configs 8,64,5", "--configs 8,64,5"},
      {"--batch 1000 --heads-kv 128 --heads-q 128 --seq 16", "--batch"}};
  for (const auto& [arguments, option] : cases) {
    for (const char* verb : {"bench", "tune"}) {
      // The help of the verb's --decode mode, whose options these are.
      testing::expect_usage_error(run_cli(std::string(verb) + " --decode " + arguments),
                                  std::string(verb) + " --decode", option);
    }
  }
}

// 65535 sequences of 1048608 tokens take 2^32 + 65534 pages of 16 tokens: an int product wrapped
// to 65534, a valid pool, and the fill wrote past it (exit 139 on the fake driver). 8192 of 1M
// tokens are 2^29 pages, an int, but 2^33 rows: past the kernels' 32-bit row indices.
TEST(DecodeCli, APoolOfTooManyPagesIsAUsageErrorNamingBatchAndSeq) {
  for (const char* sizes : {"--seq 1048608 --batch 65535", "--seq 1024k --batch 8192"}) {
    for (const char* verb : {"bench", "tune"}) {
      const std::string command = std::string(verb) + " --decode " + sizes +
                                  " --heads-kv 1 --heads-q 1 --bits 8 --head-dims 64 --repeats 1";
      const CliResult result = run_cli(command, testing::fake_driver_setting());
      testing::expect_usage_error(result, std::string(verb) + " --decode", "--batch");
      EXPECT_TRUE(mentions(result, "--seq")) << command << "\n" << result.output;
    }
  }
}

TEST(DecodeCli, WithoutAGpuItSaysSoAndFails) {
  if (testing::gpu_available()) GTEST_SKIP() << "a GPU is present";
  const CliResult result = run_cli("bench --decode --batch 1 --seq 1k");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(mentions(result, "needs a GPU")) << result.output;
}

TEST(DecodeCli, PrecompileListsTheFamilyForEachWidth) {
  const CliResult result = run_cli(
      "precompile --list --arch sm_80 --head-dims 64 --variants full --paged-bits 8,4");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* spec :
       {"paged_append sm_80 d64 f16->i8", "paged_append sm_80 d64 f16->i4",
        "paged_decode sm_80 d64 i4 m64 n64 s3 f16->f16",
        "paged_decode sm_80 d64 i8 m8 n64 s2 f16->f16", "merge_states sm_80 d64 f32->f16"}) {
    EXPECT_TRUE(mentions(result, spec)) << spec << "\n" << result.output;
  }
  EXPECT_EQ(run_cli("precompile --list --paged-bits 6").exit_code, 2);
}

}  // namespace
}  // namespace intfa::cli
