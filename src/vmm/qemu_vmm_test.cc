#include "src/vmm/qemu_vmm.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::vmm {
namespace {

using ::testing::HasSubstr;

class QemuVmmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/qemu_vmm_XXXXXX";
    ASSERT_NE(::mkdtemp(dir_.data()), nullptr);
    for (const char* name : {"vmlinux", "initrd", "rootfs.img"}) {
      std::ofstream(dir_ + "/" + name) << "x";
    }
    spec_.id = "vm-1";
    spec_.run_dir = dir_ + "/run";
    spec_.kernel = dir_ + "/vmlinux";
    spec_.initrd = dir_ + "/initrd";
    spec_.rootfs = dir_ + "/rootfs.img";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  VmSpec spec_;
};

TEST_F(QemuVmmTest, AcceptsAGoodSpec) { EXPECT_TRUE(ValidateVmSpec(spec_).ok()); }

TEST_F(QemuVmmTest, RejectsBadIds) {
  for (const char* id : {"", "has space", "a/b", "semi;colon", "comma,id"}) {
    spec_.id = id;
    absl::Status s = ValidateVmSpec(spec_);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << id;
  }
  spec_.id = std::string(65, 'a');
  EXPECT_FALSE(ValidateVmSpec(spec_).ok());
}

TEST_F(QemuVmmTest, MissingFilesAreNamed) {
  spec_.initrd = dir_ + "/nope.cpio";
  absl::Status s = ValidateVmSpec(spec_);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("guest initrd"));
  EXPECT_THAT(s.message(), HasSubstr("nope.cpio"));
  spec_.initrd = dir_;  // a directory
  EXPECT_EQ(ValidateVmSpec(spec_).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(QemuVmmTest, RejectsRelativePathsAndBadSizes) {
  VmSpec s = spec_;
  s.run_dir = "run";
  EXPECT_FALSE(ValidateVmSpec(s).ok());
  s = spec_;
  s.kernel = "vmlinux";
  EXPECT_FALSE(ValidateVmSpec(s).ok());
  s = spec_;
  s.cpus = 0;
  EXPECT_FALSE(ValidateVmSpec(s).ok());
  s = spec_;
  s.memory_mib = 16;
  EXPECT_FALSE(ValidateVmSpec(s).ok());
  s = spec_;
  s.console_log_limit_bytes = 100;
  EXPECT_FALSE(ValidateVmSpec(s).ok());
  s = spec_;
  s.kernel_cmdline_extra = "a\nb";
  EXPECT_FALSE(ValidateVmSpec(s).ok());
  s = spec_;
  s.disk_mib = -1;
  EXPECT_FALSE(ValidateVmSpec(s).ok());
  s.disk_mib = kMaxDiskMib + 1;
  EXPECT_FALSE(ValidateVmSpec(s).ok());
}

TEST_F(QemuVmmTest, TheOverlayHasTheAskedSizeButNeverLessThanTheRootfs) {
  constexpr int64_t kRootfs = int64_t{2048} << 20;
  VmSpec s = spec_;
  s.disk_mib = 0;
  EXPECT_EQ(*OverlayBytes(s, kRootfs), kRootfs);
  s.disk_mib = 16384;
  EXPECT_EQ(*OverlayBytes(s, kRootfs), int64_t{16384} << 20);
  s.disk_mib = 2048;
  EXPECT_EQ(*OverlayBytes(s, kRootfs), kRootfs);
  s.disk_mib = 1024;
  absl::StatusOr<int64_t> small = OverlayBytes(s, kRootfs);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("at least"), std::string::npos) << small.status();
  EXPECT_NE(small.status().message().find("2048 MiB"), std::string::npos) << small.status();
}

TEST_F(QemuVmmTest, MissingQemuNamesTheDebianPackages) {
  QemuVmmOptions o;
  o.qemu_binary = "qemu-system-x86_64-does-not-exist";
  absl::StatusOr<std::unique_ptr<QemuVmm>> vmm = QemuVmm::Create(o);
  EXPECT_EQ(vmm.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(vmm.status().message(), HasSubstr("apt-get install qemu-system-x86 qemu-utils"));
  o = QemuVmmOptions();
  o.qemu_img_binary = "/nonexistent/qemu-img";
  EXPECT_THAT(QemuVmm::Create(o).status().message(), HasSubstr("qemu-utils"));
}

TEST_F(QemuVmmTest, MissingShimIsReported) {
  QemuVmmOptions o;
  o.qemu_binary = "/bin/true";
  o.qemu_img_binary = "/bin/true";
  o.shim_path = dir_ + "/abox-shim";
  absl::StatusOr<std::unique_ptr<QemuVmm>> vmm = QemuVmm::Create(o);
  EXPECT_EQ(vmm.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(vmm.status().message(), HasSubstr("ABOX_SHIM"));
}

TEST_F(QemuVmmTest, RefusesANonEmptyRunDir) {
  QemuVmmOptions o;
  o.qemu_binary = "/bin/true";
  o.qemu_img_binary = "/bin/true";
  absl::StatusOr<std::unique_ptr<QemuVmm>> vmm = QemuVmm::Create(o);  // shim beside this test
  ASSERT_TRUE(vmm.ok()) << vmm.status();
  std::filesystem::create_directories(spec_.run_dir);
  std::ofstream(spec_.run_dir + "/keep.txt") << "mine";
  spec_.accel = Accel::kTcg;
  absl::StatusOr<std::unique_ptr<Vm>> vm = (*vmm)->StartVm(spec_);
  EXPECT_EQ(vm.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(std::filesystem::exists(spec_.run_dir + "/keep.txt"));
}

}  // namespace
}  // namespace abox::vmm
