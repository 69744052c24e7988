// The command line of every verb, as a user types it: one grammar for options (a flag is on alone
// or takes a value after '=', a list option takes its list, `--causal` is a flag in every verb and
// a list where a verb sweeps it), integers with a k suffix everywhere, problems checked before
// anything looks for a GPU, and usage errors that say what is wrong in two lines.
#include <gtest/gtest.h>

#include <string>

#include "support/cli.hpp"
#include "support/fake_driver.hpp"
#include "support/gpu.hpp"
#include "support/temp_dir.hpp"

namespace intfa::cli {
namespace {

using testing::CliResult;
using testing::expect_usage_error;
using testing::lines_of;
using testing::mentions;
using testing::TempDir;

// `intfa run` without a GPU compiles for INTFA_ARCH=sm_86 into a cache shared by these tests.
class RunArguments : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cache_ = new TempDir(); }
  static void TearDownTestSuite() {
    delete cache_;
    cache_ = nullptr;
  }
  static CliResult run(const std::string& arguments) {
    return testing::run_cli("run --repeats 2 " + arguments,
                            "-u INTFA_TUNE_DB -u INTFA_DEPLOY_CACHE -u INTFA_CACHE_DISABLE "
                            "INTFA_ARCH=sm_86 INTFA_CACHE_DIR='" +
                                cache_->path().string() + "'");
  }
  static TempDir* cache_;
};

TempDir* RunArguments::cache_ = nullptr;

// --flag=value on a boolean flag is honoured (it once turned the flag on whatever the value).
TEST_F(RunArguments, AFlagWithAFalseValueIsOff) {
  if (testing::gpu_available()) GTEST_SKIP() << "checks the kernels compiled without a GPU";
  const CliResult result = run("--head-dim 64 --seq 100 --causal=0 --smooth-k=false");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_FALSE(mentions(result, "causal")) << result.output;
  EXPECT_FALSE(mentions(result, "smooth_k")) << result.output;
  const CliResult on = run("--head-dim 64 --seq 100 --causal=yes");
  ASSERT_EQ(on.exit_code, 0) << on.output;
  EXPECT_TRUE(mentions(on, "causal")) << on.output;
}

TEST_F(RunArguments, AFlagTakesOnOffAsItsNextArgumentToo) {
  if (testing::gpu_available()) GTEST_SKIP() << "checks the kernels compiled without a GPU";
  const CliResult off = run("--head-dim 64 --seq 100 --causal off");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  EXPECT_FALSE(mentions(off, "causal")) << off.output;
}

TEST_F(RunArguments, AFlagWithAnotherValueIsAUsageError) {
  expect_usage_error(run("--smooth-k=banana"), "run", "--smooth-k=banana");
  expect_usage_error(run("--causal=off,on"), "run", "--causal");
}

// The k suffix (4k = 4096) is read by every verb's integer options.
TEST_F(RunArguments, SeqTakesAKSuffix) {
  const CliResult result = run("--head-dim 64 --seq 1k");
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// 18014398509481985 * 1024 wraps around to 1024 in 64 bits.
TEST(CommandLine, AKSuffixThatOverflowsIsRefused) {
  expect_usage_error(testing::run_cli("tune --seq 18014398509481985k"), "tune",
                     "18014398509481985k");
  expect_usage_error(testing::run_cli("run --seq 18014398509481985k"), "run", "18014398509481985k");
  expect_usage_error(testing::run_cli("run --batch 9223372036854775807k"), "run",
                     "9223372036854775807k");
}

// Without a GPU the demo still checks its problem as a launch would, naming the option.
TEST_F(RunArguments, AnInvalidProblemIsAUsageErrorNamingTheOption) {
  for (const char* head_dim : {"96", "1", "512", "1024"}) {
    const CliResult result = run(std::string("--head-dim ") + head_dim);
    expect_usage_error(result, "run", "--head-dim");
    EXPECT_TRUE(mentions(result, "supported head dims are 64, 128 and 256")) << result.output;
    EXPECT_FALSE(mentions(result, "NVRTC")) << result.output;
  }
  expect_usage_error(run("--heads 3 --heads-kv 2"), "run", "--heads");
  for (const char* scale : {"nan", "inf", "-1", "1e300", "1e-320", "1e400"}) {
    expect_usage_error(run(std::string("--head-dim 64 --softmax-scale ") + scale), "run",
                       "--softmax-scale");
  }
  expect_usage_error(run("--heads 70000"), "run", "--heads");
  // A rule of the options together, not of one field (it was an error, exit 1; tune said
  // "needs a GPU").
  for (const char* verb : {"run", "bench", "tune"}) {
    expect_usage_error(testing::run_cli(std::string(verb) + " --qk-bits 4 --k-scale block"), verb,
                       "--k-scale");
  }
}

TEST_F(RunArguments, StrayArgumentsAreUsageErrors) {
  expect_usage_error(run("junk"), "run", "unexpected argument 'junk'");
  expect_usage_error(testing::run_cli("info junk"), "info", "unexpected argument 'junk'");
  expect_usage_error(testing::run_cli("bench junk"), "bench", "unexpected argument 'junk'");
}

TEST(CommandLine, AnUnknownOptionIsNamedAsUnknown) {
  expect_usage_error(testing::run_cli("info --bogus"), "info", "unknown option --bogus");
  const CliResult typo = testing::run_cli("run --casual");
  expect_usage_error(typo, "run", "unknown option --casual");
  EXPECT_TRUE(mentions(typo, "did you mean --causal?")) << typo.output;
  expect_usage_error(testing::run_cli("cache ls -x"), "cache", "unknown option -x");
}

TEST(CommandLine, AnEmptyValueIsAUsageErrorNamingTheOption) {
  expect_usage_error(testing::run_cli("cache clear --dir="), "cache", "--dir");
  expect_usage_error(testing::run_cli("precompile --list --arch="), "precompile", "--arch");
}

// "--configs 8,64,2;" said "--configs : expected ROWS,TOKENS,STAGES": the empty entry by its place.
TEST(CommandLine, AnEmptyConfigsEntryIsNamedByItsPlace) {
  const std::pair<const char*, const char*> cases[] = {
      {"bench --decode --configs '8,64,2;'", "--configs 8,64,2;: entry 2 of 2 is empty"},
      {"tune --decode --configs '8,64,2;;16,64,2'", "entry 2 of 3 is empty"},
      {"bench --configs '64,64,4,2;'", "--configs 64,64,4,2;: entry 2 of 2 is empty"},
      {"tune --configs ';64,64,4,2'", "entry 1 of 2 is empty"}};
  for (const auto& [command, named] : cases) {
    const std::string verb = std::string(command).substr(0, std::string(command).find(' '));
    expect_usage_error(testing::run_cli(command), verb, named);
  }
}

TEST(CommandLine, ABooleanFlagWithAnotherValueIsAUsageError) {
  const TempDir cache;
  const CliResult result =
      testing::run_cli("cache clear --stale=banana --dir " + cache.path().string());
  expect_usage_error(result, "cache", "--stale=banana");
}

// bench reads its whole command line, problems included, before it looks for a GPU.
TEST(CommandLine, BenchChecksItsArgumentsBeforeLookingForAGpu) {
  expect_usage_error(testing::run_cli("bench --bogus"), "bench", "unknown option --bogus");
  expect_usage_error(testing::run_cli("bench --head-dims 96"), "bench", "--head-dims");
  expect_usage_error(testing::run_cli("bench --causal maybe"), "bench", "--causal");
  if (testing::gpu_available()) return;
  // One grammar: --causal alone is a flag here too, and a list sweeps both.
  for (const char* causal : {"--causal", "--causal on,off", "--causal=off,on", "--causal=1"}) {
    const CliResult result = testing::run_cli(std::string("bench --seq 4k ") + causal);
    EXPECT_EQ(result.exit_code, 1) << causal << ": " << result.output;
    EXPECT_TRUE(mentions(result, "needs a GPU")) << causal << ": " << result.output;
  }
}

// Shapes whose random inputs no machine holds (14336 TiB; 32 TiB of decode queries) are usage
// errors naming the options and the size, before a GPU is looked for: on the fake driver bench
// printed std::bad_alloc.
TEST(CommandLine, AShapeBeyondTheHostsMemoryIsAUsageErrorNamingItsSize) {
  const std::string attention = " --batch 4096 --heads 4096 --seq 1024k --head-dims 64";
  const std::string decode =
      " --decode --batch 65535 --heads-kv 1 --heads-q 16383 --q-len 64 --seq 16 --head-dims 256";
  const std::pair<std::string, std::string> cases[] = {
      {"bench" + attention, "--batch 4096 --heads 4096 --seq 1048576 --head-dims 64"},
      {"tune" + attention, "--batch 4096 --heads 4096 --seq 1048576 --head-dims 64"},
      {"bench" + decode, "--q-len 64 --heads-q 16383 --head-dims 256"},
      {"run --batch 1024 --heads 1024 --seq 1024k --head-dim 256",
       "--batch 1024 --heads 1024 --seq 1048576 --seq-kv 1048576 --head-dim 256"}};
  for (const auto& [command, named] : cases) {
    const std::string verb = command.substr(0, command.find(' '));
    // tune would compile and check every candidate config on the fake driver before it got there.
    const CliResult result =
        testing::run_cli(command, verb != "tune" ? testing::fake_driver_setting() : "");
    expect_usage_error(result, verb, named);
    EXPECT_TRUE(mentions(result, "TiB of host memory")) << result.output;
  }
}

TEST(CommandLine, PrecompileNamesWhatIsWrongWithItsOutputAndDatabase) {
  const CliResult null_out =
      testing::run_cli("precompile --arch sm_80 --head-dims 64 --out /dev/null");
  expect_usage_error(null_out, "precompile", "character device");
  EXPECT_FALSE(mentions(null_out, "writable")) << null_out.output;
  const TempDir directory;
  const CliResult database = testing::run_cli("precompile --list --configs tuned --tuning-db " +
                                              directory.path().string());
  EXPECT_NE(database.exit_code, 0) << database.output;
  EXPECT_TRUE(mentions(database, "is a directory")) << database.output;
  EXPECT_FALSE(mentions(database, "special file")) << database.output;
}

TEST(CommandLine, AnUnknownCommandPointsAtTheOverview) {
  const CliResult result = testing::run_cli("frobnicate");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(mentions(result, "unknown command 'frobnicate'")) << result.output;
  EXPECT_TRUE(mentions(result, "intfa --help")) << result.output;
  EXPECT_EQ(lines_of(result), 2u) << result.output;
}

}  // namespace
}  // namespace intfa::cli
