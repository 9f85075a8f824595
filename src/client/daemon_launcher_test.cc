// The daemon launcher with the real daemon over a fake VMM (aboxd-fake-vmm, from
// src/daemon/testing, in a $ABOX_HOME of the test's own) and scripts that fail the way aboxd
// does.
#include "src/client/daemon_launcher.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <future>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/http/testing/test_server.h"

namespace abox::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class DaemonLauncherTest : public ::testing::Test {
 protected:
  DaemonLauncherTest() {
    options_.socket_path = dir_.path() + "/run/aboxd.sock";
    options_.log_path = dir_.path() + "/home/logs/aboxd.log";
    options_.aboxd_binary = ABOXD_FAKE_VMM;
    // The daemons this test starts inherit the environment: keep their state in the test's dir.
    ::setenv("ABOX_HOME", (dir_.path() + "/home").c_str(), 1);        // NOLINT: before any thread
    ::setenv("ABOX_CACHE_DIR", (dir_.path() + "/cache").c_str(), 1);  // NOLINT: likewise
  }
  ~DaemonLauncherTest() override {
    // Also the daemon of a test that failed before it could note the pid.
    if (absl::StatusOr<pid_t> running = RunningDaemonPid(options_.socket_path); running.ok()) {
      started_.push_back(*running);
    }
    for (pid_t pid : started_) {
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);  // our children: reap them
    }
  }
  // Remembers a daemon this test started, to kill and reap it at the end.
  void Started(pid_t pid) { started_.push_back(pid); }

  // The daemon's log once it holds `text` (a daemon answers as soon as it accepts, and may log
  // that it is ready a moment later), or after 5 s.
  std::string LogOnceItHas(const std::string& text) {
    std::string log;
    for (int i = 0; i < 500; ++i) {
      log = base::ReadFile(options_.log_path).value_or("");
      if (absl::StrContains(log, text)) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return log;
  }

  // A script standing in for aboxd.
  std::string Script(const std::string& name, const std::string& body) {
    std::string path = dir_.path() + "/" + name;
    EXPECT_TRUE(base::WriteFileAtomic(path, "#!/bin/sh\n" + body + "\n", 0755).ok());
    return path;
  }

  http::httptest::TempDir dir_;
  DaemonOptions options_;
  std::vector<pid_t> started_;
};

TEST_F(DaemonLauncherTest, StartsTheDaemonWhenNothingListensThenStopsIt) {
  absl::StatusOr<std::unique_ptr<ApiClient>> client = ConnectOrStartDaemon(options_);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<api::Health> health = CheckHealth(**client);
  ASSERT_TRUE(health.ok()) << health.status();
  absl::StatusOr<pid_t> pid = RunningDaemonPid(options_.socket_path);
  ASSERT_TRUE(pid.ok()) << pid.status();
  Started(*pid);
  EXPECT_EQ(health->pid, *pid);

  // Detached: its own session, and its output went to the log, created owner-only.
  EXPECT_EQ(::getsid(*pid), *pid);
  struct stat st {};
  ASSERT_EQ(::stat(options_.log_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_THAT(LogOnceItHas("ready on " + options_.socket_path),
              HasSubstr("ready on " + options_.socket_path));

  // A second client finds the running daemon instead of starting another.
  absl::StatusOr<std::unique_ptr<ApiClient>> again = ConnectOrStartDaemon(options_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*RunningDaemonPid(options_.socket_path), *pid);

  absl::StatusOr<pid_t> stopped = StopDaemon(options_);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(*stopped, *pid);
  EXPECT_EQ(RunningDaemonPid(options_.socket_path).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(IsNothingListening(CheckHealth(**again).status()));
  // aboxd logs its last line after it let go of the socket: once it exited (our child), the
  // log is complete.
  int status = 0;
  EXPECT_EQ(::waitpid(*pid, &status, 0), *pid);
  started_.clear();
  EXPECT_THAT(*base::ReadFile(options_.log_path), HasSubstr("aboxd stopped"));
}

TEST_F(DaemonLauncherTest, ReportsWhyTheDaemonExitedFromThisRunsLogLines) {
  std::filesystem::create_directories(dir_.path() + "/home/logs");
  ASSERT_TRUE(base::WriteFileAtomic(options_.log_path, "old run: all fine\n", 0600).ok());
  options_.extra_args = {"--fail", "socket dir not writable: /x/run (Permission denied)"};
  absl::StatusOr<std::unique_ptr<ApiClient>> client = ConnectOrStartDaemon(options_);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(), HasSubstr("exited with exit code 3"));
  EXPECT_THAT(client.status().message(), HasSubstr("  socket dir not writable: /x/run"));
  EXPECT_THAT(client.status().message(), HasSubstr(options_.log_path));
  EXPECT_THAT(client.status().message(), Not(HasSubstr("old run")));
}

TEST_F(DaemonLauncherTest, ScriptThatExitsWithoutLoggingIsReportedToo) {
  options_.aboxd_binary = Script("aboxd", "exit 7");
  absl::StatusOr<pid_t> pid = StartDaemon(options_);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(), HasSubstr("exit code 7"));
  EXPECT_THAT(pid.status().message(), HasSubstr("logged nothing to " + options_.log_path));
}

TEST_F(DaemonLauncherTest, PassesSocketAndFlagsToAboxd) {
  std::string args_file = dir_.path() + "/args";
  options_.aboxd_binary =
      Script("aboxd", "echo \"$@\" > " + args_file + "; echo 'port in use' >&2; exit 1");
  options_.extra_args = {"--max-cpus", "4"};
  absl::StatusOr<pid_t> pid = StartDaemon(options_);
  EXPECT_THAT(pid.status().message(), HasSubstr("port in use"));
  EXPECT_EQ(*base::ReadFile(args_file), "--socket " + options_.socket_path + " --max-cpus 4\n");
}

TEST_F(DaemonLauncherTest, GivesUpAfterTheTimeoutAndSaysTheDaemonStillRuns) {
  options_.extra_args = {"--hang"};
  options_.start_timeout = absl::Milliseconds(300);
  absl::StatusOr<pid_t> pid = StartDaemon(options_);
  ASSERT_EQ(pid.status().code(), absl::StatusCode::kDeadlineExceeded) << pid.status();
  std::string message(pid.status().message());
  EXPECT_THAT(message, HasSubstr("did not answer on " + options_.socket_path));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(message, m, std::regex("kill (\\d+)"))) << message;
  Started(std::stoi(m[1]));
}

TEST_F(DaemonLauncherTest, NoAutostartSaysHowToStartIt) {
  options_.autostart = false;
  absl::StatusOr<std::unique_ptr<ApiClient>> client = ConnectOrStartDaemon(options_);
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(client.status().message(), HasSubstr("run `abox daemon start`"));
  EXPECT_EQ(RunningDaemonPid(options_.socket_path).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(DaemonLauncherTest, MissingOrNonExecutableAboxdIsAnError) {
  options_.aboxd_binary = dir_.path() + "/nope";
  EXPECT_THAT(StartDaemon(options_).status().message(), HasSubstr("is not an executable"));
}

TEST_F(DaemonLauncherTest, StartRefusesWhenOneIsRunningAndStopWhenNoneIs) {
  EXPECT_EQ(StopDaemon(options_).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<pid_t> pid = StartDaemon(options_);
  ASSERT_TRUE(pid.ok()) << pid.status();
  Started(*pid);
  absl::StatusOr<pid_t> second = StartDaemon(options_);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(second.status().message(), HasSubstr(absl::StrCat("pid ", *pid)));
}

TEST_F(DaemonLauncherTest, ConcurrentClientsEndUpWithOneDaemon) {
  auto connect = [this] { return ConnectOrStartDaemon(options_).status(); };
  auto a = std::async(std::launch::async, connect);
  auto b = std::async(std::launch::async, connect);
  absl::Status first = a.get();
  absl::Status second = b.get();
  EXPECT_TRUE(first.ok()) << first;
  EXPECT_TRUE(second.ok()) << second;
  absl::StatusOr<pid_t> pid = RunningDaemonPid(options_.socket_path);
  ASSERT_TRUE(pid.ok()) << pid.status();
  Started(*pid);
}

TEST_F(DaemonLauncherTest, StopGivesUpOnADaemonThatIgnoresSigtermAndSaysHowToForceIt) {
  options_.extra_args = {"--ignore-sigterm"};
  options_.stop_timeout = absl::Milliseconds(200);
  absl::StatusOr<pid_t> pid = StartDaemon(options_);
  ASSERT_TRUE(pid.ok()) << pid.status();
  Started(*pid);
  absl::StatusOr<pid_t> stopped = StopDaemon(options_);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(stopped.status().message(), HasSubstr(absl::StrCat("kill -KILL ", *pid)));
}

TEST(LogTailTest, LastLinesAfterTheOffset) {
  http::httptest::TempDir dir;
  std::string path = dir.path() + "/log";
  ASSERT_TRUE(base::WriteFileAtomic(path, "before\none\n\ntwo\nthree\n", 0600).ok());
  EXPECT_EQ(LogTail(path, 7, 2), "  two\n  three");
  EXPECT_EQ(LogTail(path, 7, 10), "  one\n  two\n  three");
  EXPECT_EQ(LogTail(path, 100, 10), "");
  EXPECT_EQ(LogTail(dir.path() + "/missing", 0, 10), "");
}

TEST(AboxdArgvTest, TheSocketThenExtraFlags) {
  DaemonOptions options;
  options.socket_path = "/run/user/1/abox/aboxd.sock";
  options.extra_args = {"--max-memory", "4096"};
  EXPECT_EQ(AboxdArgv("/opt/abox/bin/aboxd", options),
            (std::vector<std::string>{"/opt/abox/bin/aboxd", "--socket",
                                      "/run/user/1/abox/aboxd.sock", "--max-memory", "4096"}));
}

}  // namespace
}  // namespace abox::client
