#include "src/workspace/host_tree.h"

#include <sys/stat.h>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "src/workspace/apply_test_util.h"
#include "src/workspace/object_store.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;

using testing::Get;
using testing::Put;
using testing::TempDir;

// Every test runs with openat2 and with the per-component walk.
class HostTreeTest : public ::testing::TestWithParam<bool> {
 protected:
  HostTreeTest() {
    fs::create_directories(dir_ / "root");
    fs::create_directories(dir_ / "outside");
    auto tree = HostTree::Open(dir_ / "root", HostTreeOptions{.use_openat2 = GetParam()});
    EXPECT_TRUE(tree.ok()) << tree.status();
    tree_.emplace(std::move(*tree));
  }
  std::string Root(const std::string& rel) { return dir_ / ("root/" + rel); }

  TempDir dir_;
  std::optional<HostTree> tree_;
};

INSTANTIATE_TEST_SUITE_P(Resolve, HostTreeTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "openat2" : "walk"; });

TEST_P(HostTreeTest, ReadReportsEachKind) {
  Put(Root("a/f"), "data", 0750);
  ASSERT_EQ(::symlink("f", Root("a/l").c_str()), 0);
  ASSERT_EQ(::mkfifo(Root("fifo").c_str(), 0600), 0);

  auto f = tree_->Read("a/f");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->kind, HostState::Kind::kFile);
  EXPECT_EQ(f->mode, 0750u);
  EXPECT_EQ(f->size, 4u);
  EXPECT_EQ(f->sha256, Sha256Hex("data"));
  auto l = tree_->Read("a/l");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->kind, HostState::Kind::kSymlink);
  EXPECT_EQ(l->link_target, "f");
  EXPECT_EQ(tree_->Read("a")->kind, HostState::Kind::kDir);
  auto fifo = tree_->Read("fifo");
  ASSERT_TRUE(fifo.ok());
  EXPECT_EQ(fifo->kind, HostState::Kind::kOther);
  EXPECT_EQ(fifo->other_type, "fifo");
  EXPECT_EQ(tree_->Read("nope")->kind, HostState::Kind::kAbsent);
  EXPECT_EQ(tree_->Read("nope/deeper")->kind, HostState::Kind::kAbsent);
  // Beneath a file: absent, naming the file in the way.
  auto blocked = tree_->Read("a/f/x");
  ASSERT_TRUE(blocked.ok());
  EXPECT_EQ(blocked->kind, HostState::Kind::kAbsent);
  EXPECT_EQ(blocked->blocked_by, "a/f");
}

TEST_P(HostTreeTest, RefusesHostileNamesForEveryOperation) {
  ASSERT_EQ(::symlink((dir_ / "outside").c_str(), Root("link").c_str()), 0);
  fs::create_directories(Root(".git"));
  Put(Root(".git/config"), "[core]\n");
  fs::create_directories(Root("tools/.git"));
  Put(Root("tools/.git/config"), "[core]\n");
  const char* hostile[] = {"/etc/passwd", "../x", "a/../../x", "link/passwd", "a\nb", ".git/config",
                           ".git", "", "a//b", "./a",
                           // A nested repository's state, a gitlink file, any case.
                           "tools/.git/config", "tools/.git", "sub/.git",
                           "a/b/.git/hooks/post-checkout", ".GIT/config", "tools/.Git/config"};
  for (const char* rel : hostile) {
    SCOPED_TRACE(testing::EscapeForTrace(rel));
    EXPECT_FALSE(tree_->Read(rel).ok());
    EXPECT_FALSE(tree_->WriteFile(rel, "pwned", 0644).ok());
    EXPECT_FALSE(tree_->WriteSymlink(rel, "/etc").ok());
    EXPECT_FALSE(tree_->MakeDir(rel).ok());
    EXPECT_FALSE(tree_->Remove(rel).ok());
    EXPECT_FALSE(tree_->RemoveEmptyDir(rel).ok());
    EXPECT_FALSE(tree_->OpenFile(rel).ok());
  }
  EXPECT_TRUE(fs::is_empty(dir_ / "outside"));
  EXPECT_EQ(Get(Root(".git/config")), "[core]\n");
  EXPECT_EQ(Get(Root("tools/.git/config")), "[core]\n");
  EXPECT_FALSE(fs::exists(Root("sub")));
  EXPECT_FALSE(fs::exists(dir_ / "x"));
  absl::Status nested = tree_->WriteFile("tools/.git/config", "[core]\nfsmonitor = evil\n", 0644);
  EXPECT_EQ(nested.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(nested.message(), "at any depth")) << nested;
}

TEST_P(HostTreeTest, SymlinksListsEveryLinkWithoutFollowingAny) {
  Put(Root("a/f"), "data");
  ASSERT_EQ(::symlink("f", Root("a/l").c_str()), 0);
  ASSERT_EQ(::symlink(".", Root("dot").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ / "outside").c_str(), Root("out").c_str()), 0);
  fs::create_directories(Root("a/b/c"));
  ASSERT_EQ(::symlink("nowhere/at/all", Root("a/b/c/dangling").c_str()), 0);
  // Not entered: the outside tree through `out`, and any .git.
  ASSERT_EQ(::symlink("x", (dir_ / "outside/inner").c_str()), 0);
  fs::create_directories(Root(".git"));
  ASSERT_EQ(::symlink("y", Root(".git/l").c_str()), 0);
  fs::create_directories(Root("vendor/.GIT"));
  ASSERT_EQ(::symlink("z", Root("vendor/.GIT/l").c_str()), 0);
  // A name no guest path may have is still listed: links are judged by what is on disk.
  fs::create_directories(Root("we\nird"));
  ASSERT_EQ(::symlink("../..", Root("we\nird/up").c_str()), 0);

  auto links = tree_->Symlinks();
  ASSERT_TRUE(links.ok()) << links.status();
  HostSymlinks want = {{"a/l", "f"},
                       {"dot", "."},
                       {"out", (dir_ / "outside")},
                       {"a/b/c/dangling", "nowhere/at/all"},
                       {"we\nird/up", "../.."}};
  EXPECT_EQ(*links, want);
}

TEST_P(HostTreeTest, SymlinksRefusesATreeTooDeepToCheck) {
  std::string deep;
  for (int i = 0; i < HostTree::kMaxSymlinkWalkDepth + 2; ++i) {
    deep += "d/";
  }
  fs::create_directories(Root(deep));
  auto links = tree_->Symlinks();
  EXPECT_EQ(links.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(links.status().message(), "deeper than")) << links.status();
}

TEST(HostModeTest, SandboxModesBecome0644Or0755) {
  EXPECT_EQ(HostModeForSandboxFile(0644), 0644u);
  EXPECT_EQ(HostModeForSandboxFile(0666), 0644u);
  EXPECT_EQ(HostModeForSandboxFile(0600), 0644u);
  EXPECT_EQ(HostModeForSandboxFile(0777), 0755u);
  EXPECT_EQ(HostModeForSandboxFile(0700), 0755u);
  EXPECT_EQ(HostModeForSandboxFile(0601), 0755u);
  EXPECT_EQ(HostModeForSandboxFile(04777), 0755u);
  EXPECT_EQ(HostModeForSandboxFile(02666), 0644u);
  EXPECT_EQ(HostModeForSandboxFile(01777), 0755u);
}

TEST_P(HostTreeTest, SymlinkOnTheWayIsRefusedWithClearError) {
  ASSERT_EQ(::symlink((dir_ / "outside").c_str(), Root("link").c_str()), 0);
  Put(dir_ / "outside/passwd", "secret");
  absl::Status s = tree_->WriteFile("link/passwd", "pwned", 0644);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.message(), "'link' is a symbolic link")) << s;
  EXPECT_FALSE(tree_->Read("link/passwd").ok());
  EXPECT_FALSE(tree_->Remove("link/passwd").ok());
  EXPECT_EQ(Get(dir_ / "outside/passwd"), "secret");
  // Deeper: a/link/x.
  fs::create_directories(Root("a"));
  ASSERT_EQ(::symlink((dir_ / "outside").c_str(), Root("a/link").c_str()), 0);
  EXPECT_FALSE(tree_->WriteFile("a/link/new", "x", 0644).ok());
  EXPECT_FALSE(fs::exists(dir_ / "outside/new"));
}

TEST_P(HostTreeTest, WriteFileIsAtomicAndCreatesParents) {
  std::vector<std::string> created;
  ASSERT_TRUE(tree_->WriteFile("new/deep/f.txt", "content", 0755, &created).ok());
  EXPECT_EQ(Get(Root("new/deep/f.txt")), "content");
  EXPECT_EQ(created, (std::vector<std::string>{"new", "new/deep"}));
  struct stat st {};
  ASSERT_EQ(::stat(Root("new/deep/f.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  // Replace: no temp file left behind, and existing parents are not recorded.
  created.clear();
  ASSERT_TRUE(tree_->WriteFile("new/deep/f.txt", "v2", 0644, &created).ok());
  EXPECT_TRUE(created.empty());
  EXPECT_EQ(testing::Snapshot(Root("new/deep")),
            (std::map<std::string, std::string>{{"f.txt", "f 420 v2"}}));
}

TEST_P(HostTreeTest, WriteFileDropsSetuidBits) {
  ASSERT_TRUE(tree_->WriteFile("s", "x", 04755).ok());
  struct stat st {};
  ASSERT_EQ(::stat(Root("s").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

TEST_P(HostTreeTest, WriteFileReplacesASymlinkNotItsTarget) {
  Put(dir_ / "outside/t", "keep");
  ASSERT_EQ(::symlink((dir_ / "outside/t").c_str(), Root("l").c_str()), 0);
  ASSERT_TRUE(tree_->WriteFile("l", "new", 0644).ok());
  EXPECT_EQ(Get(dir_ / "outside/t"), "keep");
  EXPECT_EQ(tree_->Read("l")->kind, HostState::Kind::kFile);
}

TEST_P(HostTreeTest, RefusesToReplaceDirectoryOrSpecialFile) {
  fs::create_directories(Root("d"));
  ASSERT_EQ(::mkfifo(Root("fifo").c_str(), 0600), 0);
  EXPECT_EQ(tree_->WriteFile("d", "x", 0644).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(tree_->WriteFile("fifo", "x", 0644).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(tree_->WriteSymlink("d", "x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(tree_->Remove("fifo").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(tree_->Remove("d").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(tree_->OpenFile("fifo").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::is_directory(Root("d")));
  EXPECT_TRUE(fs::is_fifo(Root("fifo")));
}

TEST_P(HostTreeTest, RefusesWriteWhoseParentIsAFile) {
  Put(Root("f"), "file");
  absl::Status s = tree_->WriteFile("f/child", "x", 0644);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.message(), "not a directory")) << s;
  EXPECT_EQ(Get(Root("f")), "file");
}

TEST_P(HostTreeTest, WriteSymlinkStoresTargetVerbatim) {
  ASSERT_TRUE(tree_->WriteSymlink("l", "../../anything").ok());
  EXPECT_EQ(fs::read_symlink(Root("l")).string(), "../../anything");
  ASSERT_TRUE(tree_->WriteSymlink("l", "other").ok());
  EXPECT_EQ(fs::read_symlink(Root("l")).string(), "other");
  EXPECT_FALSE(tree_->WriteSymlink("l2", "").ok());
}

TEST_P(HostTreeTest, RemoveAndRemoveEmptyDir) {
  Put(dir_ / "outside/t", "keep");
  ASSERT_EQ(::symlink((dir_ / "outside/t").c_str(), Root("d/l").c_str()), -1);  // no d yet
  fs::create_directories(Root("d"));
  ASSERT_EQ(::symlink((dir_ / "outside/t").c_str(), Root("d/l").c_str()), 0);
  Put(Root("d/f"), "x");
  EXPECT_EQ(tree_->RemoveEmptyDir("d").code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(tree_->Remove("d/l").ok());
  EXPECT_EQ(Get(dir_ / "outside/t"), "keep");
  ASSERT_TRUE(tree_->Remove("d/f").ok());
  ASSERT_TRUE(tree_->Remove("d/f").ok());                                 // absent: fine
  EXPECT_EQ(tree_->RemoveEmptyDir("d/f").code(), absl::StatusCode::kOk);  // absent
  Put(Root("g"), "x");
  EXPECT_EQ(tree_->RemoveEmptyDir("g").code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(tree_->RemoveEmptyDir("d").ok());
  EXPECT_FALSE(fs::exists(Root("d")));
}

TEST_P(HostTreeTest, MakeDirCreatesAndAcceptsExisting) {
  std::vector<std::string> created;
  ASSERT_TRUE(tree_->MakeDir("x/y", &created).ok());
  EXPECT_EQ(created, (std::vector<std::string>{"x", "x/y"}));
  ASSERT_TRUE(tree_->MakeDir("x/y").ok());
  Put(Root("f"), "x");
  EXPECT_EQ(tree_->MakeDir("f").code(), absl::StatusCode::kFailedPrecondition);
}

TEST_P(HostTreeTest, WriteObjectVerifiesContent) {
  auto store = ObjectStore::Open(dir_ / "store");
  ASSERT_TRUE(store.ok());
  std::string sha = *store->PutData("object content");
  ASSERT_TRUE(tree_->WriteObject("o", *store, sha, 0600).ok());
  EXPECT_EQ(Get(Root("o")), "object content");
  // Corrupt the object: the host file must stay as it was.
  std::string path = store->PathOf(sha);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  Put(path, "tampered");
  absl::Status s = tree_->WriteObject("o", *store, sha, 0600);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(Get(Root("o")), "object content");
  EXPECT_EQ(testing::Snapshot(Root("")).size(), 1u);  // no temp file left
}

TEST_P(HostTreeTest, RemoveStaleTempsRemovesOnlyAboxTemps) {
  Put(Root("d/.abox-tmp-0123"), "half");
  Put(Root("d/keep"), "k");
  ASSERT_TRUE(tree_->RemoveStaleTemps("d").ok());
  EXPECT_EQ(testing::Snapshot(Root("d")),
            (std::map<std::string, std::string>{{"keep", "f 420 k"}}));
  ASSERT_TRUE(tree_->RemoveStaleTemps("missing").ok());
}

TEST(HostTreeOpenTest, RejectsRelativeOrMissingRoot) {
  EXPECT_EQ(HostTree::Open("rel").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(HostTree::Open("/nonexistent/abox/root").ok());
}

}  // namespace
}  // namespace abox::workspace
