#include "src/image/coding_agent.h"

#include "gtest/gtest.h"

namespace abox::image {
namespace {

TEST(ParseAgentSpecTest, AcceptsNameAndNameAtVersion) {
  auto plain = ParseAgentSpec("claude");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain, (AgentSpec{"claude", "latest"}));
  auto pinned = ParseAgentSpec("claude@2.1.332");
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(*pinned, (AgentSpec{"claude", "2.1.332"}));
  for (const char* ok :
       {"codex@latest", "codex@0.171.0", "codex@^0.171", "claude@2.1.0-beta.1", "codex@>=0.100"}) {
    EXPECT_TRUE(ParseAgentSpec(ok).ok()) << ok;
  }
}

TEST(ParseAgentSpecTest, RefusesUnknownAgentsListingTheKnownOnes) {
  auto s = ParseAgentSpec("cursor");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("unknown agent 'cursor'"), std::string::npos);
  EXPECT_NE(s.status().message().find("claude, codex"), std::string::npos);
  EXPECT_FALSE(ParseAgentSpec("").ok());
  EXPECT_FALSE(ParseAgentSpec("@1.0").ok());
  EXPECT_FALSE(ParseAgentSpec("Claude").ok());
}

TEST(ParseAgentSpecTest, RefusesVersionsNpmCouldMisread) {
  for (const char* bad :
       {"claude@", "claude@--ignore-scripts=false", "claude@-1", "claude@1 2", "claude@1;rm",
        "claude@1@2", "claude@file:../x", "claude@git+ssh://x", "claude@$(id)", "claude@1/2"}) {
    auto s = ParseAgentSpec(bad);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseAgentSpec("claude@a b").status().message().find("NAME@VERSION"),
            std::string::npos);
}

TEST(ParseAgentSpecsTest, RefusesTheSameAgentTwice) {
  EXPECT_TRUE(ParseAgentSpecs({"claude", "codex"}).ok());
  EXPECT_TRUE(ParseAgentSpecs({}).ok());
  auto twice = ParseAgentSpecs({"claude", "claude@1.0.0"});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos);
}

ResolvedAgent Claude() {
  return {"claude", "@anthropic-ai/claude-code", "2.1.332", "sha512-tvSh6bLvEbd97A+/Q=="};
}

TEST(ValidateResolvedAgentTest, AcceptsRegistryAnswersRefusesOddOnes) {
  EXPECT_TRUE(ValidateResolvedAgent(Claude()).ok());
  ResolvedAgent a = Claude();
  a.version = "../../etc";
  EXPECT_FALSE(ValidateResolvedAgent(a).ok());
  a = Claude();
  a.version = "latest";
  EXPECT_FALSE(ValidateResolvedAgent(a).ok());
  a = Claude();
  a.integrity = "md5-abc";
  EXPECT_FALSE(ValidateResolvedAgent(a).ok());
  a = Claude();
  a.integrity = "sha512-a'b";
  EXPECT_FALSE(ValidateResolvedAgent(a).ok());
  a = Claude();
  a.package = "@evil/claude-code";
  EXPECT_FALSE(ValidateResolvedAgent(a).ok());
}

TEST(AgentPathsTest, InstallUnderOptAboxAgentsWithCommandInUsrLocalBin) {
  EXPECT_EQ(AgentInstallDir(Claude()), "/opt/abox/agents/claude/2.1.332");
  EXPECT_EQ(AgentEntryPath(Claude()), "/opt/abox/agents/claude/2.1.332/claude");
  EXPECT_EQ(AgentCommandPath(Claude()), "/usr/local/bin/claude");
  ResolvedAgent codex{"codex", "@openai/codex", "0.171.0", "sha512-x"};
  EXPECT_EQ(AgentEntryPath(codex), "/opt/abox/agents/codex/0.171.0/bin/codex");
  EXPECT_EQ(AgentCommandPath(codex), "/usr/local/bin/codex");
}

TEST(AgentInstallHookTest, ChownsLinksAndChecksEachAgent) {
  EXPECT_EQ(AgentInstallHook({}), "");
  const std::string hook = AgentInstallHook({Claude()});
  EXPECT_NE(hook.find("chown -R 0:0 \"$root/opt/abox\""), std::string::npos);
  EXPECT_NE(hook.find("go-w"), std::string::npos);
  EXPECT_NE(hook.find("test -x \"$root/opt/abox/agents/claude/2.1.332/claude\""),
            std::string::npos);
  EXPECT_NE(hook.find("ln -sfn '/opt/abox/agents/claude/2.1.332/claude' "
                      "\"$root/usr/local/bin/claude\""),
            std::string::npos);
}

}  // namespace
}  // namespace abox::image
