#include "common/strings.hpp"

#include <gtest/gtest.h>

#include <string>

namespace intfa::strings {
namespace {

TEST(Printable, EscapesC0ControlsAndDeleteAsHexBytes) {
  EXPECT_EQ(printable("a\x1b[2Jb\x07\x7f"), "a\\x1b[2Jb\\x07\\x7f");
  EXPECT_EQ(printable("one\ntwo\tthree"), "one\\x0atwo\\x09three");
  EXPECT_EQ(printable("one\ntwo", /*keep_newlines=*/true), "one\ntwo");
}

TEST(Printable, EscapesC1ControlsAndBytesThatAreNotUtf8) {
  EXPECT_EQ(printable("\xc2\x9b"
                      "31m"),
            "\\u009b31m");  // U+009B, CSI in UTF-8
  EXPECT_EQ(printable("\x9b"
                      "31m"),
            "\\x9b31m");                           // a lone CSI byte (8-bit terminals)
  EXPECT_EQ(printable("\xe2\x82"), "\\xe2\\x82");  // a truncated sequence
}

TEST(Printable, KeepsTextAndUtf8AsTheyAre) {
  const std::string text = "quantize_rows sm_80 d128 f16->i8 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  EXPECT_EQ(printable(text), text);
}

}  // namespace
}  // namespace intfa::strings
