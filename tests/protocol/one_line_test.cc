// OneLine: text from elsewhere printed safely on one line of a terminal.
#include "hmpmd/protocol/one_line.h"

#include <gtest/gtest.h>

namespace hmpmd {
namespace {

TEST(OneLineTest, ControlCharactersAndBadBytesAreEscaped) {
  EXPECT_EQ(OneLine("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(OneLine("esc \x1b[2J del \x7f"), "esc \\x1b[2J del \\x7f");
  EXPECT_EQ(OneLine("bad \xff\xc3"), "bad \\xff\\xc3");
}

TEST(OneLineTest, C1ControlsAndLineSeparatorsAreEscapedOtherTextKept) {
  // U+009B (CSI) clears a terminal as ESC [ does; U+0085 (NEL), U+2028 and
  // U+2029 break a line.
  EXPECT_EQ(OneLine("a\xc2\x9b"
                    "2Jb"),
            "a\\u009b2Jb");
  EXPECT_EQ(OneLine("x\xc2\x85y\xe2\x80\xa8z\xe2\x80\xa9"), "x\\u0085y\\u2028z\\u2029");
  // The neighbours are text: U+00A0, U+00E9, U+2027, U+4E2D, an emoji.
  const std::string kept = "\xc2\xa0\xc3\xa9\xe2\x80\xa7\xe4\xb8\xad\xf0\x9f\x98\x80";
  EXPECT_EQ(OneLine(kept), kept);
}

TEST(OneLineTest, CutAtACharacterBoundarySayingHowMuchIsLeftOut) {
  EXPECT_EQ(OneLine("abcdef", 3), "abc... (3 more bytes)");
  EXPECT_EQ(OneLine("a\xc3\xa9z", 2), "a... (3 more bytes)");
}

}  // namespace
}  // namespace hmpmd
