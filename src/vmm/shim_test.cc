#include "src/vmm/shim.h"

#include <csignal>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::vmm {
namespace {

using ::testing::HasSubstr;

TEST(DescribeQemuExitTest, GuestPowerOff) {
  EXPECT_EQ(DescribeQemuExit({.exit_code = 0}, "[    0.8] reboot: Power down\n", ""),
            "guest powered off");
}

TEST(DescribeQemuExitTest, GuestPanicQuotesThePanicLine) {
  std::string console =
      "[    1.0] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100\n"
      "[    1.1] Rebooting in 1 seconds..\n";
  EXPECT_EQ(DescribeQemuExit({.exit_code = 0}, console, ""),
            "guest kernel panic: Kernel panic - not syncing: Attempted to kill init! "
            "exitcode=0x00000100");
}

TEST(DescribeQemuExitTest, ConsoleTextIsSanitized) {
  std::string console = "Kernel panic - not syncing: \x1b[31mred\x01" + std::string(500, 'z');
  std::string reason = DescribeQemuExit({.exit_code = 0}, console, "");
  EXPECT_THAT(reason, HasSubstr("?[31mred?"));
  EXPECT_LT(reason.size(), 250u);
}

TEST(DescribeQemuExitTest, QemuFailureQuotesItsLastLine) {
  EXPECT_EQ(DescribeQemuExit({.exit_code = 1}, "",
                             "2026-01-01T00:00:00Z qemu-system-x86_64: warning: x\n"
                             "2026-01-01T00:00:00Z qemu-system-x86_64: could not load kernel\n"),
            "QEMU failed with exit code 1: 2026-01-01T00:00:00Z qemu-system-x86_64: could not "
            "load kernel");
}

TEST(DescribeQemuExitTest, Signals) {
  EXPECT_EQ(DescribeQemuExit({.signal = SIGKILL}, "", ""), "QEMU killed by signal 9 (SIGKILL)");
  EXPECT_EQ(DescribeQemuExit({.exit_code = 0}, "", ""), "QEMU exited with code 0");
}

TEST(ParseShimArgsTest, AcceptsTheFlagsQemuVmmPasses) {
  const char* argv[] = {"abox-shim", "--run-dir", "/r", "--ready-fd", "5", "--caller-fd", "6"};
  absl::StatusOr<ShimArgs> args = ParseShimArgs(7, argv);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->run_dir, "/r");
  EXPECT_EQ(args->ready_fd, 5);
  EXPECT_EQ(args->caller_fd, 6);
}

TEST(ParseShimArgsTest, RejectsBadUsage) {
  const char* no_ready[] = {"abox-shim", "--run-dir", "/r"};
  EXPECT_FALSE(ParseShimArgs(3, no_ready).ok());
  const char* stdio_fd[] = {"abox-shim", "--run-dir", "/r", "--ready-fd", "1"};
  EXPECT_FALSE(ParseShimArgs(5, stdio_fd).ok());
  const char* unknown[] = {"abox-shim", "--frobnicate", "1"};
  EXPECT_FALSE(ParseShimArgs(3, unknown).ok());
  const char* dangling[] = {"abox-shim", "--run-dir"};
  EXPECT_FALSE(ParseShimArgs(2, dangling).ok());
}

}  // namespace
}  // namespace abox::vmm
