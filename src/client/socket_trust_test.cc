// The client against hostile listeners on aboxd's socket path: a server of another uid (a child
// that drops to nobody before listen()), socket directories open to others or owned by another
// user, and listeners that are not aboxd, which `abox daemon stop` must not signal.
#include "src/client/socket_trust.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/base/unix_socket.h"
#include "src/client/api_client.h"
#include "src/client/daemon_launcher.h"
#include "src/http/testing/test_server.h"

namespace abox::client {
namespace {

using ::testing::HasSubstr;

constexpr uid_t kNobody = 65534;

// A healthy-looking answer to any request: what a hostile server would say to be believed.
constexpr char kFakeHealth[] =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n"
    "Connection: close\r\n\r\n{\"status\":\"ok\"}";

bool Alive(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == 0;
}

// A child process of this test that listens on a unix socket; killed and reaped at the end.
class Listener final {
 public:
  // Binds `path` here, then in a child: optionally drops to `uid` (so that SO_PEERCRED, taken
  // at listen(), names it), listens, and answers every connection with kFakeHealth. With
  // `lock_path`, the child also holds that flock with its own pid written in it, as aboxd does.
  Listener(const std::string& path, std::optional<uid_t> uid, const std::string& lock_path = "") {
    base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    base::UniqueFd lock;
    if (!lock_path.empty()) {
      lock.reset(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
      EXPECT_EQ(::flock(lock.get(), LOCK_EX | LOCK_NB), 0);  // shared with the child
    }
    int ready[2];
    EXPECT_EQ(::pipe2(ready, O_CLOEXEC), 0);
    pid_ = ::fork();
    if (pid_ == 0) {  // async-signal-safe calls only from here on
      ::close(ready[0]);
      if (uid && (::setgid(*uid) != 0 || ::setuid(*uid) != 0)) {
        ::_exit(2);
      }
      if (::listen(fd.get(), 16) != 0) {
        ::_exit(3);
      }
      (void)!::write(ready[1], "x", 1);
      for (;;) {
        int c = ::accept(fd.get(), nullptr, nullptr);
        if (c >= 0) {
          char buf[4096];
          if (::read(c, buf, sizeof(buf)) > 0) {  // a refusing client sends nothing and leaves
            (void)!::send(c, kFakeHealth, sizeof(kFakeHealth) - 1, MSG_NOSIGNAL);
          }
          ::close(c);
        }
      }
    }
    ::close(ready[1]);
    char byte = 0;
    EXPECT_EQ(::read(ready[0], &byte, 1), 1) << "the listener did not start";
    ::close(ready[0]);
    if (lock) {
      std::string pid = absl::StrCat(pid_, "\n");
      EXPECT_EQ(::pwrite(lock.get(), pid.data(), pid.size(), 0), static_cast<ssize_t>(pid.size()));
    }
  }
  ~Listener() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// What an unchecked client gets from `path`: the raw answer to a health request.
std::string RawAnswer(const std::string& path) {
  absl::StatusOr<base::UniqueFd> fd = base::ConnectUnixSocket(path);
  if (!fd.ok()) {
    return std::string(fd.status().message());
  }
  int flags = ::fcntl(fd->get(), F_GETFL);
  ::fcntl(fd->get(), F_SETFL, flags & ~O_NONBLOCK);
  std::string request = "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n";
  (void)!::write(fd->get(), request.data(), request.size());
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fd->get(), buf, sizeof(buf))) > 0) {
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// GET /v1/health through ApiClient, bounded (a listener that never answers fails the test
// instead of hanging it).
absl::StatusOr<ApiResponse> Health(const std::string& path) {
  absl::StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(path);
  if (!client.ok()) {
    return client.status();
  }
  (*client)->set_timeout(absl::Seconds(5));
  return (*client)->Get("/v1/health");
}

class SocketTrustTest : public ::testing::Test {
 protected:
  SocketTrustTest() {
    options_.socket_path = socket_;
    options_.log_path = dir_.path() + "/home/logs/aboxd.log";
    options_.aboxd_binary = ABOXD_FAKE_VMM;  // the real daemon over a fake VMM
    options_.stop_timeout = absl::Seconds(5);
    // The daemon a test starts inherits the environment: keep its state in the test's dir.
    ::setenv("ABOX_HOME", (dir_.path() + "/home").c_str(), 1);        // NOLINT: before any thread
    ::setenv("ABOX_CACHE_DIR", (dir_.path() + "/cache").c_str(), 1);  // NOLINT: likewise
  }
  ~SocketTrustTest() override {
    if (absl::StatusOr<pid_t> running = RunningDaemonPid(socket_); running.ok()) {
      ::kill(*running, SIGKILL);  // an aboxd-fake-vmm this test started
      int status = 0;
      ::waitpid(*running, &status, 0);
    }
  }

  http::httptest::TempDir dir_;  // 0700, ours
  std::string socket_ = dir_.path() + "/aboxd.sock";
  DaemonOptions options_;
};

TEST_F(SocketTrustTest, RefusesAServerOfAnotherUidAndNeverSignalsIt) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to run a listener as another uid";
  }
  Listener hostile(socket_, kNobody, socket_ + ".lock");
  // Unchecked, it passes for a healthy aboxd.
  ASSERT_THAT(RawAnswer(socket_), HasSubstr("{\"status\":\"ok\"}"));

  absl::StatusOr<ApiResponse> health = Health(socket_);
  ASSERT_EQ(health.status().code(), absl::StatusCode::kPermissionDenied) << health.status();
  EXPECT_THAT(health.status().message(), HasSubstr(absl::StrCat("runs as uid ", kNobody)));
  EXPECT_THAT(health.status().message(), HasSubstr("not your aboxd"));
  EXPECT_THAT(health.status().message(), HasSubstr("set ABOX_SOCKET"));
  EXPECT_FALSE(IsNothingListening(health.status()));

  // Neither believed nor replaced by a daemon of ours, nor signalled.
  absl::StatusOr<std::unique_ptr<ApiClient>> connected = ConnectOrStartDaemon(options_);
  EXPECT_EQ(connected.status().code(), absl::StatusCode::kPermissionDenied) << connected.status();
  absl::StatusOr<pid_t> stopped = StopDaemon(options_);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kPermissionDenied) << stopped.status();
  EXPECT_TRUE(Alive(hostile.pid()));
}

TEST_F(SocketTrustTest, RefusesASocketDirectoryOpenToOthers) {
  for (mode_t mode : {0777, 0755, 0750, 0701}) {
    std::string dir = absl::StrCat(dir_.path(), "/open", mode);
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    std::string path = dir + "/aboxd.sock";
    absl::StatusOr<base::UniqueFd> server = base::ListenUnixSocket(path, 4);
    ASSERT_TRUE(server.ok()) << server.status();
    absl::StatusOr<ApiResponse> r = Health(path);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(absl::StrFormat("has mode %04o", mode)));
    EXPECT_THAT(r.status().message(), HasSubstr("chmod 700 " + dir));
    // Refused before connecting: nothing reached the server.
    EXPECT_LT(::accept4(server->get(), nullptr, nullptr, SOCK_CLOEXEC), 0);
    EXPECT_EQ(errno, EAGAIN);
  }
  // 0700 (and stricter) is fine.
  std::string own = dir_.path() + "/own";
  ASSERT_EQ(::mkdir(own.c_str(), 0700), 0);
  absl::StatusOr<base::UniqueFd> server = base::ListenUnixSocket(own + "/aboxd.sock", 4);
  ASSERT_TRUE(server.ok());
  base::UniqueFd dir_fd(::open(own.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  EXPECT_TRUE(CheckSocketDirectory(dir_fd.get(), own, own + "/aboxd.sock", ::geteuid()).ok());
  absl::StatusOr<base::UniqueFd> fd = ConnectToOwnServer(own + "/aboxd.sock", absl::Now());
  EXPECT_TRUE(fd.ok()) << fd.status();
}

TEST_F(SocketTrustTest, RefusesASocketDirectoryOfAnotherUser) {
  std::string theirs = dir_.path() + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0700), 0);
  base::UniqueFd dir_fd(::open(theirs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  // Injected: the same directory judged for another user.
  absl::Status s = CheckSocketDirectory(dir_fd.get(), theirs, theirs + "/s", ::geteuid() + 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("belongs to uid ", ::geteuid())));
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to chown a directory to another user";
  }
  // Real: another user's directory (as /tmp/abox-UID could be, made first by someone else).
  absl::StatusOr<base::UniqueFd> server = base::ListenUnixSocket(theirs + "/aboxd.sock", 4);
  ASSERT_TRUE(server.ok());
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  absl::StatusOr<ApiResponse> r = Health(theirs + "/aboxd.sock");
  ASSERT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat("belongs to uid ", kNobody)));
  EXPECT_LT(::accept4(server->get(), nullptr, nullptr, SOCK_CLOEXEC), 0);
}

TEST_F(SocketTrustTest, PeerOfAnotherUidIsRefusedInjected) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  base::UniqueFd a(pair[0]);
  base::UniqueFd b(pair[1]);
  EXPECT_TRUE(CheckSocketPeer(a.get(), "/x.sock", ::geteuid()).ok());
  absl::Status s = CheckSocketPeer(a.get(), "/x.sock", ::geteuid() + 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(),
              HasSubstr(absl::StrCat("runs as uid ", ::geteuid(), " (pid ", ::getpid(), ")")));
  absl::StatusOr<PeerCredentials> peer = SocketPeer(a.get());
  ASSERT_TRUE(peer.ok());
  EXPECT_EQ(peer->pid, ::getpid());
}

TEST_F(SocketTrustTest, StopRefusesAListenerThatIsNotAboxdEvenWithALockNamingIt) {
  // Our own uid, holding aboxd's lock with its pid in it: all the old check looked at. Its
  // executable is this test binary, not aboxd.
  Listener impostor(socket_, std::nullopt, socket_ + ".lock");
  ASSERT_EQ(*RunningDaemonPid(socket_), impostor.pid());
  absl::StatusOr<pid_t> stopped = StopDaemon(options_);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kFailedPrecondition) << stopped.status();
  EXPECT_THAT(stopped.status().message(), HasSubstr("which is not aboxd"));
  EXPECT_THAT(stopped.status().message(), HasSubstr(absl::StrCat("process ", impostor.pid())));
  EXPECT_TRUE(Alive(impostor.pid()));
  EXPECT_EQ(VerifyAboxdProcess(impostor.pid(), ::geteuid(), ABOXD_FAKE_VMM).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(VerifyAboxdProcess(impostor.pid(), ::geteuid() + 1, "").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(SocketTrustTest, StopTakesThePidFromTheSocketNotFromTheLockFile) {
  absl::StatusOr<pid_t> daemon = StartDaemon(options_);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  // An innocent process of ours, whose pid is then written into the daemon's lock file.
  pid_t innocent = ::fork();
  if (innocent == 0) {
    for (;;) {
      ::pause();
    }
  }
  base::UniqueFd lock(::open((socket_ + ".lock").c_str(), O_WRONLY | O_CLOEXEC));
  std::string pid = absl::StrCat(innocent, "\n");
  ASSERT_EQ(::ftruncate(lock.get(), 0), 0);
  ASSERT_EQ(::pwrite(lock.get(), pid.data(), pid.size(), 0), static_cast<ssize_t>(pid.size()));
  ASSERT_EQ(*RunningDaemonPid(socket_), innocent);

  EXPECT_EQ(*VerifiedDaemonPid(options_), *daemon);
  absl::StatusOr<pid_t> stopped = StopDaemon(options_);
  EXPECT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped.value_or(0), *daemon);
  EXPECT_TRUE(Alive(innocent));
  int status = 0;
  if (!stopped.ok()) {
    ::kill(*daemon, SIGKILL);  // the lock names `innocent` now: the fixture would not find it
  }
  EXPECT_EQ(::waitpid(*daemon, &status, 0), *daemon);  // the daemon is gone (our child)
  ::kill(innocent, SIGKILL);
  ::waitpid(innocent, &status, 0);
}

TEST_F(SocketTrustTest, NothingListeningAndNoLockIsNotRunning) {
  EXPECT_EQ(StopDaemon(options_).status().code(), absl::StatusCode::kNotFound);
  options_.socket_path = dir_.path() + "/missing/dir/aboxd.sock";
  EXPECT_TRUE(IsNothingListening(Health(options_.socket_path).status()));
}

}  // namespace
}  // namespace abox::client
