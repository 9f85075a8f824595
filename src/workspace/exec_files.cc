#include "src/workspace/exec_files.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/workspace/paths.h"

namespace abox::workspace {
namespace {

enum class Match {
  kBasename,     // the last component equals `pattern`, at any depth
  kBaseStart,    // the last component starts with `pattern` (`.eslintrc` and `.eslintrc.json`)
  kSuffix,       // the last component ends with `pattern` (and is longer), at any depth
  kDirAnyDepth,  // some component equals `pattern`: the path is that entry or lies under it
  kRootExact,    // the whole path equals `pattern`
  kRootPrefix,   // the path lies under directory `pattern` at the root (or is it)
};

struct Rule {
  Match match;
  const char* pattern;
  const char* reason;
};

// Each rule carries why a change there runs code outside the sandbox. Most match at any depth:
// a subproject, a package of a monorepo or a folder opened on its own in an editor runs its own
// configs. Root-only where the tool reads only the root (GitHub workflows, GitLab CI).
// Deliberately left out: Dockerfile (its RUN lines execute inside an isolated build container,
// not on the host or in CI with its secrets), plain source files and scripts (they run only
// when the person runs them), dependency lists without hooks (requirements.txt, go.mod).
const std::vector<Rule>& Rules() {
  static const auto* rules = new std::vector<Rule>{
      // git: a gitlink `.git` file or a nested repository's config (core.fsmonitor, hooks) runs
      // on the next `git status` of a prompt or editor; abox never writes one (HostTree refuses
      // it) and lists it here too. .gitmodules names URLs and paths that `git submodule` and
      // `clone --recursive` fetch and check out (and, in old gits, update commands).
      {Match::kDirAnyDepth, ".git", "git state (a nested repository's config and hooks run)"},
      {Match::kBasename, ".gitmodules", ".gitmodules (git submodule fetches and checks out)"},
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
      // make, autotools, CMake, Meson: their recipes and configure steps run on the next build.
      {Match::kBasename, "Makefile", "Makefile (its recipes run on `make`)"},
      {Match::kBasename, "makefile", "makefile (its recipes run on `make`)"},
      {Match::kBasename, "GNUmakefile", "GNUmakefile (its recipes run on `make`)"},
      {Match::kSuffix, ".mk", "make include (its recipes run on `make`)"},
      {Match::kBasename, "Makefile.am", "automake input (becomes the Makefile)"},
      {Match::kBasename, "Makefile.in", "Makefile template (configure makes the Makefile)"},
      {Match::kBasename, "configure", "configure script (runs on ./configure)"},
      {Match::kBasename, "configure.ac", "autoconf input (becomes the configure script)"},
      {Match::kBasename, "CMakeLists.txt", "CMake script (runs commands at configure time)"},
      {Match::kSuffix, ".cmake", "CMake script (runs commands at configure time)"},
      {Match::kBasename, "meson.build", "Meson build file (runs commands at configure)"},
      // Bazel: BUILD and .bzl files are Starlark that runs actions; .bazelrc adds flags and
      // --run_under; tools/bazel is the wrapper bazelisk runs in place of bazel; .bazeliskrc
      // and .bazelversion choose the bazel binary that is downloaded and run.
      {Match::kBasename, "BUILD", "Bazel BUILD file (its rules run on bazel build)"},
      {Match::kBasename, "BUILD.bazel", "Bazel BUILD file (its rules run on bazel build)"},
      {Match::kBasename, "WORKSPACE", "Bazel WORKSPACE (fetches and runs repository rules)"},
      {Match::kBasename, "WORKSPACE.bazel", "Bazel WORKSPACE (fetches and runs repository rules)"},
      {Match::kBasename, "MODULE.bazel", "Bazel module file (fetches and runs module rules)"},
      {Match::kSuffix, ".bzl", "Starlark extension (runs on bazel build)"},
      {Match::kBasename, ".bazelrc", ".bazelrc (bazel flags, such as --run_under)"},
      {Match::kBasename, ".bazelversion", ".bazelversion (picks the bazel binary bazelisk runs)"},
      {Match::kBasename, ".bazeliskrc", ".bazeliskrc (where bazelisk downloads bazel from)"},
      {Match::kRootExact, "tools/bazel", "tools/bazel (the wrapper bazel runs instead of itself)"},
      // JavaScript: package scripts run on install; the package managers' configs choose the
      // package manager binary (yarnPath) or hook into every install (.pnpmfile.cjs); the tools'
      // JS configs are modules that the editor or the build imports.
      {Match::kBasename, "package.json", "package.json (its scripts run on npm install / run)"},
      {Match::kBasename, ".npmrc", ".npmrc (can change the shell npm scripts run in)"},
      {Match::kBasename, ".yarnrc", ".yarnrc (yarn-path: the yarn that runs)"},
      {Match::kBasename, ".yarnrc.yml", ".yarnrc.yml (yarnPath and plugins: code yarn runs)"},
      {Match::kBasename, ".pnpmfile.cjs", ".pnpmfile.cjs (hooks pnpm runs on every install)"},
      {Match::kBasename, "bunfig.toml", "bunfig.toml (preload scripts bun runs)"},
      {Match::kBaseStart, ".eslintrc", "ESLint config (loads plugins; editors run it on open)"},
      {Match::kBaseStart, "eslint.config.", "ESLint config (a module editors run on open)"},
      {Match::kBaseStart, ".prettierrc", "Prettier config (loads plugins when formatting)"},
      {Match::kBaseStart, "prettier.config.", "Prettier config (a module run when formatting)"},
      {Match::kBaseStart, ".babelrc", "Babel config (plugins run on every build)"},
      {Match::kBaseStart, "babel.config.", "Babel config (plugins run on every build)"},
      {Match::kBaseStart, "jest.config.", "Jest config (a module run on every test run)"},
      {Match::kBaseStart, "vite.config.", "Vite config (a module run on dev / build)"},
      {Match::kBaseStart, "vitest.config.", "Vitest config (a module run on every test run)"},
      {Match::kBaseStart, "webpack.config.", "webpack config (a module run on build)"},
      {Match::kBaseStart, "rollup.config.", "Rollup config (a module run on build)"},
      {Match::kBaseStart, "postcss.config.", "PostCSS config (plugins run on build)"},
      {Match::kBaseStart, "tailwind.config.", "Tailwind config (a module run on build)"},
      {Match::kBaseStart, "next.config.", "Next.js config (a module run on dev / build)"},
      {Match::kBaseStart, "nuxt.config.", "Nuxt config (a module run on dev / build)"},
      {Match::kBaseStart, "svelte.config.", "Svelte config (a module run on dev / build)"},
      {Match::kBaseStart, "astro.config.", "Astro config (a module run on dev / build)"},
      {Match::kBaseStart, "playwright.config.", "Playwright config (a module run on test)"},
      {Match::kBaseStart, ".mocharc", "Mocha config (requires modules on every test run)"},
      {Match::kBaseStart, "karma.conf.", "Karma config (a module run on test)"},
      {Match::kBaseStart, "gulpfile.", "gulpfile (its tasks run on gulp)"},
      {Match::kBaseStart, "Gruntfile.", "Gruntfile (its tasks run on grunt)"},
      {Match::kBaseStart, ".stylelintrc", "stylelint config (loads plugins; editors run it)"},
      {Match::kBaseStart, "stylelint.config.", "stylelint config (a module editors run)"},
      {Match::kBaseStart, ".lintstagedrc", "lint-staged config (commands run on commit)"},
      {Match::kBaseStart, "lint-staged.config.", "lint-staged config (commands run on commit)"},
      {Match::kBaseStart, "commitlint.config.", "commitlint config (a module run on commit)"},
      // Python: build backends and hooks run on pip install; test runners import plugins.
      {Match::kBasename, "setup.py", "setup.py (runs on pip install / build)"},
      {Match::kBasename, "setup.cfg", "setup.cfg (build and pytest settings, plugins)"},
      {Match::kBasename, "pyproject.toml",
       "pyproject.toml (build backend and hooks run on pip "
       "install; tool configs load plugins)"},
      {Match::kBasename, "conftest.py", "conftest.py (pytest imports it on every test run)"},
      {Match::kBasename, "pytest.ini", "pytest.ini (addopts can load plugins)"},
      {Match::kBasename, "tox.ini", "tox.ini (its commands run on tox)"},
      {Match::kBasename, "noxfile.py", "noxfile.py (its sessions run on nox)"},
      {Match::kBasename, "sitecustomize.py", "sitecustomize.py (Python imports it at startup)"},
      // Rust: build scripts and proc macros run on cargo build; .cargo/config sets runners and
      // is read from every parent directory; rust-toolchain picks the toolchain binaries.
      {Match::kBasename, "Cargo.toml", "Cargo.toml (build scripts, proc macros run on build)"},
      {Match::kBasename, "build.rs", "Cargo build script (runs on cargo build)"},
      {Match::kDirAnyDepth, ".cargo", "Cargo config (can set runners and build flags)"},
      {Match::kBasename, "rust-toolchain", "rust-toolchain (picks the compiler that runs)"},
      {Match::kBasename, "rust-toolchain.toml", "rust-toolchain (picks the compiler that runs)"},
      // JVM: the wrappers are scripts run in place of gradle / maven, and download what their
      // properties name; .mvn holds JVM flags and build extensions; build files run plugins.
      {Match::kBasename, "gradlew", "Gradle wrapper script (runs on ./gradlew)"},
      {Match::kBasename, "gradlew.bat", "Gradle wrapper script (runs on gradlew)"},
      {Match::kBasename, "mvnw", "Maven wrapper script (runs on ./mvnw)"},
      {Match::kBasename, "mvnw.cmd", "Maven wrapper script (runs on mvnw)"},
      {Match::kDirAnyDepth, ".mvn", "Maven config (JVM flags, extensions, wrapper download)"},
      {Match::kBasename, "pom.xml", "Maven build (its plugins run on mvn)"},
      {Match::kBasename, "build.gradle", "Gradle build (runs on gradle)"},
      {Match::kBasename, "build.gradle.kts", "Gradle build (runs on gradle)"},
      {Match::kBasename, "settings.gradle", "Gradle settings (runs on gradle)"},
      {Match::kBasename, "settings.gradle.kts", "Gradle settings (runs on gradle)"},
      {Match::kBasename, "gradle.properties", "Gradle properties (JVM flags such as agents)"},
      {Match::kBasename, "gradle-wrapper.properties",
       "Gradle wrapper (downloads and runs a Gradle from the URL it names)"},
      {Match::kBasename, "build.sbt", "sbt build (runs on sbt)"},
      // Ruby and others with task files.
      {Match::kBasename, "Gemfile", "Gemfile (Ruby that bundler evaluates on every run)"},
      {Match::kSuffix, ".gemspec", "gemspec (Ruby that bundler and gem evaluate)"},
      {Match::kBasename, "Rakefile", "Rakefile (its tasks run on rake)"},
      {Match::kBasename, "Vagrantfile", "Vagrantfile (Ruby that vagrant evaluates)"},
      {Match::kBasename, "justfile", "justfile (its recipes run on just)"},
      {Match::kBasename, "Justfile", "Justfile (its recipes run on just)"},
      {Match::kBasename, ".justfile", "justfile (its recipes run on just)"},
      {Match::kBasename, "Taskfile.yml", "Taskfile (its tasks run on task)"},
      {Match::kBasename, "Taskfile.yaml", "Taskfile (its tasks run on task)"},
      {Match::kBasename, "Tiltfile", "Tiltfile (runs on tilt up)"},
      {Match::kBasename, "flake.nix", "Nix flake (evaluated by nix develop / direnv)"},
      {Match::kBasename, "shell.nix", "Nix shell (evaluated by nix-shell / direnv)"},
      // Editors: tasks and debug configs run when the folder is opened / F5 is pressed; settings
      // point tools at programs; a workspace file carries all of them. Any folder can be opened.
      {Match::kDirAnyDepth, ".vscode",
       "VS Code folder config (tasks run on open, settings "
       "point at programs)"},
      {Match::kSuffix, ".code-workspace", "VS Code workspace (tasks and settings, as .vscode/)"},
      {Match::kDirAnyDepth, ".idea", "IntelliJ project config (run configurations, tools)"},
      // Git hooks managers: run on the next commit / push.
      {Match::kDirAnyDepth, ".husky", "husky git hook (runs on commit / push)"},
      {Match::kDirAnyDepth, ".githooks", "git hooks directory (runs on commit / push)"},
      {Match::kBasename, ".pre-commit-config.yaml", "pre-commit hooks (run on commit)"},
      {Match::kBasename, "lefthook.yml", "lefthook git hooks (run on commit)"},
      {Match::kBasename, "lefthook.yaml", "lefthook git hooks (run on commit)"},
      {Match::kBasename, ".lefthook.yml", "lefthook git hooks (run on commit)"},
      {Match::kBasename, "lefthook-local.yml", "lefthook git hooks (run on commit)"},
      // Shell and containers.
      {Match::kBasename, ".envrc", "direnv .envrc (runs when a shell enters the directory)"},
      {Match::kBasename, ".mise.toml", "mise config (hooks and env run on entering the dir)"},
      {Match::kBasename, "mise.toml", "mise config (hooks and env run on entering the dir)"},
      {Match::kDirAnyDepth, ".devcontainer", "dev container config (runs commands on open)"},
      {Match::kBasename, ".devcontainer.json", "dev container config (runs commands on open)"},
      {Match::kBasename, "docker-compose.yml", "compose file (can mount host paths, privileged)"},
      {Match::kBasename, "docker-compose.yaml", "compose file (can mount host paths, privileged)"},
      {Match::kBasename, "compose.yml", "compose file (can mount host paths, privileged)"},
      {Match::kBasename, "compose.yaml", "compose file (can mount host paths, privileged)"},
  };
  return *rules;
}

bool HasComponent(absl::string_view rel, absl::string_view name, bool ignore_case) {
  for (absl::string_view part : absl::StrSplit(rel, '/')) {
    if (ignore_case ? absl::EqualsIgnoreCase(part, name) : part == name) {
      return true;
    }
  }
  return false;
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
      case Match::kBaseStart:
        hit = absl::StartsWith(base, pattern);
        break;
      case Match::kSuffix:
        hit = base.size() > pattern.size() && absl::EndsWith(base, pattern);
        break;
      case Match::kDirAnyDepth:
        // `.git` case-insensitively, as HasGitComponent: the same directory where the file
        // system folds case.
        hit = HasComponent(rel, pattern, pattern == absl::string_view(".git"));
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

absl::StatusOr<SymlinkWalk> ResolveSymlink(absl::string_view rel, absl::string_view target,
                                           SymlinkLookup links, size_t* steps_left) {
  SymlinkWalk walk;
  auto shown = [&](absl::string_view via) {
    std::string out = EscapePath(target);
    if (!walk.through.empty()) {
      absl::StrAppend(&out, ", through ", absl::StrJoin(walk.through, ", "));
    }
    return via.empty() ? out : absl::StrCat(out, via);
  };
  if (absl::StartsWith(target, "/")) {
    walk.escape =
        absl::StrCat("a symlink to an absolute path (", shown(""), ") outside the workspace");
    return walk;
  }
  // `cur` is where the walk stands (components joined by '/'); `ends` the length of `cur` after
  // each component, so ".." drops the last one. `pending` holds the components still to walk,
  // last first, so a link's target is pushed in front of the rest.
  std::string cur;
  std::vector<size_t> ends;
  auto enter = [&](absl::string_view part) {
    if (!cur.empty()) {
      cur.push_back('/');
    }
    cur.append(part.data(), part.size());
    ends.push_back(cur.size());
  };
  auto leave = [&] {
    ends.pop_back();
    cur.resize(ends.empty() ? 0 : ends.back());
  };
  // The link's own directory is where the person's path put it: real directories (the host
  // refuses a write through a symlink).
  if (size_t slash = rel.rfind('/'); slash != absl::string_view::npos) {
    for (absl::string_view part : absl::StrSplit(rel.substr(0, slash), '/')) {
      enter(part);
    }
  }
  std::vector<std::string> pending;
  auto push_target = [&](absl::string_view t) {
    std::vector<absl::string_view> parts = absl::StrSplit(t, '/', absl::SkipEmpty());
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      pending.emplace_back(*it);
    }
  };
  push_target(target);
  int hops = 0;
  while (!pending.empty()) {
    if (*steps_left == 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the symlinks take too many steps to resolve (at '", EscapePath(rel),
                       "'): a tree of such chains is not applied; apply fewer paths at a time"));
    }
    --*steps_left;
    std::string part = std::move(pending.back());
    pending.pop_back();
    if (part == ".") {
      continue;
    }
    if (part == "..") {
      if (ends.empty()) {
        walk.escape = absl::StrCat("a symlink pointing outside the workspace (", shown(""), ")");
        return walk;
      }
      leave();
      continue;
    }
    enter(part);
    const std::string* next = links(cur);
    if (next == nullptr) {
      continue;  // A directory, or counted as one (see the header).
    }
    if (++hops > kMaxSymlinkHops) {
      walk.escape = absl::StrCat("a symlink loop, or a chain of more than ", kMaxSymlinkHops,
                                 " symlinks (", shown(""), "): where it leads cannot be checked");
      return walk;
    }
    walk.through.push_back(absl::StrCat(EscapePath(cur), " -> ", EscapePath(*next)));
    leave();  // The link's target is relative to the directory holding it.
    if (absl::StartsWith(*next, "/")) {
      walk.escape = absl::StrCat("a symlink that leads to an absolute path outside the workspace (",
                                 shown(""), ")");
      return walk;
    }
    push_target(*next);
  }
  return walk;
}

std::optional<std::string> SymlinkEscapeReason(absl::string_view rel, absl::string_view target) {
  size_t steps = size_t{1} << 20;
  absl::StatusOr<SymlinkWalk> walk = ResolveSymlink(
      rel, target, [](absl::string_view) -> const std::string* { return nullptr; }, &steps);
  if (!walk.ok()) {
    return std::string(walk.status().message());
  }
  return walk->escape;
}

}  // namespace abox::workspace
