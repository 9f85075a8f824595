#include "src/guest/stage1.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace abox::guest {
namespace {

TEST(Stage1Test, RootDeviceDefaultsToVdaAndHonoursAboxRoot) {
  EXPECT_EQ(RootDeviceFromCmdline(""), "/dev/vda");
  EXPECT_EQ(RootDeviceFromCmdline("console=ttyS0 panic=-1\n"), "/dev/vda");
  EXPECT_EQ(RootDeviceFromCmdline("console=ttyS0 abox.root=/dev/vdb quiet\n"), "/dev/vdb");
  EXPECT_EQ(RootDeviceFromCmdline("root=/dev/sda1"), "/dev/vda");  // only abox.root= counts
  // Values outside /dev are ignored rather than mounted.
  EXPECT_EQ(RootDeviceFromCmdline("abox.root=/etc/passwd"), "/dev/vda");
  EXPECT_EQ(RootDeviceFromCmdline("abox.root=/dev/../etc/x"), "/dev/vda");
}

TEST(Stage1Test, ListsModulesInLoadOrderIgnoringOtherFiles) {
  char templ[] = "/tmp/stage1-test-XXXXXX";
  ASSERT_NE(::mkdtemp(templ), nullptr);
  const std::filesystem::path dir = templ;
  for (const char* name :
       {"10-d.ko", "02-virtio.ko", "01-virtio_ring.ko", "README", "03-x.ko.xz", ".ko"}) {
    std::ofstream(dir / name) << "x";
  }
  std::vector<std::string> files = ListModuleFiles(dir.string());
  EXPECT_EQ(files, (std::vector<std::string>{(dir / "01-virtio_ring.ko").string(),
                                             (dir / "02-virtio.ko").string(),
                                             (dir / "10-d.ko").string()}));
  EXPECT_TRUE(ListModuleFiles((dir / "missing").string()).empty());
  std::filesystem::remove_all(dir);
}

TEST(Stage1Test, IsNotInitramfsStageOutsideTheVm) {
  // A test runner is never PID 1 with /abox/initramfs present.
  EXPECT_FALSE(IsInitramfsStage());
}

}  // namespace
}  // namespace abox::guest
