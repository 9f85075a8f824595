#include "src/workspace/file_set.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
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
#include "src/base/unique_fd.h"
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
  Write(dir_ / ".env", "API_KEY=1\n");
  Write(dir_ / "certs/server.pem");
  Git(dir_.path(), {"add", "-f", ".env", "certs/server.pem"});
  Git(dir_.path(), {"commit", "-qm", "oops"});
  Write(dir_ / "home/.ssh/known_hosts");
  FileSet set = Compute(dir_.path(), NoGitDir());
  EXPECT_THAT(set.files, ElementsAre(".gitignore", "a.txt", "src/main.cc"));
  EXPECT_THAT(set.excluded, ElementsAre(Pair(".env", ".env"), Pair("certs/server.pem", "*.pem"),
                                        Pair("home/.ssh/known_hosts", ".ssh/")));
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

// Copies a file set into `dest` as the guest would receive it.
void Materialize(const std::string& root, const FileSet& set, const std::string& dest) {
  for (const std::string& rel : set.files) {
    fs::path from = fs::path(root) / rel;
    fs::path to = fs::path(dest) / rel;
    fs::create_directories(to.parent_path());
    struct stat st {};
    ASSERT_EQ(::lstat(from.c_str(), &st), 0) << rel;
    if (S_ISLNK(st.st_mode)) {
      fs::create_symlink(fs::read_symlink(from), to);
      continue;
    }
    auto replaced = set.replaced_content.find(rel);
    absl::StatusOr<std::string> content = replaced != set.replaced_content.end()
                                              ? absl::StatusOr<std::string>(replaced->second)
                                              : base::ReadFile(from.string());
    ASSERT_TRUE(content.ok()) << content.status();
    Write(to.string(), *content);
  }
}

TEST_F(FileSetTest, GitDirGoesInWithoutHooksLocksAndSecretsInConfig) {
  InitRepo(dir_.path());
  Git(dir_.path(), {"config", "credential.helper", "store"});
  Git(dir_.path(), {"remote", "add", "origin", "https://user:tok123@example.com/x.git"});
  Git(dir_.path(), {"branch", "hooks/feature"});  // refs/heads/hooks/ is not a hooks dir
  Write(dir_ / ".git/hooks/pre-commit", "#!/bin/sh\nexit 1\n");
  Write(dir_ / ".git/index.lock", "");
  // A submodule's git dir: its hooks stay out and its config is sanitized too.
  Write(dir_ / ".git/modules/lib/HEAD", "ref: refs/heads/main\n");
  Write(dir_ / ".git/modules/lib/config",
        "[credential]\n\thelper = cache\n[core]\n\tbare = false\n");
  Write(dir_ / ".git/modules/lib/hooks/post-checkout");
  // An fsmonitor-style socket.
  base::UniqueFd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string sock_path = dir_ / ".git/fsmonitor.ipc";
  ASSERT_LT(sock_path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, sock_path.c_str(), sock_path.size());
  ASSERT_EQ(::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);

  FileSet set = Compute(dir_.path());
  EXPECT_THAT(set.files, Contains(".git/HEAD"));
  EXPECT_THAT(set.files, Contains(".git/index"));
  EXPECT_THAT(set.files, Contains(".git/config"));
  EXPECT_THAT(set.files, Contains(".git/refs/heads/hooks/feature"));
  EXPECT_THAT(set.files, Contains(".git/modules/lib/config"));
  for (const std::string& f : set.files) {
    EXPECT_FALSE(absl::StartsWith(f, ".git/hooks/")) << f;
    EXPECT_FALSE(absl::StartsWith(f, ".git/modules/lib/hooks/")) << f;
    EXPECT_FALSE(absl::EndsWith(f, ".lock")) << f;
    EXPECT_NE(f, ".git/fsmonitor.ipc");
  }
  ASSERT_EQ(set.replaced_content.count(".git/config"), 1u);
  const std::string& config = set.replaced_content.at(".git/config");
  EXPECT_THAT(config, Not(HasSubstr("tok123")));
  EXPECT_THAT(config, Not(HasSubstr("helper =")));
  EXPECT_THAT(config, HasSubstr("https://example.com/x.git"));
  EXPECT_THAT(set.replaced_content.at(".git/modules/lib/config"), Not(HasSubstr("cache")));
  EXPECT_TRUE(AnyNoteHas(set, ".git/config: removed for the guest: credential.helper, remote.url"));

  // git works on the copy the guest gets, and sees a clean tree with the host's history.
  ScratchDir guest;
  Materialize(dir_.path(), set, guest.path());
  EXPECT_EQ(Git(guest.path(), {"status", "--porcelain"}), "");
  EXPECT_EQ(Git(guest.path(), {"log", "--format=%s"}), "init\n");
  EXPECT_EQ(Git(guest.path(), {"remote", "get-url", "origin"}), "https://example.com/x.git\n");
}

TEST_F(FileSetTest, SubdirectoryRootListsRelativePathsAndNotesMissingGitDir) {
  InitRepo(dir_.path());
  Write(dir_ / "src/untracked.h");
  FileSet set = Compute(dir_ / "src");
  EXPECT_TRUE(set.is_git);
  EXPECT_THAT(set.files, ElementsAre("main.cc", "untracked.h"));
  EXPECT_TRUE(AnyNoteHas(set, "subdirectory 'src/'")) << ::testing::PrintToString(set.notes);
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

TEST_F(FileSetTest, LinkedWorktreeWithGitFileIsNoted) {
  std::string repo = dir_ / "repo";
  fs::create_directories(repo);
  InitRepo(repo);
  Git(repo, {"worktree", "add", "-q", dir_ / "wt"});
  FileSet set = Compute(dir_ / "wt");
  EXPECT_TRUE(set.is_git);
  EXPECT_THAT(set.files, ElementsAre(".gitignore", "a.txt", "src/main.cc"));
  EXPECT_TRUE(AnyNoteHas(set, ".git is a file")) << ::testing::PrintToString(set.notes);
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
