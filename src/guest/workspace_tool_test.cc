#include "src/guest/workspace_tool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/workspace/archive.h"
#include "src/workspace/manifest.h"
#include "src/workspace/manifest_scan.h"
#include "src/workspace/sha256.h"
#include "src/workspace/testing/scratch_tree.h"

namespace abox::guest {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using workspace::Entry;
using workspace::EntryType;

class TempDir : public workspace::testing::ScratchDir {
 public:
  TempDir() : ScratchDir("abox-ws-tool-test") {}
};

void WriteFile(const std::string& path, const std::string& content, int mode = 0644) {
  workspace::testing::WriteWholeFile(path, content, mode);
}

std::string ReadFile(const std::string& path) { return workspace::testing::ReadWholeFile(path); }

Entry File(uint64_t size, uint32_t mode = 0644) {
  Entry e;
  e.type = EntryType::kFile;
  e.mode = mode;
  e.size = size;
  return e;
}

Entry Dir(uint32_t mode = 0755) {
  Entry e;
  e.type = EntryType::kDir;
  e.mode = mode;
  return e;
}

Entry Link(const std::string& target) {
  Entry e;
  e.type = EntryType::kSymlink;
  e.mode = 0;
  e.link_target = target;
  return e;
}

// Builds a sync archive in memory.
class ArchiveBuilder {
 public:
  ArchiveBuilder() {
    auto w = workspace::SyncArchiveWriter::Create([this](absl::string_view b) {
      bytes_.append(b.data(), b.size());
      return absl::OkStatus();
    });
    EXPECT_TRUE(w.ok());
    writer_ = *std::move(w);
  }
  ArchiveBuilder& Delete(const std::vector<std::string>& paths) {
    EXPECT_TRUE(writer_->AddDeletions(paths).ok());
    return *this;
  }
  ArchiveBuilder& Add(const std::string& rel, const Entry& e, const std::string& content = "") {
    Entry with_size = e;
    if (e.type == EntryType::kFile) {
      with_size.size = content.size();
    }
    EXPECT_TRUE(writer_->AddData(rel, with_size, content).ok()) << rel;
    return *this;
  }
  std::string Finish() {
    EXPECT_TRUE(writer_->Finish().ok());
    return bytes_;
  }

 private:
  std::string bytes_;
  std::unique_ptr<workspace::SyncArchiveWriter> writer_;
};

workspace::ArchiveSource Source(const std::string& bytes) {
  auto pos = std::make_shared<size_t>(0);
  return [&bytes, pos](char* buf, size_t len) -> absl::StatusOr<size_t> {
    size_t n = std::min(len, bytes.size() - *pos);
    std::memcpy(buf, bytes.data() + *pos, n);
    *pos += n;
    return n;
  };
}

absl::StatusOr<UnpackStats> Unpack(const std::string& root, const std::string& bytes,
                                   bool use_openat2 = true) {
  UnpackOptions options;
  options.uid = ::getuid();
  options.gid = ::getgid();
  options.use_openat2 = use_openat2;
  return UnpackArchive(root, Source(bytes), options);
}

struct ToolRun {
  int rc;
  std::string out;
  std::string err;
};

// Runs the tool with stdin from `input`, capturing stdout and stderr through temp files.
ToolRun RunTool(std::vector<std::string> args, const std::string& input) {
  TempDir io;
  WriteFile(io / "in", input);
  base::UniqueFd in(::open((io / "in").c_str(), O_RDONLY | O_CLOEXEC));
  base::UniqueFd out(::open((io / "out").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  base::UniqueFd err(::open((io / "err").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  std::vector<char*> argv;
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  int rc =
      RunWorkspaceTool(static_cast<int>(argv.size()), argv.data(), in.get(), out.get(), err.get());
  return {rc, ReadFile(io / "out"), ReadFile(io / "err")};
}

TEST(WorkspaceToolTest, UnpackWritesFilesDirsAndSymlinks) {
  TempDir root;
  std::string binary(300'000, '\0');
  for (size_t i = 0; i < binary.size(); ++i) {
    binary[i] = static_cast<char>(i * 7);
  }
  std::string bytes = ArchiveBuilder()
                          .Add("src", Dir(0750))
                          .Add("src/main.cc", File(0), "int main() {}\n")
                          .Add("deep/new/dirs/file", File(0), "x")
                          .Add("bin/run.sh", File(0, 0755), "#!/bin/sh\n")
                          .Add("suid", File(0, 04755), "s")
                          .Add("blob", File(0), binary)
                          .Add("empty", File(0), "")
                          .Add("link", Link("src/main.cc"))
                          .Finish();
  absl::StatusOr<UnpackStats> stats = Unpack(root.path(), bytes);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(UnpackStatsJson(*stats),
            absl::StrCat("{\"files\":6,\"dirs\":1,\"symlinks\":1,\"deleted\":0,\"bytes\":",
                         14 + 1 + 10 + 1 + binary.size(), "}"));
  EXPECT_EQ(ReadFile(root / "src/main.cc"), "int main() {}\n");
  EXPECT_EQ(ReadFile(root / "deep/new/dirs/file"), "x");
  EXPECT_EQ(ReadFile(root / "blob"), binary);
  EXPECT_EQ(fs::file_size(root / "empty"), 0u);
  EXPECT_EQ(fs::read_symlink(root / "link"), "src/main.cc");
  struct stat st {};
  ASSERT_EQ(::stat((root / "bin/run.sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(::stat((root / "src").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  ASSERT_EQ(::stat((root / "suid").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);  // set-id bits dropped
  // No temp files left behind.
  for (const auto& e : fs::recursive_directory_iterator(root.path())) {
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(HasSubstr(".abox-unpack")));
  }
}

TEST(WorkspaceToolTest, UnpackReplacesDirsByFilesAndFilesByDirs) {
  for (bool openat2 : {true, false}) {
    TempDir root;
    fs::create_directories(root / "was_dir/sub");
    WriteFile(root / "was_dir/sub/f", "old");
    WriteFile(root / "was_file", "old");
    WriteFile(root / "parent_file", "old");
    std::string bytes = ArchiveBuilder()
                            .Add("was_dir", File(0), "now a file")
                            .Add("was_file", Dir())
                            .Add("was_file/inside", File(0), "in")
                            .Add("parent_file/child", File(0), "c")
                            .Finish();
    absl::StatusOr<UnpackStats> stats = Unpack(root.path(), bytes, openat2);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(ReadFile(root / "was_dir"), "now a file");
    EXPECT_TRUE(fs::is_directory(root / "was_file"));
    EXPECT_EQ(ReadFile(root / "was_file/inside"), "in");
    EXPECT_EQ(ReadFile(root / "parent_file/child"), "c");
  }
}

TEST(WorkspaceToolTest, UnpackDeletesFilesSymlinksAndWholeDirsFirst) {
  TempDir root;
  TempDir outside;
  WriteFile(outside / "keep", "keep");
  fs::create_directories(root / "tree/a/b");
  WriteFile(root / "tree/a/b/f", "1");
  fs::create_directory_symlink(outside.path(), root / "tree/a/out");  // removed as a link
  WriteFile(root / "file", "1");
  fs::create_symlink("file", root / "sym");
  fs::create_directory_symlink(outside.path(), root / "via");
  std::string bytes = ArchiveBuilder()
                          .Delete({"tree", "file", "sym", "missing", "via/keep", "file"})
                          .Add("tree", Dir())  // re-created after the delete
                          .Finish();
  absl::StatusOr<UnpackStats> stats = Unpack(root.path(), bytes);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->deleted, 3u);
  EXPECT_TRUE(fs::is_empty(root / "tree"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(root / "file")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(root / "sym")));
  EXPECT_EQ(ReadFile(outside / "keep"), "keep");  // "via/keep" is behind a symlink: untouched
}

TEST(WorkspaceToolTest, UnpackNeverWritesThroughAGuestSymlink) {
  for (bool openat2 : {true, false}) {
    TempDir root;
    TempDir outside;  // stands in for /etc
    WriteFile(outside / "passwd", "root:x:0:0");
    fs::create_directory_symlink(outside.path(), root / "link");
    fs::create_symlink(outside / "passwd", root / "file_link");
    std::string bytes = ArchiveBuilder()
                            .Add("link/passwd", File(0), "pwned")
                            .Add("file_link", File(0), "mine")
                            .Finish();
    absl::StatusOr<UnpackStats> stats = Unpack(root.path(), bytes, openat2);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(ReadFile(outside / "passwd"), "root:x:0:0");
    EXPECT_EQ(fs::directory_iterator(outside.path())->path().filename(), "passwd");
    // The symlinks were replaced by what the host has.
    EXPECT_TRUE(fs::is_directory(fs::symlink_status(root / "link")));
    EXPECT_EQ(ReadFile(root / "link/passwd"), "pwned");
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(root / "file_link")));
    EXPECT_EQ(ReadFile(root / "file_link"), "mine");
  }
}

TEST(WorkspaceToolTest, UnpackRefusesAHostileArchiveAndLeavesNoTempFiles) {
  TempDir root;
  std::string good = ArchiveBuilder().Add("a", File(0), std::string(100'000, 'a')).Finish();
  absl::StatusOr<UnpackStats> stats = Unpack(root.path(), good.substr(0, good.size() - 40));
  EXPECT_FALSE(stats.ok());
  EXPECT_TRUE(fs::is_empty(root.path()));
}

TEST(WorkspaceToolTest, PackWritesExistingPathsWithoutFollowingSymlinks) {
  TempDir root;
  TempDir outside;
  WriteFile(outside / "secret", "secret");
  fs::create_directories(root / "dir");
  WriteFile(root / "dir/a", "aaa", 0755);
  fs::create_symlink(outside / "secret", root / "out_link");
  fs::create_directory_symlink(outside.path(), root / "out_dir");
  ASSERT_EQ(::mkfifo((root / "fifo").c_str(), 0644), 0);
  std::string list = std::string("dir/a\0out_link\0dir\0missing\0out_dir/secret\0fifo\0", 47);
  ToolRun run = RunTool({"ws", "pack", root.path()}, list);
  ASSERT_EQ(run.rc, 0) << run.err;

  class Collect final : public workspace::SyncArchiveHandler {
   public:
    absl::Status OnDeletions(std::vector<std::string>) override {
      return absl::InternalError("pack wrote deletions");
    }
    absl::Status OnEntry(const std::string& rel, const Entry& e,
                         workspace::EntryReader& data) override {
      char buf[4096];
      std::string content;
      for (;;) {
        absl::StatusOr<size_t> n = data.Read(buf, sizeof(buf));
        if (!n.ok()) {
          return n.status();
        }
        if (*n == 0) {
          break;
        }
        content.append(buf, *n);
      }
      entries[rel] = {e, content};
      return absl::OkStatus();
    }
    std::map<std::string, std::pair<Entry, std::string>> entries;
  } collect;
  ASSERT_TRUE(workspace::ReadSyncArchive(Source(run.out), {}, collect).ok());
  std::vector<std::string> names;
  for (const auto& [rel, _] : collect.entries) {
    names.push_back(rel);
  }
  EXPECT_THAT(names, ElementsAre("dir", "dir/a", "out_link"));
  EXPECT_EQ(collect.entries["dir/a"].second, "aaa");
  EXPECT_EQ(collect.entries["dir/a"].first.mode, 0755u);
  EXPECT_EQ(collect.entries["out_link"].first.type, EntryType::kSymlink);
  EXPECT_EQ(collect.entries["out_link"].first.link_target, outside / "secret");
  EXPECT_EQ(collect.entries["out_link"].second, "");  // the target's content is never read
}

TEST(WorkspaceToolTest, PackRefusesABadPathList) {
  TempDir root;
  for (std::string list : {std::string("ok\0../etc/passwd\0", 18), std::string("/abs\0", 5),
                           std::string("a\0\0b", 4)}) {
    ToolRun run = RunTool({"ws", "pack", root.path()}, list);
    EXPECT_EQ(run.rc, 1);
    EXPECT_THAT(run.err, HasSubstr("refused path"));
    EXPECT_TRUE(run.out.empty());
  }
  EXPECT_THAT(ParsePathList(std::string("a\0b", 3)).value(), ElementsAre("a", "b"));
  EXPECT_TRUE(ParsePathList("").value().empty());
}

TEST(WorkspaceToolTest, ManifestOutputParsesBackAndUsesTheCache) {
  TempDir root;
  TempDir state;
  fs::create_directories(root / "src");
  WriteFile(root / "src/a.txt", "hello");
  WriteFile(root / std::string("\xff-not-utf8"), "bytes");
  fs::create_symlink("src/a.txt", root / "link");
  std::string cache = state / "cache";
  ToolRun run = RunTool({"ws", "manifest", root.path(), "--cache", cache}, "");
  ASSERT_EQ(run.rc, 0) << run.err;
  absl::StatusOr<workspace::Manifest> m = workspace::ParseManifest(run.out);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 4u);
  EXPECT_EQ(m->at("src/a.txt").sha256, workspace::Sha256Hex("hello"));
  EXPECT_EQ(m->at(std::string("\xff-not-utf8")).sha256, workspace::Sha256Hex("bytes"));
  EXPECT_EQ(m->at("link").link_target, "src/a.txt");
  EXPECT_EQ(m->at("src").type, EntryType::kDir);
  EXPECT_TRUE(fs::exists(cache));
}

TEST(WorkspaceToolTest, UnpackThenManifestMatchesTheArchive) {
  TempDir root;
  std::string bytes = ArchiveBuilder()
                          .Add("d", Dir(0700))
                          .Add("d/f", File(0, 0600), "content")
                          .Add("l", Link("d/f"))
                          .Finish();
  ToolRun unpack = RunTool(
      {"ws", "unpack", root.path(), "--owner", absl::StrCat(::getuid(), ":", ::getgid())}, bytes);
  ASSERT_EQ(unpack.rc, 0) << unpack.err;
  EXPECT_EQ(unpack.out, "{\"files\":1,\"dirs\":1,\"symlinks\":1,\"deleted\":0,\"bytes\":7}\n");
  ToolRun manifest = RunTool({"ws", "manifest", root.path()}, "");
  ASSERT_EQ(manifest.rc, 0) << manifest.err;
  absl::StatusOr<workspace::Manifest> m = workspace::ParseManifest(manifest.out);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->at("d").mode, 0700u);
  EXPECT_EQ(m->at("d/f").mode, 0600u);
  EXPECT_EQ(m->at("d/f").sha256, workspace::Sha256Hex("content"));
  EXPECT_EQ(m->at("l").link_target, "d/f");
}

TEST(WorkspaceToolTest, UsageErrorsExitTwoAndFailuresExitOne) {
  EXPECT_EQ(RunTool({"ws"}, "").rc, 2);
  EXPECT_EQ(RunTool({"ws", "frobnicate", "/tmp"}, "").rc, 2);
  EXPECT_EQ(RunTool({"ws", "unpack", "/tmp", "--owner", "x"}, "").rc, 2);
  EXPECT_EQ(RunTool({"ws", "pack", "/tmp", "--cache", "x"}, "").rc, 2);
  ToolRun garbage = RunTool({"ws", "unpack", "/nonexistent-root"}, "garbage");
  EXPECT_EQ(garbage.rc, 1);
  EXPECT_THAT(garbage.err, HasSubstr("abox-guest ws: unpack /nonexistent-root: "));
  EXPECT_EQ(std::count(garbage.err.begin(), garbage.err.end(), '\n'), 1);
}

}  // namespace
}  // namespace abox::guest
