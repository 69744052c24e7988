#include "common/json.hpp"

#include <gtest/gtest.h>

#include <string>

#include "support/timing.hpp"

namespace intfa::json {
namespace {

using testing::kSanitizerSlowdown;
using testing::least_ms;
using testing::wide_json_object;

TEST(Json, RoundTripsNestedValuesInInsertionOrder) {
  Value object = Value::object();
  object.set("zeta", 1);
  object.set("alpha", Value::array());
  object.set("text", "quote \" backslash \\ newline \n");
  Value& list = const_cast<Value&>(object.at("alpha"));
  list.push_back(2.5);
  list.push_back(nullptr);
  list.push_back(true);
  const std::string text = object.dump();
  EXPECT_LT(text.find("zeta"), text.find("alpha"));
  EXPECT_EQ(parse(text), object);
  EXPECT_EQ(parse(object.dump(-1)), object);
}

TEST(Json, RejectsMalformedDocumentsWithTheirOffset) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1,}", "01", "1.", "\"\\x\"", "\"\\ud800\"",
                          "{\"a\":1,\"a\":2}", "nul", "[1] 2", "\"a\nb\""}) {
    EXPECT_THROW(parse(bad), ParseError) << bad;
  }
  try {
    parse("[1, 2, x]");
    FAIL();
  } catch (const ParseError& error) {
    EXPECT_EQ(error.offset(), 7u);
  }
}

TEST(Json, ADuplicateMemberIsRefusedAtItsSecondName) {
  try {
    parse("{\"a\": 1, \"b\": 2, \"a\": 3}");
    FAIL();
  } catch (const ParseError& error) {
    EXPECT_EQ(error.offset(), 17u);
    EXPECT_NE(std::string(error.what()).find("duplicate member 'a'"), std::string::npos);
  }
}

TEST(Json, RefusesNestingDeeperThanTheLimit) {
  EXPECT_NO_THROW(parse(std::string(64, '[') + std::string(64, ']')));
  EXPECT_THROW(parse(std::string(100000, '[')), ParseError);
}

TEST(Json, DecodesUnicodeEscapesToUtf8) {
  EXPECT_EQ(parse("\"\\u00e9\\ud83d\\ude00\"").as_string(), "\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(Json, TypeErrorsNameWhatWasExpected) {
  const Value number = 3.5;
  EXPECT_THROW(number.as_string(), TypeError);
  EXPECT_THROW(number.as_int(), TypeError);
  EXPECT_EQ(Value(42).as_int(), 42);
  EXPECT_THROW(Value::object().at("missing"), TypeError);
}

// 55,200 members (1 MiB) took 12 s of duplicate checks when each name was compared with every
// earlier one.
TEST(JsonParseCost, AMebibyteObjectParsesWithinFiftyMilliseconds) {
  const std::string text = wide_json_object(55200);
  ASSERT_GE(text.size(), std::size_t{1} << 20);
  Value document;
  const double ms = least_ms([&] { document = parse(text); });
  EXPECT_EQ(document.as_object().size(), 55200u);
  EXPECT_LT(ms, 50 * kSanitizerSlowdown) << text.size() << " bytes";
}

TEST(JsonParseCost, AnObjectOfMoreMembersThanAnyFileOfOursHoldsIsRefused) {
  EXPECT_NO_THROW(parse(wide_json_object(65536)));
  try {
    parse(wide_json_object(65537));
    FAIL() << "accepted";
  } catch (const ParseError& error) {
    EXPECT_NE(std::string(error.what()).find("more than 65536 members"), std::string::npos)
        << error.what();
  }
}

// A 60 MiB manifest of zeros once took 1.4 GB to hold: the number of values is bounded, and the
// parse stops at the bound, long before the end of the text.
TEST(JsonParseCost, ADocumentOfMoreValuesThanAnyFileOfOursHoldsIsRefusedAtTheBound) {
  std::string zeros = "[0";
  for (int i = 0; i < (1 << 20) + 10; ++i) zeros += ",0";
  zeros += "]";
  try {
    parse(zeros);
    FAIL() << "accepted";
  } catch (const ParseError& error) {
    EXPECT_NE(std::string(error.what()).find("more than 1048576 values"), std::string::npos)
        << error.what();
    EXPECT_LE(error.offset(), std::size_t{2} << 20);
  }
}

}  // namespace
}  // namespace intfa::json
