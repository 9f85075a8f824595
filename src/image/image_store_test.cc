#include "src/image/image_store.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "gtest/gtest.h"
#include "src/image/fs_util.h"
#include "src/image/sha256.h"
#include "src/image/test_util.h"

namespace abox::image {
namespace {

using ::abox::image::testing::ReadFileOrDie;
using ::abox::image::testing::TempDir;
using ::abox::image::testing::WriteFileOrDie;

class ImageStoreTest : public ::testing::Test {
 protected:
  ImageStoreTest() {
    paths_.home = tmp_.path() / "home";
    paths_.cache_dir = tmp_.path() / "cache";
  }

  // Writes a complete, consistent image `name` built for `protocol`.
  void MakeImage(const std::string& name, uint32_t protocol) {
    const std::filesystem::path dir = paths_.ImageDir(name);
    Manifest m;
    m.name = name;
    m.created_at = "2024-01-01T00:00:00Z";
    m.kernel_version = "6.1.0-test-cloud-amd64";
    m.kernel_cmdline = "console=ttyS0";
    m.agent_sha256 = Sha256Hex("agent");
    m.protocol_version = protocol;
    m.rootfs_key = Sha256Hex("k");
    m.inputs = Sha256Hex("i");
    for (const char* file : {kRootfsFile, kVmlinuxFile, kInitramfsFile}) {
      std::string data = std::string(file) + " contents " + std::string(3000, 'x');
      WriteFileOrDie(dir / file, data);
      auto st = StatFile(dir / file);
      ASSERT_TRUE(st.ok());
      m.artifacts[file] = {Sha256Hex(data), st->size, st->mtime_ns};
    }
    WriteFileOrDie(dir / kManifestFile, ManifestToJson(m));
  }

  // Overwrites one byte in place (same size).
  void FlipByte(const std::string& name, const char* file, off_t at) {
    const std::filesystem::path p = paths_.ImageDir(name) / file;
    auto st = StatFile(p);
    ASSERT_TRUE(st.ok());
    int fd = ::open(p.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    char c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, at), 1);
    c = static_cast<char>(c ^ 0x01);
    ASSERT_EQ(::pwrite(fd, &c, 1, at), 1);
    ::close(fd);
  }

  TempDir tmp_;
  base::HostLayout paths_;
};

TEST_F(ImageStoreTest, VerifyAcceptsIntactImage) {
  MakeImage("default", 1);
  EXPECT_TRUE(VerifyImage(paths_, "default").ok());
}

TEST_F(ImageStoreTest, VerifyNamesTheArtifactWithAFlippedByte) {
  MakeImage("default", 1);
  FlipByte("default", kRootfsFile, 100);
  absl::Status s = VerifyImage(paths_, "default");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("rootfs.ext4 sha256"), std::string::npos) << s;
  EXPECT_EQ(s.message().find("vmlinux"), std::string::npos) << s;
  EXPECT_NE(s.message().find("abox image build --force"), std::string::npos) << s;
}

TEST_F(ImageStoreTest, VerifyReportsMissingAndResizedArtifacts) {
  MakeImage("img", 1);
  std::filesystem::remove(paths_.ImageDir("img") / kVmlinuxFile);
  std::filesystem::resize_file(paths_.ImageDir("img") / kInitramfsFile, 10);
  absl::Status s = VerifyImage(paths_, "img");
  EXPECT_NE(s.message().find("vmlinux is missing"), std::string::npos) << s;
  EXPECT_NE(s.message().find("initramfs.cpio has size 10"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--name img --force"), std::string::npos) << s;
}

TEST_F(ImageStoreTest, OpenMissingImageSaysToBuild) {
  auto f = OpenImageForBoot(paths_, "default", 1);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("no image 'default': run `abox image build`"),
            std::string::npos)
      << f.status();
  auto other = OpenImageForBoot(paths_, "py", 1);
  EXPECT_NE(other.status().message().find("abox image build --name py"), std::string::npos);
  EXPECT_EQ(OpenImageForBoot(paths_, "../etc", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ImageStoreTest, OpenRejectsProtocolMismatch) {
  MakeImage("default", 2);
  auto f = OpenImageForBoot(paths_, "default", 3);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(f.status().message().find(
                "image default was built for protocol 2, this abox speaks 3: run `abox image "
                "build --force`"),
            std::string::npos)
      << f.status();
}

TEST_F(ImageStoreTest, OpenReturnsPathsOfIntactImage) {
  MakeImage("default", 2);
  auto f = OpenImageForBoot(paths_, "default", 2);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->rootfs, paths_.ImageDir("default") / "rootfs.ext4");
  EXPECT_EQ(f->vmlinux, paths_.ImageDir("default") / "vmlinux");
  EXPECT_EQ(f->initramfs, paths_.ImageDir("default") / "initramfs.cpio");
  EXPECT_EQ(f->kernel_cmdline, "console=ttyS0");
  EXPECT_EQ(f->manifest.kernel_version, "6.1.0-test-cloud-amd64");
}

TEST_F(ImageStoreTest, OpenHashesSmallArtifactsAndStatsRootfs) {
  MakeImage("a", 1);
  FlipByte("a", kInitramfsFile, 5);
  auto f = OpenImageForBoot(paths_, "a", 1);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find("initramfs.cpio"), std::string::npos) << f.status();

  MakeImage("b", 1);
  // A rewritten rootfs of the same size is caught by its mtime.
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (paths_.ImageDir("b") / kRootfsFile).c_str(), times, 0), 0);
  auto g = OpenImageForBoot(paths_, "b", 1);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(g.status().message().find("rootfs.ext4"), std::string::npos) << g.status();
}

TEST_F(ImageStoreTest, OpenRejectsBadOrForeignManifest) {
  MakeImage("a", 1);
  WriteFileOrDie(paths_.ImageDir("a") / kManifestFile, "{not json");
  auto f = OpenImageForBoot(paths_, "a", 1);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find("--name a --force"), std::string::npos) << f.status();

  MakeImage("b", 1);
  std::filesystem::create_directories(paths_.ImageDir("c"));
  std::filesystem::copy_file(paths_.ImageDir("b") / kManifestFile,
                             paths_.ImageDir("c") / kManifestFile,
                             std::filesystem::copy_options::none);
  auto c = OpenImageForBoot(paths_, "c", 1);  // manifest says "b"
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss) << c.status();
}

TEST_F(ImageStoreTest, ListShowsGoodAndBrokenImagesSkipsTemps) {
  EXPECT_TRUE(ListImages(paths_)->empty());  // no images dir yet
  MakeImage("zeta", 1);
  MakeImage("alpha", 1);
  std::filesystem::create_directories(paths_.ImageDir("broken"));
  std::filesystem::create_directories(paths_.ImagesDir() / ".tmp-alpha-XXXX");
  auto list = ListImages(paths_);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].name, "alpha");
  EXPECT_TRUE((*list)[0].manifest.ok());
  EXPECT_EQ((*list)[1].name, "broken");
  EXPECT_FALSE((*list)[1].manifest.ok());
  EXPECT_EQ((*list)[2].name, "zeta");
  EXPECT_EQ((*list)[2].manifest->name, "zeta");
}

}  // namespace
}  // namespace abox::image
