// Faults in the middle of snapshot work, with real VMs (issue 13): a full disk, and kill -9 of
// aboxd or of QEMU in the middle of a checkpoint or a restore. A checkpoint is either listed and
// usable or absent, never half-written; the sandbox is as it was, restored, or (when its own VM
// was killed) failed with the reason; no VM is left running that no sandbox owns.
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"
#include "tests/testing/cli_home_test.h"

namespace abox::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class SnapshotFaultTest : public CliHomeTest {
 protected:
  nlohmann::json Inspect(const std::string& id) {
    nlohmann::json j = nlohmann::json::parse(Abox({"inspect", "--json", id}).out, nullptr, false);
    return j.is_object() ? j : nlohmann::json::object();
  }

  pid_t AboxdPid() {
    nlohmann::json status =
        nlohmann::json::parse(Abox({"daemon", "status", "--json"}).out, nullptr, false);
    return status.is_object() ? status["health"].value("pid", -1) : -1;
  }

  // kill -9 of aboxd, waiting until it is gone.
  static void KillAboxd(pid_t aboxd) {
    ASSERT_GT(aboxd, 0);
    ASSERT_EQ(::kill(aboxd, SIGKILL), 0);
    for (int i = 0; i < 100 && ::kill(aboxd, 0) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // Entries of the sandbox's checkpoints folder that are half-written (dot-dirs).
  std::vector<std::string> HalfWritten(const std::string& id) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(home_.path()) / "checkpoints" / id, ec)) {
      if (e.path().filename().string()[0] == '.') {
        out.push_back(e.path().filename().string());
      }
    }
    return out;
  }

  // Waits (up to 20 s) until a checkpoint of `id` is being written: its half-written folder
  // holds a memory state file QEMU has started to fill. False if none came.
  bool WaitUntilSaving(const std::string& id) {
    for (int i = 0; i < 10000; ++i) {
      std::error_code ec;
      for (const std::string& half : HalfWritten(id)) {
        fs::path state = fs::path(home_.path()) / "checkpoints" / id / half / "state";
        if (fs::file_size(state, ec) > 0 && !ec) {
          return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  // QEMU processes of this home's sandbox `id` (any of its run dirs).
  std::vector<pid_t> VmProcesses(const std::string& id) {
    return ProcessesMatching((fs::path(home_.path()) / "sandboxes" / id).string());
  }
};

// A full disk during a save fails the save, never the sandbox: the checkpoints folder is a
// 32 MiB file system here, too small for a 512 MiB guest's state. The checkpoint and the pause
// fail with the reason, nothing half-written is left or listed, and the sandbox runs on.
TEST_F(SnapshotFaultTest, AFullDiskFailsTheSaveNeverTheSandbox) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "mounting a small tmpfs needs root (CI runs as root)";
  }
  std::string id = Create();
  ASSERT_FALSE(id.empty());
  Sh(id, "echo before > $HOME/file.txt");
  fs::path checkpoints = fs::path(home_.path()) / "checkpoints";
  fs::create_directories(checkpoints);
  ASSERT_EQ(::mount("abox-e2e-full", checkpoints.c_str(), "tmpfs", 0, "size=32m,mode=0700"), 0)
      << std::strerror(errno);
  absl::Cleanup unmount = [&] { (void)::umount2(checkpoints.c_str(), MNT_DETACH); };

  AboxResult checkpoint = Abox({"checkpoint", id, "--name", "too-big"});
  EXPECT_NE(checkpoint.exit_code, 0);
  EXPECT_THAT(checkpoint.err, HasSubstr("could not be saved")) << checkpoint.err;
  EXPECT_THAT(checkpoint.err, HasSubstr("is full: free space there or remove checkpoints"));
  AboxResult paused = Abox({"pause", id});
  EXPECT_NE(paused.exit_code, 0);
  EXPECT_THAT(paused.err, HasSubstr("was not paused")) << paused.err;

  // The sandbox runs on, as it was.
  EXPECT_EQ(Sh(id, "cat $HOME/file.txt"), "before");
  nlohmann::json inspected =
      nlohmann::json::parse(Abox({"inspect", "--json", id}).out, nullptr, false);
  EXPECT_EQ(inspected.is_object() ? inspected.value("state", "") : "", "ready");
  // Nothing half-written is listed or left behind.
  EXPECT_THAT(Abox({"checkpoint", "ls", id}).out, HasSubstr("no checkpoints"));
  std::error_code ec;
  EXPECT_TRUE(!fs::exists(checkpoints / id, ec) || fs::is_empty(checkpoints / id, ec))
      << "a half-written checkpoint was left";
  // With room again, the same checkpoint works.
  std::move(unmount).Invoke();
  AboxResult again = Abox({"checkpoint", id, "--name", "fits"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

// kill -9 of aboxd in the middle of a checkpoint: the checkpoint is either listed and usable or
// absent (never half-written), and the sandbox, whose VM the dead aboxd had paused for the save,
// runs again under the next aboxd.
TEST_F(SnapshotFaultTest, KillingAboxdInTheMiddleOfACheckpointLeavesNoHalfCheckpoint) {
  std::string id = Create();
  ASSERT_FALSE(id.empty());
  StartCounter(id);  // it counts before the save starts
  pid_t aboxd = AboxdPid();
  // aboxd is killed while QEMU writes the checkpoint's memory state.
  AboxResult saving;
  std::thread saver([&] { saving = Abox({"checkpoint", id, "--name", "mid"}); });
  bool mid_save = WaitUntilSaving(id);
  KillAboxd(aboxd);
  saver.join();
  ASSERT_TRUE(mid_save) << "no checkpoint was being written: " << saving.err;
  EXPECT_NE(saving.exit_code, 0) << "the checkpoint finished before aboxd was killed";

  ASSERT_EQ(Abox({"daemon", "start"}).exit_code, 0);
  int after = Count(id);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_GT(Count(id), after) << "the sandbox's VM stayed paused";
  EXPECT_THAT(HalfWritten(id), ::testing::IsEmpty());
  AboxResult listed = Abox({"checkpoint", "ls", id});
  if (listed.out.find("mid") != std::string::npos) {
    AboxResult restored = Abox({"restore", id, "mid"});
    EXPECT_EQ(restored.exit_code, 0) << "a listed checkpoint did not restore: " << restored.err;
  } else {
    EXPECT_THAT(listed.out, HasSubstr("no checkpoints"));
  }
  EXPECT_EQ(Abox({"checkpoint", id, "--name", "after"}).exit_code, 0);
}

// kill -9 of the sandbox's QEMU in the middle of its checkpoint: the save fails with the reason,
// nothing half-written stays, and the sandbox is failed (its VM is gone) with the reason.
TEST_F(SnapshotFaultTest, KillingQemuInTheMiddleOfACheckpointLeavesNoHalfCheckpoint) {
  std::string id = Create();
  ASSERT_FALSE(id.empty());
  Sh(id, "echo before > $HOME/file.txt");
  pid_t qemu = static_cast<pid_t>(Inspect(id).value("vmm_pid", 0));
  ASSERT_GT(qemu, 0);
  // QEMU is killed while it writes the checkpoint's memory state.
  AboxResult saving;
  std::thread saver([&] { saving = Abox({"checkpoint", id, "--name", "mid"}); });
  bool mid_save = WaitUntilSaving(id);
  ASSERT_EQ(::kill(qemu, SIGKILL), 0);
  saver.join();
  ASSERT_TRUE(mid_save) << "no checkpoint was being written: " << saving.err;

  std::string state;
  for (int i = 0; i < 100 && (state = Inspect(id).value("state", "")) != "failed"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(state, "failed") << "the sandbox's VM was killed";
  EXPECT_THAT(Inspect(id).value("failure", ""), ::testing::Not(::testing::IsEmpty()));
  EXPECT_THAT(HalfWritten(id), ::testing::IsEmpty());
  AboxResult listed = Abox({"checkpoint", "ls", id});
  if (saving.exit_code == 0) {
    // The save won the race: then it is whole (listed, with its files).
    EXPECT_THAT(listed.out, HasSubstr("mid")) << listed.err;
  } else {
    EXPECT_THAT(saving.err, HasSubstr("could not be saved")) << saving.err;
    EXPECT_THAT(listed.out, ::testing::Not(HasSubstr("mid")));
  }
  EXPECT_THAT(VmProcesses(id), ::testing::IsEmpty());
  // The sandbox goes cleanly.
  EXPECT_EQ(Abox({"rm", id}).exit_code, 0);
}

// kill -9 of aboxd in the middle of a restore: the next aboxd finds the sandbox either as it was
// (the file written after the checkpoint is there) or restored (it is not), running, with one VM;
// the VM of the side that lost is killed.
TEST_F(SnapshotFaultTest, KillingAboxdInTheMiddleOfARestoreLeavesOneWholeSandbox) {
  std::string id = Create();
  ASSERT_FALSE(id.empty());
  StartCounter(id);
  ASSERT_EQ(Abox({"checkpoint", id, "--name", "cp"}).exit_code, 0);
  Sh(id, "echo after > $HOME/after.txt");
  pid_t aboxd = AboxdPid();
  // aboxd is killed once the restore's new VM runs (before the sandbox switched to it).
  const size_t before = VmProcesses(id).size();
  AboxResult restoring;
  std::thread restorer([&] { restoring = Abox({"restore", id, "cp"}); });
  bool mid_restore = false;
  for (int i = 0; i < 10000 && !(mid_restore = VmProcesses(id).size() > before); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  KillAboxd(aboxd);
  restorer.join();
  ASSERT_TRUE(mid_restore) << "the restore started no VM: " << restoring.err;
  EXPECT_NE(restoring.exit_code, 0) << "the restore finished before aboxd was killed";

  ASSERT_EQ(Abox({"daemon", "start"}).exit_code, 0);
  EXPECT_EQ(Inspect(id).value("state", ""), "ready");
  std::string after = Sh(id, "cat $HOME/after.txt 2>/dev/null || echo restored");
  EXPECT_THAT(after, ::testing::AnyOf("after", "restored"));
  int counted = Count(id);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_GT(Count(id), counted) << "the background process stopped";
  // One VM (a shim and its QEMU) for the sandbox, not the loser's too.
  std::vector<pid_t> vms = VmProcesses(id);
  EXPECT_LE(vms.size(), 2u) << "a VM no sandbox owns runs on";
  // The checkpoint is whole and restores.
  AboxResult restored = Abox({"restore", id, "cp"});
  EXPECT_EQ(restored.exit_code, 0) << restored.err;
  EXPECT_EQ(Sh(id, "cat $HOME/after.txt 2>/dev/null || echo restored"), "restored");
}

// Nothing is lost when QEMU dies: a sandbox failed by a kill -9 of its QEMU, or stopped, runs
// again from one of its checkpoints (processes and files as they were then).
TEST_F(SnapshotFaultTest, ACheckpointBringsBackASandboxWhoseQemuDiedOrThatWasStopped) {
  std::string id = Create();
  ASSERT_FALSE(id.empty());
  StartCounter(id);
  Sh(id, "echo kept > $HOME/kept.txt");
  ASSERT_EQ(Abox({"checkpoint", id, "--name", "good"}).exit_code, 0);
  Sh(id, "echo later > $HOME/later.txt");
  pid_t qemu = static_cast<pid_t>(Inspect(id).value("vmm_pid", 0));
  ASSERT_GT(qemu, 0);
  ASSERT_EQ(::kill(qemu, SIGKILL), 0);
  std::string state;
  for (int i = 0; i < 100 && (state = Inspect(id).value("state", "")) != "failed"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(state, "failed");

  for (const char* how : {"failed", "stopped"}) {
    SCOPED_TRACE(how);
    AboxResult restored = Abox({"restore", id, "good"});
    ASSERT_EQ(restored.exit_code, 0) << restored.err;
    EXPECT_EQ(Inspect(id).value("state", ""), "ready");
    EXPECT_EQ(Sh(id, "cat $HOME/kept.txt; ls $HOME/later.txt 2>/dev/null || echo gone"),
              "kept\ngone");
    int counted = Count(id);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    EXPECT_GT(Count(id), counted) << "the background process did not come back";
    ASSERT_EQ(Abox({"stop", id}).exit_code, 0);  // the next round: from stopped
  }
  // A name it does not have says so, and the sandbox stays stopped.
  AboxResult unknown = Abox({"restore", id, "nope"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.err, HasSubstr("nope"));
  EXPECT_EQ(Inspect(id).value("state", ""), "stopped");
}

}  // namespace
}  // namespace abox::testing
