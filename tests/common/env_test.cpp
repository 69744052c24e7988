#include "common/env.hpp"

#include <gtest/gtest.h>

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
