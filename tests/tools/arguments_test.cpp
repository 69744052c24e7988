// The command line of every verb, as a user types it: one grammar for options (a flag is on alone
// or takes a value after '=', a list option takes its list, `--causal` is a flag in every verb and
// a list where a verb sweeps it), integers with a k suffix everywhere, problems checked before
// anything looks for a GPU, and usage errors that say what is wrong in two lines.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>

#include "device/arch.hpp"
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
  expect_usage_error(run("--rotate=maybe"), "run", "--rotate=maybe");
}

// --rotate is a flag that also takes auto (the default), after '=' or as its next argument.
TEST_F(RunArguments, RotateTakesAutoAsWellAsABool) {
  if (testing::gpu_available()) GTEST_SKIP() << "checks the kernels compiled without a GPU";
  for (const char* automatic : {"--rotate=auto", "--rotate auto", ""}) {
    const CliResult result = run(std::string("--head-dim 64 --seq 100 ") + automatic);
    ASSERT_EQ(result.exit_code, 0) << automatic << "\n" << result.output;
    EXPECT_TRUE(mentions(result, "rotate=auto")) << automatic << "\n" << result.output;
  }
  const CliResult on = run("--head-dim 64 --seq 100 --rotate");
  ASSERT_EQ(on.exit_code, 0) << on.output;
  EXPECT_TRUE(mentions(on, "q_dot_k_mean rotate ")) << on.output;
  const CliResult off = run("--head-dim 64 --seq 100 --rotate=0");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  EXPECT_FALSE(mentions(off, "rotate")) << off.output;
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

// The command whose --help a usage error of `command` points at: its verb, with --decode where
// it runs the paged cache's mode.
std::string help_of(const std::string& command) {
  const std::string verb = command.substr(0, command.find(' '));
  return command.find(" --decode") != std::string::npos ? verb + " --decode" : verb;
}

// "--configs 8,64,2;" said "--configs : expected ROWS,TOKENS,STAGES": the empty entry by its place.
TEST(CommandLine, AnEmptyConfigsEntryIsNamedByItsPlace) {
  const std::pair<const char*, const char*> cases[] = {
      {"bench --decode --configs '8,64,2;'", "--configs 8,64,2;: entry 2 of 2 is empty"},
      {"tune --decode --configs '8,64,2;;16,64,2'", "entry 2 of 3 is empty"},
      {"bench --configs '64,64,4,2;'", "--configs 64,64,4,2;: entry 2 of 2 is empty"},
      {"tune --configs ';64,64,4,2'", "entry 1 of 2 is empty"}};
  for (const auto& [command, named] : cases) {
    expect_usage_error(testing::run_cli(command), help_of(command), named);
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
    expect_usage_error(result, help_of(command), named);
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

// `--out DIR` is required unless --list is given: the help and the usage error say so.
TEST(CommandLine, PrecompileNeedsOutOrList) {
  const CliResult missing = testing::run_cli("precompile --arch sm_80 --head-dims 64");
  expect_usage_error(missing, "precompile", "missing --out DIR");
  EXPECT_TRUE(mentions(missing, "--list")) << missing.output;
  const CliResult help = testing::run_cli("precompile --help");
  EXPECT_TRUE(mentions(help,
                       "usage: intfa precompile --out DIR [options]\n"
                       "       intfa precompile --list [options]\n"))
      << help.output;
  EXPECT_TRUE(mentions(help, "(required unless")) << help.output;
  const CliResult listed =
      testing::run_cli("precompile --list --arch sm_80 --head-dims 64 --variants full");
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
}

// The options a help defines: on the lines that start with one (two to four spaces in), each
// "--name" at the line's start or after two spaces, ", " or ") " (the columns; a description
// that mentions an option has one space before it).
std::map<std::string, int> defined_options(const std::string& help) {
  std::map<std::string, int> defined;
  const std::regex definition_line("^ {1,4}-");
  const std::regex option("(?:^ +|  |, |\\) )(--?[a-z][a-z0-9-]*)");
  std::size_t at = 0;
  for (std::size_t end; (end = help.find('\n', at)) != std::string::npos; at = end + 1) {
    const std::string line = help.substr(at, end - at);
    if (!std::regex_search(line, definition_line)) continue;
    for (std::sregex_iterator match(line.begin(), line.end(), option), last; match != last;
         ++match) {
      defined[(*match)[1]]++;
    }
  }
  return defined;
}

// `bench --help` listed --smooth-k and --rotate twice (in its own options and the numerics
// options it shares with run).
TEST(CommandLine, EachHelpDefinesEachOptionOnce) {
  for (const char* command :
       {"info", "run", "cache", "precompile", "tune", "bench", "bench --decode", "tune --decode"}) {
    const CliResult help = testing::run_cli(std::string(command) + " --help");
    ASSERT_EQ(help.exit_code, 0) << command << ": " << help.output;
    for (const auto& [name, times] : defined_options(help.output)) {
      EXPECT_EQ(times, 1) << "intfa " << command << " --help defines " << name << " " << times
                          << " times:\n"
                          << help.output;
    }
  }
  EXPECT_EQ(defined_options(testing::run_cli("bench --help").output).count("--smooth-k"), 1u);
}

// Without a GPU and without INTFA_ARCH, `intfa run` compiles for every arch: info says so and
// names them (it said "none: ... set INTFA_ARCH"); with INTFA_ARCH, that one.
TEST(CommandLine, InfoWithoutAGpuNamesTheArchsRunCompilesFor) {
  // env(1) takes its -u options before the assignments.
  const std::string unset = "-u INTFA_DEPLOY_CACHE -u INTFA_CACHE_DISABLE -u INTFA_TUNE_DB ";
  const std::string no_gpu = " CUDA_VISIBLE_DEVICES=";  // cuInit: CUDA_ERROR_NO_DEVICE
  const CliResult info = testing::run_cli("info", unset + "-u INTFA_ARCH" + no_gpu);
  EXPECT_EQ(info.exit_code, 0) << info.output;
  const std::size_t line = info.output.find("target arch");
  ASSERT_NE(line, std::string::npos) << info.output;
  const std::string target = info.output.substr(line, info.output.find("NVRTC", line) - line);
  EXPECT_TRUE(target.find("none") == std::string::npos &&
              target.find("every arch") != std::string::npos &&
              target.find("intfa run") != std::string::npos)
      << target;
  const TempDir cache;
  const CliResult run = testing::run_cli(
      "run --head-dim 64 --seq 128",
      unset + "-u INTFA_ARCH" + no_gpu + " INTFA_CACHE_DIR='" + cache.path().string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (device::Arch arch : device::all_archs()) {
    const std::string name = device::arch_name(arch);
    EXPECT_TRUE(mentions(run, " " + name + " ")) << name << ":\n" << run.output;
    EXPECT_NE(target.find(name), std::string::npos) << name << ":\n" << target;
  }
  const CliResult forced = testing::run_cli("info", unset + no_gpu + " INTFA_ARCH=sm_86");
  EXPECT_TRUE(mentions(forced, "target arch    sm_86 (INTFA_ARCH")) << forced.output;
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
