// Who may connect: peer uid on the unix socket, bearer token on TCP, and the socket file's
// life cycle (stale replaced, live refused).
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/unique_fd.h"
#include "src/http/server.h"
#include "src/http/testing/test_server.h"

namespace abox::http {
namespace {

using nlohmann::json;
using testing::HasSubstr;

constexpr uid_t kNobody = 65534;
constexpr char kToken[] = "test-token-0123456789abcdef";

Router PingRouter() {
  Router r;
  EXPECT_TRUE(
      r.Add("GET", "/v1/ping", [](Request& request, Responder& out) {
         out.Json(200, {{"pong", true}, {"tcp", request.peer.transport == Transport::kTcp}});
       }).ok());
  return r;
}

sockaddr_un UnixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// A unix socket bound at `path`; listening when `listen` is set. Closing the fd of a socket
// that never listened (or stopped) leaves a stale socket file behind, as a crashed daemon does.
base::UniqueFd BindSocket(const std::string& path, bool listen) {
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr = UnixAddress(path);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << "errno " << errno;
  if (listen) {
    EXPECT_EQ(::listen(fd.get(), 4), 0);
  }
  return fd;
}

// Child outcomes of ConnectAs().
enum ChildResult { kClosedWithoutAnswer = 0, kGotBytes = 1, kConnectFailed = 2, kSetupFailed = 3 };

// Forks a child that becomes `uid`, connects to `path`, sends a request and reports what came
// back. Only raw syscalls after fork: the parent has server threads running.
int ConnectAs(uid_t uid, const std::string& path) {
  sockaddr_un addr = UnixAddress(path);
  static constexpr char kRequest[] = "GET /v1/ping HTTP/1.1\r\nHost: x\r\n\r\n";
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::syscall(SYS_setgroups, 0, nullptr) != 0 || ::syscall(SYS_setresgid, uid, uid, uid) != 0 ||
        ::syscall(SYS_setresuid, uid, uid, uid) != 0) {
      ::_exit(kSetupFailed);
    }
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::_exit(kConnectFailed);
    }
    (void)::send(fd, kRequest, sizeof(kRequest) - 1, MSG_NOSIGNAL);
    char buf[64];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);  // the server closes: 0 or ECONNRESET
    ::_exit(n > 0 ? kGotBytes : kClosedWithoutAnswer);
  }
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ServerSecurityTest, RefusesUnixPeersWithAnotherUid) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to connect as another uid (InjectedUid covers the check)";
  }
  httptest::TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  std::unique_ptr<Server> server = httptest::StartServer(httptest::TestOptions(dir), PingRouter());
  ASSERT_NE(server, nullptr);
  // Loosen the modes (a misconfiguration) so that only the SO_PEERCRED check is left.
  ASSERT_EQ(::chmod((dir.path() + "/run").c_str(), 0755), 0);
  ASSERT_EQ(::chmod(server->socket_path().c_str(), 0666), 0);
  EXPECT_EQ(ConnectAs(kNobody, server->socket_path()), kClosedWithoutAnswer);
  // The daemon's own user is still served.
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  absl::StatusOr<httptest::Response> r = client->Request("GET", "/v1/ping");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
}

TEST(ServerSecurityTest, SocketModeAloneKeepsOtherUsersOut) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to connect as another uid";
  }
  httptest::TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  std::unique_ptr<Server> server = httptest::StartServer(httptest::TestOptions(dir), PingRouter());
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(ConnectAs(kNobody, server->socket_path()), kConnectFailed);
}

TEST(ServerSecurityTest, RefusesUnixPeersWithAnotherUidInjectedUid) {
  httptest::TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  options.allowed_uid = ::geteuid() + 1;  // we are "another user" now
  std::unique_ptr<Server> server = httptest::StartServer(options, PingRouter());
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  // The server may close before the request is even written; either way nothing comes back.
  (void)client->Send("GET", "/v1/ping", "");
  EXPECT_TRUE(client->ServerClosed());
  EXPECT_EQ(server->connection_count(), 0u);
}

// The local addresses of this process's listening TCP sockets (IPv4 and IPv6) on `port`, as
// getsockname() on each listener reports them ("127.0.0.1:PORT", "0.0.0.0:PORT", "[::]:PORT").
std::vector<std::string> ListenersOnPort(uint16_t port) {
  std::vector<std::string> found;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) {
    ADD_FAILURE() << "opendir(/proc/self/fd) failed";
    return found;
  }
  std::vector<int> fds;
  while (dirent* e = ::readdir(dir)) {  // NOLINT(concurrency-mt-unsafe): private DIR stream
    if (e->d_name[0] != '.') {
      fds.push_back(std::stoi(e->d_name));
    }
  }
  ::closedir(dir);
  for (int fd : fds) {
    int listening = 0;
    socklen_t optlen = sizeof(listening);
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &optlen) != 0 || listening == 0) {
      continue;  // not a socket (or the directory's own fd), or not listening
    }
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      continue;
    }
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
      if (ntohs(in->sin_port) == port) {
        ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
        found.push_back(absl::StrCat(text, ":", port));
      }
    } else if (addr.ss_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
      if (ntohs(in6->sin6_port) == port) {
        ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
        found.push_back(absl::StrCat("[", text, "]:", port));
      }
    }
  }
  return found;
}

TEST(ServerSecurityTest, ListenerCheckSeesAWildcardBind) {
  // The check the next test relies on tells a wildcard bind from a loopback one.
  base::UniqueFd any(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(any);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(any.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(any.get(), 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(any.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  uint16_t port = ntohs(addr.sin_port);
  EXPECT_THAT(ListenersOnPort(port), testing::ElementsAre(absl::StrCat("0.0.0.0:", port)));
}

TEST(ServerSecurityTest, TcpOnlyServerAndItsTestOnlyTokenlessMode) {
  ServerOptions neither;
  EXPECT_EQ(Server::Create(neither, PingRouter()).status().code(),
            absl::StatusCode::kInvalidArgument);
  ServerOptions both;
  both.tcp_port = 0;
  both.tcp_bearer_token = kToken;
  both.tcp_without_token = true;
  EXPECT_EQ(Server::Create(both, PingRouter()).status().code(), absl::StatusCode::kInvalidArgument);

  // TCP only (abox-mcp --http): no unix socket; tcp_without_token serves requests without the
  // Authorization header (abox-mcp --no-auth, for the MCP conformance suite).
  ServerOptions options;
  options.tcp_port = 0;
  options.tcp_without_token = true;
  std::unique_ptr<Server> server = httptest::StartServer(options, PingRouter());
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->socket_path(), "");
  EXPECT_THAT(ListenersOnPort(server->tcp_port()),
              testing::ElementsAre(absl::StrCat("127.0.0.1:", server->tcp_port())));
  absl::StatusOr<std::unique_ptr<httptest::HttpTestClient>> client =
      httptest::HttpTestClient::ConnectTcp(server->tcp_port());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<httptest::Response> response = (*client)->Request("GET", "/v1/ping");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
}

TEST(ServerSecurityTest, TcpNeedsTheBearerTokenAndListensOnLoopbackOnly) {
  httptest::TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  options.tcp_port = 0;
  options.tcp_bearer_token = kToken;
  std::unique_ptr<Server> server = httptest::StartServer(options, PingRouter());
  ASSERT_NE(server, nullptr);
  ASSERT_NE(server->tcp_port(), 0);
  // The listening socket itself is bound to 127.0.0.1, and it is the only one on that port (a
  // bind to 0.0.0.0 or :: would show here; the peer address of a loopback connection would not
  // tell, since a wildcard listener accepts loopback connections too).
  EXPECT_THAT(ListenersOnPort(server->tcp_port()),
              testing::ElementsAre(absl::StrCat("127.0.0.1:", server->tcp_port())));

  absl::StatusOr<std::unique_ptr<httptest::HttpTestClient>> anonymous =
      httptest::HttpTestClient::ConnectTcp(server->tcp_port());
  ASSERT_TRUE(anonymous.ok()) << anonymous.status();
  absl::StatusOr<httptest::Response> denied = (*anonymous)->Request("GET", "/v1/ping");
  ASSERT_TRUE(denied.ok()) << denied.status();
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(denied->Json()["error"]["code"], "unauthenticated");
  EXPECT_THAT(denied->Header("www-authenticate").value_or(""), HasSubstr("Bearer"));

  absl::StatusOr<std::unique_ptr<httptest::HttpTestClient>> wrong =
      httptest::HttpTestClient::ConnectTcp(server->tcp_port());
  ASSERT_TRUE(wrong.ok());
  absl::StatusOr<httptest::Response> wrong_r =
      (*wrong)->Request("GET", "/v1/ping", "", {{"Authorization", "Bearer not-the-token-at-all"}});
  ASSERT_TRUE(wrong_r.ok());
  EXPECT_EQ(wrong_r->status, 401);

  absl::StatusOr<std::unique_ptr<httptest::HttpTestClient>> good =
      httptest::HttpTestClient::ConnectTcp(server->tcp_port());
  ASSERT_TRUE(good.ok());
  httptest::Headers auth = {{"Authorization", std::string("Bearer ") + kToken}};
  for (int i = 0; i < 2; ++i) {  // keep-alive: every request is checked and passes
    absl::StatusOr<httptest::Response> ok = (*good)->Request("GET", "/v1/ping", "", auth);
    ASSERT_TRUE(ok.ok()) << ok.status();
    EXPECT_EQ(ok->status, 200);
    EXPECT_EQ(ok->Json()["tcp"], true);
  }
  absl::StatusOr<httptest::Response> unauth_after = (*good)->Request("GET", "/v1/ping");
  ASSERT_TRUE(unauth_after.ok());
  EXPECT_EQ(unauth_after->status, 401);
}

TEST(ServerSecurityTest, TcpPortInUseIsReported) {
  httptest::TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  options.tcp_port = 0;
  options.tcp_bearer_token = kToken;
  std::unique_ptr<Server> first = httptest::StartServer(options, PingRouter());
  ASSERT_NE(first, nullptr);
  httptest::TempDir other_dir;
  ServerOptions clash = httptest::TestOptions(other_dir);
  clash.tcp_port = first->tcp_port();
  clash.tcp_bearer_token = kToken;
  absl::StatusOr<std::unique_ptr<Server>> second = Server::Create(clash, PingRouter());
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("already in use"));
  // Its unix socket was cleaned up again.
  EXPECT_NE(::access(clash.unix_socket_path.c_str(), F_OK), 0);
}

TEST(ServerSecurityTest, StaleSocketFromADeadDaemonIsReplaced) {
  httptest::TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  ASSERT_EQ(::mkdir((dir.path() + "/run").c_str(), 0700), 0);
  BindSocket(options.unix_socket_path, /*listen=*/true);  // fd closed: nobody listens now
  struct stat st {};
  ASSERT_EQ(::lstat(options.unix_socket_path.c_str(), &st), 0);
  std::unique_ptr<Server> server = httptest::StartServer(options, PingRouter());
  ASSERT_NE(server, nullptr);
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*server);
  absl::StatusOr<httptest::Response> r = client->Request("GET", "/v1/ping");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
}

TEST(ServerSecurityTest, LiveSocketIsRefusedAndLeftAlone) {
  httptest::TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  ASSERT_EQ(::mkdir((dir.path() + "/run").c_str(), 0700), 0);
  base::UniqueFd live = BindSocket(options.unix_socket_path, /*listen=*/true);
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options, PingRouter());
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("another server is listening"));
  // The other server's socket still works.
  base::UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr = UnixAddress(options.unix_socket_path);
  EXPECT_EQ(::connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
}

TEST(ServerSecurityTest, SecondDaemonOnTheSamePathIsRefused) {
  httptest::TempDir dir;
  std::unique_ptr<Server> first = httptest::StartServer(httptest::TestOptions(dir), PingRouter());
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<Server>> second =
      Server::Create(httptest::TestOptions(dir), PingRouter());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr(absl::StrCat("another aboxd (pid ", ::getpid(), ")")));
  // The first one is unaffected.
  std::unique_ptr<httptest::HttpTestClient> client = httptest::ConnectTo(*first);
  EXPECT_TRUE(client->Request("GET", "/v1/ping").ok());
}

TEST(ServerSecurityTest, NonSocketFileAtThePathIsNotTouched) {
  httptest::TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  ASSERT_EQ(::mkdir((dir.path() + "/run").c_str(), 0700), 0);
  base::UniqueFd file(
      ::open(options.unix_socket_path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  ASSERT_TRUE(file.valid());
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options, PingRouter());
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("is not a socket"));
  EXPECT_EQ(::access(options.unix_socket_path.c_str(), F_OK), 0);
}

TEST(ServerSecurityTest, DirectoryOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to chown";
  }
  httptest::TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  std::string run = dir.path() + "/run";
  ASSERT_EQ(::mkdir(run.c_str(), 0777), 0);
  ASSERT_EQ(::chown(run.c_str(), kNobody, kNobody), 0);
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options, PingRouter());
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("belongs to uid 65534"));
}

TEST(ServerSecurityTest, LongSocketPathsWork) {
  httptest::TempDir dir;
  ServerOptions options = httptest::TestOptions(dir);
  options.unix_socket_path = dir.path() + "/" + std::string(60, 'd') + "/" + std::string(60, 'e') +
                             "/aboxd.sock";  // > sun_path
  std::unique_ptr<Server> server = httptest::StartServer(options, PingRouter());
  ASSERT_NE(server, nullptr);
  struct stat st {};
  ASSERT_EQ(::stat(options.unix_socket_path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

}  // namespace
}  // namespace abox::http
