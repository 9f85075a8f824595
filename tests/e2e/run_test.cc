// End-to-end: the real abox binary boots real microVMs (TCG here, KVM where usable).
#include <signal.h>

#include <set>
#include <thread>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/abox_runner.h"

namespace abox::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

AboxResult RunInVm(std::vector<std::string> argv, std::string stdin_data = "") {
  AboxCall call;
  call.args = {"run", "--"};
  call.args.insert(call.args.end(), argv.begin(), argv.end());
  call.stdin_data = std::move(stdin_data);
  return RunAbox(call);
}

TEST(RunTest, SeparatesStdoutAndStderrAndReturnsExitCode) {
  auto r = RunInVm({"sh", "-c", "echo to-out; echo to-err >&2; exit 42"});
  EXPECT_EQ(r.exit_code, 42) << r.err;
  EXPECT_EQ(r.out, "to-out\n");
  EXPECT_THAT(r.err, HasSubstr("to-err\n"));
  EXPECT_THAT(r.err, Not(HasSubstr("to-out")));
}

TEST(RunTest, RunsInItsOwnKernelWithoutNetworkCard) {
  auto r = RunInVm({"sh", "-c", "uname -r; ls /sys/class/net; cat /proc/1/comm"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_THAT(lines[0], HasSubstr("cloud-amd64"));  // the guest's Debian cloud kernel
  EXPECT_EQ(lines[1], "lo");                        // no NIC: loopback only
  EXPECT_EQ(lines[2], "abox-guest");                // our agent is PID 1
}

TEST(RunTest, ReportsSignalDeathAs128PlusN) {
  EXPECT_EQ(RunInVm({"sh", "-c", "kill -TERM $$"}).exit_code, 128 + SIGTERM);
  EXPECT_EQ(RunInVm({"sh", "-c", "kill -KILL $$"}).exit_code, 128 + SIGKILL);
}

TEST(RunTest, CommandNotFoundIs127WithReason) {
  auto r = RunInVm({"no-such-command-abox"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_THAT(r.err, HasSubstr("no-such-command-abox"));
  EXPECT_THAT(r.err, HasSubstr("not found"));
}

TEST(RunTest, ForwardsStdin) {
  auto r = RunInVm({"sh", "-c", "tr a-z A-Z; echo done"}, "hello from the host\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "HELLO FROM THE HOST\ndone\n");
  std::string big(8 << 20, 'x');
  auto w = RunInVm({"wc", "-c"}, big);
  EXPECT_EQ(w.exit_code, 0) << w.err;
  EXPECT_EQ(w.out, std::to_string(big.size()) + "\n");
}

TEST(RunTest, EnvWorkdirAndUsers) {
  AboxCall call;
  call.args = {"run",       "-e",   "FOO=bar baz",
               "--workdir", "/tmp", "--",
               "sh",        "-c",   "echo \"$FOO\"; pwd; id -un; id -u"};
  auto r = RunAbox(call);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "bar baz\n/tmp\nagent\n1000\n");
  call.args = {"run", "--root", "--", "id", "-u"};
  r = RunAbox(call);
  EXPECT_EQ(r.out, "0\n") << r.err;
}

TEST(RunTest, UnprivilegedUserCannotReplaceTheAgent) {
  auto r = RunInVm({"sh", "-c",
                    "cp /bin/true /run/abox/abox-guest 2>/dev/null && echo REPLACED; "
                    "rm -f /run/abox/abox-guest 2>/dev/null && echo REMOVED; "
                    "kill -9 1 2>/dev/null && echo KILLED; echo checked"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "checked\n");
}

TEST(RunTest, TimeoutKillsTheWholeProcessGroup) {
  AboxCall call;
  call.args = {"run", "--timeout", "2", "--", "sh", "-c", "sleep 100 & sleep 100"};
  auto r = RunAbox(call);
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_THAT(r.err, HasSubstr("timed out"));
}

TEST(RunTest, ReapsZombiesAsPid1) {
  // Orphans re-parent to PID 1 (the agent), which must reap them.
  auto r = RunInVm({"sh", "-c",
                    "for i in 1 2 3 4 5 6 7 8; do (sleep 0.2 &) ; done; sleep 2; "
                    "ps -eo stat= | grep -c '^Z' || true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0\n");
}

TEST(RunTest, HundredMegabytesOfStdoutWithFlatHostMemory) {
  AboxCall small;
  small.args = {"run", "--", "true"};
  auto baseline = RunAbox(small);
  ASSERT_EQ(baseline.exit_code, 0) << baseline.err;

  AboxCall big;
  big.args = {"run", "--", "head", "-c", "100000000", "/dev/zero"};
  uint64_t bytes = 0;
  big.count_stdout_only = true;
  big.stdout_bytes = &bytes;
  auto r = RunAbox(big);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(bytes, 100000000u);
  // The protocol bounds buffering to one 256 KiB window per stream, so abox's memory must not
  // grow with the output: allow 32 MiB of slack over the `true` run.
  EXPECT_LT(r.peak_rss_kib, baseline.peak_rss_kib + 32 * 1024)
      << "baseline " << baseline.peak_rss_kib << " KiB";
}

TEST(RunTest, ThreeVmsAtOnce) {
  std::vector<AboxResult> results(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&results, i] {
      AboxCall call;
      call.args = {"run", "--", "cat", "/proc/sys/kernel/random/boot_id"};
      results[i] = RunAbox(call);
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  std::set<std::string> boot_ids;
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    boot_ids.insert(r.out);
  }
  EXPECT_EQ(boot_ids.size(), 3u) << "each run must be its own VM";
}

TEST(RunTest, TtyGivesTheCommandATerminal) {
  AboxCall call;
  call.args = {"run", "-t", "--", "sh", "-c", "tty; stty size; echo to-err >&2"};
  auto r = RunAbox(call);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Not a terminal on our side, so the default size; stderr arrives merged through the PTY.
  EXPECT_THAT(r.out, HasSubstr("/dev/pts/"));
  EXPECT_THAT(r.out, HasSubstr("24 80"));
  EXPECT_THAT(r.out, HasSubstr("to-err"));
}

TEST(RunTest, MissingImageSaysWhatToRun) {
  AboxCall call;
  call.args = {"run", "--image", "no-such-image", "--", "true"};
  auto r = RunAbox(call);
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_THAT(r.err, HasSubstr("abox image build"));
}

}  // namespace
}  // namespace abox::testing
