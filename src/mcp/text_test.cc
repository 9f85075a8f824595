#include "src/mcp/text.h"

#include "gtest/gtest.h"
#include "src/base/utf8.h"

namespace abox::mcp {
namespace {

TEST(SanitizeUtf8Test, KeepsValidTextAndReplacesEachBadByte) {
  EXPECT_EQ(SanitizeUtf8("h\xC3\xA9llo"), "h\xC3\xA9llo");
  EXPECT_EQ(SanitizeUtf8("a\xff"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(SanitizeUtf8("\xC3"), "\xEF\xBF\xBD");  // truncated sequence
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_TRUE(base::IsValidUtf8(SanitizeUtf8("\x80\x80\xF4\x90\x80\x80zz")));
}

TEST(CutUtf8Test, CutsOnCharacterBoundaries) {
  std::string s = "ab\xC3\xA9\xC3\xA9";  // a b é é: 6 bytes
  EXPECT_EQ(TailUtf8(s, 3), "\xC3\xA9");
  EXPECT_EQ(TailUtf8(s, 100), s);
  EXPECT_EQ(HeadUtf8(s, 3), "ab");
  EXPECT_EQ(HeadUtf8(s, 4), "ab\xC3\xA9");
}

}  // namespace
}  // namespace abox::mcp
