#include "src/workspace/paths.h"

#include "gtest/gtest.h"

namespace abox::workspace {
namespace {

TEST(PathsTest, GitComponentAtAnyDepthInAnyCase) {
  for (const char* path : {".git", ".git/config", "tools/.git", "tools/.git/config",
                           "a/b/.git/hooks/pre-commit", ".GIT/config", "x/.Git", "sub/.gIt/HEAD"}) {
    EXPECT_TRUE(HasGitComponent(path)) << path;
  }
  for (const char* path : {".gitignore", ".gitmodules", "git/config", "a.git/config", ".git2",
                           "x/.github/workflows/ci.yml", "my.git", ".gitattributes"}) {
    EXPECT_FALSE(HasGitComponent(path)) << path;
  }
  // The root check stays what it was: only the root's .git.
  EXPECT_TRUE(IsUnderGitDir(".git/config"));
  EXPECT_FALSE(IsUnderGitDir("tools/.git/config"));
}

TEST(PathsTest, ValidateRelativePathRefusesWhatLeavesTheRoot) {
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/", "a\nb"}) {
    EXPECT_FALSE(ValidateRelativePath(bad).ok()) << bad;
  }
  EXPECT_TRUE(ValidateRelativePath("a/b.c").ok());
  EXPECT_TRUE(ValidateRelativePath("tools/.git/config").ok());  // HostTree refuses it, not this
}

}  // namespace
}  // namespace abox::workspace
