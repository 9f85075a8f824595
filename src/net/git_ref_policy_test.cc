#include "src/net/git_ref_policy.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::net {
namespace {

using ::testing::HasSubstr;

const std::string kZero(40, '0');
const std::string kOld(40, '1');
const std::string kNew(40, '2');

TEST(GitRefPolicyTest, SingleStarStaysWithinOneComponent) {
  EXPECT_TRUE(BranchGlobMatches("agent/*", "agent/fix"));
  EXPECT_TRUE(BranchGlobMatches("agent/*", "agent/"));  // (not a valid ref: git never sends it)
  EXPECT_FALSE(BranchGlobMatches("agent/*", "agent/a/b"));
  EXPECT_FALSE(BranchGlobMatches("agent/*", "agent"));
  EXPECT_FALSE(BranchGlobMatches("agent/*", "other/fix"));
  EXPECT_TRUE(BranchGlobMatches("fix-*", "fix-123"));
  EXPECT_FALSE(BranchGlobMatches("fix-*", "fix-1/x"));
  EXPECT_TRUE(BranchGlobMatches("*-wip", "x-wip"));
  EXPECT_TRUE(BranchGlobMatches("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(BranchGlobMatches("a*b*c", "aXXbYY/c"));
  EXPECT_TRUE(BranchGlobMatches("*", "main"));
  EXPECT_FALSE(BranchGlobMatches("*", "agent/x"));
}

TEST(GitRefPolicyTest, DoubleStarCrossesComponents) {
  EXPECT_TRUE(BranchGlobMatches("agent/**", "agent/a/b/c"));
  EXPECT_TRUE(BranchGlobMatches("agent/**", "agent/x"));
  EXPECT_FALSE(BranchGlobMatches("agent/**", "agents/x"));
  EXPECT_TRUE(BranchGlobMatches("**", "any/thing"));
  EXPECT_TRUE(BranchGlobMatches("a/**/z", "a/b/c/z"));
  EXPECT_FALSE(BranchGlobMatches("a/**/z", "a/b/c/y"));
}

TEST(GitRefPolicyTest, LiteralPatternsMatchExactly) {
  EXPECT_TRUE(BranchGlobMatches("main", "main"));
  EXPECT_FALSE(BranchGlobMatches("main", "main2"));
  EXPECT_FALSE(BranchGlobMatches("main", "mai"));
  EXPECT_FALSE(BranchGlobMatches("a.b", "aXb"));  // '.' is not a wildcard
  EXPECT_FALSE(BranchGlobMatches("", "main"));
}

TEST(GitRefPolicyTest, ValidatesPatterns) {
  for (const char* good : {"agent/*", "agent/**", "fix-*", "main", "**", "a/**/z"}) {
    EXPECT_TRUE(ValidateBranchPattern(good).ok()) << good;
  }
  for (const char* bad :
       {"", "refs/heads/main", "a***", "a..b", "a b", "a/", "/a", "a?", "x.lock"}) {
    absl::Status s = ValidateBranchPattern(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_THAT(s.message(), HasSubstr("branch pattern")) << bad;
  }
}

TEST(GitRefPolicyTest, AllowsMatchingBranchesAndRefusesEverythingElse) {
  RefPolicy policy{{"agent/*", "fix-*"}, false};
  std::vector<RefUpdate> updates = {
      {kOld, kNew, "refs/heads/agent/one"},   // allowed
      {kZero, kNew, "refs/heads/fix-2"},      // allowed (create)
      {kOld, kNew, "refs/heads/main"},        // not matching
      {kOld, kZero, "refs/heads/agent/old"},  // delete
      {kZero, kNew, "refs/tags/v1"},          // tags not allowed
      {kOld, kNew, "refs/notes/commits"},     // other refs
  };
  std::vector<RefRefusal> r = CheckRefUpdates(policy, updates);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].refname, "refs/heads/main");
  EXPECT_EQ(r[0].reason, "this sandbox may push only to branches matching agent/*, fix-*");
  EXPECT_EQ(RefusalText(r[0]),
            "abox: push to refs/heads/main refused: this sandbox may push only to branches "
            "matching agent/*, fix-*");
  EXPECT_EQ(r[1].refname, "refs/heads/agent/old");
  EXPECT_THAT(r[1].reason, HasSubstr("deleting"));
  EXPECT_EQ(r[2].refname, "refs/tags/v1");
  EXPECT_THAT(r[2].reason, HasSubstr("tags"));
  EXPECT_EQ(r[3].refname, "refs/notes/commits");
  EXPECT_TRUE(CheckRefUpdates(policy, {updates[0], updates[1]}).empty());
}

TEST(GitRefPolicyTest, TagsWhenAllowedMayOnlyBeCreated) {
  RefPolicy policy{{}, true};
  EXPECT_TRUE(CheckRefUpdates(policy, {{kZero, kNew, "refs/tags/v1"}}).empty());
  auto moved = CheckRefUpdates(policy, {{kOld, kNew, "refs/tags/v1"}});
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_THAT(moved[0].reason, HasSubstr("may not be moved"));
  EXPECT_EQ(CheckRefUpdates(policy, {{kOld, kZero, "refs/tags/v1"}}).size(), 1u);
  auto branch = CheckRefUpdates(policy, {{kOld, kNew, "refs/heads/main"}});
  ASSERT_EQ(branch.size(), 1u);
  EXPECT_EQ(branch[0].reason, "this sandbox may not push branches");
}

}  // namespace
}  // namespace abox::net
