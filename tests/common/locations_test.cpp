// Where the kernel cache lives: the environment's precedence ($INTFA_CACHE_DIR, $XDG_CACHE_HOME,
// $HOME), INTFA_CACHE_DISABLE, and the variables that are refused, naming themselves.
#include "common/locations.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "intfa/errors.hpp"
#include "support/temp_dir.hpp"

namespace intfa::locations {
namespace {

namespace fs = std::filesystem;
using intfa::testing::ScopedEnv;

// Every variable default_cache_location() reads, cleared; each test sets what it needs.
class DefaultCacheDirectory : public ::testing::Test {
 protected:
  ScopedEnv cache_dir_{"INTFA_CACHE_DIR", std::nullopt};
  ScopedEnv disable_{"INTFA_CACHE_DISABLE", std::nullopt};
  ScopedEnv xdg_{"XDG_CACHE_HOME", std::nullopt};
  ScopedEnv home_{"HOME", std::nullopt};
};

TEST_F(DefaultCacheDirectory, PrefersIntfaCacheDir) {
  const ScopedEnv cache_dir("INTFA_CACHE_DIR", "/srv/kernels");
  const ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  const ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(default_cache_directory(), fs::path("/srv/kernels"));
}

TEST_F(DefaultCacheDirectory, ThenXdgCacheHome) {
  const ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  const ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(default_cache_directory(), fs::path("/xdg/intfa"));
}

TEST_F(DefaultCacheDirectory, ThenHomeDotCache) {
  const ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(default_cache_directory(), fs::path("/home/someone/.cache/intfa"));
  const ScopedEnv relative_xdg("XDG_CACHE_HOME", "relative/xdg");  // invalid per the XDG spec
  EXPECT_EQ(default_cache_directory(), fs::path("/home/someone/.cache/intfa"));
}

TEST_F(DefaultCacheDirectory, IsNoneWithoutAnyLocation) {
  EXPECT_EQ(default_cache_directory(), std::nullopt);
}

TEST_F(DefaultCacheDirectory, IsNoneWhenDisabled) {
  const ScopedEnv cache_dir("INTFA_CACHE_DIR", "/srv/kernels");
  for (const char* on : {"1", "true", "yes"}) {
    const ScopedEnv disable("INTFA_CACHE_DISABLE", on);
    EXPECT_EQ(default_cache_directory(), std::nullopt) << on;
  }
  const ScopedEnv enable("INTFA_CACHE_DISABLE", "0");
  EXPECT_EQ(default_cache_directory(), fs::path("/srv/kernels"));
}

TEST_F(DefaultCacheDirectory, RejectsAMalformedDisableFlagNamingIt) {
  const ScopedEnv disable("INTFA_CACHE_DISABLE", "maybe");
  try {
    default_cache_directory();
    FAIL() << "accepted INTFA_CACHE_DISABLE=maybe";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "INTFA_CACHE_DISABLE");
  }
}

TEST_F(DefaultCacheDirectory, RejectsARelativeIntfaCacheDirNamingIt) {
  const ScopedEnv cache_dir("INTFA_CACHE_DIR", "relative/cache");
  try {
    default_cache_directory();
    FAIL() << "accepted a relative INTFA_CACHE_DIR";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "INTFA_CACHE_DIR");
    EXPECT_NE(std::string(error.what()).find("relative/cache"), std::string::npos);
  }
}

// The cache's warnings name the variable, so a bad setting is easy to find.
TEST_F(DefaultCacheDirectory, NamesTheVariableItCameFrom) {
  const ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(default_cache_location()->variable, "HOME");
  const ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(default_cache_location()->variable, "XDG_CACHE_HOME");
  const ScopedEnv cache_dir("INTFA_CACHE_DIR", "/srv/kernels");
  EXPECT_EQ(default_cache_location()->variable, "INTFA_CACHE_DIR");
}

}  // namespace
}  // namespace intfa::locations
