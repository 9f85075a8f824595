#include "src/image/initramfs.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <memory>

#include "gtest/gtest.h"
#include "src/image/test_util.h"

namespace abox::image {
namespace {

struct ReadBack {
  std::string path;
  mode_t type;
  mode_t perm;
  std::string data;
  dev_t rdev;
  int64_t uid;
  int64_t mtime;
};

std::vector<ReadBack> ReadCpio(const std::filesystem::path& p, std::string* format) {
  std::vector<ReadBack> out;
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_format_cpio(a.get());
  archive_read_support_filter_none(a.get());
  EXPECT_EQ(archive_read_open_filename(a.get(), p.c_str(), 4096), ARCHIVE_OK);
  archive_entry* e = nullptr;
  while (archive_read_next_header(a.get(), &e) == ARCHIVE_OK) {
    ReadBack r{archive_entry_pathname(e), archive_entry_filetype(e), archive_entry_perm(e), "",
               archive_entry_rdev(e),     archive_entry_uid(e),      archive_entry_mtime(e)};
    char buf[4096];
    la_ssize_t n;
    while ((n = archive_read_data(a.get(), buf, sizeof(buf))) > 0) {
      r.data.append(buf, static_cast<size_t>(n));
    }
    out.push_back(std::move(r));
    *format = archive_format_name(a.get());
  }
  return out;
}

TEST(CpioTest, WritesNewcArchiveThatReadsBack) {
  testing::TempDir dir;
  const std::filesystem::path out = dir.path() / "x.cpio";
  std::string big(100000, 'q');
  std::vector<CpioEntry> entries = {
      {"d", CpioEntry::Type::kDirectory, 0700},
      {"d/file", CpioEntry::Type::kFile, 0640, "hello"},
      {"empty", CpioEntry::Type::kFile, 0600, ""},
      {"big", CpioEntry::Type::kFile, 0755, big},
      {"tty", CpioEntry::Type::kCharDevice, 0620, "", 4, 1},
  };
  ASSERT_TRUE(WriteCpio(out, entries).ok());
  std::string head = testing::ReadFileOrDie(out).substr(0, 6);
  EXPECT_EQ(head, "070701");  // newc magic, uncompressed
  std::string format;
  std::vector<ReadBack> back = ReadCpio(out, &format);
  EXPECT_NE(format.find("SVR4"), std::string::npos) << format;
  ASSERT_EQ(back.size(), entries.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].path, entries[i].path);
    EXPECT_EQ(back[i].perm, entries[i].mode);
    EXPECT_EQ(back[i].data, entries[i].data) << back[i].path;
    EXPECT_EQ(back[i].uid, 0);
    EXPECT_EQ(back[i].mtime, 0);  // reproducible
  }
  EXPECT_EQ(back[0].type, static_cast<mode_t>(AE_IFDIR));
  EXPECT_EQ(back[1].type, static_cast<mode_t>(AE_IFREG));
  EXPECT_EQ(back[4].type, static_cast<mode_t>(AE_IFCHR));
  EXPECT_EQ(major(back[4].rdev), 4u);
  EXPECT_EQ(minor(back[4].rdev), 1u);
}

TEST(CpioTest, SameInputGivesIdenticalBytes) {
  testing::TempDir dir;
  auto entries = InitramfsEntries("agent", {{"virtio", "ko"}});
  ASSERT_TRUE(WriteCpio(dir.path() / "a", entries).ok());
  ASSERT_TRUE(WriteCpio(dir.path() / "b", entries).ok());
  EXPECT_EQ(testing::ReadFileOrDie(dir.path() / "a"), testing::ReadFileOrDie(dir.path() / "b"));
}

TEST(CpioTest, FailsWhenOutputCannotBeCreated) {
  testing::TempDir dir;
  EXPECT_FALSE(WriteCpio(dir.path() / "no" / "such" / "dir.cpio", {}).ok());
}

TEST(InitramfsTest, HasInitMarkerConsoleAndOrderedModules) {
  testing::TempDir dir;
  const std::filesystem::path out = dir.path() / "initramfs.cpio";
  std::vector<InitramfsModule> mods;
  for (const char* m : {"virtio_ring", "virtio", "virtio_mmio", "virtio_blk", "virtio_console",
                        "virtio_rng", "a", "b", "c", "d"}) {
    mods.push_back({m, std::string("ko:") + m});
  }
  ASSERT_TRUE(WriteCpio(out, InitramfsEntries("\x7f"
                                              "ELF agent",
                                              mods))
                  .ok());
  std::string format;
  std::map<std::string, ReadBack> by_path;
  std::vector<std::string> module_paths;
  for (ReadBack& r : ReadCpio(out, &format)) {
    if (r.path.rfind("abox/modules/", 0) == 0 && r.type == AE_IFREG) {
      module_paths.push_back(r.path);
    }
    by_path[r.path] = std::move(r);
  }
  for (const char* d : {"dev", "proc", "sys", "newroot", "run", "abox", "abox/modules"}) {
    ASSERT_TRUE(by_path.count(d)) << d;
    EXPECT_EQ(by_path[d].type, static_cast<mode_t>(AE_IFDIR)) << d;
  }
  EXPECT_EQ(by_path["init"].data,
            "\x7f"
            "ELF agent");
  EXPECT_EQ(by_path["init"].perm, 0755u);
  EXPECT_TRUE(by_path.count("abox/initramfs"));
  EXPECT_EQ(by_path["dev/console"].type, static_cast<mode_t>(AE_IFCHR));
  EXPECT_EQ(major(by_path["dev/console"].rdev), 5u);
  EXPECT_EQ(minor(by_path["dev/console"].rdev), 1u);
  // Names sort in load order (stage 1 loads them sorted), even past nine modules.
  ASSERT_EQ(module_paths.size(), 10u);
  EXPECT_EQ(module_paths[0], "abox/modules/01-virtio_ring.ko");
  EXPECT_EQ(module_paths[5], "abox/modules/06-virtio_rng.ko");
  EXPECT_EQ(module_paths[9], "abox/modules/10-d.ko");
  EXPECT_TRUE(std::is_sorted(module_paths.begin(), module_paths.end()));
  EXPECT_EQ(by_path["abox/modules/02-virtio.ko"].data, "ko:virtio");
}

}  // namespace
}  // namespace abox::image
