#include "src/vmm/shim_protocol.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/vmm/qemu_launch.h"

namespace abox::vmm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ShimProtocolTest, ConfigRoundTrips) {
  ShimConfig c;
  c.id = "vm-1";
  c.run_dir = "/run/x";
  c.qemu_binary = "/usr/bin/qemu-system-x86_64";
  c.jail_binary = "/opt/abox/abox-jail";
  c.jail = false;
  c.accel = Accel::kKvm;
  c.accel_note = "note";
  c.cpus = 3;
  c.memory_mib = 768;
  c.kernel = "/k";
  c.initrd = "/i";
  c.rootfs = "/r";
  c.kernel_cmdline = "console=ttyS0 quiet";
  c.drop = PrivilegeDrop{.uid = 65534, .gid = 65534, .groups = {108, 109}};
  c.console_log_limit = 12345;
  c.ready_timeout_ms = 777;
  c.tie_to_caller = false;
  c.disk_layers = {"/t/disk.qcow2", "/c/disk.qcow2"};
  c.memory_fd = 9;
  c.memory_shared = false;
  c.incoming = true;
  absl::StatusOr<ShimConfig> back = ShimConfigFromJson(ShimConfigToJson(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->id, "vm-1");
  EXPECT_EQ(back->accel, Accel::kKvm);
  EXPECT_EQ(back->cpus, 3);
  EXPECT_EQ(back->memory_mib, 768);
  EXPECT_EQ(back->kernel_cmdline, "console=ttyS0 quiet");
  ASSERT_TRUE(back->drop.has_value());
  EXPECT_THAT(back->drop->groups, ElementsAre(108u, 109u));
  EXPECT_EQ(back->console_log_limit, 12345u);
  EXPECT_EQ(back->ready_timeout_ms, 777);
  EXPECT_FALSE(back->tie_to_caller);
  EXPECT_EQ(back->jail_binary, "/opt/abox/abox-jail");
  EXPECT_FALSE(back->jail);
  EXPECT_THAT(back->disk_layers, ElementsAre("/t/disk.qcow2", "/c/disk.qcow2"));
  EXPECT_EQ(back->memory_fd, 9);
  EXPECT_FALSE(back->memory_shared);
  EXPECT_TRUE(back->incoming);
}

TEST(ShimProtocolTest, ConfigRejectsBadLayers) {
  ShimConfig c;
  c.accel = Accel::kTcg;
  nlohmann::json j = nlohmann::json::parse(ShimConfigToJson(c));
  for (nlohmann::json layers : {nlohmann::json("x"), nlohmann::json::array({"relative"}),
                                nlohmann::json::array({5}), nlohmann::json::array({""})}) {
    j["disk_layers"] = layers;
    EXPECT_FALSE(ShimConfigFromJson(j.dump()).ok()) << layers;
  }
  j["disk_layers"] = std::vector<std::string>(kMaxDiskLayers + 1, "/l");
  EXPECT_FALSE(ShimConfigFromJson(j.dump()).ok());
}

TEST(ShimProtocolTest, ConfigRejectsBadInput) {
  EXPECT_FALSE(ShimConfigFromJson("not json").ok());
  EXPECT_FALSE(ShimConfigFromJson("[]").ok());
  EXPECT_FALSE(ShimConfigFromJson(R"({"id": 5})").ok());
  ShimConfig c;
  c.accel = Accel::kAuto;  // the shim needs a decided accelerator
  EXPECT_FALSE(ShimConfigFromJson(ShimConfigToJson(c)).ok());
}

TEST(ShimProtocolTest, ReadyRoundTripsAndNeedsPids) {
  absl::StatusOr<ShimReady> ok =
      ShimReadyFromJson(ShimReadyToJson({.ok = true, .shim_pid = 10, .qemu_pid = 11}));
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->ok);
  EXPECT_EQ(ok->qemu_pid, 11);
  absl::StatusOr<ShimReady> failed = ShimReadyFromJson(ShimReadyToJson({.error = "boom"}));
  ASSERT_TRUE(failed.ok());
  EXPECT_FALSE(failed->ok);
  EXPECT_EQ(failed->error, "boom");
  EXPECT_FALSE(ShimReadyFromJson(R"({"ok": true, "shim_pid": 0, "qemu_pid": 0})").ok());
  EXPECT_FALSE(ShimReadyFromJson(R"({"ok": true, "shim_pid": -1e99, "qemu_pid": 1})").ok());
}

TEST(ShimProtocolTest, StateRoundTripsWithExit) {
  VmState s;
  s.id = "vm";
  s.phase = VmPhase::kExited;
  s.shim_pid = 5;
  s.qemu_pid = 6;
  s.accel = Accel::kTcg;
  s.tie_to_caller = false;
  s.started_at_ms = 1700000000000;
  s.exit_signal = 9;
  s.exit_reason = "QEMU killed by signal 9 (SIGKILL)";
  s.exited_at_ms = 1700000000999;
  absl::StatusOr<VmState> back = VmStateFromJson(VmStateToJson(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->phase, VmPhase::kExited);
  EXPECT_EQ(back->exit_signal, 9);
  EXPECT_FALSE(back->exit_code.has_value());
  EXPECT_EQ(back->exit_reason, s.exit_reason);
  EXPECT_EQ(back->started_at_ms, 1700000000000);
  EXPECT_FALSE(back->tie_to_caller);
}

TEST(ShimProtocolTest, StateRejectsOtherVersionsAndPhases) {
  VmState s;
  std::string text = VmStateToJson(s);
  std::string v2 = text;
  v2.replace(v2.find("\"version\": 1"), 12, "\"version\": 2");
  EXPECT_EQ(VmStateFromJson(v2).status().code(), absl::StatusCode::kFailedPrecondition);
  std::string odd = text;
  odd.replace(odd.find("\"starting\""), 10, "\"flying\"");
  EXPECT_FALSE(VmStateFromJson(odd).ok());
}

class RunDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/run_dir_XXXXXX";
    ASSERT_NE(::mkdtemp(dir_.data()), nullptr);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Touch(const std::string& name) { std::ofstream(dir_ + "/" + name) << "x"; }
  std::string dir_;
};

TEST_F(RunDirTest, RemovesWhatItKnows) {
  for (const char* name :
       {kOverlayFile, kQmpSocket, kAgentSocket, kConsoleLog, "console.log.1", kQemuLog, kShimLog,
        kStateFile, kShimConfigFile, ".state.json.tmpAbCdEf"}) {
    Touch(name);
  }
  ASSERT_TRUE(RemoveRunDir(dir_).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_));
  EXPECT_TRUE(RemoveRunDir(dir_).ok());  // already gone
}

TEST_F(RunDirTest, LeavesUnknownFilesAlone) {
  Touch(kConsoleLog);
  Touch("precious.txt");
  absl::Status s = RemoveRunDir(dir_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("precious.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/precious.txt"));
}

TEST_F(RunDirTest, DeletesNothingThroughARunDirSwappedForASymlink) {
  Touch(kStateFile);
  std::string link = dir_ + ".link";
  std::filesystem::create_symlink(dir_, link);
  absl::Status s = RemoveRunDir(link);
  std::filesystem::remove(link);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("symbolic link"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/" + kStateFile));
}

TEST_F(RunDirTest, RefusesRelativeAndRootPaths) {
  EXPECT_EQ(RemoveRunDir("relative/dir").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RemoveRunDir("/").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RemoveRunDir("").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace abox::vmm
