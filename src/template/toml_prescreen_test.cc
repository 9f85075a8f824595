#include "src/template/toml_prescreen.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/template/project_template.h"

namespace abox::tmpl {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(TomlPrescreenTest, AcceptsNonAsciiInStringsAndComments) {
  for (const char* text : {
           "setup = [\"echo caf\xc3\xa9\"]  # caf\xc3\xa9\n",
           "setup = ['caf\xc3\xa9']\n",
           "\"caf\xc3\xa9\" = 1\n",
           "a = [\"\xc3\xa9\",'\xc3\xa9'] b = {c = \"\xc3\xa9\"}\n",
           "setup = [\"\"\"\ncaf\xc3\xa9 \\\" \xc3\xa9\"\"\"]\n",
           "setup = ['''\n\xc3\xa9'''']\n",
           "setup = [\"\"\"\\\n  x\xc3\xa9\"\"\"\"\"]\n",
       }) {
    EXPECT_EQ(FindUnsafeTomlSpot(text), std::nullopt) << text;
  }
}

// Regressions (template_parse_fuzz): each of these reached TOML_UNREACHABLE in toml++ 3.3.0.
TEST(TomlPrescreenTest, FindsNonAsciiWhereTheParserLooksForWhitespace) {
  std::optional<UnsafeTomlSpot> spot = FindUnsafeTomlSpot("a = 1\nsetup = [\xc3\xa9]\n");
  ASSERT_TRUE(spot.has_value());
  EXPECT_EQ(spot->line, 2u);
  EXPECT_EQ(spot->column, 10u);
  EXPECT_THAT(spot->why, HasSubstr("outside a string or comment"));

  spot = FindUnsafeTomlSpot("setup = [\"\"\"\\\n  \xc2\xa7\"\"\"]\n");
  ASSERT_TRUE(spot.has_value());
  EXPECT_EQ(spot->line, 2u);
  EXPECT_EQ(spot->column, 3u);
  EXPECT_THAT(spot->why, HasSubstr("after a line-ending backslash"));

  // Quotes closing a multi-line string do not open another one.
  EXPECT_TRUE(FindUnsafeTomlSpot("a = \"\"\"x\"\"\"\"\n[\xc3\xa9]\n").has_value());
  EXPECT_TRUE(FindUnsafeTomlSpot("[caf\xc3\xa9]\n").has_value());
  // A bare value runs on through quotes: toml++ scans 8'''&''<U+FEDF> as one value.
  EXPECT_TRUE(FindUnsafeTomlSpot("memory =8'''&''\xef\xbb\x9f'''\n").has_value());
  EXPECT_TRUE(FindUnsafeTomlSpot("a = .'\xc3\xa9'\n").has_value());
  EXPECT_TRUE(FindUnsafeTomlSpot("a = \"\"\"\"x\\\xef\xba\xbf\"\"\"\n").has_value());
  EXPECT_FALSE(FindUnsafeTomlSpot("a = \"\"\"\"x\\\\\xef\xba\xbf\"\"\"\n").has_value());
  // Strings right after '=' or '.' are strings; a bare value's run is not.
  EXPECT_FALSE(FindUnsafeTomlSpot("a =\"\xc3\xa9\"\nb.'\xc3\xa9' = 1\n").has_value());
  // Regression (template_parse_fuzz): the closing quotes end the string, not open another.
  spot = FindUnsafeTomlSpot("#@ \nsp =\"\"\"\n\"\"\"\"\xef\xbb\x8f# sm\n");
  ASSERT_TRUE(spot.has_value());
  EXPECT_EQ(spot->line, 3u);
  EXPECT_EQ(spot->column, 5u);
  EXPECT_TRUE(FindUnsafeTomlSpot("a = 8='\xc3\xa9'\n").has_value());
  EXPECT_TRUE(FindUnsafeTomlSpot("a = true\xc3\xa9\n").has_value());
  EXPECT_TRUE(FindUnsafeTomlSpot("a = [1,\n  2 \xc3\xa9]\n").has_value());
  EXPECT_TRUE(FindUnsafeTomlSpot("a = 1 \xef\xb3\xbf\n").has_value());
}

TEST(TomlPrescreenTest, ParseTemplateRefusesWhatThePrescreenFinds) {
  absl::StatusOr<ProjectTemplate> t = ParseTemplate(".abox.toml", "[caf\xc3\xa9]\n");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()),
              StartsWith(".abox.toml is not valid TOML (line 1, column 5: a character outside "
                         "ASCII"));
  t = ParseTemplate(".abox.toml", "setup = [\"\"\"caf\xc3\xa9\"\"\"]\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->setup[0], "caf\xc3\xa9");
}

}  // namespace
}  // namespace abox::tmpl
