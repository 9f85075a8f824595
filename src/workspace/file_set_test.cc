#include "src/workspace/file_set.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/child_process.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/workspace/testing/git_test_util.h"
#include "src/workspace/testing/scratch_tree.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;

class ScratchDir : public workspace::testing::ScratchDir {
 public:
  ScratchDir() : workspace::testing::ScratchDir("abox-fileset-test") {}
};

void Write(const std::string& path, const std::string& content = "x\n") {
  fs::create_directories(fs::path(path).parent_path());
  ASSERT_TRUE(base::WriteFileAtomic(path, content).ok()) << path;
}

// git in `dir` with a fixed identity; fails the test on a non-zero exit. Returns stdout.
std::string Git(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"git", "-c", "user.name=T", "-c", "user.email=t@example.com",
                                   "-C",  dir};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<base::CommandResult> r = base::RunCommand(argv);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) {
    return "";
  }
  EXPECT_EQ(r->status.ShellCode(), 0) << absl::StrJoin(args, " ") << ": " << r->err;
  return r->out;
}

class FileSetTest : public ::testing::Test {
 protected:
  // The user's and the machine's git config must not change what the tests see. The tests
  // share a process with others, so the environment is put back afterwards.
  static void SetUpTestSuite() {
    for (const char* name : kIsolatedVars) {
      const char* value = ::getenv(name);  // NOLINT(concurrency-mt-unsafe)
      saved_env_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
    }
    ::setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);  // NOLINT(concurrency-mt-unsafe)
    ::setenv("GIT_CONFIG_NOSYSTEM", "1", 1);        // NOLINT(concurrency-mt-unsafe)
    // ComputeFileSet's git drops GIT_* but reads ~/.gitconfig (the user's excludes apply).
    ::setenv("HOME", "/nonexistent/abox-test-home", 1);  // NOLINT(concurrency-mt-unsafe)
    ::unsetenv("XDG_CONFIG_HOME");                       // NOLINT(concurrency-mt-unsafe)
  }
  static void TearDownTestSuite() {
    for (const auto& [name, value] : saved_env_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
      } else {
        ::unsetenv(name.c_str());  // NOLINT(concurrency-mt-unsafe)
      }
    }
    saved_env_.clear();
  }

  // A repository with one commit: .gitignore, a.txt, src/main.cc.
  void InitRepo(const std::string& dir) {
    Git(dir, {"init", "-q"});
    Write(dir + "/.gitignore", "*.log\nbuild/\n");
    Write(dir + "/a.txt");
    Write(dir + "/src/main.cc");
    Git(dir, {"add", "-A"});
    Git(dir, {"commit", "-qm", "init"});
  }

  static FileSet Compute(const std::string& root, const FileSetOptions& options = {}) {
    absl::StatusOr<FileSet> set = ComputeFileSet(root, options);
    EXPECT_TRUE(set.ok()) << set.status();
    return set.ok() ? *std::move(set) : FileSet{};
  }

  static FileSetOptions NoGitDir() {
    FileSetOptions o;
    o.include_git_dir = false;
    return o;
  }

  static bool AnyNoteHas(const FileSet& set, absl::string_view text) {
    return std::any_of(set.notes.begin(), set.notes.end(),
                       [&](const std::string& n) { return absl::StrContains(n, text); });
  }

  static constexpr const char* kIsolatedVars[] = {"GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM",
                                                  "HOME", "XDG_CONFIG_HOME"};
  static inline std::vector<std::pair<std::string, std::optional<std::string>>> saved_env_;

  ScratchDir dir_;
};

TEST_F(FileSetTest, GitTreeHasTrackedAndUntrackedButNotIgnoredFiles) {
  InitRepo(dir_.path());
  Write(dir_ / "src/new.cc");
  Write(dir_ / "debug.log");
  Write(dir_ / "build/out.o");
  FileSet set = Compute(dir_.path(), NoGitDir());
  EXPECT_TRUE(set.is_git);
  EXPECT_THAT(set.files, ElementsAre(".gitignore", "a.txt", "src/main.cc", "src/new.cc"));
  EXPECT_THAT(set.excluded, IsEmpty());
}

TEST_F(FileSetTest, TrackedFileDeletedFromWorktreeIsLeftOut) {
  InitRepo(dir_.path());
  ASSERT_EQ(::unlink((dir_ / "a.txt").c_str()), 0);
  FileSet set = Compute(dir_.path(), NoGitDir());
  EXPECT_THAT(set.files, ElementsAre(".gitignore", "src/main.cc"));
  EXPECT_THAT(set.notes, IsEmpty());
}

TEST_F(FileSetTest, SecretsAreExcludedEvenWhenTracked) {
  InitRepo(dir_.path());
  Write(dir_ / ".env", "API_KEY=hunter2-fileset\n");
  Write(dir_ / "certs/server.pem", "fileset-key-bytes\n");
  Git(dir_.path(), {"add", "-f", ".env", "certs/server.pem"});
  Git(dir_.path(), {"commit", "-qm", "oops"});
  Write(dir_ / "home/.ssh/known_hosts");
  ScratchDir state;
  FileSetOptions options;
  options.git_build_dir = state / "git";
  FileSet set = Compute(dir_.path(), options);
  EXPECT_THAT(set.files, ElementsAre(".gitignore", "a.txt", "src/main.cc"));
  EXPECT_THAT(set.excluded, ElementsAre(Pair(".env", ".env"), Pair("certs/server.pem", "*.pem"),
                                        Pair("home/.ssh/known_hosts", ".ssh/")));
  // Nor does the history: what the guest gets holds the secrets nowhere, while git works.
  ScratchDir guest;
  testing::Materialize(dir_.path(), set, guest.path());
  for (const char* secret : {"hunter2-fileset", "fileset-key-bytes"}) {
    EXPECT_THAT(Git(guest.path(), {"log", "-p", "--all"}), Not(HasSubstr(secret)));
    EXPECT_THAT(Git(guest.path(), {"cat-file", "--batch-all-objects", "--batch"}),
                Not(HasSubstr(secret)));
    EXPECT_THAT(testing::FilesContaining(guest.path(), secret), IsEmpty());
  }
  EXPECT_EQ(Git(guest.path(), {"status", "--porcelain"}), "");
}

TEST_F(FileSetTest, ServiceAccountKeysAreLeftOutByContentFromTheTreeAndFromGit) {
  // A key under a name no pattern knows: only its content says what it is.
  const std::string key =
      "{\n  \"type\": \"service_account\",\n  \"project_id\": \"p\",\n"
      "  \"private_key\": \"sa-key-bytes-0451\"\n}\n";
  InitRepo(dir_.path());
  Write(dir_ / "deploy/ci-bot.json", key);
  Write(dir_ / "config/settings.json", "{\"type\": \"settings\"}\n");
  Git(dir_.path(), {"add", "-A"});
  Git(dir_.path(), {"commit", "-qm", "add the bot"});
  Write(dir_ / "untracked-key.json", key);
  ScratchDir state;
  FileSetOptions options;
  options.git_build_dir = state / "git";
  FileSet set = Compute(dir_.path(), options);
  EXPECT_THAT(set.files, Not(Contains("deploy/ci-bot.json")));
  EXPECT_THAT(set.files, Not(Contains("untracked-key.json")));
  EXPECT_THAT(set.files, Contains("config/settings.json"));
  EXPECT_THAT(set.excluded, Contains(Pair("deploy/ci-bot.json", HasSubstr("service-account"))));
  EXPECT_THAT(set.excluded, Contains(Pair("untracked-key.json", HasSubstr("service-account"))));
  ScratchDir guest;
  testing::Materialize(dir_.path(), set, guest.path());
  EXPECT_THAT(Git(guest.path(), {"cat-file", "--batch-all-objects", "--batch"}),
              Not(HasSubstr("sa-key-bytes-0451")));
  EXPECT_THAT(testing::FilesContaining(guest.path(), "sa-key-bytes-0451"), IsEmpty());
  // The same key in a plain directory is left out too.
  ScratchDir plain;
  Write(plain / "k.json", key);
  Write(plain / "a.txt");
  FileSet plain_set = Compute(plain.path());
  EXPECT_THAT(plain_set.files, ElementsAre("a.txt"));
}

TEST_F(FileSetTest, ExcludeRemoveLetsPemInAndExcludeAddTakesFilesOut) {
  InitRepo(dir_.path());
  Write(dir_ / "certs/ca.pem");
  Write(dir_ / "data/dump.sql");
  FileSetOptions options = NoGitDir();
  options.exclude_remove = {"*.pem"};
  options.exclude_add = {"*.sql"};
  FileSet set = Compute(dir_.path(), options);
  EXPECT_THAT(set.files, Contains("certs/ca.pem"));
  EXPECT_THAT(set.files, Not(Contains("data/dump.sql")));
  EXPECT_THAT(set.excluded, ElementsAre(Pair("data/dump.sql", "*.sql")));
}

TEST_F(FileSetTest, BadExcludeOptionsAreErrors) {
  FileSetOptions options;
  options.exclude_remove = {"*.txt"};
  absl::StatusOr<FileSet> set = ComputeFileSet(dir_.path(), options);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  options = {};
  options.exclude_add = {"a\nb"};
  set = ComputeFileSet(dir_.path(), options);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FileSetTest, GuestGitIsBuiltNotCopiedFromTheHost) {
  InitRepo(dir_.path());
  Git(dir_.path(), {"config", "credential.helper", "store"});
  Git(dir_.path(), {"remote", "add", "origin", "https://user:tok123@example.com/x.git"});
  Git(dir_.path(), {"branch", "other"});
  Write(dir_ / ".git/hooks/pre-commit", "#!/bin/sh\nexit 1\n");
  Write(dir_ / ".git/info/exclude", "*.tmp\n");
  Write(dir_ / ".git/index.lock", "");
  ScratchDir state;
  FileSetOptions options;
  options.git_build_dir = state / "git";
  FileSet set = Compute(dir_.path(), options);
  for (const std::string& f : set.files) {
    EXPECT_FALSE(absl::StartsWith(f, ".git/")) << f;
  }
  ASSERT_TRUE(set.git.has_value());
  EXPECT_THAT(set.git->entries, Contains(Pair(".git/HEAD", ".git/HEAD")));
  EXPECT_THAT(set.git->entries, Contains(Pair(".git/index", ".git/index")));
  EXPECT_THAT(set.git->entries, Contains(Pair(".git/info/exclude", ".git/info/exclude")));
  for (const auto& [guest, local] : set.git->entries) {
    EXPECT_FALSE(absl::StartsWith(guest, ".git/hooks")) << guest;
    EXPECT_FALSE(absl::EndsWith(guest, ".lock")) << guest;
  }
  EXPECT_TRUE(AnyNoteHas(set, "snapshot of 'master'")) << ::testing::PrintToString(set.notes);

  ScratchDir guest;
  testing::Materialize(dir_.path(), set, guest.path());
  std::string config = testing::ReadWholeFile(guest / ".git/config");
  EXPECT_THAT(config, Not(HasSubstr("tok123")));
  EXPECT_THAT(config, Not(HasSubstr("helper")));
  EXPECT_THAT(config, Not(HasSubstr("example.com")));
  EXPECT_EQ(Git(guest.path(), {"status", "--porcelain"}), "");
  EXPECT_EQ(Git(guest.path(), {"log", "--format=%s"}),
            "abox: snapshot of branch 'master' at " + Git(dir_.path(), {"rev-parse", "HEAD"}));
  EXPECT_EQ(Git(guest.path(), {"branch", "--format=%(refname:short)"}), "master\n");
  Write(guest / "x.tmp");
  EXPECT_EQ(Git(guest.path(), {"status", "--porcelain"}), "") << "info/exclude did not go in";
}

TEST_F(FileSetTest, WithoutABuildDirTheGuestGetsNoGit) {
  InitRepo(dir_.path());
  FileSet set = Compute(dir_.path());
  EXPECT_FALSE(set.git.has_value());
  EXPECT_TRUE(AnyNoteHas(set, "git will not work in the guest"));
}

// Issue 19: a subdirectory of a worktree gets git too, HEAD's tree under it.
TEST_F(FileSetTest, SubdirectoryRootListsRelativePathsAndGetsGit) {
  InitRepo(dir_.path());
  Write(dir_ / "src/untracked.h");
  ScratchDir state;
  FileSetOptions options;
  options.git_build_dir = state / "git";
  FileSet set = Compute(dir_ / "src", options);
  EXPECT_TRUE(set.is_git);
  EXPECT_THAT(set.files, ElementsAre("main.cc", "untracked.h"));
  ASSERT_TRUE(set.git.has_value()) << ::testing::PrintToString(set.notes);
  EXPECT_TRUE(AnyNoteHas(set, "snapshot of 'src/' in 'master'"))
      << ::testing::PrintToString(set.notes);
  ScratchDir guest;
  testing::Materialize(dir_ / "src", set, guest.path());
  EXPECT_EQ(Git(guest.path(), {"ls-files"}), "main.cc\n");
  EXPECT_EQ(Git(guest.path(), {"status", "--porcelain"}), "?? untracked.h\n");
}

TEST_F(FileSetTest, PlainDirectoryHasEveryFileButSecretsAndOtherVcsMetadata) {
  Write(dir_ / "a.txt");
  Write(dir_ / "sub/b.log");
  Write(dir_ / "sub/.env.local");
  Write(dir_ / "u/.aws/credentials");
  Write(dir_ / ".hg/hgrc", "[auth]\nx.password = p\n");
  Write(dir_ / "nested/.git/config");
  Write(dir_ / "nested/f.c");
  ASSERT_EQ(::mkfifo((dir_ / "pipe").c_str(), 0600), 0);
  FileSet set = Compute(dir_.path());
  EXPECT_FALSE(set.is_git);
  EXPECT_THAT(set.files, ElementsAre("a.txt", "nested/f.c", "sub/b.log"));
  EXPECT_THAT(set.excluded,
              ElementsAre(Pair("sub/.env.local", ".env.*"), Pair("u/.aws/", ".aws/")));
  EXPECT_TRUE(AnyNoteHas(set, "skipped '.hg'"));
  EXPECT_TRUE(AnyNoteHas(set, "skipped 'nested/.git'"));
  EXPECT_TRUE(AnyNoteHas(set, "skipped 'pipe': a socket, FIFO or device file"));
}

TEST_F(FileSetTest, SymlinksAreListedAsLinksAndNeverFollowed) {
  ScratchDir outside;
  Write(outside / "secret-data.txt");
  for (bool git : {false, true}) {
    ScratchDir d;
    if (git) {
      InitRepo(d.path());
    }
    Write(d / "real.txt");
    ASSERT_EQ(::symlink(outside.path().c_str(), (d / "out").c_str()), 0);
    ASSERT_EQ(::symlink("real.txt", (d / "rel-link").c_str()), 0);
    FileSet set = Compute(d.path(), NoGitDir());
    EXPECT_THAT(set.files, Contains("out")) << git;
    EXPECT_THAT(set.files, Contains("rel-link")) << git;
    for (const std::string& f : set.files) {
      EXPECT_FALSE(absl::StartsWith(f, "out/")) << f;
    }
  }
}

TEST_F(FileSetTest, TrackedFilesBehindDirectoryNowSymlinkedAreNotFollowed) {
  InitRepo(dir_.path());
  ScratchDir outside;
  Write(outside / "main.cc", "outside\n");
  fs::remove_all(dir_ / "src");
  ASSERT_EQ(::symlink(outside.path().c_str(), (dir_ / "src").c_str()), 0);
  FileSet set = Compute(dir_.path(), NoGitDir());
  EXPECT_THAT(set.files, ElementsAre(".gitignore", "a.txt", "src"));
  EXPECT_TRUE(AnyNoteHas(set, "'src': it is now a symlink"));
}

TEST_F(FileSetTest, NameWithNewlineIsSkippedWithNote) {
  for (bool git : {false, true}) {
    ScratchDir d;
    if (git) {
      InitRepo(d.path());
    }
    Write(d / "ok.txt");
    Write(d / "bad\nname");
    FileSet set = Compute(d.path(), NoGitDir());
    EXPECT_THAT(set.files, Contains("ok.txt"));
    EXPECT_THAT(set.files, Not(Contains("bad\nname")));
    EXPECT_TRUE(AnyNoteHas(set, "'bad\\x0aname'")) << ::testing::PrintToString(set.notes);
  }
}

TEST_F(FileSetTest, LinkedWorktreeWithGitFileGetsARepositoryToo) {
  std::string repo = dir_ / "repo";
  fs::create_directories(repo);
  InitRepo(repo);
  Git(repo, {"worktree", "add", "-q", dir_ / "wt"});
  ScratchDir state;
  FileSetOptions options;
  options.git_build_dir = state / "git";
  FileSet set = Compute(dir_ / "wt", options);
  EXPECT_TRUE(set.is_git);
  EXPECT_THAT(set.files, ElementsAre(".gitignore", "a.txt", "src/main.cc"));
  ASSERT_TRUE(set.git.has_value());
  EXPECT_EQ(set.git->branch, "wt");
}

TEST_F(FileSetTest, SubmodulesAndNestedRepositoriesAreSkippedWithNotes) {
  InitRepo(dir_.path());
  std::string head = Git(dir_.path(), {"rev-parse", "HEAD"});
  head.pop_back();
  fs::create_directories(dir_ / "lib");
  Git(dir_.path(), {"update-index", "--add", "--cacheinfo", absl::StrCat("160000,", head, ",lib")});
  std::string nested = dir_ / "vendor/other";
  fs::create_directories(nested);
  InitRepo(nested);
  FileSet set = Compute(dir_.path(), NoGitDir());
  EXPECT_THAT(set.files, ElementsAre(".gitignore", "a.txt", "src/main.cc"));
  EXPECT_TRUE(AnyNoteHas(set, "skipped submodule 'lib'"));
  EXPECT_TRUE(AnyNoteHas(set, "'vendor/other/': an untracked nested git repository"));
}

TEST_F(FileSetTest, RootMustBeAnExistingDirectory) {
  absl::StatusOr<FileSet> set = ComputeFileSet(dir_ / "missing", {});
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kNotFound);
  InitRepo(dir_.path());
  set = ComputeFileSet(dir_ / ".git", {});
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr("not a worktree"));
  Write(dir_ / "file");
  set = ComputeFileSet(dir_ / "file", {});
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr(dir_ / "file is not a directory"));
}

}  // namespace
}  // namespace abox::workspace
