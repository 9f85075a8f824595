#include "src/base/child_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"

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

// The descriptors a running process has open, from /proc/<pid>/fd.
std::set<int> OpenFds(pid_t pid) {
  std::set<int> fds;
  std::string dir_path = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = ::opendir(dir_path.c_str());
  if (dir == nullptr) {
    ADD_FAILURE() << "opendir(" << dir_path << ") failed";
    return fds;
  }
  while (dirent* e = ::readdir(dir)) {  // NOLINT(concurrency-mt-unsafe): private DIR stream
    std::string name = e->d_name;
    if (name != "." && name != "..") {
      fds.insert(std::stoi(name));
    }
  }
  ::closedir(dir);
  return fds;
}

std::vector<std::string> Environ(pid_t pid) {
  auto data = ReadFile("/proc/" + std::to_string(pid) + "/environ");
  if (!data.ok()) {
    ADD_FAILURE() << data.status();
    return {};
  }
  return absl::StrSplit(*data, '\0', absl::SkipEmpty());
}

// Waits (up to 5 s) until the child `sleep` is in its sleep: right after execve it is still
// starting (setlocale opens and closes locale files), and its descriptor table is not yet what
// it keeps. Where the kernel hides wchan, waits a fixed 300 ms instead.
void WaitUntilAsleep(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/wchan";
  for (int i = 0; i < 500; ++i) {
    absl::StatusOr<std::string> wchan = ReadFile(path);
    if (wchan.ok() && absl::StrContains(*wchan, "nanosleep")) {
      return;
    }
    if (wchan.ok() && *wchan == "0") {
      ::usleep(300'000);
      return;
    }
    ::usleep(10'000);
  }
  ADD_FAILURE() << "child " << pid << " did not reach its sleep within 5 s";
}

// Puts a copy of `fd` at `number` or above (without O_CLOEXEC unless asked), returns it.
int DupAt(int fd, int number, bool cloexec) {
  int copy = ::fcntl(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, number);
  EXPECT_GE(copy, number);
  return copy;
}

// A child with an explicit environment and close_other_fds has exactly the environment it was
// given and the descriptors it was handed (0-2 and keep_fds), even when this process holds
// descriptors without O_CLOEXEC below, between and above them (as one inherited from whoever
// started it would be).
TEST(ChildProcessTest, CloseOtherFdsAndExplicitEnvLeaveTheChildOnlyWhatItWasGiven) {
  ::setenv("ABOX_TEST_SECRET", "do-not-inherit", 1);  // NOLINT(concurrency-mt-unsafe)
  UniqueFd source(::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(source);
  // Leaks: not close-on-exec, at numbers below, between and above the kept ones.
  UniqueFd leak_low(DupAt(source.get(), 20, /*cloexec=*/false));
  UniqueFd kept_a(DupAt(source.get(), 40, /*cloexec=*/true));
  UniqueFd leak_mid(DupAt(source.get(), 60, /*cloexec=*/false));
  UniqueFd kept_b(DupAt(source.get(), 80, /*cloexec=*/true));
  UniqueFd leak_high(DupAt(source.get(), 900, /*cloexec=*/false));

  SpawnOptions o;
  o.argv = {"sleep", "100"};
  o.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"};
  o.keep_fds = {kept_a.get(), kept_b.get()};
  o.close_other_fds = true;
  auto child = ChildProcess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  WaitUntilAsleep(child->pid());
  EXPECT_EQ(OpenFds(child->pid()), (std::set<int>{0, 1, 2, kept_a.get(), kept_b.get()}));
  EXPECT_THAT(Environ(child->pid()), ::testing::ElementsAre("PATH=/usr/bin:/bin", "LANG=C.UTF-8"));
  child->KillAndReap();

  // The same spawn without the option lets the leaks through (so the check above can fail),
  // and without `env` the child inherits ours.
  o.close_other_fds = false;
  o.env.reset();
  auto leaky = ChildProcess::Spawn(o);
  ASSERT_TRUE(leaky.ok()) << leaky.status();
  WaitUntilAsleep(leaky->pid());
  std::set<int> fds = OpenFds(leaky->pid());
  EXPECT_TRUE(fds.count(leak_low.get()) && fds.count(leak_mid.get()) && fds.count(leak_high.get()))
      << "the leak descriptors did not reach a child spawned without close_other_fds";
  EXPECT_THAT(Environ(leaky->pid()), ::testing::Contains("ABOX_TEST_SECRET=do-not-inherit"));
  leaky->KillAndReap();
  ::unsetenv("ABOX_TEST_SECRET");  // NOLINT(concurrency-mt-unsafe)
}

}  // namespace
}  // namespace abox::base
