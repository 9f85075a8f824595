// The setup phase's egress end to end in-process (fixture: testing/egress_api_fixture.h): setup
// commands run with the wider policy and it narrows after, a failing or overlong setup fails the
// create, and what setup left (tunnels, processes) is ended; EgressService's Widen / Narrow.
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/daemon/services/egress_service.h"
#include "src/daemon/services/event_bus.h"
#include "src/daemon/testing/egress_api_fixture.h"
#include "src/net/testing/socket_tunnel.h"
#include "src/store/egress_repo.h"
#include "src/store/event_repo.h"
#include "src/store/migrations.h"
#include "src/store/sandbox_repo.h"

namespace abox::daemon {
namespace {

using http::httptest::HttpTestClient;
using http::httptest::Response;
using http::httptest::TempDir;
using net::testing::SendAllTo;
using net::testing::SocketTunnel;
using testing::EgressApiTest;
using ::testing::HasSubstr;
using testing::kUpstream;
using ::testing::Not;

TEST_F(EgressApiTest, SetupCommandsRunWithTheWiderPolicyThenItNarrows) {
  StartDaemon();
  Response created = Call("POST", "/v1/sandboxes",
                          {{"egress", {{"allow", {"api.github.com"}}}},
                           {"setup", {{"commands", {"echo setting up"}}, {"allow", {"npm"}}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = created.Json().value("id", "");
  EXPECT_EQ(created.Json()["state"], "ready");
  nlohmann::json policy = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/egress/policy")).Json();
  EXPECT_EQ(policy["effective"]["allow"], nlohmann::json({"api.github.com"}))
      << "the setup rules were not narrowed away";
  nlohmann::json execs = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/execs")).Json();
  EXPECT_THAT(execs.dump(), HasSubstr("echo setting up"));
  std::vector<std::string> events = EventTypes(id);
  EXPECT_THAT(events, ::testing::Contains("setup_started"));
  EXPECT_THAT(events, ::testing::Contains("setup_finished"));
}

TEST_F(EgressApiTest, AFailingSetupCommandFailsTheCreateNamingIt) {
  StartDaemon();
  Response created = Call(
      "POST", "/v1/sandboxes",
      {{"setup", {{"commands", {"true", "echo npm ERR! no lockfile; exit 3", "echo never"}}}}});
  EXPECT_EQ(created.status, 409) << created.body;
  EXPECT_THAT(created.body, HasSubstr("echo npm ERR! no lockfile; exit 3"));
  EXPECT_THAT(created.body, HasSubstr("exited with code 3"));
  EXPECT_THAT(created.body, HasSubstr("npm ERR! no lockfile"));
  nlohmann::json failed = Call("GET", "/v1/sandboxes?state=failed").Json()["sandboxes"];
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_THAT(failed[0]["failure"].get<std::string>(), HasSubstr("exited with code 3"));
  EXPECT_EQ(daemon_->egress().running(), 0u);
  nlohmann::json execs =
      Call("GET", absl::StrCat("/v1/sandboxes/", failed[0]["id"].get<std::string>(), "/execs"))
          .Json();
  EXPECT_THAT(execs.dump(), Not(HasSubstr("echo never")));
  EXPECT_EQ(Call("POST", "/v1/sandboxes", {{"setup", {{"commands", {" "}}}}}).status, 400);
  EXPECT_EQ(Call("POST", "/v1/sandboxes",
                 {{"setup", {{"commands", {"true"}}, {"allow", {"preset:nosuch"}}}}})
                .status,
            400);
}

// The guest keeps a connection the setup policy let through and a background process the
// setup started: when setup ends, before the create returns, the connection is reset (the
// upstream sees it close) and the process is gone.
TEST_F(EgressApiTest, SetupsEndResetsItsTunnelsAndKillsWhatItLeftRunning) {
  StartDaemon();
  enum class Upstream { kWaiting, kClosed, kTimedOut };
  std::atomic<Upstream> upstream_saw{Upstream::kWaiting};
  net::testing::LoopbackServer upstream([&](base::UniqueFd fd) {
    if (net::testing::ReadUntil(fd.get(), "\r\n\r\n").empty()) {
      return;
    }
    SendAllTo(fd.get(), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    char buf[256];
    for (;;) {
      ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
      // The proxy aborts with a reset (no FIN first: an aborted stream must not look complete).
      if (n == 0 || (n < 0 && errno == ECONNRESET)) {
        upstream_saw = Upstream::kClosed;
        return;
      }
      if (n < 0) {
        upstream_saw = Upstream::kTimedOut;  // 10 s without a close (SO_RCVTIMEO)
        return;
      }
    }
  });
  const std::string dir = home_.path() + "/setup";
  std::filesystem::create_directories(dir);
  const std::string command =
      absl::StrCat("sleep 300 >/dev/null 2>&1 & echo $! > ", dir, "/bg.pid; touch ", dir,
                   "/started; while [ ! -e ", dir, "/go ]; do sleep 0.05; done");
  const std::string host = absl::StrCat(kUpstream, ":", upstream.port());
  Response created;
  std::unique_ptr<HttpTestClient> creator = daemon_->Connect();  // one request at a time each
  ASSERT_NE(creator, nullptr);
  std::thread create([&] {
    nlohmann::json body = {{"setup", {{"commands", {command}}, {"allow", {host}}}}};
    absl::StatusOr<Response> r = creator->Request("POST", "/v1/sandboxes", body.dump());
    if (r.ok()) {
      created = *r;
    }
  });
  absl::Cleanup release = [&] {
    std::ofstream(dir + "/go") << "";
    create.join();
  };
  for (int i = 0; i < 400 && !std::filesystem::exists(dir + "/started"); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(std::filesystem::exists(dir + "/started")) << "the setup command never started";
  nlohmann::json list = Call("GET", "/v1/sandboxes").Json()["sandboxes"];
  ASSERT_EQ(list.size(), 1u) << list.dump();
  const std::string id = list[0]["id"];
  EXPECT_EQ(list[0]["state"], "creating");

  // A kept-alive connection under the setup policy, open while setup runs.
  net::TunnelInfo info;
  info.kind = net::TunnelInfo::Kind::kHttpProxy;
  auto [tunnel, guest] = SocketTunnel::Make(info);
  daemon_->egress().Handle(id, std::move(tunnel));
  ASSERT_TRUE(SendAllTo(
      guest.get(), absl::StrCat("GET http://", host, "/ HTTP/1.1\r\nHost: ", host, "\r\n\r\n")));
  ASSERT_THAT(net::testing::ReadUntil(guest.get(), "ok"), HasSubstr("200 OK"));
  int bg_pid = 0;
  std::ifstream(dir + "/bg.pid") >> bg_pid;
  ASSERT_GT(bg_pid, 0);
  ASSERT_EQ(::kill(bg_pid, 0), 0) << "the background process is not running";

  std::move(release).Invoke();
  ASSERT_EQ(created.status, 201) << created.body;
  // The guest's end sees its tunnel end, the upstream sees the close.
  timeval tv{10, 0};
  ::setsockopt(guest.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char c;
  EXPECT_EQ(::recv(guest.get(), &c, 1, 0), 0) << "the setup tunnel is still open";
  for (int i = 0; i < 400 && upstream_saw == Upstream::kWaiting; ++i) {
    absl::SleepFor(absl::Milliseconds(25));
  }
  EXPECT_EQ(upstream_saw, Upstream::kClosed);
  // Gone, or a zombie waiting for its reaper: not running either way.
  std::string stat;
  std::ifstream(absl::StrCat("/proc/", bg_pid, "/stat")) >> stat >> stat >> stat;
  EXPECT_TRUE(stat.empty() || stat == "Z") << "the background process survived setup: " << stat;
  // The narrowed policy holds for the next connection.
  EXPECT_THAT(FetchHost(id, host), HasSubstr("403"));
}

TEST_F(EgressApiTest, ASetupPastItsTimeoutFailsTheCreateSayingSo) {
  StartDaemon();
  absl::Time start = absl::Now();
  Response created =
      Call("POST", "/v1/sandboxes",
           {{"setup", {{"commands", {"true", "sleep 60", "echo never"}}, {"timeout_seconds", 1}}}});
  EXPECT_EQ(created.status, 504) << created.body;
  EXPECT_THAT(created.body, HasSubstr("setup timed out"));
  EXPECT_THAT(created.body, HasSubstr("command \\\"sleep 60\\\" was still running"));
  EXPECT_THAT(created.body, HasSubstr("setup.timeout_seconds"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "the timeout did not hold";
  nlohmann::json failed = Call("GET", "/v1/sandboxes?state=failed").Json()["sandboxes"];
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_THAT(failed[0]["failure"].get<std::string>(), HasSubstr("setup timed out"));
  EXPECT_EQ(daemon_->egress().running(), 0u);
  EXPECT_EQ(
      Call("POST", "/v1/sandboxes", {{"setup", {{"commands", {"true"}}, {"timeout_seconds", -1}}}})
          .status,
      400);
}

TEST(EgressServiceTest, WidenAddsSetupRulesAndNarrowTakesThemAway) {
  TempDir dir;
  auto db = store::OpenStateDatabase(dir.path() + "/state.db");
  ASSERT_TRUE(db.ok()) << db.status();
  store::SandboxRepo sandboxes(**db);
  store::SandboxRecord record;
  record.id = "0123456789ab";
  record.image = "default";
  ASSERT_TRUE(sandboxes.Insert(record).ok());
  store::EventRepo event_repo(**db);
  EventBus events(event_repo);
  store::EgressRepo repo(**db);
  auto service = EgressService::Create(repo, events, {});
  ASSERT_TRUE(service.ok()) << service.status();
  net::EgressPolicy none{net::EgressPolicy::Mode::kNone, {}};
  ASSERT_TRUE((*service)->SetPolicy(EgressScope{record.id}, none).ok());
  ASSERT_TRUE((*service)->Start(record.id).ok());
  EXPECT_EQ((*service)->running(), 1u);
  (*service)->Widen(record.id, {*net::ParseRule("preset:npm")});
  absl::StatusOr<net::EgressPolicy> wide = (*service)->Effective(record.id);
  ASSERT_TRUE(wide.ok());
  // Mode none during setup: just the setup rules.
  EXPECT_EQ(wide->mode, net::EgressPolicy::Mode::kAllowlist);
  ASSERT_EQ(wide->allow.size(), 1u);
  EXPECT_EQ(wide->allow[0].ToString(), "preset:npm");
  ASSERT_TRUE((*service)->Narrow(record.id).ok());
  EXPECT_EQ((*service)->Effective(record.id)->mode, net::EgressPolicy::Mode::kNone);
  EXPECT_TRUE((*service)->Effective(record.id)->allow.empty());
  (*service)->Stop(record.id);
  (*service)->Stop(record.id);  // idempotent
  EXPECT_EQ((*service)->running(), 0u);
}

}  // namespace
}  // namespace abox::daemon
