#include "src/cli/terminal_text.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace abox::cli {
namespace {

// A diff hunk a hostile guest could write: a line that erases itself and returns the cursor
// ("\x1b[2K\r"), a C1 CSI both as UTF-8 (U+009B) and as a raw byte, and DEL, next to text that
// must stay as it is: tabs, newlines and other UTF-8.
const std::string kHostilePatch =
    "@@ -1,2 +1,3 @@\n"
    " keep\tthis\n"
    "+rm -rf ~ \x1b[2K\rharmless comment\n"
    "+csi \xc2\x9b"
    "31m utf8 and \x9b"
    "31m raw\n"
    "+del \x7f and caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82\n";

TEST(TerminalTextTest, ShowsControlCharactersAndLeavesTabNewlineAndUtf8Alone) {
  EXPECT_EQ(ShowControlCharacters(kHostilePatch),
            "@@ -1,2 +1,3 @@\n"
            " keep\tthis\n"
            "+rm -rf ~ \\x1b[2K\\x0dharmless comment\n"
            "+csi \\u009b31m utf8 and \\x9b31m raw\n"
            "+del \\x7f and caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82\n");
  EXPECT_TRUE(HasControlCharacters(kHostilePatch));
}

TEST(TerminalTextTest, EachKindOfControlCharacterIsFound) {
  for (const std::string& one :
       {std::string(1, '\0'), std::string("\x01"), std::string("\r"), std::string("\x1b"),
        std::string("\x1f"), std::string("\x7f"), std::string("\x80"), std::string("\x9f"),
        std::string("\xc2\x80"), std::string("\xc2\x9b"), std::string("\xc2\x9f")}) {
    EXPECT_TRUE(HasControlCharacters("a" + one + "b")) << ShowControlCharacters(one);
    EXPECT_NE(ShowControlCharacters("a" + one + "b").find('\\'), std::string::npos);
  }
  // Printable, tab, newline, Latin-1 supplement (U+00A0 on), and continuation bytes inside a
  // well-formed sequence (U+06DB is d b 9b) are not controls.
  for (const std::string& fine :
       {std::string("plain text\tand\nlines"), std::string("\xc2\xa0\xc3\xbf"),
        std::string("\xdb\x9b"), std::string("\xe2\x80\x9b")}) {
    EXPECT_FALSE(HasControlCharacters(fine)) << fine;
    EXPECT_EQ(ShowControlCharacters(fine), fine);
  }
}

TEST(TerminalTextTest, BrokenUtf8AroundAC1ByteStillShowsIt) {
  // A lead byte whose sequence is cut short leaves the 0x9b after it a lone C1 byte.
  EXPECT_EQ(ShowControlCharacters("\xe2\x9b[1m"), "\xe2\\x9b[1m");
  EXPECT_EQ(ShowControlCharacters("\xc2"), "\xc2");  // a truncated sequence, no control
  EXPECT_EQ(ShowControlCharacters("x\xc2\x9b"), "x\\u009b");
}

TEST(TerminalTextTest, JsonKeepsItsMeaningWithControlsEscaped) {
  nlohmann::json value = {{"patch", kHostilePatch.substr(0, 40) + "\xc2\x9b \x7f"}};
  std::string dumped = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  ASSERT_TRUE(HasControlCharacters(dumped));  // nlohmann leaves C1 and DEL raw
  std::string shown = ShowControlCharactersInJson(dumped);
  EXPECT_FALSE(HasControlCharacters(shown)) << shown;
  EXPECT_NE(shown.find("\\u009b \\u007f"), std::string::npos) << shown;
  EXPECT_EQ(nlohmann::json::parse(shown), value);
}

}  // namespace
}  // namespace abox::cli
