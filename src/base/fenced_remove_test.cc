#include "src/base/fenced_remove.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::base {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

void WriteText(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// Each test runs twice: resolving with openat2 and with the openat(O_NOFOLLOW) walk.
class FencedRemoveTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "/fenced_remove_XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = fs::path(templ).lexically_normal();
    root_ = dir_ / "home";
    outside_ = dir_ / "outside";
    fs::create_directories(root_);
    fs::create_directories(outside_ / "sub");
    WriteText(outside_ / "precious", "keep me");
    WriteText(outside_ / "sub" / "also-precious", "keep me too");
    options_.use_openat2 = GetParam();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // The outside files every test expects to survive.
  void ExpectOutsideIntact() {
    EXPECT_TRUE(fs::exists(outside_ / "precious"));
    EXPECT_TRUE(fs::exists(outside_ / "sub" / "also-precious"));
  }

  fs::path dir_;
  fs::path root_;
  fs::path outside_;
  FenceOptions options_;
};

INSTANTIATE_TEST_SUITE_P(Resolvers, FencedRemoveTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Openat2" : "OpenatWalk"; });

TEST_P(FencedRemoveTest, RemovesAFile) {
  WriteText(root_ / "f", "x");
  ASSERT_TRUE(RemoveUnder(root_, root_ / "f", options_).ok());
  EXPECT_FALSE(fs::exists(root_ / "f"));
  EXPECT_TRUE(fs::exists(root_));
}

TEST_P(FencedRemoveTest, RemovesANestedTree) {
  fs::create_directories(root_ / "a" / "b" / "c");
  fs::create_directories(root_ / "a" / "empty");
  WriteText(root_ / "a" / "one", "1");
  WriteText(root_ / "a" / "b" / "c" / "two", "2");
  fs::permissions(root_ / "a" / "b" / "c" / "two", fs::perms::owner_read);  // read-only goes too
  WriteText(root_ / "keep", "k");
  ASSERT_TRUE(RemoveUnder(root_, root_ / "a", options_).ok());
  EXPECT_FALSE(fs::exists(root_ / "a"));
  EXPECT_TRUE(fs::exists(root_ / "keep"));
}

TEST_P(FencedRemoveTest, RemovesSymlinksInsideTheTreeButNotWhatTheyPointTo) {
  fs::create_directories(root_ / "tree" / "d");
  fs::create_symlink(outside_, root_ / "tree" / "to-outside-dir");
  fs::create_symlink(outside_ / "precious", root_ / "tree" / "d" / "to-outside-file");
  fs::create_symlink("../../../outside", root_ / "tree" / "d" / "relative-escape");
  fs::create_symlink(dir_ / "nowhere", root_ / "tree" / "dangling");
  ASSERT_TRUE(RemoveUnder(root_, root_ / "tree", options_).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ / "tree")));
  ExpectOutsideIntact();
}

TEST_P(FencedRemoveTest, RemovesASymlinkTargetAsTheLinkItself) {
  fs::create_symlink(outside_, root_ / "link");
  ASSERT_TRUE(RemoveUnder(root_, root_ / "link", options_).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ / "link")));
  ExpectOutsideIntact();
}

TEST_P(FencedRemoveTest, RefusesATargetOutsideTheRoot) {
  absl::Status s = RemoveUnder(root_, outside_, options_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr(outside_.string()));
  EXPECT_THAT(std::string(s.message()), HasSubstr("not inside"));
  // A sibling whose name merely starts with the root's is outside too.
  fs::create_directories(dir_ / "home2");
  WriteText(dir_ / "home2" / "f", "x");
  EXPECT_EQ(RemoveUnder(root_, dir_ / "home2" / "f", options_).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::exists(dir_ / "home2" / "f"));
  ExpectOutsideIntact();
}

TEST_P(FencedRemoveTest, RefusesDotDotAndOtherUnnormalPaths) {
  for (const fs::path& target :
       {root_ / "a" / ".." / ".." / "outside", root_ / ".." / "outside" / "precious",
        root_ / "." / "f", fs::path(root_.string() + "//f")}) {
    absl::Status s = RemoveUnder(root_, target, options_);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << target;
    EXPECT_THAT(std::string(s.message()), HasSubstr("not normal")) << target;
  }
  ExpectOutsideIntact();
}

TEST_P(FencedRemoveTest, RefusesTheRootItself) {
  WriteText(root_ / "f", "x");
  EXPECT_EQ(RemoveUnder(root_, root_, options_).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RemoveUnder(root_, fs::path(root_.string() + "/"), options_).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RemoveUnder(fs::path(root_.string() + "/"), root_, options_).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::exists(root_ / "f"));
}

TEST_P(FencedRemoveTest, RefusesRelativePaths) {
  EXPECT_EQ(RemoveUnder("home", "home/f", options_).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RemoveUnder(root_, "f", options_).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(FencedRemoveTest, RefusesASymlinkedParentDirectory) {
  fs::create_symlink(outside_, root_ / "link");
  absl::Status s = RemoveUnder(root_, root_ / "link" / "precious", options_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr((root_ / "link").string() + " is a symbolic link"));
  EXPECT_EQ(RemoveFileUnder(root_, root_ / "link" / "precious", options_).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RemoveUnder(root_, root_ / "link" / "sub", options_).code(),
            absl::StatusCode::kFailedPrecondition);
  // Deeper on the way, and relative.
  fs::create_directories(root_ / "a");
  fs::create_symlink("../../outside", root_ / "a" / "rel");
  s = RemoveUnder(root_, root_ / "a" / "rel" / "sub" / "also-precious", options_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr((root_ / "a" / "rel").string()));
  ExpectOutsideIntact();
}

TEST_P(FencedRemoveTest, AcceptsARootThatIsItselfASymlink) {
  // $ABOX_HOME may be a link the user made; only what is below it is fenced.
  fs::create_symlink(root_, dir_ / "home-link");
  fs::create_directories(root_ / "d");
  ASSERT_TRUE(RemoveUnder(dir_ / "home-link", dir_ / "home-link" / "d", options_).ok());
  EXPECT_FALSE(fs::exists(root_ / "d"));
}

TEST_P(FencedRemoveTest, RemovesADeepTreeAndRefusesOneDeeperThanTheLimit) {
  fs::path deep = root_ / "deep";
  for (int i = 0; i < 100; ++i) {
    deep /= "d";
  }
  fs::create_directories(deep);
  WriteText(deep / "leaf", "x");
  ASSERT_TRUE(RemoveUnder(root_, root_ / "deep", options_).ok());
  EXPECT_FALSE(fs::exists(root_ / "deep"));

  fs::create_directories(root_ / "t" / "1" / "2" / "3" / "4");
  FenceOptions shallow = options_;
  shallow.max_depth = 4;  // t/1/2/3/4 nests five
  absl::Status s = RemoveUnder(root_, root_ / "t", shallow);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("more than 4 directories"));
  EXPECT_TRUE(fs::exists(root_ / "t" / "1" / "2" / "3" / "4"));
  shallow.max_depth = 5;
  EXPECT_TRUE(RemoveUnder(root_, root_ / "t", shallow).ok());
  EXPECT_FALSE(fs::exists(root_ / "t"));
}

TEST_P(FencedRemoveTest, TreatsAMissingTargetAsDone) {
  EXPECT_TRUE(RemoveUnder(root_, root_ / "never-existed", options_).ok());
  EXPECT_TRUE(RemoveUnder(root_, root_ / "no" / "such" / "dir", options_).ok());
  EXPECT_TRUE(RemoveFileUnder(root_, root_ / "no" / "file", options_).ok());
  EXPECT_TRUE(RemoveEmptyDirUnder(root_, root_ / "no-dir", options_).ok());
  EXPECT_TRUE(RemoveUnder(dir_ / "no-root", dir_ / "no-root" / "x", options_).ok());
  // Twice in a row: the second call has nothing left to do.
  WriteText(root_ / "f", "x");
  EXPECT_TRUE(RemoveUnder(root_, root_ / "f", options_).ok());
  EXPECT_TRUE(RemoveUnder(root_, root_ / "f", options_).ok());
}

TEST_P(FencedRemoveTest, ReportsAFileOnTheWay) {
  WriteText(root_ / "file", "x");
  absl::Status s = RemoveUnder(root_, root_ / "file" / "child", options_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is not a directory"));
}

TEST_P(FencedRemoveTest, RemoveFileUnderRemovesFilesAndLinksButNotDirectories) {
  WriteText(root_ / "f", "x");
  fs::create_directories(root_ / "d");
  fs::create_symlink(outside_, root_ / "link-to-dir");
  EXPECT_TRUE(RemoveFileUnder(root_, root_ / "f", options_).ok());
  EXPECT_FALSE(fs::exists(root_ / "f"));
  EXPECT_TRUE(RemoveFileUnder(root_, root_ / "link-to-dir", options_).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ / "link-to-dir")));
  absl::Status s = RemoveFileUnder(root_, root_ / "d", options_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is a directory"));
  EXPECT_TRUE(fs::is_directory(root_ / "d"));
  ExpectOutsideIntact();
}

TEST_P(FencedRemoveTest, RemoveEmptyDirUnderRemovesOnlyEmptyDirectories) {
  fs::create_directories(root_ / "empty");
  fs::create_directories(root_ / "full");
  WriteText(root_ / "full" / "f", "x");
  WriteText(root_ / "file", "x");
  EXPECT_TRUE(RemoveEmptyDirUnder(root_, root_ / "empty", options_).ok());
  EXPECT_FALSE(fs::exists(root_ / "empty"));
  absl::Status s = RemoveEmptyDirUnder(root_, root_ / "full", options_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is not empty"));
  EXPECT_TRUE(fs::exists(root_ / "full" / "f"));
  s = RemoveEmptyDirUnder(root_, root_ / "file", options_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not one"));
  EXPECT_TRUE(fs::exists(root_ / "file"));
}

// Mount points inside a tree (a tmpfs, and a bind mount that shares the device) are refused and
// what is mounted survives. Runs in a child with its own user + mount namespace; skipped where
// unprivileged namespaces are off.
TEST_P(FencedRemoveTest, RefusesToDescendIntoMountPoints) {
  fs::create_directories(root_ / "tree" / "tmpfs");
  fs::create_directories(root_ / "tree" / "bind");
  fs::create_directories(root_ / "bind-source");
  WriteText(root_ / "bind-source" / "mounted", "x");
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Exit codes: 0 pass, 2 skip (no namespaces), others name the failed check.
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      ::_exit(2);
    }
    auto write_file = [](const char* path, const std::string& text) {
      int fd = ::open(path, O_WRONLY | O_CLOEXEC);
      bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == ssize_t(text.size());
      ::close(fd);
      return ok;
    };
    if (!write_file("/proc/self/setgroups", "deny") ||
        !write_file("/proc/self/uid_map", absl::StrCat("0 ", uid, " 1")) ||
        !write_file("/proc/self/gid_map", absl::StrCat("0 ", gid, " 1")) ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("none", (root_ / "tree" / "tmpfs").c_str(), "tmpfs", 0, nullptr) != 0 ||
        ::mount((root_ / "bind-source").c_str(), (root_ / "tree" / "bind").c_str(), nullptr,
                MS_BIND, nullptr) != 0) {
      ::_exit(2);
    }
    std::ofstream(root_ / "tree" / "tmpfs" / "mounted") << "x";
    FenceOptions options;
    options.use_openat2 = GetParam();
    absl::Status s = RemoveUnder(root_, root_ / "tree", options);
    if (s.code() != absl::StatusCode::kFailedPrecondition ||
        s.message().find("is a mount point") == absl::string_view::npos) {
      ::_exit(3);
    }
    if (!fs::exists(root_ / "tree" / "tmpfs" / "mounted") ||
        !fs::exists(root_ / "bind-source" / "mounted")) {
      ::_exit(4);
    }
    // The target itself being a mount point is refused as well.
    if (RemoveUnder(root_, root_ / "tree" / "tmpfs", options).code() !=
        absl::StatusCode::kFailedPrecondition) {
      ::_exit(5);
    }
    ::umount2((root_ / "tree" / "tmpfs").c_str(), MNT_DETACH);
    if (RemoveUnder(root_, root_ / "tree" / "bind", options).code() !=
        absl::StatusCode::kFailedPrecondition) {
      ::_exit(6);
    }
    ::_exit(fs::exists(root_ / "bind-source" / "mounted") ? 0 : 7);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 2) {
    GTEST_SKIP() << "no unprivileged user + mount namespaces here";
  }
  EXPECT_EQ(WEXITSTATUS(status), 0) << "failed check number " << WEXITSTATUS(status);
  EXPECT_TRUE(fs::exists(root_ / "bind-source" / "mounted"));
}

}  // namespace
}  // namespace abox::base
