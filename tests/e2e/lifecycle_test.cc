// End-to-end: failures, interruption and cleanup. Nothing may survive an abox run.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "tests/testing/abox_runner.h"

namespace abox::testing {
namespace {

using ::testing::HasSubstr;

TEST(LifecycleTest, NormalRunLeavesNothingBehind) {
  AboxCall call;
  call.args = {"run", "--", "true"};
  EXPECT_EQ(RunAbox(call).exit_code, 0);
  ExpectNoLeftovers();
}

TEST(LifecycleTest, SigkillOfAboxLeavesNoProcessOrFile) {
  AboxCall call;
  call.args = {"run", "--", "sh", "-c", "echo ready; sleep 300"};
  call.when_output = "ready";
  call.on_output = [](pid_t pid) { ::kill(pid, SIGKILL); };
  auto r = RunAbox(call);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_EQ(r.out, "ready\n");
  ExpectNoLeftovers();
}

TEST(LifecycleTest, KernelPanicIsReportedWithConsoleLog) {
  AboxCall call;
  call.args = {"run", "--root", "--", "sh", "-c", "echo c > /proc/sysrq-trigger; sleep 100"};
  auto r = RunAbox(call);
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_THAT(r.err, HasSubstr("Kernel panic"));
  EXPECT_THAT(r.err, HasSubstr("console log"));
  // The console log it names exists and holds the panic.
  auto pos = r.err.find(AboxHome() + "/logs/");
  ASSERT_NE(pos, std::string::npos) << r.err;
  std::string path = r.err.substr(pos, r.err.find_first_of(" \n)", pos) - pos);
  auto log = base::ReadFile(path);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_THAT(*log, HasSubstr("Kernel panic"));
  ExpectNoLeftovers();
}

TEST(LifecycleTest, QemuCrashDuringACommandIsReportedWithConsoleLog) {
  AboxCall call;
  call.args = {"run", "--", "sh", "-c", "echo ready; sleep 300"};
  call.when_output = "ready";
  call.on_output = [](pid_t) {
    // The VM of this run is the only QEMU started from the test's own ABOX_HOME: the child
    // of the shim whose command line names a run dir there (QEMU itself gets descriptors).
    for (pid_t shim : ProcessesMatching(AboxHome() + "/sandboxes/")) {
      for (pid_t qemu : ChildrenOf(shim)) {
        auto cmdline = base::ReadFile("/proc/" + std::to_string(qemu) + "/cmdline");
        std::string argv0 = cmdline.ok() ? cmdline->substr(0, cmdline->find('\0')) : "";
        if (std::filesystem::path(argv0).filename().string().rfind("qemu-system", 0) == 0) {
          ::kill(qemu, SIGKILL);
        }
      }
    }
  };
  auto r = RunAbox(call);
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_THAT(r.err, HasSubstr("VM stopped"));
  EXPECT_THAT(r.err, HasSubstr("console log: " + AboxHome() + "/logs/"));
  ExpectNoLeftovers();
}

TEST(LifecycleTest, FirstCtrlCGoesToTheCommand) {
  AboxCall call;
  call.args = {"run", "--", "sh", "-c",
               "trap 'echo got-int; exit 3' INT; echo ready; while :; do sleep 0.1; done"};
  call.when_output = "ready";
  call.on_output = [](pid_t pid) { ::kill(pid, SIGINT); };
  auto r = RunAbox(call);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.out, "ready\ngot-int\n");
  ExpectNoLeftovers();
}

TEST(LifecycleTest, SecondCtrlCTearsTheVmDown) {
  AboxCall call;
  call.args = {"run", "--", "sh", "-c", "trap '' INT; echo ready; sleep 300"};
  call.when_output = "ready";
  call.on_output = [](pid_t pid) {
    ::kill(pid, SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::kill(pid, SIGINT);
  };
  auto r = RunAbox(call);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  ExpectNoLeftovers();
}

TEST(LifecycleTest, MissingQemuNamesThePackage) {
  std::string empty_bin = ::testing::TempDir() + "/abox-empty-path";
  std::filesystem::create_directories(empty_bin);
  AboxCall call;
  call.args = {"run", "--", "true"};
  call.env["PATH"] = empty_bin;
  auto r = RunAbox(call);
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_THAT(r.err, HasSubstr("qemu-system-x86"));
  EXPECT_THAT(r.err, HasSubstr("apt-get install"));
}

}  // namespace
}  // namespace abox::testing
