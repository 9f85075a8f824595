#include "src/workspace/manifest_scan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/workspace/sha256.h"
#include "src/workspace/testing/scratch_tree.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class TempDir : public workspace::testing::ScratchDir {
 public:
  TempDir() : ScratchDir("abox-scan-test") {}
};

void WriteFile(const std::string& path, const std::string& content, int mode = 0644) {
  workspace::testing::WriteWholeFile(path, content, mode);
}

std::vector<std::string> Keys(const Manifest& m) {
  std::vector<std::string> keys;
  for (const auto& [k, _] : m) {
    keys.push_back(k);
  }
  return keys;
}

// Files younger than the scan's racy window are hashed but not cached: age them first.
void LetTimestampsSettle() { std::this_thread::sleep_for(std::chrono::milliseconds(150)); }

TEST(ManifestScanTest, RecordsFilesDirsAndSymlinksWithoutFollowingThem) {
  TempDir root;
  TempDir outside;
  WriteFile(outside / "secret", "secret");
  fs::create_directories(root / "src/sub");
  ::chmod((root / "src").c_str(), 0750);
  WriteFile(root / "src/main.cc", "int main() {}\n");
  WriteFile(root / "run.sh", "#!/bin/sh\n", 04755);
  fs::create_directory_symlink(outside.path(), root / "out");
  fs::create_symlink("src/main.cc", root / "link");
  ASSERT_EQ(::mkfifo((root / "fifo").c_str(), 0644), 0);
  WriteFile(root / "bad\nname", "x");
  ScanStats stats;
  absl::StatusOr<Manifest> m = ScanTree(root.path(), {.stats = &stats});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(Keys(*m), ElementsAre("link", "out", "run.sh", "src", "src/main.cc", "src/sub"));
  EXPECT_EQ(m->at("src/main.cc").sha256, Sha256Hex("int main() {}\n"));
  EXPECT_EQ(m->at("src/main.cc").size, 14u);
  EXPECT_EQ(m->at("run.sh").mode, 04755u);
  EXPECT_EQ(m->at("src").type, EntryType::kDir);
  EXPECT_EQ(m->at("src").mode, 0750u);
  EXPECT_EQ(m->at("out").type, EntryType::kSymlink);
  EXPECT_EQ(m->at("out").link_target, outside.path());
  EXPECT_EQ(m->at("out").mode, 0u);
  EXPECT_EQ(m->at("link").link_target, "src/main.cc");
  EXPECT_EQ(stats.special, 1u);
  EXPECT_EQ(stats.invalid, 1u);
  EXPECT_THAT(stats.skipped, ::testing::UnorderedElementsAre(
                                 "refused path 'bad\\x0aname': control characters (such as a "
                                 "newline) are not allowed in names",
                                 "fifo: not a regular file, directory or symlink"));
}

TEST(ManifestScanTest, ExcludedDirectoriesAreNotDescended) {
  TempDir root;
  fs::create_directories(root / "node_modules/pkg");
  WriteFile(root / "node_modules/pkg/index.js", "x");
  WriteFile(root / "keep.txt", "k");
  WriteFile(root / "drop.log", "d");
  std::vector<std::string> asked;
  absl::StatusOr<Manifest> m =
      ScanTree(root.path(), {.exclude = [&](absl::string_view rel, bool is_dir) {
                 asked.emplace_back(rel);
                 return (is_dir && rel == "node_modules") || rel == "drop.log";
               }});
  ASSERT_TRUE(m.ok());
  EXPECT_THAT(Keys(*m), ElementsAre("keep.txt"));
  EXPECT_THAT(asked, ::testing::Not(::testing::Contains("node_modules/pkg")));
}

TEST(ManifestScanTest, StatCacheReusesUnchangedFilesAndNoticesChanges) {
  TempDir root;
  TempDir state;
  for (int i = 0; i < 5; ++i) {
    WriteFile(root / ("f" + std::to_string(i)), "content " + std::to_string(i));
  }
  LetTimestampsSettle();
  StatCache cache;
  ASSERT_TRUE(ScanTree(root.path(), {.cache = &cache}).ok());
  EXPECT_EQ(cache.hashed(), 5u);
  EXPECT_EQ(cache.reused(), 0u);
  ASSERT_TRUE(cache.Save(state / "cache").ok());

  StatCache loaded;
  loaded.Load(state / "cache");
  EXPECT_EQ(loaded.size(), 5u);
  // Same size and mtime, new content: ctime still gives the rewrite away.
  struct stat before {};
  ASSERT_EQ(::stat((root / "f2").c_str(), &before), 0);
  WriteFile(root / "f2", "CONTENT 2");
  timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, (root / "f2").c_str(), times, 0), 0);
  ::unlink((root / "f4").c_str());
  absl::StatusOr<Manifest> m = ScanTree(root.path(), {.cache = &loaded});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(loaded.reused(), 3u);
  EXPECT_EQ(loaded.hashed(), 1u);
  EXPECT_EQ(m->at("f2").sha256, Sha256Hex("CONTENT 2"));
  EXPECT_EQ(m->at("f1").sha256, Sha256Hex("content 1"));
  EXPECT_EQ(loaded.size(), 3u);  // f4 dropped; f2 too new to cache yet
}

TEST(ManifestScanTest, FreshFilesAreHashedAgainNextTime) {
  TempDir root;
  WriteFile(root / "f", "x");
  StatCache cache;
  ASSERT_TRUE(ScanTree(root.path(), {.cache = &cache}).ok());
  ASSERT_TRUE(ScanTree(root.path(), {.cache = &cache}).ok());
  EXPECT_EQ(cache.hashed(), 2u);  // within the racy window: never trusted from the cache
}

TEST(ManifestScanTest, MissingOrCorruptCacheLoadsEmpty) {
  TempDir state;
  StatCache cache;
  cache.Load(state / "missing");
  EXPECT_EQ(cache.size(), 0u);
  for (std::string text : {std::string("garbage"), std::string("abox-stat-cache 1\n1 2 3\n"),
                           "abox-stat-cache 1\n1 2 3 4 5 " + Sha256Hex("") + " ../x\n",
                           "abox-stat-cache 1\n1 2 3 4 5 " + Sha256Hex("") + " ok"}) {
    WriteFile(state / "c", text);
    cache.Put("stale", {});
    cache.Load(state / "c");
    EXPECT_EQ(cache.size(), 0u) << text;
  }
  WriteFile(state / "c", "abox-stat-cache 1\n1 2 3 4 5 " + Sha256Hex("") + " name with spaces\n");
  cache.Load(state / "c");
  StatCacheEntry probe{.size = 1, .mtime_ns = 2, .ctime_ns = 3, .ino = 4, .mode = 5};
  ASSERT_NE(cache.Match("name with spaces", probe), nullptr);
  probe.ino = 9;
  EXPECT_EQ(cache.Match("name with spaces", probe), nullptr);
}

TEST(ManifestScanTest, ScanPathsAddsParentsAndSkipsWhatIsNotThere) {
  TempDir root;
  TempDir outside;
  WriteFile(outside / "secret", "s");
  fs::create_directories(root / "a/b");
  ::chmod((root / "a").c_str(), 0700);
  WriteFile(root / "a/b/c.txt", "c");
  WriteFile(root / "top", "t");
  fs::create_directory_symlink(outside.path(), root / "link");
  ScanStats stats;
  absl::StatusOr<Manifest> m =
      ScanPaths(root.path(), {"a/b/c.txt", "top", "gone", "link/secret", "../etc/passwd", "link"},
                {.stats = &stats});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(Keys(*m), ElementsAre("a", "a/b", "a/b/c.txt", "link", "top"));
  EXPECT_EQ(m->at("a").mode, 0700u);
  EXPECT_EQ(m->at("a/b/c.txt").sha256, Sha256Hex("c"));
  EXPECT_EQ(m->at("link").type, EntryType::kSymlink);
  EXPECT_EQ(stats.missing, 2u);
  EXPECT_EQ(stats.invalid, 1u);
}

TEST(ManifestScanTest, OpenDirBeneathRefusesSymlinksWithAndWithoutOpenat2) {
  TempDir root;
  TempDir outside;
  fs::create_directories(root / "a/b");
  fs::create_directory_symlink(outside.path(), root / "a/link");
  WriteFile(root / "a/file", "f");
  absl::StatusOr<base::UniqueFd> root_fd = OpenRoot(root.path());
  ASSERT_TRUE(root_fd.ok());
  for (bool openat2 : {true, false}) {
    EXPECT_TRUE(OpenDirBeneath(root_fd->get(), "a/b", openat2).ok());
    EXPECT_TRUE(OpenDirBeneath(root_fd->get(), "", openat2).ok());
    EXPECT_EQ(OpenDirBeneath(root_fd->get(), "a/link", openat2).status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(OpenDirBeneath(root_fd->get(), "a/file", openat2).status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(OpenDirBeneath(root_fd->get(), "a/nope", openat2).status().code(),
              absl::StatusCode::kNotFound);
    EXPECT_EQ(OpenDirBeneath(root_fd->get(), "a/../..", openat2).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace abox::workspace
