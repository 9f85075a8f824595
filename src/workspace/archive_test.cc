#include "src/workspace/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/workspace/manifest_scan.h"
#include "src/workspace/testing/scratch_tree.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class TempDir : public workspace::testing::ScratchDir {
 public:
  TempDir() : ScratchDir("abox-archive-test") {}
};

void WriteFile(const std::string& path, const std::string& content, int mode = 0644) {
  workspace::testing::WriteWholeFile(path, content, mode);
}

struct Seen {
  Entry entry;
  std::string content;
};

// Records everything the reader hands over.
class RecordingHandler final : public SyncArchiveHandler {
 public:
  absl::Status OnDeletions(std::vector<std::string> paths) override {
    ++deletion_calls;
    deletions = std::move(paths);
    return absl::OkStatus();
  }
  absl::Status OnEntry(const std::string& rel, const Entry& e, EntryReader& data) override {
    order.push_back(rel);
    Seen& seen = entries[rel];
    seen.entry = e;
    char buf[1000];  // small on purpose: content arrives in many reads
    for (;;) {
      absl::StatusOr<size_t> n = data.Read(buf, sizeof(buf));
      if (!n.ok()) {
        return n.status();
      }
      if (*n == 0) {
        break;
      }
      seen.content.append(buf, *n);
    }
    return absl::OkStatus();
  }

  int deletion_calls = 0;
  std::vector<std::string> deletions;
  std::vector<std::string> order;
  std::map<std::string, Seen> entries;
};

ArchiveSource FromString(const std::string& bytes) {
  auto pos = std::make_shared<size_t>(0);
  return [&bytes, pos](char* buf, size_t len) -> absl::StatusOr<size_t> {
    size_t n = std::min(len, bytes.size() - *pos);
    std::memcpy(buf, bytes.data() + *pos, n);
    *pos += n;
    return n;
  };
}

absl::Status Read(const std::string& bytes, RecordingHandler& handler,
                  const ArchiveLimits& limits = {}) {
  return ReadSyncArchive(FromString(bytes), limits, handler);
}

Entry FileEntry(uint64_t size, uint32_t mode = 0644) {
  Entry e;
  e.type = EntryType::kFile;
  e.mode = mode;
  e.size = size;
  return e;
}

TEST(ArchiveTest, RoundTripsFilesDirsSymlinksAndDeletions) {
  TempDir dir;
  std::string binary(1 << 20, '\0');
  std::mt19937 rng(42);
  for (char& c : binary) {
    c = static_cast<char>(rng());
  }
  fs::create_directories(dir / "src/sub");
  WriteFile(dir / "src/main.cc", "int main() {}\n");
  WriteFile(dir / "empty", "");
  WriteFile(dir / "blob.bin", binary);
  WriteFile(dir / "run.sh", "#!/bin/sh\n", 0755);
  std::string latin1 = std::string("caf\xe9-") + std::string("\xff.txt");
  WriteFile(dir / latin1, "latin1");
  fs::create_symlink("../outside/target", dir / "src/link");
  std::string long_name = std::string(200, 'n') + "/" + std::string(200, 'm');
  fs::create_directories(dir / std::string(200, 'n'));
  WriteFile(dir / long_name, "long");

  absl::StatusOr<Manifest> m = ScanTree(dir.path(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  std::string out;
  auto w = SyncArchiveWriter::Create([&](absl::string_view b) {
    out.append(b.data(), b.size());
    return absl::OkStatus();
  });
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->AddDeletions({"gone.txt", "old/dir", std::string("\xfe-bytes")}).ok());
  for (const auto& [rel, e] : *m) {
    ASSERT_TRUE((*w)->AddFromDisk(dir.path(), rel, e).ok()) << rel;
  }
  ASSERT_TRUE((*w)->AddData("generated/config", FileEntry(5, 0600), "hello").ok());
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_GT((*w)->bytes_in(), binary.size());
  EXPECT_EQ((*w)->bytes_out(), out.size());

  RecordingHandler h;
  absl::Status read = Read(out, h);
  ASSERT_TRUE(read.ok()) << read;
  EXPECT_EQ(h.deletion_calls, 1);
  EXPECT_THAT(h.deletions, ElementsAre("gone.txt", "old/dir", std::string("\xfe-bytes")));
  for (const auto& [rel, e] : *m) {
    ASSERT_TRUE(h.entries.contains(rel)) << rel;
    const Seen& seen = h.entries[rel];
    EXPECT_EQ(seen.entry.type, e.type) << rel;
    EXPECT_EQ(seen.entry.mode, e.mode) << rel;
    EXPECT_EQ(seen.entry.link_target, e.link_target) << rel;
    EXPECT_EQ(seen.entry.size, e.size) << rel;
  }
  EXPECT_EQ(h.entries.size(), m->size() + 1);
  EXPECT_EQ(h.entries["blob.bin"].content, binary);
  EXPECT_EQ(h.entries["empty"].content, "");
  EXPECT_EQ(h.entries[latin1].content, "latin1");
  EXPECT_EQ(h.entries[long_name].content, "long");
  EXPECT_EQ(h.entries["run.sh"].entry.mode, 0755u);
  EXPECT_EQ(h.entries["src/link"].entry.link_target, "../outside/target");
  EXPECT_EQ(h.entries["src/sub"].entry.type, EntryType::kDir);
  EXPECT_EQ(h.entries["generated/config"].content, "hello");
  EXPECT_EQ(h.entries["generated/config"].entry.mode, 0600u);
}

TEST(ArchiveTest, AddFromDiskAbortsWhenTheFileChanged) {
  TempDir dir;
  WriteFile(dir / "f", "12345");
  auto w = SyncArchiveWriter::Create([](absl::string_view) { return absl::OkStatus(); });
  ASSERT_TRUE(w.ok());
  absl::Status size = (*w)->AddFromDisk(dir.path(), "f", FileEntry(4));
  EXPECT_EQ(size.code(), absl::StatusCode::kAborted) << size;
  EXPECT_THAT(size.message(), HasSubstr("changed while syncing"));
  Entry as_dir;
  as_dir.type = EntryType::kDir;
  EXPECT_EQ((*w)->AddFromDisk(dir.path(), "f", as_dir).code(), absl::StatusCode::kAborted);
  EXPECT_EQ((*w)->AddFromDisk(dir.path(), "missing", FileEntry(1)).code(),
            absl::StatusCode::kAborted);
}

TEST(ArchiveTest, AddFromFdAbortsWhenTheContentIsNotTheExpectedSize) {
  TempDir dir;
  WriteFile(dir / "f", "12345");
  for (uint64_t expected : {3u, 10u}) {
    base::UniqueFd fd(::open((dir / "f").c_str(), O_RDONLY | O_CLOEXEC));
    auto w = SyncArchiveWriter::Create([](absl::string_view) { return absl::OkStatus(); });
    ASSERT_TRUE(w.ok());
    absl::Status s = (*w)->AddFromFd("f", FileEntry(expected), fd.get());
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    EXPECT_THAT(s.message(), HasSubstr(expected == 3 ? "it grew" : "it shrank"));
    EXPECT_EQ((*w)->Finish().code(), absl::StatusCode::kFailedPrecondition);  // now unusable
  }
  base::UniqueFd fd(::open((dir / "f").c_str(), O_RDONLY | O_CLOEXEC));
  std::string out;
  auto w = SyncArchiveWriter::Create([&](absl::string_view b) {
    out.append(b.data(), b.size());
    return absl::OkStatus();
  });
  ASSERT_TRUE((*w)->AddFromFd("f", FileEntry(5), fd.get()).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  RecordingHandler h;
  ASSERT_TRUE(Read(out, h).ok());
  EXPECT_EQ(h.entries["f"].content, "12345");
}

TEST(ArchiveTest, AddFromDiskNeverFollowsASymlinkOnTheWay) {
  TempDir dir;
  TempDir outside;
  WriteFile(outside / "secret", "secret");
  fs::create_directory_symlink(outside.path(), dir / "link");
  auto w = SyncArchiveWriter::Create([](absl::string_view) { return absl::OkStatus(); });
  ASSERT_TRUE(w.ok());
  absl::Status s = (*w)->AddFromDisk(dir.path(), "link/secret", FileEntry(6));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
}

TEST(ArchiveTest, DeletionsMustComeFirstAndOnce) {
  auto w = SyncArchiveWriter::Create([](absl::string_view) { return absl::OkStatus(); });
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->AddData("a", FileEntry(1), "x").ok());
  EXPECT_EQ((*w)->AddDeletions({"b"}).code(), absl::StatusCode::kFailedPrecondition);
  auto w2 = SyncArchiveWriter::Create([](absl::string_view) { return absl::OkStatus(); });
  EXPECT_EQ((*w2)->AddDeletions({"../b"}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ArchiveTest, SinkErrorsPropagate) {
  auto w = SyncArchiveWriter::Create(
      [](absl::string_view) { return absl::UnavailableError("pipe closed"); });
  ASSERT_TRUE(w.ok());
  absl::Status s = (*w)->AddData("a", FileEntry(1), "x");
  if (s.ok()) {
    s = (*w)->Finish();
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("pipe closed"));
}

// ---- Hostile archives, built with libarchive directly ----

struct RawEntry {
  std::string name;
  mode_t type = AE_IFREG;
  std::string content;
  std::string link;  // symlink target or hardlink source
  bool hardlink = false;
  int64_t declared_size = -1;  // -1: content.size()
};

std::string BuildRaw(const std::vector<RawEntry>& entries, bool zstd = true) {
  std::string out;
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (zstd) {
    archive_write_add_filter_zstd(a);
  }
  archive_write_set_bytes_in_last_block(a, 1);
  archive_write_open(
      a, &out, nullptr,
      [](struct archive*, void* d, const void* buf, size_t len) -> la_ssize_t {
        static_cast<std::string*>(d)->append(static_cast<const char*>(buf), len);
        return static_cast<la_ssize_t>(len);
      },
      nullptr);
  for (const RawEntry& r : entries) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_copy_pathname(e, r.name.c_str());
    archive_entry_set_filetype(e, r.type);
    archive_entry_set_perm(e, 0644);
    if (r.hardlink) {
      archive_entry_copy_hardlink(e, r.link.c_str());
    } else if (r.type == AE_IFLNK) {
      archive_entry_copy_symlink(e, r.link.c_str());
    }
    if (r.type == AE_IFCHR) {
      archive_entry_set_rdev(e, makedev(1, 3));
    }
    archive_entry_set_size(
        e, r.declared_size >= 0 ? r.declared_size : static_cast<int64_t>(r.content.size()));
    archive_write_header(a, e);
    if (!r.content.empty()) {
      archive_write_data(a, r.content.data(), r.content.size());
    }
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

absl::Status ReadRaw(const std::vector<RawEntry>& entries, RecordingHandler& h,
                     const ArchiveLimits& limits = {}) {
  return Read(BuildRaw(entries), h, limits);
}

TEST(ArchiveTest, RefusesPathsThatLeaveTheRoot) {
  for (const char* name : {"/etc/passwd", "../x", "a/../../x", "./x", "a//b", "x/.", ""}) {
    RecordingHandler h;
    absl::Status s = ReadRaw({{.name = "ok", .content = "1"}, {.name = name, .content = "2"}}, h);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name << ": " << s;
    EXPECT_THAT(h.order, ElementsAre("ok")) << name;  // nothing after the bad entry
  }
}

TEST(ArchiveTest, RefusesLinksAndSpecialFiles) {
  struct Case {
    RawEntry entry;
    const char* why;
  } cases[] = {
      {{.name = "hard", .type = AE_IFREG, .link = "ok", .hardlink = true}, "hard links"},
      {{.name = "tty", .type = AE_IFCHR}, "device nodes"},
      {{.name = "disk", .type = AE_IFBLK}, "device nodes"},
      {{.name = "pipe", .type = AE_IFIFO}, "fifos"},
  };
  for (const Case& c : cases) {
    RecordingHandler h;
    absl::Status s = ReadRaw({{.name = "ok", .content = "1"}, c.entry}, h);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.entry.name << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.why)) << s;
    EXPECT_THAT(h.order, ElementsAre("ok"));
  }
}

TEST(ArchiveTest, RefusesTheControlEntryAnywhereButFirst) {
  RecordingHandler h;
  std::string list("a\0", 2);
  absl::Status s =
      ReadRaw({{.name = "ok", .content = "1"}, {.name = kDeletionsEntryName, .content = list}}, h);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("only be the first entry"));
  EXPECT_EQ(h.deletion_calls, 0);

  RecordingHandler bad_path;
  s = ReadRaw({{.name = kDeletionsEntryName, .content = std::string("../x\0", 5)}}, bad_path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_path.deletion_calls, 0);

  RecordingHandler unterminated;
  s = ReadRaw({{.name = kDeletionsEntryName, .content = "a"}}, unterminated);
  EXPECT_THAT(s.message(), HasSubstr("does not end with a NUL"));

  RecordingHandler too_many;
  s = ReadRaw({{.name = kDeletionsEntryName, .content = std::string("a\0b\0c\0", 6)}}, too_many,
              {.max_entries = 2});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
}

TEST(ArchiveTest, EnforcesSizeAndCountLimits) {
  std::vector<RawEntry> three = {{.name = "a", .content = std::string(100, 'a')},
                                 {.name = "b", .content = std::string(100, 'b')},
                                 {.name = "c", .content = std::string(100, 'c')}};
  RecordingHandler h1;
  EXPECT_EQ(ReadRaw(three, h1, {.max_file_bytes = 99}).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(h1.order.empty());
  RecordingHandler h2;
  EXPECT_EQ(ReadRaw(three, h2, {.max_total_bytes = 250}).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(h2.order, ElementsAre("a", "b"));
  RecordingHandler h3;
  EXPECT_EQ(ReadRaw(three, h3, {.max_entries = 2}).code(), absl::StatusCode::kResourceExhausted);
  RecordingHandler h4;
  EXPECT_TRUE(
      ReadRaw(three, h4, {.max_entries = 3, .max_file_bytes = 100, .max_total_bytes = 300}).ok());
}

TEST(ArchiveTest, RefusesTruncatedGarbageAndUncompressedStreams) {
  std::string good =
      BuildRaw({{.name = "a", .content = std::string(100000, 'x')}, {.name = "b", .content = "y"}});
  RecordingHandler ok;
  ASSERT_TRUE(Read(good, ok).ok());

  RecordingHandler truncated;
  absl::Status s = Read(good.substr(0, good.size() / 2), truncated);
  EXPECT_FALSE(s.ok());

  RecordingHandler garbage;
  s = Read(std::string(4096, '\x5a'), garbage);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(garbage.order.empty());

  RecordingHandler empty;
  EXPECT_EQ(Read("", empty).code(), absl::StatusCode::kInvalidArgument);

  RecordingHandler plain;
  s = Read(BuildRaw({{.name = "a", .content = "1"}}, /*zstd=*/false), plain);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("not zstd"));
  EXPECT_TRUE(plain.order.empty());
}

TEST(ArchiveTest, SourceErrorsPropagate) {
  RecordingHandler h;
  absl::Status s = ReadSyncArchive(
      [](char*, size_t) -> absl::StatusOr<size_t> { return absl::DeadlineExceededError("slow"); },
      {}, h);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
}

TEST(ArchiveTest, HandlerErrorsStopTheRead) {
  class Failing final : public SyncArchiveHandler {
   public:
    absl::Status OnDeletions(std::vector<std::string>) override { return absl::OkStatus(); }
    absl::Status OnEntry(const std::string&, const Entry&, EntryReader&) override {
      ++calls;
      return absl::PermissionDeniedError("no");
    }
    int calls = 0;
  } handler;
  std::string bytes = BuildRaw({{.name = "a", .content = "1"}, {.name = "b", .content = "2"}});
  EXPECT_EQ(ReadSyncArchive(FromString(bytes), {}, handler).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(handler.calls, 1);
}

}  // namespace
}  // namespace abox::workspace
