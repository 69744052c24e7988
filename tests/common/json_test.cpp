#include "common/json.hpp"

#include <gtest/gtest.h>

namespace intfa::json {
namespace {

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

}  // namespace
}  // namespace intfa::json
