#include "src/cli/json_member_edit.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::cli {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;

const std::vector<std::string> kPath = {"mcpServers", "abox"};
const ordered_json kEntry = {{"command", "/opt/abox-mcp"}, {"args", {"--allow-apply"}}};

std::string Set(const std::string& text, const ordered_json& value = kEntry) {
  absl::StatusOr<std::string> out = SetJsonMember("f.json", text, kPath, value);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}
std::string Remove(const std::string& text, bool prune) {
  absl::StatusOr<std::string> out = RemoveJsonMember("f.json", text, kPath, prune);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

TEST(JsonMemberEditTest, NewFileIsPrettyPrinted) {
  EXPECT_EQ(Set(""),
            "{\n"
            "  \"mcpServers\": {\n"
            "    \"abox\": {\n"
            "      \"command\": \"/opt/abox-mcp\",\n"
            "      \"args\": [\n"
            "        \"--allow-apply\"\n"
            "      ]\n"
            "    }\n"
            "  }\n"
            "}\n");
}

TEST(JsonMemberEditTest, AddsToExistingServersInTheFilesIndentationAndRemovesExactly) {
  std::string original =
      "{\n"
      "    \"theme\": \"dark\",\n"
      "    \"n\": 1.50,\n"
      "    \"mcpServers\": {\n"
      "        \"other\": {\"command\": \"x\", \"args\": [\"\\u00e9\"]}\n"
      "    },\n"
      "    \"zeta\": []\n"
      "}";
  std::string installed = Set(original);
  EXPECT_EQ(installed,
            "{\n"
            "    \"theme\": \"dark\",\n"
            "    \"n\": 1.50,\n"
            "    \"mcpServers\": {\n"
            "        \"other\": {\"command\": \"x\", \"args\": [\"\\u00e9\"]},\n"
            "        \"abox\": {\n"
            "            \"command\": \"/opt/abox-mcp\",\n"
            "            \"args\": [\n"
            "                \"--allow-apply\"\n"
            "            ]\n"
            "        }\n"
            "    },\n"
            "    \"zeta\": []\n"
            "}");
  EXPECT_EQ(Remove(installed, false), original);
}

TEST(JsonMemberEditTest, ReplacesAnExistingEntryInPlace) {
  std::string text = "{\"mcpServers\": {\"abox\": {\"command\": \"old\"}, \"b\": 2}, \"c\": 3}\n";
  EXPECT_EQ(Set(text, {{"command", "new"}}),
            "{\"mcpServers\": {\"abox\": {\"command\":\"new\"}, \"b\": 2}, \"c\": 3}\n");
  // The first of several members goes with its comma.
  EXPECT_EQ(Remove(text, false), "{\"mcpServers\": {\"b\": 2}, \"c\": 3}\n");
}

TEST(JsonMemberEditTest, CreatedParentIsPrunedOnRemove) {
  std::string original = "{\n  \"numStartups\": 4,\n  \"projects\": {}\n}\n";
  std::string installed = Set(original);
  EXPECT_THAT(installed, HasSubstr("  \"projects\": {},\n  \"mcpServers\": {\n    \"abox\""));
  EXPECT_EQ(Remove(installed, /*prune=*/true), original);
  // Without pruning, the emptied object stays.
  EXPECT_EQ(Remove(installed, false),
            "{\n  \"numStartups\": 4,\n  \"projects\": {},\n  \"mcpServers\": {}\n}\n");
}

TEST(JsonMemberEditTest, EmptyObjectsAndOneLineFiles) {
  EXPECT_EQ(Remove(Set("{}"), true), "{}");
  std::string one_line = "{\"a\":1,\"mcpServers\":{\"x\":{}}}";
  std::string installed = Set(one_line);
  EXPECT_EQ(installed,
            "{\"a\":1,\"mcpServers\":{\"x\":{}, \"abox\": "
            "{\"command\":\"/opt/abox-mcp\",\"args\":[\"--allow-apply\"]}}}");
  EXPECT_EQ(Remove(installed, false), one_line);
}

TEST(JsonMemberEditTest, TabsAreKept) {
  std::string original = "{\n\t\"a\": 1\n}\n";
  std::string installed = Set(original, {{"command", "c"}});
  EXPECT_EQ(installed,
            "{\n\t\"a\": 1,\n\t\"mcpServers\": {\n\t\t\"abox\": {\n\t\t\t\"command\": \"c\"\n"
            "\t\t}\n\t}\n}\n");
  EXPECT_EQ(Remove(installed, true), original);
}

TEST(JsonMemberEditTest, SetThenRemoveGivesEveryShapeBackByteForByte) {
  const std::vector<std::string> originals = {
      "{}",
      "{}\n",
      "{\"a\":1}",
      "{ \"a\" : [1, {\"b\": null}] , \"c\": \"}{\\\"\" }",
      "{\n  \"mcpServers\": {}\n}\n",
      "{\n  \"mcpServers\": {\"x\": {}}\n}\n",
      "{\n    \"mcpServers\": {\n        \"a\": {},\n        \"b\": {}\n    }\n}",
      "\n\n  {\r\n  \"k\": true,\r\n  \"l\": -1.5e+3\r\n}\r\n",
      "{\"mcpServers\":{\"abox2\":1,\"x\":[]},\"z\":{}}",
      "{\"\\u006dcpServers\": {\"y\": 2}, \"q\": \"//not a comment\"}",
  };
  for (const std::string& original : originals) {
    absl::StatusOr<ordered_json> before = ParseUserJson("f", original);
    ASSERT_TRUE(before.ok()) << original;
    bool had_servers = before->contains("mcpServers");
    std::string installed = Set(original);
    ordered_json after = ordered_json::parse(installed, nullptr, false);
    ASSERT_TRUE(after.is_object()) << installed;
    EXPECT_EQ(after["mcpServers"]["abox"], kEntry) << installed;
    after["mcpServers"].erase("abox");
    if (!had_servers) {
      after.erase("mcpServers");
    }
    EXPECT_EQ(after, *before) << "only abox's entry was added:\n" << installed;
    EXPECT_EQ(Remove(installed, !had_servers), original) << installed;
  }
}

TEST(JsonMemberEditTest, MissingEntryRemovesNothing) {
  std::string text = "{\"mcpServers\": {\"x\": 1}}";
  EXPECT_EQ(Remove(text, true), text);
  EXPECT_EQ(Remove("", true), "");
}

TEST(JsonMemberEditTest, MalformedFilesAreRefusedWithTheLine) {
  absl::StatusOr<std::string> bad = SetJsonMember("/p/.mcp.json", "{\n  \"a\": 1,\n}\n", kPath, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("/p/.mcp.json is not valid JSON"));
  EXPECT_THAT(bad.status().message(), HasSubstr("line 3"));
  EXPECT_THAT(bad.status().message(), HasSubstr("Nothing was written"));

  absl::StatusOr<std::string> comment =
      SetJsonMember("m.json", "{\n  // my servers\n  \"a\": \"http://x\"\n}", kPath, 1);
  ASSERT_FALSE(comment.ok());
  EXPECT_THAT(comment.status().message(), HasSubstr("m.json has a comment at line 2"));
  // "//" inside a string is not a comment.
  EXPECT_TRUE(SetJsonMember("m.json", "{\"a\": \"http://x\"}", kPath, 1).ok());

  EXPECT_THAT(SetJsonMember("m.json", "[1]", kPath, 1).status().message(),
              HasSubstr("not an object"));
  EXPECT_THAT(SetJsonMember("m.json", "{\"mcpServers\": []}", kPath, 1).status().message(),
              HasSubstr("mcpServers is not an object"));
  EXPECT_FALSE(RemoveJsonMember("m.json", "{", kPath, false).ok());
}

}  // namespace
}  // namespace abox::cli
