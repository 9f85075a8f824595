#include "src/base/unix_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::base {
namespace {

using ::testing::HasSubstr;

class UnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "/unix_socket_XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = std::filesystem::path(templ).lexically_normal().string();
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Whether `fd` has a connection waiting to be accepted.
  static bool Accepts(int fd) {
    UniqueFd conn(::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC));
    return conn.valid();
  }

  std::string dir_;
};

TEST_F(UnixSocketTest, ConnectsToAListenerOwnerOnlyNonBlockingAndCloseOnExec) {
  const std::string path = dir_ + "/s.sock";
  auto listener = ListenUnixSocket(path);
  ASSERT_TRUE(listener.ok()) << listener.status();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto conn = ConnectUnixSocket(path);
  ASSERT_TRUE(conn.ok()) << conn.status();
  for (int fd : {listener->get(), conn->get()}) {
    EXPECT_NE(::fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  }
  EXPECT_TRUE(Accepts(listener->get()));
}

TEST_F(UnixSocketTest, WorksWithPathsLongerThanSunPath) {
  const std::string deep = dir_ + "/" + std::string(100, 'd');
  std::filesystem::create_directories(deep);
  const std::string path = deep + "/long.sock";  // over the 108 bytes of sun_path
  auto listener = ListenUnixSocket(path);
  ASSERT_TRUE(listener.ok()) << listener.status();
  EXPECT_TRUE(std::filesystem::is_socket(path));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // chmod reached the file through /proc/self/fd
  auto conn = ConnectUnixSocket(path);
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_TRUE(Accepts(listener->get()));
}

TEST_F(UnixSocketTest, RefusesAFileNameTooLongEvenThroughItsDirectory) {
  const std::string path = dir_ + "/" + std::string(100, 'n') + ".sock";
  auto listener = ListenUnixSocket(path);
  EXPECT_EQ(listener.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(listener.status().message()), HasSubstr("too long"));
}

TEST_F(UnixSocketTest, SaysWhetherTheSocketIsMissingDeadOrBusy) {
  const std::string path = dir_ + "/s.sock";
  EXPECT_EQ(ConnectUnixSocket(path).status().code(), absl::StatusCode::kNotFound);

  // Backlog 0 queues one connection; the next finds it full.
  auto listener = ListenUnixSocket(path, /*backlog=*/0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  auto first = ConnectUnixSocket(path);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = ConnectUnixSocket(path);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted) << second.status();

  listener->reset();  // the server dies; its socket file stays
  EXPECT_EQ(ConnectUnixSocket(path).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(UnixSocketTest, DoesNotReplaceAnExistingFile) {
  const std::string path = dir_ + "/s.sock";
  ASSERT_TRUE(ListenUnixSocket(path).ok());
  auto again = ListenUnixSocket(path);
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("bind(" + path + ")"));
}

}  // namespace
}  // namespace abox::base
