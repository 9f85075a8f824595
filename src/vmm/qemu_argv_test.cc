#include "src/vmm/qemu_argv.h"

#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::vmm {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

QemuArgvInput Input(Accel accel) {
  QemuArgvInput in;
  in.qemu_binary = "/usr/bin/qemu-system-x86_64";
  in.id = "vm1";
  in.accel = accel;
  in.cpus = 2;
  in.memory_mib = 512;
  in.kernel_path = "/proc/self/fd/5";
  in.initrd_path = "/proc/self/fd/6";
  in.kernel_cmdline = "console=ttyS0";
  in.overlay_fd = 7;
  in.rootfs_fd = 8;
  in.qmp_fd = 9;
  in.agent_fd = 10;
  in.console_fd = 11;
  return in;
}

// Every value that follows `flag` in argv.
std::vector<std::string> ValuesOf(const std::vector<std::string>& argv, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == flag) {
      out.push_back(argv[i + 1]);
    }
  }
  return out;
}

TEST(QemuArgvTest, TcgMicrovmWithoutHostCpu) {
  std::vector<std::string> argv = BuildQemuArgv(Input(Accel::kTcg));
  EXPECT_EQ(argv[0], "/usr/bin/qemu-system-x86_64");
  EXPECT_THAT(ValuesOf(argv, "-M"), ElementsAre("microvm,memory-backend=abox.ram"));
  // Anonymous memory, under the one name every VM's memory has (so states load across kinds).
  EXPECT_THAT(ValuesOf(argv, "-object"), ElementsAre("memory-backend-ram,id=abox.ram,size=512M"));
  EXPECT_THAT(ValuesOf(argv, "-incoming"), IsEmpty());
  EXPECT_THAT(ValuesOf(argv, "-accel"), ElementsAre("tcg,tb-size=128"));
  EXPECT_THAT(ValuesOf(argv, "-cpu"), ElementsAre("max"));  // AVX2 for Bun-built agent CLIs
  EXPECT_THAT(ValuesOf(argv, "-m"), ElementsAre("512"));
  EXPECT_THAT(ValuesOf(argv, "-smp"), ElementsAre("2"));
  EXPECT_THAT(ValuesOf(argv, "-kernel"), ElementsAre("/proc/self/fd/5"));
  EXPECT_THAT(ValuesOf(argv, "-initrd"), ElementsAre("/proc/self/fd/6"));
  EXPECT_THAT(ValuesOf(argv, "-append"), ElementsAre("console=ttyS0"));
  for (const char* flag : {"-nodefaults", "-no-user-config", "-nographic", "-no-reboot"}) {
    EXPECT_THAT(argv, Contains(flag));
  }
}

TEST(QemuArgvTest, KvmUsesHostCpu) {
  std::vector<std::string> argv = BuildQemuArgv(Input(Accel::kKvm));
  EXPECT_THAT(ValuesOf(argv, "-accel"), ElementsAre("kvm"));
  EXPECT_THAT(ValuesOf(argv, "-cpu"), ElementsAre("host"));
}

TEST(QemuArgvTest, HardeningFlagsPresentAndExplained) {
  std::vector<std::string> argv = BuildQemuArgv(Input(Accel::kTcg));
  EXPECT_THAT(
      ValuesOf(argv, "-sandbox"),
      ElementsAre("on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"));
  EXPECT_THAT(ValuesOf(argv, "-msg"), ElementsAre("timestamp=on"));
  EXPECT_THAT(ValuesOf(argv, "-nic"), ElementsAre("none"));
  for (const HardeningFlag& f : QemuHardeningFlags()) {
    EXPECT_THAT(argv, Contains(f.flag));
    EXPECT_GT(std::string(f.reason).size(), 10u) << f.flag;
  }
}

TEST(QemuArgvTest, NoNetworkNoShareNoRunas) {
  std::vector<std::string> argv = BuildQemuArgv(Input(Accel::kTcg));
  for (const std::string& arg : argv) {
    EXPECT_THAT(arg, Not(HasSubstr("netdev")));
    EXPECT_THAT(arg, Not(HasSubstr("virtio-net")));
    EXPECT_THAT(arg, Not(HasSubstr("virtfs")));
    EXPECT_THAT(arg, Not(HasSubstr("9p")));
    EXPECT_NE(arg, "-runas");  // incompatible with elevateprivileges=deny (QEMU dies of SIGSYS)
  }
}

TEST(QemuArgvTest, DevicesUseInheritedDescriptors) {
  std::vector<std::string> argv = BuildQemuArgv(Input(Accel::kTcg));
  EXPECT_THAT(ValuesOf(argv, "-add-fd"), ElementsAre("fd=7,set=1", "fd=8,set=2"));
  std::vector<std::string> blockdevs = ValuesOf(argv, "-blockdev");
  ASSERT_EQ(blockdevs.size(), 2u);
  EXPECT_THAT(blockdevs[0], HasSubstr("read-only=on"));
  EXPECT_THAT(blockdevs[0], HasSubstr("/dev/fdset/2"));
  EXPECT_THAT(blockdevs[1], HasSubstr("driver=qcow2"));
  EXPECT_THAT(blockdevs[1], HasSubstr("backing=rootfs-base"));
  EXPECT_THAT(blockdevs[1], HasSubstr("/dev/fdset/1"));
  EXPECT_THAT(ValuesOf(argv, "-chardev"), ElementsAre("socket,id=agent,fd=10,server=on,wait=off",
                                                      "socket,id=qmp,fd=9,server=on,wait=off",
                                                      "socket,id=con,fd=11,server=off"));
  EXPECT_THAT(
      ValuesOf(argv, "-device"),
      ElementsAre("virtio-blk-device,drive=rootfs", "virtio-serial-device",
                  "virtserialport,chardev=agent,name=org.abox.agent.0", "virtio-rng-device"));
  EXPECT_THAT(ValuesOf(argv, "-mon"), ElementsAre("chardev=qmp,mode=control"));
  EXPECT_THAT(ValuesOf(argv, "-serial"), ElementsAre("chardev:con"));
}

TEST(QemuArgvTest, TemplateMemoryIsSharedAndCloneMemoryPrivate) {
  QemuArgvInput in = Input(Accel::kTcg);
  in.memory_fd = 12;
  in.memory_shared = true;
  EXPECT_THAT(ValuesOf(BuildQemuArgv(in), "-object"),
              ElementsAre("memory-backend-file,id=abox.ram,size=512M,mem-path=/proc/self/fd/12,"
                          "share=on"));
  in.memory_shared = false;
  in.incoming = true;
  std::vector<std::string> argv = BuildQemuArgv(in);
  EXPECT_THAT(ValuesOf(argv, "-object"),
              ElementsAre("memory-backend-file,id=abox.ram,size=512M,mem-path=/proc/self/fd/12,"
                          "share=off"));
  EXPECT_THAT(ValuesOf(argv, "-incoming"), ElementsAre("defer"));
}

TEST(QemuArgvTest, FrozenLayersChainBetweenImageAndOverlay) {
  QemuArgvInput in = Input(Accel::kTcg);
  in.layer_fds = {20, 21};
  std::vector<std::string> argv = BuildQemuArgv(in);
  EXPECT_THAT(ValuesOf(argv, "-add-fd"),
              ElementsAre("fd=7,set=1", "fd=8,set=2", "fd=20,set=3", "fd=21,set=4"));
  std::vector<std::string> blockdevs = ValuesOf(argv, "-blockdev");
  ASSERT_EQ(blockdevs.size(), 4u);
  EXPECT_THAT(blockdevs[1], HasSubstr("node-name=layer0,backing=rootfs-base,read-only=on"));
  EXPECT_THAT(blockdevs[1], HasSubstr("/dev/fdset/3"));
  EXPECT_THAT(blockdevs[2], HasSubstr("node-name=layer1,backing=layer0,read-only=on"));
  EXPECT_THAT(blockdevs[2], HasSubstr("/dev/fdset/4"));
  // The VM writes only its own overlay, on top of the last layer.
  EXPECT_THAT(blockdevs[3], HasSubstr("node-name=rootfs,backing=layer1,"));
  EXPECT_THAT(blockdevs[3], HasSubstr("/dev/fdset/1"));
  EXPECT_THAT(blockdevs[3], Not(HasSubstr("read-only")));
}

TEST(QemuArgvTest, TheJailPrefixComesBeforeQemu) {
  QemuArgvInput in = Input(Accel::kKvm);
  in.jail_prefix = {"/opt/abox/abox-jail", "--uid=2047541249", "--"};
  std::vector<std::string> argv = BuildQemuArgv(in);
  ASSERT_GE(argv.size(), 4u);
  EXPECT_EQ(argv[0], "/opt/abox/abox-jail");
  EXPECT_EQ(argv[2], "--");
  EXPECT_EQ(argv[3], "/usr/bin/qemu-system-x86_64");
}

TEST(QemuArgvTest, KernelCmdlineCarriesTscAndExtra) {
  std::string cmdline = KernelCmdline(2596146, "abox.mode=test");
  EXPECT_TRUE(absl::StartsWith(cmdline, "console=ttyS0 tsc_early_khz=2596146 "));
  for (const char* opt : {"mitigations=off", "cryptomgr.notests", "nokaslr", "edd=off", "audit=0",
                          "no_timer_check", "random.trust_cpu=on", "panic=-1", "quiet"}) {
    EXPECT_THAT(cmdline, HasSubstr(opt));
  }
  EXPECT_TRUE(absl::EndsWith(cmdline, " abox.mode=test"));
  EXPECT_THAT(KernelCmdline(std::nullopt, ""), Not(HasSubstr("tsc_early_khz")));
}

TEST(QemuArgvTest, FingerprintCountsWhetherTscIsGivenNotItsValue) {
  // Two aboxd processes calibrate the TSC a few kHz apart: their templates must match.
  EXPECT_EQ(FingerprintKernelCmdline(2596146, "x=1"), FingerprintKernelCmdline(2596201, "x=1"));
  EXPECT_NE(FingerprintKernelCmdline(2596146, "x=1"),
            FingerprintKernelCmdline(std::nullopt, "x=1"));
  EXPECT_NE(FingerprintKernelCmdline(2596146, "x=1"), FingerprintKernelCmdline(2596146, "x=2"));
  EXPECT_THAT(FingerprintKernelCmdline(2596146, ""), Not(HasSubstr("2596146")));
}

TEST(PlanPrivilegesTest, NonRootKeepsCredentials) {
  PrivilegePlan plan = PlanPrivileges({.euid = 1000, .accel = Accel::kKvm});
  EXPECT_FALSE(plan.drop.has_value());
  EXPECT_THAT(plan.warning, IsEmpty());
}

TEST(PlanPrivilegesTest, RootWithTcgDropsToNobody) {
  PrivilegePlan plan = PlanPrivileges({.euid = 0, .accel = Accel::kTcg});
  ASSERT_TRUE(plan.drop.has_value());
  EXPECT_EQ(plan.drop->uid, 65534u);
  EXPECT_EQ(plan.drop->gid, 65534u);
  EXPECT_THAT(plan.drop->groups, IsEmpty());
}

TEST(PlanPrivilegesTest, RootWithKvmGroupKeepsKvmGroup) {
  PrivilegePlan plan =
      PlanPrivileges({.euid = 0, .accel = Accel::kKvm, .kvm_mode = S_IFCHR | 0660, .kvm_gid = 108});
  ASSERT_TRUE(plan.drop.has_value());
  EXPECT_THAT(plan.drop->groups, ElementsAre(108u));
}

TEST(PlanPrivilegesTest, RootWithRootOnlyKvmWarnsAndKeepsRoot) {
  PrivilegePlan plan =
      PlanPrivileges({.euid = 0, .accel = Accel::kKvm, .kvm_mode = S_IFCHR | 0600, .kvm_gid = 0});
  EXPECT_FALSE(plan.drop.has_value());
  EXPECT_THAT(plan.warning, HasSubstr("/dev/kvm"));
}

}  // namespace
}  // namespace abox::vmm
