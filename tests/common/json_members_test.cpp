// The shared member checks of the manifest and the tuning database: each refusal reaches the
// document's `fail` with the member's path, and no number outside the range is converted.
#include "common/json_members.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace intfa::json {
namespace {

// What `fail` was handed, thrown as itself.
struct Refused {
  MemberProblem problem;
};

[[noreturn]] void fail(const MemberProblem& problem) { throw Refused{problem}; }

const MemberReader kReader(fail);

template <typename Read>
MemberProblem refusal(Read read) {
  try {
    read();
  } catch (const Refused& refused) {
    return refused.problem;
  }
  ADD_FAILURE() << "the read was not refused";
  return {};
}

TEST(JsonMembers, ReadsWhatIsThereAndNamesThePathOfWhatIsNot) {
  const Value object = parse(R"({"n": 12, "s": "text", "b": true, "x": 2.5, "inner": {}})");
  EXPECT_EQ(kReader.integer(object, "entries[3].", "n", 1, 100), 12);
  EXPECT_EQ(kReader.unsigned_integer(object, "", "n", 12), 12u);
  EXPECT_EQ(kReader.string(object, "", "s", 4, true), "text");
  EXPECT_TRUE(kReader.boolean(object, "", "b"));
  EXPECT_DOUBLE_EQ(kReader.non_negative(object, "", "x"), 2.5);

  const MemberProblem missing = refusal([&] { kReader.member(object, "entries[3].", "gone"); });
  EXPECT_EQ(missing.path, "entries[3].gone");
  EXPECT_TRUE(missing.missing);
  const MemberProblem long_string = refusal([&] { kReader.string(object, "", "s", 3, true); });
  EXPECT_EQ(long_string.path, "s");
  EXPECT_EQ(long_string.shown, "\"text\"");
  EXPECT_EQ(refusal([&] { kReader.boolean(object, "", "n"); }).expectation,
            "expected true or false");
  EXPECT_EQ(refusal([&] { kReader.require_object(object.at("n"), "entries[0]"); }).path,
            "entries[0]");
  // A parent that is no object has no members (rather than a type error from find).
  EXPECT_TRUE(refusal([&] { kReader.member(object.at("n"), "n.", "x"); }).missing);
}

TEST(JsonMembers, IntegersOutsideTheirRangeOrFractionalAreRefusedBeforeAnyConversion) {
  const Value numbers = parse(
      R"({"half": 1.5, "negative": -1, "zero": -0, "huge": 1e300, "two_to_64": 18446744073709551616,
          "two_to_63": 9223372036854775808, "big": 4294967296})");
  EXPECT_EQ(refusal([&] { kReader.integer(numbers, "", "half", 0, 10); }).path, "half");
  EXPECT_EQ(refusal([&] { kReader.unsigned_integer(numbers, "", "negative", 10); }).path,
            "negative");
  EXPECT_EQ(kReader.unsigned_integer(numbers, "", "zero", 10), 0u);
  EXPECT_EQ(refusal([&] { kReader.integer(numbers, "", "huge", 0, 10); }).path, "huge");
  // Bounds at the type's end round up to 2^64 and 2^63 as doubles: those values must not pass.
  EXPECT_EQ(refusal([&] {
              kReader.unsigned_integer(numbers, "", "two_to_64", UINT64_MAX);
            }).path,
            "two_to_64");
  EXPECT_EQ(refusal([&] { kReader.integer(numbers, "", "two_to_63", 0, INT64_MAX); }).path,
            "two_to_63");
  EXPECT_EQ(refusal([&] { kReader.integer(numbers, "", "big", 0, UINT32_MAX - 1); }).expectation,
            "expected an integer in [0, 4294967294]");
  EXPECT_EQ(kReader.unsigned_integer(numbers, "", "big", UINT64_MAX), 4294967296u);
}

}  // namespace
}  // namespace intfa::json
