// Daemon::Create's single-instance gate: of several aboxds started at once on one socket, the
// losers leave before they touch the state database that the winner creates and migrates.
#include "src/daemon/daemon.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/unique_fd.h"
#include "src/daemon/testing/test_daemon.h"
#include "src/http/testing/test_server.h"
#include "tests/testing/fake_vmm.h"

namespace abox::daemon {
namespace {

using ::testing::HasSubstr;

// What a daemon that could not take the socket's lock is built from: a home of its own and
// the fake VMM (so that one that got further would not start QEMU).
absl::StatusOr<std::unique_ptr<Daemon>> CreateDaemon(const std::string& home,
                                                     const std::string& socket_path) {
  DaemonConfig config;
  config.layout.home = home;
  config.layout.cache_dir = home + "/cache";
  config.server.unix_socket_path = socket_path;
  return Daemon::Create(std::move(config), {.vmm = std::make_unique<abox::testing::FakeVmm>()});
}

// Holds "<socket>.lock" the way a running aboxd does: an exclusive flock, its pid inside.
base::UniqueFd HoldSocketLock(const std::string& socket_path) {
  std::filesystem::create_directories(std::filesystem::path(socket_path).parent_path());
  std::string lock_path = socket_path + ".lock";
  base::UniqueFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  EXPECT_TRUE(fd.valid()) << lock_path;
  EXPECT_EQ(::flock(fd.get(), LOCK_EX | LOCK_NB), 0) << lock_path;
  std::string pid = absl::StrCat(::getpid(), "\n");
  EXPECT_EQ(::pwrite(fd.get(), pid.data(), pid.size(), 0), static_cast<ssize_t>(pid.size()));
  return fd;
}

// Regression test: a losing aboxd used to open and migrate state.db before it found the socket
// taken, and failed with "database is locked" while the winner switched the new file to WAL.
TEST(DaemonTest, ADaemonThatLosesTheSocketLockNeverTouchesTheState) {
  http::httptest::TempDir dir;
  const std::string home = dir.path() + "/home";
  const std::string socket_path = dir.path() + "/run/aboxd.sock";
  base::UniqueFd held = HoldSocketLock(socket_path);

  absl::StatusOr<std::unique_ptr<Daemon>> daemon = CreateDaemon(home, socket_path);
  ASSERT_FALSE(daemon.ok());
  EXPECT_EQ(daemon.status().code(), absl::StatusCode::kAlreadyExists) << daemon.status();
  EXPECT_THAT(daemon.status().message(), HasSubstr(absl::StrCat("another aboxd (pid ", ::getpid(),
                                                                ") already serves ", socket_path)));
  // Not even $ABOX_HOME: nothing of the state was created, let alone opened.
  EXPECT_FALSE(std::filesystem::exists(home));
}

TEST(DaemonTest, ASecondDaemonOnARunningDaemonsSocketIsRefusedAndTheFirstServesOn) {
  http::httptest::TempDir dir;
  const std::string first_home = dir.path() + "/first";
  testing::TestDaemon first(first_home);
  first.Start();
  ASSERT_TRUE(std::filesystem::exists(first_home + "/state.db"));

  const std::string second_home = dir.path() + "/second";
  absl::StatusOr<std::unique_ptr<Daemon>> second =
      CreateDaemon(second_home, first_home + "/run/aboxd.sock");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists) << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr(absl::StrCat("(pid ", ::getpid(), ")")));
  EXPECT_FALSE(std::filesystem::exists(second_home));

  std::unique_ptr<http::httptest::HttpTestClient> client = first.Connect();
  ASSERT_NE(client, nullptr);
  absl::StatusOr<http::httptest::Response> health = client->Request("GET", "/v1/health", "");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->status, 200);
}

TEST(DaemonTest, ADaemonStartsOnceTheLockIsFree) {
  http::httptest::TempDir dir;
  const std::string home = dir.path() + "/home";
  {
    base::UniqueFd held = HoldSocketLock(home + "/run/aboxd.sock");
    EXPECT_EQ(CreateDaemon(home, home + "/run/aboxd.sock").status().code(),
              absl::StatusCode::kAlreadyExists);
    EXPECT_FALSE(std::filesystem::exists(home + "/state.db"));
  }
  testing::TestDaemon daemon(home);
  daemon.Start();
  EXPECT_TRUE(std::filesystem::exists(home + "/state.db"));
}

}  // namespace
}  // namespace abox::daemon
