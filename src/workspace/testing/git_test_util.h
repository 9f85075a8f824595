// Test helpers for code that runs git: an environment where the user's and the machine's git
// config cannot change what a test sees, git with a fixed identity, a file set unpacked the
// way the guest would receive it, and a byte search over a whole tree.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "src/base/child_process.h"
#include "src/base/io.h"
#include "src/workspace/file_set.h"
#include "src/workspace/testing/scratch_tree.h"

namespace abox::workspace::testing {

// Sets GIT_CONFIG_GLOBAL=/dev/null, GIT_CONFIG_NOSYSTEM=1 and a HOME without a .gitconfig for
// its lifetime (the code under test drops GIT_* but reads ~/.gitconfig), then puts them back.
// Tests share a process, so use it from SetUpTestSuite / TearDownTestSuite.
class IsolatedGitEnv {
 public:
  IsolatedGitEnv() {
    for (const char* name : kVars) {
      const char* value = ::getenv(name);  // NOLINT(concurrency-mt-unsafe)
      saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
    }
    ::setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);       // NOLINT(concurrency-mt-unsafe)
    ::setenv("GIT_CONFIG_NOSYSTEM", "1", 1);             // NOLINT(concurrency-mt-unsafe)
    ::setenv("HOME", "/nonexistent/abox-test-home", 1);  // NOLINT(concurrency-mt-unsafe)
    ::unsetenv("XDG_CONFIG_HOME");                       // NOLINT(concurrency-mt-unsafe)
  }
  ~IsolatedGitEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
      } else {
        ::unsetenv(name.c_str());  // NOLINT(concurrency-mt-unsafe)
      }
    }
  }
  IsolatedGitEnv(const IsolatedGitEnv&) = delete;
  IsolatedGitEnv& operator=(const IsolatedGitEnv&) = delete;

 private:
  static constexpr const char* kVars[] = {"GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM", "HOME",
                                          "XDG_CONFIG_HOME"};
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

struct GitRun {
  int code = -1;
  std::string out;
  std::string err;
};

// git in `dir` with a fixed identity and branch name, any exit code.
inline GitRun TryGit(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"git",
                                   "-c",
                                   "user.name=T",
                                   "-c",
                                   "user.email=t@example.com",
                                   "-c",
                                   "init.defaultBranch=main",
                                   "-c",
                                   "safe.directory=*",
                                   "-C",
                                   dir};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<base::CommandResult> r = base::RunCommand(argv, size_t{256} << 20);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) {
    return {};
  }
  return {r->status.ShellCode(), r->out, r->err};
}

// The same, failing the test on a non-zero exit; returns stdout.
inline std::string Git(const std::string& dir, const std::vector<std::string>& args) {
  GitRun r = TryGit(dir, args);
  EXPECT_EQ(r.code, 0) << "git " << absl::StrJoin(args, " ") << ": " << r.err;
  return r.out;
}

inline void WriteTestFile(const std::string& path, const std::string& content = "x\n") {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  ASSERT_TRUE(base::WriteFileAtomic(path, content).ok()) << path;
}

// Copies what a sync of `set` would send into `dest`: the files from `root`, the guest's
// .git from its build dir.
inline void Materialize(const std::string& root, const FileSet& set, const std::string& dest) {
  namespace fs = std::filesystem;
  auto copy = [&](const fs::path& from, const std::string& rel) {
    fs::path to = fs::path(dest) / rel;
    fs::create_directories(to.parent_path());
    struct stat st {};
    ASSERT_EQ(::lstat(from.c_str(), &st), 0) << rel;
    if (S_ISLNK(st.st_mode)) {
      fs::create_symlink(fs::read_symlink(from), to);
    } else if (S_ISDIR(st.st_mode)) {
      fs::create_directories(to);
    } else {
      absl::StatusOr<std::string> content = base::ReadFile(from.string(), size_t{1} << 30);
      ASSERT_TRUE(content.ok()) << content.status();
      WriteTestFile(to.string(), *content);
    }
  };
  for (const std::string& rel : set.files) {
    copy(fs::path(root) / rel, rel);
  }
  if (set.git) {
    for (const auto& [guest, local] : set.git->entries) {
      copy(fs::path(set.git->dir) / local, guest);
    }
  }
}

// Every file below `root` (.git included) whose bytes contain `needle`, relative to `root`.
inline std::vector<std::string> FilesContaining(const std::string& root,
                                                const std::string& needle) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    if (!it->is_regular_file() || it->is_symlink()) {
      continue;
    }
    absl::StatusOr<std::string> content = base::ReadFile(it->path().string(), size_t{1} << 30);
    if (content.ok() && content->find(needle) != std::string::npos) {
      out.push_back(fs::relative(it->path(), root).string());
    }
  }
  return out;
}

}  // namespace abox::workspace::testing
