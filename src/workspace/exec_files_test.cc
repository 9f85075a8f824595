#include "src/workspace/exec_files.h"

#include "gtest/gtest.h"

namespace abox::workspace {
namespace {

struct Case {
  const char* path;
  bool sensitive;
};

TEST(ExecFilesTest, ClassifiesByTable) {
  const Case cases[] = {
      {".github/workflows/ci.yml", true},
      {".github/workflows", true},
      {".github/CODEOWNERS", false},
      {"sub/.github/workflows/ci.yml", false},  // GitHub reads only the root one
      {".gitlab-ci.yml", true},
      {".circleci/config.yml", true},
      {".travis.yml", true},
      {"azure-pipelines.yml", true},
      {"Jenkinsfile", true},
      {".buildkite/pipeline.yml", true},
      {"bitbucket-pipelines.yml", true},
      {".drone.yml", true},
      {"Makefile", true},
      {"src/lib/Makefile", true},
      {"makefile", true},
      {"GNUmakefile", true},
      {"rules/common.mk", true},
      {".mk", false},
      {"package.json", true},
      {"web/app/package.json", true},
      {"package-lock.json", false},
      {"setup.py", true},
      {"build.rs", true},
      {"Rakefile", true},
      {"justfile", true},
      {"Justfile", true},
      {"CMakeLists.txt", true},
      {"cmake/flags.cmake", true},
      {".vscode/tasks.json", true},
      {".vscode/launch.json", true},
      {".vscode/settings.json", true},
      {".vscode/extensions.json", false},
      {".idea/workspace.xml", true},
      {".idea/runConfigurations/Run.xml", true},
      {".husky/pre-commit", true},
      {".githooks/pre-push", true},
      {".pre-commit-config.yaml", true},
      {"lefthook.yml", true},
      {".envrc", true},
      {"sub/dir/.envrc", true},
      {".devcontainer/devcontainer.json", true},
      {"docker-compose.yml", true},
      {"Dockerfile", false},
      {"src/main.cc", false},
      {"README.md", false},
      {"docs/Makefile.md", false},
  };
  for (const Case& c : cases) {
    auto reason = ExecSensitiveReason(c.path);
    EXPECT_EQ(reason.has_value(), c.sensitive) << c.path;
    if (reason) {
      EXPECT_FALSE(reason->empty()) << c.path;
    }
  }
}

}  // namespace
}  // namespace abox::workspace

namespace abox::workspace {
namespace {

TEST(SymlinkEscapeTest, LinksThatLeaveTheWorkspaceNeedTheFlag) {
  EXPECT_TRUE(SymlinkEscapeReason("etc-link", "/etc").has_value());
  EXPECT_TRUE(SymlinkEscapeReason("a", "../outside").has_value());
  EXPECT_TRUE(SymlinkEscapeReason("a/b/c", "../../../x").has_value());
  EXPECT_TRUE(SymlinkEscapeReason("a/b", "c/../../../x").has_value());
  EXPECT_FALSE(SymlinkEscapeReason("a/b/c", "../../x").has_value());
  EXPECT_FALSE(SymlinkEscapeReason("link", "target.txt").has_value());
  EXPECT_FALSE(SymlinkEscapeReason("a/link", "./b/../c").has_value());
}

}  // namespace
}  // namespace abox::workspace
