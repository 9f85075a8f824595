#include "src/workspace/exec_files.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::workspace {
namespace {

using ::testing::HasSubstr;

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
      {".vscode/extensions.json", true},  // the whole folder, at any depth
      {"web/.vscode/tasks.json", true},
      {"a/b/.vscode", true},
      {"my.code-workspace", true},
      {"ws/team.code-workspace", true},
      {".code-workspace", false},
      {"vscode/tasks.json", false},
      {".idea/workspace.xml", true},
      {".idea/runConfigurations/Run.xml", true},
      {"module/.idea/workspace.xml", true},
      {".husky/pre-commit", true},
      {".githooks/pre-push", true},
      {".pre-commit-config.yaml", true},
      {"sub/.pre-commit-config.yaml", true},
      {"lefthook.yml", true},
      {".envrc", true},
      {"sub/dir/.envrc", true},
      {".devcontainer/devcontainer.json", true},
      {"svc/.devcontainer/devcontainer.json", true},
      {".devcontainer.json", true},
      {"docker-compose.yml", true},
      // git: gitlink files, nested repositories' state, submodule definitions.
      {".gitmodules", true},
      {"vendor/lib/.gitmodules", true},
      {"sub/.git", true},
      {"tools/.git/config", true},
      {"tools/.GIT/hooks/pre-commit", true},
      {".gitignore", false},
      {".github/CODEOWNERS", false},
      // JVM wrappers and configs.
      {"gradlew", true},
      {"app/gradlew.bat", true},
      {"mvnw", true},
      {".mvn/wrapper/maven-wrapper.properties", true},
      {"svc/.mvn/jvm.config", true},
      {"pom.xml", true},
      {"gradle.properties", true},
      // Python, Rust, Ruby.
      {"pyproject.toml", true},
      {"pkg/pyproject.toml", true},
      {"tox.ini", true},
      {"noxfile.py", true},
      {"pytest.ini", true},
      {"setup.cfg", true},
      {"Cargo.toml", true},
      {"crates/x/Cargo.toml", true},
      {"Cargo.lock", false},
      {"crates/x/.cargo/config.toml", true},
      {"rust-toolchain.toml", true},
      {"Gemfile", true},
      {"Gemfile.lock", false},
      {"x.gemspec", true},
      // JavaScript package managers and tool configs.
      {".yarnrc.yml", true},
      {".yarnrc", true},
      {".pnpmfile.cjs", true},
      {"pnpm-lock.yaml", false},
      {".eslintrc", true},
      {".eslintrc.json", true},
      {"packages/ui/.eslintrc.cjs", true},
      {"eslint.config.mjs", true},
      {".prettierrc", true},
      {".prettierrc.yaml", true},
      {"prettier.config.js", true},
      {".prettierignore", false},
      {".babelrc", true},
      {"babel.config.json", true},
      {"jest.config.ts", true},
      {"vite.config.ts", true},
      {"web/vite.config.mjs", true},
      {"vitest.config.ts", true},
      {"webpack.config.js", true},
      {"src/vite.ts", false},
      // Bazel.
      {"BUILD", true},
      {"pkg/BUILD.bazel", true},
      {"WORKSPACE", true},
      {"WORKSPACE.bazel", true},
      {"MODULE.bazel", true},
      {"MODULE.bazel.lock", false},
      {"tools/defs.bzl", true},
      {".bazelrc", true},
      {".bazelversion", true},
      {"tools/bazel", true},
      {"BUILDING.md", false},
      {"build/out.o", false},
      {"Dockerfile", false},
      {"src/main.cc", false},
      {"README.md", false},
      {"docs/Makefile.md", false},
      {"requirements.txt", false},
  };
  for (const Case& c : cases) {
    auto reason = ExecSensitiveReason(c.path);
    EXPECT_EQ(reason.has_value(), c.sensitive) << c.path;
    if (reason) {
      EXPECT_FALSE(reason->empty()) << c.path;
    }
  }
}

// A tree's symlinks for ResolveSymlink.
class Links {
 public:
  Links(std::initializer_list<std::pair<const std::string, std::string>> links) : links_(links) {}
  const std::string* operator()(absl::string_view path) const {
    auto it = links_.find(std::string(path));
    return it == links_.end() ? nullptr : &it->second;
  }
  std::optional<std::string> Escape(const std::string& rel) const {
    size_t steps = 1 << 20;
    absl::StatusOr<SymlinkWalk> walk = ResolveSymlink(rel, links_.at(rel), *this, &steps);
    EXPECT_TRUE(walk.ok()) << walk.status();
    return walk.ok() ? walk->escape : std::optional<std::string>("error");
  }
  std::map<std::string, std::string> links_;
};

TEST(ResolveSymlinkTest, ADotLinkAndAParentStepTogetherLeaveTheWorkspace) {
  // Each alone looks inside: `a` is the root itself, `b` by its text is `a`'s parent, the root.
  EXPECT_EQ(SymlinkEscapeReason("a", "."), std::nullopt);
  EXPECT_EQ(SymlinkEscapeReason("b", "a/.."), std::nullopt);
  // Together `a/..` is the root's parent.
  Links tree{{"a", "."}, {"b", "a/.."}};
  EXPECT_EQ(tree.Escape("a"), std::nullopt);
  std::optional<std::string> why = tree.Escape("b");
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("outside the workspace"));
  EXPECT_THAT(*why, HasSubstr("through a -> ."));
  // Deeper, with a link inside a directory: d/up -> .. is the root; d/x -> up/.. climbs out.
  Links deeper{{"d/up", ".."}, {"d/x", "up/../y"}};
  EXPECT_EQ(deeper.Escape("d/up"), std::nullopt);
  EXPECT_TRUE(deeper.Escape("d/x").has_value());
  // A link into a directory that is itself a link to the root, then out.
  Links via_dir{{"src", "."}, {"lib/l", "../src/src/src/.."}};
  EXPECT_TRUE(via_dir.Escape("lib/l").has_value());
}

TEST(ResolveSymlinkTest, ChainsEndingInsideStayInside) {
  Links tree{{"a", "b"}, {"b", "dir/c"}, {"dir/c", "../file.txt"}, {"rel", "./dir/../a"}};
  EXPECT_EQ(tree.Escape("a"), std::nullopt);
  EXPECT_EQ(tree.Escape("rel"), std::nullopt);
  // A chain that ends at an absolute path leaves, wherever the first link points.
  Links abs{{"a", "b"}, {"b", "/etc"}};
  std::optional<std::string> why = abs.Escape("a");
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("absolute"));
  EXPECT_THAT(*why, HasSubstr("b -> /etc"));
}

TEST(ResolveSymlinkTest, ACycleEndsAndNeedsTheFlag) {
  Links cycle{{"a", "b"}, {"b", "c/../a"}};
  std::optional<std::string> why = cycle.Escape("a");
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("loop"));
  Links self{{"x", "x"}};
  EXPECT_TRUE(self.Escape("x").has_value());
  Links dir_loop{{"d/l", "../d/l/more"}};
  EXPECT_TRUE(dir_loop.Escape("d/l").has_value());
}

TEST(ResolveSymlinkTest, DeepChains) {
  // 30 links, each harmless by its text, the last through `a -> .`: out.
  Links out{{"a", "."}};
  for (int i = 0; i < 30; ++i) {
    out.links_[absl::StrCat("l", i)] = i == 29 ? "a/.." : absl::StrCat("l", i + 1);
  }
  std::optional<std::string> why = out.Escape("l0");
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("outside the workspace"));
  // 30 links ending at a file inside: inside.
  Links in{};
  for (int i = 0; i < 30; ++i) {
    in.links_[absl::StrCat("l", i)] = i == 29 ? "file" : absl::StrCat("l", i + 1);
  }
  EXPECT_EQ(in.Escape("l0"), std::nullopt);
  // More than kMaxSymlinkHops links: no kernel follows it, so where it leads is not told.
  Links deep{};
  for (int i = 0; i <= kMaxSymlinkHops + 5; ++i) {
    deep.links_[absl::StrCat("l", i)] =
        i == kMaxSymlinkHops + 5 ? "file" : absl::StrCat("l", i + 1);
  }
  why = deep.Escape("l0");
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("more than 40"));
}

TEST(ResolveSymlinkTest, StepsAreBoundedForHostileTrees) {
  Links tree{{"a", "b"}, {"b", "c"}, {"c", "d"}};
  size_t steps = 2;
  absl::StatusOr<SymlinkWalk> walk = ResolveSymlink("a", "b", tree, &steps);
  EXPECT_EQ(walk.status().code(), absl::StatusCode::kResourceExhausted);
  steps = 100;
  walk = ResolveSymlink("a", "b", tree, &steps);
  ASSERT_TRUE(walk.ok());
  EXPECT_EQ(walk->through.size(), 2u);  // b -> c, c -> d
  EXPECT_LT(steps, 100u);
}

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
