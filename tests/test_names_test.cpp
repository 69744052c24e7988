// The suite's own names, as ctest and a failing run show them: every value-parameterised test is
// named by a name generator (Cases/MergeStatesGpu.X/F16_InPlace_D64, not .../1) and its GetParam()
// prints as text ("B=1 Hq=2 ..."), not gtest's dump of the parameter's bytes ("112-byte object
// <70-80 40-6E ...>", which holds pointers and padding and so changes from build to build).
#include <gtest/gtest.h>

#include <cctype>
#include <string>

namespace intfa {
namespace {

bool all_digits(const std::string& text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

TEST(TestNames, EveryParameterisedTestHasANameAndPrintsItsParameterAsText) {
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  int parameterised = 0;
  for (int suite_index = 0; suite_index < unit.total_test_suite_count(); ++suite_index) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(suite_index);
    for (int test_index = 0; test_index < suite.total_test_count(); ++test_index) {
      const ::testing::TestInfo& test = *suite.GetTestInfo(test_index);
      const std::string name = std::string(suite.name()) + "." + test.name();
      if (test.type_param() != nullptr) {
        EXPECT_EQ(std::string(test.type_param()).find("-byte object"), std::string::npos)
            << name << ": TypeParam = " << test.type_param();
      }
      if (test.value_param() == nullptr) continue;
      ++parameterised;
      const std::string value = test.value_param();
      EXPECT_EQ(value.find("-byte object"), std::string::npos)
          << name << ": GetParam() = " << value
          << "\n  give the parameter's type a PrintTo(const T&, std::ostream*) in its namespace";
      const std::string last = name.substr(name.rfind('/') + 1);
      EXPECT_FALSE(all_digits(last))
          << name << ": named by its index; give INSTANTIATE_TEST_SUITE_P a name generator";
    }
  }
  EXPECT_GT(parameterised, 0);
}

}  // namespace
}  // namespace intfa
