#include "src/cli/text_block_edit.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/cli/toml_check.h"

namespace abox::cli {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kTable = {"mcp_servers", "abox"};
constexpr char kLead[] = "# Written by abox";

std::string Span(std::string_view text, std::optional<LineSpan> span) {
  return span ? std::string(text.substr(span->begin, span->end - span->begin)) : "<none>";
}

TEST(TomlTableTest, FindsTheTableWithItsSubTablesAndLeadComment) {
  std::string text =
      "model = \"o3\"\n"
      "\n"
      "[mcp_servers.other]\n"
      "command = \"x\"\n"
      "\n"
      "# Written by abox; remove with abox mcp uninstall\n"
      "[mcp_servers.abox]\n"
      "command = \"/a\"\n"
      "[ mcp_servers . \"abox\" . env ]\n"
      "K = \"v\"\n"
      "\n"
      "# the profile below is mine\n"
      "[profiles.fast]\n"
      "x = 1\n";
  EXPECT_EQ(Span(text, FindTomlTable(text, kTable, kLead)),
            "# Written by abox; remove with abox mcp uninstall\n"
            "[mcp_servers.abox]\n"
            "command = \"/a\"\n"
            "[ mcp_servers . \"abox\" . env ]\n"
            "K = \"v\"\n");
  EXPECT_EQ(Span(text, FindTomlTable(text, {"mcp_servers", "ab"}, kLead)), "<none>");
}

TEST(TomlTableTest, LinesInMultiLineStringsAndArraysAreNotHeaders) {
  std::string text =
      "notes = \"\"\"\n"
      "[mcp_servers.abox]\n"
      "\"\"\"\n"
      "matrix = [\n"
      "  [\"mcp_servers.abox\"],\n"
      "]\n";
  EXPECT_EQ(Span(text, FindTomlTable(text, kTable, kLead)), "<none>");
  text += "[mcp_servers.abox] # mine\ncommand = 'a'\n";
  EXPECT_EQ(Span(text, FindTomlTable(text, kTable, kLead)),
            "[mcp_servers.abox] # mine\ncommand = 'a'\n");
}

TEST(BlockTest, AppendThenRemoveGivesTheOriginalBack) {
  const std::string block = "[mcp_servers.abox]\ncommand = \"/a\"\n";
  for (std::string original : {std::string(""), std::string("# only a comment\n"),
                               std::string("a = 1\n\n[x]\ny = 2\n"), std::string("a = 1\n\n")}) {
    std::string added = SetBlock(original, FindTomlTable(original, kTable, kLead), block);
    std::optional<LineSpan> span = FindTomlTable(added, kTable, kLead);
    ASSERT_TRUE(span.has_value()) << added;
    EXPECT_EQ(RemoveBlock(added, *span), original);
    EXPECT_TRUE(CheckToml("c.toml", added).ok()) << added;
  }
  // Replacing keeps everything around the block.
  std::string text = "a = 1\n\n[mcp_servers.abox]\ncommand = \"/old\"\n\n[z]\nq = 1\n";
  EXPECT_EQ(SetBlock(text, FindTomlTable(text, kTable, kLead), block),
            "a = 1\n\n[mcp_servers.abox]\ncommand = \"/a\"\n\n[z]\nq = 1\n");
  // A text without a final newline gets one before the blank line.
  EXPECT_EQ(SetBlock("a = 1", std::nullopt, block), "a = 1\n\n" + block);
}

TEST(MarkedSectionTest, FindsReplacesAndRemoves) {
  std::string original = "# Project\n\nBuild with make.\n";
  std::string section = "<!-- b -->\nuse abox\n<!-- e -->\n";
  absl::StatusOr<std::optional<LineSpan>> none =
      FindMarkedSection("A.md", original, "<!-- b -->", "<!-- e -->");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  std::string added = SetBlock(original, std::nullopt, section);
  EXPECT_EQ(added, original + "\n" + section);
  absl::StatusOr<std::optional<LineSpan>> span =
      FindMarkedSection("A.md", added, "<!-- b -->", "<!-- e -->");
  ASSERT_TRUE(span.ok() && span->has_value());
  EXPECT_EQ(RemoveBlock(added, **span), original);

  absl::StatusOr<std::optional<LineSpan>> open =
      FindMarkedSection("A.md", "x\n<!-- b -->\ny\n", "<!-- b -->", "<!-- e -->");
  ASSERT_FALSE(open.ok());
  EXPECT_THAT(open.status().message(), HasSubstr("A.md has a '<!-- b -->' line without"));
}

TEST(LineDiffTest, ShowsTheChangedLinesOnce) {
  EXPECT_EQ(LineDiff("a\nb\nc\n", "a\nB\nx\nc\n"), "@@ line 2\n-b\n+B\n+x\n");
  EXPECT_EQ(LineDiff("", "new\n"), "@@ line 1\n+new\n");
  EXPECT_EQ(LineDiff("keep\ngone\n", "keep\n"), "@@ line 2\n-gone\n");
}

TEST(TomlCheckTest, NamesTheLineOfAnError) {
  absl::Status bad = CheckToml("/h/.codex/config.toml", "a = 1\nb = \n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("/h/.codex/config.toml is not valid TOML (line 2"));
  absl::StatusOr<std::optional<TomlServer>> server = ReadTomlServer(
      "c", "[mcp_servers.abox]\ncommand = " + TomlString("/a \"b\"\\") + "\nargs = [\"-x\"]\n",
      "abox");
  ASSERT_TRUE(server.ok() && server->has_value()) << server.status();
  EXPECT_EQ((*server)->command, "/a \"b\"\\");
  EXPECT_EQ((*server)->args, std::vector<std::string>{"-x"});
}

}  // namespace
}  // namespace abox::cli
