#include "src/workspace/exec_files.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/workspace/paths.h"

namespace abox::workspace {
namespace {

enum class Match {
  kBasename,    // the last component equals `pattern`, at any depth
  kSuffix,      // the last component ends with `pattern`, at any depth
  kRootExact,   // the whole path equals `pattern`
  kRootPrefix,  // the path lies under directory `pattern` at the root
};

struct Rule {
  Match match;
  const char* pattern;
  const char* reason;
};

// Each rule carries why a change there runs code outside the sandbox. Deliberately left out:
// Dockerfile (its RUN lines execute inside an isolated build container, not on the host or in
// CI with its secrets), plain source files (they run only when the person runs them).
const std::vector<Rule>& Rules() {
  static const auto* rules = new std::vector<Rule>{
      // CI: runs on the next push, with the repository's secrets.
      {Match::kRootPrefix, ".github/workflows", "GitHub Actions workflow (runs in CI on push)"},
      {Match::kRootPrefix, ".github/actions", "GitHub Actions local action (runs in CI)"},
      {Match::kRootExact, ".gitlab-ci.yml", "GitLab CI pipeline (runs in CI on push)"},
      {Match::kRootPrefix, ".gitlab/ci", "GitLab CI include (runs in CI on push)"},
      {Match::kRootPrefix, ".circleci", "CircleCI config (runs in CI on push)"},
      {Match::kRootExact, ".travis.yml", "Travis CI config (runs in CI on push)"},
      {Match::kRootExact, "azure-pipelines.yml", "Azure Pipelines config (runs in CI on push)"},
      {Match::kBasename, "Jenkinsfile", "Jenkins pipeline (runs in CI)"},
      {Match::kRootPrefix, ".buildkite", "Buildkite pipeline (runs in CI)"},
      {Match::kRootExact, "bitbucket-pipelines.yml", "Bitbucket Pipelines (runs in CI on push)"},
      {Match::kRootExact, ".drone.yml", "Drone CI pipeline (runs in CI on push)"},
      {Match::kRootExact, ".woodpecker.yml", "Woodpecker CI pipeline (runs in CI on push)"},
      {Match::kRootPrefix, ".woodpecker", "Woodpecker CI pipeline (runs in CI on push)"},
      // Build scripts: run on the next build / install on the person's machine.
      {Match::kBasename, "Makefile", "Makefile (its recipes run on `make`)"},
      {Match::kBasename, "makefile", "makefile (its recipes run on `make`)"},
      {Match::kBasename, "GNUmakefile", "GNUmakefile (its recipes run on `make`)"},
      {Match::kSuffix, ".mk", "make include (its recipes run on `make`)"},
      {Match::kBasename, "package.json", "package.json (its scripts run on npm install / run)"},
      {Match::kBasename, ".npmrc", ".npmrc (can change the shell npm scripts run in)"},
      {Match::kBasename, "setup.py", "setup.py (runs on pip install / build)"},
      {Match::kBasename, "conftest.py", "conftest.py (pytest imports it on every test run)"},
      {Match::kBasename, "build.rs", "Cargo build script (runs on cargo build)"},
      {Match::kRootPrefix, ".cargo", "Cargo config (can set runners and build flags)"},
      {Match::kBasename, "CMakeLists.txt", "CMake script (runs commands at configure time)"},
      {Match::kSuffix, ".cmake", "CMake script (runs commands at configure time)"},
      {Match::kBasename, "meson.build", "Meson build file (runs commands at configure)"},
      {Match::kBasename, "Rakefile", "Rakefile (its tasks run on rake)"},
      {Match::kBasename, "justfile", "justfile (its recipes run on just)"},
      {Match::kBasename, "Justfile", "Justfile (its recipes run on just)"},
      {Match::kBasename, ".justfile", "justfile (its recipes run on just)"},
      {Match::kBasename, "build.gradle", "Gradle build (runs on gradle)"},
      {Match::kBasename, "build.gradle.kts", "Gradle build (runs on gradle)"},
      {Match::kBasename, "settings.gradle", "Gradle settings (runs on gradle)"},
      {Match::kBasename, "settings.gradle.kts", "Gradle settings (runs on gradle)"},
      {Match::kBasename, "gradle-wrapper.properties",
       "Gradle wrapper (downloads and runs a "
       "Gradle from the URL it names)"},
      // Editors: tasks and debug configs run when the folder is opened / F5 is pressed.
      {Match::kRootExact, ".vscode/tasks.json", "VS Code tasks (can run on folder open)"},
      {Match::kRootExact, ".vscode/launch.json", "VS Code launch config (runs on debug)"},
      {Match::kRootExact, ".vscode/settings.json",
       "VS Code settings (can point tools at programs to run)"},
      {Match::kRootExact, ".idea/workspace.xml", "IntelliJ workspace (run configurations)"},
      {Match::kRootPrefix, ".idea/runConfigurations", "IntelliJ run configuration"},
      // Git hooks managers: run on the next commit / push.
      {Match::kRootPrefix, ".husky", "husky git hook (runs on commit / push)"},
      {Match::kRootPrefix, ".githooks", "git hooks directory (runs on commit / push)"},
      {Match::kRootExact, ".pre-commit-config.yaml", "pre-commit hooks (run on commit)"},
      {Match::kRootExact, "lefthook.yml", "lefthook git hooks (run on commit)"},
      {Match::kRootExact, ".lefthook.yml", "lefthook git hooks (run on commit)"},
      // Shell and containers.
      {Match::kBasename, ".envrc", "direnv .envrc (runs when a shell enters the directory)"},
      {Match::kRootPrefix, ".devcontainer", "dev container config (runs commands on open)"},
      {Match::kBasename, "docker-compose.yml", "compose file (can mount host paths, privileged)"},
      {Match::kBasename, "docker-compose.yaml", "compose file (can mount host paths, privileged)"},
      {Match::kBasename, "compose.yml", "compose file (can mount host paths, privileged)"},
      {Match::kBasename, "compose.yaml", "compose file (can mount host paths, privileged)"},
  };
  return *rules;
}

}  // namespace

std::optional<std::string> ExecSensitiveReason(absl::string_view rel) {
  size_t slash = rel.rfind('/');
  absl::string_view base = slash == absl::string_view::npos ? rel : rel.substr(slash + 1);
  for (const Rule& rule : Rules()) {
    absl::string_view pattern = rule.pattern;
    bool hit = false;
    switch (rule.match) {
      case Match::kBasename:
        hit = base == pattern;
        break;
      case Match::kSuffix:
        hit = base.size() > pattern.size() && absl::EndsWith(base, pattern);
        break;
      case Match::kRootExact:
        hit = rel == pattern;
        break;
      case Match::kRootPrefix:
        hit = rel == pattern || (absl::StartsWith(rel, pattern) && rel.size() > pattern.size() &&
                                 rel[pattern.size()] == '/');
        break;
    }
    if (hit) {
      return std::string(rule.reason);
    }
  }
  return std::nullopt;
}

std::optional<std::string> SymlinkEscapeReason(absl::string_view rel, absl::string_view target) {
  std::string shown = EscapePath(target);
  if (absl::StartsWith(target, "/")) {
    return absl::StrCat("a symlink to an absolute path (", shown, ") outside the workspace");
  }
  // Depth of the link's directory, then walk the target's components.
  int depth = static_cast<int>(std::count(rel.begin(), rel.end(), '/'));
  for (absl::string_view part : absl::StrSplit(target, '/', absl::SkipEmpty())) {
    if (part == "..") {
      if (--depth < 0) {
        return absl::StrCat("a symlink pointing outside the workspace (", shown, ")");
      }
    } else if (part != ".") {
      ++depth;
    }
  }
  return std::nullopt;
}

}  // namespace abox::workspace
