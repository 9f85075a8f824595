#include "src/image/fs_util.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "gtest/gtest.h"
#include "src/image/test_util.h"

namespace abox::image {
namespace {

using ::abox::image::testing::ReadFileOrDie;
using ::abox::image::testing::TempDir;
using ::abox::image::testing::WriteFileOrDie;

TEST(FsUtilTest, LinkOrCopySharesTheInodeOnOneFileSystem) {
  TempDir tmp;
  WriteFileOrDie(tmp.path() / "src", "data");
  bool linked = false;
  ASSERT_TRUE(LinkOrCopy(tmp.path() / "src", tmp.path() / "dst", &linked).ok());
  EXPECT_TRUE(linked);
  EXPECT_EQ(ReadFileOrDie(tmp.path() / "dst"), "data");
  EXPECT_FALSE(LinkOrCopy(tmp.path() / "src", tmp.path() / "dst", &linked).ok());  // exists
}

TEST(FsUtilTest, ReplaceDirSwapsAndRemovesOld) {
  TempDir tmp;
  const auto target = tmp.path() / "image";
  const auto v1 = tmp.path() / ".tmp1";
  const auto v2 = tmp.path() / ".tmp2";
  WriteFileOrDie(v1 / "f", "one");
  WriteFileOrDie(v2 / "f", "two");
  ASSERT_TRUE(ReplaceDir(tmp.path(), v1, target).ok());
  EXPECT_EQ(ReadFileOrDie(target / "f"), "one");
  ASSERT_TRUE(ReplaceDir(tmp.path(), v2, target).ok());
  EXPECT_EQ(ReadFileOrDie(target / "f"), "two");
  EXPECT_FALSE(std::filesystem::exists(v1));
  EXPECT_FALSE(std::filesystem::exists(v2));
}

TEST(FsUtilTest, FileLockIsExclusive) {
  TempDir tmp;
  auto a = FileLock::TryAcquire(tmp.path() / "lock", "holder A");
  ASSERT_TRUE(a.ok());
  auto b = FileLock::TryAcquire(tmp.path() / "lock", "holder B");
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("holder B"), std::string::npos);
  { FileLock released = *std::move(a); }
  EXPECT_TRUE(FileLock::TryAcquire(tmp.path() / "lock", "again").ok());
}

TEST(FsUtilTest, MakeTempDirCreatesUniqueDirs) {
  TempDir tmp;
  auto a = MakeTempDir(tmp.path() / "sub", ".tmp-x-");
  auto b = MakeTempDir(tmp.path() / "sub", ".tmp-x-");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_TRUE(std::filesystem::is_directory(*a));
  EXPECT_EQ(a->filename().string().rfind(".tmp-x-", 0), 0u);
}

}  // namespace
}  // namespace abox::image
