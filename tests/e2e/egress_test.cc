// Egress end to end with real VMs: the guest has no NIC; its connections and DNS lookups go
// through the agent channel to aboxd's proxy. Upstreams are loopback servers this test starts
// (an `openssl s_server` and a `python3 -m http.server`), reached through aboxd's test-only
// resolver override; nothing here needs the internet.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/child_process.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"
#include "tests/testing/loopback_ports.h"

namespace abox::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kAllowed[] = "allowed.test";
constexpr char kDenied[] = "denied.test";
constexpr char kLater[] = "later.test";

class EgressE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::path dir = fs::path(home_.path()) / "upstream";
    fs::create_directories(dir);
    std::ofstream(dir / "hello.txt") << "hello from upstream\n";
    tls_port_ = FreeLoopbackPort();
    http_port_ = FreeLoopbackPort();
    ASSERT_EQ(std::system(absl::StrCat(  // NOLINT
                              "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=",
                              kAllowed, " -keyout '", (dir / "key.pem").string(), "' -out '",
                              (dir / "cert.pem").string(), "' 2>/dev/null")
                              .c_str()),
              0);
    auto tls = base::ChildProcess::Spawn(
        {.argv = {"openssl", "s_server", "-quiet", "-www", "-accept",
                  absl::StrCat("127.0.0.1:", tls_port_), "-cert", (dir / "cert.pem").string(),
                  "-key", (dir / "key.pem").string()}});
    ASSERT_TRUE(tls.ok()) << tls.status();
    tls_ = *std::move(tls);
    auto http = base::ChildProcess::Spawn(
        {.argv = {"python3", "-m", "http.server", std::to_string(http_port_), "--bind", "127.0.0.1",
                  "--directory", dir.string()}});
    ASSERT_TRUE(http.ok()) << http.status();
    http_ = *std::move(http);
    ASSERT_TRUE(WaitForLoopbackPort(tls_port_));
    ASSERT_TRUE(WaitForLoopbackPort(http_port_));
    // Every test name resolves to the loopback upstreams, but only through this override.
    fs::path override_file = fs::path(home_.path()) / "resolver-override.json";
    nlohmann::json names = nlohmann::json::object();
    for (const char* name : {kAllowed, kDenied, kLater}) {
      names[name] = {"127.0.0.1"};
    }
    std::ofstream(override_file) << names.dump();
    daemon_ = std::make_unique<AboxdProcess>(home_);
    ASSERT_TRUE(daemon_->Start({"--test-resolver-override", override_file.string()}).ok())
        << daemon_->Log();
  }
  void TearDown() override {
    RemoveAllSandboxes([this](std::vector<std::string> args) { return Abox(std::move(args)); });
    (void)daemon_->Stop();
  }

  AboxResult Abox(std::vector<std::string> args) {
    AboxCall call;
    call.args = std::move(args);
    call.env = home_.Env();
    call.env["ABOX_NO_AUTOSTART"] = "1";
    call.timeout_seconds = 240;
    return RunAbox(call);
  }

  // A shell command in the sandbox; returns stdout + "exit=N".
  std::string Guest(const std::string& id, const std::string& script, bool root = false) {
    AboxResult r = Abox(GuestShellArgs(id, script, root));
    return r.out + r.err;
  }

  std::string HttpsUrl(const char* name) {
    return absl::StrCat("https://", name, ":", tls_port_, "/");
  }

  DaemonHome home_;
  std::unique_ptr<AboxdProcess> daemon_;
  base::ChildProcess tls_;
  base::ChildProcess http_;
  int tls_port_ = 0;
  int http_port_ = 0;
};

TEST_F(EgressE2eTest, AllowlistDecidesByNameAndLogsEverything) {
  AboxResult created = Abox({"create", "--allow", absl::StrCat(kAllowed, ":", tls_port_), "--allow",
                             absl::StrCat(kAllowed, ":", http_port_)});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id(absl::StripAsciiWhitespace(created.out));

  // Allowed HTTPS through the proxy variables curl honours, and through the transparent
  // redirect (a public-looking address; the proxy goes by the SNI and resolves on the host).
  EXPECT_THAT(Guest(id, absl::StrCat("curl -sk --max-time 20 ", HttpsUrl(kAllowed))),
              HasSubstr("exit=0"));
  EXPECT_THAT(Guest(id, absl::StrCat("curl -sk --max-time 20 --noproxy '*' --resolve ", kAllowed,
                                     ":", tls_port_, ":192.0.2.10 ", HttpsUrl(kAllowed))),
              HasSubstr("exit=0"));
  // Plain HTTP by Host.
  EXPECT_THAT(Guest(id, absl::StrCat("curl -s --max-time 20 http://", kAllowed, ":", http_port_,
                                     "/hello.txt")),
              HasSubstr("hello from upstream"));

  // A denied name: a 403 that explains for HTTP/CONNECT, a closed connection for TLS.
  std::string denied = Guest(id, absl::StrCat("curl -sk --max-time 20 ", HttpsUrl(kDenied)));
  EXPECT_THAT(denied, Not(HasSubstr("exit=0")));
  std::string denied_http = Guest(
      id, absl::StrCat("curl -s --max-time 20 http://", kDenied, ":", http_port_, "/hello.txt"));
  EXPECT_THAT(denied_http, HasSubstr("abox egress approve"));
  EXPECT_THAT(denied_http, Not(HasSubstr("hello from upstream")));
  EXPECT_THAT(Guest(id, absl::StrCat("curl -sk --max-time 20 --noproxy '*' --resolve ", kDenied,
                                     ":", tls_port_, ":192.0.2.10 ", HttpsUrl(kDenied))),
              Not(HasSubstr("exit=0")));

  // SNI says allowed, the CONNECT target says denied (and the reverse): refused.
  EXPECT_THAT(
      Guest(id, absl::StrCat("curl -sk --max-time 20 --connect-to ", kDenied, ":", tls_port_, ":",
                             kAllowed, ":", tls_port_, " ", HttpsUrl(kDenied))),
      Not(HasSubstr("exit=0")));
  // Plain HTTP whose Host differs from the request target: refused.
  EXPECT_THAT(Guest(id, absl::StrCat("curl -s --max-time 20 -H 'Host: ", kDenied, "' http://",
                                     kAllowed, ":", http_port_, "/hello.txt")),
              Not(HasSubstr("hello from upstream")));

  // TLS without SNI to a bare IP, raw TCP, IPv6: refused.
  EXPECT_THAT(Guest(id, absl::StrCat("curl -sk --max-time 20 --noproxy '*' https://192.0.2.10:",
                                     tls_port_, "/")),
              Not(HasSubstr("exit=0")));
  EXPECT_THAT(Guest(id,
                    "timeout 20 bash -c 'exec 3<>/dev/tcp/192.0.2.10/5432; echo hi >&3; "
                    "read -t 5 line <&3'"),
              Not(HasSubstr("exit=0")));
  EXPECT_THAT(Guest(id, "curl -s --max-time 10 --noproxy '*' -6 'https://[2001:db8::1]/'"),
              Not(HasSubstr("exit=0")));

  // DNS: allowed names answer, anything else is NXDOMAIN (exfiltration in the name goes
  // nowhere) and is logged.
  EXPECT_THAT(Guest(id, absl::StrCat("getent hosts ", kAllowed)), HasSubstr("exit=0"));
  EXPECT_THAT(Guest(id, "getent hosts exfil-c2vjcmv0.denied.example"), HasSubstr("exit=2"));

  AboxResult log = Abox({"egress", "log", "--json", id});
  ASSERT_EQ(log.exit_code, 0) << log.err;
  nlohmann::json j = nlohmann::json::parse(log.out);
  std::string all = j.dump();
  EXPECT_THAT(all, HasSubstr("exfil-c2vjcmv0.denied.example")) << all;
  EXPECT_THAT(all, HasSubstr(kDenied));
  EXPECT_THAT(all, HasSubstr("\"allowed\""));
  EXPECT_THAT(all, HasSubstr("\"denied\""));
  AboxResult queue = Abox({"egress", "queue"});
  EXPECT_THAT(queue.out, HasSubstr(kDenied));
}

TEST_F(EgressE2eTest, ApprovalsAndLivePolicyChanges) {
  AboxResult created = Abox({"create"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id(absl::StripAsciiWhitespace(created.out));
  std::string fetch = absl::StrCat("curl -sk --max-time 20 ", HttpsUrl(kLater));
  EXPECT_THAT(Guest(id, fetch), Not(HasSubstr("exit=0")));  // empty allowlist: denied
  EXPECT_THAT(Abox({"egress", "queue"}).out, HasSubstr(kLater));
  AboxResult approved =
      Abox({"egress", "approve", id, absl::StrCat(kLater, ":", tls_port_), "--always"});
  ASSERT_EQ(approved.exit_code, 0) << approved.err;
  EXPECT_THAT(Guest(id, fetch), HasSubstr("exit=0"));  // no restart
  AboxResult removed = Abox({"egress", "rm", id, absl::StrCat(kLater, ":", tls_port_)});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_THAT(Guest(id, fetch), Not(HasSubstr("exit=0")));
  ASSERT_EQ(Abox({"egress", "add", id, absl::StrCat(kLater, ":", tls_port_)}).exit_code, 0);
  EXPECT_THAT(Guest(id, fetch), HasSubstr("exit=0"));
}

TEST_F(EgressE2eTest, GuestRootCannotGetAroundTheChannel) {
  AboxResult created = Abox({"create", "--egress", "open"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id(absl::StripAsciiWhitespace(created.out));
  // Root throws away the guest's redirect and routes; there is still no network card, so
  // nothing reaches anything.
  std::string flushed = Guest(
      id,
      "nft flush ruleset 2>/dev/null; ip route flush table main 2>/dev/null; ls /sys/class/net; "
      "curl -sk --max-time 10 --noproxy '*' https://192.0.2.10/",
      /*root=*/true);
  EXPECT_THAT(flushed, Not(HasSubstr("exit=0")));
  EXPECT_THAT(flushed, Not(HasSubstr("eth")));
  // A guest opening thousands of tunnels is bounded: aboxd and the sandbox still answer.
  std::string flood = Guest(id,
                            "ulimit -n 8192; python3 -c '\n"
                            "import socket\n"
                            "held = []\n"
                            "for i in range(2000):\n"
                            "    s = socket.socket()\n"
                            "    s.settimeout(3)\n"
                            "    try:\n"
                            "        s.connect((\"192.0.2.10\", 80))\n"
                            "        held.append(s)\n"
                            "    except OSError:\n"
                            "        pass\n"
                            "print(\"flooded\", len(held))\n'",
                            /*root=*/true);
  EXPECT_THAT(flood, HasSubstr("flooded"));
  EXPECT_THAT(Guest(id, "echo still here"), HasSubstr("still here"));
  EXPECT_EQ(Abox({"ls", "-q"}).exit_code, 0);
}

TEST_F(EgressE2eTest, ModeNoneHasNoTunnelsAndSetupGetsAWiderPolicyFirst) {
  AboxResult none = Abox({"create", "--egress", "none"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  std::string id(absl::StripAsciiWhitespace(none.out));
  EXPECT_THAT(Guest(id, absl::StrCat("curl -sk --max-time 20 ", HttpsUrl(kAllowed))),
              Not(HasSubstr("exit=0")));
  // Setup fetches with the wider policy; afterwards the same fetch is refused.
  std::string fetch =
      absl::StrCat("curl -sfk --max-time 20 -o /tmp/setup.out ", HttpsUrl(kAllowed));
  // It also leaves a background job and a daemon that left its session (setsid): neither may
  // outlive setup (the agent runs setup commands in a cgroup and kills it as each ends).
  AboxResult setup =
      Abox({"create", "--setup", fetch, "--setup",
            "sleep 4241 & setsid sleep 4242 </dev/null >/dev/null 2>&1 & "
            "setsid sh -c 'setsid sleep 4243 & sleep 1' </dev/null >/dev/null 2>&1 &",
            "--setup-allow", absl::StrCat(kAllowed, ":", tls_port_)});
  ASSERT_EQ(setup.exit_code, 0) << setup.err;
  std::string sid(absl::StripAsciiWhitespace(setup.out));
  EXPECT_THAT(Guest(sid, "test -s /tmp/setup.out"), HasSubstr("exit=0"));
  EXPECT_THAT(Guest(sid, absl::StrCat("curl -sk --max-time 20 ", HttpsUrl(kAllowed))),
              Not(HasSubstr("exit=0")));
  // Every process's command line: none is one of setup's sleeps.
  std::string left = Guest(sid,
                           "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; "
                           "echo; done | grep -c '^sleep 424'",
                           /*root=*/true);
  EXPECT_THAT(left, HasSubstr("0\nexit=1")) << "setup's processes outlived it: " << left;
}

}  // namespace
}  // namespace abox::testing
