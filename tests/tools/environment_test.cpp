// Every malformed INTFA_* value, as a user meets it: `intfa run` (which, without a GPU, compiles
// and caches the kernels it would launch) either stops with an error naming the variable, or,
// where intfa can carry on, succeeds after exactly one warning naming it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "device/driver_api.hpp"
#include "support/cli.hpp"
#include "support/fake_driver.hpp"
#include "support/temp_dir.hpp"

namespace intfa {
namespace {

using testing::CliResult;
using testing::TempDir;

enum class Outcome { kError, kWarning };

struct BadValue {
  const char* variable;
  std::string value;
  Outcome outcome;
};

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t found = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    found++;
  }
  return found;
}

class Environment : public ::testing::Test {
 protected:
  Environment() {
    std::ofstream(file()) << "a regular file, where a directory should be\n";
    std::filesystem::create_directory(shared());
    ::chmod(shared().c_str(), 0770);
  }
  std::string file() const { return (directory_.path() / "a-file").string(); }
  std::string shared() const { return (directory_.path() / "group-writable").string(); }

  // Without a GPU, `intfa run` compiles for one arch instead of all of them; with one, it launches on
  // the GPU's own arch and would warn that INTFA_ARCH is ignored.
  static std::string compile_only_arch() {
    return device::driver_available() ? "-u INTFA_ARCH" : "INTFA_ARCH=sm_80";
  }

  // `intfa run` on a small problem (for sm_80 without a GPU, or on the fake driver's device),
  // with a fresh cache unless the row names another.
  CliResult run_with(const BadValue& row, bool on_fake_driver = false) const {
    const TempDir cache;
    const std::string device =
        on_fake_driver ? "-u INTFA_ARCH " + testing::fake_driver_setting() : compile_only_arch();
    const std::string environment =
        "-u INTFA_CACHE_DISABLE -u INTFA_DEPLOY_CACHE -u INTFA_LOG -u INTFA_TEMPLATE_DIR "
        "-u INTFA_CUDA_INCLUDE_DIR -u INTFA_LINEINFO -u INTFA_TUNE_DB " +
        device + " INTFA_CACHE_DIR='" + cache.path().string() + "' " + row.variable + "='" +
        row.value + "'";
    return testing::run_cli("run --head-dim 64 --seq 128", environment);
  }

  TempDir directory_;
};

TEST_F(Environment, EveryMalformedValueIsReportedNamingTheVariable) {
  const std::vector<BadValue> rows = {
      {"INTFA_ARCH", "sm_75", Outcome::kError},
      {"INTFA_ARCH", "ninety", Outcome::kError},
      {"INTFA_CACHE_DISABLE", "maybe", Outcome::kError},
      {"INTFA_CACHE_DIR", "relative/cache", Outcome::kError},
      {"INTFA_DEPLOY_CACHE", "relative/bundle", Outcome::kError},
      {"INTFA_LINEINFO", "2", Outcome::kError},
      {"INTFA_TEMPLATE_DIR", "/nonexistent/templates", Outcome::kError},
      {"INTFA_CUDA_INCLUDE_DIR", "relative/include", Outcome::kError},
      {"INTFA_LOG", "verbose", Outcome::kWarning},
      {"INTFA_CACHE_DIR", file() + "/cache", Outcome::kWarning},  // cannot be created
      {"INTFA_CACHE_DIR", shared(), Outcome::kWarning},           // others could plant kernels
  };
  for (const BadValue& row : rows) {
    const std::string where = std::string(row.variable) + "=" + row.value;
    const CliResult result = run_with(row);
    EXPECT_TRUE(testing::mentions(result, row.variable)) << where << ":\n" << result.output;
    if (row.outcome == Outcome::kError) {
      EXPECT_EQ(result.exit_code, 1) << where << ":\n" << result.output;
      EXPECT_TRUE(testing::mentions(result, "error (invalid_argument)")) << where;
    } else {
      EXPECT_EQ(result.exit_code, 0) << where << ":\n" << result.output;
      EXPECT_EQ(count(result.output, "warning"), 1u) << where << ":\n" << result.output;
    }
  }
}

// On a device (the fake driver) the call also reads the tuning database, whose path these
// variables name: INTFA_CACHE_DISABLE=2 was a warning there ("tuned configs are not used") and then
// the kernel cache's error, and a relative INTFA_TUNE_DB was read from the working directory.
// Each is one error naming the variable, and no warning.
TEST_F(Environment, OnADeviceAMalformedPathVariableIsOneErrorAndNoWarning) {
  const std::vector<BadValue> rows = {
      {"INTFA_CACHE_DISABLE", "2", Outcome::kError},
      {"INTFA_CACHE_DIR", "relative/cache", Outcome::kError},
      {"INTFA_TUNE_DB", "relative/tuning.json", Outcome::kError},
  };
  for (const BadValue& row : rows) {
    const std::string where = std::string(row.variable) + "=" + row.value;
    const CliResult result = run_with(row, /*on_fake_driver=*/true);
    EXPECT_EQ(result.exit_code, 1) << where << ":\n" << result.output;
    EXPECT_EQ(
        count(result.output, "error (invalid_argument): invalid " + std::string(row.variable)), 1u)
        << where << ":\n"
        << result.output;
    EXPECT_EQ(count(result.output, "warning"), 0u) << where << ":\n" << result.output;
  }
}

// The cache directory may come from XDG_CACHE_HOME or HOME as well; a warning names whichever.
TEST_F(Environment, AnUnwritableCacheFromXdgOrHomeIsAWarningNamingThatVariable) {
  for (const char* variable : {"XDG_CACHE_HOME", "HOME"}) {
    const CliResult result = testing::run_cli(
        "run --head-dim 64 --seq 128",
        std::string(
            "-u INTFA_CACHE_DIR -u INTFA_CACHE_DISABLE -u XDG_CACHE_HOME ") +
            compile_only_arch() + " " + variable + "='" + file() + "'");
    EXPECT_EQ(result.exit_code, 0) << variable << ":\n" << result.output;
    EXPECT_EQ(count(result.output, "warning"), 1u) << variable << ":\n" << result.output;
    EXPECT_TRUE(testing::mentions(result, std::string("named by ") + variable)) << result.output;
  }
}

}  // namespace
}  // namespace intfa
