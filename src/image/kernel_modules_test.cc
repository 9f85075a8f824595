#include "src/image/kernel_modules.h"

#include <archive.h>
#include <archive_entry.h>

#include <memory>

#include "gtest/gtest.h"
#include "src/image/test_util.h"

namespace abox::image {
namespace {

constexpr char kDep[] =
    "kernel/drivers/virtio/virtio_ring.ko:\n"
    "kernel/drivers/virtio/virtio.ko:\n"
    "kernel/drivers/virtio/virtio_mmio.ko: kernel/drivers/virtio/virtio.ko "
    "kernel/drivers/virtio/virtio_ring.ko\n"
    "kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko "
    "kernel/drivers/virtio/virtio_ring.ko\n"
    "kernel/drivers/char/virtio_console.ko: kernel/drivers/virtio/virtio.ko "
    "kernel/drivers/virtio/virtio_ring.ko\n"
    "kernel/drivers/char/hw_random/virtio-rng.ko: kernel/drivers/virtio/virtio.ko "
    "kernel/drivers/virtio/virtio_ring.ko\n"
    "kernel/net/dummy.ko:\n";
constexpr char kBuiltin[] = "kernel/drivers/char/hw_random/rng-core.ko\nkernel/fs/ext4/ext4.ko\n";

std::vector<std::string> Names(const std::vector<ModuleToLoad>& v) {
  std::vector<std::string> out;
  for (const auto& m : v) {
    out.push_back(m.name);
  }
  return out;
}

std::vector<WantedModule> Wanted() {
  return {std::begin(kInitramfsModules), std::end(kInitramfsModules)};
}

TEST(KernelModulesTest, NormalizesNames) {
  EXPECT_EQ(NormalizeModuleName("kernel/drivers/char/hw_random/virtio-rng.ko"), "virtio_rng");
  EXPECT_EQ(NormalizeModuleName("x/nf_tables.ko.zst"), "nf_tables");
  EXPECT_EQ(NormalizeModuleName("virtio_blk.ko.xz"), "virtio_blk");
  EXPECT_EQ(NormalizeModuleName("virtio"), "virtio");
}

TEST(KernelModulesTest, OrdersDependenciesFirstAndMapsHyphens) {
  auto index = ParseModuleIndex(kDep, kBuiltin);
  ASSERT_TRUE(index.ok()) << index.status();
  auto order = ResolveModuleLoadOrder(*index, Wanted());
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(Names(*order),
            (std::vector<std::string>{"virtio_ring", "virtio", "virtio_mmio", "virtio_blk",
                                      "virtio_console", "virtio_rng"}));
  EXPECT_EQ(order->back().rel_path, "kernel/drivers/char/hw_random/virtio-rng.ko");
}

TEST(KernelModulesTest, PullsInUnlistedDependenciesBeforeTheirUsers) {
  // Only virtio_blk is wanted; its dependencies come first, in dependency order.
  auto index = ParseModuleIndex(
      "kernel/b.ko: kernel/a.ko kernel/c.ko\nkernel/a.ko: kernel/c.ko\nkernel/c.ko:\n", "");
  ASSERT_TRUE(index.ok());
  auto order = ResolveModuleLoadOrder(*index, {{"b", true}});
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(Names(*order), (std::vector<std::string>{"c", "a", "b"}));
}

TEST(KernelModulesTest, SkipsBuiltinModules) {
  // A kernel with virtio and virtio_ring built in.
  auto index = ParseModuleIndex(kDep,
                                "kernel/drivers/virtio/virtio.ko\n"
                                "kernel/drivers/virtio/virtio_ring.ko\n");
  ASSERT_TRUE(index.ok());
  auto order = ResolveModuleLoadOrder(*index, Wanted());
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(Names(*order), (std::vector<std::string>{"virtio_mmio", "virtio_blk", "virtio_console",
                                                     "virtio_rng"}));
}

TEST(KernelModulesTest, MissingRequiredModuleFailsOptionalIsSkipped) {
  auto index = ParseModuleIndex("kernel/drivers/virtio/virtio.ko:\n", "");
  ASSERT_TRUE(index.ok());
  auto order = ResolveModuleLoadOrder(*index, {{"virtio", true}, {"virtio_rng", false}});
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(Names(*order), std::vector<std::string>{"virtio"});
  auto missing = ResolveModuleLoadOrder(*index, {{"virtio_blk", true}});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("virtio_blk"), std::string::npos);
  // A dependency that is missing from modules.dep names who needs it.
  auto dangling = ParseModuleIndex("kernel/a.ko: kernel/gone.ko\n", "");
  ASSERT_TRUE(dangling.ok());
  auto d = ResolveModuleLoadOrder(*dangling, {{"a", true}});
  EXPECT_NE(d.status().message().find("needed by a"), std::string::npos) << d.status();
}

TEST(KernelModulesTest, DetectsCycles) {
  auto index = ParseModuleIndex("kernel/a.ko: kernel/b.ko\nkernel/b.ko: kernel/a.ko\n", "");
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(ResolveModuleLoadOrder(*index, {{"a", true}}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(KernelModulesTest, RejectsMalformedOrUnsafeModulesDep) {
  EXPECT_FALSE(ParseModuleIndex("kernel/a.ko kernel/b.ko\n", "").ok());
  EXPECT_FALSE(ParseModuleIndex("/abs/a.ko:\n", "").ok());
  EXPECT_FALSE(ParseModuleIndex("kernel/../../etc/shadow:\n", "").ok());
}

TEST(KernelModulesTest, ReadsPlainAndCompressedModules) {
  testing::TempDir dir;
  const std::string ko =
      "\x7f"
      "ELF module bytes " +
      std::string(10000, 'm');
  testing::WriteFileOrDie(dir.path() / "plain.ko", ko);
  // Write ko as a raw .xz stream with libarchive.
  const std::filesystem::path xz = dir.path() / "comp.ko.xz";
  {
    std::unique_ptr<archive, int (*)(archive*)> a(archive_write_new(), archive_write_free);
    ASSERT_EQ(archive_write_set_format_raw(a.get()), ARCHIVE_OK);
    ASSERT_EQ(archive_write_add_filter_xz(a.get()), ARCHIVE_OK);
    ASSERT_EQ(archive_write_open_filename(a.get(), xz.c_str()), ARCHIVE_OK);
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, "comp.ko");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_size(e, static_cast<la_int64_t>(ko.size()));
    ASSERT_EQ(archive_write_header(a.get(), e), ARCHIVE_OK);
    archive_entry_free(e);
    ASSERT_EQ(archive_write_data(a.get(), ko.data(), ko.size()),
              static_cast<la_ssize_t>(ko.size()));
    ASSERT_EQ(archive_write_close(a.get()), ARCHIVE_OK);
  }
  EXPECT_NE(testing::ReadFileOrDie(xz), ko);  // really compressed
  auto plain = ReadModuleFile(dir.path() / "plain.ko");
  auto comp = ReadModuleFile(xz);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(comp.ok()) << comp.status();
  EXPECT_EQ(*plain, ko);
  EXPECT_EQ(*comp, ko);
  EXPECT_EQ(ReadModuleFile(xz, 100).status().code(), absl::StatusCode::kResourceExhausted);
  testing::WriteFileOrDie(dir.path() / "bad.ko.zst", "not zstd at all");
  EXPECT_EQ(ReadModuleFile(dir.path() / "bad.ko.zst").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace abox::image
