// The guest's .git as the file set sends it, unpacked into a directory and read with git.
#include "src/workspace/git_snapshot.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/workspace/file_set.h"
#include "src/workspace/testing/git_test_util.h"
#include "src/workspace/testing/scratch_tree.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using testing::FilesContaining;
using testing::Git;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Materialize;
using ::testing::Not;
using ::testing::Pair;
using testing::TryGit;

constexpr char kSecret[] = "hunter2-abox-snapshot-secret";
constexpr char kKey[] = "abox-test-private-key-material";

void Write(const std::string& path, const std::string& content = "x\n") {
  testing::WriteTestFile(path, content);
}

std::string Trim(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

class GitSnapshotTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { env_ = std::make_unique<testing::IsolatedGitEnv>(); }
  static void TearDownTestSuite() { env_.reset(); }

  GitSnapshotTest() : repo_(host_ / "repo"), root_(repo_), build_(state_ / "git") {
    fs::create_directories(repo_);
  }

  // main: README.md and src/app.py; the first commit also had .env and deploy.pem.
  void InitRepoWithRemovedSecret() {
    Git(repo_, {"init", "-q"});
    Write(repo_ + "/README.md", "# demo\n");
    Write(repo_ + "/src/app.py", "print('hi')\n");
    Write(repo_ + "/.env", absl::StrCat("TOKEN=", kSecret, "\n"));
    Write(repo_ + "/deploy.pem", absl::StrCat("-----BEGIN PRIVATE KEY-----\n", kKey, "\n"));
    Git(repo_, {"add", "-A"});
    Git(repo_, {"commit", "-qm", "init, with a secret"});
    Git(repo_, {"rm", "-q", ".env", "deploy.pem"});
    Git(repo_, {"commit", "-qm", "remove the secret"});
  }

  FileSet Compute(GitHistory history = GitHistory::kSnapshot, FileSetOptions options = {}) {
    options.git_build_dir = build_;
    options.git_history = history;
    absl::StatusOr<FileSet> set = ComputeFileSet(root_, options);
    EXPECT_TRUE(set.ok()) << set.status();
    if (!set.ok()) {
      return FileSet{};
    }
    for (const std::string& note : set->notes) {
      EXPECT_THAT(note, Not(HasSubstr("git will not work")));
    }
    return *std::move(set);
  }

  // A fresh guest directory with what a sync of `set` sends.
  std::string Guest(const FileSet& set) {
    guests_.push_back(std::make_unique<workspace::testing::ScratchDir>("abox-guest"));
    std::string dir = guests_.back()->path();
    Materialize(root_, set, dir);
    return dir;
  }

  std::string Head() { return Trim(Git(repo_, {"rev-parse", "HEAD"})); }

  // The checks of the issue: nothing git can show, no object, no file holds the secret.
  static void ExpectNoSecretIn(const std::string& guest) {
    for (const char* needle : {kSecret, kKey}) {
      EXPECT_THAT(Git(guest, {"log", "-p", "--all"}), Not(HasSubstr(needle)));
      EXPECT_THAT(Git(guest, {"log", "-p", "-g", "--all"}), Not(HasSubstr(needle)));
      EXPECT_THAT(Git(guest, {"cat-file", "--batch-all-objects", "--batch"}),
                  Not(HasSubstr(needle)));
      EXPECT_THAT(FilesContaining(guest, needle), IsEmpty());
    }
  }

  static inline std::unique_ptr<testing::IsolatedGitEnv> env_;
  workspace::testing::ScratchDir host_{"abox-snapshot-host"};
  workspace::testing::ScratchDir state_{"abox-snapshot-state"};
  std::string repo_;
  std::string root_;  // the workspace: repo_ or a directory in it
  std::string build_;
  std::vector<std::unique_ptr<workspace::testing::ScratchDir>> guests_;
};

// The test, without a VM: commit a secret, remove it, commit again; in what the guest
// gets, `git log -p --all`, `git cat-file --batch-all-objects --batch` and a search of every
// file find no byte of it. A branch, a stash, a tag and the reflog hold it too.
TEST_F(GitSnapshotTest, SecretCommittedThenRemovedNeverReachesTheGuest) {
  InitRepoWithRemovedSecret();
  Git(repo_, {"tag", "-a", "-m", "v1", "v1", "HEAD~1"});
  Git(repo_, {"checkout", "-qb", "side"});
  Write(repo_ + "/side.pem", kKey);
  Git(repo_, {"add", "side.pem"});
  Git(repo_, {"commit", "-qm", "side"});
  Git(repo_, {"checkout", "-q", "main"});
  Write(repo_ + "/.env", kSecret);
  Write(repo_ + "/README.md", "# demo, stashed\n");
  Git(repo_, {"stash", "-q", "-u"});
  std::string head = Head();

  FileSet set = Compute();
  ASSERT_TRUE(set.git.has_value());
  EXPECT_EQ(set.git->host_head, head);
  EXPECT_EQ(set.git->branch, "main");
  std::string guest = Guest(set);
  ExpectNoSecretIn(guest);
  // git works there: one commit on the same branch, naming the host's HEAD; a clean tree.
  EXPECT_EQ(Git(guest, {"rev-list", "--all", "--count"}), "1\n");
  EXPECT_EQ(Git(guest, {"rev-parse", "--abbrev-ref", "HEAD"}), "main\n");
  EXPECT_THAT(Git(guest, {"log", "-1", "--format=%B"}),
              HasSubstr(absl::StrCat("Abox-Host-Head: ", head)));
  EXPECT_EQ(Git(guest, {"status", "--porcelain"}), "");
  EXPECT_EQ(Git(guest, {"ls-files"}), "README.md\nsrc/app.py\n");
  EXPECT_EQ(Git(guest, {"fsck", "--strict", "--no-dangling"}), "");
  // No hooks, no remotes, no host settings, no reflog, stash or other ref.
  EXPECT_FALSE(fs::exists(guest + "/.git/hooks"));
  EXPECT_EQ(Git(guest, {"for-each-ref", "--format=%(refname)"}), "refs/heads/main\n");
  EXPECT_EQ(TryGit(guest, {"stash", "list"}).out, "");
}

TEST_F(GitSnapshotTest, TrackedSecretInHeadIsLeftOutOfTheCommitAndReported) {
  Git(repo_, {"init", "-q"});
  Write(repo_ + "/a.txt");
  Write(repo_ + "/certs/server.pem", kKey);
  Write(repo_ + "/.env", kSecret);
  Git(repo_, {"add", "-A"});
  Git(repo_, {"commit", "-qm", "tracked secrets"});
  fs::remove(repo_ + "/.env");  // in HEAD only
  FileSet set = Compute();
  EXPECT_THAT(set.files, ElementsAre("a.txt"));
  EXPECT_THAT(set.excluded, ElementsAre(Pair(".env", ".env"), Pair("certs/server.pem", "*.pem")));
  std::string guest = Guest(set);
  ExpectNoSecretIn(guest);
  EXPECT_EQ(Git(guest, {"ls-tree", "-r", "--name-only", "HEAD"}), "a.txt\n");
  EXPECT_EQ(Git(guest, {"status", "--porcelain"}), "");
}

TEST_F(GitSnapshotTest, GuestStatusAndDiffShowTheWorktreesChangesAgainstHead) {
  InitRepoWithRemovedSecret();
  Write(repo_ + "/README.md", "# demo\nmore\n");
  Write(repo_ + "/new.txt", "untracked\n");
  Write(repo_ + "/staged.txt", "staged\n");
  Git(repo_, {"add", "staged.txt"});
  std::string guest = Guest(Compute());
  EXPECT_EQ(Git(guest, {"status", "--porcelain"}), " M README.md\n?? new.txt\n?? staged.txt\n");
  EXPECT_THAT(Git(guest, {"diff"}), HasSubstr("+more"));
  // The agent can commit on top.
  Git(guest, {"add", "-A"});
  Git(guest, {"commit", "-qm", "agent"});
  EXPECT_EQ(Git(guest, {"rev-list", "--count", "HEAD"}), "2\n");
}

TEST_F(GitSnapshotTest, UnchangedHeadReusesTheBuildAndAMovedHeadAddsOnlyItsObjects) {
  InitRepoWithRemovedSecret();
  FileSet first = Compute();
  ASSERT_TRUE(first.git.has_value());
  EXPECT_TRUE(first.git->rebuilt);
  FileSet again = Compute();
  ASSERT_TRUE(again.git.has_value());
  EXPECT_FALSE(again.git->rebuilt);
  EXPECT_EQ(again.git->entries, first.git->entries);
  EXPECT_EQ(again.git->commit, first.git->commit);

  Write(repo_ + "/src/app.py", "print('v2')\n");
  Git(repo_, {"commit", "-qam", "v2"});
  FileSet moved = Compute();
  ASSERT_TRUE(moved.git.has_value());
  EXPECT_TRUE(moved.git->rebuilt);
  EXPECT_NE(moved.git->commit, first.git->commit);
  std::vector<std::string> old_packs;
  std::vector<std::string> new_packs;
  for (const auto& [path, local] : first.git->entries) {
    if (absl::EndsWith(path, ".pack")) {
      old_packs.push_back(path);
    }
  }
  for (const auto& [path, local] : moved.git->entries) {
    if (absl::EndsWith(path, ".pack")) {
      new_packs.push_back(path);
    }
  }
  ASSERT_EQ(old_packs.size(), 1u);
  ASSERT_EQ(new_packs.size(), 2u);  // the old pack stays: the guest's own commits may need it
  EXPECT_THAT(new_packs, Contains(old_packs[0]));
  // The new pack holds the new commit, its root and src/ trees and the new blob only.
  std::string newest = new_packs[0] == old_packs[0] ? new_packs[1] : new_packs[0];
  std::string idx = moved.git->dir + "/" + newest.substr(0, newest.size() - 5) + ".idx";
  int objects = 0;
  for (absl::string_view line : absl::StrSplit(Git(build_, {"verify-pack", "-v", idx}), '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    objects += f.size() >= 3 && (f[1] == "commit" || f[1] == "tree" || f[1] == "blob");
  }
  EXPECT_EQ(objects, 4) << Git(
      build_, {"verify-pack", "-v", idx});  // the commit, the root and src/ trees, src/app.py
  std::string guest = Guest(moved);
  EXPECT_EQ(Git(guest, {"status", "--porcelain"}), "");
  EXPECT_EQ(Git(guest, {"show", "HEAD:src/app.py"}), "print('v2')\n");
  EXPECT_THAT(Git(guest, {"log", "-1", "--format=%B"}), HasSubstr(Head()));
  EXPECT_EQ(Git(guest, {"fsck", "--strict", "--no-dangling"}), "");
  ExpectNoSecretIn(guest);
}

TEST_F(GitSnapshotTest, DetachedHeadAndUnbornBranch) {
  Git(repo_, {"init", "-q"});
  Write(repo_ + "/a.txt");
  FileSet unborn = Compute();
  ASSERT_TRUE(unborn.git.has_value());
  EXPECT_TRUE(unborn.git->commit.empty());
  std::string guest = Guest(unborn);
  EXPECT_EQ(Git(guest, {"symbolic-ref", "HEAD"}), "refs/heads/main\n");
  EXPECT_EQ(Git(guest, {"status", "--porcelain"}), "?? a.txt\n");

  Git(repo_, {"add", "a.txt"});
  Git(repo_, {"commit", "-qm", "one"});
  Git(repo_, {"checkout", "-q", "--detach"});
  FileSet detached = Compute();
  ASSERT_TRUE(detached.git.has_value());
  EXPECT_TRUE(detached.git->branch.empty());
  guest = Guest(detached);
  EXPECT_NE(TryGit(guest, {"symbolic-ref", "-q", "HEAD"}).code, 0);
  EXPECT_EQ(Trim(Git(guest, {"rev-parse", "HEAD"})), detached.git->commit);
  EXPECT_EQ(Git(guest, {"status", "--porcelain"}), "");
}

TEST_F(GitSnapshotTest, LinkedWorktreeGetsItsOwnHeadsSnapshot) {
  InitRepoWithRemovedSecret();
  std::string wt = host_ / "wt";
  Git(repo_, {"worktree", "add", "-q", "-b", "feature", wt});
  Write(wt + "/feature.txt", "f\n");
  Git(wt, {"add", "feature.txt"});
  Git(wt, {"commit", "-qm", "feature"});
  FileSetOptions options;
  options.git_build_dir = build_;
  absl::StatusOr<FileSet> set = ComputeFileSet(wt, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_TRUE(set->git.has_value());
  EXPECT_EQ(set->git->branch, "feature");
  workspace::testing::ScratchDir guest("abox-guest");
  Materialize(wt, *set, guest.path());
  EXPECT_EQ(Git(guest.path(), {"status", "--porcelain"}), "");
  EXPECT_EQ(Git(guest.path(), {"ls-files"}), "README.md\nfeature.txt\nsrc/app.py\n");
  ExpectNoSecretIn(guest.path());
}

TEST_F(GitSnapshotTest, ChangedExcludeRulesStartTheBuildOver) {
  Git(repo_, {"init", "-q"});
  Write(repo_ + "/a.txt");
  Write(repo_ + "/ca.pem", kKey);
  Git(repo_, {"add", "-A"});
  Git(repo_, {"commit", "-qm", "one"});
  FileSetOptions let_pem_in;
  let_pem_in.exclude_remove = {"*.pem"};
  FileSet with_pem = Compute(GitHistory::kSnapshot, let_pem_in);
  EXPECT_EQ(Git(Guest(with_pem), {"ls-files"}), "a.txt\nca.pem\n");
  FileSet without = Compute();
  ASSERT_TRUE(without.git.has_value());
  EXPECT_TRUE(without.git->rebuilt);
  for (const auto& [path, local] : with_pem.git->entries) {
    if (absl::EndsWith(path, ".pack")) {
      EXPECT_FALSE(without.git->entries.contains(path)) << "a pack with the key stayed";
    }
  }
  ExpectNoSecretIn(Guest(without));
}

// ---- Full history ----

// Issue 19: a workspace that is a subdirectory of the worktree gets HEAD's tree under it, so
// `git status` / `git diff` in the guest show exactly the changes there against HEAD.
TEST_F(GitSnapshotTest, SubdirectoryGetsHeadsTreeUnderIt) {
  InitRepoWithRemovedSecret();
  Write(repo_ + "/src/lib/util.py", "def f(): pass\n");
  Write(repo_ + "/src/certs/server.pem", kKey);
  Git(repo_, {"add", "-A"});
  Git(repo_, {"commit", "-qm", "lib"});
  std::string head = Head();
  fs::remove(repo_ + "/src/certs/server.pem");  // tracked, in HEAD only
  Write(repo_ + "/src/app.py", "print('v2')\n");
  fs::remove(repo_ + "/src/lib/util.py");
  Write(repo_ + "/src/new.py", "new\n");
  Write(repo_ + "/README.md", "# changed outside the workspace\n");
  root_ = repo_ + "/src";

  FileSet set = Compute();
  ASSERT_TRUE(set.git.has_value());
  EXPECT_THAT(set.files, ElementsAre("app.py", "new.py"));
  EXPECT_THAT(set.excluded, ElementsAre(Pair("certs/server.pem", "*.pem")));
  EXPECT_EQ(set.git->host_head, head);
  EXPECT_EQ(set.git->branch, "main");
  std::string guest = Guest(set);
  ExpectNoSecretIn(guest);
  EXPECT_EQ(Git(guest, {"ls-tree", "-r", "--name-only", "HEAD"}), "app.py\nlib/util.py\n");
  EXPECT_EQ(Git(guest, {"status", "--porcelain"}), " M app.py\n D lib/util.py\n?? new.py\n");
  EXPECT_THAT(Git(guest, {"diff"}), HasSubstr("+print('v2')"));
  EXPECT_EQ(Git(guest, {"rev-parse", "--abbrev-ref", "HEAD"}), "main\n");
  std::string message = Git(guest, {"log", "-1", "--format=%B"});
  EXPECT_THAT(message, HasSubstr(absl::StrCat("Abox-Host-Head: ", head)));
  EXPECT_THAT(message, HasSubstr("Abox-Host-Path: src/"));
  // Nothing of the rest of the worktree: not README.md's blob, no other ref, no hooks.
  EXPECT_THAT(Git(guest, {"cat-file", "--batch-all-objects", "--batch"}), Not(HasSubstr("# demo")));
  EXPECT_EQ(Git(guest, {"for-each-ref", "--format=%(refname)"}), "refs/heads/main\n");
  EXPECT_FALSE(fs::exists(guest + "/.git/hooks"));
  EXPECT_EQ(Git(guest, {"fsck", "--strict", "--no-dangling"}), "");

  // An unchanged HEAD reuses the build; the workspace at the top starts a build of its own.
  FileSet again = Compute();
  ASSERT_TRUE(again.git.has_value());
  EXPECT_FALSE(again.git->rebuilt);
  EXPECT_EQ(again.git->commit, set.git->commit);
  root_ = repo_;
  FileSet top = Compute();
  ASSERT_TRUE(top.git.has_value());
  EXPECT_TRUE(top.git->rebuilt);
  EXPECT_EQ(Git(Guest(top), {"ls-tree", "--name-only", "HEAD"}), "README.md\nsrc\n");
}

TEST_F(GitSnapshotTest, SubdirectoryNotInHeadGetsAnEmptySnapshot) {
  InitRepoWithRemovedSecret();
  Write(repo_ + "/fresh/a.txt", "a\n");
  root_ = repo_ + "/fresh";
  FileSet set = Compute();
  ASSERT_TRUE(set.git.has_value());
  EXPECT_THAT(set.notes, Contains(HasSubstr("HEAD has no directory 'fresh/'")));
  std::string guest = Guest(set);
  EXPECT_EQ(Git(guest, {"ls-tree", "-r", "HEAD"}), "");
  EXPECT_EQ(Git(guest, {"status", "--porcelain"}), "?? a.txt\n");
  ExpectNoSecretIn(guest);
}

// The history's trees are the whole worktree's: a subdirectory asked for it gets the snapshot,
// and a note saying so (not an error: the sandbox keeps working, and less goes in, not more).
TEST_F(GitSnapshotTest, FullHistoryForASubdirectoryIsTheSnapshotWithANote) {
  InitRepoWithRemovedSecret();  // history holds .env and deploy.pem: full history is refused
  root_ = repo_ + "/src";
  FileSet set = Compute(GitHistory::kFull);
  ASSERT_TRUE(set.git.has_value());
  EXPECT_THAT(set.notes, Contains(HasSubstr("--git-history")));
  EXPECT_THAT(set.notes, Contains(HasSubstr("subdirectory 'src/'")));
  std::string guest = Guest(set);
  EXPECT_EQ(Git(guest, {"rev-list", "--all", "--count"}), "1\n");
  EXPECT_EQ(Git(guest, {"ls-files"}), "app.py\n");
  EXPECT_EQ(Git(guest, {"status", "--porcelain"}), "");
  ExpectNoSecretIn(guest);
}

TEST_F(GitSnapshotTest, FullHistoryIsRefusedNamingTheExcludedPathsAndTheirCommits) {
  InitRepoWithRemovedSecret();
  std::string first = Trim(Git(repo_, {"rev-parse", "--short=12", "HEAD~1"}));
  FileSetOptions options;
  options.git_build_dir = build_;
  options.git_history = GitHistory::kFull;
  absl::StatusOr<FileSet> set = ComputeFileSet(repo_, options);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(set.status().message()),
              HasSubstr(absl::StrCat(".env (.env) in commit ", first)));
  EXPECT_THAT(std::string(set.status().message()), HasSubstr("deploy.pem (*.pem)"));
}

TEST_F(GitSnapshotTest, FullHistoryLooksIntoStashesAndReflogs) {
  Git(repo_, {"init", "-q"});
  Write(repo_ + "/a.txt");
  Git(repo_, {"add", "a.txt"});
  Git(repo_, {"commit", "-qm", "one"});
  FileSetOptions options;
  options.git_build_dir = build_;
  options.git_history = GitHistory::kFull;
  ASSERT_TRUE(ComputeFileSet(repo_, options).ok());

  // Only a stash holds it.
  Write(repo_ + "/.env", kSecret);
  Git(repo_, {"stash", "-q", "-u"});
  absl::StatusOr<FileSet> set = ComputeFileSet(repo_, options);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(std::string(set.status().message()), HasSubstr(".env (.env) in commit"));
  Git(repo_, {"stash", "drop", "-q"});
  ASSERT_TRUE(ComputeFileSet(repo_, options).ok());

  // Only the reflog holds it.
  Write(repo_ + "/id_rsa", kKey);
  Git(repo_, {"add", "id_rsa"});
  Git(repo_, {"commit", "-qm", "oops"});
  Git(repo_, {"reset", "-q", "--hard", "HEAD~1"});
  set = ComputeFileSet(repo_, options);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(std::string(set.status().message()), HasSubstr("id_rsa"));
}

TEST_F(GitSnapshotTest, FullHistoryWhenCleanHasEveryRefAndNoUnreachableObject) {
  Git(repo_, {"init", "-q"});
  Write(repo_ + "/a.txt", "one\n");
  Git(repo_, {"add", "a.txt"});
  Git(repo_, {"commit", "-qm", "one"});
  Git(repo_, {"tag", "-a", "-m", "v1", "v1"});
  Git(repo_, {"checkout", "-qb", "side"});
  Write(repo_ + "/b.txt", "side\n");
  Git(repo_, {"add", "b.txt"});
  Git(repo_, {"commit", "-qm", "side"});
  Git(repo_, {"checkout", "-q", "main"});
  Write(repo_ + "/a.txt", "two\n");
  Git(repo_, {"commit", "-qam", "two"});
  Git(repo_, {"config", "credential.helper", "store"});
  Git(repo_, {"remote", "add", "origin", "https://user:tok123@example.com/x.git"});
  Write(repo_ + "/.git/hooks/pre-commit", "#!/bin/sh\nexit 1\n");
  // A dangling blob (a file added, then unstaged) is reachable from nothing.
  Write(repo_ + "/loose.txt", kSecret);
  Git(repo_, {"hash-object", "-w", "loose.txt"});
  fs::remove(repo_ + "/loose.txt");

  FileSet set = Compute(GitHistory::kFull);
  ASSERT_TRUE(set.git.has_value());
  std::string guest = Guest(set);
  EXPECT_EQ(Git(guest, {"for-each-ref", "--format=%(refname)"}),
            Git(repo_, {"for-each-ref", "--format=%(refname)"}));
  EXPECT_EQ(Git(guest, {"log", "--all", "--format=%H %s"}),
            Git(repo_, {"log", "--all", "--format=%H %s"}));
  EXPECT_EQ(Git(guest, {"rev-parse", "--abbrev-ref", "HEAD"}), "main\n");
  EXPECT_THAT(Git(guest, {"reflog", "show", "main"}), HasSubstr("commit: two"));
  EXPECT_EQ(Git(guest, {"status", "--porcelain"}), "");
  EXPECT_EQ(Git(guest, {"fsck", "--strict", "--no-dangling"}), "");
  EXPECT_EQ(Git(guest, {"remote", "get-url", "origin"}), "https://example.com/x.git\n");
  EXPECT_FALSE(fs::exists(guest + "/.git/hooks"));
  std::string config = testing::ReadWholeFile(guest + "/.git/config");
  EXPECT_THAT(config, Not(HasSubstr("tok123")));
  EXPECT_THAT(config, Not(HasSubstr("helper =")));
  ExpectNoSecretIn(guest);

  // A new commit on the host: the next build adds it.
  Write(repo_ + "/a.txt", "three\n");
  Git(repo_, {"commit", "-qam", "three"});
  FileSet next = Compute(GitHistory::kFull);
  ASSERT_TRUE(next.git.has_value());
  EXPECT_TRUE(next.git->rebuilt);
  std::string guest2 = Guest(next);
  EXPECT_EQ(Git(guest2, {"log", "-1", "--format=%s"}), "three\n");
  EXPECT_EQ(Git(guest2, {"fsck", "--strict", "--no-dangling"}), "");
}

}  // namespace
}  // namespace abox::workspace
