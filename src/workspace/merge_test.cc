#include "src/workspace/merge.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace abox::workspace {
namespace {

TEST(MergeTest, CleanMergeKeepsBothEdits) {
  std::string base = "one\ntwo\nthree\nfour\nfive\n";
  std::string host = "ONE\ntwo\nthree\nfour\nfive\n";
  std::string sandbox = "one\ntwo\nthree\nfour\nFIVE\n";
  auto r = MergeText(base, host, sandbox);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->clean);
  EXPECT_EQ(r->conflicts, 0);
  EXPECT_EQ(r->content, "ONE\ntwo\nthree\nfour\nFIVE\n");
}

TEST(MergeTest, ConflictIsMarkedInDiff3StyleWithLabels) {
  auto r = MergeText("a\nb\nc\n", "a\nhost\nc\n", "a\nsandbox\nc\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->clean);
  EXPECT_EQ(r->conflicts, 1);
  EXPECT_EQ(r->content,
            "a\n<<<<<<< host\nhost\n||||||| base\nb\n=======\nsandbox\n>>>>>>> sandbox\nc\n");
}

TEST(MergeTest, IdenticalEditsAreClean) {
  auto r = MergeText("x\n", "y\n", "y\n");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->clean);
  EXPECT_EQ(r->content, "y\n");
}

TEST(MergeTest, CountsSeveralConflicts) {
  auto r = MergeText("1\n2\n3\n4\n5\n6\n7\n", "h\n2\n3\n4\n5\n6\nh\n", "s\n2\n3\n4\n5\n6\ns\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->conflicts, 2);
}

TEST(MergeTest, RefusesBinary) {
  std::string bin("a\0b", 3);
  EXPECT_TRUE(LooksBinary(bin));
  EXPECT_FALSE(LooksBinary("text only"));
  // A NUL past git's 8000-byte probe does not make it binary.
  EXPECT_FALSE(LooksBinary(std::string(8000, 'a') + std::string(1, '\0')));
  EXPECT_EQ(MergeText("a\n", bin, "b\n").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MergeTest, RefusesControlCharactersInLabels) {
  MergeLabels labels;
  labels.ours = "host\n=======";
  EXPECT_EQ(MergeText("a\n", "b\n", "c\n", labels).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MergeTest, GlobalGitConfigDoesNotChangeTheStyle) {
  // A merge.conflictStyle in $HOME/.gitconfig must not leak in (HOME is overridden).
  auto r = MergeText("a\n", "b\n", "c\n");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(absl::StrContains(r->content, "||||||| base"));
}

}  // namespace
}  // namespace abox::workspace
