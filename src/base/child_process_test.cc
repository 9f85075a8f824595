#include "src/base/child_process.h"

#include <signal.h>

#include "gtest/gtest.h"

namespace abox::base {
namespace {

TEST(ChildProcessTest, RunCommandCapturesOutputAndExitCode) {
  auto r = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->status.exit_code, 3);
  EXPECT_EQ(r->status.ShellCode(), 3);
}

TEST(ChildProcessTest, ReportsMissingExecutable) {
  auto r = ChildProcess::Spawn({.argv = {"/nonexistent/abox-no-such-binary"}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

TEST(ChildProcessTest, DestructorKillsAndReapsRunningChild) {
  pid_t pid;
  {
    auto child = ChildProcess::Spawn({.argv = {"sleep", "100"}});
    ASSERT_TRUE(child.ok()) << child.status();
    pid = child->pid();
    EXPECT_TRUE(child->running());
  }
  // Reaped: the pid no longer names our child.
  EXPECT_EQ(::kill(pid, 0), -1);
}

TEST(ChildProcessTest, WaitTimesOutThenReportsSignal) {
  auto child = ChildProcess::Spawn({.argv = {"sleep", "100"}});
  ASSERT_TRUE(child.ok());
  auto w = child->Wait(std::chrono::milliseconds(50));
  EXPECT_EQ(w.status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(child->Kill(SIGTERM).ok());
  auto s = child->Wait();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->signal, SIGTERM);
  EXPECT_EQ(s->ShellCode(), 128 + SIGTERM);
}

}  // namespace
}  // namespace abox::base
