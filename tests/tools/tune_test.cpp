// `intfa tune` as a user runs it, on any machine: its help, its usage errors (found before it
// looks for a GPU), and its answer where there is no GPU. The tuning itself: tests/tune.
#include <gtest/gtest.h>

#include <string>

#include "support/cli.hpp"
#include "support/gpu.hpp"

namespace intfa::cli {
namespace {

using testing::CliResult;
using testing::mentions;
using testing::run_cli;

TEST(TuneOptions, HelpDescribesTheVerb) {
  const CliResult help = run_cli("tune --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(mentions(help, "usage: intfa tune")) << help.output;
  EXPECT_TRUE(mentions(help, "--budget-s")) << help.output;
  EXPECT_TRUE(mentions(run_cli("--help"), "  tune "));
}

TEST(TuneOptions, BadValuesAreUsageErrorsNamingTheOption) {
  for (const char* arguments :
       {"--head-dims 96", "--causal maybe", "--variants quarter", "--seq 3000,4096",
        "--configs 64,128", "--repeats 0", "--budget-s -1", "--dtype f32", "--frobnicate 1",
        "extra"}) {
    const CliResult result = run_cli(std::string("tune ") + arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments << "\n" << result.output;
    EXPECT_TRUE(mentions(result, "intfa tune --help")) << arguments << "\n" << result.output;
    EXPECT_FALSE(mentions(result, "usage: intfa tune")) << arguments << "\n" << result.output;
  }
  EXPECT_TRUE(mentions(run_cli("tune --seq 3000,4096"), "3000 and 4096 fall in one bucket"));
}

TEST(TuneOptions, WithoutAGpuItSaysSoAndFails) {
  if (testing::gpu_available()) GTEST_SKIP() << "a GPU is present";
  const CliResult result = run_cli("tune --head-dims 128 --seq 4k");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(mentions(result, "intfa tune: needs a GPU")) << result.output;
}

TEST(TuneVariantTable, HasItsOwnHelpAndUsageErrors) {
  const CliResult help = run_cli("tune --variant-table --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(mentions(help, "usage: intfa tune --variant-table")) << help.output;
  EXPECT_TRUE(mentions(help, "--accuracy-floor")) << help.output;
  EXPECT_TRUE(mentions(run_cli("tune --help"), "--variant-table")) << help.output;
  for (const char* arguments :
       {"--accuracy-floor 0", "--accuracy-floor 101", "--variants quarter", "--seq 3000,4096",
        "--head-dims 96", "--repeats 0", "--dtype f32", "--configs 64,128,4,2", "extra"}) {
    const CliResult result = run_cli(std::string("tune --variant-table ") + arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments << "\n" << result.output;
    EXPECT_TRUE(mentions(result, "intfa tune --variant-table --help")) << arguments << "\n"
                                                                       << result.output;
  }
  EXPECT_TRUE(mentions(run_cli("tune --variant-table --accuracy-floor 0"), "--accuracy-floor"));
  // The mode's help is named only where the verb has the mode.
  EXPECT_TRUE(mentions(run_cli("bench --variant-table"), "see 'intfa bench --help'"));
  EXPECT_TRUE(mentions(run_cli("info --decode"), "see 'intfa info --help'"));
  // Both of tune's modes at once: a usage error naming both, before any GPU is looked for.
  const CliResult both = run_cli("tune --variant-table --decode --head-dims 128");
  EXPECT_EQ(both.exit_code, 2) << both.output;
  EXPECT_TRUE(mentions(both, "--decode and --variant-table are two modes of tune")) << both.output;
  EXPECT_TRUE(mentions(both, "see 'intfa tune --help'")) << both.output;
  const CliResult both_help = run_cli("tune --decode --variant-table --help");
  EXPECT_EQ(both_help.exit_code, 0) << both_help.output;
  EXPECT_TRUE(mentions(both_help, "usage: intfa tune [")) << both_help.output;
  EXPECT_TRUE(mentions(both_help, "--variant-table")) << both_help.output;
  // --variant-table=no is the plain verb, which has no accuracy floor.
  const CliResult plain = run_cli("tune --variant-table=no --accuracy-floor 1");
  EXPECT_EQ(plain.exit_code, 2) << plain.output;
  EXPECT_TRUE(mentions(plain, "--accuracy-floor")) << plain.output;
  EXPECT_TRUE(mentions(plain, "see 'intfa tune --help'")) << plain.output;
}

TEST(TuneVariantTable, WithoutAGpuItSaysSoAndFails) {
  if (testing::gpu_available()) GTEST_SKIP() << "a GPU is present";
  const CliResult result = run_cli("tune --variant-table --head-dims 128 --seq 4k");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(mentions(result, "intfa tune --variant-table: needs a GPU")) << result.output;
}

}  // namespace
}  // namespace intfa::cli
