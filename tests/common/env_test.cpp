#include "common/env.hpp"

#include <gtest/gtest.h>

#include "common/log.hpp"
#include "intfa/errors.hpp"
#include "support/temp_dir.hpp"

namespace intfa::env {
namespace {

TEST(Env, FlagsAcceptTheDocumentedSpellingsAndNameTheVariableOtherwise) {
  for (const char* yes : {"1", "true", "ON", "yes"}) {
    testing::ScopedEnv value("INTFA_TEST_FLAG", yes);
    EXPECT_TRUE(flag("INTFA_TEST_FLAG")) << yes;
  }
  for (const char* no : {"0", "false", "off", "NO"}) {
    testing::ScopedEnv value("INTFA_TEST_FLAG", no);
    EXPECT_FALSE(flag("INTFA_TEST_FLAG")) << no;
  }
  {
    testing::ScopedEnv value("INTFA_TEST_FLAG", nullptr);
    EXPECT_FALSE(flag("INTFA_TEST_FLAG"));
  }
  testing::ScopedEnv value("INTFA_TEST_FLAG", "sometimes");
  try {
    flag("INTFA_TEST_FLAG");
    FAIL();
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "INTFA_TEST_FLAG");
  }
}

// INTFA_LOG is a flag as every other: yes turns it on, and the one warning for a malformed value
// states the flags' rule (it said "0 or 1" while yes was read as 1).
TEST(Env, IntfaLogIsReadAsAFlagAndItsWarningStatesTheFlagsRule) {
  {
    testing::ScopedEnv on("INTFA_LOG", "yes");
    EXPECT_TRUE(log::verbose());
  }
  testing::ScopedEnv malformed("INTFA_LOG", "verbose");
  std::string rule;
  try {
    flag("INTFA_LOG");
  } catch (const InvalidArgument& error) {
    rule = error.what();
  }
  const log::ScopedCapture capture;
  EXPECT_FALSE(log::verbose());
  EXPECT_FALSE(log::verbose());
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_NE(capture.warnings()[0].find(rule), std::string::npos) << capture.warnings()[0];
  EXPECT_EQ(capture.warnings()[0].find("0 or 1"), std::string::npos) << capture.warnings()[0];
}

TEST(Env, IntegersAreRangeChecked) {
  {
    testing::ScopedEnv value("INTFA_TEST_INT", "42");
    EXPECT_EQ(integer("INTFA_TEST_INT", 0, 100), 42);
  }
  for (const char* bad : {"abc", "4.5", "101", "-1", "12x"}) {
    testing::ScopedEnv value("INTFA_TEST_INT", bad);
    EXPECT_THROW(integer("INTFA_TEST_INT", 0, 100), InvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace intfa::env
